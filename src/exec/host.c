/*
 * host.c - the host executor: runs schedules over host buffers and the
 * comm's shm connections, on the calling thread.
 *
 * Every step is cut into slices of one connection slot, so a long step
 * streams through the FIFO and the next rank starts on the first slice while
 * we work on the second. Each slice is a single pass over memory: a fused
 * action reads its inputs once and writes all of its outputs. Which slice
 * runs next is the engine's decision (algos/engine.h); this file tries the
 * slices and waits, when nothing can run, for the first one that was not
 * ready. Where a slice's data goes by reference instead of through the slot
 * is host_single_copy.c's; what ends a wait when a peer fails, failure.c's.
 */
#include "exec/host.h"
#include "exec/exec.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/mem.h"
#include "exec/fault.h"
#include "device/copy.h"
#include "device/reduce.h"
#include "transport/net.h"
#include "transport/shm_help.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

    shm_conn_t *rc = st->recv_peer >= 0 ? &comm->mesh.recv[st->recv_peer] : NULL;
    shm_conn_t *sc = st->send_peer >= 0 ? &comm->mesh.send[st->send_peer] : NULL;
    if ((rc && !rc->fifo) || (sc && !sc->fifo))
        CCL_FAIL(CCL_ERR_INTERNAL, "schedule uses a connection to rank %d that does not exist",
                 rc && !rc->fifo ? st->recv_peer : st->send_peer);
    /* A whole-step reference went with the first slice: nothing to send. */
    int whole_out = exec_sends_whole(x, st, sc, total);
    if (whole_out && k > 0) {
        if (fault_armed)
            CCL_TRY(fault_on_slice(comm, comm->rank)); /* injected faults count slices alike either way */
        return 1;
    }
    if (rc && !shm_recv_ready(rc))
        return 0;
    const void *in = NULL;
    void *out = NULL;
    wait_policy_t now = {NULL, NULL, 0, 0, NULL, NULL}; /* ready: these return at once */
    shm_ref_t ref;
    int ref_in = 0, whole_in = 0, owner = -1, copy = 1;
    shm_help_t *help = NULL;
    if (rc) {
        CCL_TRY(shm_recv_wait(rc, &now, &in));
        if (rc->crcs && (res = shm_recv_verify(rc)) != CCL_SUCCESS) {
            err_prefix("rank %d (%s): data from rank %d (%s) over shared memory: ", comm->rank,
                       comm->bs.peers[comm->rank].hostname, st->recv_peer, comm->bs.peers[st->recv_peer].hostname);
            goto out;
        }
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
        CCL_TRY(fault_on_slice(comm, comm->rank));
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

/* How a wait of this run waits: with the comm's spin and yield, checking
 * for failures, and moving the net's messages itself where the transport
 * lets it (net_drive), since the proxy leaves them to us during the call:
 * a wait that did not drive would sleep until the proxy's next look. */
static wait_policy_t exec_wait_policy(exec_wait_ctx_t *ctx)
{
    struct ccl_comm *comm = ctx->comm;
    wait_policy_t pol = {exec_wait_check, ctx, comm->spin, comm->yield, NULL, NULL};
    if (net_drivable(comm->mesh.net)) {
        pol.drive = net_drive;
        pol.drive_arg = comm->mesh.net;
    }
    return pol;
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
        if (!comm->mesh.send[p].fifo || !comm->mesh.send[p].lent_len)
            continue;
        ccl_result_t res = exec_help(comm, p);
        if (res != CCL_SUCCESS)
            return res;
    }
    /* A forwarded reference first: once the rank we passed it to is done
     * with it, the rank that passed it to us may return. */
    for (int p = 0; refs && p < comm->nranks; p++) {
        shm_conn_t *rc = &comm->mesh.recv[p];
        if (!rc->fifo || !rc->held)
            continue;
        exec_wait_ctx_t ctx = {comm, rc->held - 1, "send to", 0, 0};
        wait_policy_t pol = exec_wait_policy(&ctx);
        ccl_result_t res = shm_send_drain(&comm->mesh.send[rc->held - 1], &pol);
        if (res != CCL_SUCCESS)
            return res;
        rc->held = 0;
        shm_recv_done(rc);
    }
    for (int p = 0; refs && p < comm->nranks; p++) {
        if (!comm->mesh.send[p].fifo)
            continue;
        exec_wait_ctx_t ctx = {comm, p, "send to", 0, 0};
        wait_policy_t pol = exec_wait_policy(&ctx);
        ccl_result_t res = shm_send_drain(&comm->mesh.send[p], &pol);
        if (res != CCL_SUCCESS)
            return res;
        comm->mesh.send[p].twin_open = 0; /* the reader is done with our twin */
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
    shm_conn_t *rc = st->recv_peer >= 0 ? &comm->mesh.recv[st->recv_peer] : NULL;
    shm_conn_t *sc = st->send_peer >= 0 ? &comm->mesh.send[st->send_peer] : NULL;
    int recv = rc && !shm_recv_ready(rc);
    if (!recv && !(sc && !shm_send_ready(sc)))
        return CCL_SUCCESS; /* it became ready since the sweep */
    int peer = recv ? st->recv_peer : st->send_peer;
    exec_wait_ctx_t ctx = {comm, peer, recv ? "receive from" : "send to", idle_since, others};
    wait_policy_t pol = exec_wait_policy(&ctx);
    const void *in;
    void *out;
    ccl_result_t res = recv ? shm_recv_wait(rc, &pol, &in) : shm_send_wait(sc, &pol, &out);
    return res == CCL_IN_PROGRESS ? CCL_SUCCESS : res;
}

/* Steps just ran: what they posted to a driven net leaves now, not when
 * we next wait (a receive that is already there would not wait at all,
 * and the message would sit until the call ends). */
static void exec_drive_posted(const exec_run_t *runs, int njobs)
{
    for (int j = 0; j < njobs; j++)
        if (!runs[j].done && net_drivable(runs[j].job->comm->mesh.net))
            net_drive(runs[j].job->comm->mesh.net);
}

static ccl_result_t exec_host_run_jobs(exec_job_t *jobs, int njobs, int *failed)
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
            exec_drive_posted(runs, njobs);
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

/* The calling thread moves its net messages itself while it waits
 * (net_drive): no proxy hand-off on the path of a small message. */
ccl_result_t exec_host_run(exec_job_t *jobs, int njobs, int *failed)
{
    for (int j = 0; j < njobs; j++)
        net_drive_begin(jobs[j].comm->mesh.net);
    ccl_result_t res = exec_host_run_jobs(jobs, njobs, failed);
    for (int j = 0; j < njobs; j++)
        net_drive_end(jobs[j].comm->mesh.net, res == CCL_SUCCESS);
    return res;
}
