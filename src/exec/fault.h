/*
 * fault.h - fault injection for tests (CCL_FAULT), compiled in always and
 * inert unless the variable is set.
 *
 * Tests of failure handling need failures on cue: a rank that dies in the
 * middle of a collective, a slow rank, a dropped connection, a corrupted
 * byte, a progress thread that stops. CCL_FAULT lists them, ';'-separated,
 * each an action and ':'-separated fields:
 *
 *   kill:rank=R:op=N[:ms=M]    SIGKILL rank R M ms after it starts its N-th call
 *   kill:rank=R:op=N:slice=K   ... or when that call moves its K-th slice (always
 *                              inside the call, however fast the machine)
 *   fail:rank=R:op=N:slice=K   rank R's N-th call fails there (CCL_ERR_INTERNAL),
 *                              its process alive: a failure a peer sees only
 *                              through what the failing rank does about it
 *   delay:rank=R[:op=N]:ms=M   sleep M ms before call N (every call if op=0)
 *   drop:rank=R:op=N           at call N, rank R drops its network connections
 *   corrupt:rank=R:op=N        flip one byte of rank R's result of call N
 *   corrupt_wire:rank=R:op=N   in call N, the next net message piece rank R
 *                              sends goes out with one byte changed after its
 *                              checksum was taken (built-in socket transport);
 *                              without a net, the next data slot it posts to a
 *                              checksummed shm FIFO (CCL_CHECKSUM=2)
 *   stall:rank=R:op=N[:ms=M]   rank R's net progress stops for M ms (the proxy and callers that drive it)
 *                              (0: until the communicator ends)
 *
 * Calls are counted per communicator, from 1, collectives and point-to-
 * point alike (the number in error messages: "allreduce #N"). rank=-1 (the
 * default) matches every rank. Each fault fires once per process except
 * delay with op=0.
 */
#ifndef CCL_EXEC_FAULT_H
#define CCL_EXEC_FAULT_H

#include "ccl.h"
#include "transport/net.h"

#include <stdint.h>

/* Parses CCL_FAULT once per process; an invalid spec fails comm init. */
ccl_result_t fault_init(void);
/* Whether any fault is configured (the hooks below are no-ops otherwise). */
extern int fault_armed;
/* `comm` is the communicator, as an identity only (a slice fault fires in
 * the call it was armed for, not in another comm's); rank is its rank in
 * it, net its connections to other hosts (NULL on one host). */
/* At the start of call `seq` on comm: kill, delay, drop, stall. */
void fault_before_call(const void *comm, int rank, net_t *net, uint64_t seq);
/* Each slice a host call moves (the host executor and the pair); fires kill:slice=K, and
 * returns fail:slice=K's error (message set). */
ccl_result_t fault_on_slice(const void *comm, int rank);
/* After a run of calls on comm (one call, or a group's): a kill or fail
 * armed at a slice that did not come is dropped, so that it cannot fire
 * in a later call. */
void fault_run_done(const void *comm, int rank);
/* After call `seq` succeeded: corrupt its result (recvbuf, bytes). */
void fault_after_call(int rank, uint64_t seq, void *recvbuf, size_t bytes);

#endif
