/*
 * pair.c - the fused 2-rank allreduce on one host (ALGO_PAIR).
 *
 * Reduce-scatter then allgather, with single copy, has each rank reduce
 * half the buffer (reading both inputs' halves) into its own output, then
 * read the peer's reduced half out of the peer's output: the second read
 * takes lines the peer has just written, out of the peer's cache, and
 * costs a second pass. Here each rank maps the peer's input and output,
 * reduces slices of the two inputs once and writes each result into both
 * outputs: every byte is read once and written where it is due, in one
 * pass (a scratch program on the 2-core VM: 64 MiB in 5.0-6.0 ms against
 * 7.3-7.9 for the two passes; perf/RESULTS.md, "Fused 2-rank allreduce",
 * has what ccl-perf gained).
 *
 * Which rank reduces which slice is decided at run time (shm_pair.h):
 * rank 0 takes slices from the front, rank 1 from the back, so a rank
 * that is preempted or sits far from the memory does less. Each slice is
 * computed once, by one rank, so both outputs are bitwise equal.
 *
 * Each rank first posts an offer on its FIFO to the other: its buffers as
 * references, or that it cannot offer them (not ccl_mem_alloc memory, or
 * in and out buffers that overlap without being the same). Rank 0's slot
 * also carries the shared block. An offer without buffers settles it for
 * both; otherwise both say whether they could map the other's buffers.
 * Unless both could, both consume the offers and run another algorithm
 * (core/coll_run.c), having written nothing.
 */
#include "core/communicator.h"
#include "exec/exec.h"
#include "base/err.h"
#include "exec/fault.h"
#include "base/mem.h"
#include "device/copy.h"
#include "device/reduce.h"
#include "transport/shm_help.h"
#include "transport/shm_pair.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PAIR_MAGIC 0x63636c70u /* "cclp": not SHM_REF_MAGIC, so a peer in another call fails to read it */

/* What a rank posts first. */
typedef struct {
    uint32_t magic;
    uint32_t ready; /* the references below are valid */
    uint64_t count;
    int32_t dtype, op;
    shm_ref_t send, recv;
} pair_offer_t;

/* Rank 0's offer slot carries the block after the offer. */
#define PAIR_BLOCK_OFFSET 256
_Static_assert(sizeof(pair_offer_t) <= PAIR_BLOCK_OFFSET, "the block follows the offer");
_Static_assert(PAIR_BLOCK_OFFSET + sizeof(shm_pair_t) <= 4096, "the smallest slot holds an offer and the block");
_Static_assert(SHM_PAIR_CLOSED == SHM_HELP_CLOSED, "exec_wait_copier knows one closed bit");

static shm_pair_t *pair_block(void *slot)
{
    return (shm_pair_t *)((char *)slot + PAIR_BLOCK_OFFSET);
}

/* Our offer: references to both buffers when they are registered and
 * either the same (in place) or apart; else *why says what is not. */
static pair_offer_t pair_offer(const struct ccl_comm *comm, const coll_args_t *a, size_t total, const char **why)
{
    pair_offer_t o = {.magic = PAIR_MAGIC, .count = a->count, .dtype = (int32_t)a->dtype, .op = (int32_t)a->kop};
    const char *s = a->sendbuf, *r = a->recvbuf;
    mem_ref_t sref, rref;
    *why = NULL;
    if (s != r && s < r + total && r < s + total)
        *why = "its send and receive buffers overlap without being the same";
    else if (!mem_find(s, total, &sref) || !mem_find(r, total, &rref))
        *why = "its buffers are not ccl_mem_alloc ones";
    if (*why)
        return o;
    pid_t me = (pid_t)comm->bs.peers[comm->rank].pid;
    o.send = shm_ref_make(me, &sref, s, s, total);
    o.recv = shm_ref_make(me, &rref, r, r, total);
    o.ready = 1;
    return o;
}

/* Why the pair did not run: at INFO once per process (a job whose buffers
 * never qualify would otherwise lose the fused path without a word), at
 * TRACE after that. */
static void pair_log_decline(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pair_log_decline(int rank, const char *fmt, ...)
{
    static atomic_int said;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!atomic_exchange(&said, 1))
        LOG_INFO(SUB_COLL, "rank %d: 2-rank fused allreduce declined (%s); another algorithm runs "
                 "(said once per process; CCL_DEBUG=TRACE shows every call)", rank, why);
    else
        LOG_TRACE(SUB_COLL, "rank %d: 2-rank fused allreduce declined (%s)", rank, why);
}

/* Maps the peer's input (read) and output (write): 0 with the reason
 * logged where it cannot. */
static int pair_map(struct ccl_comm *comm, int peer, const pair_offer_t *theirs, size_t total, const void **peer_in,
                    void **peer_out)
{
    pid_t ppid = (pid_t)comm->bs.peers[peer].pid;
    if (theirs->send.pid != ppid || theirs->recv.pid != ppid || theirs->send.len != total ||
        theirs->recv.len != total) {
        pair_log_decline(comm->rank, "rank %d's offer names buffers of pid %d/%d, %llu/%llu bytes", peer,
                         (int)theirs->send.pid, (int)theirs->recv.pid, (unsigned long long)theirs->send.len,
                         (unsigned long long)theirs->recv.len);
        return 0;
    }
    if (shm_peer_mapped(&comm->peer_maps, ppid, &theirs->send, peer_in) != CCL_SUCCESS ||
        shm_peer_writable(&comm->peer_maps, ppid, &theirs->recv, peer_out) != CCL_SUCCESS) {
        /* Refused mappings (a hardened /proc, another user's process)
         * are a way to decline, not an error of the call. */
        pair_log_decline(comm->rank, "cannot map rank %d's buffers: %s", peer,
                         err_message()[0] ? err_message() : "refused");
        err_clear();
        return 0;
    }
    return 1;
}

/* One slice: a op b into both outputs, in one pass where the kernels can
 * (avg divides in scratch first). Streamed stores are fenced before the
 * slice is counted done. Reducing into cache-resident scratch and then
 * streaming both copies took 1.4-1.9x the time of the one pass, 64 MiB
 * out of place (2 threads, a scratch program): kernels that cannot stream
 * (integers, float64) pay that. */
static void pair_slice(const struct ccl_comm *comm, const coll_args_t *a, char *out, char *peer_out,
                       const char *in0, const char *in1, size_t nbytes, int stream)
{
    size_t n = nbytes / dev_dtype_size(a->dtype);
    if (a->kop != CCL_AVG && stream && dev_reduce_streams(a->dtype)) {
        dev_reduce_stream(a->dtype, a->kop, out, peer_out, in0, in1, n);
        return;
    }
    if (a->kop != CCL_AVG && !stream) {
        dev_reduce(a->dtype, a->kop, out, peer_out, in0, in1, n);
        return;
    }
    dev_reduce(a->dtype, a->kop, comm->scratch, NULL, in0, in1, n);
    dev_postop(a->dtype, a->kop, comm->scratch, n, 2);
    if (stream) {
        dev_copy_stream2(out, peer_out, comm->scratch, nbytes);
        dev_copy_fence();
    } else {
        dev_copy2(out, peer_out, comm->scratch, nbytes);
    }
}

/* Every slice is claimed; the peer's must be done too before we return
 * (it writes into our output and reads our input). */
static ccl_result_t pair_wait_peer(shm_pair_t *p, int peer, const wait_policy_t *pol)
{
    ccl_result_t res = CCL_SUCCESS;
    shm_pair_side_t *other = &p->side[peer];
    uint32_t want = shm_pair_taken(p, peer);
    for (;;) {
        uint32_t done = atomic_load_explicit(&other->done, memory_order_acquire);
        if (done & SHM_PAIR_CLOSED)
            CCL_FAIL(CCL_ERR_REMOTE, "rank %d stopped its share of the allreduce: its call failed", peer);
        if (done >= want)
            break;
        CCL_TRY(wait_change(&other->done, done, &other->done_waiters, pol));
    }
out:
    return res;
}

ccl_result_t exec_host_pair(struct ccl_comm *comm, const coll_args_t *a, int *ran)
{
    ccl_result_t res = CCL_SUCCESS;
    int me = comm->rank, peer = 1 - me;
    shm_conn_t *sc = &comm->mesh.send[peer], *rc = &comm->mesh.recv[peer];
    size_t esz = dev_dtype_size(a->dtype), total = a->count * esz, slice = comm->slot_size;
    uint32_t n = (uint32_t)((total + slice - 1) / slice);
    exec_wait_ctx_t ctx = {comm, peer, "exchange with", 0, 0};
    wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield, NULL, NULL};
    shm_pair_t *block = NULL;
    int ready = 0, holding = 0; /* we said ready (may claim); we hold rank 0's slot (rank 1) */
    *ran = 0;
    if (comm->nranks != 2 || !sc->fifo || !rc->fifo || sc->via_net || rc->via_net)
        CCL_FAIL(CCL_ERR_INTERNAL, "pair allreduce needs 2 ranks of one host (%d ranks)", comm->nranks);
    if (total == 0)
        goto out;

    const char *why;
    pair_offer_t mine = pair_offer(comm, a, total, &why), theirs;
    void *out;
    const void *in;
    CCL_TRY(shm_send_wait(sc, &pol, &out));
    memcpy(out, &mine, sizeof mine);
    if (me == 0)
        shm_pair_init(pair_block(out));
    shm_send_post(sc, SHM_SLOT_REF, sizeof mine);

    CCL_TRY(shm_recv_wait(rc, &pol, &in));
    memcpy(&theirs, in, sizeof theirs);
    if (!shm_recv_is_ref(rc) || shm_recv_len(rc) != sizeof theirs || theirs.magic != PAIR_MAGIC)
        CCL_FAIL(CCL_ERR_MISMATCH, "rank %d is not in a 2-rank allreduce of this size: the ranks called "
                 "different collectives or counts", peer);
    if (theirs.count != mine.count || theirs.dtype != mine.dtype || theirs.op != mine.op)
        CCL_FAIL(CCL_ERR_MISMATCH, "rank %d called allreduce with %llu x %s, %s where this rank has %zu x %s, %s",
                 peer, (unsigned long long)theirs.count, dev_dtype_name((ccl_datatype_t)theirs.dtype),
                 dev_op_name((ccl_redop_t)theirs.op), a->count, dev_dtype_name(a->dtype), dev_op_name(a->kop));
    if (me == 0) {
        block = pair_block(out); /* our own slot: rank 1 consumes it once it is done with the block */
        shm_recv_done(rc);
    } else {
        block = pair_block((void *)in);
        holding = 1;
    }
    /* An offer without buffers settles it: both ranks know. */
    if (!mine.ready || !theirs.ready) {
        if (why)
            pair_log_decline(me, "this rank: %s", why);
        else
            pair_log_decline(me, "rank %d could not offer its buffers", peer);
        goto out;
    }

    const void *peer_in = NULL;
    void *peer_out = NULL;
    int mapped = pair_map(comm, peer, &theirs, total, &peer_in, &peer_out);
    shm_pair_decide(block, me, mapped);
    ready = mapped;
    shm_pair_side_t *other = &block->side[peer];
    uint32_t state;
    while ((state = atomic_load_explicit(&other->state, memory_order_acquire)) == SHM_PAIR_UNDECIDED)
        CCL_TRY(wait_change(&other->state, SHM_PAIR_UNDECIDED, &other->state_waiters, &pol));
    if (!mapped || state != SHM_PAIR_READY) {
        if (mapped)
            pair_log_decline(me, "rank %d could not map this rank's buffers", peer);
        ready = 0; /* neither claims: nothing was written */
        goto out;
    }

    /* Inputs in rank order (rank 0's first) on both ranks. */
    const char *in0 = me == 0 ? a->sendbuf : peer_in, *in1 = me == 0 ? peer_in : a->sendbuf;
    int stream = a->sendbuf != a->recvbuf && comm->stream_pair_from > 0 && total >= comm->stream_pair_from;
    uint32_t k;
    *ran = 1;
    while (shm_pair_claim(block, me, n, &k)) {
        if (fault_armed)
            CCL_TRY(fault_on_slice(comm, comm->rank));
        /* A peer whose call failed has returned, or soon will (after a
         * bounded wait for our slices in flight): write nothing more. */
        if (atomic_load_explicit(&other->done, memory_order_acquire) & SHM_PAIR_CLOSED)
            CCL_FAIL(CCL_ERR_REMOTE, "rank %d stopped its share of the allreduce: its call failed", peer);
        size_t off = (size_t)k * slice, len = total - off < slice ? total - off : slice;
        pair_slice(comm, a, (char *)a->recvbuf + off, (char *)peer_out + off, in0 + off, in1 + off, len, stream);
        shm_pair_done(block, me);
    }
    ctx.what = "finish the allreduce with";
    CCL_TRY(pair_wait_peer(block, peer, &pol));
    ready = 0; /* done: nothing to close */
out:
    if (res != CCL_SUCCESS && ready) {
        /* The peer may still write into our output or read our input. */
        uint32_t want = shm_pair_close(block, me, n);
        exec_wait_copier(comm, peer, &block->side[peer].done, want);
    }
    if (res == CCL_SUCCESS && holding)
        shm_recv_done(rc);
    return res;
}
