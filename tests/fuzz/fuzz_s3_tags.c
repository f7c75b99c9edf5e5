/* tests/fuzz/fuzz_s3_tags.c - libFuzzer target for the Put*Tagging body
 * parser (storaged/s3/tagging.c), which reads a client's XML. Besides "no
 * crash": an accepted body gives at most 50 tags in a stored form that
 * decodes back to exactly the parsed tags (stor_s3_tags_from_xml checks
 * that and answers -EPROTO otherwise, which aborts here). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "storaged/s3/tagging.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *out = NULL;
    size_t n = 0;
    int ret = stor_s3_tags_from_xml((const char *)data, size, 50, &out, &n);

    if (ret == -EPROTO || (ret == 0 && (out == NULL || n > 50)))
        abort();
    free(out);
    return 0;
}
