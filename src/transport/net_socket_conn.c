/*
 * net_socket_conn.c - one connection of the socket plugin: its two
 * directions (net_socket_io.c comms) over the same data sockets, and the
 * plugin's entry points that act on a connection (registration, isend,
 * irecv, test, progress, pollfds, close). net_socket.c makes connections
 * (handshake) and fills the plugin table with these.
 *
 * Both directions use the same TCP sockets (CCL_NET_CAP_DUPLEX): the
 * receive direction owns the descriptors and the keepalive socket, the
 * send direction holds duplicates, so each closes its own and the sockets
 * close with the second.
 */
#include "transport/net_socket_conn.h"
#include "base/err.h"
#include "transport/net_socket_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NET_SOCK_MR_MAGIC 0x6d72736bu

#define NET_SOCK_CONN_MAGIC 0x6e6e6f63u /* "conn" */
struct net_sock_conn {
    uint32_t magic;
    net_sock_comm_t *send, *recv;
};

typedef struct {
    uint32_t magic;
    const net_sock_conn_t *comm;
    const char *base;
    size_t size;
} net_sock_mr_t;

static void net_sock_conn_destroy(net_sock_conn_t *k)
{
    if (!k)
        return;
    k->magic = 0;
    net_sock_comm_destroy(k->send);
    net_sock_comm_destroy(k->recv);
    free(k);
}

ccl_result_t net_sock_conn_create(const int *fds, int nsocks, int nthreads, int silence_s, int checksum,
                                  const char *peer, net_sock_conn_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    int ndata = nsocks - 1, dups[NET_SOCK_MAX_SOCKS];
    *out = NULL;
    net_sock_conn_t *k = calloc(1, sizeof *k);
    int ndup = 0;
    for (; k && ndup < ndata; ndup++)
        if ((dups[ndup] = fcntl(fds[ndup], F_DUPFD_CLOEXEC, 0)) < 0)
            break;
    if (!k || ndup < ndata) {
        int e = errno;
        for (int j = 0; j < ndup; j++)
            close(dups[j]);
        for (int j = 0; j < nsocks; j++)
            close(fds[j]);
        free(k);
        CCL_FAIL(CCL_ERR_SYSTEM, "net/socket: cannot set up the connection to %s: %s", peer,
                 k ? strerror(e) : "out of memory");
    }
    k->magic = NET_SOCK_CONN_MAGIC;
    res = net_sock_comm_create(0, fds, ndata, fds[ndata], nthreads, silence_s, checksum, peer, &k->recv);
    if (res != CCL_SUCCESS) {
        for (int j = 0; j < ndata; j++)
            close(dups[j]);
        goto out;
    }
    CCL_TRY(net_sock_comm_create(1, dups, ndata, -1, nthreads, silence_s, checksum, peer, &k->send));
    *out = k;
    k = NULL;
out:
    net_sock_conn_destroy(k);
    return res;
}

/* The plugin's comm argument as a connection, or NULL. */
static net_sock_conn_t *net_sock_conn_of(void *comm)
{
    net_sock_conn_t *k = comm;
    return k && k->magic == NET_SOCK_CONN_MAGIC ? k : NULL;
}

ccl_result_t net_sock_conn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    *mhandle = NULL;
    if (!net_sock_conn_of(comm))
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: reg_mr without a comm");
    if (type != CCL_NET_PTR_HOST)
        return err_set(CCL_ERR_UNSUPPORTED, "net/socket: only host memory can be registered (type %d)", type);
    if (size > 0 && !data)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: reg_mr of %zu bytes at NULL", size);
    net_sock_mr_t *mr = malloc(sizeof *mr);
    if (!mr)
        return err_set(CCL_ERR_SYSTEM, "net/socket: out of memory");
    *mr = (net_sock_mr_t){NET_SOCK_MR_MAGIC, comm, data, size};
    *mhandle = mr;
    return CCL_SUCCESS;
}

ccl_result_t net_sock_conn_dereg_mr(void *comm, void *mhandle)
{
    net_sock_mr_t *mr = mhandle;
    if (!mr)
        return CCL_SUCCESS;
    if (mr->magic != NET_SOCK_MR_MAGIC || mr->comm != comm)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: dereg_mr of a handle not registered on this comm");
    mr->magic = 0;
    free(mr);
    return CCL_SUCCESS;
}

/* Registration is optional here, but a given handle must cover the buffer. */
static ccl_result_t net_sock_check_mr(const net_sock_conn_t *k, const void *mhandle, const void *data, size_t size)
{
    const net_sock_mr_t *mr = mhandle;
    if (!mr)
        return CCL_SUCCESS;
    if (mr->magic != NET_SOCK_MR_MAGIC || mr->comm != k)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: memory handle not registered on this comm");
    const char *p = data;
    if (size > 0 && (p < mr->base || (size_t)(p - mr->base) > mr->size || size > mr->size - (size_t)(p - mr->base)))
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: %zu bytes at %p lie outside their registered region",
                       size, data);
    return CCL_SUCCESS;
}

ccl_result_t net_sock_conn_isend(void *send_comm, const void *data, size_t size, uint32_t tag, void *mhandle,
                                   void **request)
{
    net_sock_conn_t *k = net_sock_conn_of(send_comm);
    *request = NULL;
    if (!k)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: isend needs a comm of this plugin");
    if (size > NET_SOCK_MAX_MSG)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: message of %zu bytes is too large", size);
    ccl_result_t res = net_sock_check_mr(k, mhandle, data, size);
    if (res != CCL_SUCCESS)
        return res;
    net_sock_req_t *r = NULL;
    res = net_sock_post(k->send, (void *)data, size, tag, &r);
    *request = r;
    return res;
}

ccl_result_t net_sock_conn_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const uint32_t *tags,
                                   void **mhandles, void **request)
{
    net_sock_conn_t *k = net_sock_conn_of(recv_comm);
    *request = NULL;
    if (!k)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: irecv needs a comm of this plugin");
    if (n != 1)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: irecv takes exactly one buffer (max_recvs 1), not %d", n);
    size_t size = sizes[0] < NET_SOCK_MAX_MSG ? sizes[0] : NET_SOCK_MAX_MSG;
    ccl_result_t res = net_sock_check_mr(k, mhandles ? mhandles[0] : NULL, data[0], size);
    if (res != CCL_SUCCESS)
        return res;
    net_sock_req_t *r = NULL;
    res = net_sock_post(k->recv, data[0], size, tags[0], &r);
    *request = r;
    return res;
}

ccl_result_t net_sock_conn_test(void *request, int *done, size_t *sizes)
{
    if (!request) {
        *done = 0;
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: test of a NULL request");
    }
    return net_sock_test(request, done, sizes);
}

const char *net_socket_comm_peer(void *comm)
{
    net_sock_conn_t *k = net_sock_conn_of(comm);
    return k ? net_sock_comm_peer(k->recv) : "";
}

ccl_result_t net_sock_conn_close(void *comm)
{
    net_sock_conn_destroy(net_sock_conn_of(comm));
    return CCL_SUCCESS;
}

/* Both directions; inline when either is. */
ccl_result_t net_sock_conn_progress(void *comm, int *inline_io)
{
    ccl_result_t res = CCL_SUCCESS;
    net_sock_conn_t *k = net_sock_conn_of(comm);
    int in_send = 0, in_recv = 0;
    *inline_io = 0;
    if (!k)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "net/socket: progress needs a comm of this plugin");
    CCL_TRY(net_sock_comm_progress(k->send, &in_send));
    CCL_TRY(net_sock_comm_progress(k->recv, &in_recv));
    *inline_io = in_send || in_recv;
out:
    return res;
}

int net_sock_conn_pollfds(void *comm, struct pollfd *pfds, int max)
{
    net_sock_conn_t *k = net_sock_conn_of(comm);
    if (!k)
        return 0;
    int n = net_sock_comm_pollfds(k->send, pfds, max);
    return n + net_sock_comm_pollfds(k->recv, pfds + n, max - n);
}

