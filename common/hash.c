/* common/hash.c - SHA-256/MD5/SHA-1/HMAC over OpenSSL EVP, CRCs over isa-l.
 *
 * DESIGN: SHA-256 and HMAC-SHA256 (RFC 2104, built here on OpenSSL's
 * SHA256_* block functions, see below) are the hot path of SigV4; MD5 and
 * the incremental contexts use plain EVP. CRC-32 and CRC-32C come from isa-l
 * (runtime-dispatched PCLMUL/SSE4.2 code). isa-l 2.30 (Debian 12) has no
 * CRC-64/NVME (its crc64_rocksoft_refl arrived in 2.31), so we call it when the
 * loaded library exports it (weak symbol) and otherwise use a slice-by-8 table
 * implementation here. All CRCs follow isa-l's chaining convention: the
 * value returned is final (post-inverted), and feeding it back as @seed
 * continues the computation; seed 0 starts a fresh CRC. */
/* SHA256_* (see "SHA-256 is the hot digest" below) */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "common/hash.h"

#include <isa-l/crc.h>
#include <isa-l/crc64.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "common/isal_compat.h" /* crc64_rocksoft_refl, weak */

struct cm_digest {
    EVP_MD_CTX *ctx;
    const EVP_MD *md;
};

/* Aborts: OpenSSL failing on a built-in digest means a broken process
 * (out of memory inside OpenSSL), and returning garbage digests would be
 * worse than crashing. */
static CM_NORETURN void hash_fatal(const char *what)
{
    (void)what;
    abort();
}

/* SHA-256 is the hot digest (SigV4 hashes three times per request). It
 * runs on OpenSSL's SHA256_* functions, the same block code (SHA-NI/AVX
 * by CPU) that EVP's default provider calls, on a context on our stack.
 * DESIGN: OpenSSL 3 marks them deprecated, but EVP_DigestInit_ex2 on
 * 3.0 allocates the provider's context on every init (three malloc/free
 * pairs and a provider dispatch per presigned GET; with those, SHA-256
 * was ~5 % of a 4 KiB GET's server CPU); OPENSSL_SUPPRESS_DEPRECATED
 * above the includes keeps the build warning-free. */
static void sha256_init(SHA256_CTX *c)
{
    if (SHA256_Init(c) != 1)
        hash_fatal("sha256 init");
}

/* Feeds @n bytes into @c. */
static void sha256_update(SHA256_CTX *c, const void *p, size_t n)
{
    if (n > 0 && SHA256_Update(c, p, n) != 1)
        hash_fatal("sha256 update");
}

/* Writes the 32-byte digest of @c's message. */
static void sha256_end(SHA256_CTX *c, uint8_t out[CM_SHA256_LEN])
{
    if (SHA256_Final(out, c) != 1)
        hash_fatal("sha256 final");
}

/* SHA-256 of p[0..n). */
void cm_sha256(const void *p, size_t n, uint8_t out[CM_SHA256_LEN])
{
    SHA256_CTX c;

    sha256_init(&c);
    sha256_update(&c, p, n);
    sha256_end(&c, out);
}

/* Lowercase hex SHA-256 of p[0..n), 64 chars and a NUL. */
void cm_sha256_hex(const void *p, size_t n, char out[2 * CM_SHA256_LEN + 1])
{
    uint8_t md[CM_SHA256_LEN];

    cm_sha256(p, n, md);
    cm_hex_encode(md, sizeof(md), out);
}

/* HMAC-SHA256(key, p) per RFC 2104: keys longer than the 64-byte block
 * are hashed first, then H((K ^ opad) || H((K ^ ipad) || p)). The key's
 * traces (pads, contexts) are wiped before returning. */
void cm_hmac_sha256(const void *key, size_t keylen, const void *p, size_t n,
                    uint8_t out[CM_SHA256_LEN])
{
    uint8_t k[64], pad[64], inner[CM_SHA256_LEN];
    SHA256_CTX c;
    size_t i;

    memset(k, 0, sizeof(k));
    if (keylen > sizeof(k))
        cm_sha256(key, keylen, k);
    else if (keylen > 0)
        memcpy(k, key, keylen);
    for (i = 0; i < sizeof(pad); i++)
        pad[i] = k[i] ^ 0x36;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof(pad));
    sha256_update(&c, p, n);
    sha256_end(&c, inner);
    for (i = 0; i < sizeof(pad); i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof(pad));
    sha256_update(&c, inner, sizeof(inner));
    sha256_end(&c, out);
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(pad, sizeof(pad));
    OPENSSL_cleanse(&c, sizeof(c));
}

/* The states sit in uint32_t arrays, as SHA256_CTX's fields are. */
_Static_assert(sizeof(SHA256_CTX) <=
                   sizeof(((struct cm_hmac_sha256_key *)0)->st[0]),
               "cm_hmac_sha256_key holds a SHA256_CTX");

/* Hashes the key's inner and outer padded blocks once (see hash.h). */
void cm_hmac_sha256_key_init(struct cm_hmac_sha256_key *hk, const void *key,
                             size_t keylen)
{
    uint8_t k[64], pad[64];
    SHA256_CTX c;
    size_t i;
    int j;

    memset(hk, 0, sizeof(*hk));
    memset(k, 0, sizeof(k));
    if (keylen > sizeof(k))
        cm_sha256(key, keylen, k);
    else if (keylen > 0)
        memcpy(k, key, keylen);
    for (j = 0; j < 2; j++) {
        for (i = 0; i < sizeof(pad); i++)
            pad[i] = k[i] ^ (j == 0 ? 0x36 : 0x5c);
        sha256_init(&c);
        sha256_update(&c, pad, sizeof(pad));
        memcpy(hk->st[j], &c, sizeof(c));
    }
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(pad, sizeof(pad));
    OPENSSL_cleanse(&c, sizeof(c));
}

/* HMAC-SHA256 of p[0..n) under @hk (see hash.h). */
void cm_hmac_sha256_pre(const struct cm_hmac_sha256_key *hk, const void *p,
                        size_t n, uint8_t out[CM_SHA256_LEN])
{
    uint8_t inner[CM_SHA256_LEN];
    SHA256_CTX c;

    memcpy(&c, hk->st[0], sizeof(c));
    sha256_update(&c, p, n);
    sha256_end(&c, inner);
    memcpy(&c, hk->st[1], sizeof(c));
    sha256_update(&c, inner, sizeof(inner));
    sha256_end(&c, out);
    OPENSSL_cleanse(&c, sizeof(c));
}

/* Wipes @hk. */
void cm_hmac_sha256_key_wipe(struct cm_hmac_sha256_key *hk)
{
    OPENSSL_cleanse(hk, sizeof(*hk));
}

/* MD5 of p[0..n) (S3 ETags and Content-MD5, not security). */
void cm_md5(const void *p, size_t n, uint8_t out[CM_MD5_LEN])
{
    if (EVP_Digest(p, n, out, NULL, EVP_md5(), NULL) != 1)
        hash_fatal("md5");
}

/* Allocates an incremental digest of @kind; NULL on ENOMEM. */
struct cm_digest *cm_digest_create(enum cm_digest_kind kind)
{
    struct cm_digest *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    switch (kind) {
    case CM_DIGEST_MD5:
        d->md = EVP_md5();
        break;
    case CM_DIGEST_SHA1:
        d->md = EVP_sha1();
        break;
    case CM_DIGEST_SHA256:
    default:
        d->md = EVP_sha256();
        break;
    }
    d->ctx = EVP_MD_CTX_new();
    if (d->ctx == NULL || EVP_DigestInit_ex(d->ctx, d->md, NULL) != 1) {
        EVP_MD_CTX_free(d->ctx);
        free(d);
        return NULL;
    }
    return d;
}

/* Feeds p[0..n) into @d. */
void cm_digest_update(struct cm_digest *d, const void *p, size_t n)
{
    if (EVP_DigestUpdate(d->ctx, p, n) != 1)
        hash_fatal("digest update");
}

/* Writes the digest to @out, returns its length, and restarts @d so it can
 * hash a new message. */
size_t cm_digest_final(struct cm_digest *d, uint8_t *out)
{
    unsigned int len = 0;

    if (EVP_DigestFinal_ex(d->ctx, out, &len) != 1 ||
        EVP_DigestInit_ex(d->ctx, d->md, NULL) != 1)
        hash_fatal("digest final");
    return len;
}

/* Frees @d (NULL is a no-op). */
void cm_digest_destroy(struct cm_digest *d)
{
    if (d == NULL)
        return;
    EVP_MD_CTX_free(d->ctx);
    free(d);
}

/* zlib/gzip CRC-32 (reflected 0x04C11DB7). */
uint32_t cm_crc32(uint32_t seed, const void *p, size_t n)
{
    return crc32_gzip_refl(seed, p, n);
}

/* CRC-32C (Castagnoli). isa-l's crc32_iscsi neither pre- nor post-inverts
 * and takes an int length, so we invert around it and feed it in pieces. */
uint32_t cm_crc32c(uint32_t seed, const void *p, size_t n)
{
    unsigned char *s = (unsigned char *)(uintptr_t)p;
    unsigned int crc = ~seed;

    while (n > 0) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        crc = crc32_iscsi(s, chunk, crc);
        s += chunk;
        n -= (size_t)chunk;
    }
    return ~crc;
}

/* See header. */
uint64_t cm_crc64(uint64_t seed, const void *p, size_t n)
{
    return crc64_ecma_refl(seed, p, n);
}

#define CRC64_NVME_POLY                                                        \
    0x9A6C9329AC4BC9B5ULL /* reflected 0xAD93D23594C93659                      \
                           */

static uint64_t crc64_table[8][256];
static pthread_once_t crc64_once = PTHREAD_ONCE_INIT;

/* Builds the slice-by-8 tables once. */
static void crc64_init_table(void)
{
    int i, k;

    for (i = 0; i < 256; i++) {
        uint64_t c = (uint64_t)i;
        for (k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC64_NVME_POLY : c >> 1;
        crc64_table[0][i] = c;
    }
    for (i = 0; i < 256; i++)
        for (k = 1; k < 8; k++)
            crc64_table[k][i] = (crc64_table[k - 1][i] >> 8) ^
                                crc64_table[0][crc64_table[k - 1][i] & 0xff];
}

/* Portable slice-by-8 CRC-64/NVME (init ~seed, final inversion). */
static uint64_t crc64nvme_sw(uint64_t seed, const uint8_t *s, size_t n)
{
    uint64_t crc = ~seed;

    pthread_once(&crc64_once, crc64_init_table);
    while (n >= 8) {
        uint64_t w = (uint64_t)s[0] | (uint64_t)s[1] << 8 |
                     (uint64_t)s[2] << 16 | (uint64_t)s[3] << 24 |
                     (uint64_t)s[4] << 32 | (uint64_t)s[5] << 40 |
                     (uint64_t)s[6] << 48 | (uint64_t)s[7] << 56;
        crc ^= w;
        crc = crc64_table[7][crc & 0xff] ^ crc64_table[6][(crc >> 8) & 0xff] ^
              crc64_table[5][(crc >> 16) & 0xff] ^
              crc64_table[4][(crc >> 24) & 0xff] ^
              crc64_table[3][(crc >> 32) & 0xff] ^
              crc64_table[2][(crc >> 40) & 0xff] ^
              crc64_table[1][(crc >> 48) & 0xff] ^ crc64_table[0][crc >> 56];
        s += 8;
        n -= 8;
    }
    while (n-- > 0)
        crc = crc64_table[0][(crc ^ *s++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* CRC-64/NVME (the S3 "CRC64NVME" checksum). */
uint64_t cm_crc64nvme(uint64_t seed, const void *p, size_t n)
{
    if (crc64_rocksoft_refl != NULL)
        return crc64_rocksoft_refl(seed, p, n);
    return crc64nvme_sw(seed, p, n);
}
