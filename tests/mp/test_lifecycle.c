/*
 * test_lifecycle.c - communicator and memory life cycle across forked ranks:
 * 50 cycles of get-unique-id / init / collective / destroy (the first cycle
 * uses the parent's id, later ones an id made by rank 0, as a trainer that
 * rebuilds its communicator would) while watching for leaks (test_res.h):
 * open file descriptors and threads must not grow, nor, beyond a little
 * noise, mappings and heap bytes in use; no /dev/shm/ccl* segment may be
 * left behind or stay mapped. Each cycle
 * also exercises ccl_mem_alloc/ccl_mem_free (page alignment, every byte
 * writable, odd and huge-page sizes).
 *
 *   CCL_TEST_CYCLES=n    number of cycles (default 50)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"
#include "test_res.h"

/* Cycles that may allocate process-lifetime state (a logger, a cached
 * topology) before the counts are taken as the baseline. */
#define WARMUP 2

static uint64_t base_seed;

static void check_mem_alloc(tst_ctx_t *ctx, int cycle)
{
    static const size_t sizes[] = {1, 4095, 4096, 65537, (size_t)3 << 21, ((size_t)4 << 20) + 1};
    long page = sysconf(_SC_PAGESIZE);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        void *p = NULL;
        tst_set_case(ctx, "cycle %d: ccl_mem_alloc(%zu)", cycle, sizes[k]);
        TST_CCL(ctx, NULL, ccl_mem_alloc(&p, sizes[k]));
        if (!p)
            tst_fatal(ctx, "ccl_mem_alloc(%zu) succeeded with a NULL pointer", sizes[k]);
        if ((uintptr_t)p % (uintptr_t)page)
            tst_fail(ctx, "ccl_mem_alloc(%zu) = %p is not page-aligned", sizes[k], p);
        /* Every byte must be ours: write a pattern over all of it. */
        memset(p, (int)(k + 1), sizes[k]);
        unsigned char *c = p;
        if (c[0] != (unsigned char)(k + 1) || c[sizes[k] - 1] != (unsigned char)(k + 1))
            tst_fail(ctx, "ccl_mem_alloc(%zu) memory does not hold what was written", sizes[k]);
        TST_CCL(ctx, NULL, ccl_mem_free(p));
    }
}

static int rank_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    int cycles = (int)tst_env_long("CCL_TEST_CYCLES", 50);
    tst_res_t base;
    int have_base = 0;
    char shm_before[8192], msg[512], first[512];

    /* Rank 0 looks at /dev/shm before anyone has a communicator. */
    if (ctx->rank == 0)
        tst_list_ccl_shm(shm_before, sizeof(shm_before));
    tst_barrier(ctx);

    for (int cyc = 0; cyc < cycles; cyc++) {
        ccl_unique_id_t id = ctx->id;
        if (cyc > 0) {
            tst_set_case(ctx, "cycle %d: ccl_get_unique_id on rank 0", cyc);
            tst_share_id(ctx, &id);
        }
        ccl_comm_t comm = tst_comm_init_id(ctx, id);
        tst_case_t c = {
            .coll = (cyc & 1) ? TST_ALLGATHER : TST_ALLREDUCE,
            .dt = tst_dtypes[cyc % tst_num_dtypes],
            .op = (cyc & 1) ? TST_OP_COPY : tst_ops[(cyc / 2) % tst_num_ops],
            .count = 1021,
            .inplace = (cyc / 2) & 1,
            .misalign = 0,
            .seed = tst_case_seed(base_seed, (uint64_t)ctx->nranks, (uint64_t)cyc, 17, 17),
        };
        tst_run_case(ctx, comm, &c, 0);
        tst_set_case(ctx, "cycle %d: ccl_comm_destroy", cyc);
        TST_CCL(ctx, comm, ccl_comm_destroy(comm));
        check_mem_alloc(ctx, cyc);

        if (cyc == WARMUP - 1) {
            tst_barrier(ctx);
            /* Let anything that winds down on its own finish first. */
            usleep(300000);
            tst_res_take(&base);
            have_base = 1;
        }
    }

    tst_set_case(ctx, "leak checks after %d cycles", cycles);
    tst_barrier(ctx);
    if (have_base && tst_res_grew(&base, TST_HEAP_SLACK, msg, sizeof(msg)))
        tst_fail(ctx, "over %d cycles: %s", cycles - WARMUP, msg);
    int own = tst_own_ccl_shm_maps(first, sizeof(first));
    if (own > 0)
        tst_fail(ctx, "%d ccl shm mappings remain after every comm was destroyed, e.g. %s", own,
                 first);

    /* Everyone has destroyed everything: no new segment may remain. */
    tst_barrier(ctx);
    if (ctx->rank == 0) {
        int left = tst_shm_left_behind(shm_before, first, sizeof(first));
        if (left > 0)
            tst_fail(ctx, "%d /dev/shm entries left behind, e.g. %s", left, first);
    }
    return 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    tst_res_exact_heap(argv);
    static const int nranks[] = {3, 4};
    int failed = 0;
    base_seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    printf("test_lifecycle: seed %llu\n", (unsigned long long)base_seed);
    for (size_t k = 0; k < sizeof(nranks) / sizeof(nranks[0]); k++)
        failed += tst_run_ranks("lifecycle", nranks[k], 120, rank_body, NULL) != 0;
    printf("test_lifecycle: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
