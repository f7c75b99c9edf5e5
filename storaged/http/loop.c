/* storaged/http/loop.c - epoll event loop with an eventfd completion queue.
 *
 * DESIGN: Redis's ae, cut to what storaged needs. Each registered fd carries
 * a pointer to its struct stor_ev in epoll's data, so dispatch is one
 * indirect call with no lookup. Worker threads finish blocking work and
 * post the job back here: a mutex-protected singly linked list plus one
 * eventfd write per empty->non-empty transition, so a burst of completions
 * costs one wakeup. Level-triggered epoll keeps the connection code simple
 * (it need not drain a socket to EAGAIN before yielding). */
#include "storaged/http/loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define LOOP_MAX_EVENTS 256

struct stor_loop {
    int epfd;
    struct stor_ev wake; /* eventfd: completions and stop requests */
    pthread_mutex_t lock;
    struct stor_job *head, *tail; /* completions; protected by lock */
    atomic_bool stop;
    atomic_int sleeping; /* 1 while in (or about to enter) epoll_wait */
    stor_tick_cb *tick;
    void *tick_arg;
    stor_tick_cb *after;
    void *after_arg;
    struct timespec last_tick;
};

/* Runs every posted job's done() in post order. */
static void drain(struct stor_loop *l)
{
    struct stor_job *j, *next;

    pthread_mutex_lock(&l->lock);
    j = l->head;
    l->head = l->tail = NULL;
    pthread_mutex_unlock(&l->lock);
    for (; j != NULL; j = next) {
        next = j->next;
        j->next = NULL;
        j->done(j);
    }
}

/* The eventfd fired: clear it and run the completions. */
static void wake_cb(struct stor_loop *l, struct stor_ev *io, uint32_t ev)
{
    uint64_t v;

    (void)ev;
    if (read(io->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        return;
    drain(l);
}

/* See header. */
struct stor_loop *stor_loop_create(void)
{
    struct stor_loop *l = calloc(1, sizeof(*l));

    if (l == NULL)
        return NULL;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0)
        goto out_free;
    l->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->wake.fd < 0)
        goto out_epoll;
    l->wake.cb = wake_cb;
    l->wake.arg = l;
    pthread_mutex_init(&l->lock, NULL);
    if (stor_loop_add(l, &l->wake, EPOLLIN) < 0)
        goto out_eventfd;
    clock_gettime(CLOCK_MONOTONIC, &l->last_tick);
    return l;

out_eventfd:
    pthread_mutex_destroy(&l->lock);
    close(l->wake.fd);
out_epoll:
    close(l->epfd);
out_free:
    free(l);
    return NULL;
}

/* See header. Registered ios are not closed: their owners do that. */
void stor_loop_destroy(struct stor_loop *l)
{
    if (l == NULL)
        return;
    close(l->wake.fd);
    close(l->epfd);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* See header. */
int stor_loop_add(struct stor_loop *l, struct stor_ev *io, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = io};

    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, io->fd, &ev) < 0)
        return -errno;
    io->events = events;
    return 0;
}

/* See header. A no-op when the mask is unchanged. */
int stor_loop_mod(struct stor_loop *l, struct stor_ev *io, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = io};

    if (io->events == events)
        return 0;
    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
        return -errno;
    io->events = events;
    return 0;
}

/* See header. */
void stor_loop_del(struct stor_loop *l, struct stor_ev *io)
{
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    io->events = 0;
}

/* See header. */
void stor_loop_set_tick(struct stor_loop *l, stor_tick_cb *cb, void *arg)
{
    l->tick = cb;
    l->tick_arg = arg;
}

/* See header. */
void stor_loop_set_after(struct stor_loop *l, stor_tick_cb *cb, void *arg)
{
    l->after = cb;
    l->after_arg = arg;
}

/* See header. */
void stor_loop_post(struct stor_loop *l, struct stor_job *j)
{
    bool was_empty;
    uint64_t one = 1;

    j->next = NULL;
    pthread_mutex_lock(&l->lock);
    was_empty = l->head == NULL;
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    pthread_mutex_unlock(&l->lock);
    /* A loop that is running will drain the queue before it sleeps (see
     * stor_loop_run), so only a sleeping one needs the eventfd: this saves
     * a write and a read per completion under load. */
    if (was_empty && atomic_load(&l->sleeping) &&
        write(l->wake.fd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is saturated, so a wakeup is pending. */
    }
}

/* Calls the tick callback when a second has passed since the last one. */
static void maybe_tick(struct stor_loop *l)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec == l->last_tick.tv_sec)
        return;
    l->last_tick = now;
    if (l->tick)
        l->tick(l, l->tick_arg);
}

/* See header. */
int stor_loop_run(struct stor_loop *l)
{
    struct epoll_event evs[LOOP_MAX_EVENTS];

    while (!atomic_load(&l->stop)) {
        bool pending;
        int n, i;

        /* Completions first; then announce sleep and look once more, so a
         * post racing with us either sees sleeping=1 (and writes the
         * eventfd) or is seen here (Dekker-style, both sides seq_cst and
         * the queue under its mutex). */
        drain(l);
        atomic_store(&l->sleeping, 1);
        pthread_mutex_lock(&l->lock);
        pending = l->head != NULL;
        pthread_mutex_unlock(&l->lock);
        if (pending)
            atomic_store(&l->sleeping, 0);
        n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, pending ? 0 : 250);
        atomic_store(&l->sleeping, 0);

        if (n < 0 && errno != EINTR)
            return -errno;
        for (i = 0; i < n; i++) {
            struct stor_ev *io = evs[i].data.ptr;

            io->cb(l, io, evs[i].events);
        }
        if (l->after)
            l->after(l, l->after_arg);
        maybe_tick(l);
    }
    return 0;
}

/* See header. */
void stor_loop_stop(struct stor_loop *l)
{
    uint64_t one = 1;

    atomic_store(&l->stop, true);
    if (write(l->wake.fd, &one, sizeof(one)) < 0) {
        /* a wakeup is already pending */
    }
}

/* See header. */
bool stor_loop_stopping(const struct stor_loop *l)
{
    return atomic_load(&l->stop);
}
