/* tests/fuzz/fuzz_httpd.c - libFuzzer target for the side-endpoint HTTP
 * server's request-head parser and HTTP Basic check (common/httpd.c).
 * Properties: any bytes parse (0) or fail with -EBADMSG; a parsed head has
 * a method, a path starting with '/', and a query; the Basic check never
 * accepts a header that does not decode to exactly "user:pass"; a decoded
 * user and password always fit their buffers. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/httpd.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cm_httpd_req rq;
    char *buf;
    int ret;

    if (size > CM_HTTPD_HEAD_MAX)
        return 0;
    buf = malloc(size + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0; /* the server NUL-terminates what it read */
    ret = cm_httpd_parse_head(buf, size, &rq);
    CHECK(ret == 0 || ret == -EBADMSG);
    if (ret == 0) {
        CHECK(rq.method && rq.method[0]);
        CHECK(rq.path && rq.path[0] == '/');
        CHECK(rq.query != NULL);
        if (rq.authorization &&
            cm_httpd_basic_ok(rq.authorization, "user", "pass"))
            CHECK(strstr(rq.authorization, "dXNlcjpwYXNz") != NULL);
        if (rq.authorization) {
            char u[32], p[32];

            if (cm_httpd_basic_decode(rq.authorization, u, p, sizeof(u)) == 0)
                CHECK(strlen(u) < sizeof(u) && strlen(p) < sizeof(p));
        }
    }
    free(buf);
    return 0;
}
