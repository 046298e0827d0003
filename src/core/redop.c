/*
 * redop.c - reduction operators created on a communicator (premulsum).
 *
 * A premulsum operator multiplies this rank's input by a scalar and then
 * sums across ranks (NCCL's ncclRedOpCreatePreMulSum). Its handle is a
 * ccl_redop_t above CCL_NUM_OPS that encodes the comm's tag and a table
 * index, so an operator used on another comm, after it was destroyed, or
 * with another dtype is refused with CCL_ERR_INVALID_OP instead of reading
 * a stranger's scalar.
 */
#include "core/comm_state.h"
#include "core/redop.h"
#include "base/err.h"
#include "device/reduce.h"

#include <stdlib.h>
#include <string.h>

/* op = CCL_NUM_OPS + tag * COMM_MAX_REDOPS + index; tags stay below this
 * bound so op fits an int. */
#define REDOP_TAG_LIMIT ((0x7fffffff - CCL_NUM_OPS) / COMM_MAX_REDOPS)

static _Atomic int redop_next_tag = 1;

int redop_new_tag(void)
{
    return atomic_fetch_add(&redop_next_tag, 1) % REDOP_TAG_LIMIT;
}

static ccl_result_t redop_lookup(struct ccl_comm *comm, ccl_redop_t op, comm_redop_t **out, const char *name)
{
    long v = (long)op - CCL_NUM_OPS;
    int tag = (int)(v / COMM_MAX_REDOPS), idx = (int)(v % COMM_MAX_REDOPS);
    if (v < 0 || (int)op < 0)
        return err_set(CCL_ERR_INVALID_OP, "%s: op %d is not a ccl_redop_t", name, (int)op);
    if (tag != comm->redop_tag)
        return err_set(CCL_ERR_INVALID_OP, "%s: op %d was not created on this communicator", name, (int)op);
    if (!comm->redops || !comm->redops[idx].in_use)
        return err_set(CCL_ERR_INVALID_OP, "%s: op %d was destroyed (or never created)", name, (int)op);
    *out = &comm->redops[idx];
    return CCL_SUCCESS;
}

ccl_result_t redop_resolve(struct ccl_comm *comm, coll_args_t *a, const char *name)
{
    a->kop = a->op;
    a->premul = 0;
    a->premul_ptr = NULL;
    if ((unsigned)a->op < CCL_NUM_OPS)
        return CCL_SUCCESS;
    comm_redop_t *r = NULL;
    pthread_mutex_lock(&comm->redop_lock);
    ccl_result_t res = redop_lookup(comm, a->op, &r, name);
    if (res == CCL_SUCCESS && r->dtype != a->dtype)
        res = err_set(CCL_ERR_INVALID_OP, "%s: premulsum op %d was created for %s, not %s", name, (int)a->op,
                      dev_dtype_name(r->dtype), dev_dtype_name(a->dtype));
    if (res == CCL_SUCCESS) {
        a->kop = CCL_SUM;
        a->premul = 1;
        a->premul_ptr = r->scalar_ptr;
        memcpy(a->premul_scalar, r->scalar, sizeof a->premul_scalar);
    }
    pthread_mutex_unlock(&comm->redop_lock);
    return res;
}

void redop_free(struct ccl_comm *comm)
{
    free(comm->redops);
    comm->redops = NULL;
}

CCL_API ccl_result_t ccl_redop_create_premulsum(ccl_redop_t *op, void *scalar, ccl_datatype_t dtype,
                                                ccl_scalar_residence_t residence, ccl_comm_t comm)
{
    ccl_result_t res = CCL_SUCCESS;
    err_clear();
    if (!comm_is_live(comm))
        return comm_not_live(comm, "ccl_redop_create_premulsum");
    pthread_mutex_lock(&comm->redop_lock);
    if (!op || !scalar)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_redop_create_premulsum: %s is NULL", !op ? "op" : "scalar");
    if ((unsigned)dtype >= CCL_NUM_DTYPES || !dev_dtype_supported(dtype))
        CCL_FAIL(CCL_ERR_INVALID_DTYPE, "ccl_redop_create_premulsum: datatype %d is not supported", (int)dtype);
    if (residence != CCL_SCALAR_DEVICE && residence != CCL_SCALAR_HOST_IMMEDIATE)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_redop_create_premulsum: residence %d is not a "
                 "ccl_scalar_residence_t", (int)residence);
    if (!comm->redops && !(comm->redops = calloc(COMM_MAX_REDOPS, sizeof *comm->redops)))
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    int idx = 0;
    while (idx < COMM_MAX_REDOPS && comm->redops[idx].in_use)
        idx++;
    if (idx == COMM_MAX_REDOPS)
        CCL_FAIL(CCL_ERR_INVALID_USAGE, "ccl_redop_create_premulsum: %d operators exist on this "
                 "communicator; destroy some first", COMM_MAX_REDOPS);
    comm_redop_t *r = &comm->redops[idx];
    memset(r, 0, sizeof *r);
    r->in_use = 1;
    r->dtype = dtype;
    if (residence == CCL_SCALAR_DEVICE)
        r->scalar_ptr = scalar; /* read when each call runs */
    else
        memcpy(r->scalar, scalar, dev_dtype_size(dtype));
    *op = (ccl_redop_t)(CCL_NUM_OPS + comm->redop_tag * COMM_MAX_REDOPS + idx);
out:
    pthread_mutex_unlock(&comm->redop_lock);
    if (res != CCL_SUCCESS)
        comm_record_error(comm);
    return res;
}

CCL_API ccl_result_t ccl_redop_destroy(ccl_redop_t op, ccl_comm_t comm)
{
    err_clear();
    if (!comm_is_live(comm))
        return comm_not_live(comm, "ccl_redop_destroy");
    if ((unsigned)op < CCL_NUM_OPS) {
        ccl_result_t res = err_set(CCL_ERR_INVALID_OP, "ccl_redop_destroy: op %d is built in", (int)op);
        comm_record_error(comm);
        return res;
    }
    comm_redop_t *r = NULL;
    pthread_mutex_lock(&comm->redop_lock);
    ccl_result_t res = redop_lookup(comm, op, &r, "ccl_redop_destroy");
    if (res == CCL_SUCCESS)
        r->in_use = 0;
    pthread_mutex_unlock(&comm->redop_lock);
    if (res != CCL_SUCCESS)
        comm_record_error(comm);
    return res;
}
