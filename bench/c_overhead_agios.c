/* Overhead of a scheduling library through AGIOS's interface (seed 000, section 5): the time from
 * agios_add_request until the library hands the request back through the callback, averaged over
 * all requests, and the throughput of the whole cycle (requests added, handed out and released per
 * second) with T producer threads and a pool of W worker threads.
 *
 * The same source is linked against AGIOS's libagios.so and against libiosets (its AGIOS shim), so
 * both run exactly the same harness. The callback stamps the time and passes the request to the
 * worker pool through a mutex-protected ring; a worker releases it (agios_release_request). With
 * W = 0 there is no pool: the callback releases the request itself (the library alone: add, call
 * back, release, nothing of the harness's own in between).
 *
 * Every request must be called back exactly once: a run that loses or repeats a callback prints
 * the count and exits with status 3.
 *
 *   c_overhead_agios run CONFIG T N W THINK_NS   one measurement; prints a CSV line
 *   c_overhead_agios idle CONFIG SECONDS    CPU time of an idle, initialised library
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agios.h"
#include "c_overhead.h"

static atomic_int *calls;
static int inline_release; /* W = 0: the callback releases */
static int total, producers_n, per_producer;
static char (*file_ids)[32];

/* The hand-off ring from the callback to the workers. */
static int64_t *ring;
static int ring_head, ring_tail, ring_cap;
static int stopping;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cond = PTHREAD_COND_INITIALIZER;
static atomic_int released;

static void *callback(int64_t id) {
    t_handed[id] = now_ns();
    atomic_fetch_add(&calls[id], 1);
    if (inline_release) {
        think();
        if (!agios_release_request(file_ids[0], RT_WRITE, 1024, id * 1024)) {
            fprintf(stderr, "release of request %lld failed\n", (long long)id);
            exit(1);
        }
        atomic_fetch_add(&released, 1);
        return NULL;
    }
    pthread_mutex_lock(&ring_lock);
    ring[ring_tail] = id;
    ring_tail = (ring_tail + 1) % ring_cap;
    pthread_cond_signal(&ring_cond);
    pthread_mutex_unlock(&ring_lock);
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&ring_lock);
        while (ring_head == ring_tail && !stopping) pthread_cond_wait(&ring_cond, &ring_lock);
        if (ring_head == ring_tail) {
            pthread_mutex_unlock(&ring_lock);
            return NULL;
        }
        int64_t id = ring[ring_head];
        ring_head = (ring_head + 1) % ring_cap;
        pthread_mutex_unlock(&ring_lock);
        think();
        if (!agios_release_request(file_ids[0], RT_WRITE, 1024, id * 1024)) {
            fprintf(stderr, "release of request %lld failed\n", (long long)id);
            exit(1);
        }
        atomic_fetch_add(&released, 1);
    }
}

static void *producer(void *arg) {
    int p = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < per_producer; i++) {
        int64_t id = (int64_t)p * per_producer + i;
        think();
        t_add[id] = now_ns();
        /* Seed 000 section 5: one file, 1 KiB writes, offsets by request number, 4 queues
         * (queue id = producer % 4: the job / set / WFQ queue). */
        if (!agios_add_request(file_ids[0], RT_WRITE, id * 1024, 1024, id, p % 4)) {
            fprintf(stderr, "agios_add_request failed\n");
            exit(1);
        }
    }
    return NULL;
}

static int run(char *config, int t, int n, int w) {
    producers_n = t;
    per_producer = n;
    total = t * n;
    t_add = calloc((size_t)total, sizeof(int64_t));
    t_handed = calloc((size_t)total, sizeof(int64_t));
    calls = calloc((size_t)total, sizeof(atomic_int));
    inline_release = w == 0;
    file_ids = calloc((size_t)t, sizeof *file_ids);
    for (int p = 0; p < t; p++) snprintf(file_ids[p], sizeof file_ids[p], "bench.%d.out", p);
    ring_cap = total + 1;
    ring = calloc((size_t)ring_cap, sizeof(int64_t));
    if (!agios_init(callback, NULL, config, 4)) {
        fprintf(stderr, "agios_init failed\n");
        return 1;
    }
    /* AGIOS's agios_init returns before its thread has chosen the algorithm; an agios_add_request
     * in that window dereferences a NULL current_scheduler (acquire_adequate_lock) and crashes.
     * Give the library's thread time to start, outside the measured interval. */
    usleep(100000);
    pthread_t *workers = calloc((size_t)w, sizeof(pthread_t));
    struct span s = timed_run(t, w, workers, &released, total);
    pthread_mutex_lock(&ring_lock);
    stopping = 1;
    pthread_cond_broadcast(&ring_cond);
    pthread_mutex_unlock(&ring_lock);
    for (int i = 0; i < w; i++) pthread_join(workers[i], NULL);
    agios_exit();
    int once = 0;
    for (int i = 0; i < total; i++) once += atomic_load(&calls[i]) == 1;
    if (once != total) {
        fprintf(stderr, "%d of %d requests called back exactly once\n", once, total);
        return 3;
    }
    print_run(t, n, w, s);
    free(t_add);
    free(t_handed);
    free((void *)calls);
    free(file_ids);
    free(ring);
    free(workers);
    return 0;
}

static int idle(char *config, double seconds) {
    if (!agios_init(callback, NULL, config, 4)) {
        fprintf(stderr, "agios_init failed\n");
        return 1;
    }
    usleep(200000); /* let the library's threads start */
    struct span s = idle_span(seconds);
    agios_exit();
    print_idle(s);
    return 0;
}

int main(int argc, char **argv) { return overhead_main(argc, argv, "CONFIG"); }
