/* storaged/store/obj_store.c - the core of the object layer: buckets, the
 * one way to the current entry of a key (obj_cur_*), the heal queue, paths,
 * entries made from metas, drives, part geometry and statistics. It calls
 * only obj_idx.c (the LMDB index) and obj_ent.c (entries, headers, key
 * order) below it; everything else builds on it: obj_ext.c and obj_ver.c,
 * then obj_io.c (PUT/GET/DELETE), then obj_mpu.c, then obj_list.c,
 * obj_heal.c and obj_load.c, then obj_open.c (scripts/check-obj-chain.sh).
 *
 * DESIGN: one process owns the drives, so it can know which object version
 * is current: the persistent index (obj_idx.c, LMDB) holds it, a durable
 * copy of the per-drive meta files, which stay the truth (obj_load.c
 * rebuilds the index from them when it cannot be trusted). GETs and
 * listings never need a metadata quorum read; a drive that returns after an
 * outage can only hold older versions, which GETs reject by version. */
#include "storaged/store/obj_i.h"

#include "storaged/store/gsync.h"
#include "storaged/store/obj_idx.h"

#include "common/log.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- small helpers ---- */

int64_t obj_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Versions are wall-clock nanoseconds made strictly increasing, so they
 * also order writes across restarts (obj_load raises last_version). */
uint64_t obj_next_version(struct stor_store *s)
{
    uint64_t now = (uint64_t)obj_now_ns();
    uint64_t cur = __atomic_load_n(&s->last_version, __ATOMIC_RELAXED), nv;

    do {
        nv = now > cur ? now : cur + 1;
    } while (!__atomic_compare_exchange_n(&s->last_version, &cur, nv, false,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    if (nv >= __atomic_load_n(&s->version_lease, __ATOMIC_ACQUIRE))
        obj_lease_extend(s, nv);
    return nv;
}

/* Contract in obj_i.h. */
void obj_lease_extend(struct stor_store *s, uint64_t v)
{
    if (s->idx == NULL || !__atomic_load_n(&s->idx_ready, __ATOMIC_ACQUIRE))
        return; /* opening (versions come from the drives) or offline */
    pthread_mutex_lock(&s->lease_lock);
    if (v >= s->version_lease) {
        uint64_t l = v + OBJ_LEASE_NS;
        int ret = obj_idx_lease_set(s->idx, l);

        if (ret < 0)
            obj_idx_failed(s, ret); /* a crash now means a full rebuild */
        __atomic_store_n(&s->version_lease, l, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->lease_lock);
}

/* Lower-case hex of @n bytes into @out (2n+1 bytes). */
void obj_hex(const uint8_t *p, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[p[i] >> 4];
        out[2 * i + 1] = hx[p[i] & 15];
    }
    out[2 * n] = 0;
}

/* Maps an snprintf result to 0 or -ENAMETOOLONG. */
static int fmt_ok(int r, size_t cap)
{
    return r < 0 || (size_t)r >= cap ? -ENAMETOOLONG : 0;
}

/* DRIVE/b/BUCKET/hh for object @id. 0 or -ENAMETOOLONG. */
int obj_path_dir(char *buf, size_t cap, const char *drive, const char *bucket,
                 const uint8_t id[16])
{
    char hx[33];

    obj_hex(id, 16, hx);
    return fmt_ok(
        snprintf(buf, cap, "%s/" STOR_BUCKETS "/%s/%.2s", drive, bucket, hx),
        cap);
}

/* DRIVE/b/BUCKET/hh/HEX.m. 0 or -ENAMETOOLONG. */
int obj_path_meta(char *buf, size_t cap, const char *drive, const char *bucket,
                  const uint8_t id[16])
{
    char hx[33];

    obj_hex(id, 16, hx);
    return fmt_ok(snprintf(buf, cap, "%s/" STOR_BUCKETS "/%s/%.2s/%s.m", drive,
                           bucket, hx, hx),
                  cap);
}

/* DRIVE/b/BUCKET/hh/HEX.DATAID. 0 or -ENAMETOOLONG. */
int obj_path_shard(char *buf, size_t cap, const char *drive, const char *bucket,
                   const uint8_t id[16], uint64_t dataid)
{
    char hx[33];

    obj_hex(id, 16, hx);
    return fmt_ok(snprintf(buf, cap, "%s/" STOR_BUCKETS "/%s/%.2s/%s.%016llx",
                           drive, bucket, hx, hx, (unsigned long long)dataid),
                  cap);
}

/* DRIVE/.ecfs.sys/tmp/UNIQ.N. 0 or -ENAMETOOLONG. */
int obj_path_tmp(char *buf, size_t cap, const char *drive, uint64_t uniq, int n)
{
    return fmt_ok(snprintf(buf, cap, "%s/" STOR_TMP_DIR "/%016llx.%d", drive,
                           (unsigned long long)uniq, n),
                  cap);
}

/* DRIVE/.ecfs.sys/mpu/BUCKET[/UID[/FILE]]. 0 or -ENAMETOOLONG. */
int obj_path_upload(char *buf, size_t cap, const char *drive,
                    const char *bucket, const char *uid, const char *file)
{
    return fmt_ok(snprintf(buf, cap, "%s/" STOR_MPU_DIR "/%s/%s%s%s", drive,
                           bucket, uid ? uid : "", file ? "/" : "",
                           file ? file : ""),
                  cap);
}

/* Object file names come from a keyed 128-bit hash of the key (two
 * SipHash halves), never from the key itself: any key bytes are safe. */
void obj_key_id(struct stor_store *s, const char *key, size_t len,
                uint8_t id[16])
{
    uint8_t k2[16];
    uint64_t a, b;

    memcpy(k2, s->dkey, 16);
    k2[0] ^= 0x5a;
    a = stor_siphash(s->dkey, key, len);
    b = stor_siphash(k2, key, len);
    for (int i = 0; i < 8; i++) {
        id[i] = (uint8_t)(a >> (8 * i));
        id[8 + i] = (uint8_t)(b >> (8 * i));
    }
}

pthread_rwlock_t *obj_klock(struct stor_store *s, const uint8_t id[16])
{
    return &s->klock[id[15] % OBJ_KLOCKS];
}

/* Set and rotation of bucket/key (keyed by the deployment id). */
void obj_place(struct stor_store *s, const char *bucket, const char *key,
               size_t len, struct stor_place *pl)
{
    stor_place(s->dkey, bucket, key, len, s->nsets, s->set_size, pl);
}

/* Index in s->drives of shard @j of an object placed at @pl. */
size_t obj_shard_drive(struct stor_store *s, const struct stor_place *pl, int j)
{
    return (size_t)pl->set * s->set_size +
           (size_t)((pl->rot + j) % s->set_size);
}

/* Current online flag of drive @d (atomic read). */
bool obj_drive_online(struct stor_store *s, size_t d)
{
    return __atomic_load_n(&s->drives[d].online, __ATOMIC_ACQUIRE);
}

/* Lines obj_drive_fail_at logs per drive per second; the rest are counted
 * and the next line says how many it left out. */
#define DRIVE_ELOG_PER_S 8

/* Does an error of drive @d get a log line now (DRIVE_ELOG_PER_S)? Sets
 * *quiet to the errors left out since the last line. A race between two
 * threads at a second's turn costs at most a line more or less. */
static bool drive_elog_due(struct stor_drive *dr, uint64_t *quiet)
{
    struct timespec ts;
    int64_t now, win;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (int64_t)ts.tv_sec;
    win = __atomic_load_n(&dr->elog_sec, __ATOMIC_RELAXED);
    if (win != now &&
        __atomic_compare_exchange_n(&dr->elog_sec, &win, now, false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        __atomic_store_n(&dr->elog_n, 0, __ATOMIC_RELAXED);
    if (__atomic_fetch_add(&dr->elog_n, 1, __ATOMIC_RELAXED) >=
        DRIVE_ELOG_PER_S) {
        __atomic_add_fetch(&dr->elog_quiet, 1, __ATOMIC_RELAXED);
        return false;
    }
    *quiet = __atomic_exchange_n(&dr->elog_quiet, 0, __ATOMIC_RELAXED);
    return true;
}

/* Contract in obj_i.h. An I/O error other than "not there" takes the
 * drive offline until the probe thread sees it healthy again; every
 * error, offline or not, gets a WARN line (rate-limited per drive): a
 * commit that loses its quorum to an errno that leaves the drive online
 * (EMFILE, EAGAIN, EBADF, ...) must still say why. */
void obj_drive_fail_at(struct stor_store *s, size_t d, int err, const char *op)
{
    struct stor_drive *dr = &s->drives[d];
    uint64_t quiet = 0;
    bool off = err == EIO || err == ENOTDIR || err == EROFS || err == ENOSPC ||
               err == ENXIO || err == ENODEV;

    __atomic_add_fetch(&dr->errors, 1, __ATOMIC_RELAXED);
    if (drive_elog_due(dr, &quiet))
        cm_log(CM_LOG_WARN, err,
               "drive %s: %s failed (errno %d%s; %llu more errors on this "
               "drive not logged before this one)",
               dr->path, op ? op : "I/O", err,
               off ? ", takes the drive offline" : ", drive stays online",
               (unsigned long long)quiet);
    if (off && __atomic_exchange_n(&dr->online, false, __ATOMIC_ACQ_REL))
        cm_log(CM_LOG_WARN, err, "drive %s: marked offline", dr->path);
}

/* Contract in obj_i.h. */
void obj_drive_note(struct stor_store *s, size_t d, int err, const char *op)
{
    struct stor_drive *dr = &s->drives[d];
    uint64_t quiet = 0;

    if (drive_elog_due(dr, &quiet))
        cm_log(CM_LOG_WARN, err,
               "drive %s: %s failed (errno %d; not a drive fault; %llu more "
               "errors on this drive not logged before this one)",
               dr->path, op, err, (unsigned long long)quiet);
}

/* Adds one read or write of @n bytes to drive @d's counters. */
void obj_drive_count(struct stor_store *s, size_t d, bool write, uint64_t n)
{
    struct stor_drive *dr = &s->drives[d];

    if (write) {
        __atomic_add_fetch(&dr->writes, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&dr->write_bytes, n, __ATOMIC_RELAXED);
    } else {
        __atomic_add_fetch(&dr->reads, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&dr->read_bytes, n, __ATOMIC_RELAXED);
    }
}

/* Online drives in erasure set @set. */
int obj_set_online(struct stor_store *s, int set)
{
    int n = 0;

    for (int i = 0; i < s->set_size; i++)
        n += obj_drive_online(s, (size_t)set * s->set_size + i);
    return n;
}

/* An object tolerates as many missing shards at write as its set
 * tolerates offline drives, and never fewer than k shards. */
int obj_write_quorum(struct stor_store *s, int k, int m)
{
    int tol = s->set_size - s->wq, q = k + m - tol;

    return q < k ? k : q;
}

/* 1..1024 bytes, no NUL: anything else S3 allows is fine here. */
bool obj_valid_key(const char *key, size_t len)
{
    return key != NULL && len >= 1 && len <= STOR_MAX_KEY_LEN &&
           memchr(key, 0, len) == NULL;
}

/* S3 bucket naming: 3..63 of [a-z0-9.-], starting and ending alnum. */
bool obj_valid_bucket(const char *name)
{
    size_t n = name ? strlen(name) : 0;

    if (n < 3 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

        if (!alnum && c != '.' && c != '-')
            return false;
        if ((i == 0 || i == n - 1) && !alnum)
            return false;
    }
    return true;
}

/* ---- headers and entries ---- */

/* New index entry from a decoded meta (copies); NULL on ENOMEM. */
struct obj_ent *obj_ent_from_meta(const struct stor_meta *m,
                                  const uint8_t id[16])
{
    struct obj_ent e = {0};

    e.key = m->key;
    e.key_len = m->key_len;
    memcpy(e.id, id, 16);
    e.version = m->version;
    e.mtime_ns = m->mtime_ns;
    e.size = m->size;
    memcpy(e.etag, m->etag, sizeof(e.etag));
    e.k = m->k;
    e.m = m->m;
    e.block = m->block;
    e.inl = m->has_inline;
    e.ext = m->has_inline && m->has_xref;
    e.parts = m->parts;
    e.nparts = m->nparts;
    e.multipart = m->nparts > 0 && m->parts[0].number > 0;
    e.hdrs = m->hdrs;
    e.nhdrs = m->nhdrs;
    return obj_ent_dup(&e);
}

/* Fills the front end's info from an entry; headers and (multipart)
 * part sizes copied when @hdrs. */
void obj_info_fill(const struct obj_ent *e, struct stor_obj_info *out,
                   bool hdrs)
{
    memset(out, 0, sizeof(*out));
    out->size = e->size;
    out->mtime = (time_t)(e->mtime_ns / 1000000000LL);
    out->mtime_ms = (int)((e->mtime_ns / 1000000LL) % 1000);
    memcpy(out->etag, e->etag, sizeof(out->etag));
    out->nparts = e->multipart ? (int)e->nparts : 0;
    if (hdrs && obj_hdrs_copy(e->hdrs, e->nhdrs, &out->hdrs) == 0)
        out->nhdrs = e->nhdrs;
    if (hdrs && e->multipart && e->nparts > 0) {
        out->part_size = malloc(e->nparts * sizeof(*out->part_size));
        for (size_t p = 0; out->part_size && p < e->nparts; p++)
            out->part_size[p] = e->parts[p].size;
    }
}

/* Frees the headers of an info (NULL-safe). */
void stor_obj_info_fini(struct stor_obj_info *i)
{
    if (i == NULL)
        return;
    obj_hdrs_free(i->hdrs, i->nhdrs);
    i->hdrs = NULL;
    i->nhdrs = 0;
    free(i->part_size);
    i->part_size = NULL;
}

/* ---- the heal queue (fed by PUT/GET/DELETE and start-up, drained by the
 * scanner thread in obj_heal.c) ---- */

#define HEALQ_MAX 10000 /* beyond this the next scan cycle finds them */

/* Contract in obj_i.h: de-duplicated, bounded; wakes the scanner. */
void obj_heal_queue(struct stor_store *s, const char *bucket, const char *key,
                    size_t len)
{
    struct obj_healreq *r;

    pthread_mutex_lock(&s->heal_lock);
    for (size_t i = 0; i < s->nhealq; i++)
        if (s->healq[i].key_len == len &&
            strcmp(s->healq[i].bucket, bucket) == 0 &&
            memcmp(s->healq[i].key, key, len) == 0)
            goto out;
    if (s->nhealq >= HEALQ_MAX) {
        s->rescan = true; /* a full cycle will find what we drop here */
        goto out;
    }
    r = realloc(s->healq, (s->nhealq + 1) * sizeof(*r));
    if (r == NULL)
        goto out;
    s->healq = r;
    r = &s->healq[s->nhealq];
    r->key = malloc(len + 1);
    if (r->key == NULL)
        goto out;
    memcpy(r->key, key, len);
    r->key[len] = 0;
    r->key_len = len;
    snprintf(r->bucket, sizeof(r->bucket), "%s", bucket);
    s->nhealq++;
    __atomic_add_fetch(&s->heal_queued, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&s->heal_cond);
out:
    pthread_mutex_unlock(&s->heal_lock);
}

/* ---- the current entry (every lookup goes through here) ---- */

/* Contract in obj_i.h. */
void obj_idx_failed(struct stor_store *s, int err)
{
    char path[PATH_MAX];
    int fd;

    if (__atomic_exchange_n(&s->idx_broken, true, __ATOMIC_RELAXED))
        return;
    cm_log(CM_LOG_ERROR, -err,
           "index: a write failed; serving on, the index is rebuilt "
           "from the metas at the next start");
    /* a start after a crash must not reconcile this index either */
    if (snprintf(path, sizeof(path), "%s/" OBJ_IDX_BROKEN,
                 s->drives[s->idx_drive].path) < (int)sizeof(path)) {
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
}

/* Contract in obj_i.h. */
int obj_cur_pending(struct stor_store *s, const char *bucket,
                    const uint8_t id[16], const char *key, size_t key_len)
{
    int ret = obj_idx_pend_add(s->idx, bucket, id, key, key_len);

    if (ret < 0)
        obj_idx_failed(s, ret);
    return ret;
}

/* Contract in obj_i.h. */
void obj_cur_settled(struct stor_store *s, const char *bucket,
                     const uint8_t id[16])
{
    int ret = obj_idx_pend_clear(s->idx, bucket, id);

    if (ret < 0)
        obj_idx_failed(s, ret);
}

/* Contract in obj_i.h. */
int obj_cur_lookup(struct stor_store *s, const char *bucket, const char *key,
                   size_t key_len, struct obj_ent **out)
{
    return obj_cur_lookup_body(s, bucket, key, key_len, out, NULL);
}

/* Contract in obj_i.h. */
int obj_cur_lookup_body(struct stor_store *s, const char *bucket,
                        const char *key, size_t key_len, struct obj_ent **out,
                        void **body)
{
    int ret;

    *out = NULL;
    if (body)
        *body = NULL;
    pthread_rwlock_rdlock(&s->lock);
    if (obj_bucket_find(s, bucket) == NULL)
        ret = -STOR_ENOBUCKET;
    else if (body)
        ret = obj_idx_lookup_body(s->idx, bucket, key, key_len, out, body);
    else
        ret = obj_idx_lookup(s->idx, bucket, key, key_len, out);
    pthread_rwlock_unlock(&s->lock);
    if (ret == -ENOENT)
        return -STOR_ENOKEY;
    if (ret == -EBADMSG)
        return -EIO;
    return ret;
}

/* Contract in obj_i.h. */
int obj_cur_lookup_nb(struct stor_store *s, const char *bucket, const char *key,
                      size_t key_len, struct obj_ent **out)
{
    int ret = -EAGAIN;

    *out = NULL;
    if (pthread_rwlock_tryrdlock(&s->lock) != 0)
        return -EAGAIN;
    if (obj_bucket_find(s, bucket) != NULL)
        ret = obj_idx_lookup_nb(s->idx, bucket, key, key_len, out);
    pthread_rwlock_unlock(&s->lock);
    return ret == 0 ? 0 : -EAGAIN;
}

/* Contract in obj_i.h. */
int obj_cur_lookup_body_nb(struct stor_store *s, const char *bucket,
                           const char *key, size_t key_len,
                           struct obj_ent **out, void **body)
{
    int ret = -EAGAIN;

    *out = NULL;
    *body = NULL;
    if (pthread_rwlock_tryrdlock(&s->lock) != 0)
        return -EAGAIN;
    if (obj_bucket_find(s, bucket) != NULL)
        ret = obj_idx_lookup_body_nb(s->idx, bucket, key, key_len, out, body);
    pthread_rwlock_unlock(&s->lock);
    return ret == 0 ? 0 : -EAGAIN;
}

/* Contract in obj_i.h. */
int obj_cur_set(struct stor_store *s, const char *bucket,
                const struct obj_ent *e, const struct obj_idx_body *b,
                struct obj_ent **old)
{
    int ret;

    if (old)
        *old = NULL;
    pthread_rwlock_rdlock(&s->lock);
    if (obj_bucket_find(s, bucket) == NULL) {
        ret = -STOR_ENOBUCKET;
    } else {
        ret = obj_idx_put_body(s->idx, bucket, e, b, old);
        if (ret < 0)
            obj_idx_failed(s, ret);
    }
    pthread_rwlock_unlock(&s->lock);
    return ret;
}

/* Contract in obj_i.h. */
int obj_cur_remove(struct stor_store *s, const char *bucket, const char *key,
                   size_t key_len, struct obj_ent **old)
{
    int ret;

    if (old)
        *old = NULL;
    pthread_rwlock_rdlock(&s->lock);
    if (obj_bucket_find(s, bucket) == NULL) {
        ret = -STOR_ENOBUCKET;
    } else {
        ret = obj_idx_remove(s->idx, bucket, key, key_len, old);
        if (ret == -ENOENT)
            ret = -STOR_ENOKEY;
        else if (ret < 0)
            obj_idx_failed(s, ret);
    }
    pthread_rwlock_unlock(&s->lock);
    return ret;
}

/* Contract in obj_i.h (binary search by name). */
struct obj_bucket *obj_bucket_find(struct stor_store *s, const char *name)
{
    size_t lo = 0, hi = s->nbuckets;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->buckets[mid]->name, name);

        if (c == 0)
            return s->buckets[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Contract in obj_i.h. */
void obj_upload_free(struct obj_upload *u)
{
    if (u == NULL)
        return;
    free(u->key);
    for (size_t i = 0; i < u->nparts; i++)
        obj_hdrs_free(u->phdrs[i].hdrs, u->phdrs[i].n);
    free(u->parts);
    free(u->phdrs);
    obj_hdrs_free(u->hdrs, u->nhdrs);
    free(u);
}

/* Frees a bucket, its index and its uploads. */
static void bucket_free(struct obj_bucket *b)
{
    for (size_t i = 0; i < b->nup; i++)
        obj_upload_free(b->up[i]);
    free(b->up);
    pthread_rwlock_destroy(&b->lock);
    free(b);
}

/* Contract in obj_i.h. */
void obj_buckets_free(struct stor_store *s)
{
    for (size_t i = 0; i < s->nbuckets; i++)
        bucket_free(s->buckets[i]);
    free(s->buckets);
    s->buckets = NULL;
    s->nbuckets = 0;
}

/* Adds a bucket to the table; caller holds s->lock for writing. */
static int bucket_insert(struct stor_store *s, const char *name,
                         int64_t created, struct obj_bucket **out)
{
    struct obj_bucket *b = calloc(1, sizeof(*b)), **nv;
    size_t at = 0;

    if (b == NULL)
        return -ENOMEM;
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->created_ns = created;
    pthread_rwlock_init(&b->lock, NULL);
    nv = realloc(s->buckets, (s->nbuckets + 1) * sizeof(*nv));
    if (nv == NULL) {
        bucket_free(b);
        return -ENOMEM;
    }
    s->buckets = nv;
    while (at < s->nbuckets && strcmp(s->buckets[at]->name, name) < 0)
        at++;
    memmove(s->buckets + at + 1, s->buckets + at,
            (s->nbuckets - at) * sizeof(*nv));
    s->buckets[at] = b;
    s->nbuckets++;
    if (out)
        *out = b;
    return 0;
}

/* Contract in obj_i.h. */
int obj_bucket_add_loaded(struct stor_store *s, const char *name,
                          int64_t created, struct obj_bucket **out)
{
    return bucket_insert(s, name, created, out);
}

/* ---- buckets ---- */

/* Writes DRIVE/b/NAME/bucket with the creation time, durably. */
static int bucket_write_record(struct stor_store *s, size_t d, const char *name,
                               int64_t created)
{
    char path[PATH_MAX], body[64];
    int fd, ret, len;

    ret = fmt_ok(snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s",
                          s->drives[d].path, name),
                 sizeof(path));
    if (ret < 0)
        return ret;
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return -errno;
    ret = fmt_ok(snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s/bucket",
                          s->drives[d].path, name),
                 sizeof(path));
    if (ret < 0)
        return ret;
    len = snprintf(body, sizeof(body), "created_ns=%lld\n", (long long)created);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ret = stor_pwrite_all(fd, body, (size_t)len, 0);
    if (ret == 0 && s->fsync && fsync(fd) < 0)
        ret = -errno;
    close(fd);
    if (ret == 0 && s->fsync) {
        char dir[PATH_MAX];

        snprintf(dir, sizeof(dir), "%s/" STOR_BUCKETS, s->drives[d].path);
        ret = stor_fsync_dir(dir);
    }
    return ret;
}

/* Contract in object.h: record on every online drive, majority needed. */
int stor_bucket_create(struct stor_store *s, const char *bucket)
{
    /* from the version clock: every object put into this bucket later has
     * a larger version, even if the wall clock steps back (obj_load
     * filters older versions as leftovers of an earlier bucket) */
    int64_t now = (int64_t)obj_next_version(s);
    size_t ok = 0;
    int ret;

    if (!obj_valid_bucket(bucket))
        return -STOR_EINVAL;
    pthread_rwlock_wrlock(&s->lock);
    if (obj_bucket_find(s, bucket) != NULL) {
        ret = -STOR_EBUCKETEXISTS;
        goto out;
    }
    for (size_t d = 0; d < s->ndrives; d++) {
        char path[PATH_MAX];

        if (!obj_drive_online(s, d))
            continue;
        /* leftovers of an earlier bucket of this name (a drive that was
         * away when it was deleted) must not join the new one */
        if (snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s",
                     s->drives[d].path, bucket) < (int)sizeof(path))
            (void)stor_rmtree(path);
        ret = bucket_write_record(s, d, bucket, now);
        if (ret < 0)
            obj_drive_fail(s, d, -ret);
        else
            ok++;
    }
    if (ok * 2 <= s->ndrives && !(s->ndrives == 1 && ok == 1)) {
        ret = -STOR_EQUORUM;
        goto out;
    }
    ret = obj_idx_bucket_set(s->idx, bucket, now);
    if (ret < 0) {
        obj_idx_failed(s, ret);
        ret = 0; /* the drives hold it; the next start rebuilds the index */
    }
    ret = bucket_insert(s, bucket, now, NULL);
out:
    pthread_rwlock_unlock(&s->lock);
    return ret;
}

/* Contract in object.h: refuses while objects or uploads remain. */
int stor_bucket_delete(struct stor_store *s, const char *bucket)
{
    struct obj_bucket *b;
    int ret = 0;

    pthread_rwlock_wrlock(&s->lock);
    b = obj_bucket_find(s, bucket);
    if (b == NULL) {
        ret = -STOR_ENOBUCKET;
        goto out;
    }
    /* uploads in progress do not keep a bucket (S3 deletes it and them;
     * `aws s3 rb --force` after an interrupted upload must work): their
     * directories go with the bucket below */
    {
        struct obj_idx_cur *c;
        struct obj_idx_view v;

        ret = obj_idx_cur_open(s->idx, bucket, &c);
        if (ret == 0)
            ret = obj_idx_cur_seek(c, NULL, 0, false);
        if (ret == 0)
            ret = obj_idx_cur_next(c, &v) == 0 ? -STOR_ENOTEMPTY : 0;
        obj_idx_cur_close(c);
        if (ret < 0)
            goto out;
    }
    for (size_t d = 0; d < s->ndrives; d++) {
        char path[PATH_MAX];

        if (!obj_drive_online(s, d))
            continue;
        /* the record first, so a crash midway cannot resurrect it */
        snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s/bucket",
                 s->drives[d].path, bucket);
        unlink(path);
        snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s",
                 s->drives[d].path, bucket);
        (void)stor_rmtree(path);
        if (obj_path_upload(path, sizeof(path), s->drives[d].path, bucket, NULL,
                            NULL) == 0)
            (void)stor_rmtree(path);
    }
    ret = obj_idx_bucket_drop(s->idx, bucket);
    if (ret < 0) {
        obj_idx_failed(s, ret);
        ret = 0;
    }
    for (size_t i = 0; i < s->nbuckets; i++) {
        if (s->buckets[i] == b) {
            memmove(s->buckets + i, s->buckets + i + 1,
                    (s->nbuckets - i - 1) * sizeof(*s->buckets));
            s->nbuckets--;
            break;
        }
    }
    bucket_free(b);
out:
    pthread_rwlock_unlock(&s->lock);
    return ret;
}

/* Contract in object.h. */
int stor_bucket_stat(struct stor_store *s, const char *bucket,
                     struct stor_bucket_info *out)
{
    struct obj_bucket *b;
    int ret = 0;

    pthread_rwlock_rdlock(&s->lock);
    b = obj_bucket_find(s, bucket);
    if (b == NULL) {
        ret = -STOR_ENOBUCKET;
    } else if (out) {
        memset(out, 0, sizeof(*out));
        snprintf(out->name, sizeof(out->name), "%s", b->name);
        out->created = (time_t)(b->created_ns / 1000000000LL);
    }
    pthread_rwlock_unlock(&s->lock);
    return ret;
}

/* Contract in object.h (already sorted by name). */
int stor_bucket_list(struct stor_store *s, struct stor_bucket_info **out,
                     size_t *n)
{
    struct stor_bucket_info *v;

    pthread_rwlock_rdlock(&s->lock);
    v = calloc(s->nbuckets ? s->nbuckets : 1, sizeof(*v));
    if (v == NULL) {
        pthread_rwlock_unlock(&s->lock);
        return -ENOMEM;
    }
    for (size_t i = 0; i < s->nbuckets; i++) {
        snprintf(v[i].name, sizeof(v[i].name), "%s", s->buckets[i]->name);
        v[i].created = (time_t)(s->buckets[i]->created_ns / 1000000000LL);
    }
    *n = s->nbuckets;
    *out = v;
    pthread_rwlock_unlock(&s->lock);
    return 0;
}

/* ---- drives ---- */

/* Creates the drive's system dirs and empties its temp area (anything
 * there belongs to a write that never committed). */
int obj_drive_prepare(struct stor_drive *d)
{
    char path[PATH_MAX];
    int ret;

    snprintf(path, sizeof(path), "%s/" STOR_TMP_DIR, d->path);
    (void)stor_rmtree(path);
    ret = stor_mkdirs(path);
    if (ret < 0)
        return ret;
    snprintf(path, sizeof(path), "%s/" STOR_MPU_DIR, d->path);
    ret = stor_mkdirs(path);
    if (ret < 0)
        return ret;
    snprintf(path, sizeof(path), "%s/" STOR_BUCKETS, d->path);
    return stor_mkdirs(path);
}

/* ---- stats ---- */

/* obj_idx_bucket_each callback: sums the object counts. */
static int count_objects(void *arg, const char *bucket, int64_t created,
                         uint64_t count)
{
    (void)bucket;
    (void)created;
    *(uint64_t *)arg += count;
    return 0;
}

/* Contract in obj_i.h (counters are atomics). */
void obj_stats_get(struct stor_store *s, struct stor_store_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->degraded_reads = __atomic_load_n(&s->degraded_reads, __ATOMIC_RELAXED);
    out->heal_queued = __atomic_load_n(&s->heal_queued, __ATOMIC_RELAXED);
    out->shards_healed = __atomic_load_n(&s->shards_healed, __ATOMIC_RELAXED);
    out->corrupt_found = __atomic_load_n(&s->corrupt_found, __ATOMIC_RELAXED);
    out->scan_objects = __atomic_load_n(&s->scan_objects, __ATOMIC_RELAXED);
    out->scan_bytes = __atomic_load_n(&s->scan_bytes, __ATOMIC_RELAXED);
    out->scan_cycles = __atomic_load_n(&s->scan_cycles, __ATOMIC_RELAXED);
    pthread_mutex_lock(&s->heal_lock);
    out->scan_percent = s->scan_percent;
    out->scan_last_cycle_s = s->scan_last_cycle_s;
    out->heal_queue = s->nhealq;
    pthread_mutex_unlock(&s->heal_lock);
    if (s->gs) {
        struct stor_gsync_stats gst;

        stor_gsync_get_stats(s->gs, &gst);
        out->sync_barriers = gst.barriers;
        out->sync_rounds = gst.rounds;
        out->sync_fsyncs = gst.fsyncs;
        out->sync_failures = gst.failures;
        out->sync_shared = gst.shared;
    }
    out->nsets = s->nsets;
    out->set_size = s->set_size;
    out->ec_data = s->K;
    out->ec_parity = s->M;
    out->ndrives = s->ndrives;
    for (size_t i = 0; i < s->ndrives; i++)
        out->drives_online += obj_drive_online(s, i);
    out->index_phase = __atomic_load_n(&s->idx_phase, __ATOMIC_ACQUIRE);
    if (out->index_phase == STOR_INDEX_SERVING &&
        obj_idx_bucket_each(s->idx, count_objects, &out->index_objects) < 0)
        out->index_objects = 0;
    out->index_dirs_done = __atomic_load_n(&s->idx_dirs_done, __ATOMIC_RELAXED);
    out->index_dirs_total =
        __atomic_load_n(&s->idx_dirs_total, __ATOMIC_RELAXED);
    out->index_rebuilds = __atomic_load_n(&s->idx_rebuilds, __ATOMIC_RELAXED);
    out->index_rebuild_objects =
        __atomic_load_n(&s->idx_rebuild_objects, __ATOMIC_RELAXED);
    out->index_reconciled =
        __atomic_load_n(&s->idx_reconciled, __ATOMIC_RELAXED);
    if (out->index_phase == STOR_INDEX_SERVING) { /* written before it */
        out->index_rebuild_s = s->idx_rebuild_s;
        out->index_open_s = s->idx_open_s;
    }
    out->index_verified = __atomic_load_n(&s->idx_verified, __ATOMIC_RELAXED);
    out->index_verify_bad =
        __atomic_load_n(&s->idx_verify_bad, __ATOMIC_RELAXED);
    out->index_verify_done =
        __atomic_load_n(&s->idx_verify_done, __ATOMIC_ACQUIRE);
    if (out->index_verify_done)
        out->index_verify_s = s->idx_verify_s;
    if (out->index_phase == STOR_INDEX_SERVING) {
        out->index_bodies = obj_idx_body_count(s->idx);
        out->index_bodies_damaged = obj_idx_body_damaged(s->idx);
        out->index_resident = obj_idx_resident(s->idx);
        out->index_cold_nb = obj_idx_cold_nb(s->idx);
        out->index_res_lost = obj_idx_resident_lost(s->idx);
        out->index_rewarmed = obj_idx_rewarmed(s->idx);
    }
    out->index_res_passes = __atomic_load_n(&s->res_passes, __ATOMIC_RELAXED);
    if (out->index_dirs_done > 0)
        out->index_rebuild_estimate =
            out->index_dirs_done >= out->index_dirs_total
                ? out->index_rebuild_objects
                : out->index_rebuild_objects * out->index_dirs_total /
                      out->index_dirs_done;
    out->index_broken = __atomic_load_n(&s->idx_broken, __ATOMIC_RELAXED);
}

/* Contract in object.h. */
void stor_store_get_drive_stats(struct stor_store *s, size_t i,
                                struct stor_drive_stats *out)
{
    struct stor_drive *d = &s->drives[i];

    memset(out, 0, sizeof(*out));
    if (i >= s->ndrives)
        return;
    out->path = d->path;
    out->set = d->set;
    out->pos = d->pos;
    out->online = obj_drive_online(s, i);
    out->reads = __atomic_load_n(&d->reads, __ATOMIC_RELAXED);
    out->writes = __atomic_load_n(&d->writes, __ATOMIC_RELAXED);
    out->read_bytes = __atomic_load_n(&d->read_bytes, __ATOMIC_RELAXED);
    out->write_bytes = __atomic_load_n(&d->write_bytes, __ATOMIC_RELAXED);
    out->errors = __atomic_load_n(&d->errors, __ATOMIC_RELAXED);
}

/* One more foreground request in flight (scanner back-off). */
void stor_store_fg_enter(struct stor_store *s)
{
    __atomic_add_fetch(&s->fg, 1, __ATOMIC_RELAXED);
}

/* One fewer foreground request in flight. */
void stor_store_fg_leave(struct stor_store *s)
{
    __atomic_sub_fetch(&s->fg, 1, __ATOMIC_RELAXED);
}

/* ---- part geometry ---- */

/* Stripe geometry of a part of @size bytes coded k+m with @block shards. */
void obj_geom_init(struct obj_geom *g, int k, int m, uint32_t block,
                   uint64_t size)
{
    g->k = k;
    g->m = m;
    g->block = block;
    g->size = size;
    g->sdata = (uint64_t)k * block;
    g->nstripes = (size + g->sdata - 1) / g->sdata;
}

/* Contract in obj_i.h (the last stripe is shorter). */
uint32_t obj_geom_slen(const struct obj_geom *g, uint64_t s)
{
    uint64_t rem;

    if (s + 1 < g->nstripes)
        return g->block;
    rem = g->size - s * g->sdata;
    return (uint32_t)((rem + (uint64_t)g->k - 1) / (uint64_t)g->k);
}

/* Exact size of a shard file of this part. */
uint64_t obj_geom_file_size(const struct obj_geom *g)
{
    if (g->nstripes == 0)
        return 0;
    return (g->nstripes - 1) * (uint64_t)(g->block + OBJ_CRC_LEN) +
           obj_geom_slen(g, g->nstripes - 1) + OBJ_CRC_LEN;
}

/* Seeds each block's CRC with where it belongs, so a block copied to the
 * wrong file or offset fails verification like a corrupt one. */
uint64_t obj_block_seed(uint64_t dataid, int shard, uint64_t stripe)
{
    return dataid ^ ((uint64_t)shard << 56) ^ (stripe * 0x9e3779b97f4a7c15ULL);
}
