/* tests/unit/fc_cache_test.c - block cache: owner/waiter protocol, ETag in
 * the identity, LRU eviction under the byte budget, failed blocks leave. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fuse/cache.h"

static char *dupmem(const char *s, size_t n)
{
    char *p = fc_cache_buf_alloc(n);
    assert_non_null(p);
    memcpy(p, s, n);
    return p;
}

static char *zeromem(size_t n)
{
    char *p = fc_cache_buf_alloc(n);
    assert_non_null(p);
    memset(p, 0, n);
    return p;
}

/* Small buffers come from malloc, big ones are their own populated
 * mappings; both hold every byte asked for and free cleanly. */
static void test_buffers(void **state)
{
    size_t sizes[] = {
        0, 1, 4096, FC_CACHE_BIGBUF - 1, FC_CACHE_BIGBUF, (1u << 20) + 17};
    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *p = fc_cache_buf_alloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 0xa5, sizes[i]);
        if (sizes[i] > 0)
            assert_int_equal((unsigned char)p[sizes[i] - 1], 0xa5);
        fc_cache_buf_free(p);
    }
    fc_cache_buf_free(NULL);
}

/* A freed big buffer is handed out again to the next allocation of its
 * size (no new mapping); other sizes get their own. */
static void test_buffers_recycled(void **state)
{
    size_t big = 1u << 20;
    char *a, *b, *c;

    (void)state;
    a = fc_cache_buf_alloc(big);
    assert_non_null(a);
    memset(a, 1, big);
    fc_cache_buf_free(a);
    b = fc_cache_buf_alloc(big);
    assert_ptr_equal(a, b);
    c = fc_cache_buf_alloc(big + 4096);
    assert_non_null(c);
    assert_ptr_not_equal(c, b);
    memset(b, 2, big);
    memset(c, 3, big + 4096);
    fc_cache_buf_free(b);
    fc_cache_buf_free(c);
}

/* A pool full of buffers of one size (64 MiB of 1 MiB ones) still keeps
 * a freed buffer of another size, dropping its oldest, so the new size is
 * recycled from then on. */
static void test_recycle_follows_sizes(void **state)
{
    enum { N = 80 };
    size_t big = 1u << 20, other = (1u << 20) + 8192;
    char *v[N], *x, *y;

    (void)state;
    for (int i = 0; i < N; i++) {
        v[i] = fc_cache_buf_alloc(big);
        assert_non_null(v[i]);
    }
    for (int i = 0; i < N; i++)
        fc_cache_buf_free(v[i]); /* fills the pool (16 are unmapped) */
    x = fc_cache_buf_alloc(other);
    assert_non_null(x);
    memset(x, 4, other);
    fc_cache_buf_free(x); /* kept although the pool was full */
    y = fc_cache_buf_alloc(other);
    assert_ptr_equal(x, y);
    /* the same buffer, not a new zero-filled mapping at the same place */
    assert_int_equal(y[0], 4);
    assert_int_equal(y[other - 1], 4);
    fc_cache_buf_free(y);
    for (int i = 0; i < N; i++) {
        v[i] = fc_cache_buf_alloc(big); /* the remaining old ones, or new */
        assert_non_null(v[i]);
        memset(v[i], 5, big);
    }
    for (int i = 0; i < N; i++)
        fc_cache_buf_free(v[i]);
}

/* Misses drain buffers of other sizes: a pool full of 1 MiB buffers is
 * empty after as many allocations of another size, so a 1 MiB allocation
 * then maps anew (zero-filled) instead of holding stale memory forever. */
static void test_recycle_misses_drain(void **state)
{
    enum { N = 70 };
    size_t big = 1u << 20, other = (1u << 20) + 8192;
    char *v[N], *w[N], *a;

    (void)state;
    for (int i = 0; i < N; i++) {
        v[i] = fc_cache_buf_alloc(big);
        assert_non_null(v[i]);
        memset(v[i], 6, big);
    }
    for (int i = 0; i < N; i++)
        fc_cache_buf_free(v[i]);
    for (int i = 0; i < N; i++) {
        w[i] = fc_cache_buf_alloc(other); /* each a miss: one 1 MiB goes */
        assert_non_null(w[i]);
    }
    a = fc_cache_buf_alloc(big);
    assert_non_null(a);
    assert_int_equal(a[0], 0); /* a new mapping, not a stale buffer */
    fc_cache_buf_free(a);
    for (int i = 0; i < N; i++)
        fc_cache_buf_free(w[i]);
}

/* Medium files come in every size: a freed buffer serves an allocation up
 * to a sixteenth smaller (the same mapping, its old bytes in it), not a
 * larger one, nor one much smaller. */
static void test_recycle_near_size(void **state)
{
    size_t k = 1024;
    char *a, *b, *c;

    (void)state;
    a = fc_cache_buf_alloc(320 * k);
    assert_non_null(a);
    memset(a, 7, 320 * k);
    fc_cache_buf_free(a);
    b = fc_cache_buf_alloc(310 * k);
    assert_ptr_equal(a, b);
    assert_int_equal(b[0], 7);
    memset(b, 8, 310 * k);
    fc_cache_buf_free(b);
    c = fc_cache_buf_alloc(330 * k); /* larger: a new mapping */
    assert_ptr_not_equal(c, a);
    memset(c, 9, 330 * k);
    fc_cache_buf_free(c);
    b = fc_cache_buf_alloc(290 * k); /* 320 KiB is too much slack */
    assert_ptr_not_equal(b, a);
    assert_ptr_not_equal(b, c);
    memset(b, 10, 290 * k);
    fc_cache_buf_free(b);
}

/* Fills block @i of "h" with @len bytes and notes @served of them replied
 * into the page cache while it is referenced. */
static void fill_handed(struct fc_cache *c, uint64_t i, size_t len,
                        size_t served)
{
    bool owner;
    struct fc_block *b = fc_cache_acquire(c, "h", "e", i, true, &owner);

    assert_true(owner);
    fc_cache_fill(c, b, zeromem(len), len, 0);
    if (served > 0)
        fc_cache_handed(c, b, served);
    fc_cache_release(c, b);
}

/* Blocks handed whole to the page cache leave first, oldest first, down to
 * half of their share (a sixteenth of the budget) once over it; a block
 * replied only in part stays; two partial replies that cover a block hand
 * it. */
static void test_handed_leave_first(void **state)
{
    struct fc_cache *c;
    size_t bytes, blocks, q = 256 * 1024;

    (void)state;
    /* 16 MiB: handed share 1 MiB, four of these blocks */
    assert_int_equal(fc_cache_create(16u << 20, &c), 0);
    fill_handed(c, 100, q, 100 * 1024); /* read in part: never handed */
    for (uint64_t i = 0; i < 5; i++)
        fill_handed(c, i, q, q);
    /* the fifth went over: 0, 1, 2 left, down to half the share */
    for (uint64_t i = 0; i < 3; i++)
        assert_false(fc_cache_contains(c, "h", "e", i));
    assert_true(fc_cache_contains(c, "h", "e", 3));
    assert_true(fc_cache_contains(c, "h", "e", 4));
    assert_true(fc_cache_contains(c, "h", "e", 100));
    /* in two halves, while referenced */
    {
        bool owner;
        struct fc_block *b = fc_cache_acquire(c, "h", "e", 5, true, &owner);
        assert_true(owner);
        fc_cache_fill(c, b, zeromem(q), q, 0);
        fc_cache_handed(c, b, q / 2);
        fc_cache_handed(c, b, q / 2);
        fc_cache_release(c, b);
    }
    fill_handed(c, 6, q, q);
    fill_handed(c, 7, q, q); /* 3..7: over again, 3, 4, 5 leave */
    for (uint64_t i = 3; i < 6; i++)
        assert_false(fc_cache_contains(c, "h", "e", i));
    assert_true(fc_cache_contains(c, "h", "e", 6));
    assert_true(fc_cache_contains(c, "h", "e", 7));
    assert_true(fc_cache_contains(c, "h", "e", 100));
    fc_cache_usage(c, &bytes, &blocks);
    assert_int_equal(blocks, 3);
    assert_int_equal(bytes, 3 * q);
    fc_cache_destroy(c);
}

static void test_owner_then_hit(void **state)
{
    struct fc_cache *c;
    struct fc_block *b, *b2;
    bool owner;

    (void)state;
    assert_int_equal(fc_cache_create(1 << 20, &c), 0);
    b = fc_cache_acquire(c, "k", "\"e1\"", 0, true, &owner);
    assert_non_null(b);
    assert_true(owner);
    fc_cache_fill(c, b, dupmem("abc", 3), 3, 0);
    fc_cache_release(c, b);
    b = fc_cache_acquire(c, "k", "\"e1\"", 0, true, &owner);
    assert_false(owner);
    assert_int_equal(b->state, FC_BLOCK_READY);
    assert_memory_equal(b->data, "abc", 3);
    /* another version of the object is another block */
    b2 = fc_cache_acquire(c, "k", "\"e2\"", 0, true, &owner);
    assert_true(owner);
    fc_cache_fill(c, b2, NULL, 0, -EIO);
    fc_cache_release(c, b2);
    assert_false(fc_cache_contains(c, "k", "\"e2\"", 0));
    fc_cache_release(c, b);
    assert_null(fc_cache_claim(c, "k", "\"e1\"", 0)); /* present */
    fc_cache_destroy(c);
}

/* fc_cache_rekey moves READY blocks of one ETag to another (a copy onto
 * itself made by the mount: the same bytes): held ones too, never a LOADING
 * one nor over a block already there; the old identity is then free. */
static void test_rekey(void **state)
{
    struct fc_cache *c;
    struct fc_block *b0, *b1, *b2, *t2, *x;
    bool owner;

    (void)state;
    assert_int_equal(fc_cache_create(1 << 20, &c), 0);
    b0 = fc_cache_acquire(c, "k", "\"e1\"", 0, true, &owner);
    fc_cache_fill(c, b0, dupmem("abc", 3), 3, 0);
    fc_cache_release(c, b0);
    b1 = fc_cache_acquire(c, "k", "\"e1\"", 1, true, &owner); /* held */
    fc_cache_fill(c, b1, dupmem("def", 3), 3, 0);
    b2 = fc_cache_acquire(c, "k", "\"e1\"", 2, true, &owner); /* LOADING */
    t2 = fc_cache_acquire(c, "k", "\"e2\"", 2, true, &owner);
    fc_cache_fill(c, t2, dupmem("ghi", 3), 3, 0);
    fc_cache_release(c, t2);
    /* block 3 is absent; another key's block 0 stays */
    x = fc_cache_acquire(c, "j", "\"e1\"", 0, true, &owner);
    fc_cache_fill(c, x, dupmem("xyz", 3), 3, 0);
    fc_cache_release(c, x);

    assert_int_equal(fc_cache_rekey(c, "k", "\"e1\"", "\"e2\"", 4), 2);
    assert_false(fc_cache_contains(c, "k", "\"e1\"", 0));
    assert_false(fc_cache_contains(c, "k", "\"e1\"", 1));
    assert_true(fc_cache_contains(c, "k", "\"e1\"", 2));
    assert_true(fc_cache_contains(c, "j", "\"e1\"", 0));
    x = fc_cache_acquire(c, "k", "\"e2\"", 0, true, &owner);
    assert_false(owner);
    assert_ptr_equal(x, b0);
    assert_memory_equal(x->data, "abc", 3);
    fc_cache_release(c, x);
    x = fc_cache_acquire(c, "k", "\"e2\"", 1, true, &owner);
    assert_false(owner);
    assert_ptr_equal(x, b1);
    fc_cache_release(c, x);
    x = fc_cache_acquire(c, "k", "\"e2\"", 2, true, &owner);
    assert_false(owner);
    assert_memory_equal(x->data, "ghi", 3); /* the one already there */
    fc_cache_release(c, x);
    fc_cache_release(c, b1);
    fc_cache_fill(c, b2, dupmem("old", 3), 3, 0);
    fc_cache_release(c, b2);
    fc_cache_destroy(c);
}

static void test_eviction(void **state)
{
    struct fc_cache *c;
    size_t bytes, blocks;
    bool owner;

    (void)state;
    assert_int_equal(fc_cache_create(3000, &c), 0);
    for (uint64_t i = 0; i < 10; i++) {
        struct fc_block *b = fc_cache_acquire(c, "k", "e", i, true, &owner);
        assert_true(owner);
        fc_cache_fill(c, b, zeromem(1000), 1000, 0);
        fc_cache_release(c, b);
    }
    fc_cache_usage(c, &bytes, &blocks);
    assert_true(bytes <= 3000);
    assert_int_equal(blocks, 3);
    assert_true(fc_cache_contains(c, "k", "e", 9));
    assert_false(fc_cache_contains(c, "k", "e", 0));
    fc_cache_destroy(c);
}

struct waiter {
    struct fc_cache *c;
    char seen[4];
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    bool owner;
    struct fc_block *b = fc_cache_acquire(w->c, "k", "e", 7, true, &owner);

    if (!owner && b->state == FC_BLOCK_READY)
        memcpy(w->seen, b->data, 4);
    fc_cache_release(w->c, b);
    return NULL;
}

static void test_waiter_sees_fill(void **state)
{
    struct waiter w = {0};
    struct fc_block *b;
    pthread_t th;
    bool owner;

    (void)state;
    assert_int_equal(fc_cache_create(1 << 20, &w.c), 0);
    b = fc_cache_claim(w.c, "k", "e", 7);
    assert_non_null(b);
    assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
    usleep(20000);
    fc_cache_fill(w.c, b, dupmem("wxyz", 4), 4, 0);
    fc_cache_release(w.c, b);
    pthread_join(th, NULL);
    assert_memory_equal(w.seen, "wxyz", 4);
    b = fc_cache_acquire(w.c, "k", "e", 7, false, &owner);
    assert_false(owner);
    fc_cache_release(w.c, b);
    fc_cache_destroy(w.c);
}

/* Readahead accounting: a marked block's bytes count as issued when it
 * turns READY, as used at the first acquire that gets it READY (once, also
 * for a reader that waited on it), and as wasted when evicted before any
 * acquire; unmarked blocks and failed fills count nowhere, and the
 * directory-prefetch contract of fc_cache_note_read is untouched. */
static void test_readahead_accounting(void **state)
{
    struct fc_cache *c;
    struct fc_block *r[3], *b, *f;
    struct waiter w = {0};
    uint64_t issued, used, wasted;
    pthread_t th;
    bool owner;

    (void)state;
    assert_int_equal(fc_cache_create(3000, &c), 0);
    for (uint64_t i = 0; i < 3; i++)
        r[i] = fc_cache_claim(c, "k", "e", i);
    f = fc_cache_claim(c, "k", "e", 3);
    fc_cache_mark_readahead(c, r, 3);
    fc_cache_mark_readahead(c, &f, 1);
    fc_cache_fill(c, f, NULL, 0, -EIO); /* failed: counts nowhere */
    fc_cache_release(c, f);
    for (int i = 0; i < 3; i++) {
        fc_cache_fill(c, r[i], zeromem(1000), 1000, 0);
        fc_cache_release(c, r[i]);
    }
    fc_cache_readahead_stats(c, &issued, &used, &wasted);
    assert_int_equal(issued, 3000);
    assert_int_equal(used + wasted, 0);
    /* read twice: used once; a reader's note_read still says "first
     * read, not prefetched" (readahead is not directory prefetch) */
    for (int k = 0; k < 2; k++) {
        b = fc_cache_acquire(c, "k", "e", 1, true, &owner);
        assert_false(owner);
        if (k == 0)
            assert_int_equal(fc_cache_note_read(c, b), 1);
        fc_cache_release(c, b);
    }
    fc_cache_readahead_stats(c, &issued, &used, &wasted);
    assert_int_equal(used, 1000);
    /* a reader's own block pushes the coldest unread one (0) out */
    b = fc_cache_acquire(c, "k", "e", 9, true, &owner);
    assert_true(owner);
    fc_cache_fill(c, b, zeromem(1000), 1000, 0);
    fc_cache_release(c, b);
    assert_false(fc_cache_contains(c, "k", "e", 0));
    fc_cache_readahead_stats(c, &issued, &used, &wasted);
    assert_int_equal(issued, 3000);
    assert_int_equal(used, 1000);
    assert_int_equal(wasted, 1000);
    assert_int_equal(fc_cache_prefetch_wasted(c), 0);
    /* a reader waiting on a LOADING readahead block uses it */
    w.c = c;
    b = fc_cache_claim(c, "k", "e", 7);
    fc_cache_mark_readahead(c, &b, 1);
    assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
    usleep(20000);
    fc_cache_fill(c, b, dupmem("wxyz", 4), 4, 0);
    fc_cache_release(c, b);
    pthread_join(th, NULL);
    assert_memory_equal(w.seen, "wxyz", 4);
    fc_cache_readahead_stats(c, &issued, &used, &wasted);
    assert_int_equal(issued, 3004);
    assert_int_equal(used, 1004);
    assert_int_equal(wasted, 2000); /* its fill pushed out unread 2 */
    assert_int_equal(used + wasted, issued);
    fc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_buffers_recycled),
        cmocka_unit_test(test_recycle_follows_sizes),
        cmocka_unit_test(test_recycle_misses_drain),
        cmocka_unit_test(test_recycle_near_size),
        cmocka_unit_test(test_handed_leave_first),
        cmocka_unit_test(test_owner_then_hit),
        cmocka_unit_test(test_rekey),
        cmocka_unit_test(test_eviction),
        cmocka_unit_test(test_waiter_sees_fill),
        cmocka_unit_test(test_readahead_accounting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
