/* tests/unit/fc_write_test.c - fc_write_part_size: the part sizes of a
 * multipart upload (issue #13: default 8 MiB, growing for very large files
 * so that S3's 10,000 parts reach at least 1 TiB), from any base the
 * options allow (5M..5G), never past S3's 5 GiB part limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fuse/write.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define TIB ((uint64_t)1 << 40)

/* Bytes held by parts 1..10,000 (S3's most) of base @base. */
static uint64_t reach(size_t base)
{
    uint64_t sum = 0;

    for (unsigned p = 1; p <= 10000; p++)
        sum += fc_write_part_size(base, p);
    return sum;
}

static void test_default_doubles_every_1000(void **state)
{
    (void)state;
    assert_int_equal(fc_write_part_size(8 * MIB, 1), 8 * MIB);
    assert_int_equal(fc_write_part_size(8 * MIB, 1000), 8 * MIB);
    assert_int_equal(fc_write_part_size(8 * MIB, 1001), 16 * MIB);
    assert_int_equal(fc_write_part_size(8 * MIB, 2001), 32 * MIB);
    assert_int_equal(fc_write_part_size(8 * MIB, 10000), 4 * GIB);
    /* 1000 x 8 MiB x (1 + 2 + ... + 512) = 8,000 GiB */
    assert_true(reach(8 * MIB) == (uint64_t)1000 * 8 * MIB * 1023);
    assert_true(reach(8 * MIB) >= 7 * TIB);
}

static void test_every_base_reaches_1tib(void **state)
{
    (void)state;
    /* the smallest base the options allow (S3's smallest part) */
    assert_true(reach(5 * MIB) >= TIB);
    assert_true(reach(5 * MIB + 1) >= TIB);
    assert_true(reach(100 * MIB) >= TIB);
    assert_true(reach(5 * GIB) >= TIB);
}

static void test_never_past_5gib(void **state)
{
    size_t bases[] = {5 * MIB, 8 * MIB, 64 * MIB, GIB, 3 * GIB, 5 * GIB};

    (void)state;
    for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        size_t prev = 0;
        for (unsigned p = 1; p <= 10000; p++) {
            size_t s = fc_write_part_size(bases[i], p);
            assert_true(s >= 5 * MIB && s <= 5 * GIB);
            assert_true(s >= prev); /* never shrinks */
            prev = s;
        }
    }
    assert_int_equal(fc_write_part_size(GIB, 3001), 5 * GIB);
    assert_int_equal(fc_write_part_size(5 * GIB, 1), 5 * GIB);
    /* part 0 (not used) and absurd part numbers stay in range */
    assert_int_equal(fc_write_part_size(8 * MIB, 0), 8 * MIB);
    assert_int_equal(fc_write_part_size(8 * MIB, 4000000000u), 5 * GIB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_doubles_every_1000),
        cmocka_unit_test(test_every_base_reaches_1tib),
        cmocka_unit_test(test_never_past_5gib),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
