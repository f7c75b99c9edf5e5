/* tests/unit/common_buf_test.c - cm_buf: growth, NUL termination, the hard
 * limit (at, under, over) and the free-on-failure contract. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"

static void test_empty(void **state)
{
    struct cm_buf b;

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    /* An empty append still yields a valid empty string. */
    assert_int_equal(cm_buf_append(&b, "", 0), 0);
    assert_non_null(b.data);
    assert_string_equal(b.data, "");
    cm_buf_fini(&b);
    assert_null(b.data);
    cm_buf_fini(&b); /* idempotent */
}

static void test_append_grow(void **state)
{
    struct cm_buf b;
    char expect[10001];
    int i;

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    for (i = 0; i < 10000; i++) {
        expect[i] = (char)('a' + i % 26);
        assert_int_equal(cm_buf_appendc(&b, expect[i]), 0);
        assert_int_equal(b.data[b.len], '\0');
        assert_true(b.cap > b.len);
    }
    expect[10000] = '\0';
    assert_int_equal(b.len, 10000);
    assert_string_equal(b.data, expect);
    assert_int_equal(cm_buf_appends(&b, "xyz"), 0);
    assert_int_equal(b.len, 10003);
    assert_memory_equal(b.data + 10000, "xyz", 4);
    cm_buf_fini(&b);
}

static void test_binary_data(void **state)
{
    struct cm_buf b;
    const char bin[] = {'a', '\0', 'b', '\xff'};

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_buf_append(&b, bin, sizeof(bin)), 0);
    assert_int_equal(b.len, 4);
    assert_memory_equal(b.data, bin, 4);
    assert_int_equal(b.data[4], '\0');
    cm_buf_fini(&b);
}

static void test_limit(void **state)
{
    struct cm_buf b;

    (void)state;
    cm_buf_init(&b, 8);
    assert_int_equal(cm_buf_append(&b, "1234567", 7), 0); /* under */
    assert_int_equal(cm_buf_appendc(&b, '8'), 0);         /* exactly at */
    assert_int_equal(b.len, 8);
    assert_string_equal(b.data, "12345678");
    assert_true(b.cap <= 9); /* never allocates past limit + NUL */
    assert_int_equal(cm_buf_appendc(&b, '9'), -E2BIG); /* over */
    /* failure frees and empties */
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    /* still usable afterwards, same limit */
    assert_int_equal(cm_buf_appends(&b, "abc"), 0);
    assert_string_equal(b.data, "abc");
    assert_int_equal(cm_buf_appends(&b, "defghi"), -E2BIG);
    assert_null(b.data);
    cm_buf_fini(&b);

    cm_buf_init(&b, 0);
    assert_int_equal(cm_buf_append(&b, "", 0), 0);
    assert_int_equal(cm_buf_appendc(&b, 'x'), -E2BIG);
    cm_buf_fini(&b);
}

static void test_huge_append_overflow(void **state)
{
    struct cm_buf b;

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_buf_appends(&b, "x"), 0);
    /* len + n would wrap: must fail cleanly, not overflow */
    assert_int_equal(cm_buf_reserve(&b, SIZE_MAX), -E2BIG);
    assert_null(b.data);
    assert_int_equal(cm_buf_appends(&b, "x"), 0);
    assert_int_equal(cm_buf_reserve(&b, SIZE_MAX - 1), -ENOMEM);
    assert_null(b.data);
    cm_buf_fini(&b);
}

static void test_appendf(void **state)
{
    struct cm_buf b;
    char big[300];

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_buf_appendf(&b, "%d-%s", 42, "x"), 0);
    assert_int_equal(cm_buf_appendf(&b, "%s", ""), 0);
    assert_string_equal(b.data, "42-x");
    assert_int_equal(b.len, 4);
    memset(big, 'q', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(cm_buf_appendf(&b, "[%s]", big), 0);
    assert_int_equal(b.len, 4 + 301);
    assert_int_equal(b.data[b.len - 1], ']');
    cm_buf_fini(&b);

    cm_buf_init(&b, 5);
    assert_int_equal(cm_buf_appendf(&b, "%05d", 1), 0);
    assert_int_equal(cm_buf_appendf(&b, "%d", 1), -E2BIG);
    assert_null(b.data);
    cm_buf_fini(&b);
}

static void test_reserve(void **state)
{
    struct cm_buf b;

    (void)state;
    cm_buf_init(&b, 100);
    assert_int_equal(cm_buf_reserve(&b, 50), 0);
    assert_int_equal(b.len, 0);
    assert_true(b.cap >= 51);
    assert_string_equal(b.data, "");
    assert_int_equal(cm_buf_reserve(&b, 100), 0);
    assert_int_equal(cm_buf_reserve(&b, 101), -E2BIG);
    assert_null(b.data);
    cm_buf_fini(&b);
}

static void test_consume_reset_steal(void **state)
{
    struct cm_buf b;
    char *p;
    size_t cap;

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_buf_appends(&b, "hello world"), 0);
    cm_buf_consume(&b, 6);
    assert_string_equal(b.data, "world");
    assert_int_equal(b.len, 5);
    cm_buf_consume(&b, 0);
    assert_string_equal(b.data, "world");
    cm_buf_consume(&b, 99); /* more than len: empties */
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");

    assert_int_equal(cm_buf_appends(&b, "abc"), 0);
    cap = b.cap;
    cm_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, cap);
    assert_string_equal(b.data, "");

    assert_int_equal(cm_buf_appends(&b, "keep"), 0);
    p = cm_buf_steal(&b);
    assert_string_equal(p, "keep");
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    free(p);
    assert_null(cm_buf_steal(&b));
    cm_buf_reset(&b); /* on an empty buffer: no-op */
    cm_buf_consume(&b, 1);
    cm_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_append_grow),
        cmocka_unit_test(test_binary_data),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_huge_append_overflow),
        cmocka_unit_test(test_appendf),
        cmocka_unit_test(test_reserve),
        cmocka_unit_test(test_consume_reset_steal),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
