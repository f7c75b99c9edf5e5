/* fuse/main.c - bin/ecfs: parse BUCKET[:PREFIX] MOUNTPOINT -o options,
 * find credentials, check that the bucket answers, mount, daemonize (the
 * command returns once the mount is in place), serve with a multi-threaded
 * FUSE session, and unmount cleanly on SIGTERM/SIGINT/SIGHUP or
 * fusermount3 -u.
 *
 * DESIGN: everything that starts threads or opens connections (the S3
 * pool, prefetch workers) is created after fuse_daemonize(), because fork
 * keeps only the calling thread. The bucket probe before mounting uses a
 * throw-away client for the same reason. */
#include "fuse/fs.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "fuse/cache.h"
#include "fuse/creds.h"
#include "fuse/dcache.h"
#include "fuse/inode.h"
#include "fuse/listxml.h"
#include "fuse/metrics.h"
#include "fuse/ops.h"
#include "fuse/pack.h"
#include "fuse/pack_ops.h"
#include "fuse/pack_tool.h"
#include "fuse/presign_tool.h"
#include "fuse/read.h"
#include "fuse/s3.h"
#include "fuse/stats.h"
#include "fuse/write.h"

#define ECFS_VERSION "0.1"
#define INSECURE_WARNING                                                       \
    "ecfs: WARNING: TLS certificate verification is OFF for %s "               \
    "(insecure_skip_tls_verify_testing_only): for tests only"

/* Option strings parsed after fuse_opt_parse (sizes take K/M/G suffixes). */
struct raw_opts {
    struct fc_opts o;
    char *cache_size, *block_size, *whole_max, *readahead_max, *readahead_init,
        *part_size, *prefetch_mem, *write_part_size, *stage_max, *pack_block,
        *pack, *pack_fetch, *cache_dir_size, *meta_fetch;
    char *log_file;
    char *umask_s;
    char *metrics, *otlp_endpoint; /* -o metrics=, otlp_endpoint= */
    double otlp_interval;
    int show_help, show_version;
    int allow_other;
};

enum { KEY_HELP, KEY_VERSION, KEY_RO, KEY_UNUM, KEY_SECS };

#define OPT(t, f)                                                              \
    {                                                                          \
        t, offsetof(struct raw_opts, f), 1                                     \
    }
#define OPTS(t, f)                                                             \
    {                                                                          \
        t, offsetof(struct raw_opts, f), 0                                     \
    }
static const struct fuse_opt opt_spec[] = {
    OPTS("endpoint=%s", o.endpoint),
    OPTS("url=%s", o.endpoint),
    OPTS("region=%s", o.region),
    OPTS("profile=%s", o.profile),
    OPTS("passwd_file=%s", o.passwd_file),
    OPTS("ca_file=%s", o.ca_file),
    OPT("insecure_skip_tls_verify_testing_only", o.insecure),
    OPTS("log_level=%s", o.log_level),
    OPTS("log_file=%s", log_file),
    OPTS("metrics=%s", metrics),
    OPTS("otlp_endpoint=%s", otlp_endpoint),
    OPTS("otlp_interval=%lf", otlp_interval),
    OPTS("uid=%u", o.uid),
    OPT("uid=", o.set_uid),
    OPTS("gid=%u", o.gid),
    OPT("gid=", o.set_gid),
    OPTS("umask=%s", umask_s),
    OPT("immutable", o.immutable),
    OPT("nostats", o.no_stats),
    OPT("async_close", o.async_close),
    OPT("default_permissions", o.default_permissions),
    OPT("own_permissions", o.own_permissions),
    OPTS("attr_timeout=%lf", o.attr_timeout),
    OPTS("negative_timeout=%lf", o.negative_timeout),
    OPTS("list_ttl=%lf", o.list_ttl),
    OPTS("cache_size=%s", cache_size),
    OPTS("block_size=%s", block_size),
    OPTS("whole_max=%s", whole_max),
    OPTS("readahead_max=%s", readahead_max),
    OPTS("readahead_init=%s", readahead_init),
    OPTS("part_size=%s", part_size),
    OPTS("prefetch_mem=%s", prefetch_mem),
    OPTS("write_part_size=%s", write_part_size),
    OPTS("stage_dir=%s", o.stage_dir),
    OPTS("stage_max=%s", stage_max),
    OPTS("pack=%s", pack),
    OPTS("meta_fetch=%s", meta_fetch),
    OPTS("pack_block=%s", pack_block),
    OPTS("pack_fetch=%s", pack_fetch),
    OPTS("cache_dir=%s", o.cache_dir),
    OPTS("cache_dir_size=%s", cache_dir_size),
    OPTS("rename_dir_max=%u", o.rename_dir_max),
    OPTS("max_conns=%u", o.max_conns),
    OPTS("retries=%u", o.retries),
    OPTS("connect_timeout_ms=%u", o.connect_timeout_ms),
    OPTS("stall_timeout=%u", o.stall_timeout_s),
    OPTS("threads=%u", o.threads),
    OPTS("read_ahead_kb=%u", o.read_ahead_kb),
    OPTS("dir_prefetch=%u", o.dir_prefetch),
    OPTS("list_prefetch=%u", o.list_prefetch),
    OPTS("lookup_list=%u", o.lookup_list),
    OPT("allow_other", allow_other),
    FUSE_OPT_KEY("allow_other", FUSE_OPT_KEY_KEEP),
    OPT("allow_root", allow_other),
    FUSE_OPT_KEY("allow_root", FUSE_OPT_KEY_KEEP),
    OPT("ro", o.ro),
    FUSE_OPT_KEY("ro", FUSE_OPT_KEY_KEEP),
    /* the same options again, checked strictly (sscanf's %u takes "-1"
     * and wraps it; %lf takes "-5" and "nan") */
    FUSE_OPT_KEY("uid=", KEY_UNUM),
    FUSE_OPT_KEY("gid=", KEY_UNUM),
    FUSE_OPT_KEY("max_conns=", KEY_UNUM),
    FUSE_OPT_KEY("retries=", KEY_UNUM),
    FUSE_OPT_KEY("connect_timeout_ms=", KEY_UNUM),
    FUSE_OPT_KEY("stall_timeout=", KEY_UNUM),
    FUSE_OPT_KEY("threads=", KEY_UNUM),
    FUSE_OPT_KEY("read_ahead_kb=", KEY_UNUM),
    FUSE_OPT_KEY("dir_prefetch=", KEY_UNUM),
    FUSE_OPT_KEY("list_prefetch=", KEY_UNUM),
    FUSE_OPT_KEY("lookup_list=", KEY_UNUM),
    FUSE_OPT_KEY("rename_dir_max=", KEY_UNUM),
    FUSE_OPT_KEY("attr_timeout=", KEY_SECS),
    FUSE_OPT_KEY("negative_timeout=", KEY_SECS),
    FUSE_OPT_KEY("list_ttl=", KEY_SECS),
    FUSE_OPT_KEY("otlp_interval=", KEY_SECS),
    FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION),
    /* mount(8)/fstab words that mean nothing to us */
    FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("users", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_END,
};

static void usage(const char *prog)
{
    /* one literal per section: ISO C caps a string literal at 4095 bytes */
    printf(
        "usage: %s BUCKET[:PREFIX] MOUNTPOINT -o endpoint=URL[,options] [-f] [-d]\n"
        "\n"
        "Mounts BUCKET (or the PREFIX/ inside it) of an S3 endpoint. New files\n"
        "written front to back stream up as multipart uploads; other writes are\n"
        "staged in a local file; close() (and fsync() of a staged file) uploads\n"
        "and returns the upload's error. With -o ro every write gets EROFS.\n"
        "\n",
        prog);
    fputs(
        "General:\n"
        "    -f                     stay in the foreground (else return once mounted)\n"
        "    -d                     FUSE debug output (implies -f)\n"
        "    -h, --help             this help;  -V, --version  the version\n",
        stdout);
    fputs(
        "S3:\n"
        "    -o endpoint=URL        S3 endpoint, http(s)://host[:port] (required;\n"
        "                           url=URL is the same, as in s3fs)\n"
        "    -o region=NAME         SigV4 region (default us-east-1)\n"
        "    -o profile=NAME        credentials from ~/.aws/credentials [NAME]\n"
        "    -o passwd_file=PATH    credentials file: ACCESS:SECRET or\n"
        "                           BUCKET:ACCESS:SECRET lines (mode 600)\n"
        "                           default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY,\n"
        "                           then the [default] profile, else anonymous;\n"
        "                           a session token ($AWS_SESSION_TOKEN or the\n"
        "                           profile's aws_session_token) is sent signed\n"
        "    -o ca_file=PATH        PEM CA certificates that verify an https://\n"
        "                           endpoint, instead of the system trust store\n"
        "    -o insecure_skip_tls_verify_testing_only\n"
        "                           no TLS certificate or host name check at all\n"
        "                           (tests only: anyone on the path can read and\n"
        "                           change the data; logged as a warning)\n"
        "    -o max_conns=N         pooled keep-alive connections (default 32)\n"
        "    -o retries=N           retries of a failed request, with backoff and\n"
        "                           jitter (default 8; then EIO)\n"
        "    -o connect_timeout_ms=N  (default 3000)   -o stall_timeout=S (default 20)\n",
        stdout);
    fputs(
        "Namespace and metadata:\n"
        "    -o uid=N,gid=N,umask=OOO  owner and permission bits (default: mounting\n"
        "                           user, umask 022)\n"
        "    -o allow_other         let other users access the mount (the kernel\n"
        "                           then checks modes, default_permissions, unless\n"
        "                           -o own_permissions)\n"
        "    -o default_permissions the kernel checks modes (default: ecfs checks\n"
        "                           them itself on a writable mount without\n"
        "                           allow_other: one request a created file less;\n"
        "                           ro and pack mounts always leave it to the kernel)\n"
        "    -o own_permissions     ecfs's own checks on an allow_other mount too: the\n"
        "                           kernel then keeps no entry cached (every path\n"
        "                           walk is checked, one lookup a step)\n"
        "    -o meta_fetch=WHICH    entries known only from a listing whose stored\n"
        "                           mode/owner/mtime (x-amz-meta-*) are fetched with\n"
        "                           a HEAD before use: marked (default: those in\n"
        "                           directories whose marker object says they may\n"
        "                           store some, as ecfs makes it say before it\n"
        "                           stores any, or was made by another tool; at the\n"
        "                           root of a whole-bucket mount, with allow_other),\n"
        "                           all (for other tools' attributes elsewhere),\n"
        "                           none (the mount's defaults)\n"
        "    -o ro                  read-only mount; metadata cached until unmount\n"
        "    -o immutable           objects never change: cache like ro\n"
        "    -o attr_timeout=S      kernel attribute/entry cache (default 1; ro: 1 day)\n"
        "    -o negative_timeout=S  kernel negative-entry cache (default 1; ro: 1 day)\n"
        "    -o list_ttl=S          listing and attribute cache (default 60)\n",
        stdout);
    fputs(
        "Data:\n"
        "    -o cache_size=SIZE     shared block cache (default 1G)\n"
        "    -o cache_dir=DIR       also keep fetched blocks on disk in DIR (created;\n"
        "                           kept across mounts and reboots; checksummed;\n"
        "                           one mount per DIR): a dataset larger than RAM\n"
        "                           is fetched once, later epochs read local disk\n"
        "    -o cache_dir_size=SIZE bound on DIR's files (default 10G; least\n"
        "                           recently used go first; 5% of DIR's\n"
        "                           filesystem, at most 1G, is left free)\n"
        "    -o block_size=SIZE     cache block; files up to this size are fetched\n"
        "                           whole by one GET (default 1M)\n"
        "    -o whole_max=SIZE      the first read of a file up to this size fetches\n"
        "                           it all with one GET, not block by block\n"
        "                           (default 8M, at most 64 blocks; 0: only files\n"
        "                           up to block_size)\n"
        "    -o readahead_init=SIZE first sequential readahead window (default 4M)\n"
        "    -o readahead_max=SIZE  window cap; it doubles up to this (default 32M)\n"
        "    -o part_size=SIZE      one parallel GET of a window (default 8M)\n"
        "    -o prefetch_mem=SIZE   global cap on bytes being prefetched (default 512M)\n"
        "    -o read_ahead_kb=N     kernel readahead of the mount (default 8192; 0 keep)\n"
        "    -o dir_prefetch=N      ro/immutable: once N small files of a directory\n"
        "                           were read, fetch its other small files ahead\n"
        "                           (one GET each, within prefetch_mem; default 8,\n"
        "                           0 = off)\n"
        "    -o list_prefetch=N     once N subdirectories of a directory were opened\n"
        "                           (ls -R, find), list the others ahead in parallel\n"
        "                           (default 2, 0 = off)\n"
        "    -o lookup_list=N       once N names of an unlisted directory were looked\n"
        "                           up in S3 (opens by path), list it if it fits one\n"
        "                           LIST page and answer from that (default 8, 0 = off)\n"
        "    -o threads=N           FUSE worker threads (default 16)\n",
        stdout);
    fputs(
        "Writes:\n"
        "    -o write_part_size=SIZE  multipart part size (default 8M, at least 5M;\n"
        "                           doubles every 1000 parts: 10,000 parts > 1 TiB);\n"
        "                           part buffers share prefetch_mem with readahead\n"
        "    -o async_close         close() of a new file of up to 1 MiB returns\n"
        "                           before its PUT ends (parallel uploads; an\n"
        "                           upload error is only logged); unlink, rename,\n"
        "                           rmdir, a new open and unmount wait for it; a\n"
        "                           rename right after close (rsync) retargets it\n"
        "    -o stage_dir=DIR       staging files (default CACHE_DIR/stage with\n"
        "                           cache_dir, else $TMPDIR or /tmp, in\n"
        "                           ecfs-stage-UID/; unlinked while open)\n"
        "    -o stage_max=SIZE      largest staged file, else EFBIG (default 1G);\n"
        "                           a stream keeps a copy of its parts this far\n"
        "                           (reads by other opens before close)\n"
        "    -o rename_dir_max=N    most keys a directory rename copies (default\n"
        "                           10000; beyond: EXDEV, so mv copies instead)\n"
        "    mode, uid, gid, mtime are kept as x-amz-meta-* (s3fs's names;\n"
        "    chmod/chown/utimens store them; a directory's on its dir/\n"
        "    marker); symlink, link and mknod of a FIFO or device: EPERM\n",
        stdout);
    fputs(
        "Packs (made by: ecfs pack SRC BUCKET[:PREFIX] -o endpoint=URL;\n"
        "see ecfs pack --help):\n"
        "    a prefix holding PREFIX/.ecfs-pack/index mounts as the packed tree\n"
        "    (read-only: EROFS; no LIST; members read as range GETs of shards)\n"
        "    -o pack=off            show the raw objects instead\n"
        "    -o pack_block=SIZE     shard block fetched per GET (default 1M)\n"
        "    -o pack_fetch=MODE     block: pack_block blocks in the caches (the\n"
        "                           default while the shards fit in cache_size);\n"
        "                           ahead: a miss GETs up to 4 MiB and keeps the\n"
        "                           members in it not yet read, until their read,\n"
        "                           within cache_size (the default for a larger\n"
        "                           pack); with cache_dir it stores every member\n"
        "                           it brings there too and GETs aligned 4 MiB\n"
        "                           windows, once each while the disk holds them;\n"
        "                           shard: a whole shard on its first touch\n"
        "                           (only while all shards fit in cache_size)\n",
        stdout);
    fputs(
        "Diagnostics:\n"
        "    -o log_level=LEVEL     debug, info, warn (default), error\n"
        "    -o log_file=PATH       append log lines here (daemon mode)\n"
        "    cat MOUNTPOINT/.ecfs-stats   request counters, one \"name value\" line\n"
        "                           each: S3 requests, caches, and the FUSE\n"
        "                           requests by operation (fuse_requests,\n"
        "                           fuse_op_*); hidden, never listed; absent when\n"
        "                           an object of that name is at the mount root\n"
        "                           when mounting\n"
        "    -o nostats             no .ecfs-stats file\n"
        "    -o metrics=HOST:PORT   serve Prometheus text on http://HOST:PORT/metrics:\n"
        "                           FUSE operations, S3 requests, caches, prefetch,\n"
        "                           reader wait (see README \"Monitoring\")\n"
        "    -o otlp_endpoint=URL   push the same series over OTLP/HTTP (JSON) to URL\n"
        "                           (http://HOST:4318 -> .../v1/metrics)\n"
        "    -o otlp_interval=S     seconds between pushes (default 10)\n"
        "    ecfs stats MOUNTPOINT [-w SECONDS [-c COUNT]]   those counters once,\n"
        "                           or every SECONDS as per-second rates, like\n"
        "                           vmstat (see ecfs stats --help)\n"
        "\n"
        "Presigned URLs (for workers without keys):\n"
        "    ecfs presign BUCKET[:PREFIX] -o endpoint=URL[,expires=S]   one line\n"
        "                           per object: key, size, presigned GET URL\n"
        "                           (expires <= 7 days; see ecfs presign --help)\n"
        "\n"
        "Unmount with fusermount3 -u MOUNTPOINT, umount, or SIGTERM.\n"
        "Also usable as: mount -t fuse.ecfs BUCKET MOUNTPOINT -o endpoint=URL\n"
        "and in /etc/fstab: BUCKET MOUNTPOINT fuse.ecfs endpoint=URL,_netdev 0 0\n",
        stdout);
}

/* Checks the value of NAME=VALUE: digits only, at most UINT_MAX (@secs:
 * a finite number of seconds >= 0). Prints a message when it is not.
 * 0 or -1. */
static int check_number(const char *arg, bool secs)
{
    const char *v = strchr(arg, '=') + 1;
    char *end;

    errno = 0;
    if (secs) {
        double d = strtod(v, &end);
        if (end != v && *end == '\0' && errno == 0 && d >= 0 && d <= 1e9)
            return 0;
        fprintf(stderr, "ecfs: bad %s (seconds, 0 or more)\n", arg);
        return -1;
    }
    if (*v >= '0' && *v <= '9') {
        unsigned long long n = strtoull(v, &end, 10);
        if (*end == '\0' && errno == 0 && n <= UINT_MAX)
            return 0;
    }
    fprintf(stderr, "ecfs: bad %s (a whole number, 0 or more)\n", arg);
    return -1;
}

static int opt_proc(void *data, const char *arg, int key,
                    struct fuse_args *outargs)
{
    struct raw_opts *r = data;

    (void)outargs;
    switch (key) {
    case KEY_HELP:
        r->show_help = 1;
        return 0;
    case KEY_VERSION:
        r->show_version = 1;
        return 0;
    case KEY_UNUM:
    case KEY_SECS:
        return check_number(arg, key == KEY_SECS) < 0 ? -1 : 0;
    case FUSE_OPT_KEY_NONOPT:
        if (r->o.bucket == NULL) {
            r->o.bucket = strdup(arg);
            return 0;
        }
        return 1; /* the mountpoint: fuse_parse_cmdline takes it */
    default:
        return 1;
    }
}

/* Parses "123", "64K", "8M", "1G" (powers of 1024). 0 or -EINVAL. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    if (s == NULL)
        return 0;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    case '\0':
        break;
    default:
        return -EINVAL;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return -EINVAL;
    *out = (size_t)v;
    return 0;
}

/* Applies defaults and derived values; 0 or -EINVAL (message printed). */
static int finish_opts(struct raw_opts *r)
{
    struct fc_opts *o = &r->o;
    char *colon;
    int bad = 0;

    if (o->bucket == NULL) {
        fprintf(stderr, "ecfs: missing BUCKET[:PREFIX]\n");
        return -EINVAL;
    }
    colon = strchr(o->bucket, ':');
    if (colon) {
        const char *p = colon + 1;
        size_t n;
        *colon = '\0';
        while (*p == '/')
            p++;
        n = strlen(p);
        while (n > 0 && p[n - 1] == '/')
            n--;
        if (n > 0) {
            if (asprintf(&o->prefix, "%.*s/", (int)n, p) < 0)
                return -ENOMEM;
        }
    }
    if (o->prefix == NULL && (o->prefix = strdup("")) == NULL)
        return -ENOMEM;
    /* the daemon runs in "/": a relative log_file is relative to here */
    if (r->log_file && r->log_file[0] != '/') {
        char cwd[PATH_MAX], *abs;
        if (getcwd(cwd, sizeof(cwd)) == NULL ||
            asprintf(&abs, "%s/%s", cwd, r->log_file) < 0) {
            fprintf(stderr, "ecfs: cannot resolve log_file=%s\n", r->log_file);
            return -EINVAL;
        }
        free(r->log_file);
        r->log_file = abs;
    }
    if (o->bucket[0] == '\0') {
        fprintf(stderr, "ecfs: empty bucket name\n");
        return -EINVAL;
    }
    if (o->endpoint == NULL) {
        const char *e = getenv("AWS_ENDPOINT_URL_S3");
        if (e == NULL)
            e = getenv("AWS_ENDPOINT_URL");
        if (e == NULL) {
            fprintf(stderr, "ecfs: -o endpoint=URL is required\n");
            return -EINVAL;
        }
        o->endpoint = strdup(e);
    }
    if (o->region == NULL)
        o->region =
            strdup(getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1");
    if (o->ca_file) {
        /* checked here, before daemonizing; absolute, since the daemon
         * runs in "/" */
        char *abs;
        int e = o->ca_file[0] ? fc_s3_check_ca_file(o->ca_file) : -ENOENT;
        if (e < 0) {
            fprintf(stderr, "ecfs: cannot read ca_file=%s: %s\n", o->ca_file,
                    e == -EINVAL ? "not a regular file" : strerror(-e));
            return -EINVAL;
        }
        if ((abs = realpath(o->ca_file, NULL)) == NULL) {
            fprintf(stderr, "ecfs: cannot resolve ca_file=%s: %s\n", o->ca_file,
                    strerror(errno));
            return -EINVAL;
        }
        free(o->ca_file);
        o->ca_file = abs;
        if (o->insecure) {
            fprintf(stderr, "ecfs: ca_file= and "
                            "insecure_skip_tls_verify_testing_only exclude "
                            "each other\n");
            return -EINVAL;
        }
    }
    if (!o->set_uid)
        o->uid = getuid();
    if (!o->set_gid)
        o->gid = getgid();
    o->umask = 022;
    if (r->umask_s) {
        char *end;
        unsigned long m = strtoul(r->umask_s, &end, 8);
        if (end == r->umask_s || *end != '\0' || m > 0777) {
            fprintf(stderr, "ecfs: bad umask=%s\n", r->umask_s);
            return -EINVAL;
        }
        o->umask = (unsigned)m;
    }
    o->cache_size = 1ull << 30;
    o->block_size = 1u << 20;
    o->readahead_init = 4u << 20;
    o->readahead_max = 32u << 20;
    o->part_size = 8u << 20;
    o->prefetch_mem = 512u << 20;
    bad |= parse_size(r->cache_size, &o->cache_size);
    bad |= parse_size(r->block_size, &o->block_size);
    o->whole_max = 8u << 20;
    bad |= parse_size(r->whole_max, &o->whole_max);
    if (r->whole_max == NULL && o->whole_max > FC_WHOLE_BLOCKS * o->block_size)
        o->whole_max = FC_WHOLE_BLOCKS * o->block_size; /* small blocks */
    bad |= parse_size(r->readahead_init, &o->readahead_init);
    bad |= parse_size(r->readahead_max, &o->readahead_max);
    bad |= parse_size(r->part_size, &o->part_size);
    bad |= parse_size(r->prefetch_mem, &o->prefetch_mem);
    o->write_part_size = 8u << 20;
    bad |= parse_size(r->write_part_size, &o->write_part_size);
    {
        size_t sm = (size_t)1 << 30;
        bad |= parse_size(r->stage_max, &sm);
        o->stage_max = sm;
    }
    o->pack_block = 1u << 20;
    o->pack_block_set = r->pack_block != NULL;
    bad |= parse_size(r->pack_block, &o->pack_block);
    {
        size_t cds = (size_t)10 << 30;
        bad |= parse_size(r->cache_dir_size, &cds);
        o->cache_dir_size = cds;
    }
    if (o->cache_dir != NULL && o->cache_dir[0] == '\0') {
        fprintf(stderr, "ecfs: empty cache_dir=\n");
        return -EINVAL;
    }
    if (o->cache_dir != NULL && o->cache_dir[0] != '/') {
        /* the daemon's working directory is / */
        char cwd[PATH_MAX], *abs;
        if (getcwd(cwd, sizeof(cwd)) == NULL ||
            asprintf(&abs, "%s/%s", cwd, o->cache_dir) < 0)
            return -EINVAL;
        free(o->cache_dir);
        o->cache_dir = abs;
    }
    if (r->meta_fetch == NULL)
        o->meta_fetch = 0; /* by allow_other, once known (main) */
    else if (strcmp(r->meta_fetch, "none") == 0)
        o->meta_fetch = FC_META_FETCH_NONE;
    else if (strcmp(r->meta_fetch, "marked") == 0)
        o->meta_fetch = FC_META_FETCH_MARKED;
    else if (strcmp(r->meta_fetch, "all") == 0)
        o->meta_fetch = FC_META_FETCH_ALL;
    else {
        fprintf(stderr, "ecfs: bad meta_fetch=%s (marked, all or none)\n",
                r->meta_fetch);
        return -EINVAL;
    }
    if (r->pack && strcmp(r->pack, "off") == 0)
        o->pack_off = 1;
    else if (r->pack && strcmp(r->pack, "on") != 0) {
        fprintf(stderr, "ecfs: bad pack=%s (on or off)\n", r->pack);
        return -EINVAL;
    }
    o->pack_ahead = r->pack_fetch || o->pack_block_set ? 0 : -1;
    if (r->pack_fetch && strcmp(r->pack_fetch, "shard") == 0)
        o->pack_whole = 1;
    else if (r->pack_fetch && strcmp(r->pack_fetch, "ahead") == 0)
        o->pack_ahead = 1;
    else if (r->pack_fetch && strcmp(r->pack_fetch, "block") != 0) {
        fprintf(stderr, "ecfs: bad pack_fetch=%s (ahead, block or shard)\n",
                r->pack_fetch);
        return -EINVAL;
    }
    if (o->pack_block < 4096 || o->pack_block > (256u << 20)) {
        fprintf(stderr, "ecfs: bad pack_block (4K..256M)\n");
        return -EINVAL;
    }
    if (bad || o->block_size < 4096 || o->block_size > (64u << 20)) {
        fprintf(stderr, "ecfs: bad size option (use N, NK, NM or NG; "
                        "block_size 4K..64M)\n");
        return -EINVAL;
    }
    if (o->whole_max > FC_WHOLE_BLOCKS * o->block_size) {
        fprintf(stderr, "ecfs: bad whole_max (at most %u blocks: %zu)\n",
                FC_WHOLE_BLOCKS, FC_WHOLE_BLOCKS * o->block_size);
        return -EINVAL;
    }
    if (o->whole_max < o->block_size)
        o->whole_max = o->block_size; /* one block is one GET anyway */
    if (o->write_part_size < (5u << 20) ||
        o->write_part_size > ((size_t)5 << 30)) {
        fprintf(stderr, "ecfs: bad write_part_size (5M..5G: S3 refuses "
                        "smaller parts)\n");
        return -EINVAL;
    }
    if (o->rename_dir_max == 0)
        o->rename_dir_max = 10000;
    if (o->stage_dir == NULL && o->cache_dir != NULL && !o->ro) {
        /* under the cache directory: the disk given for bulk data, where
         * /tmp may be a tmpfs (memory) */
        if (mkdir(o->cache_dir, 0700) < 0 && errno != EEXIST) {
            fprintf(stderr, "ecfs: cannot create cache_dir=%s: %s\n",
                    o->cache_dir, strerror(errno));
            return -EINVAL;
        }
        if (asprintf(&o->stage_dir, "%s/stage", o->cache_dir) < 0)
            return -ENOMEM;
    } else if (o->stage_dir == NULL) {
        const char *tmp = getenv("TMPDIR");
        if (asprintf(&o->stage_dir, "%s/ecfs-stage-%u",
                     tmp && tmp[0] == '/' ? tmp : "/tmp",
                     (unsigned)getuid()) < 0)
            return -ENOMEM;
    } else if (o->stage_dir[0] != '/') {
        char cwd[PATH_MAX], *abs;
        if (getcwd(cwd, sizeof(cwd)) == NULL ||
            asprintf(&abs, "%s/%s", cwd, o->stage_dir) < 0)
            return -EINVAL;
        free(o->stage_dir);
        o->stage_dir = abs;
    }
    if (!o->ro && mkdir(o->stage_dir, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "ecfs: cannot create stage_dir=%s: %s\n", o->stage_dir,
                strerror(errno));
        return -EINVAL;
    }
    if (o->readahead_init < o->block_size)
        o->readahead_init = o->block_size;
    if (o->part_size < o->block_size)
        o->part_size = o->block_size;
    if (o->max_conns == 0)
        o->max_conns = 32;
    if (o->retries == (unsigned)-1)
        o->retries = 8;
    if (o->threads == 0)
        o->threads = 16;
    return 0;
}

/* Finds the bdi of the mount and raises its readahead; runs in a helper
 * thread because stat() of the mountpoint needs the session loop. */
struct ra_arg {
    char *mountpoint;
    unsigned kb;
};

static void *set_read_ahead(void *arg)
{
    struct ra_arg *ra = arg;
    struct stat st;
    char path[128];
    FILE *f;

    if (stat(ra->mountpoint, &st) == 0) {
        snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb",
                 major(st.st_dev), minor(st.st_dev));
        f = fopen(path, "w");
        if (f) {
            fprintf(f, "%u\n", ra->kb);
            if (fclose(f) != 0)
                cm_log(CM_LOG_INFO, errno, "ecfs: %s", path);
        } else {
            cm_log(CM_LOG_INFO, errno, "ecfs: cannot set %s", path);
        }
    }
    free(ra->mountpoint);
    free(ra);
    return NULL;
}

/* Probes the bucket with a one-key LIST before mounting, so a typo fails
 * the command instead of producing an empty mount, and, unless @o says
 * nostats, HEADs PREFIX.ecfs-stats: a real object of that name must not be
 * hidden by the stats file, which is then turned off (o->no_stats).
 * 0 or -errno. */
static int probe_bucket(const struct fc_s3_conf *sc, struct fc_opts *o)
{
    const char *prefix = o->prefix;
    struct fc_s3 *s;
    struct fc_listpage pg;
    struct fc_s3_conf c = *sc;
    struct fc_s3_obj obj;
    char *key = NULL;
    int ret;

    c.max_conns = 1;
    c.retries = CM_MIN(sc->retries, 2u);
    ret = fc_s3_create(&c, &s);
    if (ret < 0)
        return ret;
    fc_listpage_init(&pg);
    ret = fc_s3_list(s, prefix, NULL, 1, &pg);
    fc_listpage_fini(&pg);
    if (ret == 0 && !o->no_stats) {
        if (asprintf(&key, "%s.ecfs-stats", prefix) < 0) {
            ret = -ENOMEM;
        } else if (fc_s3_head(s, key, &obj) == 0) {
            cm_log(CM_LOG_WARN, 0,
                   "ecfs: object %s exists: no .ecfs-stats file on this "
                   "mount",
                   key);
            o->no_stats = 1;
        }
        free(key);
    }
    fc_s3_destroy(s);
    return ret;
}

static void free_opts(struct raw_opts *r)
{
    struct fc_opts *o = &r->o;

    free(o->endpoint);
    free(o->region);
    free(o->profile);
    free(o->passwd_file);
    free(o->ca_file);
    free(o->bucket);
    free(o->prefix);
    free(o->log_level);
    free(r->cache_size);
    free(r->block_size);
    free(r->whole_max);
    free(r->readahead_max);
    free(r->readahead_init);
    free(r->part_size);
    free(r->prefetch_mem);
    free(r->write_part_size);
    free(r->stage_max);
    free(r->pack);
    free(r->cache_dir_size);
    free(o->cache_dir);
    free(r->pack_block);
    free(r->pack_fetch);
    free(r->meta_fetch);
    free(o->stage_dir);
    free(r->log_file);
    free(r->umask_s);
    free(r->metrics);
    free(r->otlp_endpoint);
}

/* Watches the session from its own thread: once it has exited (SIGTERM,
 * SIGINT, SIGHUP, or the kernel ended the connection at unmount), aborts
 * the S3 requests still in flight. FUSE worker threads and prefetch workers
 * blocked on a hung server would otherwise hold the exit up for the stall
 * timeout times the retries; now their requests fail (EIO) within about a
 * second and the loop returns. */
struct exit_watch {
    struct fuse_session *se;
    struct fc_s3 *s3;
    bool drain;     /* -o async_close: wait for the closes' uploads first */
    pthread_t main; /* runs the session loop */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop; /* the loop returned; protected by lock */
};

/* Waits up to 50 ms for a signal on @w->cond (w->lock held). */
static void watch_nap(struct exit_watch *w)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&w->cond, &w->lock, &ts);
}

static void *exit_watch_run(void *arg)
{
    struct exit_watch *w = arg;

    pthread_mutex_lock(&w->lock);
    while (!w->stop && !fuse_session_exited(w->se)) {
        watch_nap(w);
    }
    pthread_mutex_unlock(&w->lock);
    /* close() returned for those: their uploads must not be cut */
    if (w->drain)
        fc_write_async_drain();
    fc_s3_abort(w->s3);
    /* libfuse 3.14's loop checks the exit flag, then sleeps in sem_wait
     * until a signal interrupts it: a signal that lands between the two
     * (or an exit not caused by a signal) leaves it asleep until the next
     * FUSE request. Interrupt it (SIGUSR1, a no-op handler) until the
     * loop has returned. */
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        pthread_kill(w->main, SIGUSR1);
        watch_nap(w);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* SIGUSR1 only interrupts the session loop's sleep (see exit_watch_run). */
static void on_wake(int sig)
{
    (void)sig;
}

/* Runs the mounted session @se to its end (a signal, fusermount3 -u) with
 * the exit watcher beside it. The exit signals are blocked on entry; once
 * the watcher runs, the calling (main) thread restores @old_mask so that it
 * alone takes them. Returns 0 for a requested, clean unmount, else 1. */
static int run_session(struct fuse_session *se,
                       const struct fuse_cmdline_opts *cmd, struct fc_fs *fs,
                       const sigset_t *old_mask)
{
    struct exit_watch ew = {.se = se,
                            .s3 = fs->s3,
                            .drain = fs->o.async_close,
                            .main = pthread_self()};
    struct sigaction wake = {.sa_handler = on_wake}; /* no SA_RESTART */
    struct fuse_loop_config *lc;
    pthread_t ew_th;
    bool ew_on;
    int ret;

    sigemptyset(&wake.sa_mask);
    sigaction(SIGUSR1, &wake, NULL);
    pthread_mutex_init(&ew.lock, NULL);
    pthread_cond_init(&ew.cond, NULL);
    ew_on = pthread_create(&ew_th, NULL, exit_watch_run, &ew) == 0;
    /* the main thread alone takes the exit signals (one pending now runs) */
    pthread_sigmask(SIG_SETMASK, old_mask, NULL);
    if (cmd->singlethread) {
        ret = fuse_session_loop(se);
    } else {
        lc = fuse_loop_cfg_create();
        if (lc == NULL) {
            ret = 1; /* still joins the watcher below */
        } else {
            fuse_loop_cfg_set_clone_fd(lc, cmd->clone_fd);
            fuse_loop_cfg_set_idle_threads(lc, fs->o.threads);
            fuse_loop_cfg_set_max_threads(lc, fs->o.threads);
            ret = fuse_session_loop_mt(se, lc);
            fuse_loop_cfg_destroy(lc);
        }
    }
    /* the session is over: requests still running (prefetch) end now */
    pthread_mutex_lock(&ew.lock);
    ew.stop = true;
    pthread_cond_signal(&ew.cond);
    pthread_mutex_unlock(&ew.lock);
    if (ew_on)
        pthread_join(ew_th, NULL);
    else
        fc_s3_abort(fs->s3);
    pthread_mutex_destroy(&ew.lock);
    pthread_cond_destroy(&ew.cond);
    /* the loop returns the signal number after SIGTERM/SIGINT/SIGHUP:
     * that is a requested, clean unmount */
    return (ret == 0 || ret == SIGTERM || ret == SIGINT || ret == SIGHUP) ? 0
                                                                          : 1;
}

/* glibc's dynamic mmap threshold rises to the size of the first large
 * mapped block freed (up to 32 MiB), after which upload part buffers
 * (64 KiB doubling to write_part_size, freed by the upload workers) come
 * from the thread arenas and stay there once freed: 4 writers under
 * prefetch_mem=16M held 77 MiB of RssAnon (34 MiB for one writer), far
 * past the budget of fuse/README.md "Memory". A fixed threshold maps
 * every allocation of 1 MiB and more on its own, so a freed part buffer
 * goes back to the kernel (30 MiB for 4 writers; the block cache's
 * buffers of 256 KiB and more are mappings of cache.c already). */
static void malloc_tune(void)
{
    (void)mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
}

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts cmd;
    struct raw_opts r;
    struct fc_fs fs;
    struct fc_creds cr;
    struct fc_s3_conf sc;
    struct fuse_session *se = NULL;
    struct fuse_lowlevel_ops timed_ops;
    struct fc_metrics_conf mc = {0};
    char instance[PATH_MAX + 300];
    int ret = 1, lvl;

    malloc_tune();
    if (argc > 1 && strcmp(argv[1], "pack") == 0)
        return fc_pack_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "stats") == 0)
        return fc_stats_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "presign") == 0)
        return fc_presign_main(argc - 1, argv + 1);
    memset(&r, 0, sizeof(r));
    memset(&fs, 0, sizeof(fs));
    memset(&cr, 0, sizeof(cr));
    memset(&cmd, 0, sizeof(cmd));
    r.o.attr_timeout = -1;
    r.o.negative_timeout = -1;
    r.o.list_ttl = 60;
    r.o.retries = (unsigned)-1;
    r.o.read_ahead_kb = 8192;
    r.o.dir_prefetch = 8;
    r.o.list_prefetch = 2;
    r.o.lookup_list = 8;
    cm_log_init("ecfs", CM_LOG_WARN);
    if (fuse_opt_parse(&args, &r, opt_spec, opt_proc) != 0)
        goto out_args;
    if (r.show_help) {
        usage(argv[0]);
        ret = 0;
        goto out_args;
    }
    if (r.show_version) {
        printf("ecfs %s (libfuse %s, %s)\n", ECFS_VERSION, fuse_pkgversion(),
               curl_version());
        ret = 0;
        goto out_args;
    }
    if (finish_opts(&r) < 0)
        goto out_args;
    if (r.o.log_level) {
        lvl = cm_log_parse_level(r.o.log_level);
        if (lvl < 0) {
            fprintf(stderr, "ecfs: bad log_level=%s\n", r.o.log_level);
            goto out_args;
        }
        cm_log_init("ecfs", lvl);
    }
    fs.o = r.o;
    fs.cache_forever = r.o.ro || r.o.immutable;
    fs.started = time(NULL);
    if (fs.o.attr_timeout < 0)
        fs.o.attr_timeout = fs.cache_forever ? 86400 : 1;
    if (fs.o.negative_timeout < 0)
        fs.o.negative_timeout = fs.cache_forever ? 86400 : 1;
    fs.o.allow_other = r.allow_other;
    /* allow_other too: ecfs stores attributes other than the defaults
     * only under a marker that says so (ops.c), so the rest of a listing
     * needs no HEAD; all is for other tools' attributes elsewhere */
    if (fs.o.meta_fetch == 0)
        fs.o.meta_fetch = FC_META_FETCH_MARKED;
    fs.mounter = geteuid();
    if (fuse_opt_add_arg(&args, "-osubtype=ecfs") != 0)
        goto out_args;
    {
        char fsname[PATH_MAX];
        snprintf(fsname, sizeof(fsname), "-ofsname=%s%s%s", fs.o.bucket,
                 fs.o.prefix[0] ? ":" : "", fs.o.prefix);
        /* fsname is parsed by libfuse: commas would split it */
        for (char *p = fsname; *p; p++)
            if (*p == ',')
                *p = '_';
        if (fuse_opt_add_arg(&args, fsname) != 0)
            goto out_args;
    }
    if (fuse_parse_cmdline(&args, &cmd) != 0)
        goto out_args;
    if (cmd.mountpoint == NULL) {
        fprintf(stderr, "ecfs: missing MOUNTPOINT (see --help)\n");
        goto out_cmd;
    }
    mc.listen = r.metrics;
    mc.otlp_endpoint = r.otlp_endpoint;
    mc.otlp_interval_s = r.otlp_interval;
    {
        char hn[256] = "localhost";

        (void)gethostname(hn, sizeof(hn) - 1);
        snprintf(instance, sizeof(instance), "%s:%s", hn, cmd.mountpoint);
        mc.instance = instance;
    }
    if (fc_metrics_check(&mc) < 0)
        goto out_cmd;
    if (fc_creds_load(fs.o.passwd_file, fs.o.profile, fs.o.bucket, &cr) < 0)
        goto out_cmd;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "ecfs: libcurl init failed\n");
        goto out_cmd;
    }
    memset(&sc, 0, sizeof(sc));
    sc.endpoint = fs.o.endpoint;
    sc.bucket = fs.o.bucket;
    sc.region = fs.o.region;
    sc.access_key = cr.access_key;
    sc.secret_key = cr.secret_key;
    sc.session_token = cr.session_token;
    sc.max_conns = fs.o.max_conns;
    sc.retries = fs.o.retries;
    sc.connect_timeout_ms = fs.o.connect_timeout_ms;
    sc.stall_timeout_s = fs.o.stall_timeout_s;
    sc.ca_file = fs.o.ca_file;
    sc.insecure = fs.o.insecure != 0;
    if (sc.insecure)
        cm_log(CM_LOG_WARN, 0, INSECURE_WARNING, fs.o.endpoint);
    if (fs.o.cache_dir != NULL) {
        struct fc_dcache_conf dcc = {.dir = fs.o.cache_dir,
                                     .max_bytes = fs.o.cache_dir_size,
                                     .endpoint = fs.o.endpoint,
                                     .bucket = fs.o.bucket};
        if (fc_dcache_open(&dcc, &fs.dcache) < 0)
            goto out_curl; /* the reason is printed */
    }
    ret = fs.o.pack_off
              ? 0
              : fc_pack_load(&sc, fs.o.prefix, fs.o.cache_dir, &fs.pack);
    if (ret < 0) {
        fprintf(stderr, "ecfs: cannot load the pack index of s3://%s/%s: %s\n",
                fs.o.bucket, fs.o.prefix, strerror(-ret));
        ret = 1;
        goto out_curl;
    }
    /* a pack mount lists nothing, ever: its index answered for the bucket */
    ret = fs.pack ? 0 : probe_bucket(&sc, &fs.o);
    if (ret < 0) {
        fprintf(stderr, "ecfs: cannot list s3://%s/%s at %s: %s\n", fs.o.bucket,
                fs.o.prefix, fs.o.endpoint, strerror(-ret));
        ret = 1;
        goto out_curl;
    }
    /* who checks permissions: ecfs itself on a writable mount only the
     * mounting user can reach (perm.c; the kernel's default_permissions
     * would GETATTR the parent before every create, its attributes being
     * dropped by the previous one). The kernel on ro and pack mounts (no
     * opens reach a ro mount: no_open), with -o default_permissions, and
     * on allow_other/allow_root mounts unless -o own_permissions: there
     * ecfs's checks would cost the read path a LOOKUP per path component
     * (perm_walk), far more than the GETATTR per create they save */
    if (fs.o.default_permissions && fs.o.own_permissions) {
        fprintf(stderr, "ecfs: default_permissions and own_permissions "
                        "exclude each other\n");
        ret = 1;
        goto out_curl;
    }
    fs.own_perms = !fs.o.default_permissions && !fs.o.ro && fs.pack == NULL &&
                   (!fs.o.allow_other || fs.o.own_permissions);
    fs.perm_walk = fs.own_perms && fs.o.allow_other;
    ret = 1;
    if (!fs.own_perms && fuse_opt_add_arg(&args, "-odefault_permissions") != 0)
        goto out_curl;
    /* count every request (.ecfs-stats); time them with metrics on */
    fc_metrics_wrap_ops(fs.pack ? &fc_pack_ops : &fc_ops, &timed_ops,
                        mc.listen || mc.otlp_endpoint);
    se = fuse_session_new(&args, &timed_ops, sizeof(timed_ops), &fs);
    if (se == NULL)
        goto out_curl;
    fc_ops_set_session(se);
    if (fuse_set_signal_handlers(se) != 0)
        goto out_session;
    if (fuse_session_mount(se, cmd.mountpoint) != 0)
        goto out_signals;
    if (fuse_daemonize(cmd.foreground) != 0)
        goto out_unmount;
    if (r.log_file && !cmd.foreground) {
        if (freopen(r.log_file, "a", stderr) == NULL)
            goto out_unmount;
        setvbuf(stderr, NULL, _IOLBF, 0);
        if (sc.insecure)
            cm_log(CM_LOG_WARN, 0, INSECURE_WARNING, fs.o.endpoint);
    }
    /* threads and connections from here on (after the fork). Every thread
     * of ours blocks SIGINT/SIGTERM/SIGHUP (they inherit this mask; libfuse's
     * workers block all signals): libfuse 3.14's multi-threaded loop only
     * notices the exit flag its handler sets when the signal interrupts the
     * main thread's sem_wait, so a signal taken by any other thread left
     * the mount up until the next FUSE request (libfuse issue #997). */
    sigset_t exit_sigs, old_mask;
    sigemptyset(&exit_sigs);
    sigaddset(&exit_sigs, SIGINT);
    sigaddset(&exit_sigs, SIGTERM);
    sigaddset(&exit_sigs, SIGHUP);
    sigaddset(&exit_sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &exit_sigs, &old_mask);
    if (fc_s3_create(&sc, &fs.s3) < 0 ||
        fc_itab_create(fs.o.prefix, &fs.itab) < 0 ||
        fc_cache_create(fs.o.cache_size, &fs.cache) < 0 ||
        (fs.dcache != NULL && fc_dcache_start(fs.dcache) < 0) ||
        fc_prefetch_start(&fs, CM_MAX(2u, fs.o.max_conns / 2)) < 0 ||
        (!fs.o.ro &&
         fc_upload_start(&fs, CM_MAX(2u, fs.o.max_conns / 2)) < 0)) {
        cm_log(CM_LOG_ERROR, ENOMEM, "ecfs: setup failed");
        goto out_state;
    }
    if (fc_metrics_start(&fs, &mc) < 0)
        goto out_state;
    if (fs.o.read_ahead_kb > 0) {
        struct ra_arg *ra = calloc(1, sizeof(*ra));
        pthread_t th;
        if (ra && (ra->mountpoint = strdup(cmd.mountpoint)) != NULL) {
            ra->kb = fs.o.read_ahead_kb;
            if (pthread_create(&th, NULL, set_read_ahead, ra) == 0)
                pthread_detach(th);
            else {
                free(ra->mountpoint);
                free(ra);
            }
        } else {
            free(ra);
        }
    }
    ret = run_session(se, &cmd, &fs, &old_mask);
    cm_log(CM_LOG_INFO, 0, "ecfs: unmounting %s", cmd.mountpoint);
out_state:
    fc_metrics_stop();
    fuse_session_unmount(se);
    fc_upload_stop(&fs);
    fc_prefetch_stop(&fs);
    /* its writer thread drops block references: before the cache goes */
    fc_dcache_close(fs.dcache);
    fs.dcache = NULL;
    fc_cache_destroy(fs.cache);
    fc_itab_destroy(fs.itab);
    fc_s3_destroy(fs.s3);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    se = NULL;
    goto out_curl;
out_unmount:
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_session:
    fuse_session_destroy(se);
out_curl:
    fc_dcache_close(fs.dcache);
    fc_pack_free(fs.pack);
    curl_global_cleanup();
out_cmd:
    free(cmd.mountpoint);
    fc_creds_fini(&cr);
out_args:
    fuse_opt_free_args(&args);
    free_opts(&r);
    return ret;
}
