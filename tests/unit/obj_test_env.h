/* tests/unit/obj_test_env.h - shared fixture for the object-layer unit tests
 * (obj_store_test.c, obj_fault_test.c): N temp drive directories, a store
 * opened over them with the background threads off and fsync off, and a
 * deterministic byte generator. Include after <cmocka.h>. Test-only: every
 * function is static. */
#ifndef TESTS_UNIT_OBJ_TEST_ENV_H
#define TESTS_UNIT_OBJ_TEST_ENV_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/compiler.h"
#include "storaged/store/drive.h"
#include "storaged/store/object.h"

struct env {
    char root[256];
    char *paths[16]; /* owned */
    size_t n;
    struct stor_store *s;
};

/* xorshift64: the tests' random choices (lost drives, offsets), fixed seed
 * so a failure repeats. */
static uint64_t rng = 88172645463325252ULL;
static CM_UNUSED uint64_t xr(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Fills @p with @n bytes that depend only on @seed. */
static CM_UNUSED void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 2654435761u + 1;

    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

/* (Re)opens the store over e's drives with --ec @k+@m (0/-1: defaults). */
static void env_open(struct env *e, int k, int m)
{
    struct stor_store_opts o = {0};
    char *err = NULL;

    o.drives = (const char *const *)e->paths;
    o.ndrives = e->n;
    o.ec_data = k;
    o.ec_parity = m;
    o.fsync = false;
    assert_int_equal(stor_store_open(&o, &e->s, &err), 0);
    free(err);
}

/* Makes @n drive directories under a new /tmp/@name.XXXXXX and opens the
 * store over them. Free with env_free(). */
static struct env *env_new(const char *name, size_t n, int k, int m)
{
    struct env *e = calloc(1, sizeof(*e));

    assert_non_null(e);
    assert_true(n <= 16);
    snprintf(e->root, sizeof(e->root), "/tmp/%s.XXXXXX", name);
    assert_non_null(mkdtemp(e->root));
    e->n = n;
    for (size_t i = 0; i < n; i++) {
        e->paths[i] = malloc(300);
        assert_non_null(e->paths[i]);
        snprintf(e->paths[i], 300, "%s/d%zu", e->root, i);
        assert_int_equal(mkdir(e->paths[i], 0755), 0);
    }
    setenv("STORAGED_NO_BACKGROUND", "1", 1);
    env_open(e, k, m);
    return e;
}

/* Closes the store and removes every drive directory. */
static void env_free(struct env *e)
{
    stor_store_close(e->s);
    stor_rmtree(e->root);
    for (size_t i = 0; i < e->n; i++)
        free(e->paths[i]);
    free(e);
}

#endif /* TESTS_UNIT_OBJ_TEST_ENV_H */
