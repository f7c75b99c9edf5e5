/* tests/unit/s3_post_test.c - POST Object's parsers (storaged/s3/post.c):
 * the multipart/form-data boundary and streaming parser (every split of a
 * body gives the same parts and data, delimiters look-alikes inside file
 * data, preamble, padding, epilogue, pause and resume, malformed bodies),
 * and the form's field limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "storaged/s3/post.h"

/* ---- the boundary ---- */

static void test_boundary(void **state)
{
    char b[STOR_MP_BOUNDARY_MAX + 1];
    char long_ct[200];

    (void)state;
    assert_int_equal(
        stor_mp_boundary("multipart/form-data; boundary=abc", 33, b), 0);
    assert_string_equal(b, "abc");
    assert_int_equal(
        stor_mp_boundary(
            "Multipart/Form-Data;charset=utf-8; BOUNDARY=\"a b:c\"", 51, b),
        0);
    assert_string_equal(b, "a b:c");
    assert_int_equal(stor_mp_boundary("multipart/form-data", 19, b), -EINVAL);
    assert_int_equal(stor_mp_boundary("multipart/mixed; boundary=x", 27, b),
                     -EINVAL);
    assert_int_equal(stor_mp_boundary("multipart/form-data; boundary=", 30, b),
                     -EINVAL);
    assert_int_equal(
        stor_mp_boundary("multipart/form-data; boundary=\"ab\r\"", 36, b),
        -EINVAL); /* a CR would break the delimiter search */
    assert_int_equal(
        stor_mp_boundary("multipart/form-data; boundary=\"abc", 34, b),
        -EINVAL);
    snprintf(long_ct, sizeof(long_ct), "multipart/form-data; boundary=%071d",
             0);
    assert_int_equal(stor_mp_boundary(long_ct, strlen(long_ct), b), -EINVAL);
    long_ct[strlen(long_ct) - 1] = 0; /* 70: the most RFC 2046 allows */
    assert_int_equal(stor_mp_boundary(long_ct, strlen(long_ct), b), 0);
    assert_int_equal(strlen(b), 70);
}

/* ---- the parser ---- */

struct rec {
    struct cm_buf out; /* "P<name>|<filename>;<ctype>\n", data, "E\n" */
    bool pause_file;   /* STOR_MP_PAUSE at the part named "file" */
    int pauses;
};

static int r_part(void *arg, const struct stor_mp_part *p)
{
    struct rec *r = arg;

    assert_int_equal(
        cm_buf_appendf(&r->out, "P%.*s|%.*s;%.*s\n", (int)p->name_len, p->name,
                       (int)p->filename_len, p->filename ? p->filename : "",
                       (int)p->ctype_len, p->ctype ? p->ctype : ""),
        0);
    if (r->pause_file && p->name_len == 4 && memcmp(p->name, "file", 4) == 0) {
        r->pauses++;
        return STOR_MP_PAUSE;
    }
    return 0;
}

static int r_data(void *arg, const char *p, size_t n)
{
    struct rec *r = arg;

    assert_true(n > 0);
    assert_int_equal(cm_buf_append(&r->out, p, n), 0);
    return 0;
}

static int r_end(void *arg)
{
    struct rec *r = arg;

    assert_int_equal(cm_buf_appends(&r->out, "E\n"), 0);
    return 0;
}

static const struct stor_mp_cb rcb = {
    .part = r_part, .data = r_data, .part_end = r_end};

static struct stor_mp g_mp; /* large: not on the stack */

/* Parses @body split at @split (0: whole) into r->out; the result. */
static int parse(const char *boundary, const char *body, size_t n, size_t split,
                 struct rec *r, bool *done)
{
    size_t off = 0, end = split ? split : n;
    ssize_t used;

    stor_mp_init(&g_mp, boundary);
    cm_buf_init(&r->out, CM_BUF_NOLIMIT);
    while (off < n) {
        used = stor_mp_feed(&g_mp, body + off, end - off, &rcb, r);
        if (used < 0)
            return (int)used;
        off += (size_t)used;
        if (off == end)
            end = n;
    }
    *done = stor_mp_done(&g_mp);
    return 0;
}

#define FORM                                                                          \
    "--XX\r\n"                                                                        \
    "Content-Disposition: form-data; name=\"key\"\r\n"                                \
    "\r\n"                                                                            \
    "foo.txt\r\n"                                                                     \
    "--XX\r\n"                                                                        \
    "content-disposition: form-data; name=\"file\"; filename=\"a \\\"b\\\".txt\"\r\n" \
    "Content-Type: text/plain\r\n"                                                    \
    "\r\n"                                                                            \
    "line\r\n--X\r\n-\r--XY\r\n\r\n"                                                  \
    "\r\n--XX--\r\n"

#define FORM_EVENTS                                                            \
    "Pkey|;\nfoo.txtE\n"                                                       \
    "Pfile|a \"b\".txt;text/plain\nline\r\n--X\r\n-\r--XY\r\n\r\nE\n"

static void test_parse_every_split(void **state)
{
    size_t n = strlen(FORM), i;

    (void)state;
    for (i = 0; i <= n; i++) {
        struct rec r = {0};
        bool done = false;

        assert_int_equal(parse("XX", FORM, n, i, &r, &done), 0);
        assert_true(done);
        assert_int_equal(r.out.len, strlen(FORM_EVENTS));
        assert_memory_equal(r.out.data, FORM_EVENTS, r.out.len);
        cm_buf_fini(&r.out);
    }
}

static void test_parse_byte_by_byte_and_pause(void **state)
{
    size_t n = strlen(FORM), off = 0;
    struct rec r = {.pause_file = true};
    ssize_t used;

    (void)state;
    stor_mp_init(&g_mp, "XX");
    cm_buf_init(&r.out, CM_BUF_NOLIMIT);
    while (off < n) {
        used = stor_mp_feed(&g_mp, FORM + off, 1, &rcb, &r);
        assert_int_equal(used, 1); /* a pause still consumed its byte */
        off++;
    }
    assert_int_equal(r.pauses, 1);
    assert_true(stor_mp_done(&g_mp));
    assert_memory_equal(r.out.data, FORM_EVENTS, strlen(FORM_EVENTS));
    cm_buf_fini(&r.out);

    /* whole: the feed stops right after the file's header block */
    memset(&r, 0, sizeof(r));
    r.pause_file = true;
    stor_mp_init(&g_mp, "XX");
    cm_buf_init(&r.out, CM_BUF_NOLIMIT);
    used = stor_mp_feed(&g_mp, FORM, n, &rcb, &r);
    assert_true(used > 0 && (size_t)used < n);
    assert_memory_equal(FORM + used, "line\r\n", 6);
    assert_int_equal(
        stor_mp_feed(&g_mp, FORM + used, n - (size_t)used, &rcb, &r),
        (ssize_t)(n - (size_t)used));
    assert_true(stor_mp_done(&g_mp));
    assert_memory_equal(r.out.data, FORM_EVENTS, strlen(FORM_EVENTS));
    cm_buf_fini(&r.out);
}

static void test_parse_preamble_padding_epilogue(void **state)
{
    static const char body[] =
        "ignored preamble\r\n--b \t\r\n"
        "Content-Disposition: form-data; name=k\r\n\r\n"
        "v\r\n--b--this epilogue is ignored\r\n--b\r\ngarbage";
    struct rec r = {0};
    bool done = false;

    (void)state;
    assert_int_equal(parse("b", body, sizeof(body) - 1, 0, &r, &done), 0);
    assert_true(done);
    assert_int_equal(r.out.len, strlen("Pk|;\nvE\n"));
    assert_memory_equal(r.out.data, "Pk|;\nvE\n", r.out.len);
    cm_buf_fini(&r.out);
}

static void test_parse_incomplete(void **state)
{
    static const char body[] =
        "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--";
    struct rec r = {0};
    bool done = true;

    (void)state;
    assert_int_equal(parse("b", body, sizeof(body) - 1, 0, &r, &done), 0);
    assert_false(done); /* no closing delimiter: the caller refuses */
    /* "\r\n--" may begin the delimiter: held back, not data */
    assert_int_equal(r.out.len, strlen("Pfile|;\nabc"));
    cm_buf_fini(&r.out);
}

static void test_parse_malformed(void **state)
{
    static const char *const bad[] = {
        /* no Content-Disposition */
        "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--",
        /* not form-data */
        "--b\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nx\r\n--b--",
        /* no name */
        "--b\r\nContent-Disposition: form-data; filename=\"a\"\r\n\r\nx\r\n--b--",
        /* an empty header block */
        "--b\r\n\r\nx\r\n--b--",
        /* a header line without a colon */
        "--b\r\nContent-Disposition form-data\r\n\r\nx\r\n--b--",
        /* a folded header line */
        "--b\r\nContent-Disposition: form-data;\r\n name=\"a\"\r\n\r\nx\r\n--b--",
        /* an unterminated quote */
        "--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--b--",
        /* garbage after a delimiter */
        "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--bz\r\n",
        "--b-x",
        /* two Content-Disposition headers */
        "--b\r\nContent-Disposition: form-data; name=a\r\n"
        "Content-Disposition: form-data; name=b\r\n\r\nx\r\n--b--",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct rec r = {0};
        bool done;

        assert_int_equal(parse("b", bad[i], strlen(bad[i]), 0, &r, &done),
                         -EBADMSG);
        cm_buf_fini(&r.out);
    }
}

static void test_parse_head_limit(void **state)
{
    struct cm_buf b;
    struct rec r = {0};
    bool done;
    size_t i;

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(cm_buf_appends(&b,
                                    "--b\r\nContent-Disposition: form-data; "
                                    "name=a\r\nX-Pad: "),
                     0);
    for (i = 0; i < STOR_MP_HEAD_MAX; i++)
        assert_int_equal(cm_buf_appendc(&b, 'p'), 0);
    assert_int_equal(cm_buf_appends(&b, "\r\n\r\nx\r\n--b--"), 0);
    assert_int_equal(parse("b", b.data, b.len, 0, &r, &done), -EBADMSG);
    cm_buf_fini(&r.out);
    cm_buf_fini(&b);
}

/* ---- the form ---- */

static void test_form_limits(void **state)
{
    static struct stor_post_form f;
    char name[32];
    size_t n, i;
    static char big[STOR_POST_FIELDS_MAX];

    (void)state;
    memset(&f, 0, sizeof(f));
    assert_int_equal(stor_post_form_add(&f, "Key", 3, "a", 1), 0);
    assert_int_equal(stor_post_form_add(&f, "kEY", 3, "b", 1), -EEXIST);
    assert_string_equal(stor_post_field(&f, "key", &n), "a");
    assert_int_equal(n, 1);
    assert_null(stor_post_field(&f, "keys", &n));
    for (i = 1; i < STOR_POST_MAX_FIELDS; i++) {
        snprintf(name, sizeof(name), "f%zu", i);
        assert_int_equal(stor_post_form_add(&f, name, strlen(name), "", 0), 0);
    }
    assert_int_equal(stor_post_form_add(&f, "one-more", 8, "", 0), -E2BIG);
    stor_post_form_fini(&f);
    memset(big, 'v', sizeof(big));
    assert_int_equal(stor_post_form_add(&f, "a", 1, big, sizeof(big) - 1), 0);
    assert_int_equal(stor_post_form_add(&f, "b", 1, "x", 1), -E2BIG);
    stor_post_form_fini(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary),
        cmocka_unit_test(test_parse_every_split),
        cmocka_unit_test(test_parse_byte_by_byte_and_pause),
        cmocka_unit_test(test_parse_preamble_padding_epilogue),
        cmocka_unit_test(test_parse_incomplete),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_parse_head_limit),
        cmocka_unit_test(test_form_limits),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
