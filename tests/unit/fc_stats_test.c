/* tests/unit/fc_stats_test.c - fc_stats_lines: " name=value" pairs become
 * "name value" lines, nothing else (no padding, no empty lines), and a
 * buffer too small keeps whole lines only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fuse/stats.h"

static void test_lines(void **state)
{
    char out[256];
    size_t n;

    (void)state;
    n = fc_stats_lines("get=1 head=22 list=0 reads=333", out, sizeof(out));
    assert_string_equal(out, "get 1\nhead 22\nlist 0\nreads 333\n");
    assert_int_equal(n, strlen(out));
    /* leading, doubled and trailing spaces; a word without '=' or name */
    n = fc_stats_lines("  a=1   junk =5 b=2  ", out, sizeof(out));
    assert_string_equal(out, "a 1\nb 2\n");
    assert_int_equal(n, 8);
    n = fc_stats_lines("", out, sizeof(out));
    assert_int_equal(n, 0);
    assert_string_equal(out, "");
}

static void test_whole_lines_only(void **state)
{
    char out[12];
    size_t n;

    (void)state;
    /* "get 1\n" (6) fits, "bytes 12\n" (9) does not: left out whole */
    n = fc_stats_lines("get=1 bytes=12 c=3", out, sizeof(out));
    assert_string_equal(out, "get 1\n");
    assert_int_equal(n, 6);
    n = fc_stats_lines("get=1", out, 6); /* needs 7 with the NUL */
    assert_int_equal(n, 0);
    assert_string_equal(out, "");
    assert_int_equal(fc_stats_lines("get=1", out, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_whole_lines_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
