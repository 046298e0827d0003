/*
 * bench_size.h - the size argument of the standalone benchmarks (memcpy-bench,
 * mpi-bench): a number with an optional K/M/G suffix, powers of 1024, as
 * nccl-tests reads -b/-e. Header-only because each benchmark is one file
 * compiled on its own (mpi-bench by mpicc, without the library).
 */
#ifndef CCL_PERF_BENCH_SIZE_H
#define CCL_PERF_BENCH_SIZE_H

#include <stddef.h>
#include <stdlib.h>

/* 0 on success; -1 for malformed text, or for 0 unless allow_zero. */
static inline int bench_parse_size(const char *s, size_t *out, int allow_zero)
{
    char *end;
    double v = strtod(s, &end);
    double unit = 1;
    if (end == s || v < 0 || (v == 0 && !allow_zero))
        return -1;
    switch (*end) {
    case 'k': case 'K': unit = 1024.0; end++; break;
    case 'm': case 'M': unit = 1024.0 * 1024; end++; break;
    case 'g': case 'G': unit = 1024.0 * 1024 * 1024; end++; break;
    case '\0': break;
    default: return -1;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return -1;
    *out = (size_t)(v * unit);
    return 0;
}

#endif
