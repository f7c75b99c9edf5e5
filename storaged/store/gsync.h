/* storaged/store/gsync.h - group commit: the durability barriers of a
 * commit, shared between every commit that waits at the same time.
 *
 * A commit writes its files, then asks for a barrier over what it wrote
 * (items: a drive and an open file or directory). How a drive is synced
 * depends on its filesystem, decided once per filesystem (st_dev):
 *   fs mode    the drive directory is the mount point of its own
 *              filesystem (a disk given to storaged, the normal layout):
 *              one syncfs(2) of that filesystem covers every item on it,
 *              and commits that arrive while a syncfs runs share the next
 *              one, so N PUTs in flight cost about two syncfs per
 *              filesystem between them instead of 32 fsyncs each;
 *   file mode  a directory on a filesystem shared with others (the root
 *              filesystem of a test or `make run`), where a syncfs would
 *              flush everyone's dirty data: each item's fd is fsynced,
 *              all in one io_uring batch.
 * STORAGED_SYNC_MODE=fs|file forces one mode for every drive (tests).
 *
 * Errors (fs mode). syncfs reports a writeback error once per open file,
 * and a round may write back (and consume the error of) pages another
 * commit wrote. So a failed round is remembered: stor_gsync_mark() before
 * the writes, and a barrier fails every item whose filesystem had a failed
 * round since that mark. Conservative: it may fail a commit whose own
 * pages were fine, never the other way round. A drive whose path moved to
 * another filesystem (a disk swapped under it) fails with -ENODEV and is
 * regrouped. */
#ifndef STORAGED_STORE_GSYNC_H
#define STORAGED_STORE_GSYNC_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stor_gsync;

/* Barriers for the drive directories @paths[0..n) (copied). Groups and
 * their threads are made on first use. NULL on ENOMEM. */
struct stor_gsync *stor_gsync_create(const char *const *paths, size_t n);
/* Stops the threads (no barrier may be running) and frees. NULL is fine. */
void stor_gsync_destroy(struct stor_gsync *g);
/* Call before writing what a later barrier must cover; makes sure the
 * drives @drv[0..n) have their filesystem group (an fd opened now, so a
 * writeback error after this call is seen). Returns the mark to pass to
 * stor_gsync_barrier(). */
uint64_t stor_gsync_mark(struct stor_gsync *g, const size_t *drv, size_t n);
/* Is drive @d synced by syncfs (fs mode)? Then its barrier items need no
 * fd. Joins its group when it has none yet. */
bool stor_gsync_is_fs(struct stor_gsync *g, size_t d);

/* A file many commits write to at once (a drive's extent file): in file
 * mode, barriers that arrive together share one fsync of it instead of
 * one each. A barrier item naming it asks for an fsync that *starts*
 * after the call (one already running may have begun before the caller's
 * writes); at most one runs at a time, and every item that asked while it
 * ran shares the next one. A failed fsync fails every item waiting for
 * that one or a later one (the file's writeback error is reported once,
 * to whoever fsyncs first). Every item naming one stor_gsync_file must
 * carry an fd of that one file. */
struct stor_gsync_file;
/* NULL on ENOMEM. */
struct stor_gsync_file *stor_gsync_file_create(void);
/* No barrier may be using it. NULL is fine. */
void stor_gsync_file_destroy(struct stor_gsync_file *f);

/* One thing a barrier makes durable. */
struct stor_sync_item {
    size_t drive;
    int fd; /* borrowed: the file or directory to fsync; may be -1 on a
             * drive in fs mode */
    struct stor_gsync_file *shared; /* borrowed, or NULL: fd is that file,
                                     * its fsync shared (file mode); the
                                     * items of one barrier naming one
                                     * file share one fsync of it */
    bool datasync;                  /* fdatasync is enough (file mode) */
    int res;                        /* out: 0 or -errno */
};
/* Waits until everything this thread wrote to the items' drives before the
 * call is durable (fs mode) and each item's fd is fsynced (file mode). */
void stor_gsync_barrier(struct stor_gsync *g, uint64_t mark,
                        struct stor_sync_item *it, size_t n);
/* stor_gsync_barrier() that calls @fn(@arg) once while it waits: after
 * the fsyncs it runs itself were submitted (or, with none, before waiting
 * for another's fsync or a syncfs round). What @fn writes is not covered
 * by this barrier. @fn must not use this thread's io_uring (stor_io_run):
 * plain syscalls only (drive.h, stor_io_run_during). */
void stor_gsync_barrier_during(struct stor_gsync *g, uint64_t mark,
                               struct stor_sync_item *it, size_t n,
                               void (*fn)(void *), void *arg);

struct stor_gsync_stats {
    uint64_t rounds;   /* syncfs calls made (fs mode) */
    uint64_t barriers; /* stor_gsync_barrier calls */
    uint64_t fsyncs;   /* fds fsynced (file mode) */
    uint64_t shared;   /* items covered by another barrier's fsync of a
                        * shared file (file mode) */
    uint64_t failures; /* failed rounds and fsyncs */
};
void stor_gsync_get_stats(struct stor_gsync *g, struct stor_gsync_stats *out);

#endif /* STORAGED_STORE_GSYNC_H */
