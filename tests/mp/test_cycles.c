/*
 * test_cycles.c - many init / allreduce / destroy cycles must leak nothing:
 * no file descriptor, thread, memory mapping, heap memory or /dev/shm entry
 * may pile up, however often a job rebuilds its communicator. Three ways to
 * build one, each in a process of its own (which also gives every case a
 * CCL_* table read afresh):
 *   shm       4 forked ranks on this host (shared-memory FIFOs, the board);
 *   net       2 + 2 forked ranks on two fake hosts (CCL_HOSTID), so every
 *             cycle starts and stops the net transport's proxy and socket
 *             threads and its TCP connections;
 *   init_all  ccl_comm_init_all with 3 ranks in one process, one thread
 *             driving all three through a group.
 * Every cycle but the first uses a fresh unique id (a new bootstrap root),
 * runs one small allreduce whose result is checked, and destroys the comm.
 * After WARMUP cycles (process-lifetime state: the logger, thread-local
 * buffers) each rank takes a baseline; at the end nothing may have grown,
 * heap bytes in use within TST_HEAP_SLACK (test_res.h). Rank 0 prints the time each phase
 * took, so a slow init shows here first.
 *
 *   CCL_TEST_CYCLES=n    cycles per case (default 100, which `make test`
 *                        runs; `make soak` runs 1000)
 *   CCL_TEST_CASES=list  comma-separated subset of shm,net,init_all
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"
#include "test_res.h"

#define WARMUP 3
#define INIT_ALL_RANKS 3

typedef enum { CASE_SHM, CASE_NET, CASE_INIT_ALL } cycle_kind_t;

typedef struct {
    const char *name;
    cycle_kind_t kind;
    int nranks; /* forked ranks (1 for init_all: the process that drives all) */
} cycle_case_t;

static const cycle_case_t cases[] = {
    {"shm", CASE_SHM, 4},
    {"net", CASE_NET, 4},
    {"init_all", CASE_INIT_ALL, 1},
};

static uint64_t base_seed;
static int ncycles;

/* Seconds spent per phase over all cycles, on one rank. */
typedef struct {
    double init, coll, destroy, init_max;
} phase_times_t;

static void phase_add(phase_times_t *pt, double t0, double t1, double t2, double t3)
{
    pt->init += t1 - t0;
    pt->coll += t2 - t1;
    pt->destroy += t3 - t2;
    if (t1 - t0 > pt->init_max)
        pt->init_max = t1 - t0;
}

/* The cycle's allreduce: a few elements, dtype and op changing per cycle. */
static tst_case_t tiny_case(int nranks, int cyc)
{
    tst_case_t c;
    memset(&c, 0, sizeof(c));
    c.coll = TST_ALLREDUCE;
    c.dt = tst_dtypes[cyc % tst_num_dtypes];
    c.op = tst_ops[(cyc / tst_num_dtypes) % tst_num_ops];
    c.count = 1 + (size_t)(cyc % 29);
    c.inplace = cyc & 1;
    c.seed = tst_case_seed(base_seed, (uint64_t)nranks, (uint64_t)cyc, 31, 31);
    return c;
}

/* One cycle on a forked rank. */
static void cycle_rank(tst_ctx_t *ctx, int cyc, phase_times_t *pt, int *threads_alive)
{
    ccl_unique_id_t id = ctx->id;
    double t0 = tst_now();
    if (cyc > 0) {
        tst_set_case(ctx, "cycle %d: ccl_get_unique_id on rank 0", cyc);
        tst_share_id(ctx, &id);
    }
    ccl_comm_t comm = tst_comm_init_id(ctx, id);
    double t1 = tst_now();
    *threads_alive = tst_count_threads();
    tst_case_t c = tiny_case(ctx->nranks, cyc);
    tst_run_case(ctx, comm, &c, 0);
    double t2 = tst_now();
    tst_set_case(ctx, "cycle %d: ccl_comm_destroy", cyc);
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    phase_add(pt, t0, t1, t2, tst_now());
}

/* One cycle of ccl_comm_init_all: this thread drives every rank. */
static void cycle_init_all(tst_ctx_t *ctx, int cyc, phase_times_t *pt, int *threads_alive)
{
    const int n = INIT_ALL_RANKS;
    ccl_comm_t comms[INIT_ALL_RANKS];
    tst_bufs_t b[INIT_ALL_RANKS];
    char msg[600];
    double t0 = tst_now();
    tst_set_case(ctx, "cycle %d: ccl_comm_init_all(%d)", cyc, n);
    TST_CCL(ctx, NULL, ccl_comm_init_all(comms, n, NULL));
    double t1 = tst_now();
    *threads_alive = tst_count_threads();
    tst_case_t c = tiny_case(n, cyc);
    tst_case_str(&c, n, msg, sizeof(msg));
    tst_set_case(ctx, "cycle %d: %s, one thread, a group over %d comms", cyc, msg, n);
    for (int r = 0; r < n; r++)
        tst_case_prepare(&c, r, n, &b[r], 0);
    TST_CCL(ctx, NULL, ccl_group_start());
    for (int r = 0; r < n; r++)
        TST_CCL(ctx, comms[r], tst_case_issue(&c, &b[r], comms[r], NULL));
    TST_CCL(ctx, NULL, ccl_group_end());
    for (int r = 0; r < n; r++) {
        if (tst_case_verify(&c, r, n, &b[r], msg, sizeof(msg)))
            tst_fail(ctx, "cycle %d: %s", cyc, msg);
        tst_case_release(&b[r]);
    }
    double t2 = tst_now();
    tst_set_case(ctx, "cycle %d: ccl_comm_destroy of %d comms", cyc, n);
    for (int r = 0; r < n; r++)
        TST_CCL(ctx, comms[r], ccl_comm_destroy(comms[r]));
    phase_add(pt, t0, t1, t2, tst_now());
}

static int cycles_body(tst_ctx_t *ctx, void *arg)
{
    const cycle_case_t *cc = arg;
    char shm_before[1 << 14], msg[512], first[512];
    phase_times_t pt = {0, 0, 0, 0};
    tst_res_t base;
    int threads_alive = 0;
    memset(&base, 0, sizeof(base));

    if (cc->kind == CASE_NET) {
        /* Before this process's first ccl call, which reads the CCL_*
         * table once: ranks 0, 1 on one fake host, 2, 3 on the other. */
        setenv("CCL_HOSTID", ctx->rank < ctx->nranks / 2 ? "cycles-node0" : "cycles-node1", 1);
    }
    /* Rank 0 looks at /dev/shm before anyone has a communicator. */
    if (ctx->rank == 0)
        tst_list_ccl_shm(shm_before, sizeof(shm_before));
    tst_barrier(ctx);

    double t_start = tst_now();
    for (int cyc = 0; cyc < ncycles; cyc++) {
        if (cc->kind == CASE_INIT_ALL)
            cycle_init_all(ctx, cyc, &pt, &threads_alive);
        else
            cycle_rank(ctx, cyc, &pt, &threads_alive);
        if (cyc == WARMUP - 1) {
            tst_barrier(ctx);
            /* Let anything that winds down on its own (the bootstrap root
             * thread) finish first. */
            usleep(300000);
            tst_res_take(&base);
        }
    }
    double t_all = tst_now() - t_start;

    tst_set_case(ctx, "leak checks after %d cycles", ncycles);
    tst_barrier(ctx);
    if (ncycles > WARMUP) {
        if (tst_res_grew(&base, TST_HEAP_SLACK, msg, sizeof(msg)))
            tst_fail(ctx, "%s: over %d cycles after the warm-up: %s", cc->name, ncycles - WARMUP,
                     msg);
        /* The net case must really have run the net transport, whose
         * proxy thread lives as long as the comm. */
        if (cc->kind == CASE_NET && threads_alive <= base.threads)
            tst_fail(ctx, "net: %d threads with a comm, %d without: no net proxy thread ran "
                     "(did CCL_HOSTID take?)", threads_alive, base.threads);
    }
    int own = tst_own_ccl_shm_maps(first, sizeof(first));
    if (own > 0)
        tst_fail(ctx, "%s: %d ccl shm mappings remain after every comm was destroyed, e.g. %s",
                 cc->name, own, first);

    /* Everyone has destroyed everything: no new segment may remain. */
    tst_barrier(ctx);
    if (ctx->rank == 0) {
        int left = tst_shm_left_behind(shm_before, first, sizeof(first));
        if (left > 0)
            tst_fail(ctx, "%s: %d /dev/shm entries left behind, e.g. %s", cc->name, left, first);
        double n = ncycles;
        tst_res_t now;
        tst_res_take(&now);
        printf("  %s: %d cycles in %.1f s; per cycle on rank 0: init %.2f ms (max %.1f), "
               "allreduce %.2f ms, destroy %.2f ms; rank 0 after the warm-up and at the end: "
               "fds %d, %d; threads %d, %d; heap bytes in use %zu, %zu\n",
               cc->name, ncycles, t_all, 1e3 * pt.init / n, 1e3 * pt.init_max, 1e3 * pt.coll / n,
               1e3 * pt.destroy / n, base.fds, now.fds, base.threads, now.threads, base.heap,
               now.heap);
        fflush(stdout);
    }
    return 0;
}

static int case_wanted(const char *name)
{
    const char *list = getenv("CCL_TEST_CASES");
    if (!list || !*list)
        return 1;
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        if (l == len && strncmp(p, name, len) == 0)
            return 1;
        p += l + (end != NULL);
    }
    return 0;
}

/* Runs one case in a child process, so that it starts with no ccl state
 * (the parameter table, loggers, caches) and its counts are its own. */
static int run_case(const cycle_case_t *cc)
{
    char name[64];
    snprintf(name, sizeof(name), "cycles-%s", cc->name);
    /* A generous bound: a net cycle takes 0.3-0.4 s on the loaded 2-core
     * VM, more under a sanitizer (TEST_TIMEOUT_SCALE). */
    int timeout_s = 60 + ncycles;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        int failed = tst_run_ranks(name, cc->nranks, timeout_s, cycles_body, (void *)cc) != 0;
        fflush(stdout);
        exit(failed);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!WIFEXITED(status))
            printf("FAIL %s: its launcher process died (status 0x%x)\n", name, status);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    tst_res_exact_heap(argv);
    int failed = 0;
    base_seed = tst_seed("test_cycles");
    ncycles = (int)tst_env_long("CCL_TEST_CYCLES", 100);
    if (ncycles < 1) {
        fprintf(stderr, "test_cycles: CCL_TEST_CYCLES=%d, must be at least 1\n", ncycles);
        return 2;
    }
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
        if (case_wanted(cases[k].name))
            failed += run_case(&cases[k]);
    printf("test_cycles: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
