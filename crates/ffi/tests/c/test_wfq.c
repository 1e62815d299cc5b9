/* WFQ shares through the C API, by counting bytes (never by time): four jobs with weights 1:2:3:4
 * (given once as options, once through iosets_set_priority), all backlogged; in every window of
 * 300 consecutive dispatches while all four are backlogged, each job's share of the bytes is within
 * 3 points of 10/20/30/40 %. Seed 000's method. Producers are threads; the backlog is built before
 * the worker starts, so that every window is one where all four queues are backlogged. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "iosets.h"

enum { JOBS = 4, PER_JOB = 1000, WINDOW = 300 };

typedef struct {
    iosets_scheduler *s;
    uint64_t job;
} prod_t;

static void *producer(void *p) {
    prod_t *a = p;
    for (int i = 0; i < PER_JOB; i++)
        CHECK_EQ(iosets_submit(a->s, a->job, a->job, (uint64_t)i * 8192, 4096 + (uint64_t)(i % 3) * 2048,
                               IOSETS_READ, (void *)(uintptr_t)a->job, NULL),
                 IOSETS_OK);
    return NULL;
}

static void run(int weights_by_priority) {
    iosets_scheduler *s = NULL;
    const char *opts[] = {"weight.1=1", "weight.2=2", "weight.3=3", "weight.4=4"};
    if (weights_by_priority) {
        CHECK_EQ(iosets_create("wfq", NULL, 0, &s), IOSETS_OK);
        for (uint64_t j = 1; j <= JOBS; j++) {
            bool applied = false;
            CHECK_EQ(iosets_set_priority(s, j, (double)j, &applied), IOSETS_OK);
            CHECK(applied);
        }
    } else {
        CHECK_EQ(iosets_create("wfq", opts, 4, &s), IOSETS_OK);
    }
    pthread_t t[JOBS];
    prod_t args[JOBS];
    for (int j = 0; j < JOBS; j++) {
        args[j].s = s;
        args[j].job = (uint64_t)j + 1;
        pthread_create(&t[j], NULL, producer, &args[j]);
    }
    for (int j = 0; j < JOBS; j++) pthread_join(t[j], NULL);

    /* One worker drains; record the job and bytes of every dispatch in order. */
    int total = JOBS * PER_JOB;
    int *job_of = calloc((size_t)total, sizeof(int));
    uint64_t *bytes_of = calloc((size_t)total, sizeof(uint64_t));
    int left[JOBS + 1] = {0, PER_JOB, PER_JOB, PER_JOB, PER_JOB};
    int n = 0, backlogged_until = -1;
    iosets_batch b;
    while (n < total && iosets_next(s, 0, &b) == IOSETS_OK) {
        CHECK_EQ(b.count, 1);
        CHECK_EQ((uint64_t)(uintptr_t)b.users[0], b.job);
        job_of[n] = (int)b.job;
        bytes_of[n] = b.length;
        if (--left[b.job] == 0 && backlogged_until < 0) backlogged_until = n;
        n++;
        CHECK_EQ(iosets_complete(s, b.id, b.length), IOSETS_OK);
    }
    CHECK_EQ(n, total);
    CHECK(backlogged_until > 2 * WINDOW);

    double worst = 0.0;
    int windows = 0;
    for (int start = 0; start + WINDOW <= backlogged_until; start++, windows++) {
        double per[JOBS + 1] = {0}, sum = 0;
        for (int i = start; i < start + WINDOW; i++) {
            per[job_of[i]] += (double)bytes_of[i];
            sum += (double)bytes_of[i];
        }
        for (int j = 1; j <= JOBS; j++) {
            double err = per[j] / sum * 100.0 - 10.0 * j;
            if (err < 0) err = -err;
            if (err > worst) worst = err;
        }
    }
    CHECK(windows > 0);
    CHECK(worst <= 3.0);
    printf("  weights by %-8s: %d windows of %d dispatches, worst share error %.2f points\n",
           weights_by_priority ? "priority" : "options", windows, WINDOW, worst);
    CHECK_EQ(iosets_check_balance(s), IOSETS_OK);
    iosets_destroy(s);
    free(job_of);
    free(bytes_of);
}

int main(void) {
    run(0);
    run(1);
    return check_finish("test_wfq");
}
