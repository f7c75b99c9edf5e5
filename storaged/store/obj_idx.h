/* storaged/store/obj_idx.h - the persistent object index: one LMDB
 * environment (a memory-mapped B+tree) holding every bucket's current
 * objects in key order, and the index's own state (FORMAT.md "The object
 * index"). The meta records on the drives stay the truth; this is a
 * durable copy the store reads instead of scanning them.
 *
 * Threading: every call is thread-safe. Readers never block: they take a
 * pre-made LMDB read transaction from a fixed pool (no lock; an LMDB
 * reader takes none) and answer -EAGAIN from the _nb calls when the pool
 * is empty. Writers serialise on LMDB's write lock. Entries handed out
 * are copies the caller owns (obj_ent_free). */
#ifndef STORAGED_STORE_OBJ_IDX_H
#define STORAGED_STORE_OBJ_IDX_H
#include "common/buf.h"
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct obj_ent;
struct obj_idx;
struct obj_idx_cur;

#define OBJ_IDX_FORMAT                                                         \
    2                       /* the state record's format number (2: bucket     \
                                records carry a content sum) */
#define OBJ_IDX_REC_VER 1   /* every object record starts with this */
#define OBJ_IDX_KEYPFX  400 /* key bytes in an LMDB key (rest: in the value) */

/* Object record types (the record's second byte). Only CURRENT is written
 * today; the others are reserved for versioning (FORMAT.md). */
enum obj_idx_rec_type {
    OBJ_IDX_CURRENT = 1,
    OBJ_IDX_DELETE_MARKER = 2, /* reserved */
    OBJ_IDX_NONCURRENT = 3,    /* reserved */
};

/* The index's own record ("state" in the sys table). */
struct obj_idx_state {
    uint32_t format;       /* OBJ_IDX_FORMAT */
    char deployment[33];   /* 32 hex + NUL */
    uint64_t gen;          /* generation: bumped at every open */
    uint64_t last_version; /* version clock at the last clean close */
};

/* A borrowed view of one record during a cursor walk: points into the
 * map, valid until the next cursor call. */
struct obj_idx_view {
    const char *key;
    size_t key_len;
    uint64_t version, size;
    int64_t mtime_ns;
    const char *etag; /* not NUL-terminated */
    size_t etag_len;
    const uint8_t *rec; /* the whole record (obj_idx_rec_decode) */
    size_t rec_len;
};

/* Opens (with @create: creating) the environment in directory @dir.
 * 0, -ENOENT (no index there and !@create), -EBADMSG (not an LMDB file,
 * or damaged), -errno. */
CM_MUST_CHECK int obj_idx_open(const char *dir, bool create,
                               struct obj_idx **out);
/* Closes; with @sync the data is flushed to disk first. NULL-safe. */
void obj_idx_close(struct obj_idx *x, bool sync);
/* Asks the kernel to read the whole data file into the page cache ahead
 * (posix_fadvise WILLNEED on the data file, window by window; the
 * environment is opened with MDB_NORDAHEAD, so a lookup otherwise faults
 * its pages in one by one), when the file is at most a quarter of the RAM,
 * then maps every page of it into LMDB's map (MADV_POPULATE_READ, which
 * waits for the reads), LMDB's free pages too. True when asked. */
bool obj_idx_prefetch(struct obj_idx *x);
/* Checks whether the data file is in the page cache now (cachestat(2), or
 * on a kernel without it mincore of a read-only map of it, window by
 * window, stopping once more pages are out
 * than LMDB's free pages and 1/64 of the file) and keeps the answer as the
 * hint the loop-side lookups go by: while it is false, obj_idx_lookup_nb and
 * obj_idx_lookup_body_nb answer -EAGAIN at once (a worker then looks up
 * and may wait for the disk) instead of faulting a page in from the disk
 * on the event loop. Runs at open and after the read-ahead walk; from then
 * on obj_idx_resident_step keeps the hint up to date. */
bool obj_idx_resident_check(struct obj_idx *x);
/* Sets the hint: the caller has just read every page of every table (the
 * content check's walks, after the read-ahead). */
void obj_idx_resident_set(struct obj_idx *x);
/* Where a pass of obj_idx_resident_step stands (zeroed before the first
 * step; owned by the one thread that steps). */
struct obj_idx_res_pass {
    off_t off;           /* next window */
    uint64_t out, slack; /* pages out so far; how many may be */
    unsigned gen;        /* the hint's generation at the pass's start */
    bool active;
    bool rewarm; /* this pass asks evicted windows back in */
};
/* One bounded step of the periodic residency check (a background thread's,
 * never a request's): cachestat (or mincore) of the next window of the
 * file (at most 64 MiB, 16 Ki pages). Once the pages out in this pass exceed
 * the slack of obj_idx_resident_check, the hint turns false at once (so a page
 * the kernel evicted later sends lookups to the workers instead of faulting on
 * the loop); a pass that saw every window within it turns the hint true. A pass
 * that the hint was set whole during (check, set) starts again. With @rewarm
 * (background reads allowed), a file of at most 1/8 of the machine's memory
 * and no re-warming pass in the last minute, a pass also asks each window
 * with pages out back in (POSIX_FADV_WILLNEED) and walks on past the slack,
 * so an index evicted by a big cold read comes back without waiting for
 * lookups to fault it in page by page. True when this step ended a pass. */
bool obj_idx_resident_step(struct obj_idx *x, struct obj_idx_res_pass *p,
                           bool rewarm);
/* Windows the steps asked back in. */
uint64_t obj_idx_rewarmed(const struct obj_idx *x);
/* Makes every residency check of this process use mmap + mincore, as on a
 * kernel without cachestat(2) (tests; also set by the first refusal). */
void obj_idx_res_no_cachestat(void);
/* The hint's last value, the loop-side lookups it turned away, and how
 * often a step found the file no longer resident. */
bool obj_idx_resident(const struct obj_idx *x);
uint64_t obj_idx_cold_nb(const struct obj_idx *x);
uint64_t obj_idx_resident_lost(const struct obj_idx *x);
/* Flushes every committed write to disk (fdatasync). 0 or -errno. */
CM_MUST_CHECK int obj_idx_sync(struct obj_idx *x);
/* Path of the environment's data file (borrowed). */
const char *obj_idx_data_path(const struct obj_idx *x);
/* Bytes of the data file that LMDB uses (up to its last page: *file_bytes)
 * and how many of them are in no table (*free_bytes: LMDB's free pages,
 * which its writes reuse, and its free list's own). 0 or -errno. */
CM_MUST_CHECK int obj_idx_space(struct obj_idx *x, uint64_t *free_bytes,
                                uint64_t *file_bytes);
/* Writes a compacted copy of the environment's last committed state (LMDB's
 * mdb_env_copyfd2 with MDB_CP_COMPACT: every tree's pages in order, no free
 * pages) to @path, created or truncated, and flushes it (fdatasync); its
 * pages then leave the page cache and are asked back in 4 KiB folios
 * (POSIX_FADV_WILLNEED, not waited for; a file of at most a quarter of the
 * RAM). The environment stays open and usable. On failure @path is
 * removed. 0 or -errno. */
CM_MUST_CHECK int obj_idx_compact_to(struct obj_idx *x, const char *path);

/* State record: 0, -ENOENT (never set), -EBADMSG. */
CM_MUST_CHECK int obj_idx_state_get(struct obj_idx *x,
                                    struct obj_idx_state *st);
/* Writes it (and flushes the index). 0 or -errno. */
CM_MUST_CHECK int obj_idx_state_set(struct obj_idx *x,
                                    const struct obj_idx_state *st);

/* Walks bucket @bucket in one read snapshot and checks it against its
 * bucket record: every record decodes, keys ascend, and their number and
 * content sum (a sum of a hash of each record's bytes, kept up to date by
 * every write) equal the record's. *objects: records walked. 0 when all
 * hold, -EBADMSG when not (damaged content), -ENOENT when the snapshot
 * has no record of the bucket, -ECANCELED once *@stop is
 * set (checked every 4096 records), -errno. Holds one read transaction
 * for the walk: LMDB keeps the pages of that snapshot until it ends. */
CM_MUST_CHECK int obj_idx_verify(struct obj_idx *x, const char *bucket,
                                 const bool *stop, uint64_t *objects);

/* ---- buckets ---- */
/* Bucket record: creation time and object count. 0 or -ENOENT. */
CM_MUST_CHECK int obj_idx_bucket_get(struct obj_idx *x, const char *bucket,
                                     int64_t *created_ns, uint64_t *count);
/* Creates or replaces the bucket record (count 0 when new). */
CM_MUST_CHECK int obj_idx_bucket_set(struct obj_idx *x, const char *bucket,
                                     int64_t created_ns);
/* Removes the bucket record and every object of the bucket. */
CM_MUST_CHECK int obj_idx_bucket_drop(struct obj_idx *x, const char *bucket);
/* Calls @fn for every bucket record in name order; stops at a non-zero
 * return and passes it back. */
CM_MUST_CHECK int obj_idx_bucket_each(struct obj_idx *x,
                                      int (*fn)(void *arg, const char *bucket,
                                                int64_t created_ns,
                                                uint64_t count),
                                      void *arg);

/* ---- objects ---- */
/* Current entry of bucket/key: 0 and *out (owned by the caller), or
 * -ENOENT, -ENOMEM, -EBADMSG. */
CM_MUST_CHECK int obj_idx_lookup(struct obj_idx *x, const char *bucket,
                                 const char *key, size_t key_len,
                                 struct obj_ent **out);
/* The same without ever waiting: -EAGAIN when no read transaction is free
 * or the file was not all in the page cache at the last check
 * (obj_idx_resident_check: as many pages may be out as LMDB holds free,
 * which no lookup reads, and 1/64 more). */
CM_MUST_CHECK int obj_idx_lookup_nb(struct obj_idx *x, const char *bucket,
                                    const char *key, size_t key_len,
                                    struct obj_ent **out);
/* Inserts or replaces @e (borrowed) in one transaction. With @old, the
 * replaced entry (or NULL) is handed to the caller. 0 or -errno. The
 * table of bodies then holds none for the key. */
CM_MUST_CHECK int obj_idx_put(struct obj_idx *x, const char *bucket,
                              const struct obj_ent *e, struct obj_ent **old);
/* A small inline object's bytes, kept in the index beside its record so a
 * GET reads no meta file (FORMAT.md "Bodies in the index"): the first
 * @size bytes of its @k data shards of @shard_len bytes each, in order. */
struct obj_idx_body {
    const uint8_t *const *shard; /* borrowed */
    size_t shard_len;
    int k;
    size_t size;
};
/* obj_idx_put_body of @e in @bucket and, in the SAME transaction, a put of
 * @ve in @vbucket (its counts kept like any put's): a version kept at
 * commit (obj_ver.c) and the version that replaces it become visible
 * together. When the record @e replaces is version @ve of one shard with
 * a body in the table, that body moves to @ve. Same returns as
 * obj_idx_put. */
CM_MUST_CHECK int
obj_idx_put_pair(struct obj_idx *x, const char *bucket, const struct obj_ent *e,
                 const struct obj_idx_body *b, const char *vbucket,
                 const struct obj_ent *ve, struct obj_ent **old);
/* obj_idx_remove of @bucket/@key and, in the SAME transaction, a put of
 * @ve in @vbucket and, with @me (may be NULL), of @me there too with @mb
 * (may be NULL) as its body: a DELETE's kept version (obj_ver.c) leaves
 * the bucket and enters its companion together with the delete marker
 * over it. The removed record's body moves to @ve when it is that version
 * of one shard. The pending records of @bucket/@key (unless @keep_pend:
 * its files are settled later, obj_io.c) and of @me are cleared in it too
 * (obj_idx_pend_add_pair). Same returns as obj_idx_remove. */
CM_MUST_CHECK int obj_idx_remove_pair(
    struct obj_idx *x, const char *bucket, const char *key, size_t key_len,
    const char *vbucket, const struct obj_ent *ve, const struct obj_ent *me,
    const struct obj_idx_body *mb, bool keep_pend, struct obj_ent **old);
/* obj_idx_put that also stores @b (may be NULL: none) as @e's body, tagged
 * with @e's version and a CRC-64, in the same transaction. */
CM_MUST_CHECK int obj_idx_put_body(struct obj_idx *x, const char *bucket,
                                   const struct obj_ent *e,
                                   const struct obj_idx_body *b,
                                   struct obj_ent **old);
/* obj_idx_lookup_nb that also hands out, in one read snapshot, a copy of
 * the body the index holds for exactly that version of an inline object
 * (*body: e->size bytes, malloc'd, the caller frees), or *body NULL (none,
 * another version's, or damaged: the caller reads the drives). */
CM_MUST_CHECK int obj_idx_lookup_body_nb(struct obj_idx *x, const char *bucket,
                                         const char *key, size_t key_len,
                                         struct obj_ent **out, void **body);
/* The same on a worker: may wait for a read transaction and the disk. */
CM_MUST_CHECK int obj_idx_lookup_body(struct obj_idx *x, const char *bucket,
                                      const char *key, size_t key_len,
                                      struct obj_ent **out, void **body);
/* Walks the body table in one read snapshot and checks every body's CRC
 * (which also maps its pages, so the first GETs after a start do not
 * fault them in one by one). *n: bodies walked; *bad: those that fail
 * (never served: a GET checks the CRC again and reads the drives). 0,
 * -ECANCELED once *@stop is set (checked every 4096 bodies), -errno.
 * Holds one read transaction for the walk. */
CM_MUST_CHECK int obj_idx_verify_bodies(struct obj_idx *x, const bool *stop,
                                        uint64_t *n, uint64_t *bad);
/* Bodies whose bytes failed their CRC since open (they are not served). */
uint64_t obj_idx_body_damaged(const struct obj_idx *x);
/* Bodies the index holds now (0 when it cannot tell). */
uint64_t obj_idx_body_count(struct obj_idx *x);
/* Removes bucket/key (and its body); with @old the removed entry goes to
 * the caller. 0, -ENOENT, -errno. */
CM_MUST_CHECK int obj_idx_remove(struct obj_idx *x, const char *bucket,
                                 const char *key, size_t key_len,
                                 struct obj_ent **old);

/* Bulk load (rebuild): puts many entries of one bucket in one write
 * transaction. Same meaning as obj_idx_put for each. */
CM_MUST_CHECK int obj_idx_put_many(struct obj_idx *x, const char *bucket,
                                   struct obj_ent *const *e, size_t n);
/* The same, with @b[i] (may be NULL, and so may @b) as @e[i]'s body, as
 * obj_idx_put_body stores it. The body table is not touched for entries
 * without one (a rebuild starts from an empty index). */
CM_MUST_CHECK int obj_idx_put_many_body(struct obj_idx *x, const char *bucket,
                                        struct obj_ent *const *e,
                                        const struct obj_idx_body *const *b,
                                        size_t n);

/* ---- keys in flight: what a start after a crash reconciles ---- */
/* Records that bucket/key (object id @id) is about to change on the drives.
 * obj_idx_put clears it in its own transaction; others obj_idx_pend_clear. */
CM_MUST_CHECK int obj_idx_pend_add(struct obj_idx *x, const char *bucket,
                                   const uint8_t id[16], const char *key,
                                   size_t key_len);
/* obj_idx_pend_add of two keys in one transaction (a DELETE and the
 * delete marker it writes). */
CM_MUST_CHECK int obj_idx_pend_add_pair(struct obj_idx *x, const char *bucket,
                                        const uint8_t id[16], const char *key,
                                        size_t key_len, const char *bucket2,
                                        const uint8_t id2[16], const char *key2,
                                        size_t key2_len);
CM_MUST_CHECK int obj_idx_pend_clear(struct obj_idx *x, const char *bucket,
                                     const uint8_t id[16]);
/* Calls @fn for every pending record; stops at a non-zero return. */
CM_MUST_CHECK int obj_idx_pend_each(struct obj_idx *x,
                                    int (*fn)(void *arg, const char *bucket,
                                              const uint8_t id[16],
                                              const char *key, size_t key_len),
                                    void *arg);
CM_MUST_CHECK int obj_idx_pend_drop_all(struct obj_idx *x);

/* The version lease: no version at or above it is handed out before it is
 * raised here, so a start after a crash can continue above it. */
CM_MUST_CHECK int obj_idx_lease_set(struct obj_idx *x, uint64_t lease);
/* 0 and *lease, or -ENOENT (never set). */
CM_MUST_CHECK int obj_idx_lease_get(struct obj_idx *x, uint64_t *lease);

/* The drives that were offline when this index was rebuilt (FORMAT.md
 * "Rebuilt with drives away"): @n bytes, 1 for a drive away, 0 for one
 * read. Set once, by the rebuild, and only when some drive was away. */
CM_MUST_CHECK int obj_idx_away_set(struct obj_idx *x, const uint8_t *away,
                                   size_t n);
/* 0 and @away (@n bytes), -ENOENT (none was away), or -EBADMSG (a record
 * of another drive count). */
CM_MUST_CHECK int obj_idx_away_get(struct obj_idx *x, uint8_t *away, size_t n);
/* Removes that record (every drive is back and merged). 0 or -errno. */
CM_MUST_CHECK int obj_idx_away_clear(struct obj_idx *x);

/* ---- cursor walks (listing, scanner, check) ---- */
/* A read cursor over @bucket (a consistent snapshot until closed). */
CM_MUST_CHECK int obj_idx_cur_open(struct obj_idx *x, const char *bucket,
                                   struct obj_idx_cur **out);
/* Positions before the first key >= @key (> @key with @after); a NULL
 * @key means the bucket's first. */
CM_MUST_CHECK int obj_idx_cur_seek(struct obj_idx_cur *c, const char *key,
                                   size_t key_len, bool after);
/* The next record: 0 and *v, -ENOENT past the bucket's last, -EBADMSG. */
CM_MUST_CHECK int obj_idx_cur_next(struct obj_idx_cur *c,
                                   struct obj_idx_view *v);
void obj_idx_cur_close(struct obj_idx_cur *c);

/* ---- the record ---- */
/* Appends @e's record (format in FORMAT.md) to @out. 0 or -ENOMEM/-E2BIG. */
CM_MUST_CHECK int obj_idx_rec_encode(const struct obj_ent *e,
                                     struct cm_buf *out);
/* Decodes one record of @n bytes into a new entry (caller frees). 0,
 * -EBADMSG, -ENOMEM. */
CM_MUST_CHECK int obj_idx_rec_decode(const void *p, size_t n,
                                     struct obj_ent **out);
/* Fills @v from the record at @p (at most @n bytes): its length (> 0), or
 * -EBADMSG. */
CM_MUST_CHECK ssize_t obj_idx_rec_view(const void *p, size_t n,
                                       struct obj_idx_view *v);

#endif /* STORAGED_STORE_OBJ_IDX_H */
