/* tests/unit/common_xml_test.c - XML escaping of S3 keys and messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/xml.h"

static void esc(const char *in, size_t n, const char *want)
{
    struct cm_buf b;

    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_xml_escape(&b, in, n), 0);
    assert_non_null(b.data);
    assert_string_equal(b.data, want);
    cm_buf_fini(&b);
}

static void test_escape(void **state)
{
    (void)state;
    esc("", 0, "");
    esc("plain/key.txt", 13, "plain/key.txt");
    esc("a&b<c>d\"e'f", 11, "a&amp;b&lt;c&gt;d&quot;e&apos;f");
    esc("&&", 2, "&amp;&amp;");
    esc("tab\tlf\ncr\r", 10, "tab\tlf\ncr\r");              /* kept */
    esc("\x01x\x1f\x7f", 4, "&#x1;x&#x1F;&#x7F;");          /* control bytes */
    esc("a\0b", 3, "a&#x0;b");                              /* NUL */
    esc("\xc3\xbc\xe1\x88\xb4", 5, "\xc3\xbc\xe1\x88\xb4"); /* UTF-8 as is */
    esc("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80");         /* U+1F600 */
    /* not UTF-8: each bad byte is U+FFFD, the rest kept */
    esc("a\xff", 2, "a\xef\xbf\xbd");
    esc("\xc0\xae", 2, "\xef\xbf\xbd\xef\xbf\xbd"); /* overlong */
    esc("\xed\xa0\x80", 3,
        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");      /* surrogate */
    esc("x\xe2\x82", 3, "x\xef\xbf\xbd\xef\xbf\xbd"); /* truncated */
    esc("\xe2\x82<", 3, "\xef\xbf\xbd\xef\xbf\xbd&lt;");
}

static void test_appends_and_limit(void **state)
{
    struct cm_buf b;

    (void)state;
    cm_buf_init(&b, 10);
    assert_int_equal(cm_buf_appends(&b, "<K>"), 0);
    assert_int_equal(cm_xml_escape(&b, "a&", 2), 0);
    assert_string_equal(b.data, "<K>a&amp;");
    assert_int_equal(cm_xml_escape(&b, "<", 1), -E2BIG);
    assert_null(b.data);
    cm_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_appends_and_limit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
