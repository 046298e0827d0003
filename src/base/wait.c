/*
 * wait.c - spin/yield/futex waiting shared by transports and host streams.
 *
 * The futex calls use the shared (not PRIVATE) form because the words live in
 * POSIX shared memory mapped by several processes.
 */
#include "base/clock.h"
#include "base/wait.h"
#include "base/err.h"
#include "base/param.h"

#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long one futex sleep lasts before the check callback runs again: short
 * enough that abort and dead peers are noticed promptly, long enough to cost
 * nothing measurable. */
#define WAIT_SLEEP_NS (5 * 1000 * 1000)

int wait_fence_is_light;
static pid_t wait_setup_pid; /* the process that registered (a forked child registers again) */
static pthread_mutex_t wait_setup_lock = PTHREAD_MUTEX_INITIALIZER;

static long wait_membarrier(int cmd)
{
    return syscall(SYS_membarrier, cmd, 0, 0);
}

void wait_setup(void)
{
    pthread_mutex_lock(&wait_setup_lock);
    pid_t me = getpid();
    if (wait_setup_pid != me) {
        wait_setup_pid = me;
        long cmds = param_int(PARAM_MEMBARRIER) ? wait_membarrier(MEMBARRIER_CMD_QUERY) : -1;
        long need = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED |
                    MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
        int ok = cmds > 0 && (cmds & need) == need &&
                 wait_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0 &&
                 wait_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
        /* Registered before the flag is raised: from then on our light
         * fences are covered by any sleeper's membarrier. */
        __atomic_store_n(&wait_fence_is_light, ok, __ATOMIC_SEQ_CST);
    }
    pthread_mutex_unlock(&wait_setup_lock);
}

int wait_asymmetric(void)
{
    return __atomic_load_n(&wait_fence_is_light, __ATOMIC_RELAXED);
}

/* GLOBAL_EXPEDITED reaches the threads of every registered process, ours
 * included; a publisher whose process did not register uses full fences.
 * Called by a sleeper even when this process did not register: a peer's
 * may have. If the call fails, the sleep's timeout (WAIT_SLEEP_NS) still
 * bounds a missed wake-up. */
void wait_fence_heavy(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (wait_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0)
        atomic_thread_fence(memory_order_seq_cst);
}

static __thread const _Atomic int *wait_cancel_flag;

void wait_set_cancel(const _Atomic int *flag)
{
    wait_cancel_flag = flag;
}

ccl_result_t wait_check_cancel(const char *what)
{
    if (wait_cancel_flag && atomic_load(wait_cancel_flag))
        return err_set(CCL_ERR_ABORTED, "aborted (ccl_comm_abort) while %s", what);
    return CCL_SUCCESS;
}

int wait_poll_cap_ms(int ms)
{
    return wait_cancel_flag && ms > WAIT_CANCEL_POLL_MS ? WAIT_CANCEL_POLL_MS : ms;
}

int wait_spin_budget(int crowded)
{
    int64_t forced = param_int(PARAM_SPIN);
    if (forced >= 0)
        return (int)forced;
    /* Long enough to catch a peer that is running (a slot copy takes a few
     * us), short enough that a preempted peer costs little before we yield. */
    return crowded ? 0 : 20;
}

int wait_yield_budget(int crowded)
{
    int64_t forced = param_int(PARAM_YIELD);
    if (forced >= 0)
        return (int)forced;
    /* With a core per rank, yielding is a cheap way to wait that still lets
     * unrelated work run. With more ranks than cores, yield only briefly:
     * CFS may hand the core straight back to a yielding task, so long yield
     * phases burn slices the awaited rank needs; but sleeping at once lets
     * the vCPU halt, and waking a halted vCPU costs tens of microseconds on
     * a VM. 50 us measured best for 4 and 8 ranks on 2 cores (ccl-perf). */
    return crowded ? 50 : 2000;
}

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)uaddr, op, val, ts, NULL, 0);
}

ccl_result_t wait_change(_Atomic uint32_t *word, uint32_t old, _Atomic uint32_t *waiters,
                         const wait_policy_t *policy)
{
    uint64_t start = 0;
    if (policy->spin > 0) {
        start = clock_now_ns();
        uint64_t spin_ns = (uint64_t)policy->spin * 1000;
        for (;;) {
            for (int i = 0; i < 32; i++) {
                if (atomic_load_explicit(word, memory_order_acquire) != old)
                    return CCL_SUCCESS;
                wait_cpu_relax();
            }
            if (policy->drive)
                policy->drive(policy->drive_arg);
            if (clock_now_ns() - start >= spin_ns)
                break;
        }
    } else {
        start = clock_now_ns();
    }
    uint64_t last_check = start;
    for (;;) {
        uint64_t now = clock_now_ns();
        /* A waiter that drives keeps driving: asleep, it would leave its
         * messages to nobody (the proxy stops watching while callers drive). */
        if (policy->drive || now - start < (uint64_t)policy->yield * 1000) {
            for (int i = 0; i < 64; i++) {
                if (atomic_load_explicit(word, memory_order_acquire) != old)
                    return CCL_SUCCESS;
                if (policy->drive && policy->drive(policy->drive_arg) > 0)
                    continue;
                sched_yield();
            }
        } else {
            atomic_fetch_add(waiters, 1);
            /* Re-check after announcing ourselves: the poster stores the word
             * and then reads waiters with a fence between (wait_fence_light,
             * which our wait_fence_heavy completes), so one of us sees the
             * other and no wake-up is lost. */
            wait_fence_heavy();
            if (atomic_load(word) == old) {
                struct timespec ts = {0, WAIT_SLEEP_NS};
                futex(word, FUTEX_WAIT, old, &ts);
            }
            atomic_fetch_sub(waiters, 1);
            if (atomic_load_explicit(word, memory_order_acquire) != old)
                return CCL_SUCCESS;
        }
        now = clock_now_ns();
        if (policy->check && now - last_check >= WAIT_SLEEP_NS) {
            last_check = now;
            ccl_result_t res = policy->check(policy->arg, now - start);
            /* What we waited for may have come between our last look and
             * the failure the check found: a peer publishes its last data
             * and then says goodbye, which poisons the connection. The data
             * wins; a failure that is still there stops the next wait. */
            if (res != CCL_SUCCESS && atomic_load_explicit(word, memory_order_acquire) != old)
                return CCL_SUCCESS;
            if (res != CCL_SUCCESS)
                return res;
        }
    }
}

void wait_wake(_Atomic uint32_t *word, _Atomic uint32_t *waiters)
{
    wait_fence_light();
    if (atomic_load_explicit(waiters, memory_order_relaxed))
        futex(word, FUTEX_WAKE, INT_MAX, NULL);
}
