/*
 * test_net_fault.c - how the net transport ends a connection, on one
 * machine: three forked ranks, each on its own fake host (CCL_HOSTID), so
 * that every connection is TCP through the net proxy. A rank that leaves
 * says goodbye, and the message after the goodbye tells its peers why:
 *  - abort: ranks 0 and 2 wait in an allreduce that rank 1 never joins;
 *    rank 1 calls ccl_comm_abort. Both must fail within NOTICE_S, and their
 *    error must carry rank 1's reason (its notice), not only "connection
 *    closed": "rank 1 (host) called ccl_comm_abort";
 *  - destroy: rank 1 destroys its communicator after a good allreduce; that
 *    is no failure for the others (its trailer is empty), whose send/recv
 *    between ranks 0 and 2 must still work and whose later collective that
 *    needs rank 1 must fail naming rank 1 (gone, or its connection closed:
 *    which one a rank sees first depends on what it waits for).
 * tests/cluster/faults.sh covers cut links and killed ranks across real
 * (namespace) nodes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_common.h"
#include "test_launch.h"

/* Seconds a rank may take to learn that rank 1 left. */
#define NOTICE_S 10.0
#define COUNT 4096

static ccl_comm_t fake_host_init(tst_ctx_t *ctx)
{
    /* Read once, at the first ccl call of this (forked) process. */
    char host[32];
    snprintf(host, sizeof host, "fake-net-fault-%d", ctx->rank);
    setenv("CCL_HOSTID", host, 1);
    return tst_comm_init(ctx);
}

static void good_allreduce(tst_ctx_t *ctx, ccl_comm_t comm, float *buf)
{
    for (int i = 0; i < COUNT; i++)
        buf[i] = (float)(ctx->rank + 1);
    TST_CCL(ctx, comm, ccl_allreduce(buf, buf, COUNT, CCL_FLOAT32, CCL_SUM, comm, NULL));
    float want = (float)(ctx->nranks * (ctx->nranks + 1) / 2);
    for (int i = 0; i < COUNT; i++)
        if (buf[i] != want) {
            tst_fail(ctx, "allreduce: element %d is %g, expected %g", i, (double)buf[i], (double)want);
            return;
        }
}

/* Init on this rank's fake host and one checked allreduce; *buf is COUNT
 * floats for the rest of the body. */
static ccl_comm_t start_rank(tst_ctx_t *ctx, float **buf)
{
    ccl_comm_t comm = fake_host_init(ctx);
    *buf = calloc(COUNT, sizeof **buf);
    if (!*buf)
        tst_fatal(ctx, "out of memory");
    good_allreduce(ctx, comm, *buf);
    return comm;
}

/* An allreduce that needs rank 1, which left: it must fail within NOTICE_S
 * with an error that names rank 1 and holds needle; then the broken comm
 * is aborted. */
static void fail_without_rank1(tst_ctx_t *ctx, ccl_comm_t comm, float *buf, const char *what, const char *needle)
{
    tst_set_case(ctx, "%s: an allreduce that needs rank 1", what);
    double t0 = tst_now();
    ccl_result_t rc = ccl_allreduce(buf, buf, COUNT, CCL_FLOAT32, CCL_SUM, comm, NULL);
    double dt = tst_now() - t0;
    const char *msg = ccl_get_last_error(comm);
    if (rc == CCL_SUCCESS) {
        tst_fail(ctx, "%s: the allreduce succeeded although rank 1 is gone", what);
    } else {
        printf("  %s, rank %d: %s after %.2f s: %s\n", what, ctx->rank, ccl_get_error_string(rc), dt, msg);
        fflush(stdout);
        if (dt > NOTICE_S)
            tst_fail(ctx, "%s: took %.1f s to fail", what, dt);
        if (!strstr(msg, "rank 1 (") || !strstr(msg, needle))
            tst_fail(ctx, "%s: the error does not say \"rank 1 (\" and \"%s\": %s", what, needle, msg);
    }
    rc = ccl_comm_abort(comm);
    if (rc != CCL_SUCCESS)
        tst_fail(ctx, "ccl_comm_abort of the broken comm returned %s", ccl_get_error_string(rc));
}

static int abort_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    float *buf = NULL;
    ccl_comm_t comm = start_rank(ctx, &buf);
    if (ctx->rank == 1) {
        /* The others are blocked in the allreduce by now (or soon are). */
        usleep(300000);
        tst_set_case(ctx, "abort: ccl_comm_abort");
        TST_CCL(ctx, NULL, ccl_comm_abort(comm));
    } else {
        fail_without_rank1(ctx, comm, buf, "abort", "called ccl_comm_abort");
    }
    free(buf);
    return 0;
}

static int destroy_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    float *buf = NULL;
    ccl_comm_t comm = start_rank(ctx, &buf);
    if (ctx->rank == 1) {
        tst_comm_destroy(ctx, comm);
        tst_barrier(ctx);
        free(buf);
        return 0;
    }
    tst_barrier(ctx); /* rank 1's goodbye is on its way or in */
    usleep(200000);
    tst_set_case(ctx, "destroy: send/recv between ranks 0 and 2");
    int peer = 2 - ctx->rank;
    for (int i = 0; i < COUNT; i++)
        buf[i] = (float)(ctx->rank * COUNT + i);
    float *in = calloc(COUNT, sizeof *in);
    if (!in)
        tst_fatal(ctx, "out of memory");
    TST_CCL(ctx, comm, ccl_group_start());
    TST_CCL(ctx, comm, ccl_send(buf, COUNT, CCL_FLOAT32, peer, comm, NULL));
    TST_CCL(ctx, comm, ccl_recv(in, COUNT, CCL_FLOAT32, peer, comm, NULL));
    TST_CCL(ctx, comm, ccl_group_end());
    for (int i = 0; i < COUNT; i++)
        if (in[i] != (float)(peer * COUNT + i)) {
            tst_fail(ctx, "destroy: element %d from rank %d is %g", i, peer, (double)in[i]);
            break;
        }
    fail_without_rank1(ctx, comm, buf, "destroy", "");
    free(in);
    free(buf);
    return 0;
}

/* Each run from a fresh process: ccl reads its parameters once per process,
 * and a launcher that already read them (it makes the unique id) would hand
 * its copy to the ranks it forks, before they set CCL_HOSTID. */
static int run_fresh(const char *name, tst_rank_fn fn)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0)
        _exit(tst_run_ranks(name, 3, 90, fn, NULL) != 0);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        printf("FAIL %s: its launcher died\n", name);
        return 1;
    }
    return WEXITSTATUS(status) != 0;
}

int main(void)
{
    int failed = 0;
    /* A library that only notices by timing out fails NOTICE_S, not the run. */
    setenv("CCL_TIMEOUT", "30", 0);
    failed += run_fresh("net-fault-abort", abort_body);
    failed += run_fresh("net-fault-destroy", destroy_body);
    printf("test_net_fault: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
