/* tests/fuzz/fuzz_s3_mime.c - libFuzzer target for the user metadata
 * decoder (storaged/s3/mime.c), which reads a client's x-amz-meta-* value.
 * Besides "no crash": the stored value is well-formed UTF-8 without a NUL,
 * of the length said; a value of printable ASCII without "=?" is stored as
 * sent; and the encoded-word answered for a stored value decodes back to
 * exactly that value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "storaged/s3/mime.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *)data;
    char *out = NULL, *back = NULL, *enc;
    size_t n = 0, bn = 0, en;
    bool plain = !stor_s3_meta_needs_encoding(v, size) &&
                 (size < 2 || memmem(v, size, "=?", 2) == NULL);

    if (stor_s3_meta_decode(v, size, &out, &n) < 0)
        return 0;
    if (strlen(out) != n || !cm_utf8_valid(out, n))
        abort();
    if (plain && (n != size || memcmp(out, v, n) != 0))
        abort();
    if (stor_s3_meta_needs_encoding(out, n)) {
        enc = malloc(STOR_S3_META_ENC_LEN(n));
        if (enc == NULL)
            abort();
        en = stor_s3_meta_encode(out, n, enc);
        if (strlen(enc) != en || stor_s3_meta_needs_encoding(enc, en))
            abort();
        if (stor_s3_meta_decode(enc, en, &back, &bn) < 0)
            abort();
        if (bn != n || memcmp(back, out, n) != 0)
            abort();
        free(back);
        free(enc);
    }
    free(out);
    return 0;
}
