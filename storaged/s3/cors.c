/* storaged/s3/cors.c - Get/Put/DeleteBucketCors and the CORS answers
 * made from a bucket's rules (contract in cors.h).
 *
 * DESIGN: a bucket's configuration is kept as its validated XML in the
 * state document (iam.h, field "cors"); a request that carries Origin
 * parses it again (expat, a few microseconds; only browsers send Origin)
 * and takes the first rule whose AllowedOrigin (one '*' wildcard at most)
 * matches the origin, whose AllowedMethod holds the method (a preflight's
 * Access-Control-Request-Method, else the request's own, as RGW and the
 * s3-tests suite do), and, for a preflight, whose AllowedHeader patterns
 * cover every Access-Control-Request-Headers name. A match adds
 * Access-Control-Allow-Origin ("*" for a rule of "*"), -Allow-Methods,
 * -Allow-Headers, -Expose-Headers, -Max-Age and Vary; no match adds
 * nothing (the browser then refuses the response, not the server). The
 * headers go on at on_head time, so they ride on every answer, errors
 * included, as S3's do. */
#include "storaged/s3/cors.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/s3_i.h"

#define CORS_RULES_MAX 100
#define CORS_LIST_MAX  64 /* origins, methods, headers of one rule */
#define CORS_XML_MAX   (64 * 1024)

struct cors_rule {
    char *origin[CORS_LIST_MAX];
    size_t norigin;
    char *method[CORS_LIST_MAX];
    size_t nmethod;
    char *header[CORS_LIST_MAX];
    size_t nheader;
    char *expose[CORS_LIST_MAX];
    size_t nexpose;
    long max_age; /* -1: none */
};

struct cors_conf {
    struct cors_rule *rule; /* owned */
    size_t n;
};

static void conf_fini(struct cors_conf *c)
{
    size_t i, j;

    for (i = 0; i < c->n; i++) {
        struct cors_rule *r = &c->rule[i];

        for (j = 0; j < r->norigin; j++)
            free(r->origin[j]);
        for (j = 0; j < r->nmethod; j++)
            free(r->method[j]);
        for (j = 0; j < r->nheader; j++)
            free(r->header[j]);
        for (j = 0; j < r->nexpose; j++)
            free(r->expose[j]);
    }
    free(c->rule);
    c->rule = NULL;
    c->n = 0;
}

/* ---- parsing ---- */

struct cors_xml {
    struct cors_conf *c;
    struct cm_buf text;
    bool in_rule, root_ok;
    int depth;
    enum stor_s3_err err;
};

static void cx_start(void *ud, const char *name, const char **attrs)
{
    struct cors_xml *x = ud;
    const char *n = stor_s3_xml_local(name);
    struct cors_rule *nr;

    (void)attrs;
    cm_buf_reset(&x->text);
    if (x->depth++ == 0) {
        x->root_ok = strcmp(n, "CORSConfiguration") == 0;
        return;
    }
    if (x->err || strcmp(n, "CORSRule") != 0 || x->depth != 2)
        return;
    if (x->c->n == CORS_RULES_MAX) {
        x->err = S3E_MALFORMED_XML;
        return;
    }
    nr = realloc(x->c->rule, (x->c->n + 1) * sizeof(*nr));
    if (nr == NULL) {
        x->err = S3E_INTERNAL;
        return;
    }
    x->c->rule = nr;
    memset(&nr[x->c->n], 0, sizeof(*nr));
    nr[x->c->n].max_age = -1;
    x->c->n++;
    x->in_rule = true;
}

static void cx_text(void *ud, const char *s, int len)
{
    struct cors_xml *x = ud;

    if (cm_buf_append(&x->text, s, (size_t)len) < 0)
        x->err = S3E_MALFORMED_XML;
}

/* Appends the current text to list @l (count @n). */
static void add_item(struct cors_xml *x, char **l, size_t *n)
{
    if (*n == CORS_LIST_MAX) {
        x->err = S3E_MALFORMED_XML;
        return;
    }
    l[*n] = strndup(x->text.data ? x->text.data : "", x->text.len);
    if (l[*n] == NULL)
        x->err = S3E_INTERNAL;
    else
        (*n)++;
}

static void cx_end(void *ud, const char *name)
{
    struct cors_xml *x = ud;
    const char *n = stor_s3_xml_local(name);
    struct cors_rule *r;
    char *end;

    x->depth--;
    if (x->err || !x->in_rule) {
        cm_buf_reset(&x->text);
        return;
    }
    r = &x->c->rule[x->c->n - 1];
    if (x->depth + 1 > 3) {
        x->err = S3E_MALFORMED_XML; /* nothing nests inside a rule's items */
    } else if (strcmp(n, "CORSRule") == 0 && x->depth + 1 == 2) {
        x->in_rule = false;
    } else if (strcmp(n, "AllowedOrigin") == 0) {
        add_item(x, r->origin, &r->norigin);
    } else if (strcmp(n, "AllowedMethod") == 0) {
        add_item(x, r->method, &r->nmethod);
    } else if (strcmp(n, "AllowedHeader") == 0) {
        add_item(x, r->header, &r->nheader);
    } else if (strcmp(n, "ExposeHeader") == 0) {
        add_item(x, r->expose, &r->nexpose);
    } else if (strcmp(n, "MaxAgeSeconds") == 0) {
        char num[16];

        if (x->text.len == 0 || x->text.len >= sizeof(num)) {
            x->err = S3E_MALFORMED_XML;
        } else {
            memcpy(num, x->text.data, x->text.len);
            num[x->text.len] = 0;
            r->max_age = strtol(num, &end, 10);
            if (*end != 0 || r->max_age < 0 || r->max_age > 0x7fffffffL)
                x->err = S3E_MALFORMED_XML;
        }
    }
    cm_buf_reset(&x->text);
}

/* true for a method S3 allows in a CORS rule. */
static bool method_ok(const char *m)
{
    static const char *const ok[] = {"GET", "PUT", "POST", "DELETE", "HEAD"};
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(ok); i++)
        if (strcmp(m, ok[i]) == 0)
            return true;
    return false;
}

/* Parses and checks a configuration. S3E_NONE, or MalformedXML /
 * InvalidRequest (an unknown method, an origin with two '*'). */
static enum stor_s3_err conf_parse(const char *xml, size_t len,
                                   struct cors_conf *c)
{
    static const struct stor_s3_xml_cbs cb = {cx_start, cx_end, cx_text};
    struct cors_xml x;
    size_t i, j;
    int ret;

    memset(c, 0, sizeof(*c));
    if (len > CORS_XML_MAX)
        return S3E_MALFORMED_XML;
    memset(&x, 0, sizeof(x));
    x.c = c;
    cm_buf_init(&x.text, 8192);
    ret = stor_s3_xml_parse(xml, len, &x, &cb);
    if (ret < 0 && !x.err)
        x.err = ret == -ENOMEM ? S3E_INTERNAL : S3E_MALFORMED_XML;
    cm_buf_fini(&x.text);
    if (!x.err && (!x.root_ok || c->n == 0))
        x.err = S3E_MALFORMED_XML;
    for (i = 0; !x.err && i < c->n; i++) {
        const struct cors_rule *r = &c->rule[i];

        if (r->norigin == 0 || r->nmethod == 0)
            x.err = S3E_MALFORMED_XML;
        for (j = 0; !x.err && j < r->nmethod; j++)
            if (!method_ok(r->method[j]))
                x.err = S3E_CORS_BAD_METHOD;
        for (j = 0; !x.err && j < r->norigin; j++) {
            const char *s = strchr(r->origin[j], '*');

            if (r->origin[j][0] == 0 || (s && strchr(s + 1, '*')))
                x.err = S3E_CORS_BAD_ORIGIN;
        }
    }
    if (x.err)
        conf_fini(c);
    return x.err;
}

/* ---- matching ---- */

/* @s matches @pat of at most one '*' (any run, also empty); @icase:
 * ASCII case-insensitively. */
static bool wild_match(const char *pat, const char *s, size_t sn, bool icase)
{
    const char *star = strchr(pat, '*');
    size_t pre, post;

    if (star == NULL)
        return strlen(pat) == sn &&
               (icase ? strncasecmp(pat, s, sn) : strncmp(pat, s, sn)) == 0;
    pre = (size_t)(star - pat);
    post = strlen(star + 1);
    if (pre + post > sn)
        return false;
    if (icase)
        return strncasecmp(pat, s, pre) == 0 &&
               strncasecmp(star + 1, s + sn - post, post) == 0;
    return strncmp(pat, s, pre) == 0 &&
           strncmp(star + 1, s + sn - post, post) == 0;
}

static bool rule_has_method(const struct cors_rule *r, const char *m, size_t n)
{
    size_t i;

    for (i = 0; i < r->nmethod; i++)
        if (strlen(r->method[i]) == n && memcmp(r->method[i], m, n) == 0)
            return true;
    return false;
}

/* The origin pattern of @r that @o matches, or NULL. */
static const char *rule_origin(const struct cors_rule *r, const char *o,
                               size_t n)
{
    size_t i;

    for (i = 0; i < r->norigin; i++)
        if (wild_match(r->origin[i], o, n, false))
            return r->origin[i];
    return NULL;
}

/* Every comma-separated name of @hdrs (@n bytes) matches an AllowedHeader
 * of @r. */
static bool rule_allows_headers(const struct cors_rule *r, const char *hdrs,
                                size_t n)
{
    const char *p = hdrs, *end = hdrs + n;

    while (p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        const char *e = c ? c : end;
        size_t i;
        bool ok = false;

        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        for (i = 0; i < r->nheader && e > p && !ok; i++)
            ok = wild_match(r->header[i], p, (size_t)(e - p), true);
        if (e > p && !ok)
            return false;
        p = c ? c + 1 : end;
    }
    return true;
}

/* Adds the answer of rule @r for origin @o (pattern @pat). 0/-ENOMEM. */
static int add_headers(struct stor_s3_req *r, const struct cors_rule *ru,
                       const char *pat, const char *o, size_t on,
                       const char *req_hdrs, size_t rhn)
{
    struct stor_resp *rs = &r->http.resp;
    struct cm_buf l;
    size_t i;
    int ret;

    if (strcmp(pat, "*") == 0)
        ret = stor_resp_hdr(rs, "Access-Control-Allow-Origin", "*");
    else
        ret = stor_resp_hdr(rs, "Access-Control-Allow-Origin", "%.*s", (int)on,
                            o);
    cm_buf_init(&l, 8192);
    for (i = 0; ret == 0 && i < ru->nmethod; i++)
        ret = cm_buf_appendf(&l, "%s%s", i ? ", " : "", ru->method[i]);
    if (ret == 0)
        ret = stor_resp_hdr(rs, "Access-Control-Allow-Methods", "%s", l.data);
    if (ret == 0 && req_hdrs && rhn > 0)
        ret = stor_resp_hdr(rs, "Access-Control-Allow-Headers", "%.*s",
                            (int)rhn, req_hdrs);
    cm_buf_reset(&l);
    for (i = 0; ret == 0 && i < ru->nexpose; i++)
        ret = cm_buf_appendf(&l, "%s%s", i ? ", " : "", ru->expose[i]);
    if (ret == 0 && ru->nexpose)
        ret = stor_resp_hdr(rs, "Access-Control-Expose-Headers", "%s", l.data);
    cm_buf_fini(&l);
    if (ret == 0 && ru->max_age >= 0)
        ret = stor_resp_hdr(rs, "Access-Control-Max-Age", "%ld", ru->max_age);
    if (ret == 0 && strcmp(pat, "*") != 0)
        ret = stor_resp_hdr(rs, "Access-Control-Allow-Credentials", "true");
    if (ret == 0)
        ret = stor_resp_hdr(rs, "Vary",
                            "Origin, Access-Control-Request-"
                            "Headers, Access-Control-Request-"
                            "Method");
    return ret;
}

/* The first rule of r->bucket's configuration that allows the request:
 * 1 (headers added), 0 (none matched), -ENOENT (no configuration),
 * -errno. @preflight: the request headers must be allowed too. */
static int cors_apply(struct stor_s3_req *r, bool preflight)
{
    struct cors_conf c;
    const char *o, *m, *rh, *pat;
    size_t on = 0, mn = 0, rhn = 0, i;
    char *xml;
    int ret = 0;

    o = stor_s3_hdr(r, "origin", &on);
    if (o == NULL)
        return 0;
    xml = stor_iam_bucket_conf(r->s3->iam, r->bucket, "cors");
    if (xml == NULL)
        return -ENOENT;
    if (conf_parse(xml, strlen(xml), &c) != S3E_NONE) {
        free(xml);
        return -EBADMSG; /* it was checked when stored */
    }
    free(xml);
    m = stor_s3_hdr(r, "access-control-request-method", &mn);
    if (m == NULL) {
        m = r->http.head.method;
        mn = r->http.head.method_len;
    }
    rh = stor_s3_hdr(r, "access-control-request-headers", &rhn);
    for (i = 0; i < c.n; i++) {
        const struct cors_rule *ru = &c.rule[i];

        pat = rule_origin(ru, o, on);
        if (pat == NULL || !rule_has_method(ru, m, mn))
            continue;
        if (preflight && rh && !rule_allows_headers(ru, rh, rhn))
            continue;
        ret = add_headers(r, ru, pat, o, on, preflight ? rh : NULL, rhn);
        ret = ret < 0 ? ret : 1;
        break;
    }
    conf_fini(&c);
    return ret;
}

/* See cors.h. */
void stor_cors_on_head(struct stor_s3_req *r)
{
    size_t n;

    if (r->bucket[0] == 0 || r->s3->iam == NULL ||
        stor_s3_hdr(r, "origin", &n) == NULL)
        return;
    if (cors_apply(r, false) == -ENOMEM)
        stor_s3_error(r, S3E_INTERNAL);
}

/* See cors.h. */
enum stor_s3_err stor_cors_preflight(struct stor_s3_req *r)
{
    size_t n;
    int ret;

    if (stor_s3_hdr(r, "origin", &n) == NULL)
        return S3E_CORS_NO_ORIGIN;
    if (stor_s3_hdr(r, "access-control-request-method", &n) == NULL)
        return S3E_CORS_NO_METHOD;
    ret = r->s3->iam ? cors_apply(r, true) : -ENOENT;
    if (ret == 1) {
        r->http.resp.status = 200;
        return S3E_NONE;
    }
    if (ret == 0)
        return S3E_CORS_FORBIDDEN;
    if (ret == -ENOENT)
        return S3E_CORS_NOT_ENABLED;
    return S3E_INTERNAL;
}

/* See cors.h. */
void stor_cors_bucket_op(struct stor_s3_req *r)
{
    struct stor_bucket_info bi;
    struct cors_conf c;
    enum stor_s3_err e;
    char *v;
    int ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);

    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    if (r->http.is_get || r->http.is_head) {
        v = stor_iam_bucket_conf(r->s3->iam, r->bucket, "cors");
        if (v == NULL) {
            stor_s3_error(r, S3E_NO_SUCH_CORS);
            return;
        }
        ret = cm_buf_appends(&r->http.resp.body, v);
        free(v);
        if (ret == 0)
            ret =
                stor_resp_hdr(&r->http.resp, "Content-Type", "application/xml");
        if (ret < 0)
            stor_s3_error(r, S3E_INTERNAL);
        else
            r->http.resp.status = 200;
        return;
    }
    if (r->http.is_put) {
        const char *body = r->body.data ? r->body.data : "";
        char *text;

        e = conf_parse(body, r->body.len, &c);
        if (e != S3E_NONE) {
            stor_s3_error(r, e);
            return;
        }
        conf_fini(&c);
        text = strndup(body, r->body.len);
        ret = text ? stor_iam_bucket_conf_set(r, "cors", text) : -ENOMEM;
        free(text);
    } else {
        ret = stor_iam_bucket_conf_set(r, "cors", NULL);
    }
    if (ret < 0) {
        cm_log(CM_LOG_ERROR, -ret, "req=%016llX %s: bucket CORS",
               (unsigned long long)r->http.id, r->bucket);
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    r->http.resp.status = r->http.is_put ? 200 : 204;
}

/* See cors.h. */
int stor_cors_check_xml(const char *xml, size_t len, size_t *nrules)
{
    struct cors_conf c;
    enum stor_s3_err e = conf_parse(xml, len, &c);

    if (e != S3E_NONE)
        return -(int)e;
    *nrules = c.n;
    conf_fini(&c);
    return 0;
}
