/* tests/fuzz/fuzz_fc_meta.c - libFuzzer target for the x-amz-meta-*
 * attribute parser of the ecfs S3 client (fuse/s3.c), fed by any server's
 * response headers. The input is "name\0value" (no NUL: all of it is the
 * value of each known name). Besides "no crash": a field is only set when
 * its value is all digits (one '.' in an mtime), nanoseconds stay below
 * one second, and ids never read as (uid_t)-1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/s3.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

static bool digits(const char *v, size_t n, bool dot)
{
    size_t dots = 0;

    for (size_t i = 0; i < n; i++) {
        if (v[i] == '.' && dot)
            dots++;
        else if (v[i] < '0' || v[i] > '9')
            return false;
    }
    return dots <= 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"mode", "uid", "gid", "mtime"};
    const char *p = (const char *)data;
    const char *nul = memchr(p, '\0', size);
    struct fc_s3_meta m;

    if (nul != NULL) {
        memset(&m, 0, sizeof(m));
        fc_s3_meta_parse(&m, p, (size_t)(nul - p), nul + 1,
                         size - (size_t)(nul - p) - 1);
        CHECK(m.mtime_ns < 1000000000u);
        if (m.has != 0)
            CHECK(digits(nul + 1, size - (size_t)(nul - p) - 1, true));
        return 0;
    }
    for (size_t i = 0; i < 4; i++) {
        memset(&m, 0, sizeof(m));
        fc_s3_meta_parse(&m, names[i], strlen(names[i]), p, size);
        CHECK(m.has == 0 || m.has == (1u << i));
        CHECK(m.mtime_ns < 1000000000u);
        if (m.has != 0)
            CHECK(digits(p, size, i == 3) && size > 0);
        if (m.has & (FC_META_UID | FC_META_GID))
            CHECK(m.uid != UINT32_MAX && m.gid != UINT32_MAX);
    }
    return 0;
}
