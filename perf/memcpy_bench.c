/*
 * memcpy-bench: the single-thread memcpy ceiling that collective bandwidth is
 * judged against.
 *
 * A host collective moves every byte through at least one CPU copy, so one
 * core's memcpy bandwidth is the natural ceiling for a 2-rank allreduce or
 * allgather busbw on this machine; perf/compare.sh prints ccl's figure as a
 * percentage of it.
 *
 *   memcpy-bench                 4 MiB and 64 MiB, 21 copies each
 *   memcpy-bench -s 1M -s 1G -n 11 -H
 *
 * For each size: source and destination are allocated once, touched before
 * any timing (on this kind of VM a fresh 4 KiB page costs ~10 us, which would
 * otherwise be measured instead of the copy), one untimed copy warms caches
 * and TLBs, then N copies are timed one by one and the median is reported.
 * Output, one line per size, easy for awk:
 *
 *   memcpy <bytes> <GB/s>
 *
 * GB/s counts bytes copied (not bytes read plus bytes written), 1 GB = 1e9
 * bytes: the same convention as algbw/busbw, where a byte moved is counted
 * once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_size.h"
#include "bench_time.h"

#define MAX_SIZES 32

/* Compilers may turn malloc+memset(0) into calloc, which does not write fresh
 * mmap pages, and may drop a copy whose result is never read; calling through
 * volatile pointers keeps both the touch and every timed copy. */
static void *(*volatile touch_fn)(void *, int, size_t) = memset;
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static void *alloc(size_t bytes, int huge)
{
    void *p = NULL;
    /* 2 MiB alignment lets -H back the whole buffer with huge pages; without
     * -H it only changes where the buffer starts, not how it is backed. */
    if (posix_memalign(&p, 2u << 20, bytes) != 0) return NULL;
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);
    touch_fn(p, 1, bytes);
    return p;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-s size]... [-n copies] [-H]\n"
            "  -s  size to copy, K/M/G suffixes (1024-based); repeatable; default 4M and 64M\n"
            "  -n  timed copies per size, median reported (default 21)\n"
            "  -H  madvise(MADV_HUGEPAGE) on the buffers (transparent huge pages)\n",
            prog);
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES];
    int nsizes = 0, reps = 21, huge = 0, c;

    while ((c = getopt(argc, argv, "s:n:Hh")) != -1) {
        switch (c) {
        case 's':
            if (nsizes == MAX_SIZES || bench_parse_size(optarg, &sizes[nsizes], 0) != 0) {
                fprintf(stderr, "memcpy-bench: bad or too many -s sizes\n");
                return 2;
            }
            nsizes++;
            break;
        case 'n':
            reps = atoi(optarg);
            if (reps < 1) {
                fprintf(stderr, "memcpy-bench: -n must be positive\n");
                return 2;
            }
            break;
        case 'H': huge = 1; break;
        case 'h': usage(argv[0]); return 0;
        default: usage(argv[0]); return 2;
        }
    }
    if (optind < argc) {
        usage(argv[0]);
        return 2;
    }
    if (nsizes == 0) {
        sizes[nsizes++] = 4u << 20;
        sizes[nsizes++] = 64u << 20;
    }

    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) return 1;
    printf("# memcpy-bench: single thread, median of %d copies, pre-touched buffers%s\n", reps,
           huge ? ", MADV_HUGEPAGE" : "");
    printf("# GB/s = bytes copied / time / 1e9 (each byte counted once, not read + write)\n");

    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        char *src = alloc(n, huge);
        char *dst = alloc(n, huge);
        if (!src || !dst) {
            fprintf(stderr, "memcpy-bench: cannot allocate 2 x %zu bytes\n", n);
            return 1;
        }
        copy_fn(dst, src, n);
        for (int i = 0; i < reps; i++) {
            double t0 = bench_now();
            copy_fn(dst, src, n);
            t[i] = bench_now() - t0;
        }
        qsort(t, (size_t)reps, sizeof(double), bench_cmp_double);
        double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
        printf("memcpy %zu %.2f\n", n, (double)n / med / 1e9);
        free(src);
        free(dst);
    }
    free(t);
    return 0;
}
