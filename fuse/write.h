/* fuse/write.h - the write path: one fc_wfile per open handle that may
 * write. A new file written front to back is streamed as a multipart
 * upload (parts sent in parallel by upload workers while the writer keeps
 * writing; one PUT when it ends within the first part); every other
 * pattern works on a staging file under stage_dir, uploaded at commit.
 * The commit (close, fsync of a staged file) returns the upload's error;
 * a failed multipart upload is aborted. */
#ifndef FUSE_WRITE_H
#define FUSE_WRITE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/compiler.h"

struct fc_fs;
struct fc_inode;
struct fc_wfile;
struct fc_s3_meta;

/* Puts @m, the attributes a file (@is_dir false) or directory is to
 * store, in the form ecfs stores them: none of mode, uid, gid and mtime
 * when they show what the mount shows for an object without them (mode
 * 0666 or 0777 less the umask, the mount's uid and gid) and no mtime is
 * set explicitly; else mode, uid and gid all (the defaults filling in),
 * so a mount with other defaults shows the same. FC_META_DIRATTRS stays
 * as it is. An object that stores none of them needs no HEAD to be shown
 * (ops.c, fuse/README.md "Attributes"). */
void fc_meta_settle(const struct fc_fs *fs, struct fc_s3_meta *m, bool is_dir);
/* Whether @m (settled) stores any of mode, uid, gid and mtime. */
bool fc_meta_stores(const struct fc_s3_meta *m);

/* Opens a write handle on @in. @flags are the open(2) flags; @created:
 * the file was just created (it has no object yet). A handle starts
 * empty (and dirty: the commit writes the object even if nothing is
 * written) when created or opened with O_TRUNC; it streams when it is
 * also write-only, and stages otherwise. One opened O_RDWR (not
 * O_APPEND) too starts in memory as a stream, and is staged before it
 * would send a part (past one part), at fsync, or at any other pattern
 * a stream is staged for: a small one (rsync's temp file) needs no
 * staging file. 0 and *@out (one reference), or -errno. */
CM_MUST_CHECK int fc_write_open(struct fc_fs *fs, struct fc_inode *in,
                                int flags, bool created, struct fc_wfile **out);
/* Writes @len bytes at @off. Returns @len or -errno: -EFBIG past
 * stage_max (logged), -ENOSPC/-EIO from the staging file, the error of a
 * part that failed to upload. */
CM_MUST_CHECK ssize_t fc_write(struct fc_wfile *wf, const char *buf, size_t len,
                               uint64_t off);
/* Reads what the handle's file holds now (the bytes written so far):
 * returns the count (short at EOF) or -errno; -EIO for a range of a
 * streamed file already sent (logged: readable once closed). */
CM_MUST_CHECK ssize_t fc_write_read(struct fc_wfile *wf, char *buf, size_t len,
                                    uint64_t off);
/* Sets the size (ftruncate; a streamed file is staged unless nothing
 * changes). 0 or -errno (-EFBIG past stage_max). */
CM_MUST_CHECK int fc_write_truncate(struct fc_wfile *wf, uint64_t size);
/* Commits when dirty: uploads, updates the inode's attributes and the
 * mount's notes. 0 or the upload's -errno (the upload is aborted; the
 * handle stays dirty only when a staged retry can still work). */
CM_MUST_CHECK int fc_write_flush(struct fc_wfile *wf);
/* With -o async_close, flush of a new file that fits one PUT of up to
 * 1 MiB only queues its commit to the upload workers and returns 0 (the
 * error is logged, close() has returned); everything else commits here.
 * Operations that must see the object first call fc_write_settle. */
/* fsync: a staged file is committed (fc_write_flush), and so is an
 * O_RDWR one still in memory (staged first); a streamed one
 * waits for the parts sent so far and returns their error: its object
 * appears at close (documented in man/ecfs.1). */
CM_MUST_CHECK int fc_write_fsync(struct fc_wfile *wf);
/* Whether the last commit changed the object (the caller then drops the
 * kernel's cached pages of the inode). Clears the flag. */
bool fc_write_take_changed(struct fc_wfile *wf);
/* Ends the handle: commits if still dirty (the error can only be logged),
 * aborts an unfinished upload, drops the reference of fc_write_open. */
void fc_write_release(struct fc_wfile *wf);

/* Frees a handle still open when the session ended (no S3 request, no
 * inode touched: both are gone); what it held is lost, and logged. */
void fc_write_discard(struct fc_wfile *wf);

/* Returns a new reference to the newest open write handle of @in, or NULL:
 * reads by other handles go through it (fc_write_read). */
struct fc_wfile *fc_write_find(struct fc_fs *fs, struct fc_inode *in);
void fc_wfile_unref(struct fc_wfile *wf);
/* chmod/chown/utimens of closed file or directory marker @key (an object
 * of @size bytes, 0 if not known: then at most 5 GiB): attributes @m are
 * stored about a second later (a copy onto itself, fc_s3_copy_sized, or a
 * new empty marker for a directory that is only a prefix; a failure is
 * logged), unless a rename takes them first (fc_write_meta_take), or an
 * unlink, rmdir or commit of @key drops them. At unmount the pending ones
 * are stored. 0 or -ENOMEM. */
CM_MUST_CHECK int fc_write_meta_later(struct fc_fs *fs, const char *key,
                                      const struct fc_s3_meta *m,
                                      uint64_t size);
/* Removes @key's pending attributes: true and @m (when non-NULL) filled
 * if there were some. With @m (a rename), when there were none, first
 * waits for a store of them under way (taken by the janitor). */
bool fc_write_meta_take(struct fc_fs *fs, const char *key,
                        struct fc_s3_meta *m);
/* Stores now the pending attributes of every key that starts with
 * @prefix (a directory rename copies them next), and waits for those
 * the janitor was storing already. */
void fc_write_meta_flush(struct fc_fs *fs, const char *prefix);
/* chmod/chown/utimens of @in: when a handle of it still has a commit to
 * make, its upload stores the attributes @m and true is returned; false
 * when there is none (the caller stores them itself). */
bool fc_write_set_meta(struct fc_fs *fs, struct fc_inode *in,
                       const struct fc_s3_meta *m);
/* Truncates the file of @in to @size without a handle (truncate(2)):
 * through an open write handle when there is one, else staged and
 * uploaded at once. 0 or -errno. */
CM_MUST_CHECK int fc_write_truncate_inode(struct fc_fs *fs, struct fc_inode *in,
                                          uint64_t size);
/* Commits now every queued async_close commit of @key, or of every key
 * under @key when it ends in '/' (unlink, rename, rmdir, a new writer: the
 * upload must land before them). No-op without -o async_close. */
void fc_write_settle(struct fc_fs *fs, const char *key);
/* rename of a file whose async_close commit has not started: the commit
 * is retargeted to @dst (one PUT there; no copy, no delete) and true is
 * returned; false when there is none, or one already uploaded @src (the
 * caller settles and copies). */
bool fc_write_async_rename(struct fc_fs *fs, const char *src, const char *dst);
/* Waits until no async_close commit is queued or running (the session
 * ended: before the S3 client is cut). */
void fc_write_async_drain(void);
/* The file of @in was unlinked: its open handles upload nothing. */
void fc_write_unlinked(struct fc_fs *fs, struct fc_inode *in);
/* The file of @in was renamed to @key: its open handles commit there. A
 * multipart upload under way is aborted and its parts sent again to @key
 * from the tee (nothing is ever written under the old name); without a
 * tee, that handle's close() fails with EIO. */
void fc_write_renamed(struct fc_fs *fs, struct fc_inode *in, const char *key);
/* Before a rename of the file of @in: 0, or -EBUSY (logged) when a handle
 * streams a multipart upload with no local copy of the parts sent (past
 * stage_max, stage_dir full): it could not move to the new name. */
int fc_write_rename_ok(struct fc_fs *fs, struct fc_inode *in);
/* Before a rename of directory @src (a key ending in '/'): 0, or -EBUSY
 * (logged) when a handle of a file under it could not follow (as
 * fc_write_rename_ok); checked before anything is copied. */
int fc_write_dir_rename_ok(struct fc_fs *fs, const char *src);
/* Directory @src was renamed to @dst (both ending in '/'): the open
 * handles of files under it commit under @dst, their uploads moved as by
 * fc_write_renamed (nothing is ever written under @src). */
void fc_write_dir_renamed(struct fc_fs *fs, const char *src, const char *dst);

/* Part size of part @partno (1-based) for base size @base: doubles every
 * 1000 parts (10,000 parts of an 8 MiB base reach ~8 TiB), at most 5 GiB. */
size_t fc_write_part_size(size_t base, unsigned partno);

/* Starts @nthreads upload workers (after daemonizing). 0 or -errno. */
CM_MUST_CHECK int fc_upload_start(struct fc_fs *fs, unsigned nthreads);
/* Stops and joins them; no handle may be open. */
void fc_upload_stop(struct fc_fs *fs);
/* Appends " writes=N ..." counters to @out (@cap bytes); snprintf's
 * count. */
int fc_write_stats_format(struct fc_fs *fs, char *out, size_t cap);

#endif /* FUSE_WRITE_H */
