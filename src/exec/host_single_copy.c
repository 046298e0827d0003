/*
 * host_single_copy.c - the host executor's single copy: data that lies in a
 * registered user buffer goes to a local peer as a reference (pid, buffer,
 * offset) that the peer reads in place through its own mapping, instead of
 * being copied into a slot and out again. Also the two ways ranks share the
 * copying of a whole-step reference (transport/shm_help.h): copy help (the
 * poster copies slices from the back while the reader copies from the
 * front) and twin copies (the poster's own copy of the same bytes, written
 * together with the reader's). And what a failed call does so that no peer
 * keeps copying into, or reading from, buffers the caller gets back.
 */
#include "exec/host.h"
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

/* Whole-step references. Sent slice by slice, a reference to a buffer
 * couples the reader to its owner: with 8 slots in flight, the owner must
 * run again every 8 slices to post the next ones, and with more ranks than
 * cores it often is not running. Where the data of a whole step is final
 * before the step starts (the user's send buffer) and the step is the only
 * traffic of its connection (one call alone in its run, the schedule's
 * only step to that peer: no other message can queue behind the held
 * slot, and no other call's drain can wait on ours), one reference covers
 * the whole step: the reader keeps it at the head of its FIFO while it
 * reads slice after slice, and consumes it after the last; the owner's
 * drain waits for that. */
int exec_sends_whole(const exec_ctx_t *x, const sched_step_t *st, const shm_conn_t *sc, size_t total)
{
    return st->action == SCHED_SEND && st->src_buf == SCHED_BUF_SEND && (st->flags & SCHED_SOLE_SEND) &&
           x->sole_call && x->send_refs && x->send_reg && sc && !sc->via_net && total > x->comm->slot_size;
}

/* A broadcast's forwarding steps hand on a whole-step reference they got
 * (the root's send buffer, read-only for the call) to a local peer. */
int exec_may_forward(const exec_ctx_t *x, const sched_step_t *st, const shm_conn_t *sc)
{
    return x->args->coll == SCHED_BROADCAST && st->action == SCHED_RECV_COPY_SEND && (st->flags & SCHED_SOLE_SEND) &&
           x->sole_call && sc && !sc->via_net && x->comm->mesh.board.hdr; /* readers check the root there */
}

/* The rank whose buffer a reference names: the sender, or for a
 * forwarded reference another rank of this host. Only ranks of this
 * communicator qualify. */
ccl_result_t exec_ref_owner(const struct ccl_comm *comm, int from, const shm_ref_t *ref, int *owner)
{
    const bs_peer_t *sender = &comm->bs.peers[from];
    if (ref->pid == sender->pid) {
        *owner = from;
        return CCL_SUCCESS;
    }
    for (int p = 0; p < comm->nranks; p++)
        if (comm->bs.peers[p].pid == ref->pid && comm->bs.peers[p].hostid == sender->hostid) {
            *owner = p;
            return CCL_SUCCESS;
        }
    return err_set(CCL_ERR_REMOTE, "rank %d sent a reference to pid %d, which is no rank of its host", from, (int)ref->pid);
}

/* Before a reader lets go of a whole-step reference: the owner stays in
 * its call until then, unless it failed or aborted (for instance a rank
 * down a forwarded reference's chain died and the owner's drain gave up);
 * then it may already reuse the buffer we read. Every failing rank poisons its
 * connections and its board entry before it returns. Only the owner
 * counts: other ranks may finish, abort or exit meanwhile without harm. */
ccl_result_t exec_owner_check(struct ccl_comm *comm, int owner)
{
    char why[1024];
    if (atomic_load(&comm->aborted))
        return err_set(CCL_ERR_ABORTED, "communicator aborted while we read rank %d's buffer in place", owner);
    if (shm_conn_poison_why(&comm->mesh.recv[owner], why, sizeof why) ||
        shm_conn_poison_why(&comm->mesh.send[owner], why, sizeof why))
        return err_set(CCL_ERR_REMOTE, "%s", why);
    if (shm_board_rank_failed(&comm->mesh.board, owner))
        return err_set(CCL_ERR_REMOTE, "rank %d (pid %d on %s), whose buffer we read in place, failed", owner,
                       (int)comm->bs.peers[owner].pid, comm->bs.peers[owner].hostname);
    return CCL_SUCCESS;
}

/* An incoming reference: points *in at the slice's bytes (the slice at
 * `whole_off` of a whole-step reference, or the slice itself when
 * whole_off is SIZE_MAX), in the owner's buffer or copied to scratch, and
 * says whose buffer that is. */
ccl_result_t exec_read_ref(exec_ctx_t *x, const sched_step_t *st, const shm_ref_t *ref, size_t whole_off,
                                  size_t nbytes, const void **in, int *owner)
{
    ccl_result_t res = CCL_SUCCESS;
    struct ccl_comm *comm = x->comm;
    shm_ref_t part = *ref;
    if (whole_off == SIZE_MAX && ref->len != nbytes)
        CCL_FAIL(CCL_ERR_REMOTE, "rank %d sent a %llu-byte reference where %zu bytes were due", st->recv_peer,
                 (unsigned long long)ref->len, nbytes);
    if (whole_off != SIZE_MAX) {
        part.offset += whole_off;
        part.vaddr += whole_off;
        part.len = nbytes;
    }
    CCL_TRY(exec_ref_owner(comm, st->recv_peer, ref, owner));
    CCL_TRY(shm_peer_read(&comm->peer_maps, (pid_t)comm->bs.peers[*owner].pid, &part, x->scratch, in));
out:
    return res;
}

/* A reference to `len` bytes at `data` in our registered send or receive
 * buffer. */
static shm_ref_t exec_make_ref(const exec_ctx_t *x, int from_send, const char *data, size_t len)
{
    const coll_args_t *a = x->args;
    return shm_ref_make((pid_t)x->comm->bs.peers[x->comm->rank].pid, from_send ? &x->send_ref : &x->recv_ref,
                        from_send ? a->sendbuf : a->recvbuf, data, len);
}

void exec_twin_copy(char *dst, char *twin, const void *in, size_t nbytes, int stream)
{
    if (!stream) {
        dev_copy2(dst, twin, in, nbytes);
        return;
    }
    dev_copy_stream2(dst, twin, in, nbytes);
    dev_copy_fence();
}

_Static_assert(SHM_HELP_SLOT_MIN <= 4096, "the smallest slot comm_agree_fifo allows holds a reference and its help block");

/* Posts a reference to `len` bytes of our registered send or receive
 * buffer at `data` (the slot's length is the slice's, `nbytes`). A
 * whole-step one (len > nbytes) carries a help block: we may copy part of
 * it into the reader's buffer in our drain (exec_help). */
void exec_post_ref(exec_ctx_t *x, shm_conn_t *sc, void *slot, int from_send, const char *data, size_t len,
                          size_t nbytes, int twin)
{
    if (x->stream_out)
        dev_copy_fence(); /* streamed stores visible before the peer reads them */
    shm_ref_t mine = exec_make_ref(x, from_send, data, len);
    memcpy(slot, &mine, sizeof mine);
    if (len > nbytes) {
        shm_help_t *help = shm_help_of(slot);
        shm_help_init(help);
        if (x->copy_help) {
            sc->lent_pos = sc->pos;
            sc->lent_src = data;
            sc->lent_len = len;
        }
        sc->lent_exchange = x->args->coll == SCHED_ALLGATHER;
        sc->lent_stream = x->stream_twin;
        if (twin) {
            help->twin = exec_make_ref(x, 0, x->twin_dst, len);
            sc->lent_twin = x->twin_dst;
            sc->twin_open = (int)((len + nbytes - 1) / nbytes);
        }
    }
    shm_send_post(sc, SHM_SLOT_REF, nbytes);
    x->sent_refs = 1;
}

/* Reader, before it offers help: a twin the poster names (its own copy of
 * the same bytes, shm_help.h) is mapped, as we then write every slice we
 * copy there too. 0 when it cannot be: then we decline, and the poster
 * copies its twin alone. */
static int exec_twin_map(const exec_ctx_t *x, const sched_step_t *st, shm_conn_t *rc, const shm_help_t *help,
                         size_t total)
{
    shm_ref_t twin = help->twin; /* shared memory: read once */
    rc->help_twin = NULL;
    if (twin.len == 0)
        return 1;
    const bs_peer_t *poster = &x->comm->bs.peers[st->recv_peer];
    void *base;
    if (twin.pid != poster->pid || twin.len != total ||
        shm_peer_writable(&x->comm->peer_maps, (pid_t)twin.pid, &twin, &base) != CCL_SUCCESS)
        return 0;
    rc->help_twin = base;
    return 1;
}

/* Reader of a whole-step reference, at its first slice: a plain receive
 * into our registered buffer lets the poster copy slices of it too
 * (shm_help.h); anything else (forwarding, a buffer peers cannot map)
 * declines, so that a poster waiting for the answer goes on. The poster
 * writes its slices at once, and the engine counts a slice the poster took
 * as done when we pass it, before its bytes are there: so no other step
 * may touch the destination, before or after. That holds where the
 * schedule's steps are independent (alltoall, gather, scatter) or this is
 * its only step (the end of a broadcast's chain). */
void exec_help_decide(const exec_ctx_t *x, const sched_step_t *st, shm_conn_t *rc, shm_help_t *help,
                             const char *dst, size_t total)
{
    int alone = x->sched->steps_independent || x->sched->nsteps == 1;
    /* In an allgather every rank reads and posts at once: without a twin,
     * a poster's help only moves the same copies to the other core,
     * through pages of our buffer it must map first (2 ranks in place,
     * pairwise with help ran 25-56% slower than the ring without). */
    if (st->action == SCHED_RECV && st->dst_buf == SCHED_BUF_RECV && x->recv_reg && alone &&
        exec_twin_map(x, st, rc, help, total) && (rc->help_twin || x->args->coll != SCHED_ALLGATHER)) {
        shm_ref_t mine = exec_make_ref(x, 0, dst, total);
        if (shm_help_decide(help, &mine, x->stream_out))
            rc->help_slices = (uint32_t)sched_step_slices(st, x->esz, x->comm->slot_size);
        else
            rc->help_twin = NULL; /* the poster's call failed: no help, and nothing of its to write */
    } else {
        rc->help_twin = NULL;
        shm_help_decide(help, NULL, 0);
    }
}

/* Reader, after its last slice: the poster's slices must be in our buffer
 * before we let go of the reference and return. */
ccl_result_t exec_help_wait(exec_ctx_t *x, const sched_step_t *st, shm_conn_t *rc, shm_help_t *help)
{
    ccl_result_t res = CCL_SUCCESS;
    uint32_t want = shm_help_poster_taken(help);
    exec_wait_ctx_t ctx = {x->comm, st->recv_peer, "receive from", 0, 0};
    wait_policy_t pol = {exec_wait_check, &ctx, x->comm->spin, x->comm->yield, NULL, NULL};
    for (;;) {
        uint32_t done = atomic_load_explicit(&help->done, memory_order_acquire);
        if (done & SHM_HELP_CLOSED)
            CCL_FAIL(CCL_ERR_REMOTE, "rank %d stopped copying into our buffer: its call failed", st->recv_peer);
        if (done >= want)
            break;
        CCL_TRY(wait_change(&help->done, done, &help->done_waiters, &pol));
    }
    rc->help_slices = 0;
    rc->help_twin = NULL;
out:
    return res;
}

/* After our call failed: wait until a peer copying into our buffer has
 * finished the `want` slices it took (*count), or said it copies no more
 * (SHM_HELP_CLOSED), or died, or a few seconds passed, so that nothing
 * writes into the buffer once we return. */
void exec_wait_copier(struct ccl_comm *comm, int peer, const _Atomic uint32_t *count, uint32_t want)
{
    uint64_t start = clock_now_ns();
    for (;;) {
        uint32_t n = atomic_load_explicit(count, memory_order_acquire);
        if (n >= want || (n & SHM_HELP_CLOSED))
            break;
        if (exec_pid_dead((pid_t)comm->bs.peers[peer].pid))
            break; /* it writes nothing any more */
        if (clock_now_ns() - start > 3000000000ull) {
            LOG_WARN(SUB_COLL, "rank %d did not finish copying into our buffer after our call failed", peer);
            break;
        }
        sched_yield();
    }
}

/* Our call failed while a poster may still copy into our buffer: take the
 * slices left so that it claims no more; exec_abandon_wait then lets it
 * finish the one it is in. */
static void exec_help_close(struct ccl_comm *comm, int peer)
{
    shm_conn_t *rc = &comm->mesh.recv[peer];
    shm_help_t *help = shm_help_of(shm_slot_at(rc, rc->pos));
    rc->closing = 1 + shm_help_close(help, rc->help_slices);
    rc->help_slices = 0;
    if (rc->help_twin) /* we write no more into the poster's twin: it need not wait for us */
        atomic_store_explicit(&help->reader_done, UINT32_MAX, memory_order_release); /* has SHM_HELP_CLOSED */
    rc->help_twin = NULL;
}

/* Our call failed while a reader may still copy into our twin: take the
 * slices it has not claimed (and stop an offer it has not made yet);
 * exec_abandon_wait then lets it finish those it claimed. */
static void exec_twin_close(struct ccl_comm *comm, int peer)
{
    shm_conn_t *sc = &comm->mesh.send[peer];
    shm_help_t *help = shm_help_of(shm_slot_at(sc, sc->lent_pos));
    sc->closing = 1 + shm_help_poster_close(help, (uint32_t)sc->twin_open);
    sc->twin_open = 0;
    sc->lent_twin = NULL;
}

/* A failed call returns only when no peer copies into its buffers any
 * more (a peer that died or stopped is not waited for: a few seconds at
 * most). Every block is closed first (exec_abandon_close, on every comm
 * of the run), then waited for (exec_abandon_wait): two ranks failing at
 * once each wait for the other's close. */
void exec_abandon_close(struct ccl_comm *comm)
{
    for (int p = 0; p < comm->nranks; p++) {
        if (comm->mesh.send[p].fifo)
            comm->mesh.send[p].lent_len = 0; /* a failed call helps nobody later (exec_help) */
        if (comm->mesh.send[p].fifo && comm->mesh.send[p].twin_open)
            exec_twin_close(comm, p);
        if (comm->mesh.recv[p].fifo && comm->mesh.recv[p].help_slices)
            exec_help_close(comm, p);
    }
}

void exec_abandon_wait(struct ccl_comm *comm)
{
    for (int p = 0; p < comm->nranks; p++) {
        shm_conn_t *sc = &comm->mesh.send[p], *rc = &comm->mesh.recv[p];
        if (sc->fifo && sc->closing)
            exec_wait_copier(comm, p, &shm_help_of(shm_slot_at(sc, sc->lent_pos))->reader_done, sc->closing - 1);
        if (rc->fifo && rc->closing)
            exec_wait_copier(comm, p, &shm_help_of(shm_slot_at(rc, rc->pos))->done, rc->closing - 1);
        if (sc->fifo)
            sc->closing = 0;
        if (rc->fifo)
            rc->closing = 0;
    }
}

/* A rank that sends its whole input by reference and also copies it into
 * its own receive buffer (a broadcast's root out of place, every rank of a
 * pairwise allgather for its own block) makes that copy the reference's
 * twin (shm_help.h): its drain makes it together with the reader, each
 * slice written to both buffers by whoever claims it. Only where the
 * reader's step is a plain receive, which offers help: the end of a
 * broadcast chain (2 ranks; a forwarding reader declines, and we would
 * have waited for its answer to start our copy) and pairwise's
 * independent receives. Of several sends of the block (pairwise on 3
 * ranks or more) the first one's reader shares the copy. */
void exec_twin_init(exec_ctx_t *x)
{
    const sched_t *s = x->sched;
    const coll_args_t *a = x->args;
    int reader_receives = a->coll == SCHED_BROADCAST ? x->comm->nranks == 2 || s->steps_independent
                                                     : a->coll == SCHED_ALLGATHER && s->steps_independent;
    if (!x->copy_help || !reader_receives || !x->recv_reg || a->premul)
        return;
    int copy = -1, send = -1;
    for (int i = 0; i < s->nsteps; i++) {
        const sched_step_t *st = &s->steps[i];
        if (st->action == SCHED_COPY && st->src_buf == SCHED_BUF_SEND && st->dst_buf == SCHED_BUF_RECV)
            copy = copy == -1 ? i : -2; /* one copy of the input, or none of this */
    }
    if (copy < 0)
        return;
    const sched_step_t *c = &s->steps[copy];
    for (int i = 0; i < s->nsteps && send < 0; i++) {
        const sched_step_t *st = &s->steps[i];
        const shm_conn_t *sc = st->send_peer >= 0 ? &x->comm->mesh.send[st->send_peer] : NULL;
        if (st->action == SCHED_SEND && st->src_buf == SCHED_BUF_SEND && st->src_off == c->src_off &&
            st->count == c->count && sc && sc->fifo && exec_sends_whole(x, st, sc, st->count * x->esz))
            send = i;
    }
    char *dst = exec_buf(a, SCHED_BUF_RECV, c->dst_off, x->esz);
    const char *src = exec_buf(a, SCHED_BUF_SEND, c->src_off, x->esz);
    if (send < 0 || dst == src)
        return; /* no such send, or in place: no copy to make */
    x->twin_step = copy;
    x->twin_send = send;
    x->twin_dst = dst;
}

/* Our steps are done but a peer still reads a whole step of our buffer:
 * once it says where the data goes (its first slice), copy slices from
 * the back until we meet it (shm_help.h). A reader whose call fails takes
 * the slices left (exec_help_close), which ends this loop. With a twin
 * (our own copy of those bytes) every slice we copy goes there too; if
 * the reader declined, we copy the twin alone. */
ccl_result_t exec_help(struct ccl_comm *comm, int p)
{
    ccl_result_t res = CCL_SUCCESS;
    shm_conn_t *sc = &comm->mesh.send[p];
    shm_help_t *help = shm_help_of(shm_slot_at(sc, sc->lent_pos));
    const char *src = sc->lent_src;
    char *twin = sc->lent_twin;
    int exchange = sc->lent_exchange, twin_stream = sc->lent_stream;
    size_t total = sc->lent_len, slot = comm->slot_size;
    sc->lent_len = 0;
    sc->lent_twin = NULL;
    exec_wait_ctx_t ctx = {comm, p, "send to", 0, 0};
    wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield, NULL, NULL};
    while (atomic_load_explicit(&help->state, memory_order_acquire) == SHM_HELP_UNDECIDED)
        CCL_TRY(wait_change(&help->state, SHM_HELP_UNDECIDED, &help->state_waiters, &pol));
    if (atomic_load_explicit(&help->state, memory_order_acquire) != SHM_HELP_OFFERED) {
        if (twin && twin_stream) /* as the copy step would have */
            dev_copy_stream(twin, src, total);
        else if (twin)
            memcpy(twin, src, total);
        return CCL_SUCCESS;
    }
    /* An allgather's reader is as busy as we are: our slices would only
     * move its copies to our core, into pages of its buffer new to us
     * whenever the two meet elsewhere than last time (each first write
     * through a mapping faults, ~10-20 us a page here). It copies all,
     * our twin too. */
    if (exchange)
        return CCL_SUCCESS;
    shm_ref_t dst = help->dst; /* shared memory: read once */
    int stream = help->stream != 0;
    if (dst.pid != comm->bs.peers[p].pid || dst.len != total)
        CCL_FAIL(CCL_ERR_REMOTE, "rank %d offered a %llu-byte destination of pid %d for our %zu-byte step", p,
                 (unsigned long long)dst.len, (int)dst.pid, total);
    uint32_t n = (uint32_t)((total + slot - 1) / slot), k;
    uint64_t claims = atomic_load_explicit(&help->claims, memory_order_acquire);
    if ((claims >> 32) + (uint32_t)claims >= n)
        return CCL_SUCCESS; /* the reader took every slice: it may be gone with its buffer already */
    /* Mapped before we claim: a claimed slice must be copied. A buffer
     * that is gone (the reader finished meanwhile) or cannot be mapped is
     * left to the reader, the twin's slices with it. */
    char *base;
    if (shm_peer_writable(&comm->peer_maps, (pid_t)dst.pid, &dst, (void **)&base) != CCL_SUCCESS)
        return CCL_SUCCESS;
    while (shm_help_poster_claim(help, n, &k)) {
        size_t off = (size_t)k * slot, len = total - off < slot ? total - off : slot;
        if (fault_armed && (res = fault_on_slice(comm, comm->rank)) != CCL_SUCCESS) {
            shm_help_poster_close(help, n); /* slice k stays unwritten: the reader must not wait for it */
            goto out;
        }
        if (twin) {
            exec_twin_copy(base + off, twin + off, src + off, len, twin_stream);
        } else if (stream) {
            dev_copy_stream(base + off, src + off, len);
            dev_copy_fence();
        } else {
            memcpy(base + off, src + off, len);
        }
        shm_help_poster_done(help);
    }
out:
    return res;
}
