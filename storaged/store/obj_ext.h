/* storaged/store/obj_ext.h - per-drive extent files: the shards of
 * medium inline-class objects appended to a few big files per drive
 * (DRIVE/.ecfs.sys/ext/NNNNNNNN.x), kept open for the life of the store,
 * so a GET reads each shard with one pread at an offset the index holds
 * and opens no file (FORMAT.md "Extent files").
 *
 * A record is a 64-byte header and the shard's bytes, padded to 4 KiB:
 *   magic "ECFSEXT1" | object id (16) | version (8) | shard, k, m, 0 (4) |
 *   length (4) | CRC-64 of the bytes (8) | CRC-64 of bytes 0..47 (8) | 0 (8)
 * The meta on the drive stays the truth: it names the record (file, offset,
 * length). Every read checks the header against the object id, version,
 * shard and length it expects and the bytes against their CRC, so a stale
 * or replaced drive, a torn write, a punched hole or bit rot is a lost
 * shard, never wrong bytes. Records are never rewritten: a delete or an
 * overwrite punches the old record's blocks (fallocate PUNCH_HOLE).
 *
 * Threading: every call is thread-safe. Readers take no lock. */
#ifndef STORAGED_STORE_OBJ_EXT_H
#define STORAGED_STORE_OBJ_EXT_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stor_gsync_file;
struct stor_store;

#define OBJ_EXT_DIR      ".ecfs.sys/ext"
#define OBJ_EXT_HDR      64u           /* header bytes before the shard */
#define OBJ_EXT_ALIGN    4096u         /* records start on 4 KiB */
#define OBJ_EXT_FILE_MAX (64ULL << 30) /* a new file past this */
#define OBJ_EXT_FILES    256u          /* file numbers 1..255 per drive */
#define OBJ_EXT_MAGIC    "ECFSEXT1"

/* Where one shard's record is: file number (0: none) and byte offset. */
struct obj_xref {
    uint32_t file;
    uint64_t off;
};

/* Opens (creating the directory and the first file) every online drive's
 * extent files. 0 or -ENOMEM; a drive that fails is logged and left
 * without extents (its PUTs count that shard as not written). */
CM_MUST_CHECK int obj_ext_open(struct stor_store *s);
/* Closes every file. NULL-safe (s->ext). */
void obj_ext_close(struct stor_store *s);
/* Drive probe: when drive @d's directory no longer holds the file the
 * store writes to (a disk swapped under the path, a replacement
 * formatted), reopens its extent files from the path. */
void obj_ext_check(struct stor_store *s, size_t d);
/* Drive @d came back online (or was formatted into its slot): opens its
 * extent files from the path again (creating the first with extents on). */
void obj_ext_reopen(struct stor_store *s, size_t d);
/* Reserves a record for @len shard bytes on drive @d: *x, the fd to
 * pwrite it at x->off and *sync, the file's shared fsyncs to name in the
 * barrier item of that fd (gsync.h: concurrent commits share one fsync of
 * the file). 0, -ENODEV (no extents on that drive), -errno. */
CM_MUST_CHECK int obj_ext_alloc(struct stor_store *s, size_t d, size_t len,
                                struct obj_xref *x, int *fd,
                                struct stor_gsync_file **sync);
/* Fills the 64-byte header of shard @shard (of @k + @m) of @id/@version
 * whose @len bytes are @data. */
void obj_ext_hdr(uint8_t hdr[OBJ_EXT_HDR], const uint8_t id[16],
                 uint64_t version, int shard, int k, int m, const void *data,
                 size_t len);
/* Checks a record read back: 0, or -EBADMSG when the header is not that
 * of @id/@version/@shard/@len or the bytes fail their CRC. */
CM_MUST_CHECK int obj_ext_verify(const uint8_t hdr[OBJ_EXT_HDR],
                                 const uint8_t id[16], uint64_t version,
                                 int shard, size_t len, const void *data);
/* Reads and verifies the record @x on drive @d into @dst (@len bytes).
 * 0, -EBADMSG (see obj_ext_verify; counted as corruption by the caller),
 * -ENODEV (no such file open), -errno. */
CM_MUST_CHECK int obj_ext_read(struct stor_store *s, size_t d,
                               const struct obj_xref *x, const uint8_t id[16],
                               uint64_t version, int shard, size_t len,
                               void *dst);
/* The open fd of file @file of drive @d, or -1 (for a loop's io_uring). */
int obj_ext_fd(struct stor_store *s, size_t d, uint32_t file);
/* Frees the blocks of record @x (@len shard bytes) on drive @d: punches a
 * hole (the file keeps its size; reads there give zeros). With @now (a
 * DELETE: its bytes must be gone when it answers) before it returns; else
 * the record is queued and the store's reclaim thread punches it within
 * about 200 ms, merged with its neighbours (obj_ext.c). Best effort. */
void obj_ext_punch(struct stor_store *s, size_t d, const struct obj_xref *x,
                   size_t len, bool now);
/* Punches every queued record now (on this thread). */
void obj_ext_reclaim_flush(struct stor_store *s);
/* Records freed and fallocate(PUNCH_HOLE) calls made for them so far. */
void obj_ext_reclaim_stats(struct stor_store *s, uint64_t *records,
                           uint64_t *punches);
/* Zero-copy GETs (FORMAT.md "Zero-copy GETs"): a record's data bytes are
 * spliced from its file into a pipe and from there to a socket, and
 * checked where they lie, in the page cache, through a map of the file.
 *
 * The generation of drive @d's files: it changes when they are closed (a
 * drive reloaded), so a check can tell the file it splices from is still
 * the one mapped. */
uint64_t obj_ext_gen(struct stor_store *s, size_t d);
/* Pins record @x of drive @d before its bytes are spliced: a punch of it
 * (DELETE, reclaim) waits until it is unpinned and some seconds passed,
 * because a punch may zero the pages in place that the socket still
 * sends. false when a punch of it (or of a record sharing its slot) runs
 * now: the caller reads by copying instead. Never blocks. */
CM_MUST_CHECK bool obj_ext_pin(struct stor_store *s, size_t d,
                               const struct obj_xref *x);
/* Drops obj_ext_pin(); the record may be punched some seconds later. */
void obj_ext_unpin(struct stor_store *s, size_t d, const struct obj_xref *x);
/* Whether every page of record @x of drive @d (files of generation @gen,
 * @len data bytes) is in the page cache now (mincore over the file's map),
 * so that splicing it will not wait for the disk. Never blocks. */
#define OBJ_EXT_RESIDENT_PAGES 64 /* larger records answer false */
bool obj_ext_resident(struct stor_store *s, size_t d, const struct obj_xref *x,
                      uint64_t gen, size_t len);
/* Checks record @x of drive @d (files of generation @gen), whose @len data
 * bytes were spliced into a pipe and whose header was read into @hdr (NULL:
 * read from the map, on the first page of the splice): the header as
 * obj_ext_verify() and the CRC over the file's map, that is over the very
 * page-cache pages the pipe holds (pinned there by the pipe's
 * references). 0, -EBADMSG (a lost shard), -ESTALE (the files were
 * reloaded), -EAGAIN (they are being reloaded now), -errno (no map).
 * Never blocks: the pages are resident, held by the pipe. */
CM_MUST_CHECK int obj_ext_check_mapped(struct stor_store *s, size_t d,
                                       const struct obj_xref *x, uint64_t gen,
                                       const uint8_t hdr[OBJ_EXT_HDR],
                                       const uint8_t id[16], uint64_t version,
                                       int shard, size_t len);
/* Copies the @len data bytes of record @x of drive @d (files of generation
 * @gen) out of the file's map into @dst, after obj_ext_check_mapped()
 * passed and while the pipe it was spliced into still holds its pages (so
 * they are the checked bytes, resident). 0, -ESTALE, -EAGAIN as that. */
CM_MUST_CHECK int obj_ext_copy_mapped(struct stor_store *s, size_t d,
                                      const struct obj_xref *x, uint64_t gen,
                                      size_t len, void *dst);
/* Bytes a record of @len shard bytes takes in its file. */
static inline uint64_t obj_ext_rec_size(size_t len)
{
    return ((uint64_t)OBJ_EXT_HDR + len + OBJ_EXT_ALIGN - 1) &
           ~(uint64_t)(OBJ_EXT_ALIGN - 1);
}

#endif /* STORAGED_STORE_OBJ_EXT_H */
