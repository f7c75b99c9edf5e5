/* storaged/store/drive.h - drive directories: argument expansion, the per-drive
 * format record, online state and counters, and batched I/O through
 * liburing (one submission for all the shard I/O of a request).
 * A struct stor_drive is owned by the store; its counters are atomics and
 * its path is immutable after creation. */
#ifndef STORAGED_STORE_DRIVE_H
#define STORAGED_STORE_DRIVE_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STOR_SYS_DIR ".ecfs.sys" /* per-drive system area */
#define STOR_FORMAT  ".ecfs.sys/format"
#define STOR_TMP_DIR ".ecfs.sys/tmp"
#define STOR_MPU_DIR ".ecfs.sys/mpu"
#define STOR_BUCKETS "b"

/* Expands "/srv/d{1...16}" (any number of {A...B} groups, zero padding
 * kept when A has leading zeros) into *out (malloc'd array of malloc'd
 * strings, free with stor_drives_free). An argument without braces is
 * copied. 0, -EINVAL (malformed or more than 4096 results), -ENOMEM. */
CM_MUST_CHECK int stor_drives_expand(const char *arg, char ***out, size_t *n);
void stor_drives_free(char **v, size_t n);

struct stor_drive {
    char *path;   /* owned; immutable after creation */
    int set, pos; /* erasure set and position in it; immutable */
    bool online;  /* atomic access; false after an I/O failure or probe miss */
    bool stale;   /* atomic; came back after an outage, heal pending */
    uint64_t reads, writes, read_bytes, write_bytes, errors; /* atomics */
    /* obj_drive_fail's rate limit (atomics): the second its window began,
     * lines logged in it, errors not logged since the last line */
    int64_t elog_sec;
    uint32_t elog_n;
    uint64_t elog_quiet;
};

/* Format record kept in DRIVE/.ecfs.sys/format (text, key=value lines). */
struct stor_format {
    char deployment[33]; /* 32 hex chars */
    int set, pos, nsets, set_size, k, m;
};
/* Reads a drive's format record: 0, -ENOENT (unformatted), -EBADMSG. */
CM_MUST_CHECK int stor_format_read(const char *drive, struct stor_format *f);
/* Writes it atomically (tmp + rename + fsync). 0 or -errno. */
CM_MUST_CHECK int stor_format_write(const char *drive,
                                    const struct stor_format *f);

/* One I/O of a batch. op: 'r' pread, 'w' pwrite, 's' fsync, 'd'
 * fdatasync. */
struct stor_io {
    int fd;
    char op;
    void *buf;
    size_t len;
    uint64_t off;
    ssize_t res; /* out: bytes done (all of len unless EOF) or -errno */
};
/* Runs all @n I/Os, submitted together through this thread's io_uring
 * (plain syscalls when io_uring is unavailable). Short reads are
 * completed; a read hitting EOF early returns the bytes it got. Always
 * returns after every I/O finished. */
void stor_io_run(struct stor_io *ios, size_t n);
/* stor_io_run() with plain syscalls, one I/O after the other: for a few
 * small buffered writes, cheaper than io_uring's punt of each to a worker
 * thread (ext4 has no async buffered write). */
void stor_io_run_sync(struct stor_io *ios, size_t n);
/* Submits the @n I/Os, calls @fn(@arg) while they run, then waits for
 * them: a commit overlaps its journal's fdatasync with work that need not
 * precede it. @fn must not use this thread's ring (no stor_io_run; plain
 * syscalls and stor_io_run_sync are fine). Where they cannot be submitted
 * together (no io_uring, more than a ring's depth), runs them first and
 * then @fn. */
void stor_io_run_during(struct stor_io *ios, size_t n, void (*fn)(void *),
                        void *arg);

/* Writes all of @len bytes at @off. 0 or -errno. */
CM_MUST_CHECK int stor_pwrite_all(int fd, const void *p, size_t len,
                                  uint64_t off);
/* fsyncs a directory by path. 0 or -errno. */
int stor_fsync_dir(const char *path);
/* Replaces DRIVE/@name (a path inside STOR_SYS_DIR, e.g. STOR_FORMAT) with
 * the @len bytes at @body atomically: a temp file beside it, fsync,
 * rename, fsync of STOR_SYS_DIR. On failure the old file is untouched and
 * the temp file removed. 0 or -errno. */
CM_MUST_CHECK int stor_sys_file_replace(const char *drive, const char *name,
                                        const void *body, size_t len);
/* mkdir -p for @path (mode 0755), but only inside a formatted drive: the
 * deepest existing ancestor of @path must be a directory that is, or lies
 * under, a directory holding STOR_SYS_DIR. A drive directory that vanished
 * (failed disk, unmounted mount point) is never recreated on the parent
 * filesystem: that returns -ENODEV. 0 or -errno. */
int stor_mkdirs(const char *path);
/* rm -rf @path; ignores a missing path. 0 or -errno. */
int stor_rmtree(const char *path);

#endif /* STORAGED_STORE_DRIVE_H */
