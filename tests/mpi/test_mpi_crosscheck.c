/*
 * test_mpi_crosscheck.c - ccl against Open MPI on the same data, under
 * mpirun (run with -np 3 and -np 4). Rank 0 makes the ccl unique id and
 * MPI_Bcast shares it; then for every dtype both libraries support (the
 * integer types, float32, float64), every op, odd counts and both
 * placements, ccl_allreduce is compared with MPI_Allreduce and ccl_allgather
 * with MPI_Allgather. MPI has no average, so ccl's avg is compared with
 * MPI's sum / nranks (integer division for integer types, as NCCL defines
 * avg). Then the other collectives, for sum, prod, max and min, roots 0,
 * middle and last, in place (MPI_IN_PLACE on the MPI side) and out of
 * place: ccl_reduce_scatter against MPI_Reduce_scatter_block, ccl_broadcast
 * and ccl_bcast against MPI_Bcast, ccl_reduce against MPI_Reduce,
 * ccl_alltoall against MPI_Alltoall, ccl_gather against MPI_Gather,
 * ccl_scatter against MPI_Scatter, and a ccl_send/ccl_recv ring in a group
 * against MPI_Sendrecv (peer distances 0, 1 and the middle).
 *
 * Exactness: the inputs come from tests/common's generator, which draws
 * float sum data from small dyadic values (every partial sum exact in any
 * order), prod data from powers of two, and keeps signed integers clear of
 * overflow, so ccl and MPI must agree bit for bit except for float avg,
 * which rounds (tolerance below). One extra pass uses general random floats
 * in [-1, 1) for sum, where the two libraries' different summation orders
 * legitimately differ in the last bits; see general_float_sum().
 *
 * With Open MPI 4.1, run with `--mca op ^avx`: its AVX reduction component
 * saturates 8-bit integer sums instead of wrapping (open-mpi/ompi#8045), so
 * without it MPI, not ccl, is wrong on uint8 sums (run_all.sh does this).
 *
 * Any mismatch is printed with its case and first bad index; after all
 * cases the failure count is summed and the job exits through MPI_Abort if
 * it is not zero. A ccl error aborts at once (peers would otherwise wait).
 */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_coll.h"
#include "test_common.h"

static int g_rank, g_nranks, g_failures;
static ccl_comm_t g_comm;

static MPI_Datatype mpi_type(ccl_datatype_t dt)
{
    switch (dt) {
    case CCL_INT8: return MPI_INT8_T;
    case CCL_UINT8: return MPI_UINT8_T;
    case CCL_INT32: return MPI_INT32_T;
    case CCL_UINT32: return MPI_UINT32_T;
    case CCL_INT64: return MPI_INT64_T;
    case CCL_UINT64: return MPI_UINT64_T;
    case CCL_FLOAT32: return MPI_FLOAT;
    case CCL_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(ccl_redop_t op)
{
    switch (op) {
    case CCL_SUM: return MPI_SUM;
    case CCL_PROD: return MPI_PROD;
    case CCL_MAX: return MPI_MAX;
    case CCL_MIN: return MPI_MIN;
    case CCL_AVG: return MPI_SUM; /* divided by nranks afterwards */
    default: return MPI_OP_NULL; /* premulsum */
    }
}

static void die(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "rank %d: FATAL ", g_rank);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    _exit(2);
}

static void check_ccl(ccl_result_t rc, const char *what)
{
    if (rc != CCL_SUCCESS)
        die("%s: %s", what, ccl_get_error_string(rc));
}

static void fail(const char *what, const char *detail)
{
    g_failures++;
    if (g_failures <= 20)
        fprintf(stderr, "rank %d: FAIL %s: %s\n", g_rank, what, detail);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory%s%s", "", "");
    return p;
}

/* Float avg: both sides compute the exact sum; ccl then scales (perhaps
 * per input, as NCCL does) so its error is at most about (n + 2) unit
 * roundoffs of sum|x|/n; machine epsilon per step gives a 2x margin. */
static double avg_tol(ccl_datatype_t dt, double sum_abs)
{
    double eps = dt == CCL_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON;
    return (double)(g_nranks + 2) * eps * sum_abs / g_nranks;
}

static void compare_allreduce(const char *what, ccl_datatype_t dt, ccl_redop_t op, size_t count,
                              const void *got, const void *mpi_sum_or_result,
                              const double *sum_abs)
{
    size_t nbad = 0, first = 0;
    char exp_s[64] = "", got_s[64] = "";
    for (size_t i = 0; i < count; i++) {
        tst_scalar_t e = tst_load(mpi_sum_or_result, i, dt);
        tst_scalar_t g = tst_load(got, i, dt);
        double tol = 0.0;
        if (op == CCL_AVG) {
            if (tst_dtype_is_float(dt)) {
                e.f /= g_nranks;
                tol = avg_tol(dt, sum_abs[i]);
            } else if (dt == CCL_INT8 || dt == CCL_INT32 || dt == CCL_INT64) {
                e.i /= g_nranks;
            } else {
                e.u /= (uint64_t)g_nranks;
            }
        }
        if (!tst_equal(dt, e, g, tol)) {
            if (nbad++ == 0) {
                first = i;
                tst_format(exp_s, sizeof(exp_s), dt, e);
                tst_format(got_s, sizeof(got_s), dt, g);
            }
        }
    }
    if (nbad) {
        char detail[300];
        snprintf(detail, sizeof(detail),
                 "%zu elements differ, first at index %zu: MPI%s %s, ccl %s", nbad, first,
                 op == CCL_AVG ? " sum/n" : "", exp_s, got_s);
        fail(what, detail);
    }
}

static void allreduce_case(ccl_datatype_t dt, ccl_redop_t op, size_t count, int inplace,
                           uint64_t seed)
{
    char what[200], guard[160];
    size_t esz = tst_dtype_size(dt);
    size_t bytes = count * esz;
    snprintf(what, sizeof(what), "allreduce dtype=%s op=%s count=%zu nranks=%d %s",
             tst_dtype_name(dt), tst_op_name(op), count, g_nranks,
             inplace ? "in-place" : "out-of-place");

    void *send = xmalloc(bytes);
    void *mpi_recv = xmalloc(bytes);
    tst_gbuf_t g;
    void *ccl_recv = tst_gbuf_alloc(&g, bytes, 0, 0);
    double *abs_in = NULL, *sum_abs = NULL;
    tst_fill_input(send, count, dt, op, g_nranks, seed, g_rank, 0);

    if (inplace) {
        memcpy(ccl_recv, send, bytes);
        check_ccl(ccl_allreduce(ccl_recv, ccl_recv, count, dt, op, g_comm, NULL), what);
        memcpy(mpi_recv, send, bytes);
        MPI_Allreduce(MPI_IN_PLACE, mpi_recv, (int)count, mpi_type(dt), mpi_op(op),
                      MPI_COMM_WORLD);
    } else {
        check_ccl(ccl_allreduce(send, ccl_recv, count, dt, op, g_comm, NULL), what);
        MPI_Allreduce(send, mpi_recv, (int)count, mpi_type(dt), mpi_op(op), MPI_COMM_WORLD);
    }
    if (op == CCL_AVG && tst_dtype_is_float(dt)) {
        abs_in = xmalloc(count * sizeof(double));
        sum_abs = xmalloc(count * sizeof(double));
        for (size_t i = 0; i < count; i++)
            abs_in[i] = fabs(tst_load(send, i, dt).f);
        MPI_Allreduce(abs_in, sum_abs, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    compare_allreduce(what, dt, op, count, ccl_recv, mpi_recv, sum_abs);
    if (tst_gbuf_check(&g, guard, sizeof(guard)))
        fail(what, guard);
    if (!inplace) {
        tst_mismatch_t mm;
        if (tst_check_input(send, count, dt, op, g_nranks, seed, g_rank, 0, &mm))
            fail(what, "ccl modified the send buffer");
    }
    tst_gbuf_free(&g);
    free(send);
    free(mpi_recv);
    free(abs_in);
    free(sum_abs);
}

/* Data that was only moved: ccl's n elements must be MPI's, bit for bit;
 * block is the per-rank count, to name whose part differs. */
static void compare_bytes(const char *what, ccl_datatype_t dt, size_t block, size_t n,
                          const void *ccl_res, const void *mpi_res)
{
    size_t esz = tst_dtype_size(dt);
    if (!n || memcmp(ccl_res, mpi_res, n * esz) == 0)
        return;
    size_t i = 0;
    while (memcmp((const char *)ccl_res + i * esz, (const char *)mpi_res + i * esz, esz) == 0)
        i++;
    char detail[300], e[64], gs[64];
    tst_format(e, sizeof(e), dt, tst_load(mpi_res, i, dt));
    tst_format(gs, sizeof(gs), dt, tst_load(ccl_res, i, dt));
    snprintf(detail, sizeof(detail), "first difference at index %zu (block %zu): MPI %s, ccl %s", i,
             block ? i / block : 0, e, gs);
    fail(what, detail);
}

static void allgather_case(ccl_datatype_t dt, size_t count, int inplace, uint64_t seed)
{
    char what[200], guard[160];
    size_t esz = tst_dtype_size(dt);
    size_t bytes = count * esz, total = bytes * (size_t)g_nranks;
    snprintf(what, sizeof(what), "allgather dtype=%s count=%zu nranks=%d %s", tst_dtype_name(dt),
             count, g_nranks, inplace ? "in-place" : "out-of-place");

    void *send = xmalloc(bytes);
    void *mpi_recv = xmalloc(total);
    tst_gbuf_t g;
    void *ccl_recv = tst_gbuf_alloc(&g, total, 0, 0);
    tst_fill_input(send, count, dt, TST_OP_COPY, g_nranks, seed, g_rank, 0);

    if (inplace) {
        memcpy((char *)ccl_recv + (size_t)g_rank * bytes, send, bytes);
        check_ccl(ccl_allgather((char *)ccl_recv + (size_t)g_rank * bytes, ccl_recv, count, dt,
                                g_comm, NULL),
                  what);
        memset(mpi_recv, 0, total);
        memcpy((char *)mpi_recv + (size_t)g_rank * bytes, send, bytes);
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, mpi_recv, (int)count, mpi_type(dt),
                      MPI_COMM_WORLD);
    } else {
        check_ccl(ccl_allgather(send, ccl_recv, count, dt, g_comm, NULL), what);
        MPI_Allgather(send, (int)count, mpi_type(dt), mpi_recv, (int)count, mpi_type(dt),
                      MPI_COMM_WORLD);
    }
    compare_bytes(what, dt, count, total / (esz ? esz : 1), ccl_recv, mpi_recv);
    if (tst_gbuf_check(&g, guard, sizeof(guard)))
        fail(what, guard);
    tst_gbuf_free(&g);
    free(send);
    free(mpi_recv);
}

/* One case of the other collectives: ccl runs it through tests/common's
 * case machinery (guarded buffers, result and untouched-input checks), MPI
 * on its own copies of the same inputs; then the results must agree. */
static void other_case(const tst_case_t *c)
{
    char what[200], msg[600];
    int n = g_nranks, r = g_rank, root = c->root, is_root = r == root;
    size_t cnt = c->count, esz = tst_dtype_size(c->dt), nc = (size_t)n * cnt;
    MPI_Datatype t = mpi_type(c->dt);
    MPI_Op op = mpi_op(c->op);
    ccl_redop_t dop = tst_coll_reduces(c->coll) ? c->op : TST_OP_COPY;
    int ic = (int)cnt, inplace = c->inplace && tst_coll_has_inplace(c->coll);
    tst_bufs_t b;
    tst_case_str(c, n, what, sizeof(what));

    /* MPI's input: this rank's send data as ccl's case has it (n blocks
     * where the send side has n), and room for n blocks of result. */
    void *in = xmalloc(nc * esz), *out = xmalloc(nc * esz);
    tst_fill_input(in, nc, c->dt, dop, n, c->seed, r, 0);
    memset(out, 0, nc * esz);

    tst_case_prepare(c, r, n, &b, 0);
    check_ccl(tst_case_issue(c, &b, g_comm, NULL), what);
    if (tst_case_verify(c, r, n, &b, msg, sizeof(msg)))
        fail("against the serial reference", msg);

    const void *ccl_res = b.recvp, *mpi_res = out;
    size_t res_elems = cnt, block = cnt;
    int reduced = 0, have = 1;
    switch (c->coll) {
    case TST_REDUCE_SCATTER:
        reduced = 1;
        if (inplace) {
            memcpy(out, in, nc * esz);
            MPI_Reduce_scatter_block(MPI_IN_PLACE, out, ic, t, op, MPI_COMM_WORLD);
        } else {
            MPI_Reduce_scatter_block(in, out, ic, t, op, MPI_COMM_WORLD);
        }
        break;
    case TST_BROADCAST:
    case TST_BCAST:
        if (is_root)
            memcpy(out, in, cnt * esz);
        MPI_Bcast(out, ic, t, root, MPI_COMM_WORLD);
        break;
    case TST_REDUCE:
        reduced = 1;
        have = is_root;
        if (inplace && is_root) {
            memcpy(out, in, cnt * esz);
            MPI_Reduce(MPI_IN_PLACE, out, ic, t, op, root, MPI_COMM_WORLD);
        } else {
            MPI_Reduce(in, out, ic, t, op, root, MPI_COMM_WORLD);
        }
        break;
    case TST_ALLTOALL:
        res_elems = nc;
        MPI_Alltoall(in, ic, t, out, ic, t, MPI_COMM_WORLD);
        break;
    case TST_GATHER:
        res_elems = nc;
        have = is_root;
        if (inplace && is_root) {
            memcpy((char *)out + (size_t)root * cnt * esz, in, cnt * esz);
            MPI_Gather(MPI_IN_PLACE, ic, t, out, ic, t, root, MPI_COMM_WORLD);
        } else {
            MPI_Gather(in, ic, t, out, ic, t, root, MPI_COMM_WORLD);
        }
        break;
    case TST_SCATTER:
        if (inplace && is_root) {
            MPI_Scatter(in, ic, t, MPI_IN_PLACE, ic, t, root, MPI_COMM_WORLD);
            mpi_res = (char *)in + (size_t)root * cnt * esz; /* the root's block stays put */
        } else {
            MPI_Scatter(in, ic, t, out, ic, t, root, MPI_COMM_WORLD);
        }
        break;
    case TST_SENDRECV: {
        int d = root % n;
        MPI_Sendrecv(in, ic, t, (r + d) % n, 7, out, ic, t, (r - d + n) % n, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        break;
    }
    default: have = 0; break;
    }
    if (have && reduced)
        compare_allreduce(what, c->dt, c->op, res_elems, ccl_res, mpi_res, NULL);
    else if (have)
        compare_bytes(what, c->dt, block, res_elems, ccl_res, mpi_res);
    tst_case_release(&b);
    free(in);
    free(out);
}

/* Every dtype MPI has; ops sum/prod/max/min for the reducing ones; every
 * count; both placements; roots 0, middle and last. The big count runs for
 * one (op, root) per dtype and placement, in turn. Returns the number of
 * cases run. */
static int other_collectives(uint64_t base, const size_t *counts, size_t ncounts, size_t big)
{
    static const tst_coll_t colls[] = {TST_REDUCE_SCATTER, TST_BROADCAST, TST_BCAST, TST_REDUCE,
                                       TST_ALLTOALL,       TST_GATHER,    TST_SCATTER, TST_SENDRECV};
    static const ccl_redop_t ops[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN};
    const int roots[3] = {0, g_nranks / 2, g_nranks - 1};
    int k = 0;
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
        tst_coll_t coll = colls[ci];
        int nops = tst_coll_reduces(coll) ? 4 : 1;
        int nroots = tst_coll_rooted(coll) ? 3 : 1;
        int nplace = tst_coll_has_inplace(coll) ? 2 : 1;
        for (int d = 0; d < tst_num_dtypes; d++) {
            if (mpi_type(tst_dtypes[d]) == MPI_DATATYPE_NULL)
                continue;
            for (int o = 0; o < nops; o++) {
                for (size_t c = 0; c <= ncounts; c++) {
                    for (int p = 0; p < nplace; p++) {
                        for (int ri = 0; ri < nroots; ri++) {
                            if (c == ncounts && (o != (d + p) % nops || ri != (d + 2 * p) % nroots))
                                continue;
                            k++;
                            tst_case_t tc;
                            memset(&tc, 0, sizeof(tc));
                            tc.coll = coll;
                            tc.dt = tst_dtypes[d];
                            tc.op = tst_coll_reduces(coll) ? ops[o] : TST_OP_COPY;
                            tc.count = c < ncounts ? counts[c] : big;
                            tc.inplace = p;
                            tc.root = roots[ri];
                            tc.null_unused = k & 1;
                            tc.seed = tst_case_seed(base, (uint64_t)g_nranks, (uint64_t)k, 4, 0);
                            other_case(&tc);
                        }
                    }
                }
            }
        }
    }
    return k;
}

/* General random floats in [-1, 1): each library's sum has error at most
 * (n - 1) unit roundoffs of sum|x| whatever its order, so the two differ by
 * at most (n - 1) * eps * sum|x| (eps = 2 unit roundoffs). */
static void general_float_sum(ccl_datatype_t dt, size_t count, uint64_t seed)
{
    char what[200];
    size_t esz = tst_dtype_size(dt), bytes = count * esz;
    double eps = dt == CCL_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON;
    snprintf(what, sizeof(what), "allreduce dtype=%s op=sum count=%zu nranks=%d general random data",
             tst_dtype_name(dt), count, g_nranks);
    void *send = xmalloc(bytes), *a = xmalloc(bytes), *b = xmalloc(bytes);
    double *absx = xmalloc(count * sizeof(double)), *sum_abs = xmalloc(count * sizeof(double));
    for (size_t i = 0; i < count; i++) {
        uint64_t h = tst_mix64(seed ^ tst_mix64(((uint64_t)g_rank << 40) ^ i));
        tst_scalar_t v;
        v.f = (double)(h >> 11) * 0x1p-52 - 1.0;
        tst_store(send, i, dt, v);
        absx[i] = fabs(tst_load(send, i, dt).f);
    }
    check_ccl(ccl_allreduce(send, a, count, dt, CCL_SUM, g_comm, NULL), what);
    MPI_Allreduce(send, b, (int)count, mpi_type(dt), MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(absx, sum_abs, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    size_t nbad = 0, first = 0;
    for (size_t i = 0; i < count; i++) {
        double tol = (double)(g_nranks - 1) * eps * sum_abs[i];
        if (!tst_equal(dt, tst_load(b, i, dt), tst_load(a, i, dt), tol) && nbad++ == 0)
            first = i;
    }
    if (nbad) {
        char detail[300];
        snprintf(detail, sizeof(detail), "%zu elements beyond tolerance, first at %zu: MPI %.17g, ccl %.17g",
                 nbad, first, tst_load(b, first, dt).f, tst_load(a, first, dt).f);
        fail(what, detail);
    }
    free(send);
    free(a);
    free(b);
    free(absx);
    free(sum_abs);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "test_mpi_crosscheck: timed out\n";
    ssize_t w = write(2, m, sizeof(m) - 1);
    (void)w;
    _exit(3);
}

int main(int argc, char **argv)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 13, 1021, 65537};
    const size_t ncounts = sizeof(counts) / sizeof(counts[0]);
    uint64_t base = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    ccl_unique_id_t id;
    double t0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
    signal(SIGALRM, on_alarm);
    alarm((unsigned)tst_timeout(240));
    t0 = MPI_Wtime();

    memset(&id, 0, sizeof(id));
    if (g_rank == 0)
        check_ccl(ccl_get_unique_id(&id), "ccl_get_unique_id");
    MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    check_ccl(ccl_comm_init_rank(&g_comm, g_nranks, id, g_rank), "ccl_comm_init_rank");

    int k = 0;
    for (int d = 0; d < tst_num_dtypes; d++) {
        if (mpi_type(tst_dtypes[d]) == MPI_DATATYPE_NULL)
            continue;
        for (int o = 0; o < tst_num_ops; o++) {
            if (mpi_op(tst_ops[o]) == MPI_OP_NULL)
                continue;
            for (size_t c = 0; c < ncounts; c++) {
                for (int inplace = 0; inplace < 2; inplace++, k++)
                    allreduce_case(tst_dtypes[d], tst_ops[o], counts[c], inplace,
                                   tst_case_seed(base, (uint64_t)g_nranks, (uint64_t)k, 1, 0));
            }
        }
        for (size_t c = 0; c < ncounts; c++) {
            for (int inplace = 0; inplace < 2; inplace++, k++)
                allgather_case(tst_dtypes[d], counts[c], inplace,
                               tst_case_seed(base, (uint64_t)g_nranks, (uint64_t)k, 2, 0));
        }
    }
    /* Larger than any slot or chunk size, and odd. */
    const size_t big = ((size_t)1 << 20) + 3;
    allreduce_case(CCL_FLOAT32, CCL_SUM, big, 0, tst_case_seed(base, 9, 1, 3, 0));
    allreduce_case(CCL_INT32, CCL_SUM, big, 1, tst_case_seed(base, 9, 2, 3, 0));
    allreduce_case(CCL_FLOAT64, CCL_AVG, big, 0, tst_case_seed(base, 9, 3, 3, 0));
    allgather_case(CCL_FLOAT32, big, 0, tst_case_seed(base, 9, 4, 3, 0));
    general_float_sum(CCL_FLOAT32, 65537, tst_case_seed(base, 9, 5, 3, 0));
    general_float_sum(CCL_FLOAT64, 65537, tst_case_seed(base, 9, 6, 3, 0));
    k += 6;
    static const size_t other_counts[] = {0, 1, 7, 1021};
    k += other_collectives(base, other_counts, sizeof(other_counts) / sizeof(other_counts[0]),
                           65537);
    /* Blocks above 1 MiB, once per collective. */
    {
        tst_case_t bigc;
        memset(&bigc, 0, sizeof(bigc));
        static const tst_coll_t bc[] = {TST_REDUCE_SCATTER, TST_BROADCAST, TST_REDUCE,
                                        TST_ALLTOALL,       TST_GATHER,    TST_SCATTER,
                                        TST_SENDRECV};
        for (size_t j = 0; j < sizeof(bc) / sizeof(bc[0]); j++, k++) {
            bigc.coll = bc[j];
            bigc.dt = j & 1 ? CCL_FLOAT32 : CCL_INT32;
            bigc.op = tst_coll_reduces(bc[j]) ? CCL_SUM : TST_OP_COPY;
            bigc.count = ((size_t)1 << 20) / 4 + 3;
            bigc.inplace = (int)(j >> 1) & 1;
            bigc.root = (int)j % g_nranks;
            bigc.seed = tst_case_seed(base, 9, 7, j, 0);
            other_case(&bigc);
        }
    }

    check_ccl(ccl_comm_destroy(g_comm), "ccl_comm_destroy");

    int total = 0;
    MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_mpi_crosscheck: nranks=%d, %d cases, %d mismatches (%.1fs)\n", g_nranks,
               k, total, MPI_Wtime() - t0);
    fflush(stdout);
    fflush(stderr);
    if (total) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
