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

struct fc_s3;

/* Fetches and decodes PREFIX.ecfs-pack/index with a throw-away client
 * (before the daemon forks). With @cache_dir the index is kept as a file
 * in CACHE_DIR/pack/ and mapped (a later mount of the same index version
 * reads no byte of it again); without, in memory. 0 with *out NULL when
 * there is no index, 0 and *out, or -errno (a message printed for a
 * broken index). */
CM_MUST_CHECK int fc_pack_load(const struct fc_s3_conf *sc, const char *prefix,
                               const char *cache_dir, struct fc_pack **out);

/* HEAD + GET + decode of the index @key through @s (the packer and the
 * mount's reloads use it too): with @dir (an existing cache directory)
 * kept in DIR/pack/ under a name from @ident (endpoint and bucket), the
 * key and the ETag, and mapped. 1 when @same_etag is given and the index
 * still has it (nothing fetched); 0 and *out; -ENOENT (no index); -EINVAL
 * (a broken index: @why says why); other -errno. */
CM_MUST_CHECK int fc_pack_fetch(struct fc_s3 *s, const char *key,
                                const char *dir, const char *ident,
                                const char *same_etag, struct fc_pack **out,
                                const char **why);

#endif /* FUSE_PACK_OPS_H */
