/*
 * redop.h - reduction operators: the built-in ones and premulsum
 * operators a comm creates.
 */
#ifndef CCL_CORE_REDOP_H
#define CCL_CORE_REDOP_H

#include "core/communicator.h"

/* A premulsum operator created on this comm (ccl_redop_create_premulsum). */
typedef struct comm_redop {
    int in_use;
    ccl_datatype_t dtype;
    const void *scalar_ptr;        /* CCL_SCALAR_DEVICE: read at each call */
    unsigned char scalar[8];       /* CCL_SCALAR_HOST_IMMEDIATE: the value */
} comm_redop_t;

#define COMM_MAX_REDOPS 1024

/* redop.c: fills args->kop/premul from args->op, or fails (INVALID_OP). */
ccl_result_t redop_resolve(struct ccl_comm *comm, coll_args_t *args, const char *name);
void redop_free(struct ccl_comm *comm);
int redop_new_tag(void);

#endif
