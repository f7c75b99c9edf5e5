/* tests/unit/s3_route_test.c - S3 routing without a socket: a request head
 * (method, path, query, headers) goes through the target decoder
 * (storaged/s3/req.c) and the router (stor_s3_route in storaged/s3/s3.c);
 * each case checks the operation, how the body is taken and the error, and
 * the decoder's limits (bucket and key length, escapes, parameter count).
 * The on_head hook is also called as the transport calls it, for what S3
 * answers before authentication (health, unknown methods, no credentials). */
#include "tests/unit/s3_fake.h"

#include <stdio.h>

struct route_case {
    const char *method, *target, *hdrs;
    enum stor_s3_op op;
    enum stor_body_mode body;
    enum stor_s3_err err;
};

#define COPY "x-amz-copy-source: /src/k\r\n"

static const struct route_case cases[] = {
    {"GET", "/", "", S3_OP_LIST_BUCKETS, STOR_BODY_NONE, S3E_NONE},
    {"HEAD", "/", "", S3_OP_LIST_BUCKETS, STOR_BODY_NONE, S3E_NONE},
    {"PUT", "/", "", S3_OP_UNKNOWN, STOR_BODY_NONE, S3E_METHOD_NOT_ALLOWED},
    {"PUT", "/b", "", S3_OP_CREATE_BUCKET, STOR_BODY_BUFFER, S3E_NONE},
    {"PUT", "/b?versioning", "", S3_OP_BUCKET_VERSIONING, STOR_BODY_BUFFER,
     S3E_NONE},
    {"PUT", "/b?lifecycle", "", S3_OP_BUCKET_LIFECYCLE, STOR_BODY_BUFFER,
     S3E_NONE},
    {"DELETE", "/b?lifecycle", "", S3_OP_BUCKET_LIFECYCLE, STOR_BODY_NONE,
     S3E_NONE},
    {"HEAD", "/b", "", S3_OP_HEAD_BUCKET, STOR_BODY_NONE, S3E_NONE},
    {"DELETE", "/b", "", S3_OP_DELETE_BUCKET, STOR_BODY_NONE, S3E_NONE},
    {"DELETE", "/b?policy", "", S3_OP_BUCKET_POLICY, STOR_BODY_NONE, S3E_NONE},
    {"PUT", "/b?policy", "", S3_OP_BUCKET_POLICY, STOR_BODY_BUFFER, S3E_NONE},
    {"GET", "/b?policy", "", S3_OP_BUCKET_POLICY, STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b?policyStatus", "", S3_OP_BUCKET_POLICY_STATUS, STOR_BODY_NONE,
     S3E_NONE},
    {"PUT", "/b?ownershipControls", "", S3_OP_BUCKET_OWNERSHIP,
     STOR_BODY_BUFFER, S3E_NONE},
    {"GET", "/b?ownershipControls", "", S3_OP_BUCKET_OWNERSHIP, STOR_BODY_NONE,
     S3E_NONE},
    {"DELETE", "/b?ownershipControls", "", S3_OP_BUCKET_OWNERSHIP,
     STOR_BODY_NONE, S3E_NONE},
    {"PUT", "/b?policyStatus", "", S3_OP_BUCKET_SUBRESOURCE, STOR_BODY_BUFFER,
     S3E_NOT_IMPLEMENTED},
    {"PUT", "/b?acl", "", S3_OP_BUCKET_ACL, STOR_BODY_BUFFER, S3E_NONE},
    {"GET", "/b?acl", "", S3_OP_BUCKET_ACL, STOR_BODY_NONE, S3E_NONE},
    {"PUT", "/b/k?acl", "", S3_OP_OBJECT_ACL, STOR_BODY_BUFFER, S3E_NONE},
    {"DELETE", "/b/k?acl", "", S3_OP_UNKNOWN, STOR_BODY_NONE,
     S3E_NOT_IMPLEMENTED},
    /* the admin API: "_storaged" is no valid bucket name */
    {"GET", "/_storaged/admin/v1/users", "", S3_OP_ADMIN, STOR_BODY_NONE,
     S3E_NONE},
    {"PUT", "/_storaged/admin/v1/users/u", "", S3_OP_ADMIN, STOR_BODY_BUFFER,
     S3E_NONE},
    {"GET", "/b?location", "", S3_OP_GET_BUCKET_LOCATION, STOR_BODY_NONE,
     S3E_NONE},
    {"GET", "/b?uploads", "", S3_OP_LIST_UPLOADS, STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b?versioning", "", S3_OP_BUCKET_VERSIONING, STOR_BODY_NONE,
     S3E_NONE},
    {"GET", "/b?list-type=2&prefix=a%2Fb", "", S3_OP_LIST_OBJECTS_V2,
     STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b?list-type=1", "", S3_OP_LIST_OBJECTS, STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b", "", S3_OP_LIST_OBJECTS, STOR_BODY_NONE, S3E_NONE},
    /* presigned parameters are never sub-resources */
    {"GET", "/b?X-Amz-Signature=00&X-Amz-Expires=1", "", S3_OP_LIST_OBJECTS,
     STOR_BODY_NONE, S3E_NONE},
    {"POST", "/b?delete", "", S3_OP_DELETE_OBJECTS, STOR_BODY_BUFFER, S3E_NONE},
    /* POST Object: the form is checked in post.c, not by the router */
    {"POST", "/b", "", S3_OP_POST_OBJECT, STOR_BODY_POST, S3E_NONE},
    {"POST", "/b?tagging=x", "", S3_OP_UNKNOWN, STOR_BODY_NONE,
     S3E_NOT_IMPLEMENTED},
    {"PUT", "/b/k", "", S3_OP_PUT_OBJECT, STOR_BODY_STREAM, S3E_NONE},
    {"PUT", "/b/dir/k%20x", "", S3_OP_PUT_OBJECT, STOR_BODY_STREAM, S3E_NONE},
    {"PUT", "/b/k", COPY, S3_OP_COPY_OBJECT, STOR_BODY_NONE, S3E_NONE},
    {"PUT", "/b/k?partNumber=1&uploadId=u", "", S3_OP_UPLOAD_PART,
     STOR_BODY_STREAM, S3E_NONE},
    {"PUT", "/b/k?partNumber=1&uploadId=u", COPY, S3_OP_UPLOAD_PART_COPY,
     STOR_BODY_NONE, S3E_NONE},
    {"PUT", "/b/k?partNumber=1", "", S3_OP_UNKNOWN, STOR_BODY_NONE,
     S3E_INVALID_ARGUMENT},
    {"PUT", "/b/k?uploadId=u", "", S3_OP_UNKNOWN, STOR_BODY_NONE,
     S3E_INVALID_ARGUMENT},
    {"PUT", "/b/k?tagging", "", S3_OP_TAGGING, STOR_BODY_BUFFER, S3E_NONE},
    {"DELETE", "/b/k?tagging", "", S3_OP_TAGGING, STOR_BODY_NONE, S3E_NONE},
    {"PUT", "/b?tagging", "", S3_OP_TAGGING, STOR_BODY_BUFFER, S3E_NONE},
    {"PUT", "/b?cors", "", S3_OP_BUCKET_CORS, STOR_BODY_BUFFER, S3E_NONE},
    {"DELETE", "/b?cors", "", S3_OP_BUCKET_CORS, STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b?encryption", "", S3_OP_BUCKET_ENCRYPTION, STOR_BODY_NONE,
     S3E_NONE},
    {"PUT", "/b?encryption", "", S3_OP_BUCKET_ENCRYPTION, STOR_BODY_BUFFER,
     S3E_NONE},
    {"GET", "/b/k", "", S3_OP_GET_OBJECT, STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b/k?versionId=null", "", S3_OP_GET_OBJECT, STOR_BODY_NONE,
     S3E_NONE},
    {"GET", "/b/k?versionId=0123456789abcdef", "", S3_OP_GET_OBJECT,
     STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b/k?versionId=3HL4kqtJlcpXroDTDmJ", "", S3_OP_UNKNOWN,
     STOR_BODY_NONE, S3E_INVALID_VERSION_ID},
    {"DELETE", "/b/k?versionId=0123456789ABCDEF", "", S3_OP_UNKNOWN,
     STOR_BODY_NONE, S3E_INVALID_VERSION_ID},
    {"GET", "/b/k?uploadId=u", "", S3_OP_LIST_PARTS, STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b/k?acl", "", S3_OP_OBJECT_ACL, STOR_BODY_NONE, S3E_NONE},
    {"HEAD", "/b/k?tagging", "", S3_OP_TAGGING, STOR_BODY_NONE, S3E_NONE},
    {"GET", "/b/k?retention", "", S3_OP_UNKNOWN, STOR_BODY_NONE,
     S3E_NOT_IMPLEMENTED},
    {"HEAD", "/b/k", "", S3_OP_HEAD_OBJECT, STOR_BODY_NONE, S3E_NONE},
    {"DELETE", "/b/k", "", S3_OP_DELETE_OBJECT, STOR_BODY_NONE, S3E_NONE},
    {"DELETE", "/b/k?uploadId=u", "", S3_OP_ABORT_MPU, STOR_BODY_NONE,
     S3E_NONE},
    {"POST", "/b/k?uploads", "", S3_OP_CREATE_MPU, STOR_BODY_NONE, S3E_NONE},
    {"POST", "/b/k?uploadId=u", "", S3_OP_COMPLETE_MPU, STOR_BODY_BUFFER,
     S3E_NONE},
    {"POST", "/b/k", "", S3_OP_UNKNOWN, STOR_BODY_NONE, S3E_NOT_IMPLEMENTED},
    /* a key of "" (trailing slash) is the bucket */
    {"GET", "/b/", "", S3_OP_LIST_OBJECTS, STOR_BODY_NONE, S3E_NONE},
    /* absolute-form targets route like origin-form ones */
    {"GET", "http://h:9000/b/k", "", S3_OP_GET_OBJECT, STOR_BODY_NONE,
     S3E_NONE},
};

static void test_route_table(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < CM_ARRAY_SIZE(cases); i++) {
        const struct route_case *c = &cases[i];
        char raw[512];
        struct stor_s3_req *r;
        enum stor_s3_err e;

        snprintf(raw, sizeof(raw), "%s %s HTTP/1.1\r\nHost: h\r\n%s\r\n",
                 c->method, c->target, c->hdrs);
        r = fake_decoded(raw);
        e = stor_s3_route(r);
        if (e != c->err || r->op != c->op || r->body_mode != c->body)
            fail_msg("%s %s %s: op %d body %d err %d, want %d %d %d", c->method,
                     c->target, c->hdrs, (int)r->op, (int)r->body_mode, (int)e,
                     (int)c->op, (int)c->body, (int)c->err);
        fake_free(r);
    }
}

static void test_target_decoding(void **state)
{
    struct stor_s3_req *r;

    (void)state;
    r = fake_decoded("GET /my-bucket/a%2Fb/c%20d?prefix=x+y&list-type=2&"
                     "delimiter=%2F&empty= HTTP/1.1\r\n\r\n");
    assert_string_equal(r->path, "/my-bucket/a/b/c d");
    assert_string_equal(r->bucket, "my-bucket");
    assert_true(r->has_key);
    assert_string_equal(r->key, "a/b/c d");
    assert_int_equal(r->key_len, 7);
    assert_int_equal(r->nquery, 4);
    assert_string_equal(stor_s3_query(r, "prefix"), "x y"); /* form '+' */
    assert_string_equal(stor_s3_query(r, "delimiter"), "/");
    assert_string_equal(stor_s3_query(r, "empty"), "");
    assert_true(stor_s3_has_query(r, "empty"));
    assert_null(stor_s3_query(r, "marker"));
    /* the first-byte filter: a name sharing a first byte with one present
     * is still compared; names whose first bytes alias (c & 63: '@' and
     * NUL, 'a' and '!') are found or not by the scan */
    assert_null(stor_s3_query(r, "prefix2"));
    assert_null(stor_s3_query(r, "!ist-type"));
    assert_null(stor_s3_query(r, ""));
    fake_free(r);
    r = fake_decoded("GET /b/k?=v&%40x=1&!y=2 HTTP/1.1\r\n\r\n");
    assert_int_equal(r->nquery, 3);
    assert_string_equal(stor_s3_query(r, ""), "v");
    assert_string_equal(stor_s3_query(r, "@x"), "1");
    assert_string_equal(stor_s3_query(r, "!y"), "2");
    assert_null(stor_s3_query(r, "ay"));
    fake_free(r);

    r = fake_decoded("GET https://proxy.example:443/b/k?acl HTTP/1.1\r\n\r\n");
    assert_string_equal(r->path, "/b/k");
    assert_string_equal(r->key, "k");
    assert_true(stor_s3_has_query(r, "acl"));
    fake_free(r);
}

/* --domain: Host BUCKET.DOMAIN[:port] names the bucket and the whole path
 * is the key; any other Host (the domain itself, an address, another name)
 * stays path style. */
static void test_virtual_host(void **state)
{
    static const struct {
        const char *host, *target, *bucket, *key;
        bool vhost;
    } t[] = {
        {"photos.s3.test:9000", "/a/b.jpg", "photos", "a/b.jpg", true},
        {"Photos.S3.Test", "/k", "photos", "k", true}, /* any case */
        {"my.dotted.bkt.s3.test.", "/", "my.dotted.bkt", "", true},
        {"photos.s3.test", "/", "photos", "", true}, /* bucket op */
        {"photos.s3.test", "//lead", "photos", "/lead", true},
        {"s3.test:9000", "/b/k", "b", "k", false}, /* the domain */
        {"127.0.0.1:9000", "/b/k", "b", "k", false},
        {"xs3.test", "/b/k", "b", "k", false}, /* not a label */
        {"photos.s3.test.evil", "/b/k", "b", "k", false},
        {".s3.test", "/b/k", "b", "k", false}, /* empty bucket */
    };
    static char raw[512];
    size_t i;

    (void)state;
    fake_s3.domain = "s3.test";
    fake_s3.domain_len = 7;
    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct stor_s3_req *r;

        snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n",
                 t[i].target, t[i].host);
        r = fake_req(raw);
        assert_int_equal(stor_s3_decode_target(r), S3E_NONE);
        assert_int_equal(r->vhost, t[i].vhost);
        assert_string_equal(r->bucket, t[i].bucket);
        assert_string_equal(r->key ? r->key : "", t[i].key);
        assert_int_equal(r->has_key, t[i].key[0] != 0);
        fake_free(r);
    }
    fake_s3.domain = NULL;
    fake_s3.domain_len = 0;
    assert_true(stor_s3_domain_ok("s3.test"));
    assert_true(stor_s3_domain_ok("localhost"));
    assert_true(stor_s3_domain_ok("a-1.b2.example"));
    assert_false(stor_s3_domain_ok(""));
    assert_false(stor_s3_domain_ok("127.0.0.1"));
    assert_false(stor_s3_domain_ok("s3..test"));
    assert_false(stor_s3_domain_ok(".s3.test"));
    assert_false(stor_s3_domain_ok("-s3.test"));
    assert_false(stor_s3_domain_ok("s3-.test"));
    assert_false(stor_s3_domain_ok("s3.test:9000"));
    assert_false(stor_s3_domain_ok("s3_test"));
}

/* Decodes @target as a GET and returns the decoder's verdict. */
static enum stor_s3_err decode(const char *target)
{
    static char raw[8192];
    struct stor_s3_req *r;
    enum stor_s3_err e;

    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\n\r\n", target);
    r = fake_req(raw);
    e = stor_s3_decode_target(r);
    fake_free(r);
    return e;
}

static void test_target_limits(void **state)
{
    char t[4096], *p;
    int i;

    (void)state;
    assert_int_equal(decode("b/k"), S3E_BAD_REQUEST);
    assert_int_equal(decode("http://no-path"), S3E_BAD_REQUEST);
    assert_int_equal(decode("/b/k%zz"), S3E_BAD_REQUEST);
    assert_int_equal(decode("/b/k%00x"), S3E_INVALID_ARGUMENT);
    assert_int_equal(decode("/b/k?a=%4"), S3E_INVALID_ARGUMENT);
    /* keys are UTF-8 (RFC 3629), as S3: InvalidURI otherwise */
    assert_int_equal(decode("/b/%C3%A9%E2%82%AC%F0%9F%98%80"), S3E_NONE);
    assert_int_equal(decode("/b/%FF"), S3E_INVALID_URI);
    assert_int_equal(decode("/b/%C0%AE"), S3E_INVALID_URI);
    assert_int_equal(decode("/b/%E0%80%AF"), S3E_INVALID_URI);
    assert_int_equal(decode("/b/%ED%A0%80"), S3E_INVALID_URI);
    assert_int_equal(decode("/b/%F4%90%80%80"), S3E_INVALID_URI);
    assert_int_equal(decode("/b/k%E2%82"), S3E_INVALID_URI);
    assert_int_equal(decode("/b/%80"), S3E_INVALID_URI);
    /* bucket names: 63 bytes fit the field, 64 do not */
    memset(t, 0, sizeof(t));
    t[0] = '/';
    memset(t + 1, 'b', 63);
    assert_int_equal(decode(t), S3E_NONE);
    t[64] = 'b';
    assert_int_equal(decode(t), S3E_INVALID_BUCKET_NAME);
    /* keys: STOR_MAX_KEY_LEN bytes, not one more */
    memset(t, 0, sizeof(t));
    memcpy(t, "/b/", 3);
    memset(t + 3, 'k', STOR_MAX_KEY_LEN);
    assert_int_equal(decode(t), S3E_NONE);
    t[3 + STOR_MAX_KEY_LEN] = 'k';
    assert_int_equal(decode(t), S3E_KEY_TOO_LONG);
    /* query parameters: STOR_MAX_QUERY, not one more */
    p = t + snprintf(t, sizeof(t), "/b?");
    for (i = 0; i < STOR_MAX_QUERY; i++)
        p += snprintf(p, sizeof(t) - (size_t)(p - t), "p%d=%d&", i, i);
    assert_int_equal(decode(t), S3E_NONE);
    snprintf(p, sizeof(t) - (size_t)(p - t), "one=more");
    assert_int_equal(decode(t), S3E_INVALID_ARGUMENT);
}

/* The on_head hook as the transport calls it: what is answered before any
 * signature is looked at (no store, no connection needed). */
static void test_on_head_before_auth(void **state)
{
    struct stor_s3_req *r;

    (void)state;
    r = fake_req("GET /health/live HTTP/1.1\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->op, S3_OP_HEALTH);
    assert_int_equal(r->http.resp.status, 200);
    fake_free(r);

    /* no server: not ready */
    r = fake_req("GET /health/ready HTTP/1.1\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->http.resp.status, 503);
    fake_free(r);

    r = fake_req("PATCH /b/k HTTP/1.1\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->http.resp.status, 405);
    assert_int_equal(r->err, S3E_METHOD_NOT_ALLOWED);
    fake_free(r);

    /* OPTIONS: a CORS preflight, unsigned; no CORS configuration */
    r = fake_req("OPTIONS /b/k HTTP/1.1\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->http.resp.status, 400);
    assert_int_equal(r->err, S3E_CORS_NO_ORIGIN);
    fake_free(r);
    r = fake_req("OPTIONS /b/k HTTP/1.1\r\nOrigin: http://x\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->err, S3E_CORS_NO_METHOD);
    fake_free(r);
    r = fake_req("OPTIONS /b HTTP/1.1\r\nOrigin: http://x\r\n"
                 "Access-Control-Request-Method: GET\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->http.resp.status, 403);
    assert_int_equal(r->err, S3E_CORS_NOT_ENABLED);
    assert_int_equal(r->op, S3_OP_PREFLIGHT);
    fake_free(r);

    /* a malformed target also closes the connection after the answer */
    r = fake_req("GET b/k HTTP/1.1\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->http.resp.status, 400);
    assert_true(r->http.resp.close);
    fake_free(r);

    r = fake_req("GET /b/k HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->http.resp.status, 403);
    assert_int_equal(r->err, S3E_ACCESS_DENIED);
    assert_non_null(
        strstr(r->http.resp.body.data, "<Code>AccessDenied</Code>"));
    assert_non_null(
        strstr(r->http.resp.body.data, "<Resource>/b/k</Resource>"));
    assert_non_null(strstr(r->http.resp.body.data,
                           "<RequestId>0000000000001234</RequestId>"));
    assert_false(r->fg_entered);
    fake_free(r);

    /* HEAD errors carry no body */
    r = fake_req("HEAD /b/k HTTP/1.1\r\n\r\n");
    assert_int_equal(stor_s3_app.on_head(&r->http), 0);
    assert_int_equal(r->http.resp.status, 403);
    assert_true(r->http.resp.no_body);
    assert_int_equal(r->http.resp.body.len, 0);
    fake_free(r);
}

/* Transport errors become S3 errors (on_error). */
static void test_on_error(void **state)
{
    static const struct {
        enum stor_http_err he;
        int status;
        const char *code;
    } m[] = {
        {STOR_HTTP_E_INTERNAL, 500, "InternalError"},
        {STOR_HTTP_E_BAD_REQUEST, 400, "BadRequest"},
        {STOR_HTTP_E_TIMEOUT, 400, "RequestTimeout"},
        {STOR_HTTP_E_BODY_TOO_LARGE, 400, "EntityTooLarge"},
        {STOR_HTTP_E_BODY_INCOMPLETE, 400, "IncompleteBody"},
        {STOR_HTTP_E_NOT_IMPLEMENTED, 501, "NotImplemented"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < CM_ARRAY_SIZE(m); i++) {
        struct stor_s3_req *r = fake_req("PUT /b/k HTTP/1.1\r\n\r\n");
        char code[64];

        stor_s3_app.on_error(&r->http, m[i].he);
        snprintf(code, sizeof(code), "<Code>%s</Code>", m[i].code);
        if (r->http.resp.status != m[i].status ||
            strstr(r->http.resp.body.data, code) == NULL)
            fail_msg("transport error %d: %d %s", (int)m[i].he,
                     r->http.resp.status, r->http.resp.body.data);
        fake_free(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_table),
        cmocka_unit_test(test_target_decoding),
        cmocka_unit_test(test_target_limits),
        cmocka_unit_test(test_virtual_host),
        cmocka_unit_test(test_on_head_before_auth),
        cmocka_unit_test(test_on_error),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
