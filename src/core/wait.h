/*
 * wait.h - bounded waiting: spin, then yield, then sleep on a futex.
 *
 * Every blocking wait in ccl goes through wait_change(). It returns as soon
 * as a 32-bit word differs from the value the caller saw, and otherwise keeps
 * asking a check callback (abort flag, peer liveness, deadline) so no wait is
 * unbounded. With more ranks than cores (8 ranks on 2 cores) spinning only
 * steals time from the rank we wait for, so the spin budget drops to zero.
 */
#ifndef CCL_CORE_WAIT_H
#define CCL_CORE_WAIT_H

#include "ccl.h"
#include <stdatomic.h>
#include <stdint.h>

/* Called while a wait sleeps (about every few ms): returns CCL_SUCCESS to keep
 * waiting, or the error that ends the wait (it sets the message). */
typedef ccl_result_t (*wait_check_fn)(void *arg, uint64_t waited_ns);

typedef struct {
    wait_check_fn check;
    void *arg;
    int spin;           /* microseconds to spin before yielding */
    int yield;          /* microseconds to yield before sleeping */
} wait_policy_t;

uint64_t wait_now_ns(void);

/* A thread that may be cancelled from another (a nonblocking init's: its
 * comm's abort flag) names the flag here; the bootstrap's socket waits and
 * the net setup then wake at least every WAIT_CANCEL_POLL_MS and give up
 * with CCL_ERR_ABORTED once it is up. NULL: not cancellable. */
#define WAIT_CANCEL_POLL_MS 20
void wait_set_cancel(const _Atomic int *flag);
/* CCL_ERR_ABORTED, with a message naming `what`, once this thread's flag
 * is up; else CCL_SUCCESS. */
ccl_result_t wait_check_cancel(const char *what);
/* The longest this thread should sleep in one poll(): `ms`, or less when
 * it is cancellable. */
int wait_poll_cap_ms(int ms);
/* Spin and yield budgets (us) for `nlocal` ranks sharing this host's cores. */
int wait_spin_budget(int nlocal);
int wait_yield_budget(int nlocal);
/* Waits until *word != old. *waiters is raised while sleeping so that
 * wait_wake() only pays for a syscall when someone sleeps. */
ccl_result_t wait_change(_Atomic uint32_t *word, uint32_t old, _Atomic uint32_t *waiters,
                         const wait_policy_t *policy);
/* Call after changing *word. */
void wait_wake(_Atomic uint32_t *word, _Atomic uint32_t *waiters);

static inline void wait_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
