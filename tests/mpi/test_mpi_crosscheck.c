/*
 * test_mpi_crosscheck.c - ccl against Open MPI on the same data, under
 * mpirun (run with -np 3 and -np 4). Rank 0 makes the ccl unique id and
 * MPI_Bcast shares it; then for every dtype both libraries support, every
 * op, odd counts and both placements, ccl_allreduce is compared with
 * MPI_Allreduce and ccl_allgather with MPI_Allgather. MPI has no average,
 * so ccl's avg is compared with MPI's sum / nranks (integer division for
 * integer types, as NCCL defines avg).
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
    default: return MPI_OP_NULL;
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
    if (total && memcmp(ccl_recv, mpi_recv, total) != 0) {
        size_t i = 0;
        while (memcmp((char *)ccl_recv + i * esz, (char *)mpi_recv + i * esz, esz) == 0)
            i++;
        char detail[300], e[64], gs[64];
        tst_format(e, sizeof(e), dt, tst_load(mpi_recv, i, dt));
        tst_format(gs, sizeof(gs), dt, tst_load(ccl_recv, i, dt));
        snprintf(detail, sizeof(detail), "first difference at index %zu (rank %zu's part): MPI %s, ccl %s",
                 i, count ? i / count : 0, e, gs);
        fail(what, detail);
    }
    if (tst_gbuf_check(&g, guard, sizeof(guard)))
        fail(what, guard);
    tst_gbuf_free(&g);
    free(send);
    free(mpi_recv);
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
        for (int o = 0; o < tst_num_ops; o++) {
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

    check_ccl(ccl_comm_destroy(g_comm), "ccl_comm_destroy");

    int total = 0;
    MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_mpi_crosscheck: nranks=%d, %d cases, %d mismatches (%.1fs)\n", g_nranks,
               k + 6, total, MPI_Wtime() - t0);
    fflush(stdout);
    fflush(stderr);
    if (total) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
