/*
 * group.h - ccl_group_start/end: calls held until the group ends.
 */
#ifndef CCL_CORE_GROUP_H
#define CCL_CORE_GROUP_H

#include "core/communicator.h"

/* group.c: whether this thread is inside ccl_group_start/end; queue a
 * call there (takes the comm's pending count with it); `checked` is the
 * result of its checks, remembered for ccl_group_end when it failed. */
int group_active(void);
/* Whether this thread's open group holds calls on comm; group_drop removes
 * them (abort: they can never run). */
int group_holds(const struct ccl_comm *comm);
void group_drop(struct ccl_comm *comm);
ccl_result_t group_add(const coll_args_t *args, ccl_result_t checked, ccl_stream_t stream, const char *name);

#endif
