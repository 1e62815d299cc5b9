/* The AGIOS-compatible shim, driven the way AGIOS's own test/agios_test.c drives AGIOS: requests
 * generated up front from srand(seed) (file "arquivo.<f>.out", sequential with probability p, else
 * a random offset; random type; random processing time and think time; random queue id), issuer
 * threads released together by a barrier, each sleeping before every agios_add_request; a callback
 * that starts one thread per request, which sleeps the processing time and then calls
 * agios_release_request. Every algorithm name of AGIOS is run; each request must be called back
 * exactly once and released successfully. Then every kind of bad input returns false. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agios.h"
#include "check.h"

typedef struct {
    char file_id[64];
    int32_t type;
    int64_t offset, len;
    int32_t queue_id;
    long process_ns, before_ns;
} req_t;

static req_t *reqs;
static int total;
static atomic_int *called;       /* callbacks per identifier */
static atomic_int released_ok;   /* agios_release_request returned true */
static atomic_int released_bad;  /* ... returned false */
static atomic_int batch_calls;   /* process_requests calls (aggregated batches) */
static pthread_t *req_threads;
static atomic_int *thread_started;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done;
static pthread_barrier_t barrier;

static void sleep_ns(long ns) {
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&t, NULL);
}

static void *serve(void *p) {
    int64_t id = (int64_t)(intptr_t)p;
    req_t *r = &reqs[id];
    sleep_ns(r->process_ns);
    if (agios_release_request(r->file_id, r->type, r->len, r->offset))
        atomic_fetch_add(&released_ok, 1);
    else
        atomic_fetch_add(&released_bad, 1);
    pthread_mutex_lock(&done_lock);
    done++;
    pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&done_lock);
    return NULL;
}

static void *process_request(int64_t id) {
    if (id < 0 || id >= total) {
        atomic_fetch_add(&released_bad, 1);
        return NULL;
    }
    if (atomic_fetch_add(&called[id], 1) == 0) {
        atomic_store(&thread_started[id], 1);
        /* A small stack: agios_test starts a thread per request, and valgrind tracks stacks. */
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        pthread_create(&req_threads[id], &attr, serve, (void *)(intptr_t)id);
        pthread_attr_destroy(&attr);
    }
    return NULL;
}

static void *process_requests(int64_t *ids, int32_t n) {
    atomic_fetch_add(&batch_calls, 1);
    for (int32_t i = 0; i < n; i++) process_request(ids[i]);
    return NULL;
}

typedef struct {
    int index, per_thread;
} issuer_t;

static void *issuer(void *p) {
    issuer_t *a = p;
    pthread_barrier_wait(&barrier);
    for (int i = a->index * a->per_thread; i < (a->index + 1) * a->per_thread; i++) {
        sleep_ns(reqs[i].before_ns);
        CHECK(agios_add_request(reqs[i].file_id, reqs[i].type, reqs[i].offset, reqs[i].len, i,
                                reqs[i].queue_id));
    }
    return NULL;
}

/* agios_test's generator, call for call. */
static void generate(int threads, int files, int per_thread, int queue_ids, int seq_prob,
                     int64_t req_size, long between_ns, long process_ns, unsigned seed) {
    total = threads * per_thread;
    reqs = calloc((size_t)total, sizeof(req_t));
    int64_t *last = calloc((size_t)files, sizeof(int64_t));
    srand(seed);
    for (int i = 0; i < total; i++) {
        int thread = i / per_thread;
        int file = thread % files;
        snprintf(reqs[i].file_id, sizeof reqs[i].file_id, "arquivo.%d.out", file);
        reqs[i].len = req_size;
        if (rand() % 100 < seq_prob)
            reqs[i].offset = last[file] + req_size;
        else
            reqs[i].offset = rand() % 2000000000;
        last[file] = reqs[i].offset;
        reqs[i].type = rand() % 2;
        reqs[i].process_ns = rand() % process_ns;
        reqs[i].before_ns = rand() % between_ns;
        reqs[i].queue_id = rand() % queue_ids;
    }
    free(last);
}

static char *write_config(const char *algorithm, const char *extra) {
    static char path[64];
    strcpy(path, "/tmp/iosets-agios-conf-XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f,
            "library_options:\n{\n"
            "  trace = false;\n  trace_file_prefix = \"/tmp/agios_tracefile\";\n"
            "  trace_file_sufix = \"out\";\n  default_algorithm = \"%s\";\n"
            "  waiting_time = 900000;\n  aioli_quantum = 65536;\n  mlf_quantum = 8192;\n"
            "  select_algorithm_period = 1000;\n  select_algorithm_min_reqnumber = 1;\n"
            "  starting_algorithm = \"SJF\";\n  performance_values = 5;\n  enable_SW = false;\n"
            "  SW_window = 10;  // ms\n  twins_window = 500; /* us */\n"
            "  max_trace_buffer_size = 32768;\n%s\n};\n",
            algorithm, extra ? extra : "");
    fclose(f);
    return path;
}

static void run(const char *algorithm, const char *extra, int threads, int files, int per_thread,
                int queue_ids, int seq_prob, int with_list_callback) {
    generate(threads, files, per_thread, queue_ids, seq_prob, 4096, 200000, 300000, 1234);
    called = calloc((size_t)total, sizeof(atomic_int));
    thread_started = calloc((size_t)total, sizeof(atomic_int));
    req_threads = calloc((size_t)total, sizeof(pthread_t));
    atomic_store(&released_ok, 0);
    atomic_store(&released_bad, 0);
    atomic_store(&batch_calls, 0);
    done = 0;

    char *conf = write_config(algorithm, extra);
    bool ok = agios_init(process_request, with_list_callback ? process_requests : NULL, conf,
                         queue_ids);
    CHECK(ok);
    unlink(conf);
    if (ok) {
        pthread_barrier_init(&barrier, NULL, (unsigned)threads);
        pthread_t *t = calloc((size_t)threads, sizeof(pthread_t));
        issuer_t *args = calloc((size_t)threads, sizeof(issuer_t));
        for (int i = 0; i < threads; i++) {
            args[i].index = i;
            args[i].per_thread = per_thread;
            pthread_create(&t[i], NULL, issuer, &args[i]);
        }
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        /* Wait until every request has been served and released (bounded: 60 s). */
        struct timespec limit;
        clock_gettime(CLOCK_REALTIME, &limit);
        limit.tv_sec += 60;
        pthread_mutex_lock(&done_lock);
        while (done < total)
            if (pthread_cond_timedwait(&done_cond, &done_lock, &limit) != 0) break;
        int finished = done;
        pthread_mutex_unlock(&done_lock);
        CHECK_EQ(finished, total);
        agios_exit();
        for (int i = 0; i < total; i++)
            if (atomic_load(&thread_started[i])) pthread_join(req_threads[i], NULL);
        pthread_barrier_destroy(&barrier);
        free(t);
        free(args);
    }
    int once = 0;
    for (int i = 0; i < total; i++) once += atomic_load(&called[i]) == 1;
    CHECK_EQ(once, total);
    CHECK_EQ(atomic_load(&released_ok), total);
    CHECK_EQ(atomic_load(&released_bad), 0);
    printf("  %-7s %3d requests, %d threads: each called back once and released; %d batch callbacks\n",
           algorithm, total, threads, atomic_load(&batch_calls));
    free(reqs);
    free(called);
    free(thread_started);
    free(req_threads);
}

static void *never(int64_t id) {
    (void)id;
    return NULL;
}

static void bad_input(void) {
    char f[] = "arquivo.0.out";
    /* Before agios_init: everything refuses. */
    CHECK(!agios_add_request(f, RT_READ, 0, 10, 1, 0));
    CHECK(!agios_release_request(f, RT_READ, 10, 0));
    agios_exit(); /* not initialised: nothing happens */

    char *conf = write_config("NOOP", NULL);
    CHECK(!agios_init(NULL, NULL, conf, 1)); /* no callback */
    char *bad = write_config("FIFO", NULL);
    CHECK(!agios_init(never, NULL, bad, 1)); /* unknown algorithm */
    unlink(bad);
    bad = write_config("WFQ", NULL);
    CHECK(!agios_init(never, NULL, bad, 2)); /* WFQ without its weights file */
    unlink(bad);
    bad = write_config("SJF", "  iosets_dispatch_threads = 0;");
    CHECK(!agios_init(never, NULL, bad, 1));
    unlink(bad);
    bad = write_config("SJF", "  iosets_options = \"max_aggregation=0\";");
    CHECK(!agios_init(never, NULL, bad, 1)); /* sjf refuses 0 */
    unlink(bad);

    conf = write_config("TO", NULL);
    CHECK(agios_init(never, NULL, conf, 1));
    CHECK(!agios_init(never, NULL, conf, 1)); /* twice */
    unlink(conf);
    CHECK(!agios_add_request(NULL, RT_READ, 0, 10, 1, 0));
    CHECK(!agios_add_request(f, 7, 0, 10, 1, 0));
    CHECK(!agios_add_request(f, RT_READ, 0, 0, 1, 0));
    CHECK(!agios_add_request(f, RT_READ, 0, -5, 1, 0));
    CHECK(!agios_add_request(f, RT_READ, -1, 10, 1, 0));
    CHECK(!agios_add_request(f, RT_READ, 0, 10, 1, -3));
    CHECK(!agios_add_request(f, RT_WRITE, INT64_MAX, 10, 1, 0));
    CHECK(!agios_release_request(f, RT_READ, 10, 0)); /* never added */
    CHECK(!agios_release_request(NULL, RT_READ, 10, 0));
    CHECK(!agios_release_request(f, 3, 10, 0));
    CHECK(!agios_cancel_request(f, RT_READ, 10, 0));
    /* Queued and handed-out requests left at exit are freed (valgrind checks). */
    for (int i = 0; i < 20; i++) CHECK(agios_add_request(f, RT_READ, i * 10, 10, i, 0));
    agios_exit();
    agios_exit();
    CHECK(!agios_add_request(f, RT_READ, 0, 10, 1, 0));

    /* An unreadable configuration file means AGIOS's defaults (SJF), as in AGIOS. */
    char missing[] = "/tmp/iosets-no-such-agios.conf";
    CHECK(agios_init(never, NULL, missing, 1));
    agios_exit();
}

static void *released_at_once(int64_t id);
static char serial_file[] = "serial.out";
static atomic_int serial_calls;
static void *released_at_once(int64_t id) {
    atomic_fetch_add(&serial_calls, 1);
    CHECK(agios_release_request(serial_file, RT_WRITE, 100, id * 100));
    return NULL;
}

/* Release from inside the callback (no thread), and a release that does not match. */
static void release_inside_callback(void) {
    char *conf = write_config("TO", NULL);
    CHECK(agios_init(released_at_once, NULL, conf, 1));
    unlink(conf);
    for (int i = 0; i < 50; i++) CHECK(agios_add_request(serial_file, RT_WRITE, i * 100, 100, i, 0));
    for (int spin = 0; spin < 5000 && atomic_load(&serial_calls) < 50; spin++) usleep(1000);
    CHECK_EQ(atomic_load(&serial_calls), 50);
    CHECK(!agios_release_request(serial_file, RT_WRITE, 100, 0)); /* released already */
    agios_exit();
}

static atomic_int dup_calls;
static void *count_only(int64_t id) {
    (void)id;
    atomic_fetch_add(&dup_calls, 1);
    return NULL;
}

/* The same (file, type, offset, len) handed out twice before any release: each release matches one
 * of them (AGIOS releases the first match); a third release matches nothing. */
static void duplicate_ranges(void) {
    char f[] = "dup.out";
    char *conf = write_config("TO", NULL);
    CHECK(agios_init(count_only, NULL, conf, 1));
    unlink(conf);
    CHECK(agios_add_request(f, RT_READ, 4096, 512, 1, 0));
    CHECK(agios_add_request(f, RT_READ, 4096, 512, 2, 0));
    for (int spin = 0; spin < 5000 && atomic_load(&dup_calls) < 2; spin++) usleep(1000);
    CHECK_EQ(atomic_load(&dup_calls), 2);
    CHECK(agios_release_request(f, RT_READ, 512, 4096));
    CHECK(agios_release_request(f, RT_READ, 512, 4096));
    CHECK(!agios_release_request(f, RT_READ, 512, 4096));
    CHECK(!agios_release_request(f, RT_WRITE, 512, 4096)); /* other type */
    agios_exit();
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* agios_test <threads> <files> <reqs_per_thread> <queue_ids> <seq_prob> ... */
    run("NOOP", NULL, 4, 2, 40, 2, 50, 0);
    run("TO", NULL, 4, 2, 40, 2, 50, 0);
    run("TO-agg", NULL, 4, 2, 40, 1, 100, 1);
    run("SJF", NULL, 4, 2, 40, 1, 70, 1);
    run("MLF", NULL, 4, 2, 40, 1, 70, 0);
    run("aIOLi", NULL, 4, 2, 40, 1, 70, 1);
    run("SW", NULL, 4, 4, 40, 3, 50, 0);
    run("TWINS", NULL, 4, 2, 40, 3, 50, 0);
    char wfq[] = "/tmp/iosets-wfq-weights-XXXXXX";
    int fd = mkstemp(wfq);
    CHECK(write(fd, "8192 4096 4096\n", 15) == 15);
    close(fd);
    char extra[128];
    snprintf(extra, sizeof extra, "  wfq_conf = \"%s\";", wfq);
    run("WFQ", extra, 4, 2, 40, 3, 50, 0);
    unlink(wfq);
    run("iosets", "  iosets_dispatch_threads = 2;", 4, 2, 40, 2, 50, 0);
    bad_input();
    release_inside_callback();
    duplicate_ranges();
    return check_finish("test_agios");
}
