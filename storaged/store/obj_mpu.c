/* storaged/store/obj_mpu.c - multipart uploads: create, parts, complete,
 * abort, list parts and uploads.
 *
 * DESIGN: parts are coded as they arrive (the same streaming engine as PUT,
 * K+M geometry) into the upload's directory on each drive of the object's
 * set; completion links their shard files into the object directory and
 * commits one meta listing the parts (obj_commit): no data is copied; the
 * upload's names go only once the commit has succeeded.
 * Uploads in progress live in memory per bucket (b->up, under b->lock) and
 * are loaded from the drives at start (obj_load.c). */
#include "storaged/store/obj_i.h"

#include "storaged/store/gsync.h"

#include "common/log.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- multipart ---- */

/* Finds upload @uid of @key in @b (caller holds b->lock); *idx its slot. */
static struct obj_upload *upload_find(struct obj_bucket *b, const char *uid,
                                      const char *key, size_t key_len,
                                      size_t *idx)
{
    for (size_t i = 0; i < b->nup; i++) {
        struct obj_upload *u = b->up[i];

        if (strcmp(u->uid, uid) == 0 && u->key_len == key_len &&
            memcmp(u->key, key, key_len) == 0) {
            if (idx)
                *idx = i;
            return u;
        }
    }
    return NULL;
}

/* The one way to an upload: s->lock (read), bucket @bucket, its lock
 * (write with @wr, else read), upload @uid of @key. On 0 both locks are
 * held and *bo, *uo (and *idx, its slot, when not NULL) are set: release
 * them with upload_unlock(). -STOR_ENOBUCKET or -STOR_ENOUPLOAD with no
 * lock held. */
static int upload_lock(struct stor_store *s, const char *bucket,
                       const char *key, size_t key_len, const char *uid,
                       bool wr, struct obj_bucket **bo, struct obj_upload **uo,
                       size_t *idx)
{
    struct obj_bucket *b;
    struct obj_upload *u;

    pthread_rwlock_rdlock(&s->lock);
    b = obj_bucket_find(s, bucket);
    if (b == NULL) {
        pthread_rwlock_unlock(&s->lock);
        return -STOR_ENOBUCKET;
    }
    if (wr)
        pthread_rwlock_wrlock(&b->lock);
    else
        pthread_rwlock_rdlock(&b->lock);
    u = upload_find(b, uid, key, key_len, idx);
    if (u == NULL) {
        pthread_rwlock_unlock(&b->lock);
        pthread_rwlock_unlock(&s->lock);
        return -STOR_ENOUPLOAD;
    }
    *bo = b;
    *uo = u;
    return 0;
}

/* Drops what a successful upload_lock() took. */
static void upload_unlock(struct stor_store *s, struct obj_bucket *b)
{
    pthread_rwlock_unlock(&b->lock);
    pthread_rwlock_unlock(&s->lock);
}

/* Removes @u, found at slot @idx, from @b (caller holds b->lock for
 * writing); the caller frees it. */
static void upload_unlink(struct obj_bucket *b, size_t idx)
{
    memmove(b->up + idx, b->up + idx + 1, (b->nup - idx - 1) * sizeof(*b->up));
    b->nup--;
}

/* Contract in obj_i.h. */
int obj_upload_insert(struct obj_bucket *b, struct obj_upload *u)
{
    size_t at = 0;

    if (b->nup == b->upcap) {
        size_t nc = b->upcap ? 2 * b->upcap : 8;
        struct obj_upload **nv = realloc(b->up, nc * sizeof(*nv));

        if (nv == NULL)
            return -ENOMEM;
        b->up = nv;
        b->upcap = nc;
    }
    while (at < b->nup) {
        int c =
            obj_key_cmp(b->up[at]->key, b->up[at]->key_len, u->key, u->key_len);

        if (c > 0 || (c == 0 && strcmp(b->up[at]->uid, u->uid) > 0))
            break;
        at++;
    }
    memmove(b->up + at + 1, b->up + at, (b->nup - at) * sizeof(*b->up));
    b->up[at] = u;
    b->nup++;
    return 0;
}

/* Contract in obj_i.h. 0 or -ENOMEM. */
int obj_upload_set_part(struct obj_upload *u, const struct stor_meta_part *np,
                        struct stor_hdr *hdrs, size_t nhdrs, uint64_t *old)
{
    size_t at = 0;

    *old = 0;
    while (at < u->nparts && u->parts[at].number < np->number)
        at++;
    if (at < u->nparts && u->parts[at].number == np->number) {
        *old = u->parts[at].dataid;
        u->parts[at] = *np;
        obj_hdrs_free(u->phdrs[at].hdrs, u->phdrs[at].n);
        u->phdrs[at].hdrs = hdrs;
        u->phdrs[at].n = nhdrs;
        return 0;
    }
    if (u->nparts == u->pcap) {
        size_t nc = u->pcap ? 2 * u->pcap : 8;
        struct stor_meta_part *nv = realloc(u->parts, nc * sizeof(*nv));
        struct obj_part_hdrs *nh;

        if (nv == NULL) {
            obj_hdrs_free(hdrs, nhdrs);
            return -ENOMEM;
        }
        u->parts = nv;
        nh = realloc(u->phdrs, nc * sizeof(*nh));
        if (nh == NULL) {
            obj_hdrs_free(hdrs, nhdrs);
            return -ENOMEM;
        }
        u->phdrs = nh;
        u->pcap = nc;
    }
    memmove(u->parts + at + 1, u->parts + at,
            (u->nparts - at) * sizeof(*u->parts));
    memmove(u->phdrs + at + 1, u->phdrs + at,
            (u->nparts - at) * sizeof(*u->phdrs));
    u->parts[at] = *np;
    u->phdrs[at].hdrs = hdrs;
    u->phdrs[at].n = nhdrs;
    u->nparts++;
    return 0;
}

/* The object headers Complete makes of the listed parts' own headers
 * (@ph[i] for the i-th listed part): for each name any of them has, one
 * header STOR_HDR_PART_PFX + name whose value is the parts' values in
 * object order joined by ',' (empty for a part without it), appended to
 * *@h (*@n). The values are the S3 layer's (hex, base64): never a ','.
 * 0 or -ENOMEM. */
static int part_hdrs_join(const struct obj_part_hdrs *const *ph, size_t np,
                          struct stor_hdr **h, size_t *n)
{
    for (size_t i = 0; i < np; i++) {
        for (size_t j = 0; j < ph[i]->n; j++) {
            const char *name = ph[i]->hdrs[j].name;
            struct cm_buf v;
            struct stor_hdr *nh;
            char *full;
            size_t pl, nl;
            bool seen = false;

            for (size_t q = 0; q < i && !seen; q++)
                for (size_t t = 0; t < ph[q]->n && !seen; t++)
                    seen = strcmp(ph[q]->hdrs[t].name, name) == 0;
            if (seen) /* joined when its first part was */
                continue;
            cm_buf_init(&v, CM_BUF_NOLIMIT);
            for (size_t q = 0; q < np; q++) {
                const char *pv = "";

                for (size_t t = 0; t < ph[q]->n; t++)
                    if (strcmp(ph[q]->hdrs[t].name, name) == 0)
                        pv = ph[q]->hdrs[t].value;
                if ((q > 0 && cm_buf_append(&v, ",", 1) < 0) ||
                    cm_buf_append(&v, pv, strlen(pv)) < 0 ||
                    (q + 1 == np && cm_buf_append(&v, "", 1) < 0)) {
                    cm_buf_fini(&v);
                    return -ENOMEM;
                }
            }
            pl = strlen(STOR_HDR_PART_PFX);
            nl = strlen(name);
            full = malloc(pl + nl + 1);
            nh = full ? realloc(*h, (*n + 1) * sizeof(*nh)) : NULL;
            if (nh == NULL) {
                free(full);
                cm_buf_fini(&v);
                return -ENOMEM;
            }
            memcpy(full, STOR_HDR_PART_PFX, pl);
            memcpy(full + pl, name, nl + 1);
            *h = nh;
            nh[*n].name = full;
            nh[*n].value = v.data; /* the buffer's bytes, NUL-terminated */
            (*n)++;
        }
    }
    return 0;
}

/* Contract in object.h. */
void stor_store_set_mpu_hook(struct stor_store *s, stor_mpu_hook_fn *fn,
                             void *arg)
{
    s->mpu_hook = fn;
    s->mpu_hook_arg = arg;
}

/* Contract in object.h. */
int stor_mpu_upload_headers(struct stor_store *s, const char *bucket,
                            const char *key, size_t key_len,
                            const char *upload_id, struct stor_hdr **out,
                            size_t *n)
{
    struct obj_bucket *b;
    struct obj_upload *u;
    int ret = 0;

    *out = NULL;
    *n = 0;
    if (!obj_valid_key(key, key_len) || upload_id == NULL)
        return -STOR_EINVAL;
    ret = upload_lock(s, bucket, key, key_len, upload_id, false, &b, &u, NULL);
    if (ret < 0)
        return ret;
    if (obj_hdrs_copy(u->hdrs, u->nhdrs, out) < 0)
        ret = -ENOMEM;
    else
        *n = u->nhdrs;
    upload_unlock(s, b);
    return ret;
}

/* Fails shard @j's drive at step @op of write_upload_file (@tmp: its temp
 * file, removed when given). */
static void upload_file_fail(struct stor_store *s, const struct stor_place *pl,
                             int j, int err, const char *tmp, const char *op,
                             bool *ok)
{
    if (tmp != NULL)
        unlink(tmp);
    obj_drive_fail_at(s, obj_shard_drive(s, pl, j), err, op);
    ok[j] = false;
}

/* Writes @m (one copy per placement shard, shard index set) to
 * DRIVE/.ecfs.sys/mpu/BUCKET/UID/@file via temp + rename. Returns the
 * number of drives that have it and fills ok[].
 * DESIGN: the same order as a commit's (FORMAT.md "Writes"): every temp
 * file is written first, one barrier (gsync.h: one io_uring batch of
 * fsyncs, or one syncfs round) makes them durable together, then the
 * renames, then one barrier over the upload directories. Until session 15
 * each drive had its fsync and its directory's fsync one after another:
 * 32 serial fsyncs per part at 12+4, which held a 1 GiB upload of 8 MiB
 * parts to a third of its speed on a journaled ext4. */
static int write_upload_file(struct stor_store *s, const char *bucket,
                             const char *uid, const struct stor_place *pl,
                             int n, struct stor_meta *m, const char *file,
                             bool *ok)
{
    struct stor_sync_item it[OBJ_MAX_SHARDS];
    int fds[OBJ_MAX_SHARDS], map[OBJ_MAX_SHARDS], oerr[OBJ_MAX_SHARDS];
    size_t drv[OBJ_MAX_SHARDS];
    uint64_t ver = obj_next_version(s), mark = 0;
    char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX];
    size_t ni = 0, nd = 0;
    int nok = 0;

    for (int j = 0; j < n; j++) {
        fds[j] = -1;
        if (ok[j] && obj_drive_online(s, obj_shard_drive(s, pl, j)))
            drv[nd++] = obj_shard_drive(s, pl, j);
    }
    if (s->fsync)
        mark = stor_gsync_mark(s->gs, drv, nd);
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        struct cm_buf buf;
        int ret;

        if (!ok[j] || !obj_drive_online(s, d)) {
            ok[j] = false;
            continue;
        }
        ok[j] = false;
        if (obj_path_upload(dir, sizeof(dir), s->drives[d].path, bucket, uid,
                            NULL) < 0 ||
            obj_path_tmp(tmp, sizeof(tmp), s->drives[d].path, ver, j) < 0)
            continue;
        if (stor_mkdirs(dir) < 0)
            continue;
        cm_buf_init(&buf, STOR_META_MAX);
        m->shard = j;
        if (stor_meta_encode(m, &buf) < 0) {
            cm_buf_fini(&buf);
            continue;
        }
        fds[j] = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fds[j] < 0) {
            obj_drive_fail(s, d, errno);
            cm_buf_fini(&buf);
            continue;
        }
        ret = stor_pwrite_all(fds[j], buf.data, buf.len, 0);
        cm_buf_fini(&buf);
        ok[j] = true;
        if (ret < 0) {
            upload_file_fail(s, pl, j, -ret, tmp, "upload file: write", ok);
            continue;
        }
        map[ni] = j;
        it[ni++] = (struct stor_sync_item){.drive = d, .fd = fds[j]};
    }
    /* barrier 1: the temp files */
    if (s->fsync && ni > 0)
        stor_gsync_barrier(s->gs, mark, it, ni);
    for (size_t i = 0; i < ni; i++) {
        int j = map[i];
        size_t d = obj_shard_drive(s, pl, j);

        if (obj_path_tmp(tmp, sizeof(tmp), s->drives[d].path, ver, j) < 0)
            continue; /* cannot fail: it was made above */
        if (s->fsync && it[i].res < 0) {
            upload_file_fail(s, pl, j, -it[i].res, tmp, "upload file: fsync",
                             ok);
            continue;
        }
        if (obj_path_upload(path, sizeof(path), s->drives[d].path, bucket, uid,
                            file) < 0 ||
            rename(tmp, path) < 0)
            upload_file_fail(s, pl, j, errno, tmp, "upload file: rename", ok);
    }
    for (int j = 0; j < n; j++)
        if (fds[j] >= 0)
            close(fds[j]);
    /* barrier 2: the upload directories (their new names) */
    ni = 0;
    for (int j = 0; s->fsync && j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        int fd = -1;

        if (!ok[j])
            continue;
        if (!stor_gsync_is_fs(s->gs, d) &&
            obj_path_upload(dir, sizeof(dir), s->drives[d].path, bucket, uid,
                            NULL) == 0)
            fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        oerr[ni] = fd < 0 ? errno : 0;
        map[ni] = j;
        it[ni++] = (struct stor_sync_item){.drive = d, .fd = fd};
    }
    if (ni > 0)
        stor_gsync_barrier(s->gs, mark, it, ni);
    for (size_t i = 0; i < ni; i++) {
        if (it[i].fd >= 0)
            close(it[i].fd);
        if (it[i].res == -EBADF && it[i].fd < 0 && oerr[i])
            it[i].res = -oerr[i]; /* the open's errno, not "no fd" */
        if (it[i].res < 0)
            upload_file_fail(s, pl, map[i], -it[i].res, NULL,
                             "upload file: directory fsync", ok);
    }
    for (int j = 0; j < n; j++)
        nok += ok[j];
    return nok;
}

/* Removes upload @uid's directory on every drive of its set. */
static void rm_upload_dirs(struct stor_store *s, const char *bucket,
                           const char *uid, const struct stor_place *pl)
{
    for (int j = 0; j < s->set_size; j++) {
        char dir[PATH_MAX];

        if (obj_path_upload(dir, sizeof(dir),
                            s->drives[obj_shard_drive(s, pl, j)].path, bucket,
                            uid, NULL) == 0)
            (void)stor_rmtree(dir);
    }
}

/* Contract in object.h: upload.m on the object's set. */
int stor_mpu_create(struct stor_store *s, const char *bucket, const char *key,
                    size_t key_len, const struct stor_hdr *hdrs, size_t nhdrs,
                    char upload_id[STOR_UPLOAD_ID_MAX])
{
    struct obj_upload *u;
    struct obj_bucket *b;
    struct stor_place pl;
    struct stor_meta m = {0};
    bool ok[OBJ_MAX_SHARDS];
    uint8_t rnd[16];
    int ret;

    if (!obj_valid_key(key, key_len))
        return -STOR_EINVAL;
    ret = stor_bucket_stat(s, bucket, NULL);
    if (ret < 0)
        return ret;
    obj_place(s, bucket, key, key_len, &pl);
    if (obj_set_online(s, pl.set) < s->wq)
        return -STOR_EQUORUM;
    u = calloc(1, sizeof(*u));
    if (u == NULL)
        return -ENOMEM;
    u->key = obj_memdup0(key, key_len);
    if (u->key == NULL || obj_hdrs_copy(hdrs, nhdrs, &u->hdrs) < 0) {
        obj_upload_free(u);
        return -ENOMEM;
    }
    u->nhdrs = nhdrs;
    u->key_len = key_len;
    obj_key_id(s, key, key_len, u->id);
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
        obj_upload_free(u);
        return -EIO;
    }
    obj_hex(rnd, 16, u->uid);
    u->initiated_ns = obj_now_ns();
    m.type = STOR_META_UPLOAD;
    m.k = s->K;
    m.m = s->M;
    m.block = OBJ_BLOCK;
    m.version = obj_next_version(s);
    m.mtime_ns = u->initiated_ns;
    memcpy(m.etag, u->uid, 33); /* 32 hex + NUL */
    m.key = u->key;
    m.key_len = key_len;
    m.hdrs = u->hdrs;
    m.nhdrs = nhdrs;
    for (int j = 0; j < OBJ_MAX_SHARDS; j++)
        ok[j] = true;
    if (write_upload_file(s, bucket, u->uid, &pl, s->K + s->M, &m, "upload.m",
                          ok) < obj_write_quorum(s, s->K, s->M)) {
        rm_upload_dirs(s, bucket, u->uid, &pl);
        obj_upload_free(u);
        return -STOR_EQUORUM;
    }
    pthread_rwlock_rdlock(&s->lock);
    b = obj_bucket_find(s, bucket);
    if (b == NULL) {
        ret = -STOR_ENOBUCKET;
    } else {
        pthread_rwlock_wrlock(&b->lock);
        ret = obj_upload_insert(b, u);
        pthread_rwlock_unlock(&b->lock);
    }
    pthread_rwlock_unlock(&s->lock);
    if (ret < 0) {
        rm_upload_dirs(s, bucket, u->uid, &pl);
        obj_upload_free(u);
        return ret;
    }
    snprintf(upload_id, STOR_UPLOAD_ID_MAX, "%s", u->uid);
    return 0;
}

/* Looks an upload up; 0 when it exists. */
static int upload_exists(struct stor_store *s, const char *bucket,
                         const char *key, size_t key_len, const char *uid)
{
    struct obj_bucket *b;
    struct obj_upload *u;
    int ret = upload_lock(s, bucket, key, key_len, uid, false, &b, &u, NULL);

    if (ret == 0)
        upload_unlock(s, b);
    return ret;
}

static obj_part_commit_fn obj_part_commit;

/* Contract in object.h. */
int stor_mpu_part_begin(struct stor_store *s, const char *bucket,
                        const char *key, size_t key_len, const char *upload_id,
                        int part, int64_t size, struct stor_put **out)
{
    struct stor_put *p;
    int ret;

    if (part < 1 || part > STOR_MAX_PARTS || upload_id == NULL)
        return -STOR_EINVAL;
    if (!obj_valid_key(key, key_len))
        return -STOR_EINVAL;
    ret = upload_exists(s, bucket, key, key_len, upload_id);
    if (ret < 0)
        return ret;
    p = obj_put_create(s, bucket, key, key_len, size, NULL, 0, &ret);
    if (p == NULL)
        return ret;
    ret = obj_put_make_part(p, upload_id, part, obj_part_commit);
    if (ret < 0) {
        stor_put_abort(p);
        return ret;
    }
    *out = p;
    return 0;
}

/* Contract in obj_i.h: a part's commit. */
static int obj_part_commit(struct stor_put *p, const char *etag, uint64_t size,
                           int k, int m, uint32_t block, uint64_t dataid,
                           const bool *okin, const char *uid, int partno,
                           const uint8_t id[16], const struct stor_place *pl)
{
    struct stor_store *s = NULL;
    const char *bucket = NULL;
    struct stor_meta mt = {0};
    struct stor_meta_part mp = {0};
    struct obj_bucket *b;
    struct obj_upload *u;
    struct stor_hdr *ph = NULL;
    const struct stor_hdr *pin;
    size_t nph = 0;
    bool ok[OBJ_MAX_SHARDS];
    char hx[33], fname[64], pname[32];
    pthread_rwlock_t *kl;
    uint64_t old = 0;
    int ret = 0, n = k + m;
    const char *key;
    size_t key_len;

    s = obj_put_store(p, &bucket, &key, &key_len);
    obj_hex(id, 16, hx);
    snprintf(fname, sizeof(fname), "%s.%016llx", hx,
             (unsigned long long)dataid);
    snprintf(pname, sizeof(pname), "p%05d.m", partno);
    kl = obj_klock(s, id);
    pthread_rwlock_wrlock(kl);
    ret = upload_exists(s, bucket, key, key_len, uid);
    if (ret < 0)
        goto out;
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char from[PATH_MAX], to[PATH_MAX];

        ok[j] = okin[j];
        if (!ok[j])
            continue;
        if (obj_path_tmp(from, sizeof(from), s->drives[d].path, dataid, j) <
                0 ||
            obj_path_upload(to, sizeof(to), s->drives[d].path, bucket, uid,
                            fname) < 0 ||
            rename(from, to) < 0) {
            ok[j] = false;
            continue;
        }
    }
    mp.number = partno;
    mp.size = size;
    mp.dataid = dataid;
    snprintf(mp.etag, sizeof(mp.etag), "%s", etag);
    mt.type = STOR_META_PART;
    mt.k = k;
    mt.m = m;
    mt.block = block;
    mt.version = obj_next_version(s);
    mt.mtime_ns = obj_now_ns();
    mt.size = size;
    snprintf(mt.etag, sizeof(mt.etag), "%s", etag);
    mt.key = CM_UNCONST(char *, key); /* encode only reads it */
    mt.key_len = key_len;
    mt.parts = &mp;
    mt.nparts = 1;
    /* what the S3 layer added to the part (stor_put_add_header) */
    pin = obj_put_hdrs(p, &nph);
    mt.hdrs = CM_UNCONST(struct stor_hdr *, pin); /* encode only reads */
    mt.nhdrs = nph;
    if (nph && obj_hdrs_copy(pin, nph, &ph) < 0) {
        ret = -ENOMEM;
        goto out;
    }
    if (write_upload_file(s, bucket, uid, pl, n, &mt, pname, ok) <
        obj_write_quorum(s, k, m)) {
        ret = -STOR_EQUORUM;
        goto out;
    }
    ret = upload_lock(s, bucket, key, key_len, uid, true, &b, &u, NULL);
    if (ret == 0) {
        if (u->completing) { /* a Complete owns its parts now */
            ret = -STOR_ENOUPLOAD;
        } else {
            ret = obj_upload_set_part(u, &mp, ph, nph, &old);
            ph = NULL; /* the upload's now (or freed on failure) */
        }
        upload_unlock(s, b);
    }
    if (ret == 0 && old != 0) {
        snprintf(fname, sizeof(fname), "%s.%016llx", hx,
                 (unsigned long long)old);
        for (int j = 0; j < n; j++) {
            char path[PATH_MAX];

            if (obj_path_upload(path, sizeof(path),
                                s->drives[obj_shard_drive(s, pl, j)].path,
                                bucket, uid, fname) == 0)
                unlink(path);
        }
    }
out:
    pthread_rwlock_unlock(kl);
    if (ph)
        obj_hdrs_free(ph, nph);
    return ret;
}

/* Strips surrounding quotes from a client ETag. */
static void etag_norm(const char *in, char *out, size_t cap)
{
    size_t n = strlen(in);

    if (n >= 2 && in[0] == '"' && in[n - 1] == '"') {
        in++;
        n -= 2;
    }
    if (n >= cap)
        n = cap - 1;
    memcpy(out, in, n);
    out[n] = 0;
}

/* Unlinks the object-directory names a failed Complete made: on shard
 * j's drive, the shard files of the first @nl[j] parts (@dids: their data
 * ids) of object @id. The upload's own names stay. */
static void unlink_linked(struct stor_store *s, const char *bucket,
                          const uint8_t id[16], const struct stor_place *pl,
                          const uint64_t *dids, const size_t *nl, int n)
{
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);

        for (size_t i = 0; i < nl[j]; i++) {
            char path[PATH_MAX];

            if (obj_path_shard(path, sizeof(path), s->drives[d].path, bucket,
                               id, dids[i]) == 0)
                (void)unlink(path);
        }
    }
}

/* Contract in object.h. */
int stor_mpu_complete(struct stor_store *s, const char *bucket, const char *key,
                      size_t key_len, const char *upload_id,
                      const struct stor_part *parts, size_t nparts,
                      struct stor_obj_info *out)
{
    return stor_mpu_complete_cond(s, bucket, key, key_len, upload_id, parts,
                                  nparts, NULL, out);
}

/* STORAGED_TEST_COMPLETE_DELAY_MS (tests only, 0..10000): a Complete waits
 * this long after claiming its upload, before it links the parts, so a
 * test can send an abort or an UploadPart while a Complete runs. */
static void complete_test_delay(void)
{
    static int ms = -1;

    if (__atomic_load_n(&ms, __ATOMIC_RELAXED) < 0) {
        const char *v = getenv("STORAGED_TEST_COMPLETE_DELAY_MS");
        long l = v ? strtol(v, NULL, 10) : 0;

        __atomic_store_n(&ms,
                         l < 0       ? 0
                         : l > 10000 ? 10000
                                     : (int)l,
                         __ATOMIC_RELAXED);
    }
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

/* Contract in object.h: links part shard files, one commit. */
int stor_mpu_complete_cond(struct stor_store *s, const char *bucket,
                           const char *key, size_t key_len,
                           const char *upload_id, const struct stor_part *parts,
                           size_t nparts, const struct stor_write_cond *c,
                           struct stor_obj_info *out)
{
    struct obj_bucket *b;
    struct obj_upload *u;
    struct obj_ent *e = NULL;
    struct stor_place pl;
    bool ok[OBJ_MAX_SHARDS];
    EVP_MD_CTX *md = NULL;
    uint8_t digest[EVP_MAX_MD_SIZE];
    unsigned dl;
    char hx[33];
    const struct obj_part_hdrs **lph = NULL; /* the listed parts' headers */
    uint64_t *dids = NULL;                   /* the listed parts' data ids */
    size_t nl[OBJ_MAX_SHARDS] = {0};         /* parts linked on shard j's */
    uint8_t id[16];
    int ret = 0, n = s->K + s->M;

    if (!obj_valid_key(key, key_len) || upload_id == NULL)
        return -STOR_EINVAL;
    if (nparts == 0 || nparts > STOR_MAX_PARTS)
        return -STOR_EINVAL;
    e = calloc(1, sizeof(*e));
    md = EVP_MD_CTX_new();
    if (e == NULL || md == NULL || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1)
        goto nomem;
    e->parts = calloc(nparts, sizeof(*e->parts));
    e->key = obj_memdup0(key, key_len);
    lph = calloc(nparts, sizeof(*lph));
    dids = calloc(nparts, sizeof(*dids));
    if (e->parts == NULL || e->key == NULL || lph == NULL || dids == NULL)
        goto nomem;
    e->key_len = key_len;
    /* write lock: the check-and-claim of the upload below is atomic, so
     * a second Complete of the same upload (a client retrying on a
     * timeout) cannot rename the same part files at the same time and
     * leave neither commit with a quorum */
    ret = upload_lock(s, bucket, key, key_len, upload_id, true, &b, &u, NULL);
    if (ret < 0)
        goto out;
    if (u->completing)
        ret = -STOR_ENOUPLOAD;
    for (size_t i = 0; i < nparts && ret == 0; i++) {
        const struct stor_meta_part *have = NULL;
        char want[STOR_ETAG_MAX];

        if (i > 0 && parts[i].number <= parts[i - 1].number) {
            ret = -STOR_EPARTORDER;
            break;
        }
        for (size_t q = 0; q < u->nparts; q++)
            if (u->parts[q].number == parts[i].number)
                have = &u->parts[q];
        etag_norm(parts[i].etag, want, sizeof(want));
        if (have == NULL || strcmp(have->etag, want) != 0) {
            ret = -STOR_EBADPART;
            break;
        }
        if (i + 1 < nparts && have->size < 5u * 1024 * 1024) {
            ret = -STOR_ETOOSMALL;
            break;
        }
        e->parts[i] = *have;
        lph[i] = &u->phdrs[have - u->parts];
        e->size += have->size;
        for (int q = 0; q < 16; q++) {
            unsigned v;

            if (sscanf(have->etag + 2 * q, "%2x", &v) != 1)
                v = 0;
            digest[q] = (uint8_t)v;
        }
        EVP_DigestUpdate(md, digest, 16);
    }
    if (ret == 0 && obj_hdrs_copy(u->hdrs, u->nhdrs, &e->hdrs) == 0)
        e->nhdrs = u->nhdrs;
    /* the parts' own headers (an encrypted part's tags, its checksum),
     * joined in object order: without them the object would misread */
    if (ret == 0 && part_hdrs_join(lph, nparts, &e->hdrs, &e->nhdrs) < 0)
        ret = -ENOMEM;
    if (ret == 0 && s->mpu_hook) {
        uint64_t *ps = malloc(nparts * sizeof(*ps));

        for (size_t i = 0; ps && i < nparts; i++)
            ps[i] = e->parts[i].size;
        ret = ps ? s->mpu_hook(s->mpu_hook_arg, &e->hdrs, &e->nhdrs, ps, nparts)
                 : -ENOMEM;
        free(ps);
    }
    if (ret == 0) {
        /* the upload id, kept with the object (STOR_HDR_UPLOAD_ID) */
        struct stor_hdr *nh = realloc(e->hdrs, (e->nhdrs + 1) * sizeof(*nh));

        if (nh != NULL) {
            e->hdrs = nh;
            nh[e->nhdrs].name = strdup(STOR_HDR_UPLOAD_ID);
            nh[e->nhdrs].value = strdup(upload_id);
            if (nh[e->nhdrs].name && nh[e->nhdrs].value) {
                e->nhdrs++;
            } else {
                free(nh[e->nhdrs].name);
                free(nh[e->nhdrs].value);
            }
        }
    }
    if (ret == 0)
        u->completing = true;
    upload_unlock(s, b);
    if (ret < 0)
        goto out;
    complete_test_delay();
    e->nparts = nparts;
    e->multipart = true;
    EVP_DigestFinal_ex(md, digest, &dl);
    obj_hex(digest, 16, e->etag);
    snprintf(e->etag + 32, sizeof(e->etag) - 32, "-%zu", nparts);
    obj_key_id(s, key, key_len, e->id);
    e->k = s->K;
    e->m = s->M;
    e->block = OBJ_BLOCK;
    e->mtime_ns = obj_now_ns();
    obj_place(s, bucket, key, key_len, &pl);
    obj_hex(e->id, 16, hx);
    memcpy(id, e->id, sizeof(id));
    for (size_t i = 0; i < nparts; i++)
        dids[i] = e->parts[i].dataid;
    /* link every listed part's shard files into the object directory:
     * the upload keeps its own names until the commit has succeeded, so
     * a Complete that fails (no quorum, a condition lost at the commit)
     * leaves the upload whole and a retry can complete it */
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, &pl, j);

        ok[j] = obj_drive_online(s, d);
        for (size_t i = 0; i < nparts && ok[j]; i++) {
            char from[PATH_MAX], to[PATH_MAX], fname[64];

            snprintf(fname, sizeof(fname), "%s.%016llx", hx,
                     (unsigned long long)e->parts[i].dataid);
            if (obj_path_upload(from, sizeof(from), s->drives[d].path, bucket,
                                upload_id, fname) < 0 ||
                obj_path_shard(to, sizeof(to), s->drives[d].path, bucket, e->id,
                               e->parts[i].dataid) < 0) {
                obj_drive_note(s, d, ENAMETOOLONG, "complete: a part's path");
                ok[j] = false;
                break;
            }
            /* EEXIST: a name left by a commit that may have placed its
             * metas (-STOR_EDATA, or a crash after the commit): never
             * committed a second time */
            if (link(from, to) == 0) {
                nl[j]++;
                continue;
            }
            if (errno == ENOENT) {
                char dir[PATH_MAX];

                if (obj_path_dir(dir, sizeof(dir), s->drives[d].path, bucket,
                                 e->id) == 0 &&
                    stor_mkdirs(dir) == 0 && link(from, to) == 0) {
                    /* a new directory: its entry in the bucket directory
                     * must survive power loss too (the commit syncs only
                     * the directory itself) */
                    char *slash = strrchr(dir, '/');

                    nl[j]++;
                    if (s->fsync && slash) {
                        *slash = 0;
                        (void)stor_fsync_dir(dir);
                    }
                    continue;
                }
            }
            if (errno == EEXIST || errno == ENOENT)
                obj_drive_note(s, d, errno, "complete: link of a part's shard");
            else
                obj_drive_fail_at(s, d, errno,
                                  "complete: link of a part's shard");
            ok[j] = false;
        }
    }
    if (out) {
        obj_info_fill(e, out, false);
    }
    obj_commit_set_cond(c);
    ret = obj_commit(s, bucket, e, NULL, 0, ok, NULL);
    obj_commit_set_cond(NULL);
    e = NULL;
    if (ret < 0) {
        if (out)
            stor_obj_info_fini(out);
        /* the upload stays; another Complete may try again. Its links in
         * the object directory go, unless the metas may name them
         * (-STOR_EDATA: committed on the drives, not in the index) */
        if (ret != -STOR_EDATA)
            unlink_linked(s, bucket, id, &pl, dids, nl, n);
        if (upload_lock(s, bucket, key, key_len, upload_id, true, &b, &u,
                        NULL) == 0) {
            u->completing = false;
            upload_unlock(s, b);
        }
        goto out;
    }
    /* the upload is done: forget it and drop unused parts */
    {
        size_t idx;

        if (upload_lock(s, bucket, key, key_len, upload_id, true, &b, &u,
                        &idx) == 0) {
            upload_unlink(b, idx);
            upload_unlock(s, b);
            obj_upload_free(u);
        }
    }
    rm_upload_dirs(s, bucket, upload_id, &pl);
    goto out;
nomem:
    ret = -ENOMEM;
out:
    if (md)
        EVP_MD_CTX_free(md);
    free(lph);
    free(dids);
    obj_ent_free(e);
    return ret;
}

/* Contract in object.h. */
int stor_mpu_abort(struct stor_store *s, const char *bucket, const char *key,
                   size_t key_len, const char *upload_id)
{
    struct obj_bucket *b;
    struct obj_upload *u;
    struct stor_place pl;
    size_t idx;
    int ret;

    if (!obj_valid_key(key, key_len) || upload_id == NULL)
        return -STOR_EINVAL;
    ret = upload_lock(s, bucket, key, key_len, upload_id, true, &b, &u, &idx);
    if (ret < 0)
        return ret;
    if (u->completing) {
        /* a Complete owns its parts now (it is linking them, or
         * committing): the upload ends with it, or stays whole for a
         * retry, so an abort (a client's, lifecycle's
         * AbortIncompleteMultipartUpload, the scanner's expiry) answers
         * as after a Complete that succeeded */
        upload_unlock(s, b);
        return -STOR_ENOUPLOAD;
    }
    upload_unlink(b, idx);
    upload_unlock(s, b);
    obj_place(s, bucket, key, key_len, &pl);
    rm_upload_dirs(s, bucket, upload_id, &pl);
    obj_upload_free(u);
    return 0;
}

/* Contract in object.h. */
int stor_mpu_list_parts(struct stor_store *s, const char *bucket,
                        const char *key, size_t key_len, const char *upload_id,
                        int after, size_t max, const char *hname,
                        struct stor_part **out, size_t *n, bool *truncated)
{
    struct obj_bucket *b;
    struct obj_upload *u;
    struct stor_part *v;
    int ret;

    *out = NULL;
    *n = 0;
    *truncated = false;
    if (!obj_valid_key(key, key_len) || upload_id == NULL)
        return -STOR_EINVAL;
    ret = upload_lock(s, bucket, key, key_len, upload_id, false, &b, &u, NULL);
    if (ret < 0)
        return ret;
    v = calloc(u->nparts ? u->nparts : 1, sizeof(*v));
    if (v == NULL) {
        ret = -ENOMEM;
        goto out_unlock;
    }
    for (size_t i = 0; i < u->nparts; i++) {
        if (u->parts[i].number <= after)
            continue;
        if (*n >= max) {
            *truncated = true;
            break;
        }
        v[*n].number = u->parts[i].number;
        v[*n].size = u->parts[i].size;
        snprintf(v[*n].etag, sizeof(v[*n].etag), "%s", u->parts[i].etag);
        v[*n].mtime = (time_t)(u->initiated_ns / 1000000000LL);
        for (size_t j = 0; hname && j < u->phdrs[i].n; j++) {
            const struct stor_hdr *h = &u->phdrs[i].hdrs[j];

            if (strcmp(h->name, hname) == 0 &&
                strlen(h->value) < sizeof(v[*n].hval))
                snprintf(v[*n].hval, sizeof(v[*n].hval), "%s", h->value);
        }
        (*n)++;
    }
    *out = v;
out_unlock:
    upload_unlock(s, b);
    return ret;
}

/* Contract in object.h. */
void stor_uploads_free(struct stor_upload *u, size_t n)
{
    for (size_t i = 0; i < n && u; i++)
        free(u[i].key);
    free(u);
}

/* Contract in object.h. */
int stor_mpu_list(struct stor_store *s, const char *bucket, const char *prefix,
                  const char *key_marker, const char *upload_id_marker,
                  size_t max, struct stor_upload **out, size_t *n,
                  bool *truncated)
{
    struct obj_bucket *b;
    size_t pl = prefix ? strlen(prefix) : 0;
    size_t ml = key_marker ? strlen(key_marker) : 0;
    struct stor_upload *v;
    int ret = 0;

    *out = NULL;
    *n = 0;
    *truncated = false;
    pthread_rwlock_rdlock(&s->lock);
    b = obj_bucket_find(s, bucket);
    if (b == NULL) {
        pthread_rwlock_unlock(&s->lock);
        return -STOR_ENOBUCKET;
    }
    pthread_rwlock_rdlock(&b->lock);
    v = calloc(b->nup ? b->nup : 1, sizeof(*v));
    if (v == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < b->nup; i++) {
        struct obj_upload *u = b->up[i];

        if (u->key_len < pl || (pl && memcmp(u->key, prefix, pl) != 0))
            continue;
        if (key_marker && *key_marker) {
            int c = obj_key_cmp(u->key, u->key_len, key_marker, ml);

            if (c < 0)
                continue;
            if (c == 0 && (upload_id_marker == NULL || !*upload_id_marker ||
                           strcmp(u->uid, upload_id_marker) <= 0))
                continue;
        }
        if (*n >= max) {
            *truncated = true;
            break;
        }
        v[*n].key = obj_memdup0(u->key, u->key_len);
        if (v[*n].key == NULL) {
            stor_uploads_free(v, *n);
            *n = 0;
            ret = -ENOMEM;
            goto out;
        }
        v[*n].key_len = u->key_len;
        snprintf(v[*n].upload_id, sizeof(v[*n].upload_id), "%s", u->uid);
        v[*n].initiated = (time_t)(u->initiated_ns / 1000000000LL);
        (*n)++;
    }
    *out = v;
out:
    pthread_rwlock_unlock(&b->lock);
    pthread_rwlock_unlock(&s->lock);
    return ret;
}
