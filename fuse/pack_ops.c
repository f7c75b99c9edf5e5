/* fuse/pack_ops.c - the mount of a prefix that holds a pack: the tree of
 * the index (fuse/PACK.md), read through pack_block-sized blocks of the
 * shards in the block cache (one range GET brings neighbouring members),
 * each member's CRC-32C checked on its first read, everything read-only.
 *
 * DESIGN: the index is immutable once loaded, so inode numbers are fixed
 * (node id + 2; the root is 1): lookups need no table, forget is a no-op,
 * and no request ever lists the bucket. The index is fetched before the
 * daemon forks (a throw-away client), so a broken index fails the mount
 * command instead of producing an empty mount. */
#include "fuse/pack_ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/log.h"
#include "fuse/cache.h"
#include "fuse/dcache.h"
#include "fuse/fs.h"
#include "fuse/metrics.h"
#include "fuse/pack.h"
#include "fuse/pack_ahead.h"
#include "fuse/s3.h"
#include "fuse/stats.h"

#define PK_KEY_MAX   1200
#define PK_CACHE_SUB "pack" /* CACHE_DIR/pack/: the mapped index files */

static atomic_ulong pk_block_gets;  /* range GETs of shard blocks */
static atomic_ulong pk_block_bytes; /* their bytes */
static atomic_ulong pk_crc_errors;  /* members that failed their check */
static atomic_ulong pk_reads;       /* FUSE reads of members */
static atomic_ulong pk_dcache_hits; /* shard blocks from the disk cache */

/* The mount's packs. The current one answers lookups under the root; a
 * replaced one (its index changed on the server, seen after list_ttl)
 * stays loaded while the kernel holds inodes of it (lookups not yet
 * forgotten, open directories), so open files keep reading the version
 * they opened. Inode numbers carry the pack's generation in bits 40..63,
 * so no two versions share one (nor its page cache). */
#define PK_GEN_SHIFT 40
#define PK_NODE_MASK ((1ull << PK_GEN_SHIFT) - 1)
#define PK_GEN_MAX   ((1u << 23) - 1) /* below FC_STATS_INO's bits */

static struct {
    pthread_mutex_t mu;
    struct fc_pack *cur;
    struct fc_pack **old; /* replaced, still held by the kernel */
    size_t nold, capold;
    double checked; /* fc_now() of the last index check */
    bool reloading; /* a lookup is checking the index */
    uint32_t next_gen;
    char *dir; /* cache directory of the index files, or NULL */
    char ident[PK_KEY_MAX];
} pk = {.mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_ulong pk_reloads; /* new index versions loaded */
/* ro mount (the kernel refuses writing opens itself) whose kernel can skip
 * opens: set in init */
static bool pk_no_open;

static struct fc_fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* The pack holding inode @ino and its node id in *node (UINT64_MAX when
 * @ino names no node of it); NULL when no loaded pack has its generation.
 * pk.mu held. */
static struct fc_pack *pack_of_locked(fuse_ino_t ino, uint64_t *node)
{
    uint32_t gen = (uint32_t)(ino >> PK_GEN_SHIFT);
    uint64_t n = ino & PK_NODE_MASK;
    struct fc_pack *p = NULL;

    *node = UINT64_MAX;
    if (ino == FUSE_ROOT_ID) {
        *node = pk.cur->nmembers;
        return pk.cur;
    }
    if (pk.cur->gen == gen)
        p = pk.cur;
    for (size_t i = 0; p == NULL && i < pk.nold; i++)
        if (pk.old[i]->gen == gen)
            p = pk.old[i];
    if (p && n >= 2 && n - 2 < p->nmembers + p->ndirs && n - 2 != p->nmembers)
        *node = n - 2;
    return p;
}

/* pack_of_locked taking the lock. The pack stays valid after it is
 * dropped while the kernel holds @ino (a request on an inode implies it
 * does), or for the root, while it is current or a handle holds it. */
static struct fc_pack *pack_of(fuse_ino_t ino, uint64_t *node)
{
    struct fc_pack *p;

    pthread_mutex_lock(&pk.mu);
    p = pack_of_locked(ino, node);
    pthread_mutex_unlock(&pk.mu);
    return p;
}

static fuse_ino_t ino_of(const struct fc_pack *p, uint64_t node)
{
    return node == p->nmembers
               ? FUSE_ROOT_ID
               : ((fuse_ino_t)p->gen << PK_GEN_SHIFT) + (fuse_ino_t)node + 2;
}

/* Frees @p once it is replaced and nothing holds it. pk.mu held. */
static void maybe_free_locked(struct fc_pack *p)
{
    if (p == pk.cur || p->nlookup > 0 || p->opens > 0)
        return;
    for (size_t i = 0; i < pk.nold; i++)
        if (pk.old[i] == p) {
            pk.old[i] = pk.old[--pk.nold];
            break;
        }
    cm_log(CM_LOG_INFO, 0, "ecfs: pack index version %u released", p->gen);
    fc_pahead_destroy(p->ahead);
    fc_pack_free(p);
}

/* Checks the index for a new version once list_ttl has passed since the
 * last check (never on ro/immutable mounts: their index is the one of
 * the mount), on a lookup: one HEAD, and the new index when it changed.
 * Later lookups resolve in the new pack; inodes already looked up (open
 * files among them) keep theirs. A failed check keeps the current pack. */
static void maybe_reload(struct fc_fs *fs)
{
    struct fc_pack *np = NULL, *was;
    char key[PK_KEY_MAX], etag[sizeof(pk.cur->etag)];
    const char *why = "";
    double now = fc_now();
    bool due;
    int ret;

    if (fs->cache_forever)
        return;
    pthread_mutex_lock(&pk.mu);
    due = !pk.reloading && now - pk.checked >= fs->o.list_ttl;
    if (due)
        pk.reloading = true;
    memcpy(etag, pk.cur->etag, sizeof(etag));
    pthread_mutex_unlock(&pk.mu);
    if (!due)
        return;
    snprintf(key, sizeof(key), "%s" FC_PACK_INDEX, fs->o.prefix);
    ret = fc_pack_fetch(fs->s3, key, pk.dir, pk.ident, etag, &np, &why);
    pthread_mutex_lock(&pk.mu);
    if (ret == 0 && pk.next_gen >= PK_GEN_MAX) {
        fc_pack_free(np);
        ret = -EOVERFLOW;
        why = "too many index versions for one mount: remount";
    } else if (ret == 0 && pk.nold == pk.capold) {
        size_t nc = pk.capold ? pk.capold * 2 : 4;
        void *no = realloc(pk.old, nc * sizeof(*pk.old));
        if (no == NULL) {
            fc_pack_free(np);
            ret = -ENOMEM;
        } else {
            pk.old = no;
            pk.capold = nc;
        }
    }
    if (ret == 0) {
        np->gen = ++pk.next_gen;
        was = pk.cur;
        pk.old[pk.nold++] = was;
        pk.cur = np;
        maybe_free_locked(was);
        atomic_fetch_add(&pk_reloads, 1);
    }
    pk.checked = fc_now();
    pk.reloading = false;
    pthread_mutex_unlock(&pk.mu);
    if (ret == 0)
        cm_log(CM_LOG_INFO, 0,
               "ecfs: s3://%s/%s changed: new lookups see "
               "the new pack (%" PRIu64 " members, version %u)",
               fs->o.bucket, key, np->nmembers, np->gen);
    else if (ret < 0)
        cm_log(CM_LOG_WARN, -ret,
               "ecfs: checking s3://%s/%s%s%s: still "
               "serving the loaded pack",
               fs->o.bucket, key, why[0] ? ": " : "", why);
}

static void node_stat(const struct fc_fs *fs, const struct fc_pack *p,
                      uint64_t node, struct stat *st)
{
    const struct fc_pmember *m = NULL;
    uint64_t d;

    memset(st, 0, sizeof(*st));
    st->st_ino = ino_of(p, node);
    st->st_uid = fs->o.uid;
    st->st_gid = fs->o.gid;
    st->st_blksize = 4096;
    if (fc_pack_is_dir(p, node, &d)) {
        if (p->dirs[d].member != UINT32_MAX)
            m = &p->members[p->dirs[d].member];
        st->st_mode = S_IFDIR | (m ? (m->mode & 07777) : 0755);
        st->st_nlink = 2;
        if (m) {
            st->st_mtim.tv_sec = (time_t)(m->mtime_ns / 1000000000ll);
            st->st_mtim.tv_nsec = (long)(m->mtime_ns % 1000000000ll);
        } else {
            st->st_mtim.tv_sec = fs->started;
        }
    } else {
        m = &p->members[node];
        st->st_mode = S_IFREG | (m->mode & 07777);
        st->st_nlink = 1;
        st->st_size = (off_t)m->size;
        st->st_blocks = (blkcnt_t)((m->size + 511) / 512);
        st->st_mtim.tv_sec = (time_t)(m->mtime_ns / 1000000000ll);
        st->st_mtim.tv_nsec = (long)(m->mtime_ns % 1000000000ll);
    }
    if (st->st_mtim.tv_nsec < 0) {
        st->st_mtim.tv_nsec += 1000000000l;
        st->st_mtim.tv_sec--;
    }
    st->st_ctim = st->st_mtim;
    st->st_atim = st->st_mtim;
}

static bool whole_shards(const struct fc_fs *fs, const struct fc_pack *p);
static bool use_ahead(const struct fc_fs *fs, const struct fc_pack *p);

/* The counters as " name=value" pairs (fc_stats_fmt_fn, fuse/stats.c). */
static int stats_format(struct fc_fs *fs, char *buf, size_t cap)
{
    size_t bytes, blocks, loaded = 0, block;
    uint64_t members, shard_bytes;
    uint32_t shards;
    size_t index_bytes;
    struct fc_pahead_stats as = {0};
    int mapped, ahead, n = fc_s3_stats_format(fs->s3, buf, cap);

    fc_cache_usage(fs->cache, &bytes, &blocks);
    pthread_mutex_lock(&pk.mu);
    members = pk.cur->nmembers;
    shards = pk.cur->nshards;
    shard_bytes = pk.cur->shard_bytes;
    index_bytes = pk.cur->index_bytes;
    mapped = pk.cur->mapped_file;
    block = whole_shards(fs, pk.cur) ? 0 : fs->o.pack_block;
    ahead = use_ahead(fs, pk.cur);
    if (pk.cur->ahead != NULL)
        fc_pahead_stats(pk.cur->ahead, &as);
    loaded = 1 + pk.nold;
    pthread_mutex_unlock(&pk.mu);
    if (n >= 0 && (size_t)n < cap)
        n += snprintf(
            buf + n, cap - (size_t)n,
            " reads=%lu pack_members=%" PRIu64
            " pack_shards=%u pack_shard_bytes=%" PRIu64 " pack_index_bytes=%zu"
            " pack_index_mapped=%d pack_versions=%zu"
            " pack_block_size=%zu"
            " pack_reloads=%lu"
            " pack_block_gets=%lu pack_block_bytes=%lu"
            " pack_dcache_hits=%lu"
            " pack_crc_errors=%lu cache_bytes=%zu cache_blocks=%zu"
            " pack_ahead=%d pack_ahead_hits=%" PRIu64
            " pack_ahead_misses=%" PRIu64 " pack_ahead_kept=%" PRIu64
            " pack_ahead_stale=%" PRIu64 " pack_ahead_bytes=%" PRIu64
            " pack_ahead_epochs=%" PRIu64 " pack_ahead_disk_hits=%" PRIu64
            " pack_ahead_disk_puts=%" PRIu64,
            atomic_load(&pk_reads), members, shards, shard_bytes, index_bytes,
            mapped, loaded, block, atomic_load(&pk_reloads),
            atomic_load(&pk_block_gets), atomic_load(&pk_block_bytes),
            atomic_load(&pk_dcache_hits),
            atomic_load(&pk_crc_errors) + (unsigned long)as.crc_errors, bytes,
            blocks, ahead, as.hits, as.misses, as.kept, as.stale, as.bytes,
            as.epochs, as.disk_hits, as.disk_puts);
    if (fs->dcache != NULL && n >= 0 && (size_t)n < cap)
        n += fc_dcache_stats_format(fs->dcache, buf + n, cap - (size_t)n);
    if (n >= 0 && (size_t)n < cap)
        n += fc_metrics_ops_format(buf + n, cap - (size_t)n);
    return n;
}

static void pk_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fc_fs *fs = fs_of(req);
    struct fuse_entry_param e;
    struct fc_pack *p;
    uint64_t pn, d, id;

    memset(&e, 0, sizeof(e));
    if (parent == FUSE_ROOT_ID)
        maybe_reload(fs);
    pthread_mutex_lock(&pk.mu);
    p = pack_of_locked(parent, &pn);
    if (p == NULL || pn == UINT64_MAX || !fc_pack_is_dir(p, pn, &d)) {
        pthread_mutex_unlock(&pk.mu);
        fuse_reply_err(req, p == NULL ? ENOENT : ENOTDIR);
        return;
    }
    id = fc_pack_lookup(p, d, name);
    if (id == UINT64_MAX) {
        pthread_mutex_unlock(&pk.mu);
        if (d == 0 && !fs->o.no_stats && strcmp(name, FC_STATS_NAME) == 0) {
            fc_stats_entry(fs, stats_format, &e);
            fuse_reply_entry(req, &e);
            return;
        }
        e.ino = 0; /* negative entry, cached like the attributes */
        e.entry_timeout = fs->o.negative_timeout;
        fuse_reply_entry(req, &e);
        return;
    }
    e.ino = ino_of(p, id);
    e.attr_timeout = fs->o.attr_timeout;
    e.entry_timeout = fs->o.attr_timeout;
    node_stat(fs, p, id, &e.attr);
    if (e.ino != FUSE_ROOT_ID)
        p->nlookup++;
    pthread_mutex_unlock(&pk.mu);
    if (fuse_reply_entry(req, &e) != 0 && e.ino != FUSE_ROOT_ID) {
        pthread_mutex_lock(&pk.mu); /* the kernel never got it */
        p->nlookup--;
        maybe_free_locked(p);
        pthread_mutex_unlock(&pk.mu);
    }
}

/* The kernel drops @n lookups of @ino. pk.mu held. */
static void forget_locked(fuse_ino_t ino, uint64_t n)
{
    struct fc_pack *p;
    uint64_t node;

    if (ino == FUSE_ROOT_ID || ino == FC_STATS_INO)
        return;
    p = pack_of_locked(ino, &node);
    if (p == NULL)
        return;
    p->nlookup = n > p->nlookup ? 0 : p->nlookup - n;
    maybe_free_locked(p);
}

static void pk_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    pthread_mutex_lock(&pk.mu);
    forget_locked(ino, nlookup);
    pthread_mutex_unlock(&pk.mu);
    fuse_reply_none(req);
}

static void pk_forget_multi(fuse_req_t req, size_t count,
                            struct fuse_forget_data *forgets)
{
    pthread_mutex_lock(&pk.mu);
    for (size_t i = 0; i < count; i++)
        forget_locked(forgets[i].ino, forgets[i].nlookup);
    pthread_mutex_unlock(&pk.mu);
    fuse_reply_none(req);
}

static void pk_getattr(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_pack *p;
    uint64_t node;
    struct stat st;

    (void)fi;
    if (ino == FC_STATS_INO) {
        fc_stats_attr(fs, stats_format, &st);
        fuse_reply_attr(req, &st, 0);
        return;
    }
    pthread_mutex_lock(&pk.mu);
    p = pack_of_locked(ino, &node);
    if (node != UINT64_MAX)
        node_stat(fs, p, node, &st);
    pthread_mutex_unlock(&pk.mu);
    if (node == UINT64_MAX) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    fuse_reply_attr(req, &st, fs->o.attr_timeout);
}

static void pk_erofs(fuse_req_t req)
{
    fuse_reply_err(req, EROFS);
}

static void pk_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                       int to_set, struct fuse_file_info *fi)
{
    (void)ino;
    (void)attr;
    (void)to_set;
    (void)fi;
    pk_erofs(req);
}

static void pk_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, dev_t rdev)
{
    (void)parent;
    (void)name;
    (void)mode;
    (void)rdev;
    pk_erofs(req);
}

static void pk_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode)
{
    (void)parent;
    (void)name;
    (void)mode;
    pk_erofs(req);
}

static void pk_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    (void)parent;
    (void)name;
    pk_erofs(req);
}

static void pk_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname,
                      unsigned int flags)
{
    (void)parent;
    (void)name;
    (void)newparent;
    (void)newname;
    (void)flags;
    pk_erofs(req);
}

static void pk_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                       const char *name)
{
    (void)link;
    (void)parent;
    (void)name;
    pk_erofs(req);
}

static void pk_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                    const char *newname)
{
    (void)ino;
    (void)newparent;
    (void)newname;
    pk_erofs(req);
}

static void pk_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                      mode_t mode, struct fuse_file_info *fi)
{
    (void)parent;
    (void)name;
    (void)mode;
    (void)fi;
    pk_erofs(req);
}

static void pk_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_pack *p;
    uint64_t node, d;

    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    if (ino == FC_STATS_INO) {
        fc_stats_open(req, fs, stats_format, fi);
        return;
    }
    p = pack_of(ino, &node);
    if (node == UINT64_MAX) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (fc_pack_is_dir(p, node, &d)) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    if (pk_no_open) {
        /* reads need no handle (the inode names the version): the kernel
         * stops sending OPEN and RELEASE, two round trips per file of a
         * warm epoch, and keeps the page cache across opens */
        fuse_reply_err(req, ENOSYS);
        return;
    }
    fi->keep_cache = 1; /* a pack never changes under its index */
    fuse_reply_open(req, fi);
}

/* Whether -o pack_fetch=shard holds for @p: only while all its shards fit
 * in the block cache. Beyond, whole shards were evicted and fetched again
 * over and over (fuse/PACK.md: 1377 GETs of 8 MiB shards for one epoch of
 * a 35 MiB pack under a 16 MiB cache, about 9.5 GiB moved). */
static bool whole_shards(const struct fc_fs *fs, const struct fc_pack *p)
{
    return fs->o.pack_whole && p->shard_bytes <= fs->o.cache_size;
}

/* Whether @p is read ahead (fuse/pack_ahead.h): -o pack_fetch=ahead, or
 * by default when its shards exceed the block cache (cache_size). An LRU
 * of blocks then loses about half the members of a shuffled epoch to
 * evictions (fuse/PACK.md: 0.6 GETs per member at 100,000 files, 1.8 GiB
 * of shards under the 1 GiB cache). With cache_dir the read-ahead stores
 * members in the disk cache too: blocks there would cost a pack_block
 * read from the disk per member of a later epoch, a member file costs its
 * own bytes. */
static bool use_ahead(const struct fc_fs *fs, const struct fc_pack *p)
{
    if (fs->o.pack_ahead >= 0)
        return fs->o.pack_ahead == 1;
    return p->shard_bytes > fs->o.cache_size;
}

/* The block size of shard @sh: pack_block, or the whole shard with
 * -o pack_fetch=shard. */
static size_t block_size(const struct fc_fs *fs, const struct fc_pack *p,
                         uint32_t sh)
{
    uint64_t n = p->shards[sh].size;

    if (!whole_shards(fs, p))
        return fs->o.pack_block;
    return n == 0 ? 1 : (size_t)n;
}

static void shard_key(const struct fc_fs *fs, const struct fc_pack *p,
                      uint32_t sh, char *key, size_t cap)
{
    snprintf(key, cap, "%s" FC_PACK_DIR "shard-%06u.tar", fs->o.prefix,
             p->first_shard + sh);
}

/* Bytes [off, off+len) of shard @sh into @buf: one range GET, If-Match on
 * the shard's ETag (fc_pahead_get_fn). 0 or -errno (-EIO for a shard
 * replaced or shorter than its index says). */
static int ahead_get(void *arg, const struct fc_pack *p, uint32_t sh,
                     uint64_t off, size_t len, char *buf)
{
    struct fc_fs *fs = arg;
    const struct fc_pshard *s = &p->shards[sh];
    char key[PK_KEY_MAX];
    ssize_t got;

    shard_key(fs, p, sh, key, sizeof(key));
    atomic_fetch_add(&pk_block_gets, 1);
    got = fc_s3_get(fs->s3, key, off, len, len, s->etag[0] ? s->etag : "", buf,
                    NULL);
    if (got >= 0 && (size_t)got != len)
        got = -EIO;
    if (got < 0) {
        cm_log(CM_LOG_WARN, (int)-got,
               "ecfs: pack shard %s bytes %" PRIu64 "+%zu", key, off, len);
        return got == -ESTALE ? -EIO : (int)got;
    }
    atomic_fetch_add(&pk_block_bytes, (unsigned long)len);
    return 0;
}

/* The disk cache's copy of member @i (fc_pahead_dget_fn): a file of its
 * own, keyed by its shard's key and ETag and its offset in the shard, with
 * the block size PK_DC_MEMBER (no block is one byte long), so a replaced
 * shard (another ETag) never finds the old bytes. 0, or -ENOENT. */
#define PK_DC_MEMBER 1u

static int ahead_dget(void *arg, const struct fc_pack *p, uint64_t i, char *out)
{
    struct fc_fs *fs = arg;
    const struct fc_pmember *m = &p->members[i];
    const struct fc_pshard *s = &p->shards[m->shard];
    char key[PK_KEY_MAX], *data = NULL;
    size_t len = 0;

    if (s->etag[0] == '\0')
        return -ENOENT;
    shard_key(fs, p, m->shard, key, sizeof(key));
    if (fc_dcache_get(fs->dcache, key, s->etag, m->offset, PK_DC_MEMBER,
                      (size_t)m->size, &data, &len) < 0)
        return -ENOENT;
    if (len != m->size) {
        fc_cache_buf_free(data);
        return -ENOENT;
    }
    memcpy(out, data, len);
    fc_cache_buf_free(data);
    return 0;
}

/* Stores member @i's bytes in the disk cache (fc_pahead_dput_fn). */
static void ahead_dput(void *arg, const struct fc_pack *p, uint64_t i,
                       const char *data)
{
    struct fc_fs *fs = arg;
    const struct fc_pmember *m = &p->members[i];
    const struct fc_pshard *s = &p->shards[m->shard];
    char key[PK_KEY_MAX];

    if (s->etag[0] == '\0')
        return;
    shard_key(fs, p, m->shard, key, sizeof(key));
    fc_dcache_put(fs->dcache, key, s->etag, m->offset, PK_DC_MEMBER, data,
                  (size_t)m->size);
}

/* The read-ahead of @p, made on its first use (with the disk cache below
 * it under -o cache_dir); NULL when it is not read ahead or the memory for
 * it failed (a log line; blocks then). */
static struct fc_pahead *ahead_of(struct fc_fs *fs, struct fc_pack *p)
{
    struct fc_pahead *a;

    if (!use_ahead(fs, p))
        return NULL;
    pthread_mutex_lock(&pk.mu);
    if (p->ahead == NULL && !p->ahead_failed &&
        fc_pahead_create(p, fs->o.cache_size, FC_PAHEAD_RANGE, ahead_get, fs,
                         &p->ahead) < 0) {
        p->ahead_failed = true;
        cm_log(CM_LOG_WARN, ENOMEM,
               "ecfs: pack read-ahead: reading blocks instead");
    } else if (p->ahead != NULL && fs->dcache != NULL) {
        fc_pahead_set_disk(p->ahead, ahead_dget, ahead_dput);
    }
    a = p->ahead;
    pthread_mutex_unlock(&pk.mu);
    return a;
}

/* The referenced block @idx of shard @sh, fetched on a miss. 0 and *out,
 * or -errno. */
static int get_block(struct fc_fs *fs, const struct fc_pack *p, uint32_t sh,
                     uint64_t idx, struct fc_block **out)
{
    const struct fc_pshard *s = &p->shards[sh];
    size_t bs = block_size(fs, p, sh);
    char key[PK_KEY_MAX], tag[64];
    const char *etag = s->etag;
    struct fc_block *b;
    bool owner = false;
    uint64_t start = idx * bs;
    size_t len;
    ssize_t got;
    char *buf;

    shard_key(fs, p, sh, key, sizeof(key));
    if (etag[0] == '\0') { /* unknown ETag: the pack id keys the blocks */
        snprintf(tag, sizeof(tag), "pack-%016" PRIx64, p->pack_id);
        etag = tag;
    }
    b = fc_cache_acquire(fs->cache, key, etag, idx, true, &owner);
    if (b == NULL)
        return -ENOMEM;
    if (!owner) {
        if (b->state == FC_BLOCK_FAILED) {
            int err = b->err;
            fc_cache_release(fs->cache, b);
            return err < 0 ? err : -EIO;
        }
        *out = b;
        return 0;
    }
    len = (size_t)CM_MIN((uint64_t)bs, s->size - start);
    if (fs->dcache != NULL && s->etag[0]) {
        /* the disk cache (-o cache_dir): checked, so a hit is exact */
        size_t dl = 0;
        buf = NULL;
        if (fc_dcache_get(fs->dcache, key, s->etag, idx, bs, len, &buf, &dl) ==
            0) {
            if (dl == len) {
                atomic_fetch_add(&pk_dcache_hits, 1);
                fc_cache_fill(fs->cache, b, buf, len, 0);
                *out = b;
                return 0;
            }
            fc_cache_buf_free(buf);
        }
    }
    buf = fc_cache_buf_alloc(len ? len : 1);
    if (buf == NULL) {
        fc_cache_fill(fs->cache, b, NULL, 0, -ENOMEM);
        fc_cache_release(fs->cache, b);
        return -ENOMEM;
    }
    atomic_fetch_add(&pk_block_gets, 1);
    got = fc_s3_get(fs->s3, key, start, len, len, s->etag[0] ? s->etag : "",
                    buf, NULL);
    if (got >= 0 && (size_t)got != len)
        got = -EIO; /* a shard shorter than its index says */
    if (got < 0) {
        cm_log(CM_LOG_WARN, (int)-got, "ecfs: pack shard %s block %" PRIu64,
               key, idx);
        fc_cache_buf_free(buf);
        fc_cache_fill(fs->cache, b, NULL, 0, got == -ESTALE ? -EIO : (int)got);
        fc_cache_release(fs->cache, b);
        return got == -ESTALE ? -EIO : (int)got;
    }
    atomic_fetch_add(&pk_block_bytes, (unsigned long)len);
    if (fs->dcache != NULL && s->etag[0])
        fc_dcache_put(fs->dcache, key, s->etag, idx, bs, buf, len);
    fc_cache_fill(fs->cache, b, buf, len, 0);
    *out = b;
    return 0;
}

/* Copies (or, with @out NULL, CRCs into *crc) bytes [off, off+len) of
 * member @m. 0 or -errno. */
static int member_bytes(struct fc_fs *fs, const struct fc_pack *p,
                        const struct fc_pmember *m, uint64_t off, size_t len,
                        char *out, uint32_t *crc)
{
    size_t bs = block_size(fs, p, m->shard);
    uint64_t pos = m->offset + off, end = m->offset + off + len;

    while (pos < end) {
        struct fc_block *b;
        uint64_t idx = pos / bs, in = pos - idx * bs;
        size_t n;
        int ret = get_block(fs, p, m->shard, idx, &b);
        if (ret < 0)
            return ret;
        if (in >= b->len) {
            fc_cache_release(fs->cache, b);
            return -EIO;
        }
        n = (size_t)CM_MIN((uint64_t)(b->len - in), end - pos);
        if (out) {
            memcpy(out, b->data + in, n);
            out += n;
        } else {
            *crc = cm_crc32c(*crc, b->data + in, n);
        }
        fc_cache_release(fs->cache, b);
        pos += n;
    }
    return 0;
}

/* Checks member @i's CRC once: 0 when good, -EIO when not. */
static int member_check(struct fc_fs *fs, struct fc_pack *p, uint64_t i)
{
    const struct fc_pmember *m = &p->members[i];
    unsigned char st = atomic_load(&p->checked[i]);
    uint32_t crc = 0;
    int ret;

    if (st == 1)
        return 0;
    if (st == 2)
        return -EIO;
    ret = member_bytes(fs, p, m, 0, (size_t)m->size, NULL, &crc);
    if (ret < 0)
        return ret; /* a fetch error: checked again by the next read */
    if (crc != m->crc) {
        if (atomic_exchange(&p->checked[i], 2) != 2) {
            atomic_fetch_add(&pk_crc_errors, 1);
            cm_log(CM_LOG_ERROR, EIO,
                   "ecfs: pack member %s: CRC-32C %08x, the index says %08x "
                   "(shard-%06u.tar at %" PRIu64 "): its reads fail",
                   p->paths + m->path_off, crc, m->crc,
                   p->first_shard + m->shard, m->offset);
        }
        return -EIO;
    }
    atomic_store(&p->checked[i], 1);
    return 0;
}

static void pk_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    const struct fc_pmember *m;
    struct fc_pahead *a;
    struct fc_pack *p;
    uint64_t node, d;
    char *buf;
    int ret;

    (void)fi;
    if (ino == FC_STATS_INO) {
        fc_stats_read(req, fs, stats_format, size, off, fi);
        return;
    }
    p = pack_of(ino, &node);
    if (node == UINT64_MAX || fc_pack_is_dir(p, node, &d)) {
        fuse_reply_err(req, node == UINT64_MAX ? ENOENT : EISDIR);
        return;
    }
    atomic_fetch_add(&pk_reads, 1);
    m = &p->members[node];
    if (off < 0 || (uint64_t)off >= m->size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    a = ahead_of(fs, p);
    if (a != NULL && !fc_pahead_covers(a, node))
        a = NULL; /* a member over FC_PAHEAD_RANGE: through the blocks */
    ret = a != NULL ? 0 : member_check(fs, p, node);
    if (ret < 0) {
        fuse_reply_err(req, -ret);
        return;
    }
    size = (size_t)CM_MIN((uint64_t)size, m->size - (uint64_t)off);
    buf = malloc(size ? size : 1);
    if (buf == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    if (a != NULL)
        ret = fc_pahead_read(a, node, (uint64_t)off, size, buf);
    else
        ret = member_bytes(fs, p, m, (uint64_t)off, size, buf, NULL);
    if (ret < 0)
        fuse_reply_err(req, -ret);
    else
        fuse_reply_buf(req, buf, size);
    free(buf);
}

/* Only the stats file has a handle (fuse/stats.c). */
static void pk_release(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
    if (ino == FC_STATS_INO)
        fc_stats_release(fi);
    fuse_reply_err(req, 0);
}

static void pk_opendir(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_pack *p;
    uint64_t node, d;

    pthread_mutex_lock(&pk.mu);
    p = pack_of_locked(ino, &node);
    if (node != UINT64_MAX && fc_pack_is_dir(p, node, &d))
        p->opens++; /* the handle reads this version, even the root's */
    else
        p = NULL;
    pthread_mutex_unlock(&pk.mu);
    if (p == NULL) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)p;
    fi->cache_readdir = 1;
    /* the root shows the current version: its cached listing may not
     * outlive a reload */
    fi->keep_cache = ino != FUSE_ROOT_ID || fs->cache_forever;
    if (fuse_reply_open(req, fi) != 0) {
        pthread_mutex_lock(&pk.mu);
        p->opens--;
        maybe_free_locked(p);
        pthread_mutex_unlock(&pk.mu);
    }
}

static void pk_releasedir(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi)
{
    struct fc_pack *p = (struct fc_pack *)(uintptr_t)fi->fh;

    (void)ino;
    pthread_mutex_lock(&pk.mu);
    p->opens--;
    maybe_free_locked(p);
    pthread_mutex_unlock(&pk.mu);
    fuse_reply_err(req, 0);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, bool plus)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_pack *p = (struct fc_pack *)(uintptr_t)fi->fh;
    uint64_t node, d, looked = 0;
    const struct fc_pdir *dir;
    size_t pos = 0, ent;
    char *buf;

    /* the handle's version (opendir), whatever is current now */
    node = ino == FUSE_ROOT_ID ? p->nmembers : (ino & PK_NODE_MASK) - 2;
    if (!fc_pack_is_dir(p, node, &d)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    dir = &p->dirs[d];
    buf = malloc(size);
    if (buf == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    for (off_t i = off < 0 ? 0 : off; (uint64_t)i < (uint64_t)dir->n + 2; i++) {
        struct fuse_entry_param e;
        char name[FC_PACK_NAME_MAX + 1];

        memset(&e, 0, sizeof(e));
        if (i < 2) {
            snprintf(name, sizeof(name), "%s", i == 0 ? "." : "..");
            e.attr.st_ino = ino;
            e.attr.st_mode = S_IFDIR;
        } else {
            uint32_t id = p->kids[dir->first + (uint64_t)(i - 2)];
            size_t nl;
            const char *nm = fc_pack_node_name(p, id, &nl);
            memcpy(name, nm, nl);
            name[nl] = '\0';
            node_stat(fs, p, id, &e.attr);
            e.ino = ino_of(p, id);
            e.attr_timeout = fs->o.attr_timeout;
            e.entry_timeout = fs->o.attr_timeout;
        }
        if (plus)
            ent = fuse_add_direntry_plus(req, buf + pos, size - pos, name, &e,
                                         i + 1);
        else
            ent = fuse_add_direntry(req, buf + pos, size - pos, name, &e.attr,
                                    i + 1);
        if (ent > size - pos)
            break;
        pos += ent;
        if (plus && i >= 2 && e.ino != FUSE_ROOT_ID)
            looked++; /* the kernel counts a lookup per entry */
    }
    if (looked > 0) {
        pthread_mutex_lock(&pk.mu);
        p->nlookup += looked;
        pthread_mutex_unlock(&pk.mu);
    }
    if (fuse_reply_buf(req, buf, pos) != 0 && looked > 0) {
        pthread_mutex_lock(&pk.mu);
        p->nlookup -= looked;
        pthread_mutex_unlock(&pk.mu);
    }
    free(buf);
}

static void pk_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, false);
}

static void pk_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                           off_t off, struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, true);
}

static void pk_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct statvfs sv;
    uint64_t bytes = 0, nodes;

    (void)ino;
    pthread_mutex_lock(&pk.mu);
    bytes = pk.cur->shard_bytes;
    nodes = pk.cur->nmembers + pk.cur->ndirs;
    pthread_mutex_unlock(&pk.mu);
    memset(&sv, 0, sizeof(sv));
    sv.f_bsize = 4096;
    sv.f_frsize = 4096;
    sv.f_blocks = (fsblkcnt_t)((bytes + 4095) / 4096);
    sv.f_files = (fsfilcnt_t)nodes;
    sv.f_namemax = FC_PACK_NAME_MAX;
    fuse_reply_statfs(req, &sv);
}

static void pk_init(void *userdata, struct fuse_conn_info *conn)
{
    struct fc_fs *fs = userdata;

    pthread_mutex_lock(&pk.mu);
    pk.cur = fs->pack; /* version 0; fs->pack is ours until destroy */
    pk.checked = fc_now();
    pthread_mutex_unlock(&pk.mu);
    pk_no_open = fs->o.ro && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
    if (use_ahead(fs, fs->pack) && fs->o.pack_ahead < 0)
        cm_log(CM_LOG_INFO, 0,
               "ecfs: the pack's %" PRIu64 " MiB of shards exceed cache_size "
               "(%" PRIu64 " MiB): reading ahead the members not yet read%s "
               "(-o pack_fetch=block for blocks)",
               fs->pack->shard_bytes >> 20, (uint64_t)(fs->o.cache_size >> 20),
               fs->dcache != NULL
                   ? ", every member fetched also stored in cache_dir"
                   : "; -o cache_dir=DIR would keep every member fetched");
    if (fs->o.pack_whole && !whole_shards(fs, fs->pack))
        cm_log(CM_LOG_WARN, 0,
               "ecfs: pack_fetch=shard: the pack's %" PRIu64 " MiB of shards "
               "do not fit in cache_size (%zu MiB): reading pack_block "
               "blocks instead",
               fs->pack->shard_bytes >> 20, fs->o.cache_size >> 20);
    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS;
    if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO)
        conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
        conn->want |= FUSE_CAP_CACHE_SYMLINKS;
}

/* Frees the replaced versions; the current one goes back to fs->pack,
 * which main.c frees. */
static void pk_destroy(void *userdata)
{
    struct fc_fs *fs = userdata;

    pthread_mutex_lock(&pk.mu);
    for (size_t i = 0; i < pk.nold; i++) {
        fc_pahead_destroy(pk.old[i]->ahead);
        fc_pack_free(pk.old[i]);
    }
    fc_pahead_destroy(pk.cur->ahead);
    pk.cur->ahead = NULL;
    free(pk.old);
    pk.old = NULL;
    pk.nold = pk.capold = 0;
    fs->pack = pk.cur;
    pthread_mutex_unlock(&pk.mu);
}

const struct fuse_lowlevel_ops fc_pack_ops = {
    .init = pk_init,
    .destroy = pk_destroy,
    .lookup = pk_lookup,
    .forget = pk_forget,
    .forget_multi = pk_forget_multi,
    .getattr = pk_getattr,
    .setattr = pk_setattr,
    .mknod = pk_mknod,
    .mkdir = pk_mkdir,
    .unlink = pk_unlink,
    .rmdir = pk_unlink,
    .symlink = pk_symlink,
    .rename = pk_rename,
    .link = pk_link,
    .open = pk_open,
    .read = pk_read,
    .release = pk_release,
    .opendir = pk_opendir,
    .releasedir = pk_releasedir,
    .readdir = pk_readdir,
    .readdirplus = pk_readdirplus,
    .statfs = pk_statfs,
    .create = pk_create,
};

/* The cache file of the index @key of @ident at @etag (@size bytes):
 * DIR/pack/<crc64 of ident+key>-<crc64 of etag>-<size>.idx. */
static void cache_name(char *out, size_t cap, const char *dir,
                       const char *ident, const char *key, const char *etag,
                       uint64_t size, bool stem)
{
    uint64_t h = cm_crc64(cm_crc64(0, ident, strlen(ident)), key, strlen(key));

    if (stem)
        snprintf(out, cap, "%016" PRIx64 "-", h);
    else
        snprintf(out, cap,
                 "%s/" PK_CACHE_SUB "/%016" PRIx64 "-%016" PRIx64 "-%" PRIu64
                 ".idx",
                 dir, h, cm_crc64(0, etag, strlen(etag)), size);
}

/* Unlinks the other cached indexes of the same stem as @keep (older
 * versions: a mount still mapping one keeps its pages). */
static void cache_prune(const char *dir, const char *stem, const char *keep)
{
    char sub[PATH_MAX];
    struct dirent *e;
    DIR *d;

    snprintf(sub, sizeof(sub), "%s/" PK_CACHE_SUB, dir);
    d = opendir(sub);
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, stem, strlen(stem)) != 0 ||
            strcmp(e->d_name, keep) == 0)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) < 0 && errno != ENOENT)
            cm_log(CM_LOG_WARN, errno, "ecfs: cannot remove %s/%s", sub,
                   e->d_name);
    }
    closedir(d);
}

/* Maps the cached index file @path of @size bytes: 0 and *out, or -errno
 * (-ENOENT when absent, -EINVAL when it fails its checks: then removed). */
static int cache_open(const char *path, uint64_t size, struct fc_pack **out,
                      const char **why)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    void *m;
    int ret;

    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size || size == 0) {
        close(fd);
        unlink(path);
        return -ENOENT;
    }
    m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -errno;
    ret = fc_pack_decode(m, (size_t)size, FC_PACK_MUNMAP, out, why);
    if (ret == -EINVAL) {
        cm_log(CM_LOG_WARN, EINVAL,
               "ecfs: cached pack index %s: %s: fetched "
               "again",
               path, *why);
        unlink(path);
    }
    return ret;
}

/* GETs @key (@o from its HEAD) into a new file @path (a temporary file
 * renamed into place once complete) and maps it: 0 and *buf, or -errno
 * (a disk error: the caller fetches into memory instead). */
/* The index is read in ranges: a quarter of it (64 KiB..8 MiB, whole
 * 64 KiB), up to PK_INDEX_JOBS at a time, so a big index arrives over
 * several connections (10^7 members are about 650 MB) and a failed range
 * costs one range. */
#define PK_INDEX_RANGE_MIN (64u << 10)
#define PK_INDEX_RANGE_MAX (8u << 20)
#define PK_INDEX_JOBS      4

static size_t index_range(uint64_t size)
{
    uint64_t r = (size / 4 + PK_INDEX_RANGE_MIN - 1) / PK_INDEX_RANGE_MIN *
                 PK_INDEX_RANGE_MIN;

    return (size_t)CM_MAX(PK_INDEX_RANGE_MIN, CM_MIN(r, PK_INDEX_RANGE_MAX));
}

struct index_job {
    struct fc_s3 *s;
    const char *key;
    const struct fc_s3_obj *o;
    char *dst;
    size_t range;
    atomic_uint_fast64_t next; /* the next range's first byte */
    atomic_int err;            /* the first error, or 0 */
};

static void *index_worker(void *arg)
{
    struct index_job *j = arg;

    while (atomic_load(&j->err) == 0) {
        uint64_t off = atomic_fetch_add(&j->next, j->range);
        size_t len;
        ssize_t got;
        if (off >= j->o->size)
            break;
        len = (size_t)CM_MIN((uint64_t)j->range, j->o->size - off);
        got = fc_s3_get(j->s, j->key, off, len, len, j->o->etag, j->dst + off,
                        NULL);
        if (got >= 0 && (size_t)got != len)
            got = -EIO;
        if (got < 0) {
            int zero = 0;
            atomic_compare_exchange_strong(&j->err, &zero, (int)got);
        }
    }
    return NULL;
}

/* The whole index @key (@o from its HEAD) into @dst, in index_range()
 * ranges, each with If-Match on the HEAD's ETag: 0, -ESTALE (it changed
 * since the HEAD), or the GET's -errno. */
static int index_get(struct fc_s3 *s, const char *key,
                     const struct fc_s3_obj *o, void *dst)
{
    struct index_job j = {
        .s = s, .key = key, .o = o, .dst = dst, .range = index_range(o->size)};
    pthread_t t[PK_INDEX_JOBS];
    uint64_t n = (o->size + j.range - 1) / j.range;
    unsigned started = 0;

    atomic_init(&j.next, 0);
    atomic_init(&j.err, 0);
    while (started + 1 < CM_MIN(n, (uint64_t)PK_INDEX_JOBS) &&
           pthread_create(&t[started], NULL, index_worker, &j) == 0)
        started++;
    index_worker(&j); /* this thread is one of them */
    for (unsigned i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    return atomic_load(&j.err);
}

static int cache_fetch(struct fc_s3 *s, const char *key,
                       const struct fc_s3_obj *o, const char *path, void **buf)
{
    char tmp[PATH_MAX + 32];
    ssize_t got;
    void *m;
    int fd, ret;

    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    /* blocks allocated up front: a full disk is an error here, not a
     * SIGBUS on a store into the mapping */
    ret = posix_fallocate(fd, 0, (off_t)o->size);
    if (ret != 0) {
        close(fd);
        unlink(tmp);
        return -ret;
    }
    m = mmap(NULL, (size_t)o->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        ret = -errno;
        unlink(tmp);
        return ret;
    }
    got = index_get(s, key, o, m);
    if (got < 0 || mprotect(m, (size_t)o->size, PROT_READ) < 0 ||
        rename(tmp, path) < 0) {
        ret = got < 0 ? (int)got : -errno;
        munmap(m, (size_t)o->size);
        unlink(tmp);
        return ret;
    }
    *buf = m;
    return 0;
}

int fc_pack_fetch(struct fc_s3 *s, const char *key, const char *dir,
                  const char *ident, const char *same_etag,
                  struct fc_pack **out, const char **why)
{
    char path[PATH_MAX], stem[40];
    struct fc_s3_obj o;
    int ret = 0;

    *why = "";
    *out = NULL;
    for (int attempt = 0; attempt < 3; attempt++) {
        void *buf = NULL;
        bool mapped = false;

        ret = fc_s3_head(s, key, &o);
        if (ret < 0)
            return ret;
        if (same_etag && o.etag[0] && strcmp(o.etag, same_etag) == 0)
            return 1;
        if (o.size == 0 || o.size > SIZE_MAX / 2) {
            *why = "not a pack index (bad size)";
            return -EINVAL;
        }
        if (dir && o.etag[0]) {
            cache_name(path, sizeof(path), dir, ident, key, o.etag, o.size,
                       false);
            ret = cache_open(path, o.size, out, why);
            if (ret == 0 || ret == -ENOTSUP || ret == -ENOMEM)
                goto got;
            ret = cache_fetch(s, key, &o, path, &buf);
            if (ret == -ESTALE)
                continue; /* replaced between the HEAD and the GET */
            if (ret == 0)
                mapped = true;
            else
                cm_log(CM_LOG_WARN, -ret,
                       "ecfs: cannot keep the pack index "
                       "in %s: kept in memory",
                       path);
        }
        if (buf == NULL) {
            int got;
            buf = malloc((size_t)o.size);
            if (buf == NULL)
                return -ENOMEM;
            got = index_get(s, key, &o, buf);
            if (got < 0) {
                free(buf);
                if (got == -ESTALE)
                    continue;
                return got;
            }
        }
        ret = fc_pack_decode(buf, (size_t)o.size,
                             mapped ? FC_PACK_MUNMAP : FC_PACK_FREE, out, why);
        if (ret < 0 && mapped)
            unlink(path);
got:
        if (ret < 0)
            return ret;
        snprintf((*out)->etag, sizeof((*out)->etag), "%s", o.etag);
        (*out)->mapped_file = dir && (*out)->own == FC_PACK_MUNMAP;
        if ((*out)->mapped_file) {
            cache_name(stem, sizeof(stem), dir, ident, key, "", 0, true);
            cache_prune(dir, stem, strrchr(path, '/') + 1);
        }
        return 0;
    }
    *why = "the index kept changing while it was read";
    return -EAGAIN;
}

/* The cache directory's subfolder of pack indexes, created when absent:
 * 0, or -errno. */
static int cache_mkdir(const char *dir)
{
    char sub[PATH_MAX];

    snprintf(sub, sizeof(sub), "%s/" PK_CACHE_SUB, dir);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    if (mkdir(sub, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int fc_pack_load(const struct fc_s3_conf *sc, const char *prefix,
                 const char *cache_dir, struct fc_pack **out)
{
    struct fc_s3_conf c = *sc;
    char key[PK_KEY_MAX], ident[PK_KEY_MAX];
    const char *why = "";
    struct fc_s3 *s;
    int ret;

    *out = NULL;
    c.max_conns = 1;
    c.retries = CM_MIN(sc->retries, 2u);
    if (cache_dir && cache_mkdir(cache_dir) < 0) {
        cm_log(CM_LOG_WARN, errno,
               "ecfs: cannot create %s/" PK_CACHE_SUB
               ": the pack index is kept in memory",
               cache_dir);
        cache_dir = NULL;
    }
    ret = fc_s3_create(&c, &s);
    if (ret < 0)
        return ret;
    snprintf(key, sizeof(key), "%s" FC_PACK_INDEX, prefix);
    snprintf(ident, sizeof(ident), "%s\n%s", sc->endpoint, sc->bucket);
    ret = fc_pack_fetch(s, key, cache_dir, ident, NULL, out, &why);
    if (ret == 0) { /* for the daemon's reloads (after the fork) */
        memcpy(pk.ident, ident, sizeof(pk.ident));
        free(pk.dir);
        pk.dir = cache_dir ? strdup(cache_dir) : NULL;
    }
    if (ret == -ENOENT)
        ret = 0;
    else if (ret < 0 && why[0])
        fprintf(stderr, "ecfs: s3://%s/%s: %s\n", sc->bucket, key, why);
    fc_s3_destroy(s);
    return ret;
}
