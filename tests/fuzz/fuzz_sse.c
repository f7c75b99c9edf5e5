/* tests/fuzz/fuzz_sse.c - libFuzzer target for the encrypted-object
 * format's parsers (storaged/s3/sse.c): the stored tag list (a header the
 * drives hand back, possibly damaged) and the package opener. Input: 8
 * bytes of object size (little-endian, bounded), then the tag list text;
 * the same bytes are also opened as one ciphertext package. Besides "no
 * crash": a decoded list has exactly one tag per started package, and a
 * package this target did not seal never opens, nor one at another index
 * or with the other final flag; the multipart tag/salt lists parse exactly
 * or are refused. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storaged/s3/sse.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t key[32] = {42};
    uint64_t osize = 0;
    uint8_t *tags = NULL, *buf, tag[16];
    size_t ntags = 0, n, i;
    bool fin;
    int ret;

    if (size < 8)
        return 0;
    for (i = 0; i < 8; i++)
        osize |= (uint64_t)data[i] << (8 * i);
    fin = (data[7] & 0x80) != 0; /* the final flag: the size's top bit */
    osize %= (uint64_t)64 << 20; /* objects of up to 64 MiB */
    ret = stor_sse_tags_decode((const char *)data + 8, size - 8, osize, &tags,
                               &ntags);
    CHECK(ret == 0 || ret == -EBADMSG || ret == -ENOMEM);
    if (ret == 0)
        CHECK(ntags ==
                  (osize ? (osize + STOR_SSE_PKG - 1) / STOR_SSE_PKG : 1) &&
              ntags * 32 == size - 8);
    else
        CHECK(tags == NULL);
    free(tags);
    /* random bytes with a random tag never open */
    n = size - 8 > STOR_SSE_PKG ? STOR_SSE_PKG : size - 8;
    buf = malloc(n + 1);
    CHECK(buf != NULL);
    memcpy(buf, data + 8, n);
    memset(tag, 0, sizeof(tag));
    memcpy(tag, data, 8);
    CHECK(stor_sse_pkg_open(key, osize, fin, buf, n, tag) != 0);
    /* what we seal opens, at its index and with its final flag only */
    memcpy(buf, data + 8, n);
    CHECK(stor_sse_pkg_seal(key, osize, fin, buf, n, tag) == 0);
    CHECK(stor_sse_pkg_open(key, osize + 1, fin, buf, n, tag) != 0);
    CHECK(stor_sse_pkg_open(key, osize, !fin, buf, n, tag) != 0);
    memcpy(buf, data + 8, n);
    CHECK(stor_sse_pkg_seal(key, osize, fin, buf, n, tag) == 0);
    CHECK(stor_sse_pkg_open(key, osize, fin, buf, n, tag) == 0);
    CHECK(memcmp(buf, data + 8, n) == 0);
    free(buf);
    /* the multipart parser: the text as "TAGS|SALTS", part sizes from
     * the size bytes; a parse is exact or refused */
    {
        char *txt = malloc(size - 8 + 1), *bar;
        uint64_t psize[16], total = 0;
        size_t np = 1, nseg = 0;
        struct stor_sse_seg *segs = NULL;

        CHECK(txt != NULL);
        memcpy(txt, data + 8, size - 8);
        txt[size - 8] = 0;
        bar = strchr(txt, '|');
        if (bar) {
            *bar = 0;
            for (const char *c = txt; *c; c++)
                np += *c == ',';
            if (np <= 16) {
                for (i = 0; i < np; i++) {
                    psize[i] = (osize >> (3 * i)) % (3 * STOR_SSE_PKG);
                    total += psize[i];
                }
                ret = stor_sse_segs_decode(txt, bar + 1, psize, np, total,
                                           &tags, &segs, &nseg);
                CHECK(ret == 0 || ret == -EBADMSG || ret == -ENOMEM);
                CHECK(ret == 0 ? nseg == np : tags == NULL && segs == NULL);
                free(tags);
                free(segs);
                tags = NULL;
            }
        }
        free(txt);
    }
    return 0;
}
