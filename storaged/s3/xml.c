/* storaged/s3/xml.c - parsing of the two S3 request bodies we need
 * (DeleteObjects and CompleteMultipartUpload) with expat.
 *
 * DESIGN: a tiny path tracker over expat's callbacks: we keep the element
 * depth and the text of the current leaf, and act on the end tags we care
 * about. Namespaces are ignored (clients send the S3 xmlns or none).
 * Anything not well-formed is -EBADMSG, which becomes MalformedXML. */
#include "storaged/s3/s3_i.h"

#include <ctype.h>
#include <errno.h>
#include <expat.h>
#include <stdlib.h>
#include <string.h>

#include "storaged/s3/versioning.h"

#define MAX_DELETE_KEYS 1000

struct xml_ctx {
    int depth;
    struct cm_buf text;
    int err;
    /* delete */
    struct stor_s3_del_key *keys;
    size_t nkeys, capkeys;
    bool quiet;
    bool in_object;
    size_t obj_first;     /* keys[] index where this <Object> began */
    bool obj_bad_version; /* its <VersionId> is too long to be an id */
    char obj_version[STOR_S3_VID_MAX]; /* its <VersionId>, or "" */
    struct stor_del_cond obj_cond;     /* its ETag/LastModifiedTime/Size */
    bool obj_bad_cond;
    /* complete */
    struct stor_part *parts;
    size_t nparts, capparts;
    struct stor_part cur;
    bool have_num;
};

/* See s3_i.h. */
const char *stor_s3_xml_local(const char *n)
{
    const char *c = strrchr(n, ':');

    return c ? c + 1 : n;
}

/* expat: an element opens; its text starts empty. */
static void XMLCALL on_start(void *ud, const char *name, const char **attrs)
{
    struct xml_ctx *x = ud;

    (void)attrs;
    x->depth++;
    cm_buf_reset(&x->text);
    name = stor_s3_xml_local(name);
    if (strcmp(name, "Object") == 0) {
        x->in_object = true;
        x->obj_first = x->nkeys;
        x->obj_bad_version = false;
        x->obj_version[0] = 0;
        memset(&x->obj_cond, 0, sizeof(x->obj_cond));
        x->obj_bad_cond = false;
    }
    if (strcmp(name, "Part") == 0) {
        memset(&x->cur, 0, sizeof(x->cur));
        x->have_num = false;
    }
}

/* expat: text of the current element (may come in pieces). */
static void XMLCALL on_text(void *ud, const char *s, int len)
{
    struct xml_ctx *x = ud;

    if (x->err == 0 && cm_buf_append(&x->text, s, (size_t)len) < 0)
        x->err = -ENOMEM;
}

/* Parses a decimal part number 1..10000; -1 when invalid. */
static int part_number(const char *s, size_t n)
{
    int v = 0;
    size_t i;

    if (n == 0 || n > 5)
        return -1;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= STOR_MAX_PARTS ? v : -1;
}

/* An element of <Delete> closed: collect Quiet and Object/Key. */
static void end_delete(struct xml_ctx *x, const char *name)
{
    const char *t = x->text.data ? x->text.data : "";

    if (strcmp(name, "Quiet") == 0) {
        x->quiet = strcmp(t, "true") == 0;
    } else if (strcmp(name, "Key") == 0 && x->in_object) {
        struct stor_s3_del_key *k;

        if (x->nkeys >= MAX_DELETE_KEYS) {
            x->err = -EBADMSG;
            return;
        }
        if (x->nkeys == x->capkeys) {
            size_t nc = x->capkeys ? 2 * x->capkeys : 16;
            void *p = realloc(x->keys, nc * sizeof(*x->keys));

            if (p == NULL) {
                x->err = -ENOMEM;
                return;
            }
            x->keys = p;
            x->capkeys = nc;
        }
        k = &x->keys[x->nkeys];
        k->key_len = x->text.len;
        k->bad_version = false;
        k->version[0] = 0;
        k->key = malloc(k->key_len + 1);
        if (k->key == NULL) {
            x->err = -ENOMEM;
            return;
        }
        memcpy(k->key, t, k->key_len);
        k->key[k->key_len] = 0;
        x->nkeys++;
    } else if (strcmp(name, "VersionId") == 0 && x->in_object) {
        if (x->text.len >= sizeof(x->obj_version))
            x->obj_bad_version = true;
        else
            memcpy(x->obj_version, t, x->text.len + 1);
    } else if (strcmp(name, "ETag") == 0 && x->in_object) {
        if (stor_ver_del_cond_etag(&x->obj_cond, t, x->text.len) != S3E_NONE)
            x->obj_bad_cond = true;
    } else if (strcmp(name, "Size") == 0 && x->in_object) {
        if (stor_ver_del_cond_size(&x->obj_cond, t, x->text.len) != S3E_NONE)
            x->obj_bad_cond = true;
    } else if (strcmp(name, "LastModifiedTime") == 0 && x->in_object) {
        if (cm_time_parse_rfc3339(t, x->text.len, &x->obj_cond.mtime) < 0)
            x->obj_bad_cond = true;
        x->obj_cond.mtime_set = true;
    } else if (strcmp(name, "Object") == 0) {
        size_t i;

        for (i = x->obj_first; i < x->nkeys; i++) {
            x->keys[i].bad_version = x->obj_bad_version;
            memcpy(x->keys[i].version, x->obj_version, sizeof(x->obj_version));
            x->keys[i].cond = x->obj_cond;
            x->keys[i].bad_cond = x->obj_bad_cond;
        }
        x->in_object = false;
    }
}

/* An element of <CompleteMultipartUpload> closed: collect parts. */
static void end_complete(struct xml_ctx *x, const char *name)
{
    const char *t = x->text.data ? x->text.data : "";
    size_t n = x->text.len;

    if (strcmp(name, "PartNumber") == 0) {
        x->cur.number = part_number(t, n);
        if (x->cur.number < 0)
            x->err = -EBADMSG;
        x->have_num = true;
    } else if (strcmp(name, "ETag") == 0) {
        /* strip blanks and quotes (raw or as &quot;) */
        while (n > 0 && (*t == '"' || *t == ' ' || *t == '\n')) {
            t++;
            n--;
        }
        while (n > 0 &&
               (t[n - 1] == '"' || t[n - 1] == ' ' || t[n - 1] == '\n'))
            n--;
        if (n >= sizeof(x->cur.etag)) {
            x->err = -EBADMSG;
            return;
        }
        memcpy(x->cur.etag, t, n);
        x->cur.etag[n] = 0;
    } else if (strncmp(name, "Checksum", 8) == 0 && name[8]) {
        /* ChecksumCRC32 ...: the part's checksum as the client has it */
        char hdr[48] = "x-amz-checksum-";
        size_t an = strlen(name + 8);
        enum stor_cksum k = STOR_CKSUM_NONE;

        for (size_t i = 0; an < 16 && i <= an; i++)
            hdr[15 + i] = (char)tolower((unsigned char)name[8 + i]);
        if (an < 16)
            k = stor_s3_cksum_kind(hdr, 15 + an);
        while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\n'))
            n--;
        while (n > 0 && (*t == ' ' || *t == '\n')) {
            t++;
            n--;
        }
        if (k == STOR_CKSUM_NONE || n == 0 || n >= sizeof(x->cur.hval) ||
            (x->cur.hkind != 0 && x->cur.hkind != (int)k)) {
            x->err = -EBADMSG;
            return;
        }
        x->cur.hkind = (int)k;
        memcpy(x->cur.hval, t, n);
        x->cur.hval[n] = 0;
    } else if (strcmp(name, "Part") == 0) {
        if (!x->have_num || x->nparts >= STOR_MAX_PARTS) {
            x->err = -EBADMSG;
            return;
        }
        if (x->nparts == x->capparts) {
            size_t nc = x->capparts ? 2 * x->capparts : 16;
            void *p = realloc(x->parts, nc * sizeof(*x->parts));

            if (p == NULL) {
                x->err = -ENOMEM;
                return;
            }
            x->parts = p;
            x->capparts = nc;
        }
        x->parts[x->nparts++] = x->cur;
    }
}

/* expat end handlers for the two documents. */
static void XMLCALL on_end_delete(void *ud, const char *name)
{
    struct xml_ctx *x = ud;

    if (x->err == 0)
        end_delete(x, stor_s3_xml_local(name));
    cm_buf_reset(&x->text);
    x->depth--;
}

static void XMLCALL on_end_complete(void *ud, const char *name)
{
    struct xml_ctx *x = ud;

    if (x->err == 0)
        end_complete(x, stor_s3_xml_local(name));
    cm_buf_reset(&x->text);
    x->depth--;
}

/* See s3_i.h. */
int stor_s3_xml_parse(const char *xml, size_t len, void *ud,
                      const struct stor_s3_xml_cbs *cb)
{
    XML_Parser p;
    int ret = 0;

    if (len > (size_t)INT32_MAX)
        return -EBADMSG;
    p = XML_ParserCreate(NULL);
    if (p == NULL)
        return -ENOMEM;
    XML_SetUserData(p, ud);
    XML_SetElementHandler(p, cb->start, cb->end);
    XML_SetCharacterDataHandler(p, cb->text);
    if (XML_Parse(p, xml ? xml : "", (int)len, 1) != XML_STATUS_OK)
        ret = -EBADMSG;
    XML_ParserFree(p);
    return ret;
}

/* See s3_i.h. */
enum stor_s3_err stor_s3_xml_parse_conf(const char *xml, size_t len, void *ud,
                                        const struct stor_s3_xml_cbs *cb,
                                        struct cm_buf *text, size_t text_max,
                                        const bool *bad)
{
    int ret;

    cm_buf_init(text, text_max);
    ret = stor_s3_xml_parse(xml, len, ud, cb);
    cm_buf_fini(text);
    if (ret == -ENOMEM)
        return S3E_INTERNAL;
    return ret < 0 || *bad ? S3E_MALFORMED_XML : S3E_NONE;
}

/* Runs expat over @xml with the given end handler. 0 or -errno. */
static int run_parser(struct xml_ctx *x, const char *xml, size_t len,
                      XML_EndElementHandler end, const char *root)
{
    XML_Parser p = XML_ParserCreate(NULL);
    int ret = 0;

    if (p == NULL)
        return -ENOMEM;
    cm_buf_init(&x->text, 1024 * 1024);
    XML_SetUserData(p, x);
    XML_SetElementHandler(p, on_start, end);
    XML_SetCharacterDataHandler(p, on_text);
    if (len > (size_t)INT32_MAX ||
        XML_Parse(p, xml ? xml : "", (int)len, 1) != XML_STATUS_OK)
        ret = -EBADMSG;
    if (ret == 0 && x->err)
        ret = x->err;
    (void)root;
    XML_ParserFree(p);
    cm_buf_fini(&x->text);
    return ret;
}

/* See s3_i.h. */
void stor_s3_del_keys_free(struct stor_s3_del_key *k, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(k[i].key);
    free(k);
}

/* See s3_i.h. */
int stor_s3_parse_delete(const char *xml, size_t len,
                         struct stor_s3_del_key **keys, size_t *n, bool *quiet)
{
    struct xml_ctx x;
    int ret;

    memset(&x, 0, sizeof(x));
    ret = run_parser(&x, xml, len, on_end_delete, "Delete");
    if (ret == 0 && x.nkeys == 0)
        ret = -EBADMSG;
    if (ret < 0) {
        stor_s3_del_keys_free(x.keys, x.nkeys);
        return ret;
    }
    *keys = x.keys;
    *n = x.nkeys;
    *quiet = x.quiet;
    return 0;
}

/* See s3_i.h. */
int stor_s3_parse_complete(const char *xml, size_t len,
                           struct stor_part **parts, size_t *n)
{
    struct xml_ctx x;
    int ret;

    memset(&x, 0, sizeof(x));
    ret = run_parser(&x, xml, len, on_end_complete, "CompleteMultipartUpload");
    if (ret == 0 && x.nparts == 0)
        ret = -EBADMSG;
    if (ret < 0) {
        free(x.parts);
        return ret;
    }
    *parts = x.parts;
    *n = x.nparts;
    return 0;
}

/* ---- CreateBucketConfiguration ---- */

struct cb_xml {
    int depth;
    bool root_ok;     /* the document element is CreateBucketConfiguration */
    bool in_loc;      /* inside its LocationConstraint */
    bool bad;         /* an element S3 does not define there, or too long */
    bool unsupported; /* Location, Bucket (directory buckets) or Tags */
    char *loc;
    size_t cap, len;
};

static void XMLCALL cb_start(void *ud, const char *name, const char **attrs)
{
    struct cb_xml *x = ud;
    const char *n = stor_s3_xml_local(name);

    (void)attrs;
    if (x->depth == 0) {
        x->root_ok = strcmp(n, "CreateBucketConfiguration") == 0;
    } else if (x->depth == 1) {
        if (strcmp(n, "LocationConstraint") == 0) {
            x->in_loc = true;
            x->len = 0;
        } else if (strcmp(n, "Location") == 0 || strcmp(n, "Bucket") == 0 ||
                   strcmp(n, "Tags") == 0) {
            x->unsupported = true;
        } else {
            x->bad = true;
        }
    } else if (x->in_loc) {
        x->bad = true; /* LocationConstraint holds text only */
    }
    x->depth++;
}

static void XMLCALL cb_text(void *ud, const char *s, int len)
{
    struct cb_xml *x = ud;

    if (!x->in_loc || len <= 0)
        return;
    if (x->len + (size_t)len >= x->cap) {
        x->bad = true;
        return;
    }
    memcpy(x->loc + x->len, s, (size_t)len);
    x->len += (size_t)len;
}

static void XMLCALL cb_end(void *ud, const char *name)
{
    struct cb_xml *x = ud;

    (void)name;
    x->depth--;
    if (x->depth == 1)
        x->in_loc = false;
}

/* See s3_i.h. */
enum stor_s3_err stor_s3_parse_create_bucket(const char *xml, size_t len,
                                             char *loc, size_t cap)
{
    static const struct stor_s3_xml_cbs cb = {cb_start, cb_end, cb_text};
    struct cb_xml x = {.loc = loc, .cap = cap};
    size_t i;
    int ret;

    if (cap == 0)
        return S3E_INTERNAL;
    loc[0] = 0;
    for (i = 0; i < len && isspace((unsigned char)xml[i]); i++)
        ;
    if (i == len)
        return S3E_NONE; /* no configuration: the server's region */
    ret = stor_s3_xml_parse(xml, len, &x, &cb);
    if (ret == -ENOMEM)
        return S3E_INTERNAL;
    if (ret < 0 || !x.root_ok || x.bad)
        return S3E_MALFORMED_XML;
    if (x.unsupported)
        return S3E_NOT_IMPLEMENTED;
    loc[x.len] = 0;
    return S3E_NONE;
}
