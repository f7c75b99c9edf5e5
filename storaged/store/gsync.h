/* storaged/store/gsync.h - group commit: one durability barrier per
 * filesystem shared by every commit that waits at the same time, instead of
 * one fsync per file.
 *
 * A commit writes its files, then asks for a barrier over the drives it
 * wrote to. The barrier returns once a syncfs(2) of each drive's filesystem
 * has *started after the call* and finished, so everything the caller wrote
 * before calling is on stable storage (data, inodes and directory entries:
 * syncfs writes back every dirty page and commits the journal). Concurrent
 * commits that arrive while a syncfs runs share the next one, so N PUTs in
 * flight cost about two syncfs per filesystem between them, not 48 fsyncs
 * each (FORMAT.md "Writes").
 *
 * Errors. syncfs reports a writeback error once per open file, and a round
 * may write back (and consume the error of) pages another commit wrote.
 * So a failed round is remembered: stor_gsync_mark() before the writes, and
 * a barrier fails every drive whose filesystem had a failed round since that
 * mark. Conservative: it may fail a commit whose own pages were fine, never
 * the other way round. A drive whose path moved to another filesystem (a
 * disk swapped under it) fails the barrier with -ENODEV and is regrouped. */
#ifndef STORAGED_STORE_GSYNC_H
#define STORAGED_STORE_GSYNC_H
#include "common/compiler.h"
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
/* Waits until everything this thread wrote to drives @drv[0..n) before the
 * call is durable. res[i] (for drv[i]): 0, or -errno (the syncfs of its
 * filesystem failed since @mark, or the drive is not reachable). */
void stor_gsync_barrier(struct stor_gsync *g, uint64_t mark, const size_t *drv,
                        size_t n, int *res);

struct stor_gsync_stats {
    uint64_t rounds;   /* syncfs calls made */
    uint64_t barriers; /* stor_gsync_barrier calls */
    uint64_t failures; /* failed rounds */
};
void stor_gsync_get_stats(struct stor_gsync *g, struct stor_gsync_stats *out);

#endif /* STORAGED_STORE_GSYNC_H */
