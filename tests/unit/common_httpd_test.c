/* tests/unit/common_httpd_test.c - the side-endpoint HTTP server
 * (common/httpd.c): request-head parsing, HTTP Basic checks, HOST:PORT
 * splitting, and a real round trip on a loopback port. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/httpd.h"

static void test_parse_head(void **state)
{
    char ok[] = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n"
                "authorization:   Basic dTpw\r\n\r\n";
    char bad1[] = "GET metrics HTTP/1.1\r\n\r\n";
    char bad2[] = "GET / FTP/1.0\r\n\r\n";
    char bad3[] = "GET / HTTP/1.1\r\nNoColon\r\n\r\n";
    char bad4[] = "GET\r\n\r\n";
    struct cm_httpd_req rq;

    (void)state;
    assert_int_equal(cm_httpd_parse_head(ok, strlen(ok), &rq), 0);
    assert_string_equal(rq.method, "GET");
    assert_string_equal(rq.path, "/metrics");
    assert_string_equal(rq.query, "x=1");
    assert_string_equal(rq.authorization, "Basic dTpw");
    assert_int_equal(cm_httpd_parse_head(bad1, strlen(bad1), &rq), -EBADMSG);
    assert_int_equal(cm_httpd_parse_head(bad2, strlen(bad2), &rq), -EBADMSG);
    assert_int_equal(cm_httpd_parse_head(bad3, strlen(bad3), &rq), -EBADMSG);
    assert_int_equal(cm_httpd_parse_head(bad4, strlen(bad4), &rq), -EBADMSG);
}

static void test_basic(void **state)
{
    (void)state;
    /* base64("root:secret12") */
    assert_true(
        cm_httpd_basic_ok("Basic cm9vdDpzZWNyZXQxMg==", "root", "secret12"));
    assert_true(
        cm_httpd_basic_ok("basic  cm9vdDpzZWNyZXQxMg== ", "root", "secret12"));
    assert_false(
        cm_httpd_basic_ok("Basic cm9vdDpzZWNyZXQxMg==", "root", "secret13"));
    assert_false(
        cm_httpd_basic_ok("Basic cm9vdDpzZWNyZXQxMg==", "roo", "tsecret12"));
    assert_false(cm_httpd_basic_ok("Basic cm9vdDpzZWNyZXQxMg", "root",
                                   "secret12")); /* unpadded */
    assert_false(cm_httpd_basic_ok("Basic cm9vdHNlY3JldDEy", "root",
                                   "secret12")); /* no colon */
    assert_false(cm_httpd_basic_ok("Bearer x", "root", "secret12"));
    assert_false(cm_httpd_basic_ok("Basic !!!!", "root", "secret12"));
    assert_false(cm_httpd_basic_ok("Basic ", "root", "secret12"));
    assert_false(cm_httpd_basic_ok(NULL, "root", "secret12"));
}

static void test_basic_decode(void **state)
{
    char u[16], p[16];

    (void)state;
    assert_int_equal(
        cm_httpd_basic_decode("Basic cm9vdDpzZWNyZXQxMg==", u, p, sizeof(u)),
        0);
    assert_string_equal(u, "root");
    assert_string_equal(p, "secret12");
    /* "a:" and ":b": empty halves are fine */
    assert_int_equal(cm_httpd_basic_decode("Basic YTo=", u, p, sizeof(u)), 0);
    assert_string_equal(u, "a");
    assert_string_equal(p, "");
    /* a user of 20 bytes does not fit 16 */
    assert_int_equal(
        cm_httpd_basic_decode("Basic QUJDREVGR0hJSktMTU5PUFFSU1Q6eA==", u, p,
                              sizeof(u)),
        -EINVAL);
    assert_int_equal(
        cm_httpd_basic_decode("Basic cm9vdHNlY3JldDEy", u, p, sizeof(u)),
        -EINVAL); /* no colon */
    assert_int_equal(cm_httpd_basic_decode("Digest x", u, p, sizeof(u)),
                     -EINVAL);
}

static void test_hostport(void **state)
{
    char h[64];
    int p;

    (void)state;
    assert_int_equal(cm_hostport_parse("127.0.0.1:9100", h, sizeof(h), &p), 0);
    assert_string_equal(h, "127.0.0.1");
    assert_int_equal(p, 9100);
    assert_int_equal(cm_hostport_parse("[::1]:80", h, sizeof(h), &p), 0);
    assert_string_equal(h, "::1");
    assert_int_equal(cm_hostport_parse(":0", h, sizeof(h), &p), 0);
    assert_string_equal(h, "0.0.0.0");
    assert_int_equal(cm_hostport_parse("x", h, sizeof(h), &p), -EINVAL);
    assert_int_equal(cm_hostport_parse("h:70000", h, sizeof(h), &p), -EINVAL);
    assert_int_equal(cm_hostport_parse("h:", h, sizeof(h), &p), -EINVAL);
    assert_int_equal(cm_hostport_parse("[::1]80", h, sizeof(h), &p), -EINVAL);
}

static void handler(void *arg, const struct cm_httpd_req *rq,
                    struct cm_httpd_resp *rs)
{
    (void)arg;
    if (strcmp(rq->path, "/hi") != 0) {
        rs->status = 404;
        return;
    }
    rs->status = 200;
    if (cm_buf_appends(&rs->body, "hello\n") < 0)
        rs->status = 500;
}

/* Sends @req to @port and returns the whole answer (malloc'd). */
static char *roundtrip(int port, const char *req)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    char *buf = calloc(1, 4096);
    size_t got = 0;
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    while ((n = read(fd, buf + got, 4095 - got)) > 0)
        got += (size_t)n;
    close(fd);
    return buf;
}

static void test_server(void **state)
{
    struct cm_httpd *s;
    char *err = NULL, *r;
    int port;

    (void)state;
    assert_int_equal(
        cm_httpd_start("127.0.0.1:0", "t", handler, NULL, &s, &err), 0);
    port = cm_httpd_port(s);
    assert_true(port > 0);
    r = roundtrip(port, "GET /hi HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "Content-Length: 6\r\n"));
    assert_non_null(strstr(r, "\r\n\r\nhello\n"));
    free(r);
    r = roundtrip(port, "HEAD /hi HTTP/1.1\r\n\r\n");
    assert_non_null(strstr(r, "Content-Length: 6\r\n"));
    assert_null(strstr(r, "hello"));
    free(r);
    r = roundtrip(port, "POST /hi HTTP/1.1\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 405"));
    free(r);
    r = roundtrip(port, "GET /nope HTTP/1.1\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 404"));
    free(r);
    r = roundtrip(port, "garbage\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 400"));
    free(r);
    /* the port is taken now: a second server cannot bind it */
    {
        char addr[32];
        struct cm_httpd *s2;

        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        assert_int_equal(cm_httpd_start(addr, "t2", handler, NULL, &s2, &err),
                         -EADDRINUSE);
        assert_non_null(err);
        assert_non_null(strstr(err, "cannot listen on"));
        free(err);
    }
    assert_int_equal(cm_httpd_start("bad", "t3", handler, NULL, &s, &err),
                     -EINVAL);
    cm_httpd_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_head),   cmocka_unit_test(test_basic),
        cmocka_unit_test(test_basic_decode), cmocka_unit_test(test_hostport),
        cmocka_unit_test(test_server),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
