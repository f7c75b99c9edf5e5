/* tests/unit/fc_creds_test.c - credential sources of the mount: profiles
 * with and without a session token, the environment (AWS_SESSION_TOKEN
 * rides with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY), passwd_file lines.
 * Real files in a temporary directory. */
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

/* Writes @text to a new temporary file; returns its path (static). */
static const char *write_tmp(const char *text)
{
    static char path[64];
    FILE *f;
    int fd;

    snprintf(path, sizeof(path), "/tmp/fc_creds_testXXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_profile_token(void **state)
{
    struct fc_creds c = {0};
    char big[4000];
    char *text;
    const char *p;

    (void)state;
    memset(big, 'T', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_true(asprintf(&text,
                         "[default]\naws_access_key_id = AK\n"
                         "aws_secret_access_key = SK\n"
                         "[profile sts]\naws_access_key_id=ASIA1\n"
                         "aws_secret_access_key=S2\n"
                         "aws_session_token = %s\n"
                         "[old]\naws_access_key_id=A3\n"
                         "aws_secret_access_key=S3\n"
                         "aws_security_token=legacy\n",
                         big) > 0);
    p = write_tmp(text);
    free(text);

    assert_int_equal(fc_creds_read_profile(p, "default", &c), 0);
    assert_string_equal(c.access_key, "AK");
    assert_string_equal(c.secret_key, "SK");
    assert_null(c.session_token);
    fc_creds_fini(&c);

    /* a ~4 KB token (longer than any old line buffer) is read whole */
    assert_int_equal(fc_creds_read_profile(p, "sts", &c), 0);
    assert_string_equal(c.access_key, "ASIA1");
    assert_non_null(c.session_token);
    assert_string_equal(c.session_token, big);
    fc_creds_fini(&c);
    assert_null(c.session_token);

    assert_int_equal(fc_creds_read_profile(p, "old", &c), 0);
    assert_string_equal(c.session_token, "legacy");
    fc_creds_fini(&c);

    assert_int_equal(fc_creds_read_profile(p, "nope", &c), -ENOENT);
    unlink(p);
}

static void test_env_token(void **state)
{
    struct fc_creds c = {0};

    (void)state;
    setenv("AWS_ACCESS_KEY_ID", "EAK", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "ESK", 1);
    setenv("AWS_SESSION_TOKEN", "ETOK", 1);
    assert_int_equal(fc_creds_load(NULL, NULL, "b", &c), 0);
    assert_string_equal(c.access_key, "EAK");
    assert_string_equal(c.session_token, "ETOK");
    fc_creds_fini(&c);

    /* an empty token is no token */
    setenv("AWS_SESSION_TOKEN", "", 1);
    assert_int_equal(fc_creds_load(NULL, NULL, "b", &c), 0);
    assert_null(c.session_token);
    fc_creds_fini(&c);
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
}

static void test_passwd_line(void **state)
{
    struct fc_creds c = {0};

    (void)state;
    assert_int_equal(fc_creds_parse_passwd_line("A:S", "b", &c), 1);
    assert_string_equal(c.access_key, "A");
    assert_null(c.session_token);
    assert_int_equal(fc_creds_parse_passwd_line("other:A2:S2", "b", &c), 0);
    assert_int_equal(fc_creds_parse_passwd_line("b:A3:S3", "b", &c), 1);
    assert_string_equal(c.access_key, "A3");
    assert_int_equal(fc_creds_parse_passwd_line("nocolon", "b", &c), -EINVAL);
    assert_int_equal(fc_creds_parse_passwd_line("# c", "b", &c), 0);
    fc_creds_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_token),
        cmocka_unit_test(test_env_token),
        cmocka_unit_test(test_passwd_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
