/* fuse/cache.c - block cache: one hash table + one LRU list under a mutex,
 * and the allocator of the blocks' data buffers.
 *
 * DESIGN: the lock is held only for table/list updates, never during a
 * fetch or a copy: holders keep a reference and read the immutable data
 * after the block is READY. One condvar serves all waiters (a LOADING block
 * is rare and short-lived compared with reads of READY ones). Eviction runs
 * after every fill, from the cold end of the LRU, skipping referenced
 * blocks. A FAILED block leaves the table at once, so a later reader fetches
 * again rather than inheriting the error. */
#include "fuse/cache.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct fc_cache {
    pthread_mutex_t lock;   /* protects everything below and block fields */
    pthread_cond_t cond;    /* broadcast when a block leaves LOADING */
    struct fc_block *table; /* uthash by id */
    struct cm_list lru;     /* of fc_block.lru: first = most recent */
    size_t bytes, max_bytes, nblocks;
    struct cm_list handed; /* of fc_block.hlist: oldest first */
    size_t handed_bytes, handed_max;
    uint64_t pf_wasted; /* prefetched bytes evicted unread */
    uint64_t ra_issued, ra_used, ra_wasted; /* readahead bytes */
};

/* Creates the cache (see header). */
int fc_cache_create(size_t max_bytes, struct fc_cache **out)
{
    struct fc_cache *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return -ENOMEM;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->max_bytes = max_bytes;
    c->handed_max = max_bytes / 16;
    cm_list_init(&c->lru);
    cm_list_init(&c->handed);
    *out = c;
    return 0;
}

/* Buffers carry their size and kind in a header just before the data;
 * 64 bytes keep the data cache-line aligned. A mapped buffer's header is
 * at the end of its first page, so its data starts on the next one
 * (FC_CACHE_BUF_ALIGN: O_DIRECT reads into it and writes from it). */
#define BUF_HDR    64
#define BUF_MAPPED 0x6d617070u /* "mapp" */
#define BUF_HEAP   0x68656170u /* "heap" */

struct buf_hdr {
    size_t len; /* of the whole allocation, header included */
    unsigned kind;
    struct buf_hdr *next; /* on the recycle list */
};

/* Unmaps the mapped buffer of header @h. */
static void buf_unmap(struct buf_hdr *h)
{
    munmap((char *)h + BUF_HDR - FC_CACHE_BUF_ALIGN, h->len);
}

/* Freed big buffers are kept, up to RECYCLE_MAX bytes, and handed out
 * again to an allocation of the same size: a stream larger than the cache
 * evicts a block per block it fetches, and reused memory costs neither
 * page faults nor mmap/munmap calls. Process-wide: one mount per process. */
#define RECYCLE_MAX (64u << 20)
static pthread_mutex_t g_recycle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct buf_hdr *g_recycle; /* protected by g_recycle_lock */
static size_t g_recycle_bytes;    /* protected by g_recycle_lock */

/* The largest mapping a big buffer for @mlen mapped bytes may reuse: up
 * to a sixteenth more (16 KiB from 256 KiB, 64 KiB from 1 MiB). Whole-
 * object GETs of medium files come in every size; when only an exact
 * length matched, a recycled buffer almost never fitted the next file, and
 * each one cost an munmap and a fresh, zeroed, populated mmap. */
static size_t buf_reuse_max(size_t mlen)
{
    size_t step = FC_CACHE_BUF_ALIGN;

    while (step * 16 * 2 <= mlen)
        step *= 2;
    return mlen + step;
}

/* Takes a recycled buffer of @len to @max bytes, or NULL. A miss unmaps
 * the oldest buffer kept (the tail): buffers of a size no longer asked
 * for drain at the rate of misses instead of holding the pool full. */
static struct buf_hdr *recycle_take(size_t len, size_t max)
{
    struct buf_hdr **pp, **last = NULL, *h = NULL, *stale = NULL;

    pthread_mutex_lock(&g_recycle_lock);
    for (pp = &g_recycle; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->len >= len && (*pp)->len <= max) {
            h = *pp;
            *pp = h->next;
            g_recycle_bytes -= h->len;
            break;
        }
        last = pp;
    }
    if (h == NULL && last != NULL) {
        stale = *last;
        *last = NULL;
        g_recycle_bytes -= stale->len;
    }
    pthread_mutex_unlock(&g_recycle_lock);
    if (stale != NULL)
        buf_unmap(stale);
    return h;
}

/* Keeps @h for reuse; true when kept. A full list drops its oldest
 * buffers (the tail) to make room, so that it follows the sizes in use
 * now: buffers of a size no longer asked for (whole-object GETs of the
 * first epoch, then disk-cache hits with their O_DIRECT slack) would
 * otherwise fill it for good, and every allocation would map anew. */
static bool recycle_put(struct buf_hdr *h)
{
    struct buf_hdr *drop = NULL;

    if (h->len > RECYCLE_MAX)
        return false;
    pthread_mutex_lock(&g_recycle_lock);
    while (g_recycle != NULL && g_recycle_bytes + h->len > RECYCLE_MAX) {
        struct buf_hdr **pp = &g_recycle, *t;
        while ((*pp)->next != NULL)
            pp = &(*pp)->next;
        t = *pp;
        *pp = NULL;
        g_recycle_bytes -= t->len;
        t->next = drop;
        drop = t;
    }
    h->next = g_recycle;
    g_recycle = h;
    g_recycle_bytes += h->len;
    pthread_mutex_unlock(&g_recycle_lock);
    while (drop != NULL) {
        struct buf_hdr *next = drop->next;
        buf_unmap(drop);
        drop = next;
    }
    return true;
}

/* Unmaps every recycled buffer. */
static void recycle_drain(void)
{
    struct buf_hdr *h, *next;

    pthread_mutex_lock(&g_recycle_lock);
    h = g_recycle;
    g_recycle = NULL;
    g_recycle_bytes = 0;
    pthread_mutex_unlock(&g_recycle_lock);
    for (; h != NULL; h = next) {
        next = h->next;
        buf_unmap(h);
    }
}

/* Allocates a block buffer (see header). */
char *fc_cache_buf_alloc(size_t size)
{
    size_t len = size + BUF_HDR;
    struct buf_hdr *h;

    if (size >= FC_CACHE_BIGBUF) {
        size_t mlen = (size + 2 * FC_CACHE_BUF_ALIGN - 1) / FC_CACHE_BUF_ALIGN *
                      FC_CACHE_BUF_ALIGN;
        char *m;
        if ((h = recycle_take(mlen, buf_reuse_max(mlen))) != NULL)
            return (char *)h + BUF_HDR;
        m = mmap(NULL, mlen, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (m != MAP_FAILED) {
            h = (struct buf_hdr *)(void *)(m + FC_CACHE_BUF_ALIGN - BUF_HDR);
            h->kind = BUF_MAPPED;
            h->len = mlen;
            return m + FC_CACHE_BUF_ALIGN;
        }
        /* out of mappings (vm.max_map_count) or memory: try the heap */
    }
    h = malloc(len);
    if (h == NULL)
        return NULL;
    h->kind = BUF_HEAP;
    h->len = len;
    return (char *)h + BUF_HDR;
}

/* Frees a block buffer (see header). */
void fc_cache_buf_free(char *p)
{
    struct buf_hdr *h;

    if (p == NULL)
        return;
    h = (struct buf_hdr *)(void *)(p - BUF_HDR);
    if (h->kind == BUF_MAPPED) {
        if (!recycle_put(h))
            buf_unmap(h);
    } else {
        free(h);
    }
}

_Thread_local bool fc_cache_waited;

static void block_free(struct fc_block *b)
{
    fc_cache_buf_free(b->data);
    free(b->id);
    free(b);
}

/* Frees every block; no reference may be held. */
void fc_cache_destroy(struct fc_cache *c)
{
    struct fc_block *b, *tmp;

    if (c == NULL)
        return;
    HASH_ITER(hh, c->table, b, tmp)
    {
        HASH_DEL(c->table, b);
        block_free(b);
    }
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
    recycle_drain();
}

/* Builds the id string; NULL on ENOMEM. */
static char *block_id(const char *key, const char *etag, uint64_t idx)
{
    char *id = NULL;

    if (asprintf(&id, "%s\n%s\n%" PRIu64, key, etag, idx) < 0)
        return NULL;
    return id;
}

static void handed_unlink(struct fc_cache *c, struct fc_block *b)
{
    cm_list_del(&b->hlist);
    b->handed = false;
    c->handed_bytes -= b->len;
}

/* Removes @b from table and LRU; frees it if unreferenced. Lock held. */
static void block_unlink(struct fc_cache *c, struct fc_block *b)
{
    HASH_DEL(c->table, b);
    cm_list_del(&b->lru);
    if (b->handed)
        handed_unlink(c, b);
    c->nblocks--;
    if (b->state == FC_BLOCK_READY)
        c->bytes -= b->len;
    b->id[0] = '\0'; /* marks "not in table" for release */
    if (b->refs == 0)
        block_free(b);
}

/* Evicts cold unreferenced READY blocks until under budget, handed ones
 * first past their share (fc_cache_handed). Lock held. */
static void evict(struct fc_cache *c)
{
    struct fc_block *b = CM_LIST_FIRST(&c->handed, struct fc_block, hlist);
    struct fc_block *prev;

    /* down to half their share at once: the recycled buffers then pile
     * up, and the next fetches find one of their size among them (one at
     * a time, a pool of two or three rarely held a fit) */
    if (c->handed_bytes > c->handed_max) {
        while (b && c->handed_bytes > c->handed_max / 2) {
            struct fc_block *next =
                CM_LIST_NEXT(&c->handed, b, struct fc_block, hlist);
            if (b->refs == 0)
                block_unlink(c, b); /* read: neither wasted counter */
            b = next;
        }
    }
    b = CM_LIST_LAST(&c->lru, struct fc_block, lru);
    while (c->bytes > c->max_bytes && b) {
        prev = CM_LIST_PREV(&c->lru, b, struct fc_block, lru);
        if (b->refs == 0 && b->state == FC_BLOCK_READY) {
            if (b->prefetched && !b->seen)
                c->pf_wasted += b->len;
            if (b->ra)
                c->ra_wasted += b->len;
            block_unlink(c, b);
        }
        b = prev;
    }
}

/* Inserts a new LOADING block with one reference. Lock held. */
static struct fc_block *block_insert(struct fc_cache *c, char *id)
{
    struct fc_block *b = calloc(1, sizeof(*b));

    if (b == NULL) {
        free(id);
        return NULL;
    }
    b->id = id;
    b->state = FC_BLOCK_LOADING;
    b->refs = 1;
    cm_list_init(&b->hlist);
    HASH_ADD_KEYPTR(hh, c->table, b->id, strlen(b->id), b);
    cm_list_push_front(&c->lru, &b->lru);
    c->nblocks++;
    return b;
}

/* Finds or inserts a block (see header). */
struct fc_block *fc_cache_acquire(struct fc_cache *c, const char *key,
                                  const char *etag, uint64_t idx, bool wait,
                                  bool *owner)
{
    char *id = block_id(key, etag, idx);
    struct fc_block *b;

    *owner = false;
    if (id == NULL)
        return NULL;
    pthread_mutex_lock(&c->lock);
    HASH_FIND_STR(c->table, id, b);
    if (b == NULL) {
        b = block_insert(c, id);
        *owner = b != NULL;
        pthread_mutex_unlock(&c->lock);
        return b;
    }
    free(id);
    b->refs++;
    cm_list_move_front(&c->lru, &b->lru);
    fc_cache_waited = wait && b->state == FC_BLOCK_LOADING;
    while (wait && b->state == FC_BLOCK_LOADING)
        pthread_cond_wait(&c->cond, &c->lock);
    if (b->ra && b->state == FC_BLOCK_READY) {
        /* a reader's first use of a readahead block */
        b->ra = false;
        c->ra_used += b->len;
    }
    pthread_mutex_unlock(&c->lock);
    return b;
}

/* Inserts a LOADING block only when absent (see header). */
struct fc_block *fc_cache_claim(struct fc_cache *c, const char *key,
                                const char *etag, uint64_t idx)
{
    char *id = block_id(key, etag, idx);
    struct fc_block *b;

    if (id == NULL)
        return NULL;
    pthread_mutex_lock(&c->lock);
    HASH_FIND_STR(c->table, id, b);
    if (b != NULL) {
        free(id);
        pthread_mutex_unlock(&c->lock);
        return NULL;
    }
    b = block_insert(c, id);
    pthread_mutex_unlock(&c->lock);
    return b;
}

/* Publishes a fetched block or its failure (see header). */
void fc_cache_fill(struct fc_cache *c, struct fc_block *b, char *data,
                   size_t len, int err)
{
    pthread_mutex_lock(&c->lock);
    if (err < 0) {
        fc_cache_buf_free(data);
        b->err = err;
        b->state = FC_BLOCK_FAILED;
        if (b->id[0] != '\0')
            block_unlink(c, b); /* we hold a ref: not freed here */
    } else {
        b->data = data;
        b->len = len;
        b->state = FC_BLOCK_READY;
        if (b->id[0] != '\0')
            c->bytes += len;
        if (b->ra)
            c->ra_issued += len;
        evict(c);
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

void fc_cache_ref(struct fc_cache *c, struct fc_block *b)
{
    pthread_mutex_lock(&c->lock);
    b->refs++;
    pthread_mutex_unlock(&c->lock);
}

/* Drops a reference (see header). */
void fc_cache_release(struct fc_cache *c, struct fc_block *b)
{
    pthread_mutex_lock(&c->lock);
    b->refs--;
    if (b->refs == 0) {
        if (b->id[0] == '\0')
            block_free(b); /* already out of the table */
        else if (c->bytes > c->max_bytes || c->handed_bytes > c->handed_max)
            evict(c);
    }
    pthread_mutex_unlock(&c->lock);
}

bool fc_cache_contains(struct fc_cache *c, const char *key, const char *etag,
                       uint64_t idx)
{
    char *id = block_id(key, etag, idx);
    struct fc_block *b = NULL;

    if (id == NULL)
        return false;
    pthread_mutex_lock(&c->lock);
    HASH_FIND_STR(c->table, id, b);
    pthread_mutex_unlock(&c->lock);
    free(id);
    return b != NULL;
}

/* Moves READY blocks to another ETag (see header). */
size_t fc_cache_rekey(struct fc_cache *c, const char *key, const char *from,
                      const char *to, uint64_t nblocks)
{
    size_t moved = 0;

    for (uint64_t i = 0; i < nblocks; i++) {
        char *fid = block_id(key, from, i), *tid = block_id(key, to, i);
        struct fc_block *b = NULL, *t = NULL;

        if (fid == NULL || tid == NULL) {
            free(fid);
            free(tid);
            break; /* ENOMEM: the rest is fetched again */
        }
        pthread_mutex_lock(&c->lock);
        HASH_FIND_STR(c->table, fid, b);
        if (b != NULL)
            HASH_FIND_STR(c->table, tid, t);
        if (b != NULL && t == NULL && b->state == FC_BLOCK_READY) {
            HASH_DEL(c->table, b);
            free(b->id);
            b->id = tid;
            tid = NULL;
            HASH_ADD_KEYPTR(hh, c->table, b->id, strlen(b->id), b);
            moved++;
        }
        pthread_mutex_unlock(&c->lock);
        free(fid);
        free(tid);
    }
    return moved;
}

void fc_cache_mark_prefetch(struct fc_cache *c, struct fc_block *b)
{
    pthread_mutex_lock(&c->lock);
    b->prefetched = true;
    pthread_mutex_unlock(&c->lock);
}

int fc_cache_note_read(struct fc_cache *c, struct fc_block *b)
{
    int r;

    pthread_mutex_lock(&c->lock);
    r = b->seen ? 0 : b->prefetched ? 2 : 1;
    b->seen = true;
    pthread_mutex_unlock(&c->lock);
    return r;
}

uint64_t fc_cache_prefetch_wasted(struct fc_cache *c)
{
    uint64_t n;

    pthread_mutex_lock(&c->lock);
    n = c->pf_wasted;
    pthread_mutex_unlock(&c->lock);
    return n;
}

void fc_cache_mark_readahead(struct fc_cache *c, struct fc_block **blks,
                             unsigned n)
{
    pthread_mutex_lock(&c->lock);
    for (unsigned i = 0; i < n; i++)
        blks[i]->ra = true;
    pthread_mutex_unlock(&c->lock);
}

void fc_cache_readahead_stats(struct fc_cache *c, uint64_t *issued,
                              uint64_t *used, uint64_t *wasted)
{
    pthread_mutex_lock(&c->lock);
    *issued = c->ra_issued;
    *used = c->ra_used;
    *wasted = c->ra_wasted;
    pthread_mutex_unlock(&c->lock);
}

/* Counts page-cache replies of a block (see header). */
void fc_cache_handed(struct fc_cache *c, struct fc_block *b, size_t n)
{
    pthread_mutex_lock(&c->lock);
    if (!b->handed && b->state == FC_BLOCK_READY && b->id[0] != '\0') {
        b->served += n;
        if (b->served >= b->len) {
            b->handed = true;
            cm_list_push_back(&c->handed, &b->hlist);
            c->handed_bytes += b->len;
            if (c->handed_bytes > c->handed_max)
                evict(c); /* @b is referenced: others go */
        }
    }
    pthread_mutex_unlock(&c->lock);
}

void fc_cache_usage(struct fc_cache *c, size_t *bytes, size_t *blocks)
{
    pthread_mutex_lock(&c->lock);
    *bytes = c->bytes;
    *blocks = c->nblocks;
    pthread_mutex_unlock(&c->lock);
}
