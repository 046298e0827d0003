/*
 * test_nccl_abi.c - a program built against NVIDIA's nccl.h and linked to
 * ccl's libnccl.so.2 (tests/nccl/run.sh), as an NCCL application would be.
 *
 *   test_nccl_abi procs N    N processes (fork); rank 0's ncclGetUniqueId goes
 *                            to the others through a pipe; inits through
 *                            ncclCommInitRankConfig (blocking, nonblocking, and
 *                            an older caller's shorter config; rank 3 through
 *                            ncclCommInitRankScalable)
 *   test_nccl_abi threads N  ncclCommInitAll (with a devlist), then one thread per rank
 *   test_nccl_abi group N    one thread: N ncclCommInitRank in a group (as
 *                            nccl-tests does), then grouped collectives
 *
 * In procs and threads mode every rank runs the collective suite
 * (nccl_suite.c), split (colors, keys, NCCL_SPLIT_NOCOLOR), shrink, the
 * comm queries, refused calls with their codes and messages, finalize and
 * destroy. Exit status 0 only when nothing mismatched.
 */
#include "nccl_suite.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int test_failures;

/* ---- calls that are not collectives ---------------------------------------- */

static void check_version_and_strings(void)
{
    int version = 0;
    NCHECK(ncclGetVersion(&version));
    if (version < NCCL_VERSION(2, 28, 0))
        FAILF("ncclGetVersion gave %d, want at least NCCL_VERSION(2,28,0) = %d", version, NCCL_VERSION(2, 28, 0));
    for (int r = ncclSuccess; r < ncclNumResults; r++)
        if (!ncclGetErrorString((ncclResult_t)r) || !ncclGetErrorString((ncclResult_t)r)[0])
            FAILF("ncclGetErrorString(%d) is empty", r);
    if (!ncclGetErrorString((ncclResult_t)99))
        FAILF("ncclGetErrorString(99) is NULL");
}

/* Refused calls: the code NCCL gives, a message, no crash. Local checks
 * only, so one rank may make them while the others do not. */
static void check_refusals(ncclComm_t comm, int rank, int n)
{
    char buf[64] = {0};
    ncclComm_t other;
    ncclWindow_t win = NULL;
    NEXPECT(ncclInvalidArgument, ncclAllReduce(buf, buf, 4, (ncclDataType_t)99, ncclSum, comm, NULL));
    if (!strstr(ncclGetLastError(comm), "99"))
        FAILF("bad dtype: message \"%s\" does not name the value", ncclGetLastError(comm));
    NEXPECT(ncclInvalidArgument, ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)77, comm, NULL));
    NEXPECT(ncclInvalidArgument, ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, NULL, NULL));
    NEXPECT(ncclInvalidArgument, ncclBroadcast(buf, buf, 4, ncclFloat32, n + 5, comm, NULL));
    NEXPECT(ncclInvalidArgument, ncclSend(NULL, 4, ncclFloat32, 0, comm, NULL));
    NEXPECT(ncclInvalidArgument, ncclCommCount(NULL, &n));
    NEXPECT(ncclInvalidUsage, ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
    NEXPECT(ncclInvalidUsage, ncclCommWindowRegister(comm, buf, sizeof buf, &win, NCCL_WIN_DEFAULT));
    NEXPECT(ncclInvalidUsage, ncclCommWindowDeregister(comm, win));
    NEXPECT(ncclInvalidArgument, ncclCommShrink(comm, &rank, 1, &other, NULL, 0x40));
    NEXPECT(ncclInvalidArgument, ncclCommDeregister(comm, buf));

    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    bad.magic = 0x1234;
    NEXPECT(ncclInvalidArgument, ncclCommInitRankConfig(&other, n, id, rank, &bad));
    bad = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
    bad.blocking = 7;
    NEXPECT(ncclInvalidArgument, ncclCommSplit(comm, 0, 0, &other, &bad));
    NEXPECT(ncclInvalidArgument, ncclGetVersion(NULL));
    NEXPECT(ncclInvalidArgument, pncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, NULL, NULL)); /* profiling name */
    NCHECK(ncclCommDestroy(NULL)); /* NCCL: nothing to do */
}

static void check_queries(ncclComm_t comm, int want_rank, int want_n, int want_device)
{
    int rank = -1, n = -1, dev = -1;
    ncclResult_t async = ncclInternalError;
    NCHECK(ncclCommUserRank(comm, &rank));
    NCHECK(ncclCommCount(comm, &n));
    NCHECK(ncclCommCuDevice(comm, &dev));
    NCHECK(ncclCommGetAsyncError(comm, &async));
    if (rank != want_rank || n != want_n || async != ncclSuccess || (want_device >= 0 && dev != want_device))
        FAILF("queries: rank %d/%d, device %d, async %d; want %d/%d, device %d, async 0", rank, n, dev, async,
              want_rank, want_n, want_device);
}

/* The tuner's estimate of one grouped call, without running it. */
static void check_simulate(ncclComm_t comm)
{
    float x = 1;
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    NCHECK(ncclGroupStart());
    NCHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL));
    NCHECK(ncclGroupSimulateEnd(&info));
    if (!(info.estimatedTime >= 0) || x != 1)
        FAILF("ncclGroupSimulateEnd: estimatedTime %g, buffer %g (must not run)", info.estimatedTime, x);
}

/* The rank's value summed over the members of its new comm. */
static void check_sum_of_ranks(ncclComm_t comm, int parent_rank, int want)
{
    int v = parent_rank;
    NCHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, NULL));
    if (v != want)
        FAILF("sum over a derived comm: %d, want %d", v, want);
}

/* Colors rank % 2, keys -rank: new ranks in reverse order of old ones. */
static void check_split(ncclComm_t comm, int rank, int n)
{
    ncclComm_t sub = NULL;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    int color = rank % 2, members = 0, above = 0, sum = 0;
    NCHECK(ncclCommSplit(comm, color, -rank, &sub, &config));
    for (int r = color; r < n; r += 2) {
        members++;
        sum += r;
        above += r > rank;
    }
    if (sub) {
        check_queries(sub, above, members, -1);
        check_sum_of_ranks(sub, rank, sum);
        NCHECK(ncclCommFinalize(sub));
        NCHECK(ncclCommDestroy(sub));
    } else {
        FAILF("rank %d: ncclCommSplit gave no comm", rank);
    }

    /* Rank 0 opts out; the others keep their order (key 0: by old rank). */
    sub = (ncclComm_t)&sub;
    NCHECK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 5, 0, &sub, NULL));
    if (rank == 0 && sub != NULL)
        FAILF("NCCL_SPLIT_NOCOLOR gave a comm");
    if (rank != 0 && sub) {
        check_queries(sub, rank - 1, n - 1, -1);
        check_sum_of_ranks(sub, rank, n * (n - 1) / 2);
        NCHECK(ncclCommDestroy(sub));
    }
}

/* Survivors drop the last rank; it only destroys its comm. Last thing
 * done on comm: it is destroyed right after. */
static void check_shrink(ncclComm_t comm, int rank, int n)
{
    if (n < 3 || rank == n - 1)
        return;
    int excluded = n - 1;
    ncclComm_t small = NULL;
    NCHECK(ncclCommShrink(comm, &excluded, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
    if (!small)
        return;
    check_queries(small, rank, n - 1, -1);
    check_sum_of_ranks(small, rank, (n - 1) * (n - 2) / 2);
    NCHECK(ncclCommDestroy(small));
}

/* Everything a rank does on its comm, in the same order on every rank. */
static void rank_main(ncclComm_t comm, int rank, int n, int device)
{
    check_queries(comm, rank, n, device);
    check_refusals(comm, rank, n);
    check_simulate(comm);
    suite_run(comm);
    check_split(comm, rank, n);
    check_shrink(comm, rank, n);
    NCHECK(ncclCommDestroy(comm));
}

/* ---- processes -------------------------------------------------------------- */

/* How rank r asks for its comm: blocking, nonblocking (polled), or with
 * the shorter ncclConfig_t of an NCCL 2.14 caller whose struct ends before
 * splitShare (what lies beyond must not be read). */
static ncclResult_t init_with_config(ncclComm_t *comm, int n, ncclUniqueId id, int rank)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (rank % 3 == 1) {
        config.blocking = 0;
        ncclResult_t res = ncclCommInitRankConfig(comm, n, id, rank, &config);
        ncclResult_t state = res;
        while (res == ncclInProgress && state == ncclInProgress)
            if (ncclCommGetAsyncError(*comm, &state) != ncclSuccess)
                return ncclInternalError;
        return res == ncclInProgress ? state : res;
    }
    if (rank == 3) { /* several ids are NCCL's; ccl uses the first */
        ncclUniqueId ids[2] = {id, id};
        return ncclCommInitRankScalable(comm, n, rank, 2, ids, &config);
    }
    if (rank % 3 == 2) {
        config.size = offsetof(ncclConfig_t, splitShare);
        config.version = NCCL_VERSION(2, 14, 0);
        config.splitShare = 99;  /* garbage a 2.14 caller never wrote */
        config.blocking = 1;
    }
    return ncclCommInitRankConfig(comm, n, id, rank, &config);
}

static int proc_rank(int rank, int n, int id_pipe[2])
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    if (rank == 0) {
        NCHECK(ncclGetUniqueId(&id));
        for (int r = 1; r < n; r++)
            if (write(id_pipe[1], &id, sizeof id) != (ssize_t)sizeof id)
                return 1;
    } else if (read(id_pipe[0], &id, sizeof id) != (ssize_t)sizeof id) {
        return 1;
    }
    ncclResult_t res = init_with_config(&comm, n, id, rank);
    if (res != ncclSuccess) {
        FAILF("rank %d: init: %s: %s", rank, ncclGetErrorString(res), ncclGetLastError(NULL));
        return 1;
    }
    rank_main(comm, rank, n, 0);
    return test_failures != 0;
}

static int run_procs(int n)
{
    int id_pipe[2];
    if (pipe(id_pipe) != 0)
        return 1;
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(proc_rank(r, n, id_pipe));
        if (pid < 0)
            return 1;
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    return failed != 0;
}

/* ---- threads ---------------------------------------------------------------- */

typedef struct {
    ncclComm_t comm;
    int rank, n;
} thread_arg_t;

static void *thread_rank(void *p)
{
    thread_arg_t *a = p;
    rank_main(a->comm, a->rank, a->n, a->n - 1 - a->rank); /* its devlist entry */
    return NULL;
}

static int run_threads(int n)
{
    ncclComm_t comms[16];
    pthread_t tids[16];
    thread_arg_t args[16];
    int devlist[16];
    for (int r = 0; r < n; r++)
        devlist[r] = n - 1 - r;
    NCHECK(ncclCommInitAll(comms, n, devlist));
    if (test_failures)
        return 1;
    for (int r = 0; r < n; r++) {
        args[r] = (thread_arg_t){comms[r], r, n};
        pthread_create(&tids[r], NULL, thread_rank, &args[r]);
    }
    for (int r = 0; r < n; r++)
        pthread_join(tids[r], NULL);
    return test_failures != 0;
}

/* ---- one thread, every rank, groups ------------------------------------------ */

static int run_group(int n)
{
    ncclComm_t comms[16];
    ncclUniqueId id;
    float send[16][257], recv[16][257];
    NCHECK(ncclGetUniqueId(&id));
    NCHECK(ncclGroupStart());
    for (int r = 0; r < n; r++)
        NCHECK(ncclCommInitRank(&comms[r], n, id, r));
    NCHECK(ncclGroupEnd());
    if (test_failures)
        return 1;
    for (int r = 0; r < n; r++) {
        check_queries(comms[r], r, n, 0);
        for (int i = 0; i < 257; i++)
            send[r][i] = (float)(r * 1000 + i);
    }
    NCHECK(ncclGroupStart());
    for (int r = 0; r < n; r++)
        NCHECK(ncclAllReduce(send[r], recv[r], 257, ncclFloat32, ncclMax, comms[r], NULL));
    NCHECK(ncclGroupEnd());
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 257; i++)
            if (recv[r][i] != (float)((n - 1) * 1000 + i))
                FAILF("group allreduce max: rank %d [%d] = %g", r, i, recv[r][i]);
    /* Each rank sends to the next and receives from the previous. */
    NCHECK(ncclGroupStart());
    for (int r = 0; r < n; r++) {
        NCHECK(ncclSend(send[r], 257, ncclFloat32, (r + 1) % n, comms[r], NULL));
        NCHECK(ncclRecv(recv[r], 257, ncclFloat32, (r + n - 1) % n, comms[r], NULL));
    }
    NCHECK(ncclGroupEnd());
    for (int r = 0; r < n; r++)
        if (recv[r][5] != send[(r + n - 1) % n][5])
            FAILF("group send/recv: rank %d got %g", r, recv[r][5]);
    NEXPECT(ncclInvalidUsage, ncclGroupEnd()); /* no group open */
    for (int r = 0; r < n; r++)
        NCHECK(ncclCommAbort(comms[r]));
    return test_failures != 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "threads";
    int n = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 1 || n > 16) {
        fprintf(stderr, "usage: %s procs|threads|group N (1..16)\n", argv[0]);
        return 2;
    }
    check_version_and_strings();
    int failed;
    if (!strcmp(mode, "procs"))
        failed = run_procs(n);
    else if (!strcmp(mode, "group"))
        failed = run_group(n);
    else
        failed = run_threads(n);
    failed |= test_failures != 0;
    printf("test_nccl_abi %s %d: %s\n", mode, n, failed ? "FAILED" : "ok");
    return failed;
}
