/*
 * connect_p2p.c - a communicator's P2P connections (transport/p2p.h): when
 * they are set up, how the ranks agree on them, and their end.
 *
 * Lazily, at the first device-buffer call that could use them (so host-only
 * users and communicators that never see a GPU pay nothing), every rank
 * runs the same three bootstrap rounds:
 *   1. each says whether it is willing (CCL_P2P_DISABLE unset, the driver
 *      offers stream memory operations, its GPU's UUID is known), its GPU,
 *      the slot size it wants and the name of its counters' page;
 *   2. if all are willing, each allocates the slots of its incoming FIFO,
 *      creates the page and sends the IPC handle; it says whether that
 *      worked and whether its GPU reaches its successor's (peer access);
 *   3. if all succeeded, each opens its successor's FIFO and says whether
 *      that worked.
 * Every rank sees every answer, so all reach the same verdict: P2P up, or
 * off for good with the first reason (logged at INFO, P2P subsystem), in
 * which case device calls keep the staged path. Every rank unlinks every
 * page name at the end, as mesh_connect_shm does (transport/mesh.c).
 *
 * What every rank knows without asking is checked first, with no exchange:
 * all ranks on one host, and no process hosting two of its ranks
 * (ccl_comm_init_all). The latter because the setup blocks the calling
 * thread in the bootstrap until every rank has made its first call, and one
 * thread may queue calls for several ranks of one process (the staged path
 * allows it): such communicators stay staged.
 *
 * Several ranks may share a GPU (NCCL refuses; one GPU then tests every
 * multi-rank device path): local rank 0 logs one WARN naming them.
 */
#include "core/comm_state.h"
#include "core/connect.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define P2P_WHY_MAX 200

typedef struct {
    int32_t willing;
    uint32_t nslots;
    uint64_t slot_size;
    unsigned char uuid[DEV_UUID_BYTES];
    char ctrl_name[SHM_NAME_MAX];
    char why[P2P_WHY_MAX];
} p2p_hello_t;

typedef struct {
    int32_t ok;
    int32_t pad;
    p2p_export_t exp;
    char why[P2P_WHY_MAX];
} p2p_offer_t;

typedef struct {
    int32_t ok;
    char why[P2P_WHY_MAX];
} p2p_ack_t;

static int p2p_mod(int a, int n) { return ((a % n) + n) % n; }

/* Why this comm can never use P2P, from what every rank knows alike; NULL
 * when it may. */
static const char *p2p_never(const struct ccl_comm *comm, char *buf, size_t len)
{
    if (!dev_cuda_built())
        return "this build has no CUDA";
    if (comm->layout.nnodes > 1)
        return "the ranks are on several hosts";
    for (int q = 0; q < comm->nranks; q++)
        for (int p = q + 1; p < comm->nranks; p++)
            if (comm->bs.peers[q].pid == comm->bs.peers[p].pid) {
                snprintf(buf, len, "ranks %d and %d live in one process (pid %d): the setup would block a "
                         "thread that may drive both", q, p, (int)comm->bs.peers[q].pid);
                return buf;
            }
    return NULL;
}

/* This rank's answer to round 1. */
static void p2p_hello(struct ccl_comm *comm, int device, p2p_hello_t *h)
{
    memset(h, 0, sizeof *h);
    int64_t bytes = param_int(PARAM_P2P_BUFFSIZE);
    uint32_t nslots = comm->nslots < 2 ? 2 : comm->nslots;
    h->nslots = nslots;
    h->slot_size = bytes > 0 ? (uint64_t)bytes / nslots / 256 * 256 : 0;
    if (h->slot_size < 256)
        h->slot_size = 256;
    if (param_int(PARAM_P2P_DISABLE))
        snprintf(h->why, sizeof h->why, "CCL_P2P_DISABLE=%lld", (long long)param_int(PARAM_P2P_DISABLE));
    else if (!dev_stream_memops())
        snprintf(h->why, sizeof h->why, "the CUDA driver offers no stream memory operations "
                 "(cuStreamWaitValue32/cuStreamWriteValue32)");
    else if (dev_uuid(device, h->uuid) != CCL_SUCCESS)
        snprintf(h->why, sizeof h->why, "%s", err_message());
    else if (shm_name_new(h->ctrl_name, "/ccl-") != CCL_SUCCESS)
        snprintf(h->why, sizeof h->why, "%s", err_message());
    else
        h->willing = 1;
}

/* One WARN on local rank 0 naming the ranks that share a GPU. */
static void p2p_warn_shared(const struct ccl_comm *comm, const p2p_hello_t *all)
{
    int n = comm->nranks;
    char text[1024];
    size_t at = 0;
    if (comm->local_rank != 0)
        return;
    unsigned char *seen = calloc((size_t)n, 1);
    if (!seen)
        return;
    for (int q = 0; q < n; q++) {
        if (seen[q])
            continue;
        int shared = 0;
        for (int p = q + 1; p < n; p++)
            if (memcmp(all[q].uuid, all[p].uuid, DEV_UUID_BYTES) == 0)
                shared = seen[p] = 1;
        if (!shared)
            continue;
        at += (size_t)snprintf(text + at, at < sizeof text ? sizeof text - at : 0, "%sranks %d", at ? "; " : "", q);
        for (int p = q + 1; p < n; p++)
            if (memcmp(all[q].uuid, all[p].uuid, DEV_UUID_BYTES) == 0)
                at += (size_t)snprintf(text + at, at < sizeof text ? sizeof text - at : 0, ",%d", p);
        at += (size_t)snprintf(text + at, at < sizeof text ? sizeof text - at : 0, " share GPU %02x%02x%02x%02x",
                               all[q].uuid[0], all[q].uuid[1], all[q].uuid[2], all[q].uuid[3]);
    }
    free(seen);
    if (at)
        LOG_WARN(SUB_P2P, "P2P: %s (allowed, unlike NCCL: their kernels take turns on one GPU)", text);
}

/* The first rank whose answer is not ok, -1 if none; *why its reason. */
static int p2p_first_no(const void *all, size_t size, size_t why_at, int n, const char **why)
{
    for (int q = 0; q < n; q++) {
        const char *rec = (const char *)all + (size_t)q * size;
        if (!*(const int32_t *)rec) {
            char *w = (char *)rec + why_at;
            w[P2P_WHY_MAX - 1] = '\0'; /* whatever a peer sent */
            *why = w;
            return q;
        }
    }
    return -1;
}

static void p2p_off(struct ccl_comm *comm, int who, const char *why)
{
    __atomic_store_n(&comm->p2p.state, COMM_P2P_OFF, __ATOMIC_RELEASE);
    if (comm->rank == 0) {
        if (who >= 0)
            LOG_INFO(SUB_P2P, "P2P: off, device buffers are staged through host memory: rank %d: %s", who, why);
        else
            LOG_INFO(SUB_P2P, "P2P: off, device buffers are staged through host memory: %s", why);
    }
}

ccl_result_t connect_p2p(struct ccl_comm *comm, int device)
{
    ccl_result_t res = CCL_SUCCESS;
    comm_p2p_t *p = &comm->p2p;
    int n = comm->nranks, r = comm->rank, next = p2p_mod(r + 1, n);
    p2p_hello_t *hello = NULL;
    p2p_offer_t *offer = NULL;
    p2p_ack_t *ack = NULL;
    char buf[P2P_WHY_MAX];
    const char *why = NULL;
    int locked = 0;
    /* The bootstrap's lock, not exec_lock: a staged call of this comm may
     * hold exec_lock on its worker thread while it waits for a peer whose
     * user thread is in this setup. Two threads of one rank: the second
     * finds the first one's verdict. */
    pthread_mutex_lock(&comm->bs_lock);
    locked = 1;
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != COMM_P2P_UNTRIED)
        goto out;
    if ((why = p2p_never(comm, buf, sizeof buf))) {
        p2p_off(comm, -1, why);
        goto out;
    }
    p->device = device;
    p->use_kernel_wait = strcmp(param_str(PARAM_CUDA_STREAM_WAIT), "kernel") == 0;
    hello = calloc((size_t)n, sizeof *hello);
    offer = calloc((size_t)n, sizeof *offer);
    ack = calloc((size_t)n, sizeof *ack);
    if (!hello || !offer || !ack)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for the P2P setup of %d ranks", n);
    /* Round 1: who is willing, on which GPU, with which page name. */
    p2p_hello(comm, device, &hello[r]);
    CCL_TRY(bs_allgather(&comm->bs, hello, sizeof *hello));
    /* Peers' names are opened and unlinked below: only names of the form
     * shm_name_new makes, never an arbitrary /dev/shm entry. */
    int bad = -1;
    for (int q = 0; q < n; q++) {
        hello[q].ctrl_name[SHM_NAME_MAX - 1] = '\0';
        if (q != r && hello[q].ctrl_name[0] &&
            shm_name_check(hello[q].ctrl_name, SHM_NAME_MAX, "P2P setup") != CCL_SUCCESS) {
            hello[q].ctrl_name[0] = '\0';
            bad = bad < 0 ? q : bad;
        }
    }
    if (bad >= 0)
        CCL_FAIL(CCL_ERR_REMOTE, "rank %d sent a P2P page name that is not a ccl one", bad);
    int who = p2p_first_no(hello, sizeof *hello, offsetof(p2p_hello_t, why), n, &why);
    if (who >= 0) {
        p2p_off(comm, who, why);
        goto out;
    }
    p2p_warn_shared(comm, hello);
    uint64_t slot_size = hello[0].slot_size;
    uint32_t nslots = hello[0].nslots;
    for (int q = 0; q < n; q++) {
        if (hello[q].slot_size < slot_size)
            slot_size = hello[q].slot_size;
        if (hello[q].nslots < nslots)
            nslots = hello[q].nslots;
    }
    /* Round 2: our incoming FIFO, and whether our GPU reaches the next's. */
    p2p_offer_t *mine = &offer[r];
    mine->ok = 1;
    if (n > 1) {
        int peer_dev = dev_by_uuid(hello[next].uuid);
        if (peer_dev < 0)
            snprintf(mine->why, sizeof mine->why, "the GPU of rank %d is not visible here (CUDA_VISIBLE_DEVICES?)",
                     next);
        else if (!dev_peer_reachable(device, peer_dev))
            snprintf(mine->why, sizeof mine->why, "%s", err_message());
        else if (p2p_recv_create(&p->recv, nslots, (size_t)slot_size, hello[r].ctrl_name, &mine->exp) !=
                 CCL_SUCCESS)
            snprintf(mine->why, sizeof mine->why, "%s", err_message());
        mine->ok = mine->why[0] == '\0';
    }
    CCL_TRY(bs_allgather(&comm->bs, offer, sizeof *offer));
    who = p2p_first_no(offer, sizeof *offer, offsetof(p2p_offer_t, why), n, &why);
    /* Round 3: the next rank's FIFO. */
    ack[r].ok = 1;
    if (who < 0 && n > 1 && p2p_send_open(&p->send, hello[next].ctrl_name, &offer[next].exp) != CCL_SUCCESS) {
        ack[r].ok = 0;
        snprintf(ack[r].why, sizeof ack[r].why, "opening the FIFO of rank %d: %s", next, err_message());
    }
    if (who < 0 && ack[r].ok && watch_p2p_start(comm) != CCL_SUCCESS) {
        ack[r].ok = 0;
        snprintf(ack[r].why, sizeof ack[r].why, "%s", err_message());
    }
    if (who < 0) {
        CCL_TRY(bs_allgather(&comm->bs, ack, sizeof *ack));
        who = p2p_first_no(ack, sizeof *ack, offsetof(p2p_ack_t, why), n, &why);
    }
    if (who >= 0) {
        watch_p2p_stop(comm);
        p2p_conn_close(&p->send);
        p2p_conn_close(&p->recv);
        p2p_off(comm, who, why);
        goto out;
    }
    p->slot_size = (size_t)slot_size;
    __atomic_store_n(&p->state, COMM_P2P_UP, __ATOMIC_RELEASE);
    if (comm->rank == 0)
        LOG_INFO(SUB_P2P, "P2P: up, %d ranks, %u slots of %llu bytes per connection (ring neighbours), waits by %s",
                 n, nslots, (unsigned long long)slot_size, p->use_kernel_wait ? "kernel" : "stream memory operation");
out:
    if (res != CCL_SUCCESS) {
        watch_p2p_stop(comm);
        p2p_conn_close(&p->send);
        p2p_conn_close(&p->recv);
        __atomic_store_n(&p->state, COMM_P2P_OFF, __ATOMIC_RELEASE);
    }
    /* Every name a rank of ours picked: each page is mapped by both ends or
     * will never be (a failed round ends the setup everywhere). */
    for (int q = 0; hello && q < n; q++)
        if (hello[q].ctrl_name[0])
            shm_name_unlink(hello[q].ctrl_name);
    if (locked)
        pthread_mutex_unlock(&comm->bs_lock);
    free(hello);
    free(offer);
    free(ack);
    return res;
}

void connect_p2p_release(struct ccl_comm *comm)
{
    p2p_conn_release(&comm->p2p.recv);
    p2p_conn_release(&comm->p2p.send);
}

void connect_p2p_close(struct ccl_comm *comm)
{
    comm_p2p_t *p = &comm->p2p;
    watch_p2p_stop(comm); /* its looks use what closes below */
    if (p->done) {
        /* The slots and pages must outlive the GPU's use of them. A stream
         * whose peers will never publish (abort, a failed call, a peer
         * gone) is released; the peers' streams may keep moving the
         * counters back, so the release is repeated until ours is done. */
        uint64_t start = clock_now_ns();
        int warned = 0;
        while (dev_event_done(p->done) == 0) {
            int give_up = atomic_load(&comm->aborted) || comm->broken;
            if (!give_up && clock_now_ns() - start > comm->bs.timeout_ns) {
                if (!warned)
                    LOG_WARN(SUB_P2P, "P2P: the GPU has not finished this communicator's work after %llu s "
                             "(CCL_TIMEOUT; a peer gone?): releasing its waits",
                             (unsigned long long)((clock_now_ns() - start) / 1000000000ull));
                warned = give_up = 1;
            }
            if (give_up)
                connect_p2p_release(comm);
            usleep(1000);
        }
        dev_event_destroy(p->done);
    }
    p2p_conn_close(&p->send);
    p2p_conn_close(&p->recv);
    memset(p, 0, sizeof *p);
}
