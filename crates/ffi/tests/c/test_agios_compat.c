/* AGIOS source compatibility: code written like AGIOS's own test/agios_test.c (which includes
 * <scheduling_algorithms.h>, declares `extern int32_t config_agios_default_algorithm` and names its
 * output file with get_algorithm_name_from_index) builds against the shim's headers only and runs:
 * requests generated up front, issuer threads behind a barrier, one processing thread per callback
 * that releases the request. For every AGIOS algorithm the global names the configured algorithm.
 * Then NOOP calls back inside agios_add_request, on the adding thread, as AGIOS does. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <agios.h>
#include <scheduling_algorithms.h>

#include "check.h"

extern int32_t config_agios_default_algorithm; /* as agios_test.c declares it */

struct request_info_t {
    char fileid[100];
    int32_t len;
    int64_t offset;
    int32_t type;
    int32_t process_time;
    int32_t time_before;
    int32_t queue_id;
};

static struct request_info_t *requests;
static pthread_t *processing_threads;
static atomic_int *called;
static atomic_int released_bad;
static int32_t g_generated_reqnb, g_reqnb_perthread, g_thread_nb;
static int32_t g_processed_reqnb;
static pthread_mutex_t g_processed_reqnb_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_processed_reqnb_cond = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t test_start;

static void inc_processed_reqnb(void) {
    pthread_mutex_lock(&g_processed_reqnb_mutex);
    g_processed_reqnb++;
    if (g_processed_reqnb >= g_generated_reqnb) pthread_cond_signal(&g_processed_reqnb_cond);
    pthread_mutex_unlock(&g_processed_reqnb_mutex);
}

static void *process_thr(void *arg) {
    struct request_info_t *req = arg;
    struct timespec t = {0, req->process_time};
    nanosleep(&t, NULL);
    if (!agios_release_request(req->fileid, req->type, req->len, req->offset))
        atomic_fetch_add(&released_bad, 1);
    inc_processed_reqnb();
    return NULL;
}

static void *test_process(int64_t req_id) {
    CHECK(req_id >= 0 && req_id < g_generated_reqnb);
    if (req_id < 0 || req_id >= g_generated_reqnb) return NULL;
    atomic_fetch_add(&called[req_id], 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (pthread_create(&processing_threads[req_id], &attr, process_thr, &requests[req_id]) != 0) {
        CHECK(!"pthread_create");
        inc_processed_reqnb();
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

static void *test_thr(void *arg) {
    int32_t me = (int32_t)(intptr_t)arg;
    pthread_barrier_wait(&test_start);
    for (int32_t i = me * g_reqnb_perthread; i < (me + 1) * g_reqnb_perthread; i++) {
        struct timespec t = {0, requests[i].time_before};
        nanosleep(&t, NULL);
        CHECK(agios_add_request(requests[i].fileid, requests[i].type, requests[i].offset,
                                requests[i].len, i, requests[i].queue_id));
    }
    return NULL;
}

/* agios_test's generator (threads, files, requests per thread, queue ids, sequential %, size,
 * time between, processing time, seed). */
static void generate(int32_t filenb, int32_t queue_ids, int32_t seq, int32_t size, unsigned seed) {
    g_generated_reqnb = g_thread_nb * g_reqnb_perthread;
    requests = calloc((size_t)g_generated_reqnb, sizeof *requests);
    int64_t *lastoffset = calloc((size_t)filenb, sizeof(int64_t));
    srand(seed);
    for (int32_t i = 0; i < g_generated_reqnb; i++) {
        int32_t f = (i / g_reqnb_perthread) % filenb;
        snprintf(requests[i].fileid, sizeof requests[i].fileid, "arquivo.%d.out", f);
        requests[i].len = size;
        if (rand() % 100 < seq) requests[i].offset = lastoffset[f] + size;
        else requests[i].offset = rand() % 2000000000;
        lastoffset[f] = requests[i].offset;
        requests[i].type = rand() % 2;
        requests[i].process_time = rand() % 20000;
        requests[i].time_before = rand() % 20000;
        requests[i].queue_id = rand() % queue_ids;
    }
    free(lastoffset);
}

static char *write_config(const char *algorithm, const char *extra) {
    static char path[64];
    strcpy(path, "/tmp/iosets-compat-conf-XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "library_options: {\n  default_algorithm = \"%s\";\n  waiting_time = 900000;\n"
               "  twins_window = 500;\n  SW_window = 10;\n%s\n};\n",
            algorithm, extra ? extra : "");
    fclose(f);
    return path;
}

static void run(const char *algorithm, const char *extra, int32_t queue_ids) {
    g_thread_nb = 4;
    g_reqnb_perthread = 25;
    g_processed_reqnb = 0;
    atomic_store(&released_bad, 0);
    generate(2, queue_ids, 70, 1024, 42);
    called = calloc((size_t)g_generated_reqnb, sizeof(atomic_int));
    processing_threads = calloc((size_t)g_generated_reqnb, sizeof(pthread_t));
    char *conf = write_config(algorithm, extra);
    bool ok = agios_init(test_process, NULL, conf, queue_ids);
    unlink(conf);
    CHECK(ok);
    if (!ok) return;

    /* The global names the configured algorithm, as agios_test uses it. */
    int32_t want = -1;
    CHECK(get_algorithm_from_string(algorithm, &want));
    CHECK_EQ(config_agios_default_algorithm, want);
    char buffer[1024];
    snprintf(buffer, sizeof buffer, "output_%s_%d.csv",
             get_algorithm_name_from_index(config_agios_default_algorithm), (int)g_thread_nb);
    char expected[1024];
    snprintf(expected, sizeof expected, "output_%s_4.csv", algorithm);
    CHECK(strcmp(buffer, expected) == 0);

    pthread_t threads[4];
    pthread_barrier_init(&test_start, NULL, (unsigned)g_thread_nb + 1);
    for (int32_t i = 0; i < g_thread_nb; i++)
        pthread_create(&threads[i], NULL, test_thr, (void *)(intptr_t)i);
    pthread_barrier_wait(&test_start);
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 60;
    pthread_mutex_lock(&g_processed_reqnb_mutex);
    while (g_processed_reqnb < g_generated_reqnb)
        if (pthread_cond_timedwait(&g_processed_reqnb_cond, &g_processed_reqnb_mutex, &limit) != 0)
            break;
    int32_t processed = g_processed_reqnb;
    pthread_mutex_unlock(&g_processed_reqnb_mutex);
    CHECK_EQ(processed, g_generated_reqnb);
    agios_exit();
    for (int32_t i = 0; i < g_thread_nb; i++) pthread_join(threads[i], NULL);
    int once = 0;
    for (int32_t i = 0; i < g_generated_reqnb; i++) {
        once += atomic_load(&called[i]) == 1;
        if (atomic_load(&called[i]) > 0) pthread_join(processing_threads[i], NULL);
    }
    CHECK_EQ(once, g_generated_reqnb);
    CHECK_EQ(atomic_load(&released_bad), 0);
    /* After agios_exit the global keeps its value, as AGIOS's does. */
    CHECK_EQ(config_agios_default_algorithm, want);
    printf("  %-7s index %d: %d requests called back once and released\n", algorithm, want,
           g_generated_reqnb);
    free(requests);
    free(called);
    free(processing_threads);
}

static void names(void) {
    static const char *upstream[IO_SCHEDULER_COUNT] = {"MLF", "TO-agg", "SJF", "aIOLi", "TO",
                                                       "SW",  "NOOP",   "TWINS", "WFQ"};
    CHECK_EQ(MLF_SCHEDULER, 0);
    CHECK_EQ(TOAGG_SCHEDULER, 1);
    CHECK_EQ(SJF_SCHEDULER, 2);
    CHECK_EQ(AIOLI_SCHEDULER, 3);
    CHECK_EQ(TO_SCHEDULER, 4);
    CHECK_EQ(SW_SCHEDULER, 5);
    CHECK_EQ(NOOP_SCHEDULER, 6);
    CHECK_EQ(TWINS_SCHEDULER, 7);
    CHECK_EQ(WFQ_SCHEDULER, 8);
    for (int32_t i = 0; i < IO_SCHEDULER_COUNT; i++) {
        const char *n = get_algorithm_name_from_index(i);
        CHECK(n != NULL && strcmp(n, upstream[i]) == 0);
        int32_t back = -1;
        CHECK(get_algorithm_from_string(upstream[i], &back));
        CHECK_EQ(back, i);
    }
    CHECK(get_algorithm_name_from_index(-1) == NULL);
    CHECK(get_algorithm_name_from_index(IO_SCHEDULER_COUNT) == NULL);
    int32_t idx = -1;
    CHECK(!get_algorithm_from_string("sjF", &idx)); /* case-sensitive, as AGIOS */
    CHECK_EQ(idx, SJF_SCHEDULER);                   /* AGIOS's fallback */
    CHECK(!get_algorithm_from_string(NULL, &idx));
    CHECK(get_algorithm_from_string("iosets", &idx)); /* extension: iosets' own names */
    CHECK(idx >= IOSETS_POLICY_BASE);
    CHECK(strcmp(get_algorithm_name_from_index(idx), "iosets") == 0);
}

/* NOOP: the callback runs on the thread that adds, before agios_add_request returns. */
static _Thread_local int adding;
static _Thread_local int64_t my_last_callback = -1;
static atomic_int noop_elsewhere, noop_calls;

static void *noop_callback(int64_t id) {
    atomic_fetch_add(&noop_calls, 1);
    if (!adding) atomic_fetch_add(&noop_elsewhere, 1);
    my_last_callback = id;
    return NULL;
}

static void *noop_adder(void *arg) {
    int64_t base = (int64_t)(intptr_t)arg * 1000;
    char f[32];
    snprintf(f, sizeof f, "noop.%lld", (long long)base);
    for (int64_t i = 0; i < 500; i++) {
        adding = 1;
        CHECK(agios_add_request(f, RT_WRITE, i * 512, 512, base + i, 0));
        adding = 0;
        CHECK_EQ(my_last_callback, base + i); /* its own request, called back already */
        CHECK(agios_release_request(f, RT_WRITE, 512, i * 512));
    }
    return NULL;
}

static void noop_inline(void) {
    char *conf = write_config("NOOP", NULL);
    CHECK(agios_init(noop_callback, NULL, conf, 1));
    unlink(conf);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, noop_adder, (void *)(intptr_t)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    agios_exit();
    CHECK_EQ(atomic_load(&noop_calls), 2000);
    CHECK_EQ(atomic_load(&noop_elsewhere), 0);
    printf("  NOOP: 2000 callbacks, every one inside agios_add_request on the adding thread\n");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_EQ(config_agios_default_algorithm, SJF_SCHEDULER); /* before agios_init, as AGIOS */
    names();
    run("NOOP", NULL, 2);
    run("TO", NULL, 2);
    run("TO-agg", NULL, 1);
    run("SJF", NULL, 1);
    run("MLF", NULL, 1);
    run("aIOLi", NULL, 1);
    run("SW", NULL, 3);
    run("TWINS", NULL, 3);
    char wfq[] = "/tmp/iosets-compat-wfq-XXXXXX";
    int fd = mkstemp(wfq);
    CHECK(write(fd, "1024 2048 3072\n", 15) == 15);
    close(fd);
    char extra[128];
    snprintf(extra, sizeof extra, "  wfq_conf = \"%s\";", wfq);
    run("WFQ", extra, 3);
    unlink(wfq);
    run("iosets", NULL, 2);
    noop_inline();
    return check_finish("test_agios_compat");
}
