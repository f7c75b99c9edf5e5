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
#include "common/list.h"

enum fc_block_state { FC_BLOCK_LOADING, FC_BLOCK_READY, FC_BLOCK_FAILED };

struct fc_block {
    /* read-only for holders once state is READY */
    char *data; /* owned by the block; from fc_cache_buf_alloc */
    size_t len; /* valid bytes */
    int err;    /* -errno when FAILED */
    /* the rest is private to cache.c */
    enum fc_block_state state;
    int refs;
    bool prefetched; /* filled by directory prefetch */
    bool seen;       /* a reader took it (fc_cache_note_read) */
    bool ra;       /* claimed by readahead and no reader has acquired it yet */
    bool handed;   /* all its bytes went to the page cache (fc_cache_handed) */
    size_t served; /* bytes of it replied into the page cache so far */
    char *id;      /* key '\n' etag '\n' index; owned */
    struct cm_list lru;   /* the cache's LRU list, first = most recent */
    struct cm_list hlist; /* handed list, oldest first (while handed) */
    UT_hash_handle hh;    /* by id */
};

struct fc_cache;

/* Whether this thread's last fc_cache_acquire waited for a LOADING block
 * (fuse/metrics.c: reader wait). */
extern _Thread_local bool fc_cache_waited;

/* Block data buffers. Every buffer handed to fc_cache_fill comes from
 * here, and the cache frees it with fc_cache_buf_free. A large one (at
 * least FC_CACHE_BIGBUF bytes: readahead blocks) is its own mapping whose
 * pages are populated by the one mmap call: faulting 1 MiB of fresh memory
 * in page by page costs about twice the CPU, and a cold sequential read
 * fills a fresh block per MiB. Freed big buffers (up to 64 MiB of them) are
 * recycled: a stream larger than the cache reuses memory instead of
 * faulting in more. Smaller ones (small files) come from malloc. A big
 * one's data starts on a FC_CACHE_BUF_ALIGN boundary (the disk cache
 * reads into it and writes from it with O_DIRECT); a page of it holds the
 * header. Returns NULL on ENOMEM. */
#define FC_CACHE_BIGBUF    (256u << 10)
#define FC_CACHE_BUF_ALIGN 4096u
char *fc_cache_buf_alloc(size_t size);
/* Frees a buffer of fc_cache_buf_alloc (NULL is a no-op). */
void fc_cache_buf_free(char *p);

/* 0 and *out or -ENOMEM. @max_bytes bounds the READY bytes kept
 * (blocks still referenced may push it over briefly). */
CM_MUST_CHECK int fc_cache_create(size_t max_bytes, struct fc_cache **out);
void fc_cache_destroy(struct fc_cache *c);

/* Returns a referenced block for (key, etag, idx), or NULL on ENOMEM.
 * If the block was absent, it is inserted LOADING, *owner is set true and
 * the caller must fc_cache_fill() it. Otherwise *owner is false and, when
 * @wait, the call waits until the block is READY or FAILED; without @wait
 * a LOADING block is returned as is. The first return of a readahead
 * block READY counts its bytes as readahead used (fc_cache_mark_readahead). */
struct fc_block *fc_cache_acquire(struct fc_cache *c, const char *key,
                                  const char *etag, uint64_t idx, bool wait,
                                  bool *owner);
/* Inserts a LOADING block only if absent (prefetch). Returns the new,
 * referenced, owned block, or NULL if present (or ENOMEM). */
struct fc_block *fc_cache_claim(struct fc_cache *c, const char *key,
                                const char *etag, uint64_t idx);
/* Owner publishes: takes ownership of @data (len bytes, from
 * fc_cache_buf_alloc, or NULL when len is 0) and marks READY,
 * or, with @err < 0, marks FAILED and unlinks the block so the next reader
 * retries. Wakes waiters. Does not drop the owner's reference. */
void fc_cache_fill(struct fc_cache *c, struct fc_block *b, char *data,
                   size_t len, int err);
/* Takes one more reference on @b, which the caller holds already. */
void fc_cache_ref(struct fc_cache *c, struct fc_block *b);
/* Drops a reference taken by acquire/claim/ref. */
void fc_cache_release(struct fc_cache *c, struct fc_block *b);
/* Whether (key, etag, idx) is present in any state. */
bool fc_cache_contains(struct fc_cache *c, const char *key, const char *etag,
                       uint64_t idx);
/* Moves the READY blocks 0..@nblocks-1 of (@key, @from) to (@key, @to),
 * where none is there yet: this mount copied the object onto itself tied
 * to version @from, so @to is the same bytes (ops.c, fc_copy_self).
 * Blocks still LOADING stay where they are (their fetch may fail against
 * the new version). Returns how many moved. */
size_t fc_cache_rekey(struct fc_cache *c, const char *key, const char *from,
                      const char *to, uint64_t nblocks);
/* Marks @b (claimed by directory prefetch) as prefetched: if it leaves
 * the cache before any reader noted it, its bytes count as wasted. */
void fc_cache_mark_prefetch(struct fc_cache *c, struct fc_block *b);
/* A reader's first look at @b: 2 when @b was prefetched and nobody read it
 * yet (a prefetch hit), 1 for another first read, 0 when it was read
 * before. */
int fc_cache_note_read(struct fc_cache *c, struct fc_block *b);
/* Bytes of prefetched blocks evicted before anyone read them. */
uint64_t fc_cache_prefetch_wasted(struct fc_cache *c);
/* Marks @blks[0..n) (LOADING, claimed by a readahead job, before it
 * fetches them) as readahead blocks. The bytes of those that turn READY
 * count as readahead issued; then as used at the first fc_cache_acquire
 * that gets the block READY (any reader, any mount), or as wasted when the
 * block is evicted before that. Separate from the directory-prefetch flags
 * (prefetched/seen) and counters. */
void fc_cache_mark_readahead(struct fc_cache *c, struct fc_block **blks,
                             unsigned n);
/* Readahead bytes issued, used and wasted (see fc_cache_mark_readahead);
 * one consistent snapshot: used + wasted <= issued. */
void fc_cache_readahead_stats(struct fc_cache *c, uint64_t *issued,
                              uint64_t *used, uint64_t *wasted);
/* Notes that @n bytes of READY block @b (referenced by the caller) were
 * replied to a read that fills the kernel's page cache. Once all of its
 * bytes were, the block is "handed": a second copy of pages the kernel
 * holds (on a ro mount it keeps them across opens). Handed blocks are
 * evicted first, oldest hand-off first, as soon as they hold more than a
 * sixteenth of the budget: a stream of page-cache reads (a loader's epoch,
 * a shard read front to back) then reuses a few recycled buffers instead
 * of filling the whole budget with fresh memory, which cost a cold epoch
 * of 320 KiB files a quarter of ecfs's CPU (MAP_POPULATE of new pages).
 * The most recently handed blocks still serve a re-read of pages the
 * kernel dropped. */
void fc_cache_handed(struct fc_cache *c, struct fc_block *b, size_t n);
/* Bytes cached and the number of blocks. */
void fc_cache_usage(struct fc_cache *c, size_t *bytes, size_t *blocks);

#endif /* FUSE_CACHE_H */
