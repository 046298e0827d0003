/*
 * argcheck.c - refuses bad input before anything is sent.
 *
 * Each failure has its own code and a message naming the argument, so a
 * caller can tell "NULL buffer" from "bad dtype" without parsing text. The
 * checks are cheap (no communication) and run on every call; the
 * cross-rank comparison of CCL_CHECK_ARGS is coll_run_check.c.
 *
 * In-place rules are NCCL's: a call is in place when its buffers coincide
 * exactly as the API documents (allgather: send == recv + rank*count, ...);
 * any other overlap of what is read and what is written is refused.
 */
#include "core/argcheck.h"
#include "base/err.h"
#include "device/reduce.h"

#include <stdint.h>

static int ranges_overlap(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen && blen && a < b + blen && b < a + alen;
}

/* How many blocks of `count` the larger buffer holds on the worst rank. */
static size_t argcheck_mult(sched_coll_t coll, int nranks)
{
    switch (coll) {
    case SCHED_ALLGATHER:
    case SCHED_REDUCE_SCATTER:
    case SCHED_ALLTOALL:
    case SCHED_GATHER:
    case SCHED_SCATTER:
        return (size_t)nranks;
    default:
        return 1;
    }
}

/* The one overlap each collective allows: send at `in_place_send` (or recv
 * at `in_place_recv`), given as byte offsets; anything else overlapping is
 * refused. */
static ccl_result_t argcheck_layout(const coll_args_t *a, size_t sbytes, size_t rbytes, const char *name)
{
    const char *s = a->sendbuf, *r = a->recvbuf;
    size_t blk = a->count * dev_dtype_size(a->dtype);
    int rank = a->comm->rank;
    if (!ranges_overlap(s, sbytes, r, rbytes))
        return CCL_SUCCESS;
    switch (a->coll) {
    case SCHED_ALLREDUCE:
    case SCHED_BROADCAST:
    case SCHED_REDUCE:
        if (s == r)
            return CCL_SUCCESS;
        return err_set(CCL_ERR_INPLACE_LAYOUT, "%s: sendbuf and recvbuf overlap but are not equal "
                       "(in place needs sendbuf == recvbuf)", name);
    case SCHED_ALLGATHER:
        if (s == r + (size_t)rank * blk)
            return CCL_SUCCESS;
        return err_set(CCL_ERR_INPLACE_LAYOUT, "%s: sendbuf overlaps recvbuf; in place needs "
                       "sendbuf == recvbuf + rank*count", name);
    case SCHED_REDUCE_SCATTER:
        if (r == s + (size_t)rank * blk)
            return CCL_SUCCESS;
        return err_set(CCL_ERR_INPLACE_LAYOUT, "%s: recvbuf overlaps sendbuf; in place needs "
                       "recvbuf == sendbuf + rank*recvcount", name);
    case SCHED_GATHER:
        if (s == r + (size_t)a->root * blk)
            return CCL_SUCCESS;
        return err_set(CCL_ERR_INPLACE_LAYOUT, "%s: on the root, sendbuf overlaps recvbuf; in place needs "
                       "sendbuf == recvbuf + root*count", name);
    case SCHED_SCATTER:
        if (r == s + (size_t)a->root * blk)
            return CCL_SUCCESS;
        return err_set(CCL_ERR_INPLACE_LAYOUT, "%s: on the root, recvbuf overlaps sendbuf; in place needs "
                       "recvbuf == sendbuf + root*count", name);
    default:
        return err_set(CCL_ERR_INPLACE_LAYOUT, "%s: sendbuf and recvbuf overlap; %s has no in-place form",
                       name, sched_coll_name(a->coll));
    }
}

ccl_result_t argcheck_coll(coll_args_t *a, const char *name)
{
    struct ccl_comm *comm = a->comm;
    int p2p = a->coll == SCHED_P2P_SEND || a->coll == SCHED_P2P_RECV;
    int rooted = a->coll == SCHED_BROADCAST || a->coll == SCHED_REDUCE || a->coll == SCHED_GATHER ||
                 a->coll == SCHED_SCATTER;
    if (!comm_is_live(comm))
        return comm_not_live(comm, name);
    if ((unsigned)a->dtype >= CCL_NUM_DTYPES)
        return err_set(CCL_ERR_INVALID_DTYPE, "%s: datatype %d is not a ccl_datatype_t", name, (int)a->dtype);
    if (!dev_dtype_supported(a->dtype))
        return err_set(CCL_ERR_UNSUPPORTED, "%s: datatype %s is not implemented on host memory yet",
                       name, dev_dtype_name(a->dtype));
    if ((rooted || p2p) && (a->root < 0 || a->root >= comm->nranks))
        return err_set(CCL_ERR_INVALID_RANK, "%s: %s %d is not a rank of this communicator (0..%d)", name,
                       p2p ? "peer" : "root", a->root, comm->nranks - 1);
    size_t esz = dev_dtype_size(a->dtype);
    size_t mult = argcheck_mult(a->coll, comm->nranks);
    size_t bytes; /* multiplications, not divisions: this runs on every call */
    if (__builtin_mul_overflow(a->count, esz * mult, &bytes) || bytes > (size_t)PTRDIFF_MAX)
        return err_set(CCL_ERR_COUNT_OVERFLOW, "%s: count %zu of %s overflows the address space", name,
                       a->count, dev_dtype_name(a->dtype));
    coll_args_size(a);
    if (a->count == 0)
        return CCL_SUCCESS;
    size_t sbytes = a->send_bytes, rbytes = a->recv_bytes;
    if (sbytes && !a->sendbuf)
        return err_set(CCL_ERR_NULL_BUFFER, "%s: sendbuf is NULL with count %zu", name, a->count);
    if (rbytes && !a->recvbuf)
        return err_set(CCL_ERR_NULL_BUFFER, "%s: recvbuf is NULL with count %zu", name, a->count);
    return argcheck_layout(a, sbytes, rbytes, name);
}
