/* Thread quotas from C: a rule holding 50 % of 2 threads lets one request of its job in service
 * at a time (the next waits, it is not dropped), other jobs pass; bad rules are errors naming the
 * rule and change nothing; NULL removes the rules. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "iosets.h"

static int last_error_contains(const char *needle) {
    char buf[1024];
    size_t n = iosets_last_error(buf, sizeof buf);
    return n > 0 && strstr(buf, needle) != NULL;
}

int main(void) {
    iosets_scheduler *s = NULL;
    CHECK_EQ(iosets_create("timeorder", NULL, 0, &s), IOSETS_OK);
    CHECK_EQ(iosets_set_quota(NULL, NULL, 2), IOSETS_ERR_NULL);
    CHECK_EQ(iosets_set_quota(s, "[[rule]]\nname = \"a\"\nmatch = \"job=1\"\nthreads_pct = 50\n", 0),
             IOSETS_ERR_BAD_OPTION);
    /* Bad rules: named in the error, nothing changed. */
    CHECK_EQ(iosets_set_quota(s, "[[rule]]\nname = \"b\"\nmatch = \"color=red\"\nthreads_pct = 5\n", 2),
             IOSETS_ERR_CONFIG);
    CHECK(last_error_contains("`b`") && last_error_contains("unknown match key"));
    CHECK_EQ(iosets_set_quota(s, "[[rule]]\nname = \"c\"\nmatch = \"job=1\"\nthreads_pct = 50\n"
                                 "[[rule]]\nname = \"d\"\nmatch = \"job=2\"\nthreads_pct = 60\n", 2),
             IOSETS_ERR_CONFIG);
    CHECK(last_error_contains("`d`") && last_error_contains("over 100"));
    CHECK_EQ(iosets_set_quota(s, "threads_pct = [", 2), IOSETS_ERR_CONFIG);
    CHECK(last_error_contains("line 1"));

    CHECK_EQ(iosets_set_quota(s, "job_share_pct = 100\n[[rule]]\nname = \"one\"\nmatch = \"job=1\"\nthreads_pct = 50\n", 2),
             IOSETS_OK);
    uint64_t id;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(iosets_submit(s, 1, 1, (uint64_t)i * 4096, 4096, IOSETS_WRITE, NULL, &id), IOSETS_OK);
    }
    CHECK_EQ(iosets_submit(s, 2, 2, 0, 4096, IOSETS_WRITE, NULL, &id), IOSETS_OK);
    /* Job 1 holds its one thread; job 2 (no rule) goes; then nothing until job 1's completes. */
    iosets_batch b1, b2, none;
    CHECK_EQ(iosets_next(s, 0, &b1), IOSETS_OK);
    CHECK_EQ(b1.job, 1u);
    CHECK_EQ(iosets_next(s, 0, &b2), IOSETS_OK);
    CHECK_EQ(b2.job, 2u);
    CHECK_EQ(iosets_next(s, 0, &none), IOSETS_TIMEOUT);
    CHECK_EQ(iosets_complete(s, b1.id, 4096), IOSETS_OK);
    CHECK_EQ(iosets_next(s, 0, &b1), IOSETS_OK);
    CHECK_EQ(b1.job, 1u);
    CHECK_EQ(iosets_next(s, 0, &none), IOSETS_TIMEOUT);
    /* Removing the rules releases what they held. */
    CHECK_EQ(iosets_set_quota(s, NULL, 2), IOSETS_OK);
    CHECK_EQ(iosets_next(s, 0, &none), IOSETS_OK);
    CHECK_EQ(none.job, 1u);
    CHECK_EQ(iosets_complete(s, none.id, 4096), IOSETS_OK);
    CHECK_EQ(iosets_complete(s, b1.id, 4096), IOSETS_OK);
    CHECK_EQ(iosets_complete(s, b2.id, 4096), IOSETS_OK);
    CHECK_EQ(iosets_check_balance(s), IOSETS_OK);
    iosets_stats st;
    CHECK_EQ(iosets_read_stats(s, &st), IOSETS_OK);
    CHECK_EQ(st.completed, 4u);
    iosets_destroy(s);
    return check_finish("test_quota");
}
