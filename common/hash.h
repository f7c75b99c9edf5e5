/* common/hash.h - digests and MACs over OpenSSL, and fast checksums over
 * isa-l's CRCs. All functions are thread-safe. The caller owns the
 * incremental contexts and the HMAC keys. */
#ifndef COMMON_HASH_H
#define COMMON_HASH_H
#include "common/compiler.h"
#include <stddef.h>
#include <stdint.h>

#define CM_SHA256_LEN 32
#define CM_MD5_LEN    16
#define CM_SHA1_LEN   20

void cm_sha256(const void *p, size_t n, uint8_t out[CM_SHA256_LEN]);
/* lowercase hex of SHA-256(p), 64 chars + NUL */
void cm_sha256_hex(const void *p, size_t n, char out[2 * CM_SHA256_LEN + 1]);
void cm_hmac_sha256(const void *key, size_t keylen, const void *p, size_t n,
                    uint8_t out[CM_SHA256_LEN]);
void cm_md5(const void *p, size_t n, uint8_t out[CM_MD5_LEN]);

/* An HMAC-SHA256 key whose two padded blocks are hashed once
 * (cm_hmac_sha256_key_init), so each message MACed under it with
 * cm_hmac_sha256_pre costs two SHA-256 blocks fewer: SigV4's signing key
 * is the same for every request of a day. Opaque: the inner and outer
 * SHA-256 states. cm_hmac_sha256_pre(k, p, n) == cm_hmac_sha256(key,
 * keylen, p, n). Wipe one with cm_hmac_sha256_key_wipe. */
struct cm_hmac_sha256_key {
    uint32_t st[2][32];
};
void cm_hmac_sha256_key_init(struct cm_hmac_sha256_key *k, const void *key,
                             size_t keylen);
void cm_hmac_sha256_pre(const struct cm_hmac_sha256_key *k, const void *p,
                        size_t n, uint8_t out[CM_SHA256_LEN]);
void cm_hmac_sha256_key_wipe(struct cm_hmac_sha256_key *k);

/* Incremental digests (EVP underneath). _create returns NULL only on ENOMEM. */
enum cm_digest_kind { CM_DIGEST_MD5, CM_DIGEST_SHA1, CM_DIGEST_SHA256 };
struct cm_digest;
struct cm_digest *cm_digest_create(enum cm_digest_kind kind);
void cm_digest_update(struct cm_digest *d, const void *p, size_t n);
/* Writes the digest (16/20/32 bytes) and returns its length; d is reset. */
size_t cm_digest_final(struct cm_digest *d, uint8_t *out);
void cm_digest_destroy(struct cm_digest *d);

/* CRCs (isa-l; CRC-64/NVME uses a table fallback where isa-l < 2.31 lacks
 * it). Pass the previous return value as @seed to continue; 0 to start. */
uint32_t cm_crc32(uint32_t seed, const void *p, size_t n);     /* zlib CRC-32 */
uint32_t cm_crc32c(uint32_t seed, const void *p, size_t n);    /* Castagnoli */
uint64_t cm_crc64nvme(uint64_t seed, const void *p, size_t n); /* CRC-64/NVME */
/* CRC-64/ECMA-182, reflected (isa-l crc64_ecma_refl): the CRC of storaged's
 * meta records and shard blocks (storaged/FORMAT.md), and of its small-object
 * cache entries. */
uint64_t cm_crc64(uint64_t seed, const void *p, size_t n);

#endif /* COMMON_HASH_H */
