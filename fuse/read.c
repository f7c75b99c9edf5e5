/* fuse/read.c - serving FUSE reads from the block cache and S3.
 *
 * DESIGN: the object is cut into fixed blocks (block_size, 1 MiB by
 * default). A read copies from the blocks that cover it; a missing block is
 * claimed (LOADING) by the reader, which fetches it together with the
 * following missing blocks of the same read in one range GET. A file no
 * larger than one block is fetched whole by one GET without a Range header,
 * and so is one up to whole_max (8 MiB by default): its first read claims
 * every block and the one GET's body lands in all of them, so a loader's
 * medium-sized sample costs one request, not one per block plus readahead.
 * Every GET carries If-Match with the ETag the file was opened with, and
 * the cache is keyed by ETag too: bytes of two versions never mix.
 *
 * Readahead: a reader whose reads follow each other (within a block of
 * slack, since the kernel issues readahead in parallel and slightly out of
 * order) gets a window that starts at readahead_init and doubles each time
 * it is refilled, up to readahead_max. The window is split into parts of
 * part_size, each claimed in the cache and queued to the prefetch workers,
 * which fetch parts in parallel. All readers share one budget of bytes in
 * flight (prefetch_mem): when it is spent, readahead waits, it does not
 * allocate. Random readers never trigger readahead: they fetch exactly the
 * blocks they touch. */
#include "fuse/read.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include <uthash.h>

#include "common/log.h"
#include "fuse/cache.h"
#include "fuse/dcache.h"
#include "fuse/fs.h"
#include "fuse/inode.h"
#include "fuse/metrics.h"
#include "fuse/s3.h"

#define RUN_MAX FC_WHOLE_BLOCKS /* blocks fetched by one GET at most */

struct pf_job {
    struct pf_job *next;
    char *key; /* owned */
    char etag[FC_ETAG_MAX];
    uint64_t size;                  /* object size */
    uint64_t first;                 /* first block index */
    unsigned n;                     /* blocks */
    size_t bytes;                   /* counted against prefetch_mem */
    bool dir;                       /* a directory-prefetch job */
    bool list;                      /* a listing prefetch of key (no blocks) */
    struct fc_block *blks[RUN_MAX]; /* claimed, referenced */
};

/* Directory prefetch state: how many small files of the directory were
 * read, and how far its listing has been queued. */
struct pf_dir {
    char *key;       /* directory key; owned */
    unsigned reads;  /* small-file first reads seen */
    size_t next;     /* next listing index to queue */
    size_t pf;       /* small files prefetched (dirs only) */
    size_t hits;     /* of those, read since */
    size_t max_idx;  /* furthest listing index read */
    unsigned streak; /* reads in listing order (see dir_note) */
    bool busy;       /* a thread is queueing for it */
    bool done;       /* whole listing queued (or too big) */
    /* listing indexes of the files read, one bit each (NULL until the
     * first read found in a listing): a prefetch skips them. The block
     * cache cannot say: a block handed to the page cache leaves it soon
     * after its read (fc_cache_handed), and a prefetch walking the listing
     * then fetched again, for nobody, files a shuffled epoch had read. */
    uint8_t *read_bits;
    size_t read_n; /* bits in read_bits */
    UT_hash_handle hh;
};

struct fc_prefetch {
    struct fc_fs *fs;
    pthread_mutex_t lock; /* protects the queue, stop, inflight */
    pthread_cond_t cond;  /* signalled when a job is queued or on stop */
    pthread_cond_t mem;   /* signalled when inflight goes down */
    struct pf_job *head, *tail;
    bool stop;
    size_t inflight;      /* bytes claimed by queued/running jobs */
    unsigned dir_jobs;    /* queued/running directory-prefetch jobs */
    unsigned list_jobs;   /* queued/running listing prefetches */
    struct pf_dir *dirs;  /* uthash by key: small-file prefetch state */
    struct pf_dir *pdirs; /* uthash by key: subdirectory listing state */
    uint64_t pf_bytes;    /* bytes queued by directory prefetch */
    uint64_t hit_bytes;   /* of those, read since */
    uint64_t wasted_seen; /* fc_cache_prefetch_wasted at the last look */
    uint64_t ahead_cap;   /* cap on prefetched-but-unread bytes */
    uint64_t ahead_max;   /* what ahead_cap grows back to */
    pthread_t *threads;
    unsigned nthreads;
    /* counters for .ecfs-stats */
    atomic_ulong reads;       /* FUSE reads served */
    atomic_ulong read_gets;   /* GETs a reader made itself (a miss) */
    atomic_ulong ra_gets;     /* readahead part GETs */
    atomic_ulong dir_gets;    /* directory-prefetch GETs */
    atomic_ulong list_jobs_n; /* listing prefetches */
};

void fc_rstate_init(struct fc_rstate *rs)
{
    memset(rs, 0, sizeof(*rs));
    pthread_mutex_init(&rs->lock, NULL);
}

void fc_rstate_fini(struct fc_rstate *rs)
{
    pthread_mutex_destroy(&rs->lock);
}

/* Fetches blocks [first, first+n) of @o (all claimed by the caller) with one
 * GET and publishes them (READY or FAILED). The body lands straight in the
 * blocks' own buffers (a scatter GET): no staging buffer, no second copy.
 * Returns 0 or -errno. */
static int fetch_run_s3(struct fc_fs *fs, const char *key, const char *etag,
                        uint64_t size, uint64_t first, unsigned n,
                        struct fc_block **blks)
{
    size_t bs = fs->o.block_size;
    uint64_t start = first * bs;
    uint64_t end = CM_MIN(size, (first + n) * bs);
    size_t len = start < end ? (size_t)(end - start) : 0;
    struct iovec iov[RUN_MAX];
    unsigned nv = 0;
    ssize_t got = 0;
    int ret = 0;

    /* one buffer per block, each exactly as long as its part of the run */
    for (size_t done = 0; done < len && nv < n; nv++) {
        size_t blen = CM_MIN(bs, len - done);
        iov[nv].iov_base = fc_cache_buf_alloc(blen);
        iov[nv].iov_len = blen;
        if (iov[nv].iov_base == NULL) {
            got = -ENOMEM;
            break;
        }
        done += blen;
    }
    if (got < 0 || len == 0) {
        /* nothing to fetch, or no memory */
    } else if (first == 0 && size <= (uint64_t)n * bs) {
        /* the whole object (a small one, or one up to whole_max): one
         * plain GET without Range */
        got = fc_s3_getv(fs->s3, key, 0, 0, len, etag, iov, nv, NULL);
    } else {
        got = fc_s3_getv(fs->s3, key, start, len, len, etag, iov, nv, NULL);
    }
    if (got == -ESTALE)
        got = -EIO; /* the object changed under an open file */
    if (got < 0) {
        ret = (int)got;
        for (unsigned i = 0; i < nv; i++)
            fc_cache_buf_free(iov[i].iov_base);
        for (unsigned i = 0; i < n; i++)
            fc_cache_fill(fs->cache, blks[i], NULL, 0, ret);
        return ret;
    }
    for (unsigned i = 0; i < n; i++) {
        size_t bstart = (size_t)i * bs;
        size_t blen =
            (size_t)got > bstart ? CM_MIN(bs, (size_t)got - bstart) : 0;
        char *data = NULL;

        if (i < nv) {
            data = iov[i].iov_base; /* the block takes the buffer over */
            iov[i].iov_base = NULL;
        }
        /* past a short answer's end (EOF) a block is empty */
        fc_cache_fill(fs->cache, blks[i], data, blen, 0);
    }
    return ret;
}

/* The disk cache wrote a block queued by fetch_run: drop its reference. */
static void dcache_stored(void *cache, void *blk)
{
    fc_cache_release(cache, blk);
}

/* Fills blocks [first, first+n) of @o (all claimed by the caller): those
 * the disk cache (-o cache_dir) holds from there, the runs still missing
 * by fetch_run_s3, whose blocks are then written through to the disk
 * cache. Returns 0 or the first -errno of a fetch. */
static int fetch_run(struct fc_fs *fs, const char *key, const char *etag,
                     uint64_t size, uint64_t first, unsigned n,
                     struct fc_block **blks)
{
    size_t bs = fs->o.block_size;
    bool miss[RUN_MAX];
    int ret = 0;

    if (fs->dcache == NULL || etag[0] == '\0')
        return fetch_run_s3(fs, key, etag, size, first, n, blks);
    for (unsigned i = 0; i < n; i++) {
        uint64_t at = (first + i) * bs;
        size_t want = at < size ? (size_t)CM_MIN((uint64_t)bs, size - at) : 0;
        char *data;
        size_t len;

        miss[i] = fc_dcache_get(fs->dcache, key, etag, first + i, bs, want,
                                &data, &len) < 0;
        if (!miss[i])
            fc_cache_fill(fs->cache, blks[i], data, len, 0);
    }
    for (unsigned i = 0; i < n;) {
        unsigned k = i;
        int r;

        if (!miss[i]) {
            i++;
            continue;
        }
        while (k < n && miss[k])
            k++;
        r = fetch_run_s3(fs, key, etag, size, first + i, k - i, blks + i);
        if (r < 0 && ret == 0)
            ret = r;
        /* written by the disk cache's writer thread, so the reader does
         * not wait on the disk (and not at all when the writer is 32 MiB
         * behind); the block's reference keeps its (READY, immutable) data
         * alive until then */
        for (; i < k; i++) {
            struct fc_block *blk = blks[i];
            if (blk->state != FC_BLOCK_READY)
                continue;
            fc_cache_ref(fs->cache, blk);
            if (!fc_dcache_put_async(fs->dcache, key, etag, first + i, bs,
                                     blk->data, blk->len, dcache_stored,
                                     fs->cache, blk))
                fc_cache_release(fs->cache, blk); /* not cached this time */
        }
    }
    return ret;
}

static void *pf_worker(void *arg)
{
    struct fc_prefetch *pf = arg;
    struct pf_job *j;

    for (;;) {
        pthread_mutex_lock(&pf->lock);
        while (!pf->stop && pf->head == NULL)
            pthread_cond_wait(&pf->cond, &pf->lock);
        if (pf->stop) {
            pthread_mutex_unlock(&pf->lock);
            return NULL;
        }
        j = pf->head;
        pf->head = j->next;
        if (pf->head == NULL)
            pf->tail = NULL;
        pthread_mutex_unlock(&pf->lock);

        atomic_fetch_add_explicit(j->list  ? &pf->list_jobs_n
                                  : j->dir ? &pf->dir_gets
                                           : &pf->ra_gets,
                                  1, memory_order_relaxed);
        if (j->list) {
            struct fc_listing *l;
            if (fc_dir_listing(pf->fs, j->key, &l) == 0)
                fc_listing_unref(l);
        } else {
            /* before the fill wakes a reader waiting on these blocks, so
             * that reader counts as their use (cache.c counts readahead
             * issued, used and wasted; directory prefetch has its own) */
            if (!j->dir)
                fc_cache_mark_readahead(pf->fs->cache, j->blks, j->n);
            (void)fetch_run(pf->fs, j->key, j->etag, j->size, j->first, j->n,
                            j->blks);
        }
        for (unsigned i = 0; i < j->n; i++)
            fc_cache_release(pf->fs->cache, j->blks[i]);
        pthread_mutex_lock(&pf->lock);
        pf->inflight -= j->bytes;
        pthread_cond_broadcast(&pf->mem);
        if (j->dir)
            pf->dir_jobs--;
        if (j->list)
            pf->list_jobs--;
        pthread_mutex_unlock(&pf->lock);
        free(j->key);
        free(j);
    }
}

/* Starts the workers (see header). */
int fc_prefetch_start(struct fc_fs *fs, unsigned nthreads)
{
    struct fc_prefetch *pf = calloc(1, sizeof(*pf));

    if (pf == NULL)
        return -ENOMEM;
    pf->fs = fs;
    pf->ahead_max =
        CM_MIN((uint64_t)fs->o.prefetch_mem, (uint64_t)fs->o.cache_size / 2);
    pf->ahead_cap = pf->ahead_max;
    pthread_mutex_init(&pf->lock, NULL);
    pthread_cond_init(&pf->cond, NULL);
    pthread_cond_init(&pf->mem, NULL);
    pf->threads = calloc(nthreads ? nthreads : 1, sizeof(pthread_t));
    if (pf->threads == NULL) {
        free(pf);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < nthreads; i++) {
        int e = pthread_create(&pf->threads[i], NULL, pf_worker, pf);
        if (e != 0) {
            cm_log(CM_LOG_WARN, e, "ecfs: prefetch thread");
            break;
        }
        pf->nthreads++;
    }
    fs->pf = pf;
    return 0;
}

/* Stops the workers (see header). */
void fc_prefetch_stop(struct fc_fs *fs)
{
    struct fc_prefetch *pf = fs->pf;
    struct pf_job *j, *next;

    if (pf == NULL)
        return;
    pthread_mutex_lock(&pf->lock);
    pf->stop = true;
    pthread_cond_broadcast(&pf->cond);
    pthread_mutex_unlock(&pf->lock);
    for (unsigned i = 0; i < pf->nthreads; i++)
        pthread_join(pf->threads[i], NULL);
    for (j = pf->head; j; j = next) {
        next = j->next;
        for (unsigned i = 0; i < j->n; i++) {
            fc_cache_fill(fs->cache, j->blks[i], NULL, 0, -ECANCELED);
            fc_cache_release(fs->cache, j->blks[i]);
        }
        free(j->key);
        free(j);
    }
    {
        struct pf_dir *d, *tmp;
        HASH_ITER(hh, pf->dirs, d, tmp)
        {
            HASH_DEL(pf->dirs, d);
            free(d->read_bits);
            free(d->key);
            free(d);
        }
        HASH_ITER(hh, pf->pdirs, d, tmp)
        {
            HASH_DEL(pf->pdirs, d);
            free(d->key);
            free(d);
        }
    }
    pthread_mutex_destroy(&pf->lock);
    pthread_cond_destroy(&pf->cond);
    pthread_cond_destroy(&pf->mem);
    free(pf->threads);
    free(pf);
    fs->pf = NULL;
}

/* Reserves write-part memory (see header). */
void fc_mem_reserve(struct fc_fs *fs, size_t bytes)
{
    struct fc_prefetch *pf = fs->pf;

    if (pf == NULL)
        return;
    pthread_mutex_lock(&pf->lock);
    /* a reservation larger than the whole budget waits for an idle one;
     * and none waits more than 2 s: buffers of files held open (a process
     * writing many at once) can fill the budget and never give it back
     * until they are closed, which the waiter may be holding up */
    if (!pf->stop && pf->inflight > 0 &&
        pf->inflight + bytes > fs->o.prefetch_mem) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 2;
        while (!pf->stop && pf->inflight > 0 &&
               pf->inflight + bytes > fs->o.prefetch_mem &&
               pthread_cond_timedwait(&pf->mem, &pf->lock, &dl) == 0)
            ;
    }
    pf->inflight += bytes;
    pthread_mutex_unlock(&pf->lock);
}

/* Gives back what fc_mem_reserve took (see header). */
void fc_mem_release(struct fc_fs *fs, size_t bytes)
{
    struct fc_prefetch *pf = fs->pf;

    if (pf == NULL || bytes == 0)
        return;
    pthread_mutex_lock(&pf->lock);
    pf->inflight -= CM_MIN(bytes, pf->inflight);
    pthread_cond_broadcast(&pf->mem);
    pthread_mutex_unlock(&pf->lock);
}

/* Queues a job, or gives its blocks back if the budget is spent.
 * Returns true when queued. Takes ownership of @j. */
static bool pf_submit(struct fc_fs *fs, struct pf_job *j)
{
    struct fc_prefetch *pf = fs->pf;
    bool ok = false;

    if (pf != NULL && pf->nthreads > 0) {
        pthread_mutex_lock(&pf->lock);
        if (!pf->stop && pf->inflight + j->bytes <= fs->o.prefetch_mem &&
            (!j->dir || pf->dir_jobs < 2 * pf->nthreads) &&
            (!j->list || pf->list_jobs < pf->nthreads)) {
            pf->inflight += j->bytes;
            if (j->dir)
                pf->dir_jobs++;
            if (j->list)
                pf->list_jobs++;
            j->next = NULL;
            if (pf->tail)
                pf->tail->next = j;
            else
                pf->head = j;
            pf->tail = j;
            pthread_cond_signal(&pf->cond);
            ok = true;
        }
        pthread_mutex_unlock(&pf->lock);
    }
    if (!ok) {
        /* unclaim: a FAILED fill unlinks them so a reader fetches itself */
        for (unsigned i = 0; i < j->n; i++) {
            fc_cache_fill(fs->cache, j->blks[i], NULL, 0, -EAGAIN);
            fc_cache_release(fs->cache, j->blks[i]);
        }
        free(j->key);
        free(j);
    }
    return ok;
}

/* Schedules readahead of blocks [b0, b1) as parts. Returns the first block
 * not scheduled (b1 when all were, or where the budget ran out). */
static uint64_t ra_schedule(struct fc_fs *fs, const struct fc_robj *o,
                            uint64_t b0, uint64_t b1)
{
    size_t bs = fs->o.block_size;
    unsigned part = (unsigned)CM_MAX(1, CM_MIN(RUN_MAX, fs->o.part_size / bs));
    uint64_t b = b0;

    while (b < b1) {
        struct pf_job *j = calloc(1, sizeof(*j));
        uint64_t stop = CM_MIN(b1, b + part), first;
        if (j == NULL)
            return b;
        j->key = strdup(o->key);
        if (j->key == NULL) {
            free(j);
            return b;
        }
        snprintf(j->etag, sizeof(j->etag), "%s", o->etag);
        j->size = o->size;
        /* skip blocks already present; a job is a run of claimed ones */
        while (b < stop && fc_cache_contains(fs->cache, o->key, o->etag, b))
            b++;
        j->first = b;
        while (b < stop) {
            struct fc_block *blk =
                fc_cache_claim(fs->cache, o->key, o->etag, b);
            if (blk == NULL)
                break;
            j->blks[j->n++] = blk;
            b++;
        }
        if (j->n == 0) {
            free(j->key);
            free(j);
            if (b < stop)
                b++; /* present now: someone else has it */
            continue;
        }
        j->bytes = (size_t)j->n * bs;
        first = j->first;
        if (!pf_submit(fs, j))
            return first;
    }
    return b1;
}

/* Updates the reader's sequential state for a read of [off, off+len) and
 * schedules readahead when it is sequential. */
static void read_pattern(struct fc_fs *fs, const struct fc_robj *o,
                         struct fc_rstate *rs, uint64_t off, size_t len)
{
    size_t bs = fs->o.block_size;
    uint64_t end = off + len, ra_from, ra_to, b0, b1, done;
    bool seq;

    if (o->size <= fs->o.whole_max || fs->o.readahead_max == 0)
        return; /* small and medium files are fetched whole */
    pthread_mutex_lock(&rs->lock);
    seq = off <= rs->next_off + bs && end + 8 * bs >= rs->next_off &&
          (rs->next_off > 0 || off == 0);
    if (!seq) {
        rs->seq = 0;
        rs->window = 0;
        rs->ra_end = 0;
        rs->next_off = end;
        pthread_mutex_unlock(&rs->lock);
        return;
    }
    rs->seq++;
    if (end > rs->next_off)
        rs->next_off = end;
    if (rs->seq < 2 || rs->ra_end >= o->size) {
        pthread_mutex_unlock(&rs->lock);
        return;
    }
    /* refill when less than half a window is left ahead of the reader */
    if (rs->window == 0)
        rs->window = fs->o.readahead_init;
    else if (rs->ra_end > end + rs->window / 2) {
        pthread_mutex_unlock(&rs->lock);
        return;
    } else
        rs->window = CM_MIN(rs->window * 2, fs->o.readahead_max);
    ra_from = CM_MAX(rs->ra_end, end);
    ra_to = CM_MIN(o->size, end + rs->window);
    b0 = (ra_from + bs - 1) / bs;
    b1 = (ra_to + bs - 1) / bs;
    rs->ra_end = b1 * bs;
    pthread_mutex_unlock(&rs->lock);
    if (b0 >= b1)
        return;
    done = ra_schedule(fs, o, b0, b1);
    if (done < b1) {
        /* budget spent: retry from there on the next read */
        pthread_mutex_lock(&rs->lock);
        if (rs->ra_end > done * bs)
            rs->ra_end = done * bs;
        pthread_mutex_unlock(&rs->lock);
    }
}

/* Queues whole-object fetches of the small files of @l from index @from,
 * before index @to, at most @files of them and @bytes in all, until the
 * queue share or the byte budget is full. Returns the index reached; the
 * files and bytes queued are added to *nq and *nb. */
static size_t dir_queue(struct fc_fs *fs, struct pf_dir *d,
                        const struct fc_listing *l, size_t from, size_t to,
                        size_t files, uint64_t bytes, size_t *nq, uint64_t *nb)
{
    struct fc_prefetch *pf = fs->pf;
    const char *dirkey = d->key;
    size_t bs = fs->o.block_size, i;

    for (i = from; i < to && *nq < files; i++) {
        const struct fc_dirent *e = &l->ents[i];
        struct pf_job *j;
        struct fc_block *blk;
        char *key;
        bool was_read;

        if (e->is_dir || e->size == 0 || e->size > bs)
            continue;
        if (*nb + e->size > bytes)
            break; /* the caches could not hold it until it is read */
        if (asprintf(&key, "%s%s", dirkey, e->name) < 0)
            break;
        blk = fc_cache_claim(fs->cache, key, e->etag, 0);
        if (blk == NULL) {
            free(key); /* cached or being fetched already */
            continue;
        }
        /* looked up after the claim: a reader notes its read before its
         * block can leave the cache, so a file read meanwhile, block gone
         * already, is seen here */
        pthread_mutex_lock(&pf->lock);
        was_read = i < d->read_n && (d->read_bits[i / 8] >> (i % 8)) & 1;
        pthread_mutex_unlock(&pf->lock);
        if (was_read) {
            fc_cache_fill(fs->cache, blk, NULL, 0, -EAGAIN);
            fc_cache_release(fs->cache, blk);
            free(key);
            continue;
        }
        fc_cache_mark_prefetch(fs->cache, blk);
        j = calloc(1, sizeof(*j));
        if (j == NULL) {
            fc_cache_fill(fs->cache, blk, NULL, 0, -EAGAIN);
            fc_cache_release(fs->cache, blk);
            free(key);
            break;
        }
        j->key = key;
        snprintf(j->etag, sizeof(j->etag), "%s", e->etag);
        j->size = e->size;
        j->first = 0;
        j->n = 1;
        j->blks[0] = blk;
        j->bytes = e->size;
        j->dir = true;
        if (!pf_submit(fs, j))
            break; /* queue share or budget full: resume on a later read */
        (*nq)++;
        *nb += e->size;
    }
    return i;
}

/* Listing order: a read at most this many entries past the furthest one
 * read so far advances the order streak, one at most this far behind it
 * (parallel readers) leaves the streak as it is, any other resets it. */
#define ORDER_SLACK  32
#define ORDER_STREAK 4  /* this streak makes a reader sequential */
#define SEQ_AHEAD    64 /* files fetched ahead of a sequential reader */

/* Notes the first read of small file @key (@kind from fc_cache_note_read:
 * 2 = it was prefetched, 1 = it was not) on a read-only mount, and fetches
 * ahead some of the directory's other small files once dir_prefetch of
 * them were read. What a prefetch may fetch, so that no GET is wasted on
 * what will not be read:
 * - a reader going through the listing in order (cp -r, tar, an unshuffled
 *   loader) gets the next SEQ_AHEAD files after the furthest one it read;
 * - any other order (a shuffled epoch, a random subset) gets at most one
 *   prefetched-but-unread file per 12 files it read in the directory: a
 *   file read that was prefetched frees its place, a file never read keeps
 *   it for good, so whatever subset is read, the directory costs at most
 *   1.09x the GETs of the files read (goal: 1.1x; an epoch reading all of
 *   them still costs exactly one GET per file);
 * - and all prefetched-but-unread bytes together stay within what the
 *   block cache can hold until they are read (half of cache_size, and
 *   prefetch_mem), halved whenever a prefetched block was evicted unread
 *   and grown back by each prefetch hit. */
static void dir_note(struct fc_fs *fs, const char *key, int kind, uint64_t size)
{
    struct fc_prefetch *pf = fs->pf;
    const char *slash = strrchr(key, '/');
    size_t dl = slash ? (size_t)(slash - key) + 1 : 0, from, to, files;
    size_t nq = 0, idx = SIZE_MAX;
    uint64_t nb = 0, bytes, wasted, out;
    struct fc_listing *l;
    const struct fc_dirent *e;
    struct pf_dir *d;
    char *dirkey;
    bool go, seq;

    if (pf == NULL || !fs->cache_forever || fs->o.dir_prefetch == 0 ||
        kind == 0)
        return;
    dirkey = strndup(key, dl);
    if (dirkey == NULL)
        return;
    l = fc_dir_cached_listing(fs, dirkey);
    if (l != NULL && (e = fc_listing_find(l, key + dl)) != NULL)
        idx = (size_t)(e - l->ents);
    wasted = fc_cache_prefetch_wasted(fs->cache);
    pthread_mutex_lock(&pf->lock);
    if (kind == 2) {
        pf->hit_bytes += size;
        pf->ahead_cap = CM_MIN(pf->ahead_cap + size, pf->ahead_max);
    }
    if (wasted > pf->wasted_seen) {
        /* prefetched blocks left the cache unread: fetch less ahead */
        pf->wasted_seen = wasted;
        pf->ahead_cap = CM_MAX(pf->ahead_cap / 2, (uint64_t)fs->o.block_size);
    }
    HASH_FIND(hh, pf->dirs, dirkey, dl, d);
    if (d == NULL && (d = calloc(1, sizeof(*d))) != NULL) {
        d->key = dirkey;
        dirkey = NULL;
        HASH_ADD_KEYPTR(hh, pf->dirs, d->key, dl, d);
    }
    if (d != NULL && idx != SIZE_MAX && d->read_bits == NULL) {
        d->read_bits = calloc((l->n + 7) / 8, 1);
        d->read_n = d->read_bits ? l->n : 0;
    }
    if (d != NULL) {
        d->reads++;
        if (kind == 2)
            d->hits++;
        if (idx < d->read_n)
            d->read_bits[idx / 8] |= (uint8_t)(1u << (idx % 8));
        if (idx != SIZE_MAX) {
            if (d->reads == 1 || idx > d->max_idx + ORDER_SLACK ||
                idx + ORDER_SLACK < d->max_idx)
                d->streak = 0;
            else if (idx > d->max_idx)
                d->streak++;
            if (d->reads == 1 || idx > d->max_idx)
                d->max_idx = idx;
        }
    }
    go = d && l && !d->busy && d->reads >= fs->o.dir_prefetch &&
         pf->dir_jobs < 2 * pf->nthreads;
    seq = d && d->streak >= ORDER_STREAK;
    from = to = files = 0;
    bytes = 0;
    if (go) {
        size_t unread = d->pf - CM_MIN(d->pf, d->hits);
        size_t allow = seq ? SEQ_AHEAD : d->reads / 12;
        out = pf->pf_bytes - CM_MIN(pf->pf_bytes, pf->hit_bytes + wasted);
        files = allow > unread ? allow - unread : 0;
        bytes = pf->ahead_cap > out ? pf->ahead_cap - out : 0;
        from = seq ? CM_MAX(d->next, d->max_idx + 1) : d->next;
        to = seq ? CM_MIN(l->n, d->max_idx + 1 + SEQ_AHEAD) : l->n;
        go = files > 0 && bytes > 0 && from < to;
    }
    if (go)
        d->busy = true;
    pthread_mutex_unlock(&pf->lock);
    free(dirkey);
    if (go) {
        size_t upto = dir_queue(fs, d, l, from, to, files, bytes, &nq, &nb);
        pthread_mutex_lock(&pf->lock);
        if (upto > d->next)
            d->next = upto;
        d->pf += nq;
        pf->pf_bytes += nb;
        d->busy = false;
        pthread_mutex_unlock(&pf->lock);
    }
    fc_listing_unref(l);
}

/* Notes that directory @dirkey was opened (see header). */
void fc_list_prefetch_note(struct fc_fs *fs, const char *dirkey)
{
    struct fc_prefetch *pf = fs->pf;
    size_t n = strlen(dirkey), pl, from, i;
    struct fc_listing *l;
    struct pf_dir *d;
    char *pkey;
    bool go;

    if (pf == NULL || fs->o.list_prefetch == 0 || n < 2)
        return;
    /* the parent of "a/b/" is "a/"; of "b/" it is "" */
    pl = n - 1;
    while (pl > 0 && dirkey[pl - 1] != '/')
        pl--;
    pkey = strndup(dirkey, pl);
    if (pkey == NULL)
        return;
    pthread_mutex_lock(&pf->lock);
    HASH_FIND(hh, pf->pdirs, pkey, pl, d);
    if (d == NULL && (d = calloc(1, sizeof(*d))) != NULL) {
        d->key = pkey;
        pkey = NULL;
        HASH_ADD_KEYPTR(hh, pf->pdirs, d->key, pl, d);
    }
    go = d && !d->done && !d->busy && ++d->reads >= fs->o.list_prefetch &&
         pf->list_jobs < pf->nthreads;
    if (go)
        d->busy = true;
    from = d ? d->next : 0;
    pthread_mutex_unlock(&pf->lock);
    free(pkey);
    if (!go)
        return;
    l = fc_dir_cached_listing(fs, d->key);
    for (i = from; l && i < l->n; i++) {
        const struct fc_dirent *e = &l->ents[i];
        struct fc_listing *sub;
        struct pf_job *j;

        if (!e->is_dir)
            continue;
        j = calloc(1, sizeof(*j));
        if (j == NULL)
            break;
        if (asprintf(&j->key, "%s%s/", d->key, e->name) < 0) {
            free(j);
            break;
        }
        if ((sub = fc_dir_cached_listing(fs, j->key)) != NULL) {
            fc_listing_unref(sub); /* listed already */
            free(j->key);
            free(j);
            continue;
        }
        j->list = true;
        if (!pf_submit(fs, j))
            break; /* queue share full: resume on a later opendir */
    }
    pthread_mutex_lock(&pf->lock);
    d->next = i;
    d->done = l == NULL || i >= l->n;
    d->busy = false;
    pthread_mutex_unlock(&pf->lock);
    fc_listing_unref(l);
}

/* Pins the blocks that cover a read (see header). */
ssize_t fc_read_pin(struct fc_fs *fs, const struct fc_robj *o,
                    struct fc_rstate *rs, uint64_t off, size_t len,
                    struct fc_rpin *p)
{
    size_t bs = fs->o.block_size, total = 0;
    struct fc_block *run[RUN_MAX];
    uint64_t b, last, claim_to;
    unsigned tries = 0;

    p->n = 0;
    if (off >= o->size || len == 0)
        return 0;
    len = (size_t)CM_MIN((uint64_t)len, o->size - off);
    b = off / bs;
    last = (off + len - 1) / bs;
    if (last - b + 1 > FC_RPIN_MAX)
        return -E2BIG;
    claim_to = last;
    if (o->size > bs && o->size <= fs->o.whole_max) {
        /* a medium file: whichever read comes first fetches all of it with
         * one GET (from block 0, which it walks from; blocks it finds
         * READY cost a lookup each). A loader reads it all anyway, and one
         * GET costs the server one open and the client one round trip. */
        b = 0;
        claim_to = (o->size - 1) / bs;
    }
    if (fs->pf != NULL)
        atomic_fetch_add_explicit(&fs->pf->reads, 1, memory_order_relaxed);
    read_pattern(fs, o, rs, off, len);
    while (b <= last) {
        bool owner;
        unsigned n = 1, i;
        int err = 0;

        double t0 = fc_metrics_on ? fc_metrics_now() : 0;

        run[0] = fc_cache_acquire(fs->cache, o->key, o->etag, b, true, &owner);
        if (run[0] == NULL) {
            fc_read_unpin(fs, p);
            return -ENOMEM; /* a short count would read as EOF */
        }
        if (owner) {
            if (fs->pf != NULL)
                atomic_fetch_add_explicit(&fs->pf->read_gets, 1,
                                          memory_order_relaxed);
            while (b + n <= claim_to && n < RUN_MAX &&
                   (run[n] = fc_cache_claim(fs->cache, o->key, o->etag,
                                            b + n)) != NULL)
                n++;
            (void)fetch_run(fs, o->key, o->etag, o->size, b, n, run);
        }
        fc_metrics_read_block(t0, owner, n);
        if (b == 0 && off == 0 && o->size <= bs &&
            run[0]->state == FC_BLOCK_READY)
            dir_note(fs, o->key, fc_cache_note_read(fs->cache, run[0]),
                     o->size);
        for (i = 0; i < n; i++) {
            struct fc_block *blk = run[i];
            uint64_t bstart = (b + i) * bs;
            uint64_t from = CM_MAX(off, bstart);
            uint64_t to = CM_MIN(off + len, bstart + blk->len);
            bool shorter;

            if (blk->state == FC_BLOCK_FAILED) {
                err = blk->err;
                break;
            }
            /* object shorter than its listed size: stop at its end */
            shorter = blk->len < CM_MIN(bs, o->size - bstart);
            if (to > from) {
                /* the reply points into the block: keep our reference */
                p->iov[p->n].iov_base = blk->data + (from - bstart);
                p->iov[p->n].iov_len = (size_t)(to - from);
                p->blks[p->n++] = blk;
                run[i] = NULL;
                total += (size_t)(to - from);
            }
            if (shorter) {
                for (unsigned k = 0; k < n; k++)
                    if (run[k] != NULL)
                        fc_cache_release(fs->cache, run[k]);
                fc_metrics_read_bytes(total);
                return (ssize_t)total;
            }
        }
        for (unsigned k = 0; k < n; k++)
            if (run[k] != NULL)
                fc_cache_release(fs->cache, run[k]);
        if (err != 0) {
            /* a prefetch that was cancelled or failed: fetch it ourselves,
             * once; a failure of our own fetch is final */
            /* never a short count: the kernel takes one for EOF, zero-fills
             * the rest of the page and shrinks i_size (wrong bytes) */
            if ((owner && i == 0) || ++tries > 3) {
                fc_read_unpin(fs, p);
                return err;
            }
            b += i;
            continue;
        }
        b += n;
    }
    fc_metrics_read_bytes(total);
    return (ssize_t)total;
}

/* Formats the read-path counters (see header). */
int fc_read_stats_format(struct fc_fs *fs, char *out, size_t cap)
{
    struct fc_prefetch *pf = fs->pf;

    int n;

    if (pf == NULL)
        return snprintf(out, cap, "%s", "");
    n = snprintf(out, cap,
                 " reads=%lu read_gets=%lu readahead_gets=%lu "
                 "dir_prefetch_gets=%lu list_prefetches=%lu",
                 atomic_load(&pf->reads), atomic_load(&pf->read_gets),
                 atomic_load(&pf->ra_gets), atomic_load(&pf->dir_gets),
                 atomic_load(&pf->list_jobs_n));
    {
        uint64_t ri, ru, rw;
        fc_cache_readahead_stats(fs->cache, &ri, &ru, &rw);
        if (n >= 0 && (size_t)n < cap)
            n += snprintf(out + n, cap - (size_t)n,
                          " readahead_bytes=%" PRIu64
                          " readahead_used_bytes=%" PRIu64
                          " readahead_wasted_bytes=%" PRIu64,
                          ri, ru, rw);
    }
    {
        uint64_t pfb, hit, wasted = fc_cache_prefetch_wasted(fs->cache);
        pthread_mutex_lock(&pf->lock);
        pfb = pf->pf_bytes;
        hit = pf->hit_bytes;
        pthread_mutex_unlock(&pf->lock);
        if (n >= 0 && (size_t)n < cap)
            n += snprintf(out + n, cap - (size_t)n,
                          " dir_prefetch_bytes=%" PRIu64
                          " dir_prefetch_unread_bytes=%" PRIu64
                          " dir_prefetch_evicted_unread_bytes=%" PRIu64,
                          pfb, pfb - CM_MIN(pfb, hit), wasted);
    }
    if (fs->dcache != NULL && n >= 0 && (size_t)n < cap)
        n += fc_dcache_stats_format(fs->dcache, out + n, cap - (size_t)n);
    return n;
}

/* Drops the references of a pinned read (see header). */
void fc_read_unpin(struct fc_fs *fs, struct fc_rpin *p)
{
    for (unsigned i = 0; i < p->n; i++)
        fc_cache_release(fs->cache, p->blks[i]);
    p->n = 0;
}

/* Counts pinned bytes replied into the page cache (see header). */
void fc_read_handed(struct fc_fs *fs, const struct fc_rpin *p)
{
    for (unsigned i = 0; i < p->n; i++)
        fc_cache_handed(fs->cache, p->blks[i], p->iov[i].iov_len);
}

/* Reads through the cache (see header): pins at most FC_RPIN_MAX blocks at
 * a time and copies them out. */
ssize_t fc_read(struct fc_fs *fs, const struct fc_robj *o, struct fc_rstate *rs,
                uint64_t off, size_t len, char *out)
{
    size_t bs = fs->o.block_size, done = 0;
    struct fc_rpin p;

    if (off >= o->size || len == 0)
        return 0;
    len = (size_t)CM_MIN((uint64_t)len, o->size - off);
    while (done < len) {
        uint64_t at = off + done;
        /* up to the end of the FC_RPIN_MAX-th block from here */
        uint64_t stop = (at / bs + FC_RPIN_MAX) * bs;
        size_t chunk = (size_t)CM_MIN((uint64_t)(len - done), stop - at);
        ssize_t n = fc_read_pin(fs, o, rs, at, chunk, &p);

        if (n < 0)
            return n;
        for (unsigned i = 0; i < p.n; i++) {
            memcpy(out + done, p.iov[i].iov_base, p.iov[i].iov_len);
            done += p.iov[i].iov_len;
        }
        fc_read_unpin(fs, &p);
        if ((size_t)n < chunk)
            break; /* end of the object */
    }
    return (ssize_t)done;
}
