/* storaged/s3/lifecycle.c - bucket lifecycle configurations and the
 * lifecycle scanner (see lifecycle.h).
 *
 * DESIGN: a configuration is kept as a document made from what the client
 * sent (once it parsed and passed every check; rules without an ID get
 * one, as in S3), as the record "\x01\x01lifecycle" of
 * the bucket's companion (versioning.c), so it is erasure-coded and
 * healed like an object, and GET returns it. The scanner
 * thread wakes every interval, and for each bucket with a configuration
 * walks its current objects (Expiration), its companion's versions
 * (NoncurrentVersionExpiration, ExpiredObjectDeleteMarker) and its
 * multipart uploads (AbortIncompleteMultipartUpload). Every action goes
 * through the same calls as a client's request (stor_ver_delete_current,
 * stor_ver_delete_version, stor_mpu_abort), so a versioned bucket gets a
 * delete marker exactly as for a DeleteObject, under the key's lock.
 *
 * Times: an object expires Days after it was written, rounded up to the
 * next midnight UTC as AWS does; with the test-only day knob shortened,
 * without rounding. A non-current version counts its days from when it
 * stopped being current (when it was moved into the companion). */
#include "storaged/s3/lifecycle.h"

#include <errno.h>
#include <expat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/uri.h"
#include "storaged/s3/s3_i.h"
#include "storaged/s3/versioning.h"
#include "storaged/s3/xout.h"
#include "storaged/store/object.h"

#define CFG_LC      "\x01\x01lifecycle"
#define LC_MAX      (512 * 1024) /* a stored configuration */
#define MAX_RULES   1000
#define MAX_TAGS    10
#define ID_MAX      255
#define PATH_MAX_LC 256
#define LIST_BATCH  1000
#define CACHE_SLOTS 64

/* One bucket's configuration, as x-amz-expiration needs it. */
struct lc_cache {
    char bucket[64];
    struct stor_lc_conf *c; /* owned; NULL: the bucket has none */
    struct lc_cache *next;
};

struct lc_tag {
    char *k, *v; /* owned */
};

struct lc_rule {
    char id[ID_MAX + 1];
    bool enabled, has_status;
    char *prefix; /* owned; NULL: every key */
    struct lc_tag tags[MAX_TAGS];
    size_t ntags;
    long long size_gt, size_lt; /* -1: none */
    int exp_days;               /* 0: none */
    time_t exp_date;            /* 0: none */
    bool exp_dm;                /* ExpiredObjectDeleteMarker */
    int nc_days;                /* 0: none */
    int nc_newer;               /* NewerNoncurrentVersions */
    int abort_days;             /* 0: none */
    bool has_filter, has_legacy_prefix, has_action;
    bool has_fprefix; /* the Filter (or its And) named a Prefix */
};

struct stor_lc_conf {
    struct lc_rule *r; /* owned */
    size_t n;
};

/* ---- parsing ---- */

struct lcx {
    char path[PATH_MAX_LC]; /* element names from the root, '/' joined */
    size_t plen[32];
    int depth;
    struct cm_buf text;
    struct stor_lc_conf *c;
    struct lc_rule *cur;
    char tk[129], tv[257]; /* the Tag being read */
    bool tk_set, tv_set;
    int err;         /* negative enum stor_s3_err */
    bool transition; /* refused (501) once the rest checked out */
};

static void lc_rule_fini(struct lc_rule *r)
{
    size_t i;

    free(r->prefix);
    for (i = 0; i < r->ntags; i++) {
        free(r->tags[i].k);
        free(r->tags[i].v);
    }
}

/* See header. */
void stor_lc_conf_free(struct stor_lc_conf *c)
{
    size_t i;

    if (c == NULL)
        return;
    for (i = 0; i < c->n; i++)
        lc_rule_fini(&c->r[i]);
    free(c->r);
    free(c);
}

static void XMLCALL lx_start(void *ud, const char *name, const char **attrs)
{
    struct lcx *x = ud;
    const char *c = strrchr(name, ':');
    size_t pl = strlen(x->path), nl;

    (void)attrs;
    name = c ? c + 1 : name;
    nl = strlen(name);
    if (x->depth >= 31 || pl + nl + 2 > sizeof(x->path)) {
        x->err = -S3E_MALFORMED_XML;
        return;
    }
    x->plen[x->depth++] = pl;
    if (pl)
        x->path[pl++] = '/';
    memcpy(x->path + pl, name, nl + 1);
    cm_buf_reset(&x->text);
    if (x->err)
        return;
    if (strcmp(x->path, "LifecycleConfiguration/Rule") == 0) {
        struct lc_rule *r;

        if (x->c->n >= MAX_RULES) {
            x->err = -S3E_MALFORMED_XML;
            return;
        }
        r = realloc(x->c->r, (x->c->n + 1) * sizeof(*r));
        if (r == NULL) {
            x->err = -S3E_INTERNAL;
            return;
        }
        x->c->r = r;
        x->cur = &r[x->c->n++];
        memset(x->cur, 0, sizeof(*x->cur));
        x->cur->size_gt = x->cur->size_lt = -1;
    } else if (x->depth == 1 && strcmp(name, "LifecycleConfiguration") != 0) {
        x->err = -S3E_MALFORMED_XML;
    } else if (x->cur && (strcmp(name, "Transition") == 0 ||
                          strcmp(name, "NoncurrentVersionTransition") == 0)) {
        x->transition = true; /* a malformed one is still a 400 first */
    } else if (strcmp(name, "Tag") == 0) {
        x->tk_set = x->tv_set = false;
    }
}

static void XMLCALL lx_text(void *ud, const char *s, int len)
{
    struct lcx *x = ud;

    if (cm_buf_append(&x->text, s, (size_t)len) < 0)
        x->err = -S3E_MALFORMED_XML;
}

/* A positive decimal of at most 9 digits, or -1. */
static int lx_int(const char *t)
{
    long v = 0;
    size_t i, n = strlen(t);

    if (n == 0 || n > 9)
        return -1;
    for (i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9')
            return -1;
        v = v * 10 + (t[i] - '0');
    }
    return (int)v;
}

/* An ISO 8601 date at midnight UTC ("2026-12-01T00:00:00[.000]Z"). */
static int lx_date(const char *t, time_t *out)
{
    struct tm tm;
    int y, mo, d, h = -1, mi = -1, s = -1, n = 0;

    memset(&tm, 0, sizeof(tm));
    if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &n) !=
            6 ||
        mo < 1 || mo > 12 || d < 1 || d > 31)
        return -1;
    if (strcmp(t + n, "Z") != 0 && strcmp(t + n, ".000Z") != 0 &&
        strcmp(t + n, "+00:00") != 0)
        return -1;
    if (h != 0 || mi != 0 || s != 0)
        return -1; /* as S3: a date at midnight UTC */
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    *out = timegm(&tm);
    return 0;
}

/* An element of a Rule closed: @p is its path below the Rule. */
static void lx_rule_elem(struct lcx *x, const char *p, const char *t)
{
    struct lc_rule *r = x->cur;
    int v;

    if (strcmp(p, "ID") == 0) {
        if (strlen(t) > ID_MAX)
            x->err = -S3E_INVALID_ARGUMENT;
        else
            snprintf(r->id, sizeof(r->id), "%s", t);
    } else if (strcmp(p, "Status") == 0) {
        r->has_status = true;
        if (strcmp(t, "Enabled") == 0)
            r->enabled = true;
        else if (strcmp(t, "Disabled") != 0)
            x->err = -S3E_MALFORMED_XML;
    } else if (strcmp(p, "Prefix") == 0 || strcmp(p, "Filter/Prefix") == 0 ||
               strcmp(p, "Filter/And/Prefix") == 0) {
        if (p[0] == 'P')
            r->has_legacy_prefix = true;
        else
            r->has_fprefix = true;
        free(r->prefix);
        r->prefix = t[0] ? strdup(t) : NULL;
        if (t[0] && r->prefix == NULL)
            x->err = -S3E_INTERNAL;
    } else if (strcmp(p, "Filter/Tag/Key") == 0 ||
               strcmp(p, "Filter/And/Tag/Key") == 0) {
        snprintf(x->tk, sizeof(x->tk), "%s", t);
        x->tk_set = strlen(t) < sizeof(x->tk) && t[0];
        if (!x->tk_set)
            x->err = -S3E_INVALID_ARGUMENT;
    } else if (strcmp(p, "Filter/Tag/Value") == 0 ||
               strcmp(p, "Filter/And/Tag/Value") == 0) {
        snprintf(x->tv, sizeof(x->tv), "%s", t);
        x->tv_set = strlen(t) < sizeof(x->tv);
    } else if (strcmp(p, "Filter/Tag") == 0 ||
               strcmp(p, "Filter/And/Tag") == 0) {
        if (!x->tk_set || r->ntags >= MAX_TAGS) {
            x->err = -S3E_INVALID_ARGUMENT;
            return;
        }
        r->tags[r->ntags].k = strdup(x->tk);
        r->tags[r->ntags].v = strdup(x->tv_set ? x->tv : "");
        if (!r->tags[r->ntags].k || !r->tags[r->ntags].v)
            x->err = -S3E_INTERNAL;
        r->ntags++;
    } else if (strcmp(p, "Filter/ObjectSizeGreaterThan") == 0 ||
               strcmp(p, "Filter/And/ObjectSizeGreaterThan") == 0) {
        r->size_gt = lx_int(t);
        if (r->size_gt < 0)
            x->err = -S3E_INVALID_ARGUMENT;
    } else if (strcmp(p, "Filter/ObjectSizeLessThan") == 0 ||
               strcmp(p, "Filter/And/ObjectSizeLessThan") == 0) {
        r->size_lt = lx_int(t);
        if (r->size_lt < 0)
            x->err = -S3E_INVALID_ARGUMENT;
    } else if (strcmp(p, "Filter") == 0) {
        r->has_filter = true;
    } else if (strcmp(p, "Expiration/Days") == 0) {
        v = lx_int(t);
        if (v <= 0)
            x->err = -S3E_INVALID_ARGUMENT;
        r->exp_days = v;
    } else if (strcmp(p, "Expiration/Date") == 0) {
        if (lx_date(t, &r->exp_date) < 0)
            x->err = -S3E_INVALID_ARGUMENT;
    } else if (strcmp(p, "Expiration/ExpiredObjectDeleteMarker") == 0) {
        if (strcmp(t, "true") == 0)
            r->exp_dm = true;
        else if (strcmp(t, "false") != 0)
            x->err = -S3E_MALFORMED_XML;
    } else if (strcmp(p, "Transition/Date") == 0) {
        time_t d;

        if (lx_date(t, &d) < 0)
            x->err = -S3E_INVALID_ARGUMENT;
    } else if (strcmp(p, "Transition/Days") == 0 ||
               strcmp(p, "NoncurrentVersionTransition/NoncurrentDays") == 0) {
        if (lx_int(t) < 0)
            x->err = -S3E_INVALID_ARGUMENT;
    } else if (strcmp(p, "Transition") == 0 ||
               strcmp(p, "NoncurrentVersionTransition") == 0) {
        r->has_action = true;
    } else if (strcmp(p, "Expiration") == 0) {
        if ((r->exp_days || r->exp_date) && r->exp_dm)
            x->err = -S3E_MALFORMED_XML; /* as S3: one or the other */
        else if (r->exp_days && r->exp_date)
            x->err = -S3E_MALFORMED_XML;
        r->has_action = true;
    } else if (strcmp(p, "NoncurrentVersionExpiration/NoncurrentDays") == 0) {
        v = lx_int(t);
        if (v <= 0)
            x->err = -S3E_INVALID_ARGUMENT;
        r->nc_days = v;
    } else if (strcmp(p,
                      "NoncurrentVersionExpiration/NewerNoncurrentVersions") ==
               0) {
        v = lx_int(t);
        if (v <= 0 || v > 100)
            x->err = -S3E_INVALID_ARGUMENT;
        r->nc_newer = v;
    } else if (strcmp(p, "NoncurrentVersionExpiration") == 0) {
        if (r->nc_days <= 0)
            x->err = -S3E_MALFORMED_XML;
        r->has_action = true;
    } else if (strcmp(p,
                      "AbortIncompleteMultipartUpload/DaysAfterInitiation") ==
               0) {
        v = lx_int(t);
        if (v <= 0)
            x->err = -S3E_INVALID_ARGUMENT;
        r->abort_days = v;
    } else if (strcmp(p, "AbortIncompleteMultipartUpload") == 0) {
        if (r->abort_days <= 0)
            x->err = -S3E_MALFORMED_XML;
        r->has_action = true;
    }
}

static void XMLCALL lx_end(void *ud, const char *name)
{
    struct lcx *x = ud;
    const char *t = x->text.data ? x->text.data : "";
    static const char rule[] = "LifecycleConfiguration/Rule";

    (void)name;
    if (x->err == 0 && x->cur &&
        strncmp(x->path, rule, sizeof(rule) - 1) == 0) {
        if (x->path[sizeof(rule) - 1] == '/')
            lx_rule_elem(x, x->path + sizeof(rule), t);
        else if (x->path[sizeof(rule) - 1] == 0)
            x->cur = NULL; /* the Rule closed; checked at the end */
    }
    cm_buf_reset(&x->text);
    if (x->depth > 0)
        x->path[x->plen[--x->depth]] = 0;
}

/* The checks across a rule and across rules. 0 or a negative error. */
static int lc_check(const struct stor_lc_conf *c)
{
    size_t i, j;

    if (c->n == 0)
        return -S3E_MALFORMED_XML;
    for (i = 0; i < c->n; i++) {
        const struct lc_rule *r = &c->r[i];

        if (!r->has_status || !r->has_action ||
            (r->has_filter && r->has_legacy_prefix))
            return -S3E_MALFORMED_XML;
        if (r->ntags && r->abort_days) /* as S3 */
            return -S3E_INVALID_ARGUMENT;
        if (r->ntags && r->exp_dm)
            return -S3E_INVALID_ARGUMENT;
        for (j = 0; j < i && r->id[0]; j++)
            if (strcmp(c->r[j].id, r->id) == 0)
                return -S3E_INVALID_ARGUMENT; /* IDs are unique */
    }
    return 0;
}

/* See header. */
int stor_lc_parse(const char *xml, size_t len, struct stor_lc_conf **out)
{
    XML_Parser p;
    struct lcx x;
    int ret = 0;

    *out = NULL;
    memset(&x, 0, sizeof(x));
    x.c = calloc(1, sizeof(*x.c));
    p = XML_ParserCreate(NULL);
    if (x.c == NULL || p == NULL) {
        free(x.c);
        if (p)
            XML_ParserFree(p);
        return -S3E_INTERNAL;
    }
    cm_buf_init(&x.text, 4096);
    XML_SetUserData(p, &x);
    XML_SetElementHandler(p, lx_start, lx_end);
    XML_SetCharacterDataHandler(p, lx_text);
    if (len > LC_MAX ||
        XML_Parse(p, xml ? xml : "", (int)len, 1) != XML_STATUS_OK)
        ret = -S3E_MALFORMED_XML;
    if (x.err) /* the first error found says more than expat's */
        ret = x.err;
    if (ret == 0)
        ret = lc_check(x.c);
    if (ret == 0 && x.transition)
        ret = -S3E_TRANSITION_NOT_IMPLEMENTED;
    XML_ParserFree(p);
    cm_buf_fini(&x.text);
    if (ret < 0) {
        stor_lc_conf_free(x.c);
        return ret;
    }
    *out = x.c;
    return 0;
}

/* ---- the stored form ---- */

/* Gives every rule without an ID one (as S3 does): hex digits of the
 * time and the rule's place, unique within the configuration. */
static void lc_name_rules(struct stor_lc_conf *c)
{
    struct timespec ts;
    size_t i;

    clock_gettime(CLOCK_REALTIME, &ts);
    for (i = 0; i < c->n; i++)
        if (c->r[i].id[0] == 0)
            snprintf(c->r[i].id, sizeof(c->r[i].id), "%08llx%08zx",
                     (unsigned long long)ts.tv_sec & 0xffffffffULL, i);
}

/* The Filter of @r (nothing when the rule had none). */
static void lc_filter_xml(const struct lc_rule *r, struct cm_buf *b)
{
    size_t nf = (r->has_fprefix || r->prefix) + r->ntags + (r->size_gt >= 0) +
                (r->size_lt >= 0);
    size_t j;

    if (!r->has_filter)
        return;
    x_lit(b, nf > 1 ? "<Filter><And>" : "<Filter>");
    if (r->has_fprefix || r->prefix)
        x_str(b, "Prefix", r->prefix, false);
    for (j = 0; j < r->ntags; j++) {
        x_lit(b, "<Tag>");
        x_str(b, "Key", r->tags[j].k, false);
        x_str(b, "Value", r->tags[j].v, false);
        x_lit(b, "</Tag>");
    }
    if (r->size_gt >= 0)
        x_fmt(b, "<ObjectSizeGreaterThan>%lld</ObjectSizeGreaterThan>",
              r->size_gt);
    if (r->size_lt >= 0)
        x_fmt(b, "<ObjectSizeLessThan>%lld</ObjectSizeLessThan>", r->size_lt);
    x_lit(b, nf > 1 ? "</And></Filter>" : "</Filter>");
}

/* @c as the LifecycleConfiguration document GET returns (what was put,
 * normalised, with every rule's ID). Sticky failure (xout.h). */
static void lc_serialize(const struct stor_lc_conf *c, struct cm_buf *b)
{
    char t[CM_TIME_RFC3339_LEN + 1];
    size_t i;

    x_lit(b, S3_XML_DECL "<LifecycleConfiguration xmlns=\"" S3_XMLNS "\">");
    for (i = 0; i < c->n; i++) {
        const struct lc_rule *r = &c->r[i];

        x_lit(b, "<Rule>");
        x_str(b, "ID", r->id, false);
        if (r->has_legacy_prefix)
            x_str(b, "Prefix", r->prefix, false);
        lc_filter_xml(r, b);
        x_fmt(b, "<Status>%s</Status>", r->enabled ? "Enabled" : "Disabled");
        if (r->exp_days || r->exp_date || r->exp_dm) {
            x_lit(b, "<Expiration>");
            if (r->exp_days)
                x_fmt(b, "<Days>%d</Days>", r->exp_days);
            if (r->exp_date) {
                time_iso(r->exp_date, 0, t);
                x_fmt(b, "<Date>%s</Date>", t);
            }
            if (r->exp_dm)
                x_lit(b, "<ExpiredObjectDeleteMarker>true"
                         "</ExpiredObjectDeleteMarker>");
            x_lit(b, "</Expiration>");
        }
        if (r->nc_days) {
            x_fmt(b,
                  "<NoncurrentVersionExpiration><NoncurrentDays>%d"
                  "</NoncurrentDays>",
                  r->nc_days);
            if (r->nc_newer)
                x_fmt(b,
                      "<NewerNoncurrentVersions>%d</NewerNoncurrentVersions>",
                      r->nc_newer);
            x_lit(b, "</NoncurrentVersionExpiration>");
        }
        if (r->abort_days)
            x_fmt(b,
                  "<AbortIncompleteMultipartUpload><DaysAfterInitiation>%d"
                  "</DaysAfterInitiation></AbortIncompleteMultipartUpload>",
                  r->abort_days);
        x_lit(b, "</Rule>");
    }
    x_lit(b, "</LifecycleConfiguration>");
}

/* ---- the operation ---- */

/* See header. */
void stor_lc_op(struct stor_s3_req *r)
{
    struct stor_store *st = r->s3->store;
    struct stor_bucket_info bi;
    struct stor_lc_conf *c;
    struct cm_buf out;
    char *doc = NULL;
    long n;
    int ret;

    if (stor_bucket_stat(st, r->bucket, &bi) < 0) {
        stor_s3_error(r, S3E_NO_SUCH_BUCKET);
        return;
    }
    if (r->http.is_delete) {
        ret = stor_ver_cfg_delete(st, r->bucket, CFG_LC);
        stor_lc_forget(r->s3->lc, r->bucket);
        if (ret < 0)
            stor_s3_error(r, stor_s3_err_from_errno(ret));
        else
            r->http.resp.status = 204;
        return;
    }
    if (!r->http.is_put) {
        n = stor_ver_cfg_read(st, r->bucket, CFG_LC, LC_MAX, &doc);
        if (n < 0) {
            stor_s3_error(r, n == -STOR_ENOKEY
                                 ? S3E_NO_SUCH_LIFECYCLE
                                 : stor_s3_err_from_errno((int)n));
            return;
        }
        if (cm_buf_append(&r->http.resp.body, doc, (size_t)n) < 0)
            x_fail(&r->http.resp.body);
        free(doc);
        xml_done(r);
        return;
    }
    /* Content-MD5 (or a checksum) is required, as S3 */
    if (!r->has_md5 && r->ck_kind == STOR_CKSUM_NONE) {
        stor_s3_error(r, S3E_INVALID_REQUEST);
        return;
    }
    ret = stor_lc_parse(r->body.data, r->body.len, &c);
    if (ret < 0) {
        stor_s3_error(r, (enum stor_s3_err)(-ret));
        return;
    }
    lc_name_rules(c);
    cm_buf_init(&out, LC_MAX);
    lc_serialize(c, &out);
    stor_lc_conf_free(c);
    ret = out.limit == 0
              ? -ENOMEM
              : stor_ver_cfg_write(st, r->bucket, CFG_LC, out.data, out.len);
    cm_buf_fini(&out);
    stor_lc_forget(r->s3->lc, r->bucket);
    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    r->http.resp.status = 200;
}

/* ---- the scanner ---- */

struct stor_lc {
    struct stor_store *st; /* borrowed */
    struct stor_ver *ver;  /* borrowed */
    double day_s, interval_s;
    pthread_t th;
    pthread_mutex_t mu; /* protects stop */
    pthread_cond_t cv;
    bool stop;
    _Atomic bool stopping; /* a pass in progress gives up */
    _Atomic uint64_t passes, scanned, exp_current, exp_noncurrent, exp_dm,
        aborted, errors;
    _Atomic uint64_t last_pass_ms;
    /* parsed configurations for x-amz-expiration, by bucket */
    pthread_mutex_t cmu;                 /* protects cache */
    struct lc_cache *cache[CACHE_SLOTS]; /* protected by cmu */
};

/* true when @key (@size) is in @r's filter; @tags (URL-encoded
 * "k=v&...", NULL: none) only asked for when the rule has tags. */
static bool lc_match(const struct lc_rule *r, const char *key, size_t kl,
                     uint64_t size)
{
    size_t pl = r->prefix ? strlen(r->prefix) : 0;

    if (!r->enabled || kl < pl || (pl && memcmp(key, r->prefix, pl) != 0))
        return false;
    if (r->size_gt >= 0 && size <= (uint64_t)r->size_gt)
        return false;
    if (r->size_lt >= 0 && size >= (uint64_t)r->size_lt)
        return false;
    return true;
}

/* true when the object's stored tags (x-amz-tagging of @info) hold every
 * tag of @r. */
static bool lc_tags_match(const struct lc_rule *r,
                          const struct stor_obj_info *info)
{
    const char *tg = NULL;
    size_t i, t;

    for (i = 0; i < info->nhdrs; i++)
        if (strcmp(info->hdrs[i].name, "x-amz-tagging") == 0)
            tg = info->hdrs[i].value;
    for (t = 0; t < r->ntags; t++) {
        const char *p = tg;
        bool found = false;

        while (p && *p && !found) {
            const char *amp = strchr(p, '&'), *eq;
            size_t n = amp ? (size_t)(amp - p) : strlen(p);
            struct cm_buf k, v;

            eq = memchr(p, '=', n);
            cm_buf_init(&k, 4096);
            cm_buf_init(&v, 4096);
            if (cm_uri_decode(&k, p, eq ? (size_t)(eq - p) : n, true) == 0 &&
                cm_uri_decode(&v, eq ? eq + 1 : p + n,
                              eq ? n - (size_t)(eq - p) - 1 : 0, true) == 0)
                found =
                    k.len == strlen(r->tags[t].k) &&
                    memcmp(k.data ? k.data : "", r->tags[t].k, k.len) == 0 &&
                    v.len == strlen(r->tags[t].v) &&
                    memcmp(v.data ? v.data : "", r->tags[t].v, v.len) == 0;
            cm_buf_fini(&k);
            cm_buf_fini(&v);
            p = amp ? amp + 1 : NULL;
        }
        if (!found)
            return false;
    }
    return true;
}

/* When something @days days after @t is due: rounded up to the next
 * midnight UTC with real days (as AWS), exact with the test knob. */
static double lc_due(const struct stor_lc *lc, time_t t, int days)
{
    double due = (double)t + days * lc->day_s;

    if (lc->day_s == 86400.0)
        due = ((long long)due + 86399) / 86400 * 86400.0;
    return due;
}

/* Expiration of @bucket's current objects. */
static void lc_pass_current(struct stor_lc *lc, const char *bucket,
                            const struct stor_lc_conf *c, time_t now)
{
    struct stor_list_result res;
    char *after = NULL;
    size_t i, j;
    int ret;

    for (;;) {
        memset(&res, 0, sizeof(res));
        ret =
            stor_obj_list(lc->st, bucket, NULL, NULL, after, LIST_BATCH, &res);
        if (ret < 0) {
            atomic_fetch_add(&lc->errors, 1);
            break;
        }
        for (i = 0; i < res.nobjs && !atomic_load(&lc->stopping); i++) {
            const struct stor_list_entry *e = &res.objs[i];

            atomic_fetch_add(&lc->scanned, 1);
            for (j = 0; j < c->n; j++) {
                const struct lc_rule *r = &c->r[j];
                bool due;

                if ((!r->exp_days && !r->exp_date) ||
                    !lc_match(r, e->key, e->key_len, e->size))
                    continue;
                due = r->exp_date
                          ? now >= r->exp_date
                          : (double)now >= lc_due(lc, e->mtime, r->exp_days);
                if (!due)
                    continue;
                if (r->ntags) {
                    struct stor_obj_info info;
                    bool ok;

                    memset(&info, 0, sizeof(info));
                    if (stor_obj_stat(lc->st, bucket, e->key, e->key_len,
                                      &info) < 0)
                        continue;
                    ok = lc_tags_match(r, &info);
                    stor_obj_info_fini(&info);
                    if (!ok)
                        continue;
                }
                ret = stor_ver_delete_current(lc->ver, bucket, e->key,
                                              e->key_len);
                atomic_fetch_add(ret < 0 ? &lc->errors : &lc->exp_current, 1);
                break;
            }
        }
        if (stor_ver_list_next(&res, &after) < 0)
            atomic_fetch_add(&lc->errors, 1);
        stor_list_result_fini(&res);
        if (after == NULL || atomic_load(&lc->stopping))
            break;
    }
    free(after);
}

/* One key's companion versions (newest first) from a listing. */
struct lc_group {
    char *key; /* owned */
    size_t kl;
    struct {
        char vid[STOR_VID_LEN + 1];
        char sfx[STOR_VER_SUFFIX]; /* its companion key = key + sfx */
        bool dm;
        time_t since; /* when it stopped being current */
        uint64_t size;
    } v[64];
    size_t n;
    bool more; /* over 64: the rest waits for the next pass */
};

/* true when version @i of @g carries every tag of @r (its companion
 * object's stored x-amz-tagging). */
static bool lc_version_tags(struct stor_lc *lc, const char *bucket,
                            const struct lc_group *g, size_t i,
                            const struct lc_rule *r)
{
    struct stor_obj_info info;
    char hb[64], *hk = malloc(g->kl + STOR_VER_SUFFIX);
    bool ok = false;

    if (hk == NULL)
        return false;
    memcpy(hk, g->key, g->kl);
    memcpy(hk + g->kl, g->v[i].sfx, STOR_VER_SUFFIX);
    stor_ver_hidden_bucket(bucket, hb);
    memset(&info, 0, sizeof(info));
    if (stor_obj_stat(lc->st, hb, hk, g->kl + STOR_VER_SUFFIX, &info) == 0)
        ok = lc_tags_match(r, &info);
    stor_obj_info_fini(&info);
    free(hk);
    return ok;
}

/* Applies NoncurrentVersionExpiration and ExpiredObjectDeleteMarker to
 * group @g of @bucket. */
static void lc_group_apply(struct stor_lc *lc, const char *bucket,
                           const struct stor_lc_conf *c, struct lc_group *g,
                           time_t now)
{
    struct stor_obj_info info;
    bool has_cur, cur_dm, gone[64] = {false};
    size_t i, j, left, nc;
    int ret;

    memset(&info, 0, sizeof(info));
    has_cur = stor_obj_stat(lc->st, bucket, g->key, g->kl, &info) == 0;
    stor_obj_info_fini(&info);
    /* without a current object the newest version here is the current
     * one (a delete marker): it is not non-current */
    cur_dm = !has_cur && g->n > 0 && g->v[0].dm;
    for (j = 0; j < c->n; j++) {
        const struct lc_rule *r = &c->r[j];

        if (!r->nc_days || !lc_match(r, g->key, g->kl, 0))
            continue;
        for (i = cur_dm ? 1 : 0, nc = 0; i < g->n; i++) {
            if (gone[i])
                continue;
            if (nc++ < (size_t)r->nc_newer)
                continue; /* the newest N non-current ones stay */
            if ((double)now < lc_due(lc, g->v[i].since, r->nc_days) ||
                (r->ntags && !lc_version_tags(lc, bucket, g, i, r)))
                continue;
            ret = stor_ver_delete_version(lc->ver, bucket, g->key, g->kl,
                                          g->v[i].vid);
            atomic_fetch_add(ret < 0 ? &lc->errors : &lc->exp_noncurrent, 1);
            gone[i] = ret == 0;
        }
    }
    for (i = 0, left = 0; i < g->n; i++)
        left += !gone[i];
    if (!cur_dm || left != 1 || g->more)
        return; /* only a marker that is the key's last version expires */
    for (j = 0; j < c->n; j++) {
        const struct lc_rule *r = &c->r[j];

        if (!lc_match(r, g->key, g->kl, 0) || !(r->exp_dm || r->exp_days))
            continue;
        ret = stor_ver_delete_version(lc->ver, bucket, g->key, g->kl,
                                      g->v[0].vid);
        atomic_fetch_add(ret < 0 ? &lc->errors : &lc->exp_dm, 1);
        break;
    }
}

/* The companion's versions of @bucket, key by key. */
static void lc_pass_versions(struct stor_lc *lc, const char *bucket,
                             const struct stor_lc_conf *c, time_t now)
{
    struct stor_list_result res;
    struct lc_group g;
    char hb[64], *after = NULL;
    size_t i;
    int ret;

    memset(&g, 0, sizeof(g));
    stor_ver_hidden_bucket(bucket, hb);
    for (;;) {
        memset(&res, 0, sizeof(res));
        ret = stor_obj_list(lc->st, hb, NULL, NULL, after, LIST_BATCH, &res);
        if (ret < 0) {
            if (ret != -STOR_ENOBUCKET && ret != -STOR_ENOKEY)
                atomic_fetch_add(&lc->errors, 1);
            break;
        }
        for (i = 0; i < res.nobjs && !atomic_load(&lc->stopping); i++) {
            const struct stor_list_entry *e = &res.objs[i];
            char vid[STOR_VID_LEN + 1];
            size_t kl;
            bool dm, null;

            if (!stor_ver_parse_hidden(e->key, e->key_len, &kl, vid, &dm, &null,
                                       NULL))
                continue;
            atomic_fetch_add(&lc->scanned, 1);
            if (g.key && (g.kl != kl || memcmp(g.key, e->key, kl) != 0)) {
                lc_group_apply(lc, bucket, c, &g, now);
                free(g.key);
                memset(&g, 0, sizeof(g));
            }
            if (g.key == NULL) {
                g.key = strndup(e->key, kl);
                g.kl = kl;
                if (g.key == NULL)
                    break;
            }
            if (g.n == 64) {
                g.more = true;
                continue;
            }
            memcpy(g.v[g.n].vid, vid, sizeof(vid));
            memcpy(g.v[g.n].sfx, e->key + kl, STOR_VER_SUFFIX);
            g.v[g.n].dm = dm;
            g.v[g.n].since = e->mtime;
            g.v[g.n].size = e->size;
            g.n++;
        }
        if (stor_ver_list_next(&res, &after) < 0)
            atomic_fetch_add(&lc->errors, 1);
        stor_list_result_fini(&res);
        if (after == NULL || atomic_load(&lc->stopping))
            break;
    }
    if (g.key)
        lc_group_apply(lc, bucket, c, &g, now);
    free(g.key);
    free(after);
}

/* AbortIncompleteMultipartUpload for @bucket. */
static void lc_pass_uploads(struct stor_lc *lc, const char *bucket,
                            const struct stor_lc_conf *c, time_t now)
{
    size_t j, i, n;
    int ret;

    for (j = 0; j < c->n; j++) {
        const struct lc_rule *r = &c->r[j];
        struct stor_upload *u = NULL;
        bool trunc = false;

        if (!r->abort_days || !r->enabled)
            continue;
        ret = stor_mpu_list(lc->st, bucket, r->prefix, NULL, NULL, LIST_BATCH,
                            &u, &n, &trunc);
        if (ret < 0) {
            atomic_fetch_add(&lc->errors, 1);
            continue;
        }
        for (i = 0; i < n; i++) {
            if ((double)now < lc_due(lc, u[i].initiated, r->abort_days))
                continue;
            ret = stor_mpu_abort(lc->st, bucket, u[i].key, u[i].key_len,
                                 u[i].upload_id);
            /* NoSuchUpload: gone meanwhile, or a Complete runs on it
             * (it ends the upload, or leaves it whole for a retry and a
             * later pass) */
            if (ret == 0)
                atomic_fetch_add(&lc->aborted, 1);
            else if (ret != -STOR_ENOUPLOAD)
                atomic_fetch_add(&lc->errors, 1);
        }
        stor_uploads_free(u, n);
    }
}

/* One pass over every bucket with a configuration. */
static void lc_pass(struct stor_lc *lc)
{
    struct stor_bucket_info *bs = NULL;
    struct timespec t0, t1;
    size_t n = 0, i;
    time_t now = time(NULL);

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (stor_bucket_list(lc->st, &bs, &n) < 0) {
        atomic_fetch_add(&lc->errors, 1);
        return;
    }
    for (i = 0; i < n && !atomic_load(&lc->stopping); i++) {
        struct stor_lc_conf *c = NULL;
        char *doc = NULL;
        long len;

        if (stor_ver_is_internal_bucket(bs[i].name))
            continue;
        len = stor_ver_cfg_read(lc->st, bs[i].name, CFG_LC, LC_MAX, &doc);
        if (len < 0) {
            if (len != -STOR_ENOKEY)
                atomic_fetch_add(&lc->errors, 1);
            continue;
        }
        if (stor_lc_parse(doc, (size_t)len, &c) == 0) {
            lc_pass_current(lc, bs[i].name, c, now);
            lc_pass_versions(lc, bs[i].name, c, now);
            lc_pass_uploads(lc, bs[i].name, c, now);
        } else {
            atomic_fetch_add(&lc->errors, 1);
        }
        stor_lc_conf_free(c);
        free(doc);
    }
    free(bs);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    atomic_store(&lc->last_pass_ms,
                 (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000 +
                            (t1.tv_nsec - t0.tv_nsec) / 1000000));
    atomic_fetch_add(&lc->passes, 1);
}

/* Waits @s seconds or until stopped; true when stopped. */
static bool lc_wait(struct stor_lc *lc, double s)
{
    struct timespec ts;
    bool stop;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)s;
    ts.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&lc->mu);
    while (!lc->stop)
        if (pthread_cond_timedwait(&lc->cv, &lc->mu, &ts) != 0)
            break;
    stop = lc->stop;
    pthread_mutex_unlock(&lc->mu);
    return stop;
}

static void *lc_thread(void *arg)
{
    struct stor_lc *lc = arg;

    while (!stor_store_ready(lc->st))
        if (lc_wait(lc, 0.5))
            return NULL;
    for (;;) {
        if (lc_wait(lc, lc->interval_s))
            return NULL;
        lc_pass(lc);
    }
}

/* A positive number of seconds from environment variable @name. */
static double env_seconds(const char *name, double def)
{
    const char *v = getenv(name);
    char *end;
    double d;

    if (v == NULL || *v == 0)
        return def;
    d = strtod(v, &end);
    if (*end != 0 || !(d > 0) || d > 1e9) {
        cm_log(CM_LOG_WARN, 0, "lifecycle: ignoring %s=%s", name, v);
        return def;
    }
    cm_log(CM_LOG_WARN, 0, "lifecycle: %s=%g (a test-only knob)", name, d);
    return d;
}

/* See header. */
int stor_lc_start(struct stor_store *st, struct stor_ver *v,
                  struct stor_lc **out)
{
    struct stor_lc *lc = calloc(1, sizeof(*lc));
    int ret;

    if (lc == NULL)
        return -ENOMEM;
    lc->st = st;
    lc->ver = v;
    lc->day_s = env_seconds("STORAGED_TEST_LIFECYCLE_DAY_S", 86400.0);
    lc->interval_s = env_seconds("STORAGED_TEST_LIFECYCLE_INTERVAL_S", 3600.0);
    pthread_mutex_init(&lc->mu, NULL);
    pthread_mutex_init(&lc->cmu, NULL);
    pthread_cond_init(&lc->cv, NULL);
    ret = pthread_create(&lc->th, NULL, lc_thread, lc);
    if (ret != 0) {
        pthread_cond_destroy(&lc->cv);
        pthread_mutex_destroy(&lc->mu);
        free(lc);
        return -ret;
    }
    *out = lc;
    return 0;
}

/* See header. */
void stor_lc_stop(struct stor_lc *lc)
{
    if (lc == NULL)
        return;
    atomic_store(&lc->stopping, true);
    pthread_mutex_lock(&lc->mu);
    lc->stop = true;
    pthread_cond_broadcast(&lc->cv);
    pthread_mutex_unlock(&lc->mu);
    pthread_join(lc->th, NULL);
    pthread_cond_destroy(&lc->cv);
    pthread_mutex_destroy(&lc->mu);
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        while (lc->cache[i]) {
            struct lc_cache *e = lc->cache[i];

            lc->cache[i] = e->next;
            stor_lc_conf_free(e->c);
            free(e);
        }
    pthread_mutex_destroy(&lc->cmu);
    free(lc);
}

/* The cache slot of @bucket. */
static struct lc_cache **lc_slot(struct stor_lc *lc, const char *bucket)
{
    uint64_t h = 1469598103934665603ULL;

    for (const char *p = bucket; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return &lc->cache[h % CACHE_SLOTS];
}

/* See header. */
void stor_lc_forget(struct stor_lc *lc, const char *bucket)
{
    struct lc_cache **pp, *e;

    if (lc == NULL)
        return;
    pthread_mutex_lock(&lc->cmu);
    for (pp = lc_slot(lc, bucket); (e = *pp) != NULL; pp = &e->next)
        if (strcmp(e->bucket, bucket) == 0) {
            *pp = e->next;
            stor_lc_conf_free(e->c);
            free(e);
            break;
        }
    pthread_mutex_unlock(&lc->cmu);
}

/* The cached entry of @bucket; caller holds cmu. */
static struct lc_cache *lc_cache_find(struct stor_lc *lc, const char *bucket)
{
    struct lc_cache *e;

    for (e = *lc_slot(lc, bucket); e; e = e->next)
        if (strcmp(e->bucket, bucket) == 0)
            return e;
    return NULL;
}

/* See header. */
void stor_lc_warm(struct stor_lc *lc, const char *bucket)
{
    struct stor_lc_conf *c = NULL;
    struct lc_cache *e;
    char *doc = NULL;
    long n;

    if (lc == NULL)
        return;
    pthread_mutex_lock(&lc->cmu);
    e = lc_cache_find(lc, bucket);
    pthread_mutex_unlock(&lc->cmu);
    if (e)
        return;
    n = stor_ver_cfg_read(lc->st, bucket, CFG_LC, LC_MAX, &doc);
    if (n < 0 && n != -STOR_ENOKEY)
        return; /* not known: try again next time */
    if (n >= 0 && stor_lc_parse(doc, (size_t)n, &c) < 0)
        c = NULL;
    free(doc);
    pthread_mutex_lock(&lc->cmu);
    if (lc_cache_find(lc, bucket) == NULL &&
        (e = calloc(1, sizeof(*e))) != NULL) {
        snprintf(e->bucket, sizeof(e->bucket), "%s", bucket);
        e->c = c;
        c = NULL;
        e->next = *lc_slot(lc, bucket);
        *lc_slot(lc, bucket) = e;
    }
    pthread_mutex_unlock(&lc->cmu);
    stor_lc_conf_free(c);
}

/* See header. */
bool stor_lc_cached(struct stor_lc *lc, const char *bucket)
{
    bool hit;

    if (lc == NULL)
        return true;
    pthread_mutex_lock(&lc->cmu);
    hit = lc_cache_find(lc, bucket) != NULL;
    pthread_mutex_unlock(&lc->cmu);
    return hit;
}

/* See header. */
int stor_lc_expiration(struct stor_lc *lc, const char *bucket, const char *key,
                       size_t kl, const struct stor_obj_info *info,
                       struct stor_resp *rs)
{
    char when[CM_TIME_HTTP_LEN + 1], id[ID_MAX + 1] = "";
    struct lc_cache *e;
    time_t due = 0;
    size_t j;

    if (lc == NULL)
        return 0;
    pthread_mutex_lock(&lc->cmu);
    e = lc_cache_find(lc, bucket);
    for (j = 0; e && e->c && j < e->c->n && !id[0]; j++) {
        const struct lc_rule *r = &e->c->r[j];

        if ((!r->exp_days && !r->exp_date) ||
            !lc_match(r, key, kl, info->size) ||
            (r->ntags && !lc_tags_match(r, info)))
            continue;
        /* real days, as AWS states it, whatever the test knob */
        due = r->exp_date
                  ? r->exp_date
                  : (info->mtime + (time_t)r->exp_days * 86400 + 86399) /
                        86400 * 86400;
        snprintf(id, sizeof(id), "%s", r->id);
    }
    pthread_mutex_unlock(&lc->cmu);
    if (!id[0])
        return 0;
    cm_time_http(due, when);
    return stor_resp_hdr(rs, "x-amz-expiration",
                         "expiry-date=\"%s\", rule-id=\"%s\"", when, id);
}

/* See header. */
int stor_lc_metrics(struct stor_lc *lc, struct cm_buf *o)
{
    if (lc == NULL)
        return 0;
    return cm_buf_appendf(
        o,
        "# HELP storaged_lifecycle_passes_total Lifecycle scanner passes over "
        "the buckets with a lifecycle configuration.\n"
        "# TYPE storaged_lifecycle_passes_total counter\n"
        "storaged_lifecycle_passes_total %llu\n"
        "# TYPE storaged_lifecycle_objects_scanned_total counter\n"
        "storaged_lifecycle_objects_scanned_total %llu\n"
        "# HELP storaged_lifecycle_actions_total Lifecycle actions taken, by "
        "rule action.\n"
        "# TYPE storaged_lifecycle_actions_total counter\n"
        "storaged_lifecycle_actions_total{action=\"expiration\"} %llu\n"
        "storaged_lifecycle_actions_total{action=\"noncurrent_expiration\"} "
        "%llu\n"
        "storaged_lifecycle_actions_total{action=\"expired_delete_marker\"} "
        "%llu\n"
        "storaged_lifecycle_actions_total{action=\"abort_multipart\"} %llu\n"
        "# TYPE storaged_lifecycle_errors_total counter\n"
        "storaged_lifecycle_errors_total %llu\n"
        "# TYPE storaged_lifecycle_last_pass_seconds gauge\n"
        "storaged_lifecycle_last_pass_seconds %.3f\n",
        (unsigned long long)atomic_load(&lc->passes),
        (unsigned long long)atomic_load(&lc->scanned),
        (unsigned long long)atomic_load(&lc->exp_current),
        (unsigned long long)atomic_load(&lc->exp_noncurrent),
        (unsigned long long)atomic_load(&lc->exp_dm),
        (unsigned long long)atomic_load(&lc->aborted),
        (unsigned long long)atomic_load(&lc->errors),
        (double)atomic_load(&lc->last_pass_ms) / 1000.0);
}
