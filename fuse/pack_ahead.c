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
 * the room) has put the kept bytes over the budget.
 *
 * With a disk below (fc_pahead_set_disk: the mount's cache_dir), memory is
 * no longer the only place a member can wait for its read: every good
 * member a GET brings is stored on the disk, kept in memory or not, and a
 * miss asks the disk before it GETs. Ranges are then the aligned windows
 * of range_max bytes of a shard (the members starting in it), not "from
 * the member on": a range from each missed member would overlap the next
 * one fetched after it, and in a shuffled order a window would be fetched
 * about ln(members per window) times. Aligned, each window is fetched once
 * per disk lifetime, whatever the order: an epoch costs about
 * bytes / range_max + shards GETs while the disk holds the pack. The
 * disk's copy is checked against the member's CRC-32C at every read from
 * it (a copy that fails is a miss: the GET follows and replaces it). */
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
    struct pa_win *wins;     /* windows being fetched (with a disk) */
    fc_pahead_dget_fn *dget; /* the disk, or NULL (fc_pahead_set_disk) */
    fc_pahead_dput_fn *dput;
    struct fc_pahead_stats st;
};

/* A window a fetch is GETting (on its stack): with a disk, a second miss
 * in the same window waits for it and then finds its member on the disk,
 * so each window costs one GET even when workers miss in it together. */
struct pa_win {
    uint32_t shard;
    uint64_t w; /* offset / range_max */
    struct pa_win *next;
};

/* A member a fetch brings: kept in memory, or (with a disk) only stored. */
struct pa_pick {
    uint32_t id;
    bool keep;
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

void fc_pahead_set_disk(struct fc_pahead *a, fc_pahead_dget_fn *dget,
                        fc_pahead_dput_fn *dput)
{
    a->dget = dget;
    a->dput = dput;
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

/* Whether member @j is worth keeping: not read in this epoch, not kept or
 * being fetched, not known bad. */
static bool wanted(const struct fc_pahead *a, uint32_t j)
{
    return a->mark[j] != a->epoch && atomic_load(&a->p->checked[j]) != 2 &&
           find(a, j) == NULL;
}

/* The first position in a->order of a covered member of shard @sh at
 * offset @off or beyond (the end of the shard's run when none). */
static uint64_t lower(const struct fc_pahead *a, uint32_t sh, uint64_t off)
{
    uint64_t lo = a->first[sh], hi = a->first[sh + 1];

    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (a->p->members[a->order[mid]].offset < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The position of member @i in a->order (covered, so present). */
static uint64_t position(const struct fc_pahead *a, uint64_t i)
{
    const struct fc_pmember *m = &a->p->members[i];

    return lower(a, m->shard, m->offset);
}

/* Makes pending entry @e ready with its bytes @data (taken over), the
 * newest of the ready list. */
static void make_ready(struct fc_pahead *a, struct pa_ent *e, char *data)
{
    e->data = data;
    e->ready = true;
    e->seq = a->reads;
    e->prev = a->fifo.prev;
    e->next = &a->fifo;
    a->fifo.prev->next = e;
    a->fifo.prev = e;
}

/* The disk's copy of member @i, whose pending entry the caller made; a->mu
 * held on entry and exit (dropped for the disk read). 0 and the bytes in
 * @out (a copy kept in memory for the rest of a partial read), or 1 when
 * the disk has no good copy: the entry stays pending for the GET. */
static int disk_read(struct fc_pahead *a, uint32_t i, uint64_t off, size_t len,
                     char *out)
{
    const struct fc_pmember *m = &a->p->members[i];
    char *copy = malloc((size_t)m->size);
    struct pa_ent *e;
    bool good;

    if (copy == NULL)
        return 1;
    pthread_mutex_unlock(&a->mu);
    good = a->dget(a->arg, a->p, i, copy) == 0 &&
           cm_crc32c(0, copy, (size_t)m->size) == m->crc;
    if (good)
        memcpy(out, copy + off, len);
    pthread_mutex_lock(&a->mu);
    if (!good) {
        free(copy);
        return 1;
    }
    a->st.disk_hits++;
    a->inflight -= m->size;
    atomic_store(&a->p->checked[i], 1);
    e = find(a, i); /* ours: pending entries stay until their owner ends */
    if (off + len >= m->size) {
        free(copy);
        drop(a, e);
        consume(a, i);
    } else {
        make_ready(a, e, copy);
    }
    pthread_cond_broadcast(&a->cv);
    return 0;
}

/* Adds the members of the fetch of @i to @picks (pending entries of
 * @token): with a disk, every covered member starting in @i's aligned
 * window not kept, pending or bad, kept in memory while the budget's @room
 * allows and it is unread in this epoch (else only stored); without, the
 * wanted members after @i within range_max and @room. Returns their
 * number; *start and *end grow to the range covering them, *take counts
 * the kept bytes, *stored the others'. a->mu held. */
static size_t pick(struct fc_pahead *a, uint32_t i, uint64_t room,
                   uint64_t token, struct pa_pick **picks, uint64_t *start,
                   uint64_t *end, uint64_t *take, uint64_t *stored)
{
    const struct fc_pmember *ms = a->p->members, *mi = &ms[i];
    uint64_t stop = a->first[mi->shard + 1], w0, w1, r;
    size_t n = 0, cap = 0;

    w0 = mi->offset / a->range_max * a->range_max;
    w1 = w0 + a->range_max;
    r = a->dget != NULL ? lower(a, mi->shard, w0) : position(a, i) + 1;
    for (; r < stop; r++) {
        uint32_t j = a->order[r];
        bool keep;
        if (a->dget != NULL) {
            if (ms[j].offset >= w1)
                break;
            if (j == i || find(a, j) != NULL ||
                atomic_load(&a->p->checked[j]) == 2)
                continue;
            keep = a->mark[j] != a->epoch && ms[j].size <= room - *take;
        } else {
            if (ms[j].offset + ms[j].size - *start > a->range_max ||
                ms[j].size > room - *take)
                break;
            if (!wanted(a, j))
                continue;
            keep = true;
        }
        if (n == cap) {
            struct pa_pick *np;
            cap = cap ? cap * 2 : 64;
            np = realloc(*picks, cap * sizeof(**picks));
            if (np == NULL)
                break;
            *picks = np;
        }
        if (add_pending(a, j, token) == NULL)
            break;
        (*picks)[n].id = j;
        (*picks)[n++].keep = keep;
        if (keep)
            *take += ms[j].size;
        else
            *stored += ms[j].size;
        *start = CM_MIN(*start, ms[j].offset);
        *end = CM_MAX(*end, ms[j].offset + ms[j].size);
    }
    return n;
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

/* Whether another fetch is GETting window @w. a->mu held. */
static bool window_busy(const struct fc_pahead *a, const struct pa_win *w)
{
    for (const struct pa_win *x = a->wins; x != NULL; x = x->next)
        if (x->shard == w->shard && x->w == w->w)
            return true;
    return false;
}

/* Unlinks @w from the windows being fetched (if there) and wakes the
 * fetches waiting for it. a->mu held. */
static void unclaim(struct fc_pahead *a, struct pa_win *w)
{
    for (struct pa_win **wp = &a->wins; *wp != NULL; wp = &(*wp)->next)
        if (*wp == w) {
            *wp = w->next;
            pthread_cond_broadcast(&a->cv);
            return;
        }
}

/* The miss path of fc_pahead_read, a->mu held on entry and exit: asks the
 * disk, else GETs a range holding member @i and keeps (stores) the members
 * pick() chose. -EAGAIN: another fetch had the window (with a disk): the
 * caller reads again. */
static int fetch(struct fc_pahead *a, uint32_t i, uint64_t off, size_t len,
                 char *out)
{
    const struct fc_pmember *ms = a->p->members, *mi = &ms[i];
    uint64_t token = ++a->next_token, start = mi->offset;
    uint64_t end = mi->offset + mi->size, room, take = 0, stored = 0;
    struct pa_pick *mine = NULL;
    struct pa_win win;
    size_t nmine;
    struct pa_ent *e;
    bool whole = off + len >= mi->size;
    char *buf, **copy;
    uint32_t *crcs;
    int ret = 0;

    drop_stale(a);
    win.shard = mi->shard;
    win.w = mi->offset / a->range_max;
    if (a->dget != NULL) {
        /* one fetch per window at a time: the others wait for it and then
         * find their members on the disk (or kept) */
        if (window_busy(a, &win)) {
            while (window_busy(a, &win))
                pthread_cond_wait(&a->cv, &a->mu);
            return -EAGAIN;
        }
        win.next = a->wins;
        a->wins = &win;
    }
    if (add_pending(a, i, token) == NULL) {
        unclaim(a, &win);
        return -ENOMEM;
    }
    a->inflight += mi->size;
    if (a->dget != NULL && disk_read(a, i, off, len, out) == 0) {
        unclaim(a, &win);
        return 0;
    }
    a->st.misses++;
    room = a->used < a->budget ? a->budget - a->used : 0;
    nmine = pick(a, i, room, token, &mine, &start, &end, &take, &stored);
    a->inflight += stored; /* not kept: out of the budget once stored */
    pthread_mutex_unlock(&a->mu);

    buf = malloc((size_t)(end - start));
    ret = buf == NULL ? -ENOMEM
                      : a->get(a->arg, a->p, mi->shard, start,
                               (size_t)(end - start), buf);
    /* the members' copies, outside the lock (pending entries are ours) */
    copy = calloc(nmine + 1, sizeof(*copy));
    crcs = calloc(nmine + 1, sizeof(*crcs));
    if (ret == 0 && (copy == NULL || crcs == NULL))
        ret = -ENOMEM;
    for (size_t k = 0; ret == 0 && k <= nmine; k++) {
        uint32_t j = k < nmine ? mine[k].id : i;
        const char *src = buf + (ms[j].offset - start);
        crcs[k] = cm_crc32c(0, src, (size_t)ms[j].size);
        if (crcs[k] != ms[j].crc)
            continue;
        if (a->dput != NULL)
            a->dput(a->arg, a->p, j, src);
        if (j == i ? whole : !mine[k].keep)
            continue;
        copy[k] = malloc((size_t)ms[j].size);
        if (copy[k] != NULL)
            memcpy(copy[k], src, (size_t)ms[j].size);
    }
    if (ret == 0 && crcs[nmine] == mi->crc)
        memcpy(out, buf + (mi->offset - start) + off, len);

    pthread_mutex_lock(&a->mu);
    a->inflight -= mi->size + stored;
    for (size_t k = 0; k <= nmine; k++) {
        uint32_t j = k < nmine ? mine[k].id : i;
        e = find(a, j);
        if (e == NULL || e->token != token || e->ready)
            continue; /* cannot happen: pending entries stay */
        if (ret == 0 && crcs[k] != ms[j].crc) {
            crc_bad(a, j, crcs[k]);
        } else if (ret == 0) {
            atomic_store(&a->p->checked[j], 1);
            if (a->dput != NULL)
                a->st.disk_puts++;
            if (copy[k] != NULL) {
                make_ready(a, e, copy[k]);
                copy[k] = NULL;
                if (j != i)
                    a->st.kept++;
                continue;
            }
        }
        drop(a, e); /* failed, bad, out of memory, stored only, or read */
    }
    if (ret == 0 && crcs[nmine] != mi->crc)
        ret = -EIO;
    if (ret == 0 && whole)
        consume(a, i);
    unclaim(a, &win);
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
again:
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
        if (ret == -EAGAIN)
            goto again;
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
