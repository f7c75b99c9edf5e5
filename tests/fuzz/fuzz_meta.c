/* tests/fuzz/fuzz_meta.c - libFuzzer target for the on-disk meta record
 * decoder (storaged/store/meta.c), which reads files a damaged disk may have
 * garbled. Besides "no crash", it checks that a record that decodes
 * re-encodes to exactly the same bytes, and that a valid record with any
 * one byte changed is rejected (the CRC-64 catches it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "storaged/store/meta.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct stor_meta m;
    struct cm_buf b;

    {
        /* the view decoder accepts exactly what the copying one does, and
         * points at the same inline bytes */
        struct stor_meta a, w;
        int ra = stor_meta_decode(data, size, &a);
        int rw = stor_meta_decode_view(data, size, &w);

        CHECK((ra == 0) == (rw == 0));
        if (ra == 0 && a.has_xref) { /* an extent reference: no bytes */
            CHECK(w.has_xref && a.inl_len == w.inl_len && a.xfile != 0 &&
                  a.xfile == w.xfile && a.xoff == w.xoff);
            CHECK(a.inl == NULL && a.inl_ref == NULL && w.inl_ref == NULL);
        } else if (ra == 0) {
            CHECK(!w.has_xref);
            CHECK(a.inl_len == w.inl_len && w.inl == NULL);
            CHECK(a.inl_len == 0 ||
                  memcmp(a.inl_ref, w.inl_ref, a.inl_len) == 0);
            CHECK(w.inl_ref == NULL ||
                  (w.inl_ref >= data && w.inl_ref + w.inl_len <= data + size));
        }
        stor_meta_fini(&a);
        stor_meta_fini(&w);
    }
    if (stor_meta_decode(data, size, &m) == 0) {
        cm_buf_init(&b, STOR_META_MAX);
        CHECK(stor_meta_encode(&m, &b) == 0);
        CHECK(b.len == size && memcmp(b.data, data, size) == 0);
        CHECK(stor_meta_encoded_size(&m) == size);
        cm_buf_fini(&b);
        stor_meta_fini(&m);
        return 0;
    }
    /* Build a valid record from the input and flip one byte of it. */
    if (size >= 4) {
        struct stor_meta v = {0};
        char hname[] = "content-type", hvalue[] = "image/jpeg";
        struct stor_hdr h = {hname, hvalue};
        struct stor_meta_part p = {1, 5, 6, "abc"};
        size_t at;

        v.type = STOR_META_OBJECT;
        v.k = 1 + data[0] % 12;
        v.m = data[1] % 5;
        v.shard = data[2] % (v.k + v.m);
        v.version = size;
        v.key = CM_UNCONST(char *, data); /* encode only reads v */
        v.key_len = size > 1024 ? 1024 : size;
        v.hdrs = &h;
        v.nhdrs = data[3] & 1;
        v.parts = &p;
        v.nparts = (data[3] >> 1) & 1;
        v.has_inline = (data[3] >> 2) & 1;
        v.inl = CM_UNCONST(uint8_t *, data);
        v.inl_len = size;
        v.has_xref = v.has_inline && (data[3] >> 3) & 1; /* FORMAT.md flag 2 */
        v.xfile = 1u + data[0];
        v.xoff = (uint64_t)size << 12;
        cm_buf_init(&b, STOR_META_MAX);
        CHECK(stor_meta_encode(&v, &b) == 0);
        CHECK(stor_meta_decode(b.data, b.len, &m) == 0);
        CHECK(m.key_len == v.key_len && memcmp(m.key, v.key, v.key_len) == 0);
        stor_meta_fini(&m);
        at = (size_t)data[1] * 131 % b.len;
        b.data[at] ^= (char)(1 + data[2] % 255);
        CHECK(stor_meta_decode(b.data, b.len, &m) != 0);
        cm_buf_fini(&b);
    }
    return 0;
}
