/* tests/unit/s3_post_test.c - POST Object's parsers (storaged/s3/post.c):
 * the multipart/form-data boundary and streaming parser (every split of a
 * body gives the same parts and data, delimiters look-alikes inside file
 * data, preamble, padding, epilogue, pause and resume, malformed bodies),
 * the form's field limits, and the POST policy checker (expiration,
 * exact / starts-with / content-length-range conditions, case rules,
 * extra fields, exempt fields, malformed documents). */
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
    /* a NUL is no bchar (strchr() would have found the terminator) */
    assert_int_equal(
        stor_mp_boundary("multipart/form-data; boundary=a\0b", 33, b), -EINVAL);
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

/* ---- the policy ---- */

#define NOW 1800000000 /* 2027-01-15 */

static struct stor_post_form g_form;

static void form_setup(void)
{
    stor_post_form_fini(&g_form);
    memset(&g_form, 0, sizeof(g_form));
    assert_int_equal(stor_post_form_add(&g_form, "key", 3, "foo.txt", 7), 0);
    assert_int_equal(stor_post_form_add(&g_form, "AcL", 3, "private", 7), 0);
    assert_int_equal(
        stor_post_form_add(&g_form, "Content-Type", 12, "text/plain", 10), 0);
    assert_int_equal(stor_post_form_add(&g_form, "policy", 6, "e30=", 4), 0);
    assert_int_equal(stor_post_form_add(&g_form, "signature", 9, "s", 1), 0);
    assert_int_equal(stor_post_form_add(&g_form, "AWSAccessKeyId", 14, "a", 1),
                     0);
    assert_int_equal(stor_post_form_add(&g_form, "x-ignore-me", 11, "1", 1), 0);
    assert_int_equal(
        stor_post_form_add(&g_form, "x-amz-checksum-crc32", 20, "AAAAAA==", 8),
        0);
}

static enum stor_s3_err check(const char *json, char *why,
                              struct stor_post_limits *lim)
{
    static char w[512];
    struct stor_post_limits l;

    return stor_post_policy_check(json, strlen(json), NOW, &g_form, "bkt",
                                  "foo.txt", lim ? lim : &l, why ? why : w,
                                  512);
}

#define EXP "\"expiration\": \"2030-01-01T00:00:00.000Z\""
#define CONDS_OK                                                               \
    "{\"bucket\": \"bkt\"}, [\"starts-with\", \"$key\", \"foo\"],"             \
    "{\"acl\": \"private\"}, [\"eq\", \"$Content-Type\", \"text/plain\"]"

static void test_policy_ok(void **state)
{
    struct stor_post_limits lim;

    (void)state;
    form_setup();
    assert_int_equal(check("{" EXP ", \"conditions\": [" CONDS_OK
                           ", [\"content-length-range\", 1, 1024]]}",
                           NULL, &lim),
                     S3E_NONE);
    assert_int_equal(lim.min, 1);
    assert_int_equal(lim.max, 1024);
    /* no range: anything; case-insensitive operators and field names;
     * numbers as strings in the range */
    assert_int_equal(
        check("{" EXP ", \"conditions\": [" CONDS_OK "]}", NULL, &lim),
        S3E_NONE);
    assert_true(lim.max == UINT64_MAX && lim.min == 0);
    assert_int_equal(check("{" EXP ", \"conditions\": [{\"BuCkEt\": \"bkt\"},"
                           "[\"StArTs-WiTh\", \"$KEY\", \"\"], [\"EQ\", "
                           "\"$acl\", \"private\"], [\"starts-with\", "
                           "\"$content-type\", \"text/\"], "
                           "[\"content-length-range\", \"0\", \"9\"]]}",
                           NULL, &lim),
                     S3E_NONE);
    assert_int_equal(lim.max, 9);
}

static void test_policy_denied(void **state)
{
    char why[512];

    (void)state;
    form_setup();
    assert_int_equal(check("{\"expiration\": \"2020-01-01T00:00:00Z\", "
                           "\"conditions\": [" CONDS_OK "]}",
                           why, NULL),
                     S3E_ACCESS_DENIED);
    assert_string_equal(why, "Invalid according to Policy: Policy expired.");
    /* the wrong bucket (the request's, not a form field) */
    assert_int_equal(
        check("{" EXP ", \"conditions\": [{\"bucket\": \"other\"}, "
              "[\"starts-with\", \"$key\", \"\"], {\"acl\": \"private\"},"
              "[\"starts-with\", \"$Content-Type\", \"\"]]}",
              why, NULL),
        S3E_ACCESS_DENIED);
    assert_non_null(strstr(why, "Policy Condition failed"));
    assert_non_null(strstr(why, "$bucket"));
    /* eq is exact; values are case-sensitive */
    assert_int_equal(check("{" EXP ", \"conditions\": [{\"bucket\": \"bkt\"},"
                           "[\"eq\", \"$key\", \"foo\"], {\"acl\": "
                           "\"private\"}, [\"starts-with\", "
                           "\"$Content-Type\", \"\"]]}",
                           why, NULL),
                     S3E_ACCESS_DENIED);
    assert_int_equal(check("{" EXP ", \"conditions\": [{\"bucket\": \"bkt\"},"
                           "[\"starts-with\", \"$key\", \"FOO\"], {\"acl\": "
                           "\"private\"}, [\"starts-with\", "
                           "\"$Content-Type\", \"\"]]}",
                           why, NULL),
                     S3E_ACCESS_DENIED);
    /* a condition on an absent field tests the empty string */
    assert_int_equal(check("{" EXP ", \"conditions\": [" CONDS_OK
                           ", [\"starts-with\", \"$x-amz-meta-foo\", "
                           "\"bar\"]]}",
                           why, NULL),
                     S3E_ACCESS_DENIED);
    assert_int_equal(check("{" EXP ", \"conditions\": [" CONDS_OK
                           ", [\"eq\", \"$x-amz-meta-foo\", \"\"]]}",
                           why, NULL),
                     S3E_NONE);
    /* a form field without a condition */
    assert_int_equal(check("{" EXP ", \"conditions\": [{\"bucket\": \"bkt\"},"
                           "[\"starts-with\", \"$key\", \"\"], "
                           "[\"starts-with\", \"$Content-Type\", \"\"]]}",
                           why, NULL),
                     S3E_ACCESS_DENIED);
    assert_string_equal(why,
                        "Invalid according to Policy: Extra input fields: AcL");
}

static void test_policy_malformed(void **state)
{
    static const char *const bad[] = {
        "",
        "[]",
        "{\"expiration\": \"2030-01-01T00:00:00Z\"}", /* no conditions */
        "{\"conditions\": []}",                       /* no expiration */
        "{\"EXPIRATION\": \"2030-01-01T00:00:00Z\", \"conditions\": []}",
        "{" EXP ", \"CONDITIONS\": []}",
        "{" EXP ", \"conditions\": [], \"other\": 1}",
        "{" EXP ", \"conditions\": {}}",
        "{\"expiration\": \"2030-01-01 00:00:00+00:00\", \"conditions\": []}",
        "{\"expiration\": \"2030-13-01T00:00:00Z\", \"conditions\": []}",
        "{\"expiration\": \"2030-01-01T00:00:00\", \"conditions\": []}",
        "{\"expiration\": 1900000000, \"conditions\": []}",
        "{" EXP ", \"conditions\": [{}]}",
        "{" EXP ", \"conditions\": [{\"a\": \"b\", \"c\": \"d\"}]}",
        "{" EXP ", \"conditions\": [{\"a\": 1}]}",
        "{" EXP ", \"conditions\": [[\"content-length-range\", 0]]}",
        "{" EXP ", \"conditions\": [[\"content-length-range\", -1, 0]]}",
        "{" EXP ", \"conditions\": [[\"content-length-range\", 5, 4]]}",
        "{" EXP ", \"conditions\": [[\"content-length-range\", \"x\", 4]]}",
        "{" EXP ", \"conditions\": [[\"eq\", \"key\", \"a\"]]}", /* no $ */
        "{" EXP ", \"conditions\": [[\"ends-with\", \"$key\", \"a\"]]}",
        "{" EXP ", \"conditions\": [[\"eq\", \"$key\"]]}",
        "{" EXP ", \"conditions\": [\"eq\"]}",
        "{" EXP ", " EXP ", \"conditions\": []}", /* a duplicate key */
    };
    size_t i;

    (void)state;
    form_setup();
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (check(bad[i], NULL, NULL) != S3E_POST_BAD_POLICY)
            fail_msg("accepted: %s", bad[i]);
    }
    stor_post_form_fini(&g_form);
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
        cmocka_unit_test(test_policy_ok),
        cmocka_unit_test(test_policy_denied),
        cmocka_unit_test(test_policy_malformed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
