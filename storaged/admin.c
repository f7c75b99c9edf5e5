/* storaged/admin.c - `storaged admin`: the command-line client of the
 * server's admin API (storaged/s3/iam_api.c), SigV4-signed with root or an
 * admin user's key like any S3 request, over libcurl.
 *
 *   storaged admin [--endpoint URL] user add NAME [--policy FILE|CANNED]
 *   storaged admin [--endpoint URL] user list | user rm NAME
 *   storaged admin [--endpoint URL] user disable NAME | user enable NAME
 *   storaged admin [--endpoint URL] policy set NAME FILE|CANNED
 *   storaged admin [--endpoint URL] policy get NAME
 *   storaged admin [--endpoint URL] account add NAME | account list
 *   storaged admin [--endpoint URL] account rm NAME
 *
 * --ca-file FILE verifies an https:// endpoint against that PEM bundle
 * instead of the system trust store (a private CA).
 *
 * Credentials: STORAGED_ROOT_USER/STORAGED_ROOT_PASSWORD, else
 * AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY. The answer (JSON) goes to
 * stdout; an error's code and message to stderr with exit status 1. */
#include "storaged/admin.h"

#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/sigv4.h"
#include "common/timefmt.h"
#include "common/uri.h"

#define ADMIN_PATH "/_storaged/admin/v1/users"
#define ACCT_PATH  "/_storaged/admin/v1/accounts"
#define FILE_MAX   (64 * 1024)
#define DEFAULT_EP "http://127.0.0.1:9000"

struct admin_ctx {
    const char *endpoint;
    const char *ca_file; /* NULL: the system trust store */
    const char *ak, *sk;
};

static void admin_usage(FILE *f)
{
    fputs("usage: storaged admin [--endpoint URL] [--ca-file FILE] COMMAND\n"
          "  user add NAME [--policy FILE|readonly|readwrite|writeonly|admin]\n"
          "                       create a user; prints its access key and "
          "secret\n"
          "  user list            users, their keys and policies (never "
          "secrets)\n"
          "  user rm NAME         remove a user\n"
          "  user disable NAME    refuse the user's requests (reversible)\n"
          "  user enable NAME\n"
          "  policy set NAME FILE|readonly|readwrite|writeonly|admin\n"
          "  policy get NAME      the user's policy document\n"
          "  account add NAME     create a separate account and its key "
          "(prints\n"
          "                       its id, access key and secret); it owns "
          "the\n"
          "                       buckets it creates, and reaches others' "
          "only\n"
          "                       through their bucket policies and ACLs\n"
          "  account list         accounts, their ids and buckets\n"
          "  account rm NAME      remove an account and its key (it must own "
          "no\n"
          "                       bucket)\n"
          "--endpoint defaults to " DEFAULT_EP "; for an https:// one,\n"
          "--ca-file names the PEM CA bundle to verify it with (default: "
          "the\nsystem trust store). Credentials (root, or a "
          "user with\nan admin policy): STORAGED_ROOT_USER / "
          "STORAGED_ROOT_PASSWORD, else\nAWS_ACCESS_KEY_ID / "
          "AWS_SECRET_ACCESS_KEY.\n",
          f);
}

static size_t write_cb(char *p, size_t sz, size_t nm, void *ud)
{
    struct cm_buf *b = ud;

    return cm_buf_append(b, p, sz * nm) < 0 ? 0 : sz * nm;
}

/* "host[:port]" of @ep (http://host:port[/...]) into @out. */
static int ep_host(const char *ep, char *out, size_t n)
{
    const char *p = strstr(ep, "://"), *e;

    if (p == NULL)
        return -EINVAL;
    p += 3;
    e = strchr(p, '/');
    if (e == NULL)
        e = p + strlen(p);
    if ((size_t)(e - p) >= n || e == p)
        return -EINVAL;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = 0;
    return 0;
}

/* Writes XML text @s (@n bytes) with its five entities decoded. */
static void put_unescaped(FILE *f, const char *s, size_t n)
{
    static const struct {
        const char *ent, *ch;
    } ents[] = {{"&quot;", "\""},
                {"&apos;", "'"},
                {"&lt;", "<"},
                {"&gt;", ">"},
                {"&amp;", "&"}};
    size_t i = 0, j;

    while (i < n) {
        for (j = 0; j < sizeof(ents) / sizeof(ents[0]); j++) {
            size_t el = strlen(ents[j].ent);

            if (n - i >= el && memcmp(s + i, ents[j].ent, el) == 0) {
                fputs(ents[j].ch, f);
                i += el;
                break;
            }
        }
        if (j == sizeof(ents) / sizeof(ents[0]))
            fputc(s[i++], f);
    }
}

/* One signed call; prints the answer. 0, or 1 on any failure. */
static int call(const struct admin_ctx *c, const char *method, const char *path,
                const char *qname, const char *qval, const char *body)
{
    struct cm_sigv4_cred cred = {c->ak, c->sk, "us-east-1", "s3"};
    struct cm_kv q[1], h[3];
    struct cm_buf url, auth, resp;
    struct curl_slist *hl = NULL;
    char host[256], date[CM_TIME_ISO_BASIC_LEN + 1], ph[65], line[512];
    size_t blen = body ? strlen(body) : 0;
    long status = 0;
    CURL *cu;
    CURLcode cc;
    int rc = 1;

    if (ep_host(c->endpoint, host, sizeof(host)) < 0) {
        fprintf(stderr, "storaged admin: bad --endpoint %s\n", c->endpoint);
        return 1;
    }
    cm_buf_init(&url, CM_BUF_NOLIMIT);
    cm_buf_init(&auth, CM_BUF_NOLIMIT);
    cm_buf_init(&resp, 16 * 1024 * 1024);
    cm_sha256_hex(body ? body : "", blen, ph);
    cm_time_iso_basic(time(NULL), date);
    h[0] = (struct cm_kv){"host", 4, host, strlen(host)};
    h[1] = (struct cm_kv){"x-amz-content-sha256", 20, ph, 64};
    h[2] = (struct cm_kv){"x-amz-date", 10, date, strlen(date)};
    if (qname)
        q[0] = (struct cm_kv){qname, strlen(qname), qval ? qval : "",
                              qval ? strlen(qval) : 0};
    {
        struct cm_sigv4_req sr = {
            .method = method,
            .path = path,
            .path_len = strlen(path),
            .query = qname ? q : NULL,
            .nquery = qname ? 1 : 0,
            .headers = h,
            .nheaders = 3,
            .payload_hash = ph,
        };

        if (cm_buf_appends(&auth, "Authorization: ") < 0 ||
            cm_sigv4_sign(&cred, &sr, time(NULL), &auth) < 0)
            goto out;
    }
    if (cm_buf_append(&url, c->endpoint,
                      strlen(c->endpoint) -
                          (c->endpoint[strlen(c->endpoint) - 1] == '/')) < 0 ||
        cm_uri_encode(&url, path, strlen(path), true) < 0)
        goto out;
    if (qname &&
        (cm_buf_appendc(&url, '?') < 0 ||
         cm_uri_encode(&url, qname, strlen(qname), false) < 0 ||
         (qval && (cm_buf_appendc(&url, '=') < 0 ||
                   cm_uri_encode(&url, qval, strlen(qval), false) < 0))))
        goto out;
    cu = curl_easy_init();
    if (cu == NULL)
        goto out;
    snprintf(line, sizeof(line), "x-amz-content-sha256: %s", ph);
    hl = curl_slist_append(hl, line);
    snprintf(line, sizeof(line), "x-amz-date: %s", date);
    hl = curl_slist_append(hl, line);
    hl = curl_slist_append(hl, auth.data);
    hl = curl_slist_append(hl, "Expect:");
    hl = curl_slist_append(hl, "Content-Type: application/json");
    curl_easy_setopt(cu, CURLOPT_URL, url.data);
    curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(cu, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(cu, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(cu, CURLOPT_TIMEOUT, 60L);
    if (c->ca_file)
        curl_easy_setopt(cu, CURLOPT_CAINFO, c->ca_file);
    if (body || strcmp(method, "PUT") == 0 || strcmp(method, "POST") == 0) {
        curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE, (long)blen);
    }
    cc = curl_easy_perform(cu);
    curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(cu);
    if (cc != CURLE_OK) {
        fprintf(stderr, "storaged admin: %s: %s\n", c->endpoint,
                curl_easy_strerror(cc));
        goto out;
    }
    if (status >= 200 && status < 300) {
        if (resp.len)
            fwrite(resp.data, 1, resp.len, stdout);
        rc = 0;
    } else {
        /* the S3 error XML: Code and Message are what a person needs */
        const char *co = resp.data ? strstr(resp.data, "<Code>") : NULL;
        const char *me = resp.data ? strstr(resp.data, "<Message>") : NULL;
        const char *ce = co ? strstr(co, "</Code>") : NULL;
        const char *mend = me ? strstr(me, "</Message>") : NULL;

        if (co && ce && me && mend) {
            fprintf(stderr, "storaged admin: %ld %.*s: ", status,
                    (int)(ce - co - 6), co + 6);
            put_unescaped(stderr, me + 9, (size_t)(mend - me - 9));
            fputc('\n', stderr);
        } else
            fprintf(stderr, "storaged admin: HTTP %ld\n", status);
    }
out:
    curl_slist_free_all(hl);
    cm_buf_fini(&url);
    cm_buf_fini(&auth);
    cm_buf_fini(&resp);
    return rc;
}

/* The policy argument: a canned name (*canned set) or a file's text
 * (malloc'd into *text). 0 or 1 (reported). */
static int policy_src(const char *arg, const char **canned, char **text)
{
    static const char *const names[] = {"readonly", "readwrite", "writeonly",
                                        "admin"};
    struct cm_buf b;
    char chunk[4096];
    size_t n, i;
    FILE *f;

    *canned = NULL;
    *text = NULL;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(arg, names[i]) == 0) {
            *canned = names[i];
            return 0;
        }
    f = fopen(arg, "r");
    if (f == NULL) {
        fprintf(stderr,
                "storaged admin: %s: %s (a policy is a JSON file or "
                "readonly, readwrite, writeonly, admin)\n",
                arg, strerror(errno));
        return 1;
    }
    cm_buf_init(&b, FILE_MAX);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if (cm_buf_append(&b, chunk, n) < 0) {
            fprintf(stderr, "storaged admin: %s: larger than %d bytes\n", arg,
                    FILE_MAX);
            fclose(f);
            return 1;
        }
    fclose(f);
    if (b.len == 0 || cm_buf_appendc(&b, 0) < 0) {
        fprintf(stderr, "storaged admin: %s: empty\n", arg);
        cm_buf_fini(&b);
        return 1;
    }
    *text = b.data; /* the buffer's storage, NUL-terminated */
    return 0;
}

static int user_path(char *out, size_t n, const char *name, const char *tail)
{
    if (strchr(name, '/') || name[0] == 0 ||
        (size_t)snprintf(out, n, "%s/%s%s", ADMIN_PATH, name, tail) >= n) {
        fprintf(stderr, "storaged admin: bad user name \"%s\"\n", name);
        return -1;
    }
    return 0;
}

static int cmd(const struct admin_ctx *c, int argc, char **argv)
{
    char path[256];
    const char *canned = NULL;
    char *text = NULL;
    int rc;

    if (argc >= 2 && strcmp(argv[0], "user") == 0) {
        const char *sub = argv[1];

        if (strcmp(sub, "list") == 0 && argc == 2)
            return call(c, "GET", ADMIN_PATH, NULL, NULL, NULL);
        if (argc < 3 || user_path(path, sizeof(path), argv[2], "") < 0)
            goto bad;
        if (strcmp(sub, "add") == 0) {
            if (argc == 5 && strcmp(argv[3], "--policy") == 0) {
                if (policy_src(argv[4], &canned, &text))
                    return 1;
            } else if (argc != 3) {
                goto bad;
            }
            rc = call(c, "PUT", path, canned ? "policy" : NULL, canned, text);
            free(text);
            return rc;
        }
        if (argc != 3)
            goto bad;
        if (strcmp(sub, "rm") == 0)
            return call(c, "DELETE", path, NULL, NULL, NULL);
        if (strcmp(sub, "disable") == 0 || strcmp(sub, "enable") == 0)
            return call(c, "POST", path, sub, NULL, NULL);
        goto bad;
    }
    if (argc >= 2 && strcmp(argv[0], "account") == 0) {
        if (strcmp(argv[1], "list") == 0 && argc == 2)
            return call(c, "GET", ACCT_PATH, NULL, NULL, NULL);
        if (argc != 3 || strchr(argv[2], '/') || argv[2][0] == 0 ||
            (size_t)snprintf(path, sizeof(path), "%s/%s", ACCT_PATH, argv[2]) >=
                sizeof(path))
            goto bad;
        if (strcmp(argv[1], "add") == 0)
            return call(c, "PUT", path, NULL, NULL, NULL);
        if (strcmp(argv[1], "rm") == 0)
            return call(c, "DELETE", path, NULL, NULL, NULL);
        goto bad;
    }
    if (argc >= 3 && strcmp(argv[0], "policy") == 0) {
        if (user_path(path, sizeof(path), argv[2], "/policy") < 0)
            return 2;
        if (strcmp(argv[1], "get") == 0 && argc == 3)
            return call(c, "GET", path, NULL, NULL, NULL);
        if (strcmp(argv[1], "set") == 0 && argc == 4) {
            if (policy_src(argv[3], &canned, &text))
                return 1;
            rc = call(c, "PUT", path, canned ? "policy" : NULL, canned, text);
            free(text);
            return rc;
        }
    }
bad:
    admin_usage(stderr);
    return 2;
}

/* See admin.h. */
int stor_admin_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"endpoint", required_argument, NULL, 'e'},
        {"ca-file", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct admin_ctx c = {DEFAULT_EP, NULL, NULL, NULL};
    int o, rc;

    optind = 1;
    /* '+': options end at the first command word */
    while ((o = getopt_long(argc, argv, "+e:h", opts, NULL)) != -1) {
        switch (o) {
        case 'e':
            c.endpoint = optarg;
            break;
        case 'c':
            c.ca_file = optarg;
            break;
        case 'h':
            admin_usage(stdout);
            return 0;
        default:
            admin_usage(stderr);
            return 2;
        }
    }
    c.ak = getenv("STORAGED_ROOT_USER");
    c.sk = getenv("STORAGED_ROOT_PASSWORD");
    if (c.ak == NULL || c.sk == NULL || !c.ak[0] || !c.sk[0]) {
        c.ak = getenv("AWS_ACCESS_KEY_ID");
        c.sk = getenv("AWS_SECRET_ACCESS_KEY");
    }
    if (c.ak == NULL || c.sk == NULL || !c.ak[0] || !c.sk[0]) {
        fputs("storaged admin: set STORAGED_ROOT_USER and "
              "STORAGED_ROOT_PASSWORD (or AWS_ACCESS_KEY_ID and "
              "AWS_SECRET_ACCESS_KEY)\n",
              stderr);
        return 2;
    }
    if (optind >= argc) {
        admin_usage(stderr);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmd(&c, argc - optind, argv + optind);
    curl_global_cleanup();
    return rc;
}
