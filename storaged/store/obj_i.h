/* storaged/store/obj_i.h - internals shared by the object layer's files
 * (obj_ent.c, obj_store.c, obj_ext.c, obj_ver.c, obj_io.c, obj_mpu.c,
 * obj_list.c, obj_heal.c, obj_load.c, obj_open.c), declared once here,
 * never copied into a .c. Not for the front end: it codes
 * against storaged/store/object.h only.
 *
 * Locking, outermost first:
 *   s->lock (rwlock)        the bucket table; read for any object call
 *   s->klock[i] (rwlock)    per-key stripe: write held across a commit or
 *                           delete (version, renames, index, old data),
 *                           read held while a GET pins its version
 *   b->lock (rwlock)        one bucket's multipart uploads
 *   LMDB's own write lock   inside obj_idx.c, for one index write
 * The objects are in the persistent index (s->idx, obj_idx.h): a lookup
 * returns a copy, readers never lock, a commit replaces the record under
 * the key's write lock (and s->lock read, so its bucket stays). */
#ifndef STORAGED_STORE_OBJ_I_H
#define STORAGED_STORE_OBJ_I_H
#include "storaged/store/drive.h"
#include "storaged/store/meta.h"
#include "storaged/store/obj_ext.h"
#include "storaged/store/object.h"
#include "storaged/store/placement.h"
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define OBJ_INLINE_MAX (1024u * 1024) /* objects up to this are inline */
#define OBJ_BLOCK      (64u * 1024)   /* shard block of a full stripe */
#define OBJ_CRC_LEN    8              /* CRC-64 before each shard block */
#define OBJ_KLOCKS     256
#define OBJ_MAX_SHARDS 32
#define OBJ_LEASE_NS   (10ULL * 1000000000ULL) /* version lease step: 10 s */
#define OBJ_IDX_DIR    STOR_SYS_DIR "/index"   /* the LMDB environment */
#define OBJ_IDX_PTR    STOR_SYS_DIR "/index.state" /* pointer, every drive */
#define OBJ_IDX_BROKEN OBJ_IDX_DIR "/broken"       /* a write failed this run */

/* One object in a bucket's in-memory index; immutable after creation. */
struct obj_ent {
    char *key; /* owned */
    size_t key_len;
    uint8_t id[16]; /* names the files: hex(id) */
    uint64_t version;
    int64_t mtime_ns;
    uint64_t size;
    char etag[STOR_ETAG_MAX];
    int k, m;
    uint32_t block;
    bool inl; /* shard inline in the meta file */
    bool ext; /* inl, but the shards are in extent files (obj_ext.h): the
                 metas name the records */
    struct obj_xref *xref;        /* owned, k + m records (file 0: unknown), or
                                     NULL: a GET reads the metas to find them */
    bool multipart;               /* parts[] are client parts (numbers 1..) */
    struct stor_meta_part *parts; /* owned; 0 when inline */
    size_t nparts;
    struct stor_hdr *hdrs; /* owned */
    size_t nhdrs;
    /* A non-current version kept where it was written (obj_ver.c, index
     * record tag 3): its metas are HEX(id of @at_key).v<version> in
     * @at_bucket, on @at_key's placement; NULL for every other record. */
    char *at_bucket; /* owned */
    char *at_key;    /* owned */
    size_t at_key_len;
};

/* A multipart upload in progress. */
/* The headers one part keeps (stor_put_add_header on a part): S3-layer
 * data such as an encrypted part's tags or its checksum. */
struct obj_part_hdrs {
    struct stor_hdr *hdrs; /* owned */
    size_t n;
};

struct obj_upload {
    char *key; /* owned */
    size_t key_len;
    uint8_t id[16];
    char uid[STOR_UPLOAD_ID_MAX];
    int64_t initiated_ns;
    struct stor_hdr *hdrs; /* owned */
    size_t nhdrs;
    struct stor_meta_part *parts; /* owned, sorted by number */
    struct obj_part_hdrs *phdrs;  /* owned, parallel to parts */
    size_t nparts, pcap;
    bool completing; /* a Complete owns its part files (bucket lock) */
};

struct obj_bucket {
    char name[64];
    int64_t created_ns;
    pthread_rwlock_t lock;  /* the uploads; objects live in s->idx */
    struct obj_upload **up; /* sorted by (key, uid); protected by lock */
    size_t nup, upcap;
};

struct obj_jnl;

struct stor_store {
    /* stor_store_set_mpu_hook; set while no Complete runs */
    stor_mpu_hook_fn *mpu_hook;
    void *mpu_hook_arg;
    struct stor_drive *drives; /* owned, ndrives */
    size_t ndrives;
    int nsets, set_size, K, M, wq; /* set geometry and write quorum */
    uint8_t dkey[16];              /* deployment id, the placement key */
    char deployment[33];
    bool fsync;
    size_t body_max;       /* bodies up to this size go into the index too */
    struct stor_gsync *gs; /* owned: group commit (gsync.h) */
    bool extents;          /* new medium objects go to extent files */
    struct obj_ext_drive *ext;      /* owned, ndrives (obj_ext.c), or NULL */
    struct obj_ext_reclaim *ext_rc; /* owned: the deferred punches */
    struct obj_jnl *jnl;            /* owned: the meta journals (obj_jnl.c) */
    struct obj_vdel *vdel; /* owned, atomic: versioned DELETEs to settle */
    uint64_t jnl_records, jnl_checkpoints, jnl_replayed; /* atomics */
    pthread_rwlock_t lock;
    struct obj_bucket **buckets; /* sorted by name; protected by lock */
    size_t nbuckets;
    pthread_rwlock_t klock[OBJ_KLOCKS];
    uint64_t last_version; /* atomic */
    /* the persistent object index (obj_idx.h; FORMAT.md) */
    struct obj_idx *idx; /* owned; immutable after open */
    size_t idx_drive;    /* the drive holding it */
    uint64_t idx_gen;    /* generation of this run */
    /* owned, ndrives bytes, or NULL: 1 for a drive that was offline when
     * the index in use was rebuilt (its keys may be missing from it; the
     * next start with it back rebuilds: FORMAT.md "Rebuilt with drives
     * away"). Written before idx_ready only. */
    uint8_t *idx_away; /* atomic bytes once serving (obj_load_merge) */
    /* obj_load_merge, called by the scanner (obj_heal.c) through this
     * pointer (set by obj_open.c: the chain goes down only) when a drive
     * of idx_away is back online; merge_wanted protected by heal_lock */
    void (*merge_fn)(struct stor_store *s);
    bool merge_wanted;
    bool idx_ready;  /* atomic (release/acquire): loaded or rebuilt, serving;
                        a close may mark it clean */
    bool idx_broken; /* atomic: a write failed; rebuild at next start */
    bool offline;    /* `storaged index`: no formatting, no threads */
    int *lock_fds;   /* owned: DRIVE/.ecfs.sys/lock per drive, or -1 */
    uint64_t version_lease;     /* atomic; versions below it are handed out */
    pthread_mutex_t lease_lock; /* raising version_lease */
    uint64_t idx_rebuilds, idx_rebuild_objects; /* atomics */
    uint64_t idx_reconciled;          /* atomic: keys settled after a crash */
    double idx_rebuild_s, idx_open_s; /* written before idx_ready only */
    int idx_phase;                    /* atomic: enum stor_index_phase */
    uint64_t idx_dirs_done, idx_dirs_total; /* atomics: rebuild progress */
    bool load_stop; /* atomic: close asked a rebuild to end */
    bool load_thread_started;
    pthread_t load_thread;   /* a rebuild or a verify while serving (open.c) */
    uint64_t idx_verified;   /* atomic: records the verify walked */
    uint64_t idx_verify_bad; /* atomic: buckets whose content differed */
    double idx_verify_s;     /* written before idx_verify_done */
    bool idx_verify_done;    /* atomic (release/acquire) */
    /* the index's residency, kept up to date (obj_open.c: res_main) */
    pthread_mutex_t res_lock;
    pthread_cond_t res_cond;
    bool res_stop; /* protected by res_lock */
    bool res_started;
    pthread_t res_thread;
    uint64_t res_passes; /* atomic: passes of the residency check ended */
    /* stats, atomics */
    uint64_t degraded_reads, heal_queued, shards_healed, corrupt_found;
    uint64_t scan_objects, scan_bytes, scan_cycles;
    double scan_percent, scan_last_cycle_s; /* protected by heal_lock */
    int fg;                                 /* atomic foreground concurrency */
    /* heal queue and background threads */
    pthread_mutex_t heal_lock;
    pthread_cond_t heal_cond;
    struct obj_healreq *healq; /* protected by heal_lock */
    size_t nhealq;
    bool stopping; /* protected by heal_lock */
    bool rescan;   /* a drive came back: scan now; protected by heal_lock */
    bool threads_started; /* atomic: vdel_get reads it from any thread */
    pthread_t scan_thread, probe_thread;
};

struct obj_idx_body;

struct obj_healreq {
    char bucket[64];
    char *key;
    size_t key_len;
};

/* ---- obj_ent.c (the bottom: calls nothing else of the layer) ---- */
void obj_ent_free(struct obj_ent *e);
/* Deep copy of an entry; NULL on ENOMEM. */
struct obj_ent *obj_ent_dup(const struct obj_ent *e);
int obj_hdrs_copy(const struct stor_hdr *h, size_t n, struct stor_hdr **out);
void obj_hdrs_free(struct stor_hdr *h, size_t n);
/* NUL-terminated copy of @n bytes; NULL on ENOMEM. */
char *obj_memdup0(const char *p, size_t n);
/* memcmp order, shorter first on a tie: S3 listing order. */
int obj_key_cmp(const char *a, size_t al, const char *b, size_t bl);

/* ---- obj_store.c ---- */
/* stor_store_get_stats (object.h) but for the extent files' reclaim
 * counters, which obj_open.c adds (obj_ext.c is above the core). */
void obj_stats_get(struct stor_store *s, struct stor_store_stats *out);
/* Frees an upload and all it owns, its parts' headers too (NULL-safe):
 * the core's, as bucket_free needs it (multipart's file calls it too). */
void obj_upload_free(struct obj_upload *u);
uint64_t obj_next_version(struct stor_store *s);
int64_t obj_now_ns(void);
/* Finds a bucket; caller holds s->lock. NULL when absent. */
struct obj_bucket *obj_bucket_find(struct stor_store *s, const char *name);
/* The one way to the current entry of bucket/key: store lock, bucket,
 * index lookup. 0 and *out (a copy the caller frees), -STOR_ENOBUCKET,
 * -STOR_ENOKEY, -ENOMEM, -EIO (index unreadable). */
int obj_cur_lookup(struct stor_store *s, const char *bucket, const char *key,
                   size_t key_len, struct obj_ent **out);
/* obj_cur_lookup that also hands out (with @body non-NULL) the body the
 * index holds for that exact version, as obj_cur_lookup_body_nb does. */
int obj_cur_lookup_body(struct stor_store *s, const char *bucket,
                        const char *key, size_t key_len, struct obj_ent **out,
                        void **body);
/* The same with try-locks only, for an event loop: -EAGAIN where the
 * regular path would wait (or should answer the error itself). */
int obj_cur_lookup_nb(struct stor_store *s, const char *bucket, const char *key,
                      size_t key_len, struct obj_ent **out);
/* obj_cur_lookup_nb that also hands out the body the index holds for that
 * exact version (*body malloc'd, e->size bytes; NULL when it holds none). */
int obj_cur_lookup_body_nb(struct stor_store *s, const char *bucket,
                           const char *key, size_t key_len,
                           struct obj_ent **out, void **body);
/* Makes @e (borrowed) the current entry of its key; the replaced one goes
 * to *old (may be NULL). With @b (borrowed, may be NULL) the index keeps
 * that body too. Caller holds the key's write lock. 0, -STOR_ENOBUCKET,
 * -errno (the index is then marked for rebuild). */
int obj_cur_set(struct stor_store *s, const char *bucket,
                const struct obj_ent *e, const struct obj_idx_body *b,
                struct obj_ent **old);

/* ---- versions kept in place (obj_ver.c) ---- */

/* A versioned overwrite's kept version, between obj_ver_retire_begin and
 * the end of the commit. */
struct obj_retire {
    struct obj_ent *ve; /* owned: its companion record (tag 3) */
    char vbucket[64];   /* the companion bucket */
    uint8_t id[16];     /* the base object's id */
    uint64_t version;   /* the kept version (its HEX.v<version> name) */
    int n;              /* its shard count */
    uint32_t linked;    /* set positions j where HEX.v<version> was made */
};
/* DRIVE/b/BUCKET/hh/HEX.vVERSION-SINCE (16 hex digits each: the kept
 * version, and when it stopped being current, ns): a kept version's meta.
 * 0 or -ENAMETOOLONG. */
int obj_path_kept(char *buf, size_t cap, const char *drive, const char *bucket,
                  const uint8_t id[16], uint64_t version, int64_t since_ns);
/* Whether @cur (may be NULL) can be kept in place: inline, shards in its
 * metas (not in extent files), not itself kept. */
bool obj_ver_keepable(const struct obj_ent *cur);
/* The companion record of @cur, an object of @bucket kept at its files
 * and non-current since @since_ns: key KEY SEP VID FLAG, the headers a
 * copied version gets (STOR_HDR_VERSION_ID/_MTIME/_ETAG), tag 3 naming
 * @bucket and @cur's key. The commit and the rebuild both make it here, so
 * they agree. *out malloc'd; @vbucket gets the companion's name. */
int obj_ver_kept_ent(struct stor_store *s, const char *bucket,
                     const struct obj_ent *cur, int64_t since_ns,
                     char vbucket[64], struct obj_ent **out);
/* Under the key's write lock, before barrier 1 of the commit of @e: links
 * the current version's metas (it must be version @want and keepable,
 * else -EAGAIN) to HEX.v<version>-SINCE on the positions of @pl that hold
 * one (at least k, else -STOR_EQUORUM and nothing is left). SINCE is
 * @e's mtime made odd for a DELETE (@del), even for an overwrite.
 * *out on success. */
int obj_ver_retire_begin(struct stor_store *s, const char *bucket,
                         const struct obj_ent *e, uint64_t want, bool del,
                         const struct stor_place *pl, struct obj_retire **out);
void obj_ver_retire_free(struct obj_retire *r);
/* Unlinks HEX.v<version> of object @id on the positions j < @n of @pl in
 * @mask (a retire undone, a kept version deleted). */
void obj_ver_unlink_kept(struct stor_store *s, const char *bucket,
                         const uint8_t id[16], uint64_t version,
                         int64_t since_ns, const struct stor_place *pl, int n,
                         uint32_t mask);
/* obj_cur_set of @e plus @r's companion record in one index transaction. */
int obj_cur_set_pair(struct stor_store *s, const char *bucket,
                     const struct obj_ent *e, const struct obj_idx_body *b,
                     const struct obj_retire *r, struct obj_ent **old);
/* obj_cur_remove of @bucket/@key plus @r's companion record and the
 * delete marker @me (may be NULL; @mb its body, may be NULL) in one index
 * transaction, which also clears both keys' pending records (the key's
 * stays with @keep_pend: its metas go later) (a DELETE over a version
 * kept in place: stor_obj_delete_keep). */
int obj_cur_remove_pair(struct stor_store *s, const char *bucket,
                        const char *key, size_t key_len,
                        const struct obj_retire *r, const struct obj_ent *me,
                        const struct obj_idx_body *mb, bool keep_pend,
                        struct obj_ent **old);
/* obj_cur_pending of two keys in one index transaction. */
int obj_cur_pending_pair(struct stor_store *s, const char *bucket,
                         const uint8_t id[16], const char *key, size_t key_len,
                         const char *bucket2, const uint8_t id2[16],
                         const char *key2, size_t key2_len);
/* The placement of @e's metas: its base's for a kept version, else
 * @bucket/@key's. */
void obj_ver_place(struct stor_store *s, const char *bucket, const char *key,
                   size_t key_len, const struct obj_ent *e,
                   struct stor_place *pl);
/* The path of @e's meta on drive @d: HEX.v<version> of its base for a kept
 * version, else @bucket's HEX.m. */
int obj_ver_meta_path(struct stor_store *s, size_t d, const char *bucket,
                      const struct obj_ent *e, char *buf, size_t cap);
/* Healing a kept version: writes the metas of shards @which (their bytes
 * in @sh, @L each) from a good copy of its meta; caller holds the key's
 * write lock. The number written. */
int obj_ver_rewrite_kept(struct stor_store *s, const struct obj_ent *e,
                         uint8_t *const *sh, size_t L, const bool *which);
/* Deletes the metas of kept version @e (every position of its base). */
void obj_ver_remove_kept(struct stor_store *s, const struct obj_ent *e);
/* Before anything writes or removes the metas of @bucket/@id: a versioned
 * DELETE of that key still settling in the background (obj_io.c) is
 * finished first (its barrier, its HEX.m unlinked). Cheap when none. */
void obj_vdel_settle(struct stor_store *s, const char *bucket,
                     const uint8_t id[16]);
/* At the close: settles every queued DELETE, stops the queue's thread. */
void obj_vdel_stop(struct stor_store *s);

/* Removes bucket/key from the index; the removed entry to *old. Caller
 * holds the key's write lock. 0, -STOR_ENOBUCKET, -STOR_ENOKEY, -errno. */
int obj_cur_remove(struct stor_store *s, const char *bucket, const char *key,
                   size_t key_len, struct obj_ent **old);
/* Records an index write failure (logged once; rebuild at next start,
 * also after a crash: it leaves OBJ_IDX_BROKEN in the index directory). */
void obj_idx_failed(struct stor_store *s, int err);
/* Before a commit or delete changes bucket/key on the drives: records it in
 * the index as in flight, for a start after a crash to reconcile (the
 * commit's index write clears it). 0 or -errno (the index is broken). */
int obj_cur_pending(struct stor_store *s, const char *bucket,
                    const uint8_t id[16], const char *key, size_t key_len);
/* After a delete (or a failed commit) is done with the drives. */
void obj_cur_settled(struct stor_store *s, const char *bucket,
                     const uint8_t id[16]);
/* Raises the version lease above @v (obj_next_version calls it). */
void obj_lease_extend(struct stor_store *s, uint64_t v);
struct obj_ent *obj_ent_from_meta(const struct stor_meta *m,
                                  const uint8_t id[16]);
void obj_key_id(struct stor_store *s, const char *key, size_t len,
                uint8_t id[16]);
pthread_rwlock_t *obj_klock(struct stor_store *s, const uint8_t id[16]);
/* Drive index of shard @j of an object placed at @pl. */
size_t obj_shard_drive(struct stor_store *s, const struct stor_place *pl,
                       int j);
void obj_place(struct stor_store *s, const char *bucket, const char *key,
               size_t len, struct stor_place *pl);
bool obj_drive_online(struct stor_store *s, size_t d);
/* Frees the bucket table and every bucket's uploads (at close). */
void obj_buckets_free(struct stor_store *s);
/* Creates a drive's system directories and empties its temp area. */
int obj_drive_prepare(struct stor_drive *d);
/* Counts an error (@err, a positive errno) of drive @d in operation @op
 * (a short phrase: "temp meta write"); EIO, ENOTDIR, EROFS, ENOSPC, ENXIO
 * and ENODEV take the drive offline until the probe sees it healthy. Every
 * error is logged (WARN: drive, @op, errno), at most DRIVE_ELOG_PER_S lines
 * per drive per second. obj_drive_fail names the calling function. */
void obj_drive_fail_at(struct stor_store *s, size_t d, int err, const char *op);
#define obj_drive_fail(s, d, err) obj_drive_fail_at((s), (d), (err), __func__)
/* Logs, under the same rate limit, a failure on drive @d that is no drive
 * fault (a name already there, an upload's part file missing) but costs a
 * commit that drive's shard. */
void obj_drive_note(struct stor_store *s, size_t d, int err, const char *op);
void obj_drive_count(struct stor_store *s, size_t d, bool write, uint64_t n);
int obj_set_online(struct stor_store *s, int set);
/* Per-object write quorum: shards that must commit. */
int obj_write_quorum(struct stor_store *s, int k, int m);
bool obj_valid_key(const char *key, size_t len);
bool obj_valid_bucket(const char *name);
void obj_heal_queue(struct stor_store *s, const char *bucket, const char *key,
                    size_t len);
void obj_info_fill(const struct obj_ent *e, struct stor_obj_info *out,
                   bool hdrs);
/* Adds bucket @name (created at @created ns) found on the drives by
 * obj_load; stores it in *out. 0 or -ENOMEM. */
int obj_bucket_add_loaded(struct stor_store *s, const char *name,
                          int64_t created, struct obj_bucket **out);

/* paths: DRIVE/b/BUCKET/hh/HEX.m and DRIVE/b/BUCKET/hh/HEX.DATAID */
int obj_path_meta(char *buf, size_t cap, const char *drive, const char *bucket,
                  const uint8_t id[16]);
int obj_path_shard(char *buf, size_t cap, const char *drive, const char *bucket,
                   const uint8_t id[16], uint64_t dataid);
int obj_path_dir(char *buf, size_t cap, const char *drive, const char *bucket,
                 const uint8_t id[16]);
int obj_path_tmp(char *buf, size_t cap, const char *drive, uint64_t uniq,
                 int n);
int obj_path_upload(char *buf, size_t cap, const char *drive,
                    const char *bucket, const char *uid, const char *file);
void obj_hex(const uint8_t *p, size_t n, char *out);

/* ---- geometry of a part's shard file ---- */
struct obj_geom {
    int k, m;
    uint32_t block;
    uint64_t size; /* part bytes */
    uint64_t nstripes;
    uint64_t sdata; /* k * block */
};
void obj_geom_init(struct obj_geom *g, int k, int m, uint32_t block,
                   uint64_t size);
/* Shard bytes of stripe @s (block for full stripes). */
uint32_t obj_geom_slen(const struct obj_geom *g, uint64_t s);
uint64_t obj_geom_file_size(const struct obj_geom *g);
uint64_t obj_block_seed(uint64_t dataid, int shard, uint64_t stripe);

/* ---- obj_io.c ---- */
/* Sets up s->gs, the group commit of s->drives (after they are known).
 * 0 or -ENOMEM. stor_gsync_destroy(s->gs) undoes it. */
int obj_gsync_open(struct stor_store *s);
/* Deletes every file of entry @e on its drives (shards, and metas on
 * drives where @keep_meta_on is false). Caller holds the key lock. */
void obj_remove_files(struct stor_store *s, const char *bucket,
                      const struct obj_ent *e, const struct stor_place *pl,
                      const bool *keep_meta);
/* Streams parts for multipart: shared put engine. */
struct stor_put *obj_put_create(struct stor_store *s, const char *bucket,
                                const char *key, size_t key_len, int64_t size,
                                const struct stor_hdr *hdrs, size_t nhdrs,
                                int *err);
/* Pins version @version of object @id: its shard files stay until the
 * last obj_pin_put (a commit or delete defers removing them). */
int obj_pin_get(const uint8_t id[16], uint64_t version);
void obj_pin_put(struct stor_store *s, const uint8_t id[16], uint64_t version);
/* Rewrites the metas of @e's shards marked in @which (inline shards from
 * @inl, @L bytes each) through temp files and renames; used by healing.
 * An extent object's shards go to new extent records first, whose places
 * land in @xrefs_out[j] (may be NULL) for the shards written. Caller holds
 * the key lock. Returns how many were written. */
int obj_rewrite_metas(struct stor_store *s, const char *bucket,
                      const struct obj_ent *e, uint8_t *const *inl, size_t L,
                      bool *which, struct obj_xref *xrefs_out);
/* The condition of the Complete about to call obj_commit on this thread
 * (NULL: none); a PutObject's is its stor_put's (obj_io.c). */
void obj_commit_set_cond(const struct stor_write_cond *c);
/* The commit protocol shared by simple PUTs and multipart completion:
 * metas to temp, rename shard files (src_shard[j] non-NULL) then metas into
 * place, sync dirs, swap the index entry, retire the old version. Takes
 * ownership of @e. Caller holds no lock. */
int obj_commit(struct stor_store *s, const char *bucket, struct obj_ent *e,
               uint8_t *const *inl_shards, size_t inl_len, bool *ok,
               char (*src_shard)[PATH_MAX]);
/* Exposes a put's identity (store, bucket, key) to the multipart code in
 * obj_list.c; borrows, valid while @p lives. */
struct stor_store *obj_put_store(struct stor_put *p, const char **bucket,
                                 const char **key, size_t *klen);
/* The headers of put @p (for a part: only what stor_put_add_header
 * added); borrowed, valid while @p lives. */
const struct stor_hdr *obj_put_hdrs(const struct stor_put *p, size_t *n);
/* What stor_put_commit calls for a part (multipart's obj_part_commit, so
 * that PUT/GET/DELETE never call up into multipart): moves the synced temp
 * shard files into the upload directory, writes the part's meta, records
 * the part. */
typedef int obj_part_commit_fn(struct stor_put *p, const char *etag,
                               uint64_t size, int k, int m, uint32_t block,
                               uint64_t dataid, const bool *okin,
                               const char *uid, int partno,
                               const uint8_t id[16],
                               const struct stor_place *pl);
/* Marks fresh put @p as part @partno of upload @uid and starts streaming
 * at once: parts always use the set's full K+M geometry and shard files.
 * 0 or a negative error (-STOR_EQUORUM when the set is short of drives). */
int obj_put_make_part(struct stor_put *p, const char *uid, int partno,
                      obj_part_commit_fn *commit);

/* ---- obj_mpu.c ---- */
/* Inserts @u in (key, uid) order; caller holds b->lock for writing.
 * 0 or -ENOMEM. */
int obj_upload_insert(struct obj_bucket *b, struct obj_upload *u);
/* Inserts or replaces part @np in @u (sorted by number) with its headers
 * @hdrs (@nhdrs; ownership taken, also on failure); returns the replaced
 * part's data id in *old (0 when none). 0 or -ENOMEM. */
int obj_upload_set_part(struct obj_upload *u, const struct stor_meta_part *np,
                        struct stor_hdr *hdrs, size_t nhdrs, uint64_t *old);
/* ---- obj_heal.c ---- */
/* Verifies every shard of one object and rebuilds what is missing or
 * corrupt; @deep reads and checks all block checksums. Returns shards
 * healed (>= 0) or -errno. */
int obj_heal_object(struct stor_store *s, const char *bucket, const char *key,
                    size_t key_len, bool deep);
int obj_threads_start(struct stor_store *s);
/* Checks every drive's format record once: offline / back online. */
void obj_probe_drives(struct stor_store *s);
void obj_threads_stop(struct stor_store *s);
/* Opens the persistent index and the buckets: trusts a clean index of this
 * deployment (or reconciles one a crash of the process left dirty) and
 * returns 0, serving; else returns 1: the index must be rebuilt from the
 * metas with obj_load_rebuild before the store serves. -errno on error. */
int obj_load(struct stor_store *s);
/* The rebuild obj_load asked for; publishes idx_ready when done. 0, or
 * -ECANCELED when load_stop was set, or -errno. */
int obj_load_rebuild(struct stor_store *s);
/* The content check of an index the start trusted, run in the background
 * while serving: every bucket's records against its count and content sum
 * (obj_idx_verify). A mismatch marks the index broken (rebuilt at the next
 * start) and is logged. 0, -EBADMSG (mismatch), -ECANCELED, -errno. */
int obj_load_verify(struct stor_store *s);
/* While serving, after a drive that was away at the index's rebuild came
 * back (the scanner thread): reads the object directories of the sets
 * with such a drive online again, and puts each key the index does not
 * have back from its metas, under its key lock, by the rebuild's rules.
 * When every such drive stayed online through it, they are taken off the
 * index's record of drives away (FORMAT.md "Rebuilt with drives away"). */
void obj_load_merge(struct stor_store *s);
/* At a clean close: flushes the index and marks it clean on the drives. */
void obj_index_close(struct stor_store *s);
/* `storaged index check|rebuild` on a store opened offline: builds an index
 * from the metas, prints how the one the drives name differs from it, and
 * with @rebuild puts the new one in its place (clean). The number of
 * differences (>= 0) or -errno. */
long obj_index_check(struct stor_store *s, bool rebuild, FILE *out);

/* ---- obj_jnl.c: the meta journal (FORMAT.md "The meta
 * journal"). A brand-new inline name's commit appends its metas to the
 * journal of each filesystem of its drives (one per filesystem, kept by
 * its first drive), and its barrier is one shared fdatasync of each
 * instead of an fsync of every meta and object directory. ---- */
struct stor_sync_item;
/* At open, after the drives and group commit, before the index: recovers
 * every online drive's journal (the same boot: one syncfs; after a reboot:
 * a replay of its records) and starts a new generation. With @use (and
 * --fsync, file mode), commits may journal. 0, or -EPROTO for a journal
 * of a format this build does not read (logged: the start must fail), or
 * -ENOMEM. A drive whose journal fails otherwise is marked failed. */
int obj_jnl_open(struct stor_store *s, bool use);
/* Checkpoints (a clean stop leaves the journals empty) and frees. */
void obj_jnl_close(struct stor_store *s);
/* Around a commit's appends and its barrier (a checkpoint waits). */
void obj_jnl_enter(struct stor_store *s);
void obj_jnl_leave(struct stor_store *s);
/* Does drive @d journal? Stable between enter and leave. */
bool obj_jnl_use(struct stor_store *s, size_t d);
/* Did drive @d journal at some time in this run (its metas may have been
 * committed through a journal, unsynced)? True also after its host failed
 * (obj_jnl_use is false then). */
bool obj_jnl_hosted(struct stor_store *s, size_t d);
/* Builds into @rec (initialised here; the caller frees it after the
 * write) the record of @meta (the meta of version @version of @bucket/@id
 * on drive @d: with @kept, for the version kept in place as
 * HEX.vVERSION-@since (type 2); else for HEX.m (type 1), where @since != 0
 * makes the record valid only beside the type-2 record of the same id and
 * @since on the same drive: a versioned overwrite's new meta, which a
 * replay must not put back without the version it keeps), reserves its
 * place and sets @io to its write, which the caller runs. Between enter
 * and leave, on a drive that journals. 0 or -ENOMEM. */
int obj_jnl_add(struct stor_store *s, size_t d, const char *bucket,
                const uint8_t id[16], uint64_t version, int64_t since,
                bool kept, const struct cm_buf *meta, struct cm_buf *rec,
                struct stor_io *io);
/* The barrier item that makes drive @d's records durable (a shared fsync
 * of its journal). */
void obj_jnl_item(struct stor_store *s, size_t d, struct stor_sync_item *it);
/* Notes that @id has (obj_jnl_maybe: may have) a record in the journal
 * since the last checkpoint. Under the key's lock. */
void obj_jnl_note(struct stor_store *s, const uint8_t id[16]);
bool obj_jnl_maybe(struct stor_store *s, const uint8_t id[16]);

/* Spare meta inodes (FORMAT.md "What a PUT costs"): a meta file that lost
 * its last name keeps its inode for a later commit's temp meta, so a
 * commit on a journal-less ext4 neither frees nor creates inodes. Under
 * the key lock of the meta's object: removes @path (a meta or HEX.p on
 * drive @d) as unlink(2) does (0, or -1 with errno), keeping its inode as
 * a spare when it has no other name and the drive's pool has room. */
int obj_spare_put(struct stor_store *s, size_t d, const char *path);
/* A spare of drive @d old enough to reuse, renamed to @tmp, opened for
 * writing and cut to @len bytes when longer, which the caller then writes whole
 * from offset 0; or -1 (none: the caller creates @tmp). */
int obj_spare_take(struct stor_store *s, size_t d, const char *tmp, size_t len);
/* DRIVE/.ecfs.sys/tmp/sNUM: a spare's name. 0 or -ENAMETOOLONG. */
int obj_spare_path(char *buf, size_t cap, const char *drive, uint64_t num);
/* A commit's temp meta on drive @d, named sNUM (*num): the oldest spare
 * old enough to reuse, cut to @len bytes when longer, or a new file when
 * there is none; opened for writing [0, @len). The fd, -ENOTSUP when
 * this store keeps no spares (the caller uses obj_path_tmp), or -errno
 * (the create failed). The name stays the caller's until it renames it
 * or hands it back with obj_spare_keep. */
int obj_spare_open(struct stor_store *s, size_t d, size_t len, uint64_t *num);
/* As obj_spare_open, but never creates: -ENOENT when drive @d has no
 * spare to reuse and none made ahead (a delete marker's meta then
 * creates its final name itself: a file made under a spare name and
 * renamed would cost a create and a rename). */
int obj_spare_have(struct stor_store *s, size_t d, size_t len, uint64_t *num);
/* Hands sNUM of drive @d back as a spare (its inode lost its other
 * names; a commit exchanged it with the meta it replaced), or unlinks it
 * when another name still links it or the pool is full. Under the key
 * lock of the meta's object. */
void obj_spare_keep(struct stor_store *s, size_t d, uint64_t num);
/* Spares reused, kept, emptied unused, made ahead (empty, by the pool
 * thread), and made ahead and taken (metrics). */
void obj_spare_stats(struct stor_store *s, uint64_t out[5]);

#endif /* STORAGED_STORE_OBJ_I_H */
