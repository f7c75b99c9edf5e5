/* tests/fuzz/fuzz_dcache.c - libFuzzer target for the disk cache's files
 * (fuse/dcache.c, -o cache_dir): its segment and index parser at open and
 * its record checks at every read, fed by whatever a crash, a full disk or
 * another program left in DIR/v2. A pristine cache of four blocks (a small
 * one, one read with O_DIRECT, a tiny one, one dropped after its store) is
 * made once; each input is a list of 6-byte edits of its two files (u8
 * what: 0 flip an index byte, 1 flip a segment byte, 2 cut the index, 3
 * cut the segment, 4 append to the index; u32 where; u8 value), written
 * out before an open. Besides "no crash": a read of each block either
 * misses or gives exactly its bytes, never other ones; a block stored
 * after the damaged open reads back. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse/cache.h"
#include "fuse/dcache.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

#define NBLK 4
static const size_t g_len[NBLK] = {5000, 300 << 10, 77, 9000};
static char g_dir[64], g_idx[128], g_seg[128];
static char *g_data[NBLK];
static char *g_img[2]; /* the pristine index and segment */
static size_t g_imglen[2];

static void key_of(int i, char *out, size_t cap)
{
    snprintf(out, cap, "k%d/block", i);
}

static struct fc_dcache *open_dc(void)
{
    struct fc_dcache_conf c = {
        .dir = g_dir, .max_bytes = 1 << 30, .endpoint = "e", .bucket = "b"};
    struct fc_dcache *dc = NULL;

    CHECK(fc_dcache_open(&c, &dc) == 0);
    return dc;
}

static char *slurp(const char *path, size_t *len)
{
    struct stat st;
    char *p;
    int fd = open(path, O_RDONLY);

    CHECK(fd >= 0 && fstat(fd, &st) == 0);
    p = malloc((size_t)st.st_size + 1);
    CHECK(p != NULL);
    CHECK(pread(fd, p, (size_t)st.st_size, 0) == st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return p;
}

static void spill(const char *path, const char *p, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    CHECK(fd >= 0);
    CHECK(len == 0 || write(fd, p, len) == (ssize_t)len);
    close(fd);
}

/* Removes every file of DIR/v2 but the pair under test. */
static void clean_v2(void)
{
    char path[400];
    DIR *d;
    struct dirent *de;

    snprintf(path, sizeof(path), "%s/v2", g_dir);
    d = opendir(path);
    CHECK(d != NULL);
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/v2/%s", g_dir, de->d_name);
        unlink(path);
    }
    closedir(d);
}

static void setup_once(void)
{
    struct fc_dcache *dc;

    snprintf(g_dir, sizeof(g_dir), "/tmp/fuzz_dcache.XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_idx, sizeof(g_idx), "%s/v2/00000001.idx", g_dir);
    snprintf(g_seg, sizeof(g_seg), "%s/v2/00000001.seg", g_dir);
    dc = open_dc();
    for (int i = 0; i < NBLK; i++) {
        char key[32];
        g_data[i] = fc_cache_buf_alloc(g_len[i]);
        CHECK(g_data[i] != NULL);
        for (size_t j = 0; j < g_len[i]; j++)
            g_data[i][j] = (char)(j * 31 + (size_t)i * 7 + j / 4096);
        key_of(i, key, sizeof(key));
        fc_dcache_put(dc, key, "\"etag\"", 0, i == 1 ? 1 << 20 : 0, g_data[i],
                      g_len[i]);
    }
    {
        char key[32];
        key_of(3, key, sizeof(key));
        fc_dcache_drop(dc, key, "\"etag\"", 0, 1);
    }
    fc_dcache_close(dc);
    g_img[0] = slurp(g_idx, &g_imglen[0]);
    g_img[1] = slurp(g_seg, &g_imglen[1]);
}

static void cleanup(void)
{
    char cmd[128];

    if (g_dir[0] == '\0')
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_dcache: cannot remove %s\n", g_dir);
}

/* Applies the edits of @data to copies of the pristine files. */
static void write_damaged(const uint8_t *data, size_t size)
{
    size_t cap[2] = {g_imglen[0] + 4096, g_imglen[1]};
    size_t len[2] = {g_imglen[0], g_imglen[1]};
    char *f[2];

    for (int i = 0; i < 2; i++) {
        f[i] = malloc(cap[i] + 1);
        CHECK(f[i] != NULL);
        memcpy(f[i], g_img[i], len[i]);
    }
    for (size_t k = 0; k + 6 <= size; k += 6) {
        unsigned what = data[k] % 5;
        uint32_t at;
        uint8_t v = data[k + 5];
        memcpy(&at, data + k + 1, 4);
        if (what <= 1 && len[what] > 0)
            f[what][at % len[what]] ^= (char)(v ? v : 1);
        else if (what == 2 || what == 3)
            len[what - 2] = len[what - 2] ? at % len[what - 2] : 0;
        else if (what == 4 && len[0] < cap[0])
            f[0][len[0]++] = (char)v;
    }
    clean_v2();
    spill(g_idx, f[0], len[0]);
    spill(g_seg, f[1], len[1]);
    free(f[0]);
    free(f[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_dcache *dc;
    char key[32], *got;
    size_t n;

    if (g_dir[0] == '\0') {
        setup_once();
        atexit(cleanup);
    }
    write_damaged(data, size);
    dc = open_dc();
    for (int i = 0; i < NBLK; i++) {
        key_of(i, key, sizeof(key));
        if (fc_dcache_get(dc, key, "\"etag\"", 0, i == 1 ? 1 << 20 : 0, 1 << 20,
                          &got, &n) == 0) {
            /* a hit is exactly the block's bytes */
            CHECK(n == g_len[i] && memcmp(got, g_data[i], n) == 0);
            fc_cache_buf_free(got);
        }
    }
    fc_dcache_put(dc, "after", "\"etag\"", 0, 0, g_data[0], g_len[0]);
    CHECK(fc_dcache_get(dc, "after", "\"etag\"", 0, 0, 1 << 20, &got, &n) == 0);
    CHECK(n == g_len[0] && memcmp(got, g_data[0], n) == 0);
    fc_cache_buf_free(got);
    fc_dcache_close(dc);
    return 0;
}
