/* tests/unit/drive_test.c - stor_mkdirs never recreates a vanished drive.
 * A drive directory that disappears at run time (failed disk, unmounted
 * mount point) must not come back as a fresh directory on the parent
 * filesystem when healing or a write asks for a path under it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storaged/store/drive.h"

static char g_top[256];

static bool is_dir(const char *p)
{
    struct stat st;

    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_top, sizeof(g_top), "/tmp/drive_test.XXXXXX");
    return mkdtemp(g_top) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return stor_rmtree(g_top);
}

/* Inside a formatted drive, missing parents are created. */
static void test_mkdirs_inside_formatted_drive(void **state)
{
    char drive[PATH_MAX], sys[PATH_MAX + 16], deep[PATH_MAX + 32];

    (void)state;
    snprintf(drive, sizeof(drive), "%s/d1", g_top);
    assert_int_equal(mkdir(drive, 0755), 0);
    snprintf(sys, sizeof(sys), "%s/%s", drive, STOR_SYS_DIR);
    assert_int_equal(mkdir(sys, 0755), 0);
    snprintf(deep, sizeof(deep), "%s/b/bkt/ab", drive);
    assert_int_equal(stor_mkdirs(deep), 0);
    assert_true(is_dir(deep));
    /* existing path: fine, twice */
    assert_int_equal(stor_mkdirs(deep), 0);
}

/* A drive whose directory vanished is not recreated. */
static void test_mkdirs_refuses_vanished_drive(void **state)
{
    char drive[PATH_MAX], deep[PATH_MAX + 32];

    (void)state;
    snprintf(drive, sizeof(drive), "%s/d2", g_top);
    snprintf(deep, sizeof(deep), "%s/b/bkt/ab", drive);
    assert_int_equal(stor_mkdirs(deep), -ENODEV);
    assert_false(is_dir(drive));
}

/* An empty directory (an unmounted mount point) is not a drive either. */
static void test_mkdirs_refuses_unformatted_dir(void **state)
{
    char drive[PATH_MAX], deep[PATH_MAX + 32], b[PATH_MAX + 8];

    (void)state;
    snprintf(drive, sizeof(drive), "%s/d3", g_top);
    assert_int_equal(mkdir(drive, 0755), 0);
    snprintf(deep, sizeof(deep), "%s/b/bkt/ab", drive);
    assert_int_equal(stor_mkdirs(deep), -ENODEV);
    snprintf(b, sizeof(b), "%s/b", drive);
    assert_false(is_dir(b));
}

/* Formatting creates the system area of an existing drive, never the
 * drive itself. */
static void test_format_write_needs_existing_drive(void **state)
{
    struct stor_format f = {0};
    char drive[PATH_MAX];

    (void)state;
    snprintf(f.deployment, sizeof(f.deployment), "%s",
             "0123456789abcdef0123456789abcdef");
    f.nsets = 1;
    f.set_size = 1;
    f.k = 1;
    f.m = 0;
    snprintf(drive, sizeof(drive), "%s/d4", g_top);
    assert_int_equal(stor_format_write(drive, &f), -ENOENT);
    assert_false(is_dir(drive));
    assert_int_equal(mkdir(drive, 0755), 0);
    assert_int_equal(stor_format_write(drive, &f), 0);
    struct stor_format g;
    assert_int_equal(stor_format_read(drive, &g), 0);
    assert_string_equal(g.deployment, f.deployment);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mkdirs_inside_formatted_drive),
        cmocka_unit_test(test_mkdirs_refuses_vanished_drive),
        cmocka_unit_test(test_mkdirs_refuses_unformatted_dir),
        cmocka_unit_test(test_format_write_needs_existing_drive),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
