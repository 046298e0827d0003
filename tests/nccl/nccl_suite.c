/*
 * nccl_suite.c - every collective of nccl.h on one rank, against the
 * reference of nccl_values.c: each rank of a communicator calls
 * suite_run(comm) from its own process or thread, and all run the same
 * calls in the same order. Host buffers, NULL stream (blocking).
 */
#include "nccl_suite.h"

#include <stdlib.h>
#include <string.h>

static const ncclDataType_t all_types[] = {ncclInt8,    ncclUint8,   ncclInt32,      ncclUint32,
                                           ncclInt64,   ncclUint64,  ncclFloat16,    ncclFloat32,
                                           ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
#define NTYPES (int)(sizeof all_types / sizeof all_types[0])
static const size_t counts[] = {1, 13, 1031};
#define NCOUNTS (int)(sizeof counts / sizeof counts[0])
#define MAX_COUNT 1031

typedef struct {
    ncclComm_t comm;
    int rank, n;
    char *send, *recv; /* n * MAX_COUNT * 8 bytes each, from ncclMemAlloc */
} ctx_t;

static void fill(void *buf, ncclDataType_t dt, size_t count, int r, int salt, ncclRedOp_t op)
{
    for (size_t i = 0; i < count; i++)
        elem_set(buf, dt, i, input_value(r, i, salt, op));
}

/* Checks count elements of buf against want(i) = reduce or input values. */
static void expect_reduced(const ctx_t *c, const void *buf, ncclDataType_t dt, size_t count, size_t first,
                           int salt, ncclRedOp_t op, const char *what)
{
    for (size_t i = 0; i < count; i++) {
        double got = elem_get(buf, dt, i), want = reduce_ref(c->n, first + i, salt, op, dt);
        if (!value_ok(got, want, dt)) {
            FAILF("rank %d/%d %s %s op %d count %zu: [%zu] = %g, want %g", c->rank, c->n, what, dtype_name(dt),
                  (int)op, count, first + i, got, want);
            return;
        }
    }
}

static void expect_input(const ctx_t *c, const void *buf, ncclDataType_t dt, size_t count, int r, size_t first,
                         int salt, const char *what)
{
    for (size_t i = 0; i < count; i++) {
        double got = elem_get(buf, dt, i), want = input_value(r, first + i, salt, ncclSum);
        if (got != want) {
            FAILF("rank %d/%d %s %s count %zu: [%zu] from rank %d = %g, want %g", c->rank, c->n, what,
                  dtype_name(dt), count, i, r, got, want);
            return;
        }
    }
}

static void test_allreduce(ctx_t *c, ncclDataType_t dt, size_t count, ncclRedOp_t op, int inplace)
{
    int salt = (int)op + 3 * (int)count;
    fill(c->send, dt, count, c->rank, salt, op);
    void *out = inplace ? c->send : c->recv;
    NCHECK(ncclAllReduce(c->send, out, count, dt, op, c->comm, NULL));
    expect_reduced(c, out, dt, count, 0, salt, op, inplace ? "allreduce(in place)" : "allreduce");
}

/* Rank r reduces block r of every rank's n*count input. */
static void test_reduce_scatter(ctx_t *c, ncclDataType_t dt, size_t count, ncclRedOp_t op, int inplace)
{
    size_t sz = dtype_size(dt);
    fill(c->send, dt, count * c->n, c->rank, 5, op);
    void *out = inplace ? c->send + c->rank * count * sz : c->recv;
    NCHECK(ncclReduceScatter(c->send, out, count, dt, op, c->comm, NULL));
    expect_reduced(c, out, dt, count, c->rank * count, 5, op, "reducescatter");
}

static void test_reduce(ctx_t *c, ncclDataType_t dt, size_t count, ncclRedOp_t op, int inplace)
{
    int root = (int)(count % c->n);
    fill(c->send, dt, count, c->rank, 7, op);
    void *out = inplace ? c->send : c->recv;
    NCHECK(ncclReduce(c->send, out, count, dt, op, root, c->comm, NULL));
    if (c->rank == root)
        expect_reduced(c, out, dt, count, 0, 7, op, "reduce");
}

static void test_reductions(ctx_t *c, ncclDataType_t dt, size_t count)
{
    int fp8 = dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2;
    for (int op = ncclSum; op <= ncclAvg; op++) {
        if (fp8 && (op == ncclProd || op == ncclAvg)) /* few exact values: max, min, sum only */
            continue;
        for (int inplace = 0; inplace < 2; inplace++)
            test_allreduce(c, dt, count, (ncclRedOp_t)op, inplace);
    }
    for (int inplace = 0; inplace < 2; inplace++) {
        test_reduce_scatter(c, dt, count, inplace ? ncclMax : ncclSum, inplace);
        test_reduce(c, dt, count, inplace ? ncclMin : ncclSum, inplace);
    }
}

static void test_broadcast(ctx_t *c, ncclDataType_t dt, size_t count)
{
    for (int root = 0; root < c->n; root++) {
        int inplace = root % 2;
        fill(c->send, dt, count, c->rank, 11, ncclSum);
        void *out = inplace ? c->send : c->recv;
        NCHECK(ncclBroadcast(c->send, out, count, dt, root, c->comm, NULL));
        expect_input(c, out, dt, count, root, 0, 11, "broadcast");
    }
    int root = c->n - 1;
    fill(c->send, dt, count, c->rank, 12, ncclSum);
    NCHECK(ncclBcast(c->send, count, dt, root, c->comm, NULL));
    expect_input(c, c->send, dt, count, root, 0, 12, "bcast");
}

/* Every rank's block lands at offset rank*count; in place when this
 * rank's input already sits at its offset of recvbuff. */
static void test_allgather(ctx_t *c, ncclDataType_t dt, size_t count, int inplace)
{
    size_t sz = dtype_size(dt);
    void *in = inplace ? c->recv + c->rank * count * sz : c->send;
    fill(in, dt, count, c->rank, 13, ncclSum);
    NCHECK(ncclAllGather(in, c->recv, count, dt, c->comm, NULL));
    for (int r = 0; r < c->n; r++)
        expect_input(c, c->recv + r * count * sz, dt, count, r, 0, 13, "allgather");
}

/* Block p of rank r's input holds input_value(r, p*count + i); rank q
 * receives block q of every rank. */
static void test_alltoall(ctx_t *c, ncclDataType_t dt, size_t count)
{
    size_t sz = dtype_size(dt);
    fill(c->send, dt, count * c->n, c->rank, 17, ncclSum);
    NCHECK(ncclAlltoAll(c->send, c->recv, count, dt, c->comm, NULL));
    for (int r = 0; r < c->n; r++)
        expect_input(c, c->recv + r * count * sz, dt, count, r, c->rank * count, 17, "alltoall");
}

static void test_gather_scatter(ctx_t *c, ncclDataType_t dt, size_t count, int inplace)
{
    size_t sz = dtype_size(dt);
    int root = (int)((count + 1) % c->n);
    char *in = inplace && c->rank == root ? c->recv + root * count * sz : c->send;
    fill(in, dt, count, c->rank, 19, ncclSum);
    NCHECK(ncclGather(in, c->recv, count, dt, root, c->comm, NULL));
    if (c->rank == root)
        for (int r = 0; r < c->n; r++)
            expect_input(c, c->recv + r * count * sz, dt, count, r, 0, 19, "gather");

    fill(c->send, dt, count * c->n, c->rank, 23, ncclSum); /* root's is the one sent */
    char *out = inplace && c->rank == root ? c->send + root * count * sz : c->recv;
    NCHECK(ncclScatter(c->send, out, count, dt, root, c->comm, NULL));
    expect_input(c, out, dt, count, root, c->rank * count, 23, "scatter");
}

/* A ring exchange both ways in one group: would deadlock unless grouped. */
static void test_sendrecv(ctx_t *c, ncclDataType_t dt, size_t count)
{
    size_t sz = dtype_size(dt);
    int next = (c->rank + 1) % c->n, prev = (c->rank + c->n - 1) % c->n;
    fill(c->send, dt, count, c->rank, 29, ncclSum);
    NCHECK(ncclGroupStart());
    NCHECK(ncclSend(c->send, count, dt, next, c->comm, NULL));
    NCHECK(ncclSend(c->send, count, dt, prev, c->comm, NULL));
    NCHECK(ncclRecv(c->recv, count, dt, prev, c->comm, NULL));
    NCHECK(ncclRecv(c->recv + count * sz, count, dt, next, c->comm, NULL));
    NCHECK(ncclGroupEnd());
    expect_input(c, c->recv, dt, count, prev, 0, 29, "recv from prev");
    expect_input(c, c->recv + count * sz, dt, count, next, 0, 29, "recv from next");
}

/* Each rank scales its input by rank+1 before the sum: one scalar read at
 * creation, one read through its pointer when the call runs. */
static void test_premulsum(ctx_t *c, ncclDataType_t dt, size_t count, ncclScalarResidence_t residence)
{
    char scalar[8];
    ncclRedOp_t op;
    elem_set(scalar, dt, 0, c->rank + 1);
    NCHECK(ncclRedOpCreatePreMulSum(&op, scalar, dt, residence, c->comm));
    fill(c->send, dt, count, c->rank, 31, ncclSum);
    NCHECK(ncclAllReduce(c->send, c->recv, count, dt, op, c->comm, NULL));
    NCHECK(ncclRedOpDestroy(op, c->comm));
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < c->n; r++)
            want += (r + 1) * input_value(r, i, 31, ncclSum);
        if (!value_ok(elem_get(c->recv, dt, i), want, dt)) {
            FAILF("rank %d premulsum %s [%zu] = %g, want %g", c->rank, dtype_name(dt), i,
                  elem_get(c->recv, dt, i), want);
            return;
        }
    }
}

void suite_run(ncclComm_t comm)
{
    ctx_t c = {.comm = comm};
    NCHECK(ncclCommUserRank(comm, &c.rank));
    NCHECK(ncclCommCount(comm, &c.n));
    size_t bytes = (size_t)c.n * MAX_COUNT * 8;
    NCHECK(ncclMemAlloc((void **)&c.send, bytes));
    NCHECK(ncclMemAlloc((void **)&c.recv, bytes));
    if (!c.send || !c.recv)
        return;
    void *handle = NULL;
    NCHECK(ncclCommRegister(comm, c.send, bytes, &handle));
    for (int t = 0; t < NTYPES; t++) {
        ncclDataType_t dt = all_types[t];
        for (int k = 0; k < NCOUNTS; k++) {
            size_t count = counts[k];
            test_reductions(&c, dt, count);
            test_broadcast(&c, dt, count);
            for (int inplace = 0; inplace < 2; inplace++) {
                test_allgather(&c, dt, count, inplace);
                test_gather_scatter(&c, dt, count, inplace);
            }
            test_alltoall(&c, dt, count);
            test_sendrecv(&c, dt, count);
        }
    }
    static const ncclDataType_t premul_types[] = {ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16, ncclInt32};
    for (int t = 0; t < 5; t++)
        test_premulsum(&c, premul_types[t], 1031, t % 2 ? ncclScalarDevice : ncclScalarHostImmediate);
    NCHECK(ncclCommDeregister(comm, handle));
    NEXPECT(ncclInvalidArgument, ncclCommDeregister(comm, handle)); /* twice: refused, no double free */
    NCHECK(ncclMemFree(c.send));
    NCHECK(ncclMemFree(c.recv));
}
