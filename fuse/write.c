/* fuse/write.c - streamed and staged uploads of files written through the
 * mount.
 *
 * DESIGN: S3 has no partial writes, so a file is uploaded whole when it is
 * committed (close; fsync of a staged file). Two ways to get there:
 * - Streaming. A new (created or O_TRUNC) write-only file that is written
 *   front to back never touches local disk: bytes collect in a part buffer
 *   (starting at 64 KiB and doubling to the part size, so a small file
 *   costs little memory); when more bytes arrive for a full buffer, it
 *   becomes part N of a multipart upload, queued to the upload workers,
 *   which send parts in parallel while the writer fills the next one (at
 *   most max_conns/4 parts in flight per file). Buffers are reserved from
 *   the memory budget shared with readahead (fc_mem_reserve). A file that
 *   ends within its first part is one PUT at commit. Part sizes double
 *   every 1000 parts, so the 10,000 parts S3 allows cover > 1 TiB.
 *   A write past the end zero-fills the gap. Once parts go out, each is
 *   also copied to an unlinked file in stage_dir (the tee, up to
 *   stage_max; in the page cache, dropped at commit), so other opens read
 *   every byte written, and any other jump (backwards, into the middle)
 *   turns the file into a staged one built on that copy; without a copy
 *   (past stage_max, stage_dir full) such reads and writes get EIO
 *   (logged).
 * - Staging. Everything else (an existing file opened without O_TRUNC,
 *   O_RDWR, truncate, a seek back) works on an unlinked temp file in
 *   stage_dir, filled from the object by the first operation that needs
 *   its bytes, refused with EFBIG beyond stage_max, uploaded at commit
 *   (one PUT, or parallel parts read from the file with pread).
 * A failed commit returns its errno to close/fsync and aborts the
 * multipart upload, so neither a partial object nor an upload is left.
 * Two handles of one path upload independently: the last commit wins.
 * Locks: wf->wlock serialises a handle's operations (FUSE may run two of
 * them at once) and is held across its S3 requests; wf->lock protects what
 * upload workers touch (etags, inflight, err); g_up.lock the job queue and
 * every inode's writers list. Order: wlock, then lock or g_up.lock. */
#include "fuse/write.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "fuse/dcache.h"
#include "fuse/fs.h"
#include "fuse/inode.h"
#include "fuse/ops.h"
#include "fuse/read.h"
#include "fuse/s3.h"

#define W_BUF_MIN    (64u << 10)       /* first buffer of a stream */
#define W_PART_MAX   ((size_t)5 << 30) /* S3's part size limit */
#define W_GET_CHUNK  (8u << 20)        /* staging fill: one GET each */
#define W_ASYNC_MAX  (1u << 20)        /* largest async_close commit */
#define W_ASYNC_HOLD 0.05              /* s the newest one may wait */
#define W_STAGE_IO   (256u << 10)      /* largest pwrite to stage_dir */

struct fc_wfile {
    struct fc_fs *fs;
    struct fc_inode *in; /* borrowed: the kernel holds it while open */
    atomic_int refs;
    pthread_mutex_t wlock; /* serialises the handle's operations */
    pthread_mutex_t lock;  /* protects etags, inflight, err with workers */
    pthread_cond_t cond;   /* a part finished */
    char *key;             /* commit target; owned; read under wlock or
                            * g_up.lock, replaced holding both */
    bool dirty;            /* the object must be (re)written; wlock */
    bool changed;          /* a commit changed the object; wlock */
    bool created;          /* no object existed at open; wlock */
    bool unlinked;         /* the file was unlinked: upload nothing; wlock */
    bool released;         /* released with its async commit to come: the
                            * worker ends the handle (and holds a lookup on
                            * @in meanwhile); wlock */
    bool staged;           /* works on the staging file; wlock */
    bool stage_later;      /* a new (or O_TRUNC) file opened O_RDWR: kept
                            * in memory while it fits one part, staged
                            * when it outgrows it, at fsync, or at any
                            * other pattern (a stream's rules); wlock */
    bool filled;           /* staging file holds the object's bytes; wlock */
    bool efbig_logged;     /* wlock */
    int werr;              /* a write failed: the commit uploads nothing
                            * and returns this; wlock */
    int fd;                /* staging file or -1; wlock */
    int tee;               /* copy of the streamed parts or -1; wlock */
    bool tee_off;          /* no copy any more (stage_max, a failure) */
    uint64_t size;         /* current file size; wlock */
    char base_etag[FC_ETAG_MAX]; /* version a staging fill reads; wlock */
    uint64_t base_size;          /* its size; wlock */
    /* x-amz-meta-* the commit stores (an mtime only when set explicitly:
     * else Last-Modified, the commit's time, is the mtime); wlock */
    struct fc_s3_meta meta;
    struct fc_s3_meta meta_sent; /* what CreateMultipartUpload got; wlock */
    /* streaming (and staged commits), wlock unless noted */
    char *buf;         /* part being filled; owned */
    size_t blen, bcap; /* bytes in it, its capacity */
    size_t breserved;  /* budget reserved for it */
    uint64_t sent;     /* bytes handed to parts */
    char *upload_id;   /* multipart upload in progress; owned */
    char *upload_key;  /* the key it was created for; owned */
    unsigned nparts;   /* parts queued */
    char *etags;       /* FC_ETAG_MAX per part; lock */
    unsigned etags_cap;
    unsigned inflight; /* parts queued or sending; lock */
    int err;           /* first failure of a part; lock */
    /* -o async_close: close() queued the commit (a small new file, one
     * PUT) to the upload workers instead of waiting for it; wlock to set,
     * read without it by fc_write_settle */
    atomic_bool async;
    struct fc_wfile *next;          /* on in->writers; g_up.lock */
    struct fc_wfile *lnext, *lprev; /* on g_up.live; g_up.lock */
};

/* One part for an upload worker. */
struct up_job {
    struct up_job *next;
    struct fc_wfile *wf; /* one reference */
    unsigned partno;     /* 0: the commit of an async close */
    struct fc_s3_body body;
    char *buf;       /* owned (freed when sent); NULL for a file body */
    size_t reserved; /* budget to give back */
};

/* chmod/chown/utimens of a closed file, stored by a copy onto itself
 * about a second later unless a rename (which copies anyway), an unlink or
 * a commit of that key comes first: rsync sets its temp file's mtime and
 * mode after close, then renames it. */
struct up_meta {
    struct up_meta *next;
    struct up_meta *inext; /* on g_up.storing while being stored */
    char *key;             /* owned */
    struct fc_s3_meta meta;
    uint64_t size; /* the object's, 0 if not known (at most 5 GiB) */
    double due;    /* fc_now() */
};

/* An abort that failed (the server was away): retried by the janitor. */
struct up_abort {
    struct up_abort *next;
    char *key, *upload_id; /* owned */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;
    pthread_cond_t jwake;    /* the janitor's (never work: a signal for a
                              * job must wake a worker) */
    struct up_abort *aborts; /* retried every second; protected by lock */
    struct up_meta *metas;   /* stored when due; protected by lock */
    /* taken off metas and being stored (metas_apply_under): a rename
     * waits for those under its source (metas_wait_under); lock */
    struct up_meta *storing;
    pthread_cond_t stored; /* one of storing was stored */
    struct fc_wfile *live; /* every handle; protected by lock */
    pthread_t janitor;
    bool janitor_on;
    struct up_job *head, *tail; /* protected by lock */
    bool stop;                  /* protected by lock */
    unsigned async_queued;      /* async commits not done; protected by lock */
    /* the newest async commit, held back until the next one is queued or
     * W_ASYNC_HOLD passed (so rsync's chmod/utime and rename of its temp
     * file come first: the one PUT goes to the final name); lock */
    struct up_job *held;
    double held_due;           /* fc_now(); lock */
    pthread_cond_t async_done; /* async_queued went down */
    pthread_t *th;
    unsigned n;
    atomic_ulong writes, streamed, staged, commits, commit_errors, efbig;
} g_up = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .work = PTHREAD_COND_INITIALIZER,
          .async_done = PTHREAD_COND_INITIALIZER,
          .stored = PTHREAD_COND_INITIALIZER};

/* Part size for part @partno (see header). */
size_t fc_write_part_size(size_t base, unsigned partno)
{
    unsigned shift = partno > 0 ? (partno - 1) / 1000 : 0;

    if (shift >= 20 || base > (W_PART_MAX >> shift))
        return W_PART_MAX;
    return base << shift;
}

/* Per-file cap on parts in flight. */
static unsigned max_inflight(const struct fc_fs *fs)
{
    return CM_MAX(2u, fs->o.max_conns / 4);
}

static void wfile_free(struct fc_wfile *wf)
{
    pthread_mutex_lock(&g_up.lock);
    if (wf->lprev != NULL)
        wf->lprev->lnext = wf->lnext;
    else if (g_up.live == wf)
        g_up.live = wf->lnext;
    if (wf->lnext != NULL)
        wf->lnext->lprev = wf->lprev;
    pthread_mutex_unlock(&g_up.lock);
    if (wf->fd >= 0)
        close(wf->fd);
    if (wf->tee >= 0)
        close(wf->tee);
    free(wf->buf);
    fc_mem_release(wf->fs, wf->breserved);
    free(wf->key);
    free(wf->upload_id);
    free(wf->upload_key);
    free(wf->etags);
    pthread_mutex_destroy(&wf->wlock);
    pthread_mutex_destroy(&wf->lock);
    pthread_cond_destroy(&wf->cond);
    free(wf);
}

/* Makes @k (takes ownership) @wf's commit target. wlock held. */
static void wfile_set_key(struct fc_wfile *wf, char *k)
{
    char *old;

    pthread_mutex_lock(&g_up.lock);
    old = wf->key;
    wf->key = k;
    pthread_mutex_unlock(&g_up.lock);
    free(old);
}

void fc_wfile_unref(struct fc_wfile *wf)
{
    if (wf != NULL && atomic_fetch_sub(&wf->refs, 1) == 1)
        wfile_free(wf);
}

/* Sends one part; records its ETag or the error. */
static void job_run(struct fc_fs *fs, struct up_job *j)
{
    struct fc_wfile *wf = j->wf;
    char etag[FC_ETAG_MAX];
    int ret;

    ret = fc_s3_mpu_part(fs->s3, wf->upload_key, wf->upload_id, j->partno,
                         &j->body, etag);
    pthread_mutex_lock(&wf->lock);
    if (ret == 0)
        snprintf(wf->etags + (size_t)(j->partno - 1) * FC_ETAG_MAX, FC_ETAG_MAX,
                 "%s", etag);
    else if (wf->err == 0)
        wf->err = ret;
    wf->inflight--;
    pthread_cond_broadcast(&wf->cond);
    pthread_mutex_unlock(&wf->lock);
}

static int commit(struct fc_wfile *wf);
static int wait_parts(struct fc_wfile *wf, unsigned max);
static void abort_upload(struct fc_wfile *wf);
static void release_end(struct fc_wfile *wf);

/* Commits @wf for an async close, if still to do; a failure can only be
 * logged (commit() also counts it). wlock held. */
static void async_commit_locked(struct fc_wfile *wf)
{
    int ret = commit(wf);

    if (ret < 0)
        cm_log(CM_LOG_ERROR, -ret,
               "ecfs: %s: upload after close failed (async_close: close() "
               "returned 0)",
               wf->key);
}

/* The commit an async close queued: runs it unless a release or a settle
 * (fc_write_settle) did first. close() has returned already, so a failure
 * can only be logged (commit() logs it and counts commit_errors). */
static void async_commit_run(struct fc_wfile *wf)
{
    bool released;

    pthread_mutex_lock(&wf->wlock);
    async_commit_locked(wf);
    atomic_store(&wf->async, false);
    released = wf->released;
    if (released) {
        (void)wait_parts(wf, 0);
        abort_upload(wf);
    }
    pthread_mutex_unlock(&wf->wlock);
    if (released) {
        struct fc_inode *in = wf->in;
        fuse_ino_t ino = in->ino;
        release_end(wf); /* (the worker still holds a reference) */
        fc_inode_forget(wf->fs->itab, ino, 1);
    }
    pthread_mutex_lock(&g_up.lock);
    g_up.async_queued--;
    pthread_cond_broadcast(&g_up.async_done);
    pthread_mutex_unlock(&g_up.lock);
}

static void *up_worker(void *arg)
{
    struct fc_fs *fs = arg;

    pthread_mutex_lock(&g_up.lock);
    for (;;) {
        struct up_job *j;
        while (!g_up.stop && g_up.head == NULL)
            pthread_cond_wait(&g_up.work, &g_up.lock);
        if (g_up.head == NULL)
            break; /* stop, queue drained */
        j = g_up.head;
        g_up.head = j->next;
        if (g_up.head == NULL)
            g_up.tail = NULL;
        pthread_mutex_unlock(&g_up.lock);
        if (j->partno == 0)
            async_commit_run(j->wf);
        else
            job_run(fs, j);
        free(j->buf);
        fc_mem_release(fs, j->reserved);
        fc_wfile_unref(j->wf);
        free(j);
        pthread_mutex_lock(&g_up.lock);
    }
    pthread_mutex_unlock(&g_up.lock);
    return NULL;
}

/* Appends @j to the workers' queue and wakes one. g_up.lock held. */
static void job_push(struct up_job *j)
{
    j->next = NULL;
    if (g_up.tail)
        g_up.tail->next = j;
    else
        g_up.head = j;
    g_up.tail = j;
    pthread_cond_signal(&g_up.work);
}

/* Queues the held async commit (if any) for the workers. g_up.lock held. */
static void held_push(void)
{
    struct up_job *j = g_up.held;

    if (j == NULL)
        return;
    g_up.held = NULL;
    job_push(j);
}

/* Tries the failed aborts again once; keeps those that still fail. */
static void aborts_retry(struct fc_fs *fs)
{
    struct up_abort *list, *a, *keep = NULL;

    pthread_mutex_lock(&g_up.lock);
    list = g_up.aborts;
    g_up.aborts = NULL;
    pthread_mutex_unlock(&g_up.lock);
    while ((a = list) != NULL) {
        int ret = fc_s3_mpu_abort(fs->s3, a->key, a->upload_id);
        list = a->next;
        if (ret == 0 || ret == -ENOENT) {
            cm_log(CM_LOG_INFO, 0, "ecfs: %s: upload %s aborted", a->key,
                   a->upload_id);
            free(a->key);
            free(a->upload_id);
            free(a);
        } else {
            a->next = keep;
            keep = a;
        }
    }
    pthread_mutex_lock(&g_up.lock);
    while ((a = keep) != NULL) {
        keep = a->next;
        a->next = g_up.aborts;
        g_up.aborts = a;
    }
    pthread_mutex_unlock(&g_up.lock);
}

/* Removes the pending attributes of @key from the list; the entry, or
 * NULL. g_up.lock held. */
static struct up_meta *meta_unlink(const char *key)
{
    for (struct up_meta **pp = &g_up.metas; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0) {
            struct up_meta *u = *pp;
            *pp = u->next;
            return u;
        }
    }
    return NULL;
}

/* Whether this mount removed directory @key ("dir/") or one of the
 * directories above it after @taken: an rmdir, or a directory rename
 * (which notes only its top) that ran while these attributes were being
 * stored must not bring a marker back under the old name. */
static bool removed_since(struct fc_fs *fs, const char *key, double taken)
{
    size_t kl = strlen(key);
    char *dir = strdup(key);
    bool gone = false;

    if (dir == NULL)
        return false;
    for (size_t i = 0; i < kl && !gone; i++) {
        char c;
        if (key[i] != '/')
            continue;
        c = dir[i + 1];
        dir[i + 1] = '\0';
        /* not fc_itab_noted: with list_ttl=0 no note is fresh */
        gone = fc_itab_removed_since(fs, dir, taken);
        dir[i + 1] = c;
    }
    free(dir);
    return gone;
}

/* Stores attributes @m of @key (@size bytes, 0 if not known), taken off
 * the list at @taken: a copy onto itself (its content and other headers
 * stay as they are; a multipart copy above 5 GiB). A directory ("dir/")
 * that is only a prefix gets an empty marker carrying them, unless this
 * mount removed it or a directory above it since @taken (an rmdir or a
 * directory rename racing the store must not bring the marker back). A
 * failure is logged. */
static void meta_store(struct fc_fs *fs, const char *key,
                       const struct fc_s3_meta *m, uint64_t size, double taken)
{
    size_t kl = strlen(key);
    struct fc_s3_meta dm = *m;
    char etag[FC_ETAG_MAX];
    double when;
    int ret;

    /* a marker keeps saying that its entries store attributes, when this
     * mount made it say so after @m was taken (mark_parent, ops.c) */
    if (kl > 0 && key[kl - 1] == '/' &&
        fc_itab_dir_noted(fs, key, &when) == FC_DIRMARK_ATTRS) {
        dm.has |= FC_META_DIRATTRS;
        dm.dirattrs = 1;
    }
    m = &dm;
    if (kl > 0 && key[kl - 1] != '/') {
        /* a file: tied to the version this mount knows, so that its open
         * handles and cached blocks may take the copy's ETag (a
         * multipart-made object gets a new one) */
        struct fc_attr a;
        double t;
        if (!fc_itab_cached_attr(fs->itab, key, &a, &t) || a.is_dir)
            a.etag[0] = '\0';
        ret = fc_copy_self(fs, key, size, m, a.etag, etag);
    } else {
        ret = fc_s3_copy_sized(fs->s3, key, key, size, m, etag);
    }

    if (ret == -ENOENT && kl > 0 && key[kl - 1] == '/') {
        struct fc_s3_body b = {.data = "", .len = 0};
        if (removed_since(fs, key, taken))
            return;
        ret = fc_s3_put_meta(fs->s3, key, &b, m, etag);
    }
    if (ret < 0 && ret != -ENOENT)
        cm_log(CM_LOG_WARN, -ret,
               "ecfs: %s: chmod/chown/utimens could not be stored", key);
}

/* Stores the pending attributes due by @now (all with @now < 0) whose
 * key starts with @prefix (NULL: any). While each is stored it is on
 * g_up.storing (metas_wait_under). */
static void metas_apply_under(struct fc_fs *fs, double now, const char *prefix)
{
    struct up_meta *due = NULL, **pp, *u;
    size_t pl = prefix ? strlen(prefix) : 0;
    double taken;

    pthread_mutex_lock(&g_up.lock);
    for (pp = &g_up.metas; (u = *pp) != NULL;) {
        if ((now < 0 || u->due <= now) &&
            (prefix == NULL || strncmp(u->key, prefix, pl) == 0)) {
            *pp = u->next;
            u->next = due;
            due = u;
            u->inext = g_up.storing;
            g_up.storing = u;
        } else {
            pp = &u->next;
        }
    }
    taken = fc_now();
    pthread_mutex_unlock(&g_up.lock);
    while ((u = due) != NULL) {
        due = u->next;
        meta_store(fs, u->key, &u->meta, u->size, taken);
        pthread_mutex_lock(&g_up.lock);
        for (pp = &g_up.storing; *pp != u; pp = &(*pp)->inext)
            ;
        *pp = u->inext;
        pthread_cond_broadcast(&g_up.stored);
        pthread_mutex_unlock(&g_up.lock);
        free(u->key);
        free(u);
    }
}

/* Waits until no attributes of a key starting with @prefix are being
 * stored (metas_apply_under: by the janitor, a flush, the unmount). The
 * stores wait for nothing a rename holds (S3 requests, the inode table's
 * and the handles' short locks), so a rename may wait here. */
static void metas_wait_under(const char *prefix)
{
    size_t pl = strlen(prefix);
    bool busy;

    pthread_mutex_lock(&g_up.lock);
    do {
        busy = false;
        for (struct up_meta *u = g_up.storing; u != NULL && !busy; u = u->inext)
            busy = strncmp(u->key, prefix, pl) == 0;
        if (busy)
            pthread_cond_wait(&g_up.stored, &g_up.lock);
    } while (busy);
    pthread_mutex_unlock(&g_up.lock);
}

static void metas_apply(struct fc_fs *fs, double now)
{
    metas_apply_under(fs, now, NULL);
}

/* Stores pending attributes under a prefix now (see header). */
void fc_write_meta_flush(struct fc_fs *fs, const char *prefix)
{
    metas_apply_under(fs, -1, prefix);
    /* and those the janitor took before: stored under the old names
     * after the rename's copies, they were lost (the copies went
     * without them, and the store met the deleted source) */
    metas_wait_under(prefix);
}

/* The attributes a file or directory stores (see header). */
void fc_meta_settle(const struct fc_fs *fs, struct fc_s3_meta *m, bool is_dir)
{
    uint32_t perm = (is_dir ? 0777u : 0666u) & ~fs->o.umask;
    uint32_t type = is_dir ? S_IFDIR : S_IFREG;

    if ((!(m->has & FC_META_MODE) || (m->mode & 07777) == perm) &&
        (!(m->has & FC_META_UID) || m->uid == fs->o.uid) &&
        (!(m->has & FC_META_GID) || m->gid == fs->o.gid) &&
        !(m->has & FC_META_MTIME)) {
        m->has &= ~FC_META_POSIX;
        return;
    }
    if (!(m->has & FC_META_MODE))
        m->mode = type | perm;
    if (!(m->has & FC_META_UID))
        m->uid = fs->o.uid;
    if (!(m->has & FC_META_GID))
        m->gid = fs->o.gid;
    m->has |= FC_META_MODE | FC_META_UID | FC_META_GID;
}

/* Whether settled attributes store any (see header). */
bool fc_meta_stores(const struct fc_s3_meta *m)
{
    return (m->has & FC_META_POSIX) != 0;
}

/* Pending attributes (see header). */
int fc_write_meta_later(struct fc_fs *fs, const char *key,
                        const struct fc_s3_meta *m, uint64_t size)
{
    struct up_meta *u;

    (void)fs;
    pthread_mutex_lock(&g_up.lock);
    u = meta_unlink(key);
    pthread_mutex_unlock(&g_up.lock);
    if (u == NULL && (u = calloc(1, sizeof(*u))) != NULL &&
        (u->key = strdup(key)) == NULL) {
        free(u);
        u = NULL;
    }
    if (u == NULL)
        return -ENOMEM;
    u->meta = *m;
    u->size = size;
    u->due = fc_now() + 1.0;
    pthread_mutex_lock(&g_up.lock);
    u->next = g_up.metas;
    g_up.metas = u;
    pthread_mutex_unlock(&g_up.lock);
    return 0;
}

/* Takes pending attributes (see header). */
bool fc_write_meta_take(struct fc_fs *fs, const char *key, struct fc_s3_meta *m)
{
    struct up_meta *u;

    (void)fs;
    pthread_mutex_lock(&g_up.lock);
    u = meta_unlink(key);
    pthread_mutex_unlock(&g_up.lock);
    if (u == NULL && m != NULL) {
        /* a rename: attributes the janitor is storing land on @key
         * first, so the copy carries them */
        metas_wait_under(key);
    }
    if (u == NULL)
        return false;
    if (m != NULL)
        *m = u->meta;
    free(u->key);
    free(u);
    return true;
}

/* Retries failed aborts and stores due attributes every second until we
 * stop. */
static void *janitor_run(void *arg)
{
    struct fc_fs *fs = arg;

    double last = fc_now();

    pthread_mutex_lock(&g_up.lock);
    while (!g_up.stop) {
        struct timespec dl;
        double wait = 1.0, now;
        if (g_up.held != NULL)
            wait = CM_MAX(0.0, CM_MIN(wait, g_up.held_due - fc_now()));
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += (long)(wait * 1e9);
        dl.tv_sec += dl.tv_nsec / 1000000000L;
        dl.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&g_up.jwake, &g_up.lock, &dl);
        if (g_up.stop)
            break;
        now = fc_now();
        if (g_up.held != NULL && now >= g_up.held_due)
            held_push();
        if (now < last + 1.0)
            continue; /* a held commit's timer: the rest once a second */
        last = now;
        if (g_up.aborts != NULL) {
            pthread_mutex_unlock(&g_up.lock);
            aborts_retry(fs);
            pthread_mutex_lock(&g_up.lock);
        }
        if (g_up.metas != NULL) {
            pthread_mutex_unlock(&g_up.lock);
            metas_apply(fs, fc_now());
            pthread_mutex_lock(&g_up.lock);
        }
    }
    pthread_mutex_unlock(&g_up.lock);
    return NULL;
}

/* Starts the workers (see header). */
int fc_upload_start(struct fc_fs *fs, unsigned nthreads)
{
    g_up.th = calloc(nthreads ? nthreads : 1, sizeof(pthread_t));
    if (g_up.th == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < nthreads; i++) {
        int e = pthread_create(&g_up.th[g_up.n], NULL, up_worker, fs);
        if (e != 0) {
            cm_log(CM_LOG_WARN, e, "ecfs: upload thread");
            break;
        }
        g_up.n++;
    }
    g_up.janitor_on = pthread_create(&g_up.janitor, NULL, janitor_run, fs) == 0;
    return g_up.n > 0 ? 0 : -EAGAIN;
}

static int wait_parts(struct fc_wfile *wf, unsigned max);
static void abort_upload(struct fc_wfile *wf);

/* Handles still open at unmount (the writer never closed them: ecfs got
 * SIGTERM, or the mount was cut): a file is complete only at close, so
 * nothing is committed over the object; their multipart uploads are
 * aborted (parts already sent are dropped by the server) and each is
 * logged. No FUSE request and no upload worker runs any more. */
static void unmount_drop_open(void)
{
    struct fc_wfile **v = NULL, *wf;
    size_t n = 0, i = 0;

    pthread_mutex_lock(&g_up.lock);
    for (wf = g_up.live; wf != NULL; wf = wf->lnext)
        n++;
    if (n > 0 && (v = calloc(n, sizeof(*v))) != NULL)
        for (wf = g_up.live; wf != NULL; wf = wf->lnext) {
            atomic_fetch_add(&wf->refs, 1);
            v[i++] = wf;
        }
    pthread_mutex_unlock(&g_up.lock);
    for (i = 0; v != NULL && i < n; i++) {
        wf = v[i];
        pthread_mutex_lock(&wf->wlock);
        if (wf->dirty)
            cm_log(CM_LOG_ERROR, 0,
                   "ecfs: %s: still open for writing at unmount: not "
                   "uploaded (the object is unchanged)%s",
                   wf->key, wf->upload_id ? "; its upload is aborted" : "");
        (void)wait_parts(wf, 0);
        abort_upload(wf);
        wf->dirty = false;
        pthread_mutex_unlock(&wf->wlock);
        fc_wfile_unref(wf);
    }
    free(v);
}

/* Stops the workers (see header). */
void fc_upload_stop(struct fc_fs *fs)
{
    pthread_mutex_lock(&g_up.lock);
    held_push(); /* the workers drain the queue before they stop */
    g_up.stop = true;
    pthread_cond_broadcast(&g_up.work);
    pthread_cond_broadcast(&g_up.jwake);
    pthread_mutex_unlock(&g_up.lock);
    for (unsigned i = 0; i < g_up.n; i++)
        pthread_join(g_up.th[i], NULL);
    g_up.n = 0;
    if (g_up.janitor_on)
        pthread_join(g_up.janitor, NULL);
    g_up.janitor_on = false;
    /* the session's end cut its requests short (fc_s3_abort); the last
     * ones below, when there are any, get one retry each, and the client
     * is cut again after them (prefetch workers may still run) */
    if (fs->s3 != NULL &&
        (g_up.metas != NULL || g_up.live != NULL || g_up.aborts != NULL)) {
        fc_s3_resume(fs->s3);
        metas_apply(fs, -1);
        unmount_drop_open();
        aborts_retry(fs);
        fc_s3_abort(fs->s3);
    }
    while (g_up.aborts != NULL) {
        struct up_abort *a = g_up.aborts;
        g_up.aborts = a->next;
        cm_log(CM_LOG_WARN, 0, "ecfs: %s: upload %s could not be aborted",
               a->key, a->upload_id);
        free(a->key);
        free(a->upload_id);
        free(a);
    }
    free(g_up.th);
    g_up.th = NULL;
}

/* Counters (see header). */
int fc_write_stats_format(struct fc_fs *fs, char *out, size_t cap)
{
    unsigned aq, ap = 0;

    (void)fs;
    pthread_mutex_lock(&g_up.lock);
    aq = g_up.async_queued;
    /* attributes not stored yet: due, or being stored (their copy's
     * answer not taken in yet); read rarely, so counted here */
    for (const struct up_meta *u = g_up.metas; u != NULL; u = u->next)
        ap++;
    for (const struct up_meta *u = g_up.storing; u != NULL; u = u->inext)
        ap++;
    pthread_mutex_unlock(&g_up.lock);
    return snprintf(out, cap,
                    " writes=%lu streamed=%lu staged=%lu commits=%lu "
                    "commit_errors=%lu efbig=%lu async_queued=%u "
                    "attrs_pending=%u",
                    atomic_load(&g_up.writes), atomic_load(&g_up.streamed),
                    atomic_load(&g_up.staged), atomic_load(&g_up.commits),
                    atomic_load(&g_up.commit_errors), atomic_load(&g_up.efbig),
                    aq, ap);
}

/* Waits until at most @max parts of @wf are in flight; returns the first
 * part error. */
static int wait_parts(struct fc_wfile *wf, unsigned max)
{
    int err;

    pthread_mutex_lock(&wf->lock);
    while (wf->inflight > max)
        pthread_cond_wait(&wf->cond, &wf->lock);
    err = wf->err;
    pthread_mutex_unlock(&wf->lock);
    return err;
}

/* Queues part wf->nparts+1 with @body (@buf owned by the job, @reserved
 * given back by it). Creates the upload first if needed. 0 or -errno (the
 * job's buffer is freed on failure). wlock held. */
static int queue_part(struct fc_wfile *wf, const struct fc_s3_body *body,
                      char *buf, size_t reserved)
{
    struct fc_fs *fs = wf->fs;
    struct up_job *j = NULL;
    int ret;

    if (wf->upload_id == NULL) {
        free(wf->upload_key);
        wf->upload_key = strdup(wf->key);
        if (wf->upload_key == NULL) {
            ret = -ENOMEM;
            goto out_free;
        }
        wf->meta_sent = wf->meta;
        ret = fc_s3_mpu_create_meta(fs->s3, wf->upload_key, &wf->meta,
                                    &wf->upload_id);
        if (ret < 0)
            goto out_free;
    }
    ret = wait_parts(wf, max_inflight(fs) - 1);
    if (ret < 0)
        goto out_free;
    if (wf->nparts >= 10000) {
        cm_log(CM_LOG_WARN, 0, "ecfs: %s: more than 10000 parts", wf->key);
        ret = -EFBIG;
        goto out_free;
    }
    pthread_mutex_lock(&wf->lock);
    if (wf->nparts == wf->etags_cap) {
        unsigned nc = wf->etags_cap ? 2 * wf->etags_cap : 16;
        char *ne = realloc(wf->etags, (size_t)nc * FC_ETAG_MAX);
        if (ne == NULL) {
            pthread_mutex_unlock(&wf->lock);
            ret = -ENOMEM;
            goto out_free;
        }
        wf->etags = ne;
        wf->etags_cap = nc;
    }
    pthread_mutex_unlock(&wf->lock);
    j = calloc(1, sizeof(*j));
    if (j == NULL) {
        ret = -ENOMEM;
        goto out_free;
    }
    j->partno = ++wf->nparts;
    j->body = *body;
    j->buf = buf;
    j->reserved = reserved;
    j->wf = wf;
    atomic_fetch_add(&wf->refs, 1);
    pthread_mutex_lock(&wf->lock);
    wf->inflight++;
    pthread_mutex_unlock(&wf->lock);
    pthread_mutex_lock(&g_up.lock);
    job_push(j);
    pthread_mutex_unlock(&g_up.lock);
    return 0;

out_free:
    free(buf);
    fc_mem_release(fs, reserved);
    return ret;
}

/* Aborts the multipart upload in progress, if any. wlock held, no part in
 * flight. */
static void abort_upload(struct fc_wfile *wf)
{
    int ret;

    if (wf->upload_id == NULL)
        return;
    ret = fc_s3_mpu_abort(wf->fs->s3, wf->upload_key, wf->upload_id);
    if (ret < 0 && ret != -ENOENT) {
        struct up_abort *a = calloc(1, sizeof(*a));
        cm_log(CM_LOG_WARN, -ret,
               "ecfs: %s: abort of upload %s failed; retrying every second",
               wf->upload_key, wf->upload_id);
        if (a != NULL && (a->key = strdup(wf->upload_key)) != NULL) {
            a->upload_id = wf->upload_id;
            wf->upload_id = NULL;
            pthread_mutex_lock(&g_up.lock);
            a->next = g_up.aborts;
            g_up.aborts = a;
            pthread_mutex_unlock(&g_up.lock);
        } else {
            free(a);
        }
    }
    free(wf->upload_id);
    wf->upload_id = NULL;
    wf->nparts = 0;
    wf->sent = 0;
    pthread_mutex_lock(&wf->lock);
    wf->err = 0;
    pthread_mutex_unlock(&wf->lock);
}

/* Completes the upload of wf->nparts parts into wf->key. 0 and @etag, or
 * -errno (the upload is aborted). wlock held. */
static int complete_upload(struct fc_wfile *wf, char *etag)
{
    struct fc_fs *fs = wf->fs;
    int ret = wait_parts(wf, 0);

    if (ret == 0 && strcmp(wf->upload_key, wf->key) != 0) {
        /* never: a rename moves the upload (restream) or fails the
         * handle. Completing it under the old name would overwrite what
         * was made there since (logrotate's new app.log). */
        cm_log(CM_LOG_ERROR, EIO, "ecfs: %s: upload still under %s: aborted",
               wf->key, wf->upload_key);
        ret = -EIO;
    }
    if (ret == 0)
        ret = fc_s3_mpu_complete(fs->s3, wf->upload_key, wf->upload_id,
                                 wf->etags, wf->nparts, etag);
    if (ret < 0) {
        abort_upload(wf);
        return ret;
    }
    free(wf->upload_id);
    wf->upload_id = NULL;
    wf->nparts = 0;
    wf->sent = 0;
    if (ret == 0 && memcmp(&wf->meta, &wf->meta_sent, sizeof(wf->meta)) != 0) {
        /* chmod/utimens while the upload ran (cp -a): one copy onto
         * itself (a multipart one above 5 GiB), tied to the version just
         * completed: another client's PUT in between must not become this
         * commit's version (its bytes under this file's size). The bytes
         * are committed whatever it answers: a failed copy (412 there)
         * leaves the attributes to the janitor's later store, as a chmod
         * after close (logged if that fails too), and @etag names the
         * completed object. */
        char cetag[FC_ETAG_MAX];
        if (fc_s3_copy_sized_if(fs->s3, wf->key, wf->key, wf->size, &wf->meta,
                                etag, NULL, cetag) == 0)
            snprintf(etag, FC_ETAG_MAX, "%s", cetag);
        else if (fc_write_meta_later(fs, wf->key, &wf->meta, wf->size) < 0)
            cm_log(CM_LOG_WARN, ENOMEM,
                   "ecfs: %s: chmod/chown/utimens could not be stored",
                   wf->key);
    }
    return ret;
}

/* Opens the staging file (unlinked at once: nothing is left behind).
 * 0 or -errno. */
static int tmp_open(struct fc_wfile *wf, int *out)
{
    const char *dir = wf->fs->o.stage_dir;
    char *path = NULL;
    int fd;

    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
        if (asprintf(&path, "%s/ecfs-stage.XXXXXX", dir) < 0)
            return -ENOMEM;
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0)
            unlink(path);
        free(path);
    }
    if (fd < 0) {
        int e = errno;
        cm_log(CM_LOG_WARN, e, "ecfs: cannot create a staging file in %s", dir);
        return -e;
    }
    *out = fd;
    return 0;
}

static int stage_create(struct fc_wfile *wf)
{
    int ret = tmp_open(wf, &wf->fd);

    if (ret == 0)
        atomic_fetch_add(&g_up.staged, 1);
    return ret;
}

/* Writes all of @buf at @off of the staging file. 0 or -errno. */
static int stage_pwrite(int fd, const char *buf, size_t len, uint64_t off)
{
    while (len > 0) {
        /* in pieces: the kernel sizes new page-cache folios by the write,
         * and a 2 MiB one (a whole 8 MiB part at once) comes from blocks
         * a VM's host may have taken back (free page reporting): the tee
         * of 1 GiB cost 2-3 s of CPU that way here, 0.3 s in 256 KiB */
        ssize_t n = pwrite(fd, buf, CM_MIN(len, W_STAGE_IO), (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

/* Refuses a size past stage_max (logged once per handle). */
static int stage_check_size(struct fc_wfile *wf, uint64_t size)
{
    if (size <= wf->fs->o.stage_max)
        return 0;
    if (!wf->efbig_logged) {
        cm_log(CM_LOG_WARN, EFBIG,
               "ecfs: %s: a staged file may not grow past stage_max=%" PRIu64
               " bytes (size %" PRIu64 "); nothing is uploaded",
               wf->key, (uint64_t)wf->fs->o.stage_max, size);
        wf->efbig_logged = true;
    }
    atomic_fetch_add(&g_up.efbig, 1);
    return -EFBIG;
}

/* Makes the staging file hold the object's bytes (the version seen at
 * open) when it does not yet. 0 or -errno. wlock held, staged. */
static int stage_fill(struct fc_wfile *wf)
{
    struct fc_fs *fs = wf->fs;
    char *chunk;
    int ret = 0;

    if (wf->fd < 0 && (ret = stage_create(wf)) < 0)
        return ret;
    if (wf->filled)
        return 0;
    if (wf->base_size > 0 && (ret = stage_check_size(wf, wf->base_size)) < 0)
        return ret;
    chunk = malloc(CM_MIN(W_GET_CHUNK, CM_MAX(wf->base_size, 1)));
    if (chunk == NULL)
        return -ENOMEM;
    for (uint64_t off = 0; off < wf->base_size && ret == 0;) {
        size_t n = (size_t)CM_MIN(W_GET_CHUNK, wf->base_size - off);
        ssize_t got =
            fc_s3_get(fs->s3, wf->key, off, n, n, wf->base_etag, chunk, NULL);
        if (got < 0) {
            ret = got == -ESTALE ? -EIO : (int)got;
            cm_log(CM_LOG_WARN, -ret, "ecfs: %s: reading it for staging",
                   wf->key);
        } else if ((size_t)got != n) {
            ret = -EIO; /* shorter than its size said: it changed */
        } else {
            ret = stage_pwrite(wf->fd, chunk, n, off);
            off += n;
        }
    }
    free(chunk);
    if (ret == 0 && ftruncate(wf->fd, (off_t)wf->size) < 0)
        ret = -errno;
    if (ret == 0)
        wf->filled = true;
    return ret;
}

/* The stream's buffer is gone (its bytes are in wf->fd): the handle works
 * staged from now on, on a file that holds everything. wlock held. */
static void stream_now_staged(struct fc_wfile *wf)
{
    free(wf->buf);
    wf->buf = NULL;
    wf->blen = wf->bcap = 0;
    fc_mem_release(wf->fs, wf->breserved);
    wf->breserved = 0;
    wf->staged = true;
    wf->filled = true;
}

/* Drops the tee: later reads of bytes sent, and writes behind them, get
 * EIO. wlock held. */
static void tee_stop(struct fc_wfile *wf, int err, const char *why)
{
    if (wf->tee >= 0)
        close(wf->tee);
    wf->tee = -1;
    if (!wf->tee_off && why != NULL)
        cm_log(CM_LOG_INFO, err,
               "ecfs: %s: no local copy of the bytes streamed up (%s): "
               "until close, other opens cannot read them",
               wf->key, why);
    wf->tee_off = true;
}

/* Copies part bytes [off, off+len) of a stream to the tee (see DESIGN).
 * A failure only stops the copy. wlock held. */
static void tee_add(struct fc_wfile *wf, const char *buf, size_t len,
                    uint64_t off)
{
    int ret;

    if (wf->tee_off)
        return;
    if (off + len > wf->fs->o.stage_max) {
        tee_stop(wf, EFBIG, "past stage_max");
        return;
    }
    if (wf->tee < 0 && tmp_open(wf, &wf->tee) < 0) {
        tee_stop(wf, 0, "no file in stage_dir");
        return;
    }
    if ((ret = stage_pwrite(wf->tee, buf, len, off)) < 0)
        tee_stop(wf, -ret, "writing stage_dir");
}

/* Turns a stream into a staged file: at once when no part was sent, else
 * by aborting the upload and staging the tee. 0 or -errno (-EIO when parts
 * were sent and there is no tee: logged). wlock held. */
static int stream_to_stage(struct fc_wfile *wf, const char *why)
{
    int ret;

    if (wf->staged)
        return 0;
    if ((wf->nparts > 0 || wf->upload_id != NULL) && wf->tee >= 0) {
        uint64_t sent = wf->sent;
        if ((ret = stage_check_size(wf, wf->size)) < 0)
            return ret;
        if (wf->blen > 0 &&
            (ret = stage_pwrite(wf->tee, wf->buf, wf->blen, sent)) < 0)
            return ret;
        (void)wait_parts(wf, 0);
        abort_upload(wf);
        cm_log(CM_LOG_INFO, 0,
               "ecfs: %s: %s after %" PRIu64 " bytes were streamed up: "
               "staged from the local copy, uploaded again at close",
               wf->key, why, sent);
        wf->fd = wf->tee;
        wf->tee = -1;
        atomic_fetch_add(&g_up.staged, 1);
        stream_now_staged(wf);
        return 0;
    }
    if (wf->nparts > 0 || wf->upload_id != NULL) {
        cm_log(CM_LOG_WARN, EIO,
               "ecfs: %s: %s after %" PRIu64 " bytes were streamed up: a "
               "file written front to back cannot change what was sent "
               "(open it O_RDWR to stage it instead)",
               wf->key, why, wf->sent);
        return -EIO;
    }
    if ((ret = stage_check_size(wf, wf->size)) < 0)
        return ret;
    if ((ret = stage_create(wf)) < 0)
        return ret;
    if (wf->blen > 0 && (ret = stage_pwrite(wf->fd, wf->buf, wf->blen, 0)) < 0)
        return ret;
    stream_now_staged(wf);
    return 0;
}

/* Opens a write handle (see header). */
int fc_write_open(struct fc_fs *fs, struct fc_inode *in, int flags,
                  bool created, struct fc_wfile **out)
{
    struct fc_wfile *wf = calloc(1, sizeof(*wf));
    struct fc_attr a;
    bool trunc = created || (flags & O_TRUNC);

    if (wf == NULL)
        return -ENOMEM;
    wf->fs = fs;
    wf->in = in;
    wf->fd = -1;
    wf->tee = -1;
    atomic_init(&wf->refs, 1);
    pthread_mutex_init(&wf->wlock, NULL);
    pthread_mutex_init(&wf->lock, NULL);
    pthread_cond_init(&wf->cond, NULL);
    wf->key = strdup(in->key);
    if (wf->key == NULL) {
        wfile_free(wf);
        return -ENOMEM;
    }
    /* an async close of this file lands first: the last close wins */
    fc_write_settle(fs, wf->key);
    fc_inode_get_attr(fs->itab, in, &a, NULL);
    wf->meta = a.meta;
    wf->meta.has &= ~FC_META_MTIME; /* a commit's mtime is its own */
    fc_meta_settle(fs, &wf->meta, false);
    wf->created = created;
    if (trunc) {
        wf->dirty = true; /* O_TRUNC empties it even if nothing is written */
        wf->filled = true;
        /* O_RDWR too starts as a stream (rsync's mkstemp: its temp file
         * then needs no staging file), but is staged before it would send
         * a part, so a large one is never streamed up */
        wf->staged = (flags & O_APPEND) != 0;
        wf->stage_later = !wf->staged && (flags & O_ACCMODE) != O_WRONLY;
    } else {
        wf->staged = true;
        wf->size = a.size;
        wf->base_size = a.size;
        snprintf(wf->base_etag, sizeof(wf->base_etag), "%s", a.etag);
    }
    if (!wf->staged)
        atomic_fetch_add(&g_up.streamed, 1); /* staged: at stage_create */
    pthread_mutex_lock(&g_up.lock);
    wf->next = in->writers;
    in->writers = wf;
    wf->lnext = g_up.live;
    if (g_up.live != NULL)
        g_up.live->lprev = wf;
    g_up.live = wf;
    pthread_mutex_unlock(&g_up.lock);
    fc_inode_write_note(fs->itab, in, 1, wf->size);
    *out = wf;
    return 0;
}

/* Appends @len bytes to the stream. wlock held, !staged, off == size. */
static int stream_append(struct fc_wfile *wf, const char *buf, size_t len)
{
    struct fc_fs *fs = wf->fs;
    size_t part = fc_write_part_size(fs->o.write_part_size, wf->nparts + 1);
    int ret;

    while (len > 0) {
        if (wf->buf != NULL && wf->blen == part) {
            /* full, and more is coming: it is a part */
            struct fc_s3_body b = {.data = wf->buf, .len = wf->blen};
            tee_add(wf, wf->buf, wf->blen, wf->sent);
            ret = queue_part(wf, &b, wf->buf, wf->breserved);
            wf->sent += wf->blen;
            wf->buf = NULL;
            wf->blen = wf->bcap = wf->breserved = 0;
            if (ret < 0)
                return ret;
            part = fc_write_part_size(fs->o.write_part_size, wf->nparts + 1);
        }
        if (wf->buf == NULL || wf->blen == wf->bcap) {
            /* the first part grows from W_BUF_MIN (small files stay
             * small), later ones are allocated whole */
            size_t ncap = part;
            char *nb;
            if (wf->nparts == 0)
                ncap = CM_MIN(part, CM_MAX(CM_MAX(W_BUF_MIN, 2 * wf->bcap),
                                           wf->blen + len));
            fc_mem_reserve(fs, ncap - wf->breserved);
            nb = realloc(wf->buf, ncap);
            if (nb == NULL) {
                fc_mem_release(fs, ncap - wf->breserved);
                return -ENOMEM;
            }
            wf->breserved = ncap;
            wf->buf = nb;
            wf->bcap = ncap;
        }
        size_t n = CM_MIN(len, wf->bcap - wf->blen);
        memcpy(wf->buf + wf->blen, buf, n);
        wf->blen += n;
        wf->size += n;
        buf += n;
        len -= n;
    }
    return 0;
}

/* Stages a stage_later handle that would grow to @end bytes, past its
 * first part. 0 or -errno. wlock held. */
static int stage_if_past_part(struct fc_wfile *wf, uint64_t end)
{
    if (!wf->stage_later || wf->staged ||
        end <= fc_write_part_size(wf->fs->o.write_part_size, 1))
        return 0;
    return stream_to_stage(wf, "growing past one part");
}

/* Writes (see header). */
ssize_t fc_write(struct fc_wfile *wf, const char *buf, size_t len, uint64_t off)
{
    static const char zeros[64 << 10];
    int ret = 0;

    atomic_fetch_add_explicit(&g_up.writes, 1, memory_order_relaxed);
    pthread_mutex_lock(&wf->wlock);
    pthread_mutex_lock(&wf->lock);
    ret = wf->err;
    pthread_mutex_unlock(&wf->lock);
    if (ret < 0)
        goto out; /* a part failed: tell the writer now, not only at close */
    if (!wf->staged && off < wf->size)
        ret = stream_to_stage(wf, "a write before the end");
    if (ret == 0)
        ret = stage_if_past_part(wf, off + len);
    /* a write past the end of a stream: the gap is zeros */
    while (ret == 0 && !wf->staged && off > wf->size)
        ret = stream_append(wf, zeros,
                            (size_t)CM_MIN(sizeof(zeros), off - wf->size));
    if (ret < 0)
        goto out;
    if (!wf->staged) {
        ret = stream_append(wf, buf, len);
    } else {
        uint64_t end = off + len;
        ret = stage_check_size(wf, CM_MAX(end, wf->size));
        if (ret == 0)
            ret = stage_fill(wf);
        if (ret == 0)
            ret = stage_pwrite(wf->fd, buf, len, off);
        if (ret == 0 && end > wf->size)
            wf->size = end;
    }
    if (ret == 0) {
        wf->dirty = true;
        fc_inode_write_note(wf->fs->itab, wf->in, 0, wf->size);
    } else if (wf->werr == 0) {
        /* the file now lacks bytes the writer meant to be there: keep
         * the object as it was rather than upload a hole; the commit
         * (close) reports it, also when no write had succeeded */
        wf->werr = ret;
        wf->dirty = true;
    }
out:
    pthread_mutex_unlock(&wf->wlock);
    return ret < 0 ? ret : (ssize_t)len;
}

/* Reads through the handle (see header). */
ssize_t fc_write_read(struct fc_wfile *wf, char *buf, size_t len, uint64_t off)
{
    ssize_t ret;

    pthread_mutex_lock(&wf->wlock);
    if (off >= wf->size) {
        ret = 0;
        goto out;
    }
    len = (size_t)CM_MIN(len, wf->size - off);
    if (!wf->staged && off >= wf->sent) {
        /* still in the part buffer */
        memcpy(buf, wf->buf + (off - wf->sent), len);
        ret = (ssize_t)len;
        goto out;
    }
    if (!wf->staged && wf->tee >= 0) {
        /* sent: from the tee, then what follows from the buffer */
        size_t n1 = (size_t)CM_MIN(len, wf->sent - off), got = 0;
        while (got < n1) {
            ssize_t n = pread(wf->tee, buf + got, n1 - got, (off_t)(off + got));
            if (n <= 0) {
                ret = n < 0 ? -errno : -EIO;
                goto out;
            }
            got += (size_t)n;
        }
        if (len > n1)
            memcpy(buf + n1, wf->buf, len - n1);
        ret = (ssize_t)len;
        goto out;
    }
    if (!wf->staged && (ret = stream_to_stage(wf, "a read")) < 0)
        goto out;
    ret = stage_fill(wf);
    if (ret == 0) {
        ret = pread(wf->fd, buf, len, (off_t)off);
        if (ret < 0)
            ret = -errno;
    }
out:
    pthread_mutex_unlock(&wf->wlock);
    return ret;
}

/* ftruncate (see header). */
int fc_write_truncate(struct fc_wfile *wf, uint64_t size)
{
    int ret = 0;

    pthread_mutex_lock(&wf->wlock);
    if ((ret = stage_if_past_part(wf, size)) < 0)
        goto out;
    if (!wf->staged && size == wf->size)
        goto out;
    if (!wf->staged && size > wf->size) {
        /* a stream extended (cp of a file ending in a hole): zeros */
        static const char zeros[64 << 10];
        while (ret == 0 && wf->size < size)
            ret = stream_append(wf, zeros,
                                (size_t)CM_MIN(sizeof(zeros), size - wf->size));
        if (ret == 0) {
            wf->dirty = true;
            fc_inode_write_note(wf->fs->itab, wf->in, 0, wf->size);
        }
        goto out;
    }
    if (!wf->staged && (ret = stream_to_stage(wf, "a truncate")) < 0)
        goto out;
    if (size == 0 && !wf->filled) {
        /* nothing of the object survives: no need to fetch it */
        if (wf->fd < 0 && (ret = stage_create(wf)) < 0)
            goto out;
        wf->filled = true;
    }
    ret = stage_check_size(wf, size);
    if (ret == 0)
        ret = stage_fill(wf);
    if (ret == 0 && ftruncate(wf->fd, (off_t)size) < 0)
        ret = -errno;
    if (ret == 0) {
        wf->size = size;
        wf->dirty = true;
        fc_inode_write_note(wf->fs->itab, wf->in, 0, wf->size);
    }
out:
    pthread_mutex_unlock(&wf->wlock);
    return ret;
}

/* Uploads the staging file: one PUT, or parts read from the file.
 * 0 and @etag or -errno. wlock held. */
static int stage_upload(struct fc_wfile *wf, char *etag)
{
    struct fc_fs *fs = wf->fs;
    size_t part = fc_write_part_size(fs->o.write_part_size, 1);
    uint64_t off = 0;
    int ret;

    if ((ret = stage_fill(wf)) < 0)
        return ret;
    if (wf->size <= part) {
        struct fc_s3_body b = {.fd = wf->fd, .len = (size_t)wf->size};
        return fc_s3_put_meta(fs->s3, wf->key, &b, &wf->meta, etag);
    }
    while (off < wf->size) {
        struct fc_s3_body b = {.fd = wf->fd, .off = off};
        part = fc_write_part_size(fs->o.write_part_size, wf->nparts + 1);
        b.len = (size_t)CM_MIN(part, wf->size - off);
        ret = queue_part(wf, &b, NULL, 0);
        if (ret < 0) {
            (void)wait_parts(wf, 0);
            abort_upload(wf);
            return ret;
        }
        off += b.len;
    }
    return complete_upload(wf, etag);
}

/* Uploads what the stream holds: the buffer as one PUT, or its last part
 * and the completion. 0 and @etag or -errno. wlock held. */
static int stream_upload(struct fc_wfile *wf, char *etag)
{
    struct fc_fs *fs = wf->fs;
    int ret;

    if (wf->upload_id == NULL) {
        struct fc_s3_body b = {.data = wf->buf ? wf->buf : "", .len = wf->blen};
        ret = fc_s3_put_meta(fs->s3, wf->key, &b, &wf->meta, etag);
    } else {
        ret = 0;
        if (wf->blen > 0) {
            struct fc_s3_body b = {.data = wf->buf, .len = wf->blen};
            ret = queue_part(wf, &b, wf->buf, wf->breserved);
            wf->sent += wf->blen;
            wf->buf = NULL;
            wf->breserved = 0;
        }
        if (ret < 0) {
            (void)wait_parts(wf, 0);
            abort_upload(wf);
        } else {
            ret = complete_upload(wf, etag);
        }
    }
    free(wf->buf);
    wf->buf = NULL;
    wf->blen = wf->bcap = 0;
    fc_mem_release(fs, wf->breserved);
    wf->breserved = 0;
    /* the stream is over either way: later writes stage the object */
    tee_stop(wf, 0, NULL);
    wf->tee_off = false;
    wf->staged = true;
    wf->filled = false;
    wf->base_size = ret == 0 ? wf->size : 0;
    snprintf(wf->base_etag, sizeof(wf->base_etag), "%s", ret == 0 ? etag : "");
    if (ret < 0)
        wf->size = 0;
    return ret;
}

/* With -o cache_dir: removes the disk-cache blocks of the version this
 * commit replaced (the inode's attributes still name it), so they take no
 * room until evicted; they could never be served (blocks are keyed by
 * ETag). */
static void drop_cached_version(struct fc_wfile *wf, const char *etag)
{
    struct fc_fs *fs = wf->fs;
    size_t bs = fs->o.block_size;
    struct fc_attr old;

    if (fs->dcache == NULL)
        return;
    fc_inode_get_attr(fs->itab, wf->in, &old, NULL);
    if (old.etag[0] != '\0' && strcmp(old.etag, etag) != 0)
        fc_dcache_drop(fs->dcache, wf->key, old.etag, bs,
                       (old.size + bs - 1) / bs);
}

/* Commits a dirty handle. wlock held. */
static int commit(struct fc_wfile *wf)
{
    struct fc_fs *fs = wf->fs;
    char etag[FC_ETAG_MAX] = "";
    struct fc_attr a;
    int ret;

    if (!wf->dirty)
        return 0;
    if (wf->werr < 0) {
        /* a write failed (ENOSPC, EFBIG, EIO): upload nothing */
        ret = wf->werr;
        (void)wait_parts(wf, 0);
        abort_upload(wf);
        wf->dirty = false;
        cm_log(CM_LOG_WARN, -ret,
               "ecfs: %s: a write failed; the object is "
               "left unchanged",
               wf->key);
        if (wf->created)
            fc_itab_note(fs, wf->key, false, NULL);
        atomic_fetch_add(&g_up.commit_errors, 1);
        return ret == -EFBIG || ret == -ENOSPC ? ret : -EIO;
    }
    if (wf->unlinked) {
        /* unlinked while open: nothing to keep */
        (void)wait_parts(wf, 0);
        abort_upload(wf);
        wf->dirty = false;
        return 0;
    }
    /* this upload stores the attributes: a pending copy would only
     * repeat them */
    (void)fc_write_meta_take(fs, wf->key, NULL);
    ret = wf->staged ? stage_upload(wf, etag) : stream_upload(wf, etag);
    atomic_fetch_add(&g_up.commits, 1);
    if (ret < 0) {
        atomic_fetch_add(&g_up.commit_errors, 1);
        cm_log(CM_LOG_WARN, -ret,
               "ecfs: %s: upload failed; the object is "
               "unchanged",
               wf->key);
        if (wf->created)
            fc_itab_note(fs, wf->key, false, NULL);
        wf->dirty = false;
        /* the server refused it (403: a read-only key): say so */
        return ret == -ENOMEM || ret == -EFBIG || ret == -ENOSPC ||
                       ret == -EACCES
                   ? ret
                   : -EIO;
    }
    wf->dirty = false;
    wf->created = false;
    wf->changed = true;
    memset(&a, 0, sizeof(a));
    a.size = wf->size;
    a.mtime = time(NULL);
    a.meta = wf->meta;
    snprintf(a.etag, sizeof(a.etag), "%s", etag);
    snprintf(wf->base_etag, sizeof(wf->base_etag), "%s", etag);
    wf->base_size = wf->size;
    drop_cached_version(wf, etag);
    /* a later open pins this version; an empty ETag (a server that sent
     * none) makes the next revalidation ask */
    fc_inode_set_attr(fs->itab, wf->in, &a, etag[0] ? fc_now() : 0);
    fc_itab_note(fs, wf->key, true, &a);
    return 0;
}

/* Whether the commit of @wf may be left to an upload worker: -o
 * async_close, a new file of at most W_ASYNC_MAX bytes (one PUT, from the
 * part buffer or the staging file: rsync's mkstemp opens O_RDWR), no
 * multipart upload begun, nothing failed. wlock held. */
static bool async_ok(const struct fc_wfile *wf)
{
    return wf->fs->o.async_close && wf->dirty && wf->created &&
           wf->upload_id == NULL && wf->werr == 0 && !wf->unlinked &&
           wf->size <= W_ASYNC_MAX && g_up.n > 0;
}

/* Queues the commit of @wf to the upload workers, waiting while
 * 2 x workers of them are queued already (so memory stays bounded and a
 * writer is held back by its uploads). 0, or -EAGAIN (stopping: the
 * caller commits itself) or -ENOMEM. wlock held. */
static int async_queue(struct fc_wfile *wf)
{
    struct up_job *j = calloc(1, sizeof(*j));

    if (j == NULL)
        return -ENOMEM;
    atomic_fetch_add(&wf->refs, 1);
    j->wf = wf;
    pthread_mutex_lock(&g_up.lock);
    while (!g_up.stop && g_up.async_queued >= 2 * g_up.n)
        pthread_cond_wait(&g_up.async_done, &g_up.lock);
    if (g_up.stop) {
        pthread_mutex_unlock(&g_up.lock);
        fc_wfile_unref(wf);
        free(j);
        return -EAGAIN;
    }
    g_up.async_queued++;
    atomic_store(&wf->async, true);
    held_push();
    g_up.held = j;
    g_up.held_due = fc_now() + W_ASYNC_HOLD;
    pthread_cond_signal(&g_up.jwake); /* its timer */
    pthread_mutex_unlock(&g_up.lock);
    return 0;
}

/* flush (see header). */
int fc_write_flush(struct fc_wfile *wf)
{
    int ret;

    pthread_mutex_lock(&wf->wlock);
    if (atomic_load(&wf->async) || (async_ok(wf) && async_queue(wf) == 0))
        ret = 0; /* an upload worker commits it */
    else
        ret = commit(wf);
    pthread_mutex_unlock(&wf->wlock);
    return ret;
}

/* Whether @wf (an async commit) is of @key, or under @key when it ends in
 * '/'. g_up.lock held (no wlock: that is held across a running PUT). */
static bool settle_match(const struct fc_wfile *wf, const char *key)
{
    size_t kl = strlen(key);

    if (!atomic_load(&wf->async))
        return false;
    return kl > 0 && key[kl - 1] == '/' ? strncmp(wf->key, key, kl) == 0
                                        : strcmp(wf->key, key) == 0;
}

/* New references to the handles whose async commit is of @key (see
 * settle_match) in *@v (malloc'd; NULL when none); *@n: how many there
 * are (more than returned only when the array could not be allocated).
 * Returns the count in *@v. */
static size_t async_matching(const char *key, struct fc_wfile ***v, size_t *n)
{
    struct fc_wfile *wf;
    size_t i = 0;

    *v = NULL;
    *n = 0;
    pthread_mutex_lock(&g_up.lock);
    for (wf = g_up.live; wf != NULL; wf = wf->lnext)
        *n += settle_match(wf, key);
    if (*n > 0 && (*v = calloc(*n, sizeof(**v))) != NULL)
        for (wf = g_up.live; wf != NULL && i < *n; wf = wf->lnext)
            if (settle_match(wf, key)) {
                atomic_fetch_add(&wf->refs, 1);
                (*v)[i++] = wf;
            }
    pthread_mutex_unlock(&g_up.lock);
    return i;
}

/* Commits now the async closes of @key (see header). */
void fc_write_settle(struct fc_fs *fs, const char *key)
{
    struct fc_wfile **v, *wf;
    size_t n, i;

    if (!fs->o.async_close)
        return;
    i = async_matching(key, &v, &n);
    for (size_t k = 0; k < i; k++) {
        wf = v[k];
        pthread_mutex_lock(&wf->wlock);
        async_commit_locked(wf); /* nothing when the worker did it */
        pthread_mutex_unlock(&wf->wlock);
        fc_wfile_unref(wf);
    }
    free(v);
}

/* Moves queued async commits of @src to @dst (see header). */
bool fc_write_async_rename(struct fc_fs *fs, const char *src, const char *dst)
{
    struct fc_wfile **v, *wf;
    size_t n, i;
    bool moved = false, left = false;

    if (!fs->o.async_close)
        return false;
    i = async_matching(src, &v, &n);
    left = n > i;
    for (size_t k = 0; k < i; k++) {
        char *d = strdup(dst);
        wf = v[k];
        pthread_mutex_lock(&wf->wlock);
        /* still to commit (a commit holds wlock until it is done and
         * clears dirty): its one PUT goes to the new name */
        if (d != NULL && wf->dirty && strcmp(wf->key, src) == 0) {
            wfile_set_key(wf, d);
            d = NULL;
            moved = true;
        } else {
            left = true;
        }
        pthread_mutex_unlock(&wf->wlock);
        free(d);
        fc_wfile_unref(wf);
    }
    free(v);
    return moved && !left;
}

/* Waits for every async commit (see header). */
void fc_write_async_drain(void)
{
    pthread_mutex_lock(&g_up.lock);
    held_push();
    while (g_up.async_queued > 0)
        pthread_cond_wait(&g_up.async_done, &g_up.lock);
    pthread_mutex_unlock(&g_up.lock);
}

/* fsync (see header). */
int fc_write_fsync(struct fc_wfile *wf)
{
    int ret;

    pthread_mutex_lock(&wf->wlock);
    /* a stage_later file is committed as the staged file it stands for
     * (and stays one, so later writes need no GET of what it uploaded) */
    if (wf->stage_later && !wf->staged &&
        (ret = stream_to_stage(wf, "an fsync")) < 0) {
        pthread_mutex_unlock(&wf->wlock);
        return ret;
    }
    if (wf->staged) {
        ret = commit(wf);
    } else {
        ret = wait_parts(wf, 0);
    }
    pthread_mutex_unlock(&wf->wlock);
    return ret;
}

bool fc_write_take_changed(struct fc_wfile *wf)
{
    bool c;

    pthread_mutex_lock(&wf->wlock);
    c = wf->changed;
    wf->changed = false;
    pthread_mutex_unlock(&wf->wlock);
    return c;
}

/* release (see header). */
void fc_write_release(struct fc_wfile *wf)
{
    struct fc_fs *fs = wf->fs;
    int ret;

    pthread_mutex_lock(&wf->wlock);
    if (atomic_load(&wf->async) && wf->dirty) {
        /* -o async_close: the queued commit stays queued (a rename may
         * still send it to another name); its worker ends the handle */
        wf->released = true;
        fc_inode_ref(fs->itab, wf->in);
        pthread_mutex_unlock(&wf->wlock);
        return;
    }
    ret = commit(wf);
    if (ret < 0)
        cm_log(CM_LOG_ERROR, -ret, "ecfs: %s: upload at release failed",
               wf->key);
    (void)wait_parts(wf, 0);
    abort_upload(wf);
    pthread_mutex_unlock(&wf->wlock);
    release_end(wf);
}

/* The end of a release: off the inode's writers, one writer less, the
 * handle's reference dropped. */
static void release_end(struct fc_wfile *wf)
{
    struct fc_fs *fs = wf->fs;
    struct fc_wfile **pp;

    pthread_mutex_lock(&g_up.lock);
    for (pp = &wf->in->writers; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == wf) {
            *pp = wf->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_up.lock);
    fc_inode_write_note(fs->itab, wf->in, -1, wf->size);
    fc_wfile_unref(wf);
}

/* Handle left at session end (see header). */
void fc_write_discard(struct fc_wfile *wf)
{
    if (wf->dirty)
        cm_log(CM_LOG_ERROR, 0,
               "ecfs: %s: still open for writing at unmount: not uploaded",
               wf->key);
    fc_mem_release(wf->fs, wf->breserved);
    wf->breserved = 0;
    wfile_free(wf); /* parts in flight hold no reference any more: the
                     * workers were stopped and drained before this */
}

/* Newest writer (see header). */
struct fc_wfile *fc_write_find(struct fc_fs *fs, struct fc_inode *in)
{
    struct fc_wfile *wf;

    (void)fs;
    pthread_mutex_lock(&g_up.lock);
    wf = in->writers;
    if (wf != NULL)
        atomic_fetch_add(&wf->refs, 1);
    pthread_mutex_unlock(&g_up.lock);
    return wf;
}

/* Collects new references to every writer of @in into *@v (malloc'd).
 * Returns the count. */
static size_t writers_of(struct fc_inode *in, struct fc_wfile ***v)
{
    struct fc_wfile *wf;
    size_t n = 0;

    *v = NULL;
    pthread_mutex_lock(&g_up.lock);
    for (wf = in->writers; wf != NULL; wf = wf->next)
        n++;
    if (n > 0 && (*v = calloc(n, sizeof(**v))) != NULL) {
        n = 0;
        for (wf = in->writers; wf != NULL; wf = wf->next) {
            atomic_fetch_add(&wf->refs, 1);
            (*v)[n++] = wf;
        }
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&g_up.lock);
    return n;
}

void fc_write_unlinked(struct fc_fs *fs, struct fc_inode *in)
{
    struct fc_wfile **v;
    size_t n = writers_of(in, &v);

    (void)fs;
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&v[i]->wlock);
        v[i]->unlinked = true;
        pthread_mutex_unlock(&v[i]->wlock);
        fc_wfile_unref(v[i]);
    }
    free(v);
}

/* Moves the multipart upload of @wf, just renamed to wf->key: an upload
 * cannot change keys, and completing it under the old name at close (then
 * copying it over and deleting the old name) overwrote and then deleted
 * whatever was made under the old name meanwhile (logrotate without
 * copytruncate: app.log renamed while the logger streams it, a new
 * app.log written and closed). So the upload is aborted now and the bytes
 * sent go up again to the new key from the tee (the same part sizes); the
 * stream goes on there. Nothing is ever written under the old name. When
 * there is no tee (it stopped after fc_write_rename_ok said yes) or the
 * new upload fails, the handle uploads nothing and close() fails with EIO
 * (logged). Waits for those parts (a later tee_stop closes the tee).
 * wlock held. */
static void restream(struct fc_wfile *wf)
{
    uint64_t sent = wf->sent, off = 0;
    int ret;

    if (wf->upload_id == NULL || wf->staged || wf->unlinked ||
        strcmp(wf->upload_key, wf->key) == 0)
        return;
    ret = wait_parts(wf, 0);
    abort_upload(wf); /* (the upload's key: the old name) */
    if (wf->werr < 0)
        return; /* close fails anyway and uploads nothing */
    if (ret == 0 && wf->tee < 0)
        ret = -EIO;
    while (ret == 0 && off < sent) {
        size_t part =
            fc_write_part_size(wf->fs->o.write_part_size, wf->nparts + 1);
        struct fc_s3_body b = {.fd = wf->tee, .off = off};
        b.len = (size_t)CM_MIN(part, sent - off);
        ret = queue_part(wf, &b, NULL, 0);
        off += b.len;
    }
    if (ret == 0)
        ret = wait_parts(wf, 0);
    if (ret == 0) {
        wf->sent = sent;
        cm_log(CM_LOG_INFO, 0,
               "ecfs: %s: renamed while streamed up: the %" PRIu64
               " bytes sent go up again under the new name",
               wf->key, sent);
        return;
    }
    (void)wait_parts(wf, 0);
    abort_upload(wf);
    wf->werr = -EIO;
    wf->dirty = true;
    cm_log(CM_LOG_WARN, -ret,
           "ecfs: %s: renamed while streamed up, and the bytes sent could "
           "not go up again under the new name%s: close() fails, nothing "
           "is uploaded",
           wf->key, wf->tee < 0 ? " (no local copy of them)" : "");
}

void fc_write_renamed(struct fc_fs *fs, struct fc_inode *in, const char *key)
{
    struct fc_wfile **v;
    size_t n = writers_of(in, &v);

    (void)fs;
    for (size_t i = 0; i < n; i++) {
        char *k = strdup(key);
        pthread_mutex_lock(&v[i]->wlock);
        if (k != NULL) {
            wfile_set_key(v[i], k);
            restream(v[i]);
        }
        pthread_mutex_unlock(&v[i]->wlock);
        fc_wfile_unref(v[i]);
    }
    free(v);
}

/* Whether @wf's upload could not follow a rename (see
 * fc_write_rename_ok); logs it, with @dir the directory renamed or NULL.
 * wlock held. */
static bool rename_blocked(struct fc_fs *fs, struct fc_wfile *wf,
                           const char *dir)
{
    if (wf->upload_id == NULL || wf->staged || wf->unlinked || wf->werr != 0 ||
        wf->tee >= 0)
        return false;
    cm_log(CM_LOG_WARN, EBUSY,
           "ecfs: %s: rename%s%s refused: open and streamed up past its "
           "local copy (stage_max=%" PRIu64 ", or stage_dir full); "
           "an upload cannot change names",
           wf->key, dir ? " of its directory " : "", dir ? dir : "",
           (uint64_t)fs->o.stage_max);
    return true;
}

/* -EBUSY when one of the @n handles in @v could not follow a rename (the
 * first is logged, @dir as for rename_blocked), else 0. Drops the
 * references and frees @v. */
static int renames_blocked(struct fc_fs *fs, struct fc_wfile **v, size_t n,
                           const char *dir)
{
    int ret = 0;

    for (size_t i = 0; i < n; i++) {
        struct fc_wfile *wf = v[i];
        pthread_mutex_lock(&wf->wlock);
        if (ret == 0 && rename_blocked(fs, wf, dir))
            ret = -EBUSY;
        pthread_mutex_unlock(&wf->wlock);
        fc_wfile_unref(wf);
    }
    free(v);
    return ret;
}

/* May the file of @in be renamed? (see header) */
int fc_write_rename_ok(struct fc_fs *fs, struct fc_inode *in)
{
    struct fc_wfile **v;
    size_t n = writers_of(in, &v);

    return renames_blocked(fs, v, n, NULL);
}

/* New references to every handle whose key is under @prefix (ends in
 * '/') in *@v (malloc'd). Returns the count. */
static size_t writers_under(const char *prefix, struct fc_wfile ***v)
{
    struct fc_wfile *wf;
    size_t n = 0, pl = strlen(prefix);

    *v = NULL;
    pthread_mutex_lock(&g_up.lock);
    for (wf = g_up.live; wf != NULL; wf = wf->lnext)
        n += strncmp(wf->key, prefix, pl) == 0;
    if (n > 0 && (*v = calloc(n, sizeof(**v))) != NULL) {
        n = 0;
        for (wf = g_up.live; wf != NULL; wf = wf->lnext)
            if (strncmp(wf->key, prefix, pl) == 0) {
                atomic_fetch_add(&wf->refs, 1);
                (*v)[n++] = wf;
            }
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&g_up.lock);
    return n;
}

/* May directory @src be renamed? (see header) */
int fc_write_dir_rename_ok(struct fc_fs *fs, const char *src)
{
    struct fc_wfile **v;
    size_t n = writers_under(src, &v);

    return renames_blocked(fs, v, n, src);
}

/* Directory @src was renamed to @dst (see header). */
void fc_write_dir_renamed(struct fc_fs *fs, const char *src, const char *dst)
{
    struct fc_wfile **v;
    size_t n = writers_under(src, &v), sl = strlen(src);

    (void)fs;
    for (size_t i = 0; i < n; i++) {
        struct fc_wfile *wf = v[i];
        char *k = NULL;
        pthread_mutex_lock(&wf->wlock);
        /* (still under @src: the key changes only under wlock) */
        if (strncmp(wf->key, src, sl) == 0 &&
            asprintf(&k, "%s%s", dst, wf->key + sl) >= 0) {
            wfile_set_key(wf, k);
            restream(wf);
        } else if (strncmp(wf->key, src, sl) == 0) {
            cm_log(CM_LOG_ERROR, ENOMEM,
                   "ecfs: %s: renamed with its directory, but out of "
                   "memory: close() fails, nothing is uploaded",
                   wf->key);
            (void)wait_parts(wf, 0);
            abort_upload(wf);
            wf->werr = -EIO;
            wf->dirty = true;
        }
        pthread_mutex_unlock(&wf->wlock);
        fc_wfile_unref(wf);
    }
    free(v);
}

/* chmod/chown/utimens for the next commit (see header). */
bool fc_write_set_meta(struct fc_fs *fs, struct fc_inode *in,
                       const struct fc_s3_meta *m)
{
    struct fc_wfile **v;
    size_t n = writers_of(in, &v);
    bool taken = false;

    (void)fs;
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&v[i]->wlock);
        if (v[i]->dirty) {
            v[i]->meta = *m;
            taken = true;
        }
        pthread_mutex_unlock(&v[i]->wlock);
        fc_wfile_unref(v[i]);
    }
    free(v);
    return taken;
}

/* truncate(2) without a handle (see header). */
int fc_write_truncate_inode(struct fc_fs *fs, struct fc_inode *in,
                            uint64_t size)
{
    struct fc_wfile *wf = fc_write_find(fs, in);
    bool released = false;
    int ret;

    if (wf != NULL) {
        pthread_mutex_lock(&wf->wlock);
        released = wf->released; /* closed (async_close): not through it */
        pthread_mutex_unlock(&wf->wlock);
    }
    if (wf != NULL && !released) {
        ret = fc_write_truncate(wf, size);
        fc_wfile_unref(wf);
        return ret;
    }
    fc_wfile_unref(wf); /* the open below commits it first */
    ret = fc_write_open(fs, in, size == 0 ? O_RDWR | O_TRUNC : O_RDWR, false,
                        &wf);
    if (ret < 0)
        return ret;
    if (size != 0)
        ret = fc_write_truncate(wf, size);
    if (ret == 0)
        ret = fc_write_flush(wf);
    fc_write_release(wf);
    return ret;
}
