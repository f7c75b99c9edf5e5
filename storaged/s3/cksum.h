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

#endif /* STORAGED_S3_CKSUM_H */
