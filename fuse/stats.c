/* fuse/stats.c - serving the .ecfs-stats file (see stats.h for how the
 * size the kernel holds is kept equal to the bytes a read returns).
 *
 * DESIGN: one snapshot for the mount (g_snap, under g_lock), replaced at
 * LOOKUP and OPEN and by a GETATTR once it is a second old; an opened
 * handle keeps its own copy. Text only: a few hundred bytes, formatted in
 * microseconds, so no cache beyond that is worth having. */
#include "fuse/stats.h"

#include <fcntl.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuse/fs.h"

struct stats_snap {
    size_t len;
    struct timespec mtime; /* CLOCK_REALTIME, unique per snapshot */
    struct timespec taken; /* CLOCK_MONOTONIC */
    char text[FC_STATS_CAP];
};

/* An open handle (fi->fh). */
struct stats_fh {
    pthread_mutex_t lock; /* protects the rest (reads of one fd may overlap) */
    bool read;            /* a read has been answered */
    struct stats_snap snap;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stats_snap g_snap; /* protected by g_lock */
static bool g_have;              /* protected by g_lock */

size_t fc_stats_lines(const char *flat, char *out, size_t cap)
{
    size_t n = 0;
    const char *p = flat;

    if (cap == 0)
        return 0;
    out[0] = '\0';
    while (*p != '\0') {
        const char *end, *eq;
        size_t klen, vlen;

        while (*p == ' ')
            p++;
        end = p;
        while (*end != '\0' && *end != ' ')
            end++;
        eq = memchr(p, '=', (size_t)(end - p));
        if (eq != NULL && eq > p) {
            klen = (size_t)(eq - p);
            vlen = (size_t)(end - eq - 1);
            if (n + klen + vlen + 2 >= cap)
                break; /* whole lines only */
            memcpy(out + n, p, klen);
            out[n + klen] = ' ';
            memcpy(out + n + klen + 1, eq + 1, vlen);
            out[n + klen + 1 + vlen] = '\n';
            n += klen + vlen + 2;
            out[n] = '\0';
        }
        p = end;
    }
    return n;
}

/* Replaces g_snap with the counters of now. g_lock held. */
static void snap_take_locked(struct fc_fs *fs, fc_stats_fmt_fn fmt)
{
    char flat[FC_STATS_CAP];
    struct timespec now;
    int n = fmt(fs, flat, sizeof(flat));

    if (n < 0)
        flat[0] = '\0';
    g_snap.len = fc_stats_lines(flat, g_snap.text, sizeof(g_snap.text));
    clock_gettime(CLOCK_REALTIME, &now);
    /* a new mtime for every snapshot: the kernel (auto_inval_data) drops
     * the pages of the one before */
    if (g_have && (now.tv_sec < g_snap.mtime.tv_sec ||
                   (now.tv_sec == g_snap.mtime.tv_sec &&
                    now.tv_nsec <= g_snap.mtime.tv_nsec))) {
        now = g_snap.mtime;
        if (++now.tv_nsec >= 1000000000l) {
            now.tv_nsec = 0;
            now.tv_sec++;
        }
    }
    g_snap.mtime = now;
    clock_gettime(CLOCK_MONOTONIC, &g_snap.taken);
    g_have = true;
}

static void snap_stat(const struct fc_fs *fs, const struct stats_snap *s,
                      struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = FC_STATS_INO;
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = (off_t)s->len;
    st->st_blocks = (blkcnt_t)((s->len + 511) / 512);
    st->st_blksize = 4096;
    st->st_uid = fs->o.uid;
    st->st_gid = fs->o.gid;
    st->st_mtim = s->mtime;
    st->st_ctim = s->mtime;
    st->st_atim = s->mtime;
}

void fc_stats_entry(struct fc_fs *fs, fc_stats_fmt_fn fmt,
                    struct fuse_entry_param *e)
{
    memset(e, 0, sizeof(*e));
    e->ino = FC_STATS_INO; /* no inode: forget of it is ignored */
    pthread_mutex_lock(&g_lock);
    snap_take_locked(fs, fmt);
    snap_stat(fs, &g_snap, &e->attr);
    pthread_mutex_unlock(&g_lock);
}

void fc_stats_attr(struct fc_fs *fs, fc_stats_fmt_fn fmt, struct stat *st)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&g_lock);
    if (!g_have || now.tv_sec - g_snap.taken.tv_sec > 1 ||
        (now.tv_sec - g_snap.taken.tv_sec == 1 &&
         now.tv_nsec >= g_snap.taken.tv_nsec))
        snap_take_locked(fs, fmt);
    snap_stat(fs, &g_snap, st);
    pthread_mutex_unlock(&g_lock);
}

/* Copies a new snapshot into @dst (which then agrees with GETATTR). */
static void snap_copy_new(struct fc_fs *fs, fc_stats_fmt_fn fmt,
                          struct stats_snap *dst)
{
    pthread_mutex_lock(&g_lock);
    snap_take_locked(fs, fmt);
    memcpy(dst, &g_snap, sizeof(*dst));
    pthread_mutex_unlock(&g_lock);
}

void fc_stats_open(fuse_req_t req, struct fc_fs *fs, fc_stats_fmt_fn fmt,
                   struct fuse_file_info *fi)
{
    struct stats_fh *h;

    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        fuse_reply_err(req, EACCES);
        return;
    }
    h = malloc(sizeof(*h));
    if (h == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    pthread_mutex_init(&h->lock, NULL);
    h->read = false;
    snap_copy_new(fs, fmt, &h->snap);
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->direct_io = 1; /* exactly the snapshot's bytes, never a cached page */
    fi->keep_cache = 0;
    if (fuse_reply_open(req, fi) != 0) {
        pthread_mutex_destroy(&h->lock);
        free(h);
    }
}

/* Copies what a read of @size at @off gets from @s into @out (@s->text's
 * size); returns its length. */
static size_t piece_of(const struct stats_snap *s, size_t size, off_t off,
                       char *out)
{
    size_t n;

    if ((uint64_t)off >= s->len)
        return 0;
    n = CM_MIN(size, s->len - (size_t)off);
    memcpy(out, s->text + off, n);
    return n;
}

void fc_stats_read(fuse_req_t req, struct fc_fs *fs, fc_stats_fmt_fn fmt,
                   size_t size, off_t off, struct fuse_file_info *fi)
{
    struct stats_fh *h = (struct stats_fh *)(uintptr_t)fi->fh;
    char buf[FC_STATS_CAP];
    size_t n;

    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (h != NULL) {
        pthread_mutex_lock(&h->lock);
        /* the first read gets the snapshot of the open (the size fstat
         * said); a reader starting over (pread at 0) wants now */
        if (off == 0 && h->read)
            snap_copy_new(fs, fmt, &h->snap);
        h->read = true;
        n = piece_of(&h->snap, size, off, buf);
        pthread_mutex_unlock(&h->lock);
    } else {
        /* no handle (no_open): the page cache asks for the snapshot whose
         * size and mtime the kernel holds */
        pthread_mutex_lock(&g_lock);
        if (!g_have)
            snap_take_locked(fs, fmt);
        n = piece_of(&g_snap, size, off, buf);
        pthread_mutex_unlock(&g_lock);
    }
    /* the reply last, locks dropped: once the kernel has it, the handle
     * may be released (and freed) by another thread */
    fuse_reply_buf(req, n ? buf : NULL, n);
}

void fc_stats_release(struct fuse_file_info *fi)
{
    struct stats_fh *h = (struct stats_fh *)(uintptr_t)fi->fh;

    if (h == NULL)
        return;
    pthread_mutex_destroy(&h->lock);
    free(h);
    fi->fh = 0;
}
