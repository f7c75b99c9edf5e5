/* storaged/store/obj_ent.c - the in-memory form of an index record
 * (struct obj_ent, obj_i.h): freeing and copying it and its headers, and
 * the byte order of keys that listings and the index keep.
 *
 * DESIGN: the bottom of the object layer's chain: it calls nothing else of
 * the layer, so the index (obj_idx.c), which hands out entries, sits below
 * the core (obj_store.c) without calling up into it. */
#include "storaged/store/obj_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Frees @n headers and the array (NULL-safe). */
void obj_hdrs_free(struct stor_hdr *h, size_t n)
{
    for (size_t i = 0; i < n && h; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
}

/* Deep copy of @n headers into *out (NULL when n is 0). 0 or -ENOMEM. */
int obj_hdrs_copy(const struct stor_hdr *h, size_t n, struct stor_hdr **out)
{
    struct stor_hdr *c;

    *out = NULL;
    if (n == 0)
        return 0;
    c = calloc(n, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        c[i].name = strdup(h[i].name ? h[i].name : "");
        c[i].value = strdup(h[i].value ? h[i].value : "");
        if (c[i].name == NULL || c[i].value == NULL) {
            obj_hdrs_free(c, n);
            return -ENOMEM;
        }
    }
    *out = c;
    return 0;
}

/* Contract in obj_i.h. */
char *obj_memdup0(const char *p, size_t n)
{
    char *c = malloc(n + 1);

    if (c) {
        memcpy(c, p, n);
        c[n] = 0;
    }
    return c;
}

/* Frees an index entry and everything it owns (NULL-safe). */
void obj_ent_free(struct obj_ent *e)
{
    if (e == NULL)
        return;
    free(e->key);
    free(e->parts);
    free(e->xref);
    free(e->at_bucket);
    free(e->at_key);
    obj_hdrs_free(e->hdrs, e->nhdrs);
    free(e);
}

/* Deep copy of an entry; NULL on ENOMEM. */
struct obj_ent *obj_ent_dup(const struct obj_ent *e)
{
    struct obj_ent *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    *c = *e;
    c->key = NULL;
    c->parts = NULL;
    c->hdrs = NULL;
    c->xref = NULL;
    c->at_bucket = NULL;
    c->at_key = NULL;
    if (e->at_bucket) {
        c->at_bucket = strdup(e->at_bucket);
        c->at_key = malloc(e->at_key_len + 1);
        if (c->at_bucket == NULL || c->at_key == NULL)
            goto fail;
        memcpy(c->at_key, e->at_key, e->at_key_len);
        c->at_key[e->at_key_len] = 0;
    }
    if (e->xref) {
        size_t n = (size_t)(e->k + e->m);

        c->xref = malloc(n * sizeof(*c->xref));
        if (c->xref == NULL)
            goto fail;
        memcpy(c->xref, e->xref, n * sizeof(*c->xref));
    }
    c->key = malloc(e->key_len + 1);
    if (c->key == NULL)
        goto fail;
    memcpy(c->key, e->key, e->key_len);
    c->key[e->key_len] = 0;
    if (e->nparts) {
        c->parts = malloc(e->nparts * sizeof(*c->parts));
        if (c->parts == NULL)
            goto fail;
        memcpy(c->parts, e->parts, e->nparts * sizeof(*c->parts));
    }
    if (obj_hdrs_copy(e->hdrs, e->nhdrs, &c->hdrs) < 0) {
        c->nhdrs = 0;
        goto fail;
    }
    return c;
fail:
    obj_ent_free(c);
    return NULL;
}

/* memcmp order, shorter first on a tie: S3 listing order. */
int obj_key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);

    if (c != 0)
        return c;
    return al < bl ? -1 : al > bl ? 1 : 0;
}
