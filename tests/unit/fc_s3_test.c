/* tests/unit/fc_s3_test.c - the pure parts of the S3 client and the
 * credential sources: errno mapping, retry policy, backoff bounds,
 * x-amz-meta-* attributes, passwd_file lines and AWS profiles. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fuse/creds.h"
#include "fuse/s3.h"

static void test_status_errno(void **state)
{
    (void)state;
    assert_int_equal(fc_s3_status_errno(200), 0);
    assert_int_equal(fc_s3_status_errno(206), 0);
    assert_int_equal(fc_s3_status_errno(404), ENOENT);
    assert_int_equal(fc_s3_status_errno(403), EACCES);
    assert_int_equal(fc_s3_status_errno(412), ESTALE);
    assert_int_equal(fc_s3_status_errno(500), EIO);
    assert_true(fc_s3_status_is_transient(503));
    assert_true(fc_s3_status_is_transient(500));
    assert_true(fc_s3_status_is_transient(429));
    assert_false(fc_s3_status_is_transient(404));
    assert_false(fc_s3_status_is_transient(403));
    assert_false(fc_s3_status_is_transient(412));
}

static void test_etag_equal(void **state)
{
    (void)state;
    assert_true(fc_s3_etag_equal("\"abc\"", "\"abc\""));
    assert_true(fc_s3_etag_equal("\"abc\"", "abc"));
    assert_true(fc_s3_etag_equal("W/\"abc-3\"", "\"abc-3\""));
    assert_false(fc_s3_etag_equal("\"abc\"", "\"abd\""));
    assert_false(fc_s3_etag_equal("\"abc\"", "\"abcd\""));
    assert_false(fc_s3_etag_equal("", "\"a\""));
}

static void test_backoff(void **state)
{
    (void)state;
    for (unsigned a = 0; a < 20; a++) {
        unsigned lo = 1000000, hi = 0;
        for (uint32_t r = 0; r < 5000; r += 7) {
            unsigned d = fc_s3_backoff_ms(a, r * 2654435761u);
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
        }
        unsigned cap = a >= 6 ? 2000 : (50u << a < 2000 ? 50u << a : 2000);
        assert_true(lo >= cap / 2); /* equal jitter: at least half */
        assert_true(hi <= cap);     /* never above the cap */
        assert_true(hi > lo);       /* and actually jittered */
    }
}

static void meta1(struct fc_s3_meta *m, const char *n, const char *v)
{
    fc_s3_meta_parse(m, n, strlen(n), v, strlen(v));
}

static void test_meta_parse(void **state)
{
    struct fc_s3_meta m;

    (void)state;
    memset(&m, 0, sizeof(m));
    meta1(&m, "Mode", "33188");
    meta1(&m, "uid", "1000");
    meta1(&m, "GID", "4294967294");
    meta1(&m, "mtime", "1700000000.5");
    assert_int_equal(m.has,
                     FC_META_MODE | FC_META_UID | FC_META_GID | FC_META_MTIME);
    assert_int_equal(m.mode, 0100644);
    assert_int_equal(m.uid, 1000);
    assert_int_equal(m.gid, 4294967294u);
    assert_int_equal(m.mtime, 1700000000);
    assert_int_equal(m.mtime_ns, 500000000);
    /* nanoseconds exactly; more digits are cut, not rounded */
    meta1(&m, "mtime", "12.1234567899");
    assert_int_equal(m.mtime, 12);
    assert_int_equal(m.mtime_ns, 123456789);
    meta1(&m, "mtime", "7");
    assert_int_equal(m.mtime_ns, 0);
    /* a directory marker's flag: "0" or "1", nothing else */
    memset(&m, 0, sizeof(m));
    meta1(&m, "Ecfs-Attrs", "1");
    assert_int_equal(m.has, FC_META_DIRATTRS);
    assert_int_equal(m.dirattrs, 1);
    meta1(&m, "ecfs-attrs", "0");
    assert_int_equal(m.dirattrs, 0);
    memset(&m, 0, sizeof(m));
    meta1(&m, "ecfs-attrs", "2");
    meta1(&m, "ecfs-attrs", "10");
    meta1(&m, "ecfs-attrs", "");
    meta1(&m, "ecfs-attr", "1");
    assert_int_equal(m.has, 0);
    /* malformed values change nothing */
    memset(&m, 0, sizeof(m));
    meta1(&m, "mode", "-1");
    meta1(&m, "mode", "0x1ff");
    meta1(&m, "uid", "");
    meta1(&m, "uid", "4294967295"); /* (uid_t)-1 means "no change" */
    meta1(&m, "gid", "99999999999999999999");
    meta1(&m, "mtime", "1.");
    meta1(&m, "mtime", ".5");
    meta1(&m, "mtime", "1.2x");
    meta1(&m, "mtime", "1.1234000000.1\"36789"); /* junk past ns */
    meta1(&m, "mtime", "99999999999999999999");
    meta1(&m, "mtim", "5");
    meta1(&m, "mtimes", "5");
    assert_int_equal(m.has, 0);
}

static void test_passwd_lines(void **state)
{
    struct fc_creds c = {0};

    (void)state;
    assert_int_equal(fc_creds_parse_passwd_line("AK:SK\n", "b", &c), 1);
    assert_string_equal(c.access_key, "AK");
    assert_string_equal(c.secret_key, "SK");
    assert_int_equal(fc_creds_parse_passwd_line("other:A:S", "b", &c), 0);
    assert_int_equal(fc_creds_parse_passwd_line("b:A2:S2", "b", &c), 1);
    assert_string_equal(c.access_key, "A2");
    assert_int_equal(fc_creds_parse_passwd_line("# x:y", "b", &c), 0);
    assert_int_equal(fc_creds_parse_passwd_line("   ", "b", &c), 0);
    assert_int_equal(fc_creds_parse_passwd_line("nocolon", "b", &c), -EINVAL);
    assert_int_equal(fc_creds_parse_passwd_line("b::S", "b", &c), -EINVAL);
    fc_creds_fini(&c);
}

static void test_profile(void **state)
{
    char path[] = "/tmp/fc_s3_test_credsXXXXXX";
    struct fc_creds c = {0};
    int fd = mkstemp(path);
    FILE *f;

    (void)state;
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fputs("[default]\naws_access_key_id=D\naws_secret_access_key = DS\n"
          "[profile train]\n aws_access_key_id = T \n"
          "aws_secret_access_key=TS\n[half]\naws_access_key_id=H\n",
          f);
    fclose(f);
    assert_int_equal(fc_creds_read_profile(path, "default", &c), 0);
    assert_string_equal(c.access_key, "D");
    assert_string_equal(c.secret_key, "DS");
    assert_int_equal(fc_creds_read_profile(path, "train", &c), 0);
    assert_string_equal(c.access_key, "T");
    assert_string_equal(c.secret_key, "TS");
    assert_int_equal(fc_creds_read_profile(path, "half", &c), -EINVAL);
    assert_int_equal(fc_creds_read_profile(path, "none", &c), -ENOENT);
    assert_int_equal(fc_creds_read_profile("/nonexistent/x", "a", &c), -ENOENT);
    fc_creds_fini(&c);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_errno), cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_etag_equal),   cmocka_unit_test(test_meta_parse),
        cmocka_unit_test(test_passwd_lines), cmocka_unit_test(test_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
