/* Many producer threads and a pool of worker threads through the native API: every request is
 * handed out and answered exactly once, for several policies, and the books balance. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "iosets.h"

enum { PRODUCERS = 8, WORKERS = 4, PER_PRODUCER = 400 };
#define TOTAL (PRODUCERS * PER_PRODUCER)

typedef struct {
    iosets_scheduler *s;
    int index;
    atomic_int *seen; /* one counter per request */
    atomic_long *answered;
    atomic_int errors;
} shared_t;

typedef struct {
    shared_t *sh;
    int index;
} arg_t;

static void *producer(void *p) {
    arg_t *a = p;
    shared_t *sh = a->sh;
    for (int i = 0; i < PER_PRODUCER; i++) {
        int n = a->index * PER_PRODUCER + i;
        /* Jobs 1..8, two files per job, contiguous offsets so merging policies merge. */
        uint64_t job = 1 + (uint64_t)(n % 8);
        uint64_t file = job * 2 + (uint64_t)(i % 2);
        uint64_t offset = (uint64_t)(i / 2) * 4096;
        int op = (n % 3 == 0) ? IOSETS_WRITE : IOSETS_READ;
        if (iosets_submit(sh->s, job, file, offset, 4096, op, &sh->seen[n], NULL) != IOSETS_OK)
            atomic_fetch_add(&sh->errors, 1);
    }
    return NULL;
}

static void *worker(void *p) {
    shared_t *sh = p;
    iosets_batch b;
    for (;;) {
        iosets_status st = iosets_next(sh->s, -1, &b);
        if (st == IOSETS_SHUTDOWN) return NULL;
        if (st != IOSETS_OK) {
            atomic_fetch_add(&sh->errors, 1);
            return NULL;
        }
        for (size_t i = 0; i < b.count; i++) atomic_fetch_add((atomic_int *)b.users[i], 1);
        atomic_fetch_add(sh->answered, (long)b.count);
        if (iosets_complete(sh->s, b.id, b.length) != IOSETS_OK) atomic_fetch_add(&sh->errors, 1);
    }
}

static void run(const char *policy, const char **opts, size_t n_opts) {
    shared_t sh = {0};
    atomic_long answered = 0;
    sh.answered = &answered;
    sh.seen = calloc(TOTAL, sizeof(atomic_int));
    CHECK_EQ(iosets_create(policy, opts, n_opts, &sh.s), IOSETS_OK);
    if (!sh.s) return;

    pthread_t workers[WORKERS], producers[PRODUCERS];
    arg_t args[PRODUCERS];
    for (int i = 0; i < WORKERS; i++) pthread_create(&workers[i], NULL, worker, &sh);
    for (int i = 0; i < PRODUCERS; i++) {
        args[i].sh = &sh;
        args[i].index = i;
        pthread_create(&producers[i], NULL, producer, &args[i]);
    }
    for (int i = 0; i < PRODUCERS; i++) pthread_join(producers[i], NULL);
    CHECK_EQ(iosets_shutdown(sh.s), IOSETS_OK);
    for (int i = 0; i < WORKERS; i++) pthread_join(workers[i], NULL);

    int once = 0;
    for (int i = 0; i < TOTAL; i++) once += atomic_load(&sh.seen[i]) == 1;
    CHECK_EQ(once, TOTAL);
    CHECK_EQ(atomic_load(&answered), TOTAL);
    CHECK_EQ(atomic_load(&sh.errors), 0);
    iosets_stats st;
    CHECK_EQ(iosets_read_stats(sh.s, &st), IOSETS_OK);
    CHECK_EQ(st.submitted, TOTAL);
    CHECK_EQ(st.completed, TOTAL);
    CHECK_EQ(st.failed, 0);
    CHECK_EQ(st.queued, 0);
    CHECK_EQ(st.batches_in_service, 0);
    CHECK_EQ(st.batches_dispatched + st.merged, TOTAL);
    CHECK_EQ(iosets_check_balance(sh.s), IOSETS_OK);
    printf("  %-24s %d requests, %llu batches, %llu merged: each handed out once\n", policy,
           TOTAL, (unsigned long long)st.batches_dispatched, (unsigned long long)st.merged);
    iosets_destroy(sh.s);
    free(sh.seen);
}

int main(void) {
    run("noop", NULL, 0);
    run("wfq", NULL, 0);
    run("iosets", NULL, 0);
    const char *merge[] = {"merge=true"};
    run("timeorder", merge, 1);
    run("sjf", NULL, 0);
    const char *excl[] = {"max_exclusive_ms=1"};
    run("iosets", excl, 1);
    return check_finish("test_threads");
}
