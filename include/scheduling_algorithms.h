/*
 * scheduling_algorithms.h: AGIOS's algorithm identifiers and names, provided by libiosets (its
 * AGIOS shim; see agios.h). Software written for AGIOS that includes this header (AGIOS's own
 * test/agios_test.c does) compiles against it unchanged and links with -lagios or -liosets.
 *
 * Provided: the identifiers (same values and names as AGIOS: MLF 0, TO-agg 1, SJF 2, aIOLi 3, TO 4,
 * SW 5, NOOP 6, TWINS 7, WFQ 8), IO_SCHEDULER_COUNT, MAX_AGGREG_SIZE, get_algorithm_name_from_index,
 * get_algorithm_from_string and the global config_agios_default_algorithm (the identifier of the
 * algorithm agios_init set up; SJF_SCHEDULER before the first agios_init).
 *
 * Extension: an iosets policy chosen by its own name in default_algorithm ("iosets", "deadline",
 * ...) has the identifier IOSETS_POLICY_BASE + its position in iosets' registry, which
 * get_algorithm_name_from_index names too. These positions may change between versions.
 *
 * Not provided (AGIOS internals the shim does not have): struct io_scheduler_instance_t,
 * current_alg, current_scheduler, change_selected_alg, find_io_scheduler, initialize_scheduler,
 * enable_SW, generic_post_process.
 */
#ifndef AGIOS_SCHEDULING_ALGORITHMS_H
#define AGIOS_SCHEDULING_ALGORITHMS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MAX_AGGREG_SIZE 16 /* AGIOS's aggregation limit, in requests (iosets limits bytes) */

#define MLF_SCHEDULER 0
#define TOAGG_SCHEDULER 1
#define SJF_SCHEDULER 2
#define AIOLI_SCHEDULER 3
#define TO_SCHEDULER 4
#define SW_SCHEDULER 5
#define NOOP_SCHEDULER 6
#define TWINS_SCHEDULER 7
#define WFQ_SCHEDULER 8
#define IO_SCHEDULER_COUNT 9
#define IOSETS_POLICY_BASE 100

/* The identifier of the algorithm agios_init set up (read it; do not write it). */
extern int32_t config_agios_default_algorithm;

/* The name of algorithm `index` ("SJF" for SJF_SCHEDULER), or NULL if it names none. The string is
 * static: never free or modify it. */
char *get_algorithm_name_from_index(int32_t index);

/* Stores the identifier of the algorithm called `alg` (exact, case-sensitive) in *index and
 * returns true; otherwise stores SJF_SCHEDULER and returns false (as AGIOS). NULL arguments return
 * false. */
bool get_algorithm_from_string(const char *alg, int32_t *index);

#ifdef __cplusplus
}
#endif

#endif /* AGIOS_SCHEDULING_ALGORITHMS_H */
