/*
 * test_shrink.c - building on after a failure (issue: reliability).
 *
 * Scenarios, each in a fresh process (the CCL_* environment is read once
 * per process, and each needs its own):
 *  - split: 5 ranks split by color (rank % 2, one rank CCL_SPLIT_NOCOLOR)
 *    with keys in reverse order; each new comm has the right size and
 *    order and allreduces correctly; a second split with one color dups.
 *  - kill: rank 3 of 4 is SIGKILLed (CCL_FAULT) 300 ms into a 256 MiB
 *    allreduce; the 3 others must fail within 10 s with a message naming
 *    rank 3, see it in ccl_comm_get_async_error, shrink to 3 ranks, and
 *    complete an allreduce there (checked against the serial reference).
 *  - stall: rank 2 of 4 stops calling collectives; the others' ring
 *    allreduce times out (CCL_TIMEOUT=4) with a message naming rank 2,
 *    not the neighbour they happened to wait on.
 *  - netdrop, netstall: ranks on two fake hosts (CCL_HOSTID, the net
 *    transport); rank 2 drops its connections, or its progress thread
 *    stops for good: every rank fails within a bound, none hangs.
 *  - badfault: an invalid CCL_FAULT fails init with a message.
 *  - verify: rank 1's allreduce result is corrupted (CCL_FAULT corrupt);
 *    with CCL_VERIFY=1 every rank fails with CCL_ERR_CORRUPT naming rank 1,
 *    and the next allreduce succeeds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"

/* Fills buf with values only this rank has, so a sum proves who took part. */
static void fill_rank(float *buf, size_t n, int tag)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)((tag + 1) * 1000 + (int)(i % 97));
}

/* After an allreduce-sum of fill_rank(tags), element i must be this. */
static int check_sum(tst_ctx_t *ctx, const float *buf, size_t n, const int *tags, int ntags, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int t = 0; t < ntags; t++)
            want += (float)((tags[t] + 1) * 1000 + (int)(i % 97));
        if (buf[i] != want) {
            tst_fail(ctx, "%s: element %zu is %g, expected %g", what, i, buf[i], want);
            return 1;
        }
    }
    return 0;
}

/* ---- split ---------------------------------------------------------------- */

static void split_check(tst_ctx_t *ctx, ccl_comm_t sub, int want_n, int want_rank, const int *members,
                        const char *what)
{
    int n = -1, r = -1;
    TST_CCL(ctx, sub, ccl_comm_count(sub, &n));
    TST_CCL(ctx, sub, ccl_comm_user_rank(sub, &r));
    if (n != want_n || r != want_rank)
        tst_fail(ctx, "%s: new comm has %d ranks and says rank %d, expected %d and %d", what, n, r, want_n,
                 want_rank);
    size_t count = 100003; /* prime, past the one-shot size */
    float *buf = malloc(count * sizeof *buf);
    fill_rank(buf, count, ctx->rank);
    TST_CCL(ctx, sub, ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, sub, NULL));
    check_sum(ctx, buf, count, members, want_n, what);
    free(buf);
}

static int split_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    int color = ctx->rank == 4 ? CCL_SPLIT_NOCOLOR : ctx->rank % 2;
    ccl_comm_t sub = NULL;
    tst_set_case(ctx, "split by rank %% 2, keys reversed");
    TST_CCL(ctx, comm, ccl_comm_split(comm, color, -ctx->rank, &sub));
    if (color == CCL_SPLIT_NOCOLOR) {
        if (sub)
            tst_fail(ctx, "CCL_SPLIT_NOCOLOR returned a communicator");
    } else {
        /* color 0: ranks 0, 2 -> new order 2, 0; color 1: ranks 1, 3 -> 3, 1 */
        int members[2] = {color + 2, color};
        split_check(ctx, sub, 2, ctx->rank == color + 2 ? 0 : 1, members, "split by color");
        tst_comm_destroy(ctx, sub);
    }
    tst_set_case(ctx, "split with one color (a dup)");
    TST_CCL(ctx, comm, ccl_comm_split(comm, 7, 0, &sub));
    int all[5] = {0, 1, 2, 3, 4};
    split_check(ctx, sub, 5, ctx->rank, all, "split with one color");
    /* The parent still works beside its child. */
    split_check(ctx, comm, 5, ctx->rank, all, "parent after split");
    tst_comm_destroy(ctx, sub);
    ccl_result_t rc = ccl_comm_split(comm, -5, 0, &sub);
    if (rc != CCL_ERR_INVALID_ARGUMENT)
        tst_fail(ctx, "ccl_comm_split with color -5 returned %s", ccl_get_error_string(rc));
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- kill, then shrink ----------------------------------------------------- */

#define KILLED 3

static int kill_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    size_t count = ((size_t)256 << 20) / sizeof(float); /* 256 MiB */
    float *big = NULL;
    TST_CCL(ctx, comm, ccl_mem_alloc((void **)&big, count * sizeof *big));
    fill_rank(big, count, ctx->rank);
    float one = 1.0f;
    tst_set_case(ctx, "kill: a first allreduce (call #1)");
    TST_CCL(ctx, comm, ccl_allreduce(&one, &one, 1, CCL_FLOAT32, CCL_SUM, comm, NULL));
    tst_set_case(ctx, "kill: the 256 MiB allreduce rank %d dies in (call #2)", KILLED);
    double t0 = tst_now();
    ccl_result_t rc = ccl_allreduce(big, big, count, CCL_FLOAT32, CCL_SUM, comm, NULL);
    double dt = tst_now() - t0;
    if (ctx->rank == KILLED)
        tst_fatal(ctx, "rank %d outlived its CCL_FAULT kill", KILLED);
    const char *msg = ccl_get_last_error(comm);
    printf("  kill, rank %d: %s after %.2f s: %s\n", ctx->rank, ccl_get_error_string(rc), dt, msg);
    fflush(stdout);
    if (rc == CCL_SUCCESS)
        tst_fail(ctx, "the allreduce succeeded although rank %d died in it", KILLED);
    else if (!strstr(msg, "rank 3 "))
        tst_fail(ctx, "the error does not name rank %d: %s", KILLED, msg);
    if (dt > 10.0)
        tst_fail(ctx, "took %.1f s to report the dead rank (bound: 10 s)", dt);
    ccl_result_t async = CCL_SUCCESS;
    TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
    if (async == CCL_SUCCESS)
        tst_fail(ctx, "ccl_comm_get_async_error reports no error after the failure");

    tst_set_case(ctx, "kill: ccl_comm_shrink without rank %d", KILLED);
    int exclude[1] = {KILLED};
    ccl_comm_t small = NULL;
    TST_CCL(ctx, comm, ccl_comm_shrink(comm, exclude, 1, &small));
    tst_set_case(ctx, "kill: ccl_comm_abort of the broken comm");
    TST_CCL(ctx, comm, ccl_comm_abort(comm));
    int members[3] = {0, 1, 2};
    tst_set_case(ctx, "kill: allreduce on the shrunk comm");
    split_check(ctx, small, 3, ctx->rank, members, "shrunk comm");
    /* And a large one, through the ring. */
    size_t n2 = ((size_t)16 << 20) / sizeof(float) + 5;
    fill_rank(big, n2, ctx->rank);
    TST_CCL(ctx, small, ccl_allreduce(big, big, n2, CCL_FLOAT32, CCL_SUM, small, NULL));
    check_sum(ctx, big, n2, members, 3, "shrunk comm, 16 MiB");
    TST_CCL(ctx, small, ccl_comm_get_async_error(small, &async));
    if (async != CCL_SUCCESS)
        tst_fail(ctx, "the shrunk comm reports an async error: %s", ccl_get_last_error(small));
    tst_comm_destroy(ctx, small);
    ccl_mem_free(big);
    return 0;
}

/* ---- a rank that stops calling ------------------------------------------- */

#define STALLED 2

static int stall_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    size_t count = 1 << 20; /* 4 MiB: the ring, where each waits on its neighbour */
    float *buf = calloc(count, sizeof *buf);
    tst_set_case(ctx, "stall: allreduce #1, everyone");
    TST_CCL(ctx, comm, ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, NULL));
    if (ctx->rank == STALLED) {
        tst_set_case(ctx, "stall: rank %d stops calling collectives", STALLED);
        sleep(7);
        tst_barrier(ctx); /* the others have timed out by now */
        free(buf);
        return 0; /* never destroys: its peers' view is what is tested */
    }
    tst_set_case(ctx, "stall: allreduce #2 without rank %d", STALLED);
    double t0 = tst_now();
    ccl_result_t rc = ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, NULL);
    double dt = tst_now() - t0;
    const char *msg = ccl_get_last_error(comm);
    printf("  stall, rank %d: %s after %.2f s: %s\n", ctx->rank, ccl_get_error_string(rc), dt, msg);
    fflush(stdout);
    /* A rank that timed out first poisons its connections naming rank 2,
     * so a neighbour may see that (CCL_ERR_REMOTE) before its own timeout. */
    if (rc != CCL_ERR_TIMEOUT && rc != CCL_ERR_REMOTE)
        tst_fail(ctx, "expected CCL_ERR_TIMEOUT, got %s", ccl_get_error_string(rc));
    else if (!strstr(msg, "rank 2 "))
        tst_fail(ctx, "the timeout does not name rank %d, which stopped calling: %s", STALLED, msg);
    if (dt > 6.5)
        tst_fail(ctx, "took %.1f s with CCL_TIMEOUT=4", dt);
    tst_barrier(ctx); /* nobody exits (a death the others would report instead) before all timed out */
    TST_CCL(ctx, comm, ccl_comm_abort(comm));
    free(buf);
    return 0;
}

/* ---- corruption caught by CCL_VERIFY --------------------------------------- */

static int verify_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    int members[4] = {0, 1, 2, 3};
    static const size_t counts[] = {7, 100003, (1 << 20) + 1}; /* one-shot, ring, large ring */
    for (int k = 0; k < 3; k++) {
        size_t count = counts[k];
        float *buf = malloc(count * sizeof *buf);
        fill_rank(buf, count, ctx->rank);
        /* Calls 1, 3, 5: clean; 2, 4, 6: rank 1's result corrupted. */
        tst_set_case(ctx, "verify: clean allreduce of %zu", count);
        TST_CCL(ctx, comm, ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, NULL));
        check_sum(ctx, buf, count, members, 4, "clean allreduce under CCL_VERIFY");
        fill_rank(buf, count, ctx->rank);
        tst_set_case(ctx, "verify: corrupted allreduce of %zu", count);
        ccl_result_t rc = ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, NULL);
        const char *msg = ccl_get_last_error(comm);
        if (ctx->rank == 0) {
            printf("  verify, %zu floats: %s: %s\n", count, ccl_get_error_string(rc), msg);
            fflush(stdout);
        }
        if (rc != CCL_ERR_CORRUPT)
            tst_fail(ctx, "count %zu: expected CCL_ERR_CORRUPT, got %s", count, ccl_get_error_string(rc));
        else if (!strstr(msg, "rank 1 "))
            tst_fail(ctx, "count %zu: the error does not name rank 1: %s", count, msg);
        free(buf);
    }
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- faults of the net transport (ranks on two fake hosts) ---------------- */

/* Calls 1..ncalls: allreduce of 1 MiB; the fault (CCL_FAULT) fires at one of
 * them on rank 2 and every rank must fail within bound_s, none hang. */
static int net_fault_body(tst_ctx_t *ctx, const char *what, double bound_s)
{
    setenv("CCL_HOSTID", ctx->rank < 2 ? "test-node-a" : "test-node-b", 1);
    ccl_comm_t comm = tst_comm_init(ctx);
    size_t count = 1 << 18;
    float *buf = calloc(count, sizeof *buf);
    ccl_result_t rc = CCL_SUCCESS;
    double t0 = 0;
    for (int call = 1; call <= 4 && rc == CCL_SUCCESS; call++) {
        tst_set_case(ctx, "%s: allreduce #%d", what, call);
        t0 = tst_now();
        rc = ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, NULL);
    }
    double dt = tst_now() - t0;
    const char *msg = ccl_get_last_error(comm);
    printf("  %s, rank %d: %s after %.2f s: %s\n", what, ctx->rank, ccl_get_error_string(rc), dt, msg);
    fflush(stdout);
    if (rc == CCL_SUCCESS)
        tst_fail(ctx, "%s: every allreduce succeeded", what);
    else if (!msg[0])
        tst_fail(ctx, "%s: failed with %s but left no message", what, ccl_get_error_string(rc));
    if (dt > bound_s)
        tst_fail(ctx, "%s: took %.1f s to fail (bound %.0f s)", what, dt, bound_s);
    tst_barrier(ctx);
    TST_CCL(ctx, comm, ccl_comm_abort(comm));
    free(buf);
    return 0;
}

static int netdrop_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    return net_fault_body(ctx, "net drop", 10.0);
}

static int netstall_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    return net_fault_body(ctx, "net stall", 4.0 + 4.0);
}

/* An invalid CCL_FAULT fails init with a message, on every rank. */
static int badfault_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = NULL;
    ccl_result_t rc = ccl_comm_init_rank(&comm, ctx->nranks, ctx->id, ctx->rank);
    if (rc != CCL_ERR_INVALID_ARGUMENT || !strstr(ccl_get_last_error(NULL), "CCL_FAULT"))
        tst_fail(ctx, "init with CCL_FAULT=explode returned %s: %s", ccl_get_error_string(rc),
                 ccl_get_last_error(NULL));
    if (comm)
        ccl_comm_destroy(comm);
    return 0;
}

/* ---- driver ---------------------------------------------------------------- */

typedef struct {
    const char *name;
    int nranks;
    const char *env; /* space-separated NAME=VALUE */
    tst_rank_fn body;
    int sigkill_ok;
} scenario_t;

static const scenario_t scenarios[] = {
    {"split", 5, "", split_body, -1},
    {"kill", 4, "CCL_FAULT=kill:rank=3:op=2:ms=300 CCL_TIMEOUT=30", kill_body, KILLED},
    {"stall", 4, "CCL_TIMEOUT=4", stall_body, -1},
    {"netdrop", 4, "CCL_FAULT=drop:rank=2:op=3 CCL_TIMEOUT=30", netdrop_body, -1},
    {"netstall", 4, "CCL_FAULT=stall:rank=2:op=2 CCL_TIMEOUT=4", netstall_body, -1},
    {"badfault", 2, "CCL_FAULT=explode:rank=1", badfault_body, -1},
    {"verify", 4, "CCL_VERIFY=1 CCL_FAULT=corrupt:rank=1:op=2;corrupt:rank=1:op=4;corrupt:rank=1:op=6", verify_body,
     -1},
};
#define NSCEN (int)(sizeof scenarios / sizeof scenarios[0])

static int run_scenario(const scenario_t *s)
{
    tst_sigkill_ok_rank = s->sigkill_ok;
    return tst_run_ranks(s->name, s->nranks, 120, s->body, NULL);
}

int main(int argc, char **argv)
{
    if (argc == 2) {
        for (int i = 0; i < NSCEN; i++)
            if (strcmp(argv[1], scenarios[i].name) == 0)
                return run_scenario(&scenarios[i]) != 0;
        fprintf(stderr, "test_shrink: no scenario %s\n", argv[1]);
        return 2;
    }
    int failed = 0;
    for (int i = 0; i < NSCEN; i++) {
        printf("scenario %s (%s):\n", scenarios[i].name, scenarios[i].env[0] ? scenarios[i].env : "default env");
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char env[256];
            snprintf(env, sizeof env, "%s", scenarios[i].env);
            for (char *save = NULL, *kv = strtok_r(env, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
                putenv(strdup(kv));
            execl("/proc/self/exe", argv[0], scenarios[i].name, (char *)NULL);
            perror("execl");
            _exit(2);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("scenario %s FAILED\n", scenarios[i].name);
            failed++;
        }
    }
    printf("test_shrink: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
