/* The native API, one call at a time: every kind of bad input is an error code (never a crash),
 * merged batches carry every user pointer, statistics add up, configuration files work. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "iosets.h"

static int last_error_contains(const char *needle) {
    char buf[1024];
    size_t n = iosets_last_error(buf, sizeof buf);
    return n > 0 && strstr(buf, needle) != NULL;
}

static void null_handles_are_errors(void) {
    iosets_batch b;
    iosets_stats st;
    iosets_job_stats js;
    uint64_t id;
    bool applied;
    CHECK_EQ(iosets_submit(NULL, 1, 1, 0, 10, IOSETS_READ, NULL, &id), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_next(NULL, 0, &b), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_complete(NULL, 1, 10), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_fail(NULL, 1, 5), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_set_priority(NULL, 1, 2.0, &applied), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_clear_priority(NULL, 1), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_shutdown(NULL), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_read_stats(NULL, &st), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_read_job_stats(NULL, 1, &js), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_check_balance(NULL), IOSETS_ERR_NULL);
    CHECK(last_error_contains("NULL"));
    iosets_destroy(NULL); /* accepted, does nothing */
}

static void creation_errors(void) {
    iosets_scheduler *s = (iosets_scheduler *)0x1;
    CHECK_EQ(iosets_create("cfqq", NULL, 0, &s), IOSETS_ERR_UNKNOWN_POLICY);
    CHECK(s == NULL);
    CHECK(last_error_contains("valid policies"));
    CHECK(last_error_contains("wfq"));
    CHECK_EQ(iosets_create(NULL, NULL, 0, &s), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_create("noop", NULL, 0, NULL), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_create("wfq", NULL, 2, &s), IOSETS_ERR_NULL);

    const char *bad_value[] = {"weight.1=-2"};
    CHECK_EQ(iosets_create("wfq", bad_value, 1, &s), IOSETS_ERR_BAD_OPTION);
    CHECK(last_error_contains("weight.1"));
    const char *malformed[] = {"nonsense"};
    CHECK_EQ(iosets_create("wfq", malformed, 1, &s), IOSETS_ERR_BAD_OPTION);
    const char *unknown_key[] = {"colour=blue"};
    CHECK_EQ(iosets_create("noop", unknown_key, 1, &s), IOSETS_ERR_BAD_OPTION);
    CHECK(last_error_contains("colour"));
    const char *repeated[] = {"weight.1=2", "weight.1=3"};
    CHECK_EQ(iosets_create("wfq", repeated, 2, &s), IOSETS_ERR_BAD_OPTION);
    const char *null_option[] = {"weight.1=2", NULL};
    CHECK_EQ(iosets_create("wfq", null_option, 2, &s), IOSETS_ERR_NULL);
    const char not_utf8[] = {'n', (char)0xff, 'p', 0};
    CHECK_EQ(iosets_create(not_utf8, NULL, 0, &s), IOSETS_ERR_BAD_STRING);
    CHECK(s == NULL);

    /* Names are case-insensitive; good options are accepted. */
    const char *good[] = {"weight.1=500", " weight.2 = 1500 ", "key=job"};
    CHECK_EQ(iosets_create("WFQ", good, 3, &s), IOSETS_OK);
    CHECK(s != NULL);
    iosets_destroy(s);
}

static void strerror_and_last_error(void) {
    for (int code = -11; code <= 2; code++) {
        const char *msg = iosets_strerror(code);
        CHECK(msg != NULL && strlen(msg) > 0);
    }
    CHECK(strstr(iosets_strerror(IOSETS_ERR_NOT_IN_SERVICE), "not in service") != NULL);
    CHECK(strstr(iosets_strerror(12345), "unknown") != NULL);
    CHECK(strlen(iosets_version()) > 0);

    iosets_scheduler *s = NULL;
    CHECK_EQ(iosets_create("nope", NULL, 0, &s), IOSETS_ERR_UNKNOWN_POLICY);
    size_t full = iosets_last_error(NULL, 0);
    CHECK(full > 10);
    char small[8];
    memset(small, 'x', sizeof small);
    CHECK_EQ(iosets_last_error(small, sizeof small), full);
    CHECK_EQ(strlen(small), 7); /* truncated and NUL-terminated */
}

static void request_errors(void) {
    iosets_scheduler *s = NULL;
    CHECK_EQ(iosets_create("noop", NULL, 0, &s), IOSETS_OK);
    uint64_t id = 0;
    CHECK_EQ(iosets_submit(s, 1, 1, 0, 0, IOSETS_READ, NULL, &id), IOSETS_ERR_BAD_REQUEST);
    CHECK(last_error_contains("length 0"));
    CHECK_EQ(iosets_submit(s, 1, 1, 0, 0, IOSETS_WRITE, NULL, &id), IOSETS_ERR_BAD_REQUEST);
    CHECK_EQ(iosets_submit(s, 1, 1, 0, 10, 7, NULL, &id), IOSETS_ERR_BAD_REQUEST);
    CHECK_EQ(iosets_submit(s, 1, 1, 0, 10, -1, NULL, &id), IOSETS_ERR_BAD_REQUEST);
    CHECK_EQ(iosets_submit(s, 1, 1, UINT64_MAX, 2, IOSETS_READ, NULL, &id), IOSETS_ERR_BAD_REQUEST);
    /* A zero-length "other" request (fsync, metadata) is fine; id_out may be NULL. */
    CHECK_EQ(iosets_submit(s, 1, 1, 0, 0, IOSETS_OTHER, NULL, NULL), IOSETS_OK);

    iosets_batch b;
    CHECK_EQ(iosets_next(s, 0, NULL), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_next(s, 0, &b), IOSETS_OK);
    CHECK_EQ(b.op, IOSETS_OTHER);
    CHECK_EQ(iosets_fail(s, b.id, 0), IOSETS_ERR_BAD_REQUEST); /* errno must be > 0 */
    CHECK_EQ(iosets_complete(s, b.id, 0), IOSETS_OK);
    CHECK_EQ(iosets_complete(s, b.id, 0), IOSETS_ERR_NOT_IN_SERVICE); /* twice */
    CHECK_EQ(iosets_fail(s, b.id, 5), IOSETS_ERR_NOT_IN_SERVICE);
    CHECK_EQ(iosets_complete(s, 987654, 0), IOSETS_ERR_NOT_IN_SERVICE); /* never dispatched */
    CHECK(last_error_contains("987654"));

    /* Nothing queued: a zero timeout and a short one both time out. */
    CHECK_EQ(iosets_next(s, 0, &b), IOSETS_TIMEOUT);
    CHECK_EQ(iosets_next(s, 5, &b), IOSETS_TIMEOUT);

    bool applied = true;
    CHECK_EQ(iosets_set_priority(s, 1, 0.0, &applied), IOSETS_ERR_BAD_PRIORITY);
    CHECK_EQ(iosets_set_priority(s, 1, -1.0, &applied), IOSETS_ERR_BAD_PRIORITY);
    CHECK_EQ(iosets_set_priority(s, 1, NAN, &applied), IOSETS_ERR_BAD_PRIORITY);
    CHECK_EQ(iosets_set_priority(s, 1, INFINITY, &applied), IOSETS_ERR_BAD_PRIORITY);
    CHECK_EQ(iosets_set_priority(s, 1, 2.0, &applied), IOSETS_OK);
    CHECK(!applied); /* noop has no notion of priority */
    CHECK_EQ(iosets_set_priority(s, 1, 2.0, NULL), IOSETS_OK);
    CHECK_EQ(iosets_clear_priority(s, 1), IOSETS_OK);
    CHECK_EQ(iosets_clear_priority(s, 99), IOSETS_OK);

    iosets_job_stats js;
    CHECK_EQ(iosets_read_job_stats(s, 42, &js), IOSETS_ERR_UNKNOWN_JOB);
    CHECK_EQ(iosets_read_job_stats(s, 1, NULL), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_read_stats(s, NULL), IOSETS_ERR_NULL);

    /* Shutdown: queued work still goes out, then workers are told to stop; submits are refused. */
    CHECK_EQ(iosets_submit(s, 1, 1, 0, 10, IOSETS_READ, NULL, &id), IOSETS_OK);
    CHECK_EQ(iosets_shutdown(s), IOSETS_OK);
    CHECK_EQ(iosets_shutdown(s), IOSETS_OK);
    CHECK_EQ(iosets_submit(s, 1, 1, 0, 10, IOSETS_READ, NULL, &id), IOSETS_ERR_SHUT_DOWN);
    CHECK_EQ(iosets_next(s, -1, &b), IOSETS_OK);
    CHECK_EQ(b.id, id);
    CHECK_EQ(iosets_next(s, -1, &b), IOSETS_SHUTDOWN);
    CHECK_EQ(iosets_complete(s, id, 10), IOSETS_OK);
    CHECK_EQ(iosets_check_balance(s), IOSETS_OK);
    iosets_destroy(s);
}

static void merged_batches_and_stats(void) {
    const char *opts[] = {"merge=true"};
    iosets_scheduler *s = NULL;
    CHECK_EQ(iosets_create("timeorder", opts, 1, &s), IOSETS_OK);
    int payload[4] = {0, 1, 2, 3};
    uint64_t ids[4];
    /* Three contiguous writes of file 9 (submitted out of order) and one read of file 8. */
    CHECK_EQ(iosets_submit(s, 3, 9, 4096, 4096, IOSETS_WRITE, &payload[1], &ids[1]), IOSETS_OK);
    CHECK_EQ(iosets_submit(s, 3, 9, 0, 4096, IOSETS_WRITE, &payload[0], &ids[0]), IOSETS_OK);
    CHECK_EQ(iosets_submit(s, 4, 8, 0, 100, IOSETS_READ, &payload[3], &ids[3]), IOSETS_OK);
    CHECK_EQ(iosets_submit(s, 3, 9, 8192, 4096, IOSETS_WRITE, &payload[2], &ids[2]), IOSETS_OK);

    iosets_batch b;
    CHECK_EQ(iosets_next(s, 0, &b), IOSETS_OK);
    CHECK_EQ(b.count, 3);
    CHECK_EQ(b.file, 9);
    CHECK_EQ(b.offset, 0);
    CHECK_EQ(b.length, 3 * 4096);
    CHECK_EQ(b.op, IOSETS_WRITE);
    CHECK(b.users[0] == &payload[0] && b.users[1] == &payload[1] && b.users[2] == &payload[2]);
    iosets_batch r;
    CHECK_EQ(iosets_next(s, 0, &r), IOSETS_OK);
    CHECK_EQ(r.count, 1);
    CHECK(r.users[0] == &payload[3]);
    CHECK_EQ(r.id, ids[3]);

    iosets_stats st;
    CHECK_EQ(iosets_read_stats(s, &st), IOSETS_OK);
    CHECK_EQ(st.submitted, 4);
    CHECK_EQ(st.batches_in_service, 2);
    CHECK_EQ(st.requests_in_service, 4);
    CHECK_EQ(st.merged, 2);

    CHECK_EQ(iosets_complete(s, b.id, 3 * 4096), IOSETS_OK);
    CHECK_EQ(iosets_fail(s, r.id, 5), IOSETS_OK);
    CHECK_EQ(iosets_read_stats(s, &st), IOSETS_OK);
    CHECK_EQ(st.completed, 4);
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.queued, 0);
    CHECK_EQ(st.jobs, 2);
    iosets_job_stats js;
    CHECK_EQ(iosets_read_job_stats(s, 3, &js), IOSETS_OK);
    CHECK_EQ(js.ops, 3);
    CHECK_EQ(js.bytes_written, 3 * 4096);
    CHECK_EQ(js.wait_count, 3);
    CHECK_EQ(iosets_read_job_stats(s, 4, &js), IOSETS_OK);
    CHECK_EQ(js.failed, 1);
    CHECK_EQ(js.bytes_read, 0);
    CHECK_EQ(iosets_check_balance(s), IOSETS_OK);
    iosets_destroy(s);
}

static void priorities_reach_the_policy(void) {
    iosets_scheduler *s = NULL;
    CHECK_EQ(iosets_create("wfq", NULL, 0, &s), IOSETS_OK);
    bool applied = false;
    CHECK_EQ(iosets_set_priority(s, 7, 3.0, &applied), IOSETS_OK);
    CHECK(applied);
    iosets_destroy(s);
    CHECK_EQ(iosets_create("iosets", NULL, 0, &s), IOSETS_OK);
    applied = false;
    CHECK_EQ(iosets_set_priority(s, 7, 0.1, &applied), IOSETS_OK);
    CHECK(applied);
    iosets_destroy(s);
}

static void destroy_with_work_outstanding(void) {
    iosets_scheduler *s = NULL;
    CHECK_EQ(iosets_create("wfq", NULL, 0, &s), IOSETS_OK);
    for (uint64_t i = 0; i < 10; i++)
        CHECK_EQ(iosets_submit(s, i % 3, 1, i * 10, 10, IOSETS_READ, NULL, NULL), IOSETS_OK);
    iosets_batch b;
    CHECK_EQ(iosets_next(s, 0, &b), IOSETS_OK);
    CHECK_EQ(iosets_next(s, 0, &b), IOSETS_OK);
    /* Two batches unanswered, eight queued: destroy frees all of it (valgrind checks). */
    iosets_destroy(s);
}

/* Writes `text` to the file `path` and creates a scheduler from it: its status, the handle in
 * `*s`. */
static iosets_status create_from_text(const char *path, const char *text, iosets_scheduler **s) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    return iosets_create_from_file(path, s);
}

static void config_files(void) {
    char path[] = "/tmp/iosets-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *text =
        "# a wfq\npolicy = \"wfq\"\n[policy_options]\n\"weight.1\" = 500 # half\nweight.2 = 1000\n";
    CHECK_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
    close(fd);
    iosets_scheduler *s = NULL;
    CHECK_EQ(iosets_create_from_file(path, &s), IOSETS_OK);
    CHECK(s != NULL);
    iosets_destroy(s);

    CHECK_EQ(create_from_text(
                 path, "policy = \"wfq\"\n[policy_options]\n\"weight.1\" = \"zero\"\n", &s),
             IOSETS_ERR_BAD_OPTION);
    CHECK_EQ(create_from_text(path, "policy = \"wfq\"\njunk line\n", &s), IOSETS_ERR_CONFIG);
    CHECK(last_error_contains(":2:"));
    /* The key = value format of libiosets 0.1 is refused, naming its first line. */
    CHECK_EQ(create_from_text(path, "# old\npolicy = wfq\nweight.1 = 500\n", &s),
             IOSETS_ERR_CONFIG);
    CHECK(last_error_contains(":2:"));
    CHECK(last_error_contains("[policy_options]"));
    /* The library's own settings: automatic priorities and the forget interval. */
    CHECK_EQ(create_from_text(
                 path, "policy = \"iosets\"\nauto_priority = true\nforget_idle_s = 30\n", &s),
             IOSETS_OK);
    iosets_destroy(s);
    CHECK_EQ(create_from_text(path, "policy = \"iosets\"\nforget_idle_s = 0\n", &s),
             IOSETS_ERR_CONFIG);
    CHECK_EQ(create_from_text(path, "policy = \"fifoo\"\n", &s), IOSETS_ERR_UNKNOWN_POLICY);
    unlink(path);
    CHECK_EQ(iosets_create_from_file(path, &s), IOSETS_ERR_CONFIG);
    CHECK_EQ(iosets_create_from_file(NULL, &s), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_create_from_file(path, NULL), IOSETS_ERR_NULL);
    CHECK(s == NULL);
}

int main(void) {
    null_handles_are_errors();
    creation_errors();
    strerror_and_last_error();
    request_errors();
    merged_batches_and_stats();
    priorities_reach_the_policy();
    destroy_with_work_outstanding();
    config_files();
    return check_finish("test_api");
}
