/* tests/unit/s3_auth_test.c - SigV4 verification (storaged/s3/auth.c) on fake
 * requests, no socket: the Amazon S3 documentation's signed GET (header
 * auth) and presigned URL verify at their date, and each way a request can
 * fail is answered with its own error: a wrong or truncated signature, a
 * changed signed header, an unknown access key, clock skew past 15 minutes
 * (both ways), a presigned URL past its expiry or not valid yet, no
 * credentials. SigV2 (header and query forms) verifies the AWS
 * documentation's "johnsmith" examples and is refused as AWS refuses it, or
 * altogether with --no-sigv2. Then the signing state aws-chunked needs is
 * checked by verifying a chunk signature chained from the header's. */
#include "tests/unit/s3_fake.h"

#include <stdio.h>

#include "storaged/s3/auth.h"

#define T_20130524 ((time_t)1369353600) /* 20130524T000000Z */

#define DOC_SIG                                                                \
    "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
#define DOC_AUTH(sig)                                                          \
    "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"         \
    "20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;"            \
    "x-amz-content-sha256;x-amz-date, Signature=" sig "\r\n"
#define DOC_HDRS                                                               \
    "Host: examplebucket.s3.amazonaws.com\r\n"                                 \
    "Range: bytes=0-9\r\n"                                                     \
    "x-amz-content-sha256: "                                                   \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n"     \
    "x-amz-date: 20130524T000000Z\r\n"

/* stor_auth_check of head @raw at @now. */
static enum stor_s3_err check(const char *raw, time_t now)
{
    struct stor_s3_req *r = fake_decoded(raw);
    enum stor_s3_err e = stor_auth_check(r, now);

    assert_int_equal(r->authed, e == S3E_NONE && !r->anonymous);
    fake_free(r);
    return e;
}

static void test_header_auth(void **state)
{
    (void)state;
    /* the documentation's example, as sent to a virtual-hosted endpoint */
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n" DOC_HDRS DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524),
        S3E_NONE);
    /* within the 15-minute skew either way */
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n" DOC_HDRS DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524 + 15 * 60),
        S3E_NONE);
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n" DOC_HDRS DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524 - 15 * 60),
        S3E_NONE);
}

/* SigV4 with a Date header and no x-amz-date (botocore's own signer with a
 * request that has Date): the request time is Date's, signed as ISO basic.
 * Signature computed from AWS's algorithm for this request. */
#define DATE_HDRS(date)                                                        \
    "Host: examplebucket.s3.amazonaws.com\r\n"                                 \
    "Date: " date "\r\n"                                                       \
    "x-amz-content-sha256: "                                                   \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n"     \
    "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"         \
    "20130524/us-east-1/s3/aws4_request, SignedHeaders=date;host;"             \
    "x-amz-content-sha256, Signature="                                         \
    "ed6194c9433be47c68984c63fc0cfe624f5e1ec7d645c66cd434cc72472bab45\r\n"

static void test_header_auth_date(void **state)
{
    (void)state;
    assert_int_equal(check("GET /test.txt HTTP/1.1\r\n" DATE_HDRS(
                               "Fri, 24 May 2013 00:00:00 -0000") "\r\n",
                           T_20130524),
                     S3E_NONE);
    assert_int_equal(check("GET /test.txt HTTP/1.1\r\n" DATE_HDRS(
                               "Fri, 24 May 2013 00:00:00 -0000") "\r\n",
                           T_20130524 + 15 * 60 + 1),
                     S3E_SKEWED);
    /* another second: another string to sign */
    assert_int_equal(check("GET /test.txt HTTP/1.1\r\n" DATE_HDRS(
                               "Fri, 24 May 2013 00:00:01 -0000") "\r\n",
                           T_20130524),
                     S3E_SIGNATURE_MISMATCH);
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n" DATE_HDRS("yesterday") "\r\n",
              T_20130524),
        S3E_ACCESS_DENIED);
}

static void test_header_auth_refused(void **state)
{
    (void)state;
    /* one hex digit changed */
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n" DOC_HDRS DOC_AUTH(
                  "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036b"
                  "db42") "\r\n",
              T_20130524),
        S3E_SIGNATURE_MISMATCH);
    /* a signed header's value changed */
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n"
              "Host: examplebucket.s3.amazonaws.com\r\n"
              "Range: bytes=0-99\r\n"
              "x-amz-content-sha256: "
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
              "\r\nx-amz-date: 20130524T000000Z\r\n" DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524),
        S3E_SIGNATURE_MISMATCH);
    /* another path */
    assert_int_equal(
        check("GET /test.txu HTTP/1.1\r\n" DOC_HDRS DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524),
        S3E_SIGNATURE_MISMATCH);
    /* a signed header missing */
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n"
              "Host: examplebucket.s3.amazonaws.com\r\n"
              "x-amz-content-sha256: "
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca49"
              "5991b7852b855\r\n"
              "x-amz-date: 20130524T000000Z\r\n" DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524),
        S3E_SIGNATURE_MISMATCH);
    /* skew: 15 minutes and one second, either way */
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n" DOC_HDRS DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524 + 15 * 60 + 1),
        S3E_SKEWED);
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n" DOC_HDRS DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524 - 15 * 60 - 1),
        S3E_SKEWED);
    /* an access key that is not ours */
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n" DOC_HDRS
              "Authorization: AWS4-HMAC-SHA256 Credential=AKIAOTHER/20130524/"
              "us-east-1/s3/aws4_request, SignedHeaders=host;range;"
              "x-amz-content-sha256;x-amz-date, Signature=" DOC_SIG "\r\n\r\n",
              T_20130524),
        S3E_INVALID_ACCESS_KEY);
    /* header auth needs x-amz-content-sha256 */
    assert_int_equal(
        check("GET /test.txt HTTP/1.1\r\n"
              "Host: examplebucket.s3.amazonaws.com\r\n"
              "x-amz-date: 20130524T000000Z\r\n" DOC_AUTH(DOC_SIG) "\r\n",
              T_20130524),
        S3E_INVALID_REQUEST);
    /* no credentials at all: anonymous, for the authoriser to decide
     * (stor_iam_authorize; the on_head test in s3_route_test sees 403) */
    {
        struct stor_s3_req *r = fake_decoded("GET /b/k HTTP/1.1\r\nHost: "
                                             "h\r\n\r\n");

        assert_int_equal(stor_auth_check(r, T_20130524), S3E_NONE);
        assert_true(r->anonymous);
        assert_false(r->authed);
        fake_free(r);
    }
}

#define T_V2 ((time_t)1175024202) /* Tue, 27 Mar 2007 19:36:42 +0000 */
#define V2_GET(date, auth)                                                     \
    "GET /johnsmith/photos/puppy.jpg HTTP/1.1\r\n"                             \
    "Host: s3.amazonaws.com\r\n" date "Authorization: AWS " auth "\r\n\r\n"
#define V2_DATE "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
#define V2_SIG  "AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU="
/* the documentation's query-string example, Expires 1175139620 */
#define V2_URL(sig)                                                            \
    "GET /johnsmith/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&"     \
    "Expires=1175139620&Signature=" sig " HTTP/1.1\r\n"                        \
    "Host: s3.amazonaws.com\r\n\r\n"
#define V2_USIG "NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D"

static void test_sigv2(void **state)
{
    (void)state;
    /* header form: the documentation's GET, path style */
    assert_int_equal(check(V2_GET(V2_DATE, V2_SIG), T_V2), S3E_NONE);
    assert_int_equal(check(V2_GET(V2_DATE, V2_SIG), T_V2 + 15 * 60), S3E_NONE);
    assert_int_equal(check(V2_GET(V2_DATE, V2_SIG), T_V2 + 15 * 60 + 1),
                     S3E_SKEWED);
    assert_int_equal(check(V2_GET(V2_DATE, V2_SIG), T_V2 - 15 * 60 - 1),
                     S3E_SKEWED);
    /* the same date as IMF-fixdate signs another string */
    assert_int_equal(
        check(V2_GET("Date: Tue, 27 Mar 2007 19:36:42 GMT\r\n", V2_SIG), T_V2),
        S3E_SIGNATURE_MISMATCH);
    /* one character of the signature, another key, another path */
    assert_int_equal(
        check(V2_GET(V2_DATE,
                     "AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMV="),
              T_V2),
        S3E_SIGNATURE_MISMATCH);
    assert_int_equal(
        check(V2_GET(V2_DATE, "AKIAOTHER:bWq2s1WEIj+Ydj0vQ697zp+IXMU="), T_V2),
        S3E_INVALID_ACCESS_KEY);
    assert_int_equal(check("GET /johnsmith/photos/puppy.jpeg HTTP/1.1\r\n"
                           "Host: s3.amazonaws.com\r\n" V2_DATE
                           "Authorization: AWS " V2_SIG "\r\n\r\n",
                           T_V2),
                     S3E_SIGNATURE_MISMATCH);
    /* a signed amz header added: x-amz-date then empties the Date line */
    assert_int_equal(
        check(V2_GET(V2_DATE "x-amz-date: Tue, 27 Mar 2007 19:36:42 +0000\r\n",
                     V2_SIG),
              T_V2),
        S3E_SIGNATURE_MISMATCH);
    /* malformed header, no date, a bad date, before 1970 */
    assert_int_equal(check(V2_GET(V2_DATE, "HAHAHA"), T_V2),
                     S3E_SIGV2_BAD_HEADER);
    assert_int_equal(check(V2_GET(V2_DATE, "AKIAIOSFODNN7EXAMPLE:"), T_V2),
                     S3E_SIGV2_BAD_HEADER);
    assert_int_equal(check(V2_GET("", V2_SIG), T_V2), S3E_SIGV2_BAD_DATE);
    assert_int_equal(check(V2_GET("x-amz-date: Bad Date\r\n", V2_SIG), T_V2),
                     S3E_SIGV2_BAD_DATE);
    assert_int_equal(
        check(V2_GET("x-amz-date: Tue, 07 Jul 1950 21:53:04 GMT\r\n", V2_SIG),
              T_V2),
        S3E_SIGV2_BAD_DATE);
    assert_int_equal(
        check(V2_GET("x-amz-date: Tue, 07 Jul 9999 21:53:04 GMT\r\n", V2_SIG),
              T_V2),
        S3E_SKEWED);
    /* query form: valid until Expires, then AccessDenied */
    assert_int_equal(check(V2_URL(V2_USIG), T_V2), S3E_NONE);
    assert_int_equal(check(V2_URL(V2_USIG), 1175139620), S3E_NONE);
    assert_int_equal(check(V2_URL(V2_USIG), 1175139621), S3E_EXPIRED_PRESIGN);
    assert_int_equal(check(V2_URL("NpgCjnDzrM%2BWFzoENXmpNDUsSn9%3D"), T_V2),
                     S3E_SIGNATURE_MISMATCH);
    assert_int_equal(check("GET /johnsmith/photos/puppy.jpg?AWSAccessKeyId="
                           "AKIAIOSFODNN7EXAMPLE&Signature=" V2_USIG
                           " HTTP/1.1\r\n\r\n",
                           T_V2),
                     S3E_SIGV2_QUERY_INCOMPLETE);
    assert_int_equal(
        check("GET /johnsmith/photos/puppy.jpg?AWSAccessKeyId="
              "AKIAIOSFODNN7EXAMPLE&Expires=1175139620&Signature=" V2_USIG
              "&x-amz-acl=public-read HTTP/1.1\r\n\r\n",
              T_V2),
        S3E_NOT_IMPLEMENTED);
    /* --no-sigv2: both forms refused as before, whatever they carry */
    fake_s3.no_sigv2 = true;
    assert_int_equal(check(V2_GET(V2_DATE, V2_SIG), T_V2),
                     S3E_SIGV2_UNSUPPORTED);
    assert_int_equal(check(V2_GET("", "HAHAHA"), T_V2), S3E_SIGV2_UNSUPPORTED);
    assert_int_equal(check(V2_URL(V2_USIG), T_V2), S3E_SIGV2_UNSUPPORTED);
    fake_s3.no_sigv2 = false;
}

#define DOC_PRESIGN(sig)                                                       \
    "GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="         \
    "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&"         \
    "X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"                         \
    "X-Amz-SignedHeaders=host&X-Amz-Signature=" sig " HTTP/1.1\r\n"            \
    "Host: examplebucket.s3.amazonaws.com\r\n\r\n"
#define DOC_PSIG                                                               \
    "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"

static void test_presigned(void **state)
{
    (void)state;
    assert_int_equal(check(DOC_PRESIGN(DOC_PSIG), T_20130524), S3E_NONE);
    /* the last second of its 86400 */
    assert_int_equal(check(DOC_PRESIGN(DOC_PSIG), T_20130524 + 86400),
                     S3E_NONE);
    assert_int_equal(check(DOC_PRESIGN(DOC_PSIG), T_20130524 + 86401),
                     S3E_EXPIRED_PRESIGN);
    /* not valid yet (beyond the skew) */
    assert_int_equal(check(DOC_PRESIGN(DOC_PSIG), T_20130524 - 15 * 60 - 1),
                     S3E_ACCESS_DENIED);
    assert_int_equal(
        check(DOC_PRESIGN(
                  "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604"
                  "d405"),
              T_20130524),
        S3E_SIGNATURE_MISMATCH);
    /* not hex, or short */
    assert_int_equal(check(DOC_PRESIGN("zz"), T_20130524),
                     S3E_SIGNATURE_MISMATCH);
    /* a parameter missing */
    assert_int_equal(check("GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&"
                           "X-Amz-Signature=" DOC_PSIG " HTTP/1.1\r\n\r\n",
                           T_20130524),
                     S3E_AUTH_QUERY_INVALID);
    /* an expiry past the 7-day maximum */
    assert_int_equal(
        check("GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
              "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&"
              "X-Amz-Date=20130524T000000Z&X-Amz-Expires=604801&"
              "X-Amz-SignedHeaders=host&X-Amz-Signature=" DOC_PSIG
              " HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\n\r\n",
              T_20130524),
        S3E_AUTH_QUERY_INVALID);
    /* the same URL with its parameters in another order (the one pass over
     * the query finds each; the canonical query is sorted anyway) */
    assert_int_equal(
        check("GET /test.txt?X-Amz-Signature=" DOC_PSIG
              "&X-Amz-SignedHeaders=host&X-Amz-Expires=86400&"
              "X-Amz-Date=20130524T000000Z&X-Amz-Credential="
              "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&"
              "X-Amz-Algorithm=AWS4-HMAC-SHA256"
              " HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\n\r\n",
              T_20130524),
        S3E_NONE);
    /* only a signature: still a presigned request, refused as malformed */
    assert_int_equal(check("GET /test.txt?X-Amz-Signature=" DOC_PSIG
                           " HTTP/1.1\r\n\r\n",
                           T_20130524),
                     S3E_AUTH_QUERY_INVALID);
    /* a repeated X-Amz-Expires: the first one counts (604801 is refused),
     * as stor_s3_query would have it */
    assert_int_equal(
        check("GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
              "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&"
              "X-Amz-Date=20130524T000000Z&X-Amz-Expires=604801&"
              "X-Amz-Expires=86400&"
              "X-Amz-SignedHeaders=host&X-Amz-Signature=" DOC_PSIG
              " HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\n\r\n",
              T_20130524),
        S3E_AUTH_QUERY_INVALID);
    /* X-Amz- names the check does not use do not stand in for one */
    assert_int_equal(check("GET /test.txt?X-Amz-Algorithmx=AWS4-HMAC-SHA256&"
                           "X-Amz-Sig=" DOC_PSIG " HTTP/1.1\r\n\r\n",
                           T_20130524),
                     S3E_NONE); /* no credentials: anonymous */
}

/* Writes to @out the head of a PUT of /b/k with signed aws-chunked
 * payload, signed with common/sigv4 at @amz_date. */
static void sign_put(char *out, size_t cap, const char *amz_date)
{
    struct cm_kv h[] = {
        {"host", 4, "h", 1},
        {"x-amz-content-sha256", 20, CM_SIGV4_STREAMING,
         strlen(CM_SIGV4_STREAMING)},
        {"x-amz-date", 10, amz_date, strlen(amz_date)},
    };
    struct cm_sigv4_req sr = {"PUT", "/b/k", 4, NULL,
                              0,     h,      3, CM_SIGV4_STREAMING};
    struct cm_buf canon, sts, scope;
    uint8_t key[32];
    char sig[65];

    cm_buf_init(&canon, CM_BUF_NOLIMIT);
    cm_buf_init(&sts, CM_BUF_NOLIMIT);
    cm_buf_init(&scope, CM_BUF_NOLIMIT);
    assert_int_equal(cm_sigv4_canonical_request(&sr, &canon), 0);
    assert_int_equal(cm_sigv4_scope(amz_date, "us-east-1", "s3", &scope), 0);
    assert_int_equal(
        cm_sigv4_string_to_sign(amz_date, scope.data, &canon, &sts), 0);
    cm_sigv4_signing_key(fake_s3.root_secret, "20130524", "us-east-1", "s3",
                         key);
    cm_sigv4_signature(key, sts.data, sts.len, sig);
    snprintf(out, cap,
             "PUT /b/k HTTP/1.1\r\nHost: h\r\n"
             "x-amz-content-sha256: %s\r\nx-amz-date: %s\r\n"
             "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"
             "20130524/us-east-1/s3/aws4_request, SignedHeaders=host;"
             "x-amz-content-sha256;x-amz-date, Signature=%s\r\n\r\n",
             CM_SIGV4_STREAMING, amz_date, sig);
    cm_buf_fini(&canon);
    cm_buf_fini(&sts);
    cm_buf_fini(&scope);
}

static void test_chunk_chain(void **state)
{
    char raw[1024], expect[65], empty[65];
    struct stor_s3_req *r;

    (void)state;
    sign_put(raw, sizeof(raw), "20130524T000000Z");
    r = fake_decoded(raw);
    assert_int_equal(stor_auth_check(r, T_20130524), S3E_NONE);
    assert_int_equal(r->payload, STOR_PAYLOAD_STREAMING);
    /* the first chunk's signature chains from the request's */
    cm_sha256_hex("", 0, empty);
    cm_sigv4_chunk_signature(r->sign_key, r->amz_date, r->scope, r->prev_sig,
                             empty, expect);
    assert_int_equal(stor_auth_chunk(r, "00", 2, empty),
                     S3E_SIGNATURE_MISMATCH);
    assert_int_equal(stor_auth_chunk(r, expect, 64, empty), S3E_NONE);
    /* replaying it for the next chunk fails: the chain moved on */
    assert_int_equal(stor_auth_chunk(r, expect, 64, empty),
                     S3E_SIGNATURE_MISMATCH);
    fake_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_auth),
        cmocka_unit_test(test_header_auth_date),
        cmocka_unit_test(test_header_auth_refused),
        cmocka_unit_test(test_presigned),
        cmocka_unit_test(test_sigv2),
        cmocka_unit_test(test_chunk_chain),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
