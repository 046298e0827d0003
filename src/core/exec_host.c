/*
 * exec_host.c - the host executor: runs a schedule over host buffers and the
 * comm's shm connections, on the calling thread.
 *
 * Every step is cut into slices of one connection slot, so a long step
 * streams through the FIFO and the next rank starts on the first slice while
 * we work on the second. Each slice is a single pass over memory: a fused
 * action reads its inputs once and writes all of its outputs.
 */
#include "core/comm.h"
#include "core/err.h"
#include "core/mem.h"
#include "device/copy.h"
#include "device/reduce.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    struct ccl_comm *comm;
    int peer;
    const char *what; /* "receive from" / "send to" */
} exec_wait_ctx_t;

/* A pid that is gone, or a zombie whose parent has not reaped it yet. */
static int exec_pid_dead(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* Runs while a wait sleeps. peer < 0: the wait depends on every rank (the
 * one-shot board), so every local peer's liveness is checked. */
static ccl_result_t exec_wait_check(void *arg, uint64_t waited_ns)
{
    exec_wait_ctx_t *c = arg;
    struct ccl_comm *comm = c->comm;
    if (atomic_load(&comm->aborted))
        return err_set(CCL_ERR_ABORTED, "communicator aborted while waiting to %s %s", c->what,
                       c->peer >= 0 ? "a peer" : "all ranks");
    int first = c->peer >= 0 ? c->peer : 0, last = c->peer >= 0 ? c->peer : comm->nranks - 1;
    for (int q = first; q <= last; q++) {
        const bs_peer_t *p = &comm->bs.peers[q];
        if (p->pid != (int32_t)getpid() && exec_pid_dead((pid_t)p->pid))
            return err_set(CCL_ERR_REMOTE, "rank %d (pid %d on %s) exited while we waited to %s it",
                           q, (int)p->pid, p->hostname, c->what);
    }
    if (waited_ns > comm->bs.timeout_ns) {
        if (c->peer < 0)
            return err_set(CCL_ERR_TIMEOUT, "no progress for %llu s (CCL_TIMEOUT) while we waited to %s all ranks",
                           (unsigned long long)(waited_ns / 1000000000ull), c->what);
        const bs_peer_t *p = &comm->bs.peers[c->peer];
        return err_set(CCL_ERR_TIMEOUT, "rank %d (pid %d on %s) made no progress for %llu s (CCL_TIMEOUT) "
                       "while we waited to %s it",
                       c->peer, (int)p->pid, p->hostname,
                       (unsigned long long)(waited_ns / 1000000000ull), c->what);
    }
    return CCL_SUCCESS;
}

/* What every slice of one collective call needs. */
typedef struct {
    struct ccl_comm *comm;
    const coll_args_t *args;
    size_t esz;
    int stream_out;  /* write final results with non-temporal stores */
    void *scratch;   /* one slot of cache-resident scratch */
    /* Single copy: data that lies in a registered user buffer is sent as a
     * reference the peer reads in place, instead of copied into the slot. */
    int send_reg, recv_reg;
    mem_ref_t send_ref, recv_ref;
    int sent_refs;   /* the call must drain its sends before returning */
} exec_ctx_t;

static char *exec_buf(const coll_args_t *a, int which, size_t off_elems, size_t esz)
{
    char *base = which == SCHED_BUF_SEND ? (char *)a->sendbuf : which == SCHED_BUF_RECV ? (char *)a->recvbuf : NULL;
    return base ? base + off_elems * esz : NULL;
}

/* One slice of a step that moves data through connections. With
 * `stream_out` (large results) the final write to the user's buffer is a
 * non-temporal copy from a cache-resident slot or scratch buffer. out is
 * NULL when the outgoing data goes by reference: then only dst is written. */
static void exec_slice(const sched_step_t *st, const exec_ctx_t *x, const void *in, void *out,
                       const char *src, char *dst, size_t nbytes)
{
    const coll_args_t *a = x->args;
    size_t n = nbytes / x->esz;
    int post = (st->flags & SCHED_POSTOP) && a->op == CCL_AVG;
    int nranks = x->comm->nranks;
    switch (st->action) {
    case SCHED_SEND:
        if (out)
            memcpy(out, src, nbytes);
        break;
    case SCHED_RECV:
        if (x->stream_out)
            dev_copy_stream(dst, in, nbytes);
        else
            memcpy(dst, in, nbytes);
        break;
    case SCHED_RECV_REDUCE_SEND:
        dev_reduce(a->dtype, a->op, out, NULL, in, src, n);
        break;
    case SCHED_RECV_REDUCE_COPY:
    reduce_copy:
        if (x->stream_out) {
            dev_reduce(a->dtype, a->op, x->scratch, NULL, in, src, n);
            if (post)
                dev_postop(a->dtype, a->op, x->scratch, n, nranks);
            dev_copy_stream(dst, x->scratch, nbytes);
        } else {
            dev_reduce(a->dtype, a->op, dst, NULL, in, src, n);
            if (post)
                dev_postop(a->dtype, a->op, dst, n, nranks);
        }
        break;
    case SCHED_RECV_COPY_SEND:
        if (out)
            memcpy(out, in, nbytes);
        if (x->stream_out)
            dev_copy_stream(dst, in, nbytes);
        else
            memcpy(dst, in, nbytes);
        break;
    case SCHED_RECV_REDUCE_COPY_SEND:
        if (!out)
            goto reduce_copy;
        if (x->stream_out || post) {
            /* Reduce into the slot (cache-resident), finish there, then
             * keep a copy: what we keep is exactly what we send on. */
            dev_reduce(a->dtype, a->op, out, NULL, in, src, n);
            if (post)
                dev_postop(a->dtype, a->op, out, n, nranks);
            if (x->stream_out)
                dev_copy_stream(dst, out, nbytes);
            else
                memcpy(dst, out, nbytes);
        } else {
            dev_reduce(a->dtype, a->op, dst, out, in, src, n);
        }
        break;
    default:
        break;
    }
}

/* Slice `k` of one step (see sched_rounds for why execution goes by
 * rounds of slices rather than step by step). */
static ccl_result_t exec_step_slice(const exec_ctx_t *x, const sched_step_t *st, size_t k)
{
    ccl_result_t res = CCL_SUCCESS;
    struct ccl_comm *comm = x->comm;
    const coll_args_t *a = x->args;
    size_t esz = x->esz;
    const char *src = exec_buf(a, st->src_buf, st->src_off, esz);
    char *dst = exec_buf(a, st->dst_buf, st->dst_off, esz);
    size_t total = st->count * esz;
    size_t off = k * comm->slot_size;
    size_t nbytes = total - off < comm->slot_size ? total - off : comm->slot_size;

    if (st->action == SCHED_COPY || st->action == SCHED_LOCAL_REDUCE) {
        size_t n = nbytes / esz;
        if (st->action == SCHED_COPY && src != dst && x->stream_out)
            dev_copy_stream(dst + off, src + off, nbytes);
        else if (st->action == SCHED_COPY && src != dst)
            memcpy(dst + off, src + off, nbytes);
        else if (st->action == SCHED_LOCAL_REDUCE)
            dev_reduce(a->dtype, a->op, dst + off, NULL, src + off, dst + off, n);
        if ((st->flags & SCHED_POSTOP) && a->op == CCL_AVG)
            dev_postop(a->dtype, a->op, dst + off, n, comm->nranks);
        return CCL_SUCCESS;
    }

    shm_conn_t *rc = st->recv_peer >= 0 ? &comm->recv_conns[st->recv_peer] : NULL;
    shm_conn_t *sc = st->send_peer >= 0 ? &comm->send_conns[st->send_peer] : NULL;
    if ((rc && !rc->fifo) || (sc && !sc->fifo))
        return err_set(CCL_ERR_INTERNAL, "schedule uses a connection to rank %d that does not exist",
                       rc && !rc->fifo ? st->recv_peer : st->send_peer);
    const void *in = NULL;
    void *out = NULL;
    if (rc) {
        exec_wait_ctx_t ctx = {comm, st->recv_peer, "receive from"};
        wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
        CCL_TRY(shm_recv_wait(rc, &pol, &in));
    }
    if (sc) {
        exec_wait_ctx_t ctx = {comm, st->send_peer, "send to"};
        wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
        CCL_TRY(shm_send_wait(sc, &pol, &out));
    }
    if (rc && shm_recv_is_ref(rc)) {
        shm_ref_t ref;
        memcpy(&ref, in, sizeof ref);
        if (ref.len != nbytes)
            CCL_FAIL(CCL_ERR_REMOTE, "rank %d sent a %llu-byte reference where %zu bytes were due",
                     st->recv_peer, (unsigned long long)ref.len, nbytes);
        CCL_TRY(shm_peer_read(&comm->peer_maps, (pid_t)comm->bs.peers[st->recv_peer].pid, &ref, x->scratch, &in));
    }
    /* The outgoing data lies in a user buffer for SEND (src) and for the
     * steps that also keep what they send (dst); only there can it go by
     * reference. */
    const char *ref_data = NULL;
    const mem_ref_t *ref_buf = NULL;
    if (sc && st->action == SCHED_SEND) {
        ref_data = src + off;
        ref_buf = st->src_buf == SCHED_BUF_SEND ? (x->send_reg ? &x->send_ref : NULL) : (x->recv_reg ? &x->recv_ref : NULL);
    } else if (sc && (st->action == SCHED_RECV_COPY_SEND || st->action == SCHED_RECV_REDUCE_COPY_SEND)) {
        ref_data = dst + off;
        ref_buf = x->recv_reg ? &x->recv_ref : NULL;
    }
    const char *ref_base = ref_buf == &x->send_ref ? (const char *)a->sendbuf : (const char *)a->recvbuf;
    exec_slice(st, x, in, ref_buf ? NULL : out, src ? src + off : NULL, dst ? dst + off : NULL, nbytes);
    if (rc)
        shm_recv_done(rc);
    if (sc && ref_buf) {
        if (x->stream_out)
            dev_copy_fence(); /* streamed stores visible before the peer reads them */
        shm_ref_t ref = {SHM_REF_MAGIC, ref_buf->fd, ref_buf->id, ref_buf->alloc_len,
                         ref_buf->offset + (uint64_t)(ref_data - ref_base), nbytes, (uint64_t)(uintptr_t)ref_data};
        memcpy(out, &ref, sizeof ref);
        shm_send_post(sc, SHM_SLOT_REF);
        ((exec_ctx_t *)x)->sent_refs = 1;
    } else if (sc) {
        shm_send_post(sc, SHM_SLOT_DATA);
    }
out:
    return res;
}

ccl_result_t exec_host_run(struct ccl_comm *comm, const sched_t *sched, const coll_args_t *args)
{
    ccl_result_t res = CCL_SUCCESS;
    exec_ctx_t x = {.comm = comm, .args = args, .esz = dev_dtype_size(args->dtype), .scratch = comm->scratch};
    size_t recv_bytes = args->count * x.esz * (args->coll == SCHED_ALLGATHER ? (size_t)comm->nranks : 1);
    x.stream_out = comm->stream_threshold > 0 && recv_bytes >= comm->stream_threshold;
    size_t send_bytes = args->count * x.esz;
    if (comm->single_copy_threshold > 0 && send_bytes >= comm->single_copy_threshold) {
        /* A reference is safe only to memory that stays unchanged until the
         * peer has read it. Results (dst of a step) are final once written;
         * the send buffer is too, unless the call is an in-place allreduce
         * whose schedule may overwrite it while a peer still reads (an
         * in-place allgather never rewrites its own block). */
        const char *s = args->sendbuf, *r = args->recvbuf;
        int overwritten = args->coll == SCHED_ALLREDUCE && s >= r && s < r + recv_bytes &&
                          !sched->send_refs_safe_in_place;
        x.send_reg = !overwritten && mem_find(args->sendbuf, send_bytes, &x.send_ref);
        x.recv_reg = mem_find(args->recvbuf, recv_bytes, &x.recv_ref);
    }
    size_t rounds = sched_rounds(sched, x.esz, comm->slot_size);
    for (size_t k = 0; k < rounds; k++) {
        for (int i = 0; i < sched->nsteps; i++) {
            const sched_step_t *st = &sched->steps[i];
            if (k >= sched_step_slices(st, x.esz, comm->slot_size))
                continue;
            res = exec_step_slice(&x, st, k);
            if (res != CCL_SUCCESS) {
                err_prefix("step %d (%s), slice %zu: ", i, sched_action_name(st->action), k);
                goto out;
            }
        }
    }
    /* Peers may still be reading our buffers through references: the call
     * is complete only when they have consumed every slot we sent. */
    for (int p = 0; x.sent_refs && p < comm->nranks; p++) {
        if (!comm->send_conns[p].fifo)
            continue;
        exec_wait_ctx_t ctx = {comm, p, "send to"};
        wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
        res = shm_send_drain(&comm->send_conns[p], &pol);
        if (res != CCL_SUCCESS)
            goto out;
    }
out:
    if (x.stream_out)
        dev_copy_fence(); /* streamed stores are ordered before we return */
    return res;
}

ccl_result_t exec_host_oneshot(struct ccl_comm *comm, const coll_args_t *a)
{
    size_t esz = dev_dtype_size(a->dtype), bytes = a->count * esz;
    int n = comm->nranks;
    const char *bank = NULL;
    exec_wait_ctx_t ctx = {comm, -1, "exchange with"};
    wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
    if (bytes == 0)
        return CCL_SUCCESS;
    ccl_result_t res = shm_board_exchange(&comm->board, a->sendbuf, bytes, &pol, &bank);
    if (res != CCL_SUCCESS)
        return res;
    size_t stride = comm->board.slot_bytes;
    char *dst = a->recvbuf;
    if (a->coll == SCHED_ALLGATHER) {
        for (int q = 0; q < n; q++)
            memcpy(dst + (size_t)q * bytes, bank + (size_t)q * stride, bytes);
        return CCL_SUCCESS;
    }
    /* Every rank reduces in rank order, so floating-point results are
     * bitwise identical everywhere. */
    dev_reduce(a->dtype, a->op, dst, NULL, bank, bank + stride, a->count);
    for (int q = 2; q < n; q++)
        dev_reduce(a->dtype, a->op, dst, NULL, dst, bank + (size_t)q * stride, a->count);
    dev_postop(a->dtype, a->op, dst, a->count, n);
    return CCL_SUCCESS;
}
