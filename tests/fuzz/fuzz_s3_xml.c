/* tests/fuzz/fuzz_s3_xml.c - libFuzzer target for the S3 request bodies
 * storaged parses with expat: DeleteObjects, CompleteMultipartUpload,
 * PutPublicAccessBlock (its switches: only the four bits, or
 * MalformedXML), PutBucketOwnershipControls (one of the three settings,
 * or MalformedXML; the setting's name as x-amz-object-ownership),
 * PutBucketEncryption (exactly AES256, NotImplemented for aws:kms, or
 * MalformedXML; the three share stor_s3_xml_parse_conf) and
 * CreateBucketConfiguration (a LocationConstraint that fits its buffer,
 * NUL-terminated; MalformedXML, NotImplemented or no memory otherwise).
 * Properties: a successful parse yields 1..1000 keys (NUL-terminated at
 * their length) or 1..10000 parts with numbers in 1..10000 and ETags
 * without quotes, a listed part checksum (hkind) only of a known kind with
 * a non-empty value; failures are only -EBADMSG or -ENOMEM. The input as
 * a joined list of part checksums gives a full-object CRC or composite
 * value, or -EBADMSG, never anything else. The input as text
 * through cm_xml_escape (what listings quote keys with) always comes out
 * as well-formed UTF-8 without a raw '<', '&' or control byte, whatever
 * the bytes. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "common/xml.h"
#include "storaged/s3/iam_i.h"
#include "storaged/s3/s3_i.h"
#include "storaged/s3/sse.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

/* The input as a Complete's joined part checksums (cksum.c): 1..4 parts,
 * sizes from the first bytes, every kind. */
static void joined_checks(const uint8_t *data, size_t size)
{
    uint64_t psize[4];
    char *j, out[160];
    size_t np, i;

    if (size < 1)
        return;
    np = 1 + data[0] % 4;
    for (i = 0; i < np; i++)
        psize[i] = (uint64_t)(size > i + 1 ? data[i + 1] : 0) << (3 * i);
    j = malloc(size + 1);
    if (j == NULL)
        return;
    memcpy(j, data, size);
    j[size] = 0;
    for (int k = 0; k < STOR_CKSUM_COUNT; k++) {
        int r = stor_s3_cksum_full((enum stor_cksum)k, j, psize, np, out,
                                   sizeof(out));

        CHECK(r == 0 || r == -EBADMSG);
        CHECK(r < 0 || (out[0] && strlen(out) < sizeof(out)));
        r = stor_s3_cksum_composite((enum stor_cksum)k, j, np, out,
                                    sizeof(out));
        CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
        stor_s3_cksum_part(j, np, out, sizeof(out));
        CHECK(strlen(out) < sizeof(out));
    }
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct stor_s3_del_key *keys = NULL;
    struct stor_part *parts = NULL;
    size_t n = 0, i;
    bool quiet = false;
    struct cm_buf esc;
    int ret;

    cm_buf_init(&esc, CM_BUF_NOLIMIT);
    ret = cm_xml_escape(&esc, (const char *)data, size);
    CHECK(ret == 0 || ret == -ENOMEM);
    if (ret == 0) {
        CHECK(esc.data != NULL);
        CHECK(cm_utf8_valid(esc.data, esc.len));
        for (i = 0; i < esc.len; i++) {
            unsigned char c = (unsigned char)esc.data[i];

            CHECK(c != '<' && c != '>' && c != '"' && c != '\'' && c != 0);
            CHECK(c >= 0x20 || c == '\t' || c == '\n' || c == '\r');
        }
    }
    cm_buf_fini(&esc);

    ret = stor_s3_parse_delete((const char *)data, size, &keys, &n, &quiet);
    if (ret == 0) {
        CHECK(n >= 1 && n <= 1000);
        for (i = 0; i < n; i++)
            CHECK(keys[i].key[keys[i].key_len] == 0);
        stor_s3_del_keys_free(keys, n);
    } else {
        CHECK(ret == -EBADMSG || ret == -ENOMEM);
    }
    {
        unsigned bits = 0xdead;
        enum stor_s3_err e =
            stor_iam_pab_parse((const char *)data, size, &bits);

        CHECK(e == S3E_NONE || e == S3E_MALFORMED_XML || e == S3E_INTERNAL);
        CHECK(e != S3E_NONE || (bits & ~0xfu) == 0);
    }
    {
        int own = -7;
        enum stor_s3_err e =
            stor_iam_own_parse_xml((const char *)data, size, &own);

        CHECK(e == S3E_NONE || e == S3E_MALFORMED_XML || e == S3E_INTERNAL);
        CHECK(e == S3E_NONE
                  ? own >= IAM_OWN_ENFORCED && own <= IAM_OWN_WRITER &&
                        stor_iam_own_name(own) != NULL
                  : own == -7);
        /* the name as a header value: a setting only when it names one */
        own = stor_iam_own_parse((const char *)data, size);
        CHECK(own == -1 || (own >= IAM_OWN_ENFORCED && own <= IAM_OWN_WRITER &&
                            strlen(stor_iam_own_name(own)) == size &&
                            memcmp(stor_iam_own_name(own), data, size) == 0));
    }
    {
        char alg[8] = "x";
        enum stor_s3_err e =
            stor_sse_config_parse((const char *)data, size, alg);

        CHECK(e == S3E_NONE || e == S3E_MALFORMED_XML ||
              e == S3E_SSE_KMS_NOT_IMPLEMENTED || e == S3E_INTERNAL);
        CHECK(e == S3E_NONE ? strcmp(alg, "AES256") == 0
                            : strcmp(alg, "x") == 0);
    }
    {
        char loc[16];
        enum stor_s3_err e = stor_s3_parse_create_bucket(
            (const char *)data, size, loc, sizeof(loc));

        CHECK(e == S3E_NONE || e == S3E_MALFORMED_XML ||
              e == S3E_NOT_IMPLEMENTED || e == S3E_INTERNAL);
        CHECK(e != S3E_NONE || memchr(loc, 0, sizeof(loc)) != NULL);
    }
    ret = stor_s3_parse_complete((const char *)data, size, &parts, &n);
    if (ret == 0) {
        CHECK(n >= 1 && n <= STOR_MAX_PARTS);
        for (i = 0; i < n; i++) {
            CHECK(parts[i].number >= 1 && parts[i].number <= STOR_MAX_PARTS);
            CHECK(strchr(parts[i].etag, '"') == NULL ||
                  parts[i].etag[0] != '"');
            CHECK(parts[i].hkind >= 0 && parts[i].hkind < STOR_CKSUM_COUNT);
            CHECK(parts[i].hkind == 0 ||
                  (parts[i].hval[0] != 0 &&
                   memchr(parts[i].hval, 0, sizeof(parts[i].hval)) != NULL));
        }
        free(parts);
    } else {
        CHECK(ret == -EBADMSG || ret == -ENOMEM);
    }
    joined_checks(data, size);
    return 0;
}
