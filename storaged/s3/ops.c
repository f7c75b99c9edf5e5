/* storaged/s3/ops.c - the S3 operations, run on worker threads: each takes
 * a routed, authenticated request (body complete, verified) and fills its
 * response (status, headers, small XML body, or a GET stream).
 *
 * DESIGN: one function per operation, each a straight line of object-layer
 * calls and XML output; errors map through stor_s3_err_from_errno() at one
 * place (fail()). Responses follow AWS S3 byte for byte where clients look
 * (ETag quoting, Last-Modified format, 206/304/412/416 rules, list
 * ordering and markers: shared/research/store-anchors.md section 8). */
#include "storaged/s3/s3_i.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/codec.h"
#include "common/log.h"
#include "common/timefmt.h"
#include "common/uri.h"
#include "common/xml.h"
#include "storaged/s3/cors.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/lifecycle.h"
#include "storaged/s3/metrics.h"
#include "storaged/s3/mime.h"
#include "storaged/s3/sse.h"
#include "storaged/s3/tagging.h"
#include "storaged/s3/versioning.h"
#include "storaged/s3/xout.h"

#define LIST_MAX_KEYS 1000
#define STREAM_MIN    (256 * 1024)
#define STREAM_MAX    (4 * 1024 * 1024)
#define OWNER_ID      S3_OWNER_ID

/* Sets the error response for object-layer error @err. */
static void fail(struct stor_s3_req *r, int err)
{
    enum stor_s3_err e = stor_s3_err_from_errno(err);

    if (e == S3E_INTERNAL)
        cm_log(CM_LOG_ERROR, -err, "req=%016llX %s/%s: object layer error",
               (unsigned long long)r->http.id, r->bucket, r->key ? r->key : "");
    stor_s3_error(r, e);
}

/* ---- headers kept with objects ---- */

/* true for request headers that are stored with an object and returned
 * on GET/HEAD (content-*, cache-control, expires, x-amz-meta-*, ...). */
static bool keep_header(const char *n, size_t len)
{
    static const char *const names[] = {
        "content-type",
        "content-encoding",
        "content-disposition",
        "content-language",
        "cache-control",
        "expires",
        "x-amz-website-redirect-location",
        "x-amz-tagging",
    };
    size_t i;

    if (len > 11 && strncasecmp(n, "x-amz-meta-", 11) == 0)
        return true;
    for (i = 0; i < CM_ARRAY_SIZE(names); i++)
        if (stor_http_ieq(n, len, names[i]))
            return true;
    return false;
}

/* See s3_i.h. */
void stor_s3_hdrs_free(struct stor_hdr *h, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
}

/* Appends a copy of (name, value) to *h (lowercasing the name). */
static int hdr_add(struct stor_hdr **h, size_t *n, const char *name,
                   size_t nlen, const char *value, size_t vlen)
{
    struct stor_hdr *nh = realloc(*h, (*n + 1) * sizeof(**h));
    size_t i;

    if (nh == NULL)
        return -ENOMEM;
    *h = nh;
    nh[*n].name = strndup(name, nlen);
    nh[*n].value = strndup(value, vlen);
    if (nh[*n].name == NULL || nh[*n].value == NULL) {
        free(nh[*n].name);
        free(nh[*n].value);
        return -ENOMEM;
    }
    for (i = 0; i < nlen; i++)
        if (nh[*n].name[i] >= 'A' && nh[*n].name[i] <= 'Z')
            nh[*n].name[i] = (char)(nh[*n].name[i] + 32);
    (*n)++;
    return 0;
}

/* Writes Content-Encoding @v (@n bytes) to @out (room for 2n + 1) without
 * its aws-chunked codings, which are transport framing and not the
 * object's (as S3: "gzip, aws-chunked" and "aws-chunked, gzip" are stored
 * as "gzip", "aws-chunked" alone not at all); the other codings keep
 * their order, joined by ", ". Returns the length written. */
static size_t strip_aws_chunked(const char *v, size_t n, char *out)
{
    const char *p = v, *end = v + n;
    size_t o = 0;

    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *s = p, *e = comma ? comma : end;

        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e > s && !((size_t)(e - s) == 11 &&
                       strncasecmp(s, "aws-chunked", 11) == 0)) {
            if (o > 0) {
                out[o++] = ',';
                out[o++] = ' ';
            }
            memcpy(out + o, s, (size_t)(e - s));
            o += (size_t)(e - s);
        }
        p = comma ? comma + 1 : end;
    }
    out[o] = 0;
    return o;
}

/* See s3_i.h. */
int stor_s3_req_obj_hdrs(const struct stor_s3_req *r, struct stor_hdr **out,
                         size_t *n)
{
    struct stor_hdr *h = NULL;
    size_t nh = 0, i;
    bool have_ct = false;
    int ret = 0;

    for (i = 0; i < r->http.head.nhdrs && ret == 0; i++) {
        const struct stor_http_hdr *x = &r->http.hdrs[i];
        const char *v = x->value;
        size_t vl = x->value_len;

        if (!keep_header(x->name, x->name_len))
            continue;
        if (stor_http_ieq(x->name, x->name_len, "content-encoding")) {
            char *ce = malloc(2 * vl + 1);
            size_t cl;

            if (ce == NULL) {
                ret = -ENOMEM;
                break;
            }
            cl = strip_aws_chunked(v, vl, ce);
            if (cl > 0)
                ret = hdr_add(&h, &nh, x->name, x->name_len, ce, cl);
            free(ce);
            continue;
        }
        if (stor_http_ieq(x->name, x->name_len, "content-type"))
            have_ct = true;
        if (x->name_len > 11 && strncasecmp(x->name, "x-amz-meta-", 11) == 0) {
            /* RFC 2047 encoded-words decoded before storing, as AWS */
            char *dv;
            size_t dl;

            ret = stor_s3_meta_decode(v, vl, &dv, &dl);
            if (ret == 0)
                ret = hdr_add(&h, &nh, x->name, x->name_len, dv, dl);
            free(dv);
            continue;
        }
        ret = hdr_add(&h, &nh, x->name, x->name_len, v, vl);
    }
    if (ret == 0 && !have_ct)
        ret = hdr_add(&h, &nh, "content-type", 12, "binary/octet-stream", 19);
    /* A checksum sent as a header is known now (and verified before the
     * commit); one sent as a trailer is added at the commit
     * (stor_s3_put_commit_run). */
    if (ret == 0 && r->ck_kind != STOR_CKSUM_NONE && !r->ck_from_trailer &&
        r->ck_expect[0] && r->op == S3_OP_PUT_OBJECT) {
        const char *cn = stor_s3_cksum_hdr(r->ck_kind);

        ret = hdr_add(&h, &nh, cn, strlen(cn), r->ck_expect,
                      strlen(r->ck_expect));
    }
    if (ret < 0) {
        stor_s3_hdrs_free(h, nh);
        return ret;
    }
    *out = h;
    *n = nh;
    return 0;
}

/* See s3_i.h. */
bool stor_s3_bucket_name_ok(const char *b)
{
    size_t n = strlen(b), i, dots = 0;
    bool all_digits_dots = true;

    if (n < 3 || n > 63)
        return false;
    for (i = 0; i < n; i++) {
        char c = b[i];

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '-'))
            return false;
        if (c == '.') {
            dots++;
            if (i > 0 && (b[i - 1] == '.' || b[i - 1] == '-'))
                return false;
        }
        if (c == '-' && i > 0 && b[i - 1] == '.')
            return false;
        if (!(c == '.' || (c >= '0' && c <= '9')))
            all_digits_dots = false;
    }
    if (!((b[0] >= 'a' && b[0] <= 'z') || (b[0] >= '0' && b[0] <= '9')))
        return false;
    if (!((b[n - 1] >= 'a' && b[n - 1] <= 'z') ||
          (b[n - 1] >= '0' && b[n - 1] <= '9')))
        return false;
    if (all_digits_dots && dots == 3)
        return false; /* looks like an IPv4 address */
    if (strncmp(b, "xn--", 4) == 0)
        return false;
    return true;
}

/* ---- buckets ---- */

/* GET / : ListBuckets, paged as AWS pages it: max-buckets (1..10000),
 * continuation-token (the last name of the page before: buckets sort by
 * name) and prefix. */
static void op_list_buckets(struct stor_s3_req *r)
{
    struct stor_bucket_info *bs = NULL;
    struct cm_buf *b = &r->http.resp.body;
    const char *mb = stor_s3_query(r, "max-buckets");
    const char *tok = stor_s3_query(r, "continuation-token");
    const char *pfx = stor_s3_query(r, "prefix");
    size_t n = 0, i, shown = 0, pl = pfx ? strlen(pfx) : 0;
    uint64_t max = 10000;
    struct stor_iam_owner o;
    const char *last = NULL;
    char t[CM_TIME_RFC3339_LEN + 1];
    int ret;

    if (mb && (stor_http_parse_u64(mb, strlen(mb), &max) < 0 || max < 1 ||
               max > 10000)) {
        stor_s3_error_msg(r, S3E_INVALID_ARGUMENT,
                          "max-buckets must be an integer from 1 to 10000");
        return;
    }
    ret = stor_bucket_list(r->s3->store, &bs, &n);
    if (ret < 0) {
        fail(r, ret);
        return;
    }
    stor_iam_owner(r, NULL, &o);
    x_fmt(b,
          S3_XML_DECL "<ListAllMyBucketsResult xmlns=\"" S3_XMLNS "\">"
                      "<Owner><ID>%s</ID><DisplayName>%s</DisplayName>"
                      "</Owner><Buckets>",
          o.id, o.name);
    for (i = 0; i < n; i++) {
        if (!stor_iam_bucket_visible(r, bs[i].name) ||
            stor_ver_is_internal_bucket(bs[i].name))
            continue; /* only what the caller may see (and never the
                       * system area) */
        if ((tok && tok[0] && strcmp(bs[i].name, tok) <= 0) ||
            (pl && strncmp(bs[i].name, pfx, pl) != 0))
            continue;
        if (shown == max)
            break; /* one more is there: the page ends at @last */
        time_iso(bs[i].created, 0, t);
        x_lit(b, "<Bucket>");
        x_str(b, "Name", bs[i].name, false);
        x_fmt(b, "<CreationDate>%s</CreationDate></Bucket>", t);
        last = bs[i].name;
        shown++;
    }
    x_lit(b, "</Buckets>");
    if (i < n && last)
        x_str(b, "ContinuationToken", last, false);
    if (pfx)
        x_str(b, "Prefix", pfx, false);
    x_lit(b, "</ListAllMyBucketsResult>");
    free(bs);
    xml_done(r);
}

/* CreateBucket of a bucket the caller's account owns, in us-east-1: 200,
 * and the bucket's ACL reset to the request's (AWS: "returns 200 OK and
 * resets the bucket access control lists"); its objects stay. */
static void op_create_bucket_exists(struct stor_s3_req *r)
{
    int ret = stor_iam_bucket_recreated(r);

    if (ret < 0) {
        fail(r, ret);
        return;
    }
    r->http.resp.status = 200;
    if (stor_resp_hdr(&r->http.resp, "Location", "/%s", r->bucket) < 0)
        stor_s3_error(r, S3E_INTERNAL);
}

/* Whether CreateBucket's optional CreateBucketConfiguration names the
 * server's one region, as AWS decides it at a regional endpoint (S3E_NONE
 * when it does; the error is set otherwise). us-east-1 takes no
 * LocationConstraint and refuses its own name (InvalidLocationConstraint);
 * any other region must be named. A single-region server cannot put the
 * bucket elsewhere, so another region is refused, never ignored. */
static enum stor_s3_err create_bucket_location(struct stor_s3_req *r)
{
    const char *region = r->s3->region;
    bool east = strcmp(region, "us-east-1") == 0;
    char loc[64], msg[256];
    enum stor_s3_err e;

    e = stor_s3_parse_create_bucket(r->body.data, r->body.len, loc,
                                    sizeof(loc));
    if (e == S3E_NONE && east && strcmp(loc, "us-east-1") == 0)
        e = S3E_INVALID_LOCATION;
    if (e == S3E_NONE && (east ? loc[0] != 0 : strcmp(loc, region) != 0)) {
        snprintf(msg, sizeof(msg),
                 "The %s location constraint is incompatible for the region "
                 "specific endpoint this request was sent to.",
                 loc[0] ? loc : "unspecified");
        stor_s3_error_msg(r, S3E_ILLEGAL_LOCATION, msg);
        return S3E_ILLEGAL_LOCATION;
    }
    if (e != S3E_NONE)
        stor_s3_error(r, e);
    return e;
}

/* PUT /bucket : CreateBucket (name checked on the loop; the optional
 * CreateBucketConfiguration must name the server's region). */
static void op_create_bucket(struct stor_s3_req *r)
{
    struct stor_iam_owner o;
    int ret;

    if (create_bucket_location(r) != S3E_NONE)
        return;
    ret = stor_bucket_create(r->s3->store, r->bucket);

    /* as S3: in us-east-1, re-creating a bucket one's account already owns
     * answers 200 and resets its ACL; other regions answer 409
     * BucketAlreadyOwnedByYou; another account's: 409 BucketAlreadyExists */
    if (ret == -STOR_EBUCKETEXISTS) {
        stor_iam_owner(r, r->bucket, &o);
        if (!o.callers) {
            stor_s3_error(r, S3E_BUCKET_TAKEN);
            return;
        }
        if (strcmp(r->s3->region, "us-east-1") == 0) {
            op_create_bucket_exists(r);
            return;
        }
    }
    if (ret < 0) {
        fail(r, ret);
        return;
    }
    stor_iam_bucket_changed(r, false);
    r->http.resp.status = 200;
    if (stor_resp_hdr(&r->http.resp, "Location", "/%s", r->bucket) < 0)
        stor_s3_error(r, S3E_INTERNAL);
}

/* 0 when the bucket exists, else sets the error and returns it. */
static int need_bucket(struct stor_s3_req *r)
{
    struct stor_bucket_info bi;
    int ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);

    if (ret < 0)
        fail(r, ret == -STOR_ENOKEY ? -STOR_ENOBUCKET : ret);
    return ret;
}

/* HEAD /bucket : 200 or 404 without a body. */
static void op_head_bucket(struct stor_s3_req *r)
{
    if (need_bucket(r) < 0)
        return;
    r->http.resp.status = 200;
    if (stor_resp_hdr(&r->http.resp, "x-amz-bucket-region", "%s",
                      r->s3->region) < 0)
        stor_s3_error(r, S3E_INTERNAL);
}

/* DELETE /bucket : 204, or BucketNotEmpty / NoSuchBucket. */
static void op_delete_bucket(struct stor_s3_req *r)
{
    /* with its companion of versions (versioning.c) */
    int ret = stor_ver_bucket_delete(r);

    if (ret < 0) {
        fail(r, ret == -STOR_ENOKEY ? -STOR_ENOBUCKET : ret);
        return;
    }
    stor_iam_bucket_changed(r, true);
    stor_lc_forget(r->s3->lc, r->bucket);
    r->http.resp.status = 204;
}

/* GET /bucket?location : the server's region, empty for us-east-1 (as
 * AWS answers for that region). */
static void op_bucket_location(struct stor_s3_req *r)
{
    const char *region = r->s3->region;

    if (need_bucket(r) < 0)
        return;
    x_lit(&r->http.resp.body,
          S3_XML_DECL "<LocationConstraint xmlns=\"" S3_XMLNS "\">");
    if (strcmp(region, "us-east-1") != 0)
        x_lit(&r->http.resp.body, region); /* checked: [a-z0-9-] */
    x_lit(&r->http.resp.body, "</LocationConstraint>");
    xml_done(r);
}

/* GET /bucket?versioning|acl|policy...: minimal truthful answers
 * (unversioned, root owns everything, no policy); others NotImplemented. */
static void op_bucket_subresource(struct stor_s3_req *r)
{
    struct cm_buf *b = &r->http.resp.body;

    if (need_bucket(r) < 0)
        return;
    if (stor_s3_has_query(r, "versioning")) {
        x_lit(b,
              S3_XML_DECL "<VersioningConfiguration xmlns=\"" S3_XMLNS "\"/>");
    } else if (stor_s3_has_query(r, "acl")) {
        x_lit(b, S3_XML_DECL
              "<AccessControlPolicy xmlns=\"" S3_XMLNS "\">"
              "<Owner><ID>" OWNER_ID "</ID><DisplayName>root</DisplayName>"
              "</Owner><AccessControlList><Grant><Grantee "
              "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
              "xsi:type=\"CanonicalUser\"><ID>" OWNER_ID "</ID>"
              "<DisplayName>root</DisplayName></Grantee>"
              "<Permission>FULL_CONTROL</Permission></Grant>"
              "</AccessControlList></AccessControlPolicy>");
    } else if (stor_s3_has_query(r, "policy")) {
        stor_s3_error(r, S3E_NO_SUCH_BUCKET_POLICY);
        return;
    } else {
        stor_s3_error(r, S3E_NOT_IMPLEMENTED);
        return;
    }
    xml_done(r);
}

#define ACL_XML                                                                \
    S3_XML_DECL "<AccessControlPolicy xmlns=\"" S3_XMLNS "\">"                 \
                "<Owner><ID>" OWNER_ID "</ID><DisplayName>root</DisplayName>"  \
                "</Owner><AccessControlList><Grant><Grantee "                  \
                "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "     \
                "xsi:type=\"CanonicalUser\"><ID>" OWNER_ID "</ID>"             \
                "<DisplayName>root</DisplayName></Grantee>"                    \
                "<Permission>FULL_CONTROL</Permission></Grant>"                \
                "</AccessControlList></AccessControlPolicy>"

/* The stored x-amz-tagging value of @in (the URL-encoded query string
 * "k1=v1&k2=v2" of the PutObject), or NULL. */
static const char *obj_tagging(const struct stor_obj_info *in)
{
    size_t i;

    for (i = 0; i < in->nhdrs; i++)
        if (strcmp(in->hdrs[i].name, "x-amz-tagging") == 0)
            return in->hdrs[i].value;
    return NULL;
}

/* Number of tags in the x-amz-tagging value @v (its non-empty members). */
static int tag_count(const char *v)
{
    int n = 0;

    while (*v) {
        size_t l = strcspn(v, "&");

        n += l > 0;
        v += l + (v[l] == '&');
    }
    return n;
}

/* Characters (UTF-8 code points) in @s: S3's tag limits count these. */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t i, c = 0;

    for (i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* Whether decoded tag key (@is_key) or value @s is one S3 accepts: UTF-8
 * (else S3E_TAGGING_HEADER, as S3 says of the header; the XML that lists
 * tags could not carry it either), a key of 1..128 characters, a value of
 * at most 256, no control character (S3E_INVALID_TAG). */
static enum stor_s3_err tag_part_check(const struct cm_buf *s, bool is_key)
{
    size_t i, c;

    if (!cm_utf8_valid(s->data ? s->data : "", s->len))
        return S3E_TAGGING_HEADER;
    c = utf8_chars(s->data ? s->data : "", s->len);
    if (is_key ? (c < 1 || c > 128) : c > 256)
        return S3E_INVALID_TAG;
    for (i = 0; i < s->len; i++)
        if ((unsigned char)s->data[i] < 0x20 || s->data[i] == 0x7f)
            return S3E_INVALID_TAG;
    return S3E_NONE;
}

/* Checks the x-amz-tagging value @v (PutObject, CreateMultipartUpload,
 * CopyObject with x-amz-tagging-directive REPLACE) as S3 does, before
 * anything is stored: URL-encoded "k=v&..." members with no duplicate key
 * (InvalidArgument), at most 10 (BadRequest), valid keys and values
 * (InvalidTag). What is stored here is later decoded by tagging_xml. */
static enum stor_s3_err tagging_check(const char *v, size_t n)
{
    struct cm_buf keys[10], val;
    const char *end = v + n;
    enum stor_s3_err e = S3E_NONE;
    size_t nk = 0, i;

    cm_buf_init(&val, CM_BUF_NOLIMIT);
    while (v < end && e == S3E_NONE) {
        const char *amp = memchr(v, '&', (size_t)(end - v));
        size_t l = amp ? (size_t)(amp - v) : (size_t)(end - v);
        const char *eq = memchr(v, '=', l);
        size_t kl = eq ? (size_t)(eq - v) : l;

        if (l == 0) {
            v++; /* "a=1&&b=2": an empty member is no tag */
            continue;
        }
        if (nk == CM_ARRAY_SIZE(keys)) {
            e = S3E_TOO_MANY_TAGS;
            break;
        }
        cm_buf_init(&keys[nk], CM_BUF_NOLIMIT);
        nk++;
        cm_buf_reset(&val);
        if (cm_uri_decode(&keys[nk - 1], v, kl, true) < 0 ||
            (eq && cm_uri_decode(&val, eq + 1, l - kl - 1, true) < 0)) {
            e = S3E_TAGGING_HEADER;
            break;
        }
        e = tag_part_check(&keys[nk - 1], true);
        if (e == S3E_NONE)
            e = tag_part_check(&val, false);
        for (i = 0; i + 1 < nk && e == S3E_NONE; i++)
            if (keys[i].len == keys[nk - 1].len &&
                memcmp(keys[i].data, keys[nk - 1].data, keys[i].len) == 0)
                e = S3E_TAGGING_HEADER;
        v += l + (amp != NULL);
    }
    for (i = 0; i < nk; i++)
        cm_buf_fini(&keys[i]);
    cm_buf_fini(&val);
    return e;
}

/* tagging_check of the request's x-amz-tagging, if any. The header twice
 * is refused too: both would be stored, but only the first listed, and
 * GET/HEAD would carry two x-amz-tagging-count headers. */
static enum stor_s3_err req_tagging_check(const struct stor_s3_req *r)
{
    size_t n = 0, i, seen = 0;
    const char *v = stor_s3_hdr(r, "x-amz-tagging", &n);

    for (i = 0; v && i < r->http.head.nhdrs; i++)
        seen += stor_http_ieq(r->http.hdrs[i].name, r->http.hdrs[i].name_len,
                              "x-amz-tagging");
    if (seen > 1)
        return S3E_TAGGING_HEADER;
    return v ? tagging_check(v, n) : S3E_NONE;
}

/* GET ?acl of an existing object (root owns everything, FULL_CONTROL;
 * routing sends ?acl to iam_api.c and ?tagging to tagging.c first). */
static void op_object_subresource(struct stor_s3_req *r)
{
    struct stor_obj_info info;
    int ret;

    memset(&info, 0, sizeof(info));
    ret = stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len, &info);
    if (ret < 0) {
        fail(r, ret);
        return;
    }
    x_lit(&r->http.resp.body, ACL_XML);
    stor_obj_info_fini(&info);
    xml_done(r);
}

/* ---- listing ---- */

/* Parses max-keys style parameters: default @def, capped at @cap. */
static int max_param(const struct stor_s3_req *r, const char *name, int def,
                     int cap, int *out)
{
    const char *v = stor_s3_query(r, name);
    uint64_t x;

    if (v == NULL) {
        *out = def;
        return 0;
    }
    if (stor_http_parse_u64(v, strlen(v), &x) < 0)
        return -EINVAL;
    *out = x > (uint64_t)cap ? cap : (int)x;
    return 0;
}

/* GET /bucket : ListObjects (v1: marker/NextMarker) and ListObjectsV2
 * (continuation-token = base64 of the last key or prefix returned,
 * start-after, fetch-owner); encoding-type=url encodes keys, prefixes and
 * markers. Objects and common prefixes count together toward max-keys. */
/* What op_list_objects answers. */
enum list_kind {
    LIST_V1,       /* ListObjects: marker, NextMarker with a delimiter */
    LIST_V2,       /* ListObjectsV2: continuation tokens, KeyCount */
    LIST_VERSIONS, /* ListObjectVersions of an unversioned bucket */
};

/* GET /bucket, ?list-type=2 and ?versions. Buckets are unversioned, so
 * ListObjectVersions lists each key's one version, "null" and latest, as
 * S3 does for a bucket that never had versioning; its version-id-marker
 * can only be "null" (the one version of key-marker, so the listing goes
 * on after that key) and needs a key-marker, as S3 says. */
static void op_list_objects(struct stor_s3_req *r, enum list_kind kind)
{
    bool v2 = kind == LIST_V2, vers = kind == LIST_VERSIONS;
    const char *prefix = stor_s3_query(r, "prefix");
    const char *delim = stor_s3_query(r, "delimiter");
    const char *enc = stor_s3_query(r, "encoding-type");
    const char *token = v2 ? stor_s3_query(r, "continuation-token") : NULL;
    const char *start = v2     ? stor_s3_query(r, "start-after")
                        : vers ? stor_s3_query(r, "key-marker")
                               : stor_s3_query(r, "marker");
    const char *vmark = vers ? stor_s3_query(r, "version-id-marker") : NULL;
    const char *after = start;
    const char *fo = v2 ? stor_s3_query(r, "fetch-owner") : NULL;
    /* as S3: V2 has no Owner unless fetch-owner=true (false is the
     * default; v1 always has it) */
    bool owner = fo && strcasecmp(fo, "true") == 0;
    struct stor_list_result res;
    struct cm_buf *b = &r->http.resp.body;
    char *tok = NULL;
    bool url;
    int maxk, ret;
    size_t i;

    if (vers && stor_ver_op_list(r))
        return; /* a bucket that has had versioning on */
    memset(&res, 0, sizeof(res));
    if (enc && strcmp(enc, "url") != 0) {
        stor_s3_error(r, S3E_INVALID_ARGUMENT);
        return;
    }
    url = enc != NULL;
    if (vmark && vmark[0] &&
        (strcmp(vmark, "null") != 0 || start == NULL || start[0] == 0)) {
        stor_s3_error(r, S3E_INVALID_ARGUMENT);
        return;
    }
    if (max_param(r, "max-keys", LIST_MAX_KEYS, LIST_MAX_KEYS, &maxk) < 0) {
        stor_s3_error(r, S3E_INVALID_ARGUMENT);
        return;
    }
    if (delim && delim[0] == 0)
        delim = NULL;
    if (prefix && prefix[0] == 0)
        prefix = NULL;
    if (token && token[0]) { /* as S3: an empty token is no token */
        size_t tl = strlen(token);
        long n;

        tok = malloc(tl + 4);
        if (tok == NULL) {
            stor_s3_error(r, S3E_INTERNAL);
            return;
        }
        n = cm_base64_decode(token, tl, (uint8_t *)tok);
        if (n <= 0) {
            free(tok);
            stor_s3_error(r, S3E_INVALID_ARGUMENT);
            return;
        }
        tok[n] = 0;
        after = tok;
    }
    if (maxk > 0) {
        ret =
            stor_obj_list(r->s3->store, r->bucket, prefix, delim,
                          after && after[0] ? after : NULL, (size_t)maxk, &res);
        if (ret < 0) {
            free(tok);
            fail(r, ret == -STOR_ENOKEY ? -STOR_ENOBUCKET : ret);
            return;
        }
    } else if (need_bucket(r) < 0) {
        free(tok);
        return;
    }
    if (vers)
        x_lit(b, S3_XML_DECL "<ListVersionsResult xmlns=\"" S3_XMLNS "\">");
    else
        x_lit(b, S3_XML_DECL "<ListBucketResult xmlns=\"" S3_XMLNS "\">");
    x_str(b, "Name", r->bucket, false);
    /* ListObjects (v1) echoes its Prefix as given even with
     * encoding-type=url, as AWS does (botocore decodes it only in v2 and
     * ListObjectVersions; s3-tests test_bucket_list_prefix_unreadable) */
    x_str(b, "Prefix", prefix, url && (v2 || vers));
    if (vers) {
        x_str(b, "KeyMarker", start, url);
        x_str(b, "VersionIdMarker", vmark, false);
    } else if (v2) {
        if (token)
            x_str(b, "ContinuationToken", token, false);
        if (start)
            x_str(b, "StartAfter", start, url);
        x_fmt(b, "<KeyCount>%zu</KeyCount>", res.nobjs + res.nprefixes);
    } else {
        x_str(b, "Marker", start, url);
    }
    x_fmt(b, "<MaxKeys>%d</MaxKeys>", maxk);
    if (delim)
        x_str(b, "Delimiter", delim, url);
    x_fmt(b, "<IsTruncated>%s</IsTruncated>", res.truncated ? "true" : "false");
    if (res.truncated && res.next_marker) {
        if (v2) {
            size_t ml = strlen(res.next_marker);
            char *t = malloc(CM_BASE64_LEN(ml) + 1);

            if (t) {
                cm_base64_encode(res.next_marker, ml, t);
                x_str(b, "NextContinuationToken", t, false);
                free(t);
            } else {
                x_fail(b);
            }
        } else if (vers) {
            x_str(b, "NextKeyMarker", res.next_marker, url);
            x_lit(b, "<NextVersionIdMarker>null</NextVersionIdMarker>");
        } else if (delim) {
            x_str(b, "NextMarker", res.next_marker, url);
        }
    }
    if (url)
        x_lit(b, "<EncodingType>url</EncodingType>");
    for (i = 0; i < res.nobjs; i++) {
        const struct stor_list_entry *e = &res.objs[i];
        char t[CM_TIME_RFC3339_LEN + 1];

        time_iso(e->mtime, e->mtime_ms, t);
        x_lit(b, vers ? "<Version>" : "<Contents>");
        x_elem(b, "Key", e->key, e->key_len, url);
        if (vers)
            x_lit(b, "<VersionId>null</VersionId><IsLatest>true</IsLatest>");
        /* appends, not a printf: this runs once per listed key */
        x_lit(b, "<LastModified>");
        x_lit(b, t);
        x_lit(b, "</LastModified><ETag>&quot;");
        x_lit(b, e->etag);
        x_lit(b, "&quot;</ETag><Size>");
        x_u64(b, e->size);
        x_lit(b, "</Size>");
        if (!v2 || owner)
            x_lit(b, "<Owner><ID>" OWNER_ID "</ID><DisplayName>root"
                     "</DisplayName></Owner>");
        x_lit(b, vers ? "<StorageClass>STANDARD</StorageClass></Version>"
                      : "<StorageClass>STANDARD</StorageClass></Contents>");
    }
    for (i = 0; i < res.nprefixes; i++) {
        x_lit(b, "<CommonPrefixes>");
        x_str(b, "Prefix", res.prefixes[i], url);
        x_lit(b, "</CommonPrefixes>");
    }
    x_lit(b, vers ? "</ListVersionsResult>" : "</ListBucketResult>");
    stor_list_result_fini(&res);
    free(tok);
    xml_done(r);
}

/* ---- objects: conditionals and ranges ---- */

/* true when the If-Match style list @v (comma separated, quoted or not,
 * or '*') contains @etag. */
static bool etag_matches(const char *v, size_t n, const char *etag)
{
    size_t el = strlen(etag);
    const char *p = v, *end = v + n;

    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *s = p;

        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e - s >= 2 && s[0] == 'W' && s[1] == '/')
            s += 2;
        if (e - s >= 2 && *s == '"' && e[-1] == '"') {
            s++;
            e--;
        }
        if ((e - s == 1 && *s == '*') ||
            ((size_t)(e - s) == el && memcmp(s, etag, el) == 0))
            return true;
        p = comma ? comma + 1 : end;
    }
    return false;
}

/* Evaluates the conditional headers (prefix "" or "x-amz-copy-source-")
 * against @info. S3E_NONE, S3E_PRECONDITION_FAILED or S3E_NOT_MODIFIED. */
/* Request header @pfx@suffix (value and length in *n), or NULL. GETs pass
 * an empty @pfx: no formatting then (this runs on every GET). */
static const char *cond_hdr(const struct stor_s3_req *r, const char *pfx,
                            const char *suffix, size_t *n)
{
    char name[64];

    if (*pfx == 0)
        return stor_s3_hdr(r, suffix, n);
    snprintf(name, sizeof(name), "%s%s", pfx, suffix);
    return stor_s3_hdr(r, name, n);
}

static enum stor_s3_err conditionals(const struct stor_s3_req *r,
                                     const struct stor_obj_info *info,
                                     const char *pfx, bool allow_304)
{
    const char *im, *inm, *ims, *ius;
    size_t imn = 0, inmn = 0, imsn = 0, iusn = 0;
    time_t t, now = time(NULL);

    im = cond_hdr(r, pfx, "if-match", &imn);
    inm = cond_hdr(r, pfx, "if-none-match", &inmn);
    ims = cond_hdr(r, pfx, "if-modified-since", &imsn);
    ius = cond_hdr(r, pfx, "if-unmodified-since", &iusn);

    /* dates in any HTTP-date form; one that does not parse is ignored */
    if (im && !etag_matches(im, imn, info->etag))
        return S3E_PRECONDITION_FAILED;
    if (!im && ius && cm_time_parse_http_any(ius, iusn, now, &t) == 0 &&
        info->mtime > t)
        return S3E_PRECONDITION_FAILED;
    if (inm && etag_matches(inm, inmn, info->etag))
        return allow_304 ? S3E_NOT_MODIFIED : S3E_PRECONDITION_FAILED;
    if (!inm && ims && cm_time_parse_http_any(ims, imsn, now, &t) == 0 &&
        info->mtime <= t)
        return allow_304 ? S3E_NOT_MODIFIED : S3E_PRECONDITION_FAILED;
    return S3E_NONE;
}

/* If-Range (RFC 9110 section 13.1.5): true when the Range may be honoured
 * - no If-Range, or its validator matches the object: an entity tag by
 * strong comparison (a weak "W/" tag never matches), an HTTP-date (any of
 * the three forms) when it equals Last-Modified exactly. A value that is
 * neither (an unparseable date) does not match: the whole object is sent,
 * which is always a correct answer. */
static bool if_range_ok(const struct stor_s3_req *r,
                        const struct stor_obj_info *info)
{
    size_t n = 0, el = strlen(info->etag);
    const char *v = stor_s3_hdr(r, "if-range", &n);
    time_t t;

    if (v == NULL)
        return true;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"')
        return n - 2 == el && memcmp(v + 1, info->etag, el) == 0;
    if (n >= 2 && v[0] == 'W' && v[1] == '/')
        return false;
    if (cm_time_parse_http_any(v, n, time(NULL), &t) == 0)
        return t == info->mtime;
    /* an unquoted tag, as some clients send ETags */
    return n == el && memcmp(v, info->etag, el) == 0;
}

/* Parses "bytes=a-b" / "bytes=a-" / "bytes=-n" against @size into the
 * inclusive range [*first, *last]. 1 when a range applies, 0 to send the
 * whole object (absent or ignorable header), -ERANGE when unsatisfiable. */
static int parse_range(const char *v, size_t n, uint64_t size, uint64_t *first,
                       uint64_t *last)
{
    const char *dash, *end = v + n;
    uint64_t a, b;

    if (n < 7 || strncasecmp(v, "bytes=", 6) != 0)
        return 0;
    v += 6;
    if (memchr(v, ',', (size_t)(end - v)))
        return 0; /* multiple ranges: S3 ignores, sends the whole object */
    dash = memchr(v, '-', (size_t)(end - v));
    if (dash == NULL)
        return 0;
    if (dash == v) { /* suffix */
        if (stor_http_parse_u64(dash + 1, (size_t)(end - dash - 1), &b) < 0)
            return 0;
        if (b == 0 || size == 0)
            return -ERANGE;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return 1;
    }
    if (stor_http_parse_u64(v, (size_t)(dash - v), &a) < 0)
        return 0;
    if (dash + 1 == end) {
        b = UINT64_MAX;
    } else if (stor_http_parse_u64(dash + 1, (size_t)(end - dash - 1), &b) <
                   0 ||
               b < a) {
        return 0;
    }
    if (a >= size)
        return -ERANGE;
    *first = a;
    *last = b >= size ? size - 1 : b;
    return 1;
}

/* ?partNumber=@n (already 1..10000): the bytes of part n - its position
 * in a multipart object's completed list - as [*first, *first + *len);
 * a simple object has one part, the whole object. S3E_INVALID_PART_NUMBER
 * past the last part. */
static enum stor_s3_err part_range(const struct stor_obj_info *info, uint64_t n,
                                   uint64_t *first, uint64_t *len)
{
    uint64_t off = 0;
    int i;

    if (info->nparts == 0) {
        if (n != 1)
            return S3E_INVALID_PART_NUMBER;
        *first = 0;
        *len = info->size;
        return S3E_NONE;
    }
    if (n > (uint64_t)info->nparts)
        return S3E_INVALID_PART_NUMBER;
    if (info->part_size == NULL)
        return S3E_INTERNAL; /* out of memory in the object layer */
    for (i = 0; i < (int)n - 1; i++)
        off += info->part_size[i];
    *first = off;
    *len = info->part_size[n - 1];
    return S3E_NONE;
}

/* GET/HEAD ?partNumber=N of a multipart object with x-amz-checksum-mode:
 * part N's own checksum and the upload's checksum type, as S3 answers. */
static int part_checksum(struct stor_s3_req *r, const struct stor_obj_info *in)
{
    const char *pn = stor_s3_query(r, "partNumber"), *joined = NULL, *cm;
    char comp[128], v[STOR_PART_HVAL_MAX];
    uint64_t num;
    size_t n = 0;
    bool fo;
    enum stor_cksum k;

    cm = stor_s3_hdr(r, "x-amz-checksum-mode", &n);
    if (pn == NULL || cm == NULL || !stor_http_ieq(cm, n, "ENABLED") ||
        stor_http_parse_u64(pn, strlen(pn), &num) < 0 || num < 1 ||
        num > (uint64_t)in->nparts)
        return 0;
    k = stor_s3_cksum_of_mpu(in->hdrs, in->nhdrs, in->nparts, &joined, comp,
                             sizeof(comp), &fo);
    if (k == STOR_CKSUM_NONE)
        return 0;
    stor_s3_cksum_part(joined, (size_t)num - 1, v, sizeof(v));
    if (v[0] == 0)
        return 0;
    if (stor_resp_hdr(&r->http.resp, stor_s3_cksum_hdr(k), "%s", v) < 0)
        return -ENOMEM;
    return stor_resp_hdr(&r->http.resp, "x-amz-checksum-type", "%s",
                         fo ? "FULL_OBJECT" : "COMPOSITE");
}

/* Adds user metadata header @name with stored value @v to @rs: as it is
 * when printable US-ASCII, else as an RFC 2047 encoded-word (mime.h), as
 * AWS answers it. 0 or -ENOMEM. */
static int meta_header(struct stor_resp *rs, const char *name, const char *v)
{
    size_t n = strlen(v);
    char *e;
    int ret;

    if (!stor_s3_meta_needs_encoding(v, n))
        return stor_resp_hdr(rs, name, "%s", v);
    e = malloc(STOR_S3_META_ENC_LEN(n));
    if (e == NULL)
        return -ENOMEM;
    stor_s3_meta_encode(v, n, e);
    ret = stor_resp_hdr(rs, name, "%s", e);
    free(e);
    return ret;
}

/* Adds the object's headers (ETag, Last-Modified, stored headers with
 * response-* overrides) to the response. */
static int object_headers(struct stor_s3_req *r, const struct stor_obj_info *in,
                          bool full)
{
    static const char *const overrides[][2] = {
        {"response-content-type", "content-type"},
        {"response-content-language", "content-language"},
        {"response-expires", "expires"},
        {"response-cache-control", "cache-control"},
        {"response-content-disposition", "content-disposition"},
        {"response-content-encoding", "content-encoding"},
    };
    struct stor_resp *rs = &r->http.resp;
    char lm[CM_TIME_HTTP_LEN + 1];
    const char *cm;
    size_t i, j;
    bool ck_on = false, any_override = false, has_vid = false;
    int ret;

    /* one pass over the query instead of a lookup per override name */
    for (i = 0; i < r->nquery && !any_override; i++)
        any_override = strncmp(r->query[i].name, "response-", 9) == 0;
    cm = stor_s3_hdr(r, "x-amz-checksum-mode", &i);
    if (cm && stor_http_ieq(cm, i, "ENABLED") && full)
        ck_on = true;
    cm_time_http(in->mtime, lm);
    ret = stor_resp_hdr(rs, "ETag", "\"%s\"", in->etag);
    if (ret == 0)
        ret = stor_resp_hdr(rs, "Last-Modified", "%s", lm);
    if (ret == 0)
        ret = stor_resp_hdr(rs, "Accept-Ranges", "bytes");
    for (i = 0; i < in->nhdrs && ret == 0; i++) {
        const char *name = in->hdrs[i].name;
        bool skip = false;

        if (strcmp(name, "x-amz-tagging") == 0) {
            /* S3 answers with the count (none for no tags: an empty
             * x-amz-tagging); the tags via ?tagging */
            int tc = tag_count(in->hdrs[i].value);

            if (tc > 0)
                ret = stor_resp_hdr(rs, "x-amz-tagging-count", "%d", tc);
            continue;
        }
        if (strcmp(name, STOR_HDR_VERSION_ID) == 0) {
            ret =
                stor_resp_hdr(rs, "x-amz-version-id", "%s", in->hdrs[i].value);
            has_vid = true;
            continue;
        }
        if (strncmp(name, "x-ecfs-", 7) == 0)
            continue; /* the store's own (STOR_HDR_UPLOAD_ID) */
        if (strncmp(name, "x-amz-checksum-", 15) == 0) {
            if (!ck_on)
                continue;
            /* the checksum of the whole body, as S3 calls it */
            ret = stor_resp_hdr(rs, "x-amz-checksum-type", "FULL_OBJECT");
            if (ret < 0)
                break;
        }
        for (j = 0; j < CM_ARRAY_SIZE(overrides) && any_override; j++)
            if (strcmp(name, overrides[j][1]) == 0 &&
                stor_s3_query(r, overrides[j][0]))
                skip = true;
        if (skip)
            continue;
        if (strncmp(name, "x-amz-meta-", 11) == 0)
            ret = meta_header(rs, name, in->hdrs[i].value);
        else
            ret = stor_resp_hdr(rs, name, "%s", in->hdrs[i].value);
    }
    for (j = 0; j < CM_ARRAY_SIZE(overrides) && ret == 0 && any_override; j++) {
        const char *v = stor_s3_query(r, overrides[j][0]);

        if (v && strpbrk(v, "\r\n") == NULL)
            ret = stor_resp_hdr(rs, overrides[j][1], "%s", v);
    }
    if (ret == 0 && ck_on && in->nparts > 0) {
        char comp[128];
        bool fo;
        enum stor_cksum k = stor_s3_cksum_of_mpu(
            in->hdrs, in->nhdrs, in->nparts, NULL, comp, sizeof(comp), &fo);

        /* a FULL_OBJECT one is a stored x-amz-checksum-* (above) */
        if (k != STOR_CKSUM_NONE && !fo)
            ret = stor_resp_hdr(rs, stor_s3_cksum_hdr(k), "%s", comp);
        if (ret == 0 && k != STOR_CKSUM_NONE && !fo)
            ret = stor_resp_hdr(rs, "x-amz-checksum-type", "COMPOSITE");
    }
    if (ret == 0 && !full && in->nparts > 0)
        ret = part_checksum(r, in);
    /* an object written before versioning was on is the "null" version */
    if (ret == 0 && !has_vid &&
        stor_ver_state_peek(r->s3->ver, r->bucket) != STOR_VER_OFF)
        ret = stor_resp_hdr(rs, "x-amz-version-id", "null");
    return ret;
}

/* Bytes per GET stream read: whole stripes (what costs least per byte in
 * the store), as many as fit in STREAM_MAX, so a big object takes few
 * worker round trips while memory stays at two such buffers. */
static size_t stream_chunk(const struct stor_get *g)
{
    size_t pref = stor_get_preferred_chunk(g);

    if (pref == 0)
        return STREAM_MIN;
    if (pref >= STREAM_MAX)
        return STREAM_MAX;
    pref *= STREAM_MAX / pref;
    return pref < STREAM_MIN ? STREAM_MIN : pref;
}

/* GET/HEAD /bucket/key : conditionals (304/412), one range (206/416),
 * stored headers and response-* overrides. Bodies that fit one read are
 * returned whole from here; larger ones hand the reader to the stream
 * (the transport's stream_fill hook) with the first buffer already
 * filled. */
static void op_get_object(struct stor_s3_req *r)
{
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    int ret;

    stor_lc_warm(r->s3->lc, r->bucket); /* for x-amz-expiration */
    if (stor_s3_query(r, "versionId") && stor_ver_op_get(r))
        return; /* by version id (versioning.c) */
    memset(&info, 0, sizeof(info));
    if (r->http.is_head)
        ret = stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len, &info);
    else
        ret = stor_get_open(r->s3->store, r->bucket, r->key, r->key_len, &info,
                            &g);
    if (ret == -STOR_ENOKEY && stor_ver_op_get(r))
        return; /* its current version is a delete marker */
    if (ret < 0) {
        fail(r, ret);
        /* as S3 (and RGW): a missing key is no delete marker */
        if (ret == -STOR_ENOKEY &&
            stor_resp_hdr(&r->http.resp, "x-amz-delete-marker", "false") < 0)
            stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    if (stor_get_index_body(g)) /* handed over by the loop, e.g. cold index */
        stor_metrics_get_loop(r->s3->metrics, STOR_GET_WORKER_INDEX);
    stor_s3_get_object_reply(r, &info, g);
}

/* See s3_i.h. Never blocks when @g is inline (or NULL): the event loop
 * calls it for GETs whose bytes it read itself (s3.c). */
void stor_s3_get_object_reply(struct stor_s3_req *r,
                              struct stor_obj_info *opened, struct stor_get *g)
{
    struct stor_obj_info info = *opened; /* we own its contents now */
    struct stor_resp *rs = &r->http.resp;
    uint64_t first = 0, last = 0, len = 0, pnum = 0;
    const char *rv, *pn;
    size_t rn;
    enum stor_s3_err e;
    int ret, ranged = 0;

    memset(opened, 0, sizeof(*opened));
    stor_ver_info_fix(&info); /* a moved version's ETag, Last-Modified */
    pn = stor_s3_query(r, "partNumber");
    if (pn) {
        if (stor_http_parse_u64(pn, strlen(pn), &pnum) < 0 || pnum < 1 ||
            pnum > STOR_MAX_PARTS) {
            stor_s3_error(r, S3E_INVALID_ARGUMENT);
            goto out;
        }
        if (stor_s3_hdr(r, "range", &rn)) {
            stor_s3_error(r, S3E_PART_AND_RANGE);
            goto out;
        }
    }
    e = stor_sse_read_open(r, &info, false, &r->sse);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        goto out;
    }
    e = conditionals(r, &info, "", true);
    if (e == S3E_NOT_MODIFIED) {
        stor_s3_error(r, e);
        ret = stor_resp_hdr(rs, "ETag", "\"%s\"", info.etag);
        goto out;
    }
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        goto out;
    }
    rv = pn ? NULL : stor_s3_hdr(r, "range", &rn);
    if (rv && !if_range_ok(r, &info))
        rv = NULL; /* If-Range failed: 200 with the whole object */
    if (pn) {
        e = part_range(&info, pnum, &first, &len);
        if (e != S3E_NONE) {
            stor_s3_error(r, e);
            goto out;
        }
        ranged = 1;
    } else if (rv) {
        ranged = parse_range(rv, rn, info.size, &first, &last);
        if (ranged < 0) {
            stor_s3_error(r, S3E_INVALID_RANGE);
            if (stor_resp_hdr(rs, "Content-Range", "bytes */%llu",
                              (unsigned long long)info.size) < 0)
                stor_s3_error(r, S3E_INTERNAL);
            goto out;
        }
        len = ranged ? last - first + 1 : info.size;
    } else {
        len = info.size;
    }
    if (!ranged)
        first = 0;
    last = len ? first + len - 1 : first;
    ranged = ranged && len > 0; /* an empty object or part: 200, no range */
    rs->status = ranged ? 206 : 200;
    ret = object_headers(r, &info, !ranged);
    if (ret == 0)
        ret = stor_sse_resp_headers(r->sse, rs);
    if (ret == 0) /* only from the cache: this may run on the loop */
        ret = stor_lc_expiration(r->s3->lc, r->bucket, r->key, r->key_len,
                                 &info, rs);
    if (ret == 0 && ranged)
        ret = stor_resp_hdr(rs, "Content-Range", "bytes %llu-%llu/%llu",
                            (unsigned long long)first, (unsigned long long)last,
                            (unsigned long long)info.size);
    if (ret == 0 && pn && info.nparts > 0)
        ret = stor_resp_hdr(rs, "x-amz-mp-parts-count", "%d", info.nparts);
    if (ret < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        goto out;
    }
    rs->has_length = true;
    rs->content_length = len;
    if (r->http.is_head || len == 0) {
        rs->no_body = r->http.is_head;
        goto out;
    }
    if (stor_get_zc_bytes(g, NULL)) {
        /* a zero-copy reader (s3.c get_fast): its checked bytes wait in the
         * connection's pipes; only a plain whole-object GET is made one.
         * An encrypted object's stored bytes are never sent as stored: the
         * only ones allowed are the body cache's (s3.c get_zcached), which
         * holds an SSE-S3 object's opened plaintext */
        size_t zfirst, all = stor_get_zc_bytes(g, &zfirst);

        if ((r->sse && !(r->zc_opened && stor_sse_is_s3(r->sse))) || ranged ||
            len != info.size || all < len || (zfirst != all && zfirst >= len)) {
            fail(r, -EIO);
            goto out;
        }
        rs->zc = true;
        rs->zc_left = (size_t)len;
        rs->zc_first = zfirst == all ? (size_t)len : zfirst;
        rs->zc_pad = all - (size_t)len;
        rs->zc_pad_pipe = zfirst == all ? 0 : 1;
        goto out;
    }
    rs->schunk = stream_chunk(g);
    rs->sbuf[0] = stor_get_inline_take(g);
    if (rs->sbuf[0] && r->sse) {
        /* an encrypted object's stored bytes are ciphertext, never sent
         * as stored: the range's packages are opened in the reader's own
         * buffer, then sent from it (no 1 MiB copy or allocation) */
        ret = stor_sse_open_inplace(r->sse, (uint8_t *)rs->sbuf[0], first, len);
        if (ret < 0) {
            free(rs->sbuf[0]);
            rs->sbuf[0] = NULL;
            fail(r, ret);
            goto out;
        }
    }
    if (rs->sbuf[0]) {
        /* Inline: the transport sends the reader's own body buffer (a
         * one-buffer stream with nothing left to read), so the bytes are
         * not copied into rs->body and again into the output buffer
         * (memmove was 7 % of a 320 KiB GET's CPU). */
        rs->ssent = (size_t)first;
        rs->slen[0] = (size_t)(first + len);
        rs->filled[0] = true;
        rs->cur = 0;
        rs->rd_off = rs->rd_end = 0;
        rs->stream = true;
        goto out;
    }
    if (len <= rs->schunk) {
        /* Small: read it all here and release the reader now. */
        uint64_t got = 0;

        if (cm_buf_reserve(&rs->body, (size_t)len) < 0) {
            stor_s3_error(r, S3E_INTERNAL);
            goto out;
        }
        while (got < len) {
            ssize_t n =
                stor_sse_get_read(r->sse, g, first + got, rs->body.data + got,
                                  (size_t)(len - got));

            if (n <= 0) {
                fail(r, n < 0 ? (int)n : -EIO);
                goto out;
            }
            got += (uint64_t)n;
        }
        rs->body.len = (size_t)len;
        rs->has_length = false;
        goto out;
    }
    rs->sbuf[0] = malloc(rs->schunk);
    if (rs->sbuf[0] == NULL) {
        stor_s3_error(r, S3E_INTERNAL);
        goto out;
    }
    {
        size_t want = rs->schunk, got = 0;

        while (got < want) {
            ssize_t n = stor_sse_get_read(r->sse, g, first + got,
                                          rs->sbuf[0] + got, want - got);

            if (n <= 0) {
                fail(r, n < 0 ? (int)n : -EIO);
                goto out;
            }
            got += (size_t)n;
        }
        rs->slen[0] = got;
    }
    rs->filled[0] = true;
    rs->cur = 0;
    rs->rd_off = first + rs->slen[0];
    rs->rd_end = last + 1;
    rs->stream = true;
    r->get = g; /* the stream owns the reader now */
    g = NULL;
out:
    if (g)
        stor_get_close(g);
    stor_obj_info_fini(&info);
}

/* DELETE /bucket/key : 204, also for a key that does not exist. */
static void op_delete_object(struct stor_s3_req *r)
{
    int ret;

    if (stor_ver_op_delete(r)) { /* versioned bucket or ?versionId */
        if (r->http.resp.status == 204)
            stor_iam_object_written(r, r->key, r->key_len, true);
        return;
    }
    ret = stor_obj_delete(r->s3->store, r->bucket, r->key, r->key_len);
    if (ret < 0 && ret != -STOR_ENOKEY) {
        fail(r, ret);
        return;
    }
    stor_iam_object_written(r, r->key, r->key_len, true);
    r->http.resp.status = 204;
}

/* POST /bucket?delete : DeleteObjects (needs Content-MD5 or a checksum;
 * Quiet lists only errors). */
static void op_delete_objects(struct stor_s3_req *r)
{
    struct stor_s3_del_key *keys = NULL;
    struct cm_buf *b = &r->http.resp.body;
    size_t n = 0, i;
    bool quiet = false;
    int ret;

    if (!r->has_md5 && r->ck_kind == STOR_CKSUM_NONE) {
        stor_s3_error(r, S3E_INVALID_REQUEST);
        return;
    }
    ret = stor_s3_parse_delete(r->body.data, r->body.len, &keys, &n, &quiet);
    if (ret < 0) {
        stor_s3_error(r, ret == -ENOMEM ? S3E_INTERNAL : S3E_MALFORMED_XML);
        return;
    }
    if (need_bucket(r) < 0)
        goto out;
    x_lit(b, S3_XML_DECL "<DeleteResult xmlns=\"" S3_XMLNS "\">");
    for (i = 0; i < n; i++) {
        enum stor_s3_err e = S3E_NONE;
        char vid[24] = "";
        bool dm = false;

        if (keys[i].bad_version ||
            (keys[i].version[0] && !stor_ver_id_ok(keys[i].version)))
            e = S3E_INVALID_VERSION_ID;
        if (e == S3E_NONE && keys[i].bad_cond)
            e = S3E_INVALID_ARGUMENT;
        if (e == S3E_NONE && !stor_iam_allowed(r, STOR_ACT_DELETE_OBJECT,
                                               keys[i].key, keys[i].key_len))
            e = S3E_ACCESS_DENIED; /* decided per key, as S3 does */
        ret =
            e != S3E_NONE || keys[i].key_len > STOR_MAX_KEY_LEN
                ? -ENAMETOOLONG
                : stor_ver_delete_key(r, keys[i].key, keys[i].key_len,
                                      keys[i].version, &keys[i].cond, &dm, vid);
        if (ret == 0 || ret == -STOR_ENOKEY)
            stor_iam_object_written(r, keys[i].key, keys[i].key_len, true);
        if (ret == 0 || ret == -STOR_ENOKEY) {
            if (quiet)
                continue;
            x_lit(b, "<Deleted>");
            x_elem(b, "Key", keys[i].key, keys[i].key_len, false);
            if (keys[i].version[0])
                x_str(b, "VersionId", keys[i].version, false);
            if (dm)
                x_lit(b, "<DeleteMarker>true</DeleteMarker>");
            if (dm && !keys[i].version[0])
                x_str(b, "DeleteMarkerVersionId", vid, false);
            x_lit(b, "</Deleted>");
        } else {
            const struct stor_s3_err_info *ei = stor_s3_err_info(
                e != S3E_NONE ? e : stor_s3_err_from_errno(ret));

            x_lit(b, "<Error>");
            x_elem(b, "Key", keys[i].key, keys[i].key_len, false);
            x_fmt(b, "<Code>%s</Code><Message>%s</Message></Error>", ei->code,
                  ei->message);
        }
    }
    x_lit(b, "</DeleteResult>");
    xml_done(r);
out:
    stor_s3_del_keys_free(keys, n);
}

/* ---- PUT (streamed by s3.c) ---- */

/* See s3_i.h: runs before the body is read. */
void stor_s3_put_begin_run(struct stor_s3_req *r)
{
    struct stor_hdr *h = NULL;
    size_t nh = 0;
    int64_t size = r->decoded_len == UINT64_MAX ? -1 : (int64_t)r->decoded_len;
    int ret;

    if (r->op == S3_OP_UPLOAD_PART) {
        const char *pn = stor_s3_query(r, "partNumber");
        enum stor_s3_err te;
        uint64_t part;

        if (stor_http_parse_u64(pn, strlen(pn), &part) < 0 || part < 1 ||
            part > STOR_MAX_PARTS) {
            stor_s3_error(r, S3E_INVALID_ARGUMENT);
            return;
        }
        /* a part of an encrypted upload is sealed under its own key */
        te = stor_sse_part_begin(r, stor_s3_query(r, "uploadId"), &r->sse);
        if (te != S3E_NONE) {
            stor_s3_error(r, te);
            return;
        }
        ret = stor_mpu_part_begin(r->s3->store, r->bucket, r->key, r->key_len,
                                  stor_s3_query(r, "uploadId"), (int)part, size,
                                  &r->put);
        if (ret < 0)
            fail(r, ret);
        return;
    }
    /* conditional writes: If-None-Match: * and If-Match. Checked here (no
     * body is read for a write that cannot win) and again at commit under
     * the key's lock (of concurrent conditional writers one wins). */
    size_t n1 = 0, n2 = 0;
    const char *inm = stor_s3_hdr(r, "if-none-match", &n1);
    const char *im = stor_s3_hdr(r, "if-match", &n2);
    char cond_etag[STOR_ETAG_MAX] = "";
    enum stor_s3_err te = req_tagging_check(r);

    if (te != S3E_NONE) {
        stor_s3_error(r, te);
        return;
    }
    {
        if (inm || im) {
            struct stor_obj_info info;

            memset(&info, 0, sizeof(info));
            ret = stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len,
                                &info);
            if (ret < 0 && ret != -STOR_ENOKEY) {
                fail(r, ret);
                return;
            }
            if ((ret == 0 && inm && etag_matches(inm, n1, info.etag)) ||
                (im && (ret < 0 || !etag_matches(im, n2, info.etag)))) {
                stor_obj_info_fini(&info);
                stor_s3_error(r, ret < 0 && im ? S3E_NO_SUCH_KEY
                                               : S3E_PRECONDITION_FAILED);
                return;
            }
            if (im) /* it matched: the commit needs this same version */
                snprintf(cond_etag, sizeof(cond_etag), "%s", info.etag);
            stor_obj_info_fini(&info);
        }
    }
    te = stor_sse_write_begin(r, &r->sse);
    if (te != S3E_NONE) {
        stor_s3_error(r, te);
        return;
    }
    ret = stor_s3_req_obj_hdrs(r, &h, &nh);
    if (ret == 0)
        ret = stor_put_begin(r->s3->store, r->bucket, r->key, r->key_len, size,
                             h, nh, &r->put);
    if (ret == 0 && r->sse)
        ret = stor_sse_put_headers(r->sse, r->put);
    if (ret == 0 && (cond_etag[0] || (inm && n1 == 1 && inm[0] == '*')))
        ret = stor_put_set_condition(r->put, inm && n1 == 1 && inm[0] == '*',
                                     cond_etag[0] ? cond_etag : NULL);
    stor_s3_hdrs_free(h, nh);
    if (ret < 0)
        fail(r, ret);
}

/* See s3_i.h: the body is complete and verified. */
void stor_s3_put_commit_run(struct stor_s3_req *r)
{
    struct stor_obj_info info;
    struct stor_put *p = r->put;
    char vid[24] = "";
    const uint8_t *md5;
    int ret;

    if (r->put_err < 0) {
        fail(r, r->put_err);
        return;
    }
    memset(&info, 0, sizeof(info));
    r->put = NULL; /* commit frees it, success or not */
    if ((r->op == S3_OP_PUT_OBJECT && r->ck_from_trailer && r->ck_value[0]) ||
        (r->op == S3_OP_UPLOAD_PART && r->ck_value[0])) {
        /* a trailer checksum is known (and verified) only now; kept like
         * one sent as a header (stor_s3_req_obj_hdrs). A part's is kept
         * with the part: Complete joins them (the composite checksum) */
        ret =
            stor_put_add_header(p, stor_s3_cksum_hdr(r->ck_kind), r->ck_value);
        if (ret < 0) {
            stor_put_abort(p);
            fail(r, ret);
            return;
        }
    }
    if (r->sse) {
        /* the plaintext's MD5 is checked here, the store sees ciphertext */
        ret =
            stor_sse_put_finish(r->sse, p, r->has_md5 ? r->content_md5 : NULL);
        if (ret < 0) {
            stor_put_abort(p);
            fail(r, ret);
            return;
        }
    }
    md5 = r->has_md5 && !r->sse ? r->content_md5 : NULL;
    if (r->op == S3_OP_PUT_OBJECT) /* keeps the old version if versioned */
        ret = stor_ver_put_commit(r, r->key, r->key_len, p, md5, &info, vid);
    else
        ret = stor_put_commit(p, md5, &info);
    if (ret < 0) {
        fail(r, ret);
        return;
    }
    if (r->op == S3_OP_PUT_OBJECT)
        stor_iam_object_written(r, r->key, r->key_len, false);
    r->http.resp.status = 200;
    ret = stor_resp_hdr(&r->http.resp, "ETag", "\"%s\"", info.etag);
    if (ret == 0 && vid[0])
        ret = stor_resp_hdr(&r->http.resp, "x-amz-version-id", "%s", vid);
    if (ret == 0 && r->op == S3_OP_PUT_OBJECT) {
        stor_lc_warm(r->s3->lc, r->bucket);
        ret = stor_lc_expiration(r->s3->lc, r->bucket, r->key, r->key_len,
                                 &info, &r->http.resp);
    }
    if (ret == 0 && r->ck_kind != STOR_CKSUM_NONE && r->ck_value[0])
        ret = stor_resp_hdr(&r->http.resp, stor_s3_cksum_hdr(r->ck_kind), "%s",
                            r->ck_value);
    if (ret == 0)
        ret = stor_sse_resp_headers(r->sse, &r->http.resp);
    if (ret < 0)
        stor_s3_error(r, S3E_INTERNAL);
    stor_obj_info_fini(&info);
}

/* ---- copy ---- */

/* See s3_i.h. */
enum stor_s3_err stor_s3_copy_source(const struct stor_s3_req *r, char *bucket,
                                     char **key, size_t *key_len)
{
    const char *v;
    size_t n;
    struct cm_buf b;
    char *p, *slash, *q;

    v = stor_s3_hdr(r, "x-amz-copy-source", &n);
    if (v == NULL)
        return S3E_INVALID_ARGUMENT;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    q = memchr(v, '?', n);
    if (q) {
        /* ?versionId=ID: op_copy opens that version (stor_ver_open) */
        size_t qn = n - (size_t)(q - v);

        if (qn < 12 || memcmp(q, "?versionId=", 11) != 0 || qn - 11 > 20)
            return S3E_INVALID_ARGUMENT;
        n = (size_t)(q - v);
    }
    if (cm_uri_decode(&b, v, n, false) < 0 || b.data == NULL)
        return S3E_INVALID_ARGUMENT;
    p = b.data;
    if (*p == '/')
        p++;
    slash = strchr(p, '/');
    if (slash == NULL || slash == p || (size_t)(slash - p) >= 64 ||
        slash[1] == 0) {
        cm_buf_fini(&b);
        return S3E_INVALID_ARGUMENT;
    }
    memcpy(bucket, p, (size_t)(slash - p));
    bucket[slash - p] = 0;
    *key_len = b.len - (size_t)(slash + 1 - b.data);
    if (*key_len > STOR_MAX_KEY_LEN) {
        cm_buf_fini(&b);
        return S3E_KEY_TOO_LONG;
    }
    if (!cm_utf8_valid(slash + 1, *key_len)) {
        cm_buf_fini(&b);
        return S3E_INVALID_URI;
    }
    *key = strndup(slash + 1, *key_len);
    cm_buf_fini(&b);
    return *key ? S3E_NONE : S3E_INTERNAL;
}

/* Copies [first, last] of @g (opened with @src, or plaintext: NULL) into
 * @p (sealed with @dst, or NULL). 0 or -errno. */
static int copy_bytes(struct stor_get *g, struct stor_sse *src,
                      struct stor_put *p, struct stor_sse *dst, uint64_t first,
                      uint64_t len)
{
    size_t chunk = stream_chunk(g);
    char *buf;
    uint64_t off = 0;
    int ret = 0;

    buf = malloc(chunk);
    if (buf == NULL)
        return -ENOMEM;
    while (off < len) {
        size_t want = (size_t)CM_MIN((uint64_t)chunk, len - off);
        ssize_t n = stor_sse_get_read(src, g, first + off, buf, want);

        if (n <= 0) {
            ret = n < 0 ? (int)n : -EIO;
            break;
        }
        ret = stor_sse_put_write(dst, p, buf, (size_t)n);
        if (ret < 0)
            break;
        off += (uint64_t)n;
    }
    free(buf);
    return ret;
}

/* x-amz-copy-source-range must be "bytes=FIRST-LAST" (S3 answers 400
 * InvalidArgument otherwise: a suffix "bytes=-N", an open "bytes=N-", a
 * number that is not one, FIRST > LAST) and lie inside the source (416
 * InvalidRange otherwise): unlike a GET Range, an end past the source is
 * not clamped, or a client that sized its parts from a stale HEAD would
 * silently get a short part and a truncated object. */
static enum stor_s3_err copy_range(const char *v, size_t n, uint64_t size,
                                   uint64_t *first, uint64_t *last)
{
    const char *dash;

    if (n < 9 || memcmp(v, "bytes=", 6) != 0)
        return S3E_INVALID_ARGUMENT;
    v += 6;
    n -= 6;
    dash = memchr(v, '-', n);
    if (dash == NULL || dash == v || dash + 1 == v + n)
        return S3E_INVALID_ARGUMENT;
    if (stor_http_parse_u64(v, (size_t)(dash - v), first) < 0 ||
        stor_http_parse_u64(dash + 1, (size_t)(v + n - dash - 1), last) < 0 ||
        *first > *last)
        return S3E_INVALID_ARGUMENT;
    return *last < size ? S3E_NONE : S3E_INVALID_RANGE;
}

/* The headers CopyObject stores with the copy: the request's (metadata
 * REPLACE) or the source's (COPY), the source's checksums either way (same
 * bytes), and the tags x-amz-tagging-directive chooses independently of
 * the metadata directive, as S3: the source's (COPY, the default) or the
 * request's x-amz-tagging (REPLACE; no tags without one). 0 or -ENOMEM. */
static int copy_dest_hdrs(const struct stor_s3_req *r,
                          const struct stor_obj_info *src, bool replace,
                          bool tag_replace, struct stor_hdr **out, size_t *n)
{
    struct stor_hdr *req = NULL, *h = NULL;
    size_t nreq = 0, nh = 0, i, tn = 0;
    const char *tv;
    int ret = 0;

    if (replace)
        ret = stor_s3_req_obj_hdrs(r, &req, &nreq);
    for (i = 0; ret == 0 && i < nreq; i++)
        if (strcmp(req[i].name, "x-amz-tagging") != 0)
            ret = hdr_add(&h, &nh, req[i].name, strlen(req[i].name),
                          req[i].value, strlen(req[i].value));
    for (i = 0; ret == 0 && i < src->nhdrs; i++) {
        const struct stor_hdr *sh = &src->hdrs[i];

        if (strcmp(sh->name, "x-amz-tagging") == 0 ||
            strncmp(sh->name, "x-ecfs-", 7) == 0 || /* not the copy's */
            (replace && strncmp(sh->name, "x-amz-checksum-", 15) != 0))
            continue;
        ret = hdr_add(&h, &nh, sh->name, strlen(sh->name), sh->value,
                      strlen(sh->value));
    }
    if (tag_replace) {
        tv = stor_s3_hdr(r, "x-amz-tagging", &tn);
    } else {
        tv = obj_tagging(src);
        tn = tv ? strlen(tv) : 0;
    }
    if (ret == 0 && tv && tn > 0)
        ret = hdr_add(&h, &nh, "x-amz-tagging", 13, tv, tn);
    stor_s3_hdrs_free(req, nreq);
    if (ret < 0) {
        stor_s3_hdrs_free(h, nh);
        return ret;
    }
    *out = h;
    *n = nh;
    return 0;
}

/* PUT with x-amz-copy-source: CopyObject (metadata COPY or REPLACE; a
 * copy onto itself needs REPLACE) or UploadPartCopy (with an optional
 * x-amz-copy-source-range); x-amz-copy-source-if-* give 412. */
/* The ?versionId= of x-amz-copy-source into @out ("" when none). 0, or
 * -EINVAL for an id that is not one. */
static int copy_source_vid(const struct stor_s3_req *r, char out[24])
{
    size_t n;
    const char *v = stor_s3_hdr(r, "x-amz-copy-source", &n);
    const char *q = v ? memchr(v, '?', n) : NULL;
    size_t qn = q ? n - (size_t)(q - v) - 11 : 0;

    out[0] = 0;
    if (q == NULL)
        return 0;
    if (qn == 0 || qn > 20)
        return -EINVAL;
    memcpy(out, q + 11, qn);
    out[qn] = 0;
    return stor_ver_id_ok(out) ? 0 : -EINVAL;
}

static void op_copy(struct stor_s3_req *r, bool part)
{
    char sbucket[64];
    char *skey = NULL;
    size_t sklen = 0;
    struct stor_obj_info sinfo, dinfo;
    struct stor_get *g = NULL;
    struct stor_put *p = NULL;
    struct stor_sse *src_sse = NULL, *dst_sse = NULL;
    struct stor_hdr *h = NULL;
    size_t nh = 0;
    uint64_t first = 0, len, pnum = 0;
    enum stor_s3_err e;
    const char *dir;
    size_t dn;
    bool replace, tag_replace;
    char t[CM_TIME_RFC3339_LEN + 1];
    char svid[24], dvid[24] = "";
    int ret;

    memset(&sinfo, 0, sizeof(sinfo));
    memset(&dinfo, 0, sizeof(dinfo));
    e = stor_s3_copy_source(r, sbucket, &skey, &sklen);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        return;
    }
    dir = stor_s3_hdr(r, "x-amz-metadata-directive", &dn);
    replace = dir && stor_http_ieq(dir, dn, "REPLACE");
    if (dir && !replace && !stor_http_ieq(dir, dn, "COPY")) {
        stor_s3_error(r, S3E_INVALID_ARGUMENT);
        goto out;
    }
    dir = stor_s3_hdr(r, "x-amz-tagging-directive", &dn);
    tag_replace = !part && dir && stor_http_ieq(dir, dn, "REPLACE");
    if (!part && dir && !tag_replace && !stor_http_ieq(dir, dn, "COPY")) {
        stor_s3_error(r, S3E_INVALID_ARGUMENT);
        goto out;
    }
    e = tag_replace ? req_tagging_check(r) : S3E_NONE;
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        goto out;
    }
    if (!part && !replace && strcmp(sbucket, r->bucket) == 0 &&
        sklen == r->key_len && memcmp(skey, r->key, sklen) == 0) {
        stor_s3_error(r, S3E_COPY_TO_SELF);
        goto out;
    }
    if (copy_source_vid(r, svid) < 0) {
        stor_s3_error(r, S3E_INVALID_VERSION_ID);
        goto out;
    }
    if (svid[0]) {
        ret = stor_ver_open(r, sbucket, skey, sklen, svid, &sinfo, &g);
        if (ret == -STOR_ENOKEY || ret == -EAGAIN || ret == -EISDIR) {
            /* as S3: a delete marker is no copy source either */
            stor_s3_error(r, ret == -EISDIR ? S3E_INVALID_REQUEST
                                            : S3E_NO_SUCH_VERSION);
            goto out;
        }
    } else {
        ret = stor_get_open(r->s3->store, sbucket, skey, sklen, &sinfo, &g);
    }
    if (ret < 0) {
        fail(r, ret);
        goto out;
    }
    stor_ver_info_fix(&sinfo);
    e = stor_sse_read_open(r, &sinfo, true, &src_sse);
    if (e == S3E_NONE)
        e = conditionals(r, &sinfo, "x-amz-copy-source-", false);
    if (e == S3E_NONE)
        e = part
                ? stor_sse_part_begin(r, stor_s3_query(r, "uploadId"), &dst_sse)
                : stor_sse_write_begin(r, &dst_sse);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        goto out;
    }
    len = sinfo.size;
    if (part) {
        const char *rv = stor_s3_hdr(r, "x-amz-copy-source-range", &dn);
        const char *pn = stor_s3_query(r, "partNumber");
        uint64_t last;

        if (stor_http_parse_u64(pn, strlen(pn), &pnum) < 0 || pnum < 1 ||
            pnum > STOR_MAX_PARTS) {
            stor_s3_error(r, S3E_INVALID_ARGUMENT);
            goto out;
        }
        if (rv) {
            e = copy_range(rv, dn, sinfo.size, &first, &last);
            if (e != S3E_NONE) {
                stor_s3_error(r, e);
                goto out;
            }
            len = last - first + 1;
        }
    }
    if (len > S3_MAX_PUT) {
        /* S3's limit on what one copy reads: a part copy of a larger
         * source must name a range of at most 5 GiB */
        stor_s3_error(r, S3E_COPY_SOURCE_TOO_LARGE);
        goto out;
    }
    if (part) {
        ret = stor_mpu_part_begin(r->s3->store, r->bucket, r->key, r->key_len,
                                  stor_s3_query(r, "uploadId"), (int)pnum,
                                  (int64_t)len, &p);
    } else {
        ret = copy_dest_hdrs(r, &sinfo, replace, tag_replace, &h, &nh);
        if (ret == 0)
            ret = stor_put_begin(r->s3->store, r->bucket, r->key, r->key_len,
                                 (int64_t)len, h, nh, &p);
        if (ret == 0 && dst_sse && (ret = stor_sse_put_headers(dst_sse, p)) < 0)
            stor_put_abort(p);
    }
    if (ret < 0) {
        fail(r, ret);
        goto out;
    }
    ret = copy_bytes(g, src_sse, p, dst_sse, first, len);
    if (ret == 0 && dst_sse)
        ret = stor_sse_put_finish(dst_sse, p, NULL);
    if (ret < 0) {
        stor_put_abort(p);
        fail(r, ret);
        goto out;
    }
    if (part)
        ret = stor_put_commit(p, NULL, &dinfo);
    else /* keeps the old version if versioned */
        ret = stor_ver_put_commit(r, r->key, r->key_len, p, NULL, &dinfo, dvid);
    if (ret < 0) {
        fail(r, ret);
        goto out;
    }
    if (!part)
        stor_iam_object_written(r, r->key, r->key_len, false);
    if ((dvid[0] &&
         stor_resp_hdr(&r->http.resp, "x-amz-version-id", "%s", dvid) < 0) ||
        (svid[0] && stor_resp_hdr(&r->http.resp, "x-amz-copy-source-version-id",
                                  "%s", svid) < 0) ||
        stor_sse_resp_headers(dst_sse, &r->http.resp) < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        goto out;
    }
    time_iso(dinfo.mtime, dinfo.mtime_ms, t);
    x_fmt(&r->http.resp.body,
          S3_XML_DECL "<%s xmlns=\"" S3_XMLNS "\"><LastModified>%s"
                      "</LastModified><ETag>&quot;%s&quot;</ETag></%s>",
          part ? "CopyPartResult" : "CopyObjectResult", t, dinfo.etag,
          part ? "CopyPartResult" : "CopyObjectResult");
    xml_done(r);
out:
    if (g)
        stor_get_close(g);
    stor_sse_free(src_sse);
    stor_sse_free(dst_sse);
    stor_s3_hdrs_free(h, nh);
    stor_obj_info_fini(&sinfo);
    stor_obj_info_fini(&dinfo);
    free(skey);
}

/* ---- multipart ---- */

/* x-amz-checksum-algorithm and -type of a CreateMultipartUpload: the
 * upload headers naming them (STOR_HDR_CK_ALG, and STOR_HDR_CK_TYPE for
 * FULL_OBJECT) appended to @h, the type to *full. As S3: CRC64NVME is
 * FULL_OBJECT only (its default), the SHA kinds COMPOSITE only (theirs),
 * CRC32 and CRC32C either (COMPOSITE by default); anything else, or a type
 * without an algorithm, is an InvalidRequest. */
static enum stor_s3_err mpu_cksum_alg(const struct stor_s3_req *r,
                                      struct stor_hdr **h, size_t *nh,
                                      bool *full)
{
    char name[48] = "x-amz-checksum-";
    size_t n = 0, tn = 0, i;
    const char *v = stor_s3_hdr(r, "x-amz-checksum-algorithm", &n);
    const char *t = stor_s3_hdr(r, "x-amz-checksum-type", &tn);
    enum stor_cksum k;
    bool crc;

    *full = false;
    if (v == NULL)
        return t ? S3E_INVALID_REQUEST : S3E_NONE;
    if (n > 16)
        return S3E_INVALID_ARGUMENT;
    for (i = 0; i < n; i++)
        name[15 + i] = (char)tolower((unsigned char)v[i]);
    name[15 + n] = 0;
    k = stor_s3_cksum_kind(name, 15 + n);
    if (k == STOR_CKSUM_NONE)
        return S3E_INVALID_ARGUMENT;
    crc = k == STOR_CKSUM_CRC32 || k == STOR_CKSUM_CRC32C ||
          k == STOR_CKSUM_CRC64NVME;
    if (t == NULL)
        *full = k == STOR_CKSUM_CRC64NVME;
    else if (stor_http_ieq(t, tn, "FULL_OBJECT") && crc)
        *full = true;
    else if (!stor_http_ieq(t, tn, "COMPOSITE") || k == STOR_CKSUM_CRC64NVME)
        return S3E_INVALID_REQUEST;
    if (hdr_add(h, nh, STOR_HDR_CK_ALG, strlen(STOR_HDR_CK_ALG), name, 15 + n) <
            0 ||
        (*full && hdr_add(h, nh, STOR_HDR_CK_TYPE, strlen(STOR_HDR_CK_TYPE),
                          "FULL_OBJECT", 11) < 0))
        return S3E_INTERNAL;
    return S3E_NONE;
}

/* POST /bucket/key?uploads : CreateMultipartUpload (headers kept for the
 * final object). */
static void op_create_mpu(struct stor_s3_req *r)
{
    char id[STOR_UPLOAD_ID_MAX];
    struct stor_hdr *h = NULL;
    size_t nh = 0;
    struct cm_buf *b = &r->http.resp.body;
    enum stor_s3_err e = req_tagging_check(r);
    struct stor_sse *x = NULL;
    const char *ca;
    size_t cn = 0;
    bool ck_full = false;
    int ret;

    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        return;
    }
    char vn[32], vv[24];

    ret = stor_s3_req_obj_hdrs(r, &h, &nh);
    if (ret == 0) {
        /* the encryption asked for, or the bucket's default: its sealed
         * data key is kept with the upload for the parts */
        e = stor_sse_mpu_create(r, &h, &nh, &x);
        if (e != S3E_NONE) {
            stor_s3_hdrs_free(h, nh);
            stor_s3_error(r, e);
            return;
        }
    }
    if (ret == 0) {
        e = mpu_cksum_alg(r, &h, &nh, &ck_full);
        if (e != S3E_NONE) {
            stor_s3_hdrs_free(h, nh);
            stor_sse_free(x);
            stor_s3_error(r, e);
            return;
        }
    }
    if (ret == 0)
        ret = stor_ver_new_header(r, vn, vv); /* the id it will have */
    if (ret == 0 && vn[0])
        ret = hdr_add(&h, &nh, vn, strlen(vn), vv, strlen(vv));
    if (ret == 0 && stor_iam_caller_account(r)) /* the upload's Initiator */
        ret = hdr_add(
            &h, &nh, STOR_IAM_HDR_INITIATOR, strlen(STOR_IAM_HDR_INITIATOR),
            stor_iam_caller_account(r), strlen(stor_iam_caller_account(r)));
    if (ret == 0) { /* the ACL asked for, set at the Complete */
        bool nomem;
        char *acl = stor_iam_upload_acl(r, &nomem);

        ret = nomem ? -ENOMEM : 0;
        if (acl)
            ret = hdr_add(&h, &nh, STOR_IAM_HDR_ACL, strlen(STOR_IAM_HDR_ACL),
                          acl, strlen(acl));
        free(acl);
    }
    if (ret == 0)
        ret = stor_mpu_create(r->s3->store, r->bucket, r->key, r->key_len, h,
                              nh, id);
    stor_s3_hdrs_free(h, nh);
    if (ret == 0)
        ret = stor_sse_resp_headers(x, &r->http.resp);
    ca = stor_s3_hdr(r, "x-amz-checksum-algorithm", &cn);
    if (ret == 0 && ca)
        ret = stor_resp_hdr(&r->http.resp, "x-amz-checksum-algorithm", "%.*s",
                            (int)cn, ca);
    if (ret == 0 && ca)
        ret = stor_resp_hdr(&r->http.resp, "x-amz-checksum-type", "%s",
                            ck_full ? "FULL_OBJECT" : "COMPOSITE");
    stor_sse_free(x);
    if (ret < 0) {
        fail(r, ret);
        return;
    }
    x_lit(b,
          S3_XML_DECL "<InitiateMultipartUploadResult xmlns=\"" S3_XMLNS "\">");
    x_str(b, "Bucket", r->bucket, false);
    x_elem(b, "Key", r->key, r->key_len, false);
    x_str(b, "UploadId", id, false);
    x_lit(b, "</InitiateMultipartUploadResult>");
    xml_done(r);
}

/* true when @info (the key's current object) is what completing upload
 * @id with @parts made: it keeps that upload id (STOR_HDR_UPLOAD_ID) and
 * its ETag is the one @parts give (MD5 of the part MD5s, "-N"). */
static bool completed_by(const struct stor_obj_info *info, const char *id,
                         const struct stor_part *parts, size_t n)
{
    uint8_t *md, digest[CM_MD5_LEN];
    char want[STOR_ETAG_MAX], hex[2 * CM_MD5_LEN + 1];
    bool same = false;
    size_t i, j;

    if (id == NULL || info->nparts <= 0 || (size_t)info->nparts != n)
        return false;
    for (i = 0; i < info->nhdrs; i++)
        if (strcmp(info->hdrs[i].name, STOR_HDR_UPLOAD_ID) == 0 &&
            strcmp(info->hdrs[i].value, id) == 0)
            same = true;
    if (!same || (md = malloc(n * CM_MD5_LEN)) == NULL)
        return false;
    for (i = 0; i < n && same; i++) {
        const char *e = parts[i].etag;

        if (*e == '"')
            e++;
        for (j = 0; j < 2 * CM_MD5_LEN && same; j++)
            same = isxdigit((unsigned char)e[j]) != 0;
        for (j = 0; j < CM_MD5_LEN && same; j++) {
            unsigned v = 0;

            same = sscanf(e + 2 * j, "%2x", &v) == 1;
            md[i * CM_MD5_LEN + j] = (uint8_t)v;
        }
    }
    if (same) {
        cm_md5(md, n * CM_MD5_LEN, digest);
        cm_hex_encode(digest, CM_MD5_LEN, hex);
        snprintf(want, sizeof(want), "%s-%zu", hex, n);
        same = strcasecmp(want, info->etag) == 0;
    }
    free(md);
    return same;
}

/* POST /bucket/key?uploadId= : CompleteMultipartUpload (order checked
 * here, ETags and sizes by the store). A repeat of a Complete that
 * already succeeded (a client that lost the first answer) is answered
 * with the same result, as AWS and RGW do, while the object it made is
 * still the key's current one; otherwise NoSuchUpload. */
/* x-amz-version-id (when versioned) and the SSE headers of the object a
 * Complete made (its current one); its checksum, if it has one, into @ck
 * (its kind returned; *full for FULL_OBJECT, else COMPOSITE). */
static enum stor_cksum mpu_reply_headers(struct stor_s3_req *r, char *ck,
                                         size_t cklen, bool *full)
{
    struct stor_obj_info info;
    enum stor_cksum k = STOR_CKSUM_NONE;

    memset(&info, 0, sizeof(info));
    if (stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len, &info) ==
            0 &&
        ((stor_ver_state_peek(r->s3->ver, r->bucket) != STOR_VER_OFF &&
          strcmp(stor_ver_info_vid(&info), "null") != 0 && /* as PutObject */
          stor_resp_hdr(&r->http.resp, "x-amz-version-id", "%s",
                        stor_ver_info_vid(&info)) < 0) ||
         stor_sse_info_resp_headers(&info, &r->http.resp) < 0))
        stor_s3_error(r, S3E_INTERNAL);
    if (info.nparts > 0)
        k = stor_s3_cksum_of_mpu(info.hdrs, info.nhdrs, info.nparts, NULL, ck,
                                 cklen, full);
    stor_obj_info_fini(&info);
    return k;
}

/* CompleteMultipartUpload's conditional write (If-None-Match, If-Match),
 * as PutObject's: decided against the current object before anything is
 * done (412 PreconditionFailed; 404 NoSuchKey for If-Match on a missing
 * key), and the absence or the matched ETag checked again at the commit
 * under the key's lock (@c; of concurrent conditional writers one wins).
 * S3E_NONE when the Complete may go on. */
static enum stor_s3_err complete_cond(struct stor_s3_req *r,
                                      struct stor_write_cond *c)
{
    size_t n1 = 0, n2 = 0;
    const char *inm = stor_s3_hdr(r, "if-none-match", &n1);
    const char *im = stor_s3_hdr(r, "if-match", &n2);
    struct stor_obj_info info;
    enum stor_s3_err e = S3E_NONE;
    int ret;

    memset(c, 0, sizeof(*c));
    if (inm == NULL && im == NULL)
        return S3E_NONE;
    memset(&info, 0, sizeof(info));
    ret = stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len, &info);
    if (ret < 0 && ret != -STOR_ENOKEY)
        return stor_s3_err_from_errno(ret);
    if (im && ret < 0)
        e = S3E_NO_SUCH_KEY;
    else if ((ret == 0 && inm && etag_matches(inm, n1, info.etag)) ||
             (im && !etag_matches(im, n2, info.etag)))
        e = S3E_PRECONDITION_FAILED;
    c->absent = inm && n1 == 1 && inm[0] == '*';
    if (e == S3E_NONE && im)
        snprintf(c->etag, sizeof(c->etag), "%s", info.etag);
    stor_obj_info_fini(&info);
    return e;
}

static void op_complete_mpu(struct stor_s3_req *r)
{
    struct stor_write_cond wc;
    struct stor_part *parts = NULL;
    struct stor_obj_info info;
    struct cm_buf *b = &r->http.resp.body;
    enum stor_cksum ck;
    enum stor_s3_err e;
    char comp[128], ckv[128];
    bool ck_named = false, ck_full = false;
    struct stor_hdr *uh = NULL;
    size_t n = 0, i, nuh = 0;
    int ret, uh_ret;

    memset(&info, 0, sizeof(info));
    ret = stor_s3_parse_complete(r->body.data, r->body.len, &parts, &n);
    if (ret < 0) {
        stor_s3_error(r, ret == -ENOMEM ? S3E_INTERNAL : S3E_MALFORMED_XML);
        return;
    }
    for (i = 1; i < n; i++)
        if (parts[i].number <= parts[i - 1].number) {
            stor_s3_error(r, S3E_INVALID_PART_ORDER);
            free(parts);
            return;
        }
    e = stor_sse_mpu_complete_check(r, stor_s3_query(r, "uploadId"));
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        free(parts);
        return;
    }
    /* an x-amz-checksum-* names the object's composite checksum: checked
     * against the parts' by the Complete hook (BadDigest when it differs) */
    for (i = 1; i < STOR_CKSUM_COUNT; i++) {
        size_t vl = 0;
        const char *v =
            stor_s3_hdr(r, stor_s3_cksum_hdr((enum stor_cksum)i), &vl);

        if (v && vl < sizeof(ckv)) {
            memcpy(ckv, v, vl);
            ckv[vl] = 0;
            stor_s3_cksum_expect((enum stor_cksum)i, ckv, parts, n);
            ck_named = true;
        }
    }
    if (!ck_named) /* the parts' checksums the list names: checked too */
        stor_s3_cksum_expect(STOR_CKSUM_NONE, NULL, parts, n);
    e = complete_cond(r, &wc);
    if (e != S3E_NONE) {
        stor_s3_cksum_expect(STOR_CKSUM_NONE, NULL, NULL, 0);
        stor_s3_error(r, e);
        free(parts);
        return;
    }
    /* the ACL the upload was created with (x-ecfs-acl) */
    uh_ret =
        stor_mpu_upload_headers(r->s3->store, r->bucket, r->key, r->key_len,
                                stor_s3_query(r, "uploadId"), &uh, &nuh);
    if (uh_ret == 0) {
        stor_iam_upload_acl_restore(r, uh, nuh);
        stor_s3_hdrs_free(uh, nuh);
    }
    /* keeps the old version if versioned */
    r->wcond = &wc;
    ret =
        stor_ver_mpu_complete(r, stor_s3_query(r, "uploadId"), parts, n, &info);
    r->wcond = NULL;
    stor_s3_cksum_expect(STOR_CKSUM_NONE, NULL, NULL, 0);
    if (ret == -STOR_ENOUPLOAD) {
        stor_obj_info_fini(&info);
        memset(&info, 0, sizeof(info));
        if (stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len, &info) ==
                0 &&
            completed_by(&info, stor_s3_query(r, "uploadId"), parts, n))
            ret = 0;
        else
            ret = -STOR_ENOUPLOAD;
    }
    free(parts);
    if (ret == -STOR_EBADDIGEST && ck_named) { /* the hook's answer */
        stor_obj_info_fini(&info);
        stor_s3_error(r, S3E_CHECKSUM_MISMATCH);
        return;
    }
    if (ret < 0) {
        stor_obj_info_fini(&info);
        fail(r, ret);
        return;
    }
    if (uh_ret != -STOR_ENOUPLOAD) /* not a retry: its first Complete did */
        stor_iam_object_written(r, r->key, r->key_len, false);
    ck = mpu_reply_headers(r, comp, sizeof(comp), &ck_full);
    x_lit(b,
          S3_XML_DECL "<CompleteMultipartUploadResult xmlns=\"" S3_XMLNS "\">");
    x_fmt(b, "<Location>/%s/", r->bucket);
    if (cm_xml_escape(b, r->key, r->key_len) < 0)
        x_fail(b);
    x_lit(b, "</Location>");
    x_str(b, "Bucket", r->bucket, false);
    x_elem(b, "Key", r->key, r->key_len, false);
    x_fmt(b, "<ETag>&quot;%s&quot;</ETag>", info.etag);
    if (ck != STOR_CKSUM_NONE)
        x_fmt(b, "<%s>%s</%s><ChecksumType>%s</ChecksumType>",
              stor_s3_cksum_xml(ck), comp, stor_s3_cksum_xml(ck),
              ck_full ? "FULL_OBJECT" : "COMPOSITE");
    x_lit(b, "</CompleteMultipartUploadResult>");
    stor_obj_info_fini(&info);
    xml_done(r);
}

/* DELETE /bucket/key?uploadId= : AbortMultipartUpload, 204. */
static void op_abort_mpu(struct stor_s3_req *r)
{
    int ret = stor_mpu_abort(r->s3->store, r->bucket, r->key, r->key_len,
                             stor_s3_query(r, "uploadId"));

    if (ret < 0) {
        fail(r, ret);
        return;
    }
    r->http.resp.status = 204;
}

/* The checksum algorithm upload @id was created with (*full: its type is
 * FULL_OBJECT), or STOR_CKSUM_NONE. */
static enum stor_cksum upload_cksum(struct stor_s3_req *r, const char *id,
                                    bool *full)
{
    struct stor_hdr *h = NULL;
    enum stor_cksum k = STOR_CKSUM_NONE;
    size_t nh = 0;

    *full = false;
    if (id == NULL || stor_mpu_upload_headers(r->s3->store, r->bucket, r->key,
                                              r->key_len, id, &h, &nh) < 0)
        return k;
    for (size_t i = 0; i < nh; i++) {
        if (strcmp(h[i].name, STOR_HDR_CK_ALG) == 0)
            k = stor_s3_cksum_kind(h[i].value, strlen(h[i].value));
        else if (strcmp(h[i].name, STOR_HDR_CK_TYPE) == 0)
            *full = strcmp(h[i].value, "FULL_OBJECT") == 0;
    }
    stor_s3_hdrs_free(h, nh);
    return k;
}

/* The account that started upload @u (STOR_IAM_HDR_INITIATOR; root's
 * when none is kept) into @o, and the one that will own its object into
 * @own: the initiator's, but the bucket owner's in a BucketOwnerEnforced
 * bucket or for an upload started with bucket-owner-full-control in a
 * BucketOwnerPreferred one (kept as its ACL: ownership.c). Reads the
 * upload's headers only once an account exists. */
static void upload_initiator(struct stor_s3_req *r, const struct stor_upload *u,
                             struct stor_iam_owner *o,
                             struct stor_iam_owner *own)
{
    struct stor_hdr *h = NULL;
    size_t n = 0, i;
    char name[65] = "";
    bool bofc = false;
    char *set;

    if (!stor_iam_has_accounts(r->s3->iam)) {
        stor_iam_account_owner(r->s3->iam, NULL, o);
        *own = *o;
        return;
    }
    if (stor_mpu_upload_headers(r->s3->store, r->bucket, u->key, u->key_len,
                                u->upload_id, &h, &n) == 0) {
        for (i = 0; i < n; i++) {
            if (strcmp(h[i].name, STOR_IAM_HDR_INITIATOR) == 0)
                snprintf(name, sizeof(name), "%s", h[i].value);
            if (strcmp(h[i].name, STOR_IAM_HDR_ACL) == 0)
                bofc = strcmp(h[i].value, "\"bucket-owner-full-control\"") == 0;
        }
        stor_s3_hdrs_free(h, n);
    }
    stor_iam_account_owner(r->s3->iam, name[0] ? name : NULL, o);
    *own = *o;
    set = stor_iam_bucket_conf(r->s3->iam, r->bucket, "ownership");
    if (set && (strcmp(set, "BucketOwnerEnforced") == 0 ||
                (bofc && strcmp(set, "BucketOwnerPreferred") == 0)))
        stor_iam_owner(r, r->bucket, own);
    free(set);
}

/* GET /bucket/key?uploadId= : ListParts (part-number-marker, max-parts). */
static void op_list_parts(struct stor_s3_req *r)
{
    const char *id = stor_s3_query(r, "uploadId");
    const char *pm = stor_s3_query(r, "part-number-marker");
    struct stor_part *parts = NULL;
    struct cm_buf *b = &r->http.resp.body;
    struct stor_iam_owner o, ow;
    struct stor_upload up;
    size_t n = 0, i;
    bool trunc = false, ck_full;
    uint64_t after = 0;
    enum stor_cksum ck;
    int maxp, ret;

    if (max_param(r, "max-parts", 1000, 1000, &maxp) < 0 ||
        (pm && stor_http_parse_u64(pm, strlen(pm), &after) < 0) ||
        after > STOR_MAX_PARTS) {
        stor_s3_error(r, S3E_INVALID_ARGUMENT);
        return;
    }
    ck = upload_cksum(r, id, &ck_full);
    ret = stor_mpu_list_parts(r->s3->store, r->bucket, r->key, r->key_len, id,
                              (int)after, (size_t)maxp, stor_s3_cksum_hdr(ck),
                              &parts, &n, &trunc);
    if (ret < 0) {
        fail(r, ret);
        return;
    }
    x_lit(b, S3_XML_DECL "<ListPartsResult xmlns=\"" S3_XMLNS "\">");
    x_str(b, "Bucket", r->bucket, false);
    x_elem(b, "Key", r->key, r->key_len, false);
    x_str(b, "UploadId", id, false);
    up.key = r->key;
    up.key_len = r->key_len;
    snprintf(up.upload_id, sizeof(up.upload_id), "%s", id);
    upload_initiator(r, &up, &o, &ow);
    x_fmt(b,
          "<Initiator><ID>%s</ID><DisplayName>%s</DisplayName></Initiator>"
          "<Owner><ID>%s</ID><DisplayName>%s</DisplayName></Owner>"
          "<StorageClass>STANDARD</StorageClass>",
          o.id, o.name, ow.id, ow.name);
    x_fmt(b, "<PartNumberMarker>%llu</PartNumberMarker>",
          (unsigned long long)after);
    if (n > 0)
        x_fmt(b, "<NextPartNumberMarker>%d</NextPartNumberMarker>",
              parts[n - 1].number);
    x_fmt(b, "<MaxParts>%d</MaxParts><IsTruncated>%s</IsTruncated>", maxp,
          trunc ? "true" : "false");
    if (ck != STOR_CKSUM_NONE) /* "ChecksumCRC32" -> "CRC32" */
        x_fmt(b,
              "<ChecksumAlgorithm>%s</ChecksumAlgorithm>"
              "<ChecksumType>%s</ChecksumType>",
              stor_s3_cksum_xml(ck) + 8, ck_full ? "FULL_OBJECT" : "COMPOSITE");
    for (i = 0; i < n; i++) {
        char t[CM_TIME_RFC3339_LEN + 1];

        time_iso(parts[i].mtime, 0, t);
        x_fmt(b,
              "<Part><PartNumber>%d</PartNumber><LastModified>%s"
              "</LastModified><ETag>&quot;%s&quot;</ETag><Size>%llu</Size>",
              parts[i].number, t, parts[i].etag,
              (unsigned long long)parts[i].size);
        if (ck != STOR_CKSUM_NONE && parts[i].hval[0])
            x_str(b, stor_s3_cksum_xml(ck), parts[i].hval, false);
        x_lit(b, "</Part>");
    }
    x_lit(b, "</ListPartsResult>");
    free(parts);
    xml_done(r);
}

/* GET /bucket?uploads : ListMultipartUploads (prefix, key-marker,
 * upload-id-marker, max-uploads). */
static void op_list_uploads(struct stor_s3_req *r)
{
    const char *prefix = stor_s3_query(r, "prefix");
    const char *km = stor_s3_query(r, "key-marker");
    const char *um = stor_s3_query(r, "upload-id-marker");
    struct stor_upload *u = NULL;
    struct cm_buf *b = &r->http.resp.body;
    struct stor_iam_owner o, ow;
    size_t n = 0, i;
    bool trunc = false;
    int maxu, ret;

    if (max_param(r, "max-uploads", 1000, 1000, &maxu) < 0) {
        stor_s3_error(r, S3E_INVALID_ARGUMENT);
        return;
    }
    ret =
        stor_mpu_list(r->s3->store, r->bucket,
                      prefix && *prefix ? prefix : NULL, km && *km ? km : NULL,
                      um && *um ? um : NULL, (size_t)maxu, &u, &n, &trunc);
    if (ret < 0) {
        fail(r, ret == -STOR_ENOKEY ? -STOR_ENOBUCKET : ret);
        return;
    }
    x_lit(b, S3_XML_DECL "<ListMultipartUploadsResult xmlns=\"" S3_XMLNS "\">");
    x_str(b, "Bucket", r->bucket, false);
    x_str(b, "KeyMarker", km, false);
    x_str(b, "UploadIdMarker", um, false);
    if (n > 0) {
        x_elem(b, "NextKeyMarker", u[n - 1].key, u[n - 1].key_len, false);
        x_str(b, "NextUploadIdMarker", u[n - 1].upload_id, false);
    }
    if (prefix)
        x_str(b, "Prefix", prefix, false);
    x_fmt(b, "<MaxUploads>%d</MaxUploads><IsTruncated>%s</IsTruncated>", maxu,
          trunc ? "true" : "false");
    for (i = 0; i < n; i++) {
        char t[CM_TIME_RFC3339_LEN + 1];

        time_iso(u[i].initiated, 0, t);
        upload_initiator(r, &u[i], &o, &ow);
        x_lit(b, "<Upload>");
        x_elem(b, "Key", u[i].key, u[i].key_len, false);
        x_str(b, "UploadId", u[i].upload_id, false);
        x_fmt(b,
              "<Initiator><ID>%s</ID><DisplayName>%s</DisplayName>"
              "</Initiator><Owner><ID>%s</ID><DisplayName>%s</DisplayName>"
              "</Owner><StorageClass>STANDARD</StorageClass>"
              "<Initiated>%s</Initiated></Upload>",
              o.id, o.name, ow.id, ow.name, t);
    }
    x_lit(b, "</ListMultipartUploadsResult>");
    stor_uploads_free(u, n);
    xml_done(r);
}

/* See s3_i.h. */
void stor_s3_op_run(struct stor_s3_req *r)
{
    switch (r->op) {
    case S3_OP_LIST_BUCKETS:
        op_list_buckets(r);
        break;
    case S3_OP_CREATE_BUCKET:
        op_create_bucket(r);
        break;
    case S3_OP_HEAD_BUCKET:
        op_head_bucket(r);
        break;
    case S3_OP_DELETE_BUCKET:
        op_delete_bucket(r);
        break;
    case S3_OP_GET_BUCKET_LOCATION:
        op_bucket_location(r);
        break;
    case S3_OP_BUCKET_SUBRESOURCE:
        op_bucket_subresource(r);
        break;
    case S3_OP_BUCKET_VERSIONING:
        stor_ver_op_versioning(r);
        break;
    case S3_OP_BUCKET_LIFECYCLE:
        stor_lc_op(r);
        break;
    case S3_OP_OBJECT_SUBRESOURCE:
        op_object_subresource(r);
        break;
    case S3_OP_LIST_OBJECTS:
        op_list_objects(r, LIST_V1);
        break;
    case S3_OP_LIST_OBJECTS_V2:
        op_list_objects(r, LIST_V2);
        break;
    case S3_OP_LIST_VERSIONS:
        op_list_objects(r, LIST_VERSIONS);
        break;
    case S3_OP_LIST_UPLOADS:
        op_list_uploads(r);
        break;
    case S3_OP_DELETE_OBJECTS:
        op_delete_objects(r);
        break;
    case S3_OP_GET_OBJECT:
    case S3_OP_HEAD_OBJECT:
        op_get_object(r);
        break;
    case S3_OP_DELETE_OBJECT:
        op_delete_object(r);
        break;
    case S3_OP_COPY_OBJECT:
        op_copy(r, false);
        break;
    case S3_OP_UPLOAD_PART_COPY:
        op_copy(r, true);
        break;
    case S3_OP_CREATE_MPU:
        op_create_mpu(r);
        break;
    case S3_OP_COMPLETE_MPU:
        op_complete_mpu(r);
        break;
    case S3_OP_ABORT_MPU:
        op_abort_mpu(r);
        break;
    case S3_OP_LIST_PARTS:
        op_list_parts(r);
        break;
    case S3_OP_BUCKET_ENCRYPTION:
        stor_sse_bucket_op(r);
        break;
    case S3_OP_TAGGING:
        stor_s3_tagging_op(r);
        break;
    case S3_OP_BUCKET_CORS:
        stor_cors_bucket_op(r);
        break;
    case S3_OP_OBJECT_ATTRIBUTES:
        stor_s3_attributes_op(r);
        break;
    case S3_OP_ADMIN:
    case S3_OP_BUCKET_POLICY:
    case S3_OP_BUCKET_POLICY_STATUS:
    case S3_OP_BUCKET_ACL:
    case S3_OP_OBJECT_ACL:
    case S3_OP_BUCKET_PAB:
    case S3_OP_BUCKET_OWNERSHIP:
        stor_iam_op_run(r);
        break;
    default:
        stor_s3_error(r, S3E_NOT_IMPLEMENTED);
        break;
    }
}
