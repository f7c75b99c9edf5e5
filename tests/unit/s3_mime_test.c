/* tests/unit/s3_mime_test.c - user metadata values and RFC 2047
 * (storaged/s3/mime.c): encoded-words decoded before storing (B and Q, the
 * three charsets, adjacent words, malformed and unknown words kept), bytes
 * that are not UTF-8 read as ISO-8859-1, and the encoded-word answered for
 * a value that is not printable ASCII, decoded back to the same bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "storaged/s3/mime.h"

/* Asserts that decoding @in gives @want. */
static void dec(const char *in, const char *want)
{
    char *out = NULL;
    size_t n = 0;

    assert_int_equal(stor_s3_meta_decode(in, strlen(in), &out, &n), 0);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
    free(out);
}

static void test_decode(void **state)
{
    (void)state;
    dec("", "");
    dec("plain ascii", "plain ascii");
    dec("Hello World\xc3\xa9", "Hello World\xc3\xa9"); /* UTF-8 as sent */
    dec("caf\xe9", "caf\xc3\xa9");                     /* ISO-8859-1 */
    dec("=?UTF-8?B?w6k=?=", "\xc3\xa9");
    dec("=?utf-8?b?w6k=?=", "\xc3\xa9");
    dec("=?UTF-8?Q?caf=C3=A9_au_lait?=", "caf\xc3\xa9 au lait");
    dec("=?ISO-8859-1?Q?caf=E9?=", "caf\xc3\xa9");
    dec("=?iso-8859-1?B?6Q==?=", "\xc3\xa9");
    dec("=?US-ASCII?Q?abc?=", "abc");
    dec("=?UTF-8*fr?Q?=C3=A9?=", "\xc3\xa9"); /* RFC 2231 language */
    dec("a =?UTF-8?B?w6k=?= b", "a \xc3\xa9 b");
    /* white space between adjacent encoded-words goes (RFC 2047 6.2) */
    dec("=?UTF-8?Q?a?= =?UTF-8?Q?b?=", "ab");
    dec("=?UTF-8?Q?a?=  \t=?UTF-8?Q?b?= c", "ab c");
    dec("=?UTF-8?Q?a?= =?X?Q?b?=", "a =?X?Q?b?=");
    /* kept as sent: unknown charset, bad encoding, malformed, bad bytes */
    dec("=?KOI8-R?B?w6k=?=", "=?KOI8-R?B?w6k=?=");
    dec("=?UTF-8?X?abc?=", "=?UTF-8?X?abc?=");
    dec("=?UTF-8?B?w6k?=", "=?UTF-8?B?w6k?=");
    dec("=?UTF-8?Q?=ZZ?=", "=?UTF-8?Q?=ZZ?=");
    dec("=?UTF-8?Q?=C3?=", "=?UTF-8?Q?=C3?="); /* truncated UTF-8 */
    dec("=?US-ASCII?Q?=E9?=", "=?US-ASCII?Q?=E9?=");
    dec("=?UTF-8?B?AA==?=", "=?UTF-8?B?AA==?="); /* a NUL */
    dec("=?UTF-8?B?"
        "?=",
        "=?UTF-8?B?"
        "?="); /* no text */
    dec("=?UTF-8?B?w6k=", "=?UTF-8?B?w6k=");
    dec("=??B?w6k=?=", "=??B?w6k=?=");
    dec("=?UTF-8?Q?a b?=", "=?UTF-8?Q?a b?=");
    /* CR LF are decoded (and answered encoded again, never raw) */
    dec("=?UTF-8?B?YQ0KYg==?=", "a\r\nb");
}

static void test_encode(void **state)
{
    char buf[STOR_S3_META_ENC_LEN(64)];
    char *back = NULL;
    size_t n, bn;

    (void)state;
    assert_false(stor_s3_meta_needs_encoding("plain ascii\t~", 13));
    assert_true(stor_s3_meta_needs_encoding("caf\xc3\xa9", 5));
    assert_true(stor_s3_meta_needs_encoding("a\r\nb", 4));
    assert_true(stor_s3_meta_needs_encoding("\x7f", 1));
    n = stor_s3_meta_encode("Hello World\xc3\xa9", 13, buf);
    assert_string_equal(buf, "=?UTF-8?B?SGVsbG8gV29ybGTDqQ==?=");
    assert_int_equal(n, strlen(buf));
    /* a value stored raw before decoding existed, not UTF-8 */
    stor_s3_meta_encode("caf\xe9", 4, buf);
    assert_string_equal(buf, "=?ISO-8859-1?B?Y2Fm6Q==?=");
    /* what is answered decodes back to what was stored */
    n = stor_s3_meta_encode("a\r\nb \xe2\x82\xac", 8, buf);
    assert_int_equal(stor_s3_meta_decode(buf, n, &back, &bn), 0);
    assert_int_equal(bn, 8);
    assert_memory_equal(back, "a\r\nb \xe2\x82\xac", 8);
    free(back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_encode),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
