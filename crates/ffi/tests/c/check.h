/* Tiny assertion helpers shared by the C tests of libiosets. */
#ifndef IOSETS_TEST_CHECK_H
#define IOSETS_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures = 0;
static int check_count = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        check_count++;                                                               \
        if (!(cond)) {                                                               \
            check_failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_EQ(a, b)                                                                    \
    do {                                                                                  \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                   \
        check_count++;                                                                    \
        if (check_a_ != check_b_) {                                                       \
            check_failures++;                                                             \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", __FILE__, \
                    __LINE__, #a, check_a_, #b, check_b_);                                \
        }                                                                                 \
    } while (0)

/* Ends a test program: prints a summary and returns its exit code. */
static int check_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures == 0 ? 0 : 1;
}

#endif
