/* storaged/store/obj_ext.c - per-drive extent files (obj_ext.h;
 * FORMAT.md "Extent files").
 *
 * DESIGN: append-only files whose fds stay open, one being written per
 * drive. A record's place is reserved under a per-drive mutex (a counter
 * bump: PUTs never wait on each other's I/O), written with pwrite, and
 * made durable by the commit's barrier 1 together with the temp metas. The
 * end of the file after a restart is its size rounded up to 4 KiB, so a
 * committed record (whose meta was written after its bytes were durable)
 * is never overwritten, and a record torn by a crash lies past every
 * committed one. Offsets are never reused: a read that races a delete
 * finds zeros (a punched hole) or the old record, and the header check
 * turns both into a lost shard.
 *
 * Freed records are not punched by the commit that frees them: each
 * fallocate(PUNCH_HOLE) takes the file's inode lock (stalling every PUT
 * appending to it) and may wait for a discard, which halved PUT rates.
 * They go to a per-drive queue that a reclaim thread drains every
 * EXT_RECLAIM_MS: sorted, adjacent records merged (an overwrite frees the
 * records an earlier round of PUTs appended side by side), one punch per
 * run. Delaying a punch is safe because offsets are never reused: until
 * then the bytes are a record no committed meta names. A crash before it
 * leaves them as unused space (as a crash mid-commit does). */
#include "storaged/store/obj_ext.h"

#include "storaged/store/gsync.h"
#include "storaged/store/meta.h"
#include "storaged/store/obj_i.h"

#include "common/log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXT_PIN_SLOTS 1024u
/* DESIGN: a punch zeroes in place the part of a page-cache folio it
 * covers when the folio is larger than the punch (ext4's large folios), and
 * the socket of a zero-copy GET may still reference those pages after the
 * last byte was handed over (TCP keeps them until ACKed; on loopback the
 * client's receive queue holds them until it reads). So a record stays
 * pinned this long after its GET finished (FORMAT.md "Zero-copy GETs"). */
#define EXT_PIN_GRACE_NS (5LL * 1000000000LL)

struct obj_ext_drive {
    pthread_mutex_t lock;  /* cur, tail, reopening */
    int fd[OBJ_EXT_FILES]; /* atomic reads; -1 when not open */
    uint32_t cur;          /* the file being appended to; 0: none */
    uint64_t tail;         /* next record's offset in cur */
    dev_t dev;             /* identity of cur when opened */
    ino_t ino;
    /* the fsyncs of file f shared by concurrent commits (gsync.h), made
     * when f is first written; kept for the life of the store */
    struct stor_gsync_file *sync[OBJ_EXT_FILES];
    struct ext_free *freeq; /* records to punch; protected by lock */
    size_t nfree, capfree;
    /* held for reading while punching by file number, for writing while
     * the fds are closed: a punch never hits a number reused meanwhile */
    pthread_rwlock_t fdlock;
    uint64_t gen; /* bumped when the fds close; written under both locks */
    /* read-only maps of the files (OBJ_EXT_FILE_MAX bytes each), made on
     * a zero-copy GET's first check of a file (obj_ext_check_mapped) and
     * unmapped with the fds, under fdlock for writing */
    const uint8_t *map[OBJ_EXT_FILES];
    /* records a zero-copy GET handed to a socket (obj_ext_pin): a punch
     * of one waits until it is unpinned and EXT_PIN_GRACE_NS passed, in
     * slots by a hash of (file, offset); a collision only delays a punch */
    uint32_t pin_cnt[EXT_PIN_SLOTS]; /* atomics */
    int64_t pin_rel[EXT_PIN_SLOTS];  /* atomics: last unpin, monotonic ns */
};

/* A freed record (or a merged run of them) waiting for its punch. */
struct ext_free {
    uint32_t file;
    uint64_t off, len;
};

#define EXT_RECLAIM_MS   200u   /* a freed record's punch waits this long */
#define EXT_RECLAIM_KICK 4096u  /* queued on one drive: punch now */
#define EXT_RECLAIM_MAX  65536u /* queued on one drive: punch inline */

struct obj_ext_reclaim {
    struct stor_store *s;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, kick;           /* protected by mu */
    uint64_t punches, records; /* atomics: fallocate calls, records freed */
};

static void ext_path(char *buf, size_t cap, const char *drive, uint32_t file)
{
    if (file)
        snprintf(buf, cap, "%s/" OBJ_EXT_DIR "/%08" PRIx32 ".x", drive, file);
    else
        snprintf(buf, cap, "%s/" OBJ_EXT_DIR, drive);
}

/* Closes every file of @x (caller holds x->lock or is alone). */
static void ext_drive_shut(struct obj_ext_drive *x)
{
    pthread_rwlock_wrlock(&x->fdlock);
    for (uint32_t f = 0; f < OBJ_EXT_FILES; f++) {
        int fd = __atomic_exchange_n(&x->fd[f], -1, __ATOMIC_ACQ_REL);

        if (fd >= 0)
            close(fd);
        if (x->map[f]) {
            munmap((void *)(uintptr_t)x->map[f], OBJ_EXT_FILE_MAX);
            x->map[f] = NULL;
        }
    }
    x->cur = 0;
    x->tail = 0;
    /* offsets in the files just closed: never punch them in what the path
     * names next (a replaced disk's files) */
    x->nfree = 0;
    x->gen++;
    pthread_rwlock_unlock(&x->fdlock);
}

/* Creates file @file of drive @drive and makes its name durable. */
static int ext_create(struct obj_ext_drive *x, const char *drive, uint32_t file)
{
    char path[PATH_MAX];
    struct stat st;
    int fd;

    ext_path(path, sizeof(path), drive, file);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ext_path(path, sizeof(path), drive, 0);
    if (stor_fsync_dir(path) < 0 || fstat(fd, &st) < 0) {
        int e = errno ? errno : EIO;

        close(fd);
        return -e;
    }
    __atomic_store_n(&x->fd[file], fd, __ATOMIC_RELEASE);
    x->cur = file;
    x->tail = 0;
    x->dev = st.st_dev;
    x->ino = st.st_ino;
    return 0;
}

/* (Re)opens the extent files of drive @drive into @x (caller holds the
 * lock, or is alone): every NNNNNNNN.x there, the highest is appended to.
 * Without @create (extents off: only read what an earlier run wrote) a
 * drive without any stays without. */
static int ext_drive_load(struct obj_ext_drive *x, const char *drive,
                          bool create)
{
    char path[PATH_MAX];
    DIR *dir;
    struct dirent *de;
    uint32_t top = 0;
    struct stat st;
    int ret;

    ext_drive_shut(x);
    ext_path(path, sizeof(path), drive, 0);
    if (create) {
        ret = stor_mkdirs(path);
        if (ret < 0)
            return ret;
    }
    dir = opendir(path);
    if (dir == NULL)
        return errno == ENOENT && !create ? 0 : -errno;
    while ((de = readdir(dir)) != NULL) {
        char *end = NULL;
        unsigned long n;
        char fp[PATH_MAX];
        int fd;

        if (strlen(de->d_name) != 10 || strcmp(de->d_name + 8, ".x") != 0)
            continue;
        n = strtoul(de->d_name, &end, 16);
        if (end != de->d_name + 8 || n == 0 || n >= OBJ_EXT_FILES)
            continue;
        ext_path(fp, sizeof(fp), drive, (uint32_t)n);
        fd = open(fp, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            cm_log(CM_LOG_WARN, errno, "extent file %s", fp);
            continue;
        }
        __atomic_store_n(&x->fd[n], fd, __ATOMIC_RELEASE);
        if (n > top)
            top = (uint32_t)n;
    }
    closedir(dir);
    if (top == 0)
        return create ? ext_create(x, drive, 1) : 0;
    if (fstat(x->fd[top], &st) < 0)
        return -errno;
    x->cur = top;
    x->tail = ((uint64_t)st.st_size + OBJ_EXT_ALIGN - 1) &
              ~(uint64_t)(OBJ_EXT_ALIGN - 1);
    x->dev = st.st_dev;
    x->ino = st.st_ino;
    return 0;
}

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static size_t pin_slot(uint32_t file, uint64_t off)
{
    uint64_t h = (off / OBJ_EXT_ALIGN) ^ ((uint64_t)file << 40);

    h *= 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 54) % EXT_PIN_SLOTS;
}

/* Queues @r on @x again (its punch waits for a pin); false without room. */
static bool ext_requeue(struct obj_ext_drive *x, const struct ext_free *r,
                        uint64_t gen)
{
    bool ok = false;

    pthread_mutex_lock(&x->lock);
    if (x->gen != gen) { /* the files closed: nothing to punch */
        pthread_mutex_unlock(&x->lock);
        return true;
    }
    if (x->nfree == x->capfree) {
        size_t cap = x->capfree ? 2 * x->capfree : 64;
        struct ext_free *q = realloc(x->freeq, cap * sizeof(*q));

        if (q) {
            x->freeq = q;
            x->capfree = cap;
        }
    }
    if (x->nfree < x->capfree) {
        x->freeq[x->nfree++] = *r;
        ok = true;
    }
    pthread_mutex_unlock(&x->lock);
    return ok;
}

#define PIN_PUNCHING 0x80000000u /* pin_cnt: a punch of the slot runs */

/* Marks for punching the records of @q (@n of drive @d) that no zero-copy
 * GET pins (nor unpinned within EXT_PIN_GRACE_NS), setting PIN_PUNCHING in
 * their slots (recorded in @mine) so that no GET pins them until the punch
 * is done; the others are queued again (or, with no room or no thread,
 * left as unused space). Returns how many stay in @q. */
static size_t ext_mark(struct stor_store *s, size_t d, struct ext_free *q,
                       size_t n, uint64_t gen, uint64_t *mine)
{
    struct obj_ext_drive *x = &s->ext[d];
    int64_t now = mono_ns();
    size_t w = 0;

    for (size_t i = 0; i < n; i++) {
        size_t h = pin_slot(q[i].file, q[i].off);
        uint32_t zero = 0;
        bool ok = (mine[h / 64] >> (h % 64)) & 1;

        if (!ok && __atomic_compare_exchange_n(
                       &x->pin_cnt[h], &zero, PIN_PUNCHING, false,
                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            if (now - __atomic_load_n(&x->pin_rel[h], __ATOMIC_ACQUIRE) <
                EXT_PIN_GRACE_NS) /* a GET finished with it just now */
                __atomic_store_n(&x->pin_cnt[h], 0, __ATOMIC_RELEASE);
            else
                ok = true;
            if (ok)
                mine[h / 64] |= 1ULL << (h % 64);
        }
        if (ok)
            q[w++] = q[i];
        else if (s->ext_rc == NULL || !ext_requeue(x, &q[i], gen))
            cm_log(CM_LOG_DEBUG, 0,
                   "drive %s: a pinned extent record is left unpunched",
                   s->drives[d].path);
    }
    return w;
}

/* Clears the PIN_PUNCHING marks of ext_mark(). */
static void ext_unmark(struct obj_ext_drive *x, const uint64_t *mine)
{
    for (size_t h = 0; h < EXT_PIN_SLOTS; h++)
        if ((mine[h / 64] >> (h % 64)) & 1)
            __atomic_store_n(&x->pin_cnt[h], 0, __ATOMIC_RELEASE);
}

static int free_cmp(const void *a, const void *b)
{
    const struct ext_free *x = a, *y = b;

    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Punches @n freed records of drive @d (sorted and merged here), freed
 * while its files were those of generation @gen: none if they have been
 * closed since (a reopened path may hold other files). */
static void ext_punch_runs(struct stor_store *s, size_t d, struct ext_free *q,
                           size_t n, uint64_t gen)
{
    size_t i = 0;

    uint64_t mine[EXT_PIN_SLOTS / 64] = {0};

    n = ext_mark(s, d, q, n, gen, mine);
    qsort(q, n, sizeof(*q), free_cmp);
    pthread_rwlock_rdlock(&s->ext[d].fdlock);
    if (s->ext[d].gen != gen)
        i = n;
    while (i < n) {
        struct ext_free r = q[i++];
        int fd;

        while (i < n && q[i].file == r.file && q[i].off <= r.off + r.len) {
            if (q[i].off + q[i].len > r.off + r.len)
                r.len = q[i].off + q[i].len - r.off;
            i++;
        }
        fd = obj_ext_fd(s, d, r.file);
        if (fd >= 0 && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                 (off_t)r.off, (off_t)r.len) < 0)
            cm_log(CM_LOG_DEBUG, errno, "drive %s: punching extents",
                   s->drives[d].path);
        if (s->ext_rc)
            __atomic_add_fetch(&s->ext_rc->punches, 1, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&s->ext[d].fdlock);
    ext_unmark(&s->ext[d], mine);
}

/* Takes every drive's queue and punches it. */
static void ext_reclaim_pass(struct stor_store *s)
{
    for (size_t d = 0; d < s->ndrives; d++) {
        struct obj_ext_drive *x = &s->ext[d];
        struct ext_free *q;
        size_t n;
        uint64_t gen;

        pthread_mutex_lock(&x->lock);
        gen = x->gen;
        q = x->freeq;
        n = x->nfree;
        x->freeq = NULL;
        x->nfree = x->capfree = 0;
        pthread_mutex_unlock(&x->lock);
        if (n)
            ext_punch_runs(s, d, q, n, gen);
        free(q);
    }
}

static void *ext_reclaim_main(void *arg)
{
    struct obj_ext_reclaim *rc = arg;

    pthread_mutex_lock(&rc->mu);
    while (!rc->stop) {
        struct timespec ts;

        if (!rc->kick) {
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += (long)EXT_RECLAIM_MS * 1000000L;
            ts.tv_sec += ts.tv_nsec / 1000000000L;
            ts.tv_nsec %= 1000000000L;
            (void)pthread_cond_timedwait(&rc->cv, &rc->mu, &ts);
        }
        rc->kick = false;
        pthread_mutex_unlock(&rc->mu);
        ext_reclaim_pass(rc->s);
        pthread_mutex_lock(&rc->mu);
    }
    pthread_mutex_unlock(&rc->mu);
    return NULL;
}

/* Starts the reclaim thread. 0 or -errno (then frees punch inline). */
static int ext_reclaim_start(struct stor_store *s)
{
    struct obj_ext_reclaim *rc = calloc(1, sizeof(*rc));

    if (rc == NULL)
        return -ENOMEM;
    rc->s = s;
    pthread_mutex_init(&rc->mu, NULL);
    pthread_cond_init(&rc->cv, NULL);
    if (pthread_create(&rc->thr, NULL, ext_reclaim_main, rc) != 0) {
        pthread_cond_destroy(&rc->cv);
        pthread_mutex_destroy(&rc->mu);
        free(rc);
        return -EAGAIN;
    }
    s->ext_rc = rc;
    return 0;
}

/* Whether any drive has records waiting for their punch. */
static bool ext_queued(struct stor_store *s)
{
    bool any = false;

    for (size_t d = 0; d < s->ndrives && !any; d++) {
        pthread_mutex_lock(&s->ext[d].lock);
        any = s->ext[d].nfree > 0;
        pthread_mutex_unlock(&s->ext[d].lock);
    }
    return any;
}

/* Stops the thread; what is still queued is punched before, the records
 * a pin's grace holds back included: every request has ended by now, so
 * the last grace ends within EXT_PIN_GRACE_NS, and a clean stop waits for
 * it rather than leave a deleted object's bytes on the drives (FORMAT.md
 * "Pins: why a punch waits"). */
static void ext_reclaim_stop(struct stor_store *s)
{
    struct obj_ext_reclaim *rc = s->ext_rc;
    int64_t end = mono_ns() + EXT_PIN_GRACE_NS + 1000000000LL;

    if (rc == NULL)
        return;
    pthread_mutex_lock(&rc->mu);
    rc->stop = true;
    pthread_cond_signal(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
    pthread_join(rc->thr, NULL);
    for (;;) {
        struct timespec ts = {0, 50 * 1000000L};

        ext_reclaim_pass(s);
        if (!ext_queued(s) || mono_ns() > end)
            break;
        nanosleep(&ts, NULL);
    }
    s->ext_rc = NULL;
    pthread_cond_destroy(&rc->cv);
    pthread_mutex_destroy(&rc->mu);
    free(rc);
}

/* Contract in obj_ext.h. */
void obj_ext_reclaim_flush(struct stor_store *s)
{
    if (s->ext)
        ext_reclaim_pass(s);
}

/* Contract in obj_ext.h. */
void obj_ext_reclaim_stats(struct stor_store *s, uint64_t *records,
                           uint64_t *punches)
{
    *records =
        s->ext_rc ? __atomic_load_n(&s->ext_rc->records, __ATOMIC_RELAXED) : 0;
    *punches =
        s->ext_rc ? __atomic_load_n(&s->ext_rc->punches, __ATOMIC_RELAXED) : 0;
}

/* Contract in obj_ext.h. */
int obj_ext_open(struct stor_store *s)
{
    s->ext = calloc(s->ndrives ? s->ndrives : 1, sizeof(*s->ext));
    if (s->ext == NULL)
        return -ENOMEM;
    for (size_t d = 0; d < s->ndrives; d++) {
        struct obj_ext_drive *x = &s->ext[d];
        int ret;

        pthread_mutex_init(&x->lock, NULL);
        pthread_rwlock_init(&x->fdlock, NULL);
        for (uint32_t f = 0; f < OBJ_EXT_FILES; f++)
            x->fd[f] = -1;
        if (!obj_drive_online(s, d))
            continue;
        ret = ext_drive_load(x, s->drives[d].path, s->extents);
        if (ret < 0)
            cm_log(CM_LOG_WARN, -ret, "drive %s: no extent files",
                   s->drives[d].path);
    }
    if (ext_reclaim_start(s) < 0)
        cm_log(CM_LOG_WARN, 0,
               "extent files: no reclaim thread; freed "
               "records are punched at once");
    return 0;
}

/* Contract in obj_ext.h. */
void obj_ext_close(struct stor_store *s)
{
    if (s->ext == NULL)
        return;
    ext_reclaim_stop(s);
    for (size_t d = 0; d < s->ndrives; d++) {
        free(s->ext[d].freeq);
        ext_drive_shut(&s->ext[d]);
        for (uint32_t f = 0; f < OBJ_EXT_FILES; f++)
            stor_gsync_file_destroy(s->ext[d].sync[f]);
        pthread_mutex_destroy(&s->ext[d].lock);
        pthread_rwlock_destroy(&s->ext[d].fdlock);
    }
    free(s->ext);
    s->ext = NULL;
}

/* Contract in obj_ext.h. */
void obj_ext_check(struct stor_store *s, size_t d)
{
    struct obj_ext_drive *x;
    char path[PATH_MAX];
    struct stat st;

    if (s->ext == NULL || d >= s->ndrives)
        return;
    x = &s->ext[d];
    pthread_mutex_lock(&x->lock);
    if (x->cur == 0 && !s->extents) { /* nothing to follow */
        pthread_mutex_unlock(&x->lock);
        return;
    }
    ext_path(path, sizeof(path), s->drives[d].path, x->cur);
    if (x->cur == 0 || stat(path, &st) < 0 || st.st_dev != x->dev ||
        st.st_ino != x->ino) {
        int ret;

        if (access(s->drives[d].path, F_OK) == 0 &&
            (ret = ext_drive_load(x, s->drives[d].path, s->extents)) < 0)
            cm_log(CM_LOG_WARN, -ret, "drive %s: no extent files",
                   s->drives[d].path);
        else if (x->cur)
            cm_log(CM_LOG_INFO, 0, "drive %s: extent files reopened",
                   s->drives[d].path);
    }
    pthread_mutex_unlock(&x->lock);
}

/* Contract in obj_ext.h. */
void obj_ext_reopen(struct stor_store *s, size_t d)
{
    struct obj_ext_drive *x;
    int ret;

    if (s->ext == NULL || d >= s->ndrives)
        return;
    x = &s->ext[d];
    pthread_mutex_lock(&x->lock);
    ret = ext_drive_load(x, s->drives[d].path, s->extents);
    if (ret < 0)
        cm_log(CM_LOG_WARN, -ret, "drive %s: no extent files",
               s->drives[d].path);
    pthread_mutex_unlock(&x->lock);
}

/* Contract in obj_ext.h. */
int obj_ext_alloc(struct stor_store *s, size_t d, size_t len,
                  struct obj_xref *x, int *fd, struct stor_gsync_file **sync)
{
    struct obj_ext_drive *e;
    uint64_t rec = obj_ext_rec_size(len);
    int ret = 0;

    if (s->ext == NULL || d >= s->ndrives)
        return -ENODEV;
    e = &s->ext[d];
    pthread_mutex_lock(&e->lock);
    if (e->cur == 0) {
        ret = -ENODEV;
    } else if (e->tail + rec > OBJ_EXT_FILE_MAX) {
        if (e->cur + 1 >= OBJ_EXT_FILES)
            ret = -ENOSPC;
        else
            ret = ext_create(e, s->drives[d].path, e->cur + 1);
    }
    if (ret == 0 && e->sync[e->cur] == NULL) {
        e->sync[e->cur] = stor_gsync_file_create();
        if (e->sync[e->cur] == NULL)
            ret = -ENOMEM;
    }
    if (ret == 0) {
        *sync = e->sync[e->cur];
        x->file = e->cur;
        x->off = e->tail;
        *fd = e->fd[e->cur];
        e->tail += rec;
    }
    pthread_mutex_unlock(&e->lock);
    return ret;
}

static void le_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le_get(const uint8_t *p, int n)
{
    uint64_t v = 0;

    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t data_seed(uint64_t version, int shard)
{
    return version ^ ((uint64_t)shard << 56);
}

/* Contract in obj_ext.h. */
void obj_ext_hdr(uint8_t hdr[OBJ_EXT_HDR], const uint8_t id[16],
                 uint64_t version, int shard, int k, int m, const void *data,
                 size_t len)
{
    memset(hdr, 0, OBJ_EXT_HDR);
    memcpy(hdr, OBJ_EXT_MAGIC, 8);
    memcpy(hdr + 8, id, 16);
    le_put(hdr + 24, version, 8);
    hdr[32] = (uint8_t)shard;
    hdr[33] = (uint8_t)k;
    hdr[34] = (uint8_t)m;
    le_put(hdr + 36, len, 4);
    le_put(hdr + 40, stor_crc64(data_seed(version, shard), data, len), 8);
    le_put(hdr + 48, stor_crc64(0, hdr, 48), 8);
}

/* Contract in obj_ext.h. */
int obj_ext_verify(const uint8_t hdr[OBJ_EXT_HDR], const uint8_t id[16],
                   uint64_t version, int shard, size_t len, const void *data)
{
    if (memcmp(hdr, OBJ_EXT_MAGIC, 8) != 0 || memcmp(hdr + 8, id, 16) != 0 ||
        le_get(hdr + 24, 8) != version || hdr[32] != (uint8_t)shard ||
        le_get(hdr + 36, 4) != len ||
        le_get(hdr + 48, 8) != stor_crc64(0, hdr, 48) ||
        le_get(hdr + 40, 8) != stor_crc64(data_seed(version, shard), data, len))
        return -EBADMSG;
    return 0;
}

/* Contract in obj_ext.h. */
int obj_ext_fd(struct stor_store *s, size_t d, uint32_t file)
{
    if (s->ext == NULL || d >= s->ndrives || file == 0 || file >= OBJ_EXT_FILES)
        return -1;
    return __atomic_load_n(&s->ext[d].fd[file], __ATOMIC_ACQUIRE);
}

/* Contract in obj_ext.h. */
int obj_ext_read(struct stor_store *s, size_t d, const struct obj_xref *x,
                 const uint8_t id[16], uint64_t version, int shard, size_t len,
                 void *dst)
{
    uint8_t hdr[OBJ_EXT_HDR];
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {dst, len}};
    int fd = obj_ext_fd(s, d, x->file);
    ssize_t r;

    if (fd < 0)
        return -ENODEV;
    r = preadv(fd, iov, len ? 2 : 1, (off_t)x->off);
    if (r < 0)
        return -errno;
    obj_drive_count(s, d, false, (uint64_t)r);
    if ((size_t)r != OBJ_EXT_HDR + len)
        return -EBADMSG;
    return obj_ext_verify(hdr, id, version, shard, len, dst);
}

/* Contract in obj_ext.h. */
void obj_ext_punch(struct stor_store *s, size_t d, const struct obj_xref *x,
                   size_t len, bool now)
{
    struct ext_free r = {x->file, x->off, obj_ext_rec_size(len)};
    struct obj_ext_drive *e;
    struct obj_ext_reclaim *rc = s->ext_rc;
    bool queued = false, kick = false;
    uint64_t gen;

    if (s->ext == NULL || d >= s->ndrives || x->file == 0 ||
        x->file >= OBJ_EXT_FILES)
        return;
    e = &s->ext[d];
    pthread_mutex_lock(&e->lock);
    gen = e->gen;
    if (rc && !now && e->nfree < EXT_RECLAIM_MAX) {
        if (e->nfree == e->capfree) {
            size_t cap = e->capfree ? 2 * e->capfree : 64;
            struct ext_free *q = realloc(e->freeq, cap * sizeof(*q));

            if (q) {
                e->freeq = q;
                e->capfree = cap;
            }
        }
        if (e->nfree < e->capfree) {
            e->freeq[e->nfree++] = r;
            queued = true;
            kick = e->nfree == EXT_RECLAIM_KICK;
        }
    }
    pthread_mutex_unlock(&e->lock);
    if (rc)
        __atomic_add_fetch(&rc->records, 1, __ATOMIC_RELAXED);
    if (!queued) { /* asked, no thread, no memory, or it is far behind */
        ext_punch_runs(s, d, &r, 1, gen);
        return;
    }
    if (kick) {
        pthread_mutex_lock(&rc->mu);
        rc->kick = true;
        pthread_cond_signal(&rc->cv);
        pthread_mutex_unlock(&rc->mu);
    }
}

/* Contract in obj_ext.h. */
uint64_t obj_ext_gen(struct stor_store *s, size_t d)
{
    return __atomic_load_n(&s->ext[d].gen, __ATOMIC_ACQUIRE);
}

/* Contract in obj_ext.h. */
bool obj_ext_pin(struct stor_store *s, size_t d, const struct obj_xref *x)
{
    uint32_t *c = &s->ext[d].pin_cnt[pin_slot(x->file, x->off)];

    if (__atomic_fetch_add(c, 1, __ATOMIC_ACQ_REL) & PIN_PUNCHING) {
        __atomic_fetch_sub(c, 1, __ATOMIC_RELEASE);
        return false;
    }
    return true;
}

/* Contract in obj_ext.h. */
void obj_ext_unpin(struct stor_store *s, size_t d, const struct obj_xref *x)
{
    size_t h = pin_slot(x->file, x->off);

    /* the time first: a punch that sees the count drop sees it too */
    __atomic_store_n(&s->ext[d].pin_rel[h], mono_ns(), __ATOMIC_RELEASE);
    __atomic_fetch_sub(&s->ext[d].pin_cnt[h], 1, __ATOMIC_RELEASE);
}

/* The map of file @file of @e, made on first use (NULL: none). The caller
 * holds e->fdlock for reading and checked that the file is open. */
static const uint8_t *ext_map(struct obj_ext_drive *e, uint32_t file)
{
    const uint8_t *map = __atomic_load_n(&e->map[file], __ATOMIC_ACQUIRE);
    const uint8_t *none = NULL;
    void *p;

    if (map)
        return map;
    p = mmap(NULL, OBJ_EXT_FILE_MAX, PROT_READ, MAP_SHARED, e->fd[file], 0);
    if (p == MAP_FAILED)
        return NULL;
    map = p;
    if (!__atomic_compare_exchange_n(&e->map[file], &none, map, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        munmap(p, OBJ_EXT_FILE_MAX); /* another loop mapped it first */
        map = none;
    }
    return map;
}

/* Takes @d's fdlock for reading (try) and checks @x against @gen: the
 * drive's state, or NULL (then nothing is held). */
static struct obj_ext_drive *ext_hold(struct stor_store *s, size_t d,
                                      const struct obj_xref *x, uint64_t gen,
                                      size_t len)
{
    struct obj_ext_drive *e;

    if (s->ext == NULL || d >= s->ndrives || x->file == 0 ||
        x->file >= OBJ_EXT_FILES ||
        x->off + OBJ_EXT_HDR + len > OBJ_EXT_FILE_MAX)
        return NULL;
    e = &s->ext[d];
    if (pthread_rwlock_tryrdlock(&e->fdlock) != 0)
        return NULL;
    if (e->gen != gen || e->fd[x->file] < 0) {
        pthread_rwlock_unlock(&e->fdlock);
        return NULL;
    }
    return e;
}

/* Contract in obj_ext.h. */
bool obj_ext_resident(struct stor_store *s, size_t d, const struct obj_xref *x,
                      uint64_t gen, size_t len)
{
    struct obj_ext_drive *e = ext_hold(s, d, x, gen, len);
    const uint8_t *map;
    unsigned char vec[OBJ_EXT_RESIDENT_PAGES];
    uint64_t a, b;
    bool ok = false;

    if (e == NULL)
        return false;
    map = ext_map(e, x->file);
    a = x->off & ~(uint64_t)4095;
    b = x->off + OBJ_EXT_HDR + len;
    if (map && (b - a + 4095) / 4096 <= sizeof(vec) &&
        mincore((void *)(uintptr_t)(map + a), (size_t)(b - a), vec) == 0) {
        ok = true;
        for (size_t i = 0; i < (b - a + 4095) / 4096; i++)
            ok = ok && (vec[i] & 1);
    }
    pthread_rwlock_unlock(&e->fdlock);
    return ok;
}

/* Contract in obj_ext.h. */
int obj_ext_check_mapped(struct stor_store *s, size_t d,
                         const struct obj_xref *x, uint64_t gen,
                         const uint8_t hdr[OBJ_EXT_HDR], const uint8_t id[16],
                         uint64_t version, int shard, size_t len)
{
    struct obj_ext_drive *e = ext_hold(s, d, x, gen, len);
    const uint8_t *map;
    int ret = -ESTALE;

    if (e == NULL)
        return ret;
    map = ext_map(e, x->file);
    /* no header read: it lies on the page the splice began in (records
     * start on 4 KiB), which the pipe holds like the others */
    if (map)
        ret = obj_ext_verify(hdr ? hdr : map + x->off, id, version, shard, len,
                             map + x->off + OBJ_EXT_HDR);
    pthread_rwlock_unlock(&e->fdlock);
    return ret;
}

/* Contract in obj_ext.h. */
int obj_ext_copy_mapped(struct stor_store *s, size_t d,
                        const struct obj_xref *x, uint64_t gen, size_t len,
                        void *dst)
{
    struct obj_ext_drive *e = ext_hold(s, d, x, gen, len);
    const uint8_t *map;
    int ret = -ESTALE;

    if (e == NULL)
        return ret;
    map = ext_map(e, x->file);
    if (map) {
        memcpy(dst, map + x->off + OBJ_EXT_HDR, len);
        ret = 0;
    }
    pthread_rwlock_unlock(&e->fdlock);
    return ret;
}
