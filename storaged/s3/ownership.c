/* storaged/s3/ownership.c - Get/Put/DeleteBucketOwnershipControls and
 * CreateBucket's x-amz-object-ownership: a bucket's S3 Object Ownership
 * setting, stored with its other access-control state (iam.h, field
 * "ownership": the setting's name) and obeyed in authz.c (who owns a new
 * object, whether ACLs count) and iam_api.c (who is recorded as owner).
 *
 * DESIGN: the three settings as AWS documents them:
 * - BucketOwnerEnforced: ACLs are off. Requests that set an ACL are 400
 *   AccessControlListNotSupported, but for no ACL or the canned
 *   bucket-owner-full-control on an object write; stored ACLs grant
 *   nothing; the bucket's owner owns every object. Setting it while the
 *   bucket's ACL is not private is 400 InvalidBucketAclWithObjectOwnership.
 * - BucketOwnerPreferred: an object written with bucket-owner-full-control
 *   is the bucket owner's; any other is its writer's.
 * - ObjectWriter: the writer owns the object; the bucket's account has
 *   only what the object's ACL grants it (it may still delete it).
 * A bucket without a setting keeps storaged's rule from before it (the
 * writer owns, the bucket's owner keeps full control), and GET answers
 * 404 OwnershipControlsNotFoundError; AWS makes new buckets
 * BucketOwnerEnforced since 2023, storaged does not, so existing ACL
 * users keep working (storaged/README.md). */
#include "storaged/s3/iam.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "storaged/s3/iam_i.h"
#include "storaged/s3/s3_i.h"
#include "storaged/store/object.h"

static const char *const own_names[] = {
    [IAM_OWN_ENFORCED] = "BucketOwnerEnforced",
    [IAM_OWN_PREFERRED] = "BucketOwnerPreferred",
    [IAM_OWN_WRITER] = "ObjectWriter",
};

/* See iam_i.h. */
int stor_iam_own_parse(const char *s, size_t n)
{
    for (int i = IAM_OWN_ENFORCED; i <= IAM_OWN_WRITER; i++)
        if (strlen(own_names[i]) == n && memcmp(own_names[i], s, n) == 0)
            return i;
    return -1;
}

/* See iam_i.h. */
const char *stor_iam_own_name(int own)
{
    return own >= IAM_OWN_ENFORCED && own <= IAM_OWN_WRITER ? own_names[own]
                                                            : NULL;
}

struct own_xml {
    struct cm_buf text;
    int depth;
    bool root_ok; /* the document element is OwnershipControls */
    int rules;    /* Rule elements */
    int own;      /* the one ObjectOwnership (enum iam_own), or 0 */
    bool bad;
};

static void own_start(void *ud, const char *name, const char **attrs)
{
    struct own_xml *x = ud;
    const char *n = stor_s3_xml_local(name);

    (void)attrs;
    if (x->depth == 0)
        x->root_ok = strcmp(n, "OwnershipControls") == 0;
    else if (x->depth == 1 && strcmp(n, "Rule") == 0)
        x->rules++;
    else if (!(x->depth == 2 && strcmp(n, "ObjectOwnership") == 0))
        x->bad = true; /* an element S3 does not define here */
    x->depth++;
    cm_buf_reset(&x->text);
}

static void own_text(void *ud, const char *s, int len)
{
    struct own_xml *x = ud;

    if (x->depth == 3 && cm_buf_append(&x->text, s, (size_t)len) < 0)
        x->bad = true;
}

static void own_end(void *ud, const char *name)
{
    struct own_xml *x = ud;
    int v;

    (void)name;
    x->depth--;
    if (x->depth != 2 || x->bad)
        return;
    v = stor_iam_own_parse(x->text.data ? x->text.data : "", x->text.len);
    if (v < 0 || x->own)
        x->bad = true; /* unknown, or a second one */
    else
        x->own = v;
    cm_buf_reset(&x->text);
}

/* See iam_i.h. */
enum stor_s3_err stor_iam_own_parse_xml(const char *xml, size_t len, int *own)
{
    static const struct stor_s3_xml_cbs cb = {own_start, own_end, own_text};
    struct own_xml x;
    enum stor_s3_err e;

    memset(&x, 0, sizeof(x));
    e = stor_s3_xml_parse_conf(xml, len, &x, &cb, &x.text, 32, &x.bad);
    if (e == S3E_NONE && (!x.root_ok || x.rules != 1 || x.own == 0))
        e = S3E_MALFORMED_XML; /* S3 takes exactly one rule */
    if (e == S3E_NONE)
        *own = x.own;
    return e;
}

/* The bucket's setting (IAM_OWN_NONE without one) and whether its ACL is
 * private. */
static int own_get(struct stor_s3_req *r, bool *acl_private)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    const struct iam_bucket *b = stor_iam_bucket_find(s, r->bucket);
    int own = b ? b->own : IAM_OWN_NONE;

    *acl_private = b == NULL || b->aclv == NULL;
    stor_iam_snap_unref(s);
    return own;
}

static void own_reply(struct stor_s3_req *r, int own)
{
    struct cm_buf *b = &r->http.resp.body;

    if (cm_buf_appendf(b,
                       S3_XML_DECL "<OwnershipControls xmlns=\"" S3_XMLNS
                                   "\"><Rule><ObjectOwnership>%s"
                                   "</ObjectOwnership></Rule>"
                                   "</OwnershipControls>",
                       stor_iam_own_name(own)) < 0 ||
        stor_resp_hdr(&r->http.resp, "Content-Type", "application/xml") < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    r->http.resp.status = 200;
}

/* See iam_i.h. */
void stor_iam_ownership_op(struct stor_s3_req *r)
{
    struct stor_bucket_info bi;
    enum stor_s3_err e;
    bool priv;
    int own = IAM_OWN_NONE, ret;

    ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);
    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    if (r->http.is_get || r->http.is_head) {
        own = own_get(r, &priv);
        if (own == IAM_OWN_NONE)
            stor_s3_error(r, S3E_NO_SUCH_OWNERSHIP);
        else
            own_reply(r, own);
        return;
    }
    if (r->http.is_put) {
        e = stor_iam_own_parse_xml(r->body.data, r->body.len, &own);
        if (e != S3E_NONE) {
            stor_s3_error(r, e);
            return;
        }
        (void)own_get(r, &priv);
        if (own == IAM_OWN_ENFORCED && !priv) {
            stor_s3_error(r, S3E_OWNERSHIP_WITH_ACL);
            return;
        }
    }
    ret = stor_iam_bucket_conf_set(r, "ownership", stor_iam_own_name(own));
    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    r->http.resp.status = r->http.is_put ? 200 : 204;
}
