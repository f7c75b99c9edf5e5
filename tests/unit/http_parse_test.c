/* tests/unit/http_parse_test.c - the request-head parser and the chunk
 * decoder: valid heads, each malformation we reject, the limits (header
 * count, head size, target size) at, under and over, inputs flush against
 * a PROT_NONE guard page, incremental input, and chunked / aws-chunked
 * bodies decoded whole and byte by byte with identical results. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/buf.h"
#include "storaged/http/parse.h"

/* Copies @s to the end of a page followed by a PROT_NONE page, so a read
 * past the end faults. Returns the copy; release with guard_free(). */
static char *guard_copy(const char *s, size_t n, void **map, size_t *maplen)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t pages = (n + (size_t)pg - 1) / (size_t)pg + 1;
    char *base;

    *maplen = pages * (size_t)pg;
    base = mmap(NULL, *maplen, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(base != MAP_FAILED);
    assert_int_equal(mprotect(base + *maplen - pg, (size_t)pg, PROT_NONE), 0);
    *map = base;
    memcpy(base + *maplen - pg - n, s, n);
    return base + *maplen - pg - n;
}

static void guard_free(void *map, size_t maplen)
{
    munmap(map, maplen);
}

/* Parses @s with the guard page; returns the parser's result. */
static int parse(const char *s, size_t n, struct stor_http_head *h,
                 struct stor_http_hdr *hdrs, size_t cap)
{
    void *map;
    size_t maplen;
    char *p = guard_copy(s, n, &map, &maplen);
    int ret;

    h->hdrs = hdrs;
    h->nhdrs = cap;
    ret = stor_http_parse_head(p, n, h);
    guard_free(map, maplen);
    return ret;
}

static void test_simple_get(void **state)
{
    static const char req[] = "GET /bucket/key?list-type=2 HTTP/1.1\r\n"
                              "Host: 127.0.0.1:9000\r\n"
                              "X-Amz-Date:20150830T123600Z\r\n"
                              "Empty:\r\n"
                              "Spaces:   padded value  \r\n"
                              "\r\n"
                              "BODY";
    struct stor_http_hdr hdrs[8];
    struct stor_http_head h;
    char *p = strdup(req);
    int ret;

    (void)state;
    h.hdrs = hdrs;
    h.nhdrs = 8;
    ret = stor_http_parse_head(p, strlen(p), &h);
    assert_int_equal(ret, (int)(strlen(req) - 4));
    assert_int_equal(h.method_len, 3);
    assert_memory_equal(h.method, "GET", 3);
    assert_int_equal(h.target_len, strlen("/bucket/key?list-type=2"));
    assert_int_equal(h.minor_version, 1);
    assert_int_equal(h.nhdrs, 4);
    assert_true(stor_http_ieq(hdrs[0].name, hdrs[0].name_len, "host"));
    assert_int_equal(hdrs[1].value_len, 16);
    assert_int_equal(hdrs[2].value_len, 0);
    assert_int_equal(hdrs[3].value_len, strlen("padded value"));
    assert_memory_equal(hdrs[3].value, "padded value", 12);
    assert_non_null(stor_http_find(&h, "X-AMZ-DATE"));
    assert_null(stor_http_find(&h, "x-amz-dat"));
    free(p);
}

static void test_incremental(void **state)
{
    static const char req[] = "PUT /b/k HTTP/1.0\r\nContent-Length: 5\n\r\n";
    struct stor_http_hdr hdrs[4];
    struct stor_http_head h;
    size_t n;

    (void)state;
    for (n = 0; n < strlen(req); n++)
        assert_int_equal(parse(req, n, &h, hdrs, 4), -EAGAIN);
    assert_int_equal(parse(req, strlen(req), &h, hdrs, 4), (int)strlen(req));
    assert_int_equal(h.minor_version, 0);
}

static void test_leading_crlf(void **state)
{
    static const char req[] = "\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    struct stor_http_hdr hdrs[4];
    struct stor_http_head h;

    (void)state;
    assert_int_equal(parse(req, strlen(req), &h, hdrs, 4), (int)strlen(req));
    assert_int_equal(h.target_len, 1);
}

static void test_malformed(void **state)
{
    static const char *const bad[] = {
        "GET  / HTTP/1.1\r\n\r\n", /* double space */
        "GET / HTTP/1.1 \r\n\r\n", /* trailing space */
        "GET / HTTP/2.0\r\n\r\n",  /* version */
        "GET / HTTP/1.x\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n", /* method token */
        "GET / HTTP/1.1\r\nNo-Colon\r\n\r\n",
        "GET / HTTP/1.1\r\nSp ace: v\r\n\r\n",
        "GET / HTTP/1.1\r\nName : v\r\n\r\n",   /* space before colon */
        "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", /* obs-fold */
        "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",    /* bare CR */
        "GET / HTTP/1.1\r\nA: \x01\r\n\r\n",    /* control byte */
        "GET /\x7f HTTP/1.1\r\n\r\n",
        "\rGET / HTTP/1.1\r\n\r\n",
        ": v\r\n\r\n",
    };
    struct stor_http_hdr hdrs[4];
    struct stor_http_head h;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int ret = parse(bad[i], strlen(bad[i]), &h, hdrs, 4);

        if (ret != -EBADMSG)
            fail_msg("case %zu: got %d", i, ret);
    }
}

/* Builds a request with @n headers. */
static char *with_headers(size_t n, size_t *len)
{
    struct cm_buf b;
    size_t i;

    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_buf_appends(&b, "GET / HTTP/1.1\r\n"), 0);
    for (i = 0; i < n; i++)
        assert_int_equal(cm_buf_appendf(&b, "X-H%zu: v\r\n", i), 0);
    assert_int_equal(cm_buf_appends(&b, "\r\n"), 0);
    *len = b.len;
    return cm_buf_steal(&b);
}

static void test_header_count_limit(void **state)
{
    struct stor_http_hdr hdrs[STOR_HTTP_MAX_HEADERS];
    struct stor_http_head h;
    size_t n, len;
    char *r;

    (void)state;
    for (n = STOR_HTTP_MAX_HEADERS - 1; n <= STOR_HTTP_MAX_HEADERS + 1; n++) {
        int ret;

        r = with_headers(n, &len);
        ret = parse(r, len, &h, hdrs, STOR_HTTP_MAX_HEADERS);
        if (n <= STOR_HTTP_MAX_HEADERS) {
            assert_int_equal(ret, (int)len);
            assert_int_equal(h.nhdrs, n);
        } else {
            assert_int_equal(ret, -E2BIG);
        }
        free(r);
    }
}

static void test_head_size_limit(void **state)
{
    struct stor_http_hdr hdrs[4];
    struct stor_http_head h;
    static const char pre[] = "GET / HTTP/1.1\r\nX: ";
    size_t fixed = strlen(pre) + 4, n;
    char *r;

    (void)state;
    r = malloc(STOR_HTTP_MAX_HEAD + 16);
    for (n = STOR_HTTP_MAX_HEAD - 1; n <= STOR_HTTP_MAX_HEAD + 1; n++) {
        size_t vlen = n - fixed;
        int ret;

        memcpy(r, pre, strlen(pre));
        memset(r + strlen(pre), 'a', vlen);
        memcpy(r + strlen(pre) + vlen, "\r\n\r\n", 4);
        ret = parse(r, n, &h, hdrs, 4);
        if (n <= STOR_HTTP_MAX_HEAD)
            assert_int_equal(ret, (int)n);
        else
            assert_int_equal(ret, -E2BIG);
    }
    /* an incomplete head that is already too long */
    memset(r, 'a', STOR_HTTP_MAX_HEAD);
    memcpy(r, "GET / HTTP/1.1\r\nX: ", strlen(pre));
    assert_int_equal(parse(r, STOR_HTTP_MAX_HEAD, &h, hdrs, 4), -E2BIG);
    assert_int_equal(parse(r, STOR_HTTP_MAX_HEAD - 1, &h, hdrs, 4), -EAGAIN);
    free(r);
}

static void test_target_limit(void **state)
{
    struct stor_http_hdr hdrs[4];
    struct stor_http_head h;
    size_t tl;
    char *r = malloc(STOR_HTTP_MAX_TARGET + 64);

    (void)state;
    for (tl = STOR_HTTP_MAX_TARGET; tl <= STOR_HTTP_MAX_TARGET + 1; tl++) {
        size_t n;

        memcpy(r, "GET ", 4);
        r[4] = '/';
        memset(r + 5, 'k', tl - 1);
        n = 4 + tl;
        memcpy(r + n, " HTTP/1.1\r\n\r\n", 13);
        n += 13;
        assert_int_equal(parse(r, n, &h, hdrs, 4),
                         tl <= STOR_HTTP_MAX_TARGET ? (int)n : -E2BIG);
    }
    free(r);
}

static void test_parse_u64(void **state)
{
    uint64_t v;

    (void)state;
    assert_int_equal(stor_http_parse_u64("0", 1, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(stor_http_parse_u64("1234567890123456789", 19, &v), 0);
    assert_true(v == 1234567890123456789ULL);
    assert_int_equal(stor_http_parse_u64("12345678901234567890", 20, &v),
                     -EINVAL);
    assert_int_equal(stor_http_parse_u64("", 0, &v), -EINVAL);
    assert_int_equal(stor_http_parse_u64("1a", 2, &v), -EINVAL);
    assert_int_equal(stor_http_parse_u64("-1", 2, &v), -EINVAL);
}

/* ---- chunk decoder ---- */

struct sinkbuf {
    struct cm_buf data;
    struct cm_buf events; /* "E<size>:<ext>|" and "T<name>=<value>|" */
};

static int cb_data(void *arg, const char *p, size_t n)
{
    struct sinkbuf *s = arg;

    return cm_buf_append(&s->data, p, n);
}

static int cb_end(void *arg, const char *ext, size_t n, uint64_t size)
{
    struct sinkbuf *s = arg;

    return cm_buf_appendf(&s->events, "E%llu:%.*s|", (unsigned long long)size,
                          (int)n, ext);
}

static int cb_trailer(void *arg, const char *name, size_t nl, const char *value,
                      size_t vl)
{
    struct sinkbuf *s = arg;

    return cm_buf_appendf(&s->events, "T%.*s=%.*s|", (int)nl, name, (int)vl,
                          value);
}

/* Decodes @in in pieces of @step bytes (0 = all at once). Returns the
 * total consumed or a negative error; fills @s. */
static long decode(const char *in, size_t n, size_t step, struct sinkbuf *s,
                   bool *done)
{
    struct stor_chunk_dec d;
    struct stor_chunk_cb cb = {cb_data, cb_end, cb_trailer, s};
    size_t pos = 0;

    cm_buf_init(&s->data, CM_BUF_NOLIMIT);
    cm_buf_init(&s->events, CM_BUF_NOLIMIT);
    stor_chunk_init(&d, 1 << 20);
    while (pos < n && !d.done) {
        size_t take = step ? CM_MIN(step, n - pos) : n - pos;
        void *map;
        size_t maplen;
        char *p = guard_copy(in + pos, take, &map, &maplen);
        ssize_t r = stor_chunk_decode(&d, p, take, &cb);

        guard_free(map, maplen);
        if (r < 0)
            return r;
        pos += (size_t)r;
        if ((size_t)r < take)
            break;
    }
    *done = d.done;
    return (long)pos;
}

static void sink_fini(struct sinkbuf *s)
{
    cm_buf_fini(&s->data);
    cm_buf_fini(&s->events);
}

static void test_chunked_basic(void **state)
{
    static const char body[] = "5\r\nhello\r\n"
                               "6;name=val\r\n world\r\n"
                               "0\r\n"
                               "\r\n"
                               "NEXT";
    size_t step;

    (void)state;
    for (step = 0; step <= 7; step++) {
        struct sinkbuf s;
        bool done = false;
        long r = decode(body, strlen(body), step, &s, &done);

        assert_int_equal(r, (long)strlen(body) - 4);
        assert_true(done);
        assert_int_equal(s.data.len, 11);
        assert_memory_equal(s.data.data, "hello world", 11);
        assert_string_equal(s.events.data, "E5:|E6:name=val|E0:|");
        sink_fini(&s);
    }
}

static void test_aws_chunked_trailers(void **state)
{
    static const char body[] =
        "10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0a"
        "de35a65485a288648\r\n";
    static const char tail[] =
        "\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81"
        "ceb9323e279d449df9\r\n"
        "x-amz-checksum-crc32:sOO8/Q==\r\n"
        "x-amz-trailer-signature:63bddb248ad2590c92712055f51b8e78ab024eead08276"
        "b24f010b0efd74843f\r\n\r\n";
    struct cm_buf in;
    size_t steps[] = {0, 1, 3, 4096};
    size_t i;

    (void)state;
    cm_buf_init(&in, CM_BUF_NOLIMIT);
    assert_int_equal(cm_buf_appends(&in, body), 0);
    for (i = 0; i < 65536; i++)
        assert_int_equal(cm_buf_appendc(&in, 'a'), 0);
    assert_int_equal(cm_buf_appends(&in, tail), 0);
    for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        struct sinkbuf s;
        bool done = false;
        long r;

        if (steps[i] == 1 && i > 0) /* byte-by-byte over 64 KiB is slow */
            continue;
        r = decode(in.data, in.len, steps[i], &s, &done);
        assert_int_equal(r, (long)in.len);
        assert_true(done);
        assert_int_equal(s.data.len, 65536);
        assert_non_null(strstr(s.events.data, "E65536:chunk-signature=ad80"));
        assert_non_null(
            strstr(s.events.data, "Tx-amz-checksum-crc32=sOO8/Q==|"));
        assert_non_null(strstr(s.events.data, "Tx-amz-trailer-signature=63bd"));
        sink_fini(&s);
    }
    cm_buf_fini(&in);
}

static void test_chunked_malformed(void **state)
{
    static const char *const bad[] = {
        "x\r\n",                    /* not hex */
        "\r\n",                     /* empty size */
        "5\r\nhelloXX",             /* missing CRLF after data */
        "1234567890123456\r\n",     /* too many digits */
        "5 x\r\n",                  /* junk after size */
        "0\r\nbad trailer\r\n\r\n", /* trailer without colon */
        "0\r\n: v\r\n\r\n",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sinkbuf s;
        bool done = false;
        long r = decode(bad[i], strlen(bad[i]), 0, &s, &done);

        if (r != -EBADMSG)
            fail_msg("case %zu: got %ld", i, r);
        sink_fini(&s);
    }
}

static void test_chunked_max_total(void **state)
{
    static const char body[] = "100001\r\n"; /* > 1 MiB limit in decode() */
    struct sinkbuf s;
    bool done;

    (void)state;
    assert_int_equal(decode(body, strlen(body), 0, &s, &done), -E2BIG);
    sink_fini(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_get),
        cmocka_unit_test(test_incremental),
        cmocka_unit_test(test_leading_crlf),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_header_count_limit),
        cmocka_unit_test(test_head_size_limit),
        cmocka_unit_test(test_target_limit),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_chunked_basic),
        cmocka_unit_test(test_aws_chunked_trailers),
        cmocka_unit_test(test_chunked_malformed),
        cmocka_unit_test(test_chunked_max_total),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
