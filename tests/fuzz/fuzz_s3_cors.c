/* tests/fuzz/fuzz_s3_cors.c - libFuzzer target for the PutBucketCors body
 * parser (storaged/s3/cors.c), which reads a client's XML and, once
 * stored, is parsed again for every request that carries Origin. Besides
 * "no crash": an accepted configuration has 1..100 rules and parses the
 * same way twice. */
#include <stdint.h>
#include <stdlib.h>

#include "storaged/s3/cors.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0, m = 0;
    int a = stor_cors_check_xml((const char *)data, size, &n);
    int b = stor_cors_check_xml((const char *)data, size, &m);

    if (a != b || (a == 0 && (n == 0 || n > 100 || n != m)))
        abort();
    return 0;
}
