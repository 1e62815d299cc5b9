/* Overhead of libiosets through its native API, measured like bench/c_overhead_agios.c: the time
 * from iosets_submit until iosets_next hands the request to a worker, averaged over all requests,
 * and the throughput of the cycle (submitted, handed out and completed per second) with T producer
 * threads and W worker threads.
 *
 *   c_overhead_native run POLICY T N W THINK_NS  one measurement; prints a CSV line
 *   c_overhead_native idle POLICY SECONDS   CPU time of an idle scheduler with W=4 blocked workers
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "c_overhead.h"
#include "iosets.h"

/* Workers do no work, so the time to hand out is the library's alone. */
static int per_producer;
static iosets_scheduler *sched;

static atomic_int completed;

static void *worker(void *arg) {
    (void)arg;
    iosets_batch b;
    for (;;) {
        iosets_status st = iosets_next(sched, -1, &b);
        if (st == IOSETS_SHUTDOWN) return NULL;
        if (st != IOSETS_OK) {
            fprintf(stderr, "iosets_next: %s\n", iosets_strerror(st));
            exit(1);
        }
        int64_t now = now_ns();
        for (size_t i = 0; i < b.count; i++) t_handed[(intptr_t)b.users[i]] = now;
        if (iosets_complete(sched, b.id, b.length) != IOSETS_OK) exit(1);
        atomic_fetch_add(&completed, (int)b.count);
    }
}

static void *producer(void *arg) {
    int p = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < per_producer; i++) {
        intptr_t id = (intptr_t)p * per_producer + i;
        think();
        t_add[id] = now_ns();
        /* As the AGIOS harness: one file, 1 KiB writes, offsets by request number, job = p % 4. */
        iosets_status st = iosets_submit(sched, (uint64_t)(p % 4), 0, (uint64_t)id * 1024, 1024,
                                         IOSETS_WRITE, (void *)id, NULL);
        if (st != IOSETS_OK) {
            fprintf(stderr, "iosets_submit: %s\n", iosets_strerror(st));
            exit(1);
        }
    }
    return NULL;
}

static int create(const char *policy) {
    iosets_status st = iosets_create(policy, NULL, 0, &sched);
    if (st != IOSETS_OK) {
        char msg[512];
        iosets_last_error(msg, sizeof msg);
        fprintf(stderr, "iosets_create: %s\n", msg);
        return 1;
    }
    return 0;
}

static int run(char *policy, int t, int n, int w) {
    per_producer = n;
    int total = t * n;
    t_add = calloc((size_t)total, sizeof(int64_t));
    t_handed = calloc((size_t)total, sizeof(int64_t));
    if (create(policy)) return 1;
    pthread_t *workers = calloc((size_t)w, sizeof(pthread_t));
    struct span s = timed_run(t, w, workers, &completed, total);
    iosets_shutdown(sched);
    for (int i = 0; i < w; i++) pthread_join(workers[i], NULL);
    if (iosets_check_balance(sched) != IOSETS_OK) return 1;
    iosets_destroy(sched);
    print_run(t, n, w, s);
    free(t_add);
    free(t_handed);
    free(workers);
    return 0;
}

static int idle(char *policy, double seconds) {
    if (create(policy)) return 1;
    pthread_t workers[4];
    for (int i = 0; i < 4; i++) pthread_create(&workers[i], NULL, worker, NULL);
    usleep(200000);
    struct span s = idle_span(seconds);
    iosets_shutdown(sched);
    for (int i = 0; i < 4; i++) pthread_join(workers[i], NULL);
    iosets_destroy(sched);
    print_idle(s);
    return 0;
}

int main(int argc, char **argv) { return overhead_main(argc, argv, "POLICY"); }
