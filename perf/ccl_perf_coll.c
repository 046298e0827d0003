/*
 * ccl_perf_coll.c - the collectives ccl-perf can time (-C): for each, how a
 * size maps to counts (nccl-tests' getCollByteCount), its bus-bandwidth
 * factor (nccl-tests' getBw), the ccl call, and how a checked call's inputs
 * are laid out and its result is verified against a host reference.
 *
 * Fill and check work on the very pointers the call gets (perf_call_buffers;
 * with -m device, their host copies), so in place they follow NCCL's layouts:
 *   allgather       sendbuf == recvbuf + rank*count
 *   reduce_scatter  recvbuf == sendbuf + rank*count
 *   gather (root)   sendbuf == recvbuf + root*count
 *   scatter (root)  recvbuf == sendbuf + root*count
 *   others          sendbuf == recvbuf
 * Alltoall has no in-place form in ccl (the buffers must not overlap), and
 * neither has sendrecv: ccl.h does not say a send and a receive may share a
 * buffer (MPI forbids it), and with single copy (from 1 MiB) the next rank
 * reads a buffer that the previous one is already overwriting. nccl-tests
 * passes the same buffer there; ccl-perf prints N/A.
 */
#include <ctype.h>
#include <string.h>

#include "ccl_perf.h"

/* ---- shared pieces ---------------------------------------------------------- */

/* nccl-tests' count rules, by shape: "same" for collectives whose buffers
 * both hold the whole size; for the others the size is the larger side and
 * the count argument is its share per rank. */
static void same_counts(size_t count, int nranks, struct perf_counts *c)
{
    (void)nranks;
    c->send = c->recv = c->param = count;
    c->send_inplace = c->recv_inplace = 0;
}

/* Each rank's block goes into a buffer of all blocks (allgather, gather). */
static void gather_counts(size_t count, int nranks, struct perf_counts *c)
{
    c->send = c->param = c->send_inplace = count / nranks;
    c->recv = c->send * nranks;
    c->recv_inplace = 0;
}

/* A buffer of all blocks yields one block per rank (reduce_scatter, scatter). */
static void scatter_counts(size_t count, int nranks, struct perf_counts *c)
{
    c->recv = c->param = c->recv_inplace = count / nranks;
    c->send = c->recv * nranks;
    c->send_inplace = 0;
}

static void alltoall_counts(size_t count, int nranks, struct perf_counts *c)
{
    c->param = count / nranks;
    c->send = c->recv = c->param * nranks;
    c->send_inplace = c->recv_inplace = 0;
}

/* Bus factors: what one rank's link carries relative to the size, for the
 * algorithm that is optimal on a ring (nccl-tests' PERFORMANCE.md). */
static double allreduce_bus(int nranks) { return 2.0 * (nranks - 1) / nranks; }
static double ring_share_bus(int nranks) { return (double)(nranks - 1) / nranks; }
static double one_bus(int nranks)
{
    (void)nranks;
    return 1.0;
}

static size_t elt(const struct perf_ctx *x) { return x->dt->size; }

/* The host view of the checked call's buffers (the call itself may get
 * device pointers, ccl_perf_cuda.c). */
static void call_buffers(const struct perf_ctx *x, int in_place, char **send, char **recv)
{
    perf_host_buffers(x, in_place, 0, send, recv);
}

/* ---- allreduce ---------------------------------------------------------- */

static ccl_result_t allreduce_run(const struct perf_ctx *x, const void *send, void *recv,
                                  size_t count, ccl_redop_t op)
{
    return ccl_allreduce(send, recv, count, x->dt->id, op, x->comm, x->stream);
}

static void allreduce_fill(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    if (!in_place)
        perf_data_poison(recv, x->cur.recv * elt(x));
    perf_data_fill(d, send, x->cur.send, x->rank, 0);
}

static int64_t allreduce_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    return perf_data_check_reduce(d, recv, x->cur.param, 0);
}

/* ---- allgather ---------------------------------------------------------- */

static ccl_result_t allgather_run(const struct perf_ctx *x, const void *send, void *recv,
                                  size_t count, ccl_redop_t op)
{
    (void)op;
    return ccl_allgather(send, recv, count, x->dt->id, x->comm, x->stream);
}

/* Also gather's: the poison goes first, since in place the input lies
 * inside the receive buffer. */
static void gather_fill_common(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    perf_data_poison(recv, x->cur.recv * elt(x));
    perf_data_fill(d, send, x->cur.param, x->rank, 0);
}

/* Block r of the result is rank r's input. */
static int64_t check_blocks(struct perf_ctx *x, const struct perf_data *d, const char *recv)
{
    int64_t wrong = 0;
    size_t n = x->cur.param;
    for (int r = 0; r < x->nranks; r++)
        wrong += perf_data_check_copy(d, recv + (size_t)r * n * elt(x), n, r, 0);
    return wrong;
}

static int64_t allgather_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    return check_blocks(x, d, recv);
}

/* ---- reduce_scatter ------------------------------------------------------ */

static ccl_result_t reduce_scatter_run(const struct perf_ctx *x, const void *send, void *recv,
                                       size_t count, ccl_redop_t op)
{
    return ccl_reduce_scatter(send, recv, count, x->dt->id, op, x->comm, x->stream);
}

static void reduce_scatter_fill(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    if (!in_place)
        perf_data_poison(recv, x->cur.recv * elt(x));
    perf_data_fill(d, send, x->cur.send, x->rank, 0);
}

/* This rank's block: the reduction of block `rank` of every input. */
static int64_t reduce_scatter_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    size_t n = x->cur.param;
    return perf_data_check_reduce(d, recv, n, (size_t)x->rank * n);
}

/* ---- broadcast ----------------------------------------------------------- */

static ccl_result_t broadcast_run(const struct perf_ctx *x, const void *send, void *recv,
                                  size_t count, ccl_redop_t op)
{
    (void)op;
    return ccl_broadcast(send, recv, count, x->dt->id, x->root, x->comm, x->stream);
}

/* Broadcast and scatter: only the root's send buffer is read (non-roots'
 * keep whatever they held). In place the root's own result already sits
 * where it goes, so only the other ranks' results show whether data moved. */
static void root_source_fill(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    if (!in_place || x->rank != x->root)
        perf_data_poison(recv, x->cur.recv * elt(x));
    if (x->rank == x->root)
        perf_data_fill(d, send, x->cur.send, x->root, 0);
}

/* Every rank, the root too (out of place its recvbuf gets a copy). */
static int64_t broadcast_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    return perf_data_check_copy(d, recv, x->cur.param, x->root, 0);
}

/* ---- reduce -------------------------------------------------------------- */

static ccl_result_t reduce_run(const struct perf_ctx *x, const void *send, void *recv,
                               size_t count, ccl_redop_t op)
{
    return ccl_reduce(send, recv, count, x->dt->id, op, x->root, x->comm, x->stream);
}

/* Allreduce's fill; only the root's result is defined. */
static int64_t reduce_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    if (x->rank != x->root)
        return 0;
    return allreduce_check(x, d, in_place);
}

/* ---- alltoall ------------------------------------------------------------ */

static ccl_result_t alltoall_run(const struct perf_ctx *x, const void *send, void *recv,
                                 size_t count, ccl_redop_t op)
{
    (void)op;
    return ccl_alltoall(send, recv, count, x->dt->id, x->comm, x->stream);
}

static void alltoall_fill(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    perf_data_poison(recv, x->cur.recv * elt(x));
    perf_data_fill(d, send, x->cur.send, x->rank, 0);
}

/* Block s came from rank s, which sent its block number `rank`. */
static int64_t alltoall_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    size_t n = x->cur.param;
    int64_t wrong = 0;
    for (int s = 0; s < x->nranks; s++)
        wrong += perf_data_check_copy(d, recv + (size_t)s * n * elt(x), n, s, (size_t)x->rank * n);
    return wrong;
}

/* ---- gather -------------------------------------------------------------- */

static ccl_result_t gather_run(const struct perf_ctx *x, const void *send, void *recv,
                               size_t count, ccl_redop_t op)
{
    (void)op;
    return ccl_gather(send, recv, count, x->dt->id, x->root, x->comm, x->stream);
}

static int64_t gather_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    if (x->rank != x->root)
        return 0;
    return allgather_check(x, d, in_place);
}

/* ---- scatter ------------------------------------------------------------- */

static ccl_result_t scatter_run(const struct perf_ctx *x, const void *send, void *recv,
                                size_t count, ccl_redop_t op)
{
    (void)op;
    return ccl_scatter(send, recv, count, x->dt->id, x->root, x->comm, x->stream);
}

static int64_t scatter_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    size_t n = x->cur.param;
    return perf_data_check_copy(d, recv, n, x->root, (size_t)x->rank * n);
}

/* ---- sendrecv ------------------------------------------------------------ */

/* A ring shift: send to the next rank, receive from the previous one, in one
 * group so neither blocking call waits for the other. With one rank it sends
 * to itself. */
static ccl_result_t sendrecv_run(const struct perf_ctx *x, const void *send, void *recv,
                                 size_t count, ccl_redop_t op)
{
    (void)op;
    int next = (x->rank + 1) % x->nranks, prev = (x->rank + x->nranks - 1) % x->nranks;
    ccl_result_t res = ccl_group_start();
    if (res != CCL_SUCCESS)
        return res;
    ccl_result_t r1 = ccl_send(send, count, x->dt->id, next, x->comm, x->stream);
    ccl_result_t r2 = ccl_recv(recv, count, x->dt->id, prev, x->comm, x->stream);
    /* The group is closed even after a failed call, which it then reports. */
    res = ccl_group_end();
    return r1 != CCL_SUCCESS ? r1 : r2 != CCL_SUCCESS ? r2 : res;
}

static int64_t sendrecv_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    char *send, *recv;
    call_buffers(x, in_place, &send, &recv);
    int prev = (x->rank + x->nranks - 1) % x->nranks;
    return perf_data_check_copy(d, recv, x->cur.param, prev, 0);
}

/* ---- table -------------------------------------------------------------- */

/* nccl-tests' order of its binaries. */
const struct perf_coll perf_colls[] = {
    {"allreduce", 1, 0, 0, same_counts, allreduce_bus, allreduce_run, "ccl_allreduce",
     allreduce_fill, allreduce_check},
    {"allgather", 0, 0, 0, gather_counts, ring_share_bus, allgather_run, "ccl_allgather",
     gather_fill_common, allgather_check},
    {"reduce_scatter", 1, 0, 0, scatter_counts, ring_share_bus, reduce_scatter_run,
     "ccl_reduce_scatter", reduce_scatter_fill, reduce_scatter_check},
    {"broadcast", 0, 1, 0, same_counts, one_bus, broadcast_run, "ccl_broadcast", root_source_fill,
     broadcast_check},
    {"reduce", 1, 1, 0, same_counts, one_bus, reduce_run, "ccl_reduce", allreduce_fill,
     reduce_check},
    {"alltoall", 0, 0, 1, alltoall_counts, ring_share_bus, alltoall_run, "ccl_alltoall",
     alltoall_fill, alltoall_check},
    {"gather", 0, 1, 0, gather_counts, ring_share_bus, gather_run, "ccl_gather",
     gather_fill_common, gather_check},
    {"scatter", 0, 1, 0, scatter_counts, ring_share_bus, scatter_run, "ccl_scatter", root_source_fill,
     scatter_check},
    {"sendrecv", 0, 0, 1, same_counts, one_bus, sendrecv_run, "ccl_send/ccl_recv", allreduce_fill,
     sendrecv_check},
};
const int perf_num_colls = (int)(sizeof(perf_colls) / sizeof(perf_colls[0]));

/* "All_Reduce", "all-reduce" and "allreduce" all name the same test. */
static void normalize(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; *in && n + 1 < size; in++)
        if (*in != '_' && *in != '-')
            out[n++] = (char)tolower((unsigned char)*in);
    out[n] = '\0';
}

const char *perf_coll_supported(void)
{
    return "allreduce allgather\n"
           "                             reduce_scatter broadcast reduce alltoall gather scatter\n"
           "                             sendrecv";
}

const struct perf_coll *perf_coll_by_name(const char *name)
{
    char want[64], have[64];
    normalize(name, want, sizeof(want));
    for (int i = 0; i < perf_num_colls; i++) {
        normalize(perf_colls[i].name, have, sizeof(have));
        if (strcmp(want, have) == 0)
            return &perf_colls[i];
    }
    return NULL;
}
