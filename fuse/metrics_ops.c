/* fuse/metrics_ops.c - counts every FUSE request, and times every FUSE
 * operation when metrics are on, by wrapping the operations table (fc_ops
 * or fc_pack_ops) in one that calls through.
 *
 * DESIGN: the handlers reply before they return (fuse/ops.c's rule: each
 * handler sends exactly one reply), so the time from the wrapper's entry to
 * the handler's return is the operation's latency inside ecfs, and no
 * handler needs a line of its own. The table is always wrapped: the counts
 * (.ecfs-stats `fuse_requests`, `fuse_op_*`) are how tests see that a warm
 * pass sends the kernel's requests and nothing more (issue 14); one relaxed
 * atomic add per request. Requests on .ecfs-stats itself are not counted,
 * so reading the counters moves none of them. */
#include "fuse/metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "fuse/stats.h"

static struct fuse_lowlevel_ops orig; /* set once, before the session */
static bool g_timed;                  /* set once, before the session */
/* requests by operation; relaxed atomics, read by fc_metrics_ops_format */
static atomic_ulong g_count[FC_MOP_COUNT];

/* Counts request @op on inode @ino (not the stats file's), then runs
 * @call, timed when metrics are on. */
#define TIMED(op, ino, call)                                                   \
    do {                                                                       \
        if ((ino) != FC_STATS_INO)                                             \
            atomic_fetch_add_explicit(&g_count[op], 1, memory_order_relaxed);  \
        if (g_timed) {                                                         \
            double t0_ = fc_metrics_now();                                     \
            call;                                                              \
            fc_metrics_fuse(op, t0_);                                          \
        } else {                                                               \
            call;                                                              \
        }                                                                      \
    } while (0)

static void w_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    fuse_ino_t key = parent == FUSE_ROOT_ID && strcmp(name, FC_STATS_NAME) == 0
                         ? FC_STATS_INO
                         : parent;

    TIMED(FC_MOP_LOOKUP, key, orig.lookup(req, parent, name));
}

static void w_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    TIMED(FC_MOP_FORGET, ino, orig.forget(req, ino, nlookup));
}

static void w_forget_multi(fuse_req_t req, size_t count,
                           struct fuse_forget_data *forgets)
{
    TIMED(FC_MOP_FORGET, 0, orig.forget_multi(req, count, forgets));
}

static void w_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_GETATTR, ino, orig.getattr(req, ino, fi));
}

static void w_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                      int to_set, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_SETATTR, ino, orig.setattr(req, ino, attr, to_set, fi));
}

static void w_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                    mode_t mode)
{
    TIMED(FC_MOP_MKDIR, parent, orig.mkdir(req, parent, name, mode));
}

static void w_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    TIMED(FC_MOP_UNLINK, parent, orig.unlink(req, parent, name));
}

static void w_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    TIMED(FC_MOP_RMDIR, parent, orig.rmdir(req, parent, name));
}

static void w_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                     fuse_ino_t newparent, const char *newname,
                     unsigned int flags)
{
    TIMED(FC_MOP_RENAME, parent,
          orig.rename(req, parent, name, newparent, newname, flags));
}

static void w_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_OPEN, ino, orig.open(req, ino, fi));
}

static void w_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    TIMED(FC_MOP_READ, ino, orig.read(req, ino, size, off, fi));
}

static void w_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
                    size_t size, off_t off, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_WRITE, ino, orig.write(req, ino, buf, size, off, fi));
}

static void w_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_FLUSH, ino, orig.flush(req, ino, fi));
}

static void w_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_RELEASE, ino, orig.release(req, ino, fi));
}

static void w_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
                    struct fuse_file_info *fi)
{
    TIMED(FC_MOP_FSYNC, ino, orig.fsync(req, ino, datasync, fi));
}

static void w_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_OPENDIR, ino, orig.opendir(req, ino, fi));
}

static void w_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    TIMED(FC_MOP_READDIR, ino, orig.readdir(req, ino, size, off, fi));
}

static void w_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                          off_t off, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_READDIRPLUS, ino, orig.readdirplus(req, ino, size, off, fi));
}

static void w_releasedir(fuse_req_t req, fuse_ino_t ino,
                         struct fuse_file_info *fi)
{
    TIMED(FC_MOP_RELEASEDIR, ino, orig.releasedir(req, ino, fi));
}

static void w_statfs(fuse_req_t req, fuse_ino_t ino)
{
    TIMED(FC_MOP_STATFS, ino, orig.statfs(req, ino));
}

static void w_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_CREATE, parent, orig.create(req, parent, name, mode, fi));
}

static void w_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                    struct fuse_file_info *fi, unsigned flags,
                    const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
    TIMED(
        FC_MOP_IOCTL, ino,
        orig.ioctl(req, ino, cmd, arg, fi, flags, in_buf, in_bufsz, out_bufsz));
}

static void w_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    TIMED(FC_MOP_ACCESS, ino, orig.access(req, ino, mask));
}

static void w_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                       size_t size)
{
    TIMED(FC_MOP_XATTR, ino, orig.getxattr(req, ino, name, size));
}

static void w_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    TIMED(FC_MOP_XATTR, ino, orig.listxattr(req, ino, size));
}

static void w_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                       const char *value, size_t size, int flags)
{
    TIMED(FC_MOP_XATTR, ino, orig.setxattr(req, ino, name, value, size, flags));
}

static void w_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    TIMED(FC_MOP_XATTR, ino, orig.removexattr(req, ino, name));
}

static void w_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                    mode_t mode, dev_t rdev)
{
    TIMED(FC_MOP_MKNOD, parent, orig.mknod(req, parent, name, mode, rdev));
}

static void w_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                      const char *name)
{
    TIMED(FC_MOP_SYMLINK, parent, orig.symlink(req, link, parent, name));
}

static void w_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                   const char *newname)
{
    TIMED(FC_MOP_LINK, ino, orig.link(req, ino, newparent, newname));
}

/* See metrics.h. */
void fc_metrics_wrap_ops(const struct fuse_lowlevel_ops *in,
                         struct fuse_lowlevel_ops *out, bool timed)
{
    orig = *in;
    g_timed = timed;
    *out = *in;
#define W(f)                                                                   \
    if (in->f)                                                                 \
    out->f = w_##f
    W(lookup);
    W(forget);
    W(forget_multi);
    W(getattr);
    W(setattr);
    W(mkdir);
    W(unlink);
    W(rmdir);
    W(rename);
    W(open);
    W(read);
    W(write);
    W(flush);
    W(release);
    W(fsync);
    W(opendir);
    W(readdir);
    W(readdirplus);
    W(releasedir);
    W(statfs);
    W(create);
    W(ioctl);
    W(access);
    W(getxattr);
    W(listxattr);
    W(setxattr);
    W(removexattr);
    W(mknod);
    W(symlink);
    W(link);
#undef W
}

/* See metrics.h. */
int fc_metrics_ops_format(char *out, size_t cap)
{
    unsigned long v[FC_MOP_COUNT], all = 0;
    size_t n;
    int r;

    for (int op = 0; op < FC_MOP_COUNT; op++) {
        v[op] = atomic_load_explicit(&g_count[op], memory_order_relaxed);
        all += v[op];
    }
    r = snprintf(out, cap, " fuse_requests=%lu", all);
    if (r < 0)
        return r;
    n = (size_t)r;
    for (int op = 0; op < FC_MOP_COUNT; op++) {
        r = snprintf(out + (n < cap ? n : cap), n < cap ? cap - n : 0,
                     " fuse_op_%s=%lu", fc_metrics_op_name(op), v[op]);
        if (r < 0)
            return r;
        n += (size_t)r;
    }
    return (int)n;
}
