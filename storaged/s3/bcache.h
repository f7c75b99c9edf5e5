/* storaged/s3/bcache.h - an optional cache of small (inline) object bodies,
 * one per event-loop thread (no locks), bounded in bytes, LRU.
 * An entry is keyed by the object's id and names the exact version it
 * holds; a caller only asks for the version the in-memory index says is
 * current, so an overwrite or delete can never be answered from the cache
 * (the old entry simply stops matching and ages out). Each entry carries a
 * CRC-64 of its bytes, checked on every hit: bytes served from the cache
 * are verified like bytes read from disk. */
#ifndef STORAGED_S3_BCACHE_H
#define STORAGED_S3_BCACHE_H
#include <stddef.h>
#include <stdint.h>

struct stor_bcache;

/* NULL on ENOMEM (or @max_bytes 0: no cache). */
struct stor_bcache *stor_bcache_create(size_t max_bytes);
void stor_bcache_destroy(struct stor_bcache *c);
/* The cached body of object @id of @bucket at @version, exactly @len bytes,
 * checked against its CRC; NULL when absent, of another version or length, or
 * corrupt (then dropped). Borrowed until the next call on @c. */
const void *stor_bcache_get(struct stor_bcache *c, const char *bucket,
                            const uint8_t id[16], uint64_t version, size_t len);
/* Stores a copy of @len bytes as object @id of @bucket at @version (replacing
 * an older version), evicting least recently used entries to stay within the
 * budget. Silently does nothing when it does not fit or on ENOMEM. */
void stor_bcache_put(struct stor_bcache *c, const char *bucket,
                     const uint8_t id[16], uint64_t version, const void *p,
                     size_t len);

#endif /* STORAGED_S3_BCACHE_H */
