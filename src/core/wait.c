/*
 * wait.c - spin/yield/futex waiting shared by transports and host streams.
 *
 * The futex calls use the shared (not PRIVATE) form because the words live in
 * POSIX shared memory mapped by several processes.
 */
#include "core/wait.h"
#include "core/param.h"

#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long one futex sleep lasts before the check callback runs again: short
 * enough that abort and dead peers are noticed promptly, long enough to cost
 * nothing measurable. */
#define WAIT_SLEEP_NS (5 * 1000 * 1000)
/* Yields before sleeping: a yield hands the core to a co-scheduled rank,
 * which is usually the one we wait for, and costs far less than a futex
 * round trip. Bounded so an idle rank stops burning a core. */
#define WAIT_YIELD_NS (2 * 1000 * 1000)

uint64_t wait_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int wait_spin_budget(int nlocal)
{
    int64_t forced = param_int(PARAM_SPIN);
    if (forced >= 0)
        return (int)forced;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    return (ncpu > 0 && nlocal <= ncpu) ? 20000 : 0;
}

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)uaddr, op, val, ts, NULL, 0);
}

ccl_result_t wait_change(_Atomic uint32_t *word, uint32_t old, _Atomic uint32_t *waiters,
                         const wait_policy_t *policy)
{
    for (int i = 0; i < policy->spin; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != old)
            return CCL_SUCCESS;
        wait_cpu_relax();
    }
    uint64_t start = wait_now_ns();
    uint64_t last_check = start;
    for (;;) {
        uint64_t now = wait_now_ns();
        if (now - start < WAIT_YIELD_NS) {
            for (int i = 0; i < 64; i++) {
                if (atomic_load_explicit(word, memory_order_acquire) != old)
                    return CCL_SUCCESS;
                sched_yield();
            }
        } else {
            atomic_fetch_add(waiters, 1);
            /* Re-check after announcing ourselves: the poster stores the word
             * and then reads waiters (both seq_cst), so one of us sees the
             * other and no wake-up is lost. */
            if (atomic_load(word) == old) {
                struct timespec ts = {0, WAIT_SLEEP_NS};
                futex(word, FUTEX_WAIT, old, &ts);
            }
            atomic_fetch_sub(waiters, 1);
            if (atomic_load_explicit(word, memory_order_acquire) != old)
                return CCL_SUCCESS;
        }
        now = wait_now_ns();
        if (policy->check && now - last_check >= WAIT_SLEEP_NS) {
            last_check = now;
            ccl_result_t res = policy->check(policy->arg, now - start);
            if (res != CCL_SUCCESS)
                return res;
        }
    }
}

void wait_wake(_Atomic uint32_t *word, _Atomic uint32_t *waiters)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(waiters, memory_order_relaxed))
        futex(word, FUTEX_WAKE, INT_MAX, NULL);
}
