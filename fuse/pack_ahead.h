/* fuse/pack_ahead.h - read-ahead of unread members, for a pack larger than
 * its caches (fuse/PACK.md, "Packs larger than the caches"). A member read
 * that misses GETs one range of its shard (up to FC_PAHEAD_RANGE) holding
 * it and the members after it not yet read in this epoch; those are kept,
 * CRC-checked, until their first read, then dropped (the kernel's page
 * cache has them from there). Memory holds only bytes still to be read,
 * within the budget, so a shuffled epoch is not lost to evictions of bytes
 * already read, as an LRU of blocks is. With a disk (fc_pahead_set_disk:
 * the mount's -o cache_dir) every member a range brings is stored there
 * too, ranges are aligned windows of their shard, and a miss looks on the
 * disk before it GETs: an epoch then GETs each window once, in any order,
 * while the disk holds the pack. One fc_pahead per loaded pack; it is
 * thread-safe. */
#ifndef FUSE_PACK_AHEAD_H
#define FUSE_PACK_AHEAD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

struct fc_pack;
struct fc_pahead;

#define FC_PAHEAD_RANGE (4u << 20) /* the longest range GET */

/* Reads bytes [off, off+len) of shard @shard of @p into @buf: 0 or -errno
 * (the caller's transport; it counts and logs its GETs). */
typedef int fc_pahead_get_fn(void *arg, const struct fc_pack *p, uint32_t shard,
                             uint64_t off, size_t len, char *buf);

/* Read-ahead for @p (which must outlive it), keeping at most @budget bytes
 * of members, ranges of at most @range_max bytes, fetched by @get. Builds
 * the members' order by shard offset (4 bytes per member) and a read mark
 * (1 byte per member). 0 and *out, or -ENOMEM. */
CM_MUST_CHECK int fc_pahead_create(struct fc_pack *p, uint64_t budget,
                                   size_t range_max, fc_pahead_get_fn *get,
                                   void *arg, struct fc_pahead **out);
void fc_pahead_destroy(struct fc_pahead *a);

/* A second level below the kept copies, keyed by member (the mount's
 * disk cache). @dget copies member @i's bytes (its size) into @out: 0, or
 * -ENOENT when it is not there. @dput stores member @i's bytes (best
 * effort). Both are called without the read-ahead's lock held, from any
 * reader thread; @arg is the one of fc_pahead_create. */
typedef int fc_pahead_dget_fn(void *arg, const struct fc_pack *p, uint64_t i,
                              char *out);
typedef void fc_pahead_dput_fn(void *arg, const struct fc_pack *p, uint64_t i,
                               const char *data);
/* Gives @a a disk: a miss then first asks @dget, and a range GET covers
 * the window of range_max bytes of its shard (members starting in it)
 * holding the member, every good member of it handed to @dput (the
 * members not read yet in this epoch also kept in memory as the budget
 * allows). Call it before the first read. */
void fc_pahead_set_disk(struct fc_pahead *a, fc_pahead_dget_fn *dget,
                        fc_pahead_dput_fn *dput);

/* Whether member @i is read through @a: a non-empty file of at most
 * range_max bytes (others go through the block cache). */
bool fc_pahead_covers(const struct fc_pahead *a, uint64_t i);

/* Copies bytes [off, off+len) of member @i (fc_pahead_covers, off + len
 * at most its size) into @out: from its kept copy, or from a range GET
 * that also keeps members after it. A read reaching the member's end is
 * its read for this epoch: its copy is dropped. The member's CRC-32C is
 * checked on every fetch (p->checked: 1 good, 2 bad). 0, -EIO (CRC
 * mismatch, logged once; or the GET's error), -ENOMEM. */
CM_MUST_CHECK int fc_pahead_read(struct fc_pahead *a, uint64_t i, uint64_t off,
                                 size_t len, char *out);

struct fc_pahead_stats {
    uint64_t hits;       /* reads served from kept members */
    uint64_t misses;     /* reads that made a range GET */
    uint64_t kept;       /* members kept ahead of their read */
    uint64_t stale;      /* kept members dropped unread (a partial epoch) */
    uint64_t crc_errors; /* members whose bytes failed their CRC */
    uint64_t bytes;      /* bytes kept now (pending GETs included) */
    uint64_t epochs;     /* full passes over the members seen */
    uint64_t disk_hits;  /* misses served by the disk (fc_pahead_set_disk) */
    uint64_t disk_puts;  /* members handed to the disk */
};
void fc_pahead_stats(struct fc_pahead *a, struct fc_pahead_stats *st);

#endif /* FUSE_PACK_AHEAD_H */
