/*
 * exec_host.c - the host executor: runs schedules over host buffers and the
 * comm's shm connections, on the calling thread.
 *
 * Every step is cut into slices of one connection slot, so a long step
 * streams through the FIFO and the next rank starts on the first slice while
 * we work on the second. Each slice is a single pass over memory: a fused
 * action reads its inputs once and writes all of its outputs. Which slice
 * runs next is the engine's decision (algos/engine.h); this file tries the
 * slices and waits, when nothing can run, for the first one that was not
 * ready.
 */
#include "core/comm.h"
#include "base/clock.h"
#include "base/err.h"
#include "core/fault.h"
#include "base/mem.h"
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

/* A pid that is gone, or a zombie whose parent has not reaped it yet. */
int exec_pid_dead(pid_t pid)
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

/* A rank of our host that is gone without having said why (a rank that
 * failed poisons its connections with a reason before it exits): -1 if
 * none. Only ranks first..last are looked at; with closed_ok, not those
 * that closed the comm in order before they went (they finished all they
 * had queued). */
static int exec_dead_local(struct ccl_comm *comm, int first, int last, int closed_ok)
{
    for (int q = first; q <= last; q++) {
        const bs_peer_t *p = &comm->bs.peers[q];
        /* Liveness by pid only works for processes of our host; the net
         * proxy notices remote failures (closed sockets, keepalive). */
        if (comm->layout.node_of[q] != comm->layout.node_of[comm->rank] || p->pid == (int32_t)getpid())
            continue;
        /* Death first, then what the rank left: it closes or poisons its
         * connections before it exits, so once it is seen dead those marks
         * are visible. The other order races: marks read as absent, then
         * (while this rank is preempted, easily a few ms with 4 ranks on 2
         * cores) the peer closes in order and exits, and an orderly exit
         * reads as a crash. */
        if (!exec_pid_dead((pid_t)p->pid))
            continue;
        if (shm_conn_poisoned(&comm->recv_conns[q]) || shm_conn_poisoned(&comm->send_conns[q]))
            continue;
        if (closed_ok && (shm_conn_closed(&comm->recv_conns[q]) || shm_conn_closed(&comm->send_conns[q])))
            continue;
        return q;
    }
    return -1;
}

/* The first reason a rank of our host left in a connection with us when
 * it failed, whatever connection we wait on: a failure spreads to every
 * local rank at once, not only to those that happen to wait on the rank
 * that failed. */
static const char *exec_local_poison(struct ccl_comm *comm, char *buf, size_t len)
{
    for (int q = 0; q < comm->nranks; q++) {
        if (q == comm->rank || comm->layout.node_of[q] != comm->layout.node_of[comm->rank])
            continue;
        if (shm_conn_poison_why(&comm->recv_conns[q], buf, len) ||
            shm_conn_poison_why(&comm->send_conns[q], buf, len))
            return buf;
    }
    return NULL;
}

ccl_result_t exec_local_failure(struct ccl_comm *comm, int first, int last, int closed_ok, const char *what)
{
    if (atomic_load(&comm->aborted))
        return err_set(CCL_ERR_ABORTED, "communicator aborted while we waited to %s", what);
    if (comm->net && net_failed(comm->net)) {
        /* Often the echo of a local rank's death (remote peers noticed it
         * first and closed their connections): that rank is the cause. */
        int q = exec_dead_local(comm, 0, comm->nranks - 1, 0);
        if (q >= 0)
            return err_set(CCL_ERR_REMOTE, "rank %d (pid %d on %s) exited; then the network failed: %s", q,
                           (int)comm->bs.peers[q].pid, comm->bs.peers[q].hostname, net_error(comm->net));
        return err_set(CCL_ERR_REMOTE, "%s", net_error(comm->net));
    }
    /* The dead first (see exec_dead_local): a rank that poisons, then
     * exits, between the two looks is found by its reason. */
    int q = exec_dead_local(comm, first, last, closed_ok);
    char why[1024];
    if (exec_local_poison(comm, why, sizeof why))
        return err_set(CCL_ERR_REMOTE, "%s", why);
    if (q >= 0)
        return err_set(CCL_ERR_REMOTE, "rank %d (pid %d on %s) exited while we waited to %s", q,
                       (int)comm->bs.peers[q].pid, comm->bs.peers[q].hostname, what);
    return CCL_SUCCESS;
}

/* Runs while a wait sleeps (every few ms). The deadline counts from the
 * last progress of anything this thread drives, not from this wait. */
ccl_result_t exec_wait_check(void *arg, uint64_t waited_ns)
{
    exec_wait_ctx_t *c = arg;
    struct ccl_comm *comm = c->comm;
    char what[96];
    snprintf(what, sizeof what, "%s %s", c->what, c->peer >= 0 ? "it" : "all ranks");
    ccl_result_t res = exec_local_failure(comm, c->peer >= 0 ? c->peer : 0,
                                          c->peer >= 0 ? c->peer : comm->nranks - 1, 0, what);
    if (res != CCL_SUCCESS)
        return res;
    uint64_t idle = c->idle_since ? clock_now_ns() - c->idle_since : waited_ns;
    if (idle > comm->bs.timeout_ns && comm->board.hdr) {
        /* The rank we wait for may itself wait for one that stopped
         * calling collectives: name that one. */
        int behind[4];
        uint64_t at[4];
        int nb = shm_board_behind(&comm->board, comm->coll_calls, behind, at, 4);
        if (nb > 0) {
            const bs_peer_t *p = &comm->bs.peers[behind[0]];
            return err_set(CCL_ERR_TIMEOUT, "no progress for %llu s (CCL_TIMEOUT): rank %d (pid %d on %s) has not "
                           "called collective #%llu (it called %llu)%s; we waited to %s %s",
                           (unsigned long long)(idle / 1000000000ull), behind[0], (int)p->pid, p->hostname,
                           (unsigned long long)comm->coll_calls, (unsigned long long)at[0],
                           nb > 1 ? ", nor have others" : "", c->what, c->peer >= 0 ? "a peer" : "all ranks");
        }
    }
    if (idle > comm->bs.timeout_ns) {
        if (c->peer < 0)
            return err_set(CCL_ERR_TIMEOUT, "no progress for %llu s (CCL_TIMEOUT) while we waited to %s all ranks",
                           (unsigned long long)(idle / 1000000000ull), c->what);
        const bs_peer_t *p = &comm->bs.peers[c->peer];
        return err_set(CCL_ERR_TIMEOUT, "rank %d (pid %d on %s) made no progress for %llu s (CCL_TIMEOUT) "
                       "while we waited to %s it",
                       c->peer, (int)p->pid, p->hostname,
                       (unsigned long long)(idle / 1000000000ull), c->what);
    }
    if (c->others)
        return CCL_IN_PROGRESS; /* not an error: go and re-check the others */
    return CCL_SUCCESS;
}

/* What every slice of one call needs. */
typedef struct {
    struct ccl_comm *comm;
    const coll_args_t *args;
    size_t esz;
    int stream_out;  /* write final results with non-temporal stores */
    int stream_twin; /* ... and twin copies (exec_twin_copy), from a smaller size */
    void *scratch;   /* one slot of cache-resident scratch */
    void *premul_buf; /* one slot: this rank's input times the premulsum scalar */
    /* Single copy: data that lies in a registered user buffer is sent as a
     * reference the peer reads in place, instead of copied into the slot. */
    int send_refs, recv_refs; /* the schedule lets that buffer's data go by reference */
    int send_reg, recv_reg;   /* ... and it is registered (local peers map it) */
    int net_refs;             /* ... and the call is large enough for net sends to go from it */
    mem_ref_t send_ref, recv_ref;
    int sent_refs;   /* the call must drain its sends before returning */
    int sole_call;   /* the only call of the run: its steps alone use their connections */
    /* The local copy step that the twin of our whole-step reference of
     * step twin_send replaces (shm_help.h): the drain makes it, with the
     * reader; -1: none. */
    int twin_step, twin_send;
    int copy_help;   /* we copy slices of what readers take from us (comm->copy_help, exec_ctx_init) */
    char *twin_dst;  /* ... and where it writes */
    const sched_t *sched;
    ccl_result_t res; /* why a slice failed */
} exec_ctx_t;

static char *exec_buf(const coll_args_t *a, int which, size_t off_elems, size_t esz)
{
    char *base = which == SCHED_BUF_SEND ? (char *)a->sendbuf : which == SCHED_BUF_RECV ? (char *)a->recvbuf : NULL;
    return base ? base + off_elems * esz : NULL;
}

/* This rank's own input for a reduction: with a premulsum operator it is
 * multiplied by the scalar first (into a slot-sized buffer). */
static const char *exec_own_input(const exec_ctx_t *x, const sched_step_t *st, const char *src, size_t n)
{
    if (!x->args->premul || st->src_buf != SCHED_BUF_SEND || !src)
        return src;
    dev_premul(x->args->dtype, x->premul_buf, src, n, x->args->premul_scalar);
    return x->premul_buf;
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
    int post = (st->flags & SCHED_POSTOP) && a->kop == CCL_AVG;
    int nranks = x->comm->nranks;
    if (st->action != SCHED_SEND)
        src = exec_own_input(x, st, src, n);
    switch (st->action) {
    case SCHED_SEND:
        if (out && a->premul && st->src_buf == SCHED_BUF_SEND)
            dev_premul(a->dtype, out, src, n, a->premul_scalar);
        else if (out)
            memcpy(out, src, nbytes);
        break;
    case SCHED_RECV:
        if (x->stream_out)
            dev_copy_stream(dst, in, nbytes);
        else
            memcpy(dst, in, nbytes);
        break;
    case SCHED_RECV_REDUCE_SEND:
        dev_reduce(a->dtype, a->kop, out, NULL, in, src, n);
        break;
    case SCHED_RECV_REDUCE_COPY:
    reduce_copy:
        if (x->stream_out) {
            dev_reduce(a->dtype, a->kop, x->scratch, NULL, in, src, n);
            if (post)
                dev_postop(a->dtype, a->kop, x->scratch, n, nranks);
            dev_copy_stream(dst, x->scratch, nbytes);
        } else {
            dev_reduce(a->dtype, a->kop, dst, NULL, in, src, n);
            if (post)
                dev_postop(a->dtype, a->kop, dst, n, nranks);
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
            dev_reduce(a->dtype, a->kop, out, NULL, in, src, n);
            if (post)
                dev_postop(a->dtype, a->kop, out, n, nranks);
            if (x->stream_out)
                dev_copy_stream(dst, out, nbytes);
            else
                memcpy(dst, out, nbytes);
        } else {
            dev_reduce(a->dtype, a->kop, dst, out, in, src, n);
        }
        break;
    default:
        break;
    }
}

/* Local steps: no connection involved. */
static void exec_local_slice(const exec_ctx_t *x, const sched_step_t *st, const char *src, char *dst, size_t nbytes)
{
    const coll_args_t *a = x->args;
    size_t n = nbytes / x->esz;
    if (st->action == SCHED_COPY) {
        if (a->premul && st->src_buf == SCHED_BUF_SEND)
            dev_premul(a->dtype, dst, src, n, a->premul_scalar);
        else if (src != dst && x->stream_out)
            dev_copy_stream(dst, src, nbytes);
        else if (src != dst)
            memcpy(dst, src, nbytes);
    } else if (st->action == SCHED_LOCAL_REDUCE) {
        dev_reduce(a->dtype, a->kop, dst, NULL, exec_own_input(x, st, src, n), dst, n);
    }
    if ((st->flags & SCHED_POSTOP) && a->kop == CCL_AVG)
        dev_postop(a->dtype, a->kop, dst, n, x->comm->nranks);
}

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
static int exec_sends_whole(const exec_ctx_t *x, const sched_step_t *st, const shm_conn_t *sc, size_t total)
{
    return st->action == SCHED_SEND && st->src_buf == SCHED_BUF_SEND && (st->flags & SCHED_SOLE_SEND) &&
           x->sole_call && x->send_refs && x->send_reg && sc && !sc->via_net && total > x->comm->slot_size;
}

/* A broadcast's forwarding steps hand on a whole-step reference they got
 * (the root's send buffer, read-only for the call) to a local peer. */
static int exec_may_forward(const exec_ctx_t *x, const sched_step_t *st, const shm_conn_t *sc)
{
    return x->args->coll == SCHED_BROADCAST && st->action == SCHED_RECV_COPY_SEND && (st->flags & SCHED_SOLE_SEND) &&
           x->sole_call && sc && !sc->via_net && x->comm->board.hdr; /* readers check the root there */
}

/* The rank whose buffer a reference names: the sender, or for a
 * forwarded reference another rank of this host. Only ranks of this
 * communicator qualify. */
static ccl_result_t exec_ref_owner(const struct ccl_comm *comm, int from, const shm_ref_t *ref, int *owner)
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
static ccl_result_t exec_owner_check(struct ccl_comm *comm, int owner)
{
    char why[1024];
    if (atomic_load(&comm->aborted))
        return err_set(CCL_ERR_ABORTED, "communicator aborted while we read rank %d's buffer in place", owner);
    if (shm_conn_poison_why(&comm->recv_conns[owner], why, sizeof why) ||
        shm_conn_poison_why(&comm->send_conns[owner], why, sizeof why))
        return err_set(CCL_ERR_REMOTE, "%s", why);
    if (shm_board_rank_failed(&comm->board, owner))
        return err_set(CCL_ERR_REMOTE, "rank %d (pid %d on %s), whose buffer we read in place, failed", owner,
                       (int)comm->bs.peers[owner].pid, comm->bs.peers[owner].hostname);
    return CCL_SUCCESS;
}

/* An incoming reference: points *in at the slice's bytes (the slice at
 * `whole_off` of a whole-step reference, or the slice itself when
 * whole_off is SIZE_MAX), in the owner's buffer or copied to scratch, and
 * says whose buffer that is. */
static ccl_result_t exec_read_ref(exec_ctx_t *x, const sched_step_t *st, const shm_ref_t *ref, size_t whole_off,
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

/* One slice into the reader's destination and the poster's twin, read
 * once (two memcpy calls took 1.1-1.25x the time of one pass with two
 * stores, 2 threads at 4-8 MiB); visible to the other side before it is
 * counted as done (the slice's completion is published with a release
 * store: enough for plain stores, a fence for streamed ones). Streamed
 * from CCL_STREAM_THRESHOLD, but at most from EXEC_TWIN_STREAM_MAX: below
 * both the buffers stay in the cache for the next call. Streaming always made 2-rank single-copy calls of 1 to 8 MiB
 * 1.3-3.3x slower (4 MiB allgather 308 against 95 us a call, broadcast
 * 296 against 99, alternating in one run, 2026-12-04). At 16 MiB it was
 * mixed where the vCPUs share a socket (allgather 0.74-1.02x the plain
 * time, broadcast 1.15x) and 0.49x where they sit far apart: the twin is
 * written into the other rank's buffer, and streamed stores do not fetch
 * its lines from a distant cache first. At 32 MiB streaming wins. */
#define EXEC_TWIN_STREAM_MAX ((size_t)16 << 20)

static void exec_twin_copy(char *dst, char *twin, const void *in, size_t nbytes, int stream)
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
static void exec_post_ref(exec_ctx_t *x, shm_conn_t *sc, void *slot, int from_send, const char *data, size_t len,
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
static void exec_help_decide(const exec_ctx_t *x, const sched_step_t *st, shm_conn_t *rc, shm_help_t *help,
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
static ccl_result_t exec_help_wait(exec_ctx_t *x, const sched_step_t *st, shm_conn_t *rc, shm_help_t *help)
{
    ccl_result_t res = CCL_SUCCESS;
    uint32_t want = shm_help_poster_taken(help);
    exec_wait_ctx_t ctx = {x->comm, st->recv_peer, "receive from", 0, 0};
    wait_policy_t pol = {exec_wait_check, &ctx, x->comm->spin, x->comm->yield};
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
    shm_conn_t *rc = &comm->recv_conns[peer];
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
    shm_conn_t *sc = &comm->send_conns[peer];
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
static void exec_abandon_close(struct ccl_comm *comm)
{
    for (int p = 0; p < comm->nranks; p++) {
        if (comm->send_conns[p].fifo)
            comm->send_conns[p].lent_len = 0; /* a failed call helps nobody later (exec_help) */
        if (comm->send_conns[p].fifo && comm->send_conns[p].twin_open)
            exec_twin_close(comm, p);
        if (comm->recv_conns[p].fifo && comm->recv_conns[p].help_slices)
            exec_help_close(comm, p);
    }
}

static void exec_abandon_wait(struct ccl_comm *comm)
{
    for (int p = 0; p < comm->nranks; p++) {
        shm_conn_t *sc = &comm->send_conns[p], *rc = &comm->recv_conns[p];
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

/* Slice `k` of one step: 1 when it ran, 0 when a connection is not ready
 * (nothing changed), -1 on error (message set). */
static int exec_step_slice(exec_ctx_t *x, const sched_step_t *st, size_t k)
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
        if (st - x->sched->steps != x->twin_step) /* else our drain copies it (exec_help) */
            exec_local_slice(x, st, src + off, dst + off, nbytes);
        return 1;
    }

    shm_conn_t *rc = st->recv_peer >= 0 ? &comm->recv_conns[st->recv_peer] : NULL;
    shm_conn_t *sc = st->send_peer >= 0 ? &comm->send_conns[st->send_peer] : NULL;
    if ((rc && !rc->fifo) || (sc && !sc->fifo))
        CCL_FAIL(CCL_ERR_INTERNAL, "schedule uses a connection to rank %d that does not exist",
                 rc && !rc->fifo ? st->recv_peer : st->send_peer);
    /* A whole-step reference went with the first slice: nothing to send. */
    int whole_out = exec_sends_whole(x, st, sc, total);
    if (whole_out && k > 0) {
        if (fault_armed)
            CCL_TRY(fault_on_slice(comm)); /* injected faults count slices alike either way */
        return 1;
    }
    if (rc && !shm_recv_ready(rc))
        return 0;
    const void *in = NULL;
    void *out = NULL;
    wait_policy_t now = {NULL, NULL, 0, 0}; /* ready: these return at once */
    shm_ref_t ref;
    int ref_in = 0, whole_in = 0, owner = -1, copy = 1;
    shm_help_t *help = NULL;
    if (rc) {
        CCL_TRY(shm_recv_wait(rc, &now, &in));
        if ((ref_in = shm_recv_is_ref(rc))) {
            memcpy(&ref, in, sizeof ref);
            /* Longer than a slot: it can only be the whole step's. */
            whole_in = total > comm->slot_size && ref.len == total;
        }
    }
    if (whole_in) {
        help = shm_help_of((void *)in);
        if (k == 0)
            exec_help_decide(x, st, rc, help, dst, total);
        if (atomic_load_explicit(&help->state, memory_order_relaxed) == SHM_HELP_OFFERED)
            copy = shm_help_reader_claim(help, (uint32_t)k, (uint32_t)sched_step_slices(st, esz, comm->slot_size));
        else
            help = NULL;
    }
    /* A broadcast passes the root's whole-step reference on instead of its
     * own copy: every rank then reads the root's buffer, none waits for the
     * rank before it to have copied a slice. */
    int forward = whole_in && exec_may_forward(x, st, sc);
    if (forward && k > 0)
        sc = NULL;
    if (sc && !shm_send_ready(sc))
        return 0;
    if (fault_armed)
        CCL_TRY(fault_on_slice(comm));
    if (sc)
        CCL_TRY(shm_send_wait(sc, &now, &out));
    /* Both ends cut a step into the same slices: another length means the
     * peer runs another call (or another count) than we do. A whole-step
     * reference stays in its slot for every slice of the step. */
    if (rc && !whole_in && shm_recv_len(rc) != nbytes)
        CCL_FAIL(CCL_ERR_MISMATCH, "rank %d sent %zu bytes where this rank expected %zu: "
                 "the ranks called different collectives or counts", st->recv_peer, shm_recv_len(rc), nbytes);
    if (ref_in && !copy)
        CCL_TRY(exec_ref_owner(comm, st->recv_peer, &ref, &owner)); /* the poster copies this slice */
    else if (ref_in)
        CCL_TRY(exec_read_ref(x, st, &ref, whole_in ? off : SIZE_MAX, nbytes, &in, &owner));
    /* The outgoing data lies in a user buffer for SEND (src) and for the
     * steps that also keep what they send (dst); only there can it go by
     * reference: to a local peer if the buffer is registered (it maps it),
     * to the net proxy always (it sends straight from it). */
    const char *ref_data = NULL;
    int from_send = 0;
    if (sc && st->action == SCHED_SEND) {
        ref_data = src + off;
        from_send = st->src_buf == SCHED_BUF_SEND;
    } else if (sc && (st->action == SCHED_RECV_COPY_SEND || st->action == SCHED_RECV_REDUCE_COPY_SEND)) {
        ref_data = dst + off;
    }
    int by_ref = !forward && ref_data && (from_send ? x->send_refs : x->recv_refs) &&
                 (sc->via_net ? x->net_refs : (from_send ? x->send_reg : x->recv_reg));
    if (copy && help && rc->help_twin) { /* a plain receive, into our buffer and the poster's twin */
        exec_twin_copy(dst + off, rc->help_twin + off, in, nbytes, x->stream_twin);
        shm_help_reader_done(help);
    } else if (copy) { /* else the poster copies this slice (shm_help.h) */
        exec_slice(st, x, in, by_ref || forward ? NULL : out, src ? src + off : NULL, dst ? dst + off : NULL, nbytes);
    }
    if (rc && (!whole_in || off + nbytes == total)) {
        if (help)
            CCL_TRY(exec_help_wait(x, st, rc, help));
        if (whole_in)
            CCL_TRY(exec_owner_check(comm, owner));
        if (forward)
            rc->held = st->send_peer + 1; /* consumed by exec_drain, after our forwarded copy */
        else
            shm_recv_done(rc);
    }
    if (sc && forward) {
        memcpy(out, &ref, sizeof ref);
        shm_help_init(shm_help_of(out)); /* our reader claims every slice: we do not help */
        shm_send_post(sc, SHM_SLOT_REF, nbytes);
        x->sent_refs = 1;
    } else if (sc && by_ref) {
        exec_post_ref(x, sc, out, from_send, ref_data, whole_out ? total : nbytes, nbytes,
                      whole_out && st - x->sched->steps == x->twin_send);
    } else if (sc) {
        shm_send_post(sc, SHM_SLOT_DATA, nbytes);
    }
out:
    if (res != CCL_SUCCESS) {
        err_prefix("%s %s step (slice %zu): ", sched_coll_name(a->coll), sched_action_name(st->action), k);
        x->res = res;
        return -1;
    }
    return 1;
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
static void exec_twin_init(exec_ctx_t *x)
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
        const shm_conn_t *sc = st->send_peer >= 0 ? &x->comm->send_conns[st->send_peer] : NULL;
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

static int exec_receives(const sched_t *s)
{
    for (int i = 0; i < s->nsteps; i++)
        if (s->steps[i].recv_peer >= 0)
            return 1;
    return 0;
}

static void exec_ctx_init(exec_ctx_t *x, struct ccl_comm *comm, const coll_args_t *a, sched_t *sched, int sole_call)
{
    *x = (exec_ctx_t){.comm = comm, .args = a, .esz = dev_dtype_size(a->dtype), .scratch = comm->scratch,
                      .premul_buf = (char *)comm->scratch + comm->slot_size, .sole_call = sole_call,
                      .twin_step = -1, .twin_send = -1, .sched = sched};
    size_t send_bytes = a->send_bytes, recv_bytes = a->recv_bytes;
    size_t stream = a->coll == SCHED_ALLGATHER || a->coll == SCHED_BROADCAST ? comm->stream_copies_from
                                                                              : comm->stream_threshold;
    x->stream_out = stream > 0 && recv_bytes >= stream;
    x->stream_twin = stream > 0 && recv_bytes >= (stream < EXEC_TWIN_STREAM_MAX ? stream : EXEC_TWIN_STREAM_MAX);
    if (sched->no_refs)
        return;
    /* A reference is safe only to memory that stays unchanged until the
     * peer has read it (or the net proxy has sent it). Results (dst of a
     * step) are final once written; the send buffer is too, unless the call
     * is in place and its schedule may overwrite input while a peer still
     * reads it. A premultiplied input exists only in our slot. */
    const char *s = a->sendbuf, *r = a->recvbuf;
    int overlap = send_bytes && recv_bytes && s < r + recv_bytes && r < s + send_bytes;
    int overwritten = overlap && !sched->send_refs_safe_in_place;
    x->send_refs = send_bytes && !overwritten && !a->premul;
    x->recv_refs = recv_bytes != 0;
    size_t bytes = send_bytes > recv_bytes ? send_bytes : recv_bytes;
    x->net_refs = comm->net_zero_copy_threshold > 0 && bytes >= comm->net_zero_copy_threshold;
    size_t single_copy = comm->single_copy_from[a->coll];
    if (single_copy > 0 && bytes >= single_copy) {
        x->send_reg = x->send_refs && mem_find(a->sendbuf, send_bytes, &x->send_ref);
        x->recv_reg = x->recv_refs && mem_find(a->recvbuf, recv_bytes, &x->recv_ref);
        /* Whole-step references need to know which steps have a
         * connection to themselves; a broadcast may receive one. */
        if (sole_call && (x->send_reg || a->coll == SCHED_BROADCAST))
            sched_mark_sole_sends(sched);
        /* With more ranks than cores a helper preempted inside a slice
         * holds up its reader, but a rank with nothing to receive (a star
         * broadcast's root, a gather's senders) would only wait: its help
         * made 4-rank gathers 15-23% faster at 4-64 MiB on the 2-core VM,
         * the star broadcast 1.4x (perf/RESULTS.md). */
        x->copy_help = comm->copy_help || (comm->copy_help_idle && !exec_receives(sched));
        exec_twin_init(x);
    }
}

/* The executor's view of one job while it runs. */
typedef struct {
    const exec_job_t *job;
    exec_ctx_t *ctx;   /* per call */
    eng_op_t *eops;    /* per call */
    eng_job_t eng;
    void *arena;       /* engine state (the comm's own for a single job) */
    size_t arena_cap;
    int done;
    ccl_result_t res;
} exec_run_t;

static int exec_try(void *p, int op, const sched_step_t *st, size_t slice)
{
    exec_run_t *run = p;
    int rc = exec_step_slice(&run->ctx[op], st, slice);
    if (rc < 0)
        run->res = run->ctx[op].res;
    return rc;
}

/* Our steps are done but a peer still reads a whole step of our buffer:
 * once it says where the data goes (its first slice), copy slices from
 * the back until we meet it (shm_help.h). A reader whose call fails takes
 * the slices left (exec_help_close), which ends this loop. With a twin
 * (our own copy of those bytes) every slice we copy goes there too; if
 * the reader declined, we copy the twin alone. */
static ccl_result_t exec_help(struct ccl_comm *comm, int p)
{
    ccl_result_t res = CCL_SUCCESS;
    shm_conn_t *sc = &comm->send_conns[p];
    shm_help_t *help = shm_help_of(shm_slot_at(sc, sc->lent_pos));
    const char *src = sc->lent_src;
    char *twin = sc->lent_twin;
    int exchange = sc->lent_exchange, twin_stream = sc->lent_stream;
    size_t total = sc->lent_len, slot = comm->slot_size;
    sc->lent_len = 0;
    sc->lent_twin = NULL;
    exec_wait_ctx_t ctx = {comm, p, "send to", 0, 0};
    wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
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
        if (fault_armed && (res = fault_on_slice(comm)) != CCL_SUCCESS) {
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

/* Peers may still be reading our buffers through references: a call is
 * complete only when they have consumed every slot we sent. */
static ccl_result_t exec_drain(exec_run_t *run)
{
    struct ccl_comm *comm = run->job->comm;
    int refs = 0;
    for (int c = 0; c < run->job->ncalls; c++)
        refs |= run->ctx[c].sent_refs;
    /* Help every reader first: each meanwhile copies on its own. From
     * rank+1 on: the first send's reader, which shares our own copy (the
     * twin of a star broadcast or pairwise allgather) and so writes twice. */
    for (int i = 1, n = comm->nranks; refs && i <= n; i++) {
        int p = (comm->rank + i) % n;
        if (!comm->send_conns[p].fifo || !comm->send_conns[p].lent_len)
            continue;
        ccl_result_t res = exec_help(comm, p);
        if (res != CCL_SUCCESS)
            return res;
    }
    /* A forwarded reference first: once the rank we passed it to is done
     * with it, the rank that passed it to us may return. */
    for (int p = 0; refs && p < comm->nranks; p++) {
        shm_conn_t *rc = &comm->recv_conns[p];
        if (!rc->fifo || !rc->held)
            continue;
        exec_wait_ctx_t ctx = {comm, rc->held - 1, "send to", 0, 0};
        wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
        ccl_result_t res = shm_send_drain(&comm->send_conns[rc->held - 1], &pol);
        if (res != CCL_SUCCESS)
            return res;
        rc->held = 0;
        shm_recv_done(rc);
    }
    for (int p = 0; refs && p < comm->nranks; p++) {
        if (!comm->send_conns[p].fifo)
            continue;
        exec_wait_ctx_t ctx = {comm, p, "send to", 0, 0};
        wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
        ccl_result_t res = shm_send_drain(&comm->send_conns[p], &pol);
        if (res != CCL_SUCCESS)
            return res;
        comm->send_conns[p].twin_open = 0; /* the reader is done with our twin */
    }
    return CCL_SUCCESS;
}

/* Nothing could run: wait for the first step that was not ready. When
 * other steps wait too, come back after a few ms to re-check them, since
 * they may become ready first. */
static ccl_result_t exec_wait(exec_run_t *run, const eng_sweep_t *sw, int others, uint64_t idle_since)
{
    struct ccl_comm *comm = run->job->comm;
    const sched_step_t *st = &run->job->scheds[sw->wait_op].steps[sw->wait_step];
    shm_conn_t *rc = st->recv_peer >= 0 ? &comm->recv_conns[st->recv_peer] : NULL;
    shm_conn_t *sc = st->send_peer >= 0 ? &comm->send_conns[st->send_peer] : NULL;
    int recv = rc && !shm_recv_ready(rc);
    if (!recv && !(sc && !shm_send_ready(sc)))
        return CCL_SUCCESS; /* it became ready since the sweep */
    int peer = recv ? st->recv_peer : st->send_peer;
    exec_wait_ctx_t ctx = {comm, peer, recv ? "receive from" : "send to", idle_since, others};
    wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
    const void *in;
    void *out;
    ccl_result_t res = recv ? shm_recv_wait(rc, &pol, &in) : shm_send_wait(sc, &pol, &out);
    return res == CCL_IN_PROGRESS ? CCL_SUCCESS : res;
}

ccl_result_t exec_host_run(exec_job_t *jobs, int njobs, int *failed)
{
    ccl_result_t res = CCL_SUCCESS;
    exec_run_t one_run;
    exec_ctx_t one_ctx;
    eng_op_t one_eop;
    exec_run_t *runs = &one_run;
    *failed = 0;
    if (njobs <= 0)
        return CCL_SUCCESS;
    /* One call on one comm (the common case) allocates nothing, nor does a
     * small group (a send/recv pair). */
    int single = njobs == 1 && jobs[0].ncalls == 1;
    exec_run_t runs_inline[COMM_GROUP_INLINE];
    exec_ctx_t ctxs_inline[COMM_GROUP_INLINE];
    eng_op_t eops_inline[COMM_GROUP_INLINE];
    int total = 0;
    for (int j = 0; j < njobs; j++)
        total += jobs[j].ncalls;
    int on_stack = total <= COMM_GROUP_INLINE; /* njobs <= total */
    if (!single) {
        exec_ctx_t *ctxs;
        eng_op_t *eops;
        if (on_stack) {
            runs = memset(runs_inline, 0, (size_t)njobs * sizeof *runs);
            ctxs = memset(ctxs_inline, 0, (size_t)total * sizeof *ctxs);
            eops = memset(eops_inline, 0, (size_t)total * sizeof *eops);
        } else {
            runs = calloc((size_t)njobs, sizeof *runs);
            ctxs = calloc((size_t)total, sizeof *ctxs);
            eops = calloc((size_t)total, sizeof *eops);
            if (!runs || !ctxs || !eops) {
                free(runs);
                free(ctxs);
                free(eops);
                return err_set(CCL_ERR_SYSTEM, "out of memory for a group of %d calls", total);
            }
        }
        for (int j = 0, at = 0; j < njobs; at += jobs[j].ncalls, j++) {
            runs[j].ctx = ctxs + at;
            runs[j].eops = eops + at;
        }
    } else {
        one_run = (exec_run_t){.ctx = &one_ctx, .eops = &one_eop};
    }
    for (int j = 0; j < njobs; j++) {
        exec_run_t *run = &runs[j];
        struct ccl_comm *comm = jobs[j].comm;
        run->job = &jobs[j];
        for (int c = 0; c < jobs[j].ncalls; c++) {
            exec_ctx_init(&run->ctx[c], comm, &jobs[j].calls[c], (sched_t *)&jobs[j].scheds[c], single);
            run->eops[c] = (eng_op_t){.sched = &jobs[j].scheds[c], .elem_size = run->ctx[c].esz};
        }
        /* Every comm in this job list is locked by us: its arena is free. */
        run->arena = comm->eng_arena;
        run->arena_cap = comm->eng_arena_cap;
        res = eng_job_setup(&run->eng, run->eops, jobs[j].ncalls, comm->nranks, comm->slot_size,
                            &run->arena, &run->arena_cap);
        comm->eng_arena = run->arena;
        comm->eng_arena_cap = run->arena_cap;
        run->eng.window = comm->eng_window;
        if (res != CCL_SUCCESS) {
            *failed = j;
            goto out;
        }
    }
    int remaining = njobs;
    uint64_t idle_since = 0;
    while (remaining > 0) {
        eng_sweep_t first = {0};
        int first_job = -1, nwaiting = 0;
        long ran = 0;
        for (int j = 0; j < njobs; j++) {
            exec_run_t *run = &runs[j];
            if (run->done)
                continue;
            eng_sweep_t sw;
            if (eng_sweep(&run->eng, exec_try, run, &sw) < 0) {
                res = run->res;
                *failed = j;
                goto out;
            }
            ran += sw.ran;
            nwaiting += sw.nwaiting;
            if (eng_job_done(&run->eng)) {
                run->done = 1;
                remaining--;
                res = exec_drain(run);
                if (res != CCL_SUCCESS) {
                    *failed = j;
                    goto out;
                }
            } else if (first_job < 0 && sw.wait_op >= 0) {
                first = sw;
                first_job = j;
            }
        }
        if (remaining == 0)
            break;
        if (ran > 0) {
            idle_since = 0;
            continue;
        }
        if (first_job < 0) {
            res = err_set(CCL_ERR_INTERNAL, "executor: no step can run and none waits on a connection");
            goto out;
        }
        if (!idle_since)
            idle_since = clock_now_ns();
        res = exec_wait(&runs[first_job], &first, nwaiting > 1, idle_since);
        if (res != CCL_SUCCESS) {
            *failed = first_job;
            goto out;
        }
    }
out:
    for (int j = 0; res != CCL_SUCCESS && j < njobs; j++)
        exec_abandon_close(jobs[j].comm);
    for (int j = 0; res != CCL_SUCCESS && j < njobs; j++)
        exec_abandon_wait(jobs[j].comm);
    for (int j = 0; j < njobs; j++) {
        for (int c = 0; c < jobs[j].ncalls && runs[j].ctx; c++)
            if (runs[j].ctx[c].stream_out || runs[j].ctx[c].stream_twin) {
                dev_copy_fence(); /* streamed stores are ordered before we return */
                break;
            }
    }
    if (!single && !on_stack) {
        free(runs[0].ctx);
        free(runs[0].eops);
        free(runs);
    }
    return res;
}


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
    wait_policy_t pol = {exec_wait_check, &ctx, comm->spin, comm->yield};
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
    ccl_result_t res = shm_board_exchange(&comm->board, post, send_bytes, exec_board_bytes(a, n), wait_for, root,
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
    shm_board_release(&comm->board);
    return CCL_SUCCESS;
}
