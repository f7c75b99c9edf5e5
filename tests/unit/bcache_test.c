/* tests/unit/bcache_test.c - the small-object body cache
 * (storaged/s3/bcache.c): hits only for the exact bucket, id, version and
 * length; a newer version replaces an older one; the byte budget holds, least
 * recently used first out; a corrupted entry is detected by its CRC and
 * dropped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "storaged/s3/bcache.h"

static void id_of(int n, uint8_t id[16])
{
    memset(id, 0, 16);
    id[0] = (uint8_t)n;
    id[15] = (uint8_t)(n >> 8);
}

static void test_exact_match_only(void **state)
{
    struct stor_bcache *c = stor_bcache_create(1 << 20);
    uint8_t id[16], other[16];
    char body[4096];
    const char *got;

    (void)state;
    assert_null(stor_bcache_create(0));
    memset(body, 'a', sizeof(body));
    id_of(1, id);
    id_of(2, other);
    assert_null(stor_bcache_get(c, "bk", id, 10, sizeof(body)));
    stor_bcache_put(c, "bk", id, 10, body, sizeof(body));
    got = stor_bcache_get(c, "bk", id, 10, sizeof(body));
    assert_non_null(got);
    assert_memory_equal(got, body, sizeof(body));
    assert_null(stor_bcache_get(c, "bk", id, 11, sizeof(body)));
    assert_null(stor_bcache_get(c, "bk", id, 9, sizeof(body)));
    assert_null(stor_bcache_get(c, "bk", id, 10, sizeof(body) - 1));
    assert_null(stor_bcache_get(c, "other", id, 10, sizeof(body)));
    assert_null(stor_bcache_get(c, "bk", other, 10, sizeof(body)));
    /* a new version replaces the old one */
    memset(body, 'b', sizeof(body));
    stor_bcache_put(c, "bk", id, 12, body, sizeof(body));
    assert_null(stor_bcache_get(c, "bk", id, 10, sizeof(body)));
    got = stor_bcache_get(c, "bk", id, 12, sizeof(body));
    assert_non_null(got);
    assert_memory_equal(got, body, sizeof(body));
    /* empty bodies are fine */
    stor_bcache_put(c, "bk", other, 3, "", 0);
    assert_non_null(stor_bcache_get(c, "bk", other, 3, 0));
    stor_bcache_destroy(c);
}

static void test_budget_and_lru(void **state)
{
    /* room for about 10 entries of 10 KiB */
    struct stor_bcache *c = stor_bcache_create(10 * 10240 + 10 * 200);
    char body[10240];
    uint8_t id[16];
    int n, present = 0;

    (void)state;
    memset(body, 'x', sizeof(body));
    for (n = 0; n < 100; n++) {
        id_of(n, id);
        stor_bcache_put(c, "bk", id, (uint64_t)n, body, sizeof(body));
        /* keep entry 0 hot: it must survive */
        id_of(0, id);
        assert_non_null(stor_bcache_get(c, "bk", id, 0, sizeof(body)));
    }
    for (n = 0; n < 100; n++) {
        id_of(n, id);
        if (stor_bcache_get(c, "bk", id, (uint64_t)n, sizeof(body)))
            present++;
    }
    assert_true(present >= 5 && present <= 10);
    id_of(99, id); /* the newest is there */
    assert_non_null(stor_bcache_get(c, "bk", id, 99, sizeof(body)));
    id_of(1, id); /* an old cold one is not */
    assert_null(stor_bcache_get(c, "bk", id, 1, sizeof(body)));
    /* larger than the whole budget: not cached */
    {
        char *big = calloc(1, 200 * 1024);

        assert_non_null(big);
        id_of(500, id);
        stor_bcache_put(c, "bk", id, 1, big, 200 * 1024);
        assert_null(stor_bcache_get(c, "bk", id, 1, 200 * 1024));
        free(big);
    }
    stor_bcache_destroy(c);
}

static void test_corruption_is_dropped(void **state)
{
    struct stor_bcache *c = stor_bcache_create(1 << 20);
    char body[4096];
    uint8_t id[16];
    char *got;

    (void)state;
    memset(body, 'q', sizeof(body));
    id_of(7, id);
    stor_bcache_put(c, "bk", id, 1, body, sizeof(body));
    /* flip a byte inside the cached copy, as a memory fault would */
    got = (char *)(uintptr_t)stor_bcache_get(c, "bk", id, 1, sizeof(body));
    assert_non_null(got);
    got[100] ^= 1;
    assert_null(stor_bcache_get(c, "bk", id, 1, sizeof(body)));
    /* gone for good, and a fresh fill works again */
    assert_null(stor_bcache_get(c, "bk", id, 1, sizeof(body)));
    stor_bcache_put(c, "bk", id, 1, body, sizeof(body));
    assert_non_null(stor_bcache_get(c, "bk", id, 1, sizeof(body)));
    stor_bcache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_match_only),
        cmocka_unit_test(test_budget_and_lru),
        cmocka_unit_test(test_corruption_is_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
