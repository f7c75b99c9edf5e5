/* storaged/s3/pab.c - Get/Put/DeletePublicAccessBlock of a bucket: the
 * four switches S3 keeps per bucket, stored with the bucket's other
 * access-control state (iam.h, field "pab": the enum iam_pab bits in
 * decimal) and obeyed where storaged has public ACLs and policies
 * (authz.c: BlockPublicAcls, IgnorePublicAcls, RestrictPublicBuckets;
 * iam_api.c: BlockPublicPolicy).
 *
 * DESIGN: a bucket without a configuration blocks nothing and GET answers
 * 404 NoSuchPublicAccessBlockConfiguration, as S3 does for a bucket whose
 * configuration was deleted; storaged does not create one by default
 * (AWS has since 2023), so existing deployments keep their public ACLs.
 * A configuration with every switch false is kept and answered as such.
 * The bucket's deletion drops it with the rest of its state. */
#include "storaged/s3/iam.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "storaged/s3/iam_i.h"
#include "storaged/s3/s3_i.h"
#include "storaged/store/object.h"

static const struct {
    const char *name;
    unsigned bit;
} fields[] = {
    {"BlockPublicAcls", IAM_PAB_BLOCK_ACLS},
    {"IgnorePublicAcls", IAM_PAB_IGNORE_ACLS},
    {"BlockPublicPolicy", IAM_PAB_BLOCK_POLICY},
    {"RestrictPublicBuckets", IAM_PAB_RESTRICT},
};

struct pab_xml {
    struct cm_buf text;
    int depth;
    bool root_ok; /* the document element is PublicAccessBlockConfiguration */
    unsigned bits, seen;
    bool bad;
};

static void pab_start(void *ud, const char *name, const char **attrs)
{
    struct pab_xml *x = ud;

    (void)attrs;
    if (x->depth == 0)
        x->root_ok = strcmp(stor_s3_xml_local(name),
                            "PublicAccessBlockConfiguration") == 0;
    else if (x->depth > 1)
        x->bad = true; /* the switches hold text only */
    x->depth++;
    cm_buf_reset(&x->text);
}

static void pab_text(void *ud, const char *s, int len)
{
    struct pab_xml *x = ud;

    if (x->depth == 2 && cm_buf_append(&x->text, s, (size_t)len) < 0)
        x->bad = true;
}

static void pab_end(void *ud, const char *name)
{
    struct pab_xml *x = ud;
    const char *n = stor_s3_xml_local(name);
    size_t i;

    x->depth--;
    if (x->depth != 1)
        return;
    for (i = 0; i < CM_ARRAY_SIZE(fields); i++) {
        if (strcmp(n, fields[i].name) != 0)
            continue;
        if (x->seen & fields[i].bit)
            x->bad = true; /* named twice */
        x->seen |= fields[i].bit;
        if (x->text.len == 4 && memcmp(x->text.data, "true", 4) == 0)
            x->bits |= fields[i].bit;
        else if (!(x->text.len == 5 && memcmp(x->text.data, "false", 5) == 0))
            x->bad = true;
        break;
    }
    if (i == CM_ARRAY_SIZE(fields))
        x->bad = true; /* an element S3 does not define here */
    cm_buf_reset(&x->text);
}

/* See iam_i.h. */
enum stor_s3_err stor_iam_pab_parse(const char *xml, size_t len, unsigned *bits)
{
    static const struct stor_s3_xml_cbs cb = {pab_start, pab_end, pab_text};
    struct pab_xml x;
    enum stor_s3_err e;

    memset(&x, 0, sizeof(x));
    e = stor_s3_xml_parse_conf(xml, len, &x, &cb, &x.text, 64, &x.bad);
    if (e == S3E_NONE && !x.root_ok)
        e = S3E_MALFORMED_XML;
    if (e == S3E_NONE)
        *bits = x.bits;
    return e;
}

/* The bucket's configuration bits (IAM_PAB_SET when it has one). */
static unsigned pab_get(struct stor_s3_req *r)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    const struct iam_bucket *b = stor_iam_bucket_find(s, r->bucket);
    unsigned bits = b ? b->pab : 0;

    stor_iam_snap_unref(s);
    return bits;
}

static void pab_reply(struct stor_s3_req *r, unsigned bits)
{
    struct cm_buf *b = &r->http.resp.body;
    size_t i;
    int ret;

    ret = cm_buf_appends(b, S3_XML_DECL
                         "<PublicAccessBlockConfiguration xmlns=\"" S3_XMLNS
                         "\">");
    for (i = 0; ret == 0 && i < CM_ARRAY_SIZE(fields); i++)
        ret = cm_buf_appendf(b, "<%s>%s</%s>", fields[i].name,
                             bits & fields[i].bit ? "true" : "false",
                             fields[i].name);
    if (ret == 0)
        ret = cm_buf_appends(b, "</PublicAccessBlockConfiguration>");
    if (ret == 0)
        ret = stor_resp_hdr(&r->http.resp, "Content-Type", "application/xml");
    if (ret < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    r->http.resp.status = 200;
}

/* See iam_i.h. */
void stor_iam_pab_op(struct stor_s3_req *r)
{
    struct stor_bucket_info bi;
    unsigned bits = 0;
    enum stor_s3_err e;
    char val[16];
    int ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);

    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    if (r->http.is_get || r->http.is_head) {
        bits = pab_get(r);
        if (!(bits & IAM_PAB_SET))
            stor_s3_error(r, S3E_NO_SUCH_PAB);
        else
            pab_reply(r, bits);
        return;
    }
    if (r->http.is_delete) {
        ret = stor_iam_bucket_conf_set(r, "pab", NULL);
    } else {
        e = stor_iam_pab_parse(r->body.data ? r->body.data : "", r->body.len,
                               &bits);
        if (e != S3E_NONE) {
            stor_s3_error(r, e);
            return;
        }
        snprintf(val, sizeof(val), "%u", bits | IAM_PAB_SET);
        ret = stor_iam_bucket_conf_set(r, "pab", val);
    }
    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    r->http.resp.status = r->http.is_delete ? 204 : 200;
}
