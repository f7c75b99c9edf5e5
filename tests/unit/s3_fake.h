/* tests/unit/s3_fake.h - a fake S3 request for the S3 unit tests: a raw
 * request head parsed into a zeroed struct stor_s3_req the way the transport
 * (storaged/http/conn.c) and the on_head hook prepare one, with no
 * connection, no socket and no store. The credentials are the AWS
 * documentation's example pair. Each test binary includes it once. */
#ifndef TESTS_UNIT_S3_FAKE_H
#define TESTS_UNIT_S3_FAKE_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "storaged/s3/s3_i.h"

static struct stor_s3 fake_s3 = {
    .root_user = "AKIAIOSFODNN7EXAMPLE",
    .root_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
};

/* A request for head @raw ("GET / HTTP/1.1\r\n...\r\n\r\n"), parsed and its
 * method flags set; the target is not decoded yet. Fails the test when the
 * head does not parse. Free with fake_free(). */
static inline struct stor_s3_req *fake_req(const char *raw)
{
    struct stor_s3_req *r = calloc(1, sizeof(*r));
    size_t n = strlen(raw);
    const char *m;

    assert_non_null(r);
    r->http.headbuf = malloc(n + 1);
    assert_non_null(r->http.headbuf);
    memcpy(r->http.headbuf, raw, n + 1);
    r->http.headlen = n;
    r->http.head.hdrs = r->http.hdrs;
    r->http.head.nhdrs = STOR_HTTP_MAX_HEADERS;
    assert_int_equal(stor_http_parse_head(r->http.headbuf, n, &r->http.head),
                     (int)n);
    m = r->http.head.method;
    n = r->http.head.method_len;
    r->http.is_get = n == 3 && memcmp(m, "GET", 3) == 0;
    r->http.is_head = n == 4 && memcmp(m, "HEAD", 4) == 0;
    r->http.is_put = n == 3 && memcmp(m, "PUT", 3) == 0;
    r->http.is_post = n == 4 && memcmp(m, "POST", 4) == 0;
    r->http.is_delete = n == 6 && memcmp(m, "DELETE", 6) == 0;
    r->http.id = 0x1234;
    r->http.app = &fake_s3;
    r->s3 = &fake_s3;
    cm_buf_init(&r->http.resp.hdrs, CM_BUF_NOLIMIT);
    cm_buf_init(&r->http.resp.body, CM_BUF_NOLIMIT);
    cm_buf_init(&r->body, STOR_XML_BODY_MAX);
    cm_buf_init(&r->trailer_raw, 8192);
    r->decoded_len = UINT64_MAX;
    return r;
}

/* fake_req() with the target decoded (must succeed). */
static inline struct stor_s3_req *fake_decoded(const char *raw)
{
    struct stor_s3_req *r = fake_req(raw);

    assert_int_equal(stor_s3_decode_target(r), S3E_NONE);
    return r;
}

/* Frees what fake_req() and the code under test allocated. */
static inline void fake_free(struct stor_s3_req *r)
{
    stor_s3_target_fini(r);
    free(r->http.headbuf);
    cm_buf_fini(&r->http.resp.hdrs);
    cm_buf_fini(&r->http.resp.body);
    cm_buf_fini(&r->body);
    cm_buf_fini(&r->trailer_raw);
    cm_digest_destroy(r->ck_digest);
    free(r);
}

/* true when the response headers contain line "@name: @value". */
static inline bool fake_has_hdr(const struct stor_s3_req *r, const char *line)
{
    const struct cm_buf *h = &r->http.resp.hdrs;

    return h->data != NULL && strstr(h->data, line) != NULL;
}
#endif /* TESTS_UNIT_S3_FAKE_H */
