/* tests/unit/fc_inode_test.c - inode table: numbers, lookup counting,
 * forget frees at zero, the root is never freed, numbers are not reused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fuse/inode.h"

static void test_lookup_forget(void **state)
{
    struct fc_itab *t;
    struct fc_inode *a, *b, *a2;
    struct fc_attr at = {.is_dir = false, .size = 42};
    struct fc_attr got;
    double when;
    fuse_ino_t ia;

    (void)state;
    assert_int_equal(fc_itab_create("pre/", &t), 0);
    assert_int_equal(fc_itab_count(t), 1);
    assert_non_null(fc_inode_peek(t, FUSE_ROOT_ID));
    assert_string_equal(fc_inode_peek(t, FUSE_ROOT_ID)->key, "pre/");

    a = fc_inode_lookup(t, "pre/a", &at, 5.0);
    assert_non_null(a);
    ia = a->ino;
    assert_true(ia != FUSE_ROOT_ID);
    a2 = fc_inode_lookup(t, "pre/a", NULL, 0);
    assert_ptr_equal(a, a2); /* same key, same inode, two lookups */
    assert_true(a->nlookup == 2);
    b = fc_inode_lookup(t, "pre/b/", NULL, 0);
    assert_true(b->ino != ia);
    assert_int_equal(fc_itab_count(t), 3);

    assert_true(fc_itab_cached_attr(t, "pre/a", &got, &when));
    assert_true(got.size == 42);
    assert_true(when == 5.0);
    assert_false(fc_itab_cached_attr(t, "pre/zz", &got, &when));

    fc_inode_forget(t, ia, 1);
    assert_ptr_equal(fc_inode_peek(t, ia), a); /* one lookup left */
    fc_inode_forget(t, ia, 1);
    assert_null(fc_inode_peek(t, ia));
    assert_int_equal(fc_itab_count(t), 2);

    /* a new inode for the same key gets a new number */
    a = fc_inode_lookup(t, "pre/a", NULL, 0);
    assert_true(a->ino != ia);

    /* forgetting the root or an unknown number is harmless */
    fc_inode_forget(t, FUSE_ROOT_ID, 10);
    fc_inode_forget(t, 999999, 1);
    assert_non_null(fc_inode_peek(t, FUSE_ROOT_ID));

    /* keep_cache follows the ETag; one version in the page cache at a
     * time: an open of another version while it is in use is direct */
    {
        bool keep, direct;
        fc_inode_open(t, a, "\"e1\"", &keep, &direct);
        assert_false(keep);
        assert_false(direct);
        fc_inode_close(t, a, direct);
        fc_inode_open(t, a, "\"e1\"", &keep, &direct); /* e1 open */
        assert_true(keep);
        assert_false(direct);
        fc_inode_open(t, a, "\"e1\"", &keep, &direct); /* 2x e1 open */
        assert_true(keep);
        assert_false(direct);
        fc_inode_open(t, a, "\"e2\"", &keep, &direct); /* while e1 open */
        assert_false(keep);
        assert_true(direct);
        fc_inode_close(t, a, true);
        fc_inode_open(t, a, "", &keep, &direct); /* unknown: never shares */
        assert_true(direct);
        fc_inode_close(t, a, true);
        fc_inode_close(t, a, false);
        fc_inode_close(t, a, false);
        /* e1 closed: e2 takes the page cache, dropping e1's pages */
        fc_inode_open(t, a, "\"e2\"", &keep, &direct);
        assert_false(keep);
        assert_false(direct);
        fc_inode_open(t, a, "\"e2\"", &keep, &direct);
        assert_true(keep);
        assert_false(direct);
        fc_inode_close(t, a, false);
        fc_inode_close(t, a, false);
        fc_inode_open(t, a, "", &keep, &direct); /* alone: cached, not kept */
        assert_false(keep);
        assert_false(direct);
        fc_inode_open(t, a, "", &keep, &direct);
        assert_true(direct);
        fc_inode_close(t, a, true);
        fc_inode_close(t, a, false);
    }
    fc_itab_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_forget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
