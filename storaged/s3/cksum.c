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

/* The checksum a CompleteMultipartUpload on this thread says the object
 * has (stor_s3_cksum_expect), checked by the Complete hook. */
static __thread enum stor_cksum t_kind;
static __thread const char *t_value;

/* See header. */
void stor_s3_cksum_expect(enum stor_cksum k, const char *value)
{
    t_kind = value ? k : STOR_CKSUM_NONE;
    t_value = value;
}

/* See header. */
int stor_s3_cksum_expect_check(const struct stor_hdr *h, size_t n,
                               size_t nparts)
{
    char name[64], comp[128];
    const char *v = NULL;

    if (t_kind == STOR_CKSUM_NONE)
        return 0;
    snprintf(name, sizeof(name), "%s%s", STOR_HDR_PART_PFX,
             stor_s3_cksum_hdr(t_kind));
    for (size_t i = 0; i < n && !v; i++)
        if (strcmp(h[i].name, name) == 0)
            v = h[i].value;
    if (v == NULL ||
        stor_s3_cksum_composite(t_kind, v, nparts, comp, sizeof(comp)) < 0 ||
        strcmp(comp, t_value) != 0)
        return -STOR_EBADDIGEST;
    return 0;
}

/* See header. */
enum stor_cksum stor_s3_cksum_of_mpu(const struct stor_hdr *h, size_t n,
                                     int nparts, const char **joined, char *out,
                                     size_t outlen)
{
    const char *alg = NULL, *v = NULL;
    char name[64];
    enum stor_cksum k;
    size_t i;

    for (i = 0; i < n && !alg; i++)
        if (strcmp(h[i].name, STOR_HDR_CK_ALG) == 0)
            alg = h[i].value;
    k = alg ? stor_s3_cksum_kind(alg, strlen(alg)) : STOR_CKSUM_NONE;
    if (k == STOR_CKSUM_NONE || nparts <= 0)
        return STOR_CKSUM_NONE;
    snprintf(name, sizeof(name), "%s%s", STOR_HDR_PART_PFX, alg);
    for (i = 0; i < n && !v; i++)
        if (strcmp(h[i].name, name) == 0)
            v = h[i].value;
    if (v == NULL ||
        stor_s3_cksum_composite(k, v, (size_t)nparts, out, outlen) < 0)
        return STOR_CKSUM_NONE;
    if (joined)
        *joined = v;
    return k;
}
