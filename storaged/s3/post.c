/* storaged/s3/post.c - POST Object: browser-based uploads with an HTML
 * form (multipart/form-data), as S3 documents them.
 *
 * DESIGN: the form's fields come before its file; they are small and are
 * kept (STOR_POST_MAX_FIELDS, STOR_POST_FIELDS_MAX). When the "file"
 * part's header block has been read, the parser pauses: the policy and
 * its signature are checked and the fields become the request's headers
 * (Content-Type, x-amz-meta-*, x-amz-server-side-encryption*, acl as
 * x-amz-acl, tagging as x-amz-tagging...), so that from then on the
 * request is a PutObject of unknown length and takes PUT's path: the same
 * header audit, authorization, SSE, object-layer streaming in pieces,
 * versioning and ACL recording. The file is never held whole: its bytes
 * go to PUT's pieces as the parser finds them. Fields after the file are
 * ignored, as S3 ignores them. */
#include "storaged/s3/post.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/codec.h"
#include "common/hash.h"
#include "common/sigv2.h"
#include "common/sigv4.h"
#include "common/uri.h"
#include "storaged/s3/auth.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/s3_i.h"
#include "storaged/s3/tagging.h"
#include "storaged/s3/xout.h"
#include "storaged/store/object.h"

/* ---- multipart/form-data ---- */

enum {
    MP_PRE = 0, /* preamble, up to the first delimiter */
    MP_AFTER,   /* right after a delimiter: "--" or padding + CRLF */
    MP_PAD,     /* transport padding before the CRLF */
    MP_DASH,    /* one '-' of the closing "--" */
    MP_CR,      /* the CR of the CRLF ending the delimiter line */
    MP_HEAD,    /* a part's header block */
    MP_BODY,    /* a part's content */
    MP_END,     /* after the closing delimiter: the epilogue, ignored */
};

/* RFC 2046 5.1.1 bchars: DIGIT / ALPHA / "'()+_,-./:=? " (not ending in
 * a space). */
static bool bchar(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("'()+_,-./:=? ", c) != NULL);
}

/* See header. */
int stor_mp_boundary(const char *ct, size_t n, char *out)
{
    static const char type[] = "multipart/form-data";
    size_t i = sizeof(type) - 1, o = 0;

    if (n < i || strncasecmp(ct, type, i) != 0)
        return -EINVAL;
    while (i < n) {
        size_t ns;

        while (i < n && (ct[i] == ' ' || ct[i] == '\t'))
            i++;
        if (i >= n)
            break;
        if (ct[i] != ';')
            return -EINVAL;
        i++;
        while (i < n && (ct[i] == ' ' || ct[i] == '\t'))
            i++;
        ns = i;
        while (i < n && ct[i] != '=' && ct[i] != ';')
            i++;
        if (i - ns == 8 && strncasecmp(ct + ns, "boundary", 8) == 0 && i < n &&
            ct[i] == '=') {
            bool quoted;

            i++;
            quoted = i < n && ct[i] == '"';
            i += quoted;
            o = 0;
            while (i < n && (quoted ? ct[i] != '"' : ct[i] != ';')) {
                if (o >= STOR_MP_BOUNDARY_MAX || !bchar(ct[i]) ||
                    (!quoted && ct[i] == ' '))
                    return -EINVAL;
                out[o++] = ct[i++];
            }
            if (quoted) {
                if (i >= n)
                    return -EINVAL;
                i++;
            }
            if (o == 0 || out[o - 1] == ' ')
                return -EINVAL;
            out[o] = 0;
            continue;
        }
        /* another parameter: skip its value */
        if (i < n && ct[i] == '=') {
            i++;
            if (i < n && ct[i] == '"') {
                i++;
                while (i < n && ct[i] != '"')
                    i++;
                if (i >= n)
                    return -EINVAL;
                i++;
            } else {
                while (i < n && ct[i] != ';')
                    i++;
            }
        }
    }
    return o ? 0 : -EINVAL;
}

/* See header. */
void stor_mp_init(struct stor_mp *m, const char *boundary)
{
    size_t bl = strlen(boundary);

    memset(m, 0, offsetof(struct stor_mp, head));
    memcpy(m->delim, "\r\n--", 4);
    memcpy(m->delim + 4, boundary, bl);
    m->dlen = 4 + bl;
    /* the first delimiter may start the body: as if a CRLF came first */
    m->match = 2;
    m->state = MP_PRE;
}

/* See header. */
bool stor_mp_done(const struct stor_mp *m)
{
    return m->state == MP_END;
}

/* Reads a parameter value at @s[*i] (quoted-string with backslash escapes,
 * or a token) and writes it decoded at @dst (in place: dst <= s + *i).
 * Returns its length, or -1 on an unterminated quote. */
static long param_value(char *s, size_t n, size_t *i, char *dst)
{
    size_t o = 0;

    if (*i < n && s[*i] == '"') {
        (*i)++;
        while (*i < n && s[*i] != '"') {
            if (s[*i] == '\\' && *i + 1 < n)
                (*i)++;
            dst[o++] = s[(*i)++];
        }
        if (*i >= n)
            return -1;
        (*i)++;
    } else {
        while (*i < n && s[*i] != ';' && s[*i] != ' ' && s[*i] != '\t')
            dst[o++] = s[(*i)++];
    }
    return (long)o;
}

/* Content-Disposition: form-data; name="..."; filename="..." (value @v of
 * @n bytes, decoded in place). 0 or -EBADMSG. */
static int disposition(char *v, size_t n, struct stor_mp_part *p)
{
    size_t i = 9;

    if (n < 9 || strncasecmp(v, "form-data", 9) != 0)
        return -EBADMSG;
    while (i < n) {
        size_t ns;
        long vl;
        char *dst;

        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ';'))
            i++;
        if (i >= n)
            break;
        ns = i;
        while (i < n && v[i] != '=' && v[i] != ';')
            i++;
        if (i >= n || v[i] != '=')
            return -EBADMSG;
        i++;
        dst = v + ns; /* the name is not needed once matched */
        if (i - ns - 1 == 4 && strncasecmp(v + ns, "name", 4) == 0) {
            vl = param_value(v, n, &i, dst);
            if (vl < 0)
                return -EBADMSG;
            p->name = dst;
            p->name_len = (size_t)vl;
        } else if (i - ns - 1 == 8 && strncasecmp(v + ns, "filename", 8) == 0) {
            vl = param_value(v, n, &i, dst);
            if (vl < 0)
                return -EBADMSG;
            p->filename = dst;
            p->filename_len = (size_t)vl;
        } else {
            vl = param_value(v, n, &i, dst); /* e.g. filename*= */
            if (vl < 0)
                return -EBADMSG;
        }
    }
    return p->name && p->name_len ? 0 : -EBADMSG;
}

/* Parses the header block m->head (ending in CRLF CRLF) into @p. */
static int part_head(struct stor_mp *m, struct stor_mp_part *p)
{
    char *s = m->head, *end = m->head + m->hlen - 2; /* the last CRLF */
    bool seen_cd = false;

    memset(p, 0, sizeof(*p));
    while (s < end) {
        char *eol = memmem(s, (size_t)(end - s), "\r\n", 2);
        char *colon, *v, *ve;

        if (eol == NULL)
            return -EBADMSG;
        colon = memchr(s, ':', (size_t)(eol - s));
        if (colon == NULL || colon == s || s[0] == ' ' || s[0] == '\t')
            return -EBADMSG; /* no name, or an obsolete folded line */
        v = colon + 1;
        while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
        ve = eol;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        if (colon - s == 19 && strncasecmp(s, "content-disposition", 19) == 0) {
            if (seen_cd || disposition(v, (size_t)(ve - v), p) < 0)
                return -EBADMSG;
            seen_cd = true;
        } else if (colon - s == 12 && strncasecmp(s, "content-type", 12) == 0) {
            p->ctype = v;
            p->ctype_len = (size_t)(ve - v);
        }
        s = eol + 2;
    }
    return seen_cd ? 0 : -EBADMSG;
}

/* See header. */
ssize_t stor_mp_feed(struct stor_mp *m, const char *p, size_t n,
                     const struct stor_mp_cb *cb, void *arg)
{
    size_t i = 0;
    int ret;

    while (i < n) {
        char c;

        switch (m->state) {
        case MP_PRE:
        case MP_BODY: {
            bool emit = m->state == MP_BODY;
            const char *q;
            size_t end;

            if (m->match > 0) {
                if (p[i] == m->delim[m->match]) {
                    m->match++;
                    i++;
                    if (m->match < m->dlen)
                        continue;
                    m->match = 0;
                    m->state = MP_AFTER;
                    if (m->in_part) {
                        m->in_part = false;
                        ret = cb->part_end ? cb->part_end(arg) : 0;
                        if (ret < 0)
                            return ret;
                    }
                    continue;
                }
                /* what was held back is the delimiter's prefix: data.
                 * Only delim[0] is a CR, so no later byte of it can start
                 * a match: re-examine p[i] from scratch */
                if (emit) {
                    ret = cb->data(arg, m->delim, m->match);
                    if (ret < 0)
                        return ret;
                }
                m->match = 0;
                continue;
            }
            q = memchr(p + i, '\r', n - i);
            end = q ? (size_t)(q - p) : n;
            if (emit && end > i) {
                ret = cb->data(arg, p + i, end - i);
                if (ret < 0)
                    return ret;
            }
            i = end;
            if (q) {
                m->match = 1;
                i++;
            }
            continue;
        }
        case MP_AFTER:
        case MP_PAD:
            c = p[i++];
            if (c == '-' && m->state == MP_AFTER)
                m->state = MP_DASH;
            else if (c == '\r')
                m->state = MP_CR;
            else if (c == ' ' || c == '\t')
                m->state = MP_PAD;
            else
                return -EBADMSG;
            continue;
        case MP_DASH:
            if (p[i++] != '-')
                return -EBADMSG;
            m->state = MP_END;
            continue;
        case MP_CR:
            if (p[i++] != '\n')
                return -EBADMSG;
            m->state = MP_HEAD;
            m->hlen = 0;
            continue;
        case MP_HEAD: {
            struct stor_mp_part part;

            if (m->hlen >= STOR_MP_HEAD_MAX)
                return -EBADMSG;
            m->head[m->hlen++] = p[i++];
            if (m->hlen == 2 && memcmp(m->head, "\r\n", 2) == 0)
                return -EBADMSG; /* no headers: no name */
            if (m->hlen < 4 || memcmp(m->head + m->hlen - 4, "\r\n\r\n", 4))
                continue;
            m->head[m->hlen] = 0;
            if (part_head(m, &part) < 0)
                return -EBADMSG;
            m->state = MP_BODY;
            m->match = 0;
            m->in_part = true;
            ret = cb->part ? cb->part(arg, &part) : 0;
            if (ret < 0)
                return ret;
            if (ret == STOR_MP_PAUSE)
                return (ssize_t)i;
            continue;
        }
        default: /* MP_END */
            return (ssize_t)n;
        }
    }
    return (ssize_t)n;
}

/* ---- the form ---- */

/* See header. */
const char *stor_post_field(const struct stor_post_form *f, const char *name,
                            size_t *len)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        if (strcasecmp(f->f[i].name, name) == 0) {
            *len = f->f[i].value_len;
            return f->f[i].value;
        }
    return NULL;
}

/* See header. */
int stor_post_form_add(struct stor_post_form *f, const char *name, size_t nlen,
                       const char *value, size_t vlen)
{
    struct stor_post_field *e;
    size_t i;

    for (i = 0; i < f->n; i++)
        if (strlen(f->f[i].name) == nlen &&
            strncasecmp(f->f[i].name, name, nlen) == 0)
            return -EEXIST;
    if (f->n >= STOR_POST_MAX_FIELDS || nlen == 0 ||
        nlen + vlen > STOR_POST_FIELDS_MAX - f->bytes ||
        memchr(name, 0, nlen) != NULL)
        return -E2BIG;
    e = &f->f[f->n];
    e->name = strndup(name, nlen);
    e->value = malloc(vlen + 1);
    if (e->name == NULL || e->value == NULL) {
        free(e->name);
        free(e->value);
        return -ENOMEM;
    }
    memcpy(e->value, value, vlen);
    e->value[vlen] = 0;
    e->value_len = vlen;
    f->bytes += nlen + vlen;
    f->n++;
    return 0;
}

/* See header. */
void stor_post_form_fini(struct stor_post_form *f)
{
    size_t i;

    for (i = 0; i < f->n; i++) {
        free(f->f[i].name);
        free(f->f[i].value);
    }
    f->n = 0;
    f->bytes = 0;
}

/* ---- the policy ---- */

/* "2026-12-02T03:04:05Z" or "...05.123Z" (the only forms S3 takes). */
static int parse_expiration(const char *s, time_t *out)
{
    struct tm tm;
    size_t n = strlen(s), i;
    int v[6], w[6] = {4, 2, 2, 2, 2, 2};
    const char sep[6] = {'-', '-', 'T', ':', ':', 0};
    const char *p = s;
    int k;

    for (k = 0; k < 6; k++) {
        v[k] = 0;
        for (i = 0; i < (size_t)w[k]; i++, p++) {
            if (*p < '0' || *p > '9')
                return -EINVAL;
            v[k] = v[k] * 10 + (*p - '0');
        }
        if (k < 5 && *p++ != sep[k])
            return -EINVAL;
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (p[0] != 'Z' || p[1] != 0 || (size_t)(p + 1 - s) != n)
        return -EINVAL;
    if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 ||
        v[4] > 59 || v[5] > 60)
        return -EINVAL;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = v[0] - 1900;
    tm.tm_mon = v[1] - 1;
    tm.tm_mday = v[2];
    tm.tm_hour = v[3];
    tm.tm_min = v[4];
    tm.tm_sec = v[5];
    *out = timegm(&tm);
    return 0;
}

/* Form fields that need no condition (S3: the policy and its signature,
 * the file, x-ignore-*; flexible checksums only make the upload stricter). */
static bool exempt(const char *name)
{
    static const char *const names[] = {
        "policy", "signature", "awsaccesskeyid", "x-amz-signature", "file",
    };
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(name, names[i]) == 0)
            return true;
    return strncasecmp(name, "x-ignore-", 9) == 0 ||
           strncasecmp(name, "x-amz-checksum-", 15) == 0;
}

/* The value a condition on @name tests. */
static const char *cond_value(const struct stor_post_form *f, const char *name,
                              const char *bucket, const char *key, size_t *len)
{
    const char *v;

    if (strcasecmp(name, "bucket") == 0) {
        *len = strlen(bucket);
        return bucket;
    }
    if (strcasecmp(name, "key") == 0) {
        *len = strlen(key);
        return key;
    }
    v = stor_post_field(f, name, len);
    if (v == NULL) { /* an absent field tests as empty */
        *len = 0;
        return "";
    }
    return v;
}

/* A content-length-range bound: a JSON integer or a string of digits. */
static int range_bound(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        uint64_t u;
        const char *s = json_string_value(v);

        if (stor_http_parse_u64(s, strlen(s), &u) < 0 || u > INT64_MAX)
            return -EINVAL;
        *out = (int64_t)u;
        return 0;
    }
    return -EINVAL;
}

#define MAX_CONDS 128

struct cond {
    const char *field; /* without '$' */
    const char *value;
    bool prefix; /* starts-with */
};

/* Reads one condition; content-length-range goes to @lim. 0 or -EINVAL. */
static int read_cond(json_t *c, struct cond *out, bool *is_range,
                     struct stor_post_limits *lim)
{
    const char *op, *field;
    int64_t lo, hi;

    *is_range = false;
    if (json_is_object(c)) {
        const char *k;
        json_t *v;

        if (json_object_size(c) != 1)
            return -EINVAL;
        json_object_foreach(c, k, v)
        {
            if (!json_is_string(v))
                return -EINVAL;
            out->field = k[0] == '$' ? k + 1 : k;
            out->value = json_string_value(v);
            out->prefix = false;
        }
        return 0;
    }
    if (!json_is_array(c) || json_array_size(c) != 3 ||
        !json_is_string(json_array_get(c, 0)))
        return -EINVAL;
    op = json_string_value(json_array_get(c, 0));
    if (strcasecmp(op, "content-length-range") == 0) {
        if (range_bound(json_array_get(c, 1), &lo) < 0 ||
            range_bound(json_array_get(c, 2), &hi) < 0 || lo < 0 || hi < lo)
            return -EINVAL;
        lim->min = (uint64_t)lo;
        lim->max = (uint64_t)hi;
        *is_range = true;
        return 0;
    }
    if (strcasecmp(op, "eq") != 0 && strcasecmp(op, "starts-with") != 0)
        return -EINVAL;
    if (!json_is_string(json_array_get(c, 1)) ||
        !json_is_string(json_array_get(c, 2)))
        return -EINVAL;
    field = json_string_value(json_array_get(c, 1));
    if (field[0] != '$' || field[1] == 0)
        return -EINVAL;
    out->field = field + 1;
    out->value = json_string_value(json_array_get(c, 2));
    out->prefix = strcasecmp(op, "starts-with") == 0;
    return 0;
}

/* See header. */
enum stor_s3_err stor_post_policy_check(const char *json, size_t len,
                                        time_t now,
                                        const struct stor_post_form *f,
                                        const char *bucket, const char *key,
                                        struct stor_post_limits *lim, char *why,
                                        size_t why_len)
{
    struct cond conds[MAX_CONDS];
    size_t nc = 0, i, j;
    enum stor_s3_err e = S3E_POST_BAD_POLICY;
    json_error_t je;
    json_t *root, *exp, *cl, *c;
    const char *k;
    json_t *v;
    time_t t;

    lim->min = 0;
    lim->max = UINT64_MAX;
    why[0] = 0;
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL || !json_is_object(root))
        goto out;
    json_object_foreach(root, k, v)
    {
        /* the two keys S3 knows, spelt exactly */
        if (strcmp(k, "expiration") != 0 && strcmp(k, "conditions") != 0)
            goto out;
    }
    exp = json_object_get(root, "expiration");
    cl = json_object_get(root, "conditions");
    if (!json_is_string(exp) || !json_is_array(cl) ||
        parse_expiration(json_string_value(exp), &t) < 0)
        goto out;
    json_array_foreach(cl, i, c)
    {
        bool is_range;

        if (nc >= MAX_CONDS || read_cond(c, &conds[nc], &is_range, lim) < 0)
            goto out;
        nc += !is_range;
    }
    e = S3E_ACCESS_DENIED;
    if (now > t) {
        snprintf(why, why_len, "Invalid according to Policy: Policy expired.");
        goto out;
    }
    for (i = 0; i < nc; i++) {
        size_t vl, cl2 = strlen(conds[i].value);
        const char *fv = cond_value(f, conds[i].field, bucket, key, &vl);
        bool ok = conds[i].prefix
                      ? vl >= cl2 && memcmp(fv, conds[i].value, cl2) == 0
                      : vl == cl2 && memcmp(fv, conds[i].value, cl2) == 0;

        if (!ok) {
            snprintf(why, why_len,
                     "Invalid according to Policy: Policy Condition failed: "
                     "[\"%s\", \"$%s\", \"%s\"]",
                     conds[i].prefix ? "starts-with" : "eq", conds[i].field,
                     conds[i].value);
            goto out;
        }
    }
    for (i = 0; i < f->n; i++) {
        bool named = exempt(f->f[i].name);

        for (j = 0; !named && j < nc; j++)
            named = strcasecmp(conds[j].field, f->f[i].name) == 0;
        if (!named) {
            snprintf(why, why_len,
                     "Invalid according to Policy: Extra input fields: %s",
                     f->f[i].name);
            goto out;
        }
    }
    e = S3E_NONE;
out:
    json_decref(root);
    return e;
}

/* ---- the request ---- */

#define PEND_MAX  (4 * 1024 * 1024) /* input kept while the object opens */
#define NAME_MAX_ 1024              /* a field name */

/* The form state of one POST request (r->post). */
struct stor_s3_post {
    struct stor_mp mp;
    struct stor_post_form form;
    struct cm_buf name, val; /* the field being read */
    bool in_field;           /* a field part is being read */
    bool in_file;            /* the file part is being read */
    bool file_seen, file_ended;
    bool begin_busy;    /* the object is being opened (a job) */
    char *filename;     /* the file part's filename= (owned) */
    struct cm_buf pend; /* input that came while begin_busy */
    char *tagging;      /* x-amz-tagging made from the tagging field */
    struct cm_buf key;  /* the key, ${filename} expanded */
    struct stor_post_limits lim;
    int status;           /* success_action_status: 200, 201 or 204 */
    const char *redirect; /* success_action_redirect (in form) or NULL */
};

/* Request headers that a form field stands for, or that would mean
 * something else on the form's request (its multipart Content-Type, a
 * checksum of the whole body...): dropped before the fields go in. */
static bool hdr_dropped(const char *n, size_t len)
{
    static const char *const names[] = {
        "content-type",     "content-md5",      "content-disposition",
        "content-encoding", "content-language", "cache-control",
        "expires",          "if-match",         "if-none-match",
    };
    size_t i;

    if (len >= 6 && strncasecmp(n, "x-amz-", 6) == 0)
        return true;
    for (i = 0; i < CM_ARRAY_SIZE(names); i++)
        if (stor_http_ieq(n, len, names[i]))
            return true;
    return false;
}

/* The request header form field @name sets, or NULL when none. */
static const char *hdr_of_field(const char *name)
{
    static const char *const same[] = {
        "content-type",        "cache-control",
        "content-disposition", "content-encoding",
        "content-language",    "expires",
        "x-amz-storage-class", "x-amz-website-redirect-location",
    };
    static const char *const prefixes[] = {
        "x-amz-meta-",
        "x-amz-server-side-encryption",
        "x-amz-checksum-",
        "x-amz-object-lock-",
    };
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(same); i++)
        if (strcasecmp(name, same[i]) == 0)
            return name;
    for (i = 0; i < CM_ARRAY_SIZE(prefixes); i++)
        if (strncasecmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return name;
    if (strcasecmp(name, "acl") == 0)
        return "x-amz-acl";
    return NULL;
}

/* Whether @n bytes at @v may be a header value: no CR, LF or other
 * control byte (a form field can hold any byte; a stored one is sent back
 * as a header on GET). */
static bool hdr_value_ok(const char *v, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
            return false;
    return true;
}

/* Makes the form's fields the request's headers (see DESIGN). */
static enum stor_s3_err set_headers(struct stor_s3_req *r, const char **msg)
{
    struct stor_s3_post *ps = r->post;
    struct stor_http_hdr *h = r->http.hdrs;
    size_t n = r->http.head.nhdrs, k = 0, i;

    for (i = 0; i < n; i++)
        if (!hdr_dropped(h[i].name, h[i].name_len))
            h[k++] = h[i];
    for (i = 0; i < ps->form.n; i++) {
        const struct stor_post_field *f = &ps->form.f[i];
        const char *hn = hdr_of_field(f->name);

        if (hn == NULL)
            continue;
        if (!hdr_value_ok(f->value, f->value_len)) {
            *msg = "A form field that sets a header holds a control "
                   "character.";
            return S3E_INVALID_ARGUMENT;
        }
        if (k >= STOR_HTTP_MAX_HEADERS)
            return S3E_INVALID_ARGUMENT;
        h[k++] = (struct stor_http_hdr){.name = hn,
                                        .name_len = strlen(hn),
                                        .value = f->value,
                                        .value_len = f->value_len};
    }
    if (ps->tagging) {
        if (k >= STOR_HTTP_MAX_HEADERS)
            return S3E_INVALID_ARGUMENT;
        h[k++] = (struct stor_http_hdr){.name = "x-amz-tagging",
                                        .name_len = 13,
                                        .value = ps->tagging,
                                        .value_len = strlen(ps->tagging)};
    }
    r->http.head.nhdrs = k;
    return S3E_NONE;
}

/* The key field with ${filename} replaced by the file's name. */
static enum stor_s3_err make_key(struct stor_s3_req *r, const char **msg)
{
    struct stor_s3_post *ps = r->post;
    const char *v, *p, *fn = ps->filename ? ps->filename : "";
    size_t n;
    char *key;

    v = stor_post_field(&ps->form, "key", &n);
    if (v == NULL) {
        *msg = "Bucket POST must contain a field named 'key'.  If it is "
               "specified, please check the order of the fields.";
        return S3E_INVALID_ARGUMENT;
    }
    cm_buf_reset(&ps->key);
    while ((p = memmem(v, n, "${filename}", 11)) != NULL) {
        if (cm_buf_append(&ps->key, v, (size_t)(p - v)) < 0 ||
            cm_buf_appends(&ps->key, fn) < 0)
            return S3E_INTERNAL;
        n -= (size_t)(p - v) + 11;
        v = p + 11;
    }
    if (cm_buf_append(&ps->key, v, n) < 0)
        return S3E_INTERNAL;
    if (ps->key.len == 0) {
        *msg = "User key must have a length greater than 0.";
        return S3E_INVALID_ARGUMENT;
    }
    if (ps->key.len > STOR_MAX_KEY_LEN)
        return S3E_KEY_TOO_LONG;
    if (!cm_utf8_valid(ps->key.data, ps->key.len) ||
        memchr(ps->key.data, 0, ps->key.len) != NULL)
        return S3E_INVALID_URI;
    key = strndup(ps->key.data, ps->key.len);
    if (key == NULL)
        return S3E_INTERNAL;
    free(r->key);
    r->key = key;
    r->key_len = ps->key.len;
    r->has_key = true;
    return S3E_NONE;
}

/* Verifies the policy's signature: SigV4 (x-amz-algorithm,
 * x-amz-credential, x-amz-date, x-amz-signature: hex HMAC-SHA256 over the
 * base64 policy under the credential's signing key) or the form's SigV2
 * (AWSAccessKeyId, signature: base64 HMAC-SHA1 over it), which S3 still
 * takes for POST. Sets who signed. */
static enum stor_s3_err check_signature(struct stor_s3_req *r, const char *pol,
                                        size_t pol_len, const char **msg)
{
    const struct stor_post_form *f = &r->post->form;
    const char *alg, *secret = NULL, *sig;
    size_t alen = 0, slen = 0;
    enum stor_s3_err e;
    bool ok;

    alg = stor_post_field(f, "x-amz-algorithm", &alen);
    if (alg) {
        const char *cred, *date;
        size_t cl = 0, dl = 0;
        struct cm_sigv4_auth a;
        char region[64], date8[9], hex[65];
        uint8_t key[32];

        cred = stor_post_field(f, "x-amz-credential", &cl);
        date = stor_post_field(f, "x-amz-date", &dl);
        sig = stor_post_field(f, "x-amz-signature", &slen);
        if (!stor_http_ieq(alg, alen, "AWS4-HMAC-SHA256")) {
            *msg = "Only AWS4-HMAC-SHA256 is supported for x-amz-algorithm.";
            return S3E_INVALID_ARGUMENT;
        }
        if (cred == NULL || date == NULL || sig == NULL) {
            *msg = cred == NULL ? "Bucket POST must contain a field named "
                                  "'x-amz-credential'."
                   : date == NULL
                       ? "Bucket POST must contain a field named 'x-amz-date'."
                       : "Bucket POST must contain a field named "
                         "'x-amz-signature'.";
            return S3E_INVALID_ARGUMENT;
        }
        memset(&a, 0, sizeof(a));
        if (cm_sigv4_parse_credential(cred, cl, &a) < 0 || a.service_len != 2 ||
            memcmp(a.service, "s3", 2) != 0 || a.region_len >= sizeof(region) ||
            dl < 8 || memcmp(a.date8, date, 8) != 0) {
            *msg = "Invalid x-amz-credential or x-amz-date.";
            return S3E_INVALID_ARGUMENT;
        }
        e = stor_auth_secret(r, a.access_key, a.access_key_len, &secret);
        if (e != S3E_NONE)
            return e;
        memcpy(region, a.region, a.region_len);
        region[a.region_len] = 0;
        memcpy(date8, a.date8, 8);
        date8[8] = 0;
        cm_sigv4_signing_key(secret, date8, region, "s3", key);
        cm_sigv4_signature(key, pol, pol_len, hex);
        ok = slen == 64 && cm_sigv4_equal(hex, sig, 64);
    } else {
        const char *ak = stor_post_field(f, "AWSAccessKeyId", &alen);
        char b64[CM_SIGV2_SIG_LEN + 1];

        sig = stor_post_field(f, "signature", &slen);
        if (ak == NULL || sig == NULL) {
            *msg = ak == NULL ? "Bucket POST must contain a field named "
                                "'AWSAccessKeyId'.  If it is specified, "
                                "please check the order of the fields."
                              : "Bucket POST must contain a field named "
                                "'Signature'.  If it is specified, please "
                                "check the order of the fields.";
            return S3E_INVALID_ARGUMENT;
        }
        e = stor_auth_secret(r, ak, alen, &secret);
        if (e != S3E_NONE)
            return e;
        cm_sigv2_signature(secret, pol, pol_len, b64);
        ok = cm_sigv2_equal(b64, sig, slen);
    }
    if (!ok)
        return S3E_SIGNATURE_MISMATCH;
    if (r->iam_user && !stor_iam_user_enabled(r->iam_user))
        return S3E_ACCESS_DENIED;
    r->anonymous = false;
    r->authed = true;
    return S3E_NONE;
}

/* The policy: its signature and its conditions. */
static enum stor_s3_err check_policy(struct stor_s3_req *r, char *why,
                                     size_t why_len, const char **msg)
{
    struct stor_s3_post *ps = r->post;
    const char *pol;
    size_t n;
    uint8_t *json;
    long jl;
    enum stor_s3_err e;

    pol = stor_post_field(&ps->form, "policy", &n);
    if (pol == NULL) {
        /* anonymous, as a public-write bucket allows; credentials without
         * a policy sign nothing */
        if (stor_post_field(&ps->form, "AWSAccessKeyId", &n) ||
            stor_post_field(&ps->form, "x-amz-credential", &n) ||
            stor_post_field(&ps->form, "signature", &n) ||
            stor_post_field(&ps->form, "x-amz-signature", &n)) {
            *msg = "Bucket POST must contain a field named 'policy'.  If it "
                   "is specified, please check the order of the fields.";
            return S3E_INVALID_ARGUMENT;
        }
        return S3E_NONE;
    }
    e = check_signature(r, pol, n, msg);
    if (e != S3E_NONE)
        return e;
    json = malloc(n / 4 * 3 + 3);
    if (json == NULL)
        return S3E_INTERNAL;
    jl = cm_base64_decode(pol, n, json);
    if (jl < 0) {
        free(json);
        return S3E_POST_BAD_POLICY;
    }
    e = stor_post_policy_check((const char *)json, (size_t)jl, time(NULL),
                               &ps->form, r->bucket, r->key, &ps->lim, why,
                               why_len);
    free(json);
    return e;
}

/* The form's own fields: success_action_*, tagging. */
static enum stor_s3_err form_options(struct stor_s3_req *r)
{
    struct stor_s3_post *ps = r->post;
    const char *v;
    size_t n, nt = 0;
    int ret;

    ps->status = 204;
    v = stor_post_field(&ps->form, "success_action_status", &n);
    if (v && (stor_http_ieq(v, n, "200") || stor_http_ieq(v, n, "201")))
        ps->status = v[2] == '0' ? 200 : 201;
    ps->redirect = stor_post_field(&ps->form, "success_action_redirect", &n);
    if (ps->redirect == NULL)
        ps->redirect = stor_post_field(&ps->form, "redirect", &n);
    if (ps->redirect && n == 0)
        ps->redirect = NULL;
    if (ps->redirect && !hdr_value_ok(ps->redirect, n))
        return S3E_INVALID_ARGUMENT; /* it goes back as Location */
    v = stor_post_field(&ps->form, "tagging", &n);
    if (v) {
        ret = stor_s3_tags_from_xml(v, n, 10, &ps->tagging, &nt);
        if (ret == -ENOMEM)
            return S3E_INTERNAL;
        if (ret < 0)
            return ret == -EPROTO ? S3E_INTERNAL : (enum stor_s3_err) - ret;
    }
    return S3E_NONE;
}

/* The file part begins: decide whether it may be written, and start it
 * as a PutObject. S3E_NONE, or the error with @why / @msg set. */
static enum stor_s3_err file_begin(struct stor_s3_req *r, char *why,
                                   size_t why_len, const char **msg)
{
    enum stor_s3_err e;

    e = make_key(r, msg);
    if (e == S3E_NONE)
        e = check_policy(r, why, why_len, msg);
    if (e == S3E_NONE)
        e = form_options(r);
    if (e == S3E_NONE)
        e = set_headers(r, msg);
    if (e != S3E_NONE)
        return e;
    r->op = S3_OP_PUT_OBJECT; /* from here on, PUT's path */
    e = stor_s3_hdr_audit(r);
    if (e == S3E_NONE)
        e = stor_s3_cksum_setup(r);
    if (e != S3E_NONE) /* as s3.c's on_head: tell an anonymous caller no more */
        return r->anonymous && e != S3E_NOT_IMPLEMENTED ? S3E_ACCESS_DENIED : e;
    e = stor_iam_authorize(r);
    /* a decision on the stored object's tags would need a worker first
     * (s3:ExistingObjectTag): not for POST, refused */
    if (e == S3E_NONE && stor_iam_needs_tags(r))
        e = S3E_ACCESS_DENIED;
    return e;
}

/* Loop: the object is open (or refused); feed what came meanwhile. */
static void begin_done(struct stor_s3_req *r)
{
    struct stor_s3_post *ps = r->post;
    struct cm_buf pend = ps->pend;

    r->piece_busy = false;
    ps->begin_busy = false;
    if (r->http.resp.status) { /* refused: NoSuchBucket, SSE errors... */
        stor_http_respond(&r->http);
        return;
    }
    cm_buf_init(&ps->pend, PEND_MAX);
    if (pend.len && stor_s3_post_body(r, pend.data, pend.len) < 0) {
        cm_buf_fini(&pend);
        /* a piece write it started answers when it is back */
        r->http.failed = true;
        if (!r->http.job_busy)
            stor_http_respond(&r->http);
        return;
    }
    cm_buf_fini(&pend);
    stor_s3_body_resume(r);
}

/* Parser callback: a part's headers. */
static int on_part(void *arg, const struct stor_mp_part *p)
{
    struct stor_s3_req *r = arg;
    struct stor_s3_post *ps = r->post;
    char why[512];
    const char *msg = NULL;
    enum stor_s3_err e;

    if (ps->file_seen)
        return 0; /* after the file: ignored, as S3 does */
    if (p->name_len == 4 && strncasecmp(p->name, "file", 4) == 0) {
        ps->file_seen = true;
        ps->in_file = true;
        ps->filename = strndup(p->filename ? p->filename : "",
                               p->filename ? p->filename_len : 0);
        if (ps->filename == NULL) {
            stor_s3_error(r, S3E_INTERNAL);
            return -ENOMEM;
        }
        why[0] = 0;
        e = file_begin(r, why, sizeof(why), &msg);
        if (e != S3E_NONE) {
            stor_s3_error_msg(r, e, why[0] ? why : msg);
            return -EACCES;
        }
        r->decoded_len = UINT64_MAX; /* known when the part ends */
        ps->begin_busy = true;
        r->piece_busy = true; /* what PUT's pipeline waits on */
        stor_s3_submit(r, stor_s3_put_begin_run, begin_done);
        return STOR_MP_PAUSE;
    }
    if (p->name_len > NAME_MAX_) {
        stor_s3_error(r, S3E_POST_FIELDS_TOO_LARGE);
        return -E2BIG;
    }
    cm_buf_reset(&ps->name);
    cm_buf_reset(&ps->val);
    if (cm_buf_append(&ps->name, p->name, p->name_len) < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        return -ENOMEM;
    }
    ps->in_field = true;
    return 0;
}

/* Parser callback: part content. */
static int on_data(void *arg, const char *p, size_t n)
{
    struct stor_s3_req *r = arg;
    struct stor_s3_post *ps = r->post;

    if (ps->in_field) {
        if (cm_buf_append(&ps->val, p, n) < 0) {
            stor_s3_error(r, S3E_POST_FIELDS_TOO_LARGE);
            return -E2BIG;
        }
        return 0;
    }
    if (!ps->in_file)
        return 0;
    if (r->body_bytes + n > ps->lim.max) { /* refused as soon as known */
        stor_s3_error(r, S3E_ENTITY_TOO_LARGE);
        return -E2BIG;
    }
    return stor_s3_body_sink(r, p, n);
}

/* Parser callback: a part ended. */
static int on_part_end(void *arg)
{
    struct stor_s3_req *r = arg;
    struct stor_s3_post *ps = r->post;
    int ret;

    if (ps->in_file) {
        ps->in_file = false;
        ps->file_ended = true;
        return 0;
    }
    if (!ps->in_field)
        return 0;
    ps->in_field = false;
    ret = stor_post_form_add(&ps->form, ps->name.data, ps->name.len,
                             ps->val.data ? ps->val.data : "", ps->val.len);
    if (ret == -EEXIST) {
        stor_s3_error_msg(r, S3E_INVALID_ARGUMENT,
                          "A form field appears more than once.");
        return -EINVAL;
    }
    if (ret < 0) {
        stor_s3_error(r, ret == -ENOMEM ? S3E_INTERNAL
                                        : S3E_POST_FIELDS_TOO_LARGE);
        return ret;
    }
    return 0;
}

static const struct stor_mp_cb post_cb = {
    .part = on_part, .data = on_data, .part_end = on_part_end};

/* See header. */
enum stor_s3_err stor_s3_post_setup(struct stor_s3_req *r)
{
    char boundary[STOR_MP_BOUNDARY_MAX + 1];
    const char *ct;
    size_t n = 0;

    ct = stor_s3_hdr(r, "content-type", &n);
    if (ct == NULL || stor_mp_boundary(ct, n, boundary) < 0)
        return S3E_POST_MALFORMED;
    if (!r->http.has_body)
        return S3E_POST_MALFORMED;
    r->post = calloc(1, sizeof(*r->post));
    if (r->post == NULL)
        return S3E_INTERNAL;
    stor_mp_init(&r->post->mp, boundary);
    cm_buf_init(&r->post->name, NAME_MAX_);
    cm_buf_init(&r->post->val, STOR_POST_FIELDS_MAX);
    cm_buf_init(&r->post->pend, PEND_MAX);
    cm_buf_init(&r->post->key, CM_BUF_NOLIMIT);
    r->post->lim.max = UINT64_MAX;
    r->post->status = 204;
    return S3E_NONE;
}

/* See header. */
bool stor_s3_post_paused(const struct stor_s3_req *r)
{
    return r->post && r->post->begin_busy;
}

/* See header. */
int stor_s3_post_body(struct stor_s3_req *r, const char *p, size_t n)
{
    struct stor_s3_post *ps = r->post;
    ssize_t used;

    if (r->http.failed)
        return -ECANCELED; /* answered (or to be) already */
    if (ps->begin_busy) {
        /* DESIGN: the transport stops reading while the object opens
         * (stor_s3_post_paused); what one read brought is kept */
        if (cm_buf_append(&ps->pend, p, n) < 0)
            return -E2BIG; /* unreachable: one read is at most 320 KiB */
        return 0;
    }
    used = stor_mp_feed(&ps->mp, p, n, &post_cb, r);
    if (used < 0) {
        if (r->http.resp.status == 0)
            stor_s3_error(r, S3E_POST_MALFORMED);
        return (int)used;
    }
    if ((size_t)used < n &&
        cm_buf_append(&ps->pend, p + used, n - (size_t)used) < 0)
        return -E2BIG; /* as above */
    return 0;
}

/* See header. */
enum stor_s3_err stor_s3_post_end(struct stor_s3_req *r)
{
    struct stor_s3_post *ps = r->post;

    if (!ps->file_seen)
        return S3E_POST_NO_FILE;
    if (!ps->file_ended || !stor_mp_done(&ps->mp))
        return S3E_POST_MALFORMED;
    if (r->body_bytes < ps->lim.min)
        return S3E_ENTITY_TOO_SMALL;
    if (r->body_bytes > ps->lim.max)
        return S3E_ENTITY_TOO_LARGE;
    return S3E_NONE;
}

/* The ETag PutObject's commit put in the response headers (unquoted). */
static void resp_etag(struct stor_s3_req *r, char *out, size_t cap)
{
    const struct cm_buf *h = &r->http.resp.hdrs;
    const char *p = h->data ? memmem(h->data, h->len, "ETag: \"", 7) : NULL;
    const char *q =
        p ? memchr(p + 7, '"', h->len - (size_t)(p + 7 - h->data)) : NULL;

    out[0] = 0;
    if (q && (size_t)(q - p - 7) < cap)
        snprintf(out, cap, "%.*s", (int)(q - p - 7), p + 7);
}

/* See header. */
void stor_s3_post_reply(struct stor_s3_req *r)
{
    struct stor_s3_post *ps = r->post;
    struct stor_resp *rs = &r->http.resp;
    char etag[STOR_ETAG_MAX + 3];
    struct cm_buf u;
    int ret = 0;

    resp_etag(r, etag, sizeof(etag));
    cm_buf_init(&u, CM_BUF_NOLIMIT);
    if (ps->redirect) {
        char q[STOR_ETAG_MAX + 8];

        snprintf(q, sizeof(q), "\"%s\"", etag);
        ret = cm_buf_appends(&u, ps->redirect);
        if (ret == 0)
            ret = cm_buf_appends(&u, strchr(ps->redirect, '?') ? "&bucket="
                                                               : "?bucket=");
        if (ret == 0)
            ret = cm_uri_encode(&u, r->bucket, strlen(r->bucket), false);
        if (ret == 0)
            ret = cm_buf_appends(&u, "&key=");
        if (ret == 0)
            ret = cm_uri_encode(&u, r->key, r->key_len, false);
        if (ret == 0)
            ret = cm_buf_appends(&u, "&etag=");
        if (ret == 0)
            ret = cm_uri_encode(&u, q, strlen(q), false);
        if (ret == 0)
            ret = stor_resp_hdr(rs, "Location", "%s", u.data);
        rs->status = 303;
    } else if (ps->status == 201) {
        size_t hl = 0;
        const char *host = stor_s3_hdr(r, "host", &hl);

        ret = cm_buf_appendf(&u, "%s://%.*s/%s/", r->s3->tls ? "https" : "http",
                             (int)hl, host ? host : "", r->bucket);
        if (ret == 0)
            ret = cm_uri_encode(&u, r->key, r->key_len, true);
        cm_buf_reset(&rs->body);
        x_lit(&rs->body, S3_XML_DECL "<PostResponse>");
        x_elem(&rs->body, "Location", u.data ? u.data : "", u.len, false);
        x_str(&rs->body, "Bucket", r->bucket, false);
        x_elem(&rs->body, "Key", r->key, r->key_len, false);
        x_fmt(&rs->body, "<ETag>\"%s\"</ETag></PostResponse>", etag);
        if (ret == 0)
            ret = stor_resp_hdr(rs, "Location", "%s", u.data);
        rs->status = 201;
        if (ret == 0)
            xml_done(r);
    } else {
        rs->status = ps->status;
    }
    cm_buf_fini(&u);
    if (ret < 0)
        stor_s3_error(r, S3E_INTERNAL);
}

/* See header. */
void stor_s3_post_free(struct stor_s3_req *r)
{
    struct stor_s3_post *ps = r->post;

    if (ps == NULL)
        return;
    stor_post_form_fini(&ps->form);
    cm_buf_fini(&ps->name);
    cm_buf_fini(&ps->val);
    cm_buf_fini(&ps->pend);
    cm_buf_fini(&ps->key);
    free(ps->filename);
    free(ps->tagging);
    free(ps);
    r->post = NULL;
}
