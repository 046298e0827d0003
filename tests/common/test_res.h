/*
 * test_res.h - leak checks over a process's resources, for the tests that
 * create and destroy communicators many times (test_cycles, test_lifecycle)
 * and those that kill a peer (test_fault): a snapshot of open descriptors,
 * threads, memory mappings and heap bytes in use, a comparison against a
 * baseline that tolerates a little noise, and the /dev/shm entries a run
 * left behind.
 *
 * Heap bytes come from the allocator that is really in use: AddressSanitizer's
 * own counter in a sanitizer build (its allocator replaces malloc, so glibc's
 * statistics would read zero), glibc's mallinfo2 otherwise.
 */
#ifndef CCL_TEST_RES_H
#define CCL_TEST_RES_H

#include <stddef.h>

#include "test_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How far heap bytes in use may drift between two quiet points of a
 * process that creates and destroys communicators (with glibc's per-thread
 * cache off: see tst_res_exact_heap); a leak of 100 bytes per cycle
 * outgrows it within a few hundred cycles. */
#define TST_HEAP_SLACK ((size_t)32 << 10)

typedef struct {
    int fds;      /* open file descriptors */
    int threads;  /* threads of this process */
    int maps;     /* lines of /proc/self/maps */
    size_t heap;  /* bytes malloc has handed out and not had back */
} tst_res_t;

/* Whether this is an AddressSanitizer build. */
int tst_under_asan(void);

/* Call first thing in main: re-executes this program with glibc's
 * per-thread cache off (GLIBC_TUNABLES, read only at process start), unless
 * it already is. That cache keeps up to 7 freed chunks of every small size
 * per thread, which mallinfo2 counts as in use: heap bytes in use would
 * creep up by ~100 KiB over the first few hundred cycles with nothing
 * leaked. Returns only when the cache is off (or the exec failed, said on
 * stderr). */
void tst_res_exact_heap(char **argv);

/* Bytes of heap in use now (see above). */
size_t tst_heap_in_use(void);

void tst_res_take(tst_res_t *r);

/* Compares now against base. Counts can lag a destroy by a moment (a thread
 * exiting on its own), so it first waits up to 3 s for descriptors and
 * threads to come back down. Descriptors and threads may not grow at all;
 * mappings may grow by 4 lines (malloc splitting its arenas; not checked
 * under AddressSanitizer, whose allocator maps fresh regions as it goes);
 * heap bytes by heap_slack. Writes one line per resource that grew into msg
 * ("fds 12 -> 14; heap 1.2 MiB -> 1.9 MiB") and returns how many grew. */
int tst_res_grew(const tst_res_t *base, size_t heap_slack, char *msg, size_t len);

/* How many of this process's mappings are of /dev/shm/ccl* segments (none
 * should remain once every communicator is gone); the first in *first. */
int tst_own_ccl_shm_maps(char *first, size_t len);

/* ccl entries of /dev/shm that are not in `before` (a tst_list_ccl_shm
 * listing) and that no process maps or holds open, and are still there and
 * still unused 0.5 to 1.5 s later: what a run left behind. (One that some
 * process uses, or that goes away, belongs to a test running beside this
 * one on the machine.) The first of them goes to *first. */
int tst_shm_left_behind(const char *before, char *first, size_t len);

/* tst_run_ranks, then tst_shm_left_behind against the list taken just
 * before: 0 when the run passed and left no /dev/shm entry behind (each
 * entry left is reported under the run's name). */
int tst_run_ranks_shm_clean(const char *name, int nranks, int timeout_s, tst_rank_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* CCL_TEST_RES_H */
