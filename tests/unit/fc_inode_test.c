/* tests/unit/fc_inode_test.c - inode table: numbers, lookup counting,
 * forget frees at zero, the root is never freed, numbers are not reused;
 * the compact inode: hash tables through growth, renames, ETags inline and
 * on the heap, and its size. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* Many inodes: both hash tables grow (IHASH_INIT is 1024) and still find
 * every inode by number and by key, forgets of half of them leave the
 * rest, a directory rename rekeys its subtree; short and long ETags. */
static void test_many_and_rename(void **state)
{
    enum { N = 20000 };
    struct fc_itab *t;
    static fuse_ino_t ino[N];
    char key[64], etag[FC_ETAG_MAX];
    struct fc_attr a = {.size = 7}, got;
    double when;

    (void)state;
    assert_int_equal(fc_itab_create("", &t), 0);
    for (int i = 0; i < N; i++) {
        struct fc_inode *in;
        snprintf(key, sizeof(key), "d%d/f%d", i % 7, i);
        /* every third ETag is longer than FC_IETAG_IN (heap) */
        if (i % 3 == 0)
            snprintf(a.etag, sizeof(a.etag),
                     "\"%064d-long-etag-that-does-not-fit-inline\"", i);
        else
            snprintf(a.etag, sizeof(a.etag), "\"%032x\"", i);
        a.size = (uint64_t)i;
        in = fc_inode_lookup(t, key, &a, 1.0);
        assert_non_null(in);
        ino[i] = in->ino;
    }
    assert_int_equal(fc_itab_count(t), N + 1);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "d%d/f%d", i % 7, i);
        assert_non_null(fc_inode_peek(t, ino[i]));
        assert_string_equal(fc_inode_peek(t, ino[i])->key, key);
        assert_true(fc_itab_cached_attr(t, key, &got, &when));
        assert_true(got.size == (uint64_t)i);
        if (i % 3 == 0)
            snprintf(etag, sizeof(etag),
                     "\"%064d-long-etag-that-does-not-fit-inline\"", i);
        else
            snprintf(etag, sizeof(etag), "\"%032x\"", i);
        assert_string_equal(got.etag, etag);
    }
    /* a short ETag replacing a long one, and back */
    snprintf(a.etag, sizeof(a.etag), "\"short\"");
    fc_inode_set_attr(t, fc_inode_peek(t, ino[0]), &a, 2.0);
    fc_inode_get_attr(t, fc_inode_peek(t, ino[0]), &got, &when);
    assert_string_equal(got.etag, "\"short\"");
    assert_true(when == 2.0);
    for (int i = 0; i < N; i += 2)
        fc_inode_forget(t, ino[i], 1);
    assert_int_equal(fc_itab_count(t), N / 2 + 1);
    for (int i = 0; i < N; i++)
        assert_true((fc_inode_peek(t, ino[i]) != NULL) == (i % 2 == 1));
    /* rename d3/ to e/: every live inode under it is found by its new key
     * and the old keys stay readable through the old pointers */
    {
        struct fc_inode *in = fc_inode_peek(t, ino[3]);
        const char *old = in->key;
        assert_int_equal(fc_itab_rename(t, "d3/", "e/"), 0);
        assert_string_equal(old, "d3/f3");
        assert_string_equal(in->key, "e/f3");
        assert_int_equal(fc_itab_rename(t, "e/f3", "e/g3"), 0);
        assert_string_equal(in->key, "e/g3");
        assert_string_equal(old, "d3/f3");
    }
    for (int i = 1; i < N; i += 2) {
        snprintf(key, sizeof(key), "d%d/f%d", i % 7, i);
        assert_true(fc_itab_cached_attr(t, key, &got, &when) == (i % 7 != 3));
        if (i % 7 == 3 && i != 3) {
            snprintf(key, sizeof(key), "e/f%d", i);
            assert_true(fc_itab_cached_attr(t, key, &got, &when));
            assert_string_equal(fc_inode_peek(t, ino[i])->key, key);
        }
    }
    assert_true(fc_itab_cached_attr(t, "e/g3", &got, &when));
    fc_itab_unhash(t, "e/g3");
    assert_false(fc_itab_cached_attr(t, "e/g3", &got, &when));
    /* the reader state of handle-less reads is made once */
    {
        struct fc_inode *in = fc_inode_peek(t, ino[1]);
        struct fc_rstate *rs = fc_inode_rstate(t, in);
        assert_non_null(rs);
        assert_ptr_equal(fc_inode_rstate(t, in), rs);
    }
    fc_itab_destroy(t); /* frees the renamed and unhashed ones too */
}

/* Stored attributes a listing cannot show (meta_unknown): a listing's
 * attributes mark them unknown, a HEAD makes them known (with or without
 * metadata), and a later listing of the same version keeps that; a new
 * version is unknown again. */
static void test_meta_unknown(void **state)
{
    struct fc_itab *t;
    struct fc_inode *in;
    struct fc_attr listed = {.size = 1, .etag = "\"e1\"", .meta_unknown = 1};
    struct fc_attr head = {.size = 1, .etag = "\"e1\""};
    struct fc_attr got;

    (void)state;
    assert_int_equal(fc_itab_create("", &t), 0);
    in = fc_inode_lookup(t, "f", &listed, 1.0);
    assert_true(in->meta_unknown);
    fc_inode_get_attr(t, in, &got, NULL);
    assert_true(got.meta_unknown);
    fc_inode_set_attr(t, in, &head, 2.0); /* a HEAD: no metadata */
    assert_false(in->meta_unknown);
    in = fc_inode_lookup(t, "f", &listed, 3.0);
    assert_false(in->meta_unknown); /* same version: known to have none */
    head.meta.has = FC_META_MODE;
    head.meta.mode = 0100600;
    fc_inode_set_attr(t, in, &head, 4.0);
    in = fc_inode_lookup(t, "f", &listed, 5.0);
    fc_inode_get_attr(t, in, &got, NULL);
    assert_false(got.meta_unknown);
    assert_true(got.meta.has == FC_META_MODE && got.meta.mode == 0100600);
    snprintf(listed.etag, sizeof(listed.etag), "\"e2\"");
    in = fc_inode_lookup(t, "f", &listed, 6.0); /* another version */
    fc_inode_get_attr(t, in, &got, NULL);
    assert_true(got.meta_unknown && got.meta.has == 0);
    fc_itab_destroy(t);
}

/* The per-inode bytes fuse/README.md ("Memory") documents: the struct
 * without its key stays within 200 bytes (it was about 570). */
static void test_inode_size(void **state)
{
    (void)state;
    assert_true(sizeof(struct fc_inode) <= 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_forget),
        cmocka_unit_test(test_many_and_rename),
        cmocka_unit_test(test_inode_size),
        cmocka_unit_test(test_meta_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
