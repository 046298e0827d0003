/*
 * mock_wait.c - how the mock's stream workers and host threads wait for a
 * 32-bit word: a stream's count of finished operations, an event's
 * completion number, or a flag in host memory that another thread or
 * process writes (cuStreamWaitValue32, the hold kernel).
 *
 * Words the mock itself advances are futex words: the writer wakes the
 * sleepers (FUTEX_WAKE without the private flag, so a word in shared
 * memory wakes sleepers of other processes too). Words the user's code
 * writes with plain stores wake nobody, so the sleep is bounded and the
 * waiter polls, as a GPU polling host memory does: a few yields first (a
 * flag is often written soon), then sleeps growing to MOCK_POLL_MAX_NS, so
 * many waiting streams on a 2-core machine cost little CPU.
 */
#include "mock_cuda.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MOCK_POLL_YIELDS 16
#define MOCK_POLL_MIN_NS 20000L
#define MOCK_POLL_MAX_NS 200000L

int mock_cond_met(uint32_t cur, uint32_t value, unsigned mode)
{
    switch (mode) {
    case CU_STREAM_WAIT_VALUE_GEQ: return (int32_t)(cur - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == value;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & value) != 0;
    case CU_STREAM_WAIT_VALUE_NOR: return ~(cur | value) != 0;
    default: return 1;
    }
}

void mock_wait(const volatile uint32_t *word, uint32_t value, unsigned mode)
{
    long sleep_ns = MOCK_POLL_MIN_NS;
    for (int i = 0;; i++) {
        uint32_t cur = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (mock_cond_met(cur, value, mode))
            return;
        if (i < MOCK_POLL_YIELDS) {
            sched_yield();
            continue;
        }
        struct timespec ts = {0, sleep_ns};
        /* Returns at once when *word is no longer cur, else at a wake or
         * at the timeout; all three just look again. */
        syscall(SYS_futex, word, FUTEX_WAIT, cur, &ts, NULL, 0);
        sleep_ns = sleep_ns * 2 > MOCK_POLL_MAX_NS ? MOCK_POLL_MAX_NS : sleep_ns * 2;
    }
}

void mock_wake(volatile uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

double mock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
