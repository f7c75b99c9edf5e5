/* fuse/stats.h - the hidden .ecfs-stats file at a mount's root: the
 * client's counters as text, one "name value" line each (names in
 * fuse/README.md), and the `ecfs stats` command that reads it.
 *
 * How it is served (stats.c): every LOOKUP and OPEN of the file takes a
 * new snapshot of the counters; GETATTR reports that snapshot's length and
 * time (a new one only once it is a second old), so the size the kernel
 * holds is the size of the bytes a READ returns. An OPEN that reaches us
 * gets direct_io and its own copy (a read at offset 0 after the first read
 * takes a fresh one), so a reader reading in small pieces sees one
 * snapshot. On a ro mount the
 * kernel may skip OPEN (no_open): reads then go through the page cache,
 * which the new mtime of each snapshot invalidates (auto_inval_data). */
#ifndef FUSE_STATS_H
#define FUSE_STATS_H
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
#include <stddef.h>

#include "common/compiler.h"

struct fc_fs;

#define FC_STATS_NAME                                                          \
    "."                                                                        \
    "ecfs-stats"
#define FC_STATS_INO ((fuse_ino_t)UINT64_MAX - 1)
/* the most bytes of text (whole lines; the counters take about 1 KiB) */
#define FC_STATS_CAP 8192

/* Writes the counters of @fs into @out as " name=value" pairs (what the
 * area formatters fc_s3_stats_format & co. produce); snprintf's return. */
typedef int (*fc_stats_fmt_fn)(struct fc_fs *fs, char *out, size_t cap);

/* Turns " a=1 b=2" into "a 1\nb 2\n" in @out (@cap bytes, NUL-terminated);
 * pairs without '=' are skipped, a pair that does not fit whole is left
 * out. Returns the length written. */
size_t fc_stats_lines(const char *flat, char *out, size_t cap);

/* LOOKUP of the file: a new snapshot, its attributes in @e (timeouts 0, so
 * the kernel asks again at every path walk). */
void fc_stats_entry(struct fc_fs *fs, fc_stats_fmt_fn fmt,
                    struct fuse_entry_param *e);

/* GETATTR: the current snapshot's attributes (a new one if it is a second
 * old or there is none). */
void fc_stats_attr(struct fc_fs *fs, fc_stats_fmt_fn fmt, struct stat *st);

/* Valid replies: fuse_reply_open, fuse_reply_err. A read-only open: a
 * handle with a new snapshot in fi->fh, direct_io. */
void fc_stats_open(fuse_req_t req, struct fc_fs *fs, fc_stats_fmt_fn fmt,
                   struct fuse_file_info *fi);

/* Valid replies: fuse_reply_buf, fuse_reply_err. From the handle's
 * snapshot (renewed by a read at offset 0 other than the first), or
 * without a handle (no_open) from the current one. */
void fc_stats_read(fuse_req_t req, struct fc_fs *fs, fc_stats_fmt_fn fmt,
                   size_t size, off_t off, struct fuse_file_info *fi);

/* Frees the handle of fc_stats_open (fi->fh, may be 0); no reply. */
void fc_stats_release(struct fuse_file_info *fi);

/* `ecfs stats MOUNT [-w SECONDS [-c COUNT]]` (argv[0] is "stats"): exit
 * status. */
CM_MUST_CHECK int fc_stats_main(int argc, char **argv);

#endif /* FUSE_STATS_H */
