/* tests/unit/common_uri_test.c - SigV4 percent-encoding and decoding:
 * the unreserved set, '/', UTF-8, '+' handling, malformed escapes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/uri.h"

static void enc(const char *in, bool slash, const char *want)
{
    struct cm_buf b;

    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_uri_encode(&b, in, strlen(in), slash), 0);
    assert_string_equal(b.data, want);
    cm_buf_fini(&b);
}

static void dec(const char *in, bool plus, const char *want, size_t want_len)
{
    struct cm_buf b;

    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_uri_decode(&b, in, strlen(in), plus), 0);
    assert_int_equal(b.len, want_len);
    assert_memory_equal(b.data, want, want_len);
    cm_buf_fini(&b);
}

static void test_encode(void **state)
{
    (void)state;
    enc("", false, "");
    enc("AZaz09-_.~", false, "AZaz09-_.~");
    enc("a b+c=d&e", false, "a%20b%2Bc%3Dd%26e");
    enc("a/b", false, "a%2Fb");
    enc("a/b", true, "a/b");
    enc("/dir one/", true, "/dir%20one/");
    enc("100%", false, "100%25");
    enc("!*'()$,;:@?#[]", true, "%21%2A%27%28%29%24%2C%3B%3A%40%3F%23%5B%5D");
    enc("\xe1\x88\xb4", false, "%E1%88%B4"); /* uppercase hex */
    enc("\x7f\x01\xff", false, "%7F%01%FF");
}

static void test_encode_nul_and_limit(void **state)
{
    struct cm_buf b;

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_uri_encode(&b, "a\0b", 3, false), 0);
    assert_string_equal(b.data, "a%00b");
    cm_buf_fini(&b);

    cm_buf_init(&b, 5);
    assert_int_equal(cm_uri_encode(&b, "ab", 2, false), 0);
    assert_int_equal(cm_uri_encode(&b, " ", 1, false), 0); /* exactly 5 */
    assert_string_equal(b.data, "ab%20");
    assert_int_equal(cm_uri_encode(&b, "x", 1, false), -E2BIG);
    assert_null(b.data);
    cm_buf_fini(&b);
}

static void test_decode(void **state)
{
    (void)state;
    dec("", false, "", 0);
    dec("plain", false, "plain", 5);
    dec("a%20b%2Bc", false, "a b+c", 5);
    dec("a%2fb%2F", false, "a/b/", 4); /* either case */
    dec("a+b", false, "a+b", 3);
    dec("a+b", true, "a b", 3);
    dec("%2B+", true, "+ ", 2);
    dec("%E1%88%B4", false, "\xe1\x88\xb4", 3);
    dec("%00x", false, "\0x", 2); /* NUL decodes; callers check */
}

static void test_decode_bad(void **state)
{
    static const char *const bad[] = {"%",   "%2", "a%",  "%G0",
                                      "%0G", "%%", "ab%2"};
    struct cm_buf b;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cm_buf_init(&b, CM_BUF_NOLIMIT);
        assert_int_equal(cm_buf_appends(&b, "prefix"), 0);
        if (cm_uri_decode(&b, bad[i], strlen(bad[i]), false) != -EINVAL)
            fail_msg("accepted bad escape #%zu: %s", i, bad[i]);
        /* out is left empty on failure */
        assert_null(b.data);
        assert_int_equal(b.len, 0);
        cm_buf_fini(&b);
    }
}

/* Every byte, with and without keep_slash, against the RFC 3986
 * definition written out here; appended after existing content. */
static void test_encode_every_byte(void **state)
{
    struct cm_buf b, want;
    char all[256];
    int i, slash;

    (void)state;
    for (i = 0; i < 256; i++)
        all[i] = (char)i;
    for (slash = 0; slash < 2; slash++) {
        cm_buf_init(&b, CM_BUF_NOLIMIT);
        cm_buf_init(&want, CM_BUF_NOLIMIT);
        assert_int_equal(cm_buf_appends(&b, "pre"), 0);
        assert_int_equal(cm_buf_appends(&want, "pre"), 0);
        for (i = 0; i < 256; i++) {
            bool keep = (i >= 'A' && i <= 'Z') || (i >= 'a' && i <= 'z') ||
                        (i >= '0' && i <= '9') || i == '-' || i == '_' ||
                        i == '.' || i == '~' || (slash && i == '/');
            char esc[4];

            if (keep) {
                assert_int_equal(cm_buf_appendc(&want, (char)i), 0);
            } else {
                snprintf(esc, sizeof(esc), "%%%02X", i);
                assert_int_equal(cm_buf_appends(&want, esc), 0);
            }
        }
        assert_int_equal(cm_uri_encode(&b, all, 256, slash != 0), 0);
        assert_int_equal(b.len, want.len);
        assert_memory_equal(b.data, want.data, want.len);
        assert_int_equal(b.data[b.len], '\0');
        cm_buf_fini(&b);
        cm_buf_fini(&want);
    }
}

static void test_round_trip(void **state)
{
    struct cm_buf e, d;
    char all[256];
    int i;

    (void)state;
    for (i = 0; i < 256; i++)
        all[i] = (char)i;
    cm_buf_init(&e, CM_BUF_NOLIMIT);
    cm_buf_init(&d, CM_BUF_NOLIMIT);
    assert_int_equal(cm_uri_encode(&e, all, 256, false), 0);
    assert_int_equal(cm_uri_decode(&d, e.data, e.len, true), 0);
    assert_int_equal(d.len, 256);
    assert_memory_equal(d.data, all, 256);
    cm_buf_fini(&e);
    cm_buf_fini(&d);
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
    static const char in[] = "a%20b+%E1%88%B4";
    size_t pagesz, n;
    char *map = guard_map(&pagesz);
    struct cm_buf b;

    (void)state;
    for (n = 0; n <= sizeof(in) - 1; n++) {
        const char *p = flush(map, pagesz, in, n);
        int r;
        cm_buf_init(&b, CM_BUF_NOLIMIT);
        r = cm_uri_decode(&b, p, n, true);
        /* a cut inside an escape is malformed; elsewhere it decodes */
        assert_true(r == 0 || r == -EINVAL);
        if (n > 0 && (p[n - 1] == '%' || (n > 1 && p[n - 2] == '%')))
            assert_int_equal(r, -EINVAL);
        cm_buf_fini(&b);
        cm_buf_init(&b, CM_BUF_NOLIMIT);
        assert_int_equal(cm_uri_encode(&b, p, n, true), 0);
        cm_buf_fini(&b);
    }
    munmap(map, 2 * pagesz);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_encode_every_byte),
        cmocka_unit_test(test_encode_nul_and_limit),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_decode_bad),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_guard_page),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
