/* storaged/store/obj_nb.h - a GET of a small (inline) object split so that an
 * event loop can run it without blocking: begin() looks the object up in
 * memory (try-locks only) and says which meta files to read; the caller
 * reads them asynchronously (the loop thread's io_uring); end() verifies
 * what was read and hands back an ordinary struct stor_get. Anything
 * unusual (a lock held by a writer, a shard file missing, stale or
 * corrupt, a drive offline, an object that is not inline) answers -EAGAIN
 * and the caller runs the regular stor_get_open() on a worker, which
 * handles every error and degraded case. */
#ifndef STORAGED_STORE_OBJ_NB_H
#define STORAGED_STORE_OBJ_NB_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stor_store;
struct stor_get;
struct stor_obj_info;
struct stor_get_nb;

/* One read the caller performs for begin(): a whole file by @path, or
 * (@path NULL: a shard in an extent file, FORMAT.md) @hdr_len bytes into
 * @hdr and then @len into @buf from offset @off of the open file @fd (the
 * store keeps it open; a read that races a reopen fails end()'s check). */
struct stor_nb_read {
    const char *path; /* borrowed from the stor_get_nb, or NULL */
    void *buf;        /* borrowed from the stor_get_nb */
    size_t len;       /* read at most this many bytes (from offset 0) */
    ssize_t res;      /* set by the caller: bytes read or -errno */
    int fd;           /* without @path */
    uint64_t off;
    void *hdr; /* borrowed from the stor_get_nb */
    size_t hdr_len;
    /* >= 0 (zero-copy, stor_get_nb_zc_start): read @hdr_len bytes into
     * @hdr (their count in @hres), then splice the @len data bytes after
     * them into this pipe, after the previous read's (their count in
     * @res); -1: read into @buf */
    int pipe;
    ssize_t hres;
};

/* Starts a nonblocking GET of bucket/key. Never blocks (no I/O, no lock
 * waits). On 0, *out owns the state and (*reads)[0..*n) are the reads to
 * perform (borrowed from *out); *n is 0 when the index keeps the body
 * itself (a small object: FORMAT.md "Bodies in the index"), and end() may
 * follow at once. -EAGAIN: use stor_get_open() instead. */
CM_MUST_CHECK int stor_get_nb_begin(struct stor_store *s, const char *bucket,
                                    const char *key, size_t key_len,
                                    struct stor_get_nb **out,
                                    struct stor_nb_read **reads, size_t *n);
/* Finishes after every read's res is set: verifies each shard (meta CRC,
 * version equal to the index's, shard number) and assembles the body.
 * 0: *out is an open reader (close with stor_get_close(); closing never
 * blocks: no pin, no files) and @info (may be NULL) is filled. -EAGAIN:
 * use stor_get_open() instead. Always frees @nb. */
CM_MUST_CHECK int stor_get_nb_end(struct stor_get_nb *nb,
                                  struct stor_obj_info *info,
                                  struct stor_get **out);
/* What begin() found, for a cache of bodies: the object's id, version
 * (unique within the process: never reused for other bytes) and size. */
void stor_get_nb_ident(const struct stor_get_nb *nb, uint8_t id[16],
                       uint64_t *version, uint64_t *size);
/* Like end(), from @len body bytes of exactly that version the caller
 * already holds (verified): no reads are made. Always frees @nb. 0 or
 * -EAGAIN (wrong length, ENOMEM). */
CM_MUST_CHECK int stor_get_nb_end_with(struct stor_get_nb *nb, const void *body,
                                       size_t len, struct stor_obj_info *info,
                                       struct stor_get **out);
/* The whole body of an inline reader (end()'s), or NULL for others. */
const void *stor_get_inline_body(const struct stor_get *g);
/* Takes the whole body of an inline reader (any reader of an inline
 * object, from end(), end_with() or stor_get_open()): returns it (malloc'd,
 * object size bytes; the caller frees it) and leaves @g without a body, so
 * the caller sends the bytes without copying them; stor_get_read() on @g
 * fails after. NULL for other readers (and if already taken). */
void *stor_get_inline_take(struct stor_get *g);
/* Zero-copy GETs of extent objects (FORMAT.md "Zero-copy GETs"): the data
 * shards are spliced from the extent files into the caller's pipe, in
 * order, and end() checks each header and each shard's CRC over the map
 * of its file, that is over the page-cache pages the pipe holds, before
 * the caller sends any of them. */
struct stor_get_zc;
/* Whether begin()'s reads can be made zero-copy: an extent object whose
 * stored headers have none named @skip_hdr (may be NULL; an encrypted
 * object's, whose bytes are never sent as stored). 0 with pipe_bytes[i]
 * the capacity its body needs in each of two pipes of at most @pipe_max
 * bytes (pipe_bytes[1] 0: one is enough), or -EAGAIN. */
CM_MUST_CHECK int stor_get_nb_zc(struct stor_get_nb *nb, const char *skip_hdr,
                                 size_t pipe_max, size_t pipe_bytes[2]);
/* Makes begin()'s reads splice into the pipes @pipe_fd (empty, with room
 * for stor_get_nb_zc()'s bytes; the first shards into the first, the rest
 * into the second) and pins the records against punches until
 * stor_get_zc_release(*pins), which the caller calls once the socket has
 * the last byte. 0, or -EAGAIN (a record is being punched: read as begin()
 * said). After 0 and a successful end(), the reader has no body
 * (stor_get_zc_bytes()): the pipe holds the object's bytes and the
 * last shard's padding. When end()
 * fails, the pipe holds unchecked bytes: the caller empties it unsent. */
CM_MUST_CHECK int stor_get_nb_zc_start(struct stor_get_nb *nb,
                                       const int pipe_fd[2],
                                       struct stor_get_zc **pins);
/* After stor_get_nb_zc_start(): performs the reads at once, on this thread,
 * when every page of every record is in the page cache (mincore), so the
 * splices do not wait for the disk (nor for io_uring's worker threads,
 * which run every IORING_OP_SPLICE). 0: each read's res and hres are set,
 * end() follows; -EAGAIN: nothing was done, the caller submits the reads. */
CM_MUST_CHECK int stor_get_nb_zc_now(struct stor_get_nb *nb);
/* Unpins (NULL-safe). Any thread. */
void stor_get_zc_release(struct stor_get_zc *z);
/* For a zero-copy reader from end(), while its pipes still hold the bytes
 * (before the response is sent): copies the object's @len body bytes
 * (the checked ones, out of the page cache) into @dst, for a cache of
 * bodies. 0, or -errno (not such a reader, a drive reloaded meanwhile). */
CM_MUST_CHECK int stor_get_zc_copy(const struct stor_get *g, void *dst,
                                   size_t len);
/* Like end() for an object whose @len body bytes (of exactly the version
 * begin() found, already checked) the caller has put into the pipe of
 * stor_get_nb_zc_start() itself (s3/zcache.h): no reads are made, and the
 * reader is a zero-copy one whose stor_get_zc_bytes() is @len, all in the
 * first pipe, without padding. Always frees @nb. 0 or -EAGAIN. */
CM_MUST_CHECK int stor_get_nb_end_zc_held(struct stor_get_nb *nb, size_t len,
                                          struct stor_obj_info *info,
                                          struct stor_get **out);
/* For a zero-copy reader, the bytes its end() left in the caller's pipes:
 * the body, then the padding of the last data shard (k * L - size bytes,
 * never sent), *first (may be NULL) of them in the first pipe (all when
 * it is the total); 0 for other readers. */
size_t stor_get_zc_bytes(const struct stor_get *g, size_t *first);
/* HEAD's lookup, for the event loop: stor_obj_stat from the index with
 * try-locks only and only while the index is resident (no I/O, no lock
 * waits, no page fault from the disk). 0 with @out filled (as
 * stor_obj_stat: headers and part sizes; the caller finis it), or -EAGAIN
 * for anything else (no such key or bucket, a lock held by a writer, a
 * cold index, an invalid key): run stor_obj_stat on a worker then, which
 * answers every error. */
CM_MUST_CHECK int stor_obj_stat_nb(struct stor_store *s, const char *bucket,
                                   const char *key, size_t key_len,
                                   struct stor_obj_info *out);
/* Frees @nb without finishing (its reads must not be in flight). */
void stor_get_nb_free(struct stor_get_nb *nb);

#endif /* STORAGED_STORE_OBJ_NB_H */
