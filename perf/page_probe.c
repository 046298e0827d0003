/*
 * page-probe: what a rank pays per page of its own buffers after single-copy
 * collectives, the probe that found why first rows of a size sweep were slow
 * on the project's VMs (perf/RESULTS.md, "2-rank allreduce at 16 MiB ...
 * Found").
 *
 * Two forked ranks, pinned to CPUs 0 and 1, allocate two 64 MiB buffers with
 * ccl_mem_alloc, run W allreduces of the whole buffer (single copy: peers
 * map each other's buffers), then each rank reads one byte per page of its
 * own send buffer, half by half, timing every page, and finally times C
 * allreduces of S MiB that rotate over the buffers. A page that costs
 * microseconds to read without a page fault the kernel counts (compare
 * `perf stat -e page-faults`) is paid below the guest kernel.
 *
 *   page-probe [-w W] [-s S] [-c C]     defaults: -w 5 -s 4 -c 20
 *
 * CCL_* variables apply as usual: CCL_SINGLE_COPY_THRESHOLD=1G runs the
 * same calls without single copy.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_time.h"
#include "ccl.h"

#define BUF_BYTES ((size_t)64 << 20)
#define PAGE 4096
#define SLOW_PAGE_S 2e-6

static void die(int rank, const char *what, ccl_result_t res)
{
    fprintf(stderr, "page-probe rank %d: %s failed: %s\n", rank, what, ccl_get_error_string(res));
    _exit(1);
}

/* Reads one byte per page of [p, p + len): total seconds, the slowest
 * page, and how many pages took over SLOW_PAGE_S. */
static void read_pages(const char *p, size_t len, double *total, double *worst, int *slow)
{
    volatile char sink = 0;
    *worst = 0;
    *slow = 0;
    double t0 = bench_now();
    for (size_t o = 0; o < len; o += PAGE) {
        double a = bench_now();
        sink ^= ((volatile const char *)p)[o];
        double d = bench_now() - a;
        if (d > *worst)
            *worst = d;
        *slow += d > SLOW_PAGE_S;
    }
    *total = bench_now() - t0;
    (void)sink;
}

static void rank_main(int rank, const ccl_unique_id_t *id, int warm, size_t bytes, int calls)
{
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(rank, &cpus);
    sched_setaffinity(0, sizeof cpus, &cpus); /* best effort: a 1-CPU machine still runs */
    ccl_comm_t comm;
    ccl_result_t res = ccl_comm_init_rank(&comm, 2, *id, rank);
    if (res != CCL_SUCCESS)
        die(rank, "ccl_comm_init_rank", res);
    void *send, *recv;
    if ((res = ccl_mem_alloc(&send, BUF_BYTES)) != CCL_SUCCESS || (res = ccl_mem_alloc(&recv, BUF_BYTES)) != CCL_SUCCESS)
        die(rank, "ccl_mem_alloc", res);
    for (int i = 0; i < warm; i++)
        if ((res = ccl_allreduce(send, recv, BUF_BYTES / 4, CCL_FLOAT32, CCL_SUM, comm, NULL)) != CCL_SUCCESS)
            die(rank, "ccl_allreduce (64 MiB)", res);
    char line[512];
    int n = 0;
    for (int h = 0; h < 2; h++) {
        double total, worst;
        int slow;
        read_pages((const char *)send + h * BUF_BYTES / 2, BUF_BYTES / 2, &total, &worst, &slow);
        n += snprintf(line + n, sizeof line - (size_t)n,
                      "rank %d, own send buffer, %s half: %8.2f ms, slowest page %7.1f us, %5d of %zu pages over 2 us\n",
                      rank, h ? "upper" : "lower", total * 1e3, worst * 1e6, slow, BUF_BYTES / 2 / PAGE);
    }
    double sum = 0, max = 0;
    for (int i = 0; i < calls; i++) {
        size_t off = (size_t)i * bytes % BUF_BYTES;
        double t0 = bench_now();
        if ((res = ccl_allreduce((char *)send + off, (char *)recv + off, bytes / 4, CCL_FLOAT32, CCL_SUM, comm,
                                 NULL)) != CCL_SUCCESS)
            die(rank, "ccl_allreduce (rotating)", res);
        double d = bench_now() - t0;
        sum += d;
        max = d > max ? d : max;
    }
    snprintf(line + n, sizeof line - (size_t)n, "rank %d, %d allreduces of %zu MiB over the buffers: mean %.2f ms, slowest %.2f ms\n",
             rank, calls, bytes >> 20, sum / calls * 1e3, max * 1e3);
    fputs(line, stdout);
    fflush(stdout);
    ccl_mem_free(send);
    ccl_mem_free(recv);
    ccl_comm_destroy(comm);
    _exit(0);
}

int main(int argc, char **argv)
{
    int warm = 5, mib = 4, calls = 20, c;
    while ((c = getopt(argc, argv, "w:s:c:h")) != -1) {
        switch (c) {
        case 'w': warm = atoi(optarg); break;
        case 's': mib = atoi(optarg); break;
        case 'c': calls = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-w warm-up 64 MiB allreduces] [-s MiB per rotating call] [-c calls]\n", argv[0]);
            return c == 'h' ? 0 : 2;
        }
    }
    if (warm < 0 || mib < 1 || mib > 64 || calls < 1) {
        fprintf(stderr, "page-probe: -w >= 0, 1 <= -s <= 64, -c >= 1\n");
        return 2;
    }
    /* Fork first, then make the id: the id starts a bootstrap thread. */
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[r] == 0) {
            ccl_unique_id_t id;
            close(fds[1]);
            if (read(fds[0], &id, sizeof id) != (ssize_t)sizeof id)
                _exit(1);
            rank_main(r, &id, warm, (size_t)mib << 20, calls);
        }
    }
    close(fds[0]);
    ccl_unique_id_t id;
    ccl_result_t res = ccl_get_unique_id(&id);
    if (res != CCL_SUCCESS) {
        fprintf(stderr, "page-probe: ccl_get_unique_id failed: %s\n", ccl_get_error_string(res));
        return 1;
    }
    for (int r = 0; r < 2; r++)
        if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) {
            perror("write");
            return 1;
        }
    close(fds[1]);
    int rc = 0;
    for (int r = 0; r < 2; r++) {
        int st;
        if (waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    }
    return rc;
}
