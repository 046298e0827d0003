/*
 * test_fault.c - failures must turn into errors, never hangs (DESIGN.md:
 * "a dead peer, a broken link or an abort turns into an error on every
 * rank"). Two scenarios across forked ranks:
 *  - peer death: after a good allreduce, the last rank exits without
 *    destroying its communicator; every survivor's next allreduce must fail
 *    with an error and a message, well before the test's deadline, and
 *    ccl_comm_abort must then release the broken communicator;
 *  - abort: rank 0 enters an allreduce that nobody else joins, and another
 *    of its threads calls ccl_comm_abort; the blocked call must return an
 *    error, and the other ranks, arriving later, must see an error too (at
 *    the latest on their next collective, which rank 0 never enters).
 * Both run with allreduce, alltoall and a broadcast rooted at the failing
 * rank (collectives in which every survivor depends on that rank, so every
 * survivor must notice), on a small and a large count.
 * An abort while a stream's call waits for peers and a blocking call on
 * the same comm waits for that one: both end in errors, before the abort
 * returns.
 * A broadcast by reference (ccl_mem_alloc buffers, read in place down the
 * chain) loses the rank that passes the root's reference on, mid-call: no
 * survivor may report success with data the root changed after failing.
 * A further scenario kills (SIGKILL) the last rank at some point during
 * ccl_comm_init_rank (once it has its first shared-memory segment, all of
 * its own, some of its peers', the board): the survivors' init, or their
 * first collective, must fail instead of hanging. The victim always dies
 * by SIGKILL, as `kill -9` would end it, and after every scenario, once
 * the survivors have aborted, no ccl segment may remain in /dev/shm or in
 * their mappings: a crash must not leak shared memory.
 * CCL_TIMEOUT is lowered (unless set) so that even a library that only
 * notices through its timeout passes within the deadline; what is tested
 * is that no rank waits forever.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"
#include "test_res.h"

/* Seconds a survivor may take to notice (CCL_TIMEOUT below, plus slack). */
#define NOTICE_S 40.0

static uint64_t base_seed;
/* How long the last expect_failure call took. */
static double g_last_dt;
/* Set just before expect_failure issues its call: the aborter counts from there. */
static int g_call_started;
/* The aborter fires this long after rank 0 enters its call... */
#define ABORT_AFTER_S 0.3
/* ... and the blocked call must return within this much more. */
#define ABORT_UNBLOCK_S 1.0

/* The count picks the path: small ones go one-shot, large ones through
 * the ring and the FIFOs, and each path must notice on its own. */
static size_t g_count;
static tst_coll_t g_coll;

static tst_case_t small_case(int nranks, int k)
{
    tst_case_t c = {.coll = g_coll, .dt = CCL_INT32, .op = CCL_SUM, .count = g_count,
                    .inplace = 0, .misalign = 0,
                    .seed = tst_case_seed(base_seed, (uint64_t)nranks, (uint64_t)k, 23, 23),
                    /* the rank that fails: the last dies (cases 0, 1), 0 aborts */
                    .root = k < 2 ? nranks - 1 : 0};
    /* Rank 0 must be blocked when it aborts. A small broadcast's or
     * scatter's root posts on the one-shot board and returns without
     * waiting for anyone, so there rank 0 takes part as a non-root, which
     * waits for the root (reduce and gather are the mirror: their root
     * waits, the others post and return). */
    if (k >= 2 && (g_coll == TST_BROADCAST || g_coll == TST_SCATTER))
        c.root = nranks - 1;
    return c;
}

/* Issues c and requires it to fail within NOTICE_S; returns the code. */
static ccl_result_t expect_failure(tst_ctx_t *ctx, ccl_comm_t comm, const tst_case_t *c,
                                   const char *scenario)
{
    tst_bufs_t b;
    tst_case_prepare(c, ctx->rank, ctx->nranks, &b, 0);
    tst_set_case(ctx, "%s: %s that must fail", scenario, tst_coll_name(c->coll));
    double t0 = tst_now();
    __atomic_store_n(&g_call_started, 1, __ATOMIC_RELEASE);
    ccl_result_t rc = tst_case_issue(c, &b, comm, NULL);
    double dt = tst_now() - t0;
    g_last_dt = dt;
    if (rc == CCL_SUCCESS) {
        tst_fail(ctx, "%s: %s succeeded although a peer is gone", scenario,
                 tst_coll_name(c->coll));
    } else {
        const char *msg = ccl_get_last_error(comm);
        if (!msg || !msg[0])
            tst_fail(ctx, "%s: %s failed with %s but left no message", scenario,
                     tst_coll_name(c->coll),
                     ccl_get_error_string(rc));
        if (dt > NOTICE_S)
            tst_fail(ctx, "%s: took %.1f s to report %s", scenario, dt, ccl_get_error_string(rc));
        printf("  %s, rank %d: %s after %.2f s: %s\n", scenario, ctx->rank,
               ccl_get_error_string(rc), dt, msg ? msg : "");
        fflush(stdout);
    }
    tst_case_release(&b);
    return rc;
}

/* Rank 0's list of /dev/shm before anyone made a communicator. */
static char shm_before[1 << 14];

static void note_shm_before(tst_ctx_t *ctx)
{
    if (ctx->rank == 0)
        tst_list_ccl_shm(shm_before, sizeof(shm_before));
    tst_barrier(ctx);
}

/* Every live rank has let go of its communicator: nothing of it may stay
 * mapped here, nor in /dev/shm, whoever died when. */
static void check_shm_clean(tst_ctx_t *ctx, const char *scenario)
{
    char first[512];
    tst_set_case(ctx, "%s: /dev/shm checks", scenario);
    int own = tst_own_ccl_shm_maps(first, sizeof(first));
    if (own > 0)
        tst_fail(ctx, "%s: %d ccl shm mappings remain after the comm was aborted, e.g. %s",
                 scenario, own, first);
    tst_barrier(ctx);
    if (ctx->rank == 0) {
        int left = tst_shm_left_behind(shm_before, first, sizeof(first));
        if (left > 0)
            tst_fail(ctx, "%s: %d /dev/shm entries left behind, e.g. %s", scenario, left, first);
    }
}

static void abort_broken(tst_ctx_t *ctx, ccl_comm_t comm, const char *scenario)
{
    tst_set_case(ctx, "%s: ccl_comm_abort of the broken comm", scenario);
    ccl_result_t rc = ccl_comm_abort(comm);
    if (rc != CCL_SUCCESS)
        tst_fail(ctx, "%s: ccl_comm_abort after a peer died returned %s", scenario,
                 ccl_get_error_string(rc));
}

static int peer_death_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    note_shm_before(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    tst_case_t c = small_case(ctx->nranks, 0);
    tst_run_case(ctx, comm, &c, 0);
    if (ctx->rank == ctx->nranks - 1)
        tst_sigkill_self(ctx); /* dies holding its communicator */
    c = small_case(ctx->nranks, 1);
    expect_failure(ctx, comm, &c, "peer death");
    abort_broken(ctx, comm, "peer death");
    check_shm_clean(ctx, "peer death");
    return 0;
}

/* When the victim of a death in init dies: as soon as it has `maps` ccl
 * segments mapped (with 4 ranks: 1 = its first FIFO created, 4 = all of
 * its own, 6 = two of its peers' too, 9 = the FIFOs and the one-shot
 * board), or delay_us into its init, whichever comes first. (Earlier, before
 * it has connected its bootstrap ring, the others could only find out
 * through CCL_TIMEOUT.) */
typedef struct {
    int delay_us;
    int maps;
} death_point_t;

typedef struct {
    tst_ctx_t *ctx;
    death_point_t at;
} killer_arg_t;

static void *killer_main(void *p)
{
    killer_arg_t *k = p;
    char first[512];
    double until = tst_now() + k->at.delay_us * 1e-6;
    while (tst_now() < until && (k->at.maps <= 0 || tst_own_ccl_shm_maps(first, sizeof(first)) < k->at.maps))
        usleep(100);
    tst_sigkill_self(k->ctx);
}

static int init_death_body(tst_ctx_t *ctx, void *arg)
{
    const death_point_t *at = arg;
    note_shm_before(ctx);
    ccl_comm_t comm = NULL;
    if (ctx->rank == ctx->nranks - 1) {
        static killer_arg_t k;
        pthread_t th;
        k = (killer_arg_t){ctx, *at};
        if (pthread_create(&th, NULL, killer_main, &k) != 0)
            tst_fatal(ctx, "pthread_create failed");
        tst_set_case(ctx, "death in init: ccl_comm_init_rank until SIGKILL");
        ccl_comm_init_rank(&comm, ctx->nranks, ctx->id, ctx->rank);
        for (;;)
            pause(); /* the killer ends this process, whatever init did */
    }
    tst_set_case(ctx, "death in init: ccl_comm_init_rank while rank %d dies", ctx->nranks - 1);
    double t0 = tst_now();
    ccl_result_t rc = ccl_comm_init_rank(&comm, ctx->nranks, ctx->id, ctx->rank);
    if (rc == CCL_SUCCESS) {
        /* The victim finished its part of init first: the first
         * collective, which it never joins, must fail. */
        tst_case_t c = small_case(ctx->nranks, 1);
        expect_failure(ctx, comm, &c, "death after init");
        abort_broken(ctx, comm, "death after init");
    } else {
        const char *msg = ccl_get_last_error(NULL);
        if (!msg || !msg[0])
            tst_fail(ctx, "death in init: init failed with %s but left no message",
                     ccl_get_error_string(rc));
        if (tst_now() - t0 > NOTICE_S)
            tst_fail(ctx, "death in init: took %.1f s to report %s", tst_now() - t0,
                     ccl_get_error_string(rc));
        printf("  death in init, rank %d: init %s after %.2f s: %s\n", ctx->rank,
               ccl_get_error_string(rc), tst_now() - t0, msg ? msg : "");
        fflush(stdout);
    }
    check_shm_clean(ctx, "death in init");
    return 0;
}

typedef struct {
    ccl_comm_t comm;
    ccl_result_t rc;
} abort_arg_t;

static void *aborter(void *p)
{
    abort_arg_t *a = p;
    /* Long enough for the main thread to be blocked inside the call. */
    while (!__atomic_load_n(&g_call_started, __ATOMIC_ACQUIRE))
        usleep(1000);
    usleep((useconds_t)(ABORT_AFTER_S * 1e6));
    a->rc = ccl_comm_abort(a->comm);
    return NULL;
}

static int abort_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    note_shm_before(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    tst_case_t c = small_case(ctx->nranks, 2);
    tst_run_case(ctx, comm, &c, 0);
    c = small_case(ctx->nranks, 3);
    if (ctx->rank == 0) {
        abort_arg_t a = {.comm = comm, .rc = CCL_ERR_INTERNAL};
        pthread_t th;
        if (pthread_create(&th, NULL, aborter, &a) != 0)
            tst_fatal(ctx, "pthread_create failed");
        expect_failure(ctx, comm, &c, "abort");
        /* Scaled like every deadline (TEST_TIMEOUT_SCALE: sanitizers, a
         * machine shared with other jobs). */
        double unblock_s = ABORT_UNBLOCK_S * tst_timeout(100) / 100.0;
        if (g_last_dt > ABORT_AFTER_S + unblock_s)
            tst_fail(ctx, "the blocked call returned %.2f s after ccl_comm_abort (bound %.1f s)",
                     g_last_dt - ABORT_AFTER_S, unblock_s);
        pthread_join(th, NULL);
        if (a.rc != CCL_SUCCESS)
            tst_fail(ctx, "ccl_comm_abort from a second thread returned %s",
                     ccl_get_error_string(a.rc));
        /* Only now may the others try: rank 0's comm is gone. */
        tst_barrier(ctx);
    } else {
        tst_barrier(ctx);
        /* Rank 0 had entered this allreduce before it aborted, so a
         * library may legitimately finish it from what rank 0 had already
         * published: that is fine if the result is right. The next one,
         * which rank 0 never entered, must fail. */
        char msg[512];
        tst_bufs_t b;
        tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 0);
        tst_set_case(ctx, "abort seen by a peer: the collective rank 0 had entered");
        ccl_result_t rc = tst_case_issue(&c, &b, comm, NULL);
        if (rc == CCL_SUCCESS && tst_case_verify(&c, ctx->rank, ctx->nranks, &b, msg, sizeof(msg)))
            tst_fail(ctx, "collective completed after rank 0 aborted, with a wrong result: %s", msg);
        tst_case_release(&b);
        if (rc == CCL_SUCCESS) {
            c = small_case(ctx->nranks, 4);
            expect_failure(ctx, comm, &c, "abort seen by a peer");
        } else {
            const char *m = ccl_get_last_error(comm);
            if (!m || !m[0])
                tst_fail(ctx, "abort seen by a peer: failed with %s but left no message",
                         ccl_get_error_string(rc));
            printf("  abort seen by a peer, rank %d: %s: %s\n", ctx->rank,
                   ccl_get_error_string(rc), m ? m : "");
            fflush(stdout);
        }
        tst_set_case(ctx, "abort seen by a peer: ccl_comm_abort");
        rc = ccl_comm_abort(comm);
        if (rc != CCL_SUCCESS)
            tst_fail(ctx, "ccl_comm_abort after a peer aborted returned %s",
                     ccl_get_error_string(rc));
    }
    check_shm_clean(ctx, "abort");
    return 0;
}

/* Abort with two calls inside the communicator: rank 0 queues an
 * allreduce on a host stream that no peer joins (the stream's worker holds
 * the comm while it waits), a second thread makes a blocking allreduce on
 * the same comm (it waits for the worker to let go of the comm), and the
 * main thread aborts. Both calls must fail, neither may touch the comm
 * after ccl_comm_abort freed it (ASan catches that), and the abort must
 * return promptly. */
typedef struct {
    ccl_comm_t comm;
    float *buf;
    ccl_result_t rc;
    int entering, returned;
} blocked_call_t;

static void *blocked_caller(void *p)
{
    blocked_call_t *b = p;
    __atomic_store_n(&b->entering, 1, __ATOMIC_RELEASE);
    b->rc = ccl_allreduce(b->buf, b->buf, 1021, CCL_FLOAT32, CCL_SUM, b->comm, NULL);
    __atomic_store_n(&b->returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int abort_queued_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    note_shm_before(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    if (ctx->rank != 0) {
        tst_barrier(ctx); /* rank 0 is done with its comm */
        abort_broken(ctx, comm, "abort with a queued and a blocked call");
        check_shm_clean(ctx, "abort with a queued and a blocked call");
        return 0;
    }
    static float queued[1021], blocked[1021];
    ccl_stream_t stream = NULL;
    tst_set_case(ctx, "abort with a queued and a blocked call: queue");
    TST_CCL(ctx, comm, ccl_stream_create(&stream));
    TST_CCL(ctx, comm, ccl_allreduce(queued, queued, 1021, CCL_FLOAT32, CCL_SUM, comm, stream));
    usleep(100000); /* the worker is inside the call, waiting for peers */
    if (ccl_stream_query(stream) != CCL_IN_PROGRESS)
        tst_fail(ctx, "an allreduce no peer joined is not in progress");
    blocked_call_t b = {.comm = comm, .buf = blocked, .rc = CCL_SUCCESS};
    pthread_t th;
    if (pthread_create(&th, NULL, blocked_caller, &b) != 0)
        tst_fatal(ctx, "pthread_create failed");
    while (!__atomic_load_n(&b.entering, __ATOMIC_ACQUIRE))
        usleep(1000);
    usleep(200000); /* the second call waits for the comm */
    tst_set_case(ctx, "abort with a queued and a blocked call: ccl_comm_abort");
    if (__atomic_load_n(&b.returned, __ATOMIC_ACQUIRE))
        tst_fail(ctx, "the blocking call returned (%s) before the abort", ccl_get_error_string(b.rc));
    double t0 = tst_now();
    ccl_result_t rc = ccl_comm_abort(comm);
    double dt = tst_now() - t0;
    if (rc != CCL_SUCCESS)
        tst_fail(ctx, "ccl_comm_abort returned %s", ccl_get_error_string(rc));
    /* (The blocking call may still be on its way out, past its last touch
     * of the comm: the join below waits for it; ASan catches a touch of
     * the freed comm.) */
    if (dt > ABORT_UNBLOCK_S * tst_timeout(100) / 100.0)
        tst_fail(ctx, "ccl_comm_abort took %.2f s", dt);
    pthread_join(th, NULL);
    if (b.rc == CCL_SUCCESS)
        tst_fail(ctx, "the blocking call waiting for the comm succeeded across an abort");
    tst_set_case(ctx, "abort with a queued and a blocked call: the stream");
    rc = ccl_stream_synchronize(stream);
    if (rc == CCL_SUCCESS)
        tst_fail(ctx, "the stream's allreduce succeeded across an abort");
    printf("  abort with a queued and a blocked call: abort %.2f s, blocking call %s, stream %s\n", dt,
           ccl_get_error_string(b.rc), ccl_get_error_string(rc));
    fflush(stdout);
    TST_CCL(ctx, NULL, ccl_stream_destroy(stream));
    tst_barrier(ctx);
    check_shm_clean(ctx, "abort with a queued and a blocked call");
    return 0;
}

/* A broadcast on ccl_mem_alloc buffers goes by reference: the root's
 * whole-step reference, passed down the chain 0 -> 1 -> 2 -> 3, so ranks 2
 * and 3 read the root's buffer in place. CCL_FAULT kills rank 1 inside the
 * call, after it passed the reference on. The root's call must fail (it
 * waits for every reader, and rank 1 never lets go), and the root then
 * overwrites its buffer at once, as an application that reuses it would;
 * ranks 2 and 3, possibly still reading it, must fail, or succeed with the
 * right result (they may have finished first), and then fail their next
 * call. */
static int forward_death_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    note_shm_before(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    tst_case_t c = {.coll = TST_BROADCAST, .dt = CCL_INT32, .op = CCL_SUM, .count = ((size_t)1 << 20) + 3,
                    .seed = tst_case_seed(base_seed, 4, 0, 29, 29), .root = 0};
    tst_bufs_t b;
    tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 1);
    tst_set_case(ctx, "forwarder death: broadcast by reference");
    ccl_result_t rc = tst_case_issue(&c, &b, comm, NULL); /* rank 1 dies in here */
    char msg[512];
    if (ctx->rank == 0) {
        if (rc == CCL_SUCCESS)
            tst_fail(ctx, "forwarder death: the root's broadcast succeeded although rank 1 died reading it");
        memset(b.sendp, 0xa5, b.send.bytes);
        tst_note_killed(ctx, 1); /* the root's call failed on its death */
        printf("  forwarder death, root: %s: %s\n", ccl_get_error_string(rc), ccl_get_last_error(comm));
    } else if (rc == CCL_SUCCESS) {
        if (tst_case_verify(&c, ctx->rank, ctx->nranks, &b, msg, sizeof(msg)))
            tst_fail(ctx, "forwarder death: broadcast succeeded with a wrong result: %s", msg);
        tst_case_t next = c;
        next.count = 1021;
        expect_failure(ctx, comm, &next, "forwarder death, next call");
    } else {
        printf("  forwarder death, rank %d: %s: %s\n", ctx->rank, ccl_get_error_string(rc), ccl_get_last_error(comm));
    }
    fflush(stdout);
    tst_case_release(&b);
    abort_broken(ctx, comm, "forwarder death");
    check_shm_clean(ctx, "forwarder death");
    return 0;
}

/* A 2-rank gather on ccl_mem_alloc buffers: the root reads rank 1's
 * whole-step reference from the front while rank 1, its own step done,
 * copies slices from the back into the root's buffer (CCL_COPY_HELP).
 * CCL_FAULT kills rank 1 at its first such slice (its step is 257 slices
 * of 128 KiB: the root, copying from the front, is far from done). The
 * root must fail, not return with the slices rank 1 claimed unwritten,
 * nor wait for them forever. */
static int helper_death_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    note_shm_before(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    tst_case_t c = {.coll = TST_GATHER, .dt = CCL_INT32, .op = CCL_SUM, .count = ((size_t)8 << 20) + 3,
                    .seed = tst_case_seed(base_seed, 2, 0, 31, 31), .root = 0};
    tst_bufs_t b;
    tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 1);
    tst_set_case(ctx, "helper death: gather by reference, the sender copying too");
    double t0 = tst_now();
    ccl_result_t rc = tst_case_issue(&c, &b, comm, NULL); /* rank 1 dies in here */
    double dt = tst_now() - t0;
    if (ctx->rank == 0) {
        if (rc == CCL_SUCCESS)
            tst_fail(ctx, "helper death: the root's gather succeeded although rank 1 died copying into it");
        tst_note_killed(ctx, 1);
        printf("  helper death, root after %.2f s: %s: %s\n", dt, ccl_get_error_string(rc), ccl_get_last_error(comm));
    } else {
        tst_fail(ctx, "helper death: rank 1 returned (%s) instead of being killed at its first helped slice: "
                 "it never helped", ccl_get_error_string(rc));
    }
    fflush(stdout);
    tst_case_release(&b);
    abort_broken(ctx, comm, "helper death");
    check_shm_clean(ctx, "helper death");
    return 0;
}

/* Which rank's call dies or fails (-1: both fail), in which collective. */
typedef struct {
    int victim;
    tst_coll_t coll;
} fail_case_t;

/* A 2-rank broadcast out of place on ccl_mem_alloc buffers: the root's
 * whole-step reference names its receive buffer as a twin, and the root
 * and rank 1 each copy slices into both ranks' receive buffers (rank 1
 * from the front, the root from the back). CCL_FAULT kills one of them
 * mid-way: rank 1 (the victim 1) at its 8th slice, after it claimed it and
 * before it copied it, or the root (victim 0) at its first slice copied
 * for both. The survivor must fail, not return with slices the dead rank
 * claimed unwritten, nor wait for them beyond its timeout. The same for
 * the fused 2-rank allreduce (core/exec_pair.c), where each rank reduces
 * the slices it claims into both ranks' receive buffers (rank 0 from the
 * front, rank 1 from the back): the victim dies at its 8th slice. */
static int twin_death_body(tst_ctx_t *ctx, void *arg)
{
    const fail_case_t *fc = arg;
    int victim = fc->victim, pair = fc->coll == TST_ALLREDUCE;
    note_shm_before(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    tst_case_t c = {.coll = fc->coll, .dt = CCL_INT32, .op = CCL_SUM,
                    .count = pair ? ((size_t)8 << 20) + 3 : ((size_t)32 << 20) + 3,
                    .seed = tst_case_seed(base_seed, 2, 0, 37, 37), .root = 0};
    tst_bufs_t b;
    tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 1);
    tst_set_case(ctx, pair     ? "pair death: allreduce, a rank dies while it reduces for both"
                      : victim ? "twin death: broadcast, the reader dies while it copies for both"
                               : "twin death: broadcast, the root dies while it copies for both");
    double t0 = tst_now();
    ccl_result_t rc = tst_case_issue(&c, &b, comm, NULL); /* the victim dies in here */
    double dt = tst_now() - t0;
    if (ctx->rank != victim) {
        if (rc == CCL_SUCCESS)
            tst_fail(ctx, "twin death: rank %d's %s succeeded although rank %d died copying into it",
                     ctx->rank, tst_coll_name(c.coll), victim);
        tst_note_killed(ctx, victim);
        printf("  twin death (rank %d killed), rank %d after %.2f s: %s: %s\n", victim, ctx->rank, dt,
               ccl_get_error_string(rc), ccl_get_last_error(comm));
    } else {
        tst_fail(ctx, "twin death: rank %d returned (%s) instead of being killed inside the call", victim,
                 ccl_get_error_string(rc));
    }
    fflush(stdout);
    tst_case_release(&b);
    abort_broken(ctx, comm, "twin death");
    check_shm_clean(ctx, "twin death");
    return 0;
}

static uint64_t sum_words(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

/* The twin broadcast again, but the victim's call fails at that slice
 * with its process alive (CCL_FAULT=fail), so death cannot end the
 * others' waits: the root failing while it copies for both must not keep
 * rank 1 waiting for slices it will never copy (that took 3 s, with a
 * false warning); rank 1 failing must not keep the root. Neither buffer
 * may change once its owner returned: each rank checks its receive
 * buffer again after both returned. The same for a 2-rank gather whose
 * sender fails at the first slice it copies into the root's buffer
 * (help without a twin), and for a 2-rank allgather (each rank writes its
 * peer's block into both buffers) where both calls fail at once (victim
 * -1): neither may wait for the other to stop writing while the other
 * waits for it. */
static int twin_fail_body(tst_ctx_t *ctx, void *arg)
{
    const fail_case_t *fc = arg;
    int victim = fc->victim;
    note_shm_before(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    int gather = fc->coll == TST_GATHER, both = victim < 0, pair = fc->coll == TST_ALLREDUCE;
    tst_case_t c = {.coll = fc->coll, .dt = CCL_INT32, .op = CCL_SUM,
                    .count = fc->coll == TST_BROADCAST ? ((size_t)32 << 20) + 3 : ((size_t)8 << 20) + 3,
                    .seed = tst_case_seed(base_seed, 2, 0, 41, 41), .root = 0};
    tst_bufs_t b;
    tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 1);
    tst_set_case(ctx, pair && both ? "pair failure: allreduce, both calls fail while they reduce for both"
                      : pair       ? "pair failure: allreduce, a rank's call fails while it reduces for both"
                      : both       ? "twin failure: allgather, both calls fail while they copy for both"
                      : gather     ? "help failure: gather, the sender's call fails while it copies for the root"
                      : victim ? "twin failure: broadcast, the reader's call fails while it copies for both"
                               : "twin failure: broadcast, the root's call fails while it copies for both");
    double t0 = tst_now();
    ccl_result_t rc = tst_case_issue(&c, &b, comm, NULL); /* the victim's fails in here */
    double dt = tst_now() - t0;
    size_t bytes = c.count * sizeof(int32_t) * ((gather && ctx->rank == 0) || (both && !pair) ? 2 : 1);
    uint64_t sum = gather && ctx->rank != 0 ? 0 : sum_words(b.recvp, bytes);
    printf("  %s failure (rank %d's call fails), rank %d after %.2f s: %s: %s\n", gather ? "help" : "twin", victim,
           ctx->rank, dt,
           ccl_get_error_string(rc), ccl_get_last_error(comm));
    fflush(stdout);
    if (ctx->rank == victim && rc != CCL_ERR_INTERNAL)
        tst_fail(ctx, "twin failure: rank %d's call returned %s, not the injected failure", victim,
                 ccl_get_error_string(rc));
    if (both && (rc == CCL_SUCCESS || dt > 2.5))
        tst_fail(ctx, "twin failure: rank %d's %s returned %s after %.2f s, where both failed", ctx->rank,
                 tst_coll_name(c.coll), ccl_get_error_string(rc), dt);
    if (!both && ctx->rank != victim && rc == CCL_SUCCESS)
        tst_fail(ctx, "twin failure: rank %d's %s succeeded although rank %d's failed copying into it",
                 ctx->rank, tst_coll_name(c.coll), victim);
    if (!both && ctx->rank != victim && dt > 2.5)
        tst_fail(ctx, "twin failure: rank %d took %.2f s to fail (a wait for slices nobody copies)", ctx->rank,
                 dt);
    tst_barrier(ctx); /* both returned */
    if ((!gather || ctx->rank == 0) && sum_words(b.recvp, bytes) != sum)
        tst_fail(ctx, "twin failure: rank %d's receive buffer changed after its call returned", ctx->rank);
    tst_case_release(&b);
    abort_broken(ctx, comm, "twin failure");
    check_shm_clean(ctx, "twin failure");
    return 0;
}

/* The fused 2-rank allreduce where the ranks' counts differ (a user's
 * bug; CCL_CHECK_ARGS off): each rank's offer names its count, so both
 * must fail at once with CCL_ERR_MISMATCH, before anything is written
 * into either receive buffer. */
static int pair_mismatch_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    note_shm_before(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    tst_case_t c = {.coll = TST_ALLREDUCE, .dt = CCL_FLOAT32, .op = CCL_SUM,
                    .count = ((size_t)1 << 20) + 3 + (size_t)ctx->rank,
                    .seed = tst_case_seed(base_seed, 2, 0, 43, 43)};
    tst_bufs_t b;
    tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 1);
    tst_set_case(ctx, "pair mismatch: allreduce of %zu elements against %zu", c.count,
                 ((size_t)1 << 20) + 3 + (size_t)(1 - ctx->rank));
    size_t bytes = c.count * sizeof(float);
    uint64_t before = sum_words(b.recvp, bytes);
    double t0 = tst_now();
    ccl_result_t rc = tst_case_issue(&c, &b, comm, NULL);
    double dt = tst_now() - t0;
    printf("  pair mismatch, rank %d after %.2f s: %s: %s\n", ctx->rank, dt, ccl_get_error_string(rc),
           ccl_get_last_error(comm));
    fflush(stdout);
    if (rc != CCL_ERR_MISMATCH)
        tst_fail(ctx, "pair mismatch: rank %d's allreduce returned %s, not CCL_ERR_MISMATCH", ctx->rank,
                 ccl_get_error_string(rc));
    if (dt > 2.5)
        tst_fail(ctx, "pair mismatch: rank %d took %.2f s to notice", ctx->rank, dt);
    tst_barrier(ctx);
    if (sum_words(b.recvp, bytes) != before)
        tst_fail(ctx, "pair mismatch: rank %d's receive buffer was written", ctx->rank);
    tst_case_release(&b);
    abort_broken(ctx, comm, "pair mismatch");
    check_shm_clean(ctx, "pair mismatch");
    return 0;
}

/* ccl reads CCL_* once per process, so scenarios that need their own
 * (single copy from 1 KiB, the kill) run in a fresh process:
 * `test_fault <scenario>` with that environment (NAME=value words). */
static int run_reexec(const char *self, const char *scenario, const char *const *env)
{
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; env[i]; i++) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            *eq = '\0';
            setenv(kv, eq + 1, 1);
        }
        execl("/proc/self/exe", self, scenario, (char *)NULL);
        perror("execl");
        _exit(2);
    }
    int status = 0;
    return pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* The chain (forced: where ranks outnumber cores the tuner takes the
 * star), then the star, where rank 1 is the root's first reader, which
 * shares the root's own copy (the twin), and the root helps every reader. */
static int run_forward_death(const char *self)
{
    printf("broadcast by reference, the rank passing it on dies:\n");
    fflush(stdout);
    static const char *const env[] = {"CCL_SINGLE_COPY_THRESHOLD=1K", "CCL_FAULT=kill:rank=1:op=1:slice=8",
                                      "CCL_BUFFSIZE=1M", /* 128 KiB slots: slice 8 of 33 */
                                      "CCL_NSLOTS=8", "CCL_ALGO=broadcast:chain", NULL};
    static const char *const star[] = {"CCL_SINGLE_COPY_THRESHOLD=1K", "CCL_FAULT=kill:rank=1:op=1:slice=8",
                                       "CCL_BUFFSIZE=1M", "CCL_NSLOTS=8", "CCL_ALGO=broadcast:pairwise", NULL};
    int failed = run_reexec(self, "forward-death", env);
    printf("broadcast as a star by reference, the root's first reader dies:\n");
    fflush(stdout);
    return failed + run_reexec(self, "forward-death", star);
}

/* A scenario of the single-copy help path in a fresh process: single copy
 * from 1 KiB, copy help on, 128 KiB slots, and the given CCL_FAULT. */
static int run_help_fault(const char *self, const char *scenario, const char *fault)
{
    char fault_kv[128];
    snprintf(fault_kv, sizeof fault_kv, "CCL_FAULT=%s", fault);
    const char *const env[] = {"CCL_SINGLE_COPY_THRESHOLD=1K", "CCL_COPY_HELP=2", fault_kv, "CCL_BUFFSIZE=1M",
                               "CCL_NSLOTS=8", NULL};
    return run_reexec(self, scenario, env);
}

static int run_helper_death(const char *self)
{
    printf("gather by reference, the sender dies while it copies part of it into the root's buffer:\n");
    fflush(stdout);
    /* 257 slices of its step, then the first one it helps with */
    return run_help_fault(self, "helper-death", "kill:rank=1:op=1:slice=258");
}

static int run_twin_death(const char *self)
{
    printf("2-rank broadcast by reference, root and reader both copying into both buffers, one dies:\n");
    fflush(stdout);
    /* 128 KiB slots: the step is 1025 slices (long enough that the root,
     * which has nothing else to do, gets some before the reader is through
     * on a loaded machine too). The root counts its 1025 (its reference
     * goes once), then the first it copies for both. */
    return run_help_fault(self, "twin-death-0", "kill:rank=0:op=1:slice=1026") +
           run_help_fault(self, "twin-death-1", "kill:rank=1:op=1:slice=8");
}

static int run_twin_fail(const char *self)
{
    printf("2-rank broadcast by reference, root and reader both copying into both buffers, one's call fails:\n");
    fflush(stdout);
    return run_help_fault(self, "twin-fail-0", "fail:rank=0:op=1:slice=1026") +
           run_help_fault(self, "twin-fail-1", "fail:rank=1:op=1:slice=8") +
           /* the gather's sender: 257 slices of its step, then the first one it helps with */
           run_help_fault(self, "help-fail-1", "fail:rank=1:op=1:slice=258") +
           run_help_fault(self, "ag-fail-both", "fail:op=1:slice=40");
}

/* The fused 2-rank allreduce (ccl_mem_alloc buffers, single copy from
 * 1 KiB: the tuner's pick), 128 KiB slices: 257 of them. Rank 0 claims
 * from the front, rank 1 from the back; the victim dies, or its call
 * fails, at its 8th (claimed, not yet reduced), or both calls fail at
 * their first (unless one rank's failure took every slice first). */
static int run_pair_faults(const char *self)
{
    static const char *const mismatch_env[] = {"CCL_SINGLE_COPY_THRESHOLD=1K", "CCL_BUFFSIZE=1M", "CCL_NSLOTS=8",
                                               NULL};
    printf("2-rank fused allreduce, both ranks reducing into both buffers, one dies or fails; counts that "
           "differ:\n");
    fflush(stdout);
    return run_help_fault(self, "pair-death-0", "kill:rank=0:op=1:slice=8") +
           run_help_fault(self, "pair-death-1", "kill:rank=1:op=1:slice=8") +
           run_help_fault(self, "pair-fail-0", "fail:rank=0:op=1:slice=8") +
           run_help_fault(self, "pair-fail-1", "fail:rank=1:op=1:slice=8") +
           run_help_fault(self, "pair-fail-both", "fail:op=1:slice=1") +
           run_reexec(self, "pair-mismatch", mismatch_env);
}

int main(int argc, char **argv)
{
    int failed = 0;
    if (argc == 2 && (strncmp(argv[1], "twin-death-", 11) == 0 || strncmp(argv[1], "pair-death-", 11) == 0)) {
        static fail_case_t fc;
        fc.victim = argv[1][11] == '0' ? 0 : 1;
        fc.coll = argv[1][0] == 'p' ? TST_ALLREDUCE : TST_BROADCAST;
        setenv("CCL_TIMEOUT", "30", 0);
        base_seed = tst_seed("test_fault");
        tst_sigkill_ok_rank = fc.victim;
        return tst_run_ranks("fault-twin-death", 2, 90, twin_death_body, &fc) != 0;
    }
    if (argc == 2 && (strncmp(argv[1], "twin-fail-", 10) == 0 || strncmp(argv[1], "help-fail-", 10) == 0 ||
                      strncmp(argv[1], "pair-fail-", 10) == 0)) {
        static fail_case_t fc;
        fc.victim = argv[1][10] == '0' ? 0 : argv[1][10] == '1' ? 1 : -1; /* pair-fail-both: -1 */
        fc.coll = argv[1][0] == 'h' ? TST_GATHER : argv[1][0] == 'p' ? TST_ALLREDUCE : TST_BROADCAST;
        setenv("CCL_TIMEOUT", "30", 0);
        base_seed = tst_seed("test_fault");
        return tst_run_ranks("fault-twin-fail", 2, 90, twin_fail_body, &fc) != 0;
    }
    if (argc == 2 && strcmp(argv[1], "pair-mismatch") == 0) {
        setenv("CCL_TIMEOUT", "30", 0);
        base_seed = tst_seed("test_fault");
        return tst_run_ranks("fault-pair-mismatch", 2, 90, pair_mismatch_body, NULL) != 0;
    }
    if (argc == 2 && strcmp(argv[1], "ag-fail-both") == 0) {
        static fail_case_t fc = {-1, TST_ALLGATHER};
        setenv("CCL_TIMEOUT", "30", 0);
        base_seed = tst_seed("test_fault");
        return tst_run_ranks("fault-twin-fail", 2, 90, twin_fail_body, &fc) != 0;
    }
    if (argc == 2 && strcmp(argv[1], "forward-death") == 0) {
        setenv("CCL_TIMEOUT", "30", 0);
        base_seed = tst_seed("test_fault");
        tst_sigkill_ok_rank = 1;
        return tst_run_ranks("fault-forward-death", 4, 90, forward_death_body, NULL) != 0;
    }
    if (argc == 2 && strcmp(argv[1], "helper-death") == 0) {
        setenv("CCL_TIMEOUT", "30", 0);
        base_seed = tst_seed("test_fault");
        tst_sigkill_ok_rank = 1;
        return tst_run_ranks("fault-helper-death", 2, 90, helper_death_body, NULL) != 0;
    }
    /* Bounds the wait of a library that only notices by timing out. */
    setenv("CCL_TIMEOUT", "30", 0);
    base_seed = tst_seed("test_fault");
    static const size_t counts[] = {1021, ((size_t)1 << 20) + 3};
    static const tst_coll_t colls[] = {TST_ALLREDUCE, TST_ALLTOALL, TST_BROADCAST};
    for (int ci = 0; ci < 3; ci++) {
        g_coll = colls[ci];
        for (int k = 0; k < 2; k++) {
            g_count = counts[k];
            printf("%s, count %zu:\n", tst_coll_name(g_coll), g_count);
            failed += tst_run_ranks("fault-peer-death", 3, 90, peer_death_body, NULL) != 0;
            failed += tst_run_ranks("fault-peer-death", 4, 90, peer_death_body, NULL) != 0;
            failed += tst_run_ranks("fault-abort", 3, 90, abort_body, NULL) != 0;
        }
    }
    printf("abort with a call queued on a stream and a blocking call waiting for the comm:\n");
    failed += tst_run_ranks("fault-abort-queued", 2, 90, abort_queued_body, NULL) != 0;
    failed += run_forward_death(argv[0]);
    failed += run_helper_death(argv[0]);
    failed += run_twin_death(argv[0]);
    failed += run_twin_fail(argv[0]);
    failed += run_pair_faults(argv[0]);
    /* Death at several points of the shared-memory setup. The delays only
     * bound a victim that never gets there (it dies waiting after init). */
    static const death_point_t deaths[] = {{3000000, 1}, {3000000, 4}, {3000000, 6},
                                           {3000000, 9}};
    g_coll = TST_ALLREDUCE;
    g_count = counts[0];
    for (size_t k = 0; k < sizeof(deaths) / sizeof(deaths[0]); k++) {
        printf("death at %d ccl segments mapped in init:\n", deaths[k].maps);
        failed += tst_run_ranks("fault-init-death", 4, 90, init_death_body, (void *)&deaths[k]) != 0;
    }
    printf("test_fault: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
