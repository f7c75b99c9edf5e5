/* storaged/s3/post.c - POST Object: browser-based uploads with an HTML
 * form (multipart/form-data), as S3 documents them. This part: the
 * streaming multipart/form-data parser, the form's fields, and the POST
 * policy document's checker. */
#include "storaged/s3/post.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "storaged/http/parse.h"

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
           (c >= 'A' && c <= 'Z') || strchr("'()+_,-./:=? ", c) != NULL;
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
