/*
 * test_shrink.c - building on after a failure (issue: reliability).
 *
 * Scenarios, each in a fresh process (the CCL_* environment is read once
 * per process, and each needs its own):
 *  - split: 5 ranks split by color (rank % 2, one rank CCL_SPLIT_NOCOLOR)
 *    with keys in reverse order; each new comm has the right size and
 *    order and allreduces correctly; a second split with one color dups.
 *  - kill: rank 3 of 4 is SIGKILLed (CCL_FAULT) at the 400th slice it
 *    moves of a 256 MiB allreduce (about a tenth in; a kill 300 ms in
 *    missed the call on a machine where it took 0.29 s); the 3 others
 *    must fail within 10 s with a message naming rank 3, see it in ccl_comm_get_async_error, shrink to 3 ranks, and
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
 *  - verifyok: CCL_VERIFY=1 raises no false alarm: allgathers and
 *    broadcasts of odd byte counts (1 to 300007), an in-place allgather.
 *  - fakehosts: ranks 0, 1 on host A, 2, 3, 4 on host B (net transport):
 *    split by rank % 2, then shrink without rank 0 (the first survivor,
 *    rank 1 on A, serves the ranks of B).
 *  - shrink6: 6 ranks, shrink without 2 of them; the same parent again
 *    with those two in it; then 6 -> 5 -> 4 -> 3, each from the last, the
 *    last without its leader. Under CCL_COMM_ID (fixed root port).
 *  - mismatch: a survivor passes another exclude list, or a rank the others
 *    exclude calls: CCL_ERR_MISMATCH on every caller within 4 s (not at
 *    CCL_TIMEOUT); then the same list works.
 *  - kill (above) also shrinks first without excluding the dead rank: the
 *    first survivor notices it exited and every caller fails naming it.
 *  - deadleader: rank 0 dies; a shrink that keeps it (the first survivor,
 *    which hands out the id) fails on every caller within 3 s naming it
 *    (CCL_TIMEOUT=6); the shrink without it works.
 *  - busy: split while rank 0's host stream is inside an allreduce on the
 *    parent that the others call only after the split; shrink while a
 *    stream is blocked on the parent, then abort the parent to end it.
 *  - delay: a rank 1.5 s late to one call and 5 ms late to every call is
 *    no error under CCL_TIMEOUT=3, and neither is a rank that destroyed
 *    its comm and exited (ccl_comm_get_async_error).
 * Every new comm is checked for size, rank and an allreduce element by
 * element. `test_shrink +a,b` runs only scenarios a and b.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

    /* First without excluding it: the first survivor (rank 0) sees that a
     * member it waits for exited and tells the others, at once. */
    tst_set_case(ctx, "kill: ccl_comm_shrink that keeps the dead rank %d", KILLED);
    ccl_comm_t small = NULL;
    t0 = tst_now();
    rc = ccl_comm_shrink(comm, NULL, 0, &small);
    dt = tst_now() - t0;
    msg = ccl_get_last_error(comm);
    printf("  kill, shrink keeping rank %d, rank %d: %s after %.2f s: %s\n", KILLED, ctx->rank,
           ccl_get_error_string(rc), dt, msg);
    fflush(stdout);
    if (rc != CCL_ERR_REMOTE || small)
        tst_fatal(ctx, "a shrink that keeps the dead rank %d returned %s", KILLED, ccl_get_error_string(rc));
    if (!strstr(msg, "rank 3 "))
        tst_fail(ctx, "the failed shrink does not name the dead rank %d: %s", KILLED, msg);
    if (dt > 3.0)
        tst_fail(ctx, "the shrink that keeps the dead rank took %.1f s to fail (CCL_TIMEOUT=30)", dt);
    tst_set_case(ctx, "kill: ccl_comm_shrink without rank %d", KILLED);
    int exclude[1] = {KILLED};
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
/* want (when not CCL_SUCCESS): the code every rank must fail with, and
 * text, a phrase its message must hold. two_hosts: ranks 0, 1 and 2, 3 on
 * two fake hosts (the net between them), else all on this one. */
static int net_fault_check_body(tst_ctx_t *ctx, const char *what, double bound_s, ccl_result_t want,
                                const char *text, int two_hosts)
{
    if (two_hosts)
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
    else if (want != CCL_SUCCESS && rc != want)
        tst_fail(ctx, "%s: failed with %s, not %s", what, ccl_get_error_string(rc), ccl_get_error_string(want));
    else if (text && !strstr(msg, text))
        tst_fail(ctx, "%s: the message does not say '%s'", what, text);
    if (dt > bound_s)
        tst_fail(ctx, "%s: took %.1f s to fail (bound %.0f s)", what, dt, bound_s);
    tst_barrier(ctx);
    TST_CCL(ctx, comm, ccl_comm_abort(comm));
    free(buf);
    return 0;
}

static int net_fault_body(tst_ctx_t *ctx, const char *what, double bound_s)
{
    return net_fault_check_body(ctx, what, bound_s, CCL_SUCCESS, NULL, 1);
}

/* A byte changed on the wire after its checksum (rank 2, host B, sends
 * it in its third allreduce): CCL_ERR_CORRUPT on every rank, and the
 * message names the link from rank 2's host (sender) to a rank of host A. */
static int netcorrupt_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    return net_fault_check_body(ctx, "net corrupt", 10.0, CCL_ERR_CORRUPT, "data from rank 2 (", 1);
}

/* The same on one host through shared-memory FIFOs (CCL_CHECKSUM=2): rank
 * 1's changed byte is named as data from rank 1 over shared memory. */
static int shmcorrupt_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    return net_fault_check_body(ctx, "shm corrupt", 10.0, CCL_ERR_CORRUPT, "over shared memory", 0);
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

/* ---- split and shrink across two fake hosts -------------------------------- */

/* Ranks 0, 1 on host A and 2, 3, 4 on host B: every comm made here mixes
 * hosts, so it runs over the net transport (and CCL_VERIFY=1 hashes each
 * allreduce across it). */
static int fakehosts_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    setenv("CCL_HOSTID", ctx->rank < 2 ? "test-node-a" : "test-node-b", 1);
    ccl_comm_t comm = tst_comm_init(ctx);
    ccl_comm_t sub = NULL;
    tst_set_case(ctx, "fakehosts: split by rank %% 2");
    TST_CCL(ctx, comm, ccl_comm_split(comm, ctx->rank % 2, ctx->rank, &sub));
    if (ctx->rank % 2 == 0) {
        int members[3] = {0, 2, 4}; /* hosts A, B, B */
        split_check(ctx, sub, 3, ctx->rank / 2, members, "fakehosts: split color 0");
    } else {
        int members[2] = {1, 3}; /* hosts A, B */
        split_check(ctx, sub, 2, ctx->rank / 2, members, "fakehosts: split color 1");
    }
    tst_comm_destroy(ctx, sub);
    /* Rank 0 (host A) stays out; the first survivor, rank 1, is on host A
     * and hands the id to the three ranks of host B. */
    if (ctx->rank != 0) {
        int exclude[1] = {0}, members[4] = {1, 2, 3, 4};
        ccl_comm_t small = NULL;
        tst_set_case(ctx, "fakehosts: shrink without rank 0");
        TST_CCL(ctx, comm, ccl_comm_shrink(comm, exclude, 1, &small));
        split_check(ctx, small, 4, ctx->rank - 1, members, "fakehosts: shrunk comm");
        tst_comm_destroy(ctx, small);
    }
    tst_barrier(ctx);
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- shrinks of healthy comms: 2 of 6 out, the same parent again, chains -- */

/* Shrinks comm (whose rank i is original rank orig[i]) without the ranks of
 * comm listed in exclude; ranks excluded do not call. Returns the new comm
 * (NULL on excluded ranks) after checking its size, rank and an allreduce,
 * and rewrites orig for it. */
static ccl_comm_t shrink_step(tst_ctx_t *ctx, ccl_comm_t comm, int *orig, int *n, const int *exclude,
                              int nexclude, const char *what)
{
    int me = -1, newn = 0, newrank = -1, members[8];
    TST_CCL(ctx, comm, ccl_comm_user_rank(comm, &me));
    for (int i = 0; i < *n; i++) {
        int out = 0;
        for (int k = 0; k < nexclude; k++)
            out |= exclude[k] == i;
        if (out)
            continue;
        if (i == me)
            newrank = newn;
        members[newn++] = orig[i];
    }
    ccl_comm_t small = NULL;
    if (newrank >= 0) {
        tst_set_case(ctx, "%s", what);
        TST_CCL(ctx, comm, ccl_comm_shrink(comm, exclude, nexclude, &small));
        split_check(ctx, small, newn, newrank, members, what);
    }
    memcpy(orig, members, (size_t)newn * sizeof *orig);
    *n = newn;
    tst_barrier(ctx); /* excluded ranks wait here for the others' new comm */
    return small;
}

static int shrink6_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    int orig[6], n = 6;
    for (int i = 0; i < 6; i++)
        orig[i] = i;
    /* 2 of 6 out: ranks 0, 2, 3, 5 remain. */
    int ex2[2] = {1, 4};
    ccl_comm_t c4 = shrink_step(ctx, comm, orig, &n, ex2, 2, "shrink6: 6 -> 4 without ranks 1 and 4");
    if (c4)
        tst_comm_destroy(ctx, c4);
    /* The same parent again, now with ranks 1 and 4, which sat out the
     * first shrink: 6 -> 5 -> 4 -> 3, each from the previous comm. */
    n = 6;
    for (int i = 0; i < 6; i++)
        orig[i] = i;
    int ex5[1] = {5}, ex2nd[1] = {2}, ex0[1] = {0};
    ccl_comm_t c5 = shrink_step(ctx, comm, orig, &n, ex5, 1, "shrink6: parent again, 6 -> 5 without rank 5");
    ccl_comm_t c4b = c5 ? shrink_step(ctx, c5, orig, &n, ex2nd, 1, "shrink6: 5 -> 4 without its rank 2") : NULL;
    if (!c5) { /* rank 5 keeps pace with the others' barriers */
        tst_barrier(ctx);
        tst_barrier(ctx);
    } else if (!c4b) {
        tst_barrier(ctx);
    }
    ccl_comm_t c3 = c4b ? shrink_step(ctx, c4b, orig, &n, ex0, 1, "shrink6: 4 -> 3 without its rank 0 (the leader)")
                        : NULL;
    if (c3)
        tst_comm_destroy(ctx, c3);
    if (c4b)
        tst_comm_destroy(ctx, c4b);
    if (c5)
        tst_comm_destroy(ctx, c5);
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- shrink with exclude lists that differ ---------------------------------- */

/* Runs one shrink that must fail with CCL_ERR_MISMATCH on every caller, fast. */
static void mismatch_case(tst_ctx_t *ctx, ccl_comm_t comm, const int *exclude, int nexclude, const char *what)
{
    ccl_comm_t bad = NULL;
    tst_set_case(ctx, "%s", what);
    double t0 = tst_now();
    ccl_result_t rc = ccl_comm_shrink(comm, exclude, nexclude, &bad);
    double dt = tst_now() - t0;
    printf("  %s, rank %d: %s after %.2f s: %s\n", what, ctx->rank, ccl_get_error_string(rc), dt,
           ccl_get_last_error(comm));
    fflush(stdout);
    if (rc != CCL_ERR_MISMATCH)
        tst_fail(ctx, "%s: expected CCL_ERR_MISMATCH, got %s", what, ccl_get_error_string(rc));
    if (bad) {
        tst_fail(ctx, "%s: a failed shrink returned a communicator", what);
        ccl_comm_destroy(bad);
    }
    if (dt > 4.0)
        tst_fail(ctx, "%s: took %.1f s (CCL_TIMEOUT=10): the mismatch must be found, not timed out", what, dt);
}

static int mismatch_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    /* Rank 4 never calls. Case 1: rank 3 also leaves out rank 2. */
    if (ctx->rank < 4) {
        int ok[1] = {4}, other[2] = {2, 4};
        if (ctx->rank == 3)
            mismatch_case(ctx, comm, other, 2, "mismatch: rank 3 excludes 2 and 4, the others 4");
        else
            mismatch_case(ctx, comm, ok, 1, "mismatch: rank 3 excludes 2 and 4, the others 4");
    }
    tst_barrier(ctx);
    /* Case 2: ranks 0-2 exclude rank 3, which calls anyway, first. (Had
     * ranks 1 and 2 asked rank 0 before it, they would have their comm, and
     * rank 3 would wait for an answer until CCL_TIMEOUT.) */
    if (ctx->rank < 4) {
        int ok[2] = {3, 4}, other[1] = {4};
        if (ctx->rank == 3) {
            mismatch_case(ctx, comm, other, 1, "mismatch: rank 3 calls though the others exclude it");
        } else {
            usleep(300 * 1000);
            mismatch_case(ctx, comm, ok, 2, "mismatch: rank 3 calls though the others exclude it");
        }
    }
    tst_barrier(ctx);
    /* The same lists now: it works. */
    if (ctx->rank < 4) {
        int ex[1] = {4}, members[4] = {0, 1, 2, 3};
        ccl_comm_t small = NULL;
        tst_set_case(ctx, "mismatch: then the same list everywhere");
        TST_CCL(ctx, comm, ccl_comm_shrink(comm, ex, 1, &small));
        split_check(ctx, small, 4, ctx->rank, members, "mismatch: shrink after the failed ones");
        tst_comm_destroy(ctx, small);
    }
    tst_barrier(ctx);
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- a shrink whose first survivor is dead -------------------------------- */

#define DEAD_LEADER 0

static int deadleader_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    size_t count = 1 << 18;
    float *buf = calloc(count, sizeof *buf);
    tst_set_case(ctx, "deadleader: allreduce #1");
    TST_CCL(ctx, comm, ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, NULL));
    tst_set_case(ctx, "deadleader: allreduce #2, rank %d dies entering it", DEAD_LEADER);
    ccl_result_t rc = ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, NULL);
    if (ctx->rank == DEAD_LEADER)
        tst_fatal(ctx, "rank %d outlived its CCL_FAULT kill", DEAD_LEADER);
    if (rc == CCL_SUCCESS)
        tst_fail(ctx, "the allreduce succeeded although rank %d died in it", DEAD_LEADER);
    /* The survivors forget to exclude the dead rank, which is then the one
     * that should hand out the new comm's id. */
    tst_set_case(ctx, "deadleader: shrink that keeps the dead rank %d", DEAD_LEADER);
    ccl_comm_t small = NULL;
    double t0 = tst_now();
    rc = ccl_comm_shrink(comm, NULL, 0, &small);
    double dt = tst_now() - t0;
    const char *msg = ccl_get_last_error(comm);
    printf("  deadleader, rank %d: %s after %.2f s: %s\n", ctx->rank, ccl_get_error_string(rc), dt, msg);
    fflush(stdout);
    if (rc == CCL_SUCCESS || small)
        tst_fatal(ctx, "a shrink led by the dead rank %d succeeded", DEAD_LEADER);
    if (!strstr(msg, "rank 0 "))
        tst_fail(ctx, "the error does not name the dead leader, rank %d: %s", DEAD_LEADER, msg);
    if (dt > 3.0)
        tst_fail(ctx, "took %.1f s to fail (CCL_TIMEOUT=6): a refused connection means the leader is gone", dt);
    /* Then the right list. */
    int exclude[1] = {DEAD_LEADER}, members[3] = {1, 2, 3};
    tst_set_case(ctx, "deadleader: shrink without rank %d", DEAD_LEADER);
    TST_CCL(ctx, comm, ccl_comm_shrink(comm, exclude, 1, &small));
    TST_CCL(ctx, comm, ccl_comm_abort(comm));
    split_check(ctx, small, 3, ctx->rank - 1, members, "deadleader: shrunk comm");
    tst_comm_destroy(ctx, small);
    free(buf);
    return 0;
}

/* ---- split and shrink while the parent is busy in another thread ---------- */

static int busy_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    ccl_stream_t stream = NULL;
    TST_CCL(ctx, NULL, ccl_stream_create(&stream));
    size_t count = 1 << 18;
    float *buf = malloc(count * sizeof *buf);
    int all[4] = {0, 1, 2, 3};
    /* Rank 0's stream worker is inside an allreduce on the parent, waiting
     * for the others, who split first and only then call it (the host
     * stream is asynchronous, as a CUDA stream is to ncclCommSplit). */
    fill_rank(buf, count, ctx->rank);
    ccl_comm_t dup = NULL;
    tst_set_case(ctx, "busy: split while rank 0's stream runs an allreduce on the parent");
    if (ctx->rank == 0) {
        TST_CCL(ctx, comm, ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, stream));
        usleep(300 * 1000);
    }
    double t0 = tst_now();
    ccl_result_t rc = ccl_comm_split(comm, 0, ctx->rank, &dup);
    double dt = tst_now() - t0;
    if (rc != CCL_SUCCESS)
        tst_fatal(ctx, "split beside a running allreduce: %s after %.1f s: %s", ccl_get_error_string(rc), dt,
                  ccl_get_last_error(comm));
    if (dt > 4.0)
        tst_fail(ctx, "split beside a running allreduce took %.1f s", dt);
    if (ctx->rank != 0)
        TST_CCL(ctx, comm, ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, stream));
    TST_CCL(ctx, comm, ccl_stream_synchronize(stream));
    check_sum(ctx, buf, count, all, 4, "busy: the allreduce beside the split");
    split_check(ctx, dup, 4, ctx->rank, all, "busy: the split comm");
    tst_comm_destroy(ctx, dup);

    /* Ranks 0-2 are blocked in an allreduce rank 3 never calls; their main
     * threads shrink without it, then abort the parent, which ends the
     * blocked call. */
    tst_set_case(ctx, "busy: shrink while the stream is blocked on the parent");
    if (ctx->rank < 3) {
        int exclude[1] = {3};
        ccl_comm_t small = NULL;
        TST_CCL(ctx, comm, ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, stream));
        usleep(100 * 1000);
        TST_CCL(ctx, comm, ccl_comm_shrink(comm, exclude, 1, &small));
        TST_CCL(ctx, comm, ccl_comm_abort(comm));
        rc = ccl_stream_synchronize(stream);
        if (rc != CCL_ERR_ABORTED && rc != CCL_ERR_REMOTE)
            tst_fail(ctx, "the allreduce blocked on the aborted parent returned %s", ccl_get_error_string(rc));
        split_check(ctx, small, 3, ctx->rank, all, "busy: comm shrunk beside a blocked call");
        tst_comm_destroy(ctx, small);
    }
    tst_barrier(ctx);
    if (ctx->rank == 3)
        TST_CCL(ctx, comm, ccl_comm_abort(comm));
    ccl_stream_destroy(stream);
    free(buf);
    return 0;
}

/* ---- a slow rank (CCL_FAULT delay) is not an error ---------------------- */

#define SLOW_RANK 2
#define SLOW_CALL 3
#define SLOW_MS 1500

static int delay_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    int members[4] = {0, 1, 2, 3};
    static const size_t counts[] = {7, 100003, (1 << 20) + 3};
    float *buf = malloc(counts[2] * sizeof *buf);
    for (int call = 1; call <= 6; call++) {
        size_t count = counts[(call - 1) % 3];
        fill_rank(buf, count, ctx->rank);
        tst_set_case(ctx, "delay: allreduce #%d of %zu", call, count);
        double t0 = tst_now();
        TST_CCL(ctx, comm, ccl_allreduce(buf, buf, count, CCL_FLOAT32, CCL_SUM, comm, NULL));
        double dt = tst_now() - t0;
        check_sum(ctx, buf, count, members, 4, "delay: allreduce beside a slow rank");
        /* Everyone waited for the slow rank, within CCL_TIMEOUT=3. */
        if (call == SLOW_CALL && dt < SLOW_MS / 1000.0 * 0.8)
            tst_fail(ctx, "allreduce #%d took %.2f s: rank %d's %d ms delay did not happen", call, dt,
                     SLOW_RANK, SLOW_MS);
    }
    ccl_result_t async = CCL_ERR_INTERNAL;
    TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
    if (async != CCL_SUCCESS)
        tst_fail(ctx, "a slow rank left an async error: %s", ccl_get_last_error(comm));
    /* Rank 0 destroys its comm and exits: that is no error for the others
     * (only a call that needs it would be). */
    tst_barrier(ctx);
    if (ctx->rank != 0) {
        usleep(400 * 1000);
        async = CCL_ERR_INTERNAL;
        TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
        if (async != CCL_SUCCESS)
            tst_fail(ctx, "rank 0 destroyed its comm and exited, and ccl_comm_get_async_error reports %s: %s",
                     ccl_get_error_string(async), ccl_get_last_error(comm));
    }
    tst_comm_destroy(ctx, comm);
    free(buf);
    return 0;
}

/* ---- CCL_VERIFY raises no false alarm ------------------------------------- */

static int verifyok_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    int n = ctx->nranks;
    /* Odd byte counts, from one-shot sizes through the ring. */
    static const size_t counts[] = {1, 3, 7, 1001, 65537, 300007};
    size_t maxc = 300007;
    unsigned char *send = malloc(maxc), *recv = malloc(maxc * (size_t)n);
    for (int k = 0; k < 6; k++) {
        size_t c = counts[k];
        for (size_t i = 0; i < c; i++)
            send[i] = (unsigned char)(ctx->rank * 37 + i * 11 + k);
        tst_set_case(ctx, "verifyok: allgather of %zu int8", c);
        TST_CCL(ctx, comm, ccl_allgather(send, recv, c, CCL_INT8, comm, NULL));
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < c; i++)
                if (recv[(size_t)r * c + i] != (unsigned char)(r * 37 + i * 11 + k)) {
                    tst_fail(ctx, "allgather of %zu: block %d element %zu is %u", c, r, i, recv[(size_t)r * c + i]);
                    r = n;
                    break;
                }
        int root = k % n;
        for (size_t i = 0; i < c; i++)
            recv[i] = ctx->rank == root ? (unsigned char)(i * 7 + k) : 0xee;
        tst_set_case(ctx, "verifyok: broadcast of %zu int8 from rank %d", c, root);
        TST_CCL(ctx, comm, ccl_bcast(recv, c, CCL_INT8, root, comm, NULL));
        for (size_t i = 0; i < c; i++)
            if (recv[i] != (unsigned char)(i * 7 + k)) {
                tst_fail(ctx, "broadcast of %zu from %d: element %zu is %u", c, root, i, recv[i]);
                break;
            }
    }
    /* Float allgather of an odd count, in place. */
    size_t fc = 4099;
    float *f = malloc(fc * (size_t)n * sizeof *f);
    for (size_t i = 0; i < fc; i++)
        f[(size_t)ctx->rank * fc + i] = (float)ctx->rank + (float)i * 0.5f;
    tst_set_case(ctx, "verifyok: in-place allgather of %zu float32", fc);
    TST_CCL(ctx, comm, ccl_allgather(f + (size_t)ctx->rank * fc, f, fc, CCL_FLOAT32, comm, NULL));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < fc; i++)
            if (f[(size_t)r * fc + i] != (float)r + (float)i * 0.5f) {
                tst_fail(ctx, "in-place allgather: block %d element %zu is %g", r, i, f[(size_t)r * fc + i]);
                r = n;
                break;
            }
    tst_comm_destroy(ctx, comm);
    free(f);
    free(send);
    free(recv);
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
    {"kill", 4, "CCL_FAULT=kill:rank=3:op=2:slice=400 CCL_TIMEOUT=30", kill_body, KILLED},
    {"stall", 4, "CCL_TIMEOUT=4", stall_body, -1},
    {"netdrop", 4, "CCL_FAULT=drop:rank=2:op=3 CCL_TIMEOUT=30", netdrop_body, -1},
    {"netstall", 4, "CCL_FAULT=stall:rank=2:op=2 CCL_TIMEOUT=4", netstall_body, -1},
    {"netcorrupt", 4, "CCL_CHECKSUM=1 CCL_FAULT=corrupt_wire:rank=2:op=3 CCL_TIMEOUT=30", netcorrupt_body, -1},
    {"shmcorrupt", 4, "CCL_CHECKSUM=2 CCL_FAULT=corrupt_wire:rank=1:op=2 CCL_TIMEOUT=30", shmcorrupt_body, -1},
    {"badfault", 2, "CCL_FAULT=explode:rank=1", badfault_body, -1},
    {"verify", 4, "CCL_VERIFY=1 CCL_FAULT=corrupt:rank=1:op=2;corrupt:rank=1:op=4;corrupt:rank=1:op=6", verify_body,
     -1},
    {"verifyok", 5, "CCL_VERIFY=1", verifyok_body, -1},
    {"fakehosts", 5, "CCL_VERIFY=1 CCL_TIMEOUT=20", fakehosts_body, -1},
    {"shrink6", 6, "CCL_TIMEOUT=20 CCL_COMM_ID=auto", shrink6_body, -1},
    {"mismatch", 5, "CCL_TIMEOUT=10", mismatch_body, -1},
    {"deadleader", 4, "CCL_FAULT=kill:rank=0:op=2 CCL_TIMEOUT=6", deadleader_body, DEAD_LEADER},
    {"busy", 4, "CCL_TIMEOUT=10", busy_body, -1},
    {"delay", 4, "CCL_FAULT=delay:rank=2:op=3:ms=1500;delay:rank=1:ms=5 CCL_TIMEOUT=3", delay_body, -1},
};
#define NSCEN (int)(sizeof scenarios / sizeof scenarios[0])

/* A loopback port nobody listens on now, for CCL_COMM_ID=auto (rank 0
 * then runs the bootstrap root there, and split/shrink must not reuse it). */
static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int port = -1, fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int run_scenario(const scenario_t *s)
{
    tst_sigkill_ok_rank = s->sigkill_ok;
    return tst_run_ranks(s->name, s->nranks, 120, s->body, NULL);
}

/* test_shrink: every scenario, each in a fresh process with its env;
 * test_shrink +a,b: only scenarios a and b, likewise; test_shrink NAME: that
 * scenario in this process, with the caller's env. */
int main(int argc, char **argv)
{
    const char *only = argc == 2 && argv[1][0] == '+' ? argv[1] + 1 : NULL;
    if (argc == 2 && !only) {
        for (int i = 0; i < NSCEN; i++)
            if (strcmp(argv[1], scenarios[i].name) == 0)
                return run_scenario(&scenarios[i]) != 0;
        fprintf(stderr, "test_shrink: no scenario %s\n", argv[1]);
        return 2;
    }
    int failed = 0;
    for (int i = 0; i < NSCEN; i++) {
        size_t len = strlen(scenarios[i].name);
        const char *at = only ? strstr(only, scenarios[i].name) : NULL;
        if (only && !(at && (at == only || at[-1] == ',') && (at[len] == ',' || at[len] == '\0')))
            continue;
        printf("scenario %s (%s):\n", scenarios[i].name, scenarios[i].env[0] ? scenarios[i].env : "default env");
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char env[256];
            snprintf(env, sizeof env, "%s", scenarios[i].env);
            for (char *save = NULL, *kv = strtok_r(env, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
                char fixed[64];
                if (strcmp(kv, "CCL_COMM_ID=auto") == 0) {
                    int port = free_port();
                    if (port <= 0) {
                        fprintf(stderr, "test_shrink: no free loopback port for CCL_COMM_ID\n");
                        _exit(2);
                    }
                    snprintf(fixed, sizeof fixed, "CCL_COMM_ID=127.0.0.1:%d", port);
                    kv = fixed;
                }
                putenv(strdup(kv));
            }
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
