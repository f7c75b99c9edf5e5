/* tests/bench/pack_index_gen.c - writes the pack index `ecfs pack` would
 * write for N empty files in D folders ("dNNNNN/fNNNNNNNN", as
 * bench_pack_index.py's tree), in one shard of SHARD_BYTES bytes, without
 * making the files: for index loads past the inodes a machine can spare
 * (10^7). Built and run by bench_pack_index.py --synthetic, linked with
 * build/rel/libecfs.a (fc_pack_encode, the packer's own encoder).
 *
 * Usage: pack_index_gen N D SHARD_BYTES OUT */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuse/pack.h"

int main(int argc, char **argv)
{
    uint64_t n, d, per, shard_bytes, k = 0;
    struct fc_pmember *ms;
    struct fc_pshard sh;
    char *paths;
    size_t len;
    void *idx;
    FILE *f;

    if (argc != 5) {
        fprintf(stderr, "usage: pack_index_gen N D SHARD_BYTES OUT\n");
        return 2;
    }
    n = strtoull(argv[1], NULL, 10);
    d = strtoull(argv[2], NULL, 10);
    shard_bytes = strtoull(argv[3], NULL, 10);
    if (n == 0 || d == 0 || d > 99999 || n > 99999999 || shard_bytes < 512) {
        fprintf(stderr, "pack_index_gen: bad N, D or SHARD_BYTES\n");
        return 2;
    }
    per = (n + d - 1) / d;
    ms = calloc(n, sizeof(*ms));
    paths = malloc(n * 17);
    if (ms == NULL || paths == NULL) {
        fprintf(stderr, "pack_index_gen: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < d && k < n; i++)
        for (uint64_t j = 0; j < per && k < n; j++, k++) {
            /* "dNNNNN/fNNNNNNNN": 16 bytes + NUL, sorted as k grows */
            snprintf(paths + k * 17, 17, "d%05" PRIu64 "/f%08" PRIu64, i, k);
            ms[k].path_off = k * 17;
            ms[k].path_len = 16;
            ms[k].offset = 512; /* after its ustar header */
            ms[k].mtime_ns = 1700000000000000000ll;
            ms[k].mode = S_IFREG | 0644;
            ms[k].crc = 0; /* CRC-32C of no bytes */
        }
    memset(&sh, 0, sizeof(sh));
    sh.size = shard_bytes;
    idx = fc_pack_encode(0x5eed, 1700000000, 0, &sh, 1, ms, n, paths, n * 17,
                         &len);
    if (idx == NULL) {
        fprintf(stderr, "pack_index_gen: out of memory\n");
        return 1;
    }
    f = fopen(argv[4], "wb");
    if (f == NULL || fwrite(idx, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "pack_index_gen: %s: %s\n", argv[4], strerror(errno));
        return 1;
    }
    printf("%zu\n", len);
    free(idx);
    free(paths);
    free(ms);
    return 0;
}
