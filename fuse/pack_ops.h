/* fuse/pack_ops.h - the fuse_lowlevel_ops of a mount whose prefix holds a
 * pack (see pack_ops.c, fuse/PACK.md). */
#ifndef FUSE_PACK_OPS_H
#define FUSE_PACK_OPS_H
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include "common/compiler.h"

struct fc_pack;
struct fc_s3_conf;

/* The handlers; fuse_req_userdata() is the struct fc_fs, whose pack is
 * set. Read-only: every modifying call answers EROFS. */
extern const struct fuse_lowlevel_ops fc_pack_ops;

/* Fetches and decodes PREFIX.ecfs-pack/index with a throw-away client
 * (before the daemon forks). 0 with *out NULL when there is no index, 0
 * and *out, or -errno (a message printed for a broken index). */
CM_MUST_CHECK int fc_pack_load(const struct fc_s3_conf *sc, const char *prefix,
                               struct fc_pack **out);

#endif /* FUSE_PACK_OPS_H */
