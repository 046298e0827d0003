/*
 * net_bell.c - the doorbell the net proxies sleep on (see net_bell.h).
 *
 * A ring must never be lost between a proxy's last look for work and its
 * sleep, and must cost the ringer (the executor, on every net slot) next to
 * nothing while no proxy sleeps. So it is a futex word with a count of
 * sleepers (wait.h), and the eventfd for proxies asleep in poll() is
 * written only while one of them has counted itself in: the same handshake
 * as the futex, in which either the ringer sees the sleeper or the sleeper
 * sees the ring.
 */
#include "transport/net_bell.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <unistd.h>

static _Atomic uint32_t net_bell, net_bell_waiters;
/* Proxies that sleep in poll() on their sockets (CCL_SOCKET_NTHREADS=0)
 * hear the doorbell through this eventfd, written only while one sleeps.
 * Like the doorbell it is one per process: opened with the first such
 * proxy and kept, since any executor thread may ring it at any time. */
static int net_bell_efd = -1;
static _Atomic uint32_t net_bell_pollers;
static pthread_once_t net_bell_efd_once = PTHREAD_ONCE_INIT;

static void net_bell_efd_open(void) { net_bell_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

uint32_t net_activity_count(void) { return atomic_load_explicit(&net_bell, memory_order_relaxed); }

void net_activity_bump(void)
{
    atomic_fetch_add_explicit(&net_bell, 1, memory_order_seq_cst);
    wait_wake(&net_bell, &net_bell_waiters);
    if (atomic_load_explicit(&net_bell_pollers, memory_order_seq_cst)) {
        uint64_t one = 1;
        if (write(net_bell_efd, &one, sizeof one) < 0) {
            /* EAGAIN: the counter is saturated, the sleeper wakes anyway. */
        }
    }
}

/* Callers of this process that move their nets' messages themselves
 * (net_drive): while any does, the executor's posts and the plugins'
 * completions need not wake a proxy (each ring is a syscall and a wake-up
 * on these 2 cores). One count for the process, as neither ringer says
 * which net it rings for: right because whether a net moves data inline
 * depends on the plugin and its settings, the same for every communicator
 * of a process. */
static _Atomic int net_bell_hushed;

void net_bell_hush(int delta)
{
    atomic_fetch_add(&net_bell_hushed, delta);
}

void net_bell_ring_soft(void)
{
    if (atomic_load_explicit(&net_bell_hushed, memory_order_relaxed) == 0)
        net_activity_bump();
}

uint32_t net_bell_seen(void) { return atomic_load(&net_bell); }

ccl_result_t net_bell_wait(uint32_t seen, const wait_policy_t *policy)
{
    return wait_change(&net_bell, seen, &net_bell_waiters, policy);
}

int net_bell_fd(void)
{
    pthread_once(&net_bell_efd_once, net_bell_efd_open);
    return net_bell_efd;
}

/* We count ourselves in, then look at the bell; a ringer bumps the bell,
 * then looks for sleepers: one of us sees the other. */
void net_bell_poll(struct pollfd *pfds, int n, uint32_t seen, int ms)
{
    atomic_fetch_add_explicit(&net_bell_pollers, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&net_bell, memory_order_seq_cst) == seen)
        poll(pfds, (nfds_t)n, ms);
    atomic_fetch_sub_explicit(&net_bell_pollers, 1, memory_order_seq_cst);
    uint64_t drain;
    if ((pfds[0].revents & POLLIN) && read(net_bell_efd, &drain, sizeof drain) < 0) {
        /* EAGAIN: another proxy drained it; each re-reads the bell anyway. */
    }
}
