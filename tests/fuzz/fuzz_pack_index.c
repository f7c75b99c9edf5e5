/* tests/fuzz/fuzz_pack_index.c - libFuzzer target for the pack index
 * decoder (fuse/pack.c), which reads an object anyone with write access to
 * the bucket may have garbled. Besides "no crash", a decoded index must be
 * a consistent tree (every child found again by name under its directory,
 * every file inside its shard), and a valid index built from the input with
 * one byte changed must be rejected (the CRC-32C catches it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuse/pack.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

static void check_tree(const struct fc_pack *p)
{
    for (uint64_t d = 0; d < p->ndirs; d++) {
        const struct fc_pdir *dir = &p->dirs[d];
        for (uint32_t i = 0; i < dir->n; i++) {
            uint32_t id = p->kids[dir->first + i];
            char name[FC_PACK_NAME_MAX + 1];
            size_t n;
            const char *s = fc_pack_node_name(p, id, &n);
            CHECK(n > 0 && n <= FC_PACK_NAME_MAX);
            memcpy(name, s, n);
            name[n] = '\0';
            CHECK(fc_pack_lookup(p, d, name) == id);
        }
    }
    for (uint64_t i = 0; i < p->nmembers; i++) {
        const struct fc_pmember *m = &p->members[i];
        if (S_ISREG(m->mode))
            CHECK(m->shard < p->nshards &&
                  m->offset + m->size <= p->shards[m->shard].size);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_pack *p = NULL;
    const char *why;

    /* the pack reads the index in place: an aligned copy it owns */
    void *copy = malloc(size ? size : 1);
    CHECK(copy != NULL);
    memcpy(copy, data, size);
    if (fc_pack_decode(copy, size, FC_PACK_FREE, &p, &why) == 0) {
        check_tree(p);
        fc_pack_free(p);
        return 0;
    }
    /* A valid index with paths cut from the input, then one byte flipped. */
    if (size >= 2 && size < 2000) {
        struct fc_pshard sh = {.size = 1u << 20, .etag = "\"e\""};
        struct fc_pmember m[8];
        char paths[2100];
        uint64_t plen = 0, nm = 0;
        size_t len, at;
        void *idx;

        for (size_t i = 0; i < size && nm < 8; i++) {
            char c = 'a' + (char)(data[i] % 26);
            paths[plen] = c;
            paths[plen + 1] = '\0';
            m[nm] = (struct fc_pmember){.path_off = plen,
                                        .path_len = 1,
                                        .mode = S_IFREG | 0644,
                                        .size = data[i],
                                        .offset = 512};
            if (nm == 0 || paths[m[nm - 1].path_off] < c) {
                plen += 2;
                nm++;
            }
        }
        idx = fc_pack_encode(1, 2, 0, &sh, 1, m, nm, paths, plen, &len);
        CHECK(idx != NULL);
        CHECK(fc_pack_decode(idx, len, FC_PACK_BORROW, &p, &why) == 0);
        check_tree(p);
        fc_pack_free(p);
        at = (size_t)data[0] * 7 % len;
        ((unsigned char *)idx)[at] ^= (unsigned char)(data[1] | 1);
        CHECK(fc_pack_decode(idx, len, FC_PACK_BORROW, &p, &why) != 0);
        free(idx);
    }
    return 0;
}
