/*
 * wait.h - bounded waiting: spin, then yield, then sleep on a futex.
 *
 * Every blocking wait in ccl goes through wait_change(). It returns as soon
 * as a 32-bit word differs from the value the caller saw, and otherwise keeps
 * asking a check callback (abort flag, peer liveness, deadline) so no wait is
 * unbounded. With more ranks than cores (8 ranks on 2 cores) spinning only
 * steals time from the rank we wait for, so the spin budget drops to zero.
 */
#ifndef CCL_BASE_WAIT_H
#define CCL_BASE_WAIT_H

#include "ccl.h"
#include <stdatomic.h>
#include <stdint.h>

/* Fences between a publisher and a sleeper. A rank that stores a word a
 * peer waits on and then reads whether the peer sleeps needs a full fence
 * between the two (else the peer may miss the word and we the sleeper);
 * that fence also waits for the store's cache line to leave the peer's
 * core, ~0.1 us per call on these VMs, the whole gap of a streamed 8-byte
 * broadcast to Open MPI (which never sleeps). With membarrier() the
 * publisher needs only a compiler barrier: a sleeper, which is slow
 * anyway, makes every running thread of every registered process execute
 * the fence (wait_fence_heavy). wait_setup registers this process; until
 * it has, and with CCL_MEMBARRIER=0 or where the kernel lacks it, the
 * light side is a full fence. */
void wait_setup(void);
int wait_asymmetric(void);
void wait_fence_heavy(void);
extern int wait_fence_is_light;
static inline void wait_fence_light(void)
{
    if (__builtin_expect(__atomic_load_n(&wait_fence_is_light, __ATOMIC_RELAXED), 1))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* Called while a wait sleeps (about every few ms): returns CCL_SUCCESS to keep
 * waiting, or the error that ends the wait (it sets the message). */
typedef ccl_result_t (*wait_check_fn)(void *arg, uint64_t waited_ns);

/* Called between looks while a wait spins or yields: moves what the word
 * depends on, when the waiter can do that itself (the net transport's
 * messages, driven by the calling thread instead of handed to the proxy
 * thread). Returns how many things moved; > 0 looks at the word at once. */
typedef int (*wait_drive_fn)(void *arg);

typedef struct {
    wait_check_fn check;
    void *arg;
    int spin;           /* microseconds to spin before yielding */
    int yield;          /* microseconds to yield before sleeping */
    wait_drive_fn drive; /* optional */
    void *drive_arg;
} wait_policy_t;

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
/* Spin and yield budgets (us), `crowded` when ranks outnumber the CPUs
 * they compete for (topo_cores_crowded). */
int wait_spin_budget(int crowded);
int wait_yield_budget(int crowded);
/* Waits until *word != old. *waiters is raised while sleeping so that
 * wait_wake() only pays for a syscall when someone sleeps. Keep *waiters
 * off the line of *word: the waker reads it right after storing *word, and
 * on the same line that read waits for the store's line to come back from
 * the peer that last read it. */
ccl_result_t wait_change(_Atomic uint32_t *word, uint32_t old, _Atomic uint32_t *waiters,
                         const wait_policy_t *policy);
/* Call after changing *word. */
void wait_wake(_Atomic uint32_t *word, _Atomic uint32_t *waiters);

/* Asks for a shared line in the exclusive state ahead of a store to it.
 * A store to a line that a peer's core last read waits in the store
 * buffer for that core to give the line up (~0.1 us here); a call makes
 * enough other stores (calls, spills) meanwhile to fill the buffer, and
 * the core stalls. Fetched early, the line is ours when the store comes.
 * prefetchw is a no-op on x86 cores without it. */
static inline void wait_prefetch_store(const void *line)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("prefetchw %0" ::"m"(*(const char *)line));
#else
    __builtin_prefetch(line, 1, 3);
#endif
}

static inline void wait_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
