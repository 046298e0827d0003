/*
 * root.c - the bootstrap root: a thread that collects every rank's address
 * and sends each rank the full table.
 *
 * It runs in the process that called ccl_get_unique_id (or in rank 0 with
 * CCL_COMM_ID) and exits once all ranks are served or CCL_TIMEOUT passes.
 * Connections come through an acceptor (accept.h): one that does not prove
 * the secret, sends a malformed, short or oversized frame, says nothing, or
 * claims a rank that is already registered is logged and dropped, and the
 * root keeps serving the real ranks meanwhile. A hello with another secret
 * (a rank of another job that shares CCL_COMM_ID, job.h) is answered with
 * a refusal naming this root's job, so that rank fails at once and says
 * whose root it reached; the root never serves another job, before or
 * after its own ranks (it exits once they have their table).
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/accept.h"
#include "bootstrap/job.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/param.h"
#include "base/wait.h"

#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    const uint8_t *secret;
    int nranks;       /* -1 until the first valid hello */
    int registered;
    int *fds;
    bs_peer_t *peers;
} root_state_t;

/* One running root: all it allocates hangs off this. */
typedef struct {
    int lfd;
    uint8_t secret[BS_SECRET_BYTES];
    uint64_t timeout_ns;
    root_state_t st;
    bs_acceptor_t *acc;
} root_args_t;

/* Every running root, reachable from a global. A process that forks while
 * a root runs (a launcher that made the unique id, then forks its ranks)
 * copies the root's memory but not its thread, and LeakSanitizer in the
 * child, which scans globals and its own threads, reported the root's
 * buffers as leaked. Slots, not a locked list: a child forked while the
 * parent held a lock would deadlock on its own first root. */
#define ROOT_SLOTS 64
static root_args_t *_Atomic root_slots[ROOT_SLOTS];

static void root_slot_set(root_args_t *from, root_args_t *to)
{
    for (int i = 0; i < ROOT_SLOTS; i++) {
        root_args_t *expected = from;
        if (atomic_compare_exchange_strong(&root_slots[i], &expected, to))
            return;
    }
    /* More than ROOT_SLOTS roots at once: only the leak report suffers. */
}

/* A registered rank only waits for its table: anything readable on its
 * connection (more bytes, or the close of a rank that gave up) means the
 * registration is no longer good. */
static int root_conn_healthy(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) == 0;
}

static void root_unregister(root_state_t *st, int rank, const char *why)
{
    LOG_WARN(SUB_BOOTSTRAP, "bootstrap root: dropped the registration of rank %d: %s", rank, why);
    close(st->fds[rank]);
    st->fds[rank] = -1;
    st->registered--;
}

/* The acceptor's check: a valid hello that fits the ranks seen so far. A
 * hello for a rank whose registered connection went bad replaces it. */
static ccl_result_t root_check(const void *frame, size_t len, const char *from, void *arg)
{
    root_state_t *st = arg;
    bs_hello_t h = {0}; /* set by a successful parse (zeroed for GCC under LTO) */
    ccl_result_t res = bs_hello_parse(frame, len, st->secret, from, &h);
    if (res != CCL_SUCCESS)
        return res;
    if (st->nranks >= 0 && h.nranks != st->nranks)
        return err_set(CCL_ERR_REMOTE, "%s: rank %d says nranks=%d, others said %d", from, h.rank, h.nranks,
                       st->nranks);
    if (st->nranks >= 0 && st->fds[h.rank] >= 0) {
        if (root_conn_healthy(st->fds[h.rank]))
            return err_set(CCL_ERR_REMOTE, "%s: rank %d is already registered", from, h.rank);
        root_unregister(st, h.rank, "its connection closed or sent more than its hello; a new one replaces it");
    }
    return CCL_SUCCESS;
}

/* Records a checked hello; the first one fixes nranks. */
static ccl_result_t root_register(root_state_t *st, const bs_hello_t *h, int fd)
{
    if (st->nranks < 0) {
        st->fds = malloc((size_t)h->nranks * sizeof *st->fds);
        st->peers = calloc((size_t)h->nranks, sizeof *st->peers);
        if (!st->fds || !st->peers) {
            free(st->fds);
            free(st->peers);
            st->fds = NULL;
            st->peers = NULL;
            return err_set(CCL_ERR_SYSTEM, "bootstrap root: out of memory for %d ranks", h->nranks);
        }
        for (int i = 0; i < h->nranks; i++)
            st->fds[i] = -1;
        st->nranks = h->nranks;
    }
    st->peers[h->rank] = h->info;
    st->fds[h->rank] = fd;
    st->registered++;
    return CCL_SUCCESS;
}

/* The acceptor's refuse hook: a well-formed hello with another secret is
 * a rank of another job or unique id; tell it whose root this is. */
static void root_refuse(int fd, const void *frame, size_t len, const char *from, void *arg)
{
    root_args_t *args = arg;
    bs_hello_t h;
    if (bs_hello_claim_parse(frame, len, from, &h) != CCL_SUCCESS)
        return;
    bs_refusal_t r;
    memset(&r, 0, sizeof r);
    r.magic = BS_REFUSE_MAGIC;
    r.nranks = args->st.nranks;
    r.pid = (int32_t)getpid();
    r.same_job = strcmp(h.job, bs_job_name()) == 0;
    if (gethostname(r.host, sizeof r.host - 1) != 0)
        snprintf(r.host, sizeof r.host, "?");
    snprintf(r.job, sizeof r.job, "%s", bs_job_name());
    /* 200-odd bytes into an empty socket buffer: never blocks. */
    ssize_t n = send(fd, &r, sizeof r, MSG_DONTWAIT | MSG_NOSIGNAL);
    LOG_WARN(SUB_BOOTSTRAP, "bootstrap root (%s, %d ranks): refused rank %d of %d (pid %d on %s, %s)%s: %s",
             r.job[0] ? r.job : "no launcher job name", r.nranks, h.rank, h.nranks, h.info.pid, h.info.hostname,
             h.job[0] ? h.job : "no launcher job name", n == (ssize_t)sizeof r ? "" : " (the refusal did not go out)",
             r.same_job ? "the same job name, but another CCL_COMM_SECRET or unique id"
                        : "a rank of another job that shares this address");
}

static void *root_main(void *arg)
{
    root_args_t *args = arg;
    root_state_t *st = &args->st;
    *st = (root_state_t){.nranks = -1, .secret = args->secret};
    uint64_t deadline = clock_now_ns() + args->timeout_ns;
    log_set_rank(-1);
    if (bs_acceptor_open(args->lfd, args->secret, sizeof(bs_hello_t), 1, "bootstrap root", &args->acc) != CCL_SUCCESS)
        goto out;
    bs_acceptor_set_refuse(args->acc, root_refuse, args);
    for (;;) {
        while (st->nranks < 0 || st->registered < st->nranks) {
            int fd = -1;
            bs_hello_t h;
            if (bs_acceptor_next(args->acc, root_check, st, deadline, &fd, &h, NULL) != CCL_SUCCESS) {
                LOG_WARN(SUB_BOOTSTRAP, "bootstrap root: gave up after %d of %d ranks registered",
                         st->registered, st->nranks);
                goto out;
            }
            if (root_register(st, &h, fd) != CCL_SUCCESS)
                close(fd);
        }
        /* A rank that left (or sent more than its hello) since it
         * registered must register again before anyone gets a table. */
        int lost = 0;
        for (int r = 0; r < st->nranks; r++)
            if (!root_conn_healthy(st->fds[r])) {
                root_unregister(st, r, "its connection closed or sent more than its hello");
                lost++;
            }
        if (!lost)
            break;
    }
    bs_table_hdr_t hdr = {BS_MAGIC, st->nranks};
    for (int r = 0; r < st->nranks; r++) {
        uint64_t dl = clock_now_ns() + args->timeout_ns;
        if (sock_send_all(st->fds[r], &hdr, sizeof hdr, dl) != CCL_SUCCESS ||
            sock_send_all(st->fds[r], st->peers, (size_t)st->nranks * sizeof *st->peers, dl) != CCL_SUCCESS)
            LOG_WARN(SUB_BOOTSTRAP, "bootstrap root: could not send the table to rank %d", r);
    }
    LOG_INFO(SUB_BOOTSTRAP, "bootstrap root: served %d ranks", st->nranks);
out:
    bs_acceptor_close(args->acc);
    for (int r = 0; r < st->nranks; r++)
        if (st->fds[r] >= 0)
            close(st->fds[r]);
    free(st->fds);
    free(st->peers);
    close(args->lfd);
    root_slot_set(args, NULL);
    free(args);
    return NULL;
}

ccl_result_t bs_root_start(const sock_addr_t *addr, const uint8_t secret[BS_SECRET_BYTES],
                           sock_addr_t *bound)
{
    ccl_result_t res = CCL_SUCCESS;
    root_args_t *args = calloc(1, sizeof *args);
    if (!args)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    args->lfd = -1;
    CCL_TRY(sock_listen(addr, &args->lfd, bound));
    memcpy(args->secret, secret, BS_SECRET_BYTES);
    args->timeout_ns = (uint64_t)param_int(PARAM_TIMEOUT) * 1000000000ull;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t tid;
    root_slot_set(NULL, args);
    int rc = pthread_create(&tid, &attr, root_main, args);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        root_slot_set(args, NULL);
        CCL_FAIL(CCL_ERR_SYSTEM, "cannot start the bootstrap root thread: %s", strerror(rc));
    }
    args = NULL; /* owned by the thread now */
out:
    if (args) {
        sock_close(&args->lfd);
        free(args);
    }
    return res;
}
