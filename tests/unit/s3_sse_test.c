/* tests/unit/s3_sse_test.c - the encrypted-object format's pieces
 * (storaged/s3/sse.c): the stored tag list's decoder (one tag per started
 * 64 KiB package, nothing else accepted) and the sealed packages (a round
 * trip, a changed byte, a swapped package index or tag, a wrong key and
 * a truncated package are all refused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "common/hash.h"
#include "storaged/s3/cksum.h"
#include "storaged/s3/sse.h"

static const uint8_t key[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

static void tags_count_must_match_size(void **state)
{
    uint8_t *t = NULL;
    size_t n = 7;
    char hex[2 * 32 * 3 + 1];

    (void)state;
    memset(hex, 'a', sizeof(hex) - 1);
    hex[sizeof(hex) - 1] = 0;
    /* a 0-byte object has one (empty) package */
    assert_int_equal(stor_sse_tags_decode("", 0, 0, &t, &n), -EBADMSG);
    assert_int_equal(stor_sse_tags_decode(hex, 32, 0, &t, &n), 0);
    assert_int_equal(n, 1);
    free(t);
    assert_int_equal(stor_sse_tags_decode(hex, 32, 1, &t, &n), 0);
    assert_int_equal(n, 1);
    free(t);
    assert_int_equal(stor_sse_tags_decode(hex, 32, STOR_SSE_PKG, &t, &n), 0);
    free(t);
    /* one byte more starts a second package */
    assert_int_equal(stor_sse_tags_decode(hex, 32, STOR_SSE_PKG + 1, &t, &n),
                     -EBADMSG);
    assert_null(t);
    assert_int_equal(stor_sse_tags_decode(hex, 64, STOR_SSE_PKG + 1, &t, &n),
                     0);
    assert_int_equal(n, 2);
    free(t);
    assert_int_equal(stor_sse_tags_decode("", 0, 1, &t, &n), -EBADMSG);
    assert_int_equal(stor_sse_tags_decode(hex, 31, 1, &t, &n), -EBADMSG);
    hex[5] = 'x';
    assert_int_equal(stor_sse_tags_decode(hex, 32, 1, &t, &n), -EBADMSG);
    assert_null(t);
}

static void packages_open_only_as_sealed(void **state)
{
    size_t len = STOR_SSE_PKG;
    uint8_t *plain = malloc(len), *buf = malloc(len), tag[16], tag2[16];
    uint8_t other[32];
    size_t i;

    (void)state;
    assert_non_null(plain);
    assert_non_null(buf);
    for (i = 0; i < len; i++)
        plain[i] = (uint8_t)(i * 7 + 3);
    memcpy(buf, plain, len);
    assert_int_equal(stor_sse_pkg_seal(key, 5, false, buf, len, tag), 0);
    assert_memory_not_equal(buf, plain, 64);
    assert_int_equal(stor_sse_pkg_open(key, 5, false, buf, len, tag), 0);
    assert_memory_equal(buf, plain, len);
    /* a changed byte, another index, another key, a cut package */
    assert_int_equal(stor_sse_pkg_seal(key, 5, false, buf, len, tag), 0);
    buf[100] ^= 1;
    assert_int_equal(stor_sse_pkg_open(key, 5, false, buf, len, tag), -EBADMSG);
    memcpy(buf, plain, len);
    assert_int_equal(stor_sse_pkg_seal(key, 5, false, buf, len, tag), 0);
    assert_int_equal(stor_sse_pkg_open(key, 6, false, buf, len, tag), -EBADMSG);
    memcpy(buf, plain, len);
    assert_int_equal(stor_sse_pkg_seal(key, 5, false, buf, len, tag), 0);
    memcpy(other, key, 32);
    other[31] ^= 0x80;
    assert_int_equal(stor_sse_pkg_open(other, 5, false, buf, len, tag),
                     -EBADMSG);
    memcpy(buf, plain, len);
    assert_int_equal(stor_sse_pkg_seal(key, 5, false, buf, len, tag), 0);
    assert_int_equal(stor_sse_pkg_open(key, 5, false, buf, len - 1, tag),
                     -EBADMSG);
    /* the same bytes at another index seal differently (nonce = index) */
    memcpy(buf, plain, 16);
    assert_int_equal(stor_sse_pkg_seal(key, 1, false, buf, 16, tag), 0);
    memcpy(plain + 1000, buf, 16);
    memcpy(buf, plain, 16);
    assert_int_equal(stor_sse_pkg_seal(key, 2, false, buf, 16, tag2), 0);
    assert_memory_not_equal(buf, plain + 1000, 16);
    assert_memory_not_equal(tag, tag2, 16);
    /* an empty package still has a tag that must match */
    assert_int_equal(stor_sse_pkg_seal(key, 0, false, buf, 0, tag), 0);
    assert_int_equal(stor_sse_pkg_open(key, 0, false, buf, 0, tag), 0);
    tag[0] ^= 1;
    assert_int_equal(stor_sse_pkg_open(key, 0, false, buf, 0, tag), -EBADMSG);
    /* the last package opens only as the last: a cut at a package
     * boundary makes a non-final package the last, and fails */
    memcpy(buf, plain, len);
    assert_int_equal(stor_sse_pkg_seal(key, 3, false, buf, len, tag), 0);
    assert_int_equal(stor_sse_pkg_open(key, 3, true, buf, 16, tag), -EBADMSG);
    assert_int_equal(stor_sse_pkg_seal(key, 3, false, buf, len, tag), 0);
    assert_int_equal(stor_sse_pkg_open(key, 3, true, buf, len, tag), -EBADMSG);
    memcpy(buf, plain, len);
    assert_int_equal(stor_sse_pkg_seal(key, 3, true, buf, len, tag), 0);
    assert_int_equal(stor_sse_pkg_open(key, 3, false, buf, len, tag), -EBADMSG);
    memcpy(buf, plain, len);
    assert_int_equal(stor_sse_pkg_seal(key, 3, true, buf, len, tag), 0);
    assert_int_equal(stor_sse_pkg_open(key, 3, true, buf, len, tag), 0);
    assert_memory_equal(buf, plain, len);
    /* the empty package of a 0-byte object is final; a non-final one
     * does not stand in for it */
    assert_int_equal(stor_sse_pkg_seal(key, 0, false, buf, 0, tag), 0);
    assert_int_equal(stor_sse_pkg_open(key, 0, true, buf, 0, tag), -EBADMSG);
    /* more than a package is refused */
    assert_int_not_equal(stor_sse_pkg_open(key, 0, false, buf, len + 1, tag),
                         0);
    free(plain);
    free(buf);
}

/* The multipart composite checksum (cksum.c) from the joined per-part
 * values a Complete stores: CRC32 of the raw part CRCs, "-N". */
static void composite_checksum(void **state)
{
    char out[128];

    (void)state;
    /* parts "a" and "b": 6Le+Qw== and cb7v+Q== (zlib.crc32) */
    assert_int_equal(stor_s3_cksum_composite(STOR_CKSUM_CRC32,
                                             "6Le+Qw==,cb7v+Q==", 2, out,
                                             sizeof(out)),
                     0);
    assert_string_equal(out, "7pJxdw==-2");
    /* a part without one, a bad value, a wrong count: none, never wrong */
    assert_int_equal(stor_s3_cksum_composite(STOR_CKSUM_CRC32, "6Le+Qw==,", 2,
                                             out, sizeof(out)),
                     -EBADMSG);
    assert_int_equal(stor_s3_cksum_composite(STOR_CKSUM_CRC32, ",cb7v+Q==", 2,
                                             out, sizeof(out)),
                     -EBADMSG);
    assert_int_equal(stor_s3_cksum_composite(STOR_CKSUM_CRC32, "6Le+Qw", 1, out,
                                             sizeof(out)),
                     -EBADMSG);
    assert_int_equal(stor_s3_cksum_composite(STOR_CKSUM_CRC32, "6Le+Qw==", 2,
                                             out, sizeof(out)),
                     -EBADMSG);
    assert_int_equal(stor_s3_cksum_composite(STOR_CKSUM_SHA256, "6Le+Qw==", 1,
                                             out, sizeof(out)),
                     -EBADMSG);
    assert_int_equal(
        stor_s3_cksum_composite(STOR_CKSUM_NONE, "", 0, out, sizeof(out)),
        -EBADMSG);
}

/* Full-object multipart CRCs (cksum.c) combined from the parts' CRCs and
 * sizes, without the data: s3-tests' vectors (three 5 MiB parts of 'A',
 * 'B', 'C'), and the combination against a CRC of the joined bytes. */
static void full_object_checksum(void **state)
{
    static const uint64_t sz[3] = {5u << 20, 5u << 20, 5u << 20};
    static const uint64_t uneven[3] = {5u << 20, 7, 5u << 20};
    char out[128];
    uint64_t a, b;

    (void)state;
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_CRC32,
                                        "JRTCyQ==,QoZTGg==,YAgjqw==", sz, 3,
                                        out, sizeof(out)),
                     0);
    assert_string_equal(out, "WgDhBQ==");
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_CRC32C,
                                        "MDaLrw==,TH4EZg==,Z7mBIQ==", sz, 3,
                                        out, sizeof(out)),
                     0);
    assert_string_equal(out, "xU+Krw==");
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_CRC64NVME,
                                        "L/E4WYn8v98=,xW1l19VobYM=,"
                                        "cK5MnNaWrW4=",
                                        sz, 3, out, sizeof(out)),
                     0);
    assert_string_equal(out, "i+6LR0y3eFo=");
    /* the sizes matter: another middle size, another CRC */
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_CRC32,
                                        "JRTCyQ==,QoZTGg==,YAgjqw==", uneven, 3,
                                        out, sizeof(out)),
                     0);
    assert_string_not_equal(out, "WgDhBQ==");
    /* one part: its own CRC */
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_CRC32, "JRTCyQ==", sz, 1,
                                        out, sizeof(out)),
                     0);
    assert_string_equal(out, "JRTCyQ==");
    /* a part without one, too few or too many values, a SHA: none */
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_CRC32, "JRTCyQ==,,YAgjqw==",
                                        sz, 3, out, sizeof(out)),
                     -EBADMSG);
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_CRC32, "JRTCyQ==,QoZTGg==",
                                        sz, 3, out, sizeof(out)),
                     -EBADMSG);
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_CRC32,
                                        "JRTCyQ==,QoZTGg==,YAgjqw==,YAgjqw==",
                                        sz, 3, out, sizeof(out)),
                     -EBADMSG);
    assert_int_equal(stor_s3_cksum_full(STOR_CKSUM_SHA256, "JRTCyQ==", sz, 1,
                                        out, sizeof(out)),
                     -EBADMSG);
    /* combine(crc("hello "), crc("world"), 5) == crc("hello world") */
    a = cm_crc32(0, "hello ", 6);
    b = cm_crc32(0, "world", 5);
    assert_int_equal(stor_s3_crc_combine(STOR_CKSUM_CRC32, a, b, 5),
                     cm_crc32(0, "hello world", 11));
    a = cm_crc32c(0, "hello ", 6);
    b = cm_crc32c(0, "world", 5);
    assert_int_equal(stor_s3_crc_combine(STOR_CKSUM_CRC32C, a, b, 5),
                     cm_crc32c(0, "hello world", 11));
    a = cm_crc64nvme(0, "hello ", 6);
    b = cm_crc64nvme(0, "world", 5);
    assert_true(stor_s3_crc_combine(STOR_CKSUM_CRC64NVME, a, b, 5) ==
                cm_crc64nvme(0, "hello world", 11));
    assert_true(stor_s3_crc_combine(STOR_CKSUM_CRC32, a, b, 0) == (a ^ b));
}

/* The i-th of a Complete's joined part values. */
static void part_value(void **state)
{
    char out[16];

    (void)state;
    stor_s3_cksum_part("aa,bb,,dd", 1, out, sizeof(out));
    assert_string_equal(out, "bb");
    stor_s3_cksum_part("aa,bb,,dd", 2, out, sizeof(out));
    assert_string_equal(out, "");
    stor_s3_cksum_part("aa,bb,,dd", 3, out, sizeof(out));
    assert_string_equal(out, "dd");
    stor_s3_cksum_part("aa,bb,,dd", 4, out, sizeof(out));
    assert_string_equal(out, "");
    stor_s3_cksum_part(NULL, 0, out, sizeof(out));
    assert_string_equal(out, "");
    stor_s3_cksum_part("0123456789abcdefXYZ", 0, out, sizeof(out));
    assert_string_equal(out, ""); /* does not fit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tags_count_must_match_size),
        cmocka_unit_test(packages_open_only_as_sealed),
        cmocka_unit_test(composite_checksum),
        cmocka_unit_test(full_object_checksum),
        cmocka_unit_test(part_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
