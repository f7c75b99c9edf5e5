/* storaged/store/object.h - the object layer's interface: the one contract
 * between the S3 front end (storaged/s3_*.c, http*.c) and the erasure-coded
 * store (storaged/obj_*.c, ec.c, drive.c). See storaged/FORMAT.md for the
 * bytes.
 *
 * Threading: every function is synchronous and thread-safe; the front end
 * calls them from its worker threads, never from an event-loop thread.
 * Inside, the shard I/O of one call is submitted together (liburing).
 * Errors: 0 / >= 0 or a negative errno; the object-specific meanings are the
 * STOR_E* names below (the front end maps them to S3 error codes).
 * Ownership: strings passed in are borrowed for the duration of the call;
 * results that allocate are freed with the matching _free/_close. */
#ifndef STORAGED_STORE_OBJECT_H
#define STORAGED_STORE_OBJECT_H
#include "common/compiler.h"
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#define STOR_MAX_KEY_LEN   1024
#define STOR_MAX_PARTS     10000
#define STOR_ETAG_MAX      48 /* "0123...ef-10000" + NUL, without quotes */
#define STOR_UPLOAD_ID_MAX 64

/* errno values with an object-layer meaning (returned negated) */
#define STOR_ENOKEY        ENOENT    /* NoSuchKey */
#define STOR_ENOBUCKET     ENXIO     /* NoSuchBucket */
#define STOR_EBUCKETEXISTS EEXIST    /* BucketAlreadyOwnedByYou */
#define STOR_ENOTEMPTY     ENOTEMPTY /* BucketNotEmpty */
#define STOR_ENOUPLOAD     EBADR     /* NoSuchUpload */
#define STOR_EBADPART      EBADE    /* InvalidPart (missing or ETag mismatch) */
#define STOR_EPARTORDER    EBADRQC  /* InvalidPartOrder */
#define STOR_ETOOSMALL     EMSGSIZE /* EntityTooSmall: non-last part < 5 MiB */
#define STOR_EBADDIGEST    EBADMSG  /* BadDigest: Content-MD5 mismatch */
#define STOR_EQUORUM       EHOSTDOWN /* too few drives online: 503 */
#define STOR_EDATA         EIO       /* data cannot be reconstructed: 500 */
#define STOR_EINVAL        EINVAL    /* bad name/argument */
#define STOR_EPRECOND      ECANCELED /* PreconditionFailed (conditional PUT) */

struct stor_store;

struct stor_store_opts {
    const char *const
        *drives; /* drive directory paths, ellipsis already expanded */
    size_t ndrives;
    int ec_data;   /* K; 0 = default from the set size (FORMAT.md rules) */
    int ec_parity; /* M; -1 = default */
    int set_size;  /* drives per erasure set; 0 = choose (largest of 16..2
                      dividing ndrives) */
    bool fsync;    /* default true: an acknowledged PUT survives power loss */
    bool rebuild_in_background; /* an index rebuild runs after open returns
                                   (the server answers /metrics and 503s
                                   meanwhile); false: open rebuilds first */
    size_t index_body_max;      /* inline objects up to this many bytes keep a
                                   copy of their body in the index, so a GET
                                   reads no meta file (0: none; at most
                                   STOR_INDEX_BODY_LIMIT) */
    bool extents; /* inline-class objects above index_body_max keep their
                     shards in per-drive extent files (FORMAT.md) */
};
#define STOR_INDEX_BODY_DEFAULT 8192u  /* `storaged serve`'s default */
#define STOR_INDEX_BODY_LIMIT   65536u /* the most --index-body-max takes */

/* Where the object index stands (storaged_index_phase in /metrics). */
enum stor_index_phase {
    STOR_INDEX_OPENING,    /* reading the pointers and the buckets */
    STOR_INDEX_REBUILDING, /* reading every meta: not serving objects */
    STOR_INDEX_SERVING,
    STOR_INDEX_FAILED, /* the background rebuild failed: not serving */
};

/* Opens (formatting fresh drives on first start) and cleans stale temp data.
 * On failure *err (if non-NULL) gets a malloc'd human-readable message. */
CM_MUST_CHECK int stor_store_open(const struct stor_store_opts *o,
                                  struct stor_store **out, char **err);
void stor_store_close(struct stor_store *s);
/* True once the index is loaded or rebuilt: object and bucket calls may be
 * made. Before that (a rebuild with rebuild_in_background) only
 * stor_store_get_stats and stor_store_get_drive_stats may be called. */
bool stor_store_ready(struct stor_store *s);

/* `storaged index check|rebuild DRIVE...`, with the store not served:
 * reads every meta of the drives (as a start-up rebuild does), compares
 * the result with the index the drives name and prints every difference
 * to @out; with @rebuild the index is then replaced by the new one (marked
 * clean). Nothing else on the drives changes for a check. Returns the
 * number of differences (>= 0) or -errno, *err as for stor_store_open. */
CM_MUST_CHECK long stor_index_check(const char *const *drives, size_t ndrives,
                                    bool rebuild, FILE *out, char **err);

/* ---- buckets ---- */
struct stor_bucket_info {
    char name[64];
    time_t created;
};
CM_MUST_CHECK int stor_bucket_create(struct stor_store *s, const char *bucket);
/* -STOR_ENOTEMPTY if objects remain; multipart uploads in progress are
 * aborted with the bucket (as S3 does). */
CM_MUST_CHECK int stor_bucket_delete(struct stor_store *s, const char *bucket);
CM_MUST_CHECK int stor_bucket_stat(struct stor_store *s, const char *bucket,
                                   struct stor_bucket_info *out);
/* *out: malloc'd array sorted by name (free()), *n entries. */
CM_MUST_CHECK int stor_bucket_list(struct stor_store *s,
                                   struct stor_bucket_info **out, size_t *n);

/* ---- object info ---- */
/* Headers kept with an object and sent back on GET/HEAD: lowercase names
 * ("content-type", "x-amz-meta-foo", "cache-control", ...), opaque values. */
struct stor_hdr {
    char *name;  /* owned */
    char *value; /* owned */
};

struct stor_obj_info {
    uint64_t size;
    time_t mtime;
    int mtime_ms;
    char etag[STOR_ETAG_MAX]; /* hex MD5, or hex-N for multipart; no quotes */
    int nparts;               /* 0 for a simple PUT */
    struct stor_hdr *hdrs;    /* owned */
    size_t nhdrs;
    /* Multipart objects, as filled by stor_obj_stat and stor_get_open:
     * the byte size of each part in object order (nparts entries; owned;
     * NULL for a simple PUT, from the other calls, or when memory ran
     * out). Part i (1-based, its position in the completed list, not the
     * client's part number) starts at the sum of the sizes before it; this
     * is what GetObject ?partNumber=i returns. */
    uint64_t *part_size;
};
void stor_obj_info_fini(struct stor_obj_info *i);

CM_MUST_CHECK int stor_obj_stat(struct stor_store *s, const char *bucket,
                                const char *key, size_t key_len,
                                struct stor_obj_info *out);

/* ---- PUT (streaming) ---- */
struct stor_put;
/* Starts a write. @size is the exact body length when known (it picks the
 * small-object geometry), or -1 when unknown. Headers are copied. */
CM_MUST_CHECK int stor_put_begin(struct stor_store *s, const char *bucket,
                                 const char *key, size_t key_len, int64_t size,
                                 const struct stor_hdr *hdrs, size_t nhdrs,
                                 struct stor_put **out);
/* Makes the commit conditional (S3 conditional writes), checked under the
 * key's lock at commit, so of concurrent writers exactly one can win:
 * @absent: the key must not exist; @etag (no quotes, or NULL): the
 * current object's ETag must be this. Else commit returns
 * -STOR_EPRECOND (or -STOR_ENOKEY when @etag is set and the key is gone)
 * and nothing becomes visible. 0 or -ENOMEM. */
CM_MUST_CHECK int stor_put_set_condition(struct stor_put *p, bool absent,
                                         const char *etag);
/* Records @etag (no quotes, < STOR_ETAG_MAX) as the object's (or part's)
 * ETag instead of the MD5 of the bytes written: the S3 layer stores
 * ciphertext of an encrypted object and gives it the plaintext's MD5.
 * Before the commit; the commit's @expect_md5 is still checked against
 * the bytes written. 0 or -STOR_EINVAL. */
CM_MUST_CHECK int stor_put_set_etag(struct stor_put *p, const char *etag);
/* Adds header (@name lowercase, @value) to those kept with the object,
 * replacing one of the same name: for what is known only once the body
 * has been read (a checksum sent as an aws-chunked trailer). Before the
 * commit. A multipart part keeps its own (in its part meta), and Complete
 * turns them into object headers (STOR_HDR_PART_PFX). 0 or -ENOMEM. */
CM_MUST_CHECK int stor_put_add_header(struct stor_put *p, const char *name,
                                      const char *value);
/* Appends body bytes; encodes and writes whole stripes as they fill. */
CM_MUST_CHECK int stor_put_write(struct stor_put *p, const void *data,
                                 size_t len);
/* Makes the object visible atomically (replacing any old one). If
 * @expect_md5 is non-NULL and differs from the body's MD5, nothing becomes
 * visible and -STOR_EBADDIGEST is returned. Fills @out (may be NULL).
 * Always frees @p. */
CM_MUST_CHECK int stor_put_commit(struct stor_put *p, const uint8_t *expect_md5,
                                  struct stor_obj_info *out);
/* Discards everything written; frees @p. */
void stor_put_abort(struct stor_put *p);

/* ---- GET ---- */
struct stor_get;
/* Opens the current version; @info (may be NULL) is filled. The reader pins
 * that version: a concurrent overwrite does not change what it returns. */
CM_MUST_CHECK int stor_get_open(struct stor_store *s, const char *bucket,
                                const char *key, size_t key_len,
                                struct stor_obj_info *info,
                                struct stor_get **out);
/* Reads up to @len bytes at @off; returns bytes read (0 at EOF) or -errno.
 * Verifies checksums, rebuilds from parity when a shard is missing or
 * corrupt (and queues the object for healing); never returns wrong bytes. */
CM_MUST_CHECK ssize_t stor_get_read(struct stor_get *g, uint64_t off, void *buf,
                                    size_t len);
/* The read size that costs least per byte (a whole stripe), for callers
 * that stream. */
size_t stor_get_preferred_chunk(const struct stor_get *g);
/* True when @g (of stor_get_open) serves the index's copy of a small body
 * (FORMAT.md "Bodies in the index"): no drive was read for it. */
bool stor_get_index_body(const struct stor_get *g);
void stor_get_close(struct stor_get *g);

CM_MUST_CHECK int stor_obj_delete(struct stor_store *s, const char *bucket,
                                  const char *key, size_t key_len);

/* A conditional delete (S3 If-Match / x-amz-if-match-last-modified-time /
 * x-amz-if-match-size on DeleteObject, <ETag>/<LastModifiedTime>/<Size> in
 * DeleteObjects): the object deleted must meet every condition set. */
struct stor_del_cond {
    bool etag_set;
    char etag[STOR_ETAG_MAX]; /* no quotes; "*": any existing object */
    bool mtime_set;
    time_t mtime; /* whole seconds: the resolution of an HTTP date */
    bool size_set;
    uint64_t size;
};
/* True when @c (may be NULL) sets any condition. */
bool stor_del_cond_any(const struct stor_del_cond *c);
/* Whether an existing object with @etag, Last-Modified @mtime (seconds)
 * and @size meets @c; @etag NULL means a delete marker, which has no ETag
 * and no size: only "*" and a Last-Modified condition can match it. */
bool stor_del_cond_match(const struct stor_del_cond *c, const char *etag,
                         time_t mtime, uint64_t size);
/* stor_obj_delete, only if the current object meets @c (NULL: none),
 * checked under the key's lock so no write comes in between.
 * -STOR_ENOKEY: no such object (nothing done); -STOR_EPRECOND: it does not
 * meet @c (nothing done). */
CM_MUST_CHECK int stor_obj_delete_if(struct stor_store *s, const char *bucket,
                                     const char *key, size_t key_len,
                                     const struct stor_del_cond *c);

/* ---- versions (obj_ver.c; storaged/FORMAT.md "Versions") ----
 * The naming the S3 versioning layer (s3/versioning.c) and the store share:
 * a bucket's non-current versions are objects of its companion bucket,
 * keyed KEY STOR_VER_SEP HEX FLAG. */

/* Stored with every version written while versioning is on: its id
 * ("null" or STOR_VID_LEN hex digits). Never sent back as such (the S3
 * layer hides x-ecfs-*); answered as x-amz-version-id. */
#define STOR_HDR_VERSION_ID "x-ecfs-version-id"
/* The ETag and Last-Modified ("SEC.MSEC") of a non-current version, which
 * its companion record's own fields do not carry. */
#define STOR_HDR_ETAG   "x-ecfs-etag"
#define STOR_HDR_MTIME  "x-ecfs-mtime"
#define STOR_VID_LEN    16
#define STOR_VER_SEP    '\x01' /* between the key and the version suffix */
#define STOR_VER_SUFFIX (1 + STOR_VID_LEN + 1) /* SEP HEX FLAG */
#define STOR_VER_OBJ    'o'                    /* FLAG: an object */
#define STOR_VER_DM     'd'                    /* a delete marker */
#define STOR_VER_NULL   'n' /* the "null" version, an object */
#define STOR_VER_NULLDM 'm' /* the "null" version, a delete marker */

/* FNV-1a over @n bytes, continuing @h (start: STOR_FNV0). */
#define STOR_FNV0 1469598103934665603ULL
uint64_t stor_fnv1a(uint64_t h, const void *p, size_t n);
/* The companion bucket of @bucket: BUCKET "..v" (a hashed form for names
 * over 60 characters). Two dots: no S3 request can name it. */
void stor_ver_companion(const char *bucket, char out[64]);
/* The version id of sequence @seq (newest sorts first). */
void stor_ver_seq_hex(uint64_t seq, char out[STOR_VID_LEN + 1]);
/* The companion key of version @vid of @key (a marker when @dm); a "null"
 * version sorts by sequence @null_seq. malloc'd (*hl its length), or NULL. */
char *stor_ver_key(const char *key, size_t kl, const char *vid,
                   uint64_t null_seq, bool dm, size_t *hl);
/* Whether the current version of @key can be kept in place when it is
 * replaced (stor_put_set_retire): an inline object whose shards are in its
 * metas. Its store version in *version. */
bool stor_obj_retirable(struct stor_store *s, const char *bucket,
                        const char *key, size_t key_len, uint64_t *version);
/* At commit, keeps the current version of the key (which must be version
 * @version, else the commit fails with -EAGAIN and places nothing) as a
 * non-current version in the bucket's companion, without copying it: its
 * metas stay on the drives as HEX.v<version> and its companion record is
 * written in the same index transaction as the new version (FORMAT.md
 * "Versions"). The companion bucket must exist. 0 or -errno. */
CM_MUST_CHECK int stor_put_set_retire(struct stor_put *p, uint64_t version);

/* A delete marker stor_obj_delete_keep writes in the same operation: an
 * empty object @key of the companion bucket @bucket, with @hdrs. */
struct stor_marker {
    const char *bucket; /* borrowed */
    const char *key;    /* borrowed */
    size_t key_len;
    const struct stor_hdr *hdrs; /* borrowed */
    size_t nhdrs;
};
/* DeleteObject of a versioned bucket's current version (which must be
 * version @version, else -EAGAIN and nothing is done) that keeps it as a
 * non-current version in the bucket's companion without copying it, as
 * stor_put_set_retire does for an overwrite (its metas stay as
 * HEX.v<version>), and writes the delete marker @dm over it, in one
 * operation: one barrier, and one index transaction removes the key and
 * adds the kept version and the marker. The companion bucket must exist
 * and be @dm->bucket. 0, -STOR_ENOKEY or -errno (-STOR_EDATA: the drives
 * hold the delete, the index of this run may not). */
CM_MUST_CHECK int stor_obj_delete_keep(struct stor_store *s, const char *bucket,
                                       const char *key, size_t key_len,
                                       uint64_t version,
                                       const struct stor_marker *dm);

/* ---- LIST ---- */
struct stor_list_entry {
    char *key; /* owned; may contain any byte but NUL */
    size_t key_len;
    uint64_t size;
    time_t mtime;
    int mtime_ms;
    char etag[STOR_ETAG_MAX];
};
struct stor_list_result {
    struct stor_list_entry *objs; /* owned, byte order */
    size_t nobjs;
    char **prefixes; /* owned common prefixes, byte order */
    size_t nprefixes;
    bool truncated;
    char *next_marker; /* owned; the last key or prefix returned, when truncated
                        */
};
/* Lists keys > @after (NULL = from the start) that start with @prefix
 * (NULL = all); with @delimiter, keys containing it after the prefix roll
 * up into common prefixes. At most @max entries (objects + prefixes). */
CM_MUST_CHECK int stor_obj_list(struct stor_store *s, const char *bucket,
                                const char *prefix, const char *delimiter,
                                const char *after, size_t max,
                                struct stor_list_result *out);
void stor_list_result_fini(struct stor_list_result *r);

/* ---- multipart ---- */
CM_MUST_CHECK int stor_mpu_create(struct stor_store *s, const char *bucket,
                                  const char *key, size_t key_len,
                                  const struct stor_hdr *hdrs, size_t nhdrs,
                                  char upload_id[STOR_UPLOAD_ID_MAX]);
/* Like stor_put_begin for part @part (1..10000) of @upload_id; commit
 * replaces an earlier upload of the same part number. */
CM_MUST_CHECK int stor_mpu_part_begin(struct stor_store *s, const char *bucket,
                                      const char *key, size_t key_len,
                                      const char *upload_id, int part,
                                      int64_t size, struct stor_put **out);
#define STOR_PART_HVAL_MAX 64
struct stor_part {
    int number;
    char etag[STOR_ETAG_MAX]; /* no quotes */
    uint64_t size;
    time_t mtime;
    /* Not the store's: one value the S3 layer keeps with a part (its
     * checksum). stor_mpu_list_parts copies the part's own header it is
     * asked for; a Complete's list carries the client's (hkind its kind,
     * 0 none); stor_mpu_complete ignores both. */
    int hkind;
    char hval[STOR_PART_HVAL_MAX];
};
/* A completed multipart object keeps its upload id in this stored header
 * (not a client header: the S3 layer never stores x-ecfs-*, and hides it
 * on GET/HEAD and copies), so a repeated Complete of the same upload can
 * be recognised while the object is the key's current one. */
#define STOR_HDR_UPLOAD_ID "x-ecfs-upload-id"
/* A part's own header NAME (stor_put_add_header on a part; a value with
 * no ',') becomes the completed object's header STOR_HDR_PART_PFX NAME,
 * whose value is the listed parts' values in object order joined by ','
 * (empty for a part without it). */
#define STOR_HDR_PART_PFX "x-ecfs-part-"
/* What every Complete calls, under the upload's lock, with the headers
 * the object will get (the upload's, then the joined part headers; it may
 * append to them) and the listed parts' sizes: the S3 layer seals the
 * part list of an encrypted upload there. 0, or -errno to fail the
 * Complete (the upload stays). */
typedef int stor_mpu_hook_fn(void *arg, struct stor_hdr **hdrs, size_t *nhdrs,
                             const uint64_t *psize, size_t nparts);
/* Sets (or with NULL clears) the Complete hook; before serving. */
void stor_store_set_mpu_hook(struct stor_store *s, stor_mpu_hook_fn *fn,
                             void *arg);
/* A copy of upload @upload_id's own headers (those given at create) into
 * *out (*n; free with stor_s3_hdrs_free). 0, -STOR_ENOUPLOAD, -ENOMEM. */
CM_MUST_CHECK int stor_mpu_upload_headers(struct stor_store *s,
                                          const char *bucket, const char *key,
                                          size_t key_len, const char *upload_id,
                                          struct stor_hdr **out, size_t *n);
/* Completes with the client's list (ascending part numbers, ETags must
 * match; every part but the last >= 5 MiB). Without copying data. */
CM_MUST_CHECK int stor_mpu_complete(struct stor_store *s, const char *bucket,
                                    const char *key, size_t key_len,
                                    const char *upload_id,
                                    const struct stor_part *parts,
                                    size_t nparts, struct stor_obj_info *out);
/* A conditional write's condition (CompleteMultipartUpload's If-None-Match
 * / If-Match), checked at the commit under the key's write lock. */
struct stor_write_cond {
    bool absent;              /* the key must have no current object */
    char etag[STOR_ETAG_MAX]; /* "" or: the current object has this ETag */
};
/* stor_mpu_complete under condition @c (NULL: none): when it does not hold
 * at the commit, -STOR_EPRECOND (-STOR_ENOKEY when @c->etag is set and the
 * key is gone), nothing becomes visible and the upload stays. */
CM_MUST_CHECK int stor_mpu_complete_cond(
    struct stor_store *s, const char *bucket, const char *key, size_t key_len,
    const char *upload_id, const struct stor_part *parts, size_t nparts,
    const struct stor_write_cond *c, struct stor_obj_info *out);
CM_MUST_CHECK int stor_mpu_abort(struct stor_store *s, const char *bucket,
                                 const char *key, size_t key_len,
                                 const char *upload_id);
/* Parts with number > @after, at most @max; *out malloc'd (free()). With
 * @hname, each part's hval is the value of its own header @hname (""
 * when it has none or a longer one). */
CM_MUST_CHECK int stor_mpu_list_parts(struct stor_store *s, const char *bucket,
                                      const char *key, size_t key_len,
                                      const char *upload_id, int after,
                                      size_t max, const char *hname,
                                      struct stor_part **out, size_t *n,
                                      bool *truncated);
struct stor_upload {
    char *key; /* owned */
    size_t key_len;
    char upload_id[STOR_UPLOAD_ID_MAX];
    time_t initiated;
};
/* Uploads in (key, upload id) order after the given marker pair (NULLs =
 * from start), filtered by @prefix; *out malloc'd, free with
 * stor_uploads_free. */
CM_MUST_CHECK int stor_mpu_list(struct stor_store *s, const char *bucket,
                                const char *prefix, const char *key_marker,
                                const char *upload_id_marker, size_t max,
                                struct stor_upload **out, size_t *n,
                                bool *truncated);
void stor_uploads_free(struct stor_upload *u, size_t n);

/* ---- operations and metrics ---- */
struct stor_store_stats {
    uint64_t degraded_reads; /* reads that needed parity */
    uint64_t heal_queued, shards_healed, corrupt_found;
    uint64_t scan_objects, scan_bytes, scan_cycles;
    double scan_percent, scan_last_cycle_s;
    size_t ndrives, drives_online;
    /* the persistent index (storaged/FORMAT.md "The object index") */
    uint64_t index_objects;         /* current objects, every bucket */
    uint64_t index_rebuilds;        /* rebuilds from the metas at this start */
    uint64_t index_rebuild_objects; /* objects the rebuild put back */
    uint64_t index_reconciled; /* keys settled after a crash (no rebuild) */
    double index_rebuild_s;    /* how long that rebuild took */
    double index_open_s;       /* how long opening the index took */
    bool index_broken;         /* a write failed: rebuilt at the next start */
    int index_phase;           /* enum stor_index_phase */
    uint64_t index_dirs_done, index_dirs_total; /* rebuild: object directories
                                                   read / to read */
    uint64_t index_rebuild_estimate; /* rebuild: objects expected in all
                                        (extrapolated from the directories
                                        read; 0 before the first) */
    uint64_t index_verified;         /* records the content check walked */
    uint64_t index_verify_bad;       /* buckets whose content differed */
    bool index_verify_done;
    double index_verify_s;
    uint64_t index_bodies;         /* object bodies the index keeps */
    uint64_t index_bodies_damaged; /* of them, failed their CRC on a GET */
    bool index_resident;           /* the whole file in the page cache at
                                      the last check: loop-side lookups */
    uint64_t index_cold_nb;        /* loop-side lookups sent to a worker
                                      because it was not */
    uint64_t index_res_passes;     /* passes of the residency check */
    uint64_t index_res_lost;       /* of them, found it no longer resident */
    uint64_t index_rewarmed;       /* windows asked back into the cache */
    /* group commit (store/gsync.h): commit barriers waited for, shared
     * syncfs rounds run (fs mode), files fsynced (file mode), failures,
     * extent-file syncs served by another commit's fsync (file mode) */
    uint64_t sync_barriers, sync_rounds, sync_fsyncs, sync_failures;
    uint64_t sync_shared;
    /* extent records freed (deletes, overwrites) and the punches that
     * freed their blocks, adjacent records merged (obj_ext.h) */
    uint64_t ext_freed, ext_punches;
    /* the meta journal (FORMAT.md): records appended, checkpoints, metas
     * put back by a replay at this start */
    uint64_t jnl_records, jnl_checkpoints, jnl_replayed;
    /* spare meta inodes (FORMAT.md "What a PUT costs"): reused by a
     * commit, kept when a meta lost its last name, emptied unused */
    uint64_t spare_reused, spare_kept, spare_emptied;
    /* empty spares made ahead by the pool thread, and taken by commits */
    uint64_t spare_made, spare_taken;
    /* geometry and the heal queue (the console, /metrics) */
    int nsets, set_size, ec_data, ec_parity; /* K+M for full-size objects */
    size_t heal_queue;                       /* heal requests waiting */
};
void stor_store_get_stats(struct stor_store *s, struct stor_store_stats *out);
/* Per-drive figures for /metrics; @i < ndrives. */
struct stor_drive_stats {
    const char *path; /* borrowed from the store */
    int set, pos;     /* erasure set and position in it */
    bool online;
    uint64_t reads, writes, read_bytes, write_bytes, errors;
};
void stor_store_get_drive_stats(struct stor_store *s, size_t i,
                                struct stor_drive_stats *out);
/* Foreground concurrency hint for the scanner's back-off (front end bumps
 * it around each request). */
void stor_store_fg_enter(struct stor_store *s);
void stor_store_fg_leave(struct stor_store *s);

#endif /* STORAGED_STORE_OBJECT_H */
