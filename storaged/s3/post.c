/* storaged/s3/post.c - POST Object: browser-based uploads with an HTML
 * form (multipart/form-data), as S3 documents them. This part: the
 * streaming multipart/form-data parser and the form's fields. */
#include "storaged/s3/post.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
