/* fuse/presign_tool.c - `ecfs presign BUCKET[:PREFIX] -o endpoint=URL[,...]`:
 * a manifest of presigned GET URLs, one line per object under the prefix
 * (key, size, URL), for training workers that must not hold keys.
 *
 * DESIGN: the listing is the mount's (fc_s3_list_flat, 1000 keys a page,
 * the same credentials, TLS options and retries), and the URLs are signed
 * locally (fc_s3_presign_get: no request per object), so a manifest of a
 * million objects costs a thousand LISTs. Every URL carries one signing
 * time, so they all expire together. Directory markers ("dir/") are not
 * objects to read and are left out. The manifest is either TSV (default;
 * a key holding a tab, CR or LF cannot be written that way and fails the
 * command, naming the key and --format jsonl) or JSON lines. With
 * --output FILE it is written to FILE.tmp and renamed at the end, so a
 * failed run never leaves a partial manifest where a job would read it. */
#include "fuse/presign_tool.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/sigv4.h"
#include "common/timefmt.h"
#include "fuse/creds.h"
#include "fuse/listxml.h"
#include "fuse/s3.h"

#define PRESIGN_DEFAULT_EXPIRES 3600u

struct presigner {
    /* -o options; owned */
    char *endpoint, *region, *profile, *passwd_file, *ca_file;
    bool insecure;
    unsigned retries;
    unsigned long expires;
    /* arguments */
    char *bucket, *prefix; /* owned; prefix "" or as given */
    bool jsonl, quiet;
    const char *output; /* NULL: stdout */
};

static void presign_usage(FILE *f)
{
    fprintf(
        f,
        "usage: ecfs presign BUCKET[:PREFIX] -o endpoint=URL[,expires=S,...]\n"
        "                    [--format tsv|jsonl] [--output FILE] [-q]\n"
        "\n"
        "Writes one line per object under PREFIX: its key, its size and a\n"
        "presigned GET URL (SigV4 query signature; no key needed to fetch "
        "it).\n"
        "Hand the manifest to workers that must not hold credentials; "
        "every\n"
        "URL works until it expires and is refused after.\n"
        "\n"
        "    -o endpoint=URL     S3 endpoint (or AWS_ENDPOINT_URL)\n"
        "    -o expires=S        seconds the URLs stay valid (default 3600,\n"
        "                        at most 604800 = 7 days)\n"
        "    -o region=R         SigV4 region (us-east-1)\n"
        "    -o profile=NAME     ~/.aws/credentials profile\n"
        "    -o passwd_file=F    s3fs-style credentials file\n"
        "    -o ca_file=PATH     PEM CA certificates for an https:// "
        "endpoint\n"
        "    -o insecure_skip_tls_verify_testing_only  no TLS "
        "verification (tests)\n"
        "    -o retries=N        retries of a failed LIST (8)\n"
        "    --format tsv        KEY<TAB>SIZE<TAB>URL (default; a key with a\n"
        "                        tab or newline is an error: use jsonl)\n"
        "    --format jsonl      {\"key\": ..., \"size\": N, \"url\": ...}\n"
        "    --output FILE       write FILE (complete, or not at all) "
        "instead\n"
        "                        of standard output\n"
        "    -q                  no summary line on standard error\n"
        "Credentials as for the mount: passwd_file, profile, "
        "AWS_ACCESS_KEY_ID/\n"
        "AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), the [default] "
        "profile.\n"
        "Directory markers (keys ending in /) are left out. Exit status 0, "
        "or 1\non any error (with --output, FILE is then not written).\n");
}

/* Replaces *@dst by a copy of @v. 0 or -ENOMEM. */
static int set_str(char **dst, const char *v)
{
    char *d = strdup(v);

    if (d == NULL)
        return -ENOMEM;
    free(*dst);
    *dst = d;
    return 0;
}

/* Parses a decimal in [1, @max] into *@out. 0 or -EINVAL. */
static int parse_ulong(const char *v, unsigned long max, unsigned long *out)
{
    char *end;
    unsigned long n;

    errno = 0;
    n = strtoul(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || n < 1 || n > max)
        return -EINVAL;
    *out = n;
    return 0;
}

/* Applies one "name=value" (or flag) of an -o list. 0 or -EINVAL (message
 * printed) or -ENOMEM. */
static int presign_opt(struct presigner *p, const char *tok)
{
    static const struct {
        const char *name;
        size_t off;
    } strs[] = {
        {"endpoint=", offsetof(struct presigner, endpoint)},
        {"url=", offsetof(struct presigner, endpoint)},
        {"region=", offsetof(struct presigner, region)},
        {"profile=", offsetof(struct presigner, profile)},
        {"passwd_file=", offsetof(struct presigner, passwd_file)},
        {"ca_file=", offsetof(struct presigner, ca_file)},
    };
    unsigned long n;

    if (strcmp(tok, "insecure_skip_tls_verify_testing_only") == 0) {
        p->insecure = true;
        return 0;
    }
    for (size_t i = 0; i < CM_ARRAY_SIZE(strs); i++) {
        size_t l = strlen(strs[i].name);

        if (strncmp(tok, strs[i].name, l) == 0)
            return set_str((char **)((char *)p + strs[i].off), tok + l);
    }
    if (strncmp(tok, "expires=", 8) == 0) {
        if (parse_ulong(tok + 8, CM_SIGV4_MAX_PRESIGN_EXPIRES, &p->expires) ==
            0)
            return 0;
        fprintf(stderr,
                "ecfs presign: expires= wants seconds from 1 to %d (7 "
                "days), got '%s'\n",
                CM_SIGV4_MAX_PRESIGN_EXPIRES, tok + 8);
        return -EINVAL;
    }
    if (strncmp(tok, "retries=", 8) == 0) {
        if (parse_ulong(tok + 8, 100, &n) == 0 || strcmp(tok + 8, "0") == 0) {
            p->retries = strcmp(tok + 8, "0") == 0 ? 0 : (unsigned)n;
            return 0;
        }
        fprintf(stderr, "ecfs presign: bad retries=%s\n", tok + 8);
        return -EINVAL;
    }
    fprintf(stderr, "ecfs presign: unknown option -o %s (see --help)\n", tok);
    return -EINVAL;
}

/* Applies a comma-separated -o list. */
static int presign_opts(struct presigner *p, const char *list)
{
    char *dup = strdup(list), *save = NULL;
    int ret = 0;

    if (dup == NULL)
        return -ENOMEM;
    for (char *t = strtok_r(dup, ",", &save); t && ret == 0;
         t = strtok_r(NULL, ",", &save))
        ret = presign_opt(p, t);
    free(dup);
    return ret;
}

/* Appends @s as a JSON string (quotes included; UTF-8 passes through,
 * control characters become \u00XX). 0 or -ENOMEM. */
static int json_str(struct cm_buf *b, const char *s)
{
    int ret = cm_buf_appendc(b, '"');

    for (; ret == 0 && *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            ret = cm_buf_appendf(b, "\\%c", c);
        else if (c < 0x20)
            ret = cm_buf_appendf(b, "\\u%04x", c);
        else
            ret = cm_buf_appendc(b, (char)c);
    }
    return ret == 0 ? cm_buf_appendc(b, '"') : ret;
}

/* Appends the manifest line of one object to @line. 0, -EINVAL (a key TSV
 * cannot carry: message printed), -ENOMEM. */
static int manifest_line(const struct presigner *p, const struct fc_listobj *o,
                         const char *url, struct cm_buf *line)
{
    if (p->jsonl) {
        int ret = cm_buf_appends(line, "{\"key\": ");

        if (ret == 0)
            ret = json_str(line, o->key);
        if (ret == 0)
            ret = cm_buf_appendf(line,
                                 ", \"size\": %" PRIu64 ", \"url\": ", o->size);
        if (ret == 0)
            ret = json_str(line, url);
        return ret == 0 ? cm_buf_appends(line, "}\n") : ret;
    }
    if (strpbrk(o->key, "\t\r\n")) {
        fprintf(stderr,
                "ecfs presign: key \"%s\" holds a tab or a line break, "
                "which TSV cannot carry: use --format jsonl\n",
                o->key);
        return -EINVAL;
    }
    return cm_buf_appendf(line, "%s\t%" PRIu64 "\t%s\n", o->key, o->size, url);
}

/* Lists the prefix page by page and writes a line per object to @out.
 * The number of lines written, or -errno (message printed). */
static long presign_walk(const struct presigner *p, struct fc_s3 *s, time_t now,
                         FILE *out)
{
    struct cm_buf url, line;
    char *token = NULL;
    long n = 0;
    int ret;

    cm_buf_init(&url, CM_BUF_NOLIMIT);
    cm_buf_init(&line, CM_BUF_NOLIMIT);
    do {
        struct fc_listpage pg;

        fc_listpage_init(&pg);
        ret = fc_s3_list_flat(s, p->prefix, token, 1000, &pg);
        free(token);
        token = NULL;
        if (ret < 0)
            fprintf(stderr, "ecfs presign: cannot list s3://%s/%s at %s: %s\n",
                    p->bucket, p->prefix, p->endpoint,
                    ret == -ENOENT ? "no such bucket" : strerror(-ret));
        for (size_t i = 0; ret == 0 && i < pg.nobjs; i++) {
            const struct fc_listobj *o = &pg.objs[i];
            size_t kl = strlen(o->key);

            if (kl == 0 || o->key[kl - 1] == '/')
                continue; /* a directory marker */
            cm_buf_reset(&url);
            cm_buf_reset(&line);
            ret = fc_s3_presign_get(s, o->key, now, (unsigned)p->expires, &url);
            if (ret == 0)
                ret = manifest_line(p, o, url.data, &line);
            if (ret == 0 && fwrite(line.data, 1, line.len, out) != line.len)
                ret = -EIO;
            n++;
        }
        if (ret == 0 && pg.truncated && pg.next_token) {
            token = strdup(pg.next_token);
            if (token == NULL)
                ret = -ENOMEM;
        }
        fc_listpage_fini(&pg);
    } while (ret == 0 && token);
    cm_buf_fini(&line);
    cm_buf_fini(&url);
    return ret < 0 ? ret : n;
}

/* Splits BUCKET[:PREFIX]. 0, -EINVAL or -ENOMEM. */
static int presign_source(struct presigner *p, const char *arg)
{
    const char *colon = strchr(arg, ':');
    size_t bl = colon ? (size_t)(colon - arg) : strlen(arg);

    if (bl == 0 || memchr(arg, '/', bl))
        return -EINVAL;
    p->bucket = strndup(arg, bl);
    p->prefix = strdup(colon ? colon + 1 : "");
    return p->bucket && p->prefix ? 0 : -ENOMEM;
}

/* Validates the options and fills the defaults. 0, or -EINVAL (message
 * printed) or -ENOMEM. */
static int presign_check(struct presigner *p)
{
    if (p->endpoint == NULL) {
        const char *e = getenv("AWS_ENDPOINT_URL_S3");

        if (e == NULL)
            e = getenv("AWS_ENDPOINT_URL");
        if (e == NULL) {
            fprintf(stderr, "ecfs presign: -o endpoint=URL is required\n");
            return -EINVAL;
        }
        if (set_str(&p->endpoint, e) < 0)
            return -ENOMEM;
    }
    if (p->region == NULL &&
        set_str(&p->region,
                getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1") < 0)
        return -ENOMEM;
    if (p->ca_file) {
        int e = p->ca_file[0] ? fc_s3_check_ca_file(p->ca_file) : -ENOENT;

        if (e < 0) {
            fprintf(stderr, "ecfs presign: cannot read ca_file=%s: %s\n",
                    p->ca_file,
                    e == -EINVAL ? "not a regular file" : strerror(-e));
            return -EINVAL;
        }
        if (p->insecure) {
            fprintf(stderr, "ecfs presign: ca_file= and "
                            "insecure_skip_tls_verify_testing_only exclude "
                            "each other\n");
            return -EINVAL;
        }
    }
    if (p->insecure)
        fprintf(stderr,
                "ecfs presign: WARNING: TLS certificate verification is OFF "
                "for %s (insecure_skip_tls_verify_testing_only): for tests "
                "only\n",
                p->endpoint);
    return 0;
}

/* Parses the command line into @p. 0, 1 (--help printed), or -EINVAL
 * (message printed). */
static int presign_args(struct presigner *p, int argc, char **argv)
{
    const char *src = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ret = 0;

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            presign_usage(stdout);
            return 1;
        } else if (strcmp(a, "-o") == 0 && v) {
            ret = presign_opts(p, v);
            i++;
        } else if (strncmp(a, "-o", 2) == 0 && a[2]) {
            ret = presign_opts(p, a + 2);
        } else if (strcmp(a, "--format") == 0 && v) {
            if (strcmp(v, "jsonl") != 0 && strcmp(v, "tsv") != 0) {
                fprintf(stderr, "ecfs presign: --format is tsv or jsonl\n");
                return -EINVAL;
            }
            p->jsonl = strcmp(v, "jsonl") == 0;
            i++;
        } else if (strcmp(a, "--output") == 0 && v) {
            p->output = v;
            i++;
        } else if (strcmp(a, "-q") == 0) {
            p->quiet = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "ecfs presign: unknown option %s (see --help)\n",
                    a);
            return -EINVAL;
        } else if (src == NULL) {
            src = a;
        } else {
            fprintf(stderr, "ecfs presign: one BUCKET[:PREFIX] only\n");
            return -EINVAL;
        }
        if (ret < 0)
            return -EINVAL;
    }
    if (src == NULL) {
        presign_usage(stderr);
        return -EINVAL;
    }
    if (presign_source(p, src) < 0) {
        fprintf(stderr, "ecfs presign: bad source %s (BUCKET[:PREFIX])\n", src);
        return -EINVAL;
    }
    return presign_check(p);
}

/* An S3 client for the bucket with @cr, or NULL (message printed). */
static struct fc_s3 *presign_client(const struct presigner *p,
                                    const struct fc_creds *cr)
{
    struct fc_s3_conf sc;
    struct fc_s3 *s = NULL;

    memset(&sc, 0, sizeof(sc));
    sc.endpoint = p->endpoint;
    sc.bucket = p->bucket;
    sc.region = p->region;
    sc.access_key = cr->access_key;
    sc.secret_key = cr->secret_key;
    sc.session_token = cr->session_token;
    sc.max_conns = 1;
    sc.retries = p->retries;
    sc.connect_timeout_ms = 5000;
    sc.stall_timeout_s = 30;
    sc.ca_file = p->ca_file;
    sc.insecure = p->insecure;
    if (fc_s3_create(&sc, &s) < 0) {
        fprintf(stderr, "ecfs presign: bad endpoint %s\n", p->endpoint);
        return NULL;
    }
    return s;
}

/* Writes the manifest to --output (through FILE.tmp) or stdout. The number
 * of lines, or -errno (message printed; no FILE left behind). */
static long presign_write(const struct presigner *p, struct fc_s3 *s,
                          time_t now)
{
    char *tmp = NULL;
    FILE *out = stdout;
    long n;

    if (p->output) {
        if (asprintf(&tmp, "%s.tmp", p->output) < 0)
            return -ENOMEM;
        out = fopen(tmp, "w");
        if (out == NULL) {
            n = -errno;
            fprintf(stderr, "ecfs presign: cannot write %s: %s\n", tmp,
                    strerror(errno));
            free(tmp);
            return n;
        }
    }
    n = presign_walk(p, s, now, out);
    if (fflush(out) != 0 && n >= 0) {
        n = -errno;
        fprintf(stderr, "ecfs presign: write failed: %s\n", strerror(errno));
    }
    if (p->output) {
        if (fclose(out) != 0 && n >= 0) {
            n = -errno;
            fprintf(stderr, "ecfs presign: write failed: %s\n",
                    strerror(errno));
        }
        if (n >= 0 && rename(tmp, p->output) < 0) {
            n = -errno;
            fprintf(stderr, "ecfs presign: cannot rename %s to %s: %s\n", tmp,
                    p->output, strerror(errno));
        }
        if (n < 0)
            unlink(tmp);
        free(tmp);
    }
    return n;
}

int fc_presign_main(int argc, char **argv)
{
    struct presigner p;
    struct fc_creds cr;
    struct fc_s3 *s = NULL;
    time_t now = time(NULL);
    char until[CM_TIME_RFC3339_LEN + 1];
    int rc = 1, ret;
    long n;

    memset(&p, 0, sizeof(p));
    memset(&cr, 0, sizeof(cr));
    p.expires = PRESIGN_DEFAULT_EXPIRES;
    p.retries = 8;
    ret = presign_args(&p, argc, argv);
    if (ret != 0) {
        rc = ret > 0 ? 0 : 1;
        goto out;
    }
    if (fc_creds_load(p.passwd_file, p.profile, p.bucket, &cr) < 0)
        goto out;
    if (cr.access_key == NULL || cr.access_key[0] == '\0') {
        fprintf(stderr, "ecfs presign: no credentials (AWS_ACCESS_KEY_ID/"
                        "AWS_SECRET_ACCESS_KEY, -o profile= or -o "
                        "passwd_file=): a presigned URL is signed with a "
                        "key\n");
        goto out;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "ecfs presign: libcurl init failed\n");
        goto out;
    }
    s = presign_client(&p, &cr);
    if (s != NULL) {
        n = presign_write(&p, s, now);
        if (n >= 0) {
            rc = 0;
            cm_time_rfc3339(now + (time_t)p.expires, 0, until);
            if (!p.quiet)
                fprintf(stderr,
                        "ecfs presign: %ld URL(s) for s3://%s/%s, valid "
                        "until %s\n",
                        n, p.bucket, p.prefix, until);
        }
        fc_s3_destroy(s);
    }
    curl_global_cleanup();
out:
    free(p.endpoint);
    free(p.region);
    free(p.profile);
    free(p.passwd_file);
    free(p.ca_file);
    free(p.bucket);
    free(p.prefix);
    fc_creds_fini(&cr);
    return rc;
}
