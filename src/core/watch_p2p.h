/*
 * watch_p2p.h - a thread per comm with P2P work queued on the GPU that
 * notices failed peers while no host thread waits.
 */
#ifndef CCL_CORE_WATCH_P2P_H
#define CCL_CORE_WATCH_P2P_H

#include "core/communicator.h"

/* watch_p2p.c: the thread that breaks the comm and lets its streams go
 * when a peer fails while the GPU has P2P work queued. start: once the
 * P2P setup has succeeded here; stop (joins; idempotent): before the P2P
 * connections close. */
ccl_result_t watch_p2p_start(struct ccl_comm *comm);
void watch_p2p_stop(struct ccl_comm *comm);

#endif
