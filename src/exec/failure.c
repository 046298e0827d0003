/*
 * failure.c - what ends an executor's wait when something went wrong: a
 * local peer that died or failed (its pid, its reason on the board), an
 * abort, a failed network, or CCL_TIMEOUT without progress, with a message
 * that names the rank behind. Every executor (host, pair, one-shot board)
 * waits through exec_wait_check.
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
        if (shm_conn_poisoned(&comm->mesh.recv[q]) || shm_conn_poisoned(&comm->mesh.send[q]))
            continue;
        if (closed_ok && (shm_conn_closed(&comm->mesh.recv[q]) || shm_conn_closed(&comm->mesh.send[q])))
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
        if (shm_conn_poison_why(&comm->mesh.recv[q], buf, len) ||
            shm_conn_poison_why(&comm->mesh.send[q], buf, len))
            return buf;
    }
    return NULL;
}

ccl_result_t exec_local_failure(struct ccl_comm *comm, int first, int last, int closed_ok, const char *what)
{
    if (atomic_load(&comm->aborted))
        return err_set(CCL_ERR_ABORTED, "communicator aborted while we waited to %s", what);
    if (comm->mesh.net && net_failed(comm->mesh.net)) {
        /* Often the echo of a local rank's death (remote peers noticed it
         * first and closed their connections): that rank is the cause. */
        int q = exec_dead_local(comm, 0, comm->nranks - 1, 0);
        if (q >= 0)
            return err_set(err_remote_code(net_error(comm->mesh.net)),
                           "rank %d (pid %d on %s) exited; then the network failed: %s", q,
                           (int)comm->bs.peers[q].pid, comm->bs.peers[q].hostname, net_error(comm->mesh.net));
        return err_set(err_remote_code(net_error(comm->mesh.net)), "%s", net_error(comm->mesh.net));
    }
    /* The dead first (see exec_dead_local): a rank that poisons, then
     * exits, between the two looks is found by its reason. */
    int q = exec_dead_local(comm, first, last, closed_ok);
    char why[1024];
    if (exec_local_poison(comm, why, sizeof why))
        return err_set(err_remote_code(why), "%s", why);
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
    if (idle > comm->bs.timeout_ns && comm->mesh.board.hdr) {
        /* The rank we wait for may itself wait for one that stopped
         * calling collectives: name that one. */
        int behind[4];
        uint64_t at[4];
        int nb = shm_board_behind(&comm->mesh.board, comm->coll_calls, behind, at, 4);
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
