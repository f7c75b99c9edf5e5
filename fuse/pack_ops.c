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

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "common/hash.h"
#include "common/log.h"
#include "fuse/cache.h"
#include "fuse/fs.h"
#include "fuse/pack.h"
#include "fuse/s3.h"
#include "fuse/stats.h"

#define PK_KEY_MAX 1200

static atomic_ulong pk_block_gets;  /* range GETs of shard blocks */
static atomic_ulong pk_block_bytes; /* their bytes */
static atomic_ulong pk_crc_errors;  /* members that failed their check */
static atomic_ulong pk_reads;       /* FUSE reads of members */

static struct fc_fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static uint64_t node_of(const struct fc_pack *p, fuse_ino_t ino)
{
    if (ino == FUSE_ROOT_ID)
        return p->nmembers;
    if (ino < 2 || ino - 2 >= p->nmembers + p->ndirs || ino - 2 == p->nmembers)
        return UINT64_MAX;
    return ino - 2;
}

static fuse_ino_t ino_of(const struct fc_pack *p, uint64_t node)
{
    return node == p->nmembers ? FUSE_ROOT_ID : (fuse_ino_t)node + 2;
}

static void node_stat(const struct fc_fs *fs, uint64_t node, struct stat *st)
{
    const struct fc_pack *p = fs->pack;
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

/* The counters as " name=value" pairs (fc_stats_fmt_fn, fuse/stats.c). */
static int stats_format(struct fc_fs *fs, char *buf, size_t cap)
{
    size_t bytes, blocks;
    int n = fc_s3_stats_format(fs->s3, buf, cap);

    fc_cache_usage(fs->cache, &bytes, &blocks);
    if (n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n,
                      " reads=%lu pack_members=%" PRIu64
                      " pack_shards=%u pack_index_bytes=%zu"
                      " pack_block_gets=%lu pack_block_bytes=%lu"
                      " pack_crc_errors=%lu cache_bytes=%zu cache_blocks=%zu",
                      atomic_load(&pk_reads), fs->pack->nmembers,
                      fs->pack->nshards, fs->pack->index_bytes,
                      atomic_load(&pk_block_gets), atomic_load(&pk_block_bytes),
                      atomic_load(&pk_crc_errors), bytes, blocks);
    return n;
}

static void pk_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fc_fs *fs = fs_of(req);
    struct fc_pack *p = fs->pack;
    struct fuse_entry_param e;
    uint64_t pn = node_of(p, parent), d, id;

    memset(&e, 0, sizeof(e));
    if (pn == UINT64_MAX || !fc_pack_is_dir(p, pn, &d)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    id = fc_pack_lookup(p, d, name);
    if (id == UINT64_MAX && d == 0 && !fs->o.no_stats &&
        strcmp(name, FC_STATS_NAME) == 0) {
        fc_stats_entry(fs, stats_format, &e);
        fuse_reply_entry(req, &e);
        return;
    }
    if (id == UINT64_MAX) {
        e.ino = 0; /* negative entry, cached like the attributes */
        e.entry_timeout = fs->o.negative_timeout;
        fuse_reply_entry(req, &e);
        return;
    }
    e.ino = ino_of(p, id);
    e.attr_timeout = fs->o.attr_timeout;
    e.entry_timeout = fs->o.attr_timeout;
    node_stat(fs, id, &e.attr);
    fuse_reply_entry(req, &e);
}

static void pk_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    (void)ino;
    (void)nlookup;
    fuse_reply_none(req);
}

static void pk_forget_multi(fuse_req_t req, size_t count,
                            struct fuse_forget_data *forgets)
{
    (void)count;
    (void)forgets;
    fuse_reply_none(req);
}

static void pk_getattr(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
    struct fc_fs *fs = fs_of(req);
    uint64_t node;
    struct stat st;

    (void)fi;
    if (ino == FC_STATS_INO) {
        fc_stats_attr(fs, stats_format, &st);
        fuse_reply_attr(req, &st, 0);
        return;
    }
    node = node_of(fs->pack, ino);
    if (node == UINT64_MAX) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    node_stat(fs, node, &st);
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
    uint64_t node, d;

    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    if (ino == FC_STATS_INO) {
        fc_stats_open(req, fs, stats_format, fi);
        return;
    }
    node = node_of(fs->pack, ino);
    if (node == UINT64_MAX) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (fc_pack_is_dir(fs->pack, node, &d)) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    fi->keep_cache = 1; /* a pack never changes under its index */
    fuse_reply_open(req, fi);
}

/* The block size of shard @sh: pack_block, or the whole shard with
 * -o pack_fetch=shard. */
static size_t block_size(const struct fc_fs *fs, uint32_t sh)
{
    uint64_t n = fs->pack->shards[sh].size;

    if (!fs->o.pack_whole)
        return fs->o.pack_block;
    return n == 0 ? 1 : (size_t)n;
}

/* The referenced block @idx of shard @sh, fetched on a miss. 0 and *out,
 * or -errno. */
static int get_block(struct fc_fs *fs, uint32_t sh, uint64_t idx,
                     struct fc_block **out)
{
    const struct fc_pack *p = fs->pack;
    const struct fc_pshard *s = &p->shards[sh];
    size_t bs = block_size(fs, sh);
    char key[PK_KEY_MAX], tag[64];
    const char *etag = s->etag;
    struct fc_block *b;
    bool owner = false;
    uint64_t start = idx * bs;
    size_t len;
    ssize_t got;
    char *buf;

    snprintf(key, sizeof(key), "%s" FC_PACK_DIR "shard-%06u.tar", fs->o.prefix,
             p->first_shard + sh);
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
    fc_cache_fill(fs->cache, b, buf, len, 0);
    *out = b;
    return 0;
}

/* Copies (or, with @out NULL, CRCs into *crc) bytes [off, off+len) of
 * member @m. 0 or -errno. */
static int member_bytes(struct fc_fs *fs, const struct fc_pmember *m,
                        uint64_t off, size_t len, char *out, uint32_t *crc)
{
    size_t bs = block_size(fs, m->shard);
    uint64_t pos = m->offset + off, end = m->offset + off + len;

    while (pos < end) {
        struct fc_block *b;
        uint64_t idx = pos / bs, in = pos - idx * bs;
        size_t n;
        int ret = get_block(fs, m->shard, idx, &b);
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
static int member_check(struct fc_fs *fs, uint64_t i)
{
    struct fc_pack *p = fs->pack;
    const struct fc_pmember *m = &p->members[i];
    unsigned char st = atomic_load(&p->checked[i]);
    uint32_t crc = 0;
    int ret;

    if (st == 1)
        return 0;
    if (st == 2)
        return -EIO;
    ret = member_bytes(fs, m, 0, (size_t)m->size, NULL, &crc);
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
    uint64_t node, d;
    char *buf;
    int ret;

    (void)fi;
    if (ino == FC_STATS_INO) {
        fc_stats_read(req, fs, stats_format, size, off, fi);
        return;
    }
    node = node_of(fs->pack, ino);
    if (node == UINT64_MAX || fc_pack_is_dir(fs->pack, node, &d)) {
        fuse_reply_err(req, node == UINT64_MAX ? ENOENT : EISDIR);
        return;
    }
    atomic_fetch_add(&pk_reads, 1);
    m = &fs->pack->members[node];
    if (off < 0 || (uint64_t)off >= m->size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    ret = member_check(fs, node);
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
    ret = member_bytes(fs, m, (uint64_t)off, size, buf, NULL);
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
    uint64_t node = node_of(fs->pack, ino), d;

    if (node == UINT64_MAX || !fc_pack_is_dir(fs->pack, node, &d)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       bool plus)
{
    struct fc_fs *fs = fs_of(req);
    const struct fc_pack *p = fs->pack;
    uint64_t node = node_of(p, ino), d;
    const struct fc_pdir *dir;
    size_t pos = 0, ent;
    char *buf;

    if (node == UINT64_MAX || !fc_pack_is_dir(p, node, &d)) {
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
            node_stat(fs, id, &e.attr);
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
    }
    fuse_reply_buf(req, buf, pos);
    free(buf);
}

static void pk_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    do_readdir(req, ino, size, off, false);
}

static void pk_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                           off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    do_readdir(req, ino, size, off, true);
}

static void pk_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct fc_fs *fs = fs_of(req);
    struct statvfs sv;
    uint64_t bytes = 0;

    (void)ino;
    for (uint32_t i = 0; i < fs->pack->nshards; i++)
        bytes += fs->pack->shards[i].size;
    memset(&sv, 0, sizeof(sv));
    sv.f_bsize = 4096;
    sv.f_frsize = 4096;
    sv.f_blocks = (fsblkcnt_t)((bytes + 4095) / 4096);
    sv.f_files = (fsfilcnt_t)(fs->pack->nmembers + fs->pack->ndirs);
    sv.f_namemax = FC_PACK_NAME_MAX;
    fuse_reply_statfs(req, &sv);
}

static void pk_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS;
    if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO)
        conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
        conn->want |= FUSE_CAP_CACHE_SYMLINKS;
}

const struct fuse_lowlevel_ops fc_pack_ops = {
    .init = pk_init,
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
    .readdir = pk_readdir,
    .readdirplus = pk_readdirplus,
    .statfs = pk_statfs,
    .create = pk_create,
};

int fc_pack_load(const struct fc_s3_conf *sc, const char *prefix,
                 struct fc_pack **out)
{
    struct fc_s3_conf c = *sc;
    struct fc_s3 *s;
    struct fc_s3_obj o;
    char key[PK_KEY_MAX];
    const char *why = "";
    ssize_t got;
    char *buf;
    int ret;

    *out = NULL;
    c.max_conns = 1;
    c.retries = CM_MIN(sc->retries, 2u);
    ret = fc_s3_create(&c, &s);
    if (ret < 0)
        return ret;
    snprintf(key, sizeof(key), "%s" FC_PACK_INDEX, prefix);
    ret = fc_s3_head(s, key, &o);
    if (ret == -ENOENT) {
        fc_s3_destroy(s);
        return 0;
    }
    if (ret < 0)
        goto out;
    buf = malloc(o.size ? o.size : 1);
    if (buf == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    got = fc_s3_get(s, key, 0, 0, o.size, "", buf, NULL);
    if (got < 0) {
        ret = (int)got;
        free(buf);
        goto out;
    }
    ret = fc_pack_decode(buf, (size_t)got, out, &why);
    free(buf);
    if (ret < 0)
        fprintf(stderr, "ecfs: s3://%s/%s: %s\n", sc->bucket, key, why);
out:
    fc_s3_destroy(s);
    return ret;
}
