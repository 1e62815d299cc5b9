/*
 * agios.h: the AGIOS v2 interface, provided by libiosets (link with -liosets, or with -lagios
 * through the libagios.so link that crates/ffi/install.sh creates).
 *
 * Software written for AGIOS (https://github.com/francielizanon/agios, 2019-2020 API) compiles
 * against this header unchanged. The functions have AGIOS's signatures and behaviour, with the
 * differences listed in crates/ffi/README.md ("AGIOS compatibility"). In short:
 *
 *   agios_init(process_request, process_requests, config_file, max_queue_id)
 *       Reads the libconfig file config_file (NULL or "" means /etc/agios.conf; an unreadable
 *       file means AGIOS's defaults, algorithm SJF), group library_options: default_algorithm
 *       (MLF, TO-agg, SJF, aIOLi, TO, SW, NOOP, TWINS, WFQ, or any iosets policy name),
 *       waiting_time, aioli_quantum, mlf_quantum, SW_window, twins_window, wfq_conf, and the
 *       iosets extensions iosets_dispatch_threads and iosets_options. Starts the dispatch
 *       thread(s), parked (no CPU) unless the policy holds requests back. Returns false on an
 *       unknown algorithm, an unusable setting, a NULL process_request, or when already
 *       initialised.
 *   The library calls process_request(identifier) for each request the policy hands out, or
 *       process_requests(ids, n) for a batch of n > 1 aggregated requests if that callback is
 *       not NULL. Callbacks run inline, on the thread whose agios_add_request (or
 *       agios_release_request) made the request dispatchable, whenever the policy lets it go at
 *       once (under NOOP always: each add calls back its own request before returning, as in
 *       AGIOS); requests held back for a time (aIOLi/MLF waits, TWINS/SW windows) are called
 *       back by a dispatch thread. Callbacks may thus run concurrently on several threads. They
 *       must not call agios_exit and must not unwind (no C++ exception, no longjmp) out of the
 *       call. Their return value is ignored. Identifiers and names of the algorithms:
 *       scheduling_algorithms.h.
 *   agios_add_request(file_id, type, offset, len, identifier, queue_id)
 *       type is RT_READ or RT_WRITE; queue_id is the application (SW), the data server (TWINS)
 *       or the queue (WFQ, 0 .. max_queue_id - 1); 0 otherwise. Returns false on bad input
 *       (NULL file_id, unknown type, len <= 0, offset < 0, queue_id < 0) or when not
 *       initialised. file_id is copied (hashed); the caller keeps it.
 *   agios_release_request(file_id, type, len, offset)
 *       Releases the first handed-out, unreleased request with these values. Returns false if
 *       there is none.
 *   agios_cancel_request(...)  Not supported: returns false.
 *   agios_exit()  Waits for calls and callbacks in progress, stops the dispatch threads (queued
 *       requests are dropped without callback) and frees everything.
 */
#ifndef AGIOS_H
#define AGIOS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The type of a request, for agios_add_request / agios_release_request. */
enum {
    RT_READ = 0,
    RT_WRITE = 1,
};

bool agios_init(void *process_request_user(int64_t req_id),
                void *process_requests_user(int64_t *reqs, int32_t reqnb),
                char *config_file,
                int32_t max_queue_id);
void agios_exit(void);
bool agios_add_request(char *file_id,
                       int32_t type,
                       int64_t offset,
                       int64_t len,
                       int64_t identifier,
                       int32_t queue_id);
bool agios_release_request(char *file_id, int32_t type, int64_t len, int64_t offset);
bool agios_cancel_request(char *file_id, int32_t type, int64_t len, int64_t offset);

#ifdef __cplusplus
}
#endif

#endif /* AGIOS_H */
