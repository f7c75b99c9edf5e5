/* storaged/s3/cksum.c - the checksum table and the running checksums of
 * x-amz-checksum-* (see cksum.h). The CRC64NVME, CRC32 and CRC32C kernels are
 * common/hash's; the table here only names them as S3 does. */
#include "storaged/s3/cksum.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/codec.h"
#include "common/hash.h"
#include "storaged/store/object.h"

static const struct {
    const char *hdr;
    enum stor_cksum kind;
    size_t bytes; /* digest size */
} cksums[] = {
    {"x-amz-checksum-crc32", STOR_CKSUM_CRC32, 4},
    {"x-amz-checksum-crc32c", STOR_CKSUM_CRC32C, 4},
    {"x-amz-checksum-crc64nvme", STOR_CKSUM_CRC64NVME, 8},
    {"x-amz-checksum-sha1", STOR_CKSUM_SHA1, 20},
    {"x-amz-checksum-sha256", STOR_CKSUM_SHA256, 32},
};

/* See header. */
enum stor_cksum stor_s3_cksum_kind(const char *name, size_t n)
{
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(cksums); i++)
        if (n == strlen(cksums[i].hdr) &&
            strncasecmp(name, cksums[i].hdr, n) == 0)
            return cksums[i].kind;
    return STOR_CKSUM_NONE;
}

/* See header. */
const char *stor_s3_cksum_hdr(enum stor_cksum k)
{
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(cksums); i++)
        if (cksums[i].kind == k)
            return cksums[i].hdr;
    return NULL;
}

/* See header. */
size_t stor_s3_cksum_size(enum stor_cksum k)
{
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(cksums); i++)
        if (cksums[i].kind == k)
            return cksums[i].bytes;
    return 0;
}

/* See header. */
int stor_s3_cksum_begin(enum stor_cksum k, struct cm_digest **d)
{
    *d = NULL;
    if (k == STOR_CKSUM_SHA1)
        *d = cm_digest_create(CM_DIGEST_SHA1);
    else if (k == STOR_CKSUM_SHA256)
        *d = cm_digest_create(CM_DIGEST_SHA256);
    else
        return 0;
    return *d ? 0 : -ENOMEM;
}

/* See header. */
void stor_s3_cksum_update(enum stor_cksum k, uint64_t *crc, struct cm_digest *d,
                          const void *p, size_t n)
{
    switch (k) {
    case STOR_CKSUM_CRC32:
        *crc = cm_crc32((uint32_t)*crc, p, n);
        break;
    case STOR_CKSUM_CRC32C:
        *crc = cm_crc32c((uint32_t)*crc, p, n);
        break;
    case STOR_CKSUM_CRC64NVME:
        *crc = cm_crc64nvme(*crc, p, n);
        break;
    case STOR_CKSUM_SHA1:
    case STOR_CKSUM_SHA256:
        cm_digest_update(d, p, n);
        break;
    default:
        break;
    }
}

/* See header. */
void stor_s3_cksum_final(enum stor_cksum k, uint64_t crc, struct cm_digest *d,
                         char *out)
{
    uint8_t b[32];
    size_t n = 0;
    int i;

    switch (k) {
    case STOR_CKSUM_CRC32:
    case STOR_CKSUM_CRC32C:
        for (i = 0; i < 4; i++)
            b[i] = (uint8_t)((uint32_t)crc >> (24 - 8 * i));
        n = 4;
        break;
    case STOR_CKSUM_CRC64NVME:
        for (i = 0; i < 8; i++)
            b[i] = (uint8_t)(crc >> (56 - 8 * i));
        n = 8;
        break;
    case STOR_CKSUM_SHA1:
    case STOR_CKSUM_SHA256:
        n = cm_digest_final(d, b);
        break;
    default:
        out[0] = 0;
        return;
    }
    cm_base64_encode(b, n, out);
}

/* See header. */
const char *stor_s3_cksum_xml(enum stor_cksum k)
{
    static const char *const tags[STOR_CKSUM_COUNT] = {
        NULL,           "ChecksumCRC32", "ChecksumCRC32C", "ChecksumCRC64NVME",
        "ChecksumSHA1", "ChecksumSHA256"};

    return (int)k > 0 && k < STOR_CKSUM_COUNT ? tags[k] : NULL;
}

/* See header. */
int stor_s3_cksum_composite(enum stor_cksum k, const char *joined,
                            size_t nparts, char *out, size_t outlen)
{
    struct cm_digest *d = NULL;
    size_t sz = stor_s3_cksum_size(k), got = 0;
    uint64_t crc = 0;
    const char *p = joined;
    char b64[96];

    if (sz == 0 || nparts == 0)
        return -EBADMSG;
    if (stor_s3_cksum_begin(k, &d) < 0)
        return -ENOMEM;
    for (;;) {
        size_t n = strcspn(p, ",");
        uint8_t raw[48];

        if (n == 0 || n > 64 || cm_base64_decode(p, n, raw) != (long)sz) {
            if (d)
                cm_digest_destroy(d);
            return -EBADMSG; /* a part without (or with a bad) checksum */
        }
        stor_s3_cksum_update(k, &crc, d, raw, sz);
        got++;
        p += n;
        if (*p == 0)
            break;
        p++;
    }
    stor_s3_cksum_final(k, crc, d, b64);
    if (d)
        cm_digest_destroy(d);
    if (got != nparts)
        return -EBADMSG;
    snprintf(out, outlen, "%s-%zu", b64, nparts);
    return 0;
}

/* ---- CRC combination (zlib's crc32_combine, for any reflected CRC of
 * width <= 64 whose init and final xor are equal, as S3's three are) ---- */

struct crc_def {
    uint64_t poly; /* reflected */
    int w;         /* width in bits */
};

/* The CRC parameters of @k, or NULL for a non-CRC kind. */
static const struct crc_def *crc_def(enum stor_cksum k)
{
    static const struct crc_def crc32 = {0xEDB88320u, 32},
                                crc32c = {0x82F63B78u, 32},
                                crc64 = {0x9A6C9329AC4BC9B5ull, 64};

    return k == STOR_CKSUM_CRC32       ? &crc32
           : k == STOR_CKSUM_CRC32C    ? &crc32c
           : k == STOR_CKSUM_CRC64NVME ? &crc64
                                       : NULL;
}

/* a(x) * b(x) modulo the polynomial, in the reflected bit order (the top
 * bit of the width is x^0). */
static uint64_t crc_mulmod(uint64_t a, uint64_t b, const struct crc_def *d)
{
    uint64_t m = (uint64_t)1 << (d->w - 1), p = 0;

    while (m) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ d->poly : b >> 1;
    }
    return p;
}

/* x^(8 * @n) modulo the polynomial: the operator that appends @n zero
 * bytes to a CRC register. */
static uint64_t crc_x8n(uint64_t n, const struct crc_def *d)
{
    uint64_t p = (uint64_t)1 << (d->w - 1);  /* x^0 */
    uint64_t sq = (uint64_t)1 << (d->w - 9); /* x^8: one byte */

    while (n) {
        if (n & 1)
            p = crc_mulmod(sq, p, d);
        n >>= 1;
        if (n)
            sq = crc_mulmod(sq, sq, d);
    }
    return p;
}

/* See header. */
uint64_t stor_s3_crc_combine(enum stor_cksum k, uint64_t a, uint64_t b,
                             uint64_t blen)
{
    const struct crc_def *d = crc_def(k);

    if (d == NULL)
        return 0;
    return crc_mulmod(crc_x8n(blen, d), a, d) ^ b;
}

/* The raw CRC of base64 @v (@n chars) of kind @k into *crc. 0 or -EBADMSG. */
static int crc_decode(enum stor_cksum k, const char *v, size_t n, uint64_t *crc)
{
    size_t sz = stor_s3_cksum_size(k);
    uint8_t raw[48];

    if (n == 0 || n > 64 || cm_base64_decode(v, n, raw) != (long)sz)
        return -EBADMSG;
    *crc = 0;
    for (size_t i = 0; i < sz; i++)
        *crc = *crc << 8 | raw[i];
    return 0;
}

/* See header. */
int stor_s3_cksum_full(enum stor_cksum k, const char *joined,
                       const uint64_t *psize, size_t nparts, char *out,
                       size_t outlen)
{
    const struct crc_def *d = crc_def(k);
    uint64_t crc = 0, op = 0, oplen = UINT64_MAX;
    const char *p = joined;
    char b64[96];
    size_t i;

    if (d == NULL || nparts == 0 || joined == NULL)
        return -EBADMSG;
    for (i = 0; i < nparts; i++) {
        size_t n = strcspn(p, ",");
        uint64_t c;

        if (crc_decode(k, p, n, &c) < 0)
            return -EBADMSG; /* a part without (or with a bad) checksum */
        if (i == 0) {
            crc = c;
        } else {
            if (psize[i] != oplen) { /* most parts share one size */
                oplen = psize[i];
                op = crc_x8n(oplen, d);
            }
            crc = crc_mulmod(op, crc, d) ^ c;
        }
        p += n;
        if (*p == 0)
            break;
        p++;
    }
    if (i + 1 != nparts || *p != 0)
        return -EBADMSG; /* not one value per part */
    stor_s3_cksum_final(k, crc, NULL, b64);
    snprintf(out, outlen, "%s", b64);
    return 0;
}

/* See header. */
void stor_s3_cksum_part(const char *joined, size_t i, char *out, size_t outlen)
{
    const char *p = joined;
    size_t n;

    out[0] = 0;
    for (; p && i > 0; i--)
        p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
    if (p == NULL)
        return;
    n = strcspn(p, ",");
    if (n < outlen)
        snprintf(out, outlen, "%.*s", (int)n, p);
}

/* What a CompleteMultipartUpload on this thread says (stor_s3_cksum_expect):
 * the object's checksum, and the client's part list. */
static __thread enum stor_cksum t_kind;
static __thread const char *t_value;
static __thread const struct stor_part *t_parts;
static __thread size_t t_nparts;

/* See header. */
void stor_s3_cksum_expect(enum stor_cksum k, const char *value,
                          const struct stor_part *parts, size_t nparts)
{
    t_kind = value ? k : STOR_CKSUM_NONE;
    t_value = value;
    t_parts = parts;
    t_nparts = parts ? nparts : 0;
}

/* The value of header @name in @h (@n), or NULL. */
static const char *hdr_get(const struct stor_hdr *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

/* The joined part values of checksum kind @k in @h, or NULL. */
static const char *joined_of(const struct stor_hdr *h, size_t n,
                             enum stor_cksum k)
{
    char name[64];

    snprintf(name, sizeof(name), "%s%s", STOR_HDR_PART_PFX,
             stor_s3_cksum_hdr(k));
    return hdr_get(h, n, name);
}

/* Each checksum the client's list names is its part's stored one. */
static int listed_parts_check(const struct stor_hdr *h, size_t n)
{
    char have[STOR_PART_HVAL_MAX];

    if (t_parts == NULL)
        return 0;
    for (size_t i = 0; i < t_nparts; i++) {
        enum stor_cksum k = (enum stor_cksum)t_parts[i].hkind;

        if (k == STOR_CKSUM_NONE)
            continue;
        stor_s3_cksum_part(joined_of(h, n, k), i, have, sizeof(have));
        if (strcmp(have, t_parts[i].hval) != 0)
            return -STOR_EBADPART;
    }
    return 0;
}

/* See header. */
int stor_s3_cksum_complete(const struct stor_hdr *h, size_t n,
                           const uint64_t *psize, size_t nparts,
                           enum stor_cksum *kind, char *full, size_t fulllen)
{
    const char *alg = hdr_get(h, n, STOR_HDR_CK_ALG);
    const char *type = hdr_get(h, n, STOR_HDR_CK_TYPE);
    enum stor_cksum k =
        alg ? stor_s3_cksum_kind(alg, strlen(alg)) : STOR_CKSUM_NONE;
    char comp[128] = "";
    int ret = listed_parts_check(h, n);

    *kind = STOR_CKSUM_NONE;
    full[0] = 0;
    if (ret < 0)
        return ret;
    if (k != STOR_CKSUM_NONE && type && strcmp(type, "FULL_OBJECT") == 0) {
        if (stor_s3_cksum_full(k, joined_of(h, n, k), psize, nparts, full,
                               fulllen) == 0)
            *kind = k;
        else
            full[0] = 0; /* a part without its CRC: none, never a wrong one */
        snprintf(comp, sizeof(comp), "%s", full);
    } else if (t_kind != STOR_CKSUM_NONE &&
               stor_s3_cksum_composite(t_kind, joined_of(h, n, t_kind), nparts,
                                       comp, sizeof(comp)) < 0) {
        comp[0] = 0;
    }
    if (t_kind == STOR_CKSUM_NONE)
        return 0;
    if ((*kind != STOR_CKSUM_NONE && t_kind != *kind) || comp[0] == 0 ||
        strcmp(comp, t_value) != 0)
        return -STOR_EBADDIGEST;
    return 0;
}

/* See header. */
enum stor_cksum stor_s3_cksum_of_mpu(const struct stor_hdr *h, size_t n,
                                     int nparts, const char **joined, char *out,
                                     size_t outlen, bool *full)
{
    const char *alg = hdr_get(h, n, STOR_HDR_CK_ALG);
    const char *type = hdr_get(h, n, STOR_HDR_CK_TYPE);
    const char *v, *fv;
    enum stor_cksum k;

    *full = type && strcmp(type, "FULL_OBJECT") == 0;
    k = alg ? stor_s3_cksum_kind(alg, strlen(alg)) : STOR_CKSUM_NONE;
    if (k == STOR_CKSUM_NONE || nparts <= 0)
        return STOR_CKSUM_NONE;
    v = joined_of(h, n, k);
    if (v == NULL)
        return STOR_CKSUM_NONE;
    if (*full) {
        fv = hdr_get(h, n, alg); /* stored at Complete */
        if (fv == NULL)
            return STOR_CKSUM_NONE;
        snprintf(out, outlen, "%s", fv);
    } else if (stor_s3_cksum_composite(k, v, (size_t)nparts, out, outlen) < 0) {
        return STOR_CKSUM_NONE;
    }
    if (joined)
        *joined = v;
    return k;
}
