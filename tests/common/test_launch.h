/*
 * test_launch.h - runs a test body as N forked ranks (the way a launcher or
 * mpirun would) and turns any failure, crash or hang into a clear verdict.
 *
 * The parent creates the unique id (ccl_get_unique_id) and hands it to the
 * children, as a real launcher does, then waits with a deadline. It forks
 * first and makes the id second: ccl_get_unique_id starts the bootstrap
 * root thread, and forking a process that has threads can leave a child
 * with a lock that some thread held at the fork (seen with AddressSanitizer's
 * allocator), a hazard real launchers do not have either. When a child fails or dies,
 * the others get a short grace period to report their own view, then all
 * survivors are killed; a hang is reported with the case each rank was
 * running (children publish it in shared memory before every collective).
 * Children also die with the parent (PR_SET_PDEATHSIG) and carry an alarm,
 * so no test can leave processes behind or hang its caller. A rank may
 * also die on purpose by SIGKILL (tst_sigkill_self), to test peer death.
 */
#ifndef CCL_TEST_LAUNCH_H
#define CCL_TEST_LAUNCH_H

#include "ccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TST_MAX_RANKS 64

typedef struct tst_shared tst_shared_t;

typedef struct {
    int rank;
    int nranks;
    ccl_unique_id_t id;   /* created by the parent for this run */
    const char *name;     /* test name, for messages */
    int failures;         /* mismatches this rank reported (tst_fail) */
    int id_calls;         /* tst_share_id generations used so far */
    tst_shared_t *sh;
} tst_ctx_t;

/* Body of one rank; a nonzero return (or any tst_fail) fails the run. */
typedef int (*tst_rank_fn)(tst_ctx_t *ctx, void *arg);

/* A rank whose death by SIGKILL is the test's intent (CCL_FAULT=kill):
 * tst_run_ranks counts it as a success. -1: none. */
extern int tst_sigkill_ok_rank;

/* Forks nranks children running fn; 0 when every child exits 0 within
 * tst_timeout(timeout_s) seconds. Prints one summary line either way. */
int tst_run_ranks(const char *name, int nranks, int timeout_s, tst_rank_fn fn, void *arg);

/* All ranks of the run (outside ccl, through shared memory), but for
 * those that tst_sigkill_self'd before the others arrived. */
void tst_barrier(tst_ctx_t *ctx);
/* Ends this rank the way `kill -9` would (no cleanup, no atexit, sockets
 * and mappings dropped by the kernel); the launcher counts that death as
 * this rank's success and later barriers no longer wait for it. Safe to
 * call from any thread of the rank. */
void tst_sigkill_self(tst_ctx_t *ctx) __attribute__((noreturn));
/* A rank that something else killed (CCL_FAULT) and that a survivor saw
 * die: from now on barriers count it out, as after tst_sigkill_self. */
void tst_note_killed(tst_ctx_t *ctx, int rank);
/* Rank 0 calls ccl_get_unique_id; everyone returns with the same id. */
void tst_share_id(tst_ctx_t *ctx, ccl_unique_id_t *id);
/* Whether a test's scenario `name` runs: every one without arguments, else
 * only the one argv[1] names (to run one alone, e.g. under ThreadSanitizer,
 * which cannot follow a fork from a process that already has threads). */
int tst_scenario_wanted(int argc, char **argv, const char *name);
/* What this rank is doing now; shown if the run hangs or dies. */
void tst_set_case(tst_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reports a wrong result and continues (all ranks must keep issuing the
 * same collectives, so a rank never stops early on a mere mismatch). */
void tst_fail(tst_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reports an error that leaves the communicator unusable and exits the rank. */
void tst_fatal(tst_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* ccl_comm_init_rank with ctx's id, then checks ccl_comm_count/user_rank. */
ccl_comm_t tst_comm_init(tst_ctx_t *ctx);
ccl_comm_t tst_comm_init_id(tst_ctx_t *ctx, ccl_unique_id_t id);

/* ccl_comm_destroy, fatal for the rank when it fails. */
void tst_comm_destroy(tst_ctx_t *ctx, ccl_comm_t comm);

/* Calls a ccl function; anything but CCL_SUCCESS is fatal for the rank. */
#define TST_CCL(ctx, comm, call)                                                            \
    do {                                                                                     \
        ccl_result_t tst_rc_ = (call);                                                       \
        if (tst_rc_ != CCL_SUCCESS)                                                          \
            tst_fatal((ctx), "%s:%d: %s returned %d (%s): %s", __FILE__, __LINE__, #call,   \
                      (int)tst_rc_, ccl_get_error_string(tst_rc_),                           \
                      ccl_get_last_error(comm));                                             \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif /* CCL_TEST_LAUNCH_H */
