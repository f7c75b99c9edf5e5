/* storaged/s3/cksum.h - the x-amz-checksum-* algorithms S3 clients send with
 * a body (CRC32, CRC32C, CRC64NVME, SHA1, SHA256): the header names, digest
 * sizes, and a running checksum over the body bytes. The caller owns the
 * state (a CRC word and, for the SHA kinds, a digest). */
#ifndef STORAGED_S3_CKSUM_H
#define STORAGED_S3_CKSUM_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cm_digest;

enum stor_cksum {
    STOR_CKSUM_NONE = 0,
    STOR_CKSUM_CRC32,
    STOR_CKSUM_CRC32C,
    STOR_CKSUM_CRC64NVME,
    STOR_CKSUM_SHA1,
    STOR_CKSUM_SHA256,
    STOR_CKSUM_COUNT
};

/* The algorithm named by header @name (any case), or STOR_CKSUM_NONE. */
enum stor_cksum stor_s3_cksum_kind(const char *name, size_t n);
/* The lower-case header name of @k ("x-amz-checksum-crc32"), or NULL. */
const char *stor_s3_cksum_hdr(enum stor_cksum k);
/* The XML element of @k's value ("ChecksumCRC32"), or NULL. */
const char *stor_s3_cksum_xml(enum stor_cksum k);
/* The digest size of @k in bytes (0 for STOR_CKSUM_NONE). */
size_t stor_s3_cksum_size(enum stor_cksum k);
/* Starts a checksum of kind @k: *d is a new digest for the SHA kinds (free
 * with cm_digest_destroy), else NULL. 0 or -ENOMEM. */
CM_MUST_CHECK int stor_s3_cksum_begin(enum stor_cksum k, struct cm_digest **d);
/* Adds @n bytes at @p to the running checksum (*crc for the CRCs, @d for
 * the SHA kinds). */
void stor_s3_cksum_update(enum stor_cksum k, uint64_t *crc, struct cm_digest *d,
                          const void *p, size_t n);
/* Writes the base64 of the finished checksum to @out (>= 64 bytes; "" for
 * STOR_CKSUM_NONE). Finishes @d. */
void stor_s3_cksum_final(enum stor_cksum k, uint64_t crc, struct cm_digest *d,
                         char *out);

/* Multipart flexible checksums. CreateMultipartUpload with
 * x-amz-checksum-algorithm keeps the algorithm's header name in this
 * upload header (and so in the object's), and with x-amz-checksum-type
 * FULL_OBJECT (CRC32, CRC32C, CRC64NVME; the default for CRC64NVME) that
 * type in the next; each part keeps its verified checksum as a part
 * header, which Complete joins (STOR_HDR_PART_PFX). A COMPOSITE object's
 * checksum is computed from the joined values when asked; a FULL_OBJECT
 * one is the CRC of the whole body, combined from the parts' at Complete
 * and stored as the object's x-amz-checksum-* header, as a PutObject's. */
#define STOR_HDR_CK_ALG  "x-ecfs-ck-alg"
#define STOR_HDR_CK_TYPE "x-ecfs-ck-type"
struct stor_hdr;
struct stor_part;
/* The composite checksum of @nparts part checksums of kind @k, @joined
 * base64 values with ',' between: base64(H(raw1 ... rawN)) "-N" into
 * @out. 0, -EBADMSG (a part has none, or a bad one) or -ENOMEM. */
CM_MUST_CHECK int stor_s3_cksum_composite(enum stor_cksum k, const char *joined,
                                          size_t nparts, char *out,
                                          size_t outlen);
/* The full-object CRC (kind @k: CRC32, CRC32C or CRC64NVME) of @nparts
 * parts of sizes @psize whose own CRCs are @joined (as above), base64 into
 * @out: the CRC of their concatenation, combined without the data. 0, or
 * -EBADMSG (another kind, a part without one or with a bad one). */
CM_MUST_CHECK int stor_s3_cksum_full(enum stor_cksum k, const char *joined,
                                     const uint64_t *psize, size_t nparts,
                                     char *out, size_t outlen);
/* CRC @a of A combined with CRC @b of the @blen bytes B that follow A:
 * the CRC of AB (kind @k: CRC32, CRC32C or CRC64NVME; else 0). */
uint64_t stor_s3_crc_combine(enum stor_cksum k, uint64_t a, uint64_t b,
                             uint64_t blen);
/* The @i-th (0-based) of the joined part values @joined into @out ("" when
 * there is none, or it does not fit). */
void stor_s3_cksum_part(const char *joined, size_t i, char *out, size_t outlen);
/* CompleteMultipartUpload: the object checksum its x-amz-checksum-* says
 * (kind @k, @value borrowed, NULL to clear) and the client's list @parts
 * (@nparts, borrowed: their hkind/hval), for the Complete hook on this
 * thread to check (stor_s3_cksum_complete). */
void stor_s3_cksum_expect(enum stor_cksum k, const char *value,
                          const struct stor_part *parts, size_t nparts);
/* The Complete hook's checksum work on the object's headers @h (@n) and
 * the listed part sizes @psize: each checksum the client's list names
 * must be the stored one of that part (-STOR_EBADPART), and the object
 * checksum the request named must be the object's (-STOR_EBADDIGEST, also
 * when it has none). For a FULL_OBJECT upload whose parts all have their
 * CRC, *kind and the whole object's value in @full (else *kind NONE), for
 * the caller to store as header stor_s3_cksum_hdr(*kind). 0 or -errno. */
CM_MUST_CHECK int stor_s3_cksum_complete(const struct stor_hdr *h, size_t n,
                                         const uint64_t *psize, size_t nparts,
                                         enum stor_cksum *kind, char *full,
                                         size_t fulllen);
/* For an object's headers @h (@n) and @nparts: its multipart checksum
 * kind with the object's value in @out (composite; with *full set, the
 * stored full-object CRC) and *joined, if asked, the parts' values; or
 * STOR_CKSUM_NONE when it has none (not asked for at Create, or a part
 * without one). */
enum stor_cksum stor_s3_cksum_of_mpu(const struct stor_hdr *h, size_t n,
                                     int nparts, const char **joined, char *out,
                                     size_t outlen, bool *full);

#endif /* STORAGED_S3_CKSUM_H */
