/* fuse/metrics_ops.c - times every FUSE operation by wrapping the
 * operations table (fc_ops or fc_pack_ops) in one that calls through.
 *
 * DESIGN: the handlers reply before they return (fuse/ops.c's rule: each
 * handler sends exactly one reply), so the time from the wrapper's entry to
 * the handler's return is the operation's latency inside ecfs, and no
 * handler needs a line of its own. The table is only wrapped when metrics
 * are asked for; without them the session runs the original table. */
#include "fuse/metrics.h"

#include <string.h>

static struct fuse_lowlevel_ops orig; /* set once, before the session */

#define TIMED(op, call)                                                        \
    do {                                                                       \
        double t0_ = fc_metrics_now();                                         \
        call;                                                                  \
        fc_metrics_fuse(op, t0_);                                              \
    } while (0)

static void w_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    TIMED(FC_MOP_LOOKUP, orig.lookup(req, parent, name));
}

static void w_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    TIMED(FC_MOP_FORGET, orig.forget(req, ino, nlookup));
}

static void w_forget_multi(fuse_req_t req, size_t count,
                           struct fuse_forget_data *forgets)
{
    TIMED(FC_MOP_FORGET, orig.forget_multi(req, count, forgets));
}

static void w_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_GETATTR, orig.getattr(req, ino, fi));
}

static void w_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                      int to_set, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_SETATTR, orig.setattr(req, ino, attr, to_set, fi));
}

static void w_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                    mode_t mode)
{
    TIMED(FC_MOP_MKDIR, orig.mkdir(req, parent, name, mode));
}

static void w_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    TIMED(FC_MOP_UNLINK, orig.unlink(req, parent, name));
}

static void w_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    TIMED(FC_MOP_RMDIR, orig.rmdir(req, parent, name));
}

static void w_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                     fuse_ino_t newparent, const char *newname,
                     unsigned int flags)
{
    TIMED(FC_MOP_RENAME,
          orig.rename(req, parent, name, newparent, newname, flags));
}

static void w_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_OPEN, orig.open(req, ino, fi));
}

static void w_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    TIMED(FC_MOP_READ, orig.read(req, ino, size, off, fi));
}

static void w_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
                    size_t size, off_t off, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_WRITE, orig.write(req, ino, buf, size, off, fi));
}

static void w_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_FLUSH, orig.flush(req, ino, fi));
}

static void w_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_RELEASE, orig.release(req, ino, fi));
}

static void w_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
                    struct fuse_file_info *fi)
{
    TIMED(FC_MOP_FSYNC, orig.fsync(req, ino, datasync, fi));
}

static void w_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_OPENDIR, orig.opendir(req, ino, fi));
}

static void w_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    TIMED(FC_MOP_READDIR, orig.readdir(req, ino, size, off, fi));
}

static void w_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                          off_t off, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_READDIRPLUS, orig.readdirplus(req, ino, size, off, fi));
}

static void w_releasedir(fuse_req_t req, fuse_ino_t ino,
                         struct fuse_file_info *fi)
{
    TIMED(FC_MOP_RELEASEDIR, orig.releasedir(req, ino, fi));
}

static void w_statfs(fuse_req_t req, fuse_ino_t ino)
{
    TIMED(FC_MOP_STATFS, orig.statfs(req, ino));
}

static void w_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, struct fuse_file_info *fi)
{
    TIMED(FC_MOP_CREATE, orig.create(req, parent, name, mode, fi));
}

/* See metrics.h. */
void fc_metrics_wrap_ops(const struct fuse_lowlevel_ops *in,
                         struct fuse_lowlevel_ops *out)
{
    orig = *in;
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
#undef W
}
