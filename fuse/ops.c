/* fuse/ops.c - FUSE low-level handlers of the read-only S3 namespace.
 *
 * DESIGN: follows passthrough_ll: every handler sends exactly one reply,
 * helpers never reply, and every entry reply (lookup, readdirplus entry)
 * adds one kernel lookup to the inode, given back by forget.
 * Directories are answered from one listing snapshot (ListObjectsV2 pages
 * with delimiter '/') that also carries every entry's attributes, so
 * readdirplus needs no HEAD per file, and lookups under a fresh listing
 * cost no request at all, positive or negative. Only a lookup without a
 * fresh listing goes to S3: HEAD of the key and a one-key LIST of key/ in
 * parallel (the directory wins, as in the listing).
 * Reads: see read.c. On a read-only/immutable mount the kernel is told that
 * open is not needed (FUSE_CAP_NO_OPEN_SUPPORT) and keeps its page cache;
 * otherwise each open pins the ETag it saw and keeps the page cache only
 * while that ETag is the one the cache was filled from; while such handles
 * are open, every attribute reply carries that version's size (the kernel
 * cuts page-cache reads at the size it was last told).
 * Writes: see write.c. create and open for writing give a write handle
 * (direct_io: no page cache); flush (close) commits and returns the
 * upload's error. Namespace changes (unlink, mkdir, rmdir, rename) are
 * made in S3 at once and noted in the inode table, so lookups and the
 * next directory read of this mount see them immediately. -o ro answers
 * EROFS to every modifying call. */
#include "fuse/ops.h"
#include "fuse/perm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "common/log.h"
#include "fuse/cache.h"
#include "fuse/fs.h"
#include "fuse/listxml.h"
#include "fuse/metrics.h"
#include "fuse/read.h"
#include "fuse/s3.h"
#include "fuse/stats.h"
#include "fuse/write.h"

/* The request counters are a virtual file at the mount root, found by
 * lookup but never listed (so find, ls and ImageFolder do not see it);
 * served by fuse/stats.c. Off with -o nostats, or when an object of that
 * name was at the root at mount time (main.c probes it), so a real object
 * is never hidden. Not an xattr: answering getxattr at all costs ls -l a
 * FUSE round trip per file, while ENOSYS makes the kernel stop asking for
 * good. */

/* FUSE ioctls seen. The kernel sends every ioctl on a file to us and keeps
 * no memory of the answer, and Python's buffered open() asks isatty()
 * (TCGETS) of each file it opens: on a ro mount, the one request a warm
 * open of a cached file costs (.ecfs-stats `ioctls`; those on .ecfs-stats
 * itself are not counted). */
static atomic_ulong g_ioctls;
/* lookup misses answered by refetching a small expired listing */
static atomic_ulong g_stale_refetch;
/* an expired listing is refetched on a miss when it had fewer entries
 * than this (one LIST page): cheaper than HEAD + LIST per name */
#define STALE_REFETCH_MAX 1000
/* directories listed because names in them were looked up by path */
static atomic_ulong g_lookup_lists;

/* Remote lookups per unlisted directory (-o lookup_list, default 8). A
 * loader that opens files by path from a manifest never lists their
 * directory, so each open cost a HEAD and a LIST of the name: after
 * lookup_list of them the directory is listed once (fc_dir_list_small: one
 * page at most, so memory stays what a readdir of it would hold) and later
 * names are answered from that listing. A small fixed table hashed by
 * directory key: a collision only restarts a count. */
#define LOOKUP_DIRS 64

struct lookup_dir {
    uint32_t hash; /* of the directory key; 0 = free */
    unsigned n;    /* remote lookups since its last listing */
    bool busy;     /* a lookup is listing it now */
    double big_at; /* more than a page then: not again within list_ttl */
};

static struct {
    pthread_mutex_t lock;
    struct lookup_dir d[LOOKUP_DIRS]; /* protected by lock */
} g_lookups = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint32_t dirkey_hash(const char *dirkey)
{
    uint32_t h = 2166136261u;

    for (const char *p = dirkey; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h ? h : 1;
}

/* An open file: the version it reads and its reader state. */
struct fc_fh {
    struct fc_inode *in; /* borrowed: the kernel holds it while open */
    /* pinned at open; changed only by fc_copy_self (this mount copied the
     * object onto itself: the same bytes under a new ETag); rs.lock */
    char etag[FC_ETAG_MAX];
    uint64_t size; /* size of that version */
    struct fc_rstate rs;
    bool registered;           /* counted by fc_inode_open */
    bool direct;               /* opened direct_io (see fc_inode_open) */
    bool near_writer;          /* opened while the file was being written
                                * here: reads follow the writer, then the
                                * inode's current attributes */
    struct fc_wfile *wf;       /* write handle, or NULL (read-only) */
    struct fc_fh *prev, *next; /* on g_fhs; protected by g_fh_lock */
};

static bool g_no_open; /* kernel supports skipping opens; set in init */
static struct fuse_session *g_se; /* for notifications; fc_ops_set_session */

/* Remembers the session (see header). */
void fc_ops_set_session(struct fuse_session *se)
{
    g_se = se;
}

/* Every open file handle, so the ones the kernel never released (files
 * still open at unmount) are freed in destroy instead of leaking. */
static pthread_mutex_t g_fh_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_fh *g_fhs; /* protected by g_fh_lock */

/* An open directory: the listing snapshot it reads; on g_dhs like files
 * on g_fhs, for the same reason. */
struct fc_dh {
    struct fc_listing *l;      /* one reference */
    struct fc_dh *prev, *next; /* on g_dhs; protected by g_fh_lock */
};
static struct fc_dh *g_dhs; /* protected by g_fh_lock */

/* Puts @dh on the open-directory list. */
static void dh_link(struct fc_dh *dh)
{
    pthread_mutex_lock(&g_fh_lock);
    dh->prev = NULL;
    dh->next = g_dhs;
    if (g_dhs != NULL)
        g_dhs->prev = dh;
    g_dhs = dh;
    pthread_mutex_unlock(&g_fh_lock);
}

/* Takes @dh off the list, drops its listing and frees it. */
static void dh_free(struct fc_dh *dh)
{
    pthread_mutex_lock(&g_fh_lock);
    if (dh->prev != NULL)
        dh->prev->next = dh->next;
    else
        g_dhs = dh->next;
    if (dh->next != NULL)
        dh->next->prev = dh->prev;
    pthread_mutex_unlock(&g_fh_lock);
    fc_listing_unref(dh->l);
    free(dh);
}

/* Puts @fh on the open-handle list. */
static void fh_link(struct fc_fh *fh)
{
    pthread_mutex_lock(&g_fh_lock);
    fh->prev = NULL;
    fh->next = g_fhs;
    if (g_fhs != NULL)
        g_fhs->prev = fh;
    g_fhs = fh;
    pthread_mutex_unlock(&g_fh_lock);
}

/* Takes @fh off the open-handle list, ends its page-cache registration
 * (when @fs is given; not at session end) and frees it. */
static void fh_free(struct fc_fs *fs, struct fc_fh *fh)
{
    pthread_mutex_lock(&g_fh_lock);
    if (fh->prev != NULL)
        fh->prev->next = fh->next;
    else
        g_fhs = fh->next;
    if (fh->next != NULL)
        fh->next->prev = fh->prev;
    pthread_mutex_unlock(&g_fh_lock);
    if (fs != NULL && fh->registered)
        fc_inode_close(fs->itab, fh->in, fh->direct);
    if (fh->wf != NULL && fs != NULL)
        fc_write_release(fh->wf);
    else if (fh->wf != NULL)
        fc_write_discard(fh->wf);
    fc_rstate_fini(&fh->rs);
    free(fh);
}

static struct fc_fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* Whether modifying calls are refused (-o ro): EROFS, as the kernel
 * answers itself for a read-only mount. */
static bool is_ro(const struct fc_fs *fs)
{
    return fs->o.ro;
}

/* Kernel attribute/entry timeout for this mount. */
static double attr_tmo(const struct fc_fs *fs)
{
    return fs->o.attr_timeout;
}

static int resolve_child(struct fc_fs *fs, const char *dirkey, const char *name,
                         struct fc_attr *a, char **key, double *when);
static int revalidate(struct fc_fs *fs, struct fc_inode *in, struct fc_attr *a);
static int mark_parent(struct fc_fs *fs, const char *key);
static bool stores_meta(struct fc_fs *fs, const struct fc_attr *a);
static int kill_priv(fuse_req_t req, struct fc_inode *in);

/* Kernel entry timeout: none when every path walk must reach ecfs's
 * permission checks (fs->perm_walk). */
static double entry_tmo(const struct fc_fs *fs)
{
    return fs->perm_walk ? 0 : fs->o.attr_timeout;
}

/* Kernel negative-entry timeout (no cached absence under perm_walk: a
 * user who may not search the directory must get EACCES, not ENOENT). */
static double negative_tmo(const struct fc_fs *fs)
{
    return fs->perm_walk ? 0 : fs->o.negative_timeout;
}

/* The attributes ecfs shows for @in, as a struct stat. */
static void inode_stat(struct fc_fs *fs, struct fc_inode *in, struct stat *st)
{
    struct fc_attr a;

    fc_inode_get_attr(fs->itab, in, &a, NULL);
    fc_fill_stat(fs, in->ino, &a, st);
}

/* Fetches @in's stored mode and owner (a HEAD) when they are not known
 * (an entry only listed: fc_attr.meta_unknown) and the caller of @req is
 * not the mounting user: a permission decision for anyone else must see
 * them. The mounting user holds the mount's credentials, so its checks
 * protect nothing and cost no request. 0 or -errno. */
static int meta_for(fuse_req_t req, struct fc_inode *in)
{
    struct fc_fs *fs = fuse_req_userdata(req);
    struct fc_attr a;

    fc_inode_get_attr(fs->itab, in, &a, NULL);
    if (!a.meta_unknown || fuse_req_ctx(req)->uid == fs->mounter)
        return 0;
    return revalidate(fs, in, &a);
}

/* Whether the caller of @req may @mask (R_OK/W_OK/X_OK) the inode @in
 * (perm.c); always 0 when the kernel checks (default_permissions, ro and
 * pack mounts). 0 or -EACCES. */
static int may(fuse_req_t req, struct fc_inode *in, int mask)
{
    struct fc_fs *fs = fuse_req_userdata(req);
    struct fc_cred c;
    struct stat st;
    int ret;

    if (!fs->own_perms)
        return 0;
    if ((ret = meta_for(req, in)) < 0)
        return ret;
    inode_stat(fs, in, &st);
    fc_cred_init(&c, req);
    ret = fc_perm_check(&c, &st, mask);
    fc_cred_fini(&c);
    return ret;
}

/* The attributes ecfs shows for child @name of @dir: those of its live
 * inode when there is one (a listing lacks x-amz-meta-*), else of the
 * listing or HEAD that resolves it. 0 or -errno (-ENOENT). */
static int child_stat(struct fc_fs *fs, struct fc_inode *dir, const char *name,
                      struct stat *st)
{
    struct fc_attr a, live;
    char *key = NULL;
    double when;
    int ret = resolve_child(fs, dir->key, name, &a, &key, &when);

    if (ret < 0)
        return ret;
    if (fc_itab_cached_attr(fs->itab, key, &live, &when))
        a = live;
    if (a.meta_unknown) {
        /* only listed: its owner is stored, not listed */
        struct fc_s3_obj obj;
        ret = fc_s3_head(fs->s3, key, &obj);
        if (ret == 0)
            a.meta = obj.meta;
        else if (ret == -ENOENT && a.is_dir)
            ret = 0; /* a prefix without a marker: the defaults */
        if (ret < 0) {
            free(key);
            return ret;
        }
    }
    free(key);
    fc_fill_stat(fs, 0, &a, st);
    return 0;
}

/* The sticky-bit rule for removing or replacing child @name of @dir
 * (perm.c): the child's owner is only looked up (from the caches, as the
 * kernel just did) when the directory is sticky and the caller neither
 * root nor its owner. 0, -EPERM, or -errno of the child's lookup. */
static int may_remove(fuse_req_t req, struct fc_inode *dir, const char *name)
{
    struct fc_fs *fs = fuse_req_userdata(req);
    struct fc_cred c;
    struct stat dst, vst;
    int ret;

    if (!fs->own_perms)
        return 0;
    inode_stat(fs, dir, &dst);
    fc_cred_init(&c, req);
    memset(&vst, 0, sizeof(vst));
    vst.st_uid = (uid_t)-1;
    if ((dst.st_mode & S_ISVTX) && c.uid != dst.st_uid &&
        !fc_cred_capable(&c, CAP_FOWNER)) {
        ret = child_stat(fs, dir, name, &vst);
        if (ret < 0) {
            fc_cred_fini(&c);
            return ret;
        }
    }
    ret = fc_perm_sticky(&c, &dst, &vst);
    fc_cred_fini(&c);
    return ret;
}

/* Fills a struct stat (see header). */
void fc_fill_stat(const struct fc_fs *fs, fuse_ino_t ino,
                  const struct fc_attr *a, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    if (a->is_dir) {
        st->st_mode = S_IFDIR | (0777 & ~fs->o.umask);
        st->st_nlink = 1; /* unknown subdir count: find must not assume */
        st->st_size = 4096;
    } else {
        st->st_mode = S_IFREG | (0666 & ~fs->o.umask);
        st->st_nlink = 1;
        st->st_size = (off_t)a->size;
    }
    st->st_uid = fs->o.uid;
    st->st_gid = fs->o.gid;
    st->st_blksize = (blksize_t)fs->o.block_size;
    st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
    /* prefixes have no time of their own: show the mount time */
    st->st_mtim.tv_sec = a->mtime ? a->mtime : fs->started;
    /* stored attributes (x-amz-meta-*) win; the file type never changes */
    if (a->meta.has & FC_META_MODE)
        st->st_mode = (st->st_mode & S_IFMT) | (a->meta.mode & 07777);
    if (a->meta.has & FC_META_UID)
        st->st_uid = a->meta.uid;
    if (a->meta.has & FC_META_GID)
        st->st_gid = a->meta.gid;
    if (a->meta.has & FC_META_MTIME) {
        st->st_mtim.tv_sec = (time_t)a->meta.mtime;
        st->st_mtim.tv_nsec = (long)a->meta.mtime_ns;
    }
    st->st_ctim = st->st_mtim;
    st->st_atim = st->st_mtim;
}

/* Builds the S3 key of child @name of directory key @dir. NULL on ENOMEM. */
static char *child_key(const char *dir, const char *name, bool is_dir)
{
    char *k = NULL;

    if (asprintf(&k, "%s%s%s", dir, name, is_dir ? "/" : "") < 0)
        return NULL;
    return k;
}

/* What a marker's attributes (a HEAD's) say of its directory's entries:
 * PLAIN only when an ecfs marker says "ecfs-attrs: 0"; a marker of
 * another tool (s3fs stores attributes) or of an older ecfs says
 * nothing, so they may store some. */
static enum fc_dirmark marker_says(const struct fc_s3_meta *m)
{
    return (m->has & FC_META_DIRATTRS) && m->dirattrs == 0 ? FC_DIRMARK_PLAIN
                                                           : FC_DIRMARK_ATTRS;
}

/* What the marker of listing @l's directory says: none when the listing
 * showed none, else one HEAD of it, once per listing (the listing's
 * `mark`; a failed HEAD is not kept and says ATTRS). */
static enum fc_dirmark listing_mark(struct fc_fs *fs, struct fc_listing *l)
{
    int m = atomic_load(&l->mark);
    struct fc_s3_obj obj;
    int ret;

    if (m != FC_DIRMARK_UNKNOWN)
        return (enum fc_dirmark)m;
    if (!l->has_marker) {
        m = FC_DIRMARK_NONE;
    } else {
        ret = fc_s3_head(fs->s3, l->key, &obj);
        if (ret < 0 && ret != -ENOENT)
            return FC_DIRMARK_ATTRS;
        /* (gone since the listing: what was under it is not known) */
        m = ret == 0 ? marker_says(&obj.meta) : FC_DIRMARK_ATTRS;
    }
    atomic_store(&l->mark, m);
    return (enum fc_dirmark)m;
}

/* Whether the entries of listing @l may carry x-amz-meta-* that the
 * listing does not show (-o meta_fetch): every listing (all); none;
 * marked: those of a directory whose marker says so (listing_mark; this
 * mount's own record when newer than the listing), since ecfs stores
 * attributes other than the defaults on a key only after its
 * directory's marker says so (mark_parent). The root of a whole-bucket
 * mount cannot have a marker: its entries are fetched on an allow_other
 * mount (a chmod there decides for others), shown from the listing
 * otherwise (a chmod there then shows after a restart only with
 * meta_fetch=all). May send one HEAD. */
static bool listing_hides_meta(struct fc_fs *fs, struct fc_listing *l)
{
    enum fc_dirmark m;
    double when = 0;

    switch (fs->o.meta_fetch) {
    case FC_META_FETCH_ALL:
        return true;
    case FC_META_FETCH_MARKED:
        break;
    default:
        return false;
    }
    if (l->key[0] == '\0')
        return fs->o.allow_other;
    m = fc_itab_dir_noted(fs, l->key, &when);
    if (m == FC_DIRMARK_UNKNOWN || when < l->fetched)
        m = listing_mark(fs, l);
    return m == FC_DIRMARK_ATTRS;
}

/* Converts entry @d of a listing to attributes; @hides: the listing's
 * listing_hides_meta. */
static void dirent_attr(const struct fc_dirent *d, bool hides,
                        struct fc_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->is_dir = d->is_dir;
    a->size = d->size;
    a->mtime = d->mtime;
    snprintf(a->etag, sizeof(a->etag), "%s", d->etag);
    a->meta_unknown = hides;
}

/* Registers (one more lookup on) the inode for @key with @a, fetched at
 * @when (the age of the listing or HEAD they came from: using now would let
 * every lookup renew stale attributes forever), and fills @e. An inode
 * whose stored attributes are not known (only listed, meta_unknown) is
 * HEADed first: the kernel keeps what an entry says (its sticky-bit
 * check, for one, never asks again). 0, -ENOMEM, or -errno of the HEAD
 * (no lookup added). */
static int make_entry(struct fc_fs *fs, const char *key,
                      const struct fc_attr *a, double when,
                      struct fuse_entry_param *e)
{
    struct fc_inode *in = fc_inode_lookup(fs->itab, key, a, when);
    struct fc_attr cur;
    int ret;

    if (in == NULL)
        return -ENOMEM;
    fc_inode_get_attr(fs->itab, in, &cur, NULL);
    if (cur.meta_unknown && (ret = revalidate(fs, in, &cur)) < 0) {
        fc_inode_forget(fs->itab, in->ino, 1);
        return ret;
    }
    /* the inode may hold newer attributes than @a (an old listing
     * snapshot): the kernel must get those, its i_size bounds reads; or
     * those of the version its page cache holds, while that is in use */
    fc_inode_reply_attr(fs->itab, in, &cur);
    memset(e, 0, sizeof(*e));
    e->ino = in->ino;
    /* still not known (being written here): the kernel asks again */
    e->attr_timeout = cur.meta_unknown ? 0 : attr_tmo(fs);
    e->entry_timeout = entry_tmo(fs);
    fc_fill_stat(fs, in->ino, &cur, &e->attr);
    return 0;
}

/* Formats the counters as " name=value" pairs (fc_stats_fmt_fn; stats.c
 * turns them into lines). */
static int stats_format(struct fc_fs *fs, char *buf, size_t cap)
{
    size_t bytes, blocks;
    int n;

    n = fc_s3_stats_format(fs->s3, buf, cap);
    if (n >= 0 && (size_t)n < cap)
        n += fc_read_stats_format(fs, buf + n, cap - (size_t)n);
    if (n >= 0 && (size_t)n < cap)
        n += fc_write_stats_format(fs, buf + n, cap - (size_t)n);
    fc_cache_usage(fs->cache, &bytes, &blocks);
    if (n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n,
                      " ioctls=%lu stale_refetches=%lu lookup_lists=%lu "
                      "inodes=%zu inodes_peak=%zu cache_bytes=%zu "
                      "cache_blocks=%zu",
                      atomic_load(&g_ioctls), atomic_load(&g_stale_refetch),
                      atomic_load(&g_lookup_lists), fc_itab_count(fs->itab),
                      fc_itab_peak(fs->itab), bytes, blocks);
    if (n >= 0 && (size_t)n < cap)
        n += fc_metrics_ops_format(buf + n, cap - (size_t)n);
    return n;
}

static void fc_op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct fc_fs *fs = userdata;

    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS;
    /* always plus: the listing already carries every attribute */
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
    if (conn->capable & FUSE_CAP_ASYNC_READ)
        conn->want |= FUSE_CAP_ASYNC_READ;
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
        conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    /* our attributes only change when the object does: let the kernel
     * drop cached pages itself when it sees a new mtime/size */
    if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
        conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
    /* not on a writable immutable mount: writes need their handles */
    g_no_open = fs->o.ro && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
    /* O_TRUNC arrives with the open (no separate setattr): a truncating
     * open of an existing file streams like a new one */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    /* 1 MiB writes: a quarter of the FUSE round trips of 256 KiB ones */
    conn->max_write = 1u << 20;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    cm_log(CM_LOG_INFO, 0,
           "ecfs: mounted; kernel max_readahead=%u max_read=%u max_write=%u "
           "no_open=%d",
           conn->max_readahead, conn->max_read, conn->max_write,
           (int)g_no_open);
}

static void probe_pool_stop(void);

/* Session end (from fuse_session_destroy): stops the lookup probe threads
 * and frees the handles of files that were still open at unmount, which the
 * kernel never sends RELEASE for.
 * No request runs any more, so nothing else touches them. */
static void fc_op_destroy(void *userdata)
{
    (void)userdata;
    probe_pool_stop();
    while (g_fhs != NULL)
        fh_free(NULL, g_fhs);
    while (g_dhs != NULL)
        dh_free(g_dhs);
}

/* Parallel half of a lookup without a fresh listing: is key/ a prefix?
 * Run by a small fixed pool of probe threads (started at the first remote
 * lookup, joined in destroy), never a thread per lookup: a stat storm
 * (find, ls of uncached paths) creates no threads. The looking-up thread
 * sends the HEAD meanwhile; if no probe thread took the job by then, it
 * takes the job back and LISTs itself, so a busy pool costs latency, never
 * a wait on other lookups. */
#define PROBE_THREADS 8

struct dirprobe {
    struct fc_fs *fs;
    char *key;             /* "a/b/" */
    int ret;               /* 1 = directory, 0 = not, <0 error */
    bool marker;           /* key is a "dir/" marker object: mobj */
    struct fc_s3_obj mobj; /* its HEAD (mode, owner, mtime) */
    bool queued, done;     /* protected by g_probe.lock */
    struct dirprobe *next; /* queue link; protected by g_probe.lock */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;          /* a job was queued, or stop */
    pthread_cond_t done;          /* a job finished */
    struct dirprobe *head, *tail; /* queued jobs; protected by lock */
    pthread_t th[PROBE_THREADS];
    unsigned n;   /* threads started; protected by lock */
    bool started; /* start attempted; protected by lock */
    bool stop;    /* protected by lock */
} g_probe = {.lock = PTHREAD_MUTEX_INITIALIZER,
             .work = PTHREAD_COND_INITIALIZER,
             .done = PTHREAD_COND_INITIALIZER};

/* Runs the LIST of one probe (no lock held); when the directory has a
 * marker (it sorts first under its own prefix), also its HEAD, for the
 * attributes mkdir or chmod stored there. */
static void dirprobe_run(struct dirprobe *p)
{
    struct fc_listpage pg;

    fc_listpage_init(&pg);
    p->marker = false;
    p->ret = fc_s3_list(p->fs->s3, p->key, NULL, 1, &pg);
    if (p->ret == 0)
        p->ret = (pg.nobjs > 0 || pg.nprefixes > 0) ? 1 : 0;
    if (p->ret == 1 && pg.nobjs > 0 && strcmp(pg.objs[0].key, p->key) == 0)
        p->marker = fc_s3_head(p->fs->s3, p->key, &p->mobj) == 0;
    fc_listpage_fini(&pg);
}

/* Takes @p off the queue. g_probe.lock held; @p is queued. */
static void probe_dequeue(struct dirprobe *p)
{
    struct dirprobe **pp = &g_probe.head, *prev = NULL;

    while (*pp != p) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = p->next;
    if (g_probe.tail == p)
        g_probe.tail = prev;
    p->queued = false;
}

static void *probe_worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_probe.lock);
    for (;;) {
        struct dirprobe *p;
        while (!g_probe.stop && g_probe.head == NULL)
            pthread_cond_wait(&g_probe.work, &g_probe.lock);
        if (g_probe.stop)
            break;
        p = g_probe.head;
        probe_dequeue(p);
        pthread_mutex_unlock(&g_probe.lock);
        dirprobe_run(p);
        pthread_mutex_lock(&g_probe.lock);
        p->done = true;
        pthread_cond_broadcast(&g_probe.done);
    }
    pthread_mutex_unlock(&g_probe.lock);
    return NULL;
}

/* Queues @p for the pool (starting the pool on first use). Returns false
 * when there is no pool thread: the caller runs the probe itself. */
static bool probe_submit(struct dirprobe *p)
{
    bool ok;

    pthread_mutex_lock(&g_probe.lock);
    if (!g_probe.started) {
        g_probe.started = true;
        while (g_probe.n < PROBE_THREADS &&
               pthread_create(&g_probe.th[g_probe.n], NULL, probe_worker,
                              NULL) == 0)
            g_probe.n++;
    }
    ok = g_probe.n > 0 && !g_probe.stop;
    if (ok) {
        p->queued = true;
        p->done = false;
        p->next = NULL;
        if (g_probe.tail)
            g_probe.tail->next = p;
        else
            g_probe.head = p;
        g_probe.tail = p;
        pthread_cond_signal(&g_probe.work);
    }
    pthread_mutex_unlock(&g_probe.lock);
    return ok;
}

/* Waits for a submitted probe, or runs it here if no thread took it. */
static void probe_finish(struct dirprobe *p)
{
    bool mine = false;

    pthread_mutex_lock(&g_probe.lock);
    if (p->queued) {
        probe_dequeue(p);
        mine = true;
    }
    while (!mine && !p->done)
        pthread_cond_wait(&g_probe.done, &g_probe.lock);
    pthread_mutex_unlock(&g_probe.lock);
    if (mine)
        dirprobe_run(p);
}

/* Stops and joins the probe threads (session end: no lookup runs). */
static void probe_pool_stop(void)
{
    pthread_mutex_lock(&g_probe.lock);
    g_probe.stop = true;
    pthread_cond_broadcast(&g_probe.work);
    pthread_mutex_unlock(&g_probe.lock);
    for (unsigned i = 0; i < g_probe.n; i++)
        pthread_join(g_probe.th[i], NULL);
    g_probe.n = 0;
}

/* Resolves @name under @dirkey with S3 requests: HEAD key and LIST key/
 * in parallel. 0 with @a and *key (owned by the caller), -ENOENT, or
 * -errno. */
static int lookup_remote(struct fc_fs *fs, const char *dirkey, const char *name,
                         struct fc_attr *a, char **key)
{
    struct dirprobe p = {.fs = fs};
    struct fc_s3_obj obj;
    char *fkey;
    bool pooled;
    int hr;

    *key = NULL;
    p.key = child_key(dirkey, name, true);
    fkey = child_key(dirkey, name, false);
    if (p.key == NULL || fkey == NULL) {
        free(p.key);
        free(fkey);
        return -ENOMEM;
    }
    pooled = probe_submit(&p);
    hr = fc_s3_head(fs->s3, fkey, &obj);
    if (pooled)
        probe_finish(&p);
    else
        dirprobe_run(&p);
    memset(a, 0, sizeof(*a));
    if (p.ret == 1) {
        a->is_dir = true;
        if (p.marker) {
            a->mtime = p.mobj.mtime;
            a->meta = p.mobj.meta;
        }
        *key = p.key;
        free(fkey);
        return 0;
    }
    free(p.key);
    if (hr == 0) {
        a->size = obj.size;
        a->mtime = obj.mtime;
        a->meta = obj.meta;
        snprintf(a->etag, sizeof(a->etag), "%s", obj.etag);
        *key = fkey;
        return 0;
    }
    free(fkey);
    if (p.ret < 0 && hr == -ENOENT)
        return p.ret;
    return hr;
}

/* Returns the key of a live child inode of @dirkey named @name whose
 * attributes are still fresh (copied to @a, their age to @when), or NULL.
 * Directories first, as in listings. */
static char *cached_child(struct fc_fs *fs, const char *dirkey,
                          const char *name, struct fc_attr *a, double *when)
{
    struct fc_listing *l;
    double fetched;

    for (int is_dir = 1; is_dir >= 0; is_dir--) {
        char *k = child_key(dirkey, name, is_dir);
        if (k == NULL)
            return NULL;
        if (fc_itab_cached_attr(fs->itab, k, a, &fetched) &&
            fc_fs_is_fresh(fs, fetched)) {
            *when = fetched;
            return k;
        }
        /* a fresh non-empty listing of key/ proves a directory */
        if (is_dir && (l = fc_dir_cached_listing(fs, k)) != NULL) {
            size_t n = l->n;
            *when = l->fetched;
            fc_listing_unref(l);
            if (n == 0) { /* empty: a marker or nothing; ask S3 */
                free(k);
                continue;
            }
            memset(a, 0, sizeof(*a));
            a->is_dir = true;
            return k;
        }
        free(k);
    }
    return NULL;
}

/* What this mount's own changes say about @name under @dirkey, newer
 * than @since: 1 (exists: @a, *@key set), 0 (gone), -1 (no note). */
static int noted_child(struct fc_fs *fs, const char *dirkey, const char *name,
                       double since, struct fc_attr *a, char **key,
                       double *when)
{
    int verdict = -1;

    for (int is_dir = 1; is_dir >= 0; is_dir--) {
        char *k = child_key(dirkey, name, is_dir);
        bool exists;
        if (k == NULL)
            return -1;
        if (fc_itab_noted(fs, k, since, &exists, a, when)) {
            if (exists) {
                a->is_dir = is_dir;
                *key = k;
                return 1;
            }
            verdict = 0;
        }
        free(k);
    }
    return verdict;
}

/* @name looked up in listing @l of @dirkey (the reference is dropped):
 * 0 with @a, *@key and *@when, -ENOENT or -ENOMEM. */
static int listed_child(struct fc_fs *fs, struct fc_listing *l,
                        const char *dirkey, const char *name, struct fc_attr *a,
                        char **key, double *when)
{
    const struct fc_dirent *d = fc_listing_find(l, name);
    int ret = -ENOENT;

    if (d != NULL) {
        dirent_attr(d, listing_hides_meta(fs, l), a);
        *when = l->fetched;
        *key = child_key(dirkey, name, d->is_dir);
        ret = *key ? 0 : -ENOMEM;
    }
    fc_listing_unref(l);
    return ret;
}

/* Counts a remote lookup under @dirkey; true when it is the one to list the
 * directory now (then lookup_list_done must follow). */
static bool lookup_list_due(struct fc_fs *fs, const char *dirkey)
{
    uint32_t h = dirkey_hash(dirkey);
    struct lookup_dir *e = &g_lookups.d[h % LOOKUP_DIRS];
    bool due = false;

    if (fs->o.lookup_list == 0)
        return false;
    pthread_mutex_lock(&g_lookups.lock);
    if (e->hash != h)
        *e = (struct lookup_dir){.hash = h};
    if (e->big_at != 0 && fc_fs_is_fresh(fs, e->big_at)) {
        /* listed over a page lately: keep the HEAD + LIST per name */
    } else if (++e->n >= fs->o.lookup_list && !e->busy) {
        e->busy = true;
        due = true;
    }
    pthread_mutex_unlock(&g_lookups.lock);
    return due;
}

/* Ends the listing lookup_list_due asked for; @ret is its result. */
static void lookup_list_done(const char *dirkey, int ret)
{
    uint32_t h = dirkey_hash(dirkey);
    struct lookup_dir *e = &g_lookups.d[h % LOOKUP_DIRS];

    pthread_mutex_lock(&g_lookups.lock);
    if (e->hash == h) {
        e->busy = false;
        e->n = 0;
        e->big_at = ret == -EFBIG ? fc_now() : 0;
    }
    pthread_mutex_unlock(&g_lookups.lock);
}

/* Resolves @name under directory key @dirkey: this mount's own changes,
 * then a fresh listing, then a live inode's fresh attributes, then S3:
 * an expired listing of at most one page is refreshed by one LIST, which
 * answers this name and the next ones until list_ttl (rsync's temp names
 * in a directory it made over list_ttl ago; a loader's names in a
 * directory lookup_list listed), as readdir's listing does (metadata a
 * listing may hide: listing_hides_meta); else HEAD and LIST of the name.
 * 0 with @a, *@key (owned by the caller) and *@when (the age of the
 * attributes), -ENOENT, or -errno. */
static int resolve_child(struct fc_fs *fs, const char *dirkey, const char *name,
                         struct fc_attr *a, char **key, double *when)
{
    struct fc_listing *l = fc_dir_cached_listing(fs, dirkey);
    double since = l ? l->fetched : 0;
    int v;

    *key = NULL;
    v = noted_child(fs, dirkey, name, since, a, key, when);
    if (v >= 0) {
        fc_listing_unref(l);
        return v == 1 ? 0 : -ENOENT;
    }
    if (l != NULL) /* listed_child drops @l */
        return listed_child(fs, l, dirkey, name, a, key, when);
    if ((*key = cached_child(fs, dirkey, name, a, when)) != NULL)
        return 0; /* a live inode with fresh attributes: no request */
    if (fc_dir_stale_entries(fs, dirkey) < STALE_REFETCH_MAX &&
        fc_dir_listing(fs, dirkey, &l) == 0) {
        atomic_fetch_add_explicit(&g_stale_refetch, 1, memory_order_relaxed);
        return listed_child(fs, l, dirkey, name, a, key, when);
    }
    if (lookup_list_due(fs, dirkey)) {
        /* many names of it looked up by path: list it (one page) */
        int r = fc_dir_list_small(fs, dirkey, &l);
        lookup_list_done(dirkey, r);
        if (r == 0) {
            atomic_fetch_add_explicit(&g_lookup_lists, 1, memory_order_relaxed);
            return listed_child(fs, l, dirkey, name, a, key, when);
        }
    }
    *when = fc_now();
    return lookup_remote(fs, dirkey, name, a, key);
}

/* Valid replies: fuse_reply_entry, fuse_reply_err */
static void fc_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *dir = fc_inode_peek(fs->itab, parent);
    struct fuse_entry_param e;
    struct fc_attr a;
    char *key = NULL;
    double when = 0;
    int ret;

    if (dir == NULL) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    /* search permission on the directory, before anything of the name */
    if ((ret = may(req, dir, X_OK)) < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    if (strlen(name) > 255) {
        fuse_reply_err(req, ENAMETOOLONG);
        return;
    }
    if (parent == FUSE_ROOT_ID && !fs->o.no_stats &&
        strcmp(name, FC_STATS_NAME) == 0) {
        fc_stats_entry(fs, stats_format, &e);
        fuse_reply_entry(req, &e);
        return;
    }
    ret = resolve_child(fs, dir->key, name, &a, &key, &when);
    if (ret == -ENOENT) {
        memset(&e, 0, sizeof(e));
        e.entry_timeout = negative_tmo(fs);
        fuse_reply_entry(req, &e);
        return;
    }
    if (ret == 0)
        ret = make_entry(fs, key, &a, when, &e);
    free(key);
    if (ret < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    if (fuse_reply_entry(req, &e) != 0)
        fc_inode_forget(fs->itab, e.ino, 1); /* interrupted: undo */
}

/* Valid replies: fuse_reply_none */
static void fc_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    fc_inode_forget(fs_of(req)->itab, ino, nlookup);
    fuse_reply_none(req);
}

/* Valid replies: fuse_reply_none */
static void fc_op_forget_multi(fuse_req_t req, size_t count,
                               struct fuse_forget_data *forgets)
{
    for (size_t i = 0; i < count; i++)
        fc_inode_forget(fs_of(req)->itab, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

/* Refreshes a file inode's attributes with a HEAD when they are stale,
 * and a file's or directory's stored metadata when it is not known (only
 * listed: a directory's is on its marker, absent for a bare prefix).
 * 0 and @a (fresh or still valid), or -errno. */
static int revalidate(struct fc_fs *fs, struct fc_inode *in, struct fc_attr *a)
{
    struct fc_s3_obj obj;
    double fetched;
    int ret;

    fc_inode_get_attr(fs->itab, in, a, &fetched);
    if (in->ino == FUSE_ROOT_ID ||
        (!a->meta_unknown && (a->is_dir || fc_fs_is_fresh(fs, fetched))))
        return 0;
    /* being written here: S3 does not have it yet */
    if (fc_inode_is_writing(fs->itab, in))
        return 0;
    ret = fc_s3_head(fs->s3, in->key, &obj);
    if (a->is_dir) {
        if (ret < 0 && ret != -ENOENT)
            return ret;
        memset(&a->meta, 0, sizeof(a->meta));
        if (ret == 0) {
            a->meta = obj.meta;
            if (obj.mtime)
                a->mtime = obj.mtime;
        }
        a->meta_unknown = false;
        fc_inode_set_attr(fs->itab, in, a, fetched);
        return 0;
    }
    if (ret < 0)
        return ret;
    a->size = obj.size;
    if (obj.mtime)
        a->mtime = obj.mtime;
    a->meta = obj.meta;
    a->meta_unknown = false;
    snprintf(a->etag, sizeof(a->etag), "%s", obj.etag);
    fc_inode_set_attr(fs->itab, in, a, fc_now());
    return 0;
}

/* Valid replies: fuse_reply_attr, fuse_reply_err */
static void fc_op_getattr(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *in = fc_inode_peek(fs->itab, ino);
    struct fc_attr a;
    struct stat st;
    int ret;

    (void)fi;
    if (ino == FC_STATS_INO) {
        fc_stats_attr(fs, stats_format, &st);
        fuse_reply_attr(req, &st, 0);
        return;
    }
    if (in == NULL) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    ret = revalidate(fs, in, &a);
    if (ret < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    fc_inode_reply_attr(fs->itab, in, &a);
    fc_fill_stat(fs, ino, &a, &st);
    fuse_reply_attr(req, &st, a.meta_unknown ? 0 : attr_tmo(fs));
}

/* The kernel's FMODE_EXEC, passed in the open flags of an execve (not in
 * <fcntl.h>: the kernel's __FMODE_EXEC). */
#define FC_OPEN_EXEC 040

/* The access an open with @flags needs, as the kernel's may_open. */
static int open_mask(int flags)
{
    int m = 0;

    switch (flags & O_ACCMODE) {
    case O_RDONLY:
        m = R_OK;
        break;
    case O_WRONLY:
        m = W_OK;
        break;
    default:
        m = R_OK | W_OK;
        break;
    }
    if (flags & O_TRUNC)
        m |= W_OK;
    if (flags & FC_OPEN_EXEC)
        m |= X_OK;
    return m;
}

/* Valid replies: fuse_reply_open, fuse_reply_err */
static void fc_op_open(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *in = fc_inode_peek(fs->itab, ino);
    struct fc_fh *fh;
    struct fc_attr a;
    int ret;

    bool wr = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);

    if (wr && (is_ro(fs) || ino == FC_STATS_INO)) {
        fuse_reply_err(req, is_ro(fs) ? EROFS : EACCES);
        return;
    }
    if (ino == FC_STATS_INO) {
        fc_stats_open(req, fs, stats_format, fi);
        return;
    }
    if (in == NULL) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (g_no_open) {
        /* read-only mount: reads need no handle; the kernel stops asking
         * and keeps the page cache across opens */
        fuse_reply_err(req, ENOSYS);
        return;
    }
    ret = revalidate(fs, in, &a);
    if (ret == 0)
        ret = may(req, in, open_mask(fi->flags));
    if (ret == 0 && wr && stores_meta(fs, &a))
        ret = mark_parent(fs, in->key); /* its commit stores metadata */
    if (ret < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    fh = calloc(1, sizeof(*fh));
    if (fh == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    fh->in = in;
    snprintf(fh->etag, sizeof(fh->etag), "%s", a.etag);
    fh->size = a.size;
    fc_rstate_init(&fh->rs);
    if (wr) {
        ret = fc_write_open(fs, in, fi->flags, false, &fh->wf);
        if (ret < 0) {
            fc_rstate_fini(&fh->rs);
            free(fh);
            fuse_reply_err(req, -ret);
            return;
        }
        if (fi->flags & O_TRUNC)
            (void)kill_priv(req, in); /* (-ENOMEM: the bits stay) */
        /* writes and reads of a handle being written skip the page
         * cache: the bytes live in its buffer or staging file */
        fh->direct = true;
        fi->direct_io = 1;
    } else if (fc_inode_is_writing(fs->itab, in)) {
        /* another handle writes it: reads follow that one */
        fh->near_writer = true;
        fh->direct = true;
        fi->direct_io = 1;
    } else if (fs->cache_forever) {
        fi->keep_cache = 1; /* objects never change */
    } else {
        bool keep, direct, inval;
        fc_inode_open_version(fs->itab, in, &a, &keep, &direct, &inval);
        fh->registered = true;
        fh->direct = direct;
        fi->keep_cache = keep;
        fi->direct_io = direct;
        if (inval && g_se != NULL) {
            /* the kernel may hold another size (attr_timeout, or replies
             * still in flight) and would cut this handle's page-cache
             * reads there: make it drop that and discard replies of
             * requests begun before now (later ones send this version's
             * size). Attributes only; synchronous, so before the first
             * read. */
            (void)fuse_lowlevel_notify_inval_inode(g_se, ino, -1, 0);
        }
    }
    fi->fh = (uint64_t)(uintptr_t)fh;
    fh_link(fh);
    if (fuse_reply_open(req, fi) != 0)
        fh_free(fs, fh);
}

/* Copies @fh's pinned ETag to @etag (FC_ETAG_MAX bytes). */
static void fh_etag(struct fc_fh *fh, char *etag)
{
    pthread_mutex_lock(&fh->rs.lock);
    memcpy(etag, fh->etag, FC_ETAG_MAX);
    pthread_mutex_unlock(&fh->rs.lock);
}

/* Copies onto itself that this mount has under way (fc_copy_self), each
 * on its caller's stack: a read that failed meanwhile waits for them. */
struct self_copy {
    const char *key;
    struct self_copy *next;
};
static pthread_mutex_t g_copy_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_copy_cv = PTHREAD_COND_INITIALIZER;
static struct self_copy *g_copies; /* protected by g_copy_lock */

/* A read of @fh pinned to @etag failed with EIO: was that version copied
 * onto itself here (fc_copy_self), its handles moved to the new ETag? A
 * GET sent before that move may have met the copy (412). Waits for this
 * key's copies under way, then says whether @fh's ETag changed, and copies
 * the new one to @etag. A handle pinned to the old ETag after the move
 * (an open whose HEAD was answered before the copy and arrived after it,
 * or that read the inode's attributes before the move and was linked
 * after adopt_etag's walk) takes the new one now (fc_inode_adopted). */
static bool fh_adopted(struct fc_fs *fs, struct fc_fh *fh, char *etag)
{
    const char *key = fh->in->key;
    char now[FC_ETAG_MAX], to[FC_ETAG_MAX];
    bool busy;

    pthread_mutex_lock(&g_copy_lock);
    do {
        busy = false;
        for (struct self_copy *c = g_copies; c != NULL && !busy; c = c->next)
            busy = strcmp(c->key, key) == 0;
        if (busy)
            pthread_cond_wait(&g_copy_cv, &g_copy_lock);
    } while (busy);
    pthread_mutex_unlock(&g_copy_lock);
    fh_etag(fh, now);
    if (strcmp(now, etag) == 0 && fc_inode_adopted(fs->itab, fh->in, now, to)) {
        pthread_mutex_lock(&fh->rs.lock);
        if (strcmp(fh->etag, now) == 0)
            snprintf(fh->etag, sizeof(fh->etag), "%s", to);
        memcpy(now, fh->etag, FC_ETAG_MAX);
        pthread_mutex_unlock(&fh->rs.lock);
    }
    if (strcmp(now, etag) == 0)
        return false;
    memcpy(etag, now, FC_ETAG_MAX);
    return true;
}

/* @key's version @from is now @to, the same bytes (fc_copy_self): the
 * blocks cached under @from (@size bytes), this mount's note of @key, the
 * live inode (attributes, the version its page cache holds) and the open
 * handles pinned to @from take @to. Other versions' handles keep theirs: they
 * still get EIO. */
static void adopt_etag(struct fc_fs *fs, const char *key, const char *from,
                       const char *to, uint64_t size)
{
    uint64_t bs = fs->o.block_size;
    struct fc_inode *in = NULL;
    struct fc_attr a;
    double t;

    if (fs->cache != NULL && size > 0 && bs > 0)
        (void)fc_cache_rekey(fs->cache, key, from, to, (size + bs - 1) / bs);
    if (fc_itab_cached_attr(fs->itab, key, &a, &t))
        in = fc_inode_lookup(fs->itab, key, NULL, 0);
    fc_itab_adopt_etag(fs->itab, key, in, from, to);
    if (in == NULL)
        return;
    pthread_mutex_lock(&g_fh_lock);
    for (struct fc_fh *fh = g_fhs; fh != NULL; fh = fh->next) {
        if (fh->in != in)
            continue;
        pthread_mutex_lock(&fh->rs.lock);
        if (fh->etag[0] != '\0' && fc_s3_etag_equal(fh->etag, from))
            snprintf(fh->etag, sizeof(fh->etag), "%s", to);
        pthread_mutex_unlock(&fh->rs.lock);
    }
    pthread_mutex_unlock(&g_fh_lock);
    fc_inode_forget(fs->itab, in->ino, 1);
}

/* Whether the server honours x-amz-copy-source-if-match on CopyObject:
 * 0 not known yet, 1 yes (storaged, AWS), -1 no (Ceph RGW 16.2 and
 * s3rver copy whatever they find). Learnt by the first tied CopyObject. */
static atomic_int g_copy_cond;

/* A CopyObject of @key onto itself tied to version @known, on a server
 * that may ignore the condition: the first one carries an ETag no object
 * has. A 412 says the server checks (then the tied copy is made); a copy
 * says it does not, and that copy, of whatever version is there, is the
 * untied copy made on such a server anyway (nobody adopts its ETag).
 * fc_s3_copy_sized_if's returns. */
static int copy_tied(struct fc_fs *fs, const char *key, uint64_t size,
                     const struct fc_s3_meta *m, const char *known,
                     char *copied, char *etag)
{
    int ret, cond = atomic_load(&g_copy_cond);

    if (size > FC_S3_COPY_MAX || cond > 0)
        return fc_s3_copy_sized_if(fs->s3, key, key, size, m, known, copied,
                                   etag); /* above 5 GiB: checked here */
    if (cond < 0)
        return fc_s3_copy_sized_if(fs->s3, key, key, size, m, NULL, copied,
                                   etag);
    ret = fc_s3_copy_sized_if(fs->s3, key, key, size, m,
                              "\"ecfs-probe-no-such-etag\"", copied, etag);
    if (ret == 0) {
        cm_log(CM_LOG_WARN, 0,
               "ecfs: the server ignores x-amz-copy-source-if-match on "
               "CopyObject: a chmod/chown/utimens of an object uploaded in "
               "parts fails the reads of files open on it (EIO)");
        atomic_store(&g_copy_cond, -1);
        copied[0] = '\0';
        return 0;
    }
    if (ret != -ESTALE)
        return ret;
    cm_log(CM_LOG_INFO, 0,
           "ecfs: the server honours x-amz-copy-source-if-match on "
           "CopyObject (the 412 above was a probe)");
    atomic_store(&g_copy_cond, 1);
    return fc_s3_copy_sized_if(fs->s3, key, key, size, m, known, copied, etag);
}

/* Stores attributes @m of file @key (@size bytes) by a copy onto itself
 * (see ops.h). */
int fc_copy_self(struct fc_fs *fs, const char *key, uint64_t size,
                 const struct fc_s3_meta *m, const char *known, char *etag)
{
    struct self_copy me = {.key = key};
    char copied[FC_ETAG_MAX];
    int ret;

    pthread_mutex_lock(&g_copy_lock);
    me.next = g_copies;
    g_copies = &me;
    pthread_mutex_unlock(&g_copy_lock);
    if (known != NULL && known[0] != '\0')
        ret = copy_tied(fs, key, size, m, known, copied, etag);
    else
        ret =
            fc_s3_copy_sized_if(fs->s3, key, key, size, m, NULL, copied, etag);
    if (ret == -ESTALE && known != NULL && known[0] != '\0') {
        /* another client's version: the attributes go onto it, as
         * they always did, and no handle takes its ETag (theirs read
         * EIO, the change is theirs to see) */
        ret =
            fc_s3_copy_sized_if(fs->s3, key, key, size, m, NULL, copied, etag);
    }
    if (ret == 0 && copied[0] != '\0' && etag[0] != '\0' &&
        !fc_s3_etag_equal(copied, etag))
        adopt_etag(fs, key, copied, etag, size);
    pthread_mutex_lock(&g_copy_lock);
    for (struct self_copy **pp = &g_copies; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == &me) {
            *pp = me.next;
            break;
        }
    }
    pthread_cond_broadcast(&g_copy_cv);
    pthread_mutex_unlock(&g_copy_lock);
    return ret;
}

/* Valid replies: fuse_reply_buf, fuse_reply_iov, fuse_reply_data,
 * fuse_reply_err */
static void fc_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_fh *fh = (struct fc_fh *)(uintptr_t)fi->fh;
    struct fc_inode *in;
    struct fc_robj o;
    struct fc_attr a;
    struct fc_rstate *rs;
    struct fc_rpin pin;
    char *buf, etag[FC_ETAG_MAX];
    ssize_t n;

    if (ino == FC_STATS_INO) {
        fc_stats_read(req, fs, stats_format, size, off, fi);
        return;
    }
    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (fh != NULL && (fh->wf != NULL || fh->near_writer)) {
        /* the bytes written so far, from the writing handle */
        struct fc_wfile *wf = fh->wf;
        if (wf == NULL)
            wf = fc_write_find(fs, fh->in);
        else
            wf = NULL; /* our own: no reference needed */
        if (fh->wf != NULL || wf != NULL) {
            buf = malloc(size ? size : 1);
            if (buf == NULL) {
                fc_wfile_unref(wf);
                fuse_reply_err(req, ENOMEM);
                return;
            }
            n = fc_write_read(fh->wf ? fh->wf : wf, buf, size, (uint64_t)off);
            fc_wfile_unref(wf);
            if (n < 0)
                fuse_reply_err(req, (int)-n);
            else
                fuse_reply_buf(req, buf, (size_t)n);
            free(buf);
            return;
        }
    }
    if (fh != NULL && fh->near_writer) {
        /* the writer is gone: its commit set the attributes */
        fc_inode_get_attr(fs->itab, fh->in, &a, NULL);
        in = fh->in;
        o.etag = a.etag;
        o.size = a.size;
        rs = &fh->rs;
    } else if (fh != NULL) {
        in = fh->in;
        fh_etag(fh, etag);
        o.etag = etag;
        o.size = fh->size;
        rs = &fh->rs;
    } else {
        in = fc_inode_peek(fs->itab, ino);
        if (in == NULL) {
            fuse_reply_err(req, ENOENT);
            return;
        }
        fc_inode_get_attr(fs->itab, in, &a, NULL);
        o.etag = a.etag;
        o.size = a.size;
        rs = fc_inode_rstate(fs->itab, in);
        if (rs == NULL) {
            fuse_reply_err(req, ENOMEM);
            return;
        }
    }
    o.key = in->key;
    /* the reply is written straight from the cache blocks (no copy) */
    n = fc_read_pin(fs, &o, rs, (uint64_t)off, size, &pin);
    if (n == -EIO && o.etag == etag && fh_adopted(fs, fh, etag))
        n = fc_read_pin(fs, &o, rs, (uint64_t)off, size, &pin);
    if (n >= 0) {
        /* read before the reply: once it is sent, the kernel may close
         * the file and a RELEASE on another thread free @fh (TSan saw
         * fh_free race this read in test_tsan_smoke) */
        bool cached = fh == NULL || !fh->direct;

        /* without direct_io the bytes now sit in the page cache */
        if (fuse_reply_iov(req, pin.iov, (int)pin.n) == 0 && cached)
            fc_read_handed(fs, &pin);
        fc_read_unpin(fs, &pin);
        return;
    }
    if (n != -E2BIG) {
        fuse_reply_err(req, (int)-n);
        return;
    }
    /* a read across more blocks than one pin holds: copy it out */
    buf = malloc(size ? size : 1);
    if (buf == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    n = fc_read(fs, &o, rs, (uint64_t)off, size, buf);
    if (n == -EIO && o.etag == etag && fh_adopted(fs, fh, etag))
        n = fc_read(fs, &o, rs, (uint64_t)off, size, buf);
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    free(buf);
}

/* Valid replies: fuse_reply_err */
static void fc_op_release(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi)
{
    struct fc_fh *fh = (struct fc_fh *)(uintptr_t)fi->fh;

    if (ino == FC_STATS_INO)
        fc_stats_release(fi); /* its handle is not a struct fc_fh */
    else if (fh)
        fh_free(fs_of(req), fh);
    fuse_reply_err(req, 0);
}

/* Valid replies: fuse_reply_err. close() commits: the upload's error is
 * what close returns (the kernel passes FLUSH's answer on; RELEASE's is
 * lost). On a ro mount nothing is ever dirty: ENOSYS makes the kernel
 * stop sending FLUSH at every close (one round trip per sample of an
 * epoch otherwise). */
static void fc_op_flush(fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info *fi)
{
    struct fc_fh *fh = (struct fc_fh *)(uintptr_t)fi->fh;
    bool changed;
    int ret;

    if (is_ro(fs_of(req))) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    if (fh == NULL || ino == FC_STATS_INO || fh->wf == NULL) {
        fuse_reply_err(req, 0);
        return;
    }
    ret = fc_write_flush(fh->wf);
    changed = fc_write_take_changed(fh->wf);
    /* after the reply @fh may be released at any moment */
    fuse_reply_err(req, -ret);
    /* pages other handles cached belong to the old version */
    if (changed && g_se != NULL)
        (void)fuse_lowlevel_notify_inval_inode(g_se, ino, 0, 0);
}

/* Valid replies: fuse_reply_open, fuse_reply_err */
static void fc_op_opendir(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *in = fc_inode_peek(fs->itab, ino);
    struct fc_listing *l;
    struct fc_dh *dh;
    struct fc_attr a;
    int ret;

    if (in == NULL) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    fc_inode_get_attr(fs->itab, in, &a, NULL);
    if (!a.is_dir) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    if ((ret = may(req, in, R_OK)) < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    dh = calloc(1, sizeof(*dh));
    if (dh == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    ret = fc_dir_listing(fs, in->key, &l);
    if (ret < 0) {
        free(dh);
        fuse_reply_err(req, -ret);
        return;
    }
    dh->l = l;
    fi->fh = (uint64_t)(uintptr_t)dh;
    fc_list_prefetch_note(fs, in->key);
    if (fs->cache_forever) {
        fi->cache_readdir = 1;
        fi->keep_cache = 1;
    }
    dh_link(dh);
    if (fuse_reply_open(req, fi) != 0)
        dh_free(dh);
}

/* A directory of more entries than this gets readdirplus entries without
 * inodes (see do_readdir): 10^6 inodes would cost far more memory than
 * the listing itself (fuse/README.md, "Memory"). */
#define FC_PLUS_INODES_MAX 16384

/* d_ino of an entry without an inode: a stable hash of its key. */
static uint64_t key_ino_hash(const char *key)
{
    uint64_t h = 1469598103934665603ull;

    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h | (1ull << 62);
}

/* Whether the live inode of @key knows its stored attributes for the
 * version of listing attributes @a (a HEAD or a commit told them). */
static bool live_meta_known(struct fc_fs *fs, const char *key,
                            const struct fc_attr *a)
{
    struct fc_attr live;
    double t;

    if (!fc_itab_cached_attr(fs->itab, key, &live, &t) || live.meta_unknown)
        return false;
    return a->is_dir
               ? live.is_dir
               : a->etag[0] != '\0' && fc_s3_etag_equal(a->etag, live.etag);
}

/* Fills a readdir(plus) buffer from the snapshot, starting at entry @off
 * (0 ".", 1 "..", 2.. listing entries). Replies. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, bool plus)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_dh *dh = (struct fc_dh *)(uintptr_t)fi->fh;
    struct fc_listing *l = dh ? dh->l : NULL;
    struct fc_inode *dir = fc_inode_peek(fs->itab, ino);
    char *buf, *key;
    size_t pos = 0, ent;
    int err = 0;
    bool hides;

    if (dir == NULL || l == NULL) {
        fuse_reply_err(req, EBADF);
        return;
    }
    hides = plus && l->n <= FC_PLUS_INODES_MAX && listing_hides_meta(fs, l);
    buf = malloc(size);
    if (buf == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    for (off_t i = off < 0 ? 0 : off; (size_t)i < l->n + 2; i++) {
        struct fuse_entry_param e;
        const char *name;
        struct fc_attr a;

        memset(&e, 0, sizeof(e));
        if (i < 2) {
            name = i == 0 ? "." : "..";
            e.attr.st_ino = ino;
            e.attr.st_mode = S_IFDIR;
            ent = plus ? fuse_add_direntry_plus(req, buf + pos, size - pos,
                                                name, &e, i + 1)
                       : fuse_add_direntry(req, buf + pos, size - pos, name,
                                           &e.attr, i + 1);
            if (ent > size - pos)
                break;
            pos += ent;
            continue;
        }
        const struct fc_dirent *d = &l->ents[i - 2];
        name = d->name;
        dirent_attr(d, hides, &a);
        key = child_key(dir->key, name, d->is_dir);
        if (key == NULL) {
            err = ENOMEM;
            break;
        }
        if (plus && (l->n > FC_PLUS_INODES_MAX ||
                     (a.meta_unknown && !live_meta_known(fs, key, &a)))) {
            /* a huge directory: the name and type only, no inode (the
             * kernel makes none for node id 0), so listing it (ls -f,
             * find) costs the listing's memory alone; what is stat'ed or
             * opened is looked up from the listing, without a request.
             * The same for an entry whose stored attributes are not
             * known (meta_unknown): its lookup HEADs it, so a scan that
             * only reads names (ImageFolder, find) sends no HEAD */
            e.attr.st_ino = key_ino_hash(key);
            e.attr.st_mode = d->is_dir ? S_IFDIR : S_IFREG;
            ent = fuse_add_direntry_plus(req, buf + pos, size - pos, name, &e,
                                         i + 1);
            if (ent > size - pos) {
                free(key);
                break;
            }
        } else if (plus) {
            if (make_entry(fs, key, &a, l->fetched, &e) < 0) {
                free(key);
                err = ENOMEM;
                break;
            }
            ent = fuse_add_direntry_plus(req, buf + pos, size - pos, name, &e,
                                         i + 1);
            if (ent > size - pos) {
                /* did not fit: give the lookup back */
                fc_inode_forget(fs->itab, e.ino, 1);
                free(key);
                break;
            }
        } else {
            /* plain readdir: d_ino is informative only */
            e.attr.st_ino = key_ino_hash(key);
            e.attr.st_mode = d->is_dir ? S_IFDIR : S_IFREG;
            ent = fuse_add_direntry(req, buf + pos, size - pos, name, &e.attr,
                                    i + 1);
            if (ent > size - pos) {
                free(key);
                break;
            }
        }
        free(key);
        pos += ent;
    }
    /* entries already in the buffer win over a late error */
    if (err && pos == 0)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, buf, pos);
    free(buf);
}

/* Valid replies: fuse_reply_buf, fuse_reply_data, fuse_reply_err */
static void fc_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
                          off_t off, struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, false);
}

/* Valid replies: fuse_reply_buf, fuse_reply_data, fuse_reply_err */
static void fc_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                              off_t off, struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, true);
}

/* Valid replies: fuse_reply_err */
static void fc_op_releasedir(fuse_req_t req, fuse_ino_t ino,
                             struct fuse_file_info *fi)
{
    struct fc_dh *dh = (struct fc_dh *)(uintptr_t)fi->fh;

    (void)ino;
    if (dh)
        dh_free(dh);
    fuse_reply_err(req, 0);
}

/* Valid replies: fuse_reply_statfs, fuse_reply_err */
/* Valid replies: fuse_reply_ioctl_retry, fuse_reply_ioctl,
 * fuse_reply_ioctl_iov, fuse_reply_err. No ioctl is supported: ENOTTY, what
 * the kernel made of libfuse's ENOSYS before this handler existed. */
static void fc_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned cmd, void *arg,
                        struct fuse_file_info *fi, unsigned flags,
                        const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
    (void)cmd;
    (void)arg;
    (void)fi;
    (void)flags;
    (void)in_buf;
    (void)in_bufsz;
    (void)out_bufsz;
    /* reading the counters (Python's open of .ecfs-stats) moves none */
    if (ino != FC_STATS_INO)
        atomic_fetch_add_explicit(&g_ioctls, 1, memory_order_relaxed);
    fuse_reply_err(req, ENOTTY);
}

static void fc_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct fc_fs *fs = fs_of(req);
    struct statvfs sv;

    (void)ino;
    memset(&sv, 0, sizeof(sv));
    sv.f_bsize = fs->o.block_size;
    sv.f_frsize = 4096;
    sv.f_blocks = 1ull << 40; /* object stores have no fixed size */
    sv.f_bfree = 1ull << 40;
    sv.f_bavail = 1ull << 40;
    sv.f_files = 1ull << 32;
    sv.f_ffree = 1ull << 32;
    sv.f_favail = 1ull << 32;
    sv.f_namemax = 255;
    fuse_reply_statfs(req, &sv);
}

/* Valid replies: fuse_reply_buf, fuse_reply_data, fuse_reply_xattr,
 * fuse_reply_err. Objects carry no xattrs: ENOSYS makes the kernel stop
 * sending getxattr (ls -l asks for ACLs and SELinux labels of every file). */
static void fc_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                           size_t size)
{
    (void)ino;
    (void)name;
    (void)size;
    fuse_reply_err(req, ENOSYS);
}

/* Valid replies: fuse_reply_buf, fuse_reply_data, fuse_reply_xattr,
 * fuse_reply_err */
static void fc_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    (void)ino;
    (void)size;
    fuse_reply_err(req, ENOSYS);
}

/* What a directory's marker says of its entries, for a copy that
 * replaces the marker's attributes (@m) to keep: asked with a HEAD when
 * @m does not tell (the directory was only listed). No marker: a new one
 * says "none" (a prefix holds none that ecfs stored); another tool's
 * says nothing, and is left so. 0 or -errno. */
static int keep_dirattrs(struct fc_fs *fs, const char *key,
                         struct fc_s3_meta *m)
{
    struct fc_s3_obj obj;
    int ret;

    if (m->has & FC_META_DIRATTRS)
        return 0;
    ret = fc_s3_head(fs->s3, key, &obj);
    if (ret == -ENOENT) {
        m->has |= FC_META_DIRATTRS;
        m->dirattrs = 0;
        return 0;
    }
    if (ret == 0 && (obj.meta.has & FC_META_DIRATTRS)) {
        m->has |= FC_META_DIRATTRS;
        m->dirattrs = obj.meta.dirattrs;
    }
    return ret;
}

/* Stores attributes @m of closed file @in (@a: its attributes), an
 * object over 5 GiB, now: CopyObject cannot copy it onto itself, so this
 * is a multipart copy onto itself (fc_s3_copy_sized: its parts tied to
 * the version HEADed), one full server-side copy per call, made before
 * the call returns so that its failure is the call's errno (-ESTALE: the
 * object changed meanwhile; the kernel retries a path call once). Any
 * pending attributes of @in are in @m, and taken. 0 or -errno. */
static int set_meta_big(struct fc_fs *fs, struct fc_inode *in,
                        struct fc_attr *a, const struct fc_s3_meta *m)
{
    char etag[FC_ETAG_MAX];
    int ret;

    (void)fc_write_meta_take(fs, in->key, NULL);
    ret = fc_copy_self(fs, in->key, a->size, m, NULL, etag);
    if (ret < 0) {
        cm_log(CM_LOG_WARN, -ret,
               "ecfs: %s: chmod/chown/utimens not stored (a copy onto "
               "itself of %" PRIu64 " bytes failed); the object is unchanged",
               in->key, a->size);
        return ret;
    }
    a->meta = *m;
    a->mtime = time(NULL);
    snprintf(a->etag, sizeof(a->etag), "%s", etag);
    /* a new version (its ETag is the copy's): later opens pin it; an
     * empty ETag (RGW's Complete) makes the next revalidation ask */
    fc_inode_set_attr(fs->itab, in, a, etag[0] ? fc_now() : 0);
    fc_itab_note(fs, in->key, true, a);
    return 0;
}

/* chmod, chown and utimens of file or directory @in: the changes of @attr
 * named by @to_set go into its x-amz-meta-* attributes (fc_meta_settle:
 * none when they are the defaults), shown at once and stored by the
 * upload of a handle still to commit, else by a CopyObject onto itself a
 * second later or by a rename's copy, whichever comes first
 * (fc_write_meta_later); an object over 5 GiB by a multipart copy onto
 * itself before the call returns (set_meta_big). A directory's go on its
 * "dir/" marker, made if it was only a prefix; those of the root of a
 * whole-bucket mount are only kept in memory. Attributes other than the
 * defaults are stored only after the parent's marker says so
 * (mark_parent). 0 or -errno. */
static int set_meta(struct fc_fs *fs, struct fc_inode *in,
                    const struct stat *attr, int to_set)
{
    struct fc_attr a;
    struct fc_s3_meta m;
    int ret;

    fc_inode_get_attr(fs->itab, in, &a, NULL);
    m = a.meta;
    if (to_set & FUSE_SET_ATTR_MODE) {
        m.mode = (uint32_t)attr->st_mode;
        m.has |= FC_META_MODE;
    }
    if (to_set & FUSE_SET_ATTR_UID) {
        m.uid = (uint32_t)attr->st_uid;
        m.has |= FC_META_UID;
    }
    if (to_set & FUSE_SET_ATTR_GID) {
        m.gid = (uint32_t)attr->st_gid;
        m.has |= FC_META_GID;
    }
    if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
        struct timespec ts = attr->st_mtim;
        if (to_set & FUSE_SET_ATTR_MTIME_NOW)
            clock_gettime(CLOCK_REALTIME, &ts);
        m.mtime = (int64_t)ts.tv_sec;
        m.mtime_ns = (uint32_t)ts.tv_nsec;
        m.has |= FC_META_MTIME;
    }
    fc_meta_settle(fs, &m, a.is_dir);
    if (fc_meta_stores(&m) && (ret = mark_parent(fs, in->key)) < 0)
        return ret;
    if (a.is_dir && in->key[0] != '\0' &&
        (ret = keep_dirattrs(fs, in->key, &m)) < 0)
        return ret;
    if (!a.is_dir && fc_write_set_meta(fs, in, &m)) {
        a.meta = m; /* shown now; goes up with the commit */
        fc_inode_set_attr(fs->itab, in, &a, fc_now());
        return 0;
    }
    if (a.is_dir && in->key[0] == '\0') {
        /* the bucket's root has no marker key: kept until unmount */
        a.meta = m;
        fc_inode_set_attr(fs->itab, in, &a, fc_now());
        return 0;
    }
    if (!a.is_dir && a.size > FC_S3_COPY_MAX)
        return set_meta_big(fs, in, &a, &m);
    ret = fc_write_meta_later(fs, in->key, &m, a.size);
    if (ret < 0)
        return ret;
    a.meta = m;
    fc_inode_set_attr(fs->itab, in, &a, fc_now());
    fc_itab_note(fs, in->key, true, &a);
    return 0;
}

/* Clears the set-id bits of @in that a write or O_TRUNC open by the
 * caller of @req removes (fc_perm_kill_bits), where ecfs checks
 * permissions: the kernel clears them for neither (writes are direct
 * I/O; an O_TRUNC open is truncated by ecfs). Shown at once, stored with
 * the open handle's commit. 0 or -errno. */
static int kill_priv(fuse_req_t req, struct fc_inode *in)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_attr a;
    struct fc_cred c;
    struct stat st;
    mode_t kill;

    if (!fs->own_perms)
        return 0;
    fc_inode_get_attr(fs->itab, in, &a, NULL);
    if (a.is_dir || !(a.meta.has & FC_META_MODE) ||
        !(a.meta.mode & (S_ISUID | S_ISGID)))
        return 0; /* the common case: no lock, no /proc */
    fc_fill_stat(fs, in->ino, &a, &st);
    fc_cred_init(&c, req);
    kill = fc_perm_kill_bits(&c, st.st_mode, st.st_gid, false);
    fc_cred_fini(&c);
    if (kill == 0)
        return 0;
    st.st_mode &= ~kill;
    return set_meta(fs, in, &st, FUSE_SET_ATTR_MODE);
}

/* Valid replies: fuse_reply_attr, fuse_reply_err.
 * The size truncates (write.c); mode, owner and mtime of a file or a
 * directory are kept as x-amz-meta-* attributes (set_meta). */
static void fc_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                          int to_set, struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *in = fc_inode_peek(fs->itab, ino);
    struct fc_fh *fh = fi ? (struct fc_fh *)(uintptr_t)fi->fh : NULL;
    struct fc_attr a;
    struct stat st;
    int ret = 0;

    if (ino == FC_STATS_INO) {
        fuse_reply_err(req, EPERM);
        return;
    }
    if (in == NULL) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (is_ro(fs)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    fc_inode_get_attr(fs->itab, in, &a, NULL);
    /* only listed: the checks need its owner, and a chmod must keep the
     * stored owner and mtime (the copy replaces all of them) */
    if (a.meta_unknown && (ret = revalidate(fs, in, &a)) < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    if ((to_set & FUSE_SET_ATTR_SIZE) && a.is_dir) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    if (fs->own_perms) {
        struct fc_cred c;
        mode_t mode;
        fc_fill_stat(fs, ino, &a, &st);
        fc_cred_init(&c, req);
        ret = fc_perm_setattr(&c, &st, attr, to_set, fi != NULL, &mode);
        attr->st_mode = mode;
        if (ret == 0 && (to_set & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID |
                                   FUSE_SET_ATTR_GID))) {
            /* the set-id bits a truncate or chown clears, where the
             * kernel's own kill-priv chmod does not come (ftruncate) or
             * keeps a set-gid bit without group x that it clears on a
             * local file system */
            bool chown = to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID);
            mode_t kill = fc_perm_kill_bits(&c, st.st_mode, st.st_gid, chown);
            if (kill != 0) {
                if (!(to_set & FUSE_SET_ATTR_MODE))
                    attr->st_mode = st.st_mode;
                attr->st_mode &= ~kill;
                to_set |= FUSE_SET_ATTR_MODE;
            }
        }
        fc_cred_fini(&c);
        if (ret < 0) {
            fuse_reply_err(req, -ret);
            return;
        }
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        if (fh != NULL && fh->wf != NULL)
            ret = fc_write_truncate(fh->wf, (uint64_t)attr->st_size);
        else if ((ret = revalidate(fs, in, &a)) == 0)
            ret = fc_write_truncate_inode(fs, in, (uint64_t)attr->st_size);
    }
    if (ret == 0 &&
        (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
                   FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)))
        ret = set_meta(fs, in, attr, to_set);
    if (ret < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    fc_inode_get_attr(fs->itab, in, &a, NULL);
    fc_inode_reply_attr(fs->itab, in, &a);
    fc_fill_stat(fs, ino, &a, &st);
    fuse_reply_attr(req, &st, attr_tmo(fs));
}

/* Attributes of a file or directory made here just now. */
static void new_attr(struct fc_attr *a, bool is_dir)
{
    memset(a, 0, sizeof(*a));
    a->is_dir = is_dir;
    a->mtime = time(NULL);
}

/* The attributes a new file or directory in @dir stores: its mode and
 * its creator's ids (the mtime is Last-Modified), none when they are the
 * defaults (fc_meta_settle). In a set-group-ID
 * directory it takes the directory's group, and a new directory keeps
 * the bit, as on a local file system; a new file there loses a set-gid
 * bit (with group x) its creator could not set on that group (the
 * kernel's mode_strip_sgid: not root, not in the group). */
static void new_meta(fuse_req_t req, struct fc_inode *dir, mode_t mode,
                     struct fc_s3_meta *m)
{
    const struct fuse_ctx *c = fuse_req_ctx(req);
    struct stat dst;

    memset(m, 0, sizeof(*m));
    m->mode = (uint32_t)((S_ISDIR(mode) ? S_IFDIR : S_IFREG) | (mode & 07777));
    m->has = FC_META_MODE;
    if (c != NULL) {
        m->uid = (uint32_t)c->uid;
        m->gid = (uint32_t)c->gid;
        m->has |= FC_META_UID | FC_META_GID;
    }
    inode_stat(fuse_req_userdata(req), dir, &dst);
    if (dst.st_mode & S_ISGID) {
        m->gid = (uint32_t)dst.st_gid;
        m->has |= FC_META_GID;
        if (S_ISDIR(mode)) {
            m->mode |= S_ISGID;
        } else if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) &&
                   c != NULL) {
            struct fc_cred cr;
            fc_cred_init(&cr, req);
            if (!fc_cred_in_group(&cr, dst.st_gid) &&
                !fc_cred_capable(&cr, CAP_FSETID))
                m->mode &= ~(uint32_t)S_ISGID;
            fc_cred_fini(&cr);
        }
    }
    fc_meta_settle(fs_of(req), m, S_ISDIR(mode));
}

/* Checks a new entry's name; 0 or -errno. */
static int check_new_name(struct fc_fs *fs, fuse_ino_t parent, const char *name)
{
    if (is_ro(fs))
        return -EROFS;
    if (strlen(name) > 255)
        return -ENAMETOOLONG;
    if (parent == FUSE_ROOT_ID && !fs->o.no_stats &&
        strcmp(name, FC_STATS_NAME) == 0)
        return -EEXIST;
    return 0;
}

/* Makes the marker of the directory holding @key say that its entries
 * store attributes (x-amz-meta-ecfs-attrs: 1) before ecfs stores
 * attributes other than the defaults on @key, so that the entries of a
 * directory whose marker does not say so are shown from its listing
 * (-o meta_fetch=marked, listing_hides_meta). Free when this mount made
 * it say so within list_ttl, else a HEAD, and a PUT of an empty marker
 * when there is none (a directory that was only a prefix; for a prefix
 * mount, its root too) or a copy of an ecfs marker saying "0" onto
 * itself (its own attributes kept). Another tool's marker is left as it
 * is: it says nothing, which means "may". The root of a whole-bucket
 * mount has no marker key. Not atomic against another mount's chmod of
 * the directory (S3 has no conditional copy). 0 or -errno. */
static int mark_parent(struct fc_fs *fs, const char *key)
{
    size_t kl = strlen(key), dl;
    struct fc_s3_obj obj;
    char etag[FC_ETAG_MAX], *dir;
    double when = 0;
    int ret;

    dl = kl > 0 && key[kl - 1] == '/' ? kl - 1 : kl;
    while (dl > 0 && key[dl - 1] != '/')
        dl--;
    if (dl == 0)
        return 0;
    if ((dir = strndup(key, dl)) == NULL)
        return -ENOMEM;
    if (fc_itab_dir_noted(fs, dir, &when) == FC_DIRMARK_ATTRS &&
        fc_fs_is_fresh(fs, when)) {
        free(dir);
        return 0;
    }
    ret = fc_s3_head(fs->s3, dir, &obj);
    if (ret == -ENOENT) {
        struct fc_s3_body b = {.data = "", .len = 0};
        struct fc_s3_meta m = {.has = FC_META_DIRATTRS, .dirattrs = 1};
        ret = fc_s3_put_meta(fs->s3, dir, &b, &m, etag);
    } else if (ret == 0 && marker_says(&obj.meta) == FC_DIRMARK_PLAIN) {
        obj.meta.dirattrs = 1;
        ret = fc_s3_copy_meta(fs->s3, dir, dir, &obj.meta, etag);
    }
    if (ret == 0)
        fc_itab_mark_dir(fs, dir, FC_DIRMARK_ATTRS);
    else
        cm_log(CM_LOG_WARN, -ret,
               "ecfs: %s: directory marker not made to say its entries "
               "store attributes",
               dir);
    free(dir);
    return ret;
}

/* Whether what @key (@a) stores is other than the defaults, or not
 * known: a copy of it to another directory carries that. */
static bool stores_meta(struct fc_fs *fs, const struct fc_attr *a)
{
    struct fc_s3_meta m = a->meta;

    if (a->meta_unknown)
        return true;
    fc_meta_settle(fs, &m, a->is_dir);
    return fc_meta_stores(&m);
}

/* The stored attributes of directory @dir, fetched if only listed (a
 * new entry's group and set-gid bit come from them). 0 or -errno. */
static int dir_meta(struct fc_fs *fs, struct fc_inode *dir)
{
    struct fc_attr a;

    fc_inode_get_attr(fs->itab, dir, &a, NULL);
    return a.meta_unknown ? revalidate(fs, dir, &a) : 0;
}

/* Valid replies: fuse_reply_entry, fuse_reply_err. Regular files only
 * (an empty object); devices, FIFOs and sockets cannot be objects. */
static void fc_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                        mode_t mode, dev_t rdev)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *dir = fc_inode_peek(fs->itab, parent);
    struct fuse_entry_param e;
    struct fc_attr a;
    char *key;
    int ret;

    (void)rdev;
    if ((ret = check_new_name(fs, parent, name)) < 0 ||
        (ret = dir ? 0 : -ENOENT) < 0 ||
        (ret = may(req, dir, W_OK | X_OK)) < 0 ||
        (ret = S_ISREG(mode) ? 0 : -EPERM) < 0 ||
        (ret = dir_meta(fs, dir)) < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    key = child_key(dir->key, name, false);
    new_attr(&a, false);
    new_meta(req, dir, mode, &a.meta);
    if (key == NULL ||
        (fc_meta_stores(&a.meta) && (ret = mark_parent(fs, key)) < 0)) {
        free(key);
        fuse_reply_err(req, key == NULL ? ENOMEM : -ret);
        return;
    }
    {
        struct fc_s3_body b = {.data = "", .len = 0};
        ret = fc_s3_put_meta(fs->s3, key, &b, &a.meta, a.etag);
    }
    if (ret == 0) {
        fc_itab_note(fs, key, true, &a);
        ret = make_entry(fs, key, &a, fc_now(), &e);
    }
    free(key);
    if (ret < 0)
        fuse_reply_err(req, -ret);
    else if (fuse_reply_entry(req, &e) != 0)
        fc_inode_forget(fs->itab, e.ino, 1);
}

static int dir_has_children(struct fc_fs *fs, const char *dirkey);

/* dir_has_children for @key, the new directory @name under @dirkey: none,
 * with no request, when a fresh listing of @dirkey does not show @name and
 * this mount noted nothing of it since (cp -r's mkdir in a directory it
 * just made, whose empty listing mkdir cached: a LIST per mkdir before).
 * Keys another client put under @name since that listing are seen as
 * every change of another client is: after list_ttl. */
static int new_dir_children(struct fc_fs *fs, const char *dirkey,
                            const char *name, const char *key)
{
    struct fc_listing *l = fc_dir_cached_listing(fs, dirkey);

    if (l != NULL) {
        struct fc_attr a;
        char *k = NULL;
        double when;
        bool absent =
            fc_listing_find(l, name) == NULL &&
            noted_child(fs, dirkey, name, l->fetched, &a, &k, &when) < 0;

        free(k);
        fc_listing_unref(l);
        if (absent)
            return 0;
    }
    return dir_has_children(fs, key);
}

/* Valid replies: fuse_reply_entry, fuse_reply_err. A directory is a
 * "name/" marker object; it stores the directory's mode, owner and mtime
 * as x-amz-meta-* (as s3fs's markers do). */
static void fc_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                        mode_t mode)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *dir = fc_inode_peek(fs->itab, parent);
    struct fuse_entry_param e;
    struct fc_attr a;
    char etag[FC_ETAG_MAX], *key;
    int ret, children = 0;

    if ((ret = check_new_name(fs, parent, name)) < 0 ||
        (ret = dir ? 0 : -ENOENT) < 0 ||
        (ret = may(req, dir, W_OK | X_OK)) < 0 ||
        (ret = dir_meta(fs, dir)) < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    key = child_key(dir->key, name, true);
    new_attr(&a, true);
    new_meta(req, dir, S_IFDIR | mode, &a.meta);
    if (key == NULL ||
        (fc_meta_stores(&a.meta) && (ret = mark_parent(fs, key)) < 0) ||
        (ret = children = new_dir_children(fs, dir->key, name, key)) < 0) {
        free(key);
        fuse_reply_err(req, key == NULL ? ENOMEM : -ret);
        return;
    }
    /* an empty directory's entries store nothing; one that existed as a
     * prefix (this mount's listing was stale) may hold entries that do,
     * under a marker this PUT replaces */
    a.meta.has |= FC_META_DIRATTRS;
    a.meta.dirattrs = children > 0;
    {
        struct fc_s3_body b = {.data = "", .len = 0};
        ret = fc_s3_put_meta(fs->s3, key, &b, &a.meta, etag);
    }
    if (ret == 0) {
        fc_itab_note(fs, key, true, &a);
        fc_itab_mark_dir(fs, key,
                         children ? FC_DIRMARK_ATTRS : FC_DIRMARK_PLAIN);
        /* (one that existed as a prefix: its listing is fetched as
         * usual) */
        if (children == 0)
            fc_itab_empty_listing(fs, key);
        ret = make_entry(fs, key, &a, fc_now(), &e);
    }
    free(key);
    if (ret < 0)
        fuse_reply_err(req, -ret);
    else if (fuse_reply_entry(req, &e) != 0)
        fc_inode_forget(fs->itab, e.ino, 1);
}

/* Runs @fn on the live inode of @key, if there is one (holding a lookup
 * on it meanwhile, so it cannot be freed). */
static void with_live_inode(struct fc_fs *fs, const char *key,
                            void (*fn)(struct fc_fs *, struct fc_inode *,
                                       const char *),
                            const char *arg)
{
    struct fc_attr a;
    double t;
    struct fc_inode *in;

    if (!fc_itab_cached_attr(fs->itab, key, &a, &t))
        return;
    in = fc_inode_lookup(fs->itab, key, NULL, 0);
    if (in == NULL)
        return;
    fn(fs, in, arg);
    fc_inode_forget(fs->itab, in->ino, 1);
}

static void mark_unlinked(struct fc_fs *fs, struct fc_inode *in,
                          const char *arg)
{
    (void)arg;
    fc_write_unlinked(fs, in);
}

static void mark_renamed(struct fc_fs *fs, struct fc_inode *in, const char *key)
{
    fc_write_renamed(fs, in, key);
}

/* Whether the open handles of @key (a file) can follow a rename
 * (fc_write_rename_ok): 0 or -EBUSY. */
static int writers_may_rename(struct fc_fs *fs, const char *key)
{
    struct fc_attr a;
    double t;
    struct fc_inode *in;
    int ret;

    if (!fc_itab_cached_attr(fs->itab, key, &a, &t))
        return 0;
    in = fc_inode_lookup(fs->itab, key, NULL, 0);
    if (in == NULL)
        return 0;
    ret = fc_write_rename_ok(fs, in);
    fc_inode_forget(fs->itab, in->ino, 1);
    return ret;
}

/* The attributes of the copy, @arg being a struct fc_attr. */
static void set_copied_attr(struct fc_fs *fs, struct fc_inode *in,
                            const char *arg)
{
    const struct fc_attr *a = (const struct fc_attr *)(const void *)arg;

    if (a->etag[0] != '\0' && !fc_inode_is_writing(fs->itab, in))
        fc_inode_set_attr(fs->itab, in, a, fc_now());
}

/* The checks unlink and rmdir share: a writable mount, a known parent,
 * write and search permission on it and its sticky bit (perm.c), not the
 * stats file. 0 and the child's key in *@key (owned; a dir
 * marker's when @is_dir), or -errno. */
static int removal_key(fuse_req_t req, fuse_ino_t parent, const char *name,
                       bool is_dir, char **key)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *dir = fc_inode_peek(fs->itab, parent);
    int ret;

    if (is_ro(fs))
        return -EROFS;
    if (dir == NULL)
        return -ENOENT;
    if ((ret = may(req, dir, W_OK | X_OK)) < 0)
        return ret;
    if (parent == FUSE_ROOT_ID && !fs->o.no_stats &&
        strcmp(name, FC_STATS_NAME) == 0)
        return is_dir ? -ENOTDIR : -EPERM;
    if ((ret = may_remove(req, dir, name)) < 0)
        return ret;
    *key = child_key(dir->key, name, is_dir);
    return *key != NULL ? 0 : -ENOMEM;
}

/* Valid replies: fuse_reply_err */
static void fc_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fc_fs *fs = fs_of(req);
    char *key = NULL;
    int ret = removal_key(req, parent, name, false, &key);

    if (ret < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    fc_write_settle(fs, key); /* an async close's PUT must not follow */
    ret = fc_s3_delete(fs->s3, key);
    if (ret == 0) {
        (void)fc_write_meta_take(fs, key, NULL);
        with_live_inode(fs, key, mark_unlinked, NULL);
        fc_itab_note(fs, key, false, NULL);
        fc_itab_unhash(fs->itab, key);
    }
    free(key);
    fuse_reply_err(req, -ret);
}

/* Whether anything but the marker @dirkey itself is under @dirkey.
 * 1, 0 or -errno. */
static int dir_has_children(struct fc_fs *fs, const char *dirkey)
{
    struct fc_listpage pg;
    int ret;

    fc_listpage_init(&pg);
    ret = fc_s3_list_flat(fs->s3, dirkey, NULL, 2, &pg);
    if (ret == 0) {
        ret = 0;
        for (size_t i = 0; i < pg.nobjs; i++)
            if (strcmp(pg.objs[i].key, dirkey) != 0)
                ret = 1;
    }
    fc_listpage_fini(&pg);
    return ret;
}

/* Valid replies: fuse_reply_err */
static void fc_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fc_fs *fs = fs_of(req);
    char *key = NULL;
    int ret = removal_key(req, parent, name, true, &key);

    if (ret < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    fc_write_settle(fs, key); /* async closes under it count */
    ret = dir_has_children(fs, key);
    if (ret > 0)
        ret = -ENOTEMPTY;
    if (ret == 0) {
        /* a pending chmod/utime must not bring the marker back */
        (void)fc_write_meta_take(fs, key, NULL);
        ret = fc_s3_delete(fs->s3, key);
    }
    if (ret == 0) {
        fc_itab_note(fs, key, false, NULL);
        fc_itab_mark_dir(fs, key, FC_DIRMARK_NONE);
        fc_itab_unhash(fs->itab, key);
        fc_itab_drop_listings(fs, key);
    }
    free(key);
    fuse_reply_err(req, -ret);
}

/* Valid replies: fuse_reply_entry, fuse_reply_err. Objects cannot be
 * symbolic links here (documented): EPERM, as for hard links. */
static void fc_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                          const char *name)
{
    (void)link;
    (void)parent;
    (void)name;
    fuse_reply_err(req, is_ro(fs_of(req)) ? EROFS : EPERM);
}

/* Valid replies: fuse_reply_entry, fuse_reply_err */
static void fc_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                       const char *newname)
{
    (void)ino;
    (void)newparent;
    (void)newname;
    fuse_reply_err(req, is_ro(fs_of(req)) ? EROFS : EPERM);
}

/* The attributes the kernel is shown for the live inode of @key (the size
 * written so far while a writer has it) in @a; false when none is live. */
static bool live_reply_attr(struct fc_fs *fs, const char *key,
                            struct fc_attr *a)
{
    struct fc_inode *in;
    struct fc_attr c;
    double t;

    if (!fc_itab_cached_attr(fs->itab, key, &c, &t))
        return false;
    in = fc_inode_lookup(fs->itab, key, NULL, 0);
    if (in == NULL)
        return false;
    fc_inode_reply_attr(fs->itab, in, a);
    fc_inode_forget(fs->itab, in->ino, 1);
    return true;
}

/* Renames one file object @src -> @dst; @moved: its upload was moved to
 * @dst (fc_write_async_rename), so there is no object to copy. */
static int rename_file(struct fc_fs *fs, const char *src, const char *dst,
                       bool moved)
{
    struct fc_attr a, cur;
    struct fc_s3_obj obj;
    struct fc_s3_meta pm;
    /* chmod/utimens after close (rsync): stored by this copy */
    bool pending = fc_write_meta_take(fs, src, &pm);
    double t;
    int ret;

    memset(&obj, 0, sizeof(obj)); /* (its size: 0 where no HEAD ran) */
    if (moved && live_reply_attr(fs, src, &a)) {
        /* its upload goes to @dst: nothing to copy; what the kernel sees
         * (the written size, or the commit's attributes if it just ran) */
        if (pending && fc_write_meta_later(fs, dst, &pm, a.size) < 0)
            cm_log(CM_LOG_WARN, ENOMEM, "ecfs: %s: chmod/utimens lost", dst);
        pending = false;
        ret = 1;
    } else if (moved) {
        ret = -ENOENT; /* (no live inode: the branch below) */
    } else if (fc_itab_cached_attr(fs->itab, src, &cur, &t) && cur.etag[0] &&
               fc_fs_is_fresh(fs, t) && !cur.is_dir) {
        /* attributes from this mount's own commit (rsync's temp file):
         * no HEAD needed */
        obj.size = cur.size;
        obj.meta = cur.meta;
        ret = 0;
    } else {
        ret = fc_s3_head(fs->s3, src, &obj);
    }
    if (ret == 1) {
        ret = 0;
    } else if (ret == -ENOENT && fc_itab_cached_attr(fs->itab, src, &cur, &t)) {
        /* created here and still being written: nothing to copy yet, the
         * commit goes to the new name */
        memset(&a, 0, sizeof(a));
        a.mtime = time(NULL);
        ret = 0;
    } else if (ret == 0) {
        memset(&a, 0, sizeof(a));
        a.size = obj.size;
        a.mtime = time(NULL);
        a.meta = pending ? pm : obj.meta;
        ret = fc_s3_copy_sized(fs->s3, src, dst, obj.size, pending ? &pm : NULL,
                               a.etag);
        if (ret == 0)
            ret = fc_s3_delete(fs->s3, src);
    }
    if (ret < 0) {
        if (pending && fc_write_meta_later(fs, src, &pm, obj.size) < 0)
            cm_log(CM_LOG_WARN, ENOMEM, "ecfs: %s: chmod/utimens lost", src);
        return ret;
    }
    with_live_inode(fs, src, mark_renamed, dst);
    if (fc_itab_rename(fs->itab, src, dst) < 0)
        fc_itab_unhash(fs->itab, src);
    with_live_inode(fs, dst, set_copied_attr, (const char *)(const void *)&a);
    fc_itab_note(fs, src, false, NULL);
    fc_itab_note(fs, dst, true, &a);
    return 0;
}

/* One phase of a directory rename, shared by its threads. */
struct fan {
    struct fc_fs *fs;
    struct fc_listobj *objs;
    size_t n;
    const char *src, *dst;
    bool copy;          /* copy each key (else delete each source) */
    atomic_size_t next; /* next key to take */
    atomic_int err;     /* first failure */
};

static void *fan_run(void *arg)
{
    struct fan *f = arg;
    size_t sl = strlen(f->src), i;

    while (atomic_load(&f->err) == 0 &&
           (i = atomic_fetch_add(&f->next, 1)) < f->n) {
        char *to = NULL, etag[FC_ETAG_MAX];
        int ret;
        if (!f->copy)
            ret = fc_s3_delete(f->fs->s3, f->objs[i].key);
        else if (asprintf(&to, "%s%s", f->dst, f->objs[i].key + sl) < 0)
            ret = -ENOMEM;
        else
            ret = fc_s3_copy_sized(f->fs->s3, f->objs[i].key, to,
                                   f->objs[i].size, NULL, etag);
        free(to);
        if (ret < 0) {
            int zero = 0;
            atomic_compare_exchange_strong(&f->err, &zero, ret);
        }
    }
    return NULL;
}

/* Copies (@copy) or deletes every key of @objs with up to 8 threads (the
 * caller is one of them). 0 or the first -errno. */
static int fanout(struct fc_fs *fs, struct fc_listobj *objs, size_t n,
                  const char *src, const char *dst, bool copy)
{
    struct fan f = {
        .fs = fs, .objs = objs, .n = n, .src = src, .dst = dst, .copy = copy};
    pthread_t th[7];
    unsigned nth = 0;

    atomic_init(&f.next, 0);
    atomic_init(&f.err, 0);
    while (nth < CM_ARRAY_SIZE(th) && nth + 1 < n &&
           nth + 1 < fs->o.max_conns &&
           pthread_create(&th[nth], NULL, fan_run, &f) == 0)
        nth++;
    fan_run(&f);
    for (unsigned i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    return atomic_load(&f.err);
}

/* Renames directory @src/ -> @dst/ key by key, up to rename_dir_max keys
 * (beyond: EXDEV, so mv copies instead). */
static int rename_dir(struct fc_fs *fs, const char *src, const char *dst)
{
    struct fc_listpage pg;
    struct fc_listobj *objs = NULL;
    size_t n = 0, cap = 0;
    char *token = NULL;
    struct fc_attr a;
    int ret;

    ret = dir_has_children(fs, dst);
    if (ret != 0)
        return ret > 0 ? -ENOTEMPTY : ret;
    /* chmod/utime still pending under @src: stored now, so the copies
     * below carry them */
    fc_write_meta_flush(fs, src);
    do {
        fc_listpage_init(&pg);
        ret = fc_s3_list_flat(fs->s3, src, token, 1000, &pg);
        free(token);
        token = NULL;
        if (ret == 0 && n + pg.nobjs > fs->o.rename_dir_max) {
            cm_log(CM_LOG_WARN, EXDEV,
                   "ecfs: rename of %s: more than rename_dir_max=%u keys "
                   "(answered EXDEV: mv copies instead)",
                   src, fs->o.rename_dir_max);
            ret = -EXDEV;
        }
        if (ret == 0 && n + pg.nobjs > cap) {
            size_t nc = CM_MAX(2 * cap, n + pg.nobjs);
            struct fc_listobj *no = realloc(objs, nc * sizeof(*no));
            if (no == NULL)
                ret = -ENOMEM;
            else {
                objs = no;
                cap = nc;
            }
        }
        for (size_t i = 0; ret == 0 && i < pg.nobjs; i++) {
            objs[n] = pg.objs[i];
            memset(&pg.objs[i], 0, sizeof(pg.objs[i]));
            n++;
        }
        if (ret == 0 && pg.truncated && pg.next_token && pg.next_token[0])
            token = strdup(pg.next_token);
        fc_listpage_fini(&pg);
    } while (ret == 0 && token != NULL);
    /* copy everything first, then delete: a failure leaves the source;
     * each phase runs on a few threads (one key per request) */
    if (ret == 0)
        ret = fanout(fs, objs, n, src, dst, true);
    if (ret == 0)
        ret = fanout(fs, objs, n, src, dst, false);
    if (ret == 0 && n == 0) {
        /* only noted here (made by mkdir and never listed?): a marker of
         * an empty directory */
        char etag[FC_ETAG_MAX];
        struct fc_s3_body b = {.data = "", .len = 0};
        struct fc_s3_meta m = {.has = FC_META_DIRATTRS, .dirattrs = 0};
        ret = fc_s3_put_meta(fs->s3, dst, &b, &m, etag);
    }
    for (size_t i = 0; i < n; i++) {
        free(objs[i].key);
        free(objs[i].etag);
    }
    free(objs);
    if (ret < 0)
        return ret;
    /* files still open under @src commit under @dst (their uploads
     * moved): else each close brought @src back */
    fc_write_dir_renamed(fs, src, dst);
    if (fc_itab_rename(fs->itab, src, dst) < 0)
        fc_itab_unhash(fs->itab, src);
    fc_itab_drop_listings(fs, src);
    fc_itab_drop_listings(fs, dst);
    fc_itab_mark_dir(fs, src, FC_DIRMARK_NONE);
    fc_itab_mark_dir(fs, dst, FC_DIRMARK_UNKNOWN); /* the copies say */
    new_attr(&a, true);
    {
        /* the marker's copy kept its attributes */
        struct fc_attr old;
        double t;
        if (fc_itab_cached_attr(fs->itab, dst, &old, &t))
            a.meta = old.meta;
    }
    fc_itab_note(fs, src, false, NULL);
    fc_itab_note(fs, dst, true, &a);
    return 0;
}

static int resolve_child(struct fc_fs *fs, const char *dirkey, const char *name,
                         struct fc_attr *a, char **key, double *when);

/* The permission checks of a rename of @name in @d1 to @newname in @d2,
 * in the kernel's order: write and search permission on both directories
 * and the sticky bit of @d1 for the source and of @d2 for a target that
 * exists (an absent one is no error here: the rename makes it). 0,
 * -EACCES, -EPERM or -errno. */
static int may_rename(fuse_req_t req, struct fc_inode *d1, const char *name,
                      struct fc_inode *d2, const char *newname)
{
    int ret;

    if ((ret = may(req, d1, W_OK | X_OK)) < 0 ||
        (ret = may_remove(req, d1, name)) < 0 ||
        (d2 != d1 && (ret = may(req, d2, W_OK | X_OK)) < 0))
        return ret;
    ret = may_remove(req, d2, newname);
    return ret == -ENOENT ? 0 : ret;
}

/* RENAME_NOREPLACE: 0 when nothing is named @name in @dir, else -EEXIST
 * (or -errno). The kernel refuses a name it knows itself; this asks the
 * caches and, when they say absent, S3 (a HEAD: another client may have
 * made it since). Not atomic with the rename's copy: S3 has no
 * conditional copy. */
static int target_absent(struct fc_fs *fs, struct fc_inode *dir,
                         const char *name)
{
    struct fc_s3_obj obj;
    struct fc_attr a;
    char *key = NULL;
    double when;
    int ret = resolve_child(fs, dir->key, name, &a, &key, &when);

    free(key);
    if (ret == 0)
        return -EEXIST;
    if (ret != -ENOENT)
        return ret;
    if ((key = child_key(dir->key, name, false)) == NULL)
        return -ENOMEM;
    ret = fc_s3_head(fs->s3, key, &obj);
    free(key);
    return ret == 0 ? -EEXIST : ret == -ENOENT ? 0 : ret;
}

/* Valid replies: fuse_reply_err */
static void fc_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                         fuse_ino_t newparent, const char *newname,
                         unsigned int flags)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *d1 = fc_inode_peek(fs->itab, parent);
    struct fc_inode *d2 = fc_inode_peek(fs->itab, newparent);
    struct fc_attr a;
    char *src = NULL, *dst = NULL;
    double when;
    int ret;

    if (is_ro(fs)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    /* no atomic swap in S3; whiteouts are overlayfs's (a char device) */
    if (flags & (RENAME_EXCHANGE | RENAME_WHITEOUT)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (d1 == NULL || d2 == NULL) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if ((ret = check_new_name(fs, newparent, newname)) < 0 ||
        (ret = may_rename(req, d1, name, d2, newname)) < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    ret = resolve_child(fs, d1->key, name, &a, &src, &when);
    /* a directory moved to another parent changes its "..": write
     * permission on it too (the kernel's vfs_rename) */
    if (ret == 0 && a.is_dir && d1 != d2 && fs->own_perms) {
        struct fc_cred c;
        struct stat st;
        if ((ret = child_stat(fs, d1, name, &st)) == 0) {
            fc_cred_init(&c, req);
            ret = fc_perm_check(&c, &st, W_OK);
            fc_cred_fini(&c);
        }
    }
    if (ret == 0) {
        dst = child_key(d2->key, newname, a.is_dir);
        if (dst == NULL)
            ret = -ENOMEM;
    }
    if (ret == 0 && (flags & RENAME_NOREPLACE))
        ret = target_absent(fs, d2, newname);
    if (ret == 0 && stores_meta(fs, &a))
        ret = mark_parent(fs, dst); /* the copy carries metadata */
    if (ret == 0 && strcmp(src, dst) == 0)
        ret = 0; /* same name: nothing to do */
    else if (ret == 0 && a.is_dir && strncmp(dst, src, strlen(src)) == 0)
        ret = -EINVAL; /* into itself */
    else if (ret == 0) {
        /* async closes of the target land first (a late PUT would undo
         * the rename); one of the source not yet sent is sent to the new
         * name instead (rsync's temp file: one PUT, no copy or delete),
         * else it lands first too, for the copy to read */
        bool moved;
        fc_write_settle(fs, dst);
        moved = !a.is_dir && fc_write_async_rename(fs, src, dst);
        if (!moved)
            fc_write_settle(fs, src);
        /* a file streamed up with no local copy of its parts cannot
         * follow (EBUSY, before anything is copied) */
        if (!a.is_dir && !moved)
            ret = writers_may_rename(fs, src);
        else if (a.is_dir)
            ret = fc_write_dir_rename_ok(fs, src);
        if (ret == 0)
            ret = a.is_dir ? rename_dir(fs, src, dst)
                           : rename_file(fs, src, dst, moved);
    }
    free(src);
    free(dst);
    fuse_reply_err(req, -ret);
}

/* Valid replies: fuse_reply_write, fuse_reply_err */
static void fc_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
                        size_t size, off_t off, struct fuse_file_info *fi)
{
    struct fc_fh *fh = (struct fc_fh *)(uintptr_t)fi->fh;
    ssize_t n;

    if (fh == NULL || ino == FC_STATS_INO || fh->wf == NULL || off < 0) {
        fuse_reply_err(req, EBADF);
        return;
    }
    n = fc_write(fh->wf, buf, size, (uint64_t)off);
    if (n >= 0)
        (void)kill_priv(req, fh->in); /* (-ENOMEM: the bits stay) */
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_write(req, (size_t)n);
}

/* The sticky-bit rule for a create of @key in @dir (M2 of the permission
 * review): the kernel sends CREATE when it believes the name absent, but
 * an object another client made after the cached listing may be there,
 * and a create replaces it with a new object of the caller's. In a
 * sticky directory, for a caller that is neither root nor its owner, S3
 * is asked (one HEAD): an object there may only be replaced by its owner
 * (EPERM), and O_EXCL gets EEXIST. Elsewhere the last writer wins, as
 * between any two S3 clients. 0 or -errno. */
static int may_create_over(fuse_req_t req, struct fc_inode *dir,
                           const char *key, int flags)
{
    struct fc_fs *fs = fuse_req_userdata(req);
    struct fc_s3_obj obj;
    struct fc_cred c;
    struct stat dst, vst;
    int ret = 0;

    if (!fs->own_perms)
        return 0;
    inode_stat(fs, dir, &dst);
    fc_cred_init(&c, req);
    if ((dst.st_mode & S_ISVTX) && c.uid != dst.st_uid &&
        !fc_cred_capable(&c, CAP_FOWNER)) {
        ret = fc_s3_head(fs->s3, key, &obj);
        if (ret == 0 && (flags & O_EXCL)) {
            ret = -EEXIST;
        } else if (ret == 0) {
            struct fc_attr a;
            memset(&a, 0, sizeof(a));
            a.size = obj.size;
            a.meta = obj.meta;
            fc_fill_stat(fs, 0, &a, &vst);
            ret = fc_perm_sticky(&c, &dst, &vst);
        } else if (ret == -ENOENT) {
            ret = 0;
        }
    }
    fc_cred_fini(&c);
    return ret;
}

/* Valid replies: fuse_reply_create, fuse_reply_err */
static void fc_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                         mode_t mode, struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *dir = fc_inode_peek(fs->itab, parent), *in;
    struct fuse_entry_param e;
    struct fc_fh *fh = NULL;
    struct fc_attr a;
    char *key;
    int ret;

    if ((ret = check_new_name(fs, parent, name)) < 0 ||
        (ret = dir ? 0 : -ENOENT) < 0 ||
        (ret = may(req, dir, W_OK | X_OK)) < 0 ||
        (ret = dir_meta(fs, dir)) < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    key = child_key(dir->key, name, false);
    fh = calloc(1, sizeof(*fh));
    if (key == NULL || fh == NULL) {
        free(key);
        free(fh);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    new_attr(&a, false);
    new_meta(req, dir, mode, &a.meta);
    if ((fc_meta_stores(&a.meta) && (ret = mark_parent(fs, key)) < 0) ||
        (ret = may_create_over(req, dir, key, fi->flags)) < 0) {
        free(key);
        free(fh);
        fuse_reply_err(req, -ret);
        return;
    }
    /* a note now: a lookup while it is written finds it */
    fc_itab_note(fs, key, true, &a);
    ret = make_entry(fs, key, &a, fc_now(), &e);
    free(key);
    if (ret < 0) {
        free(fh);
        fuse_reply_err(req, -ret);
        return;
    }
    in = fc_inode_peek(fs->itab, e.ino);
    ret = fc_write_open(fs, in, fi->flags, true, &fh->wf);
    if (ret < 0) {
        fc_itab_note(fs, in->key, false, NULL);
        fc_inode_forget(fs->itab, e.ino, 1);
        free(fh);
        fuse_reply_err(req, -ret);
        return;
    }
    fh->in = in;
    fc_rstate_init(&fh->rs);
    fh->direct = true;
    fi->direct_io = 1;
    fi->fh = (uint64_t)(uintptr_t)fh;
    fh_link(fh);
    if (fuse_reply_create(req, &e, fi) != 0) {
        fc_inode_forget(fs->itab, e.ino, 1);
        fh_free(fs, fh);
    }
}

/* Valid replies: fuse_reply_err. A staged file is uploaded now; a
 * streamed one reports the parts sent so far (see fc_write_fsync). */
static void fc_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
                        struct fuse_file_info *fi)
{
    struct fc_fh *fh = (struct fc_fh *)(uintptr_t)fi->fh;
    int ret = 0;

    (void)datasync;
    if (fh != NULL && ino != FC_STATS_INO && fh->wf != NULL) {
        ret = fc_write_fsync(fh->wf);
        /* (after the reply @fh may be released at any moment) */
        if (fc_write_take_changed(fh->wf) && g_se != NULL) {
            fuse_reply_err(req, -ret);
            (void)fuse_lowlevel_notify_inval_inode(g_se, ino, 0, 0);
            return;
        }
    }
    fuse_reply_err(req, -ret);
}

/* Valid replies: fuse_reply_err */
static void fc_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                           const char *value, size_t size, int flags)
{
    (void)ino;
    (void)name;
    (void)value;
    (void)size;
    (void)flags;
    fuse_reply_err(req, is_ro(fs_of(req)) ? EROFS : ENOTSUP);
}

/* Valid replies: fuse_reply_err */
static void fc_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    (void)ino;
    (void)name;
    fuse_reply_err(req, is_ro(fs_of(req)) ? EROFS : ENOTSUP);
}

/* Valid replies: fuse_reply_err. access(2), faccessat and chdir's search
 * check (the kernel sends it only without default_permissions): @mask of
 * R_OK/W_OK/X_OK against the attributes ecfs shows (perm.c); F_OK alone
 * is 0 for anything the kernel could name. */
static void fc_op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_inode *in = NULL;
    struct fc_cred c;
    struct stat st;
    int ret = 0;

    if (ino == FC_STATS_INO) {
        fc_stats_attr(fs, stats_format, &st);
    } else if ((in = fc_inode_peek(fs->itab, ino)) != NULL) {
        if (fs->own_perms && (ret = meta_for(req, in)) < 0) {
            fuse_reply_err(req, -ret);
            return;
        }
        inode_stat(fs, in, &st);
    } else {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (fs->own_perms && (mask & (R_OK | W_OK | X_OK))) {
        fc_cred_init(&c, req);
        ret = fc_perm_check(&c, &st, mask);
        fc_cred_fini(&c);
    }
    fuse_reply_err(req, -ret);
}

const struct fuse_lowlevel_ops fc_ops = {
    .access = fc_op_access,
    .init = fc_op_init,
    .destroy = fc_op_destroy,
    .lookup = fc_op_lookup,
    .forget = fc_op_forget,
    .forget_multi = fc_op_forget_multi,
    .getattr = fc_op_getattr,
    .setattr = fc_op_setattr,
    .mknod = fc_op_mknod,
    .mkdir = fc_op_mkdir,
    .unlink = fc_op_unlink,
    .rmdir = fc_op_rmdir,
    .symlink = fc_op_symlink,
    .rename = fc_op_rename,
    .link = fc_op_link,
    .open = fc_op_open,
    .read = fc_op_read,
    .write = fc_op_write,
    .flush = fc_op_flush,
    .release = fc_op_release,
    .fsync = fc_op_fsync,
    .opendir = fc_op_opendir,
    .readdir = fc_op_readdir,
    .readdirplus = fc_op_readdirplus,
    .releasedir = fc_op_releasedir,
    .statfs = fc_op_statfs,
    .ioctl = fc_op_ioctl,
    .setxattr = fc_op_setxattr,
    .getxattr = fc_op_getxattr,
    .listxattr = fc_op_listxattr,
    .removexattr = fc_op_removexattr,
    .create = fc_op_create,
};
