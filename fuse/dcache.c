/* fuse/dcache.c - the on-disk block cache: append-only segment files with
 * a small index beside each, and a hash table of the blocks in memory.
 *
 * DESIGN: blocks are appended to the active segment DIR/v2/NNNNNNNN.seg
 * (hex number, a new one per mount and every seg_max bytes), each record
 * at a 4 KiB-aligned offset:
 *     data, then a 32-byte trailer, then the block's id, zero-padded to
 *     4 KiB; trailer: "ECFSDC2\n" u32 idlen u32 flags(0) u64 datalen
 *     u32 crc32c(data) u32 crc32c(trailer's first 28 bytes + id)
 * and, once its bytes are written, one 40-byte entry is appended to the
 * segment's index DIR/v2/NNNNNNNN.idx:
 *     16 bytes of SHA-256(id), u64 offset, u32 datalen, u32 idlen,
 *     u32 flags (0 = a record, 1 = the block was dropped), u32 crc32c of
 *     the first 36 bytes                            (host byte order)
 * The id is (endpoint, bucket, key, ETag, block size, index), see block_id.
 * A mount reads every index into the table (32 bytes per block; the last
 * entry of a block wins), so a hit is a table lookup and one pread from an
 * open segment, and a store is a copy into the writer's 4 MiB batch: one
 * pwrite of several blocks and one small write of their index entries,
 * with no file created, opened or renamed per block (the cost of epoch 1
 * with the old one-file-per-block layout, DIR/v1, which a mount removes in
 * the background: a cache of another layout is dropped, never misread).
 *
 * Segments are written and (from DC_DIO_MIN) read with O_DIRECT, aligned
 * buffer, offset and length: the cache's bytes never enter the page cache,
 * so the first epoch does not pay page-cache inserts and memory-cgroup
 * charges and reclaim per block (the buffered writes were 17 % of the
 * daemon's CPU in a capped cgroup), and a warm epoch does not fill RAM with
 * a second copy of what the FUSE page cache and the block cache hold. A
 * file system without O_DIRECT (EINVAL) gets buffered I/O.
 *
 * Nothing is fsynced: after a crash a record may be missing, torn or zero,
 * and an index entry torn. Every read checks the trailer, the stored id
 * (so a hash collision is a miss too) and the data's CRC; a torn index
 * entry fails its CRC; an entry past its segment's end is dropped at load:
 * a bad record is a miss and is fetched again, never served.
 *
 * Eviction is least-recently-used by segment: each segment keeps the time
 * of its last hit (in memory, written to its file's atime at unmount) and
 * the writer thread deletes the least recently used segments while the
 * files pass cache_dir_size (down to 90% of it) or while the cache
 * filesystem's free space is under its floor (5% of it, at most 1 GiB; down
 * to the floor plus a fifth). seg_max is a sixteenth of the bound (4 KiB
 * to 64 MiB), so one segment is at most ~6% of the cache. While free space
 * is under the floor, stores are skipped (a miss later, never an error).
 * The lock file (flock, our pid inside) makes a second mount of the same
 * directory fail at once. */
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

#define DC_MAGIC   "ECFSDC2\n"
#define DC_VDIR    "v2"  /* the layout's folder: its version */
#define DC_TAIL    32    /* trailer bytes */
#define DC_IENT    40    /* index entry bytes */
#define DC_ALIGN   4096u /* record, buffer and I/O alignment */
#define DC_SEG_MAX (64ull << 20)
#define DC_BATCH   (4u << 20)   /* bytes per segment write */
#define DC_CHECK   (4u << 20)   /* statvfs after this many bytes */
#define FLOOR_DIV  20           /* free-space floor: 1/20 of the fs, */
#define FLOOR_MAX  (1ull << 30) /* but at most 1 GiB */
#define DC_DIO_MIN (128u << 10) /* records read with O_DIRECT from here */
#define DC_F_DROP  1u           /* index entry: the block was dropped */
#define SEG_EMPTY  0u           /* table slot never used */
#define SEG_TOMB   UINT32_MAX   /* table slot of a removed block */

struct dc_tail {
    char magic[8];
    uint32_t idlen;
    uint32_t flags;
    uint64_t datalen;
    uint32_t dcrc;
    uint32_t hcrc;
};
_Static_assert(sizeof(struct dc_tail) == DC_TAIL, "dcache trailer layout");

struct dc_ient {
    uint8_t h[16];
    uint64_t off;
    uint32_t datalen;
    uint32_t idlen;
    uint32_t flags;
    uint32_t crc;
};
_Static_assert(sizeof(struct dc_ient) == DC_IENT, "dcache index layout");

/* A piece of a batch: the caller's block data written in place (@p), or
 * @len bytes at @bboff of the batch's copies (@p NULL). */
struct dc_piece {
    const char *p;
    size_t bboff, len;
};
#define DC_PIECES 1000 /* per pwritev, under IOV_MAX */

/* A block in the table: where its record is. */
struct dc_ent {
    uint8_t h[16];
    uint32_t seg;   /* segment number; SEG_EMPTY / SEG_TOMB */
    uint32_t off4k; /* record offset / DC_ALIGN */
    uint32_t datalen;
    uint32_t idlen;
};

/* A segment. Fields are protected by dc->lock unless said otherwise. */
struct dc_seg {
    uint32_t no;             /* immutable after creation */
    int dfd;                 /* O_DIRECT (buffered when refused); immutable */
    int bfd;                 /* buffered reads; immutable */
    int ifd;                 /* the index, while active (writer lock) */
    uint64_t size;           /* bytes of records */
    uint64_t isize;          /* bytes of the index */
    _Atomic int64_t used_ns; /* last hit (or creation), CLOCK_REALTIME */
    int refs;                /* readers in a pread */
    bool dead;               /* evicted: freed by the last reader */
};

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
    int dirfd;   /* DIR */
    int vfd;     /* DIR/v2 */
    int lockfd;  /* DIR/ecfs-cache.lock, flock held */
    uint64_t max_bytes, seg_max;
    pthread_mutex_t lock; /* protects the table, segs, the queue, stop */
    struct dc_ent *tab;
    size_t tcap, tused, ttomb, tlive; /* slots, used (live+tomb), ... */
    struct dc_seg **segs;             /* by ascending number */
    size_t nseg, segcap;
    uint32_t next_no;
    bool stop, started;
    pthread_t wth;                /* the writer thread */
    pthread_cond_t wcond;         /* wakes it */
    struct dc_job *qhead, *qtail; /* its queue */
    size_t qbytes;                /* bytes queued */
    pthread_mutex_t wlock;        /* serialises appends and evictions: below */
    struct dc_seg *active;        /* the segment appended to, or NULL */
    char *bb; /* the batch's copied bytes, DC_ALIGN-aligned */
    size_t bbcap, bblen;
    struct dc_piece *pcs; /* the batch, in file order (DC_PIECES) */
    size_t npcs;
    size_t btotal;         /* bytes of the batch */
    struct dc_ient *bents; /* the batch's index entries */
    size_t nbents, bentcap;
    atomic_bool low_space;      /* free space under the floor: no stores */
    atomic_bool no_dio;         /* O_DIRECT refused here */
    atomic_uint_fast64_t bytes; /* of segments and indexes */
    atomic_uint_fast64_t since_check; /* bytes stored since statvfs */
    atomic_long next_space_check;     /* while low_space, CLOCK_MONOTONIC s */
    atomic_ulong hits, misses, stores, store_err, corrupt, evicted;
    atomic_ulong dropped; /* stores not queued: the writer was behind */
};

static long mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec;
}

static int64_t real_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t align_up(size_t n)
{
    return (n + DC_ALIGN - 1) & ~(size_t)(DC_ALIGN - 1);
}

/* A record's bytes on disk. */
static size_t rec_len(size_t datalen, size_t idlen)
{
    return align_up(datalen + DC_TAIL + idlen);
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

static void block_hash(const char *id, size_t idlen, uint8_t h[16])
{
    uint8_t full[CM_SHA256_LEN];

    cm_sha256(id, idlen, full);
    memcpy(h, full, 16);
}

/* --- the table (dc->lock held) ------------------------------------------ */

static size_t slot0(const uint8_t h[16], size_t cap)
{
    uint64_t v;

    memcpy(&v, h, sizeof(v));
    return (size_t)(v & (cap - 1));
}

/* The slot holding @h, or SIZE_MAX. */
static size_t tab_find(const struct fc_dcache *dc, const uint8_t h[16])
{
    if (dc->tcap == 0)
        return SIZE_MAX;
    for (size_t i = slot0(h, dc->tcap);; i = (i + 1) & (dc->tcap - 1)) {
        const struct dc_ent *e = &dc->tab[i];
        if (e->seg == SEG_EMPTY)
            return SIZE_MAX;
        if (e->seg != SEG_TOMB && memcmp(e->h, h, 16) == 0)
            return i;
    }
}

static void tab_del(struct fc_dcache *dc, size_t i)
{
    dc->tab[i].seg = SEG_TOMB;
    dc->ttomb++;
    dc->tlive--;
}

/* Rebuilds the table with room for @live blocks at most half full. */
static int tab_resize(struct fc_dcache *dc, size_t live)
{
    size_t cap = 1024;
    struct dc_ent *t;

    while (cap < 2 * live)
        cap *= 2;
    t = calloc(cap, sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < dc->tcap; i++) {
        const struct dc_ent *e = &dc->tab[i];
        size_t j;
        if (e->seg == SEG_EMPTY || e->seg == SEG_TOMB)
            continue;
        for (j = slot0(e->h, cap); t[j].seg != SEG_EMPTY;
             j = (j + 1) & (cap - 1))
            ;
        t[j] = *e;
    }
    free(dc->tab);
    dc->tab = t;
    dc->tcap = cap;
    dc->tused = dc->tlive;
    dc->ttomb = 0;
    return 0;
}

/* Inserts or replaces @x. 0 or -ENOMEM. */
static int tab_put(struct fc_dcache *dc, const struct dc_ent *x)
{
    size_t i = tab_find(dc, x->h);

    if (i != SIZE_MAX) {
        dc->tab[i] = *x;
        return 0;
    }
    if ((dc->tused + 1) * 10 > dc->tcap * 7 &&
        tab_resize(dc, dc->tlive + 1) < 0)
        return -ENOMEM;
    for (i = slot0(x->h, dc->tcap);
         dc->tab[i].seg != SEG_EMPTY && dc->tab[i].seg != SEG_TOMB;
         i = (i + 1) & (dc->tcap - 1))
        ;
    if (dc->tab[i].seg == SEG_TOMB)
        dc->ttomb--;
    else
        dc->tused++;
    dc->tab[i] = *x;
    dc->tlive++;
    return 0;
}

/* --- segments ------------------------------------------------------------ */

static void seg_name(char *out, size_t cap, uint32_t no, const char *ext)
{
    snprintf(out, cap, "%08" PRIx32 ".%s", no, ext);
}

/* The segment numbered @no, or NULL (dc->lock held). */
static struct dc_seg *seg_find(const struct fc_dcache *dc, uint32_t no)
{
    size_t lo = 0, hi = dc->nseg;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (dc->segs[mid]->no < no)
            lo = mid + 1;
        else if (dc->segs[mid]->no > no)
            hi = mid;
        else
            return dc->segs[mid];
    }
    return NULL;
}

static void seg_free(struct dc_seg *s)
{
    if (s->dfd != s->bfd)
        close(s->dfd);
    close(s->bfd);
    if (s->ifd >= 0)
        close(s->ifd);
    free(s);
}

/* Adds @s, numbered above every segment so far (dc->lock held). */
static int seg_add(struct fc_dcache *dc, struct dc_seg *s)
{
    if (dc->nseg == dc->segcap) {
        size_t cap = dc->segcap ? 2 * dc->segcap : 16;
        struct dc_seg **n = realloc(dc->segs, cap * sizeof(*n));
        if (n == NULL)
            return -ENOMEM;
        dc->segs = n;
        dc->segcap = cap;
    }
    dc->segs[dc->nseg++] = s;
    return 0;
}

/* Opens segment @no's record file: @s->dfd with O_DIRECT where the file
 * system takes it, @s->bfd buffered. @flags: O_CREAT|O_EXCL for a new one. */
static int seg_open_fds(struct fc_dcache *dc, struct dc_seg *s, int flags)
{
    char name[32];

    seg_name(name, sizeof(name), s->no, "seg");
    s->bfd = openat(dc->vfd, name, O_RDWR | O_CLOEXEC | flags, 0600);
    if (s->bfd < 0)
        return -errno;
    s->dfd = -1;
    if (!atomic_load(&dc->no_dio))
        s->dfd = openat(dc->vfd, name, O_RDWR | O_CLOEXEC | O_DIRECT);
    if (s->dfd < 0) {
        if (errno == EINVAL)
            atomic_store(&dc->no_dio, true);
        s->dfd = s->bfd;
    }
    return 0;
}

/* --- opening ------------------------------------------------------------- */

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

static uint32_t ient_crc(const struct dc_ient *e)
{
    return cm_crc32c(0, e, offsetof(struct dc_ient, crc));
}

/* Applies one index entry of segment @s (loading; dc->lock not needed). */
static void load_ient(struct fc_dcache *dc, struct dc_seg *s,
                      const struct dc_ient *e)
{
    size_t i = tab_find(dc, e->h);
    struct dc_ent x;

    if (e->flags == DC_F_DROP) {
        if (i != SIZE_MAX)
            tab_del(dc, i);
        return;
    }
    if (e->flags != 0 || e->off % DC_ALIGN != 0 ||
        e->off / DC_ALIGN > UINT32_MAX ||
        e->off + rec_len(e->datalen, e->idlen) > s->size) {
        /* a record cut by a crash or a truncation: never read */
        atomic_fetch_add(&dc->corrupt, 1);
        if (i != SIZE_MAX)
            tab_del(dc, i);
        return;
    }
    memcpy(x.h, e->h, 16);
    x.seg = s->no;
    x.off4k = (uint32_t)(e->off / DC_ALIGN);
    x.datalen = e->datalen;
    x.idlen = e->idlen;
    (void)tab_put(dc, &x); /* ENOMEM: the block is a miss */
}

/* Loads segment @no: its record file and its index. A segment without
 * one of the two is removed. */
static void load_seg(struct fc_dcache *dc, uint32_t no)
{
    char name[32];
    struct dc_seg *s = calloc(1, sizeof(*s));
    struct stat st;
    int ifd;

    if (s == NULL)
        return;
    s->no = no;
    s->ifd = -1;
    seg_name(name, sizeof(name), no, "idx");
    ifd = openat(dc->vfd, name, O_RDONLY | O_CLOEXEC);
    if (ifd < 0 || seg_open_fds(dc, s, 0) < 0 || fstat(s->bfd, &st) < 0) {
        if (ifd >= 0)
            close(ifd);
        else
            s->bfd = -1;
        seg_name(name, sizeof(name), no, "seg");
        (void)unlinkat(dc->vfd, name, 0);
        seg_name(name, sizeof(name), no, "idx");
        (void)unlinkat(dc->vfd, name, 0);
        if (s->bfd >= 0)
            seg_free(s);
        else
            free(s);
        return;
    }
    s->size = (uint64_t)st.st_size;
    s->used_ns = (int64_t)st.st_atim.tv_sec * 1000000000 + st.st_atim.tv_nsec;
    for (;;) {
        struct dc_ient e[256];
        ssize_t n = read(ifd, e, sizeof(e));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (size_t i = 0; i < (size_t)n / DC_IENT; i++) {
            if (e[i].crc == ient_crc(&e[i]))
                load_ient(dc, s, &e[i]);
            else
                atomic_fetch_add(&dc->corrupt, 1); /* torn by a crash */
        }
        s->isize += (uint64_t)n;
        if ((size_t)n % DC_IENT != 0)
            break; /* a torn last entry */
    }
    close(ifd);
    if (seg_add(dc, s) < 0) {
        seg_free(s);
        return;
    }
    atomic_fetch_add(&dc->bytes, s->size + s->isize);
    if (no >= dc->next_no)
        dc->next_no = no + 1;
}

static int no_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Reads every segment's index into the table, oldest segment first. */
static int load_all(struct fc_dcache *dc)
{
    int fd = dup(dc->vfd);
    uint32_t *nos = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    DIR *d;

    if (fd < 0)
        return -errno;
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -errno;
    }
    while ((de = readdir(d)) != NULL) {
        char *end;
        unsigned long v = strtoul(de->d_name, &end, 16);
        if (end != de->d_name + 8 || strcmp(end, ".seg") != 0 || v == 0 ||
            v >= SEG_TOMB)
            continue;
        if (n == cap) {
            uint32_t *m = realloc(nos, (cap = cap ? 2 * cap : 64) * 4);
            if (m == NULL) {
                free(nos);
                closedir(d);
                return -ENOMEM;
            }
            nos = m;
        }
        nos[n++] = (uint32_t)v;
    }
    closedir(d);
    if (n > 0)
        qsort(nos, n, sizeof(*nos), no_cmp);
    for (size_t i = 0; i < n; i++)
        load_seg(dc, nos[i]);
    free(nos);
    if (dc->next_no == 0)
        dc->next_no = 1;
    return 0;
}

/* Opens the cache (see header). */
int fc_dcache_open(const struct fc_dcache_conf *conf, struct fc_dcache **out)
{
    struct fc_dcache *dc = calloc(1, sizeof(*dc));
    int ret;

    if (dc == NULL)
        return -ENOMEM;
    dc->dirfd = dc->vfd = dc->lockfd = -1;
    dc->max_bytes = conf->max_bytes;
    dc->seg_max = CM_MAX(CM_MIN(conf->max_bytes / 16, DC_SEG_MAX), DC_ALIGN);
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
    dc->dirfd = open(conf->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dc->dirfd < 0) {
        ret = -errno;
        fprintf(stderr, "ecfs: cannot open cache_dir %s: %s\n", conf->dir,
                strerror(-ret));
        goto out_free;
    }
    ret = take_lock(dc, dc->dirfd);
    if (ret < 0)
        goto out_free;
    ret = mkdir_ok(dc->dirfd, DC_VDIR);
    if (ret == 0 && (dc->vfd = openat(dc->dirfd, DC_VDIR,
                                      O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        ret = -errno;
    if (ret == 0)
        ret = load_all(dc);
    if (ret < 0) {
        fprintf(stderr, "ecfs: cache_dir %s: cannot read its folder: %s\n",
                conf->dir, strerror(-ret));
        goto out_free;
    }
    write_pid(dc);
    pthread_mutex_init(&dc->lock, NULL);
    pthread_mutex_init(&dc->wlock, NULL);
    pthread_cond_init(&dc->wcond, NULL);
    *out = dc;
    return 0;

out_free:
    for (size_t i = 0; i < dc->nseg; i++)
        seg_free(dc->segs[i]);
    free(dc->segs);
    free(dc->tab);
    if (dc->vfd >= 0)
        close(dc->vfd);
    if (dc->dirfd >= 0)
        close(dc->dirfd);
    if (dc->lockfd >= 0)
        close(dc->lockfd);
    free(dc->idpfx);
    free(dc->dir);
    free(dc);
    return ret;
}

/* Removes the old layout's folder DIR/v1 (one file per block), if any:
 * its blocks are dropped, not migrated. In the writer thread, at start. */
static void remove_v1(struct fc_dcache *dc)
{
    int v1 = openat(dc->dirfd, "v1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d;
    struct dirent *de;
    unsigned long n = 0;

    if (v1 < 0)
        return;
    d = fdopendir(v1);
    if (d == NULL) {
        close(v1);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        int sfd;
        DIR *sd;
        struct dirent *f;
        if (de->d_name[0] == '.' &&
            (de->d_name[1] == '\0' || strcmp(de->d_name, "..") == 0))
            continue;
        sfd = openat(v1, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0) {
            (void)unlinkat(v1, de->d_name, 0);
            continue;
        }
        sd = fdopendir(sfd);
        if (sd == NULL) {
            close(sfd);
            continue;
        }
        while ((f = readdir(sd)) != NULL)
            if (strcmp(f->d_name, ".") != 0 && strcmp(f->d_name, "..") != 0 &&
                unlinkat(sfd, f->d_name, 0) == 0)
                n++;
        closedir(sd);
        (void)unlinkat(v1, de->d_name, AT_REMOVEDIR);
    }
    closedir(d);
    if (unlinkat(dc->dirfd, "v1", AT_REMOVEDIR) == 0)
        cm_log(CM_LOG_INFO, 0,
               "ecfs: cache_dir %s: removed %lu block files of the old "
               "layout (v1)",
               dc->dir, n);
}

/* --- space and eviction (dc->wlock held) --------------------------------- */

/* Free bytes of the cache filesystem and its floor; false if unknown. */
static bool fs_space(struct fc_dcache *dc, uint64_t *avail, uint64_t *floor)
{
    struct statvfs sv;

    if (fstatvfs(dc->vfd, &sv) < 0)
        return false;
    *avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    *floor = CM_MIN((uint64_t)sv.f_blocks * sv.f_frsize / FLOOR_DIV,
                    (uint64_t)FLOOR_MAX);
    return true;
}

/* Bytes to free now (0: none): over 90% of the bound once the bound is
 * passed, or below the free-space floor plus a fifth of it (sets
 * low_space then). */
static uint64_t need_to_free(struct fc_dcache *dc, bool look)
{
    uint64_t bytes = atomic_load(&dc->bytes), need = 0, avail, floor;

    if (bytes > dc->max_bytes)
        need = bytes - dc->max_bytes / 10 * 9;
    if (look && fs_space(dc, &avail, &floor)) {
        bool low = avail < floor;
        atomic_store(&dc->low_space, low);
        if (low)
            need = CM_MAX(need, floor + floor / 5 - avail);
    }
    return need;
}

/* Deletes segment @s: its files, its blocks from the table. A reader in a
 * pread keeps it until done. Returns the bytes freed. */
static uint64_t seg_evict(struct fc_dcache *dc, struct dc_seg *s)
{
    char name[32];
    uint64_t freed;
    unsigned long n = 0;

    seg_name(name, sizeof(name), s->no, "seg");
    (void)unlinkat(dc->vfd, name, 0);
    seg_name(name, sizeof(name), s->no, "idx");
    (void)unlinkat(dc->vfd, name, 0);
    if (dc->active == s)
        dc->active = NULL;
    pthread_mutex_lock(&dc->lock);
    for (size_t i = 0; i < dc->tcap; i++)
        if (dc->tab[i].seg == s->no) {
            tab_del(dc, i);
            n++;
        }
    for (size_t i = 0; i < dc->nseg; i++)
        if (dc->segs[i] == s) {
            memmove(&dc->segs[i], &dc->segs[i + 1],
                    (dc->nseg - i - 1) * sizeof(*dc->segs));
            dc->nseg--;
            break;
        }
    freed = s->size + s->isize;
    s->dead = true;
    if (s->refs == 0)
        seg_free(s);
    if (dc->ttomb > dc->tcap / 4)
        (void)tab_resize(dc, dc->tlive); /* ENOMEM: keep the tombstones */
    pthread_mutex_unlock(&dc->lock);
    atomic_fetch_sub(&dc->bytes, freed);
    atomic_fetch_add(&dc->evicted, n);
    return freed;
}

/* Evicts least recently used segments while need_to_free says so; the
 * active one last, and not while a batch for it is pending. */
static void evict(struct fc_dcache *dc, bool look)
{
    uint64_t need = need_to_free(dc, look), freed = 0;

    while (freed < need) {
        struct dc_seg *v = NULL;
        pthread_mutex_lock(&dc->lock);
        for (size_t i = 0; i < dc->nseg; i++) {
            struct dc_seg *s = dc->segs[i];
            if (v == NULL || (v == dc->active && s != v) ||
                (s != dc->active && s->used_ns < v->used_ns))
                v = s;
        }
        pthread_mutex_unlock(&dc->lock);
        if (v == NULL || (v == dc->active && dc->btotal > 0))
            break;
        freed += seg_evict(dc, v);
    }
}

/* --- stores (dc->wlock held) --------------------------------------------- */

/* Makes a new active segment. 0 or -errno. */
static int seg_new(struct fc_dcache *dc)
{
    char name[32];
    struct dc_seg *s = calloc(1, sizeof(*s));
    int ret;

    if (s == NULL)
        return -ENOMEM;
    pthread_mutex_lock(&dc->lock);
    s->no = dc->next_no++;
    pthread_mutex_unlock(&dc->lock);
    s->used_ns = real_ns();
    ret = seg_open_fds(dc, s, O_CREAT | O_EXCL);
    if (ret < 0) {
        free(s);
        return ret;
    }
    seg_name(name, sizeof(name), s->no, "idx");
    s->ifd =
        openat(dc->vfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (s->ifd < 0) {
        ret = -errno;
        seg_name(name, sizeof(name), s->no, "seg");
        (void)unlinkat(dc->vfd, name, 0);
        seg_free(s);
        return ret;
    }
    pthread_mutex_lock(&dc->lock);
    ret = seg_add(dc, s);
    pthread_mutex_unlock(&dc->lock);
    if (ret < 0) {
        seg_evict(dc, s);
        return ret;
    }
    if (dc->active != NULL) {
        close(dc->active->ifd); /* sealed */
        dc->active->ifd = -1;
    }
    dc->active = s;
    return 0;
}

/* Counts a failed batch of @n stores; ENOSPC stops stores for a while. */
static void store_failed(struct fc_dcache *dc, int err, size_t n)
{
    atomic_fetch_add(&dc->store_err, n);
    if (err == -ENOSPC || err == -EDQUOT) {
        atomic_store(&dc->low_space, true);
        atomic_store(&dc->next_space_check, mono_s() + 1);
    }
}

/* Writes @n iovecs (DC_PIECES at most) at @off of @fd, all of them;
 * 0 or -errno. @iov is used up. */
static int pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, iov, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        off += (uint64_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Writes all of @p at @off of @fd; 0 or -errno. */
static int pwrite_all(int fd, const char *p, size_t n, uint64_t off)
{
    struct iovec iov = {(void *)(uintptr_t)p, n};

    return pwritev_all(fd, &iov, 1, off);
}

/* Writes the batch's pieces with one pwritev at @off of @fd. */
static int write_batch(struct fc_dcache *dc, int fd, uint64_t off)
{
    struct iovec iov[DC_PIECES];

    for (size_t i = 0; i < dc->npcs; i++) {
        const struct dc_piece *pc = &dc->pcs[i];
        iov[i].iov_base =
            (void *)(uintptr_t)(pc->p ? pc->p : dc->bb + pc->bboff);
        iov[i].iov_len = pc->len;
    }
    return pwritev_all(fd, iov, (int)dc->npcs, off);
}

/* Writes the batch to the active segment, then its index entries, then
 * puts its blocks in the table. */
static void flush(struct fc_dcache *dc)
{
    struct dc_seg *s = dc->active;
    size_t n = dc->nbents, ilen = n * DC_IENT, total = dc->btotal;
    uint64_t off, since;
    int ret;

    if (n == 0)
        return;
    if (CM_NEVER(s == NULL)) { /* evict keeps the segment of a batch */
        store_failed(dc, -EIO, n);
        dc->nbents = dc->bblen = dc->npcs = dc->btotal = 0;
        return;
    }
    off = s->size;
    ret = write_batch(dc, s->dfd, off);
    if (ret == -EINVAL && s->dfd != s->bfd) /* O_DIRECT after all refused */
        ret = write_batch(dc, s->bfd, off);
    if (ret == 0 && s->dfd == s->bfd)
        /* buffered: start the writeback now, not in bursts that stall
         * every writer of a memory-capped cgroup at once */
        (void)sync_file_range(s->bfd, (off_t)off, (off_t)total,
                              SYNC_FILE_RANGE_WRITE);
    for (size_t i = 0; ret == 0 && i < n; i++) {
        dc->bents[i].off += off;
        dc->bents[i].crc = ient_crc(&dc->bents[i]);
    }
    if (ret == 0)
        ret = pwrite_all(s->ifd, (const char *)dc->bents, ilen, s->isize);
    dc->nbents = dc->bblen = dc->npcs = dc->btotal = 0;
    if (ret < 0) {
        store_failed(dc, ret, n);
        /* the segment may hold part of the batch now: start another */
        s->size = align_up(s->size + total);
        if (dc->active == s) {
            close(s->ifd);
            s->ifd = -1;
            dc->active = NULL;
        }
        return;
    }
    pthread_mutex_lock(&dc->lock);
    for (size_t i = 0; i < n; i++) {
        const struct dc_ient *e = &dc->bents[i];
        struct dc_ent x;
        memcpy(x.h, e->h, 16);
        x.seg = s->no;
        x.off4k = (uint32_t)(e->off / DC_ALIGN);
        x.datalen = e->datalen;
        x.idlen = e->idlen;
        if (tab_put(dc, &x) < 0)
            atomic_fetch_add(&dc->store_err, 1);
        else
            atomic_fetch_add(&dc->stores, 1);
    }
    s->size += total;
    s->isize += ilen;
    pthread_mutex_unlock(&dc->lock);
    atomic_fetch_add(&dc->bytes, total + ilen);
    since = atomic_fetch_add(&dc->since_check, total) + total;
    if (since >= DC_CHECK) {
        atomic_store(&dc->since_check, 0);
        evict(dc, true);
    } else if (atomic_load(&dc->bytes) > dc->max_bytes) {
        evict(dc, false);
    }
}

/* Makes room for one more block in the batch: @copy bytes of copies, an
 * index entry and two pieces; 0 or -ENOMEM. */
static int batch_room(struct fc_dcache *dc, size_t copy)
{
    size_t cap = CM_MAX((size_t)DC_BATCH, dc->bblen + copy);
    void *n;

    if (dc->nbents == dc->bentcap) {
        size_t ec = dc->bentcap ? 2 * dc->bentcap : 64;
        struct dc_ient *e = realloc(dc->bents, ec * sizeof(*e));
        if (e == NULL)
            return -ENOMEM;
        dc->bents = e;
        dc->bentcap = ec;
    }
    if (dc->pcs == NULL) {
        dc->pcs = malloc(DC_PIECES * sizeof(*dc->pcs));
        if (dc->pcs == NULL)
            return -ENOMEM;
    }
    if (dc->bb != NULL && dc->bblen + copy <= dc->bbcap)
        return 0;
    if (posix_memalign(&n, DC_ALIGN, cap) != 0)
        return -ENOMEM;
    if (dc->bb != NULL)
        memcpy(n, dc->bb, dc->bblen);
    free(dc->bb);
    dc->bb = n;
    dc->bbcap = cap;
    return 0;
}

/* Whether stores are allowed now: not while free space is under the floor
 * (looked at again once a second). */
static bool space_ok(struct fc_dcache *dc)
{
    long now;
    uint64_t avail, floor;

    if (!atomic_load(&dc->low_space))
        return true;
    now = mono_s();
    if (now < atomic_load(&dc->next_space_check))
        return false;
    atomic_store(&dc->next_space_check, now + 1);
    if (fs_space(dc, &avail, &floor) && avail >= floor) {
        atomic_store(&dc->low_space, false);
        return true;
    }
    evict(dc, true);
    return !atomic_load(&dc->low_space);
}

/* Adds one block to the batch, flushing first when the batch or the
 * active segment is full. The caller's @data must stay valid until the
 * next flush: its whole pages are written from where they are when it is
 * DC_ALIGN-aligned (a big block buffer, FC_CACHE_BUF_ALIGN) or the file
 * is written buffered; else, and for the rest, it is copied. A block the
 * table holds already is skipped: its bytes are the same. */
static void batch_add(struct fc_dcache *dc, const char *key, const char *etag,
                      uint64_t idx, size_t bs, const void *data, size_t len)
{
    struct dc_tail t;
    struct dc_ient *e;
    size_t idlen, rlen, inplace, copy;
    uint8_t h[16];
    bool have;
    char *id, *p;

    if (etag[0] == '\0' || len > UINT32_MAX || !space_ok(dc))
        return;
    id = block_id(dc, key, etag, idx, bs);
    if (id == NULL)
        return;
    idlen = strlen(id);
    block_hash(id, idlen, h);
    pthread_mutex_lock(&dc->lock);
    have = tab_find(dc, h) != SIZE_MAX;
    pthread_mutex_unlock(&dc->lock);
    rlen = rec_len(len, idlen);
    if (have || idlen > UINT32_MAX) {
        free(id);
        return;
    }
    if (dc->active != NULL && dc->active->size + dc->btotal > 0 &&
        dc->active->size + dc->btotal + rlen > dc->seg_max)
        flush(dc); /* then a new segment below */
    if (dc->btotal > 0 &&
        (dc->btotal + rlen > DC_BATCH || dc->npcs + 2 > DC_PIECES))
        flush(dc);
    if (dc->active == NULL || (dc->btotal == 0 && dc->active->size > 0 &&
                               dc->active->size + rlen > dc->seg_max)) {
        int ret = seg_new(dc);
        if (ret < 0) {
            store_failed(dc, ret, 1);
            free(id);
            return;
        }
    }
    inplace = 0;
    if ((uintptr_t)data % DC_ALIGN == 0 || dc->active->dfd == dc->active->bfd)
        inplace = len & ~(size_t)(DC_ALIGN - 1);
    copy = rlen - inplace;
    if (batch_room(dc, copy) < 0) {
        atomic_fetch_add(&dc->store_err, 1);
        free(id);
        return;
    }
    if (inplace > 0)
        dc->pcs[dc->npcs++] = (struct dc_piece){data, 0, inplace};
    dc->pcs[dc->npcs++] = (struct dc_piece){NULL, dc->bblen, copy};
    p = dc->bb + dc->bblen;
    memcpy(p, (const char *)data + inplace, len - inplace);
    p += len - inplace;
    memset(&t, 0, sizeof(t));
    memcpy(t.magic, DC_MAGIC, 8);
    t.idlen = (uint32_t)idlen;
    t.datalen = len;
    t.dcrc = cm_crc32c(0, data, len);
    t.hcrc =
        cm_crc32c(cm_crc32c(0, &t, offsetof(struct dc_tail, hcrc)), id, idlen);
    memcpy(p, &t, DC_TAIL);
    memcpy(p + DC_TAIL, id, idlen);
    memset(p + DC_TAIL + idlen, 0, rlen - len - DC_TAIL - idlen);
    e = &dc->bents[dc->nbents++];
    memset(e, 0, sizeof(*e));
    memcpy(e->h, h, 16);
    e->off = dc->btotal; /* + the segment's size at the flush */
    e->datalen = (uint32_t)len;
    e->idlen = (uint32_t)idlen;
    dc->bblen += copy;
    dc->btotal += rlen;
    free(id);
}

/* Stores a block (see header). */
void fc_dcache_put(struct fc_dcache *dc, const char *key, const char *etag,
                   uint64_t idx, size_t bs, const void *data, size_t len)
{
    pthread_mutex_lock(&dc->wlock);
    batch_add(dc, key, etag, idx, bs, data, len);
    flush(dc);
    pthread_mutex_unlock(&dc->wlock);
}

static void job_free(struct dc_job *j)
{
    j->done(j->ctx, j->arg);
    free(j->key);
    free(j->etag);
    free(j);
}

/* Writes queued blocks in batches; looks at the free space every 30 s
 * while idle; at stop, writes what is left, then exits. */
static void *writer_thread(void *arg)
{
    struct fc_dcache *dc = arg;

    remove_v1(dc);
    pthread_mutex_lock(&dc->wlock);
    evict(dc, true); /* a bound lowered since the last mount */
    pthread_mutex_unlock(&dc->wlock);
    for (;;) {
        struct dc_job *list, *j;
        size_t taken = 0;

        pthread_mutex_lock(&dc->lock);
        while (!dc->stop && dc->qhead == NULL) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += 30;
            if (pthread_cond_timedwait(&dc->wcond, &dc->lock, &dl) != 0)
                break;
        }
        if (dc->qhead == NULL) {
            bool stop = dc->stop;
            pthread_mutex_unlock(&dc->lock);
            if (stop)
                return NULL; /* stopped and drained */
            pthread_mutex_lock(&dc->wlock);
            evict(dc, true); /* someone else may fill the file system */
            pthread_mutex_unlock(&dc->wlock);
            continue;
        }
        /* take up to a batch of jobs */
        list = j = dc->qhead;
        for (;;) {
            taken += j->len;
            if (j->next == NULL || taken + j->next->len > DC_BATCH)
                break;
            j = j->next;
        }
        dc->qhead = j->next;
        if (dc->qhead == NULL)
            dc->qtail = NULL;
        j->next = NULL;
        pthread_mutex_unlock(&dc->lock);
        pthread_mutex_lock(&dc->wlock);
        for (j = list; j != NULL; j = j->next)
            batch_add(dc, j->key, j->etag, j->idx, j->bs, j->data, j->len);
        flush(dc);
        pthread_mutex_unlock(&dc->wlock);
        pthread_mutex_lock(&dc->lock);
        dc->qbytes -= taken;
        pthread_mutex_unlock(&dc->lock);
        while (list != NULL) { /* written: the callers' buffers may go */
            j = list;
            list = j->next;
            job_free(j);
        }
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

/* Starts the writer thread (see header). */
int fc_dcache_start(struct fc_dcache *dc)
{
    int e;

    write_pid(dc);
    e = pthread_create(&dc->wth, NULL, writer_thread, dc);
    if (e != 0)
        return -e;
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
        pthread_cond_signal(&dc->wcond);
        pthread_mutex_unlock(&dc->lock);
        pthread_join(dc->wth, NULL); /* after the queue is written */
    }
    for (size_t i = 0; i < dc->nseg; i++) {
        /* the LRU clock for the next mount */
        struct dc_seg *s = dc->segs[i];
        int64_t ns = atomic_load(&s->used_ns);
        struct timespec ts[2] = {
            {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000},
            {.tv_sec = 0, .tv_nsec = UTIME_OMIT}};
        (void)futimens(s->bfd, ts);
        seg_free(s);
    }
    free(dc->segs);
    free(dc->tab);
    free(dc->bb);
    free(dc->pcs);
    free(dc->bents);
    pthread_mutex_destroy(&dc->lock);
    pthread_mutex_destroy(&dc->wlock);
    pthread_cond_destroy(&dc->wcond);
    close(dc->vfd);
    close(dc->dirfd);
    close(dc->lockfd); /* releases the flock */
    free(dc->idpfx);
    free(dc->dir);
    free(dc);
}

/* --- reads ---------------------------------------------------------------- */

/* Checks a record read into @a (@got bytes) against @id. */
static bool rec_ok(const char *a, ssize_t got, size_t datalen, const char *id,
                   size_t idlen)
{
    struct dc_tail t;

    if (got < (ssize_t)(datalen + DC_TAIL + idlen))
        return false;
    memcpy(&t, a + datalen, sizeof(t));
    return memcmp(t.magic, DC_MAGIC, 8) == 0 && t.idlen == idlen &&
           t.flags == 0 && t.datalen == datalen &&
           memcmp(a + datalen + DC_TAIL, id, idlen) == 0 &&
           t.hcrc == cm_crc32c(cm_crc32c(0, &t, offsetof(struct dc_tail, hcrc)),
                               id, idlen) &&
           t.dcrc == cm_crc32c(0, a, datalen);
}

/* Drops segment reference @s taken by a reader. */
static void seg_unref(struct fc_dcache *dc, struct dc_seg *s)
{
    pthread_mutex_lock(&dc->lock);
    if (--s->refs == 0 && s->dead)
        seg_free(s);
    pthread_mutex_unlock(&dc->lock);
}

/* Reads a block (see header). */
int fc_dcache_get(struct fc_dcache *dc, const char *key, const char *etag,
                  uint64_t idx, size_t bs, size_t want, char **data,
                  size_t *len)
{
    struct dc_seg *s = NULL;
    struct dc_ent x = {{0}, 0, 0, 0, 0};
    size_t idlen, rlen, slot;
    uint8_t h[16];
    char *id, *b = NULL, *a;
    ssize_t got;
    bool dio;
    int fd;

    *data = NULL;
    *len = 0;
    if (etag[0] == '\0')
        return -ENOENT;
    id = block_id(dc, key, etag, idx, bs);
    if (id == NULL)
        return -ENOENT;
    idlen = strlen(id);
    block_hash(id, idlen, h);
    pthread_mutex_lock(&dc->lock);
    slot = tab_find(dc, h);
    if (slot != SIZE_MAX) {
        x = dc->tab[slot];
        s = seg_find(dc, x.seg);
    }
    if (s != NULL && x.datalen <= want && x.idlen == idlen)
        s->refs++;
    else
        s = NULL;
    pthread_mutex_unlock(&dc->lock);
    if (s == NULL)
        goto out_miss;
    rlen = rec_len(x.datalen, idlen);
    dio = rlen >= DC_DIO_MIN && s->dfd != s->bfd;
    fd = dio ? s->dfd : s->bfd;
    /* the record into the block's buffer when it is aligned (a big one,
     * FC_CACHE_BUF_ALIGN), else into the first aligned place of a buffer
     * with room for the alignment, the data then moved to its start */
    b = fc_cache_buf_alloc(rlen);
    if (b != NULL && dio && (uintptr_t)b % DC_ALIGN != 0) {
        fc_cache_buf_free(b);
        b = fc_cache_buf_alloc(rlen + DC_ALIGN);
    }
    if (b == NULL) {
        seg_unref(dc, s);
        goto out_miss;
    }
    a = dio ? (char *)(((uintptr_t)b + DC_ALIGN - 1) &
                       ~(uintptr_t)(DC_ALIGN - 1))
            : b;
    do
        got = pread(fd, a, rlen, (off_t)x.off4k * DC_ALIGN);
    while (got < 0 && errno == EINTR);
    if (got < 0 && errno == EINVAL && dio)
        got = pread(s->bfd, a, rlen, (off_t)x.off4k * DC_ALIGN);
    if (!rec_ok(a, got, x.datalen, id, idlen)) {
        /* torn by a crash, cut, flipped, or not this block: drop it */
        pthread_mutex_lock(&dc->lock);
        slot = tab_find(dc, h);
        if (slot != SIZE_MAX && dc->tab[slot].seg == x.seg &&
            dc->tab[slot].off4k == x.off4k)
            tab_del(dc, slot);
        pthread_mutex_unlock(&dc->lock);
        seg_unref(dc, s);
        atomic_fetch_add(&dc->corrupt, 1);
        cm_log(CM_LOG_INFO, 0,
               "ecfs: cache_dir: dropping a bad block record (segment "
               "%08" PRIx32 ", offset %" PRIu64 ")",
               x.seg, (uint64_t)x.off4k * DC_ALIGN);
        goto out_miss;
    }
    atomic_store(&s->used_ns, real_ns()); /* the LRU clock */
    seg_unref(dc, s);
    free(id);
    if (x.datalen == 0) {
        fc_cache_buf_free(b);
        b = NULL;
    } else if (a != b) {
        memmove(b, a, x.datalen);
    }
    *data = b;
    *len = x.datalen;
    atomic_fetch_add(&dc->hits, 1);
    return 0;

out_miss:
    fc_cache_buf_free(b);
    free(id);
    atomic_fetch_add(&dc->misses, 1);
    return -ENOENT;
}

/* Removes an object's blocks (see header): from the table, and by a drop
 * entry in the active segment's index, so the next mount forgets them. */
void fc_dcache_drop(struct fc_dcache *dc, const char *key, const char *etag,
                    size_t bs, uint64_t nblocks)
{
    struct dc_ient *e = NULL;
    size_t n = 0, cap = 0;

    if (etag[0] == '\0')
        return;
    pthread_mutex_lock(&dc->wlock);
    for (uint64_t i = 0; i < nblocks; i++) {
        char *id = block_id(dc, key, etag, i, bs);
        uint8_t h[16];
        size_t slot;
        if (id == NULL)
            break;
        block_hash(id, strlen(id), h);
        free(id);
        pthread_mutex_lock(&dc->lock);
        slot = tab_find(dc, h);
        if (slot != SIZE_MAX)
            tab_del(dc, slot);
        pthread_mutex_unlock(&dc->lock);
        if (slot == SIZE_MAX)
            continue;
        if (n == cap) {
            struct dc_ient *m =
                realloc(e, (cap = cap ? 2 * cap : 16) * sizeof(*e));
            if (m == NULL)
                break;
            e = m;
        }
        memset(&e[n], 0, sizeof(e[n]));
        memcpy(e[n].h, h, 16);
        e[n].flags = DC_F_DROP;
        e[n].crc = ient_crc(&e[n]);
        n++;
    }
    if (n > 0 && (dc->active != NULL || seg_new(dc) == 0) &&
        pwrite_all(dc->active->ifd, (const char *)e, n * DC_IENT,
                   dc->active->isize) == 0) {
        pthread_mutex_lock(&dc->lock);
        dc->active->isize += n * DC_IENT;
        pthread_mutex_unlock(&dc->lock);
        atomic_fetch_add(&dc->bytes, n * DC_IENT);
    }
    pthread_mutex_unlock(&dc->wlock);
    free(e);
}

/* Formats the counters (see header). */
int fc_dcache_stats_format(struct fc_dcache *dc, char *out, size_t cap)
{
    uint64_t files;

    pthread_mutex_lock(&dc->lock);
    files = dc->tlive;
    pthread_mutex_unlock(&dc->lock);
    return snprintf(
        out, cap,
        " dcache_hits=%lu dcache_misses=%lu dcache_stores=%lu "
        "dcache_store_errors=%lu dcache_store_dropped=%lu dcache_corrupt=%lu "
        "dcache_evicted=%lu dcache_bytes=%" PRIu64 " dcache_files=%" PRIu64,
        atomic_load(&dc->hits), atomic_load(&dc->misses),
        atomic_load(&dc->stores), atomic_load(&dc->store_err),
        atomic_load(&dc->dropped), atomic_load(&dc->corrupt),
        atomic_load(&dc->evicted), (uint64_t)atomic_load(&dc->bytes), files);
}
