/* fuse/stats_tool.c - `ecfs stats MOUNT [-w SECONDS [-c COUNT]]`: the
 * figures of MOUNT/.ecfs-stats once ("name value" lines, as the file), or
 * every SECONDS as per-second rates in columns, like vmstat: a header line
 * of the names, then one line per interval. Gauges (GAUGES below: sizes,
 * not counts) are shown as their current value, everything else as a
 * rate. MOUNT must be the root of an ecfs mount (/proc/self/mountinfo
 * says fuse.ecfs) that has the file. */
#include "fuse/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ST_MAX  128 /* most figures */
#define ST_NAME 64

struct st_sample {
    unsigned n;
    char name[ST_MAX][ST_NAME];
    uint64_t v[ST_MAX];
    struct timespec at; /* CLOCK_MONOTONIC */
};

static const char *const GAUGES[] = {
    "inodes",           "inodes_peak",
    "cache_bytes",      "cache_blocks",
    "pack_members",     "pack_shards",
    "pack_index_bytes", "dcache_bytes",
    "dcache_files",     "dir_prefetch_unread_bytes",
};

static void usage(FILE *f)
{
    fputs(
        "usage: ecfs stats MOUNT [-w SECONDS [-c COUNT]]\n"
        "Prints the counters of the ecfs mount MOUNT (MOUNT/.ecfs-stats):\n"
        "once, as \"name value\" lines; or with -w every SECONDS, as\n"
        "per-second rates (sizes: current values), a header line of the\n"
        "names and then one line per interval, like vmstat.\n"
        "    -w SECONDS   interval (may be fractional, e.g. 0.5)\n"
        "    -c COUNT     stop after COUNT intervals (default: until killed)\n"
        "Exit status 0; 1 when MOUNT is not an ecfs mount, has no stats\n"
        "file (-o nostats) or cannot be read; 2 for bad arguments.\n",
        f);
}

static bool is_gauge(const char *name)
{
    for (size_t i = 0; i < sizeof(GAUGES) / sizeof(GAUGES[0]); i++)
        if (strcmp(name, GAUGES[i]) == 0)
            return true;
    return false;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
    char *o = s;

    while (*s) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
            s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 4;
        } else {
            *o++ = *s++;
        }
    }
    *o = '\0';
}

/* Checks that @mount is the root of an ecfs mount; prints why not. 0/-1. */
static int check_mount(const char *mount)
{
    char real[PATH_MAX], line[3 * PATH_MAX], type[64] = "";
    bool found = false;
    FILE *f;

    if (realpath(mount, real) == NULL) {
        fprintf(stderr, "ecfs stats: %s: %s%s\n", mount, strerror(errno),
                errno == ENOTCONN ? " (the ecfs daemon of that mount is gone)"
                                  : "");
        return -1;
    }
    f = fopen("/proc/self/mountinfo", "r");
    if (f == NULL) {
        fprintf(stderr, "ecfs stats: /proc/self/mountinfo: %s\n",
                strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - TYPE SRC ... */
        char *tok[5], *save = NULL, *p = line, *sep;
        int i;

        for (i = 0; i < 5; i++, p = NULL) {
            tok[i] = strtok_r(p, " ", &save);
            if (tok[i] == NULL)
                break;
        }
        sep = strstr(save ? save : "", " - ");
        if (i < 5 || sep == NULL)
            continue;
        unescape(tok[4]);
        if (strcmp(tok[4], real) != 0)
            continue;
        found = true; /* the last one wins: it is on top */
        if (sscanf(sep + 3, "%63s", type) != 1)
            type[0] = '\0';
    }
    fclose(f);
    if (!found) {
        fprintf(stderr,
                "ecfs stats: %s is not a mount point (give the "
                "directory ecfs mounted)\n",
                mount);
        return -1;
    }
    if (strcmp(type, "fuse.ecfs") != 0) {
        fprintf(stderr, "ecfs stats: %s is not an ecfs mount (it is %s)\n",
                mount, type);
        return -1;
    }
    return 0;
}

/* Reads and parses MOUNT/.ecfs-stats into @s; prints why not. 0/-1. */
static int sample(const char *mount, struct st_sample *s)
{
    char path[PATH_MAX], text[FC_STATS_CAP + 1], *line, *save = NULL;
    size_t len = 0;
    ssize_t r;
    int fd;

    snprintf(path, sizeof(path), "%s/%s", mount, FC_STATS_NAME);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            fprintf(stderr,
                    "ecfs stats: %s has no %s (mounted with -o "
                    "nostats, or an object of that name is at its root)\n",
                    mount, FC_STATS_NAME);
        else
            fprintf(stderr, "ecfs stats: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (len < FC_STATS_CAP &&
           (r = read(fd, text + len, FC_STATS_CAP - len)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            fprintf(stderr, "ecfs stats: %s: %s\n", path, strerror(errno));
            close(fd);
            return -1;
        }
        len += (size_t)r;
    }
    close(fd);
    clock_gettime(CLOCK_MONOTONIC, &s->at);
    text[len] = '\0';
    s->n = 0;
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' '), *end;

        if (sp == NULL || sp == line || (size_t)(sp - line) >= ST_NAME ||
            s->n == ST_MAX) {
            fprintf(stderr, "ecfs stats: %s: unexpected line \"%s\"\n", path,
                    line);
            return -1;
        }
        errno = 0;
        s->v[s->n] = strtoull(sp + 1, &end, 10);
        if (errno != 0 || end == sp + 1 || *end != '\0') {
            fprintf(stderr, "ecfs stats: %s: unexpected line \"%s\"\n", path,
                    line);
            return -1;
        }
        memcpy(s->name[s->n], line, (size_t)(sp - line));
        s->name[s->n][sp - line] = '\0';
        s->n++;
    }
    if (s->n == 0) {
        fprintf(stderr, "ecfs stats: %s is empty\n", path);
        return -1;
    }
    return 0;
}

static int width_of(const char *name)
{
    int w = (int)strlen(name);
    return w < 7 ? 7 : w;
}

static int watch(const char *mount, double secs, unsigned long count)
{
    static struct st_sample a, b;
    struct st_sample *prev = &a, *cur = &b, *t;
    struct timespec next;

    if (sample(mount, prev) < 0)
        return 1;
    for (unsigned i = 0; i < prev->n; i++)
        printf("%s%*s", i ? " " : "", width_of(prev->name[i]), prev->name[i]);
    putchar('\n');
    fflush(stdout);
    next = prev->at;
    for (unsigned long k = 0; count == 0 || k < count; k++) {
        double dt;

        /* absolute deadlines: the intervals do not drift */
        next.tv_sec += (time_t)secs;
        next.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
        if (next.tv_nsec >= 1000000000l) {
            next.tv_nsec -= 1000000000l;
            next.tv_sec++;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) ==
               EINTR)
            ;
        if (sample(mount, cur) < 0)
            return 1;
        if (cur->n != prev->n) {
            fprintf(stderr, "ecfs stats: the counters of %s changed\n", mount);
            return 1;
        }
        dt = (double)(cur->at.tv_sec - prev->at.tv_sec) +
             (double)(cur->at.tv_nsec - prev->at.tv_nsec) / 1e9;
        if (dt <= 0)
            dt = secs;
        for (unsigned i = 0; i < cur->n; i++) {
            double v;

            if (is_gauge(cur->name[i]))
                v = (double)cur->v[i];
            else if (cur->v[i] >= prev->v[i])
                v = (double)(cur->v[i] - prev->v[i]) / dt;
            else
                v = 0;
            printf("%s%*.0f", i ? " " : "", width_of(cur->name[i]), v);
        }
        putchar('\n');
        if (fflush(stdout) != 0)
            return 1;
        t = prev;
        prev = cur;
        cur = t;
    }
    return 0;
}

int fc_stats_main(int argc, char **argv)
{
    const char *mount = NULL;
    double secs = 0;
    unsigned long count = 0;
    static struct st_sample s;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char *end;

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-w") == 0 && i + 1 < argc) {
            errno = 0;
            secs = strtod(argv[++i], &end);
            if (errno != 0 || end == argv[i] || *end != '\0' || !(secs > 0) ||
                secs > 86400) {
                fprintf(stderr,
                        "ecfs stats: bad -w %s (seconds, more than "
                        "0)\n",
                        argv[i]);
                return 2;
            }
        } else if (strcmp(a, "-c") == 0 && i + 1 < argc) {
            errno = 0;
            count = strtoul(argv[++i], &end, 10);
            if (errno != 0 || end == argv[i] || *end != '\0' || count == 0 ||
                argv[i][0] == '-') {
                fprintf(stderr,
                        "ecfs stats: bad -c %s (a count, 1 or "
                        "more)\n",
                        argv[i]);
                return 2;
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "ecfs stats: unknown option %s (see --help)\n", a);
            return 2;
        } else if (mount == NULL) {
            mount = a;
        } else {
            fprintf(stderr, "ecfs stats: too many arguments (see --help)\n");
            return 2;
        }
    }
    if (mount == NULL) {
        usage(stderr);
        return 2;
    }
    if (count != 0 && secs == 0) {
        fprintf(stderr, "ecfs stats: -c needs -w\n");
        return 2;
    }
    if (check_mount(mount) < 0)
        return 1;
    if (secs > 0)
        return watch(mount, secs, count);
    if (sample(mount, &s) < 0)
        return 1;
    for (unsigned i = 0; i < s.n; i++)
        printf("%s %llu\n", s.name[i], (unsigned long long)s.v[i]);
    return fflush(stdout) == 0 ? 0 : 1;
}
