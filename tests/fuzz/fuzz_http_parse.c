/* tests/fuzz/fuzz_http_parse.c - libFuzzer target for storaged's HTTP
 * request-head parser and its chunked / aws-chunked body decoder.
 * Properties besides "no crash": every string the head parser returns lies
 * inside the input, the header count stays within the caller's capacity,
 * a successful parse consumes at most the input; the chunk decoder gives
 * the same bytes, events and verdict whether the input arrives whole or
 * split into pieces (resumability), and never reports more data than it
 * consumed. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "storaged/http/parse.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

static int inside(const char *base, size_t size, const char *p, size_t n)
{
    return p >= base && n <= size && (size_t)(p - base) <= size - n;
}

static void fuzz_head(const char *in, size_t n)
{
    struct stor_http_hdr hdrs[16];
    struct stor_http_head h = {.hdrs = hdrs, .nhdrs = 16};
    int ret = stor_http_parse_head(in, n, &h);
    size_t i;

    if (ret < 0) {
        CHECK(ret == -EAGAIN || ret == -EBADMSG || ret == -E2BIG);
        return;
    }
    CHECK((size_t)ret <= n);
    CHECK(h.nhdrs <= 16);
    CHECK(inside(in, (size_t)ret, h.method, h.method_len));
    CHECK(inside(in, (size_t)ret, h.target, h.target_len));
    CHECK(h.method_len > 0 && h.target_len > 0);
    for (i = 0; i < h.nhdrs; i++) {
        CHECK(inside(in, (size_t)ret, hdrs[i].name, hdrs[i].name_len));
        CHECK(inside(in, (size_t)ret, hdrs[i].value, hdrs[i].value_len));
        CHECK(hdrs[i].name_len > 0);
    }
}

struct out {
    struct cm_buf data, events;
};

static int on_data(void *arg, const char *p, size_t n)
{
    struct out *o = arg;

    return cm_buf_append(&o->data, p, n);
}

static int on_end(void *arg, const char *ext, size_t n, uint64_t size)
{
    struct out *o = arg;

    return cm_buf_appendf(&o->events, "E%llu:%.*s|", (unsigned long long)size,
                          (int)n, ext);
}

static int on_trailer(void *arg, const char *nm, size_t nl, const char *v,
                      size_t vl)
{
    struct out *o = arg;

    return cm_buf_appendf(&o->events, "T%.*s=%.*s|", (int)nl, nm, (int)vl, v);
}

/* Decodes in pieces of @step (0 = whole); returns consumed or -errno. */
static long run_chunks(const char *in, size_t n, size_t step, struct out *o,
                       int *done)
{
    struct stor_chunk_dec d;
    struct stor_chunk_cb cb = {on_data, on_end, on_trailer, o};
    size_t pos = 0;

    cm_buf_init(&o->data, 1 << 20);
    cm_buf_init(&o->events, 1 << 20);
    stor_chunk_init(&d, 1 << 20);
    while (pos < n && !d.done) {
        size_t take = step && step < n - pos ? step : n - pos;
        char *copy = malloc(take ? take : 1);
        ssize_t r;

        memcpy(copy, in + pos, take);
        r = stor_chunk_decode(&d, copy, take, &cb);
        free(copy);
        if (r < 0)
            return r;
        CHECK((size_t)r <= take);
        pos += (size_t)r;
        if ((size_t)r < take)
            CHECK(d.done);
    }
    CHECK(d.total == o->data.len);
    *done = d.done;
    return (long)pos;
}

static void fuzz_chunks(const char *in, size_t n, size_t step)
{
    struct out a, b;
    int da = 0, db = 0;
    long ra = run_chunks(in, n, 0, &a, &da);
    long rb = run_chunks(in, n, step, &b, &db);

    CHECK(ra == rb);
    CHECK(da == db);
    if (ra >= 0) {
        CHECK(a.data.len == b.data.len);
        CHECK(a.data.len == 0 ||
              memcmp(a.data.data, b.data.data, a.data.len) == 0);
        CHECK(a.events.len == b.events.len);
        CHECK(a.events.len == 0 ||
              memcmp(a.events.data, b.events.data, a.events.len) == 0);
    }
    cm_buf_fini(&a.data);
    cm_buf_fini(&a.events);
    cm_buf_fini(&b.data);
    cm_buf_fini(&b.events);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in;
    size_t n, step;

    if (size < 1)
        return 0;
    /* first byte: piece size for the split decode (1..256) */
    step = (size_t)data[0] + 1;
    in = (const char *)data + 1;
    n = size - 1;
    fuzz_head(in, n);
    fuzz_chunks(in, n, step);
    return 0;
}
