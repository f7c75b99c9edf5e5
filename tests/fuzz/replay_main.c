/* tests/fuzz/replay_main.c - runs a libFuzzer target over saved inputs
 * without libFuzzer, so `make replay` (and `make check` under gcc with
 * ASan/UBSan) re-executes every corpus file as a regression test.
 *
 * Usage: replay-fuzz_NAME PATH...   (each PATH a file or a directory whose
 * regular files are all fed, in name order). Exits non-zero if a path
 * cannot be read; a crash in the target aborts as usual. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

/* Feeds one file to the target in an exactly-sized heap buffer (so ASan
 * sees reads past the end). Returns 0 or -errno. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;
    int ret = 0;

    if (f == NULL)
        return -errno;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        ret = -EIO;
        goto out_close;
    }
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL) {
        ret = -ENOMEM;
        goto out_close;
    }
    if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)
        ret = -EIO;
    else
        LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
out_close:
    fclose(f);
    return ret;
}

/* scandir filter: skip dot entries. */
static int not_dot(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

/* Replays @path (file or directory). Returns the number of inputs run, or
 * -errno. */
static long replay_path(const char *path)
{
    struct dirent **ents;
    struct stat st;
    long count = 0;
    int i, n, ret;

    if (stat(path, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode)) {
        ret = replay_file(path);
        return ret < 0 ? ret : 1;
    }
    n = scandir(path, &ents, not_dot, alphasort);
    if (n < 0)
        return -errno;
    for (i = 0; i < n; i++) {
        char sub[4096];
        if (count >= 0) {
            snprintf(sub, sizeof(sub), "%s/%s", path, ents[i]->d_name);
            if (stat(sub, &st) == 0 && S_ISREG(st.st_mode)) {
                ret = replay_file(sub);
                count = ret < 0 ? ret : count + 1;
            }
        }
        free(ents[i]);
    }
    free(ents);
    return count;
}

int main(int argc, char **argv)
{
    long total = 0;
    int i;

    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (i = 1; i < argc; i++) {
        long n = replay_path(argv[i]);
        if (n < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror((int)-n));
            return 1;
        }
        total += n;
    }
    printf("replay: %s: %ld inputs OK\n", argv[0], total);
    return 0;
}
