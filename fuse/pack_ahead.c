/* fuse/pack_ahead.c - read-ahead of unread members (pack_ahead.h).
 *
 * DESIGN: a shuffled epoch reads every member once, in an order we cannot
 * see. A cache of blocks (LRU) over a pack twice its size keeps about half
 * the blocks, whatever is in them, so about half the members find theirs
 * evicted (fuse/PACK.md: 0.6 GETs per member at 100,000 files). What is
 * worth memory is only what is still to be read: here a miss GETs a range
 * from the member onward and keeps the members in it that are not read yet
 * in this epoch, as many as the budget has room for, and a member's copy
 * is dropped at its read. A read then finds its member kept with the
 * probability (kept bytes / bytes still unread), the best any budget can
 * do for an order it cannot see, and each miss is one GET that refills the
 * room the hits since the last one freed.
 *
 * Kept members are found by member id in a hash table; a member being
 * fetched has a pending entry (readers of it wait on the condition
 * variable, like the block cache's owner/waiter protocol). Epochs: a
 * member's read to its end marks it with the current epoch number; when
 * every covered member is marked, a new epoch begins. A kept member still
 * unread after as many reads as there are members belongs to a partial
 * epoch (a loader reading a subset, or the kernel serving the rest from
 * its page cache): it is dropped at the next miss. So is the oldest kept
 * member while a partial read (a member kept for its next read whatever
 * the room) has put the kept bytes over the budget. */
#include "fuse/pack_ahead.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/hash.h"
#include "common/log.h"
#include "fuse/pack.h"

struct pa_ent {
    uint32_t id;
    bool ready;     /* else its GET is in flight */
    uint64_t token; /* the fetch that fills it */
    uint64_t seq;   /* a->reads when it was kept */
    char *data;     /* ready: the member's bytes */
    struct pa_ent *hnext;
    struct pa_ent *prev, *next; /* ready entries, oldest first */
};

struct fc_pahead {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct fc_pack *p;
    fc_pahead_get_fn *get;
    void *arg;
    uint64_t budget, used; /* bytes of entries (pending ones too) */
    uint64_t inflight;     /* of those, members being read by a fetch */
    size_t range_max;
    struct pa_ent **tab; /* hash of entries by member id; under mu */
    size_t nbuckets, n;
    struct pa_ent fifo; /* sentinel of the ready list */
    uint32_t *order;    /* covered members by (shard, offset) */
    uint64_t *first;    /* shard s: order[first[s] .. first[s + 1]) */
    uint64_t nfiles;    /* covered members */
    uint8_t *mark;      /* per member: the epoch of its last read */
    uint8_t epoch;      /* never 0 (the initial mark) */
    uint64_t nread;     /* members marked in this epoch */
    uint64_t reads;     /* fc_pahead_read calls so far */
    uint64_t next_token;
    struct fc_pahead_stats st;
};

static bool covered(const struct fc_pack *p, size_t range_max, uint64_t i)
{
    const struct fc_pmember *m = &p->members[i];

    return S_ISREG(m->mode) && m->size > 0 && m->size <= range_max;
}

/* qsort_r order of member ids by (shard, offset); @arg is the pack. */
static int by_offset(const void *x, const void *y, void *arg)
{
    const struct fc_pmember *ms = ((const struct fc_pack *)arg)->members;
    const struct fc_pmember *a = &ms[*(const uint32_t *)x];
    const struct fc_pmember *b = &ms[*(const uint32_t *)y];

    if (a->shard != b->shard)
        return a->shard < b->shard ? -1 : 1;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* Fills a->order and a->first. 0 or -ENOMEM. */
static int build_order(struct fc_pahead *a)
{
    const struct fc_pack *p = a->p;
    const struct fc_pmember *ms = p->members;
    uint64_t n = 0;
    bool sorted = true;

    a->order = malloc((p->nmembers ? p->nmembers : 1) * sizeof(*a->order));
    a->first = calloc((size_t)p->nshards + 1, sizeof(*a->first));
    if (a->order == NULL || a->first == NULL)
        return -ENOMEM;
    for (uint64_t i = 0; i < p->nmembers; i++) {
        if (!covered(p, a->range_max, i))
            continue;
        if (n > 0 &&
            by_offset(&a->order[n - 1], &(uint32_t){(uint32_t)i}, a->p) > 0)
            sorted = false;
        a->order[n++] = (uint32_t)i;
    }
    if (!sorted) /* a shuffled pack: path order is not shard order */
        qsort_r(a->order, n, sizeof(*a->order), by_offset, a->p);
    for (uint64_t k = 0; k < n; k++)
        a->first[ms[a->order[k]].shard + 1]++;
    for (uint32_t s = 0; s < p->nshards; s++)
        a->first[s + 1] += a->first[s];
    a->nfiles = n;
    return 0;
}

int fc_pahead_create(struct fc_pack *p, uint64_t budget, size_t range_max,
                     fc_pahead_get_fn *get, void *arg, struct fc_pahead **out)
{
    struct fc_pahead *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return -ENOMEM;
    a->p = p;
    a->get = get;
    a->arg = arg;
    a->budget = budget;
    a->range_max = range_max;
    a->epoch = 1;
    a->fifo.prev = a->fifo.next = &a->fifo;
    a->nbuckets = 1024;
    a->tab = calloc(a->nbuckets, sizeof(*a->tab));
    a->mark = calloc(p->nmembers ? p->nmembers : 1, 1);
    if (a->tab == NULL || a->mark == NULL || build_order(a) < 0) {
        fc_pahead_destroy(a);
        return -ENOMEM;
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    *out = a;
    return 0;
}

void fc_pahead_destroy(struct fc_pahead *a)
{
    if (a == NULL)
        return;
    if (a->tab != NULL) {
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
    }
    for (size_t b = 0; a->tab != NULL && b < a->nbuckets; b++)
        for (struct pa_ent *e = a->tab[b], *nx; e != NULL; e = nx) {
            nx = e->hnext;
            free(e->data);
            free(e);
        }
    free(a->tab);
    free(a->order);
    free(a->first);
    free(a->mark);
    free(a);
}

bool fc_pahead_covers(const struct fc_pahead *a, uint64_t i)
{
    return i < a->p->nmembers && covered(a->p, a->range_max, i);
}

static size_t bucket(const struct fc_pahead *a, uint32_t id)
{
    return (size_t)(((uint64_t)id * 0x9e3779b97f4a7c15ull) >> 32) &
           (a->nbuckets - 1);
}

static struct pa_ent *find(const struct fc_pahead *a, uint32_t id)
{
    struct pa_ent *e = a->tab[bucket(a, id)];

    while (e != NULL && e->id != id)
        e = e->hnext;
    return e;
}

/* Doubles the table once it holds twice as many entries as buckets (an
 * allocation failure keeps the old one: longer chains, still correct). */
static void maybe_grow(struct fc_pahead *a)
{
    size_t nb = a->nbuckets * 2, ob = a->nbuckets;
    struct pa_ent **old = a->tab, **nt;

    if (a->n < a->nbuckets * 2)
        return;
    nt = calloc(nb, sizeof(*nt));
    if (nt == NULL)
        return;
    a->tab = nt;
    a->nbuckets = nb;
    for (size_t b = 0; b < ob; b++)
        for (struct pa_ent *e = old[b], *nx; e != NULL; e = nx) {
            size_t k = bucket(a, e->id);
            nx = e->hnext;
            e->hnext = nt[k];
            nt[k] = e;
        }
    free(old);
}

/* A pending entry for member @id of fetch @token, its bytes counted in
 * the budget; NULL when out of memory. */
static struct pa_ent *add_pending(struct fc_pahead *a, uint32_t id,
                                  uint64_t token)
{
    struct pa_ent *e = calloc(1, sizeof(*e));
    size_t k;

    if (e == NULL)
        return NULL;
    maybe_grow(a);
    k = bucket(a, id);
    e->id = id;
    e->token = token;
    e->hnext = a->tab[k];
    a->tab[k] = e;
    a->n++;
    a->used += a->p->members[id].size;
    return e;
}

/* Unlinks and frees @e. */
static void drop(struct fc_pahead *a, struct pa_ent *e)
{
    struct pa_ent **pp = &a->tab[bucket(a, e->id)];

    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->ready) {
        e->prev->next = e->next;
        e->next->prev = e->prev;
    }
    a->n--;
    a->used -= a->p->members[e->id].size;
    free(e->data);
    free(e);
}

/* Member @id was read to its end: its read of this epoch. */
static void consume(struct fc_pahead *a, uint32_t id)
{
    if (a->mark[id] == a->epoch)
        return;
    a->mark[id] = a->epoch;
    if (++a->nread < a->nfiles)
        return;
    a->epoch = a->epoch == UINT8_MAX ? 1 : a->epoch + 1;
    a->nread = 0;
    a->st.epochs++;
}

/* Drops kept members still unread after as many reads as there are
 * members (a full shuffled epoch would have read them by now), and the
 * oldest ones while over the budget (members kept for the rest of a
 * partial read). */
static void drop_stale(struct fc_pahead *a)
{
    while (a->fifo.next != &a->fifo &&
           (a->reads - a->fifo.next->seq > a->nfiles ||
            a->used - a->inflight > a->budget)) {
        drop(a, a->fifo.next);
        a->st.stale++;
    }
}

/* The position of member @i in a->order (covered, so present). */
static uint64_t position(const struct fc_pahead *a, uint64_t i)
{
    const struct fc_pmember *m = &a->p->members[i];
    uint64_t lo = a->first[m->shard], hi = a->first[m->shard + 1];

    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (a->p->members[a->order[mid]].offset < m->offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether member @j is worth keeping: not read in this epoch, not kept or
 * being fetched, not known bad. */
static bool wanted(const struct fc_pahead *a, uint32_t j)
{
    return a->mark[j] != a->epoch && atomic_load(&a->p->checked[j]) != 2 &&
           find(a, j) == NULL;
}

/* Marks member @j bad after a CRC mismatch of @crc (one log line). */
static void crc_bad(struct fc_pahead *a, uint32_t j, uint32_t crc)
{
    const struct fc_pmember *m = &a->p->members[j];

    if (atomic_exchange(&a->p->checked[j], 2) == 2)
        return;
    a->st.crc_errors++;
    cm_log(CM_LOG_ERROR, EIO,
           "ecfs: pack member %s: CRC-32C %08x, the index says %08x "
           "(shard-%06u.tar at %" PRIu64 "): its reads fail",
           a->p->paths + m->path_off, crc, m->crc, a->p->first_shard + m->shard,
           m->offset);
}

/* The miss path of fc_pahead_read, a->mu held on entry and exit: GETs a
 * range from member @i on and keeps the wanted members in it. */
static int fetch(struct fc_pahead *a, uint32_t i, uint64_t off, size_t len,
                 char *out)
{
    const struct fc_pmember *ms = a->p->members, *mi = &ms[i];
    uint64_t token = ++a->next_token, start = mi->offset;
    uint64_t end = mi->offset + mi->size, room, take = 0, q, r;
    uint64_t stop = a->first[mi->shard + 1];
    uint32_t *mine = NULL, *ids;
    size_t nmine = 0, cap = 0;
    struct pa_ent *e;
    bool whole = off + len >= mi->size;
    char *buf;
    int ret = 0;

    a->st.misses++;
    drop_stale(a);
    if (add_pending(a, i, token) == NULL)
        return -ENOMEM;
    a->inflight += mi->size;
    room = a->used < a->budget ? a->budget - a->used : 0;
    q = position(a, i);
    for (r = q + 1; r < stop; r++) {
        uint32_t j = a->order[r];
        if (ms[j].offset + ms[j].size - start > a->range_max ||
            ms[j].size > room - take)
            break;
        if (!wanted(a, j))
            continue;
        if (nmine == cap) {
            cap = cap ? cap * 2 : 64;
            ids = realloc(mine, cap * sizeof(*mine));
            if (ids == NULL)
                break;
            mine = ids;
        }
        if (add_pending(a, j, token) == NULL)
            break;
        mine[nmine++] = j;
        take += ms[j].size;
        end = ms[j].offset + ms[j].size;
    }
    pthread_mutex_unlock(&a->mu);

    buf = malloc((size_t)(end - start));
    ret = buf == NULL ? -ENOMEM
                      : a->get(a->arg, a->p, mi->shard, start,
                               (size_t)(end - start), buf);
    /* the members' copies, outside the lock (pending entries are ours) */
    char **copy = calloc(nmine + 1, sizeof(*copy));
    uint32_t *crcs = calloc(nmine + 1, sizeof(*crcs));
    if (ret == 0 && (copy == NULL || crcs == NULL))
        ret = -ENOMEM;
    for (size_t k = 0; ret == 0 && k <= nmine; k++) {
        uint32_t j = k < nmine ? mine[k] : i;
        const char *src = buf + (ms[j].offset - start);
        crcs[k] = cm_crc32c(0, src, (size_t)ms[j].size);
        if (crcs[k] != ms[j].crc || (j == i && whole))
            continue;
        copy[k] = malloc((size_t)ms[j].size);
        if (copy[k] != NULL)
            memcpy(copy[k], src, (size_t)ms[j].size);
    }
    if (ret == 0 && crcs[nmine] == mi->crc)
        memcpy(out, buf + (mi->offset - start) + off, len);

    pthread_mutex_lock(&a->mu);
    a->inflight -= mi->size;
    for (size_t k = 0; k <= nmine; k++) {
        uint32_t j = k < nmine ? mine[k] : i;
        e = find(a, j);
        if (e == NULL || e->token != token || e->ready)
            continue; /* cannot happen: pending entries stay */
        if (ret == 0 && crcs[k] != ms[j].crc) {
            crc_bad(a, j, crcs[k]);
        } else if (ret == 0) {
            atomic_store(&a->p->checked[j], 1);
            if (copy[k] != NULL) {
                e->data = copy[k];
                copy[k] = NULL;
                e->ready = true;
                e->seq = a->reads;
                e->prev = a->fifo.prev;
                e->next = &a->fifo;
                a->fifo.prev->next = e;
                a->fifo.prev = e;
                if (j != i)
                    a->st.kept++;
                continue;
            }
        }
        drop(a, e); /* failed, bad, out of memory, or read whole now */
    }
    if (ret == 0 && crcs[nmine] != mi->crc)
        ret = -EIO;
    if (ret == 0 && whole)
        consume(a, i);
    drop_stale(a);
    pthread_cond_broadcast(&a->cv);
    for (size_t k = 0; copy != NULL && k <= nmine; k++)
        free(copy[k]);
    free(copy);
    free(crcs);
    free(mine);
    free(buf);
    return ret;
}

int fc_pahead_read(struct fc_pahead *a, uint64_t i, uint64_t off, size_t len,
                   char *out)
{
    const struct fc_pmember *m = &a->p->members[i];
    struct pa_ent *e;
    int ret;

    if (!fc_pahead_covers(a, i) || off > m->size || len > m->size - off)
        return CM_NEVER(-EINVAL);
    pthread_mutex_lock(&a->mu);
    a->reads++;
    while ((e = find(a, (uint32_t)i)) != NULL && !e->ready)
        pthread_cond_wait(&a->cv, &a->mu);
    if (e != NULL) {
        memcpy(out, e->data + off, len);
        a->st.hits++;
        if (off + len >= m->size) {
            drop(a, e);
            consume(a, (uint32_t)i);
        }
        ret = 0;
    } else if (atomic_load(&a->p->checked[i]) == 2) {
        ret = -EIO;
    } else {
        ret = fetch(a, (uint32_t)i, off, len, out);
    }
    pthread_mutex_unlock(&a->mu);
    return ret;
}

void fc_pahead_stats(struct fc_pahead *a, struct fc_pahead_stats *st)
{
    pthread_mutex_lock(&a->mu);
    *st = a->st;
    st->bytes = a->used;
    pthread_mutex_unlock(&a->mu);
}
