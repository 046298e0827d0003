/*
 * board.c - the one-shot path: small calls on one host, where every rank
 * posts its input on the shared board (transport/shm_board.h) and reads
 * what it needs of the others' straight from there: one round, no
 * schedule, no FIFO.
 */
#include "exec/exec.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/mem.h"
#include "exec/fault.h"
#include "device/copy.h"
#include "device/reduce.h"
#include "transport/shm_help.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes every rank posts on the board for this call at most (the root's
 * input for rooted calls): the same number on every rank, so all agree on
 * whether a call fits. */
size_t exec_board_bytes(const coll_args_t *a, int nranks)
{
    size_t c = a->count * dev_dtype_size(a->dtype);
    switch (a->coll) {
    case SCHED_REDUCE_SCATTER:
    case SCHED_ALLTOALL:
    case SCHED_SCATTER:
        return c * (size_t)nranks;
    default:
        return c;
    }
}

/* Reduces block `off` (bytes) of every rank's slot into dst, in rank order
 * so that floating-point results are bitwise identical on every rank. */
static void exec_board_reduce(struct ccl_comm *comm, const coll_args_t *a, const board_bank_t *bank, size_t off,
                              void *dst)
{
    int n = comm->nranks;
    if (n == 1)
        memcpy(dst, shm_board_slot(bank, 0) + off, a->count * dev_dtype_size(a->dtype));
    else
        dev_reduce(a->dtype, a->kop, dst, NULL, shm_board_slot(bank, 0) + off, shm_board_slot(bank, 1) + off, a->count);
    for (int q = 2; q < n; q++)
        dev_reduce(a->dtype, a->kop, dst, NULL, dst, shm_board_slot(bank, q) + off, a->count);
    dev_postop(a->dtype, a->kop, dst, a->count, n);
}

ccl_result_t exec_host_oneshot(struct ccl_comm *comm, const coll_args_t *a)
{
    size_t esz = dev_dtype_size(a->dtype), bytes = a->count * esz;
    size_t send_bytes = a->send_bytes;
    int n = comm->nranks, r = comm->rank, root = a->root;
    board_bank_t view;
    exec_wait_ctx_t ctx = {comm, -1, "exchange with", 0, 0};
    wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield, NULL, NULL};
    if (bytes == 0)
        return CCL_SUCCESS;
    const void *post = a->sendbuf;
    if (a->premul && send_bytes) {
        dev_premul(a->dtype, comm->scratch, a->sendbuf, send_bytes / esz, a->premul_scalar);
        post = comm->scratch;
    }
    board_wait_t wait_for = BOARD_WAIT_ALL;
    if (a->coll == SCHED_BROADCAST || a->coll == SCHED_SCATTER)
        wait_for = r == root ? BOARD_WAIT_NONE : BOARD_WAIT_ROOT;
    else if (a->coll == SCHED_REDUCE || a->coll == SCHED_GATHER)
        wait_for = r == root ? BOARD_WAIT_ALL : BOARD_WAIT_NONE;
    ccl_result_t res = shm_board_exchange(&comm->mesh.board, post, send_bytes, exec_board_bytes(a, n), wait_for, root,
                                          &pol, &view);
    if (res != CCL_SUCCESS)
        return res;
    const board_bank_t *bank = &view;
    char *dst = a->recvbuf;
    switch (a->coll) {
    case SCHED_ALLREDUCE:
        exec_board_reduce(comm, a, bank, 0, dst);
        break;
    case SCHED_REDUCE:
        if (r == root)
            exec_board_reduce(comm, a, bank, 0, dst);
        break;
    case SCHED_REDUCE_SCATTER:
        exec_board_reduce(comm, a, bank, (size_t)r * bytes, dst);
        break;
    case SCHED_ALLGATHER:
        for (int q = 0; q < n; q++)
            memcpy(dst + (size_t)q * bytes, shm_board_slot(bank, q), bytes);
        break;
    case SCHED_GATHER:
        for (int q = 0; r == root && q < n; q++)
            memcpy(dst + (size_t)q * bytes, shm_board_slot(bank, q), bytes);
        break;
    case SCHED_BROADCAST:
        memcpy(dst, shm_board_slot(bank, root), bytes);
        break;
    case SCHED_SCATTER:
        memcpy(dst, shm_board_slot(bank, root) + (size_t)r * bytes, bytes);
        break;
    case SCHED_ALLTOALL:
        for (int q = 0; q < n; q++)
            memcpy(dst + (size_t)q * bytes, shm_board_slot(bank, q) + (size_t)r * bytes, bytes);
        break;
    default:
        return err_set(CCL_ERR_INTERNAL, "one-shot: no path for %s", sched_coll_name(a->coll));
    }
    shm_board_release(&comm->mesh.board);
    return CCL_SUCCESS;
}
