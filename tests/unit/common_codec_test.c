/* tests/unit/common_codec_test.c - hex and base64: RFC 4648 vectors,
 * round trips of every byte value, and strict rejection of bad input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/codec.h"

static void test_hex(void **state)
{
    char out[2 * 256 + 1];
    uint8_t bytes[256], back[256];
    int i;

    (void)state;
    cm_hex_encode("", 0, out);
    assert_string_equal(out, "");
    cm_hex_encode("\x00\x01\xab\xff", 4, out);
    assert_string_equal(out, "0001abff");
    for (i = 0; i < 256; i++)
        bytes[i] = (uint8_t)i;
    cm_hex_encode(bytes, 256, out);
    assert_int_equal(cm_hex_decode(out, 512, back), 256);
    assert_memory_equal(bytes, back, 256);
    assert_int_equal(cm_hex_decode("ABcdEf", 6, back), 3);
    assert_memory_equal(back, "\xab\xcd\xef", 3);
    assert_int_equal(cm_hex_decode("", 0, back), 0);
}

static void test_hex_bad(void **state)
{
    uint8_t out[8];

    (void)state;
    assert_int_equal(cm_hex_decode("abc", 3, out), -EINVAL); /* odd */
    assert_int_equal(cm_hex_decode("0g", 2, out), -EINVAL);  /* non-hex */
    assert_int_equal(cm_hex_decode("g0", 2, out), -EINVAL);
    assert_int_equal(cm_hex_decode(" 0", 2, out), -EINVAL);
    assert_int_equal(cm_hex_decode("0\0", 2, out), -EINVAL);
}

static void test_base64_rfc4648(void **state)
{
    static const char *const plain[] = {"",     "f",     "fo",    "foo",
                                        "foob", "fooba", "foobar"};
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[16];
    uint8_t dec[16];
    size_t i;

    (void)state;
    for (i = 0; i < 7; i++) {
        size_t n = strlen(plain[i]);
        cm_base64_encode(plain[i], n, out);
        assert_string_equal(out, enc[i]);
        assert_int_equal(strlen(out), CM_BASE64_LEN(n));
        assert_int_equal(cm_base64_decode(enc[i], strlen(enc[i]), dec),
                         (long)n);
        assert_memory_equal(dec, plain[i], n);
    }
}

static void test_base64_all_bytes(void **state)
{
    uint8_t bytes[256], back[256];
    char out[CM_BASE64_LEN(256) + 1];
    size_t n;

    (void)state;
    for (n = 0; n < 256; n++)
        bytes[n] = (uint8_t)(255 - n);
    for (n = 0; n <= 256; n += 37) {
        cm_base64_encode(bytes, n, out);
        assert_int_equal(cm_base64_decode(out, strlen(out), back), (long)n);
        assert_memory_equal(bytes, back, n);
    }
    /* MD5 of "" as S3's Content-MD5 */
    cm_base64_encode("\xd4\x1d\x8c\xd9\x8f\x00\xb2\x04\xe9\x80\x09\x98\xec\xf8"
                     "\x42\x7e",
                     16, out);
    assert_string_equal(out, "1B2M2Y8AsgTpgAmY7PhCfg==");
}

static void test_base64_bad(void **state)
{
    static const char *const bad[] = {
        "Zg=",      /* length not a multiple of 4 */
        "Zg",       /* unpadded */
        "Z===",     /* three pads */
        "====",     /* all padding */
        "Zg==Zg==", /* padding in the middle */
        "Zm9v!A==", /* bad character */
        "Zm 9",     /* space */
        "Zh==",     /* non-zero unused bits */
        "Zm9=",     /* non-zero unused bits, one pad */
        "Z=g=",     /* pad then data */
        "Zm-_",     /* url-safe alphabet is not accepted */
    };
    uint8_t out[16];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (cm_base64_decode(bad[i], strlen(bad[i]), out) != -EINVAL)
            fail_msg("accepted bad base64 #%zu: %s", i, bad[i]);
    }
}

/* Maps two pages and makes the second PROT_NONE; inputs copied flush
 * against it fault on a one-byte overread even without ASan. */
static char *guard_map(size_t *pagesz)
{
    char *map;

    *pagesz = (size_t)sysconf(_SC_PAGESIZE);
    map = mmap(NULL, 2 * *pagesz, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map + *pagesz, *pagesz, PROT_NONE), 0);
    return map;
}

static const char *flush(char *map, size_t pagesz, const char *s, size_t n)
{
    memcpy(map + pagesz - n, s, n);
    return map + pagesz - n;
}

static void test_guard_page(void **state)
{
    static const char b64[] = "Zm9vYmFyYg==";
    static const char hex[] = "00ff10Ab";
    size_t pagesz, n;
    char *map = guard_map(&pagesz);
    uint8_t out[16];

    (void)state;
    for (n = 0; n <= sizeof(b64) - 1; n++) {
        long r = cm_base64_decode(flush(map, pagesz, b64, n), n, out);
        assert_true(n % 4 == 0 ? r >= 0 : r == -EINVAL);
    }
    for (n = 0; n <= sizeof(hex) - 1; n++) {
        long r = cm_hex_decode(flush(map, pagesz, hex, n), n, out);
        assert_int_equal(r, n % 2 == 0 ? (long)n / 2 : -EINVAL);
    }
    munmap(map, 2 * pagesz);
}

/* Strict UTF-8: every boundary RFC 3629 draws; the expectations agree with
 * Python's strict UTF-8 decoder on each string. */
static void test_utf8(void **state)
{
    static const struct {
        const char *s;
        size_t seq; /* cm_utf8_seq_len of the whole string */
        bool valid;
    } t[] = {
        {"a", 0, true},
        {"\xC2\x80", 2, true},              /* U+0080, smallest 2-byte */
        {"\xDF\xBF", 2, true},              /* U+07FF */
        {"\xC0\xAE", 0, false},             /* overlong '.' */
        {"\xC1\xBF", 0, false},             /* overlong */
        {"\xE0\xA0\x80", 3, true},          /* U+0800 */
        {"\xE0\x9F\xBF", 0, false},         /* overlong 3-byte */
        {"\xED\x9F\xBF", 3, true},          /* U+D7FF */
        {"\xED\xA0\x80", 0, false},         /* U+D800 surrogate */
        {"\xED\xBF\xBF", 0, false},         /* U+DFFF surrogate */
        {"\xEF\xBF\xBD", 3, true},          /* U+FFFD */
        {"\xF0\x90\x80\x80", 4, true},      /* U+10000 */
        {"\xF4\x8F\xBF\xBF", 4, true},      /* U+10FFFF */
        {"\xF4\x90\x80\x80", 0, false},     /* past U+10FFFF */
        {"\xF0\x8F\xBF\xBF", 0, false},     /* overlong 4-byte */
        {"\xF8\x88\x80\x80\x80", 0, false}, /* 5-byte form */
        {"\xFF", 0, false},
        {"\x80", 0, false},         /* stray continuation */
        {"\xE2\x82", 0, false},     /* truncated */
        {"\xE2\x28\xA1", 0, false}, /* bad continuation */
        {"ok\xC3\xA9ok", 0, true},  /* seq_len of 'o' is 0 */
        {"ok\xC3", 0, false},       /* truncated at the end */
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        size_t n = strlen(t[i].s);

        assert_int_equal(cm_utf8_seq_len(t[i].s, n), t[i].seq);
        assert_int_equal(cm_utf8_valid(t[i].s, n), t[i].valid);
    }
    assert_true(cm_utf8_valid("", 0));
    assert_int_equal(cm_utf8_seq_len("\xC3\xA9", 1), 0); /* n bounds the read */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_hex_bad),
        cmocka_unit_test(test_base64_rfc4648),
        cmocka_unit_test(test_base64_all_bytes),
        cmocka_unit_test(test_base64_bad),
        cmocka_unit_test(test_guard_page),
        cmocka_unit_test(test_utf8),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
