/* tests/unit/common_list_test.c - common/list.h: pushes at both ends,
 * unlinks from the middle and the ends, moves to the front, walks both
 * ways from either end, an item on two lists at once, and deleting a node
 * that is on no list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/list.h"

struct item {
    int v;
    struct cm_list a, b; /* on two lists at once */
};

/* Asserts that list @h holds exactly the values @want (n of them), first
 * to last through CM_LIST_NEXT and last to first through CM_LIST_PREV. */
static void expect(struct cm_list *h, const int *want, int n)
{
    struct item *e;
    int i = 0;

    for (e = CM_LIST_FIRST(h, struct item, a); e;
         e = CM_LIST_NEXT(h, e, struct item, a))
        assert_int_equal(e->v, want[i++]);
    assert_int_equal(i, n);
    for (e = CM_LIST_LAST(h, struct item, a); e;
         e = CM_LIST_PREV(h, e, struct item, a))
        assert_int_equal(e->v, want[--i]);
    assert_int_equal(i, 0);
    assert_int_equal(cm_list_empty(h), n == 0);
}

static void test_list(void **state)
{
    struct item it[5];
    struct cm_list h, h2;
    int i;

    (void)state;
    cm_list_init(&h);
    cm_list_init(&h2);
    expect(&h, NULL, 0);
    assert_null(cm_list_first(&h));
    assert_null(CM_LIST_LAST(&h, struct item, a));
    for (i = 0; i < 5; i++) {
        it[i].v = i;
        cm_list_init(&it[i].a);
        cm_list_init(&it[i].b);
    }
    cm_list_push_back(&h, &it[1].a);
    cm_list_push_back(&h, &it[2].a);
    cm_list_push_front(&h, &it[0].a);
    cm_list_push_back(&h, &it[3].a);
    expect(&h, (int[]){0, 1, 2, 3}, 4);
    assert_ptr_equal(CM_LIST_ENTRY(h.next, struct item, a), &it[0]);
    assert_null(CM_LIST_OBJ(cm_list_next(&h, &it[3].a), struct item, a));
    cm_list_push_front(&h2, &it[2].b); /* the second list is separate */
    assert_ptr_equal(CM_LIST_FIRST(&h2, struct item, b), &it[2]);
    cm_list_del(&it[2].a); /* middle */
    expect(&h, (int[]){0, 1, 3}, 3);
    assert_true(cm_list_empty(&it[2].a));
    cm_list_del(&it[2].a); /* on no list: nothing happens */
    cm_list_del(&it[4].a);
    expect(&h, (int[]){0, 1, 3}, 3);
    assert_ptr_equal(CM_LIST_FIRST(&h2, struct item, b), &it[2]);
    cm_list_move_front(&h, &it[3].a); /* the last to the front */
    expect(&h, (int[]){3, 0, 1}, 3);
    cm_list_move_front(&h, &it[3].a); /* already first */
    expect(&h, (int[]){3, 0, 1}, 3);
    cm_list_del(&it[3].a); /* first */
    cm_list_del(&it[1].a); /* last */
    expect(&h, (int[]){0}, 1);
    cm_list_del(&it[0].a);
    expect(&h, NULL, 0);
    cm_list_del(&it[2].b);
    assert_true(cm_list_empty(&h2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
