/*
 * ccl_perf_coll.c - the collectives ccl-perf can time (-C): for each, how a
 * size maps to counts (nccl-tests' getCollByteCount), its bus-bandwidth
 * factor (nccl-tests' getBw), the ccl call, and how a checked call's inputs
 * are laid out and its result is verified.
 */
#include <ctype.h>
#include <string.h>

#include "ccl_perf.h"

/* ---- allreduce ---------------------------------------------------------- */

static void allreduce_counts(size_t count, int nranks, struct perf_counts *c)
{
    (void)nranks;
    c->send = c->recv = c->param = count;
    c->send_inplace = c->recv_inplace = 0;
}

/* Each rank sends and receives 2(n-1)/n of the data in a ring. */
static double allreduce_bus(int nranks) { return 2.0 * (nranks - 1) / nranks; }

static ccl_result_t allreduce_run(const void *send, void *recv, size_t count, ccl_datatype_t dt,
                                  ccl_redop_t op, int root, ccl_comm_t comm, ccl_stream_t s)
{
    (void)root;
    return ccl_allreduce(send, recv, count, dt, op, comm, s);
}

static void allreduce_fill(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    if (!in_place)
        perf_data_poison(x->recv, x->cur.recv * x->dt->size);
    perf_data_fill(d, in_place ? x->recv : x->send, x->cur.send, x->rank);
}

static int64_t allreduce_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    (void)in_place;
    return perf_data_check_reduce(d, x->recv, x->cur.recv);
}

/* ---- allgather ---------------------------------------------------------- */

/* Like nccl-tests: the size is the gathered total, the count per rank. */
static void allgather_counts(size_t count, int nranks, struct perf_counts *c)
{
    c->send = c->param = c->send_inplace = count / nranks;
    c->recv = c->send * nranks;
    c->recv_inplace = 0;
}

static double allgather_bus(int nranks) { return (double)(nranks - 1) / nranks; }

static ccl_result_t allgather_run(const void *send, void *recv, size_t count, ccl_datatype_t dt,
                                  ccl_redop_t op, int root, ccl_comm_t comm, ccl_stream_t s)
{
    (void)op;
    (void)root;
    return ccl_allgather(send, recv, count, dt, comm, s);
}

static void allgather_fill(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    size_t elt = x->dt->size;
    perf_data_poison(x->recv, x->cur.recv * elt);
    void *mine = in_place ? (char *)x->recv + (size_t)x->rank * x->cur.send_inplace * elt : x->send;
    perf_data_fill(d, mine, x->cur.send, x->rank);
}

static int64_t allgather_check(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    (void)in_place;
    return perf_data_check_gather(d, x->recv, x->cur.send);
}

/* ---- table -------------------------------------------------------------- */

static const struct perf_coll colls[] = {
    {"allreduce", 1, 0, allreduce_counts, allreduce_bus, allreduce_run, "ccl_allreduce",
     allreduce_fill, allreduce_check},
    {"allgather", 0, 0, allgather_counts, allgather_bus, allgather_run, "ccl_allgather",
     allgather_fill, allgather_check},
};

/* nccl-tests collectives that ccl.h does not have yet. */
static const char *const planned[] = {"reducescatter", "broadcast", "reduce", "alltoall",
                                      "gather",        "scatter",   "sendrecv"};

/* "All_Reduce", "all-reduce" and "allreduce" all name the same test. */
static void normalize(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; *in && n + 1 < size; in++)
        if (*in != '_' && *in != '-')
            out[n++] = (char)tolower((unsigned char)*in);
    out[n] = '\0';
}

const char *perf_coll_supported(void) { return "allreduce allgather"; }

const struct perf_coll *perf_coll_by_name(const char *name, const char **why)
{
    char norm[64];
    normalize(name, norm, sizeof(norm));
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++)
        if (strcmp(norm, colls[i].name) == 0)
            return &colls[i];
    *why = "unknown collective";
    for (size_t i = 0; i < sizeof(planned) / sizeof(planned[0]); i++)
        if (strcmp(norm, planned[i]) == 0)
            *why = "collective not available in this version of ccl";
    return NULL;
}
