/* storaged/s3/zcache.h - checked object bodies held as pipe pages, for
 * zero-copy GETs from memory (FORMAT.md "Zero-copy GETs", the body cache).
 * One cache for the whole server (a mutex), bounded in bytes, LRU, with an
 * admission filter: a body is put the second time it is offered within a
 * recent window, so a pass over more objects than fit costs no copies.
 *
 * An entry is the pages of one pipe, filled once: the caller copies bytes
 * that have just passed their checks (header and CRC of every shard) into
 * fresh anonymous pages (stor_zcache_region), which are vmspliced into the
 * pipe and unmapped. From then on nothing maps them: no write, no punch
 * and no reclaim can change them, so a hit sends them without a checksum.
 * A hit tee(2)s the pipe into the connection's pipe (page references, no
 * copy) and the transport splices that to the socket. Keys are (bucket,
 * object id) and an entry names the exact version it holds: a caller asks
 * only for the version the index says is current, so an overwrite or
 * delete is never answered from it (the old entry stops matching and ages
 * out). Thread-safe. */
#ifndef STORAGED_S3_ZCACHE_H
#define STORAGED_S3_ZCACHE_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stor_zcache;

#define STOR_ZCACHE_MAX_BODY (1u << 20) /* larger bodies are never kept */

/* NULL on ENOMEM or when @max_bytes is 0 (no cache). */
struct stor_zcache *stor_zcache_create(size_t max_bytes);
void stor_zcache_destroy(struct stor_zcache *c);
/* Pipe capacity (bytes) a body of @len bytes needs to be tee'd into. */
size_t stor_zcache_pipe_bytes(size_t len);
/* Whether the body of @len bytes of object @id of @bucket at @version is
 * held (cheap; a later tee may still miss). */
bool stor_zcache_has(struct stor_zcache *c, const char *bucket,
                     const uint8_t id[16], uint64_t version, size_t len);
/* Tees the held body into the pipe @pipe_wr (empty, with room for
 * stor_zcache_pipe_bytes(@len)). 0; -ENOENT when not held (of that
 * version and length); -errno when the tee failed (then the pipe may
 * hold part of it: the caller drops it). */
CM_MUST_CHECK int stor_zcache_tee(struct stor_zcache *c, const char *bucket,
                                  const uint8_t id[16], uint64_t version,
                                  size_t len, int pipe_wr);
/* Admission: whether a body offered now should be copied and put (it was
 * offered before, recently, and is not held; it fits). Counts the offer. */
bool stor_zcache_want(struct stor_zcache *c, const char *bucket,
                      const uint8_t id[16], uint64_t version, size_t len);
/* Fresh private pages for @len body bytes (the caller copies the checked
 * body into them and passes them to stor_zcache_put), or NULL. */
void *stor_zcache_region(size_t len);
/* Gives back a region not put. */
void stor_zcache_region_free(void *region, size_t len);
/* Puts the body of @len bytes in @region (from stor_zcache_region, which
 * this takes ownership of, also on failure: it is unmapped here) as object
 * @id of @bucket at @version, replacing an older version and evicting the
 * least recently used entries to stay within the budget. Silently does
 * nothing on failure (no pipe of that size, ENOMEM). */
void stor_zcache_put(struct stor_zcache *c, const char *bucket,
                     const uint8_t id[16], uint64_t version, void *region,
                     size_t len);
/* Counters for /metrics (NULL-safe: zeros). */
struct stor_zcache_stats {
    uint64_t hits, puts, evictions, failed;
    size_t bytes, entries, max_bytes;
};
void stor_zcache_stats(struct stor_zcache *c, struct stor_zcache_stats *st);

#endif /* STORAGED_S3_ZCACHE_H */
