/*
 * argcheck.c - refuses bad input before anything is sent.
 *
 * Each failure has its own code and a message naming the argument, so a
 * caller can tell "NULL buffer" from "bad dtype" without parsing text. The
 * checks are cheap (no communication) and run on every call.
 */
#include "core/argcheck.h"
#include "core/err.h"
#include "device/reduce.h"

#include <stdint.h>

static int ranges_overlap(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen && blen && a < b + blen && b < a + alen;
}

ccl_result_t argcheck_coll(const coll_args_t *a, const char *name)
{
    struct ccl_comm *comm = a->comm;
    if (!comm_is_live(comm))
        return err_set(CCL_ERR_NULL_COMM, "%s: comm is NULL or destroyed", name);
    if ((unsigned)a->dtype >= CCL_NUM_DTYPES)
        return err_set(CCL_ERR_INVALID_DTYPE, "%s: datatype %d is not a ccl_datatype_t", name, (int)a->dtype);
    if (a->coll == SCHED_ALLREDUCE && (unsigned)a->op >= CCL_NUM_OPS)
        return err_set(CCL_ERR_INVALID_OP, "%s: op %d is not a ccl_redop_t", name, (int)a->op);
    if (!dev_dtype_supported(a->dtype))
        return err_set(CCL_ERR_UNSUPPORTED, "%s: datatype %s is not implemented on host memory yet",
                       name, dev_dtype_name(a->dtype));
    size_t esz = dev_dtype_size(a->dtype);
    /* Allgather's receive side holds nranks * count elements. */
    size_t recv_mult = a->coll == SCHED_ALLGATHER ? (size_t)comm->nranks : 1;
    if (a->count > SIZE_MAX / esz / recv_mult || a->count * esz * recv_mult > (size_t)PTRDIFF_MAX)
        return err_set(CCL_ERR_COUNT_OVERFLOW, "%s: count %zu of %s overflows the address space", name,
                       a->count, dev_dtype_name(a->dtype));
    if (a->count == 0)
        return CCL_SUCCESS;
    if (!a->sendbuf || !a->recvbuf)
        return err_set(CCL_ERR_NULL_BUFFER, "%s: %s is NULL with count %zu", name,
                       !a->sendbuf ? "sendbuf" : "recvbuf", a->count);
    size_t sbytes = a->count * esz, rbytes = sbytes * recv_mult;
    const char *s = a->sendbuf, *r = a->recvbuf;
    if (a->coll == SCHED_ALLREDUCE && s != r && ranges_overlap(s, sbytes, r, rbytes))
        return err_set(CCL_ERR_INPLACE_LAYOUT,
                       "%s: sendbuf and recvbuf overlap but are not equal (in place needs sendbuf == recvbuf)", name);
    if (a->coll == SCHED_ALLGATHER && s != r + (size_t)comm->rank * sbytes && ranges_overlap(s, sbytes, r, rbytes))
        return err_set(CCL_ERR_INPLACE_LAYOUT,
                       "%s: sendbuf overlaps recvbuf; in place needs sendbuf == recvbuf + rank*count", name);
    return CCL_SUCCESS;
}
