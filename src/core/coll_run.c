/*
 * coll_run.c - runs checked calls now, on the calling thread: one call, or
 * a group's calls over several comms. It turns each call into a schedule
 * (or the pair or one-shot board path the registry names), locks the comms
 * in the order every rank agrees on, optionally cross-checks the arguments
 * (CCL_CHECK_ARGS, coll_run_check.c) and afterwards the results
 * (CCL_VERIFY, coll_run_verify.c), and on failure poisons the comms'
 * connections so that no peer waits for its timeout.
 */
#include "core/coll_run.h"
#include "core/comm_state.h"
#include "core/connect.h"
#include "core/tuner.h"
#include "algos/registry.h"
#include "exec/exec.h"
#include "exec/fault.h"
#include "base/err.h"
#include "device/reduce.h"

#include <stdlib.h>
#include <string.h>

void coll_args_size(coll_args_t *a)
{
    size_t esz = dev_dtype_size(a->dtype), s, r;
    sched_op_t op = {a->coll, a->count, esz, a->comm->nranks, a->comm->rank, a->root, NULL};
    sched_op_extent(&op, &s, &r);
    a->send_bytes = s * esz;
    a->recv_bytes = r * esz;
}

static ccl_result_t coll_schedule(struct ccl_comm *comm, const coll_args_t *a, algo_t algo, sched_t *out)
{
    size_t esz = dev_dtype_size(a->dtype);
    sched_op_t op = {a->coll, a->count, esz, comm->nranks, comm->rank, a->root,
                     comm->layout.nnodes > 1 ? &comm->layout : NULL};
    return algo_schedule(&op, algo, out);
}

void coll_enter(struct ccl_comm *comm, const coll_args_t *a, uint64_t seq)
{
    if (a->coll != SCHED_P2P_SEND && a->coll != SCHED_P2P_RECV) {
        comm->coll_calls++;
        if (comm->mesh.board.hdr)
            shm_board_enter(&comm->mesh.board, comm->coll_calls);
    }
    fault_before_call(comm, comm->rank, comm->mesh.net, seq);
}

static void coll_fail_context(const coll_args_t *a, uint64_t seq, int ncalls)
{
    struct ccl_comm *comm = a->comm;
    if (ncalls > 1)
        err_prefix("rank %d: group of %d calls (first: %s) #%llu: ", comm->rank, ncalls,
                   sched_coll_name(a->coll), (unsigned long long)seq);
    else if (sched_coll_reduces(a->coll))
        err_prefix("rank %d: %s #%llu (%zu x %s, %s): ", comm->rank, sched_coll_name(a->coll),
                   (unsigned long long)seq, a->count, dev_dtype_name(a->dtype), dev_op_name(a->kop));
    else
        err_prefix("rank %d: %s #%llu (%zu x %s): ", comm->rank, sched_coll_name(a->coll),
                   (unsigned long long)seq, a->count, dev_dtype_name(a->dtype));
}

static int coll_cmp_comm(const void *x, const void *y)
{
    const coll_args_t *a = x, *b = y;
    return a->comm < b->comm ? -1 : a->comm > b->comm;
}

/* One call: the fast path (no allocation); the one-shot board is only
 * used here, since a group's calls progress together. */
ccl_result_t coll_run_one(coll_args_t *a)
{
    ccl_result_t res = CCL_SUCCESS;
    struct ccl_comm *comm = a->comm;
    int verify = 0;
    /* A blocking call is counted (comm_pending_add) whenever it uses the
     * comm outside the owner's path: while it waits for the mutex (a
     * destroy that took and dropped the lock before us must still wait
     * for us), and after its unlock. The owner's path never waits, and
     * destroy takes the lock before it waits for the count. */
    int counted = !exec_lock_owned(&comm->exec_lock);
    if (counted) {
        comm_pending_add(comm);
        exec_lock(&comm->exec_lock);
    }
    /* ccl's own calls (CCL_VERIFY's exchange) keep the user's numbering. */
    uint64_t seq = a->internal ? comm->seq : ++comm->seq;
    if (atomic_load(&comm->aborted))
        CCL_FAIL(CCL_ERR_ABORTED, "the communicator was aborted");
    if (comm->broken)
        CCL_FAIL(CCL_ERR_INVALID_USAGE, "an earlier collective on this communicator failed; "
                 "its connections are in an unknown state: destroy it and create a new one");
    if (!a->internal)
        coll_enter(comm, a, seq);
    if (a->premul_ptr)
        memcpy(a->premul_scalar, a->premul_ptr, dev_dtype_size(a->dtype));
    exec_job_t job = {comm, a, &comm->sched, 1};
    int failed = 0;
    if (comm->check_args && a->coll != SCHED_P2P_SEND && a->coll != SCHED_P2P_RECV) {
        res = check_args_run(&job, 1, &failed);
        if (res == CCL_ERR_MISMATCH)
            goto out; /* every rank knows: nothing was sent, the comm is fine */
        if (res != CCL_SUCCESS)
            goto broken;
    }
    size_t board = exec_board_bytes(a, comm->nranks);
    algo_t algo = tuner_pick(comm, a->coll, board, 0);
    algo_run_t run = algo_registry[algo].run;
    /* A premultiplied input lives in a slot-sized buffer, and each rank's
     * scalar is its own (the pair would need both): what a group runs. */
    if (a->premul && ((run == ALGO_RUN_BOARD && board > comm->slot_size) || run == ALGO_RUN_PAIR)) {
        algo = tuner_pick(comm, a->coll, board, 1);
        run = algo_registry[algo].run;
    }
    LOG_TRACE(SUB_COLL, "%s #%llu: %zu x %s, %s, algo %s", sched_coll_name(a->coll), (unsigned long long)seq,
              a->count, dev_dtype_name(a->dtype), dev_op_name(a->kop), tuner_algo_name(algo));
    int ran = 0;
    if (run == ALGO_RUN_PAIR) {
        res = exec_host_pair(comm, a, &ran);
        if (res == CCL_SUCCESS && !ran) { /* a rank's buffers are not ccl_mem_alloc ones: what a group would run */
            algo = tuner_pick(comm, a->coll, board, 1);
            run = algo_registry[algo].run;
            LOG_TRACE(SUB_COLL, "%s #%llu: pair declined, algo %s", sched_coll_name(a->coll),
                      (unsigned long long)seq, tuner_algo_name(algo));
        }
    }
    /* Unless the pair ran, or failed after its offer went out (broken
     * below): the registry says how the algorithm runs. */
    if (res == CCL_SUCCESS && !ran) {
        if (run == ALGO_RUN_BOARD) {
            res = exec_host_oneshot(comm, a);
        } else {
            CCL_TRY(coll_schedule(comm, a, algo, &comm->sched));
            res = exec_host_run(&job, 1, &failed);
        }
    }
    if (fault_armed)
        fault_run_done(comm, comm->rank);
    if (res == CCL_SUCCESS && !a->internal && (fault_armed || comm->verify_every)) {
        fault_after_call(comm->rank, seq, a->recvbuf, a->recv_bytes);
        verify = verify_due(comm, a);
    }
broken:
    if (res != CCL_SUCCESS) {
        /* Peers may be blocked on us mid-schedule: poison the connections
         * so they fail now rather than at their timeout. */
        comm->broken = 1;
        atomic_store(&comm->broken_code, res);
        connect_poison(comm, err_message());
    }
out:
    if (!counted && (verify || res != CCL_SUCCESS)) {
        comm_pending_add(comm); /* under the lock, which comm_pending_wait takes first */
        counted = 1;
    }
    exec_unlock(&comm->exec_lock);
    /* After the lock: the check is a collective of its own. */
    if (verify)
        res = verify_result(comm, a, seq);
    if (res != CCL_SUCCESS) {
        coll_fail_context(a, seq, 1);
        comm_record_error(comm);
    }
    if (counted)
        comm_pending_done(comm);
    return res;
}

/* Within one comm, collectives first (in call order), then send/recv (in
 * call order): every rank builds the same order even when the application
 * interleaves them differently, and sends to a peer still match its
 * receives in call order. */
static int coll_order_key(const coll_args_t *a)
{
    return a->coll == SCHED_P2P_SEND || a->coll == SCHED_P2P_RECV;
}

/* The comm's schedules for n grouped calls: kept from group to group, as
 * comm->sched is for single calls. Under the comm's exec_lock. */
static ccl_result_t coll_group_scheds(struct ccl_comm *comm, int n, sched_t **out)
{
    if (n > comm->group_scheds_cap) {
        sched_t *s = realloc(comm->group_scheds, (size_t)n * sizeof *s);
        if (!s)
            return err_set(CCL_ERR_SYSTEM, "out of memory for the schedules of a group of %d calls", n);
        memset(s + comm->group_scheds_cap, 0, (size_t)(n - comm->group_scheds_cap) * sizeof *s);
        comm->group_scheds = s;
        comm->group_scheds_cap = n;
    }
    *out = comm->group_scheds;
    return CCL_SUCCESS;
}

static ccl_result_t coll_run_group(const coll_args_t *in, int ncalls)
{
    ccl_result_t res = CCL_SUCCESS;
    coll_args_t calls_inline[COMM_GROUP_INLINE];
    exec_job_t jobs_inline[COMM_GROUP_INLINE];
    uint64_t seqs_inline[COMM_GROUP_INLINE];
    int small = ncalls <= COMM_GROUP_INLINE;
    coll_args_t *calls = small ? calls_inline : malloc((size_t)ncalls * sizeof *calls);
    exec_job_t *jobs = small ? jobs_inline : calloc((size_t)ncalls, sizeof *jobs);
    uint64_t *seqs = small ? seqs_inline : calloc((size_t)ncalls, sizeof *seqs);
    int njobs = 0, locked = 0, failed = -1;
    if (!calls || !jobs || !seqs)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for a group of %d calls", ncalls);
    /* Stable sort by (comm, order key): insertion keeps call order. */
    for (int i = 0; i < ncalls; i++) {
        int j = i;
        while (j > 0 && (coll_cmp_comm(&calls[j - 1], &in[i]) > 0 ||
                         (calls[j - 1].comm == in[i].comm &&
                          coll_order_key(&calls[j - 1]) > coll_order_key(&in[i])))) {
            calls[j] = calls[j - 1];
            j--;
        }
        calls[j] = in[i];
    }
    for (int i = 0; i < ncalls; i++) {
        if (njobs == 0 || jobs[njobs - 1].comm != calls[i].comm)
            jobs[njobs++] = (exec_job_t){calls[i].comm, &calls[i], NULL, 0}; /* schedules: once locked */
        jobs[njobs - 1].ncalls++;
    }
    /* Locks in address order (the sort's order): two threads running
     * groups over the same comms cannot deadlock on them. */
    for (; locked < njobs; locked++) {
        struct ccl_comm *comm = jobs[locked].comm;
        exec_lock(&comm->exec_lock);
        seqs[locked] = ++comm->seq;
        sched_t *scheds = NULL;
        if ((res = coll_group_scheds(comm, jobs[locked].ncalls, &scheds)) != CCL_SUCCESS) {
            failed = locked++;
            goto out; /* nothing was sent: the comm stays usable */
        }
        jobs[locked].scheds = scheds;
        for (int c = 0; c < jobs[locked].ncalls; c++)
            coll_enter(comm, &jobs[locked].calls[c], seqs[locked]);
        if (atomic_load(&comm->aborted)) {
            failed = locked++;
            CCL_FAIL(CCL_ERR_ABORTED, "the communicator was aborted");
        }
        if (comm->broken) {
            failed = locked++;
            CCL_FAIL(CCL_ERR_INVALID_USAGE, "an earlier collective on this communicator failed; "
                     "its connections are in an unknown state: destroy it and create a new one");
        }
    }
    int check = 0;
    for (int j = 0; j < njobs; j++) {
        check |= jobs[j].comm->check_args;
        for (int c = 0; c < jobs[j].ncalls; c++) {
            coll_args_t *a = (coll_args_t *)&jobs[j].calls[c];
            if (a->premul_ptr)
                memcpy(a->premul_scalar, a->premul_ptr, dev_dtype_size(a->dtype));
        }
    }
    if (check) {
        res = check_args_run(jobs, njobs, &failed);
        if (res == CCL_ERR_MISMATCH)
            goto out;
        if (res != CCL_SUCCESS)
            goto broken;
    }
    for (int j = 0; j < njobs; j++) {
        for (int c = 0; c < jobs[j].ncalls; c++) {
            const coll_args_t *a = &jobs[j].calls[c];
            algo_t algo = tuner_pick(a->comm, a->coll, exec_board_bytes(a, a->comm->nranks), 1);
            res = coll_schedule(a->comm, a, algo, (sched_t *)&jobs[j].scheds[c]);
            if (res != CCL_SUCCESS) {
                failed = j;
                goto broken;
            }
        }
    }
    res = exec_host_run(jobs, njobs, &failed);
    for (int j = 0; fault_armed && j < njobs; j++)
        fault_run_done(jobs[j].comm, jobs[j].comm->rank);
broken:
    if (res != CCL_SUCCESS) {
        for (int j = 0; j < njobs; j++) {
            jobs[j].comm->broken = 1;
            atomic_store(&jobs[j].comm->broken_code, res);
            connect_poison(jobs[j].comm, err_message());
        }
    }
out:
    for (int j = locked - 1; j >= 0; j--)
        exec_unlock(&jobs[j].comm->exec_lock);
    if (res != CCL_SUCCESS) {
        int f = failed >= 0 && failed < njobs ? failed : 0;
        if (njobs > 0) {
            coll_fail_context(jobs[f].calls, seqs[f], jobs[f].ncalls);
            for (int j = 0; j < njobs; j++)
                comm_record_error(jobs[j].comm);
        }
    }
    if (!small) {
        free(jobs);
        free(seqs);
        free(calls);
    }
    return res;
}

ccl_result_t coll_run(const coll_args_t *calls, int ncalls)
{
    if (ncalls == 1) {
        coll_args_t a = calls[0];
        return coll_run_one(&a);
    }
    return coll_run_group(calls, ncalls);
}

/* The same, on calls the caller lets us change (a stream's queued op): a
 * single call runs without a copy, whose wide loads of fields just
 * written with narrower stores would wait for the store buffer to drain
 * (exec_lock.c says what that costs). */
ccl_result_t coll_run_owned(coll_args_t *calls, int ncalls)
{
    return ncalls == 1 ? coll_run_one(calls) : coll_run_group(calls, ncalls);
}
