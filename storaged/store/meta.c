/* storaged/store/meta.c - encode, decode and read per-drive metadata records.
 *
 * Layout (little-endian), documented in storaged/FORMAT.md:
 *   "ECFSMET1" | u32 total length | u32 flags (0) | u64 crc64 of the record
 *   with this field zeroed | body fields ...
 * The decoder is bounds-checked field by field and safe on any input
 * (fuzzed by tests/fuzz/fuzz_meta.c); the CRC is checked first. */
#include "storaged/store/meta.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- encoding ---- */

/* Appends one byte. 0 or -ENOMEM/-E2BIG. */
static int put_u8(struct cm_buf *b, unsigned v)
{
    uint8_t c = (uint8_t)v;

    return cm_buf_append(b, &c, 1);
}

/* Appends @v as @bytes little-endian bytes. */
static int put_le(struct cm_buf *b, uint64_t v, int bytes)
{
    uint8_t t[8];

    for (int i = 0; i < bytes; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    return cm_buf_append(b, t, bytes);
}

/* Appends a @lenbytes length prefix and the bytes. */
static int put_str(struct cm_buf *b, const void *s, size_t n, int lenbytes)
{
    int ret = put_le(b, n, lenbytes);

    if (ret == 0 && n > 0)
        ret = cm_buf_append(b, s, n);
    return ret;
}

/* Contract in meta.h: fields in order, then the length and CRC are patched
 * in. */
int stor_meta_encode(const struct stor_meta *m, struct cm_buf *out)
{
    size_t start = out->len;
    uint64_t crc;
    int ret = 0;

    ret |= cm_buf_append(out, STOR_META_MAGIC, 8);
    ret |= put_le(out, 0, 4); /* length, patched below */
    ret |= put_le(out, 0, 4);
    ret |= put_le(out, 0, 8); /* crc, patched below */
    ret |= put_u8(out, (unsigned)m->type);
    ret |= put_u8(out, (unsigned)m->k);
    ret |= put_u8(out, (unsigned)m->m);
    ret |= put_u8(out, (unsigned)m->shard);
    ret |= put_le(out, m->block, 4);
    ret |= put_le(out, m->version, 8);
    ret |= put_le(out, (uint64_t)m->mtime_ns, 8);
    ret |= put_le(out, m->size, 8);
    ret |= put_str(out, m->etag, strlen(m->etag), 1);
    ret |= put_str(out, m->key, m->key_len, 2);
    ret |= put_le(out, m->nhdrs, 2);
    for (size_t i = 0; i < m->nhdrs && ret == 0; i++) {
        ret |= put_str(out, m->hdrs[i].name, strlen(m->hdrs[i].name), 2);
        ret |= put_str(out, m->hdrs[i].value, strlen(m->hdrs[i].value), 4);
    }
    ret |= put_le(out, m->nparts, 2);
    for (size_t i = 0; i < m->nparts && ret == 0; i++) {
        ret |= put_le(out, (uint64_t)m->parts[i].number, 4);
        ret |= put_le(out, m->parts[i].size, 8);
        ret |= put_le(out, m->parts[i].dataid, 8);
        ret |= put_str(out, m->parts[i].etag, strlen(m->parts[i].etag), 1);
    }
    if (m->has_inline && m->has_xref) { /* 2: the shard is in an extent */
        ret |= put_u8(out, 2);
        ret |= put_le(out, m->xfile, 4);
        ret |= put_le(out, m->xoff, 8);
        ret |= put_le(out, m->inl_len, 4);
    } else {
        ret |= put_u8(out, m->has_inline ? 1 : 0);
        if (m->has_inline)
            ret |= put_str(out, m->inl, m->inl_len, 4);
    }
    if (ret != 0 || out->data == NULL)
        return -ENOMEM; /* cm_buf emptied itself */
    {
        uint8_t *p = (uint8_t *)out->data + start;
        size_t n = out->len - start;

        for (int i = 0; i < 4; i++)
            p[8 + i] = (uint8_t)(n >> (8 * i));
        crc = stor_crc64(0, p, n);
        for (int i = 0; i < 8; i++)
            p[16 + i] = (uint8_t)(crc >> (8 * i));
    }
    return 0;
}

/* Contract in meta.h: must mirror stor_meta_encode field by field. */
size_t stor_meta_encoded_size(const struct stor_meta *m)
{
    size_t n = STOR_META_HDR + 4 + 4 + 8 + 8 + 8;

    n += 1 + strlen(m->etag) + 2 + m->key_len + 2;
    for (size_t i = 0; i < m->nhdrs; i++)
        n += 2 + strlen(m->hdrs[i].name) + 4 + strlen(m->hdrs[i].value);
    n += 2;
    for (size_t i = 0; i < m->nparts; i++)
        n += 4 + 8 + 8 + 1 + strlen(m->parts[i].etag);
    n += 1;
    if (m->has_inline && m->has_xref)
        n += 4 + 8 + 4;
    else if (m->has_inline)
        n += 4 + m->inl_len;
    return n;
}

/* ---- decoding ---- */

struct rd {
    const uint8_t *p;
    size_t n, off;
    int bad;
};

/* Reads a little-endian integer; marks the reader bad when short. */
static uint64_t get_le(struct rd *r, int bytes)
{
    uint64_t v = 0;

    if (r->bad || r->n - r->off < (size_t)bytes) {
        r->bad = 1;
        return 0;
    }
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | r->p[r->off + i];
    r->off += bytes;
    return v;
}

/* Returns a malloc'd NUL-terminated copy of a length-prefixed field. */
static char *get_str(struct rd *r, int lenbytes, size_t *len_out, int nul_ok)
{
    size_t n = (size_t)get_le(r, lenbytes);
    char *s;

    if (r->bad || r->n - r->off < n) {
        r->bad = 1;
        return NULL;
    }
    if (!nul_ok && memchr(r->p + r->off, 0, n) != NULL) {
        r->bad = 1;
        return NULL;
    }
    s = malloc(n + 1);
    if (s == NULL) {
        r->bad = 2;
        return NULL;
    }
    memcpy(s, r->p + r->off, n);
    s[n] = 0;
    r->off += n;
    if (len_out)
        *len_out = n;
    return s;
}

/* Reads a 1-byte-length string into a fixed buffer (NUL-free). */
static void get_fixed(struct rd *r, char *dst, size_t cap)
{
    size_t n = (size_t)get_le(r, 1);

    if (r->bad || r->n - r->off < n || n >= cap) {
        r->bad = 1;
        return;
    }
    memcpy(dst, r->p + r->off, n);
    dst[n] = 0;
    if (memchr(dst, 0, n) != NULL)
        r->bad = 1;
    r->off += n;
}

static int meta_decode(const void *p, size_t n, struct stor_meta *m, bool view);

/* Contract in meta.h: CRC first, then every field bounds-checked. */
int stor_meta_decode(const void *p, size_t n, struct stor_meta *m)
{
    return meta_decode(p, n, m, false);
}

/* Contract in meta.h. */
int stor_meta_decode_view(const void *p, size_t n, struct stor_meta *m)
{
    return meta_decode(p, n, m, true);
}

/* Both decoders; @view leaves the inline shard in @p. */
static int meta_decode(const void *p, size_t n, struct stor_meta *m, bool view)
{
    struct rd r = {.p = p, .n = n};
    uint8_t hdr[STOR_META_HDR];
    uint64_t crc, want;
    size_t len;

    memset(m, 0, sizeof(*m));
    if (n < STOR_META_HDR + 36 || memcmp(p, STOR_META_MAGIC, 8) != 0)
        return -EBADMSG;
    r.off = 8;
    len = (size_t)get_le(&r, 4);
    if (len != n)
        return -EBADMSG;
    (void)get_le(&r, 4);
    want = get_le(&r, 8);
    memcpy(hdr, p, STOR_META_HDR);
    memset(hdr + 16, 0, 8);
    crc = stor_crc64(0, hdr, STOR_META_HDR);
    crc =
        stor_crc64(crc, (const uint8_t *)p + STOR_META_HDR, n - STOR_META_HDR);
    if (crc != want)
        return -EBADMSG;
    m->type = (int)get_le(&r, 1);
    m->k = (int)get_le(&r, 1);
    m->m = (int)get_le(&r, 1);
    m->shard = (int)get_le(&r, 1);
    m->block = (uint32_t)get_le(&r, 4);
    m->version = get_le(&r, 8);
    m->mtime_ns = (int64_t)get_le(&r, 8);
    m->size = get_le(&r, 8);
    get_fixed(&r, m->etag, sizeof(m->etag));
    m->key = get_str(&r, 2, &m->key_len, 1);
    m->nhdrs = (size_t)get_le(&r, 2);
    if (!r.bad && m->nhdrs > 0) {
        m->hdrs = calloc(m->nhdrs, sizeof(*m->hdrs));
        if (m->hdrs == NULL)
            r.bad = 2;
    }
    for (size_t i = 0; i < m->nhdrs && !r.bad; i++) {
        m->hdrs[i].name = get_str(&r, 2, NULL, 0);
        m->hdrs[i].value = get_str(&r, 4, NULL, 0);
    }
    m->nparts = r.bad ? 0 : (size_t)get_le(&r, 2);
    if (!r.bad && m->nparts > STOR_MAX_PARTS)
        r.bad = 1;
    if (!r.bad && m->nparts > 0) {
        m->parts = calloc(m->nparts, sizeof(*m->parts));
        if (m->parts == NULL)
            r.bad = 2;
    }
    for (size_t i = 0; i < m->nparts && !r.bad; i++) {
        m->parts[i].number = (int)get_le(&r, 4);
        m->parts[i].size = get_le(&r, 8);
        m->parts[i].dataid = get_le(&r, 8);
        get_fixed(&r, m->parts[i].etag, sizeof(m->parts[i].etag));
    }
    m->has_inline = (int)get_le(&r, 1);
    if (!r.bad && m->has_inline == 2) { /* an extent reference */
        m->has_inline = 1;
        m->has_xref = 1;
        m->xfile = (uint32_t)get_le(&r, 4);
        m->xoff = get_le(&r, 8);
        m->inl_len = (size_t)get_le(&r, 4);
        if (m->xfile == 0)
            r.bad = 1;
    } else if (!r.bad && m->has_inline > 1) {
        r.bad = 1;
    } else if (!r.bad && m->has_inline && view) {
        size_t il = (size_t)get_le(&r, 4);

        if (r.bad || r.n - r.off < il) {
            r.bad = 1;
        } else {
            m->inl_ref = r.p + r.off;
            m->inl_len = il;
            r.off += il;
        }
    } else if (!r.bad && m->has_inline) {
        m->inl = (uint8_t *)get_str(&r, 4, &m->inl_len, 1);
        m->inl_ref = m->inl;
    }
    if (!r.bad &&
        (m->type < STOR_META_OBJECT || m->type > STOR_META_UPLOAD || m->k < 1 ||
         m->m < 0 || m->k + m->m > 32 || m->shard >= m->k + m->m || r.off != n))
        r.bad = 1;
    if (r.bad) {
        int ret = r.bad == 2 ? -ENOMEM : -EBADMSG;

        stor_meta_fini(m);
        return ret;
    }
    return 0;
}

/* Frees what decode allocated and zeroes the record. */
void stor_meta_fini(struct stor_meta *m)
{
    free(m->key);
    for (size_t i = 0; i < m->nhdrs && m->hdrs; i++) {
        free(m->hdrs[i].name);
        free(m->hdrs[i].value);
    }
    free(m->hdrs);
    free(m->parts);
    free(m->inl);
    memset(m, 0, sizeof(*m));
}

/* One open, one fstat, one read (the whole record). */
int stor_meta_read_file(const char *path, struct stor_meta *m)
{
    struct stat st;
    uint8_t *p;
    ssize_t got;
    int fd, ret;

    memset(m, 0, sizeof(*m));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        ret = -errno;
        goto out_close;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < STOR_META_HDR ||
        st.st_size > STOR_META_MAX) {
        ret = -EBADMSG;
        goto out_close;
    }
    p = malloc((size_t)st.st_size);
    if (p == NULL) {
        ret = -ENOMEM;
        goto out_close;
    }
    got = pread(fd, p, (size_t)st.st_size, 0);
    if (got < 0)
        ret = -errno;
    else if (got != st.st_size)
        ret = -EBADMSG;
    else
        ret = stor_meta_decode(p, (size_t)got, m);
    free(p);
out_close:
    close(fd);
    return ret;
}
