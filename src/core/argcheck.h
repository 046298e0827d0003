/*
 * argcheck.h - argument validation for the public collective calls.
 */
#ifndef CCL_CORE_ARGCHECK_H
#define CCL_CORE_ARGCHECK_H

#include "core/comm_state.h"
#include "core/coll_run.h"

/* CCL_SUCCESS or the specific error (message set). `name` is the API name.
 * Also fills args->send_bytes and recv_bytes (coll_args_size). */
ccl_result_t argcheck_coll(coll_args_t *args, const char *name);

#endif
