/*
 * test_lifecycle.c - communicator and memory life cycle across forked ranks:
 * 50 cycles of get-unique-id / init / collective / destroy (the first cycle
 * uses the parent's id, later ones an id made by rank 0, as a trainer that
 * rebuilds its communicator would) while watching for leaks: open file
 * descriptors and threads must not grow, no /dev/shm/ccl* segment may be left
 * behind or stay mapped, and the mapping count must be stable. Each cycle
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

/* Cycles that may allocate process-lifetime state (a logger, a cached
 * topology) before the counts are taken as the baseline. */
#define WARMUP 2

static uint64_t base_seed;

static int count_map_lines(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0, ch;
    if (!f)
        return -1;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

static int running_under_asan(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 1;
#else
    return 0;
#endif
#else
    return 0;
#endif
}

/* Our own mappings of ccl shm segments (should be none when no comm lives). */
static int count_own_ccl_shm_maps(char *first, size_t len)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int n = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        char *p = strstr(line, "/dev/shm/");
        if (p && strcasestr(p, "ccl")) {
            if (n++ == 0)
                snprintf(first, len, "%s", p);
        }
    }
    fclose(f);
    return n;
}

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

/* Counts can lag a destroy by a moment (a bootstrap thread exiting on its
 * own), so wait briefly for them to come back down before judging. */
static void settle(int base_fds, int base_threads)
{
    double until = tst_now() + 3.0;
    while (tst_now() < until &&
           (tst_count_fds() > base_fds || tst_count_threads() > base_threads))
        usleep(20000);
}

static int rank_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    int cycles = (int)tst_env_long("CCL_TEST_CYCLES", 50);
    int base_fds = -1, base_threads = -1, base_maps = -1;
    char shm_before[8192], shm_after[8192];

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
            base_fds = tst_count_fds();
            base_threads = tst_count_threads();
            base_maps = count_map_lines();
        }
    }

    tst_set_case(ctx, "leak checks after %d cycles", cycles);
    tst_barrier(ctx);
    if (base_fds >= 0) {
        settle(base_fds, base_threads);
        int fds = tst_count_fds(), threads = tst_count_threads(), maps = count_map_lines();
        if (fds > base_fds)
            tst_fail(ctx, "open file descriptors grew from %d to %d over %d cycles", base_fds,
                     fds, cycles - WARMUP);
        if (threads > base_threads)
            tst_fail(ctx, "threads grew from %d to %d over %d cycles", base_threads, threads,
                     cycles - WARMUP);
        /* A few lines of slack: malloc may split or merge its own arenas.
         * AddressSanitizer's allocator maps fresh regions as it goes, so
         * the count means nothing there (its leak checker covers memory). */
        if (!running_under_asan() && maps > base_maps + 4)
            tst_fail(ctx, "memory mappings grew from %d to %d over %d cycles", base_maps, maps,
                     cycles - WARMUP);
    }
    char first[512] = "";
    int own = count_own_ccl_shm_maps(first, sizeof(first));
    if (own > 0)
        tst_fail(ctx, "%d ccl shm mappings remain after every comm was destroyed, e.g. %s", own,
                 first);

    /* Everyone has destroyed everything: no new segment may remain. */
    tst_barrier(ctx);
    if (ctx->rank == 0) {
        tst_list_ccl_shm(shm_after, sizeof(shm_after));
        int leaked = 0;
        char *save = NULL;
        for (char *name = strtok_r(shm_after, "\n", &save); name;
             name = strtok_r(NULL, "\n", &save)) {
            char needle[300];
            snprintf(needle, sizeof(needle), "%s\n", name);
            if (strstr(shm_before, needle))
                continue;
            /* A segment some other process still uses belongs to a test
             * running concurrently on this machine, not to us. */
            if (tst_shm_is_mapped(name))
                continue;
            if (leaked++ < 5)
                tst_fail(ctx, "/dev/shm/%s was left behind", name);
        }
        if (leaked > 5)
            tst_fail(ctx, "%d /dev/shm entries left behind in all", leaked);
    }
    return 0;
}

int main(void)
{
    static const int nranks[] = {3, 4};
    int failed = 0;
    base_seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    printf("test_lifecycle: seed %llu\n", (unsigned long long)base_seed);
    for (size_t k = 0; k < sizeof(nranks) / sizeof(nranks[0]); k++)
        failed += tst_run_ranks("lifecycle", nranks[k], 120, rank_body, NULL) != 0;
    printf("test_lifecycle: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
