/* tests/unit/s3_ops_test.c - the S3 operations' argument checks
 * (storaged/s3/ops.c), called alone on fake requests with no store: each
 * malformed argument is refused with S3's error before the object layer is
 * touched (the fake has no store: a call into it would crash the test).
 * GetObject/HeadObject's reply is driven with a made-up object: part
 * numbers, ranges, conditionals and the headers of a good answer. */
#include "tests/unit/s3_fake.h"

#include <stdio.h>

/* Routes @raw, takes @body as its buffered body, runs the operation as a
 * worker would (stor_s3_op_run, or the PUT pre-body job) and returns the
 * request for the caller to check and fake_free(). */
static struct stor_s3_req *run(const char *raw, const char *body)
{
    struct stor_s3_req *r = fake_decoded(raw);

    assert_int_equal(stor_s3_route(r), S3E_NONE);
    if (body)
        assert_int_equal(cm_buf_appends(&r->body, body), 0);
    if (r->body_mode == STOR_BODY_STREAM)
        stor_s3_put_begin_run(r);
    else
        stor_s3_op_run(r);
    return r;
}

/* Runs @raw and checks it is refused with @e. */
static void refused(const char *raw, const char *body, enum stor_s3_err e)
{
    struct stor_s3_req *r = run(raw, body);

    if (r->err != e || r->http.resp.status != stor_s3_err_info(e)->status)
        fail_msg("%s: err %d status %d, want %d", raw, (int)r->err,
                 r->http.resp.status, (int)e);
    assert_null(r->put);
    fake_free(r);
}

#define H " HTTP/1.1\r\nHost: h\r\n"

static void test_list_arguments(void **state)
{
    (void)state;
    refused("GET /b?encoding-type=xml" H "\r\n", NULL, S3E_INVALID_ARGUMENT);
    refused("GET /b?max-keys=ten" H "\r\n", NULL, S3E_INVALID_ARGUMENT);
    refused("GET /b?max-keys=-1" H "\r\n", NULL, S3E_INVALID_ARGUMENT);
    refused("GET /b?list-type=2&continuation-token=%21%21" H "\r\n", NULL,
            S3E_INVALID_ARGUMENT);
    refused("GET /b/k?uploadId=u&max-parts=x" H "\r\n", NULL,
            S3E_INVALID_ARGUMENT);
    refused("GET /b/k?uploadId=u&part-number-marker=10001" H "\r\n", NULL,
            S3E_INVALID_ARGUMENT);
    refused("GET /b?uploads&max-uploads=many" H "\r\n", NULL,
            S3E_INVALID_ARGUMENT);
}

static void test_write_arguments(void **state)
{
    (void)state;
    /* UploadPart: part numbers 1..10000 */
    refused("PUT /b/k?partNumber=0&uploadId=u" H "\r\n", NULL,
            S3E_INVALID_ARGUMENT);
    refused("PUT /b/k?partNumber=10001&uploadId=u" H "\r\n", NULL,
            S3E_INVALID_ARGUMENT);
    refused("PUT /b/k?partNumber=one&uploadId=u" H "\r\n", NULL,
            S3E_INVALID_ARGUMENT);
    /* PutObject: x-amz-tagging with a key twice, an empty key, a bad
     * escape, or more than 10 tags */
    refused("PUT /b/k" H "x-amz-tagging: a=1&a=2\r\n\r\n", NULL,
            S3E_TAGGING_HEADER);
    refused("PUT /b/k" H "x-amz-tagging: a=1&&=2\r\n\r\n", NULL,
            S3E_INVALID_TAG);
    refused("PUT /b/k" H "x-amz-tagging: a=%zz\r\n\r\n", NULL,
            S3E_TAGGING_HEADER);
    refused("PUT /b/k" H "x-amz-tagging: a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&"
            "i=9&j=10&k=11\r\n\r\n",
            NULL, S3E_TOO_MANY_TAGS);
    /* CopyObject */
    refused("PUT /b/k" H "x-amz-copy-source: nobucket\r\n\r\n", NULL,
            S3E_INVALID_ARGUMENT);
    refused("PUT /b/k" H "x-amz-copy-source: /b/src\r\n"
            "x-amz-metadata-directive: MOVE\r\n\r\n",
            NULL, S3E_INVALID_ARGUMENT);
    refused("PUT /b/k" H "x-amz-copy-source: /b/src\r\n"
            "x-amz-tagging-directive: KEEP\r\n\r\n",
            NULL, S3E_INVALID_ARGUMENT);
    refused("PUT /b/k" H "x-amz-copy-source: /b/k\r\n\r\n", NULL,
            S3E_COPY_TO_SELF);
    /* DeleteObjects: needs Content-MD5 (or a checksum), and XML */
    refused("POST /b?delete" H "\r\n",
            "<Delete><Object><Key>k</Key></Object></Delete>",
            S3E_INVALID_REQUEST);
    {
        struct stor_s3_req *r = fake_decoded("POST /b?delete" H "\r\n");

        assert_int_equal(stor_s3_route(r), S3E_NONE);
        r->has_md5 = true; /* checked by the body pipeline (s3.c) */
        assert_int_equal(cm_buf_appends(&r->body, "<Delete><Object>"), 0);
        stor_s3_op_run(r);
        assert_int_equal(r->err, S3E_MALFORMED_XML);
        fake_free(r);
    }
    /* CompleteMultipartUpload: XML, parts in ascending order */
    refused("POST /b/k?uploadId=u" H "\r\n", "<CompleteMultipartUpload>",
            S3E_MALFORMED_XML);
    refused("POST /b/k?uploadId=u" H "\r\n",
            "<CompleteMultipartUpload>"
            "<Part><PartNumber>2</PartNumber><ETag>\"a\"</ETag></Part>"
            "<Part><PartNumber>1</PartNumber><ETag>\"b\"</ETag></Part>"
            "</CompleteMultipartUpload>",
            S3E_INVALID_PART_ORDER);
}

static void test_bucket_names(void **state)
{
    (void)state;
    assert_true(stor_s3_bucket_name_ok("my-bucket.1"));
    assert_true(stor_s3_bucket_name_ok("abc"));
    assert_false(stor_s3_bucket_name_ok("ab"));
    assert_false(stor_s3_bucket_name_ok("My-Bucket"));
    assert_false(stor_s3_bucket_name_ok("-bucket"));
    assert_false(stor_s3_bucket_name_ok("bucket-"));
    assert_false(stor_s3_bucket_name_ok("a..b"));
    assert_false(stor_s3_bucket_name_ok("192.168.1.1"));
    assert_false(stor_s3_bucket_name_ok(
        "a123456789012345678901234567890123456789012345678901234567890123"));
}

/* HeadObject's reply for a made-up 1000-byte object with ETag "abc". */
static struct stor_s3_req *head_reply(const char *hdrs, const char *query)
{
    char raw[512];
    struct stor_s3_req *r;
    struct stor_obj_info info;

    snprintf(raw, sizeof(raw), "HEAD /b/k%s" H "%s\r\n", query, hdrs);
    r = fake_decoded(raw);
    assert_int_equal(stor_s3_route(r), S3E_NONE);
    memset(&info, 0, sizeof(info));
    info.size = 1000;
    info.mtime = 1369353600;
    snprintf(info.etag, sizeof(info.etag), "abc");
    stor_s3_get_object_reply(r, &info, NULL);
    return r;
}

static void test_get_reply(void **state)
{
    struct stor_s3_req *r;

    (void)state;
    r = head_reply("", "");
    assert_int_equal(r->http.resp.status, 200);
    assert_true(r->http.resp.no_body);
    assert_true(r->http.resp.has_length);
    assert_int_equal(r->http.resp.content_length, 1000);
    assert_true(fake_has_hdr(r, "ETag: \"abc\"\r\n"));
    assert_true(
        fake_has_hdr(r, "Last-Modified: Fri, 24 May 2013 00:00:00 GMT"));
    fake_free(r);

    r = head_reply("Range: bytes=10-19\r\n", "");
    assert_int_equal(r->http.resp.status, 206);
    assert_int_equal(r->http.resp.content_length, 10);
    assert_true(fake_has_hdr(r, "Content-Range: bytes 10-19/1000\r\n"));
    fake_free(r);

    r = head_reply("Range: bytes=1000-\r\n", "");
    assert_int_equal(r->err, S3E_INVALID_RANGE);
    assert_int_equal(r->http.resp.status, 416);
    assert_true(fake_has_hdr(r, "Content-Range: bytes */1000\r\n"));
    fake_free(r);

    r = head_reply("", "?partNumber=0");
    assert_int_equal(r->err, S3E_INVALID_ARGUMENT);
    fake_free(r);
    r = head_reply("Range: bytes=0-1\r\n", "?partNumber=1");
    assert_int_equal(r->err, S3E_PART_AND_RANGE);
    fake_free(r);

    r = head_reply("If-None-Match: \"abc\"\r\n", "");
    assert_int_equal(r->http.resp.status, 304);
    assert_true(fake_has_hdr(r, "ETag: \"abc\"\r\n"));
    fake_free(r);
    r = head_reply("If-Match: \"other\"\r\n", "");
    assert_int_equal(r->err, S3E_PRECONDITION_FAILED);
    assert_int_equal(r->http.resp.status, 412);
    fake_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_arguments),
        cmocka_unit_test(test_write_arguments),
        cmocka_unit_test(test_bucket_names),
        cmocka_unit_test(test_get_reply),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
