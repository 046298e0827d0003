/*
 * connect_p2p_watch.c - a thread per communicator whose calls run on the GPU over
 * P2P (exec/device.c) that looks for peers that will never come.
 *
 * A call on the P2P path is work queued on a stream: waits on counters
 * that the peers' GPUs move, kernels, counter writes. On the host path a
 * wait notices a failed or dead peer itself (exec_wait_check); a stream
 * cannot, so without this thread a rank of the host that dies leaves the
 * others' streams waiting until the application calls ccl_comm_abort (as
 * NCCL's kernels do), and a blocking call (NULL stream) never returns.
 *
 * While the GPU has this communicator's work pending, the thread asks what
 * every host wait asks (exec_local_failure: abort, a local rank that
 * failed or exited, the network), except that a rank that closed the
 * communicator in order before it exited is no failure: it had finished
 * everything it queued, and our GPU may still be consuming what it sent.
 * When something is found it breaks the
 * communicator as a failed call does: the error goes to
 * ccl_comm_get_async_error, to the blocking call that waits (if any) and
 * to every later call; the peers are told (connect_poison); and the stream
 * waits are released until the GPU has finished what was queued, so that
 * cudaStreamSynchronize returns. What those calls wrote is garbage; the
 * error says the communicator failed.
 *
 * The thread looks every WATCH_PERIOD_US and only takes exec_lock with a
 * trylock, so a collective that holds the lock is never held up by it and
 * a teardown that holds it can stop (join) the thread.
 */
#include "core/comm_state.h"
#include "core/connect.h"
#include "exec/exec.h"
#include "base/err.h"
#include "base/log.h"

#include <string.h>
#include <unistd.h>

#define WATCH_PERIOD_US 20000

/* One look, under exec_lock. */
static void watch_look(struct ccl_comm *comm)
{
    comm_p2p_t *p = &comm->p2p;
    /* Written under p2p_queue_lock, which a call holds while it queues. */
    void *done = __atomic_load_n(&p->done, __ATOMIC_ACQUIRE);
    if (!done || dev_event_done(done) != 0)
        return; /* nothing queued, or all of it finished (or the query failed: the next call says so) */
    if (!comm->broken && !atomic_load(&comm->aborted)) {
        ccl_result_t res = exec_local_failure(comm, 0, comm->nranks - 1, 1, "run P2P work on the GPU");
        if (res == CCL_SUCCESS)
            return;
        LOG_WARN(SUB_P2P, "%s; releasing this communicator's stream waits (results of its queued calls are "
                 "undefined)", err_message());
        /* The message first: whoever sees broken_code reads it. */
        comm_record_error(comm);
        comm->broken = 1;
        atomic_store(&comm->broken_code, res);
        connect_poison(comm, err_message());
    }
    /* Broken or aborted: the peers' streams may still move the counters
     * back, so the release is repeated until our GPU is done. */
    connect_p2p_release(comm);
}

static void *watch_main(void *arg)
{
    struct ccl_comm *comm = arg;
    log_set_rank(comm->rank);
    while (!atomic_load(&comm->p2p.watch_stop)) {
        usleep(WATCH_PERIOD_US);
        if (!exec_trylock(&comm->exec_lock))
            continue;
        watch_look(comm);
        exec_unlock(&comm->exec_lock);
    }
    return NULL;
}

ccl_result_t watch_p2p_start(struct ccl_comm *comm)
{
    comm_p2p_t *p = &comm->p2p;
    if (p->watching)
        return CCL_SUCCESS;
    atomic_store(&p->watch_stop, 0);
    int e = pthread_create(&p->watch, NULL, watch_main, comm);
    if (e != 0)
        return err_set(CCL_ERR_SYSTEM, "starting the P2P watch thread failed: %s", strerror(e));
    p->watching = 1;
    return CCL_SUCCESS;
}

void watch_p2p_stop(struct ccl_comm *comm)
{
    comm_p2p_t *p = &comm->p2p;
    if (!p->watching)
        return;
    atomic_store(&p->watch_stop, 1);
    pthread_join(p->watch, NULL);
    p->watching = 0;
}
