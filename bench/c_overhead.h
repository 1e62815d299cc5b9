/* The harness bench/c_overhead_agios.c and bench/c_overhead_native.c share, so that both measure
 * the same way: the clocks, the think time, the timed run of T producer threads and W workers, the
 * CSV line of a run and the idle wait. Each program defines `producer` (its argument: the
 * producer's index, from 0; it waits on `start` before its first request) and `worker`. */
#ifndef IOSETS_C_OVERHEAD_H
#define IOSETS_C_OVERHEAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Per request (by id): when it was added, when the library handed it out. */
static int64_t *t_add, *t_handed;
/* Sleep before each add (agios_test's time between requests), and in the AGIOS harness before
 * each release too (its processing time). */
static long think_ns;
/* Lets the producers go together, once every thread is started. */
static pthread_barrier_t start;

static void *producer(void *arg);
static void *worker(void *arg);
/* One measurement of `t` producers of `n` requests each and `w` workers; prints its CSV line. */
static int run(char *name, int t, int n, int w);
/* The CPU time of the idle library over `seconds`; prints its CSV line. */
static int idle(char *name, double seconds);

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void think(void) {
    if (think_ns > 0) {
        struct timespec d = {0, think_ns};
        nanosleep(&d, NULL);
    }
}

/* The wall-clock and CPU time of a run, ns. */
struct span {
    int64_t wall, cpu;
};

/* Starts `w` workers (their threads in `workers`, for the caller to join) and `t` producers, lets
 * the producers go together and returns once they are done and `*done` reaches `total`. */
static struct span timed_run(int t, int w, pthread_t *workers, atomic_int *done, int total) {
    pthread_t *producers = calloc((size_t)t, sizeof(pthread_t));
    for (int i = 0; i < w; i++) pthread_create(&workers[i], NULL, worker, NULL);
    pthread_barrier_init(&start, NULL, (unsigned)t + 1);
    for (int p = 0; p < t; p++) pthread_create(&producers[p], NULL, producer, (void *)(intptr_t)p);
    int64_t cpu0 = cpu_ns();
    int64_t t0 = now_ns();
    pthread_barrier_wait(&start);
    for (int p = 0; p < t; p++) pthread_join(producers[p], NULL);
    while (atomic_load(done) < total) {
        struct timespec ms = {0, 20000};
        nanosleep(&ms, NULL);
    }
    struct span s;
    s.wall = now_ns() - t0;
    s.cpu = cpu_ns() - cpu0;
    free(producers);
    return s;
}

/* Prints the CSV line of a run of `t` producers of `n` requests each and `w` workers:
 * threads,requests_per_thread,workers,requests,mean_us_in_library,throughput_per_s,cpu_s,wall_s */
static void print_run(int t, int n, int w, struct span s) {
    int total = t * n;
    double sum = 0;
    for (int i = 0; i < total; i++) sum += (double)(t_handed[i] - t_add[i]);
    double secs = (double)s.wall / 1e9;
    printf("%d,%d,%d,%d,%.3f,%.1f,%.4f,%.4f\n", t, n, w, total, sum / total / 1000.0, total / secs,
           (double)s.cpu / 1e9, secs);
}

/* Sleeps `seconds`; returns the time slept and the CPU time the process used meanwhile. */
static struct span idle_span(double seconds) {
    int64_t c0 = cpu_ns(), w0 = now_ns();
    struct timespec d = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&d, NULL);
    int64_t c1 = cpu_ns(), w1 = now_ns();
    struct span s = {w1 - w0, c1 - c0};
    return s;
}

/* Prints the CSV line of an idle wait: idle_wall_s,idle_cpu_s */
static void print_idle(struct span s) {
    printf("%.3f,%.4f\n", (double)s.wall / 1e9, (double)s.cpu / 1e9);
}

/* The command line both programs take: `run NAME T N W THINK_NS` or `idle NAME SECONDS`, where
 * NAME is what `name_is` says (the AGIOS configuration file, or the policy). */
static int overhead_main(int argc, char **argv, const char *name_is) {
    if (argc == 7 && strcmp(argv[1], "run") == 0) {
        think_ns = atol(argv[6]);
        return run(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    }
    if (argc == 4 && strcmp(argv[1], "idle") == 0) return idle(argv[2], atof(argv[3]));
    fprintf(stderr, "usage: %s run %s T N W THINK_NS | idle %s SECONDS\n", argv[0], name_is,
            name_is);
    return 2;
}

#endif
