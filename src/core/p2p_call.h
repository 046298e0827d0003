/*
 * p2p_call.h - collectives on device buffers over P2P (p2p_call.c).
 */
#ifndef CCL_CORE_P2P_CALL_H
#define CCL_CORE_P2P_CALL_H

#include "core/communicator.h"

/* Candidate: a collective the device executor runs whose
 * buffers are all device memory, on a CUDA stream or NULL, on a comm where
 * P2P was not found impossible. Cheap and local; the call then decides
 * (sets up P2P if needed) and *taken says whether it ran the call: if
 * not, the caller stages it. */
int p2p_call_candidate(const coll_args_t *a, ccl_stream_t stream);
ccl_result_t p2p_call_run(const coll_args_t *a, ccl_stream_t stream, int *taken);

#endif
