/*
 * root.c - the bootstrap root: a thread that collects every rank's address
 * and sends each rank the full table.
 *
 * It runs in the process that called ccl_get_unique_id (or in rank 0 with
 * CCL_COMM_ID) and exits once all ranks are served or CCL_TIMEOUT passes.
 * A connection that does not prove the secret, sends a malformed frame or
 * claims a rank twice is logged and dropped; the root keeps waiting for the
 * real ranks.
 */
#include "bootstrap/wire.h"
#include "core/err.h"
#include "core/param.h"
#include "core/wait.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A legitimate rank sends its hello right after connecting; anything slower
 * is a stray client and must not stall the root. */
#define ROOT_HELLO_TIMEOUT_NS (5ull * 1000000000ull)

typedef struct {
    int lfd;
    uint8_t secret[BS_SECRET_BYTES];
    uint64_t timeout_ns;
} root_args_t;

int bs_secret_equal(const uint8_t *a, const uint8_t *b)
{
    unsigned diff = 0;
    for (int i = 0; i < BS_SECRET_BYTES; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

typedef struct {
    int nranks;       /* -1 until the first valid hello */
    int registered;
    int *fds;
    bs_peer_t *peers;
} root_state_t;

/* Reads and validates one hello; on success records the rank and keeps fd. */
static ccl_result_t root_register(root_state_t *st, const root_args_t *args, int fd)
{
    bs_hello_t h;
    ccl_result_t res = sock_recv_all(fd, &h, sizeof h, wait_now_ns() + ROOT_HELLO_TIMEOUT_NS);
    if (res != CCL_SUCCESS)
        return res;
    if (h.magic != BS_MAGIC || h.version != BS_VERSION)
        return err_set(CCL_ERR_REMOTE, "bootstrap root: frame with bad magic/version dropped");
    if (!bs_secret_equal(h.secret, args->secret))
        return err_set(CCL_ERR_REMOTE, "bootstrap root: connection with a wrong secret dropped");
    if (h.nranks < 1 || h.nranks > BS_MAX_RANKS || h.rank < 0 || h.rank >= h.nranks)
        return err_set(CCL_ERR_REMOTE, "bootstrap root: rank %d of %d is out of range", h.rank, h.nranks);
    if (st->nranks < 0) {
        st->fds = malloc((size_t)h.nranks * sizeof *st->fds);
        st->peers = calloc((size_t)h.nranks, sizeof *st->peers);
        if (!st->fds || !st->peers)
            return err_set(CCL_ERR_SYSTEM, "bootstrap root: out of memory for %d ranks", h.nranks);
        for (int i = 0; i < h.nranks; i++)
            st->fds[i] = -1;
        st->nranks = h.nranks;
    }
    if (h.nranks != st->nranks)
        return err_set(CCL_ERR_REMOTE, "bootstrap root: rank %d says nranks=%d, others said %d",
                       h.rank, h.nranks, st->nranks);
    if (st->fds[h.rank] >= 0)
        return err_set(CCL_ERR_REMOTE, "bootstrap root: rank %d registered twice", h.rank);
    st->peers[h.rank] = h.info;
    st->peers[h.rank].rank = h.rank;
    st->peers[h.rank].hostname[BS_HOSTNAME_MAX - 1] = '\0';
    st->fds[h.rank] = fd;
    st->registered++;
    return CCL_SUCCESS;
}

static void *root_main(void *arg)
{
    root_args_t *args = arg;
    root_state_t st = {.nranks = -1};
    uint64_t deadline = wait_now_ns() + args->timeout_ns;
    log_set_rank(-1);
    while (st.nranks < 0 || st.registered < st.nranks) {
        int fd = -1;
        if (sock_accept(args->lfd, deadline, &fd) != CCL_SUCCESS) {
            LOG_WARN(SUB_BOOTSTRAP, "bootstrap root: gave up after %d of %d ranks registered",
                     st.registered, st.nranks);
            goto out;
        }
        if (root_register(&st, args, fd) != CCL_SUCCESS)
            close(fd); /* already logged by err_set */
    }
    bs_table_hdr_t hdr = {BS_MAGIC, st.nranks};
    for (int r = 0; r < st.nranks; r++) {
        uint64_t dl = wait_now_ns() + args->timeout_ns;
        if (sock_send_all(st.fds[r], &hdr, sizeof hdr, dl) != CCL_SUCCESS ||
            sock_send_all(st.fds[r], st.peers, (size_t)st.nranks * sizeof *st.peers, dl) != CCL_SUCCESS)
            LOG_WARN(SUB_BOOTSTRAP, "bootstrap root: could not send the table to rank %d", r);
    }
    LOG_INFO(SUB_BOOTSTRAP, "bootstrap root: served %d ranks", st.nranks);
out:
    for (int r = 0; r < st.nranks; r++)
        if (st.fds[r] >= 0)
            close(st.fds[r]);
    free(st.fds);
    free(st.peers);
    close(args->lfd);
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
    int rc = pthread_create(&tid, &attr, root_main, args);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "cannot start the bootstrap root thread: %s", strerror(rc));
    args = NULL; /* owned by the thread now */
out:
    if (args) {
        sock_close(&args->lfd);
        free(args);
    }
    return res;
}
