/* fuse/pack.h - packs: tar shards plus one index object (format in
 * fuse/PACK.md). This module encodes and decodes the index, builds the
 * directory tree a mount shows from it, and writes ustar/pax headers.
 * bin/ecfs pack (pack_tool.c) writes packs; pack_ops.c mounts them. */
#ifndef FUSE_PACK_H
#define FUSE_PACK_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/compiler.h"

#define FC_PACK_DIR         ".ecfs-pack/"
#define FC_PACK_INDEX       ".ecfs-pack/index"
#define FC_PACK_RETIRED     "retired-" /* in .ecfs-pack/: a replaced pack */
#define FC_PACK_MAGIC       "ECFSPACK"
#define FC_PACK_VERSION     1u
#define FC_PACK_HDR_SIZE    64u
#define FC_PACK_SHARD_SIZE  64u   /* one shard table entry */
#define FC_PACK_MEMBER_SIZE 48u   /* one member table entry */
#define FC_PACK_ETAG_MAX    56u   /* room for a shard's ETag in its entry */
#define FC_PACK_PATH_MAX    4096u /* longest member path (bytes, no NUL) */
#define FC_PACK_NAME_MAX    255u  /* longest path component */

/* One member as stored. A loaded pack reads the member table in place (in
 * the index buffer or the mapped index file), so this struct is the
 * little-endian on-disk record byte for byte. */
struct fc_pahead;

struct fc_pmember {
    uint64_t path_off; /* into the path blob */
    uint64_t size;
    uint64_t offset; /* first data byte inside the shard */
    int64_t mtime_ns;
    uint32_t shard;    /* index into the shard table */
    uint32_t mode;     /* st_mode: S_IFREG or S_IFDIR | permissions */
    uint32_t crc;      /* CRC-32C of the member's bytes */
    uint32_t path_len; /* bytes, no NUL */
};
_Static_assert(sizeof(struct fc_pmember) == FC_PACK_MEMBER_SIZE,
               "struct fc_pmember is the 48-byte member record");
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fuse/pack.c reads the little-endian member table in place"
#endif

struct fc_pshard {
    uint64_t size;
    char etag[FC_PACK_ETAG_MAX]; /* NUL-terminated; "" unknown */
};

/* A directory the mount shows: every prefix of a member path, plus the
 * members that are directories themselves. */
struct fc_pdir {
    uint64_t path_off; /* its path (no trailing '/') in the blob */
    uint32_t path_len; /* 0 for the root */
    uint32_t member;   /* member giving its mode/mtime, or UINT32_MAX */
    uint32_t first;    /* its children: kids[first .. first+n) */
    uint32_t n;
};

/* Who releases the index bytes a pack points into (fc_pack_decode). */
enum fc_pack_own {
    FC_PACK_BORROW, /* the caller: they must outlive the pack */
    FC_PACK_FREE,   /* free() */
    FC_PACK_MUNMAP, /* munmap() (a mapped index file) */
};

/* A loaded pack. Node ids: member i (a file) is i; directory d is
 * nmembers + d; the root is directory 0. */
struct fc_pack {
    uint64_t pack_id;
    int64_t created;
    uint32_t first_shard; /* shard k is shard-(first_shard+k).tar */
    uint32_t nshards;
    uint64_t shard_bytes; /* all shards together */
    uint64_t nmembers;
    uint64_t ndirs;
    struct fc_pshard *shards;
    const struct fc_pmember *members; /* in the index bytes; sorted by path */
    const char *paths;                /* blob: each path NUL-terminated */
    uint64_t paths_len;
    struct fc_pdir *dirs;
    uint32_t *kids;        /* node ids, grouped by dir, sorted by name */
    atomic_uchar *checked; /* per member: 0 unchecked, 1 good, 2 bad */
    size_t index_bytes;    /* size of the index object */
    void *buf;             /* the index bytes (members and paths point in) */
    enum fc_pack_own own;
    /* owned by the mount (pack_ops.c): */
    char etag[128];   /* of the index object, as sent (FC_ETAG_MAX) */
    bool mapped_file; /* buf is a file in the cache directory */
    uint32_t gen;     /* inode numbers carry it (bits 40..63) */
    uint64_t nlookup; /* kernel lookups of its inodes not yet forgotten */
    uint64_t opens;   /* open directory handles */
    struct fc_pahead *ahead; /* read-ahead (pack_ahead.h), made on first use */
    bool ahead_failed;       /* it could not be made: blocks instead */
};

/* Checks index bytes @buf of @len (8-byte aligned) and builds the tree.
 * The pack uses the member table and path blob in place: RAM per member
 * is the 48-byte record in @buf plus 5 bytes (fuse/PACK.md). @own says who
 * releases @buf: with FC_PACK_FREE or FC_PACK_MUNMAP this call does when
 * it fails, fc_pack_free when it succeeds. 0 and *out, or -EINVAL (not an
 * index, bad CRC, unsorted or duplicate paths, a file that is also a
 * directory, out-of-range fields; @why says which), -ENOTSUP (a newer
 * version), -ENOMEM. */
CM_MUST_CHECK int fc_pack_decode(void *buf, size_t len, enum fc_pack_own own,
                                 struct fc_pack **out, const char **why);
void fc_pack_free(struct fc_pack *p);

/* The name (last component) of node @id and its length. */
const char *fc_pack_node_name(const struct fc_pack *p, uint64_t id,
                              size_t *len);
/* Child @name of directory @dir: its node id, or UINT64_MAX. */
uint64_t fc_pack_lookup(const struct fc_pack *p, uint64_t dir,
                        const char *name);
/* Whether node @id is a directory; its directory index then in *d. */
bool fc_pack_is_dir(const struct fc_pack *p, uint64_t id, uint64_t *d);

/* Index encoding (the packer): members sorted by the caller, paths given
 * as path_off into @paths (each NUL-terminated). Returns a malloc'd
 * buffer of *len bytes, or NULL (ENOMEM). */
void *fc_pack_encode(uint64_t pack_id, int64_t created, uint32_t first_shard,
                     const struct fc_pshard *shards, uint32_t nshards,
                     const struct fc_pmember *members, uint64_t nmembers,
                     const char *paths, uint64_t paths_len, size_t *len);

/* Tar headers for a member: writes the pax extended header (when the path
 * is over 100 bytes or the size needs it) and the ustar header into @out
 * (room for FC_TAR_HDR_MAX bytes). Returns the bytes written (a multiple
 * of 512). @is_dir: typeflag '5', size 0. */
#define FC_TAR_HDR_MAX (512u * 3u + FC_PACK_PATH_MAX + 512u)
size_t fc_tar_header(char *out, const char *path, size_t path_len,
                     uint32_t mode, uint64_t size, int64_t mtime_s,
                     bool is_dir);

#endif /* FUSE_PACK_H */
