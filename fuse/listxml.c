/* fuse/listxml.c - ListObjectsV2 result and S3 error parsing (expat).
 *
 * DESIGN: a tiny path-tracking SAX handler. We keep the names of the open
 * elements (depth <= 8 matters; deeper elements are ignored), collect the
 * character data of the current leaf, and on each end tag decide by the
 * path what the text was: Contents/Key, Contents/Size, ...,
 * CommonPrefixes/Prefix, IsTruncated, NextContinuationToken, Error/Code.
 * Namespaces are not processed: S3's xmlns is just an attribute to us.
 * Keys and prefixes are URL-decoded when the answer says
 * <EncodingType>url</EncodingType> (we ask for it: XML 1.0 cannot carry
 * keys with control characters, and one such key would otherwise make the
 * whole directory unlistable); a server that ignores the request sends raw
 * keys and no EncodingType, and they are taken as they are. */
#include "fuse/listxml.h"

#include <errno.h>
#include <expat.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/timefmt.h"
#include "common/uri.h"

#define LX_MAX_DEPTH 8
#define LX_NAME_MAX  32
#define LX_TEXT_MAX  (64 * 1024) /* a key is <= 1024 bytes; tokens small */

struct lx_state {
    struct fc_listpage *p;
    XML_Parser parser;
    int depth;                            /* number of open elements */
    char path[LX_MAX_DEPTH][LX_NAME_MAX]; /* names of the open elements */
    struct cm_buf text;                   /* char data of the current element */
    struct fc_listobj cur;                /* Contents being built */
    bool url;                             /* <EncodingType>url */
    int err;                              /* first error (-ENOMEM) */
};

/* Initialises an empty page. */
void fc_listpage_init(struct fc_listpage *p)
{
    memset(p, 0, sizeof(*p));
}

/* Frees everything the page owns and leaves it empty (re-initialised). */
void fc_listpage_fini(struct fc_listpage *p)
{
    for (size_t i = 0; i < p->nobjs; i++) {
        free(p->objs[i].key);
        free(p->objs[i].etag);
    }
    free(p->objs);
    for (size_t i = 0; i < p->nprefixes; i++)
        free(p->prefixes[i]);
    free(p->prefixes);
    free(p->next_token);
    free(p->error_code);
    fc_listpage_init(p);
}

/* True when the open elements are exactly @a / @b (@b may be NULL). */
static bool lx_at(const struct lx_state *s, const char *a, const char *b)
{
    if (b == NULL)
        return s->depth == 2 && strcmp(s->path[1], a) == 0;
    return s->depth == 3 && strcmp(s->path[1], a) == 0 &&
           strcmp(s->path[2], b) == 0;
}

/* Returns a malloc'ed copy of the collected text, or NULL (ENOMEM). */
static char *lx_text_dup(const struct lx_state *s)
{
    const char *t = s->text.data ? s->text.data : "";
    return strndup(t, s->text.len);
}

static void XMLCALL lx_start(void *ud, const XML_Char *name,
                             const XML_Char **attrs)
{
    struct lx_state *s = ud;

    (void)attrs;
    if (s->depth < LX_MAX_DEPTH) {
        snprintf(s->path[s->depth], LX_NAME_MAX, "%s", name);
    }
    s->depth++;
    cm_buf_reset(&s->text);
    if (s->depth == 2 && strcmp(name, "Contents") == 0) {
        free(s->cur.key);
        free(s->cur.etag);
        memset(&s->cur, 0, sizeof(s->cur));
    }
}

static void XMLCALL lx_chars(void *ud, const XML_Char *txt, int len)
{
    struct lx_state *s = ud;

    if (s->err)
        return;
    if (s->text.len + (size_t)len > LX_TEXT_MAX)
        return; /* absurd leaf: truncate, the page is wrong anyway */
    if (cm_buf_append(&s->text, txt, (size_t)len) < 0)
        s->err = -ENOMEM;
}

/* Appends s->cur to the page (takes ownership of its strings). */
static int lx_push_obj(struct lx_state *s)
{
    struct fc_listpage *p = s->p;

    if (s->cur.key == NULL)
        return 0; /* a Contents without Key: ignore */
    if (p->nobjs == p->capobjs) {
        size_t ncap = p->capobjs ? 2 * p->capobjs : 64;
        struct fc_listobj *n = realloc(p->objs, ncap * sizeof(*n));
        if (n == NULL)
            return -ENOMEM;
        p->objs = n;
        p->capobjs = ncap;
    }
    if (s->cur.etag == NULL && (s->cur.etag = strdup("")) == NULL)
        return -ENOMEM;
    p->objs[p->nobjs++] = s->cur;
    memset(&s->cur, 0, sizeof(s->cur));
    return 0;
}

/* Appends a common prefix (takes ownership of @pre, also on failure). */
static int lx_push_prefix(struct fc_listpage *p, char *pre)
{
    if (p->nprefixes == p->capprefixes) {
        size_t ncap = p->capprefixes ? 2 * p->capprefixes : 16;
        char **n = realloc(p->prefixes, ncap * sizeof(*n));
        if (n == NULL) {
            free(pre);
            return -ENOMEM;
        }
        p->prefixes = n;
        p->capprefixes = ncap;
    }
    p->prefixes[p->nprefixes++] = pre;
    return 0;
}

/* Handles the end of a leaf element that matters to us. */
static int lx_leaf(struct lx_state *s)
{
    struct fc_listpage *p = s->p;
    const char *t = s->text.data ? s->text.data : "";
    char *dup;

    if (lx_at(s, "Contents", "Key")) {
        free(s->cur.key);
        return (s->cur.key = lx_text_dup(s)) ? 0 : -ENOMEM;
    }
    if (lx_at(s, "Contents", "Size")) {
        s->cur.size = strtoull(t, NULL, 10);
        return 0;
    }
    if (lx_at(s, "Contents", "ETag")) {
        free(s->cur.etag);
        return (s->cur.etag = lx_text_dup(s)) ? 0 : -ENOMEM;
    }
    if (lx_at(s, "Contents", "LastModified")) {
        time_t tm;
        if (cm_time_parse_rfc3339(t, s->text.len, &tm) == 0)
            s->cur.mtime = tm;
        return 0;
    }
    if (lx_at(s, "CommonPrefixes", "Prefix")) {
        if ((dup = lx_text_dup(s)) == NULL)
            return -ENOMEM;
        return lx_push_prefix(p, dup);
    }
    if (lx_at(s, "EncodingType", NULL)) {
        s->url = strcmp(t, "url") == 0;
        return 0;
    }
    if (lx_at(s, "IsTruncated", NULL)) {
        p->truncated = strcmp(t, "true") == 0;
        return 0;
    }
    if (lx_at(s, "NextContinuationToken", NULL)) {
        free(p->next_token);
        return (p->next_token = lx_text_dup(s)) ? 0 : -ENOMEM;
    }
    if (lx_at(s, "Code", NULL) && strcmp(s->path[0], "Error") == 0) {
        free(p->error_code);
        return (p->error_code = lx_text_dup(s)) ? 0 : -ENOMEM;
    }
    return 0;
}

static void XMLCALL lx_end(void *ud, const XML_Char *name)
{
    struct lx_state *s = ud;
    int ret = 0;

    if (s->err == 0) {
        if (s->depth == 2 && strcmp(name, "Contents") == 0)
            ret = lx_push_obj(s);
        else if (s->depth <= LX_MAX_DEPTH)
            ret = lx_leaf(s);
        if (ret < 0)
            s->err = ret;
    }
    s->depth--;
    cm_buf_reset(&s->text);
}

/* URL-decodes @*str in place ('+' is a space, as botocore reads S3's
 * encoding). A malformed escape or a decoded NUL leaves "" (an entry no
 * listing shows). 0 or -ENOMEM. */
static int lx_url_decode(char **str)
{
    struct cm_buf out;
    char *s = *str;
    size_t n = strlen(s);
    int ret;

    cm_buf_init(&out, CM_BUF_NOLIMIT);
    ret = cm_uri_decode(&out, s, n, true);
    if (ret == -ENOMEM) {
        cm_buf_fini(&out);
        return ret;
    }
    if (ret < 0 || out.len == 0 || memchr(out.data, '\0', out.len) != NULL)
        s[0] = '\0';
    else {
        memcpy(s, out.data, out.len); /* decoding never grows */
        s[out.len] = '\0';
    }
    cm_buf_fini(&out);
    return 0;
}

/* Parses one ListBucketResult or Error document into @p (see header). */
int fc_listxml_parse(const char *xml, size_t n, struct fc_listpage *p)
{
    struct lx_state s;
    size_t obj0 = p->nobjs, pre0 = p->nprefixes;
    int ret = 0;

    memset(&s, 0, sizeof(s));
    s.p = p;
    cm_buf_init(&s.text, LX_TEXT_MAX + 1);
    s.parser = XML_ParserCreate("UTF-8");
    if (s.parser == NULL)
        return -ENOMEM;
    XML_SetUserData(s.parser, &s);
    XML_SetElementHandler(s.parser, lx_start, lx_end);
    XML_SetCharacterDataHandler(s.parser, lx_chars);
    if (n > INT32_MAX || XML_Parse(s.parser, xml, (int)n, 1) != XML_STATUS_OK)
        ret = -EBADMSG;
    if (ret == 0 && s.err)
        ret = s.err;
    for (size_t i = obj0; ret == 0 && s.url && i < p->nobjs; i++)
        ret = lx_url_decode(&p->objs[i].key);
    for (size_t i = pre0; ret == 0 && s.url && i < p->nprefixes; i++)
        ret = lx_url_decode(&p->prefixes[i]);
    free(s.cur.key);
    free(s.cur.etag);
    cm_buf_fini(&s.text);
    XML_ParserFree(s.parser);
    return ret;
}
