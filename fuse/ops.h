/* fuse/ops.h - the fuse_lowlevel_ops table of the mount. */
#ifndef FUSE_OPS_H
#define FUSE_OPS_H
#include "fuse/inode.h"

/* The handlers; fuse_req_userdata() of every request is the struct fc_fs. */
extern const struct fuse_lowlevel_ops fc_ops;

/* Gives the handlers the session, for notifications to the kernel (call
 * once, before the session loop). */
void fc_ops_set_session(struct fuse_session *se);
/* Fills @st for an inode with attributes @a under the mount's options. */
void fc_fill_stat(const struct fc_fs *fs, fuse_ino_t ino,
                  const struct fc_attr *a, struct stat *st);

#endif /* FUSE_OPS_H */
