/* storaged/s3/cksum.h - the x-amz-checksum-* algorithms S3 clients send with
 * a body (CRC32, CRC32C, CRC64NVME, SHA1, SHA256): the header names, digest
 * sizes, and a running checksum over the body bytes. The caller owns the
 * state (a CRC word and, for the SHA kinds, a digest). */
#ifndef STORAGED_S3_CKSUM_H
#define STORAGED_S3_CKSUM_H
#include "common/compiler.h"
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
 * upload header (and so in the object's); each part keeps its verified
 * checksum as a part header, which Complete joins (STOR_HDR_PART_PFX). */
#define STOR_HDR_CK_ALG "x-ecfs-ck-alg"
struct stor_hdr;
/* The composite checksum of @nparts part checksums of kind @k, @joined
 * base64 values with ',' between: base64(H(raw1 ... rawN)) "-N" into
 * @out. 0, -EBADMSG (a part has none, or a bad one) or -ENOMEM. */
CM_MUST_CHECK int stor_s3_cksum_composite(enum stor_cksum k, const char *joined,
                                          size_t nparts, char *out,
                                          size_t outlen);
/* CompleteMultipartUpload: the object checksum its x-amz-checksum-* says
 * (a composite "...-N"; @value borrowed, NULL to clear), for the Complete
 * hook on this thread to check against the parts' (_expect_check: 0, or
 * -STOR_EBADDIGEST when it differs or the parts have none). */
void stor_s3_cksum_expect(enum stor_cksum k, const char *value);
CM_MUST_CHECK int stor_s3_cksum_expect_check(const struct stor_hdr *h, size_t n,
                                             size_t nparts);
/* For an object's headers @h (@n) and @nparts: its multipart checksum
 * kind with the composite value in @out (and *joined, if asked, the
 * parts' values), or STOR_CKSUM_NONE when it has none (not asked for at
 * Create, or a part without one). */
enum stor_cksum stor_s3_cksum_of_mpu(const struct stor_hdr *h, size_t n,
                                     int nparts, const char **joined, char *out,
                                     size_t outlen);

#endif /* STORAGED_S3_CKSUM_H */
