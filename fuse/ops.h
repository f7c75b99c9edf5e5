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
/* Stores attributes @m of file @key (@size bytes) by a copy onto itself
 * (fc_s3_copy_sized_if: CopyObject, a multipart copy above 5 GiB): first
 * tied to version @known (the ETag the caller knows; NULL or "": none,
 * and above 5 GiB tied to the version its HEAD finds), then, when @key is
 * another version by now, a copy of that one, as before. Up to 5 GiB the
 * tie is the server's x-amz-copy-source-if-match, which Ceph RGW 16.2 and
 * s3rver ignore: the mount's first tied copy probes it (an ETag no object
 * has: 412 or a plain copy), and where it is ignored no copy is tied. A copy
 * tied to a version is that version's bytes under a new ETag (a multipart-made
 * object's changes): the blocks cached, the live inode and the open
 * handles of that version take the new ETag, so reads of files opened
 * before a chmod, chown or touch go on (an overwrite by another client
 * still fails them with EIO). A read that fails while such a copy of its
 * key is under way waits for it, then retries once with the new ETag.
 * 0 and the new ETag in @etag, or -errno (-ESTALE: the object changed
 * during the copy). */
CM_MUST_CHECK int fc_copy_self(struct fc_fs *fs, const char *key, uint64_t size,
                               const struct fc_s3_meta *m, const char *known,
                               char *etag);

#endif /* FUSE_OPS_H */
