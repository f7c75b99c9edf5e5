/* fuse/read.h - the read path: block cache lookups, fetches of missing
 * blocks (whole-object GET for small files, block-aligned range GETs
 * otherwise), sequential detection and readahead windows that double up to
 * a cap, fetched as parallel parts by the prefetch workers under one global
 * memory budget. The object version is pinned by ETag (If-Match). */
#ifndef FUSE_READ_H
#define FUSE_READ_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/compiler.h"

struct fc_fs;
struct fc_block;

/* The most blocks one GET fills: whole_max is at most this many blocks. */
#define FC_WHOLE_BLOCKS 64u

/* Per-reader sequential detection (per open file, or per inode when the
 * kernel skips opens). */
struct fc_rstate {
    pthread_mutex_t lock; /* protects the fields below */
    uint64_t next_off;    /* where a sequential reader reads next */
    uint64_t window;      /* current readahead window, bytes */
    uint64_t ra_end;      /* readahead scheduled up to here */
    unsigned seq;         /* consecutive sequential reads */
};

void fc_rstate_init(struct fc_rstate *rs);
void fc_rstate_fini(struct fc_rstate *rs);

/* The object version a read is pinned to. Strings borrowed. */
struct fc_robj {
    const char *key;
    const char *etag; /* "" when unknown: no If-Match */
    uint64_t size;
};

/* A read served in place: iov[0..n) point into cache blocks, which stay
 * referenced (never evicted, never changed: READY data is immutable) until
 * fc_read_unpin(). Lets the FUSE reply be written straight from the cache,
 * without copying into a reply buffer first. */
#define FC_RPIN_MAX 32 /* blocks one pinned read may span */
struct fc_rpin {
    unsigned n;
    struct iovec iov[FC_RPIN_MAX];
    struct fc_block *blks[FC_RPIN_MAX];
};

/* Like fc_read, but pins the bytes instead of copying them: returns the
 * byte count (the sum of p->iov lengths; short only at EOF) or -errno, and
 * -E2BIG (nothing pinned) when the read spans more than FC_RPIN_MAX blocks
 * (use fc_read). On success the caller must fc_read_unpin(@p); on error
 * nothing is held. */
CM_MUST_CHECK ssize_t fc_read_pin(struct fc_fs *fs, const struct fc_robj *o,
                                  struct fc_rstate *rs, uint64_t off,
                                  size_t len, struct fc_rpin *p);
/* Releases what fc_read_pin pinned; @p is empty afterwards. */
void fc_read_unpin(struct fc_fs *fs, struct fc_rpin *p);
/* Notes that the pinned bytes of @p went into the kernel's page cache (a
 * reply to a read without direct_io): see fc_cache_handed. Before
 * fc_read_unpin. */
void fc_read_handed(struct fc_fs *fs, const struct fc_rpin *p);

/* Reads up to @len bytes at @off of @o into @out. Returns the byte count
 * (short only at EOF) or -errno (-EIO when the object changed or the store
 * failed, -ENOENT, -EACCES). */
CM_MUST_CHECK ssize_t fc_read(struct fc_fs *fs, const struct fc_robj *o,
                              struct fc_rstate *rs, uint64_t off, size_t len,
                              char *out);

/* Notes that directory @dirkey was opened; once list_prefetch subdirectories
 * of one parent were opened (a recursive walk: ls -R, find, du, ImageFolder),
 * the listings of the parent's other subdirectories are fetched ahead in
 * parallel by the prefetch workers. */
void fc_list_prefetch_note(struct fc_fs *fs, const char *dirkey);
/* Appends the read path's counters to @out (room for @cap bytes), as
 * " reads=N read_gets=N readahead_gets=N dir_prefetch_gets=N
 * list_prefetches=N dir_prefetch_bytes=N dir_prefetch_unread_bytes=N
 * dir_prefetch_evicted_unread_bytes=N" (then the disk cache's dcache_*
 * with cache_dir): FUSE reads served, GETs made by readers themselves
 * (cache misses), GETs of readahead parts, of directory prefetch, listing
 * prefetches, bytes directory prefetch fetched, of those not read yet, and
 * evicted unread. Returns snprintf's count. */
int fc_read_stats_format(struct fc_fs *fs, char *out, size_t cap);
/* The memory budget (prefetch_mem) is shared by readahead and the
 * buffers of streamed uploads: readahead skips what does not fit, a writer
 * waits here until @bytes fit (or nothing else is reserved). Every
 * reservation is given back with fc_mem_release. */
void fc_mem_reserve(struct fc_fs *fs, size_t bytes);
void fc_mem_release(struct fc_fs *fs, size_t bytes);
/* Starts @nthreads prefetch workers. 0 or -errno. */
CM_MUST_CHECK int fc_prefetch_start(struct fc_fs *fs, unsigned nthreads);
/* Stops and joins the workers, dropping queued jobs. */
void fc_prefetch_stop(struct fc_fs *fs);

#endif /* FUSE_READ_H */
