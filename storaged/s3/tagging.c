/* storaged/s3/tagging.c - Get/Put/DeleteObjectTagging (also by versionId)
 * and Get/Put/DeleteBucketTagging.
 *
 * DESIGN: an object's tags are its stored x-amz-tagging header (the
 * URL-encoded "k=v&..." PutObject takes, tagging_check in ops.c), so GET
 * and HEAD (x-amz-tagging-count), copies and lifecycle filters read them
 * where they always were. The object layer has no call that changes the
 * headers of a stored object, so Put/DeleteObjectTagging rewrites the
 * object with its bytes as stored (ciphertext stays ciphertext: the
 * encryption headers go along), every other header, and its ETag, under
 * the condition that the key still holds the version that was read (a
 * concurrent writer wins, and the rewrite is retried on the new one).
 * The cost is a copy of the object; Last-Modified becomes the time of the
 * change (S3 keeps it), and a multipart object keeps its ETag but not
 * its part layout (GetObject ?partNumber then sees one part). A bucket's
 * tags are a field of the state document (iam.h), kept sorted. Tags are
 * always returned sorted by key. */
#include "storaged/s3/tagging.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "common/log.h"
#include "common/uri.h"
#include "common/xml.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/s3_i.h"
#include "storaged/s3/versioning.h"
#include "storaged/s3/xout.h"

#define OBJ_TAGS_MAX    10
#define BUCKET_TAGS_MAX 50
#define TAG_XML_MAX     (64 * 1024)

struct tag {
    char *k, *v; /* owned, decoded, NUL-terminated */
};

struct tagset {
    struct tag t[BUCKET_TAGS_MAX + 1];
    size_t n;
};

static void tagset_fini(struct tagset *s)
{
    size_t i;

    for (i = 0; i < s->n; i++) {
        free(s->t[i].k);
        free(s->t[i].v);
    }
    s->n = 0;
}

static int tag_cmp(const void *a, const void *b)
{
    return strcmp(((const struct tag *)a)->k, ((const struct tag *)b)->k);
}

/* ---- the request body ---- */

struct tag_xml {
    struct tagset *s;
    struct cm_buf text;
    char *key, *val;
    bool have_key, have_val;
    int depth; /* 1 Tagging, 2 TagSet, 3 Tag, 4 Key/Value: nothing else */
    int err;   /* enum stor_s3_err */
};

static void tx_start(void *ud, const char *name, const char **attrs)
{
    static const char *const path[] = {"Tagging", "TagSet", "Tag"};
    struct tag_xml *x = ud;
    const char *n = stor_s3_xml_local(name);

    (void)attrs;
    cm_buf_reset(&x->text);
    x->depth++;
    if (x->depth <= 3 ? strcmp(n, path[x->depth - 1]) != 0
                      : x->depth > 4 ||
                            (strcmp(n, "Key") != 0 && strcmp(n, "Value") != 0))
        x->err = S3E_MALFORMED_XML;
    if (x->depth == 3)
        x->have_key = x->have_val = false;
}

static void tx_text(void *ud, const char *s, int len)
{
    struct tag_xml *x = ud;

    if (cm_buf_append(&x->text, s, (size_t)len) < 0)
        x->err = S3E_MALFORMED_XML;
}

static char *text_dup(const struct cm_buf *b)
{
    return strndup(b->data ? b->data : "", b->len);
}

static void tx_end(void *ud, const char *name)
{
    struct tag_xml *x = ud;
    const char *n = stor_s3_xml_local(name);
    int depth = x->depth--;

    if (x->err)
        return;
    if (depth == 4 && strcmp(n, "Key") == 0) {
        if (x->have_key)
            x->err = S3E_MALFORMED_XML;
        free(x->key);
        x->key = text_dup(&x->text);
        x->have_key = true;
        if (x->key == NULL)
            x->err = S3E_INTERNAL;
    } else if (depth == 4) {
        if (x->have_val)
            x->err = S3E_MALFORMED_XML;
        free(x->val);
        x->val = text_dup(&x->text);
        x->have_val = true;
        if (x->val == NULL)
            x->err = S3E_INTERNAL;
    } else if (depth == 3) {
        if (!x->have_key || !x->have_val) {
            x->err = S3E_MALFORMED_XML;
        } else if (x->s->n == BUCKET_TAGS_MAX + 1) {
            x->err = S3E_INVALID_TAG; /* too many for anything */
        } else {
            x->s->t[x->s->n].k = x->key;
            x->s->t[x->s->n].v = x->val;
            x->s->n++;
            x->key = x->val = NULL;
        }
        x->have_key = x->have_val = false;
    }
    cm_buf_reset(&x->text);
}

/* Whether @s is a tag key (@key) or value S3 accepts: UTF-8, 1..128
 * (key) or 0..256 (value) characters. */
static bool tag_text_ok(const char *s, bool key)
{
    size_t n = strlen(s), i, c = 0;

    if (!cm_utf8_valid(s, n))
        return false;
    for (i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return key ? c >= 1 && c <= 128 : c <= 256;
}

/* Parses a <Tagging><TagSet><Tag><Key/><Value/></Tag>... body into @s
 * (sorted), at most @max tags. S3E_NONE or the error. */
static enum stor_s3_err tags_parse(const char *xml, size_t len, size_t max,
                                   struct tagset *s)
{
    static const struct stor_s3_xml_cbs cb = {tx_start, tx_end, tx_text};
    struct tag_xml x;
    size_t i;
    int ret;

    if (len > TAG_XML_MAX)
        return S3E_MALFORMED_XML;
    memset(&x, 0, sizeof(x));
    x.s = s;
    cm_buf_init(&x.text, 4096);
    ret = stor_s3_xml_parse(xml, len, &x, &cb);
    if (ret < 0 && x.err == 0)
        x.err = ret == -ENOMEM ? S3E_INTERNAL : S3E_MALFORMED_XML;
    cm_buf_fini(&x.text);
    free(x.key);
    free(x.val);
    if (x.err == 0 && s->n > max)
        x.err = S3E_INVALID_TAG;
    for (i = 0; x.err == 0 && i < s->n; i++)
        if (!tag_text_ok(s->t[i].k, true) || !tag_text_ok(s->t[i].v, false))
            x.err = S3E_INVALID_TAG;
    if (x.err == 0) {
        qsort(s->t, s->n, sizeof(s->t[0]), tag_cmp);
        for (i = 1; i < s->n; i++)
            if (strcmp(s->t[i - 1].k, s->t[i].k) == 0)
                x.err = S3E_INVALID_TAG; /* the same key twice */
    }
    if (x.err)
        tagset_fini(s);
    return (enum stor_s3_err)x.err;
}

/* ---- the stored form: "k=v&..." URL-encoded ---- */

/* Encodes @s (sorted) as a query string into @out. 0 or -ENOMEM. */
static int tags_encode(const struct tagset *s, struct cm_buf *out)
{
    size_t i;
    int ret = 0;

    for (i = 0; i < s->n && ret == 0; i++) {
        if (i > 0)
            ret = cm_buf_appendc(out, '&');
        if (ret == 0)
            ret = cm_uri_encode(out, s->t[i].k, strlen(s->t[i].k), false);
        if (ret == 0)
            ret = cm_buf_appendc(out, '=');
        if (ret == 0)
            ret = cm_uri_encode(out, s->t[i].v, strlen(s->t[i].v), false);
    }
    if (ret == 0)
        ret = cm_buf_appendc(out, 0); /* a string, also when empty */
    return ret;
}

/* Decodes the stored "k=v&..." @v into @s, sorted. 0 or -EBADMSG/-ENOMEM */
static int tags_decode(const char *v, struct tagset *s)
{
    struct cm_buf k, val;
    int ret = 0;

    while (*v && ret == 0) {
        size_t l = strcspn(v, "&");
        const char *eq = memchr(v, '=', l);
        size_t kl = eq ? (size_t)(eq - v) : l;

        if (l > 0 && s->n == BUCKET_TAGS_MAX + 1) {
            ret = -EBADMSG;
            break;
        }
        if (l > 0) {
            cm_buf_init(&k, CM_BUF_NOLIMIT);
            cm_buf_init(&val, CM_BUF_NOLIMIT);
            if (cm_uri_decode(&k, v, kl, true) < 0 ||
                (eq && cm_uri_decode(&val, eq + 1, l - kl - 1, true) < 0)) {
                ret = -EBADMSG;
            } else {
                s->t[s->n].k = text_dup(&k);
                s->t[s->n].v = text_dup(&val);
                if (s->t[s->n].k == NULL || s->t[s->n].v == NULL)
                    ret = -ENOMEM;
                s->n++;
            }
            cm_buf_fini(&k);
            cm_buf_fini(&val);
        }
        v += l + (v[l] == '&');
    }
    if (ret < 0)
        tagset_fini(s);
    else
        qsort(s->t, s->n, sizeof(s->t[0]), tag_cmp);
    return ret;
}

/* The <Tagging> answer for @s. */
static void tags_reply(struct stor_s3_req *r, const struct tagset *s)
{
    struct cm_buf *b = &r->http.resp.body;

    x_lit(b, S3_XML_DECL "<Tagging xmlns=\"" S3_XMLNS "\"><TagSet>");
    for (size_t i = 0; i < s->n; i++) {
        x_lit(b, "<Tag>");
        x_str(b, "Key", s->t[i].k, false);
        x_str(b, "Value", s->t[i].v, false);
        x_lit(b, "</Tag>");
    }
    x_lit(b, "</TagSet></Tagging>");
    xml_done(r);
}

/* ---- objects ---- */

/* See tagging.h. */
enum stor_s3_err stor_s3_locate_version(struct stor_s3_req *r, const char *vid,
                                        char *bucket, char **key, size_t *klen)
{
    struct stor_ver_entry *e = NULL;
    size_t n = 0, i;
    enum stor_s3_err err = S3E_NO_SUCH_VERSION;
    int ret;

    snprintf(bucket, 64, "%s", r->bucket);
    if (vid == NULL) {
        *key = strndup(r->key, r->key_len);
        *klen = r->key_len;
        return *key ? S3E_NONE : S3E_INTERNAL;
    }
    ret = stor_ver_versions(r->s3->ver, r->bucket, r->key, r->key_len, &e, &n);
    if (ret < 0)
        return stor_s3_err_from_errno(ret);
    for (i = 0; i < n; i++) {
        if (strcmp(e[i].vid, vid) != 0)
            continue;
        if (e[i].dm) {
            err = S3E_METHOD_NOT_ALLOWED;
        } else if (e[i].hkey == NULL) {
            *key = strndup(r->key, r->key_len);
            *klen = r->key_len;
            err = *key ? S3E_NONE : S3E_INTERNAL;
        } else {
            stor_ver_hidden_bucket(r->bucket, bucket);
            *key = e[i].hkey;
            *klen = e[i].hkey_len;
            e[i].hkey = NULL;
            err = S3E_NONE;
        }
        break;
    }
    stor_ver_entries_free(e, n);
    return err;
}

/* Copies @g's @size bytes into @p as stored. 0 or -errno. */
static int copy_raw(struct stor_get *g, struct stor_put *p, uint64_t size)
{
    size_t chunk = stor_get_preferred_chunk(g);
    uint64_t off = 0;
    char *buf;
    int ret = 0;

    chunk = chunk ? CM_MIN(chunk, (size_t)8 << 20) : 256 * 1024;
    buf = malloc(chunk);
    if (buf == NULL)
        return -ENOMEM;
    while (off < size && ret == 0) {
        ssize_t n = stor_get_read(g, off, buf,
                                  (size_t)CM_MIN((uint64_t)chunk, size - off));

        if (n <= 0)
            ret = n < 0 ? (int)n : -EIO;
        else
            ret = stor_put_write(p, buf, (size_t)n);
        off += n > 0 ? (uint64_t)n : 0;
    }
    free(buf);
    return ret;
}

/* One rewrite of @bucket/@key with tags @tags ("" or NULL: none): 0,
 * -STOR_EPRECOND (it changed meanwhile: try again) or -errno. */
static int retag_once(struct stor_s3_req *r, const char *bucket,
                      const char *key, size_t klen, char *tags,
                      struct stor_obj_info *info)
{
    static char tag_hdr[] = "x-amz-tagging"; /* stor_hdr's name is char * */
    struct stor_store *st = r->s3->store;
    struct stor_get *g = NULL;
    struct stor_put *p = NULL;
    struct stor_hdr *h;
    size_t nh = 0, i;
    int ret;

    ret = stor_get_open(st, bucket, key, klen, info, &g);
    if (ret < 0)
        return ret;
    h = calloc(info->nhdrs + 1, sizeof(*h));
    if (h == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    for (i = 0; i < info->nhdrs; i++)
        if (strcmp(info->hdrs[i].name, "x-amz-tagging") != 0)
            h[nh++] = info->hdrs[i]; /* borrowed */
    if (tags && tags[0])
        h[nh++] = (struct stor_hdr){tag_hdr, tags};
    ret = stor_put_begin(st, bucket, key, klen, (int64_t)info->size, h, nh, &p);
    free(h);
    if (ret < 0)
        goto out;
    ret = stor_put_set_condition(p, false, info->etag);
    if (ret == 0)
        ret = stor_put_set_etag(p, info->etag);
    if (ret == 0)
        ret = copy_raw(g, p, info->size);
    if (ret < 0) {
        stor_put_abort(p);
        goto out;
    }
    ret = stor_put_commit(p, NULL, NULL);
out:
    stor_get_close(g);
    return ret;
}

/* PutObjectTagging / DeleteObjectTagging of the located version. */
static void object_retag(struct stor_s3_req *r, const char *bucket,
                         const char *key, size_t klen, char *tags)
{
    struct stor_obj_info info;
    const char *vid;
    int ret = -STOR_EPRECOND, tries;

    for (tries = 0; tries < 4 && ret == -STOR_EPRECOND; tries++) {
        memset(&info, 0, sizeof(info));
        ret = retag_once(r, bucket, key, klen, tags, &info);
        if (ret < 0)
            stor_obj_info_fini(&info);
    }
    if (ret < 0) {
        if (ret == -STOR_EPRECOND)
            stor_s3_error(r, S3E_SERVICE_UNAVAILABLE);
        else
            stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    vid = stor_ver_info_vid(&info);
    if (strcmp(vid, "null") != 0 &&
        stor_resp_hdr(&r->http.resp, "x-amz-version-id", "%s", vid) < 0) {
        stor_obj_info_fini(&info);
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    stor_obj_info_fini(&info);
    r->http.resp.status = r->http.is_put ? 200 : 204;
}

/* The stored x-amz-tagging of @in, or "". */
static const char *stored_tags(const struct stor_obj_info *in)
{
    size_t i;

    for (i = 0; i < in->nhdrs; i++)
        if (strcmp(in->hdrs[i].name, "x-amz-tagging") == 0)
            return in->hdrs[i].value;
    return "";
}

static void object_op(struct stor_s3_req *r)
{
    char bucket[64];
    char *key = NULL;
    size_t klen = 0;
    struct tagset s;
    struct cm_buf enc;
    struct stor_obj_info info;
    enum stor_s3_err e;
    int ret;

    memset(&s, 0, sizeof(s));
    if (r->http.is_put) {
        e = tags_parse(r->body.data ? r->body.data : "", r->body.len,
                       OBJ_TAGS_MAX, &s);
        if (e != S3E_NONE) {
            stor_s3_error(r, e);
            return;
        }
    }
    e = stor_s3_locate_version(r, stor_s3_query(r, "versionId"), bucket, &key,
                               &klen);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        goto out;
    }
    if (r->http.is_get || r->http.is_head) {
        memset(&info, 0, sizeof(info));
        ret = stor_obj_stat(r->s3->store, bucket, key, klen, &info);
        if (ret == 0)
            ret = tags_decode(stored_tags(&info), &s);
        if (ret == 0) {
            const char *vid = stor_ver_info_vid(&info);

            tags_reply(r, &s);
            if (strcmp(vid, "null") != 0 &&
                stor_resp_hdr(&r->http.resp, "x-amz-version-id", "%s", vid) < 0)
                stor_s3_error(r, S3E_INTERNAL);
        } else {
            stor_s3_error(r, stor_s3_err_from_errno(ret));
        }
        stor_obj_info_fini(&info);
        goto out;
    }
    cm_buf_init(&enc, CM_BUF_NOLIMIT);
    if (tags_encode(&s, &enc) < 0)
        stor_s3_error(r, S3E_INTERNAL);
    else
        object_retag(r, bucket, key, klen, r->http.is_put ? enc.data : NULL);
    cm_buf_fini(&enc);
out:
    tagset_fini(&s);
    free(key);
}

/* ---- buckets ---- */

static void bucket_op(struct stor_s3_req *r)
{
    struct stor_bucket_info bi;
    struct tagset s;
    struct cm_buf enc;
    enum stor_s3_err e;
    char *v;
    int ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);

    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    memset(&s, 0, sizeof(s));
    if (r->http.is_get || r->http.is_head) {
        v = stor_iam_bucket_conf(r->s3->iam, r->bucket, "tagging");
        if (v == NULL) {
            stor_s3_error(r, S3E_NO_SUCH_TAG_SET);
            return;
        }
        ret = tags_decode(v, &s);
        free(v);
        if (ret < 0)
            stor_s3_error(r, S3E_INTERNAL);
        else
            tags_reply(r, &s);
        tagset_fini(&s);
        return;
    }
    cm_buf_init(&enc, CM_BUF_NOLIMIT);
    if (r->http.is_put) {
        e = tags_parse(r->body.data ? r->body.data : "", r->body.len,
                       BUCKET_TAGS_MAX, &s);
        if (e != S3E_NONE) {
            stor_s3_error(r, e);
            return;
        }
        ret = tags_encode(&s, &enc);
        tagset_fini(&s);
        if (ret < 0) {
            cm_buf_fini(&enc);
            stor_s3_error(r, S3E_INTERNAL);
            return;
        }
    }
    ret = stor_iam_bucket_conf_set(r, "tagging",
                                   r->http.is_put ? enc.data : NULL);
    cm_buf_fini(&enc);
    if (ret < 0) {
        cm_log(CM_LOG_ERROR, -ret, "req=%016llX %s: bucket tagging",
               (unsigned long long)r->http.id, r->bucket);
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    r->http.resp.status = 204;
}

/* See tagging.h. */
int stor_s3_tags_from_xml(const char *xml, size_t len, size_t max, char **out,
                          size_t *ntags)
{
    struct tagset s, back;
    struct cm_buf enc;
    enum stor_s3_err e;
    int ret;

    *out = NULL;
    memset(&s, 0, sizeof(s));
    e = tags_parse(xml, len, max, &s);
    if (e != S3E_NONE)
        return e == S3E_INTERNAL ? -ENOMEM : -(int)e;
    cm_buf_init(&enc, CM_BUF_NOLIMIT);
    ret = tags_encode(&s, &enc);
    memset(&back, 0, sizeof(back));
    /* what is stored must decode to what was parsed */
    if (ret == 0)
        ret = tags_decode(enc.data, &back);
    if (ret == 0 && back.n != s.n)
        ret = -EPROTO;
    for (size_t i = 0; ret == 0 && i < s.n; i++)
        if (strcmp(s.t[i].k, back.t[i].k) != 0 ||
            strcmp(s.t[i].v, back.t[i].v) != 0)
            ret = -EPROTO;
    *ntags = s.n;
    tagset_fini(&s);
    tagset_fini(&back);
    if (ret < 0) {
        cm_buf_fini(&enc);
        return ret;
    }
    *out = enc.data; /* ownership passes to the caller */
    return 0;
}

/* See tagging.h. */
void stor_s3_tagging_op(struct stor_s3_req *r)
{
    if (r->has_key)
        object_op(r);
    else
        bucket_op(r);
}
