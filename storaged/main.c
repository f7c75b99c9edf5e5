/* storaged/main.c - the daemon's entry point: command line, credentials,
 * opening the store, serving S3 until SIGTERM/SIGINT, closing cleanly.
 *
 *   storaged serve --address HOST:PORT [--ec K+M] [--threads N]
 *                  [--tls-cert FILE --tls-key FILE] DRIVE...
 *
 * Root credentials come from STORAGED_ROOT_USER / STORAGED_ROOT_PASSWORD;
 * without them the daemon refuses to start (no built-in default pair: a
 * store reachable with a well-known key is worse than one that does not
 * start). */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/compiler.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/otlp.h"
#include "storaged/admin.h"
#include "storaged/http/http.h"
#include "storaged/http/tls.h"
#include "storaged/s3/s3.h"
#include "storaged/store/drive.h"
#include "storaged/store/inspect.h"
#include "storaged/store/object.h"

#define STORAGED_VERSION "0.1"

/* Prints the command-line help to @f. */
static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: storaged serve --address HOST:PORT [options] DRIVE...\n"
        "       storaged inspect PATH...\n"
        "       storaged index check|rebuild DRIVE...\n"
        "       storaged admin [--endpoint URL] user add NAME [--policy P]\n"
        "               | user list | user rm|disable|enable NAME\n"
        "               | policy set NAME P | policy get NAME\n"
        "       storaged --help | --version\n"
        "\n"
        "Serves the S3 API (path-style, one region: us-east-1 unless --region)\n"
        "over HTTP/1.1 on\n"
        "an erasure-coded store spread over the DRIVE directories. A drive\n"
        "argument may use ellipsis ranges: /srv/d{1...16}.\n"
        "\n"
        "inspect prints (and verifies) on-disk records: a drive's format\n"
        "record, an object's metadata record or a shard file.\n"
        "\n"
        "index check compares the object index with the metadata records on\n"
        "the drives (the truth) and prints every difference (exit 0: none,\n"
        "1: some); index rebuild then replaces the index with one built from\n"
        "them. Run them while storaged is stopped; serve repairs a missing,\n"
        "damaged or uncleanly closed index by itself\n"
        "(after a kill -9 it re-reads only the keys that were in flight).\n"
        "\n"
        "admin manages users (access key + secret) and their policies on a\n"
        "running server (storaged admin --help); P is a policy JSON file or\n"
        "readonly, readwrite, writeonly or admin. Users, bucket policies and\n"
        "canned ACLs are kept in the store itself and apply at once.\n"
        "\n");
    /* in two pieces: C99 promises string literals of 4095 bytes only */
    fprintf(
        f,
        "serve options:\n"
        "  -a, --address HOST:PORT  listen address (required; [::]:9000 for IPv6)\n"
        "  -e, --ec K+M             data+parity shards per object set\n"
        "                           (default from the set size: 16 drives -> 12+4)\n"
        "      --set-size N         drives per erasure set (default: largest of 16..2\n"
        "                           dividing the drive count)\n"
        "  -t, --threads N          event-loop threads (default: one per CPU)\n"
        "  -w, --workers N          write worker threads: PUT, commit, delete, copy\n"
        "                           (default: 4 per loop, >= 16)\n"
        "      --read-workers N     read worker threads: GET, HEAD, LIST\n"
        "                           (default: 2 per loop, >= 4)\n"
        "      --no-fsync           do not sync at commit (faster, unsafe on power loss)\n"
        "      --cache-mem MIB      keep up to MIB MiB of inline-object (<= 1 MiB)\n"
        "                           bodies in memory for GETs (default 0: off)\n"
        "      --index-body-max N   objects of up to N bytes (<= 65536) also keep\n"
        "                           their body in the object index, so a GET reads\n"
        "                           no file (default 8192; 0: off)\n"
        "      --extents            keep the shards of objects above that and up\n"
        "                           to 1 MiB in per-drive extent files, read with\n"
        "                           one pread each and no open (default off)\n"
        "      --no-extents         the default: shards of those objects in their\n"
        "                           metas (the last of the two options wins)\n"
        "      --no-zero-copy       GETs of extent objects copy their bytes through\n"
        "                           the server (default: spliced from the extent\n"
        "                           files to the socket on plain HTTP)\n"
        "      --zc-cache-mem MIB   keep up to MIB MiB of checked object bodies\n"
        "                           (<= 1 MiB, asked for twice) as pipe pages for\n"
        "                           zero-copy GETs from memory (default: RAM/16,\n"
        "                           at most 256; 0: off)\n");
    fputs(
        "      --domain NAME        also answer virtual-hosted-style requests,\n"
        "                           Host BUCKET.NAME[:PORT] (default: path style only)\n"
        "      --no-sigv2           refuse SigV2 request signing (Authorization:\n"
        "                           AWS AKID:SIG, AWSAccessKeyId/Expires/Signature\n"
        "                           query strings) with 400 InvalidRequest (default:\n"
        "                           accepted, as AWS and RGW; POST forms unchanged)\n"
        "      --region NAME        the one region served (default us-east-1):\n"
        "                           GetBucketLocation answers it, CreateBucket\n"
        "                           must name it (AWS's rules; [a-z0-9-])\n"
        "      --kms-key-file FILE  seal the SSE-S3 master key under the 256-bit key\n"
        "                           in FILE (32 bytes or 64 hex digits) instead of a\n"
        "                           key derived from the root credentials\n"
        "      --idle-timeout S     close idle keep-alive connections after S s (60)\n"
        "      --request-timeout S  slow clients: head, body or reading of the\n"
        "                           response stalled for S s (30)\n"
        "      --otlp-endpoint URL  push the /metrics series over OTLP/HTTP (JSON)\n"
        "                           to URL (http://HOST:4318 -> .../v1/metrics)\n"
        "      --otlp-interval S    seconds between pushes (default 10)\n"
        "      --tls-cert FILE      serve HTTPS (TLS 1.2, 1.3) with this PEM\n"
        "                           certificate chain (leaf first) ...\n"
        "      --tls-key FILE       ... and this PEM private key; SIGHUP reads\n"
        "                           both again (new connections get them)\n"
        "      --console ADDR       read-only status page on HOST:PORT (HTTP Basic\n"
        "                           with root's or an admin user's keys; plain\n"
        "                           HTTP: use 127.0.0.1)\n"
        "  -l, --log-level LEVEL    debug, info, warn, error (default info)\n"
        "  -h, --help               this text\n"
        "  -V, --version            print the version\n"
        "\n"
        "environment:\n"
        "  STORAGED_ROOT_USER, STORAGED_ROOT_PASSWORD  root access key and secret\n"
        "                           (required; the secret must be >= 8 characters;\n"
        "                           users' secrets are encrypted under a key derived\n"
        "                           from them, so keep them when restarting)\n"
        "\n"
        "endpoints: S3 API on /, GET /health/live, GET /health/ready (200 when\n"
        "serving), GET /metrics (Prometheus text). While the object index is\n"
        "rebuilt at start, S3 requests get 503 with Retry-After and /metrics\n"
        "shows the progress. SIGTERM or SIGINT: stop\n"
        "accepting, finish in-flight requests, exit 0. SIGHUP: reload the TLS\n"
        "certificate and key (a bad pair is logged and the old one kept).\n",
        f);
}

/* Parses "K+M". 0 or -EINVAL. */
static int parse_ec(const char *s, int *k, int *m)
{
    char *end;
    long a, b;

    errno = 0;
    a = strtol(s, &end, 10);
    if (errno || *end != '+' || a < 1 || a > 16)
        return -EINVAL;
    b = strtol(end + 1, &end, 10);
    if (errno || *end || b < 0 || b > 16)
        return -EINVAL;
    *k = (int)a;
    *m = (int)b;
    return 0;
}

/* Parses a decimal in [lo, hi]. 0 or -EINVAL. */
static int parse_count(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}

/* --zc-cache-mem @mib in bytes; @mib < 0 (not given): the default,
 * min(ZC_CACHE_DEFAULT_MIB, RAM / 16). A process without CAP_SYS_RESOURCE
 * (not root) shares the per-user pipe budget (fs/pipe-user-pages-soft pages,
 * counted by capacity: a power of two of pages per pipe) with the
 * connections' own pipes, so the cache takes at most a quarter of it. */
#define ZC_CACHE_DEFAULT_MIB 256
static size_t zc_cache_bytes(long mib)
{
    size_t want = (size_t)mib << 20, psz = (size_t)sysconf(_SC_PAGESIZE);
    unsigned long soft = 0;
    FILE *f;

    if (mib < 0) {
        long pages = sysconf(_SC_PHYS_PAGES);

        want = (size_t)ZC_CACHE_DEFAULT_MIB << 20;
        if (pages > 0 && (size_t)pages / 16 * psz < want)
            want = (size_t)pages / 16 * psz;
    }

    if (want == 0 || geteuid() == 0 ||
        (f = fopen("/proc/sys/fs/pipe-user-pages-soft", "r")) == NULL)
        return want;
    if (fscanf(f, "%lu", &soft) == 1 && soft > 0 &&
        want > (size_t)soft * psz / 8) {
        want = (size_t)soft * psz / 8;
        /* a warning only when asked for more; the default is cut quietly */
        cm_log(mib < 0 ? CM_LOG_INFO : CM_LOG_WARN, 0,
               "--zc-cache-mem: %zu MiB at most (a quarter of the user's "
               "pipe pages, fs/pipe-user-pages-soft)",
               want >> 20);
    }
    fclose(f);
    return want;
}

/* Raises the open-file limit to its hard maximum: every connection is a
 * descriptor, and thousands of them are the normal case. */
static void raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            cm_log(CM_LOG_WARN, errno, "cannot raise RLIMIT_NOFILE");
    }
}

/* SIGTERM/SIGINT: async-signal-safe drain request. */
static void on_signal(int sig)
{
    if (sig == SIGHUP)
        stor_http_reload_tls();
    else
        stor_http_shutdown();
}

/* Appends the expansion of each drive argument to *drives. */
static int expand_drives(char **args, int n, char ***drives, size_t *ndrives)
{
    int i;

    for (i = 0; i < n; i++) {
        char **v = NULL;
        size_t nv = 0, j;
        char **grown;
        int ret = stor_drives_expand(args[i], &v, &nv);

        if (ret < 0) {
            fprintf(stderr, "storaged: bad drive argument '%s'\n", args[i]);
            return ret;
        }
        grown = realloc(*drives, (*ndrives + nv) * sizeof(char *));
        if (grown == NULL) {
            stor_drives_free(v, nv);
            return -ENOMEM;
        }
        *drives = grown;
        for (j = 0; j < nv; j++)
            (*drives)[(*ndrives)++] = v[j];
        free(v); /* the strings moved into *drives */
    }
    return 0;
}

/* Whether @s is a region name storaged accepts: 1..32 of [a-z0-9-], not
 * starting or ending with '-' (it goes into XML and headers unescaped). */
static bool region_ok(const char *s)
{
    size_t n = strlen(s), i;

    if (n == 0 || n > 32 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '-'))
            return false;
    return true;
}

/* `storaged serve`: parses options, opens the store, serves until a
 * signal, closes. Returns the exit status. */
/* glibc returns a thread arena's free top to the kernel once it passes
 * the trim threshold, which the dynamic mmap threshold leaves at about
 * 2 MiB after the first large free. A 1 MiB GET allocates and frees about
 * 2 MiB (the shard reads and the body), so 16 concurrent GETs had the loop
 * arenas trimmed (madvise of ~11 MiB) and faulted back in continually:
 * 16.8 page faults and ~5 % of the CPU of an encrypted 1 MiB GET
 * (issue 18). Buffers under 4 MiB come from the arenas (as the dynamic
 * threshold had them), and up to 32 MiB of free top per arena is kept for
 * the next request instead of being trimmed; larger allocations are still
 * mapped and unmapped on their own. */
static void malloc_tune(void)
{
    (void)mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
    (void)mallopt(M_TRIM_THRESHOLD, 32 * 1024 * 1024);
}

static int cmd_serve(int argc, char **argv)
{
    static const struct option opts[] = {
        {"address", required_argument, NULL, 'a'},
        {"ec", required_argument, NULL, 'e'},
        {"threads", required_argument, NULL, 't'},
        {"workers", required_argument, NULL, 'w'},
        {"read-workers", required_argument, NULL, 'r'},
        {"set-size", required_argument, NULL, 's'},
        {"no-fsync", no_argument, NULL, 'F'},
        {"cache-mem", required_argument, NULL, 'C'},
        {"index-body-max", required_argument, NULL, 'B'},
        {"extents", no_argument, NULL, 'X'},
        {"no-extents", no_argument, NULL, 'x'},
        {"no-zero-copy", no_argument, NULL, 'z'},
        {"zc-cache-mem", required_argument, NULL, 'Z'},
        {"domain", required_argument, NULL, 'D'},
        {"no-sigv2", no_argument, NULL, 'V' + 256},
        {"region", required_argument, NULL, 'G'},
        {"kms-key-file", required_argument, NULL, 'Y'},
        {"idle-timeout", required_argument, NULL, 'I'},
        {"request-timeout", required_argument, NULL, 'R'},
        {"log-level", required_argument, NULL, 'l'},
        {"otlp-endpoint", required_argument, NULL, 'O'},
        {"otlp-interval", required_argument, NULL, 'N'},
        {"console", required_argument, NULL, 'K'},
        {"tls-cert", required_argument, NULL, 'T'},
        {"tls-key", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct stor_store_opts so = {.ec_parity = -1,
                                 .fsync = true,
                                 .rebuild_in_background = true,
                                 .index_body_max = STOR_INDEX_BODY_DEFAULT};
    struct stor_http_opts ho = {0};
    struct stor_s3_opts s3o = {0};
    uint8_t kms_key[32];
    struct stor_store *store = NULL;
    struct stor_s3 *s3 = NULL;
    struct stor_s3_obs_opts obo = {.version = STORAGED_VERSION};
    struct stor_s3_obs *obs = NULL;
    char host[256] = "", instance[512];
    char **drives = NULL;
    size_t ndrives = 0;
    const char *address = NULL, *tls_cert = NULL, *tls_key = NULL;
    struct stor_tls *tls = NULL;
    const char *user = getenv("STORAGED_ROOT_USER");
    const char *pass = getenv("STORAGED_ROOT_PASSWORD");
    char *err = NULL;
    long v, idle = 60, reqto = 30, zc_mib = -1;
    int c, ret, lvl;
    struct sigaction sa;

    while ((c = getopt_long(argc, argv, "a:e:t:w:l:h", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
            address = optarg;
            break;
        case 'e':
            if (parse_ec(optarg, &so.ec_data, &so.ec_parity) < 0) {
                fprintf(stderr,
                        "storaged: --ec wants K+M (e.g. 12+4), got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 't':
            if (parse_count(optarg, 1, 1024, &v) < 0) {
                fprintf(stderr, "storaged: bad --threads '%s'\n", optarg);
                return 2;
            }
            ho.nthreads = (size_t)v;
            break;
        case 'w':
            if (parse_count(optarg, 1, 4096, &v) < 0) {
                fprintf(stderr, "storaged: bad --workers '%s'\n", optarg);
                return 2;
            }
            ho.nworkers = (size_t)v;
            break;
        case 'r':
            if (parse_count(optarg, 1, 4096, &v) < 0) {
                fprintf(stderr, "storaged: bad --read-workers '%s'\n", optarg);
                return 2;
            }
            ho.nrworkers = (size_t)v;
            break;
        case 's':
            if (parse_count(optarg, 1, 16, &v) < 0) {
                fprintf(stderr, "storaged: bad --set-size '%s'\n", optarg);
                return 2;
            }
            so.set_size = (int)v;
            break;
        case 'F':
            so.fsync = false;
            break;
        case 'C':
            if (parse_count(optarg, 0, 1024 * 1024, &v) < 0) {
                fprintf(stderr, "storaged: bad --cache-mem '%s'\n", optarg);
                return 2;
            }
            s3o.cache_bytes = (size_t)v << 20;
            break;
        case 'B':
            if (parse_count(optarg, 0, STOR_INDEX_BODY_LIMIT, &v) < 0) {
                fprintf(stderr,
                        "storaged: bad --index-body-max '%s' (0..%u bytes)\n",
                        optarg, STOR_INDEX_BODY_LIMIT);
                return 2;
            }
            so.index_body_max = (size_t)v;
            break;
        case 'X':
            so.extents = true;
            break;
        case 'x':
            so.extents = false;
            break;
        case 'z':
            s3o.no_zero_copy = true;
            break;
        case 'V' + 256:
            s3o.no_sigv2 = true;
            break;
        case 'Z':
            if (parse_count(optarg, 0, 1024 * 1024, &v) < 0) {
                fprintf(stderr, "storaged: bad --zc-cache-mem '%s'\n", optarg);
                return 2;
            }
            zc_mib = v;
            break;
        case 'D':
            if (!stor_s3_domain_ok(optarg)) {
                fprintf(stderr,
                        "storaged: --domain wants a DNS name such as "
                        "s3.example.internal, got '%s'\n",
                        optarg);
                return 2;
            }
            s3o.domain = optarg;
            break;
        case 'G':
            if (!region_ok(optarg)) {
                fprintf(stderr,
                        "storaged: --region wants a name of 1..32 letters a-z, "
                        "digits and '-' such as eu-west-1, got '%s'\n",
                        optarg);
                return 2;
            }
            s3o.region = optarg;
            break;
        case 'Y': {
            char kerr[256];

            if (stor_sse_read_key_file(optarg, kms_key, kerr, sizeof(kerr)) <
                0) {
                fprintf(stderr, "storaged: %s\n", kerr);
                return 2;
            }
            s3o.kms_key = kms_key;
            break;
        }
        case 'I':
            if (parse_count(optarg, 1, 86400, &idle) < 0) {
                fprintf(stderr, "storaged: bad --idle-timeout '%s'\n", optarg);
                return 2;
            }
            break;
        case 'R':
            if (parse_count(optarg, 1, 86400, &reqto) < 0) {
                fprintf(stderr, "storaged: bad --request-timeout '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'O':
            if (cm_otlp_check_endpoint(optarg) < 0) {
                fprintf(stderr,
                        "storaged: --otlp-endpoint wants http(s)://HOST:PORT"
                        "[/PATH], got '%s'\n",
                        optarg);
                return 2;
            }
            obo.otlp_endpoint = optarg;
            break;
        case 'N': {
            char *end;

            errno = 0;
            obo.otlp_interval_s = strtod(optarg, &end);
            if (errno || *end || end == optarg ||
                !(obo.otlp_interval_s >= 0.1 && obo.otlp_interval_s <= 86400)) {
                fprintf(stderr,
                        "storaged: bad --otlp-interval '%s' (seconds, "
                        "0.1..86400)\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'K': {
            char ch[256];
            int cp;

            if (cm_hostport_parse(optarg, ch, sizeof(ch), &cp) < 0) {
                fprintf(stderr,
                        "storaged: bad --console '%s' (want HOST:PORT)\n",
                        optarg);
                return 2;
            }
            obo.console_addr = optarg;
            break;
        }
        case 'T':
            tls_cert = optarg;
            break;
        case 'k':
            tls_key = optarg;
            break;
        case 'l':
            lvl = cm_log_parse_level(optarg);
            if (lvl < 0) {
                fprintf(stderr, "storaged: bad --log-level '%s'\n", optarg);
                return 2;
            }
            cm_log_init("storaged", lvl);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (address == NULL || optind >= argc) {
        fprintf(
            stderr,
            "storaged serve: --address and at least one DRIVE are required\n");
        usage(stderr);
        return 2;
    }
    if (cm_hostport_parse(address, host, sizeof(host), &ho.port) < 0) {
        fprintf(stderr, "storaged: bad --address '%s' (want HOST:PORT)\n",
                address);
        return 2;
    }
    ho.host = host;
    if ((tls_cert == NULL) != (tls_key == NULL)) {
        fprintf(stderr, "storaged: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (tls_cert) {
        ret = stor_tls_create(tls_cert, tls_key, &tls, &err);
        if (ret < 0) {
            fprintf(stderr, "storaged: %s\n", err ? err : strerror(-ret));
            free(err);
            return 2;
        }
        ho.tls = tls;
    }
    if (user == NULL || *user == 0 || pass == NULL || strlen(pass) < 8) {
        fprintf(stderr,
                "storaged: set STORAGED_ROOT_USER and STORAGED_ROOT_PASSWORD "
                "(secret of at least 8 characters) to the root credentials; "
                "refusing to start without them\n");
        stor_tls_destroy(tls);
        return 2;
    }
    malloc_tune(); /* before any thread: every arena starts tuned */
    ret = expand_drives(argv + optind, argc - optind, &drives, &ndrives);
    if (ret < 0)
        goto out;
    so.drives = (const char *const *)drives;
    so.ndrives = ndrives;
    ret = stor_store_open(&so, &store, &err);
    if (ret < 0) {
        fprintf(stderr, "storaged: cannot open the store: %s\n",
                err ? err : strerror(-ret));
        free(err);
        goto out;
    }
    s3o.store = store;
    s3o.root_user = user;
    s3o.root_secret = pass;
    if (s3o.region == NULL)
        s3o.region = "us-east-1";
    s3o.tls = tls_cert != NULL;
    s3o.zc_cache_bytes = zc_cache_bytes(zc_mib);
    ret = stor_s3_create(&s3o, &s3);
    if (ret < 0)
        goto out_store;
    {
        char hn[256] = "localhost";

        (void)gethostname(hn, sizeof(hn) - 1);
        snprintf(instance, sizeof(instance), "%s:%d", hn, ho.port);
        obo.instance = instance;
    }
    if (obo.otlp_endpoint || obo.console_addr) {
        ret = stor_s3_obs_start(s3, &obo, &obs, &err);
        if (ret < 0) {
            fprintf(stderr, "storaged: %s\n", err ? err : strerror(-ret));
            free(err);
            goto out_s3;
        }
        ho.on_serving = stor_s3_obs_serving;
        ho.serving_ctx = obs;
    }
    ho.idle_timeout_s = (int)idle;
    ho.header_timeout_s = (int)reqto;
    ho.body_timeout_s = (int)reqto;
    ho.app = &stor_s3_app;
    ho.app_ctx = s3;

    raise_nofile();
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* reload the TLS certificate */
    signal(SIGPIPE, SIG_IGN);

    ret = stor_http_serve(&ho);
    stor_s3_obs_stop(obs);
out_s3:
    stor_s3_destroy(s3);
out_store:
    stor_store_close(store);
out:
    stor_drives_free(drives, ndrives);
    stor_tls_destroy(tls);
    return ret < 0 ? 1 : 0;
}

/* `storaged index check|rebuild DRIVE...`: 0 (no differences / rebuilt),
 * 1 (differences found by check), 2 (usage or error). */
static int cmd_index(int argc, char **argv)
{
    bool rebuild = strcmp(argv[0], "rebuild") == 0;
    char **drives = NULL, *err = NULL;
    size_t ndrives = 0;
    long ret;

    if (!rebuild && strcmp(argv[0], "check") != 0) {
        usage(stderr);
        return 2;
    }
    if (expand_drives(argv + 1, argc - 1, &drives, &ndrives) < 0) {
        fprintf(stderr, "storaged index: bad drive arguments\n");
        return 2;
    }
    ret = stor_index_check((const char *const *)drives, ndrives, rebuild,
                           stdout, &err);
    stor_drives_free(drives, ndrives);
    if (ret < 0) {
        fprintf(stderr, "storaged index %s: %s\n", argv[0],
                err ? err : strerror((int)-ret));
        free(err);
        return 2;
    }
    free(err);
    printf("index %s: %ld difference(s)\n", argv[0], ret);
    return rebuild || ret == 0 ? 0 : 1;
}

/* Dispatches serve / inspect / index / --help / --version. */
int main(int argc, char **argv)
{
    cm_log_init("storaged", CM_LOG_INFO);
    if (argc >= 2 &&
        (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 &&
        (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("storaged %s\n", STORAGED_VERSION);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return cmd_serve(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "admin") == 0)
        return stor_admin_main(argc - 1, argv + 1);
    if (argc >= 4 && strcmp(argv[1], "index") == 0)
        return cmd_index(argc - 2, argv + 2);
    if (argc >= 3 && strcmp(argv[1], "inspect") == 0) {
        int i, rc = 0;

        for (i = 2; i < argc; i++) {
            int ret = stor_inspect(argv[i], stdout);

            if (ret < 0) {
                fprintf(stderr, "storaged inspect: %s: %s\n", argv[i],
                        strerror(-ret));
                rc = 1;
            }
        }
        return rc;
    }
    usage(stderr);
    return 2;
}
