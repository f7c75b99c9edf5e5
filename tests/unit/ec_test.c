/* tests/unit/ec_test.c - the isa-l codec wrapper and placement: every
 * erasure pattern up to m lost shards rebuilds exactly for the geometries we
 * use; SipHash matches the reference vector; set defaults follow
 * storaged/FORMAT.md "Drives and sets"; 10,000 keys spread over 4 sets (and
 * shard 0 over all drives) within 10%. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storaged/store/ec.h"
#include "storaged/store/placement.h"

/* Tries every subset of lost shards of size <= m (bitmask walk). */
static void exhaustive(int k, int m, size_t len)
{
    const struct stor_ec *e = stor_ec_get(k, m);
    int n = k + m;
    uint8_t *orig[STOR_EC_MAX_SHARDS], *work[STOR_EC_MAX_SHARDS];

    assert_non_null(e);
    for (int i = 0; i < n; i++) {
        orig[i] = malloc(len);
        work[i] = malloc(len);
        for (size_t b = 0; b < len; b++)
            orig[i][b] = (uint8_t)(rand() & 0xff);
    }
    stor_ec_encode(e, len, orig, orig + k);
    for (uint32_t mask = 1; mask < (1u << n); mask++) {
        bool present[STOR_EC_MAX_SHARDS], want[STOR_EC_MAX_SHARDS];
        int lost = __builtin_popcount(mask);

        if (lost > m)
            continue;
        for (int i = 0; i < n; i++) {
            want[i] = mask & (1u << i);
            present[i] = !want[i];
            memcpy(work[i], orig[i], len);
            if (want[i])
                memset(work[i], 0xee, len);
        }
        assert_int_equal(stor_ec_reconstruct(e, len, work, present, want), 0);
        for (int i = 0; i < n; i++)
            assert_memory_equal(work[i], orig[i], len);
    }
    /* one more loss than parity cannot be rebuilt */
    if (m + 1 <= n) {
        bool present[STOR_EC_MAX_SHARDS] = {0}, want[STOR_EC_MAX_SHARDS] = {0};

        for (int i = 0; i < n; i++)
            present[i] = i > m;
        want[0] = true;
        assert_int_equal(stor_ec_reconstruct(e, len, work, present, want),
                         -EIO);
    }
    for (int i = 0; i < n; i++) {
        free(orig[i]);
        free(work[i]);
    }
}

static void test_codec(void **st)
{
    (void)st;
    exhaustive(1, 4, 100);
    exhaustive(2, 2, 4096);
    exhaustive(6, 2, 333);
    exhaustive(4, 4, 64);
    exhaustive(12, 4, 1000);
    assert_null(stor_ec_get(0, 1));
    assert_null(stor_ec_get(30, 4));
}

static void test_siphash_vector(void **st)
{
    /* SipHash-2-4 reference: key 00..0f, message 00..0e -> a129ca6149be45e5 */
    uint8_t key[16], msg[15];

    (void)st;
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 15; i++)
        msg[i] = (uint8_t)i;
    assert_true(stor_siphash(key, msg, 15) == 0xa129ca6149be45e5ULL);
}

static void test_rules(void **st)
{
    (void)st;
    assert_int_equal(stor_default_parity(1), 0);
    assert_int_equal(stor_default_parity(3), 1);
    assert_int_equal(stor_default_parity(4), 2);
    assert_int_equal(stor_default_parity(7), 3);
    assert_int_equal(stor_default_parity(16), 4);
    assert_int_equal(stor_choose_set_size(16), 16);
    assert_int_equal(stor_choose_set_size(24), 12);
    assert_int_equal(stor_choose_set_size(64), 16);
    assert_int_equal(stor_choose_set_size(1), 1);
    assert_int_equal(stor_choose_set_size(17), 0);
    assert_int_equal(stor_write_quorum(12, 4), 12);
    assert_int_equal(stor_write_quorum(2, 2), 3);
    assert_int_equal(stor_small_k(12, 0), 1);
    assert_int_equal(stor_small_k(12, 4096), 1);
    assert_int_equal(stor_small_k(12, 16384), 4);
    assert_int_equal(stor_small_k(12, 48 * 1024), 12);
    assert_int_equal(stor_small_k(12, 1 << 30), 12);
}

static void test_spread(void **st)
{
    uint8_t dkey[16] = "deployment-key!";
    int sets[4] = {0}, drives[64] = {0};

    (void)st;
    for (int i = 0; i < 10000; i++) {
        char key[64];
        struct stor_place pl;

        snprintf(key, sizeof(key), "train/class%03d/img%06d.jpg", i % 100, i);
        stor_place(dkey, "bucket", key, strlen(key), 4, 16, &pl);
        sets[pl.set]++;
        drives[pl.set * 16 + pl.rot]++;
    }
    for (int i = 0; i < 4; i++) {
        assert_true(sets[i] >= 2250 && sets[i] <= 2750);
    }
    /* shard 0 of small objects: 10000 / 64 = 156 per drive; allow 30%
     * (fewer samples per bucket than per set) */
    for (int i = 0; i < 64; i++)
        assert_true(drives[i] >= 109 && drives[i] <= 203);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec),
        cmocka_unit_test(test_siphash_vector),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
