/* storaged/s3/versioning.c - S3 bucket versioning (see versioning.h).
 *
 * DESIGN: the object layer keeps one object per key; versioning is built
 * on it, not in it. A key's current version stays the bucket's ordinary
 * object (GET, LIST, the index, the loop's fast GET and ecfs are what
 * they were, and an unversioned bucket pays one cached state lookup a
 * write). When a version stops being current (overwrite, delete) it is
 * first copied into the bucket's companion bucket under KEY SEP VID FLAG,
 * and only then replaced, so a reader that checks the bucket and then the
 * companion never misses it. Delete markers are empty objects of the
 * companion. The companion's objects are ordinary objects: erasure-coded,
 * scanned, healed and stale-drive-checked like any other. Version ids are
 * 16 hex digits of the complement of a store-wide increasing nanosecond
 * counter, so in the companion a key's versions sort newest first.
 *
 * Every change of one key's versions (a write that keeps the old current
 * version, a delete, a by-version delete that makes an older version
 * current again) runs under that key's lock (one of KEY_LOCKS striped
 * mutexes), so two writers never lose a version between them.
 *
 * Costs: a PUT of a new key in a versioned bucket costs one stat more. An
 * overwrite or a delete-marker DELETE of an inline current version keeps
 * it in place (the store links its metas: stor_put_set_retire,
 * stor_obj_delete_keep); of any other (shard files, extents, multipart)
 * it copies the old version (read + erasure-coded write). A DELETE also
 * writes its marker, an empty object of the companion: in the same store
 * operation as the kept version when it is kept in place (one barrier,
 * one index transaction), else as a write of its own. */
#include "storaged/s3/versioning.h"

#include <errno.h>
#include <expat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "storaged/s3/s3_i.h"
#include "storaged/s3/xout.h"
#include "storaged/store/object.h"

#define KEY_LOCKS   256
#define CACHE_SLOTS 256
#define CFG_KEY     "\x01\x01versioning" /* the state, in the companion */
#define LIST_BATCH  1000
#define FLAG_OBJ    STOR_VER_OBJ
#define FLAG_DM     STOR_VER_DM
#define FLAG_NULL   STOR_VER_NULL
#define FLAG_NULLDM STOR_VER_NULLDM

struct ver_cache {
    char bucket[64];
    enum stor_ver_state st;
    struct ver_cache *next;
};

struct stor_ver {
    struct stor_store *st;                /* borrowed */
    pthread_mutex_t lock;                 /* protects cache */
    struct ver_cache *cache[CACHE_SLOTS]; /* protected by lock */
    pthread_mutex_t klock[KEY_LOCKS];     /* a key's versions */
    _Atomic uint64_t seq;                 /* last version sequence */
};

/* See header. */
int stor_ver_create(struct stor_store *st, struct stor_ver **out)
{
    struct stor_ver *v = calloc(1, sizeof(*v));
    size_t i;

    if (v == NULL)
        return -ENOMEM;
    v->st = st;
    pthread_mutex_init(&v->lock, NULL);
    for (i = 0; i < KEY_LOCKS; i++)
        pthread_mutex_init(&v->klock[i], NULL);
    *out = v;
    return 0;
}

/* See header. */
void stor_ver_destroy(struct stor_ver *v)
{
    size_t i;

    if (v == NULL)
        return;
    for (i = 0; i < CACHE_SLOTS; i++)
        while (v->cache[i]) {
            struct ver_cache *c = v->cache[i];

            v->cache[i] = c->next;
            free(c);
        }
    for (i = 0; i < KEY_LOCKS; i++)
        pthread_mutex_destroy(&v->klock[i]);
    pthread_mutex_destroy(&v->lock);
    free(v);
}

/* See header. */
void stor_ver_hidden_bucket(const char *bucket, char out[64])
{
    stor_ver_companion(bucket, out);
}

/* See header. */
bool stor_ver_is_internal_bucket(const char *name)
{
    return strstr(name, "..") != NULL;
}

/* ---- small objects: the state record ---- */

/* Reads all of @bucket/@key (at most @cap - 1 bytes, NUL-terminated) into
 * @buf. Its length, or -errno (-EFBIG when larger). */
static long read_small(struct stor_store *st, const char *bucket,
                       const char *key, char *buf, size_t cap)
{
    struct stor_obj_info info;
    struct stor_get *g;
    uint64_t got = 0;
    int ret;

    memset(&info, 0, sizeof(info));
    ret = stor_get_open(st, bucket, key, strlen(key), &info, &g);
    if (ret < 0)
        return ret;
    if (info.size >= cap) {
        ret = -EFBIG;
        goto out;
    }
    while (got < info.size) {
        ssize_t n = stor_get_read(g, got, buf + got, info.size - got);

        if (n <= 0) {
            ret = n < 0 ? (int)n : -EIO;
            goto out;
        }
        got += (uint64_t)n;
    }
    buf[got] = 0;
out:
    stor_get_close(g);
    stor_obj_info_fini(&info);
    return ret < 0 ? ret : (long)got;
}

/* Writes @len bytes as @bucket/@key (@nh headers), creating @bucket when
 * it is a companion that does not exist yet. 0 or -errno. */
static int write_small(struct stor_store *st, const char *bucket,
                       const char *key, size_t key_len, const void *data,
                       size_t len, const struct stor_hdr *h, size_t nh)
{
    struct stor_put *p;
    int ret, tries;

    for (tries = 0; tries < 2; tries++) {
        ret = stor_put_begin(st, bucket, key, key_len, (int64_t)len, h, nh, &p);
        if (ret == -STOR_ENOBUCKET && tries == 0) {
            ret = stor_bucket_create(st, bucket);
            if (ret < 0 && ret != -STOR_EBUCKETEXISTS)
                return ret;
            continue;
        }
        if (ret < 0)
            return ret;
        ret = len ? stor_put_write(p, data, len) : 0;
        if (ret < 0) {
            stor_put_abort(p);
            return ret;
        }
        return stor_put_commit(p, NULL, NULL);
    }
    return ret;
}

/* See header. */
long stor_ver_cfg_read(struct stor_store *st, const char *bucket,
                       const char *name, size_t cap, char **out)
{
    char hb[64], *buf = malloc(cap + 1);
    long n;

    *out = NULL;
    if (buf == NULL)
        return -ENOMEM;
    stor_ver_hidden_bucket(bucket, hb);
    n = read_small(st, hb, name, buf, cap + 1);
    if (n == -STOR_ENOBUCKET)
        n = -STOR_ENOKEY;
    if (n < 0)
        free(buf);
    else
        *out = buf;
    return n;
}

/* See header. */
int stor_ver_cfg_write(struct stor_store *st, const char *bucket,
                       const char *name, const void *data, size_t len)
{
    char hb[64];

    stor_ver_hidden_bucket(bucket, hb);
    return write_small(st, hb, name, strlen(name), data, len, NULL, 0);
}

/* See header. */
int stor_ver_cfg_delete(struct stor_store *st, const char *bucket,
                        const char *name)
{
    char hb[64];
    int ret;

    stor_ver_hidden_bucket(bucket, hb);
    ret = stor_obj_delete(st, hb, name, strlen(name));
    return ret == -STOR_ENOKEY || ret == -STOR_ENOBUCKET ? 0 : ret;
}

/* ---- state ---- */

static struct ver_cache **slot(struct stor_ver *v, const char *bucket)
{
    return &v->cache[stor_fnv1a(STOR_FNV0, bucket, strlen(bucket)) %
                     CACHE_SLOTS];
}

/* The cached entry of @bucket or NULL; caller holds v->lock. */
static struct ver_cache *cache_find(struct stor_ver *v, const char *bucket)
{
    struct ver_cache *c;

    for (c = *slot(v, bucket); c; c = c->next)
        if (strcmp(c->bucket, bucket) == 0)
            return c;
    return NULL;
}

/* Caches @st for @bucket (a failed allocation caches nothing). */
static void cache_set(struct stor_ver *v, const char *bucket,
                      enum stor_ver_state st)
{
    struct ver_cache *c;

    pthread_mutex_lock(&v->lock);
    c = cache_find(v, bucket);
    if (c == NULL && (c = calloc(1, sizeof(*c))) != NULL) {
        snprintf(c->bucket, sizeof(c->bucket), "%s", bucket);
        c->next = *slot(v, bucket);
        *slot(v, bucket) = c;
    }
    if (c)
        c->st = st;
    pthread_mutex_unlock(&v->lock);
}

/* See header. */
enum stor_ver_state stor_ver_state_peek(struct stor_ver *v, const char *bucket)
{
    struct ver_cache *c;
    enum stor_ver_state st;

    if (v == NULL) /* an S3 state without versioning (unit tests) */
        return STOR_VER_OFF;
    pthread_mutex_lock(&v->lock);
    c = cache_find(v, bucket);
    st = c ? c->st : STOR_VER_OFF;
    pthread_mutex_unlock(&v->lock);
    return st;
}

/* See header. */
void stor_ver_forget(struct stor_ver *v, const char *bucket)
{
    struct ver_cache **pp, *c;

    pthread_mutex_lock(&v->lock);
    for (pp = slot(v, bucket); (c = *pp) != NULL; pp = &c->next)
        if (strcmp(c->bucket, bucket) == 0) {
            *pp = c->next;
            free(c);
            break;
        }
    pthread_mutex_unlock(&v->lock);
}

/* See header. */
int stor_ver_state(struct stor_ver *v, const char *bucket,
                   enum stor_ver_state *out)
{
    char hb[64], buf[32];
    struct ver_cache *c;
    long n;

    pthread_mutex_lock(&v->lock);
    c = cache_find(v, bucket);
    if (c)
        *out = c->st;
    pthread_mutex_unlock(&v->lock);
    if (c)
        return 0;
    stor_ver_hidden_bucket(bucket, hb);
    n = read_small(v->st, hb, CFG_KEY, buf, sizeof(buf));
    if (n == -STOR_ENOKEY || n == -STOR_ENOBUCKET)
        *out = STOR_VER_OFF;
    else if (n < 0)
        return (int)n;
    else
        *out = strcmp(buf, "Enabled") == 0     ? STOR_VER_ENABLED
               : strcmp(buf, "Suspended") == 0 ? STOR_VER_SUSPENDED
                                               : STOR_VER_OFF;
    cache_set(v, bucket, *out);
    return 0;
}

/* ---- ids and names ---- */

/* A fresh version sequence: nanoseconds, strictly increasing. */
static uint64_t next_seq(struct stor_ver *v)
{
    struct timespec ts;
    uint64_t now, old, n;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    old = atomic_load(&v->seq);
    do {
        n = now > old ? now : old + 1;
    } while (!atomic_compare_exchange_weak(&v->seq, &old, n));
    return n;
}

/* See header. */
bool stor_ver_id_ok(const char *vid)
{
    size_t i;

    if (strcmp(vid, "null") == 0)
        return true;
    for (i = 0; i < STOR_VID_LEN; i++)
        if (!((vid[i] >= '0' && vid[i] <= '9') ||
              (vid[i] >= 'a' && vid[i] <= 'f')))
            return false;
    return vid[i] == 0;
}

/* The value of stored header @name in @i, or NULL. */
static const char *info_hdr(const struct stor_obj_info *i, const char *name)
{
    size_t j;

    for (j = 0; j < i->nhdrs; j++)
        if (strcmp(i->hdrs[j].name, name) == 0)
            return i->hdrs[j].value;
    return NULL;
}

/* See header. */
const char *stor_ver_info_vid(const struct stor_obj_info *i)
{
    const char *v = info_hdr(i, STOR_HDR_VERSION_ID);

    return v ? v : "null";
}

/* See header. */
void stor_ver_info_fix(struct stor_obj_info *i)
{
    const char *e = info_hdr(i, STOR_HDR_ETAG);
    const char *m = info_hdr(i, STOR_HDR_MTIME);
    long long sec;
    int ms;

    if (e && strlen(e) < sizeof(i->etag))
        snprintf(i->etag, sizeof(i->etag), "%s", e);
    if (m && sscanf(m, "%lld.%d", &sec, &ms) == 2) {
        i->mtime = (time_t)sec;
        i->mtime_ms = ms;
    }
}

/* The sequence a version without an id (the "null" one) sorts by: when it
 * was written. */
static uint64_t info_seq(const struct stor_obj_info *i)
{
    return (uint64_t)i->mtime * 1000000000ULL + (uint64_t)i->mtime_ms * 1000000;
}

/* See header. */
bool stor_ver_parse_hidden(const char *h, size_t n, size_t *key_len,
                           char vid[STOR_VID_LEN + 1], bool *dm, bool *null,
                           bool *etag_hdr)
{
    const char *s;
    char f;
    size_t i;

    if (n < STOR_VER_SUFFIX + 1 || h[n - STOR_VER_SUFFIX] != STOR_VER_SEP)
        return false;
    s = h + n - STOR_VER_SUFFIX + 1;
    for (i = 0; i < STOR_VID_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    f = s[STOR_VID_LEN];
    if (f != FLAG_OBJ && f != FLAG_DM && f != FLAG_NULL && f != FLAG_NULLDM)
        return false;
    *key_len = n - STOR_VER_SUFFIX;
    *dm = f == FLAG_DM || f == FLAG_NULLDM;
    *null = f == FLAG_NULL || f == FLAG_NULLDM;
    if (etag_hdr)
        *etag_hdr = false;
    if (*null)
        snprintf(vid, STOR_VID_LEN + 1, "null");
    else {
        memcpy(vid, s, STOR_VID_LEN);
        vid[STOR_VID_LEN] = 0;
    }
    return true;
}

static pthread_mutex_t *key_lock(struct stor_ver *v, const char *bucket,
                                 const char *key, size_t kl)
{
    uint64_t h = stor_fnv1a(STOR_FNV0, bucket, strlen(bucket));

    return &v->klock[stor_fnv1a(h, key, kl) % KEY_LOCKS];
}

/* See header. */
int stor_ver_list_next(const struct stor_list_result *res, char **after)
{
    free(*after);
    *after = NULL;
    if (!res->truncated || res->nobjs == 0)
        return 0;
    *after = strndup(res->objs[res->nobjs - 1].key,
                     res->objs[res->nobjs - 1].key_len);
    return *after ? 1 : -ENOMEM;
}

/* ---- the versions of one key ---- */

/* See header. */
void stor_ver_entries_free(struct stor_ver_entry *e, size_t n)
{
    size_t i;

    for (i = 0; i < n && e; i++)
        free(e[i].hkey);
    free(e);
}

/* Appends a copy of @x to *@a (*n, *cap). 0 or -ENOMEM (x.hkey freed). */
static int entry_push(struct stor_ver_entry **a, size_t *n, size_t *cap,
                      struct stor_ver_entry x)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        void *p = realloc(*a, nc * sizeof(**a));

        if (p == NULL) {
            free(x.hkey);
            return -ENOMEM;
        }
        *a = p;
        *cap = nc;
    }
    (*a)[(*n)++] = x;
    return 0;
}

/* The companion's versions of @key, newest first, appended to *a. */
static int hidden_versions(struct stor_store *st, const char *hb,
                           const char *key, size_t kl,
                           struct stor_ver_entry **a, size_t *n, size_t *cap)
{
    struct stor_list_result res;
    char *prefix, *after = NULL;
    size_t i;
    int ret = 0;

    prefix = malloc(kl + 2);
    if (prefix == NULL)
        return -ENOMEM;
    memcpy(prefix, key, kl);
    prefix[kl] = STOR_VER_SEP;
    prefix[kl + 1] = 0;
    for (;;) {
        memset(&res, 0, sizeof(res));
        ret = stor_obj_list(st, hb, prefix, NULL, after, LIST_BATCH, &res);
        if (ret == -STOR_ENOBUCKET || ret == -STOR_ENOKEY) {
            ret = 0;
            break;
        }
        if (ret < 0)
            break;
        for (i = 0; i < res.nobjs && ret == 0; i++) {
            const struct stor_list_entry *le = &res.objs[i];
            struct stor_ver_entry x;
            size_t ul;
            bool null;

            memset(&x, 0, sizeof(x));
            if (!stor_ver_parse_hidden(le->key, le->key_len, &ul, x.vid, &x.dm,
                                       &null, NULL) ||
                ul != kl)
                continue; /* a longer key that starts with ours */
            x.size = le->size;
            x.mtime = le->mtime;
            x.hkey = strndup(le->key, le->key_len);
            x.hkey_len = le->key_len;
            ret = x.hkey ? entry_push(a, n, cap, x) : -ENOMEM;
        }
        if (ret == 0 && stor_ver_list_next(&res, &after) < 0)
            ret = -ENOMEM;
        stor_list_result_fini(&res);
        if (ret < 0 || after == NULL)
            break;
    }
    free(after);
    free(prefix);
    return ret;
}

/* Every version: the current object (if any) first, then the companion's.
 * @cur (may be NULL) gets the current object's info (caller finis). */
static int versions(struct stor_ver *v, const char *bucket, const char *key,
                    size_t kl, struct stor_obj_info *cur,
                    struct stor_ver_entry **out, size_t *n)
{
    struct stor_obj_info info;
    struct stor_ver_entry *a = NULL;
    size_t cap = 0;
    char hb[64];
    int ret;

    *n = 0;
    memset(&info, 0, sizeof(info));
    ret = stor_obj_stat(v->st, bucket, key, kl, &info);
    if (ret < 0 && ret != -STOR_ENOKEY)
        return ret;
    if (ret == -STOR_ENOKEY) {
        ret = 0;
    } else {
        struct stor_ver_entry x;

        memset(&x, 0, sizeof(x));
        stor_ver_info_fix(&info);
        snprintf(x.vid, sizeof(x.vid), "%s", stor_ver_info_vid(&info));
        x.size = info.size;
        x.mtime = info.mtime;
        x.latest = true;
        ret = entry_push(&a, n, &cap, x);
    }
    stor_ver_hidden_bucket(bucket, hb);
    if (ret == 0)
        ret = hidden_versions(v->st, hb, key, kl, &a, n, &cap);
    if (ret == 0 && *n > 0)
        a[0].latest = true;
    if (ret < 0) {
        stor_ver_entries_free(a, *n);
        stor_obj_info_fini(&info);
        *n = 0;
        return ret;
    }
    if (cur)
        *cur = info;
    else
        stor_obj_info_fini(&info);
    *out = a;
    return 0;
}

/* See header. */
int stor_ver_versions(struct stor_ver *v, const char *bucket, const char *key,
                      size_t key_len, struct stor_ver_entry **out, size_t *n)
{
    return versions(v, bucket, key, key_len, NULL, out, n);
}

/* ---- moving versions ---- */

/* true for the headers a moved copy does not take from its source. */
static bool own_hdr(const char *name)
{
    return strcmp(name, STOR_HDR_VERSION_ID) == 0 ||
           strcmp(name, STOR_HDR_ETAG) == 0 ||
           strcmp(name, STOR_HDR_MTIME) == 0 ||
           strcmp(name, STOR_HDR_UPLOAD_ID) == 0;
}

/* Copies @sb/@sk into @db/@dk keeping its headers, version id @vid, ETag
 * and Last-Modified (STOR_HDR_ETAG, STOR_HDR_MTIME). 0 or -errno. */
static int copy_version(struct stor_store *st, const char *sb, const char *sk,
                        size_t skl, const char *db, const char *dk, size_t dkl,
                        const char *vid)
{
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    struct stor_put *p = NULL;
    struct stor_hdr *h = NULL;
    char mt[32], vbuf[24], n_vid[] = STOR_HDR_VERSION_ID;
    char n_mt[] = STOR_HDR_MTIME, n_etag[] = STOR_HDR_ETAG;
    size_t nh = 0, i, chunk;
    uint64_t off = 0;
    char *buf = NULL;
    int ret, tries;

    memset(&info, 0, sizeof(info));
    ret = stor_get_open(st, sb, sk, skl, &info, &g);
    if (ret < 0)
        return ret;
    stor_ver_info_fix(&info);
    h = calloc(info.nhdrs + 3, sizeof(*h));
    if (h == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    for (i = 0; i < info.nhdrs; i++)
        if (!own_hdr(info.hdrs[i].name))
            h[nh++] = info.hdrs[i]; /* borrowed */
    snprintf(mt, sizeof(mt), "%lld.%03d", (long long)info.mtime, info.mtime_ms);
    snprintf(vbuf, sizeof(vbuf), "%s", vid);
    h[nh++] = (struct stor_hdr){n_vid, vbuf};
    h[nh++] = (struct stor_hdr){n_mt, mt};
    h[nh++] = (struct stor_hdr){n_etag, info.etag};
    for (tries = 0; tries < 2; tries++) {
        ret = stor_put_begin(st, db, dk, dkl, (int64_t)info.size, h, nh, &p);
        if (ret != -STOR_ENOBUCKET || tries)
            break;
        ret = stor_bucket_create(st, db);
        if (ret < 0 && ret != -STOR_EBUCKETEXISTS)
            break;
    }
    if (ret < 0)
        goto out;
    chunk = stor_get_preferred_chunk(g);
    chunk = chunk ? chunk : 256 * 1024;
    buf = malloc(chunk);
    if (buf == NULL) {
        ret = -ENOMEM;
        goto out_abort;
    }
    while (off < info.size) {
        size_t want =
            info.size - off < chunk ? (size_t)(info.size - off) : chunk;
        ssize_t n = stor_get_read(g, off, buf, want);

        if (n <= 0) {
            ret = n < 0 ? (int)n : -EIO;
            goto out_abort;
        }
        ret = stor_put_write(p, buf, (size_t)n);
        if (ret < 0)
            goto out_abort;
        off += (uint64_t)n;
    }
    ret = stor_put_commit(p, NULL, NULL);
    p = NULL;
    goto out;

out_abort:
    stor_put_abort(p);
out:
    free(buf);
    free(h);
    stor_get_close(g);
    stor_obj_info_fini(&info);
    return ret;
}

/* Deletes @b/@k, which is no longer wanted; a failure only leaves an
 * unneeded object behind, so it is logged, not returned. */
static void drop(struct stor_store *st, const char *b, const char *k, size_t kl)
{
    int ret = stor_obj_delete(st, b, k, kl);

    if (ret < 0 && ret != -STOR_ENOKEY)
        cm_log(CM_LOG_WARN, -ret, "bucket %s: cannot delete a stale version",
               b);
}

/* Keeps the current version @cur of @key (fixed info) by copying it into
 * the companion. *hk (may be NULL) gets the companion key (malloc'd). */
static int demote(struct stor_ver *v, const char *bucket, const char *hb,
                  const char *key, size_t kl, const struct stor_obj_info *cur,
                  char **hk_out)
{
    const char *vid = stor_ver_info_vid(cur);
    size_t hl;
    char *hk;
    int ret;

    hk = stor_ver_key(key, kl, vid, info_seq(cur), false, &hl);
    if (hk == NULL)
        return -ENOMEM;
    ret = copy_version(v->st, bucket, key, kl, hb, hk, hl, vid);
    if (ret == 0 && hk_out)
        *hk_out = hk;
    else
        free(hk);
    return ret;
}

/* Deletes the companion's "null" version of @key, if any (a suspended
 * bucket's write replaces it). */
static int drop_hidden_null(struct stor_ver *v, const char *hb, const char *key,
                            size_t kl)
{
    struct stor_ver_entry *a = NULL;
    size_t n = 0, cap = 0, i;
    int ret = hidden_versions(v->st, hb, key, kl, &a, &n, &cap);

    for (i = 0; i < n && ret == 0; i++)
        if (strcmp(a[i].vid, "null") == 0) {
            ret = stor_obj_delete(v->st, hb, a[i].hkey, a[i].hkey_len);
            if (ret == -STOR_ENOKEY)
                ret = 0;
        }
    stor_ver_entries_free(a, n);
    return ret;
}

/* Makes the companion's newest version of @key current again when it is
 * an object (the key's current version was just deleted). */
static int promote_newest(struct stor_ver *v, const char *bucket,
                          const char *hb, const char *key, size_t kl)
{
    struct stor_ver_entry *a = NULL;
    size_t n = 0, cap = 0;
    int ret = hidden_versions(v->st, hb, key, kl, &a, &n, &cap);

    if (ret == 0 && n > 0 && !a[0].dm) {
        ret = copy_version(v->st, hb, a[0].hkey, a[0].hkey_len, bucket, key, kl,
                           a[0].vid);
        if (ret == 0)
            ret = stor_obj_delete(v->st, hb, a[0].hkey, a[0].hkey_len);
        if (ret == -STOR_ENOKEY)
            ret = 0;
    }
    stor_ver_entries_free(a, n);
    return ret;
}

/* Creates the companion bucket @hb when it does not exist yet. */
static int companion_ensure(struct stor_store *st, const char *hb)
{
    int ret = stor_bucket_stat(st, hb, NULL);

    if (ret == -STOR_ENOBUCKET) {
        ret = stor_bucket_create(st, hb);
        if (ret == -STOR_EBUCKETEXISTS)
            ret = 0;
    }
    return ret;
}

/* Has the store keep the current version (@version) of the key @p
 * replaces in place at commit (stor_put_set_retire), creating the
 * companion bucket @hb first when needed. */
static int retire_in_place(struct stor_store *st, const char *hb,
                           struct stor_put *p, uint64_t version)
{
    int ret = companion_ensure(st, hb);

    return ret < 0 ? ret : stor_put_set_retire(p, version);
}

/* Under the key's lock: before the key's current object is replaced by
 * a write in state @st, keeps it when it must be kept: in place by the
 * store at @p's commit (@p may be NULL: never) when it can, else copied
 * into the companion now (*hk: the copy). */
static int before_replace(struct stor_ver *v, const char *bucket,
                          const char *hb, const char *key, size_t kl,
                          enum stor_ver_state st, struct stor_put *p, char **hk)
{
    struct stor_obj_info cur;
    uint64_t version;
    int ret;

    *hk = NULL;
    memset(&cur, 0, sizeof(cur));
    ret = stor_obj_stat(v->st, bucket, key, kl, &cur);
    if (ret == -STOR_ENOKEY)
        return 0;
    if (ret < 0)
        return ret;
    stor_ver_info_fix(&cur);
    if (st == STOR_VER_ENABLED ||
        strcmp(stor_ver_info_vid(&cur), "null") != 0) {
        if (p && stor_obj_retirable(v->st, bucket, key, kl, &version))
            ret = retire_in_place(v->st, hb, p, version);
        else
            ret = demote(v, bucket, hb, key, kl, &cur, hk);
    }
    stor_obj_info_fini(&cur);
    return ret;
}

/* Under the key's lock: deletes the key's current object (if any) in
 * state @st, keeping it when it must be kept: in place by the store when
 * it can, together with the delete marker @dm (stor_obj_delete_keep: no
 * copy, one operation; *marked), else copied into the companion first
 * (*hk: the copy) and the marker left to the caller. */
static int delete_keeping(struct stor_ver *v, const char *bucket,
                          const char *hb, const char *key, size_t kl,
                          enum stor_ver_state st, const struct stor_marker *dm,
                          char **hk, bool *marked)
{
    struct stor_obj_info cur;
    uint64_t version;
    bool keep;
    int ret;

    *hk = NULL;
    *marked = false;
    memset(&cur, 0, sizeof(cur));
    ret = stor_obj_stat(v->st, bucket, key, kl, &cur);
    if (ret == -STOR_ENOKEY)
        return 0;
    if (ret < 0)
        return ret;
    stor_ver_info_fix(&cur);
    keep =
        st == STOR_VER_ENABLED || strcmp(stor_ver_info_vid(&cur), "null") != 0;
    ret = -EAGAIN;
    if (keep && stor_obj_retirable(v->st, bucket, key, kl, &version)) {
        ret = companion_ensure(v->st, hb);
        if (ret == 0)
            ret = stor_obj_delete_keep(v->st, bucket, key, kl, version, dm);
        *marked = ret == 0;
    }
    if (ret == -EAGAIN) { /* not keepable in place: copy, then delete */
        ret = keep ? demote(v, bucket, hb, key, kl, &cur, hk) : 0;
        if (ret == 0)
            ret = stor_obj_delete(v->st, bucket, key, kl);
    }
    stor_obj_info_fini(&cur);
    return ret == -STOR_ENOKEY ? 0 : ret;
}

/* See header. */
int stor_ver_put_commit(struct stor_s3_req *r, const char *key, size_t kl,
                        struct stor_put *p, const uint8_t *md5,
                        struct stor_obj_info *info, char *vid_out)
{
    struct stor_ver *v = r->s3->ver;
    enum stor_ver_state st;
    pthread_mutex_t *lk;
    char hb[64], *hk = NULL;
    int ret;

    vid_out[0] = 0;
    ret = stor_ver_state(v, r->bucket, &st);
    if (ret < 0) {
        stor_put_abort(p);
        return ret;
    }
    if (st == STOR_VER_OFF)
        return stor_put_commit(p, md5, info);
    if (kl > STOR_VER_MAX_KEY) {
        stor_put_abort(p);
        return -ENAMETOOLONG;
    }
    if (st == STOR_VER_ENABLED)
        stor_ver_seq_hex(next_seq(v), vid_out);
    else
        snprintf(vid_out, 20, "null");
    ret = stor_put_add_header(p, STOR_HDR_VERSION_ID, vid_out);
    if (ret < 0) {
        stor_put_abort(p);
        return ret;
    }
    stor_ver_hidden_bucket(r->bucket, hb);
    lk = key_lock(v, r->bucket, key, kl);
    pthread_mutex_lock(lk);
    ret = before_replace(v, r->bucket, hb, key, kl, st, p, &hk);
    if (ret < 0) {
        pthread_mutex_unlock(lk);
        stor_put_abort(p);
        return ret;
    }
    ret = stor_put_commit(p, md5, info);
    if (ret < 0 && hk) /* the old version is still current: no copy */
        drop(v->st, hb, hk, strlen(hk));
    if (ret == 0 && st == STOR_VER_SUSPENDED)
        ret = drop_hidden_null(v, hb, key, kl);
    pthread_mutex_unlock(lk);
    free(hk);
    if (ret < 0 || st == STOR_VER_SUSPENDED)
        vid_out[0] = 0; /* as S3: no x-amz-version-id when suspended */
    return ret;
}

/* See header. */
int stor_ver_new_header(struct stor_s3_req *r, char name[32], char value[24])
{
    enum stor_ver_state st;
    int ret = stor_ver_state(r->s3->ver, r->bucket, &st);

    name[0] = 0;
    if (ret < 0 || st == STOR_VER_OFF)
        return ret;
    if (r->key_len > STOR_VER_MAX_KEY)
        return -ENAMETOOLONG;
    snprintf(name, 32, "%s", STOR_HDR_VERSION_ID);
    if (st == STOR_VER_ENABLED)
        stor_ver_seq_hex(next_seq(r->s3->ver), value);
    else
        snprintf(value, 24, "null");
    return 0;
}

/* See header. */
int stor_ver_mpu_complete(struct stor_s3_req *r, const char *upload_id,
                          const struct stor_part *parts, size_t n,
                          struct stor_obj_info *info)
{
    struct stor_ver *v = r->s3->ver;
    enum stor_ver_state st;
    pthread_mutex_t *lk;
    char hb[64], *hk = NULL;
    int ret;

    ret = stor_ver_state(v, r->bucket, &st);
    if (ret < 0)
        return ret;
    if (st == STOR_VER_OFF)
        return stor_mpu_complete_cond(r->s3->store, r->bucket, r->key,
                                      r->key_len, upload_id, parts, n, r->wcond,
                                      info);
    stor_ver_hidden_bucket(r->bucket, hb);
    lk = key_lock(v, r->bucket, r->key, r->key_len);
    pthread_mutex_lock(lk);
    ret = before_replace(v, r->bucket, hb, r->key, r->key_len, st, NULL, &hk);
    if (ret == 0) {
        ret =
            stor_mpu_complete_cond(r->s3->store, r->bucket, r->key, r->key_len,
                                   upload_id, parts, n, r->wcond, info);
        if (ret < 0 && hk)
            drop(v->st, hb, hk, strlen(hk));
        if (ret == 0 && st == STOR_VER_SUSPENDED)
            ret = drop_hidden_null(v, hb, r->key, r->key_len);
    }
    pthread_mutex_unlock(lk);
    free(hk);
    return ret;
}

/* ---- deletes ---- */

/* Whether the version @e of @key (a current object when e->hkey is NULL,
 * else a companion entry) meets @c: 0, -STOR_EPRECOND or -errno. Under the
 * key's lock. */
static int entry_cond(struct stor_ver *v, const char *bucket, const char *hb,
                      const char *key, size_t kl,
                      const struct stor_ver_entry *e,
                      const struct stor_del_cond *c)
{
    struct stor_obj_info info;
    int ret;

    if (!stor_del_cond_any(c))
        return 0;
    if (e->dm)
        return stor_del_cond_match(c, NULL, e->mtime, 0) ? 0 : -STOR_EPRECOND;
    memset(&info, 0, sizeof(info));
    ret = e->hkey ? stor_obj_stat(v->st, hb, e->hkey, e->hkey_len, &info)
                  : stor_obj_stat(v->st, bucket, key, kl, &info);
    if (ret == 0) {
        stor_ver_info_fix(&info); /* a moved version's own ETag and time */
        if (!stor_del_cond_match(c, info.etag, info.mtime, info.size))
            ret = -STOR_EPRECOND;
    }
    stor_obj_info_fini(&info);
    return ret;
}

/* Under the key's lock: a conditional DeleteObject without a version id
 * tests the key's current version (its object, or the delete marker that
 * hides it). 0: go on; 1: there is none (S3 answers 204 and does nothing);
 * -STOR_EPRECOND or -errno. */
static int current_cond(struct stor_ver *v, const char *bucket, const char *key,
                        size_t kl, const struct stor_del_cond *c)
{
    struct stor_ver_entry *a = NULL;
    size_t n = 0;
    int ret;

    if (!stor_del_cond_any(c))
        return 0;
    ret = versions(v, bucket, key, kl, NULL, &a, &n);
    if (ret == 0 && n == 0)
        ret = 1;
    if (ret == 0 && a[0].hkey && !a[0].dm)
        ret = 1; /* no current object and no marker over it */
    if (ret == 0) {
        char hb[64];

        stor_ver_hidden_bucket(bucket, hb);
        ret = entry_cond(v, bucket, hb, key, kl, &a[0], c);
    }
    stor_ver_entries_free(a, n);
    return ret;
}

/* DeleteObject without a version id, under the key's lock, if the current
 * version meets @c (NULL: no condition). @vid_out (>= 20) gets the
 * marker's id ("" when unversioned); *dm whether one was made. */
static int delete_current(struct stor_ver *v, const char *bucket,
                          const char *key, size_t kl,
                          const struct stor_del_cond *c, bool *dm_out,
                          char *vid_out)
{
    char n_vid[] = STOR_HDR_VERSION_ID;
    struct stor_hdr mh = {n_vid, vid_out};
    struct stor_marker dm = {.hdrs = &mh, .nhdrs = 1};
    enum stor_ver_state st;
    pthread_mutex_t *lk;
    char hb[64], *hk = NULL, *mk = NULL;
    bool marked = false;
    int ret;

    *dm_out = false;
    vid_out[0] = 0;
    ret = stor_ver_state(v, bucket, &st);
    if (ret < 0)
        return ret;
    if (st == STOR_VER_OFF) {
        ret = stor_obj_delete_if(v->st, bucket, key, kl, c);
        return ret == -STOR_ENOKEY ? 0 : ret;
    }
    if (kl > STOR_VER_MAX_KEY)
        return -ENAMETOOLONG;
    stor_ver_hidden_bucket(bucket, hb);
    lk = key_lock(v, bucket, key, kl);
    pthread_mutex_lock(lk);
    ret = current_cond(v, bucket, key, kl, c);
    if (ret != 0) {
        pthread_mutex_unlock(lk);
        return ret > 0 ? 0 : ret;
    }
    /* a suspended bucket's "null" versions go first: the marker is one */
    if (st == STOR_VER_SUSPENDED)
        ret = drop_hidden_null(v, hb, key, kl);
    if (ret == 0) {
        if (st == STOR_VER_ENABLED)
            stor_ver_seq_hex(next_seq(v), vid_out);
        else
            snprintf(vid_out, 20, "null");
        mk = stor_ver_key(key, kl, vid_out, next_seq(v), true, &dm.key_len);
        ret = mk ? 0 : -ENOMEM;
        dm.bucket = hb;
        dm.key = mk;
    }
    if (ret == 0)
        ret = delete_keeping(v, bucket, hb, key, kl, st, &dm, &hk, &marked);
    if (ret == 0 && !marked)
        ret = write_small(v->st, hb, dm.key, dm.key_len, NULL, 0, dm.hdrs, 1);
    *dm_out = ret == 0;
    free(mk);
    pthread_mutex_unlock(lk);
    free(hk);
    if (ret < 0)
        vid_out[0] = 0;
    return ret;
}

/* See header. */
int stor_ver_delete_current(struct stor_ver *v, const char *bucket,
                            const char *key, size_t key_len)
{
    char vid[24];
    bool dm;

    return delete_current(v, bucket, key, key_len, NULL, &dm, vid);
}

/* DeleteObject?versionId=@vid, under the key's lock, if that version
 * meets @c (NULL: no condition). *dm: the version deleted was a delete
 * marker. A version that does not exist is not an error (as S3). */
static int delete_version(struct stor_ver *v, const char *bucket,
                          const char *key, size_t kl, const char *vid,
                          const struct stor_del_cond *c, bool *dm)
{
    struct stor_ver_entry *a = NULL;
    pthread_mutex_t *lk;
    size_t n = 0, i;
    char hb[64];
    int ret;

    *dm = false;
    stor_ver_hidden_bucket(bucket, hb);
    lk = key_lock(v, bucket, key, kl);
    pthread_mutex_lock(lk);
    ret = versions(v, bucket, key, kl, NULL, &a, &n);
    for (i = 0; ret == 0 && i < n; i++) {
        if (strcmp(a[i].vid, vid) != 0)
            continue;
        ret = entry_cond(v, bucket, hb, key, kl, &a[i], c);
        if (ret < 0)
            break;
        *dm = a[i].dm;
        if (a[i].hkey == NULL)
            ret = stor_obj_delete(v->st, bucket, key, kl);
        else
            ret = stor_obj_delete(v->st, hb, a[i].hkey, a[i].hkey_len);
        if (ret == -STOR_ENOKEY)
            ret = 0;
        /* the newest went: an older object is current again */
        if (ret == 0 && i == 0)
            ret = promote_newest(v, bucket, hb, key, kl);
        break;
    }
    pthread_mutex_unlock(lk);
    stor_ver_entries_free(a, n);
    return ret;
}

/* See header. */
int stor_ver_delete_version(struct stor_ver *v, const char *bucket,
                            const char *key, size_t key_len, const char *vid)
{
    bool dm;

    return delete_version(v, bucket, key, key_len, vid, NULL, &dm);
}

/* See header. */
int stor_ver_delete_key(struct stor_s3_req *r, const char *key, size_t key_len,
                        const char *vid, const struct stor_del_cond *c,
                        bool *dm, char *vid_out)
{
    int ret;

    if (vid && vid[0]) {
        if (!stor_ver_id_ok(vid))
            return -EINVAL;
        ret = delete_version(r->s3->ver, r->bucket, key, key_len, vid, c, dm);
        snprintf(vid_out, 20, "%s", ret == 0 ? vid : "");
        return ret;
    }
    return delete_current(r->s3->ver, r->bucket, key, key_len, c, dm, vid_out);
}

/* See header. */
enum stor_s3_err stor_ver_del_cond_etag(struct stor_del_cond *c, const char *v,
                                        size_t n)
{
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(c->etag))
        return S3E_INVALID_ARGUMENT;
    memcpy(c->etag, v, n);
    c->etag[n] = 0;
    c->etag_set = true;
    return S3E_NONE;
}

/* See header. */
enum stor_s3_err stor_ver_del_cond_size(struct stor_del_cond *c, const char *v,
                                        size_t n)
{
    if (stor_http_parse_u64(v, n, &c->size) < 0)
        return S3E_INVALID_ARGUMENT;
    c->size_set = true;
    return S3E_NONE;
}

/* The conditions of a DeleteObject request: If-Match,
 * x-amz-if-match-last-modified-time (an HTTP date; an ISO 8601 one is
 * taken too) and x-amz-if-match-size. S3E_NONE or the error to answer. */
static enum stor_s3_err del_cond_parse(struct stor_s3_req *r,
                                       struct stor_del_cond *c)
{
    size_t n = 0;
    const char *v;
    enum stor_s3_err e = S3E_NONE;

    memset(c, 0, sizeof(*c));
    v = stor_s3_hdr(r, "if-match", &n);
    if (v)
        e = stor_ver_del_cond_etag(c, v, n);
    v = stor_s3_hdr(r, "x-amz-if-match-last-modified-time", &n);
    if (v && e == S3E_NONE) {
        if (cm_time_parse_http_any(v, n, time(NULL), &c->mtime) < 0 &&
            cm_time_parse_rfc3339(v, n, &c->mtime) < 0)
            e = S3E_INVALID_ARGUMENT;
        c->mtime_set = true;
    }
    v = stor_s3_hdr(r, "x-amz-if-match-size", &n);
    if (v && e == S3E_NONE)
        e = stor_ver_del_cond_size(c, v, n);
    return e;
}

/* Adds x-amz-version-id (and x-amz-delete-marker when @dm). */
static int vid_headers(struct stor_s3_req *r, const char *vid, bool dm)
{
    int ret = 0;

    if (vid && vid[0])
        ret = stor_resp_hdr(&r->http.resp, "x-amz-version-id", "%s", vid);
    if (ret == 0 && dm)
        ret = stor_resp_hdr(&r->http.resp, "x-amz-delete-marker", "true");
    return ret;
}

/* Maps a store error of a versioned operation to its S3 error. */
static void ver_fail(struct stor_s3_req *r, int err)
{
    if (err == -EINVAL) {
        stor_s3_error(r, S3E_INVALID_VERSION_ID);
        return;
    }
    if (err == -ENAMETOOLONG) {
        stor_s3_error(r, S3E_KEY_TOO_LONG);
        return;
    }
    if (stor_s3_err_from_errno(err) == S3E_INTERNAL)
        cm_log(CM_LOG_ERROR, -err, "req=%016llX %s: versioning error",
               (unsigned long long)r->http.id, r->bucket);
    stor_s3_error(r, stor_s3_err_from_errno(err));
}

/* See header. */
bool stor_ver_op_delete(struct stor_s3_req *r)
{
    const char *vid = stor_s3_query(r, "versionId");
    struct stor_del_cond c;
    enum stor_ver_state st;
    enum stor_s3_err e;
    char out[24];
    bool dm = false;
    int ret;

    e = del_cond_parse(r, &c);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        return true;
    }
    if (vid == NULL) {
        ret = stor_ver_state(r->s3->ver, r->bucket, &st);
        if (ret == 0 && st == STOR_VER_OFF && !stor_del_cond_any(&c))
            return false;
    } else if (!stor_ver_id_ok(vid)) {
        stor_s3_error(r, S3E_INVALID_VERSION_ID);
        return true;
    }
    ret = stor_ver_delete_key(r, r->key, r->key_len, vid, &c, &dm, out);
    if (ret < 0) {
        ver_fail(r, ret);
        return true;
    }
    r->http.resp.status = 204;
    if (vid_headers(r, out, dm) < 0)
        stor_s3_error(r, S3E_INTERNAL);
    return true;
}

/* ---- reads ---- */

/* Answers a request that names a delete marker (@e): GET/HEAD by id 405,
 * without an id 404 NoSuchKey; both say it is a marker. */
static void marker_reply(struct stor_s3_req *r, const struct stor_ver_entry *e,
                         bool by_id)
{
    char lm[CM_TIME_HTTP_LEN + 1];
    int ret;

    stor_s3_error(r, by_id ? S3E_METHOD_NOT_ALLOWED : S3E_NO_SUCH_KEY);
    cm_time_http(e->mtime, lm);
    ret = vid_headers(r, e->vid, true);
    if (ret == 0 && by_id)
        ret = stor_resp_hdr(&r->http.resp, "Last-Modified", "%s", lm);
    if (ret < 0)
        stor_s3_error(r, S3E_INTERNAL);
}

/* See header. */
int stor_ver_open(struct stor_s3_req *r, const char *bucket, const char *key,
                  size_t key_len, const char *vid, struct stor_obj_info *info,
                  struct stor_get **g)
{
    struct stor_ver_entry *a = NULL;
    size_t n = 0, i;
    char hb[64];
    int ret;

    if (!stor_ver_id_ok(vid))
        return -EINVAL;
    ret = versions(r->s3->ver, bucket, key, key_len, NULL, &a, &n);
    for (i = 0; ret == 0 && i < n; i++)
        if (strcmp(a[i].vid, vid) == 0)
            break;
    if (ret == 0 && i == n)
        ret = -STOR_ENOKEY;
    if (ret == 0 && a[i].dm)
        ret = -EISDIR;
    if (ret == 0) {
        stor_ver_hidden_bucket(bucket, hb);
        if (a[i].hkey)
            ret = stor_get_open(r->s3->store, hb, a[i].hkey, a[i].hkey_len,
                                info, g);
        else
            ret = stor_get_open(r->s3->store, bucket, key, key_len, info, g);
        if (ret == 0)
            stor_ver_info_fix(info);
        if (ret == 0 && strcmp(stor_ver_info_vid(info), vid) != 0) {
            /* replaced since we looked: it moved to the companion */
            stor_get_close(*g);
            stor_obj_info_fini(info);
            ret = -EAGAIN;
        }
    }
    stor_ver_entries_free(a, n);
    return ret;
}

/* See header. */
bool stor_ver_op_get(struct stor_s3_req *r)
{
    const char *vid = stor_s3_query(r, "versionId");
    struct stor_ver_entry *a = NULL;
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    enum stor_ver_state st;
    size_t n = 0, i;
    int ret, tries;

    if (vid == NULL) {
        /* the current object is missing: a delete marker? */
        ret = stor_ver_state(r->s3->ver, r->bucket, &st);
        if (ret < 0 || st == STOR_VER_OFF)
            return false;
        ret = versions(r->s3->ver, r->bucket, r->key, r->key_len, NULL, &a, &n);
        if (ret < 0 || n == 0 || !a[0].dm || a[0].hkey == NULL) {
            stor_ver_entries_free(a, n);
            return false;
        }
        marker_reply(r, &a[0], false);
        stor_ver_entries_free(a, n);
        return true;
    }
    memset(&info, 0, sizeof(info));
    for (tries = 0; tries < 3; tries++) {
        ret = stor_ver_open(r, r->bucket, r->key, r->key_len, vid, &info, &g);
        if (ret != -EAGAIN)
            break;
    }
    if (ret == -EISDIR) {
        ret = versions(r->s3->ver, r->bucket, r->key, r->key_len, NULL, &a, &n);
        for (i = 0; ret == 0 && i < n; i++)
            if (strcmp(a[i].vid, vid) == 0) {
                marker_reply(r, &a[i], true);
                break;
            }
        if (ret < 0 || i == n)
            stor_s3_error(r, S3E_NO_SUCH_VERSION);
        stor_ver_entries_free(a, n);
        return true;
    }
    if (ret == -STOR_ENOKEY || ret == -STOR_ENOBUCKET) {
        /* as S3: an unknown id of an existing bucket is NoSuchVersion */
        struct stor_bucket_info bi;

        stor_s3_error(r, stor_bucket_stat(r->s3->store, r->bucket, &bi) < 0
                             ? S3E_NO_SUCH_BUCKET
                             : S3E_NO_SUCH_VERSION);
        return true;
    }
    if (ret < 0) {
        ver_fail(r, ret);
        return true;
    }
    if (r->http.is_head) {
        stor_get_close(g);
        g = NULL;
    }
    stor_s3_get_object_reply(r, &info, g);
    return true;
}

/* ---- Get/PutBucketVersioning ---- */

struct vx {
    int depth;
    struct cm_buf text;
    char status[16];
    char mfa[16];
    bool root_ok;
    bool bad;
};

static void XMLCALL vx_start(void *ud, const char *name, const char **attrs)
{
    struct vx *x = ud;
    const char *c = strrchr(name, ':');

    (void)attrs;
    name = c ? c + 1 : name;
    if (x->depth == 0)
        x->root_ok = strcmp(name, "VersioningConfiguration") == 0;
    x->depth++;
    cm_buf_reset(&x->text);
}

static void XMLCALL vx_text(void *ud, const char *s, int len)
{
    struct vx *x = ud;

    if (cm_buf_append(&x->text, s, (size_t)len) < 0)
        x->bad = true;
}

static void XMLCALL vx_end(void *ud, const char *name)
{
    struct vx *x = ud;
    const char *c = strrchr(name, ':');
    const char *t = x->text.data ? x->text.data : "";

    name = c ? c + 1 : name;
    if (x->depth == 2 && strcmp(name, "Status") == 0)
        snprintf(x->status, sizeof(x->status), "%s", t);
    else if (x->depth == 2 && strcmp(name, "MfaDelete") == 0)
        snprintf(x->mfa, sizeof(x->mfa), "%s", t);
    cm_buf_reset(&x->text);
    x->depth--;
}

/* PutBucketVersioning's body into @x. 0 or -EBADMSG. */
static int parse_versioning(const char *xml, size_t len, struct vx *x)
{
    XML_Parser p = XML_ParserCreate(NULL);
    int ret = 0;

    if (p == NULL)
        return -ENOMEM;
    memset(x, 0, sizeof(*x));
    cm_buf_init(&x->text, 4096);
    XML_SetUserData(p, x);
    XML_SetElementHandler(p, vx_start, vx_end);
    XML_SetCharacterDataHandler(p, vx_text);
    if (len > 65536 ||
        XML_Parse(p, xml ? xml : "", (int)len, 1) != XML_STATUS_OK)
        ret = -EBADMSG;
    if (x->bad || !x->root_ok)
        ret = -EBADMSG;
    XML_ParserFree(p);
    cm_buf_fini(&x->text);
    return ret;
}

/* See header. */
void stor_ver_op_versioning(struct stor_s3_req *r)
{
    struct cm_buf *b = &r->http.resp.body;
    struct stor_bucket_info bi;
    enum stor_ver_state st;
    char hb[64];
    struct vx x;
    int ret;

    ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);
    if (ret < 0) {
        stor_s3_error(r, S3E_NO_SUCH_BUCKET);
        return;
    }
    if (!r->http.is_put) {
        ret = stor_ver_state(r->s3->ver, r->bucket, &st);
        if (ret < 0) {
            ver_fail(r, ret);
            return;
        }
        x_lit(b,
              S3_XML_DECL "<VersioningConfiguration xmlns=\"" S3_XMLNS "\">");
        if (st != STOR_VER_OFF)
            x_fmt(b, "<Status>%s</Status>",
                  st == STOR_VER_ENABLED ? "Enabled" : "Suspended");
        x_lit(b, "</VersioningConfiguration>");
        xml_done(r);
        return;
    }
    if (parse_versioning(r->body.data, r->body.len, &x) < 0) {
        stor_s3_error(r, S3E_MALFORMED_XML);
        return;
    }
    if (strcmp(x.mfa, "Enabled") == 0) {
        stor_s3_error(r, S3E_NOT_IMPLEMENTED); /* no MFA devices here */
        return;
    }
    if ((x.mfa[0] && strcmp(x.mfa, "Disabled") != 0) ||
        (strcmp(x.status, "Enabled") != 0 &&
         strcmp(x.status, "Suspended") != 0)) {
        stor_s3_error(r, S3E_MALFORMED_XML);
        return;
    }
    stor_ver_hidden_bucket(r->bucket, hb);
    ret = write_small(r->s3->store, hb, CFG_KEY, strlen(CFG_KEY), x.status,
                      strlen(x.status), NULL, 0);
    if (ret < 0) {
        ver_fail(r, ret);
        return;
    }
    cache_set(r->s3->ver, r->bucket,
              x.status[0] == 'E' ? STOR_VER_ENABLED : STOR_VER_SUSPENDED);
    r->http.resp.status = 200;
}

/* See header. */
int stor_ver_bucket_delete(struct stor_s3_req *r)
{
    struct stor_list_result res;
    char hb[64];
    size_t i;
    int ret;

    stor_ver_hidden_bucket(r->bucket, hb);
    memset(&res, 0, sizeof(res));
    /* any version left (marker or not) keeps the bucket, as S3 */
    ret = stor_obj_list(r->s3->store, hb, NULL, NULL, NULL, LIST_BATCH, &res);
    if (ret == 0) {
        for (i = 0; i < res.nobjs; i++) {
            size_t kl;
            char vid[STOR_VID_LEN + 1];
            bool dm, null;

            if (stor_ver_parse_hidden(res.objs[i].key, res.objs[i].key_len, &kl,
                                      vid, &dm, &null, NULL))
                ret = -STOR_ENOTEMPTY;
        }
        if (ret == 0 && res.truncated)
            ret = -STOR_ENOTEMPTY;
    } else if (ret == -STOR_ENOBUCKET || ret == -STOR_ENOKEY) {
        ret = 1; /* no companion */
    }
    if (ret < 0) {
        stor_list_result_fini(&res);
        return ret;
    }
    {
        int dret = stor_bucket_delete(r->s3->store, r->bucket);

        if (dret < 0) {
            stor_list_result_fini(&res);
            return dret;
        }
    }
    if (ret == 0) {
        /* the configuration records, then the companion itself */
        for (i = 0; i < res.nobjs; i++)
            drop(r->s3->store, hb, res.objs[i].key, res.objs[i].key_len);
        ret = stor_bucket_delete(r->s3->store, hb);
        if (ret < 0)
            cm_log(CM_LOG_WARN, -ret, "bucket %s: cannot delete %s", r->bucket,
                   hb);
    }
    stor_list_result_fini(&res);
    stor_ver_forget(r->s3->ver, r->bucket);
    return 0;
}

/* ---- ListObjectVersions ---- */

/* One bucket's keys in order, fetched LIST_BATCH at a time. */
struct lstream {
    struct stor_store *st;
    const char *bucket; /* borrowed */
    const char *prefix; /* borrowed; NULL: all */
    char *after;        /* owned; NULL: from the start */
    struct stor_list_result res;
    size_t i;
    bool done;
    bool hidden; /* skips what is not a version */
};

/* The stream's next entry, or NULL at its end (*err set on failure). */
static const struct stor_list_entry *ls_peek(struct lstream *s, int *err)
{
    for (;;) {
        while (s->i < s->res.nobjs) {
            const struct stor_list_entry *e = &s->res.objs[s->i];
            char vid[STOR_VID_LEN + 1];
            size_t kl;
            bool dm, null;

            if (!s->hidden || stor_ver_parse_hidden(e->key, e->key_len, &kl,
                                                    vid, &dm, &null, NULL))
                return e;
            s->i++;
        }
        if (s->done)
            return NULL;
        if (s->res.nobjs > 0) {
            char *a = strndup(s->res.objs[s->res.nobjs - 1].key,
                              s->res.objs[s->res.nobjs - 1].key_len);

            if (a == NULL) {
                *err = -ENOMEM;
                return NULL;
            }
            free(s->after);
            s->after = a;
        }
        stor_list_result_fini(&s->res);
        memset(&s->res, 0, sizeof(s->res));
        s->i = 0;
        *err = stor_obj_list(s->st, s->bucket, s->prefix, NULL, s->after,
                             LIST_BATCH, &s->res);
        if (*err == -STOR_ENOBUCKET || *err == -STOR_ENOKEY) {
            *err = 0;
            s->done = true;
            return NULL;
        }
        if (*err < 0)
            return NULL;
        if (!s->res.truncated)
            s->done = true;
        if (s->res.nobjs == 0 && s->done)
            return NULL;
    }
}

static void ls_fini(struct lstream *s)
{
    stor_list_result_fini(&s->res);
    free(s->after);
}

/* A string of @n bytes of @s with @tail appended, malloc'd. */
static char *cat(const char *s, size_t n, const char *tail, size_t tn)
{
    char *p = malloc(n + tn + 1);

    if (p) {
        memcpy(p, s, n);
        memcpy(p + n, tail, tn);
        p[n + tn] = 0;
    }
    return p;
}

/* Byte order of two keys. */
static int kcmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);

    return c ? c : (an < bn ? -1 : an > bn);
}

/* Where a listing resumes after key-marker @km / version-id-marker @vm:
 * sets the two streams' starting points. 0 or -errno. */
static int list_resume(struct stor_s3_req *r, const char *hb, const char *km,
                       const char *vm, struct lstream *m, struct lstream *h)
{
    size_t kl = strlen(km), i, n = 0;
    struct stor_ver_entry *a = NULL;
    int ret;

    m->after = strdup(km);
    if (m->after == NULL)
        return -ENOMEM;
    if (vm == NULL) { /* after every version of km */
        h->after = cat(km, kl, "\x01\x7f", 2);
        return h->after ? 0 : -ENOMEM;
    }
    ret = versions(r->s3->ver, r->bucket, km, kl, NULL, &a, &n);
    for (i = 0; ret == 0 && i < n; i++)
        if (strcmp(a[i].vid, vm) == 0)
            break;
    if (ret == 0) {
        if (i == n) /* not (any more) a version: after every version */
            h->after = cat(km, kl, "\x01\x7f", 2);
        else if (a[i].hkey == NULL) /* the current one: then the companion */
            h->after = cat(km, kl, "\x01", 1);
        else
            h->after = strdup(a[i].hkey);
        if (h->after == NULL)
            ret = -ENOMEM;
    }
    (void)hb;
    stor_ver_entries_free(a, n);
    return ret;
}

/* One <Version> or <DeleteMarker>. @info: the version's (fixed) info. */
static void list_version(struct cm_buf *b, const char *key, size_t kl,
                         const char *vid, bool latest, bool dm,
                         const struct stor_obj_info *info, time_t mtime,
                         bool url)
{
    char t[CM_TIME_RFC3339_LEN + 1];

    time_iso(info ? info->mtime : mtime, info ? info->mtime_ms : 0, t);
    x_lit(b, dm ? "<DeleteMarker>" : "<Version>");
    x_elem(b, "Key", key, kl, url);
    x_str(b, "VersionId", vid, false);
    x_fmt(b, "<IsLatest>%s</IsLatest><LastModified>%s</LastModified>",
          latest ? "true" : "false", t);
    if (!dm)
        x_fmt(b, "<ETag>&quot;%s&quot;</ETag><Size>%llu</Size>", info->etag,
              (unsigned long long)info->size);
    x_lit(b, "<Owner><ID>" S3_OWNER_ID "</ID><DisplayName>root</DisplayName>"
             "</Owner>");
    x_lit(b, dm ? "</DeleteMarker>"
                : "<StorageClass>STANDARD</StorageClass></Version>");
}

/* The list's parameters and its progress. */
struct vlist {
    const char *prefix, *delim, *km, *vm;
    size_t plen, dlen;
    int maxk;
    bool url;
    size_t count;
    bool truncated;
    char *next_key, *next_vid; /* owned */
    char *last_cp;             /* owned: the last common prefix */
    char *last_key;            /* owned: key of the last version listed */
    size_t last_key_len;
};

/* The common prefix @key rolls up into (its length), or 0. */
static size_t rollup(const struct vlist *l, const char *key, size_t kl)
{
    const char *d;

    if (l->delim == NULL || kl < l->plen)
        return 0;
    d = memmem(key + l->plen, kl - l->plen, l->delim, l->dlen);
    return d ? (size_t)(d - key) + l->dlen : 0;
}

/* Sets a string field of @l to a copy of @s (@n bytes). 0 or -ENOMEM. */
static int set_str(char **f, const char *s, size_t n)
{
    char *p = strndup(s, n);

    if (p == NULL)
        return -ENOMEM;
    free(*f);
    *f = p;
    return 0;
}

/* Lists one merged entry (@key from the bucket when @hkey is NULL, else
 * companion entry @e). 1 when the page is full (truncated), 0, -errno. */
static int list_one(struct stor_s3_req *r, struct vlist *l, struct cm_buf *b,
                    const char *hb, const char *key, size_t kl,
                    const struct stor_list_entry *e)
{
    struct stor_obj_info info;
    char vid[STOR_VID_LEN + 1];
    size_t cp = rollup(l, key, kl), ul;
    bool dm = false, null, latest;
    int ret;

    if (cp) {
        if (l->last_cp && strlen(l->last_cp) == cp &&
            memcmp(l->last_cp, key, cp) == 0)
            return 0; /* already listed */
        if (l->km && kcmp(key, cp, l->km, strlen(l->km)) <= 0)
            return 0; /* listed on an earlier page */
        if (l->count == (size_t)l->maxk)
            return 1;
        x_lit(b, "<CommonPrefixes>");
        x_elem(b, "Prefix", key, cp, l->url);
        x_lit(b, "</CommonPrefixes>");
        l->count++;
        free(l->next_vid);
        l->next_vid = NULL;
        return set_str(&l->last_cp, key, cp) < 0 ||
                       set_str(&l->next_key, key, cp) < 0
                   ? -ENOMEM
                   : 0;
    }
    if (l->count == (size_t)l->maxk)
        return 1;
    memset(&info, 0, sizeof(info));
    if (e) {
        (void)stor_ver_parse_hidden(e->key, e->key_len, &ul, vid, &dm, &null,
                                    NULL);
        ret =
            dm ? 0 : stor_obj_stat(r->s3->store, hb, e->key, e->key_len, &info);
    } else {
        ret = stor_obj_stat(r->s3->store, r->bucket, key, kl, &info);
        if (ret == 0)
            snprintf(vid, sizeof(vid), "%s", stor_ver_info_vid(&info));
    }
    if (ret == -STOR_ENOKEY)
        return 0; /* gone since it was listed */
    if (ret < 0)
        return ret;
    stor_ver_info_fix(&info);
    latest =
        l->last_key == NULL || kcmp(key, kl, l->last_key, l->last_key_len) != 0;
    list_version(b, key, kl, vid, latest, dm, dm ? NULL : &info,
                 e ? e->mtime : 0, l->url);
    stor_obj_info_fini(&info);
    l->count++;
    l->last_key_len = kl;
    if (set_str(&l->last_key, key, kl) < 0 ||
        set_str(&l->next_key, key, kl) < 0 ||
        set_str(&l->next_vid, vid, strlen(vid)) < 0)
        return -ENOMEM;
    return 0;
}

/* Merges the bucket's current objects with the companion's versions in
 * (key, newest first) order into @b. 0 or -errno. */
static int list_merge(struct stor_s3_req *r, struct vlist *l, const char *hb,
                      struct cm_buf *b)
{
    struct lstream m = {
        .st = r->s3->store, .bucket = r->bucket, .prefix = l->prefix};
    struct lstream h = {
        .st = r->s3->store, .bucket = hb, .prefix = l->prefix, .hidden = true};
    int ret = 0;

    if (l->km) {
        ret = list_resume(r, hb, l->km, l->vm, &m, &h);
        if (ret == 0 && l->vm) { /* the rest of km is not its latest */
            l->last_key_len = strlen(l->km);
            ret = set_str(&l->last_key, l->km, l->last_key_len);
        }
    }
    while (ret == 0) {
        const struct stor_list_entry *me = ls_peek(&m, &ret), *he;
        size_t hkl = 0;
        int c;

        if (ret < 0)
            break;
        he = ls_peek(&h, &ret);
        if (ret < 0)
            break;
        if (me == NULL && he == NULL)
            break;
        if (he)
            hkl = he->key_len - STOR_VER_SUFFIX;
        c = me == NULL   ? 1
            : he == NULL ? -1
                         : kcmp(me->key, me->key_len, he->key, hkl);
        if (c <= 0) {
            ret = list_one(r, l, b, hb, me->key, me->key_len, NULL);
            if (ret == 0)
                m.i++;
        } else {
            ret = list_one(r, l, b, hb, he->key, hkl, he);
            if (ret == 0)
                h.i++;
        }
        if (ret == 1) {
            l->truncated = true;
            ret = 0;
            break;
        }
    }
    ls_fini(&m);
    ls_fini(&h);
    return ret;
}

/* See header. */
bool stor_ver_op_list(struct stor_s3_req *r)
{
    struct vlist l = {0};
    struct cm_buf body, *b = &r->http.resp.body;
    const char *enc = stor_s3_query(r, "encoding-type");
    const char *mk = stor_s3_query(r, "max-keys");
    enum stor_ver_state st;
    struct stor_bucket_info bi;
    char hb[64];
    uint64_t mx = 1000;
    int ret;

    ret = stor_ver_state(r->s3->ver, r->bucket, &st);
    if (ret == 0 && st == STOR_VER_OFF)
        return false;
    if (ret < 0) {
        ver_fail(r, ret);
        return true;
    }
    if (stor_bucket_stat(r->s3->store, r->bucket, &bi) < 0) {
        stor_s3_error(r, S3E_NO_SUCH_BUCKET);
        return true;
    }
    l.prefix = stor_s3_query(r, "prefix");
    l.delim = stor_s3_query(r, "delimiter");
    l.km = stor_s3_query(r, "key-marker");
    l.vm = stor_s3_query(r, "version-id-marker");
    if (l.prefix && !l.prefix[0])
        l.prefix = NULL;
    if (l.delim && !l.delim[0])
        l.delim = NULL;
    if (l.km && !l.km[0])
        l.km = NULL;
    if (l.vm && !l.vm[0])
        l.vm = NULL;
    l.plen = l.prefix ? strlen(l.prefix) : 0;
    l.dlen = l.delim ? strlen(l.delim) : 0;
    if ((enc && strcmp(enc, "url") != 0) ||
        (mk && stor_http_parse_u64(mk, strlen(mk), &mx) < 0) ||
        (l.vm && (l.km == NULL || !stor_ver_id_ok(l.vm)))) {
        stor_s3_error(r, S3E_INVALID_ARGUMENT);
        return true;
    }
    l.url = enc != NULL;
    l.maxk = mx > 1000 ? 1000 : (int)mx;
    stor_ver_hidden_bucket(r->bucket, hb);
    cm_buf_init(&body, CM_BUF_NOLIMIT);
    ret = l.maxk > 0 ? list_merge(r, &l, hb, &body) : 0;
    if (ret < 0) {
        cm_buf_fini(&body);
        ver_fail(r, ret);
        goto out;
    }
    x_lit(b, S3_XML_DECL "<ListVersionsResult xmlns=\"" S3_XMLNS "\">");
    x_str(b, "Name", r->bucket, false);
    x_str(b, "Prefix", l.prefix, l.url);
    x_str(b, "KeyMarker", l.km, l.url);
    x_str(b, "VersionIdMarker", l.vm, false);
    x_fmt(b, "<MaxKeys>%d</MaxKeys>", l.maxk);
    if (l.delim)
        x_str(b, "Delimiter", l.delim, l.url);
    x_fmt(b, "<IsTruncated>%s</IsTruncated>", l.truncated ? "true" : "false");
    if (l.truncated && l.next_key) {
        x_str(b, "NextKeyMarker", l.next_key, l.url);
        if (l.next_vid)
            x_str(b, "NextVersionIdMarker", l.next_vid, false);
    }
    if (l.url)
        x_lit(b, "<EncodingType>url</EncodingType>");
    if (body.len && cm_buf_append(b, body.data, body.len) < 0)
        x_fail(b);
    x_lit(b, "</ListVersionsResult>");
    cm_buf_fini(&body);
    xml_done(r);
out:
    free(l.next_key);
    free(l.next_vid);
    free(l.last_cp);
    free(l.last_key);
    return true;
}
