/* tests/unit/zcache_test.c - the zero-copy body cache
 * (storaged/s3/zcache.c): a body is admitted the second time it is
 * offered; a tee gives exactly its bytes, as often as asked (tee never
 * consumes); only the exact bucket, id, version and length hit; a newer
 * version replaces an older one; the byte budget holds, least recently
 * used first out; a pipe too small for the body fails the tee. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storaged/s3/zcache.h"

static void id_of(int n, uint8_t id[16])
{
    memset(id, 0, 16);
    id[0] = (uint8_t)n;
    id[15] = (uint8_t)(n >> 8);
}

/* Offers @body twice (admitted the second time) and puts it. */
static void put(struct stor_zcache *c, const char *bucket, const uint8_t id[16],
                uint64_t version, const char *body, size_t len)
{
    void *p;

    assert_false(stor_zcache_want(c, bucket, id, version, len));
    assert_true(stor_zcache_want(c, bucket, id, version, len));
    p = stor_zcache_region(len);
    assert_non_null(p);
    memcpy(p, body, len);
    stor_zcache_put(c, bucket, id, version, p, len);
}

/* Tees the body into a fresh pipe and reads it back into @out. */
static int tee_read(struct stor_zcache *c, const char *bucket,
                    const uint8_t id[16], uint64_t version, char *out,
                    size_t len)
{
    int p[2], ret;
    size_t got = 0;

    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    assert_true(fcntl(p[1], F_SETPIPE_SZ, (int)stor_zcache_pipe_bytes(len)) >=
                (int)stor_zcache_pipe_bytes(len));
    ret = stor_zcache_tee(c, bucket, id, version, len, p[1]);
    while (ret == 0 && got < len) {
        ssize_t n = read(p[0], out + got, len - got);

        assert_true(n > 0);
        got += (size_t)n;
    }
    close(p[0]);
    close(p[1]);
    return ret;
}

static void test_admit_tee_exact(void **state)
{
    struct stor_zcache *c = stor_zcache_create(8 << 20);
    size_t len = 320 * 1024 + 7;
    char *body = malloc(len), *out = malloc(len);
    uint8_t id[16], other[16];
    struct stor_zcache_stats st;

    (void)state;
    assert_null(stor_zcache_create(0));
    for (size_t i = 0; i < len; i++)
        body[i] = (char)(i * 131 + 7);
    id_of(1, id);
    id_of(2, other);
    assert_false(stor_zcache_has(c, "bk", id, 10, len));
    assert_int_equal(tee_read(c, "bk", id, 10, out, len), -ENOENT);
    put(c, "bk", id, 10, body, len);
    assert_true(stor_zcache_has(c, "bk", id, 10, len));
    /* held: not wanted again */
    assert_false(stor_zcache_want(c, "bk", id, 10, len));
    for (int round = 0; round < 3; round++) { /* tee never consumes */
        memset(out, 0, len);
        assert_int_equal(tee_read(c, "bk", id, 10, out, len), 0);
        assert_memory_equal(out, body, len);
    }
    assert_int_equal(tee_read(c, "bk", id, 11, out, len), -ENOENT);
    assert_int_equal(tee_read(c, "bk", id, 9, out, len), -ENOENT);
    assert_int_equal(tee_read(c, "bk", id, 10, out, len - 1), -ENOENT);
    assert_int_equal(tee_read(c, "other", id, 10, out, len), -ENOENT);
    assert_int_equal(tee_read(c, "bk", other, 10, out, len), -ENOENT);
    /* a newer version replaces the old one */
    body[0] ^= 1;
    put(c, "bk", id, 12, body, len);
    assert_false(stor_zcache_has(c, "bk", id, 10, len));
    assert_int_equal(tee_read(c, "bk", id, 12, out, len), 0);
    assert_memory_equal(out, body, len);
    stor_zcache_stats(c, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.puts, 2);
    assert_int_equal(st.hits, 4);
    /* too big, empty: never wanted */
    assert_false(stor_zcache_want(c, "bk", other, 1, STOR_ZCACHE_MAX_BODY + 1));
    assert_false(stor_zcache_want(c, "bk", other, 1, 0));
    stor_zcache_destroy(c);
    free(body);
    free(out);
}

static void test_budget_and_lru(void **state)
{
    /* room for about 10 bodies of 40 KiB */
    struct stor_zcache *c = stor_zcache_create(10 * (40960 + 512));
    char body[40960], out[40960];
    uint8_t id[16];
    int n, present = 0;
    struct stor_zcache_stats st;

    (void)state;
    memset(body, 'x', sizeof(body));
    for (n = 0; n < 40; n++) {
        id_of(n, id);
        put(c, "bk", id, (uint64_t)n, body, sizeof(body));
        /* keep body 0 hot: it must survive */
        id_of(0, id);
        assert_int_equal(tee_read(c, "bk", id, 0, out, sizeof(out)), 0);
    }
    for (n = 0; n < 40; n++) {
        id_of(n, id);
        if (stor_zcache_has(c, "bk", id, (uint64_t)n, sizeof(body)))
            present++;
    }
    stor_zcache_stats(c, &st);
    assert_true(present <= 10 && present >= 8);
    assert_true(st.bytes <= st.max_bytes);
    assert_int_equal(st.entries, (size_t)present);
    assert_int_equal(st.evictions, 40 - present);
    id_of(39, id); /* the newest too */
    assert_true(stor_zcache_has(c, "bk", id, 39, sizeof(body)));
    stor_zcache_destroy(c);
}

static void test_small_pipe_fails(void **state)
{
    struct stor_zcache *c = stor_zcache_create(4 << 20);
    size_t len = 512 * 1024;
    char *body = calloc(1, len);
    uint8_t id[16];
    int p[2];

    (void)state;
    id_of(3, id);
    put(c, "bk", id, 1, body, len);
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    assert_true(fcntl(p[1], F_SETPIPE_SZ, 65536) >= 65536);
    assert_true(stor_zcache_tee(c, "bk", id, 1, len, p[1]) < 0);
    close(p[0]);
    close(p[1]);
    /* still held, whole */
    assert_true(stor_zcache_has(c, "bk", id, 1, len));
    stor_zcache_destroy(c);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admit_tee_exact),
        cmocka_unit_test(test_budget_and_lru),
        cmocka_unit_test(test_small_pipe_fails),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
