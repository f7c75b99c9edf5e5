/* storaged/store/obj_heal.c - healing and the background scanner.
 *
 * Heal work comes from degraded GETs, partial commits and loading (a queue)
 * and from the scanner, which walks every object of every bucket, verifies
 * every shard block's CRC (deep) and rebuilds what is missing or corrupt.
 * After each object the scanner sleeps 10 ms, growing with the foreground
 * concurrency (stor_store_fg_enter/leave) up to 250 ms. A probe thread checks
 * each drive's format record every second: a failing drive goes offline, a
 * drive that answers again comes back online and its set is healed. */
#include "storaged/store/obj_i.h"

#include "storaged/store/obj_idx.h"

#include "common/log.h"
#include "storaged/store/ec.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Reads and verifies shard @j's block of stripe @st into @buf (slen bytes
 * after an 8-byte CRC). true when intact. */
static bool read_block(int fd, const struct obj_geom *g, uint64_t dataid, int j,
                       uint64_t st, uint8_t *buf)
{
    uint32_t sl = obj_geom_slen(g, st);
    uint64_t off = st * (uint64_t)(g->block + OBJ_CRC_LEN), want = 0;
    struct stor_io io = {
        .fd = fd, .op = 'r', .buf = buf, .len = sl + OBJ_CRC_LEN, .off = off};

    if (fd < 0)
        return false;
    stor_io_run(&io, 1);
    if (io.res != (ssize_t)(sl + OBJ_CRC_LEN))
        return false;
    for (int q = 0; q < OBJ_CRC_LEN; q++)
        want |= (uint64_t)buf[q] << (8 * q);
    return stor_crc64(obj_block_seed(dataid, j, st), buf + OBJ_CRC_LEN, sl) ==
           want;
}

/* Checks one part of a shard-file object (sizes; every block CRC when
 * @deep) and rebuilds bad shards into synced temp files, marked in @ready
 * for heal_install. Runs without the key lock: the caller pinned the
 * version, so the source files stay. Returns shards rebuilt or -errno. */
static int heal_part(struct stor_store *s, const char *bucket,
                     const struct obj_ent *e, const struct stor_place *pl,
                     size_t p, bool deep, bool *ready)
{
    struct obj_geom g;
    int n = e->k + e->m, fds[OBJ_MAX_SHARDS], tfd[OBJ_MAX_SHARDS];
    bool bad[OBJ_MAX_SHARDS] = {0}, online[OBJ_MAX_SHARDS] = {0};
    uint8_t *buf = NULL;
    uint64_t dataid = e->parts[p].dataid, fsize;
    int nbad = 0, healed = 0, ret = 0;
    size_t stride = e->block + OBJ_CRC_LEN;

    obj_geom_init(&g, e->k, e->m, e->block, e->parts[p].size);
    fsize = obj_geom_file_size(&g);
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char path[PATH_MAX];
        struct stat st;

        fds[j] = tfd[j] = -1;
        online[j] = obj_drive_online(s, d);
        if (!online[j])
            continue;
        if (obj_path_shard(path, sizeof(path), s->drives[d].path, bucket, e->id,
                           dataid) == 0)
            fds[j] = open(path, O_RDONLY | O_CLOEXEC);
        if (fds[j] < 0 || fstat(fds[j], &st) < 0 ||
            (uint64_t)st.st_size != fsize)
            bad[j] = true;
    }
    buf = malloc((size_t)(unsigned)n * stride);
    if (buf == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    if (deep) {
        for (uint64_t st = 0; st < g.nstripes; st++) {
            for (int j = 0; j < n; j++) {
                if (!online[j] || bad[j])
                    continue;
                if (!read_block(fds[j], &g, dataid, j, st,
                                buf + (size_t)j * stride)) {
                    bad[j] = true;
                    __atomic_add_fetch(&s->corrupt_found, 1, __ATOMIC_RELAXED);
                }
                __atomic_add_fetch(&s->scan_bytes,
                                   obj_geom_slen(&g, st) + OBJ_CRC_LEN,
                                   __ATOMIC_RELAXED);
            }
        }
    }
    for (int j = 0; j < n; j++)
        if (online[j] && bad[j])
            nbad++;
    if (nbad == 0)
        goto out;
    /* rebuild into temp files */
    for (int j = 0; j < n; j++) {
        char path[PATH_MAX];
        size_t d = obj_shard_drive(s, pl, j);

        if (!(online[j] && bad[j]))
            continue;
        if (obj_path_tmp(path, sizeof(path), s->drives[d].path, dataid,
                         200 + j) == 0)
            tfd[j] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (tfd[j] < 0) { /* cannot write there now */
            bad[j] = false;
            online[j] = false;
        }
    }
    for (uint64_t st = 0; st < g.nstripes; st++) {
        bool present[OBJ_MAX_SHARDS] = {0}, want[OBJ_MAX_SHARDS] = {0};
        uint8_t *sh[OBJ_MAX_SHARDS];
        uint32_t sl = obj_geom_slen(&g, st);
        int good = 0;

        for (int j = 0; j < n; j++) {
            sh[j] = buf + (size_t)j * stride + OBJ_CRC_LEN;
            want[j] = tfd[j] >= 0;
            if (!want[j] && good < e->k && fds[j] >= 0 && !bad[j] &&
                read_block(fds[j], &g, dataid, j, st,
                           buf + (size_t)j * stride)) {
                present[j] = true;
                good++;
            }
        }
        if (good < e->k) {
            ret = -STOR_EDATA;
            goto out;
        }
        ret =
            stor_ec_reconstruct(stor_ec_get(e->k, e->m), sl, sh, present, want);
        if (ret < 0)
            goto out;
        for (int j = 0; j < n; j++) {
            uint64_t c;
            uint8_t *b = buf + (size_t)j * stride;

            if (tfd[j] < 0)
                continue;
            c = stor_crc64(obj_block_seed(dataid, j, st), sh[j], sl);
            for (int q = 0; q < OBJ_CRC_LEN; q++)
                b[q] = (uint8_t)(c >> (8 * q));
            if (stor_pwrite_all(tfd[j], b, sl + OBJ_CRC_LEN, st * stride) < 0) {
                close(tfd[j]);
                tfd[j] = -1;
            }
        }
    }
    for (int j = 0; j < n; j++) {
        if (tfd[j] < 0)
            continue;
        if (s->fsync && fsync(tfd[j]) < 0) {
            close(tfd[j]);
            tfd[j] = -1;
            continue;
        }
        close(tfd[j]);
        tfd[j] = -1;
        ready[j] = true;
        healed++;
    }
out:
    for (int j = 0; j < n; j++) {
        if (fds[j] >= 0)
            close(fds[j]);
        if (tfd[j] >= 0) {
            char path[PATH_MAX];

            close(tfd[j]);
            if (obj_path_tmp(path, sizeof(path),
                             s->drives[obj_shard_drive(s, pl, j)].path, dataid,
                             200 + j) == 0)
                unlink(path);
        }
    }
    free(buf);
    return ret < 0 ? ret : healed;
}

/* Renames the rebuilt temp shard files of part @p into place. Caller
 * holds the key lock for writing and checked the version is current. */
static int heal_install(struct stor_store *s, const char *bucket,
                        const struct obj_ent *e, const struct stor_place *pl,
                        size_t p, bool *ready, bool *meta_bad)
{
    uint64_t dataid = e->parts[p].dataid;
    int done = 0;

    for (int j = 0; j < e->k + e->m; j++) {
        char from[PATH_MAX], to[PATH_MAX], dir[PATH_MAX];
        size_t d = obj_shard_drive(s, pl, j);

        if (!ready[j])
            continue;
        if (obj_path_tmp(from, sizeof(from), s->drives[d].path, dataid,
                         200 + j) < 0 ||
            obj_path_shard(to, sizeof(to), s->drives[d].path, bucket, e->id,
                           dataid) < 0)
            continue;
        if (obj_path_dir(dir, sizeof(dir), s->drives[d].path, bucket, e->id) ==
            0)
            (void)stor_mkdirs(dir);
        if (rename(from, to) == 0) {
            done++;
            meta_bad[j] = true; /* rewrite its meta too, cheap */
        } else {
            unlink(from);
        }
        ready[j] = false;
    }
    return done;
}

/* Drops rebuilt temp files that were not installed. */
static void heal_discard(struct stor_store *s, const struct obj_ent *e,
                         const struct stor_place *pl, size_t p, bool *ready)
{
    for (int j = 0; j < e->k + e->m; j++) {
        char path[PATH_MAX];

        if (ready[j] && obj_path_tmp(path, sizeof(path),
                                     s->drives[obj_shard_drive(s, pl, j)].path,
                                     e->parts[p].dataid, 200 + j) == 0)
            unlink(path);
        ready[j] = false;
    }
}

/* Is @e still the current version of its key? Caller holds the key lock. */
static bool still_current(struct stor_store *s, const char *bucket,
                          const struct obj_ent *e)
{
    struct obj_ent *c;
    bool cur = obj_cur_lookup(s, bucket, e->key, e->key_len, &c) == 0 &&
               c->version == e->version;

    obj_ent_free(c);
    return cur;
}

/* Replaces the extent records the index keeps for current entry @e with
 * @xref (k + m; file 0 where a shard is missing). Caller holds the key's
 * write lock and checked that @e is current. */
static void ext_index_refs(struct stor_store *s, const char *bucket,
                           const struct obj_ent *e, const struct obj_xref *xref)
{
    struct obj_ent *c = obj_ent_dup(e), *old = NULL;
    size_t n = (size_t)(e->k + e->m);

    if (c == NULL)
        return;
    if (c->xref == NULL)
        c->xref = calloc(n, sizeof(*c->xref));
    if (c->xref) {
        memcpy(c->xref, xref, n * sizeof(*xref));
        if (obj_cur_set(s, bucket, c, NULL, &old) == 0)
            obj_ent_free(old);
    }
    obj_ent_free(c);
}

/* Contract in obj_i.h. */
int obj_heal_object(struct stor_store *s, const char *bucket, const char *key,
                    size_t key_len, bool deep)
{
    struct obj_ent *e = NULL;
    struct stor_place pl;
    pthread_rwlock_t *kl;
    uint8_t id[16];
    bool meta_bad[OBJ_MAX_SHARDS] = {0};
    uint8_t *shards = NULL;
    bool *ready = NULL, pinned = false;
    int n, healed = 0, ret = 0, nready = 0;
    size_t L = 0;

    obj_key_id(s, key, key_len, id);
    kl = obj_klock(s, id);
    pthread_rwlock_rdlock(kl);
    (void)obj_cur_lookup(s, bucket, key, key_len, &e);
    if (e && !e->inl && obj_pin_get(e->id, e->version) == 0)
        pinned = true;
    pthread_rwlock_unlock(kl);
    /* from here on no lock: checking and rebuilding may take long */
    if (e == NULL)
        goto out;
    /* a version kept in place lives on its base's placement */
    obj_ver_place(s, bucket, key, key_len, e, &pl);
    n = e->k + e->m;
    if (e->inl)
        L = (size_t)((e->size + (uint64_t)e->k - 1) / (uint64_t)e->k);
    shards = calloc((size_t)n, L ? L : 1);
    if (shards == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    /* metas (and inline shards) */
    {
        bool present[OBJ_MAX_SHARDS] = {0};
        uint8_t *sh[OBJ_MAX_SHARDS];
        struct obj_xref xref[OBJ_MAX_SHARDS] = {0}; /* extent objects */
        int good = 0;

        for (int j = 0; j < n; j++) {
            size_t d = obj_shard_drive(s, &pl, j);
            char path[PATH_MAX];
            struct stor_meta m;
            int r;

            sh[j] = shards + (size_t)j * L;
            if (!obj_drive_online(s, d))
                continue;
            if (obj_ver_meta_path(s, d, bucket, e, path, sizeof(path)) < 0)
                continue;
            r = stor_meta_read_file(path, &m);
            if (r < 0) {
                if (r == -EBADMSG)
                    __atomic_add_fetch(&s->corrupt_found, 1, __ATOMIC_RELAXED);
                meta_bad[j] = true;
                continue;
            }
            if (m.type != STOR_META_OBJECT || m.version != e->version ||
                m.shard != j || (e->inl && m.inl_len != L) ||
                (e->inl && m.has_xref && !e->ext)) {
                meta_bad[j] = true;
            } else if (e->inl && m.has_xref) { /* its extent record */
                struct obj_xref x = {.file = m.xfile, .off = m.xoff};

                r = obj_ext_read(s, d, &x, e->id, e->version, j, L, sh[j]);
                if (r == 0) {
                    present[j] = true;
                    good++;
                    xref[j] = x;
                } else {
                    if (r == -EBADMSG)
                        __atomic_add_fetch(&s->corrupt_found, 1,
                                           __ATOMIC_RELAXED);
                    meta_bad[j] = true;
                }
            } else {
                present[j] = true;
                good++;
                if (e->inl && L)
                    memcpy(sh[j], m.inl, L);
            }
            stor_meta_fini(&m);
        }
        if (e->inl) {
            int nbad = 0;

            for (int j = 0; j < n; j++)
                nbad += meta_bad[j];
            if (nbad > 0) {
                if (good < e->k) {
                    ret = -STOR_EDATA;
                    goto out;
                }
                ret = stor_ec_reconstruct(stor_ec_get(e->k, e->m), L, sh,
                                          present, meta_bad);
                if (ret < 0)
                    goto out;
                pthread_rwlock_wrlock(kl);
                if (still_current(s, bucket, e) && e->at_bucket) {
                    healed += obj_ver_rewrite_kept(s, e, sh, L, meta_bad);
                } else if (still_current(s, bucket, e)) {
                    healed +=
                        obj_rewrite_metas(s, bucket, e, sh, L, meta_bad, xref);
                    if (e->ext)
                        ext_index_refs(s, bucket, e, xref);
                }
                pthread_rwlock_unlock(kl);
            } else if (e->ext && good == n &&
                       (e->xref == NULL ||
                        memcmp(e->xref, xref, (size_t)n * sizeof(*xref)))) {
                /* every shard checks out, but the index does not know
                 * where (rebuilt from the metas): tell it */
                pthread_rwlock_wrlock(kl);
                if (still_current(s, bucket, e))
                    ext_index_refs(s, bucket, e, xref);
                pthread_rwlock_unlock(kl);
            }
            __atomic_add_fetch(&s->scan_bytes, e->size, __ATOMIC_RELAXED);
            goto out;
        }
    }
    ready = calloc(e->nparts ? e->nparts : 1, OBJ_MAX_SHARDS);
    if (ready == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    for (size_t p = 0; p < e->nparts; p++) {
        int r =
            heal_part(s, bucket, e, &pl, p, deep, ready + p * OBJ_MAX_SHARDS);

        if (r < 0) {
            ret = r;
            break;
        }
        nready += r;
    }
    {
        int nbad = 0;

        for (int j = 0; j < n; j++)
            nbad += meta_bad[j];
        if (nbad == 0 && nready == 0)
            goto out_parts;
    }
    pthread_rwlock_wrlock(kl);
    if (still_current(s, bucket, e)) {
        for (size_t p = 0; p < e->nparts && ret == 0; p++)
            healed += heal_install(s, bucket, e, &pl, p,
                                   ready + p * OBJ_MAX_SHARDS, meta_bad);
        {
            int nbad = 0;

            for (int j = 0; j < n; j++)
                nbad += meta_bad[j];
            if (nbad)
                (void)obj_rewrite_metas(s, bucket, e, NULL, 0, meta_bad, NULL);
        }
    }
    pthread_rwlock_unlock(kl);
out_parts:
    for (size_t p = 0; p < e->nparts; p++)
        heal_discard(s, e, &pl, p, ready + p * OBJ_MAX_SHARDS);
out:
    if (pinned)
        obj_pin_put(s, e->id, e->version);
    free(ready);
    if (healed > 0) {
        __atomic_add_fetch(&s->shards_healed, (uint64_t)healed,
                           __ATOMIC_RELAXED);
        cm_log(CM_LOG_INFO, 0, "heal: %s/%.*s: %d shard(s) rebuilt", bucket,
               (int)CM_MIN(key_len, 200), key, healed);
    }
    free(shards);
    obj_ent_free(e);
    return ret < 0 ? ret : healed;
}

/* ---- threads ---- */

/* Seconds between background scans: STORAGED_SCAN_INTERVAL when it is a
 * whole positive number of seconds (at most a year), else 3600. */
static int scan_interval_s(void)
{
    const char *v = getenv("STORAGED_SCAN_INTERVAL");
    char *end = NULL;
    long n = v ? strtol(v, &end, 10) : 0;

    return n > 0 && n <= 86400 * 365 && *end == 0 ? (int)n : 3600;
}

/* Sleeps up to @ms or until stopping (or, with @queue, until heal work
 * is queued); returns true when stopping. */
static bool nap_on(struct stor_store *s, long ms, bool queue)
{
    struct timespec ts;
    bool stop;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->heal_lock);
    if (!s->stopping && !(queue && s->nhealq > 0))
        pthread_cond_timedwait(&s->heal_cond, &s->heal_lock, &ts);
    stop = s->stopping;
    pthread_mutex_unlock(&s->heal_lock);
    return stop;
}

/* nap_on() that also wakes for queued heal work. */
static bool nap(struct stor_store *s, long ms)
{
    return nap_on(s, ms, true);
}

/* Drains the heal queue. */
static void drain_queue(struct stor_store *s)
{
    for (;;) {
        struct obj_healreq r;

        pthread_mutex_lock(&s->heal_lock);
        if (s->nhealq == 0 || s->stopping) {
            pthread_mutex_unlock(&s->heal_lock);
            return;
        }
        r = s->healq[0];
        memmove(s->healq, s->healq + 1, (s->nhealq - 1) * sizeof(r));
        s->nhealq--;
        pthread_mutex_unlock(&s->heal_lock);
        (void)obj_heal_object(s, r.bucket, r.key, r.key_len, true);
        free(r.key);
    }
}

/* Scanner pause after each object: 10 ms + 10 ms per request in flight, at
 * most 250 ms. */
static long backoff_ms(struct stor_store *s)
{
    long fg = __atomic_load_n(&s->fg, __ATOMIC_RELAXED);
    long ms = 10 + fg * 10;

    return ms > 250 ? 250 : ms;
}

/* Multipart uploads older than STORAGED_MPU_EXPIRY seconds (default 7
 * days) are abandoned: abort them, which removes their parts. */
static void expire_uploads(struct stor_store *s)
{
    const char *v = getenv("STORAGED_MPU_EXPIRY");
    char *end = NULL;
    long exp = v ? strtol(v, &end, 10) : 0;
    int64_t cutoff;
    int ret;

    if (exp <= 0 || (end && *end))
        exp = 7 * 86400;
    cutoff = obj_now_ns() - (int64_t)exp * 1000000000LL;
    for (;;) {
        char bucket[64] = "", uid[STOR_UPLOAD_ID_MAX], *key = NULL;
        size_t kl = 0;

        pthread_rwlock_rdlock(&s->lock);
        for (size_t i = 0; i < s->nbuckets && key == NULL; i++) {
            struct obj_bucket *b = s->buckets[i];

            pthread_rwlock_rdlock(&b->lock);
            for (size_t u = 0; u < b->nup && key == NULL; u++) {
                /* one a Complete runs on is not abandoned (and its abort
                 * would answer NoSuchUpload: this loop would find it
                 * again and again) */
                if (b->up[u]->initiated_ns >= cutoff || b->up[u]->completing)
                    continue;
                key = malloc(b->up[u]->key_len + 1);
                if (key) {
                    kl = b->up[u]->key_len;
                    memcpy(key, b->up[u]->key, kl);
                    key[kl] = 0;
                    memcpy(uid, b->up[u]->uid, sizeof(uid));
                    memcpy(bucket, b->name, sizeof(bucket));
                }
            }
            pthread_rwlock_unlock(&b->lock);
        }
        pthread_rwlock_unlock(&s->lock);
        if (key == NULL)
            return;
        ret = stor_mpu_abort(s, bucket, key, kl, uid);
        free(key);
        if (ret < 0)
            return; /* claimed by a Complete meanwhile: the next cycle */
        cm_log(CM_LOG_INFO, 0, "scan: %s: abandoned upload %s removed", bucket,
               uid);
    }
}

/* One full pass over every object; returns true when stopping. */
static bool scan_cycle(struct stor_store *s)
{
    struct timespec t0, t1;
    uint64_t total = 0, done = 0;
    char **names = NULL;
    size_t nb = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_rwlock_rdlock(&s->lock);
    names = calloc(s->nbuckets ? s->nbuckets : 1, sizeof(*names));
    for (size_t i = 0; names && i < s->nbuckets; i++) {
        uint64_t n = 0;

        names[i] = strdup(s->buckets[i]->name);
        if (obj_idx_bucket_get(s->idx, s->buckets[i]->name, NULL, &n) == 0)
            total += n;
        nb++;
    }
    pthread_rwlock_unlock(&s->lock);
    for (size_t bi = 0; bi < nb; bi++) {
        char *last = NULL;
        size_t last_len = 0;

        for (;;) {
            struct obj_idx_cur *c = NULL;
            struct obj_idx_view v;
            char *key = NULL;
            size_t kl = 0;

            drain_queue(s);
            /* a cursor step from the last key: nothing is held between
             * objects, and nothing grows with the bucket */
            pthread_rwlock_rdlock(&s->lock);
            if (names[bi] && obj_bucket_find(s, names[bi]) &&
                obj_idx_cur_open(s->idx, names[bi], &c) < 0)
                c = NULL;
            pthread_rwlock_unlock(&s->lock);
            if (c && obj_idx_cur_seek(c, last, last_len, last != NULL) == 0 &&
                obj_idx_cur_next(c, &v) == 0) {
                kl = v.key_len;
                key = malloc(kl + 1);
                if (key) {
                    memcpy(key, v.key, kl);
                    key[kl] = 0;
                }
            }
            obj_idx_cur_close(c);
            if (key == NULL)
                break;
            (void)obj_heal_object(s, names[bi], key, kl, true);
            __atomic_add_fetch(&s->scan_objects, 1, __ATOMIC_RELAXED);
            done++;
            pthread_mutex_lock(&s->heal_lock);
            s->scan_percent =
                total ? 100.0 * (double)done / (double)total : 100.0;
            pthread_mutex_unlock(&s->heal_lock);
            free(last);
            last = key;
            last_len = kl;
            if (nap(s, backoff_ms(s))) {
                free(last);
                goto stop;
            }
        }
        free(last);
    }
    expire_uploads(s);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    __atomic_add_fetch(&s->scan_cycles, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&s->heal_lock);
    s->scan_percent = 100.0;
    s->scan_last_cycle_s = (double)(t1.tv_sec - t0.tv_sec) +
                           (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    pthread_mutex_unlock(&s->heal_lock);
    for (size_t i = 0; i < nb; i++)
        free(names[i]);
    free(names);
    return false;
stop:
    for (size_t i = 0; i < nb; i++)
        free(names[i]);
    free(names);
    return true;
}

/* Scanner thread: drains the heal queue, runs a cycle every interval. */
static void *scan_main(void *arg)
{
    struct stor_store *s = arg;
    time_t next = time(NULL) + CM_MIN(5, scan_interval_s());
    bool merge;

    for (;;) {
        if (nap(s, 1000))
            break;
        drain_queue(s);
        pthread_mutex_lock(&s->heal_lock);
        if (s->rescan) {
            s->rescan = false;
            next = 0;
        }
        merge = s->merge_wanted;
        s->merge_wanted = false;
        pthread_mutex_unlock(&s->heal_lock);
        if (merge && s->merge_fn)
            s->merge_fn(s); /* before the scan: it walks the index */
        if (time(NULL) >= next) {
            if (scan_cycle(s))
                break;
            next = time(NULL) + scan_interval_s();
        }
    }
    return NULL;
}

/* True for an existing directory with no entries at all. */
static bool dir_is_empty(const char *path)
{
    DIR *dp = opendir(path);
    struct dirent *de;
    bool empty = true;

    if (dp == NULL)
        return false;
    while ((de = readdir(dp)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            empty = false;
    closedir(dp);
    return empty;
}

/* Is the drive answering with our format record? */
static bool probe_drive(struct stor_store *s, size_t d)
{
    struct stor_format f;
    int ret = stor_format_read(s->drives[d].path, &f);

    if (ret == -ENOENT && !obj_drive_online(s, d) &&
        dir_is_empty(s->drives[d].path)) {
        /* an empty directory where a lost drive was: a hot replacement.
         * Format it into the slot; the rescan fills it. */
        memset(&f, 0, sizeof(f));
        memcpy(f.deployment, s->deployment, sizeof(f.deployment));
        f.set = s->drives[d].set;
        f.pos = s->drives[d].pos;
        f.nsets = s->nsets;
        f.set_size = s->set_size;
        f.k = s->K;
        f.m = s->M;
        if (stor_format_write(s->drives[d].path, &f) < 0 ||
            obj_drive_prepare(&s->drives[d]) < 0)
            return false;
        cm_log(CM_LOG_INFO, 0,
               "drive %s: new empty drive formatted into set "
               "%d position %d",
               s->drives[d].path, f.set, f.pos);
        ret = 0;
    }
    if (ret < 0)
        return false;
    return strcmp(f.deployment, s->deployment) == 0 &&
           f.set == s->drives[d].set && f.pos == s->drives[d].pos;
}

/* Contract in obj_i.h. */
void obj_probe_drives(struct stor_store *s)
{
    for (size_t d = 0; d < s->ndrives; d++) {
        bool ok = probe_drive(s, d);
        bool was = obj_drive_online(s, d);

        if (was && ok) {
            obj_ext_check(s, d); /* the extent file still the path's */
        } else if (was && !ok) {
            __atomic_store_n(&s->drives[d].online, false, __ATOMIC_RELEASE);
            cm_log(CM_LOG_WARN, 0, "drive %s: offline (probe failed)",
                   s->drives[d].path);
        } else if (!was && ok) {
            char path[PATH_MAX];

            snprintf(path, sizeof(path), "%s/" STOR_TMP_DIR, s->drives[d].path);
            (void)stor_mkdirs(path);
            obj_ext_reopen(s, d); /* back, or a replaced disk: its files */
            __atomic_store_n(&s->drives[d].stale, true, __ATOMIC_RELEASE);
            __atomic_store_n(&s->drives[d].online, true, __ATOMIC_RELEASE);
            cm_log(CM_LOG_INFO, 0, "drive %s: back online, healing",
                   s->drives[d].path);
            pthread_mutex_lock(&s->heal_lock);
            s->rescan = true;
            /* the index was rebuilt while it was away: its keys are put
             * back (FORMAT.md "Rebuilt with drives away") */
            if (s->idx_away &&
                __atomic_load_n(&s->idx_away[d], __ATOMIC_RELAXED))
                s->merge_wanted = true;
            pthread_mutex_unlock(&s->heal_lock);
        }
    }
}

/* Probe thread: obj_probe_drives() about once a second. */
static void *probe_main(void *arg)
{
    struct stor_store *s = arg;

    time_t last = 0;

    while (!nap_on(s, 1000, false)) {
        if (time(NULL) == last)
            continue; /* woken by heal work: probe at most once a second */
        last = time(NULL);
        obj_probe_drives(s);
    }
    return NULL;
}

/* Contract in obj_i.h (STORAGED_NO_BACKGROUND skips them). */
int obj_threads_start(struct stor_store *s)
{
    int ret;

    if (getenv("STORAGED_NO_BACKGROUND"))
        return 0;
    ret = pthread_create(&s->scan_thread, NULL, scan_main, s);
    if (ret != 0)
        return -ret;
    ret = pthread_create(&s->probe_thread, NULL, probe_main, s);
    if (ret != 0) {
        pthread_mutex_lock(&s->heal_lock);
        s->stopping = true;
        pthread_cond_broadcast(&s->heal_cond);
        pthread_mutex_unlock(&s->heal_lock);
        pthread_join(s->scan_thread, NULL);
        return -ret;
    }
    __atomic_store_n(&s->threads_started, true, __ATOMIC_RELEASE);
    return 0;
}

/* Contract in obj_i.h: wakes and joins both threads. */
void obj_threads_stop(struct stor_store *s)
{
    if (!s->threads_started)
        return;
    pthread_mutex_lock(&s->heal_lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->heal_cond);
    pthread_mutex_unlock(&s->heal_lock);
    pthread_join(s->scan_thread, NULL);
    pthread_join(s->probe_thread, NULL);
    __atomic_store_n(&s->threads_started, false, __ATOMIC_RELAXED);
}
