/* tests/unit/sigv2_test.c - common/sigv2: the string to sign and signature
 * of AWS Signature Version 2, against the examples of the AWS S3
 * documentation ("Signing and authenticating REST requests", the
 * "johnsmith" examples, secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY):
 * object GET and PUT, list, ?acl, DELETE, an upload with x-amz-* headers
 * (lowercased, sorted, repeated ones joined), the service GET, a
 * percent-encoded key signed as sent, and the query-string form. Then the
 * sub-resource rules (sorted, values decoded, "name" vs "name=", the
 * extra class), the bucket's slash and botocore 1.29's template query, and
 * the constant-time comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "common/sigv2.h"

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

/* The string to sign of @r must be @want, and its signature @sig. */
static void expect(const struct cm_sigv2_req *r, const char *want,
                   const char *sig)
{
    struct cm_buf b;
    char got[CM_SIGV2_SIG_LEN + 1];

    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_sigv2_string_to_sign(r, &b), 0);
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    cm_sigv2_signature(SECRET, b.data, b.len, got);
    if (sig) {
        assert_string_equal(got, sig);
        assert_true(cm_sigv2_equal(got, sig, strlen(sig)));
    }
    cm_buf_fini(&b);
}

#define DATE(s)  .date = s, .date_len = sizeof(s) - 1
#define PATH(s)  .path = s, .path_len = sizeof(s) - 1
#define QUERY(s) .query = s, .query_len = sizeof(s) - 1

static void test_doc_examples(void **state)
{
    (void)state;
    /* Object GET (virtual-hosted: the bucket comes from Host) */
    {
        struct cm_sigv2_req r = {.method = "GET",
                                 DATE("Tue, 27 Mar 2007 19:36:42 +0000"),
                                 .bucket = "johnsmith",
                                 PATH("/photos/puppy.jpg")};

        expect(&r,
               "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n"
               "/johnsmith/photos/puppy.jpg",
               "bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
    }
    /* the same, path style */
    {
        struct cm_sigv2_req r = {.method = "GET",
                                 DATE("Tue, 27 Mar 2007 19:36:42 +0000"),
                                 PATH("/johnsmith/photos/puppy.jpg")};

        expect(&r,
               "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n"
               "/johnsmith/photos/puppy.jpg",
               "bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
    }
    /* Object PUT with a Content-Type */
    {
        struct cm_sigv2_req r = {.method = "PUT",
                                 .content_type = "image/jpeg",
                                 .content_type_len = 10,
                                 DATE("Tue, 27 Mar 2007 21:15:45 +0000"),
                                 .bucket = "johnsmith",
                                 PATH("/photos/puppy.jpg")};

        expect(&r,
               "PUT\n\nimage/jpeg\nTue, 27 Mar 2007 21:15:45 +0000\n"
               "/johnsmith/photos/puppy.jpg",
               "MyyxeRY7whkBe+bq8fHCL/2kKUg=");
    }
    /* List: query parameters that are not sub-resources are not signed */
    {
        struct cm_sigv2_req r = {
            .method = "GET",
            DATE("Tue, 27 Mar 2007 19:42:41 +0000"),
            .bucket = "johnsmith",
            PATH("/"),
            QUERY("prefix=photos&max-keys=50&marker=puppy")};

        expect(&r, "GET\n\n\nTue, 27 Mar 2007 19:42:41 +0000\n/johnsmith/",
               "htDYFYduRNen8P9ZfE/s9SuKy0U=");
    }
    /* Fetch ?acl */
    {
        struct cm_sigv2_req r = {.method = "GET",
                                 DATE("Tue, 27 Mar 2007 19:44:46 +0000"),
                                 .bucket = "johnsmith",
                                 PATH("/"),
                                 QUERY("acl")};

        expect(&r, "GET\n\n\nTue, 27 Mar 2007 19:44:46 +0000\n/johnsmith/?acl",
               "c2WLPFtWHVgbEmeEG93a4cG37dM=");
    }
    /* DELETE */
    {
        struct cm_sigv2_req r = {.method = "DELETE",
                                 DATE("Tue, 27 Mar 2007 21:20:26 +0000"),
                                 PATH("/johnsmith/photos/puppy.jpg")};

        expect(&r,
               "DELETE\n\n\nTue, 27 Mar 2007 21:20:26 +0000\n"
               "/johnsmith/photos/puppy.jpg",
               "lx3byBScXR6KzyMaifNkardMwNk=");
    }
    /* Upload: Content-MD5, amz headers in any case and order, a repeated
     * one joined with ',', a value trimmed */
    {
        static const struct cm_kv amz[] = {
            {"X-Amz-Meta-ReviewedBy", 21, "joe@johnsmith.net", 17},
            {"x-amz-acl", 9, "public-read", 11},
            {"X-Amz-Meta-FileChecksum", 23, " 0x02661779 ", 12},
            {"X-Amz-Meta-ReviewedBy", 21, "jane@johnsmith.net", 18},
            {"X-Amz-Meta-ChecksumAlgorithm", 28, "crc32", 5},
        };
        struct cm_sigv2_req r = {.method = "PUT",
                                 .content_md5 = "4gJE4saaMU4BqNR0kLY+lw==",
                                 .content_md5_len = 24,
                                 .content_type = "application/x-download",
                                 .content_type_len = 22,
                                 DATE("Tue, 27 Mar 2007 21:06:08 +0000"),
                                 .amz = amz,
                                 .namz = 5,
                                 .bucket = "static.johnsmith.net",
                                 PATH("/db-backup.dat.gz")};

        expect(&r,
               "PUT\n4gJE4saaMU4BqNR0kLY+lw==\napplication/x-download\n"
               "Tue, 27 Mar 2007 21:06:08 +0000\n"
               "x-amz-acl:public-read\n"
               "x-amz-meta-checksumalgorithm:crc32\n"
               "x-amz-meta-filechecksum:0x02661779\n"
               "x-amz-meta-reviewedby:joe@johnsmith.net,jane@johnsmith.net\n"
               "/static.johnsmith.net/db-backup.dat.gz",
               "ilyl83RwaSoYIEdixDQcA4OnAnc=");
    }
    /* List all my buckets */
    {
        struct cm_sigv2_req r = {.method = "GET",
                                 DATE("Wed, 28 Mar 2007 01:29:59 +0000"),
                                 PATH("/")};

        expect(&r, "GET\n\n\nWed, 28 Mar 2007 01:29:59 +0000\n/",
               "qGdzdERIC03wnaRNKh6OqZehG9s=");
    }
    /* Unicode keys: the path exactly as sent, escapes in either case */
    {
        struct cm_sigv2_req r = {.method = "GET",
                                 DATE("Wed, 28 Mar 2007 01:49:49 +0000"),
                                 .bucket = "dictionary",
                                 PATH("/fran%C3%A7ais/pr%c3%a9f%c3%a8re")};

        expect(&r,
               "GET\n\n\nWed, 28 Mar 2007 01:49:49 +0000\n"
               "/dictionary/fran%C3%A7ais/pr%c3%a9f%c3%a8re",
               "DNEZGsoieTZ92F3bUfSPQcbGmlM=");
    }
    /* Query string authentication: Expires in the Date line, the URL's own
     * parameters not signed */
    {
        struct cm_sigv2_req r = {
            .method = "GET",
            DATE("1175139620"),
            .bucket = "johnsmith",
            PATH("/photos/puppy.jpg"),
            QUERY("AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620&"
                  "Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D")};

        expect(&r, "GET\n\n\n1175139620\n/johnsmith/photos/puppy.jpg",
               "NpgCjnDzrM+WFzoENXmpNDUsSn8=");
    }
}

static void test_subresources(void **state)
{
    (void)state;
    /* sorted by name, values decoded, "name=" kept, others left out */
    {
        struct cm_sigv2_req r = {
            .method = "GET",
            DATE("d"),
            PATH("/b/k"),
            QUERY("versionId=a%2Bb&response-content-type=text%2Fplain&"
                  "foo=bar&acl=&uploads")};

        expect(&r,
               "GET\n\n\nd\n/b/k?acl=&response-content-type=text/plain&"
               "uploads&versionId=a+b",
               NULL);
    }
    /* the extra class only when asked for */
    {
        struct cm_sigv2_req r = {.method = "GET",
                                 DATE("d"),
                                 PATH("/b"),
                                 QUERY("encryption&tagging")};

        expect(&r, "GET\n\n\nd\n/b?tagging", NULL);
        r.subres = CM_SIGV2_SUB_BASE | CM_SIGV2_SUB_EXTRA;
        expect(&r, "GET\n\n\nd\n/b?encryption&tagging", NULL);
        assert_int_equal(cm_sigv2_subresource("policyStatus", 12),
                         CM_SIGV2_SUB_EXTRA);
        assert_int_equal(cm_sigv2_subresource("partNumber", 10),
                         CM_SIGV2_SUB_BASE);
        assert_int_equal(cm_sigv2_subresource("partnumber", 10), 0);
        assert_int_equal(cm_sigv2_subresource("list-type", 9), 0);
    }
    /* the bucket's slash (botocore) and botocore 1.29's template query */
    {
        struct cm_sigv2_req r = {
            .method = "GET", DATE("d"), PATH("/b"), QUERY("uploads&prefix=x")};

        r.path_slash = true;
        expect(&r, "GET\n\n\nd\n/b/?uploads", NULL);
        r.path_slash = false;
        r.lead = r.query;
        r.lead_len = 7;
        expect(&r, "GET\n\n\nd\n/b?uploads?uploads", NULL);
    }
    /* a malformed escape in a signed value; too many amz headers */
    {
        static struct cm_kv many[CM_SIGV2_MAX_AMZ + 1];
        struct cm_sigv2_req r = {
            .method = "GET", DATE("d"), PATH("/b"), QUERY("versionId=%zz")};
        struct cm_buf b;
        size_t i;

        cm_buf_init(&b, CM_BUF_NOLIMIT);
        assert_int_equal(cm_sigv2_string_to_sign(&r, &b), -EINVAL);
        cm_buf_reset(&b);
        r.query = "versionId=%4";
        r.query_len = 12;
        assert_int_equal(cm_sigv2_string_to_sign(&r, &b), -EINVAL);
        for (i = 0; i <= CM_SIGV2_MAX_AMZ; i++)
            many[i] = (struct cm_kv){"x-amz-a", 7, "v", 1};
        r.query = NULL;
        r.query_len = 0;
        r.amz = many;
        r.namz = CM_SIGV2_MAX_AMZ + 1;
        cm_buf_reset(&b);
        assert_int_equal(cm_sigv2_string_to_sign(&r, &b), -EINVAL);
        r.namz = CM_SIGV2_MAX_AMZ;
        cm_buf_reset(&b);
        assert_int_equal(cm_sigv2_string_to_sign(&r, &b), 0);
        cm_buf_fini(&b);
    }
}

static void test_equal(void **state)
{
    (void)state;
    assert_true(cm_sigv2_equal("abc=", "abc=", 4));
    assert_false(cm_sigv2_equal("abc=", "abd=", 4));
    assert_false(cm_sigv2_equal("abc=", "abc", 3));
    assert_false(cm_sigv2_equal("abc=", "abc==", 5));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doc_examples),
        cmocka_unit_test(test_subresources),
        cmocka_unit_test(test_equal),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
