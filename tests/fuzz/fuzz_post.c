/* tests/fuzz/fuzz_post.c - libFuzzer target for POST Object's parsers
 * (storaged/s3/post.c), which read a browser's form. The first byte picks:
 *
 * even: the multipart/form-data parser. The input's first line is the
 *   Content-Type (its boundary), the rest the body. Properties: the same
 *   events (parts with their name and filename, data, part ends), the same
 *   result and the same end state come out whether the body is fed whole,
 *   byte by byte, or in chunks sized from the input, and with a pause
 *   after each part's header block (STOR_MP_PAUSE) resumed at once; the
 *   data never exceeds the body.
 * odd: the POST policy checker, the rest as the decoded policy against a
 *   fixed form. Properties: one of the three answers; a refusal says why;
 *   a content-length-range has min <= max. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "storaged/s3/post.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

struct run {
    struct cm_buf ev; /* the events, serialised */
    bool pause;       /* answer STOR_MP_PAUSE to every part */
    size_t data;      /* data bytes seen */
};

/* Appends one event: type, length, bytes. */
static void ev(struct run *r, char type, const void *p, size_t n)
{
    CHECK(cm_buf_appendc(&r->ev, type) == 0);
    CHECK(cm_buf_append(&r->ev, &n, sizeof(n)) == 0);
    CHECK(n == 0 || cm_buf_append(&r->ev, p, n) == 0);
}

static int ev_part(void *arg, const struct stor_mp_part *p)
{
    struct run *r = arg;

    CHECK(p->name && p->name_len > 0);
    ev(r, 'P', p->name, p->name_len);
    if (p->filename)
        ev(r, 'F', p->filename, p->filename_len);
    if (p->ctype)
        ev(r, 'T', p->ctype, p->ctype_len);
    return r->pause ? STOR_MP_PAUSE : 0;
}

static int ev_data(void *arg, const char *p, size_t n)
{
    struct run *r = arg;

    CHECK(n > 0);
    r->data += n;
    ev(r, 'D', p, n);
    return 0;
}

static int ev_end(void *arg)
{
    ev(arg, 'E', NULL, 0);
    return 0;
}

static const struct stor_mp_cb cbs = {
    .part = ev_part, .data = ev_data, .part_end = ev_end};

/* Feeds @body in chunks of @chunk bytes (0: whole); returns the result
 * (0, or the first negative) and fills @r. */
static int run_mp(const char *boundary, const char *body, size_t n,
                  size_t chunk, bool pause, struct run *r)
{
    static struct stor_mp m; /* large: not on the stack */
    size_t off = 0;

    stor_mp_init(&m, boundary);
    cm_buf_init(&r->ev, CM_BUF_NOLIMIT);
    r->pause = pause;
    r->data = 0;
    while (off < n) {
        size_t take = chunk ? chunk : n - off;
        ssize_t used;

        if (take > n - off)
            take = n - off;
        used = stor_mp_feed(&m, body + off, take, &cbs, r);
        if (used < 0)
            return (int)used;
        CHECK((size_t)used <= take);
        CHECK(pause || (size_t)used == take);
        CHECK(used > 0 || take == 0);
        off += (size_t)used;
    }
    ev(r, '#', stor_mp_done(&m) ? "done" : "open", 4);
    return 0;
}

/* Rewrites @b with each run of adjacent data events joined into one, so
 * that differently chunked runs compare equal. */
static void normalise(struct cm_buf *b)
{
    struct run o;
    struct cm_buf data;
    size_t i = 0;

    cm_buf_init(&o.ev, CM_BUF_NOLIMIT);
    cm_buf_init(&data, CM_BUF_NOLIMIT);
    while (i < b->len) {
        char type = b->data[i];
        size_t n;

        CHECK(b->len - i >= 1 + sizeof(n));
        memcpy(&n, b->data + i + 1, sizeof(n));
        CHECK(b->len - i - 1 - sizeof(n) >= n);
        if (type == 'D') {
            CHECK(cm_buf_append(&data, b->data + i + 1 + sizeof(n), n) == 0);
        } else {
            if (data.len)
                ev(&o, 'D', data.data, data.len);
            cm_buf_reset(&data);
            ev(&o, type, b->data + i + 1 + sizeof(n), n);
        }
        i += 1 + sizeof(n) + n;
    }
    if (data.len)
        ev(&o, 'D', data.data, data.len);
    cm_buf_fini(&data);
    cm_buf_fini(b);
    *b = o.ev;
}

static void fuzz_mp(const uint8_t *data, size_t size)
{
    char boundary[STOR_MP_BOUNDARY_MAX + 1];
    const char *nl = memchr(data, '\n', size);
    const char *body;
    size_t blen, chunk;
    struct run a, b, c, d;
    int ra, rb, rc, rd;

    if (nl == NULL)
        return;
    if (stor_mp_boundary((const char *)data, (size_t)(nl - (const char *)data),
                         boundary) < 0)
        return;
    CHECK(strlen(boundary) > 0 && strlen(boundary) <= STOR_MP_BOUNDARY_MAX);
    body = nl + 1;
    blen = size - (size_t)(body - (const char *)data);
    chunk = size > 1 ? (size_t)data[size - 1] % 23 + 1 : 1;
    ra = run_mp(boundary, body, blen, 0, false, &a);
    rb = run_mp(boundary, body, blen, 1, false, &b);
    rc = run_mp(boundary, body, blen, chunk, false, &c);
    rd = run_mp(boundary, body, blen, 0, true, &d);
    CHECK(ra == rb && ra == rc && ra == rd);
    CHECK(ra == 0 || ra == -EBADMSG);
    CHECK(a.data <= blen && a.data == b.data && a.data == c.data &&
          a.data == d.data);
    normalise(&a.ev);
    normalise(&b.ev);
    normalise(&c.ev);
    normalise(&d.ev);
    CHECK(a.ev.len == b.ev.len && a.ev.len == c.ev.len && a.ev.len == d.ev.len);
    CHECK(a.ev.len == 0 || (memcmp(a.ev.data, b.ev.data, a.ev.len) == 0 &&
                            memcmp(a.ev.data, c.ev.data, a.ev.len) == 0 &&
                            memcmp(a.ev.data, d.ev.data, a.ev.len) == 0));
    cm_buf_fini(&a.ev);
    cm_buf_fini(&b.ev);
    cm_buf_fini(&c.ev);
    cm_buf_fini(&d.ev);
}

static void fuzz_policy(const uint8_t *data, size_t size)
{
    static struct stor_post_form f; /* large: not on the stack */
    struct stor_post_limits lim;
    char why[256];
    enum stor_s3_err e;

    memset(&f, 0, sizeof(f));
    CHECK(stor_post_form_add(&f, "key", 3, "foo.txt", 7) == 0);
    CHECK(stor_post_form_add(&f, "acl", 3, "private", 7) == 0);
    CHECK(stor_post_form_add(&f, "Content-Type", 12, "text/plain", 10) == 0);
    CHECK(stor_post_form_add(&f, "x-amz-meta-a", 12, "", 0) == 0);
    CHECK(stor_post_form_add(&f, "policy", 6, "e30=", 4) == 0);
    e = stor_post_policy_check((const char *)data, size, 1700000000, &f,
                               "bucket", "foo.txt", &lim, why, sizeof(why));
    CHECK(e == S3E_NONE || e == S3E_POST_BAD_POLICY || e == S3E_ACCESS_DENIED);
    CHECK(e != S3E_ACCESS_DENIED || why[0] != 0);
    CHECK(lim.min <= lim.max);
    stor_post_form_fini(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_policy(data + 1, size - 1);
    else
        fuzz_mp(data + 1, size - 1);
    return 0;
}
