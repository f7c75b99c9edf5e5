/* common/otlp.c - Prometheus text -> OTLP/HTTP JSON, and the push thread.
 *
 * DESIGN: one source of truth per program (its Prometheus renderer), so
 * /metrics and the OTLP push can never disagree. The encoder parses the
 * text exposition format (version 0.0.4: # HELP, # TYPE, samples with
 * quoted, escaped label values) into a flat sample array, assigns each
 * sample to its family (histogram samples by their _bucket/_sum/_count
 * suffix), then writes one OTLP metric per family. Prometheus histogram
 * buckets are cumulative; OTLP bucketCounts are per bucket, so they are
 * differenced. JSON follows the OTLP/HTTP JSON mapping: lowerCamelCase
 * field names, 64-bit integers as decimal strings, enums as numbers.
 *
 * The pusher owns one curl easy handle (keep-alive to the collector) and
 * runs on its own thread; an export is bounded by CONNECT_MS and a total
 * timeout, and cm_otlp_stop aborts one in progress through the progress
 * callback. Failures are counted and logged at most once a minute. */
#include "common/otlp.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

#define MAX_SAMPLES  200000
#define MAX_FAMILIES 20000
#define CONNECT_MS   1000
#define LOG_EVERY_S  60
#define TEXT_LIMIT   (64u << 20)

enum fam_type { F_GAUGE = 0, F_COUNTER, F_HISTOGRAM };
enum smp_kind { K_PLAIN = 0, K_BUCKET, K_SUM, K_COUNT };

struct fam {
    const char *name; /* borrows the text */
    size_t nlen;
    enum fam_type type;
    const char *help; /* borrows the text; escaped as in the text */
    size_t hlen;
};

struct smp {
    const char *name; /* borrows the text */
    size_t nlen;
    size_t aoff, alen; /* JSON attributes (no le) in the parse's attrs */
    double le;         /* the le label of a bucket */
    bool has_le;
    const char *val; /* borrows the text */
    size_t vlen;
    int fam;
    enum smp_kind kind;
};

struct parse {
    struct fam *fams;
    size_t nfams, capfams;
    struct smp *smps;
    size_t nsmps, capsmps;
    struct cm_buf attrs; /* every sample's attribute JSON, back to back */
};

/* Appends @s (@n bytes) as a JSON string literal. 0 or -errno. */
static int json_str(struct cm_buf *o, const char *s, size_t n)
{
    int ret = cm_buf_appendc(o, '"');

    for (size_t i = 0; i < n && ret == 0; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"' || c == '\\')
            ret = cm_buf_appendf(o, "\\%c", c);
        else if (c < 0x20)
            ret = cm_buf_appendf(o, "\\u%04x", c);
        else
            ret = cm_buf_appendc(o, (char)c);
    }
    return ret ? ret : cm_buf_appendc(o, '"');
}

/* Index of family @name, or -1. */
static int fam_find(const struct parse *p, const char *name, size_t n)
{
    for (size_t i = 0; i < p->nfams; i++)
        if (p->fams[i].nlen == n && memcmp(p->fams[i].name, name, n) == 0)
            return (int)i;
    return -1;
}

/* Index of family @name, created (a gauge) when absent; -ENOMEM/-E2BIG. */
static int fam_get(struct parse *p, const char *name, size_t n)
{
    int i = fam_find(p, name, n);

    if (i >= 0)
        return i;
    if (p->nfams == MAX_FAMILIES)
        return -E2BIG;
    if (p->nfams == p->capfams) {
        size_t cap = p->capfams ? 2 * p->capfams : 64;
        struct fam *f = realloc(p->fams, cap * sizeof(*f));

        if (f == NULL)
            return -ENOMEM;
        p->fams = f;
        p->capfams = cap;
    }
    p->fams[p->nfams] = (struct fam){.name = name, .nlen = n};
    return (int)p->nfams++;
}

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == ':';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

/* Length of the metric/label name at @s (before @end); 0 if none. */
static size_t name_len(const char *s, const char *end)
{
    size_t n = 0;

    if (s >= end || !name_start(*s))
        return 0;
    while (s + n < end && name_char(s[n]))
        n++;
    return n;
}

/* A "# HELP name text" or "# TYPE name type" line (others are comments). */
static int parse_meta(struct parse *p, const char *s, const char *end)
{
    bool help, type;
    size_t n;
    int f;

    s++; /* '#' */
    while (s < end && *s == ' ')
        s++;
    help = end - s > 5 && memcmp(s, "HELP ", 5) == 0;
    type = end - s > 5 && memcmp(s, "TYPE ", 5) == 0;
    if (!help && !type)
        return 0;
    s += 5;
    while (s < end && *s == ' ')
        s++;
    n = name_len(s, end);
    if (n == 0)
        return -EBADMSG;
    f = fam_get(p, s, n);
    if (f < 0)
        return f;
    s += n;
    while (s < end && *s == ' ')
        s++;
    if (help) {
        p->fams[f].help = s;
        p->fams[f].hlen = (size_t)(end - s);
    } else if ((size_t)(end - s) == 7 && memcmp(s, "counter", 7) == 0) {
        p->fams[f].type = F_COUNTER;
    } else if ((size_t)(end - s) == 9 && memcmp(s, "histogram", 9) == 0) {
        p->fams[f].type = F_HISTOGRAM;
    } /* gauge, untyped, summary: pushed as gauges */
    return 0;
}

/* Parses one quoted label value at *@sp (after the opening quote), writing
 * it unescaped as a JSON string to @o; *@sp ends after the closing quote.
 * The raw value (escapes undone) is copied to @raw (@rcap bytes, cut). */
static int parse_lvalue(const char **sp, const char *end, struct cm_buf *o,
                        char *raw, size_t rcap)
{
    const char *s = *sp;
    size_t rn = 0;
    int ret = cm_buf_appendc(o, '"');

    while (ret == 0) {
        char c;

        if (s >= end)
            return -EBADMSG;
        c = *s++;
        if (c == '"')
            break;
        if (c == '\\') {
            if (s >= end)
                return -EBADMSG;
            c = *s++;
            if (c == 'n')
                c = '\n';
            else if (c != '\\' && c != '"')
                return -EBADMSG;
        }
        if (rn + 1 < rcap)
            raw[rn++] = c;
        if (c == '"' || c == '\\')
            ret = cm_buf_appendf(o, "\\%c", c);
        else if ((unsigned char)c < 0x20)
            ret = cm_buf_appendf(o, "\\u%04x", (unsigned char)c);
        else
            ret = cm_buf_appendc(o, c);
    }
    if (rcap)
        raw[rn] = 0;
    *sp = s;
    return ret ? ret : cm_buf_appendc(o, '"');
}

/* Parses "{k="v",...}" at *@sp into attribute JSON appended to p->attrs;
 * an le label goes to @sm instead. */
static int parse_labels(struct parse *p, const char **sp, const char *end,
                        struct smp *sm)
{
    const char *s = *sp + 1; /* '{' */
    bool first = true;
    int ret = 0;

    sm->aoff = p->attrs.len;
    for (;;) {
        size_t n;
        bool is_le;
        char raw[64];

        while (s < end && *s == ' ')
            s++;
        if (s < end && *s == '}') {
            s++;
            break;
        }
        n = name_len(s, end);
        if (n == 0 || s + n + 1 >= end || s[n] != '=' || s[n + 1] != '"')
            return -EBADMSG;
        is_le = n == 2 && memcmp(s, "le", 2) == 0;
        if (is_le) {
            struct cm_buf scratch;
            char *e;

            cm_buf_init(&scratch, 4096);
            s += n + 2;
            ret = parse_lvalue(&s, end, &scratch, raw, sizeof(raw));
            cm_buf_fini(&scratch);
            if (ret < 0)
                return ret;
            sm->le = strtod(raw, &e);
            if (e == raw || *e)
                return -EBADMSG;
            sm->has_le = true;
        } else {
            ret = cm_buf_appendf(&p->attrs, "%s{\"key\":", first ? "" : ",");
            if (ret == 0)
                ret = json_str(&p->attrs, s, n);
            if (ret == 0)
                ret = cm_buf_appends(&p->attrs, ",\"value\":{\"stringValue\":");
            s += n + 2;
            if (ret == 0)
                ret = parse_lvalue(&s, end, &p->attrs, raw, 0);
            if (ret == 0)
                ret = cm_buf_appends(&p->attrs, "}}");
            if (ret < 0)
                return ret;
            first = false;
        }
        while (s < end && *s == ' ')
            s++;
        if (s < end && *s == ',')
            s++;
        else if (s < end && *s == '}')
            continue;
        else
            return -EBADMSG;
    }
    sm->alen = p->attrs.len - sm->aoff;
    *sp = s;
    return 0;
}

/* Parses one sample line into p->smps. */
static int parse_sample(struct parse *p, const char *s, const char *end)
{
    struct smp sm = {.name = s};
    const char *v;
    char num[64];
    char *e;
    int ret;

    sm.nlen = name_len(s, end);
    if (sm.nlen == 0)
        return -EBADMSG;
    s += sm.nlen;
    sm.aoff = p->attrs.len;
    if (s < end && *s == '{') {
        ret = parse_labels(p, &s, end, &sm);
        if (ret < 0)
            return ret;
    }
    if (s >= end || (*s != ' ' && *s != '\t'))
        return -EBADMSG;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    v = s;
    while (s < end && *s != ' ' && *s != '\t')
        s++;
    sm.val = v;
    sm.vlen = (size_t)(s - v);
    if (sm.vlen == 0 || sm.vlen >= sizeof(num))
        return -EBADMSG;
    memcpy(num, v, sm.vlen);
    num[sm.vlen] = 0;
    (void)strtod(num, &e);
    if (*e)
        return -EBADMSG;
    if (p->nsmps == MAX_SAMPLES)
        return -E2BIG;
    if (p->nsmps == p->capsmps) {
        size_t cap = p->capsmps ? 2 * p->capsmps : 256;
        struct smp *n = realloc(p->smps, cap * sizeof(*n));

        if (n == NULL)
            return -ENOMEM;
        p->smps = n;
        p->capsmps = cap;
    }
    p->smps[p->nsmps++] = sm;
    return 0;
}

/* Whether @s (@n bytes) ends in @suf; then *@base is its length without. */
static bool has_suffix(const char *s, size_t n, const char *suf, size_t *base)
{
    size_t k = strlen(suf);

    if (n <= k || memcmp(s + n - k, suf, k) != 0)
        return false;
    *base = n - k;
    return true;
}

/* Sets every sample's family and kind. */
static int assign(struct parse *p)
{
    static const char *const sufs[] = {"_bucket", "_sum", "_count"};

    for (size_t i = 0; i < p->nsmps; i++) {
        struct smp *sm = &p->smps[i];
        int f = fam_find(p, sm->name, sm->nlen);

        if (f >= 0 && p->fams[f].type != F_HISTOGRAM) {
            sm->fam = f;
            sm->kind = K_PLAIN;
            continue;
        }
        f = -1;
        for (size_t k = 0; k < 3; k++) {
            size_t base;

            if (!has_suffix(sm->name, sm->nlen, sufs[k], &base))
                continue;
            f = fam_find(p, sm->name, base);
            if (f >= 0 && p->fams[f].type == F_HISTOGRAM) {
                sm->fam = f;
                sm->kind = (enum smp_kind)(K_BUCKET + k);
                break;
            }
            f = -1;
        }
        if (f >= 0)
            continue;
        f = fam_get(p, sm->name, sm->nlen); /* an untyped sample */
        if (f < 0)
            return f;
        if (p->fams[f].type == F_HISTOGRAM)
            return -EBADMSG; /* a histogram's own name as a sample */
        sm->fam = f;
        sm->kind = K_PLAIN;
    }
    return 0;
}

/* Whether the value text is a plain integer (then sent as asInt). */
static bool is_int(const char *v, size_t n)
{
    size_t i = v[0] == '-' ? 1 : 0;

    if (i == n || n - i > 18)
        return false;
    for (; i < n; i++)
        if (v[i] < '0' || v[i] > '9')
            return false;
    return true;
}

/* Appends a double the JSON way (non-finite values as proto3 strings). */
static int json_double(struct cm_buf *o, double d)
{
    if (isnan(d))
        return cm_buf_appends(o, "\"NaN\"");
    if (isinf(d))
        return cm_buf_appends(o, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return cm_buf_appendf(o, "%.17g", d);
}

static double smp_value(const struct smp *sm)
{
    char num[64];

    memcpy(num, sm->val, sm->vlen);
    num[sm->vlen] = 0;
    return strtod(num, NULL);
}

/* The point's common head: attributes and times. */
static int point_head(struct cm_buf *o, const struct parse *p,
                      const struct smp *sm, uint64_t t0, uint64_t t1)
{
    int ret = cm_buf_appends(o, "{\"attributes\":[");

    if (ret == 0)
        ret = cm_buf_append(o, p->attrs.data + sm->aoff, sm->alen);
    if (ret == 0)
        ret = cm_buf_appendf(o,
                             "],\"startTimeUnixNano\":\"%llu\","
                             "\"timeUnixNano\":\"%llu\"",
                             (unsigned long long)t0, (unsigned long long)t1);
    return ret;
}

/* Number data points of a gauge or counter family @f. */
static int emit_numbers(struct cm_buf *o, const struct parse *p, int f,
                        uint64_t t0, uint64_t t1)
{
    bool first = true;
    int ret = 0;

    for (size_t i = 0; i < p->nsmps && ret == 0; i++) {
        const struct smp *sm = &p->smps[i];

        if (sm->fam != f)
            continue;
        if (!first)
            ret = cm_buf_appendc(o, ',');
        first = false;
        if (ret == 0)
            ret = point_head(o, p, sm, t0, t1);
        if (ret == 0 && is_int(sm->val, sm->vlen))
            ret = cm_buf_appendf(o, ",\"asInt\":\"%.*s\"}", (int)sm->vlen,
                                 sm->val);
        else if (ret == 0) {
            ret = cm_buf_appends(o, ",\"asDouble\":");
            if (ret == 0)
                ret = json_double(o, smp_value(sm));
            if (ret == 0)
                ret = cm_buf_appendc(o, '}');
        }
    }
    return ret;
}

static bool same_attrs(const struct parse *p, const struct smp *a,
                       const struct smp *b)
{
    return a->alen == b->alen && memcmp(p->attrs.data + a->aoff,
                                        p->attrs.data + b->aoff, a->alen) == 0;
}

/* One histogram data point: the samples of family @f with the attributes
 * of sample @lead. */
static int emit_hpoint(struct cm_buf *o, const struct parse *p, int f,
                       const struct smp *lead, uint64_t t0, uint64_t t1)
{
    double prev = 0, inf = -1, sum = 0, count = -1;
    struct cm_buf bounds, counts;
    int ret;

    cm_buf_init(&bounds, CM_BUF_NOLIMIT);
    cm_buf_init(&counts, CM_BUF_NOLIMIT);
    ret = cm_buf_reserve(&bounds, 0);
    if (ret == 0)
        ret = cm_buf_reserve(&counts, 0);
    for (size_t i = 0; i < p->nsmps && ret == 0; i++) {
        const struct smp *sm = &p->smps[i];
        double v;

        if (sm->fam != f || !same_attrs(p, sm, lead))
            continue;
        v = smp_value(sm);
        if (sm->kind == K_SUM) {
            sum = v;
        } else if (sm->kind == K_COUNT) {
            count = v;
        } else if (sm->kind == K_BUCKET && sm->has_le && isinf(sm->le)) {
            inf = v;
        } else if (sm->kind == K_BUCKET && sm->has_le) {
            ret = cm_buf_appendf(&counts, "%s\"%llu\"", counts.len ? "," : "",
                                 (unsigned long long)(v > prev ? v - prev : 0));
            if (ret == 0)
                ret = cm_buf_appendf(&bounds, "%s%.17g", bounds.len ? "," : "",
                                     sm->le);
            prev = v;
        }
    }
    if (count < 0)
        count = inf >= 0 ? inf : prev;
    if (inf < 0)
        inf = count;
    if (ret == 0)
        ret = cm_buf_appendf(&counts, "%s\"%llu\"", counts.len ? "," : "",
                             (unsigned long long)(inf > prev ? inf - prev : 0));
    if (ret == 0)
        ret = point_head(o, p, lead, t0, t1);
    if (ret == 0)
        ret = cm_buf_appendf(
            o, ",\"count\":\"%llu\",\"sum\":", (unsigned long long)count);
    if (ret == 0)
        ret = json_double(o, sum);
    if (ret == 0)
        ret =
            cm_buf_appendf(o, ",\"bucketCounts\":[%s],\"explicitBounds\":[%s]}",
                           counts.data, bounds.data);
    cm_buf_fini(&bounds);
    cm_buf_fini(&counts);
    return ret;
}

/* Histogram data points of family @f, one per distinct attribute set. */
static int emit_hist(struct cm_buf *o, const struct parse *p, int f,
                     uint64_t t0, uint64_t t1)
{
    bool first = true;
    int ret = 0;

    for (size_t i = 0; i < p->nsmps && ret == 0; i++) {
        const struct smp *sm = &p->smps[i];
        bool seen = false;

        if (sm->fam != f)
            continue;
        for (size_t j = 0; j < i && !seen; j++)
            seen = p->smps[j].fam == f && same_attrs(p, &p->smps[j], sm);
        if (seen)
            continue;
        if (!first)
            ret = cm_buf_appendc(o, ',');
        first = false;
        if (ret == 0)
            ret = emit_hpoint(o, p, f, sm, t0, t1);
    }
    return ret;
}

/* The OTLP unit of a metric, from the Prometheus naming convention. */
static const char *unit_of(const struct fam *f)
{
    size_t b;

    if (has_suffix(f->name, f->nlen, "_seconds", &b) ||
        has_suffix(f->name, f->nlen, "_seconds_total", &b))
        return "s";
    if (has_suffix(f->name, f->nlen, "_bytes", &b) ||
        has_suffix(f->name, f->nlen, "_bytes_total", &b))
        return "By";
    return "";
}

/* One OTLP metric for family @f. */
static int emit_family(struct cm_buf *o, const struct parse *p, int f,
                       uint64_t t0, uint64_t t1)
{
    const struct fam *fm = &p->fams[f];
    int ret = cm_buf_appends(o, "{\"name\":");

    if (ret == 0)
        ret = json_str(o, fm->name, fm->nlen);
    if (ret == 0)
        ret = cm_buf_appends(o, ",\"description\":");
    if (ret == 0)
        ret = json_str(o, fm->help ? fm->help : "", fm->help ? fm->hlen : 0);
    if (ret == 0)
        ret = cm_buf_appendf(o, ",\"unit\":\"%s\",", unit_of(fm));
    if (ret < 0)
        return ret;
    switch (fm->type) {
    case F_COUNTER:
        ret = cm_buf_appends(o, "\"sum\":{\"aggregationTemporality\":2,"
                                "\"isMonotonic\":true,\"dataPoints\":[");
        if (ret == 0)
            ret = emit_numbers(o, p, f, t0, t1);
        break;
    case F_HISTOGRAM:
        ret = cm_buf_appends(o, "\"histogram\":{\"aggregationTemporality\":2,"
                                "\"dataPoints\":[");
        if (ret == 0)
            ret = emit_hist(o, p, f, t0, t1);
        break;
    default:
        ret = cm_buf_appends(o, "\"gauge\":{\"dataPoints\":[");
        if (ret == 0)
            ret = emit_numbers(o, p, f, t0, t1);
        break;
    }
    return ret ? ret : cm_buf_appends(o, "]}}");
}

/* Appends {"key":k,"value":{"stringValue":v}} (skipped when v is NULL). */
static int emit_attr(struct cm_buf *o, const char *k, const char *v,
                     bool *first)
{
    int ret;

    if (v == NULL)
        return 0;
    ret = cm_buf_appendf(o, "%s{\"key\":\"%s\",\"value\":{\"stringValue\":",
                         *first ? "" : ",", k);
    *first = false;
    if (ret == 0)
        ret = json_str(o, v, strlen(v));
    return ret ? ret : cm_buf_appends(o, "}}");
}

/* Parses @text into @p. */
static int parse_text(struct parse *p, const char *text, size_t len)
{
    const char *s = text, *end = text + len;
    int ret = 0;

    while (s < end && ret == 0) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        const char *b = s;

        while (b < le && (*b == ' ' || *b == '\t'))
            b++;
        if (le > b && le[-1] == '\r')
            le--;
        if (b == le)
            ret = 0;
        else if (*b == '#')
            ret = parse_meta(p, b, le);
        else
            ret = parse_sample(p, b, le);
        s = nl ? nl + 1 : end;
    }
    return ret ? ret : assign(p);
}

/* See header. */
int cm_otlp_encode(const char *text, size_t len,
                   const struct cm_otlp_resource *res, uint64_t start_ns,
                   uint64_t now_ns, struct cm_buf *out)
{
    struct parse p = {0};
    bool first = true;
    int ret;

    cm_buf_init(&p.attrs, CM_BUF_NOLIMIT);
    ret = cm_buf_reserve(&p.attrs, 0); /* data never NULL below */
    if (ret == 0)
        ret = parse_text(&p, text, len);
    if (ret == 0)
        ret = cm_buf_appends(out, "{\"resourceMetrics\":[{\"resource\":{"
                                  "\"attributes\":[");
    if (ret == 0)
        ret = emit_attr(out, "service.name", res->service_name, &first);
    if (ret == 0)
        ret = emit_attr(out, "service.instance.id", res->service_instance_id,
                        &first);
    if (ret == 0)
        ret = emit_attr(out, "service.version", res->service_version, &first);
    if (ret == 0)
        ret = cm_buf_appends(out, "]},\"scopeMetrics\":[{\"scope\":{\"name\":");
    if (ret == 0)
        ret = json_str(out, res->service_name ? res->service_name : "",
                       res->service_name ? strlen(res->service_name) : 0);
    if (ret == 0)
        ret = cm_buf_appends(out, "},\"metrics\":[");
    first = true;
    for (size_t f = 0; f < p.nfams && ret == 0; f++) {
        bool used = false;

        for (size_t i = 0; i < p.nsmps && !used; i++)
            used = p.smps[i].fam == (int)f;
        if (!used)
            continue;
        if (!first)
            ret = cm_buf_appendc(out, ',');
        first = false;
        if (ret == 0)
            ret = emit_family(out, &p, (int)f, start_ns, now_ns);
    }
    if (ret == 0)
        ret = cm_buf_appends(out, "]}]}]}");
    cm_buf_fini(&p.attrs);
    free(p.fams);
    free(p.smps);
    return ret;
}

/* ---- the pusher ---- */

struct cm_otlp {
    char *url; /* owned; the full signal URL */
    double interval_s;
    char *name, *instance, *version; /* owned */
    cm_otlp_render_fn *render;
    void *render_arg;
    uint64_t start_ns;
    pthread_t tid;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    bool stop;           /* protected by lock */
    atomic_bool abort;   /* read by the transfer's progress callback */
};

/* See header. */
uint64_t cm_otlp_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* See header. */
int cm_otlp_check_endpoint(const char *url)
{
    const char *h;

    if (url == NULL)
        return -EINVAL;
    if (strncmp(url, "http://", 7) == 0)
        h = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        h = url + 8;
    else
        return -EINVAL;
    return *h && *h != '/' ? 0 : -EINVAL;
}

/* The signal URL for @endpoint (malloc'd), or NULL on ENOMEM. */
static char *signal_url(const char *endpoint)
{
    const char *h = strstr(endpoint, "://") + 3;
    const char *path = strchr(h, '/');
    struct cm_buf b;

    cm_buf_init(&b, CM_BUF_NOLIMIT);
    if (path == NULL || strcmp(path, "/") == 0) {
        size_t n = path ? (size_t)(path - endpoint) : strlen(endpoint);

        if (cm_buf_append(&b, endpoint, n) < 0 ||
            cm_buf_appends(&b, "/v1/metrics") < 0)
            return NULL;
    } else if (cm_buf_appends(&b, endpoint) < 0) {
        return NULL;
    }
    return cm_buf_steal(&b);
}

static size_t discard(char *p, size_t sz, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return sz * n;
}

/* Aborts a transfer once cm_otlp_stop asked (curl calls this often). */
static int progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c,
                    curl_off_t d)
{
    struct cm_otlp *p = arg;

    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&p->abort) ? 1 : 0;
}

/* One export: render, encode, POST. 0, or -errno with @why filled. */
static int push_once(struct cm_otlp *p, CURL *h, struct curl_slist *hdrs,
                     char *why, size_t wcap)
{
    struct cm_buf text, json;
    long status = 0;
    CURLcode cc;
    int ret;

    cm_buf_init(&text, TEXT_LIMIT);
    cm_buf_init(&json, 4 * (size_t)TEXT_LIMIT);
    ret = p->render(p->render_arg, &text);
    if (ret == 0)
        ret = cm_otlp_encode(
            text.data ? text.data : "", text.len,
            &(struct cm_otlp_resource){p->name, p->instance, p->version},
            p->start_ns, cm_otlp_now_ns(), &json);
    cm_buf_fini(&text);
    if (ret < 0) {
        snprintf(why, wcap, "cannot encode the metrics: %s", strerror(-ret));
        cm_buf_fini(&json);
        return ret;
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json.data);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)json.len);
    cc = curl_easy_perform(h);
    if (cc == CURLE_GOT_NOTHING || cc == CURLE_RECV_ERROR ||
        cc == CURLE_SEND_ERROR) {
        /* the collector closed the kept-alive connection under us: once
         * more on a new one */
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
        cc = curl_easy_perform(h);
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 0L);
    }
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    cm_buf_fini(&json);
    if (cc != CURLE_OK) {
        snprintf(why, wcap, "%s", curl_easy_strerror(cc));
        return -EIO;
    }
    if (status < 200 || status > 299) {
        snprintf(why, wcap, "collector answered HTTP %ld", status);
        return -EIO;
    }
    return 0;
}

/* Waits until @deadline (monotonic) or stop; true when stopping. */
static bool nap_until(struct cm_otlp *p, const struct timespec *deadline)
{
    bool stop;

    pthread_mutex_lock(&p->lock);
    while (!p->stop &&
           pthread_cond_timedwait(&p->cond, &p->lock, deadline) != ETIMEDOUT)
        ;
    stop = p->stop;
    pthread_mutex_unlock(&p->lock);
    return stop;
}

static void *pusher_main(void *arg)
{
    struct cm_otlp *p = arg;
    struct curl_slist *hdrs =
        curl_slist_append(NULL, "Content-Type: application/json");
    CURL *h = curl_easy_init();
    long tmo = (long)(p->interval_s * 1000);
    unsigned long fails = 0;
    time_t last_log = 0;
    struct timespec next;

    if (h == NULL || hdrs == NULL) {
        cm_log(CM_LOG_ERROR, ENOMEM, "otlp: cannot set up the pusher");
        goto out;
    }
    tmo = tmo < 1000 ? 1000 : tmo > 10000 ? 10000 : tmo;
    curl_easy_setopt(h, CURLOPT_URL, p->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, tmo);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, p);
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        char why[256] = "";
        time_t now;
        uint64_t ns = (uint64_t)next.tv_nsec + (uint64_t)(p->interval_s * 1e9);

        next.tv_sec += (time_t)(ns / 1000000000u);
        next.tv_nsec = (long)(ns % 1000000000u);
        if (nap_until(p, &next))
            break;
        if (push_once(p, h, hdrs, why, sizeof(why)) == 0) {
            if (fails)
                cm_log(CM_LOG_INFO, 0,
                       "otlp: pushing to %s again (%lu failed pushes)", p->url,
                       fails);
            fails = 0;
            last_log = 0;
        } else {
            fails++;
            now = time(NULL);
            if (last_log == 0 || now - last_log >= LOG_EVERY_S) {
                cm_log(CM_LOG_WARN, 0,
                       "otlp: push to %s failed: %s (%lu failed in a row; "
                       "next report in %d s)",
                       p->url, why, fails, LOG_EVERY_S);
                last_log = now;
            }
        }
        /* a slow export must not make pushes pile up: skip missed ticks */
        {
            struct timespec t;

            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec > next.tv_sec + 1)
                next = t;
        }
    }
out:
    curl_slist_free_all(hdrs);
    if (h)
        curl_easy_cleanup(h);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void pusher_free(struct cm_otlp *p)
{
    free(p->url);
    free(p->name);
    free(p->instance);
    free(p->version);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* See header. */
int cm_otlp_start(const struct cm_otlp_conf *c, struct cm_otlp **out)
{
    pthread_condattr_t ca;
    struct cm_otlp *p;
    int ret;

    *out = NULL;
    if (cm_otlp_check_endpoint(c->endpoint) < 0 || !(c->interval_s > 0) ||
        c->interval_s > 86400 || c->render == NULL)
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    p->url = signal_url(c->endpoint);
    p->name = dup_or_null(c->res.service_name);
    p->instance = dup_or_null(c->res.service_instance_id);
    p->version = dup_or_null(c->res.service_version);
    p->interval_s = c->interval_s;
    p->render = c->render;
    p->render_arg = c->render_arg;
    p->start_ns = cm_otlp_now_ns();
    if (p->url == NULL || (c->res.service_name && p->name == NULL) ||
        (c->res.service_instance_id && p->instance == NULL) ||
        (c->res.service_version && p->version == NULL)) {
        pusher_free(p);
        return -ENOMEM;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ret = pthread_create(&p->tid, NULL, pusher_main, p);
    if (ret != 0) {
        pusher_free(p);
        return -ret;
    }
    cm_log(CM_LOG_INFO, 0, "otlp: pushing metrics to %s every %g s (JSON)",
           p->url, p->interval_s);
    *out = p;
    return 0;
}

/* See header. */
void cm_otlp_stop(struct cm_otlp *p)
{
    if (p == NULL)
        return;
    atomic_store(&p->abort, true);
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->tid, NULL);
    pusher_free(p);
}
