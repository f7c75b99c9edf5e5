/* tests/unit/common_log_test.c - cm_log: level parsing, filtering without
 * evaluating arguments, the line format, truncation, errno preservation,
 * and whole lines under concurrent writers. stderr is redirected to a
 * temporary file for each test. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"

static int saved_stderr = -1;
static char tmp_path[] = "/tmp/cm_log_test.XXXXXX";

/* Points fd 2 at a fresh O_APPEND temp file. */
static int capture_start(void **state)
{
    int fd;

    (void)state;
    memcpy(tmp_path, "/tmp/cm_log_test.XXXXXX", sizeof(tmp_path));
    fd = mkstemp(tmp_path);
    if (fd < 0)
        return -1;
    close(fd);
    fd = open(tmp_path, O_WRONLY | O_APPEND);
    if (fd < 0)
        return -1;
    saved_stderr = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    return 0;
}

/* Restores fd 2 and removes the temp file. */
static int capture_stop(void **state)
{
    (void)state;
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    unlink(tmp_path);
    cm_log_init("test", CM_LOG_INFO);
    return 0;
}

/* Returns everything logged so far (caller frees). */
static char *captured(size_t *len)
{
    FILE *f = fopen(tmp_path, "rb");
    char *buf;
    long n;

    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

static void test_parse_level(void **state)
{
    (void)state;
    assert_int_equal(cm_log_parse_level("debug"), CM_LOG_DEBUG);
    assert_int_equal(cm_log_parse_level("INFO"), CM_LOG_INFO);
    assert_int_equal(cm_log_parse_level("warn"), CM_LOG_WARN);
    assert_int_equal(cm_log_parse_level("warning"), CM_LOG_WARN);
    assert_int_equal(cm_log_parse_level("Error"), CM_LOG_ERROR);
    assert_int_equal(cm_log_parse_level("off"), CM_LOG_OFF);
    assert_int_equal(cm_log_parse_level(""), -EINVAL);
    assert_int_equal(cm_log_parse_level("verbose"), -EINVAL);
    assert_int_equal(cm_log_parse_level("info "), -EINVAL);
    assert_int_equal(cm_log_parse_level(NULL), -EINVAL);
}

static int evaluated;
static int side_effect(void)
{
    evaluated++;
    return 7;
}

static void test_format_and_filter(void **state)
{
    regex_t re;
    char *out;

    (void)state;
    cm_log_init("storaged", CM_LOG_WARN);
    evaluated = 0;
    cm_log(CM_LOG_INFO, 0, "dropped %d", side_effect());
    assert_int_equal(evaluated, 0); /* filtered calls evaluate nothing */
    errno = EAGAIN;
    cm_log(CM_LOG_WARN, ENOENT, "req=%d open %s", side_effect(), "x");
    assert_int_equal(errno, EAGAIN); /* errno preserved */
    cm_log(CM_LOG_ERROR, -EIO, "negative errno too");
    cm_log(CM_LOG_ERROR, 0, "no errno");
    assert_int_equal(evaluated, 1);
    out = captured(NULL);
    assert_int_equal(
        regcomp(
            &re,
            "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"
            " WARN storaged req=7 open x: No such file or directory\n"
            "[0-9T:.Z-]{24} ERROR storaged negative errno too: "
            "Input/output error\n"
            "[0-9T:.Z-]{24} ERROR storaged no errno\n$",
            REG_EXTENDED),
        0);
    if (regexec(&re, out, 0, NULL, 0) != 0)
        fail_msg("unexpected log output:\n%s", out);
    regfree(&re);
    free(out);

    cm_log_init("storaged", CM_LOG_OFF);
    cm_log(CM_LOG_ERROR, 0, "silenced");
    cm_log_write(CM_LOG_OFF, 0, "never a level");
    out = captured(NULL);
    assert_null(strstr(out, "silenced"));
    assert_null(strstr(out, "never"));
    free(out);
}

static void test_truncation(void **state)
{
    char *big = malloc(10000), *out;
    size_t len;

    (void)state;
    assert_non_null(big);
    memset(big, 'x', 9999);
    big[9999] = '\0';
    cm_log_init("t", CM_LOG_DEBUG);
    cm_log(CM_LOG_DEBUG, EIO, "%s", big);
    out = captured(&len);
    assert_true(len <= 4096);
    assert_int_equal(out[len - 1], '\n');
    assert_memory_equal(out + len - 4, "...", 3);
    assert_null(memchr(out, '\n', len - 1)); /* one line */
    free(out);
    free(big);
}

enum { THREADS = 4, LINES = 300 };

static void *writer(void *arg)
{
    long id = (long)(intptr_t)arg;
    int i;

    for (i = 0; i < LINES; i++)
        cm_log(CM_LOG_INFO, 0, "thread=%ld line=%d %0200d", id, i, 0);
    return NULL;
}

static void test_concurrent_lines_whole(void **state)
{
    pthread_t th[THREADS];
    char *out, *line, *save = NULL;
    int count = 0, per[THREADS] = {0};
    long i;

    (void)state;
    cm_log_init("mt", CM_LOG_INFO);
    for (i = 0; i < THREADS; i++)
        assert_int_equal(
            pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i), 0);
    for (i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    out = captured(NULL);
    for (line = strtok_r(out, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        long id;
        int n;
        /* every line is complete: prefix, fields and the full padding */
        assert_int_equal(
            sscanf(line + 25, "INFO mt thread=%ld line=%d", &id, &n), 2);
        assert_true(id >= 0 && id < THREADS);
        assert_int_equal(per[id], n); /* each thread's lines in order */
        per[id]++;
        assert_int_equal(strlen(strstr(line, " 0000")), 201);
        count++;
    }
    assert_int_equal(count, THREADS * LINES);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_level),
        cmocka_unit_test_setup_teardown(test_format_and_filter, capture_start,
                                        capture_stop),
        cmocka_unit_test_setup_teardown(test_truncation, capture_start,
                                        capture_stop),
        cmocka_unit_test_setup_teardown(test_concurrent_lines_whole,
                                        capture_start, capture_stop),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
