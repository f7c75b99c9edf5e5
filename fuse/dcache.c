/* fuse/dcache.c - the on-disk block cache: one file per block, no index in
 * memory.
 *
 * DESIGN: a block's file name is the first 16 bytes of the SHA-256 of its
 * id (see block_id), in hex, under one of 256 subdirectories:
 *     DIR/v1/XX/XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX
 * The file is a 32-byte header, the id itself, then the data:
 *     "ECFSDC1\n" u32 idlen u32 flags(0) u64 datalen u32 crc32c(data)
 *     u32 crc32c(header's first 28 bytes + id)       (host byte order)
 * A hit is one open + one read + one futimens (the atime is the LRU
 * clock) + close; every field is checked (the stored id must be the one
 * asked for, so a hash collision is a miss too), and a file that fails is
 * unlinked. Blocks of at least DC_DIO_MIN bytes are read with O_DIRECT,
 * the whole file into an aligned place of the block's own buffer, the
 * data then moved to its start: the cache file's bytes never enter the
 * page cache, so a warm epoch does not fill RAM (or a memory-capped
 * cgroup) with a second copy of what the FUSE page cache and the block
 * cache hold, and pays no page-cache insert and reclaim per block (most
 * of the daemon's CPU on a warm epoch in a capped cgroup, by perf).
 * A file system without O_DIRECT (EINVAL) gets buffered reads. A store writes a
 * temporary file (".tPID.N" in the same subdirectory) and renames it over the
 * name: a reader sees the old file or the new one, never half of one. Nothing
 * is fsynced: after a crash a file may be short or zero-filled, and its
 * checksums drop it.
 *
 * Nothing is kept per block in memory: the mount's estimate of the bytes
 * held is resynchronised by each eviction scan. The eviction thread wakes
 * when the estimate passes the bound, or when the cache filesystem's free
 * space is under its floor (5% of its size, at most 1 GiB), scans every file
 * (readdir + fstatat) keeping the K oldest by atime in a bounded heap, and
 * unlinks the oldest until 90% of the bound (or the floor plus 1%) is reached.
 * While free space is under the floor, stores are skipped (a miss later,
 * never an error). The lock file (flock, our pid inside) makes a second
 * mount of the same directory fail at once. */
#include "fuse/dcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/log.h"
#include "fuse/cache.h"

#define DC_MAGIC     "ECFSDC1\n"
#define DC_HDR       32
#define DC_NAME      32           /* hex characters of a file name */
#define DC_HEAP_MAX  65536        /* eviction candidates per scan */
#define DC_CHECK     (4u << 20)   /* statvfs after this many bytes */
#define FLOOR_DIV    20           /* free-space floor: 1/20 of the fs, */
#define FLOOR_MAX    (1ull << 30) /* but at most 1 GiB */
#define DC_DIO_MIN   (128u << 10) /* blocks read with O_DIRECT from here */
#define DC_DIO_ALIGN 4096u        /* buffer, offset and length alignment */

struct dc_hdr {
    char magic[8];
    uint32_t idlen;
    uint32_t flags;
    uint64_t datalen;
    uint32_t dcrc;
    uint32_t hcrc;
};
_Static_assert(sizeof(struct dc_hdr) == DC_HDR, "dcache header layout");

/* A store queued for the writer thread. */
struct dc_job {
    struct dc_job *next;
    char *key;  /* owned */
    char *etag; /* owned */
    uint64_t idx;
    size_t bs;
    const void *data; /* the caller's, valid until done */
    size_t len;
    fc_dcache_done_fn *done;
    void *ctx, *arg;
};

struct fc_dcache {
    char *dir;   /* the cache_dir, owned */
    char *idpfx; /* "ecfs-dcache\nENDPOINT\nBUCKET\n", owned */
    int v1fd;    /* DIR/v1 */
    int lockfd;  /* DIR/ecfs-cache.lock, flock held */
    uint64_t max_bytes;
    pthread_mutex_t lock; /* protects the fields up to 'started' */
    pthread_cond_t cond;  /* wakes the eviction thread */
    bool stop, wake, started;
    pthread_t th;
    pthread_t wth;                /* the writer thread */
    pthread_cond_t wcond;         /* wakes it */
    struct dc_job *qhead, *qtail; /* its queue */
    size_t qbytes;                /* bytes queued */
    atomic_bool low_space;        /* free space under the floor: no stores */
    atomic_bool no_dio;           /* O_DIRECT refused here: buffered reads */
    atomic_uint_fast64_t bytes;   /* estimate of what the files take */
    atomic_uint_fast64_t files;
    atomic_uint_fast64_t since_check; /* bytes stored since statvfs */
    atomic_ulong seq;                 /* temporary file names */
    atomic_long next_space_check;     /* while low_space, CLOCK_MONOTONIC s */
    atomic_ulong hits, misses, stores, store_err, corrupt, evicted;
    atomic_ulong dropped; /* stores not queued: the writer was behind */
    atomic_uint_fast64_t added, nadded; /* bytes and files ever stored */
};

static long mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec;
}

/* Space a file of @n bytes takes, to the 4 KiB page. */
static uint64_t file_cost(uint64_t n)
{
    return (n + 4095) & ~(uint64_t)4095;
}

/* The id of a block: the prefix, then key, etag, bs, idx, '\n' between.
 * Unambiguous: only the key may hold '\n', and it is the one field
 * between the fixed prefix and three '\n'-free fields. NULL on ENOMEM. */
static char *block_id(const struct fc_dcache *dc, const char *key,
                      const char *etag, uint64_t idx, size_t bs)
{
    char *id = NULL;

    if (asprintf(&id, "%s%s\n%s\n%zu\n%" PRIu64, dc->idpfx, key, etag, bs,
                 idx) < 0)
        return NULL;
    return id;
}

/* "XX/XXXX...": the relative path of @id's file (@out: 3 + DC_NAME + 1). */
static void block_path(const char *id, char out[3 + DC_NAME + 1])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t h[CM_SHA256_LEN];

    cm_sha256(id, strlen(id), h);
    out[0] = hex[h[0] >> 4];
    out[1] = hex[h[0] & 15];
    out[2] = '/';
    for (int i = 0; i < DC_NAME / 2; i++) {
        out[3 + 2 * i] = hex[h[i] >> 4];
        out[4 + 2 * i] = hex[h[i] & 15];
    }
    out[3 + DC_NAME] = '\0';
}

/* mkdir that accepts an existing directory. */
static int mkdir_ok(int dirfd, const char *name)
{
    if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Takes the lock file; prints who holds it when another mount does. */
static int take_lock(struct fc_dcache *dc, int dfd)
{
    char pid[32] = "";
    ssize_t n;

    dc->lockfd =
        openat(dfd, "ecfs-cache.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (dc->lockfd < 0) {
        int e = errno;
        fprintf(stderr, "ecfs: cache_dir %s: cannot open its lock file: %s\n",
                dc->dir, strerror(e));
        return -e;
    }
    if (flock(dc->lockfd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    n = pread(dc->lockfd, pid, sizeof(pid) - 1, 0);
    pid[n > 0 ? n : 0] = '\0';
    pid[strcspn(pid, "\n")] = '\0';
    fprintf(stderr,
            "ecfs: cache_dir %s is in use by another ecfs mount (pid %s); "
            "two mounts cannot share a cache_dir: give each its own\n",
            dc->dir, pid[0] ? pid : "unknown");
    return -EBUSY;
}

/* Writes our pid into the lock file (after daemonize: the pid changed). */
static void write_pid(struct fc_dcache *dc)
{
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());

    if (ftruncate(dc->lockfd, 0) < 0 ||
        pwrite(dc->lockfd, pid, (size_t)n, 0) != n)
        cm_log(CM_LOG_WARN, errno, "ecfs: cache_dir %s: lock file", dc->dir);
}

/* Opens the cache (see header). */
int fc_dcache_open(const struct fc_dcache_conf *conf, struct fc_dcache **out)
{
    struct fc_dcache *dc = calloc(1, sizeof(*dc));
    int dfd = -1, ret;

    if (dc == NULL)
        return -ENOMEM;
    dc->v1fd = dc->lockfd = -1;
    dc->max_bytes = conf->max_bytes;
    dc->dir = strdup(conf->dir);
    if (dc->dir == NULL || asprintf(&dc->idpfx, "ecfs-dcache\n%s\n%s\n",
                                    conf->endpoint, conf->bucket) < 0) {
        dc->idpfx = NULL;
        ret = -ENOMEM;
        goto out_free;
    }
    if (mkdir(conf->dir, 0700) < 0 && errno != EEXIST) {
        ret = -errno;
        fprintf(stderr, "ecfs: cannot create cache_dir %s: %s\n", conf->dir,
                strerror(-ret));
        goto out_free;
    }
    dfd = open(conf->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        ret = -errno;
        fprintf(stderr, "ecfs: cannot open cache_dir %s: %s\n", conf->dir,
                strerror(-ret));
        goto out_free;
    }
    ret = take_lock(dc, dfd);
    if (ret < 0)
        goto out_free;
    ret = mkdir_ok(dfd, "v1");
    if (ret == 0 &&
        (dc->v1fd = openat(dfd, "v1", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        ret = -errno;
    for (int i = 0; ret == 0 && i < 256; i++) {
        char sub[3];
        snprintf(sub, sizeof(sub), "%02x", i);
        ret = mkdir_ok(dc->v1fd, sub);
    }
    if (ret < 0) {
        fprintf(stderr, "ecfs: cache_dir %s: cannot make its folders: %s\n",
                conf->dir, strerror(-ret));
        goto out_free;
    }
    write_pid(dc);
    close(dfd);
    pthread_mutex_init(&dc->lock, NULL);
    pthread_cond_init(&dc->cond, NULL);
    pthread_cond_init(&dc->wcond, NULL);
    *out = dc;
    return 0;

out_free:
    if (dfd >= 0)
        close(dfd);
    if (dc->v1fd >= 0)
        close(dc->v1fd);
    if (dc->lockfd >= 0)
        close(dc->lockfd);
    free(dc->idpfx);
    free(dc->dir);
    free(dc);
    return ret;
}

/* --- eviction ----------------------------------------------------------- */

struct ev_ent {
    int64_t atime_ns;
    uint64_t cost;
    char path[3 + DC_NAME + 1];
};

/* A max-heap on atime of the oldest files seen: the root is the youngest
 * of them, replaced when an older file turns up. */
struct ev_heap {
    struct ev_ent *e;
    size_t n, cap;
};

static void heap_sift_down(struct ev_heap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        struct ev_ent t;
        if (l < h->n && h->e[l].atime_ns > h->e[m].atime_ns)
            m = l;
        if (r < h->n && h->e[r].atime_ns > h->e[m].atime_ns)
            m = r;
        if (m == i)
            return;
        t = h->e[i];
        h->e[i] = h->e[m];
        h->e[m] = t;
        i = m;
    }
}

static void heap_sift_up(struct ev_heap *h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        struct ev_ent t;
        if (h->e[p].atime_ns >= h->e[i].atime_ns)
            return;
        t = h->e[i];
        h->e[i] = h->e[p];
        h->e[p] = t;
        i = p;
    }
}

static void heap_offer(struct ev_heap *h, const struct ev_ent *x)
{
    if (h->n < h->cap) {
        h->e[h->n] = *x;
        heap_sift_up(h, h->n++);
    } else if (h->n > 0 && x->atime_ns < h->e[0].atime_ns) {
        h->e[0] = *x;
        heap_sift_down(h, 0);
    }
}

static int ent_cmp(const void *a, const void *b)
{
    const struct ev_ent *x = a, *y = b;

    return (x->atime_ns > y->atime_ns) - (x->atime_ns < y->atime_ns);
}

/* Scans subdirectory @sub: every block file is offered to @h and counted;
 * temporary files of other processes (a crash's leftovers) are removed. */
static void scan_sub(struct fc_dcache *dc, int sub, struct ev_heap *h,
                     uint64_t *bytes, uint64_t *files)
{
    char name[3], tmp_mine[32];
    int fd;
    DIR *d;
    struct dirent *de;

    snprintf(name, sizeof(name), "%02x", sub);
    snprintf(tmp_mine, sizeof(tmp_mine), ".t%ld.", (long)getpid());
    fd = openat(dc->v1fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        struct ev_ent x;

        if (de->d_name[0] == '.') {
            /* we hold the lock: no other process writes here */
            if (strncmp(de->d_name, ".t", 2) == 0 &&
                strncmp(de->d_name, tmp_mine, strlen(tmp_mine)) != 0)
                unlinkat(fd, de->d_name, 0);
            continue;
        }
        if (strlen(de->d_name) != DC_NAME ||
            fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        x.atime_ns =
            (int64_t)st.st_atim.tv_sec * 1000000000 + st.st_atim.tv_nsec;
        x.cost = file_cost((uint64_t)st.st_size);
        snprintf(x.path, sizeof(x.path), "%s/%s", name, de->d_name);
        *bytes += x.cost;
        (*files)++;
        if (h != NULL)
            heap_offer(h, &x);
    }
    closedir(d);
}

/* Free bytes of the cache filesystem and its floor; false if unknown. */
static bool fs_space(struct fc_dcache *dc, uint64_t *avail, uint64_t *floor)
{
    struct statvfs sv;

    if (fstatvfs(dc->v1fd, &sv) < 0)
        return false;
    *avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    *floor = CM_MIN((uint64_t)sv.f_blocks * sv.f_frsize / FLOOR_DIV,
                    (uint64_t)FLOOR_MAX);
    return true;
}

/* Bytes to free for the free-space floor (0: none): while free space is
 * under the floor, up to the floor plus a fifth of it. Sets low_space. */
static uint64_t floor_need(struct fc_dcache *dc)
{
    uint64_t avail, floor;
    bool low;

    if (!fs_space(dc, &avail, &floor))
        return 0;
    low = avail < floor;
    atomic_store(&dc->low_space, low);
    return low ? floor + floor / 5 - avail : 0;
}

/* Bytes to free now (0: none): over 90% of the bound once the bound is
 * passed, or below the free-space floor plus a fifth of it. */
static uint64_t need_to_free(struct fc_dcache *dc)
{
    uint64_t bytes = atomic_load(&dc->bytes), need = 0;

    if (bytes > dc->max_bytes)
        need = bytes - dc->max_bytes / 10 * 9;
    return CM_MAX(need, floor_need(dc));
}

/* One eviction pass: frees at least @need bytes of the oldest files (or
 * all of them), and resynchronises the byte and file counts. */
static uint64_t evict_pass(struct fc_dcache *dc, uint64_t need)
{
    struct ev_heap h = {0};
    uint64_t bytes = 0, files = 0, freed = 0, avg;
    uint64_t added0 = atomic_load(&dc->added),
             nadded0 = atomic_load(&dc->nadded);

    avg = atomic_load(&dc->files)
              ? atomic_load(&dc->bytes) / atomic_load(&dc->files)
              : 4096;
    h.cap = (size_t)CM_MIN((uint64_t)DC_HEAP_MAX, need / CM_MAX(avg, 1) + 256);
    h.e = need ? malloc(h.cap * sizeof(*h.e)) : NULL;
    if (h.e == NULL)
        h.cap = 0;
    for (int i = 0; i < 256; i++)
        scan_sub(dc, i, need ? &h : NULL, &bytes, &files);
    /* @need came from the estimate, which may count a store twice (see
     * below), and counts a file replaced by a store of the same block
     * twice: free no more than what the scan itself found over 90% of
     * the bound, or what the floor asks for. Else the inflated need
     * would evict the recently read files too. */
    if (need > 0) {
        uint64_t keep = dc->max_bytes / 10 * 9;
        need = CM_MIN(need,
                      CM_MAX(bytes > keep ? bytes - keep : 0, floor_need(dc)));
    }
    if (h.n > 0)
        qsort(h.e, h.n, sizeof(*h.e), ent_cmp);
    for (size_t i = 0; i < h.n && freed < need; i++) {
        if (unlinkat(dc->v1fd, h.e[i].path, 0) == 0) {
            freed += h.e[i].cost;
            files--;
            atomic_fetch_add(&dc->evicted, 1);
        }
    }
    free(h.e);
    bytes = bytes > freed ? bytes - freed : 0;
    /* stores that landed during the scan may or may not be in its count:
     * count them again (an estimate too high only brings the next pass
     * sooner; one too low would let the files outgrow the bound) */
    atomic_store(&dc->bytes, bytes + atomic_load(&dc->added) - added0);
    atomic_store(&dc->files, files + atomic_load(&dc->nadded) - nadded0);
    return freed;
}

static void *evict_thread(void *arg)
{
    struct fc_dcache *dc = arg;
    bool first = true, again = false;

    for (;;) {
        uint64_t need;

        pthread_mutex_lock(&dc->lock);
        while (!first && !again && !dc->stop && !dc->wake) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += 30;
            if (pthread_cond_timedwait(&dc->cond, &dc->lock, &dl) != 0)
                break; /* a periodic look at the free space */
        }
        dc->wake = false;
        if (dc->stop) {
            pthread_mutex_unlock(&dc->lock);
            return NULL;
        }
        pthread_mutex_unlock(&dc->lock);
        need = need_to_free(dc);
        again = false;
        if (first || need > 0) {
            /* the first pass counts what is there; a pass that freed
             * something but left the bound passed goes again at once */
            uint64_t freed = evict_pass(dc, need);
            again = freed > 0 && need_to_free(dc) > 0;
        }
        first = false;
    }
}

static void wake_evict(struct fc_dcache *dc)
{
    pthread_mutex_lock(&dc->lock);
    dc->wake = true;
    pthread_cond_signal(&dc->cond);
    pthread_mutex_unlock(&dc->lock);
}

static void job_free(struct dc_job *j)
{
    j->done(j->ctx, j->arg);
    free(j->key);
    free(j->etag);
    free(j);
}

/* Writes queued blocks; at stop, writes what is left, then exits. */
static void *writer_thread(void *arg)
{
    struct fc_dcache *dc = arg;

    for (;;) {
        struct dc_job *j;

        pthread_mutex_lock(&dc->lock);
        while (!dc->stop && dc->qhead == NULL)
            pthread_cond_wait(&dc->wcond, &dc->lock);
        j = dc->qhead;
        if (j == NULL) {
            pthread_mutex_unlock(&dc->lock);
            return NULL; /* stopped and drained */
        }
        dc->qhead = j->next;
        if (dc->qhead == NULL)
            dc->qtail = NULL;
        pthread_mutex_unlock(&dc->lock);
        fc_dcache_put(dc, j->key, j->etag, j->idx, j->bs, j->data, j->len);
        pthread_mutex_lock(&dc->lock);
        dc->qbytes -= j->len;
        pthread_mutex_unlock(&dc->lock);
        job_free(j);
    }
}

/* Queues a store (see header). */
bool fc_dcache_put_async(struct fc_dcache *dc, const char *key,
                         const char *etag, uint64_t idx, size_t bs,
                         const void *data, size_t len, fc_dcache_done_fn *done,
                         void *ctx, void *arg)
{
    struct dc_job *j;
    bool ok = false;

    if (!dc->started || etag[0] == '\0')
        return false;
    j = calloc(1, sizeof(*j));
    if (j == NULL)
        return false;
    j->key = strdup(key);
    j->etag = strdup(etag);
    if (j->key == NULL || j->etag == NULL) {
        free(j->key);
        free(j->etag);
        free(j);
        return false;
    }
    j->idx = idx;
    j->bs = bs;
    j->data = data;
    j->len = len;
    j->done = done;
    j->ctx = ctx;
    j->arg = arg;
    pthread_mutex_lock(&dc->lock);
    if (!dc->stop && dc->qbytes + len <= FC_DCACHE_QUEUE) {
        if (dc->qtail)
            dc->qtail->next = j;
        else
            dc->qhead = j;
        dc->qtail = j;
        dc->qbytes += len;
        pthread_cond_signal(&dc->wcond);
        ok = true;
    }
    pthread_mutex_unlock(&dc->lock);
    if (!ok) {
        atomic_fetch_add(&dc->dropped, 1);
        free(j->key);
        free(j->etag);
        free(j);
    }
    return ok;
}

/* Starts the eviction and writer threads (see header). */
int fc_dcache_start(struct fc_dcache *dc)
{
    int e;

    write_pid(dc);
    e = pthread_create(&dc->th, NULL, evict_thread, dc);
    if (e != 0)
        return -e;
    e = pthread_create(&dc->wth, NULL, writer_thread, dc);
    if (e != 0) {
        pthread_mutex_lock(&dc->lock);
        dc->stop = true;
        pthread_cond_signal(&dc->cond);
        pthread_mutex_unlock(&dc->lock);
        pthread_join(dc->th, NULL);
        dc->stop = false;
        return -e;
    }
    dc->started = true;
    return 0;
}

/* Closes the cache (see header). */
void fc_dcache_close(struct fc_dcache *dc)
{
    if (dc == NULL)
        return;
    if (dc->started) {
        pthread_mutex_lock(&dc->lock);
        dc->stop = true;
        pthread_cond_signal(&dc->cond);
        pthread_cond_signal(&dc->wcond);
        pthread_mutex_unlock(&dc->lock);
        pthread_join(dc->th, NULL);
        pthread_join(dc->wth, NULL); /* after the queue is written */
    }
    pthread_mutex_destroy(&dc->lock);
    pthread_cond_destroy(&dc->cond);
    pthread_cond_destroy(&dc->wcond);
    close(dc->v1fd);
    close(dc->lockfd); /* releases the flock */
    free(dc->idpfx);
    free(dc->dir);
    free(dc);
}

/* --- blocks ------------------------------------------------------------- */

static uint32_t hdr_crc(const struct dc_hdr *h, const char *id, size_t idlen)
{
    return cm_crc32c(cm_crc32c(0, h, offsetof(struct dc_hdr, hcrc)), id, idlen);
}

/* Checks a block file's header, id and data CRC; @got is what the read
 * returned. */
static bool block_ok(const struct dc_hdr *h, const char *stored, const char *id,
                     size_t idlen, const char *data, size_t want, ssize_t got)
{
    return got >= (ssize_t)(DC_HDR + idlen) &&
           memcmp(h->magic, DC_MAGIC, 8) == 0 && h->idlen == idlen &&
           h->flags == 0 && h->datalen <= want &&
           (size_t)got == DC_HDR + idlen + h->datalen &&
           memcmp(stored, id, idlen) == 0 && h->hcrc == hdr_crc(h, id, idlen) &&
           h->dcrc == cm_crc32c(0, data, (size_t)h->datalen);
}

/* The buffered read of a block file: header, id and data in one preadv.
 * 0 with *buf (owned by the caller), 1 for a bad file, -ENOMEM. */
static int read_buffered(int fd, const char *id, size_t idlen, size_t want,
                         struct dc_hdr *h, char **buf)
{
    struct iovec iov[3];
    char *stored = malloc(idlen ? idlen : 1);
    ssize_t got;

    *buf = want > 0 ? fc_cache_buf_alloc(want) : NULL;
    if (stored == NULL || (want > 0 && *buf == NULL)) {
        free(stored);
        fc_cache_buf_free(*buf);
        *buf = NULL;
        return -ENOMEM;
    }
    iov[0] = (struct iovec){h, sizeof(*h)};
    iov[1] = (struct iovec){stored, idlen};
    iov[2] = (struct iovec){*buf, want};
    do
        got = preadv(fd, iov, want > 0 ? 3 : 2, 0);
    while (got < 0 && errno == EINTR);
    if (block_ok(h, stored, id, idlen, *buf, want, got)) {
        free(stored);
        return 0;
    }
    free(stored);
    fc_cache_buf_free(*buf);
    *buf = NULL;
    return 1;
}

/* The O_DIRECT read of a block file (@fd opened O_DIRECT): the whole file
 * into the first DC_DIO_ALIGN-aligned place of a buffer of @want plus
 * room for the header, the id and the alignment, then the data moved to
 * the buffer's start. 0 with *buf, 1 for a bad file, -ENOMEM, -EINVAL
 * when the file system refuses the alignment (read it buffered). */
static int read_direct(int fd, const char *id, size_t idlen, size_t want,
                       struct dc_hdr *h, char **buf)
{
    size_t need = DC_HDR + idlen + want;
    size_t rlen = (need + DC_DIO_ALIGN - 1) & ~(size_t)(DC_DIO_ALIGN - 1);
    char *b = fc_cache_buf_alloc(rlen + DC_DIO_ALIGN), *a;
    ssize_t got;

    *buf = NULL;
    if (b == NULL)
        return -ENOMEM;
    a = (char *)(((uintptr_t)b + DC_DIO_ALIGN - 1) &
                 ~(uintptr_t)(DC_DIO_ALIGN - 1));
    do
        got = pread(fd, a, rlen, 0);
    while (got < 0 && errno == EINTR);
    if (got < 0 && errno == EINVAL) {
        fc_cache_buf_free(b);
        return -EINVAL;
    }
    if (got >= (ssize_t)DC_HDR)
        memcpy(h, a, sizeof(*h));
    else
        memset(h, 0, sizeof(*h));
    if (!block_ok(h, a + DC_HDR, id, idlen, a + DC_HDR + idlen, want, got)) {
        fc_cache_buf_free(b);
        return 1;
    }
    memmove(b, a + DC_HDR + idlen, (size_t)h->datalen);
    *buf = b;
    return 0;
}

/* Reads a block (see header). */
int fc_dcache_get(struct fc_dcache *dc, const char *key, const char *etag,
                  uint64_t idx, size_t bs, size_t want, char **data,
                  size_t *len)
{
    char path[3 + DC_NAME + 1], *id, *buf = NULL;
    struct timespec ts[2];
    struct dc_hdr h;
    size_t idlen;
    bool dio = want >= DC_DIO_MIN && !atomic_load(&dc->no_dio);
    int fd, r;

    *data = NULL;
    *len = 0;
    if (etag[0] == '\0')
        return -ENOENT;
    id = block_id(dc, key, etag, idx, bs);
    if (id == NULL)
        return -ENOENT;
    idlen = strlen(id);
    block_path(id, path);
    fd = openat(dc->v1fd, path, O_RDONLY | O_CLOEXEC | (dio ? O_DIRECT : 0));
    if (fd < 0 && dio && errno == EINVAL) {
        atomic_store(&dc->no_dio, true); /* e.g. a file system without it */
        dio = false;
        fd = openat(dc->v1fd, path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) {
        free(id);
        atomic_fetch_add(&dc->misses, 1);
        return -ENOENT;
    }
    r = dio ? read_direct(fd, id, idlen, want, &h, &buf)
            : read_buffered(fd, id, idlen, want, &h, &buf);
    if (r == -EINVAL) {
        atomic_store(&dc->no_dio, true);
        close(fd);
        fd = openat(dc->v1fd, path, O_RDONLY | O_CLOEXEC);
        r = fd < 0 ? -ENOENT : read_buffered(fd, id, idlen, want, &h, &buf);
    }
    if (r != 0)
        goto out_miss;
    /* the atime is the LRU clock (relatime would not move it) */
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[1].tv_nsec = UTIME_OMIT;
    ts[1].tv_sec = 0;
    (void)futimens(fd, ts);
    close(fd);
    free(id);
    if (h.datalen == 0) {
        fc_cache_buf_free(buf);
        buf = NULL;
    }
    *data = buf;
    *len = (size_t)h.datalen;
    atomic_fetch_add(&dc->hits, 1);
    return 0;

out_miss:
    if (r == 1) {
        /* torn by a crash, truncated, flipped, or not this block: drop it */
        atomic_fetch_add(&dc->corrupt, 1);
        cm_log(CM_LOG_INFO, 0, "ecfs: cache_dir: dropping bad block file %s",
               path);
        unlinkat(dc->v1fd, path, 0);
    }
    if (fd >= 0)
        close(fd);
    free(id);
    atomic_fetch_add(&dc->misses, 1);
    return -ENOENT;
}

/* Whether stores are allowed now: not while free space is under the floor
 * (looked at again once a second). */
static bool space_ok(struct fc_dcache *dc)
{
    long now;

    if (!atomic_load(&dc->low_space))
        return true;
    now = mono_s();
    if (now < atomic_load(&dc->next_space_check))
        return false;
    atomic_store(&dc->next_space_check, now + 1);
    {
        uint64_t avail, floor;
        if (fs_space(dc, &avail, &floor) && avail >= floor) {
            atomic_store(&dc->low_space, false);
            return true;
        }
    }
    wake_evict(dc);
    return false;
}

/* Stores a block (see header). */
void fc_dcache_put(struct fc_dcache *dc, const char *key, const char *etag,
                   uint64_t idx, size_t bs, const void *data, size_t len)
{
    char path[3 + DC_NAME + 1], tmp[64], *id;
    struct dc_hdr h;
    struct iovec iov[3];
    size_t idlen, total, done = 0;
    uint64_t cost, since;
    int fd, err = 0;

    if (etag[0] == '\0' || !space_ok(dc))
        return;
    id = block_id(dc, key, etag, idx, bs);
    if (id == NULL)
        return;
    idlen = strlen(id);
    block_path(id, path);
    snprintf(tmp, sizeof(tmp), "%.2s/.t%ld.%lu", path, (long)getpid(),
             atomic_fetch_add(&dc->seq, 1));
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, DC_MAGIC, 8);
    h.idlen = (uint32_t)idlen;
    h.datalen = len;
    h.dcrc = cm_crc32c(0, data, len);
    h.hcrc = hdr_crc(&h, id, idlen);
    fd = openat(dc->v1fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        err = errno;
        goto out;
    }
    total = DC_HDR + idlen + len;
    while (done < total) {
        /* rebuild the iovec past what was written (short writes) */
        const void *p[3] = {&h, id, data};
        size_t l[3] = {DC_HDR, idlen, len}, skip = done;
        int nv = 0;
        ssize_t n;
        for (int i = 0; i < 3; i++) {
            if (skip >= l[i]) {
                skip -= l[i];
                continue;
            }
            iov[nv].iov_base = (char *)(uintptr_t)p[i] + skip;
            iov[nv++].iov_len = l[i] - skip;
            skip = 0;
        }
        n = writev(fd, iov, nv);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        done += (size_t)n;
    }
    /* start the writeback now: dirty pages piling up would be flushed in
     * bursts that stall every writer of a memory-capped cgroup at once */
    if (err == 0)
        (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    if (close(fd) < 0 && err == 0)
        err = errno;
    if (err == 0 && renameat(dc->v1fd, tmp, dc->v1fd, path) < 0)
        err = errno;
    if (err != 0)
        unlinkat(dc->v1fd, tmp, 0);
out:
    free(id);
    if (err != 0) {
        atomic_fetch_add(&dc->store_err, 1);
        if (err == ENOSPC || err == EDQUOT) {
            atomic_store(&dc->low_space, true);
            atomic_store(&dc->next_space_check, mono_s() + 1);
            wake_evict(dc);
        }
        return;
    }
    atomic_fetch_add(&dc->stores, 1);
    cost = file_cost(DC_HDR + idlen + len);
    atomic_fetch_add(&dc->files, 1);
    atomic_fetch_add(&dc->nadded, 1);
    atomic_fetch_add(&dc->added, cost);
    if (atomic_fetch_add(&dc->bytes, cost) + cost > dc->max_bytes)
        wake_evict(dc);
    since = atomic_fetch_add(&dc->since_check, cost) + cost;
    if (since >= DC_CHECK) {
        uint64_t avail, floor;
        atomic_store(&dc->since_check, 0);
        if (fs_space(dc, &avail, &floor) && avail < floor) {
            atomic_store(&dc->low_space, true);
            atomic_store(&dc->next_space_check, mono_s() + 1);
            wake_evict(dc);
        }
    }
}

/* Removes an object's blocks (see header). */
void fc_dcache_drop(struct fc_dcache *dc, const char *key, const char *etag,
                    size_t bs, uint64_t nblocks)
{
    char path[3 + DC_NAME + 1];

    if (etag[0] == '\0')
        return;
    for (uint64_t i = 0; i < nblocks; i++) {
        char *id = block_id(dc, key, etag, i, bs);
        if (id == NULL)
            return;
        block_path(id, path);
        free(id);
        (void)unlinkat(dc->v1fd, path, 0);
    }
}

/* Formats the counters (see header). */
int fc_dcache_stats_format(struct fc_dcache *dc, char *out, size_t cap)
{
    return snprintf(
        out, cap,
        " dcache_hits=%lu dcache_misses=%lu dcache_stores=%lu "
        "dcache_store_errors=%lu dcache_store_dropped=%lu dcache_corrupt=%lu "
        "dcache_evicted=%lu dcache_bytes=%" PRIu64 " dcache_files=%" PRIu64,
        atomic_load(&dc->hits), atomic_load(&dc->misses),
        atomic_load(&dc->stores), atomic_load(&dc->store_err),
        atomic_load(&dc->dropped), atomic_load(&dc->corrupt),
        atomic_load(&dc->evicted), (uint64_t)atomic_load(&dc->bytes),
        (uint64_t)atomic_load(&dc->files));
}
