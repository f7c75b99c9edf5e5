/* tests/fuzz/fuzz_s3_auth.c - libFuzzer target for what storaged does with
 * an untrusted request before any object-layer call: the head parser, the
 * target decoder (s3/req.c: path, bucket, key, query; origin- and
 * absolute-form) and SigV4 and SigV2 verification of the Authorization
 * header or presigned query (auth.c: credential, signed-header lookup,
 * skew, expiry, payload modes; common/sigv2.c: amz headers, sub-resources,
 * the raw path, virtual-hosted buckets under the domain s3.test), and the
 * router (s3.c: stor_s3_route, whatever auth says).
 * Properties: no crash; a route is an operation or an error; a fuzzed request
 * never authenticates unless it carries the valid signature (the inputs cannot
 * know the secret, so stor_auth_check returns S3E_NONE only for a request
 * without credentials, marked anonymous), and an anonymous request is then
 * refused by the authoriser (s3/authz.c: no bucket policy or ACL exists
 * here; DeleteObjects is decided per key later); decoded strings stay
 * within their stated lengths. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storaged/s3/auth.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/s3_i.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

/* 2015-08-30T12:36:00Z: the fixed "now" of every run, so corpus entries
 * with that date exercise the signature comparison itself. */
#define FUZZ_NOW 1440938160

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct stor_s3 s3 = {
        .root_user = "AKIDEXAMPLE",
        .root_secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        .region = "us-east-1",
        .domain = "s3.test",
        .domain_len = 7,
    };
    struct stor_s3_req *r;
    char *copy;
    int ret;

    r = calloc(1, sizeof(*r));
    copy = malloc(size + 1);
    if (r == NULL || copy == NULL)
        goto out;
    memcpy(copy, data, size);
    copy[size] = 0;
    r->s3 = &s3;
    r->http.app = &s3;
    r->http.head.hdrs = r->http.hdrs;
    r->http.head.nhdrs = STOR_HTTP_MAX_HEADERS;
    ret = stor_http_parse_head(copy, size, &r->http.head);
    if (ret < 0)
        goto out;
    r->http.is_get = r->http.head.method_len == 3 &&
                     memcmp(r->http.head.method, "GET", 3) == 0;
    r->http.is_put = r->http.head.method_len == 3 &&
                     memcmp(r->http.head.method, "PUT", 3) == 0;
    r->http.is_head = !r->http.is_get && !r->http.is_put;
    if (stor_s3_decode_target(r) != S3E_NONE)
        goto out;
    CHECK(r->path != NULL && r->path[0] == '/');
    CHECK(strlen(r->bucket) < sizeof(r->bucket));
    if (r->key)
        CHECK(r->key[r->key_len] == 0);
    for (size_t i = 0; i < r->nquery; i++) {
        CHECK(r->query[i].name[r->query[i].name_len] == 0 &&
              r->query[i].value[r->query[i].value_len] == 0);
        /* every decoded name is found (stor_s3_query's first-byte filter
         * never hides one) */
        CHECK(stor_s3_query(r, r->query[i].name) != NULL);
    }
    {
        enum stor_s3_err a = stor_auth_check(r, FUZZ_NOW);
        enum stor_s3_err e;

        CHECK(a != S3E_NONE || (r->anonymous && !r->authed));
        CHECK(r->iam_user == NULL && r->iam_snap == NULL);
        e = stor_s3_route(r);
        CHECK(e != S3E_NONE || r->op != S3_OP_UNKNOWN);
        CHECK(r->op < S3_OP_COUNT);
        if (a == S3E_NONE && e == S3E_NONE && r->op != S3_OP_DELETE_OBJECTS)
            CHECK(stor_iam_authorize(r) != S3E_NONE);
    }
out:
    if (r)
        stor_s3_target_fini(r);
    free(r);
    free(copy);
    return 0;
}
