/* storaged/store/meta.h - the per-drive metadata record (FORMAT.md "meta
 * file"): one versioned, CRC-64-checksummed binary record per object per drive,
 * also used for tombstones, multipart uploads and their parts.
 * stor_meta_decode borrows nothing: it copies what it keeps, so the record
 * owns its strings and arrays; free with stor_meta_fini. */
#ifndef STORAGED_STORE_META_H
#define STORAGED_STORE_META_H
#include "common/buf.h"
#include "common/compiler.h"
#include "common/hash.h"
#include "storaged/store/object.h"
#include <stddef.h>
#include <stdint.h>

#define STOR_META_MAGIC "ECFSMET1"
#define STOR_META_HDR   24 /* magic, length, flags, crc */
#define STOR_META_MAX   (64u << 20)

enum stor_meta_type {
    STOR_META_OBJECT = 1,
    STOR_META_TOMBSTONE = 2,
    STOR_META_PART = 3,   /* one multipart part */
    STOR_META_UPLOAD = 4, /* a multipart upload in progress */
};

struct stor_meta_part {
    int number;      /* 1..10000 for a multipart part; 0 for a simple PUT */
    uint64_t size;   /* bytes of object data in this part */
    uint64_t dataid; /* names the shard files of this part */
    char etag[STOR_ETAG_MAX];
};

struct stor_meta {
    int type;         /* enum stor_meta_type */
    int k, m;         /* geometry of the data */
    int shard;        /* shard index stored on this drive (0..k+m) */
    uint32_t block;   /* shard block size of full stripes (shard files) */
    uint64_t version; /* store-wide monotonic; newest wins */
    int64_t mtime_ns;
    uint64_t size;
    char etag[STOR_ETAG_MAX]; /* object ETag; upload id for UPLOAD */
    char *key;                /* owned */
    size_t key_len;
    struct stor_hdr *hdrs; /* owned */
    size_t nhdrs;
    struct stor_meta_part *parts; /* owned */
    size_t nparts;
    uint8_t *inl;           /* owned; the inline shard, or NULL (and by view) */
    const uint8_t *inl_ref; /* the inline shard: inl, or inside the record
                             * stor_meta_decode_view() read */
    size_t inl_len;
    int has_inline; /* 1 when the shard is inline (even if empty) */
    /* With has_inline: the shard is not in the record but in an extent
     * file (obj_ext.h), @inl_len bytes of record (xfile, xoff); inl and
     * inl_ref are NULL. Encoded as inline flag 2 (FORMAT.md). */
    int has_xref;
    uint32_t xfile;
    uint64_t xoff;
};

/* Appends the encoded record to @out. 0 or -ENOMEM/-E2BIG. */
CM_MUST_CHECK int stor_meta_encode(const struct stor_meta *m,
                                   struct cm_buf *out);
/* Decodes and verifies a record; 0, or -EBADMSG (bad magic, length, CRC
 * or field), -ENOMEM. On failure @m is left empty. */
CM_MUST_CHECK int stor_meta_decode(const void *p, size_t n,
                                   struct stor_meta *m);
/* The same, except that the inline shard is not copied: m->inl stays NULL
 * and m->inl_ref points into @p, which must outlive its use (a GET reads a
 * whole meta file and needs only the shard's bytes: one copy fewer). */
CM_MUST_CHECK int stor_meta_decode_view(const void *p, size_t n,
                                        struct stor_meta *m);
void stor_meta_fini(struct stor_meta *m);

/* Exact encoded size of @m (what stor_meta_encode appends). */
size_t stor_meta_encoded_size(const struct stor_meta *m);

/* Reads and decodes a meta file in one read. -ENOENT, -EBADMSG, -errno. */
CM_MUST_CHECK int stor_meta_read_file(const char *path, struct stor_meta *m);

/* CRC-64 (isa-l ECMA reflected) used for metadata and shard blocks: common/
 * hash's cm_crc64, under the name the store's code uses. */
static inline uint64_t stor_crc64(uint64_t seed, const void *p, size_t n)
{
    return cm_crc64(seed, p, n);
}

#endif /* STORAGED_STORE_META_H */
