/*
 * verify.h - CCL_VERIFY: ranks compare a hash of their results.
 */
#ifndef CCL_CORE_VERIFY_H
#define CCL_CORE_VERIFY_H

#include "core/communicator.h"

/* verify.c (CCL_VERIFY): whether call a is one to check (counts it;
 * under exec_lock), and the check, run after it succeeded. */
int verify_due(struct ccl_comm *comm, const coll_args_t *a);
ccl_result_t verify_result(struct ccl_comm *comm, const coll_args_t *a, uint64_t seq);

#endif
