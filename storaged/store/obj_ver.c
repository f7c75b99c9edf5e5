/* storaged/store/obj_ver.c - what the S3 versioning layer and the store
 * share: object conditions (object.h: struct stor_del_cond), the version
 * naming, and versions kept in place at a versioned overwrite.
 *
 * DESIGN: one matcher, so a conditional delete of an unversioned object
 * (checked by the store under the key's lock, obj_io.c) and of a version
 * (checked by s3/versioning.c under its own key lock) decide alike. */
#include "storaged/store/object.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "storaged/store/drive.h"
#include "storaged/store/meta.h"
#include "storaged/store/obj_i.h"
#include "storaged/store/obj_idx.h"

/* See object.h. */
bool stor_del_cond_any(const struct stor_del_cond *c)
{
    return c && (c->etag_set || c->mtime_set || c->size_set);
}

/* See object.h. */
bool stor_del_cond_match(const struct stor_del_cond *c, const char *etag,
                         time_t mtime, uint64_t size)
{
    if (!stor_del_cond_any(c))
        return true;
    if (c->etag_set && strcmp(c->etag, "*") != 0 &&
        (etag == NULL || strcmp(c->etag, etag) != 0))
        return false;
    if (c->mtime_set && c->mtime != mtime)
        return false;
    if (c->size_set && (etag == NULL || c->size != size))
        return false;
    return true;
}

/* ---- version naming (shared with s3/versioning.c) ---- */

/* See object.h. */
uint64_t stor_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;

    while (n--) {
        h ^= *c++;
        h *= 1099511628211ULL;
    }
    return h;
}

/* See object.h. */
void stor_ver_companion(const char *bucket, char out[64])
{
    size_t n = strlen(bucket);

    if (n <= 60)
        snprintf(out, 64, "%s..v", bucket);
    else
        snprintf(out, 64, "%.40s..%016llx..v", bucket,
                 (unsigned long long)stor_fnv1a(STOR_FNV0, bucket, n));
}

/* See object.h. */
void stor_ver_seq_hex(uint64_t seq, char out[STOR_VID_LEN + 1])
{
    snprintf(out, STOR_VID_LEN + 1, "%016llx", (unsigned long long)~seq);
}

/* See object.h. */
char *stor_ver_key(const char *key, size_t kl, const char *vid,
                   uint64_t null_seq, bool dm, size_t *hl)
{
    bool null = strcmp(vid, "null") == 0;
    char hex[STOR_VID_LEN + 1];
    char *h = malloc(kl + STOR_VER_SUFFIX + 1);

    if (h == NULL)
        return NULL;
    if (null)
        stor_ver_seq_hex(null_seq, hex);
    else
        snprintf(hex, sizeof(hex), "%s", vid);
    memcpy(h, key, kl);
    h[kl] = STOR_VER_SEP;
    memcpy(h + kl + 1, hex, STOR_VID_LEN);
    h[kl + 1 + STOR_VID_LEN] = null ? (dm ? STOR_VER_NULLDM : STOR_VER_NULL)
                                    : (dm ? STOR_VER_DM : STOR_VER_OBJ);
    h[kl + STOR_VER_SUFFIX] = 0;
    *hl = kl + STOR_VER_SUFFIX;
    return h;
}

/* ---- versions kept in place (FORMAT.md "Versions") ----
 *
 * DESIGN: a versioned overwrite used to copy the current version into the
 * companion bucket (a read and a whole second commit). For an object whose
 * shards live in its metas, the commit now hard-links each current meta
 * HEX.m to HEX.v<version> in the same directory (the same drive), before
 * barrier 1, which makes the links durable together with the new temp
 * metas; the companion record (tag 3 "at base": the base bucket and key)
 * goes into the same index transaction as the new version. Nothing is
 * read, encoded or written but directory entries. A crash before the
 * index write leaves the old current version (the links are dropped at
 * the next start) or both versions (the start rebuilds the companion
 * record from HEX.v<version>): never neither. */

/* Contract in obj_i.h. */
int obj_path_kept(char *buf, size_t cap, const char *drive, const char *bucket,
                  const uint8_t id[16], uint64_t version, int64_t since_ns)
{
    char hx[33];
    int n;

    obj_hex(id, 16, hx);
    n = snprintf(buf, cap, "%s/" STOR_BUCKETS "/%s/%.2s/%s.v%016llx-%016llx",
                 drive, bucket, hx, hx, (unsigned long long)version,
                 (unsigned long long)since_ns);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* The value of header @name among @h, or NULL. */
static const char *hdr_val(const struct stor_hdr *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

/* Headers a kept version does not take from its object (it gets its
 * own), as s3/versioning.c's copy does. */
static bool own_hdr(const char *name)
{
    return strcmp(name, STOR_HDR_VERSION_ID) == 0 ||
           strcmp(name, STOR_HDR_ETAG) == 0 ||
           strcmp(name, STOR_HDR_MTIME) == 0 ||
           strcmp(name, STOR_HDR_UPLOAD_ID) == 0;
}

/* Contract in obj_i.h. */
int obj_ver_kept_ent(struct stor_store *s, const char *bucket,
                     const struct obj_ent *cur, int64_t since_ns,
                     char vbucket[64], struct obj_ent **out)
{
    const char *vid = hdr_val(cur->hdrs, cur->nhdrs, STOR_HDR_VERSION_ID);
    const char *et = hdr_val(cur->hdrs, cur->nhdrs, STOR_HDR_ETAG);
    const char *mt = hdr_val(cur->hdrs, cur->nhdrs, STOR_HDR_MTIME);
    long long sec = cur->mtime_ns / 1000000000LL;
    int ms = (int)((cur->mtime_ns / 1000000LL) % 1000);
    char mbuf[32], ebuf[STOR_ETAG_MAX], vbuf[STOR_VID_LEN + 8];
    char n_vid[] = STOR_HDR_VERSION_ID, n_mt[] = STOR_HDR_MTIME;
    char n_et[] = STOR_HDR_ETAG;
    struct stor_hdr *h = NULL;
    struct obj_ent *ve = NULL;
    size_t nh = 0, hl;
    char *hk;
    int ret = -ENOMEM;

    *out = NULL;
    if (mt) { /* a version made current again keeps its Last-Modified */
        long long s2;
        int ms2;

        if (sscanf(mt, "%lld.%d", &s2, &ms2) == 2) {
            sec = s2;
            ms = ms2;
        }
    }
    snprintf(vbuf, sizeof(vbuf), "%s", vid ? vid : "null");
    snprintf(ebuf, sizeof(ebuf), "%s",
             et && strlen(et) < sizeof(ebuf) ? et : cur->etag);
    snprintf(mbuf, sizeof(mbuf), "%lld.%03d", sec, ms);
    stor_ver_companion(bucket, vbucket);
    hk = stor_ver_key(cur->key, cur->key_len, vbuf,
                      (uint64_t)sec * 1000000000ULL + (uint64_t)ms * 1000000,
                      false, &hl);
    h = calloc(cur->nhdrs + 3, sizeof(*h));
    ve = obj_ent_dup(cur);
    if (hk == NULL || h == NULL || ve == NULL)
        goto fail;
    for (size_t i = 0; i < cur->nhdrs; i++)
        if (!own_hdr(cur->hdrs[i].name))
            h[nh++] = cur->hdrs[i]; /* borrowed */
    h[nh++] = (struct stor_hdr){n_vid, vbuf};
    h[nh++] = (struct stor_hdr){n_mt, mbuf};
    h[nh++] = (struct stor_hdr){n_et, ebuf};
    obj_hdrs_free(ve->hdrs, ve->nhdrs);
    ve->nhdrs = 0;
    ve->hdrs = NULL;
    if (obj_hdrs_copy(h, nh, &ve->hdrs) < 0)
        goto fail;
    ve->nhdrs = nh;
    ve->at_bucket = strdup(bucket);
    ve->at_key = obj_memdup0(cur->key, cur->key_len);
    if (ve->at_bucket == NULL || ve->at_key == NULL)
        goto fail;
    ve->at_key_len = cur->key_len;
    free(ve->key);
    ve->key = hk;
    ve->key_len = hl;
    hk = NULL;
    obj_key_id(s, ve->key, ve->key_len, ve->id);
    ve->mtime_ns = since_ns; /* lifecycle's NoncurrentDays count from it */
    free(ve->xref);
    ve->xref = NULL;
    ve->ext = false;
    *out = ve;
    ve = NULL;
    ret = 0;
fail:
    free(hk);
    free(h);
    obj_ent_free(ve);
    return ret;
}

/* Contract in obj_i.h. */
bool obj_ver_keepable(const struct obj_ent *cur)
{
    return cur && cur->inl && !cur->ext && cur->at_bucket == NULL &&
           cur->nparts == 0;
}

/* See object.h. */
bool stor_obj_retirable(struct stor_store *s, const char *bucket,
                        const char *key, size_t key_len, uint64_t *version)
{
    struct obj_ent *cur = NULL;
    bool ok = false;

    *version = 0;
    if (obj_cur_lookup(s, bucket, key, key_len, &cur) == 0 &&
        obj_ver_keepable(cur)) {
        *version = cur->version;
        ok = true;
    }
    obj_ent_free(cur);
    return ok;
}

/* Contract in obj_i.h. */
void obj_ver_unlink_kept(struct stor_store *s, const char *bucket,
                         const uint8_t id[16], uint64_t version,
                         int64_t since_ns, const struct stor_place *pl, int n,
                         uint32_t mask)
{
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char path[PATH_MAX];

        if ((mask >> j & 1) &&
            obj_path_kept(path, sizeof(path), s->drives[d].path, bucket, id,
                          version, since_ns) == 0)
            (void)unlink(path);
    }
}

/* Contract in obj_i.h. */
int obj_ver_retire_begin(struct stor_store *s, const char *bucket,
                         const struct obj_ent *e, uint64_t want, bool del,
                         const struct stor_place *pl, struct obj_retire **out)
{
    /* SINCE is even for an overwrite's links, odd for a DELETE's: a start
     * tells a DELETE's kept version from an unfinished overwrite's by it
     * (FORMAT.md "Versions", obj_load.c) */
    int64_t since = del ? e->mtime_ns | 1 : e->mtime_ns & ~(int64_t)1;
    struct obj_ent *cur = NULL;
    struct obj_retire *r;
    int ret, n, have = 0;

    *out = NULL;
    ret = obj_cur_lookup(s, bucket, e->key, e->key_len, &cur);
    if (ret < 0 || !obj_ver_keepable(cur) || cur->version != want) {
        obj_ent_free(cur);
        return ret == -STOR_ENOBUCKET ? ret : -EAGAIN;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL ||
        obj_ver_kept_ent(s, bucket, cur, since, r->vbucket, &r->ve) < 0) {
        free(r);
        obj_ent_free(cur);
        return -ENOMEM;
    }
    memcpy(r->id, cur->id, 16);
    r->version = cur->version;
    n = r->n = cur->k + cur->m;
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char m[PATH_MAX], v[PATH_MAX];

        if (!obj_drive_online(s, d) ||
            obj_path_meta(m, sizeof(m), s->drives[d].path, bucket, cur->id) <
                0 ||
            obj_path_kept(v, sizeof(v), s->drives[d].path, bucket, cur->id,
                          cur->version, r->ve->mtime_ns) < 0)
            continue;
        if (link(m, v) == 0 || errno == EEXIST) {
            r->linked |= 1u << j;
            have++;
        }
    }
    if (have < cur->k) { /* it would not be readable: keep nothing */
        obj_ver_unlink_kept(s, bucket, r->id, r->version, r->ve->mtime_ns, pl,
                            n, r->linked);
        obj_ver_retire_free(r);
        obj_ent_free(cur);
        return -STOR_EQUORUM;
    }
    obj_ent_free(cur);
    *out = r;
    return 0;
}

/* Contract in obj_i.h. */
void obj_ver_retire_free(struct obj_retire *r)
{
    if (r == NULL)
        return;
    obj_ent_free(r->ve);
    free(r);
}

/* Contract in obj_i.h. */
int obj_cur_set_pair(struct stor_store *s, const char *bucket,
                     const struct obj_ent *e, const struct obj_idx_body *b,
                     const struct obj_retire *r, struct obj_ent **old)
{
    int ret;

    if (old)
        *old = NULL;
    pthread_rwlock_rdlock(&s->lock);
    if (obj_bucket_find(s, bucket) == NULL ||
        obj_bucket_find(s, r->vbucket) == NULL) {
        ret = -STOR_ENOBUCKET;
    } else {
        ret = obj_idx_put_pair(s->idx, bucket, e, b, r->vbucket, r->ve, old);
        if (ret < 0)
            obj_idx_failed(s, ret);
    }
    pthread_rwlock_unlock(&s->lock);
    return ret;
}

/* Contract in obj_i.h. */
int obj_cur_remove_pair(struct stor_store *s, const char *bucket,
                        const char *key, size_t key_len,
                        const struct obj_retire *r, const struct obj_ent *me,
                        const struct obj_idx_body *mb, bool keep_pend,
                        struct obj_ent **old)
{
    int ret;

    if (old)
        *old = NULL;
    pthread_rwlock_rdlock(&s->lock);
    if (obj_bucket_find(s, bucket) == NULL ||
        obj_bucket_find(s, r->vbucket) == NULL) {
        ret = -STOR_ENOBUCKET;
    } else {
        ret = obj_idx_remove_pair(s->idx, bucket, key, key_len, r->vbucket,
                                  r->ve, me, mb, keep_pend, old);
        if (ret == -ENOENT)
            ret = -STOR_ENOKEY;
        else if (ret < 0)
            obj_idx_failed(s, ret);
    }
    pthread_rwlock_unlock(&s->lock);
    return ret;
}

/* Contract in obj_i.h. */
int obj_cur_pending_pair(struct stor_store *s, const char *bucket,
                         const uint8_t id[16], const char *key, size_t key_len,
                         const char *bucket2, const uint8_t id2[16],
                         const char *key2, size_t key2_len)
{
    int ret = obj_idx_pend_add_pair(s->idx, bucket, id, key, key_len, bucket2,
                                    id2, key2, key2_len);

    if (ret < 0)
        obj_idx_failed(s, ret);
    return ret;
}

/* Contract in obj_i.h. */
void obj_ver_place(struct stor_store *s, const char *bucket, const char *key,
                   size_t key_len, const struct obj_ent *e,
                   struct stor_place *pl)
{
    if (e && e->at_bucket)
        obj_place(s, e->at_bucket, e->at_key, e->at_key_len, pl);
    else
        obj_place(s, bucket, key, key_len, pl);
}

/* Contract in obj_i.h. */
int obj_ver_meta_path(struct stor_store *s, size_t d, const char *bucket,
                      const struct obj_ent *e, char *buf, size_t cap)
{
    uint8_t id[16];

    if (e->at_bucket == NULL)
        return obj_path_meta(buf, cap, s->drives[d].path, bucket, e->id);
    obj_key_id(s, e->at_key, e->at_key_len, id);
    return obj_path_kept(buf, cap, s->drives[d].path, e->at_bucket, id,
                         e->version, e->mtime_ns);
}

/* Writes @b as @to on drive @d, durably: a temp file, fsync, rename,
 * fsync of the directory. 0 or -errno. */
static int put_file(struct stor_store *s, size_t d, const struct cm_buf *b,
                    const char *to, int j)
{
    char tmp[PATH_MAX], dir[PATH_MAX], *slash;
    int fd, ret = 0;

    if (obj_path_tmp(tmp, sizeof(tmp), s->drives[d].path, obj_next_version(s),
                     300 + j) < 0)
        return -ENAMETOOLONG;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (write(fd, b->data, b->len) != (ssize_t)b->len || fsync(fd) < 0)
        ret = -EIO;
    close(fd);
    if (ret == 0 && rename(tmp, to) < 0)
        ret = -errno;
    if (ret < 0) {
        unlink(tmp);
        return ret;
    }
    snprintf(dir, sizeof(dir), "%s", to);
    slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    return stor_fsync_dir(dir) < 0 ? -EIO : 0;
}

/* Contract in obj_i.h. With a drive of the placement offline, that drive
 * keeps its copy of the version, so the online ones get a tombstone meta
 * (the version's own number) under the same HEX.vVERSION-SINCE name
 * instead of an unlink: a rebuild then knows the version was deleted
 * (obj_load.c), and removes every copy once the whole set is online. */
void obj_ver_remove_kept(struct stor_store *s, const struct obj_ent *e)
{
    struct stor_place pl;
    struct stor_meta t;
    uint8_t id[16];
    int n = e->k + e->m;
    bool all = true;

    obj_key_id(s, e->at_key, e->at_key_len, id);
    obj_place(s, e->at_bucket, e->at_key, e->at_key_len, &pl);
    for (int j = 0; j < n; j++)
        if (!obj_drive_online(s, obj_shard_drive(s, &pl, j)))
            all = false;
    if (all) {
        obj_ver_unlink_kept(s, e->at_bucket, id, e->version, e->mtime_ns, &pl,
                            n, UINT32_MAX);
        return;
    }
    memset(&t, 0, sizeof(t));
    t.type = STOR_META_TOMBSTONE;
    t.k = e->k;
    t.m = e->m;
    t.version = e->version;
    t.mtime_ns = e->mtime_ns;
    t.key = e->at_key; /* the base key, as the kept copies carry */
    t.key_len = e->at_key_len;
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, &pl, j);
        char path[PATH_MAX];
        struct cm_buf b;

        if (!obj_drive_online(s, d) ||
            obj_path_kept(path, sizeof(path), s->drives[d].path, e->at_bucket,
                          id, e->version, e->mtime_ns) < 0)
            continue;
        t.shard = j;
        cm_buf_init(&b, STOR_META_MAX);
        if (stor_meta_encode(&t, &b) < 0 || put_file(s, d, &b, path, j) < 0)
            cm_log(CM_LOG_WARN, 0,
                   "bucket %s: no tombstone for a deleted kept version on "
                   "%s: a rebuild may bring it back",
                   e->at_bucket, s->drives[d].path);
        cm_buf_fini(&b);
    }
}

/* Contract in obj_i.h. */
int obj_ver_rewrite_kept(struct stor_store *s, const struct obj_ent *e,
                         uint8_t *const *sh, size_t L, const bool *which)
{
    struct stor_place pl;
    struct stor_meta t;
    bool have = false;
    int n = e->k + e->m, done = 0;

    obj_ver_place(s, NULL, NULL, 0, e, &pl);
    for (int j = 0; j < n && !have; j++) { /* a good copy: the template */
        size_t d = obj_shard_drive(s, &pl, j);
        char path[PATH_MAX];

        if (which[j] || !obj_drive_online(s, d) ||
            obj_ver_meta_path(s, d, NULL, e, path, sizeof(path)) < 0 ||
            stor_meta_read_file(path, &t) < 0)
            continue;
        if (t.type == STOR_META_OBJECT && t.version == e->version &&
            t.has_inline && !t.has_xref && t.inl_len == L)
            have = true;
        else
            stor_meta_fini(&t);
    }
    if (!have)
        return 0;
    free(t.inl);
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, &pl, j);
        char path[PATH_MAX];
        struct cm_buf b;

        if (!which[j] || !obj_drive_online(s, d) ||
            obj_ver_meta_path(s, d, NULL, e, path, sizeof(path)) < 0)
            continue;
        t.shard = j;
        t.inl = sh[j];
        t.inl_len = L;
        cm_buf_init(&b, STOR_META_MAX);
        if (stor_meta_encode(&t, &b) == 0) {
            char dir[PATH_MAX], *slash;

            snprintf(dir, sizeof(dir), "%s", path);
            slash = strrchr(dir, '/');
            if (slash) {
                *slash = 0;
                (void)stor_mkdirs(dir);
            }
            if (put_file(s, d, &b, path, j) == 0)
                done++;
        }
        cm_buf_fini(&b);
    }
    t.inl = NULL;
    stor_meta_fini(&t);
    return done;
}
