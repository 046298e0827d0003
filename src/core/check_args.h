/*
 * check_args.h - CCL_CHECK_ARGS: ranks compare their calls before running
 * them, so a mismatch is an error naming both sides instead of a hang or
 * garbage.
 */
#ifndef CCL_CORE_CHECK_ARGS_H
#define CCL_CORE_CHECK_ARGS_H

#include "exec/exec.h"

/* CCL_CHECK_ARGS=1, before anything is sent: all ranks of
 * each job exchange what they were called with. Runs the exchange through
 * the executor (so it works when one thread drives several ranks). */
ccl_result_t check_args_run(exec_job_t *jobs, int njobs, int *failed);

#endif
