/* tests/unit/s3_acl_test.c - ACL grant lists (storaged/s3/acl.c): the
 * x-amz-grant-* header grammar (quoted and bare values, spaces, case of
 * the grantee type, every header in order), values flush against a
 * PROT_NONE guard page, the 100-grant limit at, under and over it, the
 * grantee errors, AccessControlPolicy bodies, the permissions a list and
 * a canned ACL give (groups, IgnorePublicAcls, the owner), and the
 * answer's order (groups first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/buf.h"
#include "storaged/s3/acl.h"

#define ID_A "02d6176db174dc93cb1b899f7c6078f08654445fe8cf1b6ce98d8855f66bdbf4"
#define ID_B "b0b"
#define ALL  "http://acs.amazonaws.com/groups/global/AllUsers"
#define AUTH "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"

static bool known(void *arg, const char *id)
{
    (void)arg;
    return strcmp(id, ID_A) == 0 || strcmp(id, ID_B) == 0;
}

static const char *name(void *arg, const char *id)
{
    (void)arg;
    return strcmp(id, ID_A) == 0   ? "root"
           : strcmp(id, ID_B) == 0 ? "bob"
                                   : NULL;
}

/* The headers of a test: one value per header name, NULL: absent. */
struct hdrs {
    const char *v[5]; /* read, write, read-acp, write-acp, full-control */
    size_t n[5];
};

static const char *get(void *arg, const char *h, size_t *n)
{
    static const char *const names[] = {
        "x-amz-grant-read",         "x-amz-grant-write",
        "x-amz-grant-read-acp",     "x-amz-grant-write-acp",
        "x-amz-grant-full-control",
    };
    struct hdrs *x = arg;

    for (int i = 0; i < 5; i++)
        if (strcmp(h, names[i]) == 0 && x->v[i]) {
            *n = x->n[i];
            return x->v[i];
        }
    return NULL;
}

/* Copies @s to the end of a page followed by a PROT_NONE page. */
static char *guard_copy(const char *s, size_t n, void **map, size_t *maplen)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t pages = (n + (size_t)pg - 1) / (size_t)pg + 1;
    char *base;

    *maplen = pages * (size_t)pg;
    base = mmap(NULL, *maplen, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(base != MAP_FAILED);
    assert_int_equal(mprotect(base + *maplen - pg, (size_t)pg, PROT_NONE), 0);
    *map = base;
    memcpy(base + *maplen - pg - n, s, n);
    return base + *maplen - pg - n;
}

/* stor_acl_from_headers with @v as header @i (flush against a guard
 * page); the error, and the list in *out. */
static enum stor_s3_err one(int i, const char *v, json_t **out)
{
    struct hdrs x = {{0}, {0}};
    const char *msg = NULL;
    enum stor_s3_err e;
    size_t maplen;
    void *map;

    x.v[i] = guard_copy(v, strlen(v), &map, &maplen);
    x.n[i] = strlen(v);
    e = stor_acl_from_headers(get, &x, known, NULL, out, &msg);
    assert_true(e == S3E_NONE || msg != NULL || e == S3E_INTERNAL);
    munmap(map, maplen);
    return e;
}

static const char *field(json_t *l, size_t i, const char *k)
{
    return json_string_value(json_object_get(json_array_get(l, i), k));
}

static void test_header_grammar(void **state)
{
    json_t *l;

    (void)state;
    assert_int_equal(one(0, "id=" ID_A, &l), S3E_NONE);
    assert_int_equal(json_array_size(l), 1);
    assert_string_equal(field(l, 0, "p"), "READ");
    assert_string_equal(field(l, 0, "id"), ID_A);
    json_decref(l);
    assert_int_equal(one(4,
                         " ID = \"" ID_B "\" ,uri=\"" ALL "\",  Uri=" AUTH
                         " , emailAddress_not=x",
                         &l),
                     S3E_INVALID_ARGUMENT);
    assert_null(l);
    assert_int_equal(
        one(4, " ID = \"" ID_B "\" ,uri=\"" ALL "\",  Uri=" AUTH " ", &l),
        S3E_NONE);
    assert_int_equal(json_array_size(l), 3);
    assert_string_equal(field(l, 0, "p"), "FULL_CONTROL");
    assert_string_equal(field(l, 0, "id"), ID_B);
    assert_string_equal(field(l, 1, "g"), "AllUsers");
    assert_string_equal(field(l, 2, "g"), "AuthenticatedUsers");
    json_decref(l);
    /* malformed: no '=', an open quote, a trailing comma, empty */
    assert_int_equal(one(0, "id", &l), S3E_INVALID_ARGUMENT);
    assert_int_equal(one(0, "id=\"" ID_B, &l), S3E_INVALID_ARGUMENT);
    assert_int_equal(one(0, "id=" ID_B ",", &l), S3E_INVALID_ARGUMENT);
    assert_int_equal(one(0, "", &l), S3E_INVALID_ARGUMENT);
    assert_int_equal(one(0, "id=\"" ID_B "\"x", &l), S3E_INVALID_ARGUMENT);
    /* grantees that resolve to nobody */
    assert_int_equal(one(1, "id=nobody", &l), S3E_INVALID_ARGUMENT);
    assert_int_equal(one(1, "id=", &l), S3E_INVALID_ARGUMENT);
    assert_int_equal(one(1, "uri=http://acs.amazonaws.com/groups/global/X", &l),
                     S3E_INVALID_ARGUMENT);
    assert_int_equal(one(1, "emailAddress=\"a@b.c\"", &l),
                     S3E_UNRESOLVABLE_EMAIL);
    assert_null(l);
}

static void test_header_order_and_none(void **state)
{
    struct hdrs x = {{"id=" ID_B, NULL, "id=" ID_A, NULL, "uri=" ALL},
                     {6, 0, 3 + strlen(ID_A), 0, 4 + strlen(ALL)}};
    const char *msg;
    json_t *l;

    (void)state;
    assert_int_equal(stor_acl_from_headers(get, &x, known, NULL, &l, &msg),
                     S3E_NONE);
    assert_int_equal(json_array_size(l), 3);
    assert_string_equal(field(l, 0, "p"), "READ");
    assert_string_equal(field(l, 1, "p"), "READ_ACP");
    assert_string_equal(field(l, 2, "p"), "FULL_CONTROL");
    json_decref(l);
    memset(&x, 0, sizeof(x));
    assert_int_equal(stor_acl_from_headers(get, &x, known, NULL, &l, &msg),
                     S3E_NONE);
    assert_null(l); /* no grant header: no list */
}

static void test_grant_limit(void **state)
{
    struct cm_buf b;
    json_t *l;

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    for (int i = 0; i < STOR_ACL_MAX_GRANTS; i++)
        assert_int_equal(cm_buf_appendf(&b, "%sid=%s", i ? "," : "", ID_B), 0);
    assert_int_equal(one(3, b.data, &l), S3E_NONE); /* at the limit */
    assert_int_equal(json_array_size(l), STOR_ACL_MAX_GRANTS);
    json_decref(l);
    assert_int_equal(cm_buf_appendf(&b, ",id=%s", ID_B), 0);
    assert_int_equal(one(3, b.data, &l), S3E_MALFORMED_ACL); /* over it */
    assert_null(l);
    cm_buf_fini(&b);
}

static void test_bodies(void **state)
{
    const char *ok =
        "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/"
        "2006-03-01/\"><Owner><ID>x</ID></Owner><AccessControlList>"
        "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-"
        "instance\" xsi:type=\"CanonicalUser\"><ID>" ID_B "</ID>"
        "<DisplayName>ignored</DisplayName></Grantee>"
        "<Permission>WRITE_ACP</Permission></Grant>"
        "<Grant><Grantee><URI>" ALL "</URI></Grantee>"
        "<Permission>READ</Permission></Grant>"
        "</AccessControlList></AccessControlPolicy>";
    static const struct {
        const char *xml;
        enum stor_s3_err e;
    } bad[] = {
        {"<AccessControlPolicy>", S3E_MALFORMED_XML},
        {"<Other/>", S3E_MALFORMED_ACL},
        {"<AccessControlPolicy><AccessControlList><Grant><Permission>READ"
         "</Permission></Grant></AccessControlList></AccessControlPolicy>",
         S3E_MALFORMED_ACL},
        {"<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>" ID_B
         "</ID><URI>" ALL "</URI></Grantee><Permission>READ</Permission>"
         "</Grant></AccessControlList></AccessControlPolicy>",
         S3E_MALFORMED_ACL},
        {"<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>" ID_B
         "</ID></Grantee><Permission>ALL</Permission></Grant>"
         "</AccessControlList></AccessControlPolicy>",
         S3E_MALFORMED_ACL},
        {"<AccessControlPolicy><AccessControlList><Other/>"
         "</AccessControlList></AccessControlPolicy>",
         S3E_MALFORMED_ACL},
        {"<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>zz"
         "</ID></Grantee><Permission>READ</Permission></Grant>"
         "</AccessControlList></AccessControlPolicy>",
         S3E_INVALID_ARGUMENT},
        {"<AccessControlPolicy><AccessControlList><Grant><Grantee>"
         "<EmailAddress>a@b.c</EmailAddress></Grantee><Permission>READ"
         "</Permission></Grant></AccessControlList></AccessControlPolicy>",
         S3E_UNRESOLVABLE_EMAIL},
    };
    const char *msg;
    json_t *l;

    (void)state;
    assert_int_equal(stor_acl_from_xml(ok, strlen(ok), known, NULL, &l, &msg),
                     S3E_NONE);
    assert_int_equal(json_array_size(l), 2);
    assert_string_equal(field(l, 0, "id"), ID_B);
    assert_string_equal(field(l, 0, "p"), "WRITE_ACP");
    assert_string_equal(field(l, 1, "g"), "AllUsers");
    json_decref(l);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        l = NULL;
        assert_int_equal(stor_acl_from_xml(bad[i].xml, strlen(bad[i].xml),
                                           known, NULL, &l, &msg),
                         bad[i].e);
        assert_null(l);
    }
}

static void test_perms(void **state)
{
    json_t *l =
        json_pack("[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]", "p", "READ", "g",
                  "AllUsers", "p", "WRITE", "g", "AuthenticatedUsers", "p",
                  "READ_ACP", "id", ID_B, "p", "FULL_CONTROL", "id", ID_A);
    json_t *canned = json_string("authenticated-read");

    (void)state;
    /* anonymous: AllUsers only; signed in: AuthenticatedUsers too */
    assert_int_equal(stor_acl_perms(l, ID_A, NULL, false, false),
                     STOR_ACL_READ);
    assert_int_equal(stor_acl_perms(l, ID_A, NULL, true, false),
                     STOR_ACL_READ | STOR_ACL_WRITE);
    assert_int_equal(stor_acl_perms(l, ID_A, ID_B, true, false),
                     STOR_ACL_READ | STOR_ACL_WRITE | STOR_ACL_READ_ACP);
    assert_int_equal(stor_acl_perms(l, ID_A, ID_B, true, true),
                     STOR_ACL_READ_ACP); /* IgnorePublicAcls */
    assert_int_equal(stor_acl_perms(l, ID_B, ID_A, true, true), STOR_ACL_FULL);
    assert_true(stor_acl_is_public(l));
    /* a canned ACL: its group grants and the owner's FULL_CONTROL */
    assert_int_equal(stor_acl_perms(canned, ID_A, NULL, false, false), 0);
    assert_int_equal(stor_acl_perms(canned, ID_A, ID_B, true, false),
                     STOR_ACL_READ);
    assert_int_equal(stor_acl_perms(canned, ID_A, ID_A, true, true),
                     STOR_ACL_FULL);
    assert_int_equal(stor_acl_perms(NULL, ID_A, ID_B, true, false), 0);
    assert_true(stor_acl_is_public(canned));
    assert_false(stor_acl_is_public(NULL));
    json_decref(l);
    json_decref(canned);
}

static void test_answer_order(void **state)
{
    json_t *l =
        json_pack("[{s:s,s:s},{s:s,s:s},{s:s,s:s}]", "p", "FULL_CONTROL", "id",
                  ID_A, "p", "READ", "g", "AllUsers", "p", "WRITE", "id", ID_B);
    struct cm_buf b;
    const char *g, *u, *u2;

    (void)state;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(stor_acl_xml(&b, l, ID_A, "root", name, NULL), 0);
    g = strstr(b.data, "<URI>" ALL "</URI>");
    u = strstr(b.data, "<ID>" ID_A "</ID><DisplayName>root</DisplayName>"
                       "</Grantee><Permission>FULL_CONTROL");
    u2 = strstr(b.data, "<ID>" ID_B "</ID><DisplayName>bob</DisplayName>"
                        "</Grantee><Permission>WRITE");
    assert_non_null(g);
    assert_non_null(u);
    assert_non_null(u2);
    assert_true(g < u && u < u2); /* groups first, then users as given */
    cm_buf_fini(&b);
    json_decref(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_grammar),
        cmocka_unit_test(test_header_order_and_none),
        cmocka_unit_test(test_grant_limit),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_perms),
        cmocka_unit_test(test_answer_order),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
