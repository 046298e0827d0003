/*
 * nccl_group.h - NCCL's group calls over ccl's, plus what NCCL allows in a
 * group that ccl's groups do not hold: communicator inits.
 *
 * NCCL lets one thread create several ranks by calling ncclCommInitRank
 * for each between ncclGroupStart and ncclGroupEnd (nccl-tests does, with
 * several GPUs per process). ccl's init blocks until every rank joins, so
 * inside a group this layer starts each init nonblocking and the outermost
 * ncclGroupEnd waits for them.
 */
#ifndef CCL_NCCL_GROUP_H
#define CCL_NCCL_GROUP_H

#include "nccl/nccl_types.h"

/* Whether this thread is between ncclGroupStart and its ncclGroupEnd. */
int nccl_group_open(void);
/* Hands an init started nonblocking inside a group to the group: the
 * outermost ncclGroupEnd waits for it when the caller asked for a blocking
 * comm (blocking = 1). */
nccl_result_t nccl_group_defer_init(ccl_comm_t comm, int blocking);

#endif
