/* fuse/cache.h - the shared in-memory block cache (LRU, byte budget).
 * A block is identified by (S3 key, ETag, block index), so a changed object
 * can never be served from an old version's blocks. A block is LOADING
 * (one owner fetches it, others wait), READY (data valid) or FAILED.
 * Callers hold references; eviction only frees unreferenced READY blocks. */
#ifndef FUSE_CACHE_H
#define FUSE_CACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "common/compiler.h"

enum fc_block_state { FC_BLOCK_LOADING, FC_BLOCK_READY, FC_BLOCK_FAILED };

struct fc_block {
    /* read-only for holders once state is READY */
    char *data; /* owned by the block */
    size_t len; /* valid bytes */
    int err;    /* -errno when FAILED */
    /* the rest is private to cache.c */
    enum fc_block_state state;
    int refs;
    char *id;                     /* key '\n' etag '\n' index; owned */
    struct fc_block *prev, *next; /* LRU list */
    UT_hash_handle hh;            /* by id */
};

struct fc_cache;

/* 0 and *out or -ENOMEM. @max_bytes bounds the READY bytes kept
 * (blocks still referenced may push it over briefly). */
CM_MUST_CHECK int fc_cache_create(size_t max_bytes, struct fc_cache **out);
void fc_cache_destroy(struct fc_cache *c);

/* Returns a referenced block for (key, etag, idx), or NULL on ENOMEM.
 * If the block was absent, it is inserted LOADING, *owner is set true and
 * the caller must fc_cache_fill() it. Otherwise *owner is false and, when
 * @wait, the call waits until the block is READY or FAILED; without @wait
 * a LOADING block is returned as is. */
struct fc_block *fc_cache_acquire(struct fc_cache *c, const char *key,
                                  const char *etag, uint64_t idx, bool wait,
                                  bool *owner);
/* Inserts a LOADING block only if absent (prefetch). Returns the new,
 * referenced, owned block, or NULL if present (or ENOMEM). */
struct fc_block *fc_cache_claim(struct fc_cache *c, const char *key,
                                const char *etag, uint64_t idx);
/* Owner publishes: takes ownership of @data (len bytes) and marks READY,
 * or, with @err < 0, marks FAILED and unlinks the block so the next reader
 * retries. Wakes waiters. Does not drop the owner's reference. */
void fc_cache_fill(struct fc_cache *c, struct fc_block *b, char *data,
                   size_t len, int err);
/* Drops a reference taken by acquire/claim. */
void fc_cache_release(struct fc_cache *c, struct fc_block *b);
/* Whether (key, etag, idx) is present in any state. */
bool fc_cache_contains(struct fc_cache *c, const char *key, const char *etag,
                       uint64_t idx);
/* Bytes cached and the number of blocks. */
void fc_cache_usage(struct fc_cache *c, size_t *bytes, size_t *blocks);

#endif /* FUSE_CACHE_H */
