/*
 * net_bell.h - the process-wide doorbell of the net proxies.
 *
 * A proxy thread with nothing to move sleeps until something may have
 * changed: the executor posted or freed a net slot (it rings through the
 * callback net_create gives each FIFO), a plugin request may have completed
 * (the activity callback that v2 net plugins get, ccl_net_callbacks_t), or
 * a destroy, abort or fault began. All of them ring this one bell, so it is
 * its own module: the plugin loader hands it to plugins without depending
 * on the proxy, and the proxy sleeps on it without knowing who rings.
 *
 * A proxy reads the bell (net_bell_seen), looks for work, and sleeps only
 * while the bell still reads the same: on the futex (net_bell_wait), or, for
 * plugins whose comms move data only inside our calls, in poll() on their
 * descriptors and an eventfd that every ring also writes (net_bell_poll).
 */
#ifndef CCL_TRANSPORT_NET_BELL_H
#define CCL_TRANSPORT_NET_BELL_H

#include "base/wait.h"

#include <stdint.h>

/* Rings the bell: wakes every proxy asleep on it. Any thread may ring. */
void net_activity_bump(void);
/* Rings the bell unless callers drive their nets (net_bell_hush counts
 * them, +1 and -1): what the FIFOs' doorbell and the plugins' activity
 * callback ring. */
void net_bell_ring_soft(void);
void net_bell_hush(int delta);
/* How often it has rung so far (tests check that a plugin rings it). */
uint32_t net_activity_count(void);

/* The bell's count as a sleeper must see it before it looks for work (a
 * sequentially consistent read, paired with the ringers' increments). */
uint32_t net_bell_seen(void);
/* Sleeps until the bell differs from seen, asking policy's check while it
 * waits (wait_change). */
ccl_result_t net_bell_wait(uint32_t seen, const wait_policy_t *policy);
/* The eventfd that rings write while someone sleeps in net_bell_poll,
 * opened on the first call and kept for the process; -1 when it cannot be
 * opened. */
int net_bell_fd(void);
/* Sleeps in poll() on pfds[0..n) for at most ms milliseconds, unless the
 * bell already differs from seen. pfds[0] must be {net_bell_fd(), POLLIN};
 * the bell's eventfd is drained when it woke us. */
struct pollfd;
void net_bell_poll(struct pollfd *pfds, int n, uint32_t seen, int ms);

#endif
