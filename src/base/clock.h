/*
 * clock.h - the clocks every layer times things with.
 *
 * Two clocks, for two needs: clock_now_ns() is monotonic and exact, for
 * deadlines and durations; clock_coarse_tick() is a few instructions, for
 * "has anything changed since I last looked" checks on a call's fast path,
 * where its only promise is that one tick is under a millisecond.
 */
#ifndef CCL_BASE_CLOCK_H
#define CCL_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_coarse_tick(void)
{
#if defined(__x86_64__) || defined(__i386__)
    /* 2^20 TSC cycles: under a millisecond at any TSC rate above 1.05 GHz,
     * for a few instructions where the coarse clock cost ~50. */
    return __builtin_ia32_rdtsc() >> 20;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

#endif
