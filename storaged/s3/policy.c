/* storaged/s3/policy.c - the policy compiler and evaluator.
 *
 * DESIGN: a policy is parsed once (jansson, which reports the line and
 * column of a syntax error) into statements whose actions are a bit set
 * over enum stor_act, whose resources are patterns classified as literal,
 * prefix (a trailing star: one memcmp) or general glob, and whose conditions
 * are small arrays. Evaluation walks the statements with no allocation:
 * an explicit Deny returns at once, an Allow is remembered, nothing
 * matching is the default deny. Unknown condition operators or keys are
 * refused at compile time rather than ignored, since ignoring one would
 * widen an Allow. Request-header keys (s3:x-amz-acl, ...),
 * s3:RequestObjectTag/NAME and s3:ExistingObjectTag/NAME are read through
 * the context's value callback, only when a statement that names them is
 * reached. */
#include "storaged/s3/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/compiler.h"

#define POLICY_MAX_BYTES (20 * 1024) /* AWS's bucket policy limit */
#define ARN_S3           "arn:aws:s3:::"

static const char *const act_names[STOR_ACT_COUNT] = {
    [STOR_ACT_GET_OBJECT] = "s3:GetObject",
    [STOR_ACT_PUT_OBJECT] = "s3:PutObject",
    [STOR_ACT_DELETE_OBJECT] = "s3:DeleteObject",
    [STOR_ACT_LIST_BUCKET] = "s3:ListBucket",
    [STOR_ACT_LIST_ALL_MY_BUCKETS] = "s3:ListAllMyBuckets",
    [STOR_ACT_CREATE_BUCKET] = "s3:CreateBucket",
    [STOR_ACT_DELETE_BUCKET] = "s3:DeleteBucket",
    [STOR_ACT_GET_BUCKET_LOCATION] = "s3:GetBucketLocation",
    [STOR_ACT_LIST_BUCKET_MPU] = "s3:ListBucketMultipartUploads",
    [STOR_ACT_LIST_MPU_PARTS] = "s3:ListMultipartUploadParts",
    [STOR_ACT_ABORT_MPU] = "s3:AbortMultipartUpload",
    [STOR_ACT_GET_BUCKET_POLICY] = "s3:GetBucketPolicy",
    [STOR_ACT_PUT_BUCKET_POLICY] = "s3:PutBucketPolicy",
    [STOR_ACT_DELETE_BUCKET_POLICY] = "s3:DeleteBucketPolicy",
    [STOR_ACT_GET_BUCKET_ACL] = "s3:GetBucketAcl",
    [STOR_ACT_PUT_BUCKET_ACL] = "s3:PutBucketAcl",
    [STOR_ACT_GET_OBJECT_ACL] = "s3:GetObjectAcl",
    [STOR_ACT_PUT_OBJECT_ACL] = "s3:PutObjectAcl",
    [STOR_ACT_GET_OBJECT_TAGGING] = "s3:GetObjectTagging",
    [STOR_ACT_PUT_OBJECT_TAGGING] = "s3:PutObjectTagging",
    [STOR_ACT_DELETE_OBJECT_TAGGING] = "s3:DeleteObjectTagging",
    [STOR_ACT_GET_BUCKET_CONFIG] = "s3:GetBucketVersioning",
    [STOR_ACT_LIST_BUCKET_VERSIONS] = "s3:ListBucketVersions",
    [STOR_ACT_PUT_BUCKET_VERSIONING] = "s3:PutBucketVersioning",
    [STOR_ACT_GET_OBJECT_VERSION] = "s3:GetObjectVersion",
    [STOR_ACT_DELETE_OBJECT_VERSION] = "s3:DeleteObjectVersion",
    [STOR_ACT_GET_LIFECYCLE] = "s3:GetLifecycleConfiguration",
    [STOR_ACT_PUT_LIFECYCLE] = "s3:PutLifecycleConfiguration",
    [STOR_ACT_GET_BUCKET_PAB] = "s3:GetBucketPublicAccessBlock",
    [STOR_ACT_PUT_BUCKET_PAB] = "s3:PutBucketPublicAccessBlock",
    [STOR_ACT_GET_BUCKET_POLICY_STATUS] = "s3:GetBucketPolicyStatus",
    [STOR_ACT_GET_BUCKET_OWNERSHIP] = "s3:GetBucketOwnershipControls",
    [STOR_ACT_PUT_BUCKET_OWNERSHIP] = "s3:PutBucketOwnershipControls",
    [STOR_ACT_ADMIN_CREATE_USER] = "admin:CreateUser",
    [STOR_ACT_ADMIN_DELETE_USER] = "admin:DeleteUser",
    [STOR_ACT_ADMIN_LIST_USERS] = "admin:ListUsers",
    [STOR_ACT_ADMIN_ENABLE_USER] = "admin:EnableUser",
    [STOR_ACT_ADMIN_GET_POLICY] = "admin:GetPolicy",
    [STOR_ACT_ADMIN_PUT_POLICY] = "admin:PutPolicy",
};

_Static_assert(STOR_ACT_COUNT <= 64, "actions are a 64-bit set");

#define ADMIN_ACTS (~0ULL << STOR_ACT_ADMIN_CREATE_USER)

/* See header. */
const char *stor_act_name(enum stor_act a)
{
    return (unsigned)a < STOR_ACT_COUNT ? act_names[a] : "unknown";
}

enum pat_kind { PAT_LIT, PAT_PREFIX, PAT_GLOB };

struct pat {
    char *s; /* owned */
    size_t len;
    enum pat_kind kind;
};

enum cond_op { C_SEQ, C_SLIKE, C_SNEQ, C_SNLIKE, C_IP, C_NOTIP, C_NULL };
/* K_HDR: a request header named by the key (s3:x-amz-acl ...); K_REQTAG:
 * a tag of the request's x-amz-tagging (s3:RequestObjectTag/NAME);
 * K_EXTAG: a tag of the stored object (s3:ExistingObjectTag/NAME). */
enum cond_key { K_PREFIX, K_DELIM, K_SRCIP, K_HDR, K_REQTAG, K_EXTAG };

/* The request-header condition keys, as AWS names them: the key is
 * "s3:" and the header's name. */
static const char *const hdr_keys[] = {
    "x-amz-acl",
    "x-amz-copy-source",
    "x-amz-metadata-directive",
    "x-amz-server-side-encryption",
    "x-amz-server-side-encryption-customer-algorithm",
    "x-amz-server-side-encryption-aws-kms-key-id",
    "x-amz-storage-class",
    "x-amz-tagging-directive",
    "x-amz-content-sha256",
    "x-amz-grant-read",
    "x-amz-grant-write",
    "x-amz-grant-read-acp",
    "x-amz-grant-write-acp",
    "x-amz-grant-full-control",
};
#define REQTAG_KEY "s3:RequestObjectTag/"
#define EXTAG_KEY  "s3:ExistingObjectTag/"

struct cidr {
    uint8_t addr[16]; /* IPv4 as v4-mapped IPv6 */
    int bits;         /* of the 128 */
};

struct cond {
    enum cond_op op;
    enum cond_key key;
    char *name; /* owned; K_HDR: the header, K_REQTAG/K_EXTAG: the tag key */
    bool null_true;    /* C_NULL: true when the key must be absent */
    struct pat *vals;  /* owned; string operators */
    struct cidr *nets; /* owned; IP operators */
    size_t n;
};

struct stmt {
    bool deny;
    uint64_t acts;
    struct pat *res; /* owned */
    size_t nres;
    bool any_principal;
    char **princ; /* owned user names */
    size_t nprinc;
    struct cond *conds; /* owned */
    size_t nconds;
};

struct stor_policy {
    struct stmt *st; /* owned */
    size_t n;
};

/* ---- matching ---- */

/* Glob match of @s (@n bytes) against @p (@pn bytes): '*' any run, '?'
 * one byte. Iterative, with one backtrack point (linear for one '*'). */
static bool glob(const char *p, size_t pn, const char *s, size_t n)
{
    size_t pi = 0, si = 0, star = (size_t)-1, mark = 0;

    while (si < n) {
        if (pi < pn && (p[pi] == '?' || p[pi] == s[si])) {
            pi++;
            si++;
        } else if (pi < pn && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (star != (size_t)-1) {
            pi = star + 1;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

static bool pat_match(const struct pat *p, const char *s, size_t n)
{
    switch (p->kind) {
    case PAT_LIT:
        return n == p->len && memcmp(p->s, s, n) == 0;
    case PAT_PREFIX:
        return n >= p->len - 1 && memcmp(p->s, s, p->len - 1) == 0;
    default:
        return glob(p->s, p->len, s, n);
    }
}

/* true when some string starting with @s (@n bytes) matches @p. */
static bool pat_may_extend(const struct pat *p, const char *s, size_t n)
{
    size_t i;

    for (i = 0;; i++) {
        if (i == n)
            return true; /* the rest of @p can be matched by what follows */
        if (i == p->len)
            return false;
        if (p->s[i] == '*')
            return true;
        if (p->s[i] != '?' && p->s[i] != s[i])
            return false;
    }
}

/* ---- compiling ---- */

struct cc {
    char *err;
    size_t errlen;
};

CM_PRINTF(2, 3)
static int fail(struct cc *c, const char *fmt, ...)
{
    va_list ap;

    if (c->errlen) {
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int pat_init(struct pat *p, const char *s, size_t n)
{
    const char *w1 = memchr(s, '*', n), *q = memchr(s, '?', n);

    p->s = malloc(n + 1);
    if (p->s == NULL)
        return -ENOMEM;
    memcpy(p->s, s, n);
    p->s[n] = 0;
    p->len = n;
    if (w1 == NULL && q == NULL)
        p->kind = PAT_LIT;
    else if (q == NULL && w1 == s + n - 1)
        p->kind = PAT_PREFIX;
    else
        p->kind = PAT_GLOB;
    return 0;
}

/* Calls @fn for each string of @v (a string or an array of strings). */
static int each_string(struct cc *c, json_t *v, const char *what,
                       int (*fn)(struct cc *, const char *, size_t, void *),
                       void *arg)
{
    size_t i;
    json_t *e;
    int ret;

    if (json_is_string(v))
        return fn(c, json_string_value(v), json_string_length(v), arg);
    if (!json_is_array(v) || json_array_size(v) == 0)
        return fail(c, "%s must be a string or a non-empty array of strings",
                    what);
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e))
            return fail(c,
                        "%s must be a string or a non-empty array of "
                        "strings",
                        what);
        ret = fn(c, json_string_value(e), json_string_length(e), arg);
        if (ret < 0)
            return ret;
    }
    return 0;
}

static int add_action(struct cc *c, const char *s, size_t n, void *arg)
{
    struct stmt *st = arg;
    const char *colon = memchr(s, ':', n);
    size_t i;

    if (n == 1 && s[0] == '*') {
        st->acts = ~0ULL;
        return 0;
    }
    if (colon == NULL || colon == s || colon == s + n - 1)
        return fail(c, "Action \"%.*s\" is not of the form service:action",
                    (int)CM_MIN(n, 100), s);
    for (i = 0; i < STOR_ACT_COUNT; i++) {
        const char *an = act_names[i];
        size_t an_len = strlen(an), j;
        char lo_p[128], lo_a[64];

        /* action names are case-insensitive: match lowercased copies */
        if (n >= sizeof(lo_p))
            return fail(c, "Action \"%.40s...\" is too long", s);
        for (j = 0; j < n; j++)
            lo_p[j] = (char)(s[j] >= 'A' && s[j] <= 'Z' ? s[j] + 32 : s[j]);
        for (j = 0; j < an_len; j++)
            lo_a[j] = (char)(an[j] >= 'A' && an[j] <= 'Z' ? an[j] + 32 : an[j]);
        if (glob(lo_p, n, lo_a, an_len))
            st->acts |= 1ULL << i;
    }
    /* "s3:GetBucketVersioning" stands for every read-only bucket
     * configuration answer; "s3:GetObjectVersion" and other AWS actions
     * storaged has no operation for grant nothing */
    return 0;
}

static int add_resource(struct cc *c, const char *s, size_t n, void *arg)
{
    struct stmt *st = arg;
    size_t off = strlen(ARN_S3);
    struct pat *np;
    int ret;

    if (n == 1 && s[0] == '*') {
        off = 0; /* "*": every resource */
    } else if (n < off || memcmp(s, ARN_S3, off) != 0) {
        return fail(c, "Resource \"%.*s\" is not an arn:aws:s3::: ARN",
                    (int)CM_MIN(n, 100), s);
    } else if (n == off) {
        return fail(c, "Resource \"%.*s\" names no bucket", (int)CM_MIN(n, 100),
                    s);
    }
    np = realloc(st->res, (st->nres + 1) * sizeof(*np));
    if (np == NULL)
        return -ENOMEM;
    st->res = np;
    ret = pat_init(&st->res[st->nres], s + off, n - off);
    if (ret < 0)
        return ret;
    st->nres++;
    return 0;
}

static int add_principal(struct cc *c, const char *s, size_t n, void *arg)
{
    struct stmt *st = arg;
    const char *slash;
    char **np;

    if (n == 1 && s[0] == '*') {
        st->any_principal = true;
        return 0;
    }
    /* arn:aws:iam::ACCOUNT:root (every key of that account, kept as
     * ":ACCOUNT", which no user name can be), arn:aws:iam::ACCOUNT:user/NAME,
     * or the bare user name */
    if (n > 18 && memcmp(s, "arn:aws:iam::", 13) == 0 &&
        memcmp(s + n - 5, ":root", 5) == 0) {
        size_t an = n - 18;

        if (an == 0 || memchr(s + 13, ':', an) || memchr(s + 13, 0, an))
            return fail(c, "Principal \"%.*s\" names no account",
                        (int)CM_MIN(n, 100), s);
        np = realloc(st->princ, (st->nprinc + 1) * sizeof(*np));
        if (np == NULL)
            return -ENOMEM;
        st->princ = np;
        st->princ[st->nprinc] = malloc(an + 2);
        if (st->princ[st->nprinc] == NULL)
            return -ENOMEM;
        st->princ[st->nprinc][0] = ':';
        memcpy(st->princ[st->nprinc] + 1, s + 13, an);
        st->princ[st->nprinc][an + 1] = 0;
        st->nprinc++;
        return 0;
    }
    if (n > 12 && memcmp(s, "arn:aws:iam:", 12) == 0) {
        slash = memchr(s, '/', n);
        if (slash == NULL || (size_t)(slash - s) < 5 ||
            memcmp(slash - 5, ":user", 5) != 0)
            return fail(c, "Principal \"%.*s\" is not a user ARN",
                        (int)CM_MIN(n, 100), s);
        n -= (size_t)(slash + 1 - s);
        s = slash + 1;
    }
    if (n == 0 || memchr(s, 0, n))
        return fail(c, "Principal has an empty or invalid user name");
    np = realloc(st->princ, (st->nprinc + 1) * sizeof(*np));
    if (np == NULL)
        return -ENOMEM;
    st->princ = np;
    st->princ[st->nprinc] = strndup(s, n);
    if (st->princ[st->nprinc] == NULL)
        return -ENOMEM;
    st->nprinc++;
    return 0;
}

static int parse_principal(struct cc *c, struct stmt *st, json_t *p)
{
    const char *k;
    json_t *v;

    if (json_is_string(p)) {
        if (strcmp(json_string_value(p), "*") != 0)
            return fail(c, "Principal must be \"*\" or {\"AWS\": ...}");
        st->any_principal = true;
        return 0;
    }
    if (!json_is_object(p) || json_object_size(p) == 0)
        return fail(c, "Principal must be \"*\" or {\"AWS\": ...}");
    json_object_foreach(p, k, v)
    {
        if (strcmp(k, "AWS") != 0)
            return fail(c,
                        "Principal type \"%.40s\" is not supported (only "
                        "AWS)",
                        k);
        int ret = each_string(c, v, "Principal.AWS", add_principal, st);

        if (ret < 0)
            return ret;
    }
    return 0;
}

static int add_cond_val(struct cc *c, const char *s, size_t n, void *arg)
{
    struct cond *cd = arg;
    int ret;

    if (cd->op == C_IP || cd->op == C_NOTIP) {
        struct cidr *nn, *net;
        char buf[64];
        const char *slash = memchr(s, '/', n);
        size_t alen = slash ? (size_t)(slash - s) : n;
        struct in_addr a4;
        long bits;
        char *end;

        if (alen >= sizeof(buf) || n >= sizeof(buf))
            return fail(c, "aws:SourceIp value \"%.40s\" is not an address", s);
        memcpy(buf, s, alen);
        buf[alen] = 0;
        nn = realloc(cd->nets, (cd->n + 1) * sizeof(*nn));
        if (nn == NULL)
            return -ENOMEM;
        cd->nets = nn;
        net = &cd->nets[cd->n];
        memset(net, 0, sizeof(*net));
        if (inet_pton(AF_INET, buf, &a4) == 1) {
            net->addr[10] = net->addr[11] = 0xff;
            memcpy(net->addr + 12, &a4, 4);
            net->bits = 128;
            bits = 32;
        } else if (inet_pton(AF_INET6, buf, net->addr) == 1) {
            net->bits = 128;
            bits = 128;
        } else {
            return fail(c, "aws:SourceIp value \"%.*s\" is not an address",
                        (int)CM_MIN(n, 60), s);
        }
        if (slash) {
            char b2[8];
            size_t bl = n - alen - 1;
            long max = bits;

            if (bl == 0 || bl >= sizeof(b2))
                return fail(c, "aws:SourceIp \"%.*s\": bad prefix length",
                            (int)CM_MIN(n, 60), s);
            memcpy(b2, slash + 1, bl);
            b2[bl] = 0;
            bits = strtol(b2, &end, 10);
            if (*end || bits < 0 || bits > max)
                return fail(c, "aws:SourceIp \"%.*s\": bad prefix length",
                            (int)CM_MIN(n, 60), s);
            net->bits = (int)(bits + (max == 32 ? 96 : 0));
        }
        cd->n++;
        return 0;
    }
    {
        struct pat *np = realloc(cd->vals, (cd->n + 1) * sizeof(*np));

        if (np == NULL)
            return -ENOMEM;
        cd->vals = np;
        if (cd->op == C_SEQ || cd->op == C_SNEQ) {
            np[cd->n].s = strndup(s, n);
            if (np[cd->n].s == NULL)
                return -ENOMEM;
            np[cd->n].len = n;
            np[cd->n].kind = PAT_LIT;
        } else {
            ret = pat_init(&np[cd->n], s, n);
            if (ret < 0)
                return ret;
        }
        cd->n++;
    }
    return 0;
}

static int parse_conditions(struct cc *c, struct stmt *st, json_t *cond)
{
    static const struct {
        const char *name;
        enum cond_op op;
    } ops[] = {
        {"StringEquals", C_SEQ},
        {"StringLike", C_SLIKE},
        {"StringNotEquals", C_SNEQ},
        {"StringNotLike", C_SNLIKE},
        {"IpAddress", C_IP},
        {"NotIpAddress", C_NOTIP},
        {"Null", C_NULL},
    };
    const char *opname, *key;
    json_t *body, *vals;
    size_t i;
    int ret;

    if (!json_is_object(cond))
        return fail(c, "Condition must be an object");
    json_object_foreach(cond, opname, body)
    {
        enum cond_op op = C_SEQ;
        bool found = false;

        for (i = 0; i < CM_ARRAY_SIZE(ops); i++)
            if (strcmp(opname, ops[i].name) == 0) {
                op = ops[i].op;
                found = true;
            }
        if (!found)
            return fail(c, "Condition operator \"%.40s\" is not supported",
                        opname);
        if (!json_is_object(body) || json_object_size(body) == 0)
            return fail(c, "Condition %s must map keys to values", opname);
        json_object_foreach(body, key, vals)
        {
            struct cond *nc, *cd;
            const char *name = NULL;
            enum cond_key k;

            if (strcasecmp(key, "s3:prefix") == 0)
                k = K_PREFIX;
            else if (strcasecmp(key, "s3:delimiter") == 0)
                k = K_DELIM;
            else if (strcasecmp(key, "aws:SourceIp") == 0)
                k = K_SRCIP;
            else if (strncmp(key, REQTAG_KEY, strlen(REQTAG_KEY)) == 0 &&
                     key[strlen(REQTAG_KEY)] != 0) {
                k = K_REQTAG; /* tag keys are case-sensitive */
                name = key + strlen(REQTAG_KEY);
            } else if (strncmp(key, EXTAG_KEY, strlen(EXTAG_KEY)) == 0 &&
                       key[strlen(EXTAG_KEY)] != 0) {
                k = K_EXTAG;
                name = key + strlen(EXTAG_KEY);
            } else {
                k = K_HDR;
                for (i = 0; i < CM_ARRAY_SIZE(hdr_keys) && !name; i++)
                    if (strncasecmp(key, "s3:", 3) == 0 &&
                        strcasecmp(key + 3, hdr_keys[i]) == 0)
                        name = hdr_keys[i];
                if (name == NULL)
                    return fail(c, "Condition key \"%.60s\" is not supported",
                                key);
            }
            if (op == C_NULL && k == K_SRCIP)
                return fail(c, "Null does not apply to aws:SourceIp");
            if ((op == C_IP || op == C_NOTIP) && k != K_SRCIP)
                return fail(c, "%s applies only to aws:SourceIp", opname);
            if (k == K_SRCIP && op != C_IP && op != C_NOTIP)
                return fail(c, "aws:SourceIp takes IpAddress or "
                               "NotIpAddress");
            nc = realloc(st->conds, (st->nconds + 1) * sizeof(*nc));
            if (nc == NULL)
                return -ENOMEM;
            st->conds = nc;
            cd = &st->conds[st->nconds++];
            memset(cd, 0, sizeof(*cd));
            cd->op = op;
            cd->key = k;
            if (name && (cd->name = strdup(name)) == NULL)
                return -ENOMEM;
            if (op == C_NULL) {
                const char *b = json_string_value(vals);

                if (json_is_boolean(vals))
                    cd->null_true = json_is_true(vals);
                else if (b && strcmp(b, "true") == 0)
                    cd->null_true = true;
                else if (b == NULL || strcmp(b, "false") != 0)
                    return fail(c, "Null %s takes \"true\" or \"false\"", key);
                continue;
            }
            ret = each_string(c, vals, key, add_cond_val, cd);
            if (ret < 0)
                return ret;
        }
    }
    return 0;
}

static int parse_stmt(struct cc *c, struct stmt *st, json_t *s,
                      enum stor_pol_kind kind)
{
    const char *k, *eff;
    json_t *v;
    int ret;

    if (!json_is_object(s))
        return fail(c, "each Statement must be an object");
    json_object_foreach(s, k, v)
    {
        if (strcmp(k, "Sid") == 0 || strcmp(k, "Effect") == 0 ||
            strcmp(k, "Action") == 0 || strcmp(k, "Resource") == 0 ||
            strcmp(k, "Condition") == 0 ||
            (strcmp(k, "Principal") == 0 && kind == STOR_POL_BUCKET))
            continue;
        if (strcmp(k, "Principal") == 0)
            return fail(c, "Principal is not allowed in a user policy");
        return fail(c, "Statement field \"%.40s\" is not supported", k);
    }
    v = json_object_get(s, "Effect");
    eff = json_string_value(v);
    if (eff == NULL || (strcmp(eff, "Allow") != 0 && strcmp(eff, "Deny") != 0))
        return fail(c, "Effect must be \"Allow\" or \"Deny\"");
    st->deny = eff[0] == 'D';
    v = json_object_get(s, "Action");
    if (v == NULL)
        return fail(c, "Statement has no Action");
    ret = each_string(c, v, "Action", add_action, st);
    if (ret < 0)
        return ret;
    v = json_object_get(s, "Resource");
    if (v == NULL)
        return fail(c, "Statement has no Resource");
    ret = each_string(c, v, "Resource", add_resource, st);
    if (ret < 0)
        return ret;
    if (kind == STOR_POL_BUCKET) {
        v = json_object_get(s, "Principal");
        if (v == NULL)
            return fail(c, "a bucket policy Statement needs a Principal");
        ret = parse_principal(c, st, v);
        if (ret < 0)
            return ret;
    }
    v = json_object_get(s, "Condition");
    if (v)
        return parse_conditions(c, st, v);
    return 0;
}

static void stmt_fini(struct stmt *st)
{
    size_t i, j;

    for (i = 0; i < st->nres; i++)
        free(st->res[i].s);
    free(st->res);
    for (i = 0; i < st->nprinc; i++)
        free(st->princ[i]);
    free(st->princ);
    for (i = 0; i < st->nconds; i++) {
        for (j = 0; st->conds[i].vals && j < st->conds[i].n; j++)
            free(st->conds[i].vals[j].s);
        free(st->conds[i].vals);
        free(st->conds[i].nets);
        free(st->conds[i].name);
    }
    free(st->conds);
}

/* See header. */
void stor_policy_destroy(struct stor_policy *p)
{
    size_t i;

    if (p == NULL)
        return;
    for (i = 0; i < p->n; i++)
        stmt_fini(&p->st[i]);
    free(p->st);
    free(p);
}

/* See header. */
int stor_policy_compile(const char *text, size_t len, enum stor_pol_kind kind,
                        struct stor_policy **out, char *err, size_t errlen)
{
    struct cc c = {err, errlen};
    struct stor_policy *p;
    json_error_t je;
    json_t *doc, *v, *stmts;
    const char *k;
    size_t i;
    int ret = 0;

    *out = NULL;
    if (errlen)
        err[0] = 0;
    if (len > POLICY_MAX_BYTES)
        return fail(&c, "policy is larger than %d bytes", POLICY_MAX_BYTES);
    doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (doc == NULL)
        return fail(&c, "invalid JSON at line %d column %d: %s", je.line,
                    je.column, je.text);
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        ret = -ENOMEM;
        goto out_doc;
    }
    if (!json_is_object(doc)) {
        ret = fail(&c, "the policy must be a JSON object");
        goto out_free;
    }
    json_object_foreach(doc, k, v)
    {
        if (strcmp(k, "Version") != 0 && strcmp(k, "Statement") != 0 &&
            strcmp(k, "Id") != 0) {
            ret = fail(&c, "policy field \"%.40s\" is not supported", k);
            goto out_free;
        }
    }
    v = json_object_get(doc, "Version");
    if (v && (!json_is_string(v) ||
              (strcmp(json_string_value(v), "2012-10-17") != 0 &&
               strcmp(json_string_value(v), "2008-10-17") != 0))) {
        ret = fail(&c, "Version must be \"2012-10-17\" or \"2008-10-17\"");
        goto out_free;
    }
    stmts = json_object_get(doc, "Statement");
    if (json_is_object(stmts)) {
        json_t *a = json_array();

        if (a == NULL || json_array_append(a, stmts) < 0) {
            json_decref(a);
            ret = -ENOMEM;
            goto out_free;
        }
        json_object_set_new(doc, "Statement", a);
        stmts = a;
    }
    if (!json_is_array(stmts) || json_array_size(stmts) == 0) {
        ret = fail(&c, "Statement must be a non-empty array");
        goto out_free;
    }
    p->st = calloc(json_array_size(stmts), sizeof(*p->st));
    if (p->st == NULL) {
        ret = -ENOMEM;
        goto out_free;
    }
    json_array_foreach(stmts, i, v)
    {
        ret = parse_stmt(&c, &p->st[i], v, kind);
        p->n = i + 1;
        if (ret < 0) {
            if (ret == -EINVAL && errlen) {
                char tmp[256];

                snprintf(tmp, sizeof(tmp), "Statement %zu: %s", i + 1, err);
                snprintf(err, errlen, "%s", tmp);
            }
            goto out_free;
        }
    }
    json_decref(doc);
    *out = p;
    return 0;

out_free:
    stor_policy_destroy(p);
out_doc:
    json_decref(doc);
    return ret;
}

/* ---- evaluating ---- */

/* The client's address as v4-mapped IPv6; false when unknown. */
static bool ctx_addr(const struct stor_pol_ctx *c, uint8_t a[16])
{
    struct sockaddr_storage ss;

    if (c->peer == NULL || c->peer(c->peer_arg, &ss) < 0)
        return false;
    memset(a, 0, 16);
    if (ss.ss_family == AF_INET) {
        a[10] = a[11] = 0xff;
        memcpy(a + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        return true;
    }
    if (ss.ss_family == AF_INET6) {
        memcpy(a, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
        return true;
    }
    return false;
}

static bool in_net(const struct cidr *n, const uint8_t a[16])
{
    int full = n->bits / 8, rest = n->bits % 8;

    if (memcmp(n->addr, a, (size_t)full) != 0)
        return false;
    if (rest == 0)
        return true;
    return ((n->addr[full] ^ a[full]) & (0xff << (8 - rest))) == 0;
}

/* The value of a K_HDR / K_REQTAG / K_EXTAG key for @c: NULL when
 * absent; @buf (@cap bytes) may hold it. */
static const char *ctx_value(const struct cond *cd,
                             const struct stor_pol_ctx *c, char *buf,
                             size_t cap, size_t *n)
{
    if (c->value == NULL)
        return NULL;
    return c->value(c->value_arg,
                    cd->key == K_REQTAG  ? STOR_POL_V_REQTAG
                    : cd->key == K_EXTAG ? STOR_POL_V_EXTAG
                                         : STOR_POL_V_HDR,
                    cd->name, buf, cap, n);
}

static bool cond_true(const struct cond *cd, const struct stor_pol_ctx *c)
{
    char buf[STOR_POL_VALUE_MAX];
    const char *v;
    size_t i, vn = 0;
    bool any = false,
         neg = cd->op == C_SNEQ || cd->op == C_SNLIKE || cd->op == C_NOTIP;

    if (cd->key == K_HDR || cd->key == K_REQTAG || cd->key == K_EXTAG) {
        v = ctx_value(cd, c, buf, sizeof(buf), &vn);
        if (cd->op == C_NULL)
            return (v == NULL) == cd->null_true;
        if (v == NULL)
            return neg;
        for (i = 0; i < cd->n && !any; i++)
            any = pat_match(&cd->vals[i], v, vn);
        return neg ? !any : any;
    }
    if (cd->op == C_NULL) {
        v = cd->key == K_PREFIX ? c->prefix : c->delimiter;
        return (v == NULL) == cd->null_true;
    }
    if (cd->key == K_SRCIP) {
        uint8_t a[16];

        if (!ctx_addr(c, a))
            return neg;
        for (i = 0; i < cd->n && !any; i++)
            any = in_net(&cd->nets[i], a);
        return neg ? !any : any;
    }
    v = cd->key == K_PREFIX ? c->prefix : c->delimiter;
    if (v == NULL)
        return neg; /* the key is absent: only a negated operator holds */
    for (i = 0; i < cd->n && !any; i++)
        any = pat_match(&cd->vals[i], v, strlen(v));
    return neg ? !any : any;
}

/* Whether @st names the caller: "*", its user name, or (":ACCOUNT") its
 * account's name or canonical id (@acct, @acct_id; NULL: none). */
static bool principal_ok(const struct stmt *st, const char *user,
                         const char *acct, const char *acct_id)
{
    size_t i;

    if (st->any_principal)
        return true;
    for (i = 0; i < st->nprinc; i++) {
        const char *p = st->princ[i];

        if (p[0] == ':' ? (acct && strcmp(p + 1, acct) == 0) ||
                              (acct_id && strcmp(p + 1, acct_id) == 0)
                        : user && strcmp(p, user) == 0)
            return true;
    }
    return false;
}

/* See header. */
enum stor_pol_effect stor_policy_eval(const struct stor_policy *p,
                                      const struct stor_pol_ctx *c)
{
    char res[64 + 1 + 1024 + 1];
    size_t rlen, blen, i, j;
    uint64_t bit = 1ULL << c->act;
    bool allow = false, admin = (bit & ADMIN_ACTS) != 0, built = false;

    if (p == NULL)
        return STOR_POL_NONE;
    blen = strlen(c->bucket);
    rlen = 0;
    for (i = 0; i < p->n; i++) {
        const struct stmt *st = &p->st[i];
        bool hit = admin; /* admin actions are not about a resource */

        if (!(st->acts & bit) || (allow && !st->deny))
            continue;
        if (st->nprinc || st->any_principal) {
            if (!principal_ok(st, c->user, c->account, c->account_id))
                continue;
        }
        if (!built && !admin) {
            /* "bucket" or "bucket/key", built once and only when needed */
            if (blen + 1 + (c->key ? c->key_len : 0) >= sizeof(res))
                return STOR_POL_DENY;
            memcpy(res, c->bucket, blen);
            rlen = blen;
            if (c->key) {
                res[rlen++] = '/';
                memcpy(res + rlen, c->key, c->key_len);
                rlen += c->key_len;
            }
            built = true;
        }
        for (j = 0; j < st->nres && !hit; j++)
            hit = pat_match(&st->res[j], res, rlen);
        if (!hit)
            continue;
        for (j = 0; j < st->nconds && hit; j++)
            hit = cond_true(&st->conds[j], c);
        if (!hit)
            continue;
        if (st->deny)
            return STOR_POL_DENY;
        allow = true;
    }
    return allow ? STOR_POL_ALLOW : STOR_POL_NONE;
}

/* See header. */
bool stor_policy_has_deny(const struct stor_policy *p)
{
    size_t i;

    for (i = 0; p && i < p->n; i++)
        if (p->st[i].deny)
            return true;
    return false;
}

/* See header. */
bool stor_policy_uses_existing_tags(const struct stor_policy *p)
{
    for (size_t i = 0; p && i < p->n; i++)
        for (size_t j = 0; j < p->st[i].nconds; j++)
            if (p->st[i].conds[j].key == K_EXTAG)
                return true;
    return false;
}

/* See header. */
bool stor_policy_is_public(const struct stor_policy *p)
{
    size_t i, j;

    for (i = 0; p && i < p->n; i++) {
        const struct stmt *st = &p->st[i];
        bool narrowed = false;

        if (st->deny || !st->any_principal)
            continue;
        for (j = 0; j < st->nconds && !narrowed; j++)
            narrowed = st->conds[j].key == K_SRCIP && st->conds[j].op == C_IP;
        if (!narrowed)
            return true;
    }
    return false;
}

/* See header. */
bool stor_policy_mentions_bucket(const struct stor_policy *p,
                                 const char *bucket, const char *user)
{
    char pre[66];
    size_t i, j, n = strlen(bucket);

    if (p == NULL || n > 63)
        return false;
    memcpy(pre, bucket, n);
    pre[n] = '/';
    for (i = 0; i < p->n; i++) {
        const struct stmt *st = &p->st[i];

        if (st->deny || !(st->acts & ~ADMIN_ACTS))
            continue;
        if ((st->nprinc || st->any_principal) &&
            !principal_ok(st, user, NULL, NULL))
            continue;
        for (j = 0; j < st->nres; j++)
            if (pat_match(&st->res[j], bucket, n) ||
                pat_may_extend(&st->res[j], pre, n + 1))
                return true;
    }
    return false;
}

/* See header. */
const char *stor_policy_canned(const char *name)
{
    static const struct {
        const char *name, *json;
    } canned[] = {
        {"readonly",
         "{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\","
         "\"Action\":[\"s3:GetObject\",\"s3:ListBucket\",\"s3:ListAllMyBuckets\","
         "\"s3:GetBucketLocation\",\"s3:ListBucketMultipartUploads\","
         "\"s3:ListMultipartUploadParts\",\"s3:GetObjectAcl\","
         "\"s3:GetBucketAcl\",\"s3:GetObjectTagging\","
         "\"s3:GetBucketVersioning\",\"s3:ListBucketVersions\","
         "\"s3:GetObjectVersion\",\"s3:GetLifecycleConfiguration\"],"
         "\"Resource\":[\"arn:aws:s3:::*\"]}]}"},
        {"writeonly",
         "{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\","
         "\"Action\":[\"s3:PutObject\",\"s3:PutObjectTagging\","
         "\"s3:AbortMultipartUpload\","
         "\"s3:ListMultipartUploadParts\",\"s3:ListBucketMultipartUploads\","
         "\"s3:GetBucketLocation\"],"
         "\"Resource\":[\"arn:aws:s3:::*\"]}]}"},
        {"readwrite",
         "{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\","
         "\"Action\":[\"s3:*\"],\"Resource\":[\"arn:aws:s3:::*\"]}]}"},
        {"admin",
         "{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\","
         "\"Action\":[\"s3:*\",\"admin:*\"],"
         "\"Resource\":[\"arn:aws:s3:::*\"]}]}"},
    };
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(canned); i++)
        if (strcmp(name, canned[i].name) == 0)
            return canned[i].json;
    return NULL;
}
