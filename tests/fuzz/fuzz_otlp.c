/* tests/fuzz/fuzz_otlp.c - libFuzzer target for the Prometheus text parser
 * behind the OTLP push (common/otlp.c, cm_otlp_encode). Properties: any
 * input either encodes (0) or fails with -EBADMSG or -E2BIG, never
 * crashes; what it encodes has no raw control byte (every string is
 * escaped) and balanced braces and brackets outside strings. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/otlp.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

/* Checks the JSON's shape: strings closed, nesting balanced. */
static void check_json(const char *s, size_t n)
{
    long depth = 0;
    bool in_str = false;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        CHECK(c >= 0x20);
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '"')
            in_str = true;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']')
            CHECK(--depth >= 0);
    }
    CHECK(!in_str && depth == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct cm_otlp_resource res = {"fuzz", "fuzz:1", NULL};
    struct cm_buf out;
    int ret;

    cm_buf_init(&out, CM_BUF_NOLIMIT);
    ret = cm_otlp_encode((const char *)data, size, &res, 1, 2, &out);
    CHECK(ret == 0 || ret == -EBADMSG || ret == -E2BIG);
    if (ret == 0)
        check_json(out.data, out.len);
    cm_buf_fini(&out);
    return 0;
}
