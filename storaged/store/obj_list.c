/* storaged/store/obj_list.c - listing (prefix, delimiter, marker, max) from the
 * persistent index.
 *
 * DESIGN: a listing never touches the drives. It walks the index with an
 * LMDB cursor (a consistent snapshot for the page): a seek to the start,
 * one step per returned entry, and a seek past every common prefix that a
 * delimiter rolls up, so a page of 1,000 costs the same at 10^3 and 10^6
 * objects. */
#include "storaged/store/obj_i.h"

#include "storaged/store/obj_idx.h"

#include "common/log.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- LIST ---- */

/* Moves @c past every key that starts with @p (@pl bytes): to the first
 * key >= the smallest string greater than all of them. */
static int skip_prefix(struct obj_idx_cur *c, const char *p, size_t pl,
                       bool *end)
{
    char succ[STOR_MAX_KEY_LEN + 1];
    size_t n = pl;

    memcpy(succ, p, pl);
    while (n > 0 && (uint8_t)succ[n - 1] == 0xff)
        n--;
    if (n == 0) {
        *end = true; /* every later key starts with p */
        return 0;
    }
    succ[n - 1] = (char)((uint8_t)succ[n - 1] + 1);
    return obj_idx_cur_seek(c, succ, n, false);
}

/* Contract in object.h. */
void stor_list_result_fini(struct stor_list_result *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->nobjs; i++)
        free(r->objs[i].key);
    free(r->objs);
    for (size_t i = 0; i < r->nprefixes; i++)
        free(r->prefixes[i]);
    free(r->prefixes);
    free(r->next_marker);
    memset(r, 0, sizeof(*r));
}

/* Contract in object.h. A cursor walk over the index: a seek to the start,
 * one step per entry, one seek past each rolled-up common prefix. */
int stor_obj_list(struct stor_store *s, const char *bucket, const char *prefix,
                  const char *delimiter, const char *after, size_t max,
                  struct stor_list_result *out)
{
    struct obj_idx_cur *c = NULL;
    size_t pl = prefix ? strlen(prefix) : 0;
    size_t dl = delimiter ? strlen(delimiter) : 0;
    size_t al = after ? strlen(after) : 0;
    size_t count = 0, ocap = 0, pcap = 0;
    const char *last = NULL;
    size_t last_len = 0;
    bool end = false;
    int ret = 0;

    memset(out, 0, sizeof(*out));
    if (pl > STOR_MAX_KEY_LEN)
        return 0; /* no key is that long */
    pthread_rwlock_rdlock(&s->lock);
    if (obj_bucket_find(s, bucket) == NULL) {
        pthread_rwlock_unlock(&s->lock);
        return -STOR_ENOBUCKET;
    }
    ret = obj_idx_cur_open(s->idx, bucket, &c);
    pthread_rwlock_unlock(&s->lock);
    if (ret < 0)
        return ret == -EBADMSG ? -EIO : ret;
    if (after && obj_key_cmp(after, al, prefix ? prefix : "", pl) >= 0)
        ret = obj_idx_cur_seek(c, after, al, true);
    else
        ret = obj_idx_cur_seek(c, prefix, pl, false);
    while (ret == 0 && !end) {
        struct obj_idx_view e;
        const char *d = NULL;

        ret = obj_idx_cur_next(c, &e);
        if (ret == -ENOENT) {
            ret = 0;
            break;
        }
        if (ret < 0)
            break;
        if (e.key_len < pl || (pl && memcmp(e.key, prefix, pl) != 0))
            break; /* past the prefix range */
        if (dl)
            d = memmem(e.key + pl, e.key_len - pl, delimiter, dl);
        if (count >= max) {
            out->truncated = true;
            break;
        }
        if (d) {
            size_t cl = (size_t)(d - e.key) + dl;

            if (after && obj_key_cmp(e.key, cl, after, al) <= 0) {
                ret = skip_prefix(c, e.key, cl, &end);
                continue;
            }
            if (out->nprefixes == pcap) {
                size_t nc = pcap ? 2 * pcap : 16;
                char **nv = realloc(out->prefixes, nc * sizeof(*nv));

                if (nv == NULL)
                    goto nomem;
                out->prefixes = nv;
                pcap = nc;
            }
            out->prefixes[out->nprefixes] = obj_memdup0(e.key, cl);
            if (out->prefixes[out->nprefixes] == NULL)
                goto nomem;
            last = out->prefixes[out->nprefixes++];
            last_len = cl;
            count++;
            ret = skip_prefix(c, last, cl, &end);
            continue;
        }
        if (out->nobjs == ocap) {
            size_t nc = ocap ? 2 * ocap : 64;
            struct stor_list_entry *nv = realloc(out->objs, nc * sizeof(*nv));

            if (nv == NULL)
                goto nomem;
            out->objs = nv;
            ocap = nc;
        }
        {
            struct stor_list_entry *le = &out->objs[out->nobjs];

            memset(le, 0, sizeof(*le));
            le->key = obj_memdup0(e.key, e.key_len);
            if (le->key == NULL)
                goto nomem;
            le->key_len = e.key_len;
            le->size = e.size;
            le->mtime = (time_t)(e.mtime_ns / 1000000000LL);
            le->mtime_ms = (int)((e.mtime_ns / 1000000LL) % 1000);
            memcpy(le->etag, e.etag, e.etag_len);
            le->etag[e.etag_len] = 0;
            out->nobjs++;
            last = le->key;
            last_len = le->key_len;
        }
        count++;
    }
    if (ret < 0) {
        stor_list_result_fini(out);
        goto out;
    }
    if (out->truncated && last) {
        out->next_marker = obj_memdup0(last, last_len);
        if (out->next_marker == NULL)
            goto nomem;
    }
    goto out;
nomem:
    ret = -ENOMEM;
    stor_list_result_fini(out);
out:
    obj_idx_cur_close(c);
    return ret == -EBADMSG ? -EIO : ret;
}
