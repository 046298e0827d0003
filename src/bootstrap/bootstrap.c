/*
 * bootstrap.c - the rank side of the bootstrap: unique id, registration with
 * the root, the TCP ring, and the allgather/barrier built on it.
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/accept.h"
#include "bootstrap/job.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/param.h"
#include "base/wait.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* CCL_COMM_ID mode has no id to carry a random secret, so every rank derives
 * it from CCL_COMM_SECRET (which the launcher shares like CCL_COMM_ID), or
 * without it from the launcher's job name (job.h). This is a mixing
 * function, not a cryptographic one: a job name tells jobs apart, it keeps
 * out no one who can read it; with neither the secret is public. */
static void bs_derive_secret(const char *text, uint8_t out[BS_SECRET_BYTES])
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = text; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    for (int i = 0; i < BS_SECRET_BYTES / 8; i++) {
        uint64_t z = (h += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        memcpy(out + 8 * i, &z, 8);
    }
}

/* Once per process: with neither CCL_COMM_SECRET nor a launcher's job name
 * nothing tells two jobs on one CCL_COMM_ID apart. */
static void bs_warn_anonymous(const char *comm_id, const char *secret_from)
{
    static atomic_int warned;
    if (param_str(PARAM_COMM_SECRET)[0])
        return;
    if (bs_job_name()[0]) {
        LOG_INFO(SUB_BOOTSTRAP, "CCL_COMM_ID %s: the bootstrap secret comes from %s (%s)", comm_id, secret_from,
                 bs_job_name());
        return;
    }
    if (atomic_exchange(&warned, 1) == 0)
        LOG_WARN(SUB_BOOTSTRAP,
                 "CCL_COMM_ID %s without CCL_COMM_SECRET, and no launcher names this job (PMIx, Open MPI, Slurm, "
                 "torchrun, Flux, PBS, LSF): ranks of two jobs that share this address cannot be told apart and "
                 "may form one communicator; set CCL_COMM_SECRET to a value unique to the job",
                 comm_id);
}

ccl_result_t bs_id_create(ccl_unique_id_t *id)
{
    ccl_result_t res = CCL_SUCCESS;
    bs_id_t bid;
    memset(&bid, 0, sizeof bid);
    bid.magic = BS_MAGIC;
    bid.version = BS_VERSION;
    const char *comm_id = param_str(PARAM_COMM_ID);
    if (comm_id[0]) {
        CCL_TRY(sock_addr_parse(comm_id, &bid.root));
        const char *secret_from = "";
        bs_derive_secret(bs_job_secret_text(&secret_from), bid.secret);
        bs_warn_anonymous(comm_id, secret_from);
        bid.root_in_rank0 = 1;
        memset(id, 0, sizeof *id);
        memcpy(id->internal, &bid, sizeof bid);
        return CCL_SUCCESS;
    }
    CCL_TRY(bs_id_create_local(id));
out:
    return res;
}

ccl_result_t bs_id_create_local(ccl_unique_id_t *id)
{
    ccl_result_t res = CCL_SUCCESS;
    bs_id_t bid;
    char ifname[64], abuf[80];
    sock_addr_t local;
    memset(&bid, 0, sizeof bid);
    bid.magic = BS_MAGIC;
    bid.version = BS_VERSION;
    if (getrandom(bid.secret, sizeof bid.secret, 0) != (ssize_t)sizeof bid.secret)
        CCL_FAIL(CCL_ERR_SYSTEM, "getrandom failed: %s", strerror(errno));
    CCL_TRY(sock_pick_local_addr(&local, ifname, sizeof ifname));
    CCL_TRY(bs_root_start(&local, bid.secret, &bid.root));
    LOG_INFO(SUB_BOOTSTRAP, "bootstrap root listening on %s (%s)", sock_addr_str(&bid.root, abuf, sizeof abuf),
             ifname);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &bid, sizeof bid);
out:
    return res;
}

/* The root answered our hello (h) with a refusal, whose first bytes are in
 * hdr: we reached the root of another job or unique id. */
static ccl_result_t bs_refused(const bs_hello_t *h, int fd, const bs_table_hdr_t *hdr, const char *from,
                               uint64_t deadline)
{
    ccl_result_t res = CCL_SUCCESS;
    bs_refusal_t r;
    memcpy(&r, hdr, sizeof *hdr);
    CCL_TRY(sock_recv_all(fd, (char *)&r + sizeof *hdr, sizeof r - sizeof *hdr, deadline));
    CCL_TRY(bs_refusal_parse(&r, sizeof r, from, &r));
    char size[32];
    if (r.nranks > 0)
        snprintf(size, sizeof size, "%d ranks", r.nranks);
    else
        snprintf(size, sizeof size, "no rank of its own yet");
    CCL_FAIL(CCL_ERR_INVALID_USAGE,
             "%s (run by pid %d on %s, %s, %s) refused rank %d of %d (pid %d on %s, %s): %s", from, r.pid, r.host,
             r.job[0] ? r.job : "no launcher job name", size, h->rank, h->nranks, h->info.pid, h->info.hostname,
             h->job[0] ? h->job : "no launcher job name",
             r.same_job ? "it belongs to another unique id or CCL_COMM_SECRET"
                        : "it belongs to another job; jobs that run at once need their own CCL_COMM_ID (or "
                          "CCL_COMM_SECRET)");
out:
    return res;
}

static ccl_result_t bs_register(bs_t *bs, const bs_id_t *bid, const bs_peer_t *me, uint64_t deadline)
{
    ccl_result_t res = CCL_SUCCESS;
    int fd = -1;
    char abuf[80];
    void *table = NULL;
    bs_hello_t h;
    memset(&h, 0, sizeof h);
    h.magic = BS_MAGIC;
    h.version = BS_VERSION;
    memcpy(h.secret, bs->secret, BS_SECRET_BYTES);
    h.rank = bs->rank;
    h.nranks = bs->nranks;
    h.info = *me;
    snprintf(h.job, sizeof h.job, "%s", bs_job_name());
    res = sock_connect(&bid->root, deadline, &fd);
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: bootstrap root at %s unreachable: ", bs->rank,
                   sock_addr_str(&bid->root, abuf, sizeof abuf));
        goto out;
    }
    CCL_TRY(sock_send_all(fd, &h, sizeof h, deadline));
    bs_table_hdr_t hdr;
    res = sock_recv_all(fd, &hdr, sizeof hdr, deadline);
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: waiting for all %d ranks to join: ", bs->rank, bs->nranks);
        goto out;
    }
    char from[128];
    snprintf(from, sizeof from, "rank %d: bootstrap root at %s", bs->rank,
             sock_addr_str(&bid->root, abuf, sizeof abuf));
    if (hdr.magic == BS_REFUSE_MAGIC) {
        res = bs_refused(&h, fd, &hdr, from, deadline);
        goto out;
    }
    CCL_TRY(bs_table_hdr_parse(&hdr, sizeof hdr, bs->nranks, from, &hdr));
    size_t len = (size_t)bs->nranks * sizeof *bs->peers;
    table = malloc(len);
    if (!table)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for the table of %d ranks", bs->nranks);
    CCL_TRY(sock_recv_all(fd, table, len, deadline));
    CCL_TRY(bs_table_parse(table, len, bs->nranks, from, bs->peers));
out:
    free(table);
    sock_close(&fd);
    return res;
}

typedef struct {
    const bs_t *bs;
    int prev;
} bs_prev_want_t;

/* The acceptor's check on a rank's listener: the hello of the ring
 * neighbour this rank waits for, and nobody else. */
static ccl_result_t bs_check_prev(const void *frame, size_t len, const char *from, void *arg)
{
    const bs_prev_want_t *w = arg;
    bs_hello_t h = {0}; /* set by a successful parse (zeroed for GCC under LTO) */
    ccl_result_t res = bs_hello_parse(frame, len, w->bs->secret, from, &h);
    if (res != CCL_SUCCESS)
        return res;
    if (h.nranks != w->bs->nranks || h.rank != w->prev)
        return err_set(CCL_ERR_REMOTE, "%s: says it is rank %d of %d, rank %d of %d was due", from, h.rank,
                       h.nranks, w->prev, w->bs->nranks);
    return CCL_SUCCESS;
}

/* Takes the ring neighbour's connection; strays are dropped meanwhile. */
static ccl_result_t bs_accept_prev(bs_t *bs, int prev, uint64_t deadline)
{
    char who[32];
    bs_hello_t h;
    bs_prev_want_t w = {bs, prev};
    snprintf(who, sizeof who, "rank %d", bs->rank);
    /* The neighbour's first allgather may follow its hello at once. */
    ccl_result_t res = bs_accept_one(bs->listen_fd, bs->secret, sizeof h, 0, who, bs_check_prev, &w, deadline,
                                     &bs->prev_fd, &h);
    if (res != CCL_SUCCESS)
        err_prefix("rank %d: waiting for rank %d (%s) to connect: ", bs->rank, prev, bs->peers[prev].hostname);
    return res;
}

ccl_result_t bs_init(bs_t *bs, const ccl_unique_id_t *id, int rank, int nranks, const bs_peer_t *me)
{
    ccl_result_t res = CCL_SUCCESS;
    bs_id_t bid;
    memset(bs, 0, sizeof *bs);
    bs->listen_fd = bs->next_fd = bs->prev_fd = -1;
    bs->rank = rank;
    bs->nranks = nranks;
    bs->timeout_ns = (uint64_t)param_int(PARAM_TIMEOUT) * 1000000000ull;
    uint64_t deadline = clock_now_ns() + bs->timeout_ns;
    CCL_TRY(bs_id_parse(id->internal, sizeof id->internal, &bid));
    if (nranks < 1 || nranks > BS_MAX_RANKS || rank < 0 || rank >= nranks)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "rank %d of %d: the bootstrap takes 1..%d ranks", rank, nranks,
                 BS_MAX_RANKS);
    memcpy(bs->secret, bid.secret, BS_SECRET_BYTES);
    bs->peers = calloc((size_t)nranks, sizeof *bs->peers);
    if (!bs->peers)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for %d peers", nranks);
    if (bid.root_in_rank0 && rank == 0) {
        sock_addr_t bound;
        res = bs_root_start(&bid.root, bid.secret, &bound);
        if (res != CCL_SUCCESS) {
            err_prefix("rank 0: cannot run the bootstrap root at CCL_COMM_ID %s (a root of another job may hold "
                       "it; jobs that run at once need their own CCL_COMM_ID): ", param_str(PARAM_COMM_ID));
            goto out;
        }
    }

    bs_peer_t self = *me;
    char ifname[64];
    sock_addr_t local;
    CCL_TRY(sock_pick_local_addr(&local, ifname, sizeof ifname));
    CCL_TRY(sock_listen(&local, &bs->listen_fd, &self.addr));
    self.rank = rank;
    CCL_TRY(bs_register(bs, &bid, &self, deadline));

    if (nranks > 1) {
        int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
        bs_hello_t h;
        memset(&h, 0, sizeof h);
        h.magic = BS_MAGIC;
        h.version = BS_VERSION;
        memcpy(h.secret, bs->secret, BS_SECRET_BYTES);
        h.rank = rank;
        h.nranks = nranks;
        h.info = bs->peers[rank]; /* every hello carries a valid entry (bs_hello_parse) */
        snprintf(h.job, sizeof h.job, "%s", bs_job_name());
        /* Connect first: the kernel completes it from the listen backlog
         * even before the neighbour calls accept, so no ordering deadlock. */
        res = sock_connect(&bs->peers[next].addr, deadline, &bs->next_fd);
        if (res != CCL_SUCCESS) {
            err_prefix("rank %d: connecting to rank %d on %s: ", rank, next, bs->peers[next].hostname);
            goto out;
        }
        CCL_TRY(sock_send_all(bs->next_fd, &h, sizeof h, deadline));
        CCL_TRY(bs_accept_prev(bs, prev, deadline));
    }
out:
    if (res != CCL_SUCCESS)
        bs_close(bs);
    return res;
}

ccl_result_t bs_allgather(bs_t *bs, void *data, size_t size)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = bs->nranks, r = bs->rank, prev = (r + n - 1) % n, next = (r + 1) % n;
    char *d = data;
    uint64_t deadline = clock_now_ns() + bs->timeout_ns;
    uint32_t seq = bs->seq++;
    if (n == 1)
        return CCL_SUCCESS;
    /* Both ends must be in the same allgather with the same block size,
     * or the blocks below would be cut from the wrong bytes. */
    bs_ring_hdr_t mine = {BS_RING_MAGIC, seq, size}, theirs;
    res = sock_sendrecv(bs->next_fd, &mine, sizeof mine, bs->prev_fd, &theirs, sizeof theirs, deadline);
    if (res == CCL_SUCCESS) {
        char from[32];
        snprintf(from, sizeof from, "rank %d", prev);
        res = bs_ring_hdr_parse(&theirs, sizeof theirs, seq, size, from, &theirs);
    }
    for (int s = 0; s < n - 1 && res == CCL_SUCCESS; s++) {
        int sblk = ((r - s) % n + n) % n, rblk = ((r - s - 1) % n + n) % n;
        res = sock_sendrecv(bs->next_fd, d + (size_t)sblk * size, size, bs->prev_fd, d + (size_t)rblk * size,
                            size, deadline);
    }
    if (res != CCL_SUCCESS)
        err_prefix("rank %d: bootstrap allgather with ranks %d/%d: ", r, prev, next);
    return res;
}

ccl_result_t bs_barrier(bs_t *bs)
{
    if (bs->nranks == 1)
        return CCL_SUCCESS;
    char *flags = calloc((size_t)bs->nranks, 1);
    if (!flags)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    ccl_result_t res = bs_allgather(bs, flags, 1);
    free(flags);
    return res;
}

void bs_close(bs_t *bs)
{
    sock_close(&bs->listen_fd);
    sock_close(&bs->next_fd);
    sock_close(&bs->prev_fd);
    free(bs->peers);
    bs->peers = NULL;
}
