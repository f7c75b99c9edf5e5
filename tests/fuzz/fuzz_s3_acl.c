/* tests/fuzz/fuzz_s3_acl.c - libFuzzer target for ACL grant lists
 * (storaged/s3/acl.c): the input as an AccessControlPolicy body and as
 * the value of every x-amz-grant-* header.
 * Properties: failures are only the documented errors; an accepted list
 * holds 1..100 grants (a body may hold none), each with a known
 * permission and exactly one grantee, a known id or group; the permission
 * bits it gives stay within FULL_CONTROL; and the AccessControlPolicy
 * answer written from it parses back to a list of the same grants
 * (groups first, as answered). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "storaged/s3/acl.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

#define ID_A "02d6176db174dc93cb1b899f7c6078f08654445fe8cf1b6ce98d8855f66bdbf4"
#define ID_B "a"

static bool known(void *arg, const char *id)
{
    (void)arg;
    return strcmp(id, ID_A) == 0 || strcmp(id, ID_B) == 0;
}

static const char *name(void *arg, const char *id)
{
    (void)arg;
    return strcmp(id, ID_A) == 0 ? "root" : NULL;
}

struct hdr_in {
    const char *v;
    size_t n;
};

static const char *hdr_get(void *arg, const char *h, size_t *n)
{
    struct hdr_in *in = arg;

    (void)h;
    *n = in->n;
    return in->v;
}

static bool ok_err(enum stor_s3_err e)
{
    return e == S3E_NONE || e == S3E_MALFORMED_XML || e == S3E_MALFORMED_ACL ||
           e == S3E_INVALID_ARGUMENT || e == S3E_UNRESOLVABLE_EMAIL ||
           e == S3E_INTERNAL;
}

/* Checks list @l as stor_acl_from_* give it, and its round trip. */
static void check_list(json_t *l)
{
    static const char *const perms[] = {"READ", "WRITE", "READ_ACP",
                                        "WRITE_ACP", "FULL_CONTROL"};
    struct cm_buf b;
    const char *msg;
    json_t *g, *back = NULL;
    size_t i, k;

    CHECK(json_is_array(l) && json_array_size(l) <= STOR_ACL_MAX_GRANTS);
    json_array_foreach(l, i, g)
    {
        const char *p = json_string_value(json_object_get(g, "p"));
        const char *id = json_string_value(json_object_get(g, "id"));
        const char *grp = json_string_value(json_object_get(g, "g"));
        bool pok = false;

        CHECK(p != NULL && (id == NULL) != (grp == NULL));
        for (k = 0; k < 5; k++)
            pok = pok || strcmp(p, perms[k]) == 0;
        CHECK(pok);
        CHECK(id == NULL || known(NULL, id));
    }
    CHECK((stor_acl_perms(l, ID_A, ID_A, true, false) & ~STOR_ACL_FULL) == 0);
    CHECK((stor_acl_perms(l, ID_B, NULL, false, true) & ~STOR_ACL_FULL) == 0);
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    if (stor_acl_xml(&b, l, ID_A, "root", name, NULL) == 0) {
        enum stor_s3_err e =
            stor_acl_from_xml(b.data, b.len, known, NULL, &back, &msg);

        CHECK(e == S3E_NONE || e == S3E_INTERNAL);
        CHECK(e != S3E_NONE || json_array_size(back) == json_array_size(l));
        json_decref(back);
    }
    cm_buf_fini(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hdr_in in = {(const char *)data, size};
    const char *msg = NULL;
    json_t *l = NULL;
    enum stor_s3_err e;

    e = stor_acl_from_xml((const char *)data, size, known, NULL, &l, &msg);
    CHECK(ok_err(e));
    CHECK((e == S3E_NONE) == (l != NULL));
    if (l)
        check_list(l);
    json_decref(l);
    l = NULL;
    e = stor_acl_from_headers(hdr_get, &in, known, NULL, &l, &msg);
    CHECK(ok_err(e) && e != S3E_MALFORMED_XML);
    CHECK(e == S3E_NONE || l == NULL);
    if (l) {
        CHECK(json_array_size(l) >= 1);
        check_list(l);
    }
    json_decref(l);
    return 0;
}
