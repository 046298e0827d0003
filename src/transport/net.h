/*
 * net.h - the net transport: connections to ranks on other hosts.
 *
 * The executor sees every connection as a FIFO of slots (shm.h). For a rank
 * on another host the FIFO lives in this process's private memory and its
 * far end belongs to the comm's progress ("proxy") thread, which moves slots
 * over a net plugin (include/ccl_net.h, CCL_NET_PLUGIN, the built-in TCP
 * one by default, spoken to only through its ccl_net_v2_t): slots the executor posts on a send FIFO go out with
 * isend, and the proxy keeps irecvs posted into the free slots of each
 * receive FIFO, publishing them as their data arrives. The executor's code
 * is the same for both transports; only references (single copy) are
 * never sent over the network.
 *
 * A plugin failure, a peer that closes its sockets or dies, or net_poison
 * on this rank ends every connection: the proxy poisons the FIFOs (the
 * executor's waits end at once), remembers the message naming the peer,
 * tells each peer that cause in a notice, and closes its plugin connections
 * so that the peers fail too instead of waiting for their timeout.
 *
 * This header is what other layers use. Inside the transport: net_state.h
 * (the state the proxy and the setup share), net_setup.h (making the
 * connections), net_hello.h (their first message), net_bell.h (the
 * doorbell the proxies sleep on) and net_plugin.h (the plugin).
 */
#ifndef CCL_TRANSPORT_NET_H
#define CCL_TRANSPORT_NET_H

#include "bootstrap/bootstrap.h"
#include "ccl.h"
#include "transport/shm.h"

typedef struct net net_t;

/* Connects this rank to every rank q with remote[q] != 0 (one connection
 * each way) and starts the proxy thread. Fills send_conns[q] and
 * recv_conns[q], the executor's ends of the FIFOs (closed by the caller
 * with shm_conn_close after net_destroy). spin/yield: the proxy's wait
 * policy (wait.h). Every rank calls it (collective over bs). */
ccl_result_t net_create(bs_t *bs, int rank, int nranks, const int *remote, uint32_t nslots,
                        size_t slot_size, int spin, int yield, shm_conn_t *send_conns,
                        shm_conn_t *recv_conns, net_t **out);
/* Moves what can move on every connection now, on the calling thread, if
 * no other thread does (the proxy, or another caller): a waiting executor
 * calls it so that its messages need no hand-off to the proxy thread.
 * Returns how many things moved (0 when another thread holds them, after a
 * failure, or when the plugin moves data on threads of its own). net is a
 * net_t (void * for wait_policy_t.drive). */
int net_drive(void *net);
/* Around a run whose waits call net_drive: the executor's posts do not wake
 * the proxy, which stops watching the sockets until the end; then it takes
 * over whatever is still in flight. */
void net_drive_begin(net_t *net);
/* Whether net_drive can move anything: the plugin moves this net's data
 * only inside our calls (inline progress). Else a waiter need not drive. */
int net_drivable(const net_t *net);
/* push: first move what the call left in flight (after a successful call;
 * after a failed one a failing plugin call would replace its message). */
void net_drive_end(net_t *net, int push);
/* Whether a connection failed, and the message that says how. */
int net_failed(const net_t *net);
const char *net_error(const net_t *net);
/* Ends every connection now (abort, a failed collective): peers see them
 * close, after a notice that carries why (this rank's account of what
 * failed) into their error messages. */
void net_poison(net_t *net, const char *why);
/* CCL_FAULT (exec/fault.h): end every connection as a cut link would, or
 * stop the proxy thread for ms milliseconds (0: until net_destroy). */
void net_fault_drop(net_t *net);
void net_fault_stall(net_t *net, int64_t ms);
/* CCL_FAULT corrupt_wire: the next message piece this process sends over
 * the built-in socket transport has a byte changed on the wire. */
void net_fault_corrupt_wire(net_t *net);
/* Lets queued sends leave, says goodbye to each peer, stops the proxy and
 * closes the connections. NULL is allowed. */
void net_destroy(net_t *net);

#endif
