/* storaged/http/pool.c - fixed-size worker pool with one FIFO queue.
 *
 * DESIGN: nginx's thread pool shape: a mutex + condvar queue, workers that
 * run a job and post it back to the job's loop through the loop's eventfd.
 * One queue is enough here: object calls are short (a stripe at a time),
 * so a big PUT cannot starve small GETs for long. */
#include "storaged/http/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

struct stor_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct stor_job *head, *tail; /* protected by lock */
    bool stop;                    /* protected by lock */
    atomic_size_t busy;
    size_t nthreads;
    pthread_t *threads;
};

/* Worker main: takes jobs until stop is set and the queue is empty. */
static void *worker_main(void *arg)
{
    struct stor_pool *p = arg;

    for (;;) {
        struct stor_job *j;

        pthread_mutex_lock(&p->lock);
        while (p->head == NULL && !p->stop)
            pthread_cond_wait(&p->cond, &p->lock);
        j = p->head;
        if (j == NULL) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        p->head = j->next;
        if (p->head == NULL)
            p->tail = NULL;
        pthread_mutex_unlock(&p->lock);
        j->next = NULL;
        j->run(j);
        atomic_fetch_sub(&p->busy, 1);
        stor_loop_post(j->loop, j);
    }
}

/* See header. */
int stor_pool_create(size_t nthreads, struct stor_pool **out)
{
    struct stor_pool *p = calloc(1, sizeof(*p));
    size_t i;
    int ret;

    if (p == NULL)
        return -ENOMEM;
    p->threads = calloc(nthreads, sizeof(*p->threads));
    if (p->threads == NULL) {
        free(p);
        return -ENOMEM;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    for (i = 0; i < nthreads; i++) {
        ret = pthread_create(&p->threads[i], NULL, worker_main, p);
        if (ret != 0) {
            p->nthreads = i;
            stor_pool_destroy(p);
            return -ret;
        }
    }
    p->nthreads = nthreads;
    *out = p;
    return 0;
}

/* See header. */
void stor_pool_submit(struct stor_pool *p, struct stor_job *j)
{
    j->next = NULL;
    atomic_fetch_add(&p->busy, 1);
    pthread_mutex_lock(&p->lock);
    if (p->tail)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* See header. */
size_t stor_pool_busy(struct stor_pool *p)
{
    return atomic_load(&p->busy);
}

/* See header. */
void stor_pool_destroy(struct stor_pool *p)
{
    size_t i;

    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p);
}
