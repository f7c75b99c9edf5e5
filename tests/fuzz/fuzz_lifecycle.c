/* tests/fuzz/fuzz_lifecycle.c - libFuzzer target for the LifecycleConfig-
 * uration documents PutBucketLifecycleConfiguration parses (s3/lifecycle.c,
 * fed by the network). Properties: a parse either succeeds with a
 * configuration that frees cleanly, or fails with one of the S3 errors a
 * document can earn (MalformedXML, InvalidArgument, NotImplemented for
 * transitions, InternalError for memory); it never crashes, leaks or
 * reads outside the input. */
#include <stdint.h>
#include <stdlib.h>

#include "storaged/s3/err.h"
#include "storaged/s3/lifecycle.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct stor_lc_conf *c = NULL;
    int ret = stor_lc_parse((const char *)data, size, &c);

    if (ret == 0) {
        CHECK(c != NULL);
        stor_lc_conf_free(c);
    } else {
        CHECK(c == NULL);
        CHECK(ret == -S3E_MALFORMED_XML || ret == -S3E_INVALID_ARGUMENT ||
              ret == -S3E_TRANSITION_NOT_IMPLEMENTED || ret == -S3E_INTERNAL);
    }
    return 0;
}
