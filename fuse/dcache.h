/* fuse/dcache.h - the persistent on-disk block cache (-o cache_dir=DIR).
 * Blocks are appended, several per write, to segment files under DIR/v2/
 * with a small index file beside each; a mount reads the indexes into a
 * table in memory (under 100 bytes per block). Each block is keyed by
 * (endpoint, bucket, key, ETag, block size, block index) and checksummed,
 * so a torn or corrupt record is dropped and fetched again, never served.
 * It survives unmount, crash and reboot: the next mount serves a block
 * without a GET when the listing still gives the same ETag. Eviction is
 * least-recently-used by segment under a byte bound and a free-space
 * floor. Every disk error (ENOSPC, EIO) degrades to a miss. One mount per
 * directory at a time (a lock file); a second one is refused with a clear
 * message. */
#ifndef FUSE_DCACHE_H
#define FUSE_DCACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

struct fc_dcache;

struct fc_dcache_conf {
    const char *dir;      /* created if absent */
    uint64_t max_bytes;   /* bound on the cache's files (cache_dir_size) */
    const char *endpoint; /* both part of every key */
    const char *bucket;
};

/* Opens (creates) the cache directory, takes its lock and reads its
 * segments' indexes (entries torn by a crash are dropped). Prints the
 * reason to stderr on failure: -EBUSY when another mount holds the lock,
 * else the errno of the failed call. No thread is started. */
CM_MUST_CHECK int fc_dcache_open(const struct fc_dcache_conf *conf,
                                 struct fc_dcache **out);
/* Starts the writer thread (after fuse_daemonize; it also evicts, and
 * removes a cache of the old layout, DIR/v1) and writes our pid into the
 * lock file. 0 or -errno. */
CM_MUST_CHECK int fc_dcache_start(struct fc_dcache *dc);
/* Stops the thread, releases the lock, frees @dc (NULL is a no-op). The
 * files stay. */
void fc_dcache_close(struct fc_dcache *dc);

/* Reads block @idx (block size @bs; 0 = a whole object) of (key, etag):
 * at most @want bytes. Returns 0 with *data (from fc_cache_buf_alloc, or
 * NULL when *len is 0; the caller owns it) and *len, or -ENOENT on a miss
 * (also when more than @want bytes are stored). A record that fails its
 * checks is dropped and is a miss. An empty @etag is
 * always a miss (an unknown version cannot be validated). */
CM_MUST_CHECK int fc_dcache_get(struct fc_dcache *dc, const char *key,
                                const char *etag, uint64_t idx, size_t bs,
                                size_t want, char **data, size_t *len);
/* Stores a block now (best effort: an error only counts). A block held
 * already is not stored again (same id, same bytes). */
void fc_dcache_put(struct fc_dcache *dc, const char *key, const char *etag,
                   uint64_t idx, size_t bs, const void *data, size_t len);
/* Called by the writer thread once a queued store's bytes are copied
 * into its batch (or dropped): the caller's @data may go. */
typedef void fc_dcache_done_fn(void *ctx, void *arg);
/* Queues the store of fc_dcache_put for the writer thread, so a reader
 * never waits on the disk: @data stays valid until @done(@ctx, @arg).
 * Returns false, queueing nothing and never calling @done, when the thread
 * is not running (store it with fc_dcache_put then), or when
 * FC_DCACHE_QUEUE bytes are queued already: the block is then not cached
 * (counted as dropped; a later read fetches and stores it), so a disk
 * slower than the network never slows the first epoch down. */
#define FC_DCACHE_QUEUE (32u << 20)
bool fc_dcache_put_async(struct fc_dcache *dc, const char *key,
                         const char *etag, uint64_t idx, size_t bs,
                         const void *data, size_t len, fc_dcache_done_fn *done,
                         void *ctx, void *arg);
/* Removes blocks [0, nblocks) of (key, etag, bs): an object replaced
 * through this mount (also for the next mount: a drop entry in the
 * index; the bytes go with their segment). */
void fc_dcache_drop(struct fc_dcache *dc, const char *key, const char *etag,
                    size_t bs, uint64_t nblocks);
/* Appends " dcache_hits=N dcache_misses=N dcache_stores=N
 * dcache_store_errors=N dcache_store_dropped=N dcache_corrupt=N
 * dcache_evicted=N dcache_bytes=N
 * dcache_files=N" (files: blocks held; bytes: of segments and indexes) to
 * @out (room for @cap); snprintf's return. */
int fc_dcache_stats_format(struct fc_dcache *dc, char *out, size_t cap);

#endif /* FUSE_DCACHE_H */
