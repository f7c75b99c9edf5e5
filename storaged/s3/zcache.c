/* storaged/s3/zcache.c - checked object bodies held as pipe pages (zcache.h).
 *
 * DESIGN: why pipes of private pages, and not the page cache's own pages.
 * A zero-copy GET of an extent object (FORMAT.md "Zero-copy GETs") splices
 * the records' page-cache pages and checks every shard's CRC over them:
 * per GET 12 mincore, 12 splice and the CRC of every byte, read from
 * memory no cache holds (perf: about a third of the server's CPU per
 * 320 KiB GET, session 9). Holding those page-cache pages in a pipe would
 * let a later GET skip the check only if nothing could change them, and
 * something can: a write(2) into the extent file changes a cached page in
 * place (the tests' bit rot is made that way), and a punch zeroes part of
 * a large folio in place. Private anonymous pages that nothing maps once
 * they are in the pipe cannot change at all, so they are checked once, when
 * they are filled from bytes that just passed the check, and never again.
 * The price is one copy per admitted body and memory beside the page cache
 * (bounded by --zc-cache-mem; the page cache's own copy of a hot body can
 * then be reclaimed, since hits no longer touch it).
 *
 * A uthash table on (bucket, object id) and an LRU list, under one mutex
 * (both loops share the cache, so a body is held once). A hit's tee runs
 * under the mutex too: it only copies page references (tens of
 * microseconds at most), and an entry's pipe is then never closed under a
 * tee. Admission: a small table of recently offered (key, version) hashes;
 * a body is put only when offered a second time, so a pass over more
 * distinct objects than fit (each seen once) copies nothing. */
#include "storaged/s3/zcache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <uthash.h>

#include "common/list.h"

#define ZC_PAGE     4096u
#define ZC_SEEN     4096u /* admission table slots (a power of two) */
#define ZC_ENT_COST 512u  /* bookkeeping per entry, beside its pages */

struct zc_key {
    uint8_t id[16];
    char bucket[64]; /* zero-padded: compared as bytes */
};

struct zc_ent {
    struct zc_key key;
    uint64_t version;
    size_t len;
    int fd;             /* owned: the pipe's read end */
    struct cm_list lru; /* c->lru: first = most recent */
    UT_hash_handle hh;
};

struct stor_zcache {
    pthread_mutex_t lock; /* everything below */
    size_t max_bytes, bytes, entries;
    struct zc_ent *map;
    struct cm_list lru;     /* of zc_ent.lru */
    uint64_t seen[ZC_SEEN]; /* admission: hashes of recent offers */
    uint64_t hits, puts, evictions, failed;
};

static size_t pages_of(size_t len)
{
    return (len + ZC_PAGE - 1) / ZC_PAGE * ZC_PAGE;
}

static size_t ent_cost(size_t len)
{
    return pages_of(len) + ZC_ENT_COST;
}

/* Fills @k; -1 when the bucket name is too long. */
static int key_make(struct zc_key *k, const char *bucket, const uint8_t id[16])
{
    size_t n = strlen(bucket);

    if (n >= sizeof(k->bucket))
        return -1;
    memset(k, 0, sizeof(*k));
    memcpy(k->id, id, 16);
    memcpy(k->bucket, bucket, n);
    return 0;
}

/* A hash of (key, version) for the admission table (ids are already
 * keyed hashes of the object key; the bucket is mixed in). */
static uint64_t offer_hash(const struct zc_key *k, uint64_t version)
{
    uint64_t h = 0xcbf29ce484222325ULL, a, b;

    for (size_t i = 0; i < sizeof(k->bucket) && k->bucket[i]; i++)
        h = (h ^ (uint8_t)k->bucket[i]) * 0x100000001b3ULL;
    memcpy(&a, k->id, 8);
    memcpy(&b, k->id + 8, 8);
    h ^= a + 0x9E3779B97F4A7C15ULL * (b ^ version);
    h *= 0xff51afd7ed558ccdULL;
    return (h ^ (h >> 33)) | 1; /* never 0, an empty slot */
}

/* See header. */
struct stor_zcache *stor_zcache_create(size_t max_bytes)
{
    struct stor_zcache *c;

    if (max_bytes == 0)
        return NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->max_bytes = max_bytes;
    cm_list_init(&c->lru);
    return c;
}

/* Unlinks @e from the LRU list and the map, closes its pipe and frees it
 * (pages a socket still sends stay alive: the socket holds them). Caller
 * holds c->lock. */
static void ent_drop(struct stor_zcache *c, struct zc_ent *e)
{
    cm_list_del(&e->lru);
    HASH_DEL(c->map, e);
    c->bytes -= ent_cost(e->len);
    c->entries--;
    close(e->fd);
    free(e);
}

/* See header. */
void stor_zcache_destroy(struct stor_zcache *c)
{
    if (c == NULL)
        return;
    while (!cm_list_empty(&c->lru))
        ent_drop(c, CM_LIST_FIRST(&c->lru, struct zc_ent, lru));
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* See header. */
size_t stor_zcache_pipe_bytes(size_t len)
{
    return pages_of(len ? len : 1);
}

/* The entry for @k at @version and @len, or NULL. Caller holds c->lock. */
static struct zc_ent *find(struct stor_zcache *c, const struct zc_key *k,
                           uint64_t version, size_t len)
{
    struct zc_ent *e;

    HASH_FIND(hh, c->map, k, sizeof(*k), e);
    if (e == NULL || e->version != version || e->len != len)
        return NULL;
    return e;
}

/* See header. */
bool stor_zcache_has(struct stor_zcache *c, const char *bucket,
                     const uint8_t id[16], uint64_t version, size_t len)
{
    struct zc_key k;
    bool ok;

    if (c == NULL || key_make(&k, bucket, id) < 0)
        return false;
    pthread_mutex_lock(&c->lock);
    ok = find(c, &k, version, len) != NULL;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

/* See header. */
int stor_zcache_tee(struct stor_zcache *c, const char *bucket,
                    const uint8_t id[16], uint64_t version, size_t len,
                    int pipe_wr)
{
    struct zc_key k;
    struct zc_ent *e;
    ssize_t n;
    int ret = 0;

    if (c == NULL || key_make(&k, bucket, id) < 0)
        return -ENOENT;
    pthread_mutex_lock(&c->lock);
    e = find(c, &k, version, len);
    if (e == NULL) {
        pthread_mutex_unlock(&c->lock);
        return -ENOENT;
    }
    /* tee never consumes: each call starts at the pipe's first byte, so
     * a short one cannot be continued; the caller drops what came */
    do {
        n = tee(e->fd, pipe_wr, len, SPLICE_F_NONBLOCK);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)len)
        ret = n < 0 ? -errno : -EIO;
    if (ret == 0)
        cm_list_move_front(&c->lru, &e->lru);
    if (ret == 0)
        c->hits++;
    else
        c->failed++;
    pthread_mutex_unlock(&c->lock);
    return ret;
}

/* See header. */
bool stor_zcache_want(struct stor_zcache *c, const char *bucket,
                      const uint8_t id[16], uint64_t version, size_t len)
{
    struct zc_key k;
    uint64_t h;
    bool want;

    if (c == NULL || len == 0 || len > STOR_ZCACHE_MAX_BODY ||
        ent_cost(len) > c->max_bytes || key_make(&k, bucket, id) < 0)
        return false;
    h = offer_hash(&k, version);
    pthread_mutex_lock(&c->lock);
    want = c->seen[h & (ZC_SEEN - 1)] == h && find(c, &k, version, len) == NULL;
    c->seen[h & (ZC_SEEN - 1)] = h;
    pthread_mutex_unlock(&c->lock);
    return want;
}

/* See header. */
void *stor_zcache_region(size_t len)
{
    void *p;

    if (len == 0 || len > STOR_ZCACHE_MAX_BODY)
        return NULL;
    p = mmap(NULL, pages_of(len), PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* See header. */
void stor_zcache_region_free(void *region, size_t len)
{
    if (region)
        munmap(region, pages_of(len));
}

/* Makes a pipe holding the @len bytes at @region (its pages referenced,
 * not copied); returns its read end, or -errno. */
static int fill_pipe(void *region, size_t len)
{
    int p[2], ret;
    size_t done = 0;

    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    ret = fcntl(p[1], F_SETPIPE_SZ, (int)stor_zcache_pipe_bytes(len));
    if (ret < 0 || (size_t)ret < stor_zcache_pipe_bytes(len)) {
        ret = ret < 0 ? -errno : -ENOSPC;
        goto out_close;
    }
    while (done < len) {
        struct iovec iov = {(char *)region + done, len - done};
        ssize_t n = vmsplice(p[1], &iov, 1, SPLICE_F_NONBLOCK);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ret = n < 0 ? -errno : -EIO;
            goto out_close;
        }
        done += (size_t)n;
    }
    close(p[1]);
    return p[0];

out_close:
    close(p[0]);
    close(p[1]);
    return ret;
}

/* See header. */
void stor_zcache_put(struct stor_zcache *c, const char *bucket,
                     const uint8_t id[16], uint64_t version, void *region,
                     size_t len)
{
    struct zc_ent *e = NULL, *old;
    struct zc_key k;
    int fd;

    if (region == NULL)
        return;
    if (c == NULL || len == 0 || len > STOR_ZCACHE_MAX_BODY ||
        key_make(&k, bucket, id) < 0) {
        munmap(region, pages_of(len));
        return;
    }
    fd = fill_pipe(region, len);
    /* from here on nothing maps the pages: only the pipe holds them */
    munmap(region, pages_of(len));
    if (fd >= 0)
        e = calloc(1, sizeof(*e));
    pthread_mutex_lock(&c->lock);
    if (e == NULL) {
        c->failed++;
        pthread_mutex_unlock(&c->lock);
        if (fd >= 0)
            close(fd);
        return;
    }
    e->key = k;
    e->version = version;
    e->len = len;
    e->fd = fd;
    HASH_FIND(hh, c->map, &k, sizeof(k), old);
    if (old != NULL)
        ent_drop(c, old);
    while (!cm_list_empty(&c->lru) && c->bytes + ent_cost(len) > c->max_bytes) {
        ent_drop(c, CM_LIST_LAST(&c->lru, struct zc_ent, lru));
        c->evictions++;
    }
    HASH_ADD(hh, c->map, key, sizeof(k), e);
    cm_list_push_front(&c->lru, &e->lru);
    c->bytes += ent_cost(len);
    c->entries++;
    c->puts++;
    pthread_mutex_unlock(&c->lock);
}

/* See header. */
void stor_zcache_stats(struct stor_zcache *c, struct stor_zcache_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->lock);
    st->hits = c->hits;
    st->puts = c->puts;
    st->evictions = c->evictions;
    st->failed = c->failed;
    st->bytes = c->bytes;
    st->entries = c->entries;
    st->max_bytes = c->max_bytes;
    pthread_mutex_unlock(&c->lock);
}
