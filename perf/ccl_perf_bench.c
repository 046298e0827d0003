/*
 * ccl_perf_bench.c - the measurement itself, step for step as nccl-tests'
 * TimeTest/BenchTime: per dtype and op, warm up at the largest and smallest
 * size, then per size time -n calls out of place and in place, reduce the
 * time over ranks (-a), check one more call per placement (-c), and print
 * one row of nccl-tests' table on rank 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ccl_perf.h"

void perf_die(const struct perf_ctx *x, const char *call, ccl_result_t res)
{
    fprintf(stderr, "ccl-perf: rank %d: %s failed: %s: %s\n", x->rank, call,
            ccl_get_error_string(res), ccl_get_last_error(x->comm));
    exit(EXIT_FAILURE);
}

int64_t perf_allreduce_i64(struct perf_ctx *x, int64_t v, ccl_redop_t op)
{
    int64_t out = 0;
    ccl_result_t res = ccl_allreduce(&v, &out, 1, CCL_INT64, op, x->comm, NULL);
    if (res != CCL_SUCCESS)
        perf_die(x, "ccl_allreduce", res);
    return out;
}

static void barrier(struct perf_ctx *x) { (void)perf_allreduce_i64(x, 0, CCL_SUM); }

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- one call ----------------------------------------------------------- */

static void setup_size(struct perf_ctx *x, size_t bytes)
{
    x->coll->counts(bytes / x->dt->size, x->nranks, &x->cur);
}

/* The size column and the numerator of algbw (nccl-tests: the larger of the
 * send and receive side, e.g. the gathered total for allgather). */
static size_t row_bytes(const struct perf_ctx *x)
{
    size_t n = x->cur.send > x->cur.recv ? x->cur.send : x->cur.recv;
    return n * x->dt->size;
}

/* Like nccl-tests, each iteration uses the next slice of the buffers, so
 * small sizes do not always hit the same cache lines. A slice is as large as
 * the larger side: in place, both sides live in the receive buffer. */
static void slice_of(const struct perf_ctx *x, void *send_base, void *recv_base, int in_place,
                     int iter, char **send, char **recv)
{
    size_t elt = x->dt->size, span = row_bytes(x);
    size_t cap = x->send_cap < x->recv_cap ? x->send_cap : x->recv_cap;
    size_t steps = span ? cap / span : 1;
    size_t k = steps ? (size_t)iter % steps : 0;
    *recv = (char *)recv_base + k * span;
    *send = (char *)send_base + k * span;
    if (in_place) {
        *send = *recv + (size_t)x->rank * x->cur.send_inplace * elt;
        *recv += (size_t)x->rank * x->cur.recv_inplace * elt;
    }
}

void perf_call_buffers(const struct perf_ctx *x, int in_place, int iter, char **send,
                       char **recv)
{
    slice_of(x, x->send, x->recv, in_place, iter, send, recv);
}

void perf_host_buffers(const struct perf_ctx *x, int in_place, int iter, char **send,
                       char **recv)
{
    slice_of(x, x->hsend, x->hrecv, in_place, iter, send, recv);
}

static void start_coll(struct perf_ctx *x, int in_place, int iter)
{
    char *send, *recv;
    perf_call_buffers(x, in_place, iter, &send, &recv);
    ccl_result_t res = x->coll->run(x, send, recv, x->cur.param, x->op);
    if (res != CCL_SUCCESS)
        perf_die(x, x->coll->run_name, res);
}

/* With -z 0 calls were only queued; this is where they finish (or fail).
 * On a CUDA stream a failure shows in the comm's error at the next call. */
static void complete(struct perf_ctx *x)
{
    if (x->device >= 0) {
        if (x->stream)
            perf_dev_sync(x);
        return;
    }
    if (!x->stream)
        return;
    ccl_result_t res = ccl_stream_synchronize(x->stream);
    if (res != CCL_SUCCESS)
        perf_die(x, "ccl_stream_synchronize", res);
}

/* nccl-tests' -z 1 also barriers after each call; here a barrier would be one
 * more ccl collective inside the timed loop, so -z 1 only makes calls block
 * (NULL stream) and -z 0 queues them all before one synchronize. */
static void run_iters(struct perf_ctx *x, int in_place, int n)
{
    for (int i = 0; i < n; i++)
        start_coll(x, in_place, i);
    complete(x);
}

/* ---- output (rank 0) ---------------------------------------------------- */

/* Only rank 0 prints the table; every rank still runs the same code so the
 * collectives inside stay matched. Needs `x` in scope. */
#define PRINT(...)                  \
    do {                            \
        if (x->rank == 0)           \
            printf(__VA_ARGS__);    \
    } while (0)

static void print_header(struct perf_ctx *x, const char *desc,
                         const struct perf_rank_info *ranks)
{
    const struct perf_args *a = x->a;
    int v = 0;
    ccl_get_version(&v);
    PRINT("# ccl-perf: %s, %s, %s, ccl %d.%d.%d\n", x->coll->name, desc,
          x->device >= 0 ? "device memory (staged through host memory)" : "host memory", v / 10000,
          v / 100 % 100, v % 100);
    if (x->device >= 0)
        PRINT("# rank 0 on %s; calls on a CUDA stream%s\n", x->device_name,
              a->blocking ? " (NULL: blocking)" : "");
    PRINT("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d validation: %d\n",
          a->min_bytes, a->max_bytes, a->step_factor > 1 ? a->step_factor : a->step_bytes,
          a->step_factor > 1 ? "factor" : "bytes", a->warmup, a->iters, a->check);
    if (a->blocking)
        PRINT("# Blocking Enabled: each call waits for completion (NULL stream)\n");
    PRINT("#\n");
    for (int r = 0; r < x->nranks; r++)
        PRINT("#  Rank %2d Pid %6d on %10s\n", r, (int)ranks[r].pid, ranks[r].host);
    PRINT("#\n");
    PRINT("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n",
          "", "", "", "", "");
    PRINT("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
          "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
          "#wrong");
    PRINT("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
          "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

static void print_row_head(struct perf_ctx *x)
{
    const struct perf_coll *c = x->coll;
    PRINT("%12zu  %12zu  %8s  %6s  %6d", row_bytes(x), x->cur.param, x->dt->name,
          c->reduces ? perf_op_names[x->op_index] : "none", c->rooted ? x->root : -1);
}

static void print_result(struct perf_ctx *x, double sec, double algbw, double busbw,
                         int64_t wrong)
{
    double us = sec * 1e6;
    char time_s[32], wrong_s[24];
    /* nccl-tests' precision steps keep the column 7 wide; below 1 us one
     * digit more, since small calls take 0.05-0.2 us on these machines and
     * two decimals rounded them by up to 10% (mpi-bench does the same). */
    if (us >= 10000.0)
        snprintf(time_s, sizeof(time_s), "%7.0f", us);
    else if (us >= 100.0)
        snprintf(time_s, sizeof(time_s), "%7.1f", us);
    else if (us >= 1.0)
        snprintf(time_s, sizeof(time_s), "%7.2f", us);
    else
        snprintf(time_s, sizeof(time_s), "%7.3f", us);
    if (wrong < 0)
        snprintf(wrong_s, sizeof(wrong_s), "N/A");
    else
        snprintf(wrong_s, sizeof(wrong_s), "%lld", (long long)wrong);
    PRINT("  %7s  %6.2f  %6.2f  %5s", time_s, algbw, busbw, wrong_s);
}

/* A placement the collective does not have (alltoall in place). */
static void print_not_applicable(struct perf_ctx *x)
{
    PRINT("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
}

static void print_footer(struct perf_ctx *x, int errors)
{
    double avg = x->bw_count ? x->bw_sum / x->bw_count : 0.0;
    PRINT("# Out of bounds values : %d %s\n", errors, errors ? "FAILED" : "OK");
    PRINT("# Avg bus bandwidth    : %g \n", avg);
    PRINT("#\n");
    if (x->rank == 0)
        fflush(stdout);
}

/* ---- timing and checking -------------------------------------------------- */

/* Reduces this rank's elapsed time over ranks as -a asks. */
static double reduce_seconds(struct perf_ctx *x, int64_t ns)
{
    double total;
    switch (x->a->average) {
    case 0: total = (double)perf_allreduce_i64(x, x->rank == 0 ? ns : 0, CCL_SUM); break;
    case 2: total = (double)perf_allreduce_i64(x, ns, CCL_MIN); break;
    case 3: total = (double)perf_allreduce_i64(x, ns, CCL_MAX); break;
    default: total = (double)perf_allreduce_i64(x, ns, CCL_SUM) / x->nranks; break;
    }
    return total / 1e9 / x->a->iters;
}

static void plan_data(struct perf_ctx *x, struct perf_data *d)
{
    perf_data_plan(d, x->dt, x->op_index, x->coll->reduces, x->nranks, x->seed);
}

/* Inputs into the host buffers, then (-m device) into the device ones:
 * the call's slice is the first row_bytes of each. */
static void fill(struct perf_ctx *x, const struct perf_data *d, int in_place)
{
    x->coll->fill(x, d, in_place);
    if (x->device >= 0)
        perf_dev_upload(x, row_bytes(x));
}

/* Wrong elements over all ranks, or -1 with -c 0. */
static int64_t check_calls(struct perf_ctx *x, int in_place)
{
    const struct perf_coll *c = x->coll;
    int64_t wrong = -1;
    for (int i = 0; i < x->a->check; i++) {
        struct perf_data d;
        x->seed++; /* fresh values, so a stale result cannot pass */
        plan_data(x, &d);
        fill(x, &d, in_place);
        start_coll(x, in_place, 0);
        complete(x);
        if (x->device >= 0)
            perf_dev_download(x, row_bytes(x));
        wrong = perf_allreduce_i64(x, c->check(x, &d, in_place), CCL_SUM);
        if (wrong)
            break;
    }
    return wrong;
}

/* The row's JSON object (-J), on rank 0. */
static void json_row(const struct perf_ctx *x, int in_place, int applicable, double sec, double algbw, double busbw,
                     int64_t wrong)
{
    if (x->rank != 0 || !x->a->json_path)
        return;
    const struct perf_coll *c = x->coll;
    struct perf_json_row_t r = {c->name, x->dt->name, c->reduces ? perf_op_names[x->op_index] : "none",
                                row_bytes(x), x->cur.param, c->rooted ? x->root : -1, in_place, applicable,
                                sec * 1e6, algbw, busbw, (long long)wrong};
    perf_json_row(&r);
}

static void bench_time(struct perf_ctx *x, int in_place)
{
    const struct perf_coll *c = x->coll;
    if (in_place && c->no_inplace) {
        print_not_applicable(x);
        json_row(x, in_place, 0, 0, 0, 0, -1);
        return;
    }
    /* Valid inputs for the timed calls too: reductions over the poison or
     * leftovers could hit slow paths (NaN, denormals) and skew the time. */
    if (x->a->check) {
        struct perf_data d;
        plan_data(x, &d);
        fill(x, &d, in_place);
    }
    /* One untimed call makes the row's first-call costs (connections, peer
     * mappings) untimed. -W 1 warms the whole rotation, as MPI benchmarks
     * do: on these VMs the first access to a page through a new mapping
     * (a peer's buffer, read in place) costs ~10 us, once per page. */
    run_iters(x, in_place, x->a->warmup_every_size && x->a->warmup > 1 ? x->a->warmup : 1);
    barrier(x);

    int64_t t0 = now_ns();
    run_iters(x, in_place, x->a->iters);
    double sec = reduce_seconds(x, now_ns() - t0);

    double algbw = (double)row_bytes(x) / 1e9 / sec;
    double busbw = algbw * c->bus_factor(x->nranks);
    int64_t wrong = check_calls(x, in_place);

    print_result(x, sec, algbw, busbw, wrong);
    json_row(x, in_place, 1, sec, algbw, busbw, wrong);
    x->bw_sum += busbw;
    x->bw_count++;
    x->errors += wrong > 0;
}

/* ---- one dtype and op ----------------------------------------------------- */

enum probe { PROBE_OK, PROBE_SKIP_OP, PROBE_SKIP_DTYPE };

static int unsupported(ccl_result_t res)
{
    return res == CCL_ERR_UNSUPPORTED || res == CCL_ERR_INVALID_DTYPE ||
           res == CCL_ERR_INVALID_OP;
}

/* Unsupported is fatal unless the dtype or op came from "all". An
 * unsupported first op of a dtype (other than an invalid op) is taken to
 * mean the dtype, so it gets one note rather than one per op. */
static enum probe skip_or_die(struct perf_ctx *x, const char *call, ccl_result_t res,
                              int skippable, int first_op)
{
    if (!unsupported(res) || !skippable)
        perf_die(x, call, res);
    int whole = !x->coll->reduces || (first_op && res != CCL_ERR_INVALID_OP);
    PRINT("# skipping %s%s%s: %s: %s\n", x->dt->name, whole ? "" : " ",
          whole ? "" : perf_op_names[x->op_index], ccl_get_error_string(res),
          ccl_get_last_error(x->comm));
    return whole ? PROBE_SKIP_DTYPE : PROBE_SKIP_OP;
}

/* A count-1 call tells whether this ccl runs the dtype/op at all; every rank
 * gets the same answer since argument checks are local. It blocks (NULL
 * stream), so a refusal shows here rather than at a later synchronize. */
static enum probe probe(struct perf_ctx *x, int skippable, int first_op)
{
    ccl_stream_t stream = x->stream;
    x->stream = NULL;
    ccl_result_t res = x->coll->run(x, x->send, x->recv, 1, x->op);
    x->stream = stream;
    if (res == CCL_SUCCESS)
        return PROBE_OK;
    return skip_or_die(x, x->coll->run_name, res, skippable, first_op);
}

/* Sets x->op for x->op_index: a built-in op, or this rank's premulsum
 * operator for the current dtype (released by release_op). */
static enum probe make_op(struct perf_ctx *x, int skippable, int first_op)
{
    if (x->op_index != PERF_OP_PREMULSUM || !x->coll->reduces) {
        x->op = x->coll->reduces ? (ccl_redop_t)x->op_index : CCL_SUM;
        return PROBE_OK;
    }
    unsigned char scalar[8];
    perf_data_encode(x->dt, scalar, perf_premul_scalar(x->rank));
    ccl_result_t res = ccl_redop_create_premulsum(&x->op, scalar, x->dt->id,
                                                  CCL_SCALAR_HOST_IMMEDIATE, x->comm);
    if (res == CCL_SUCCESS)
        return PROBE_OK;
    return skip_or_die(x, "ccl_redop_create_premulsum", res, skippable, first_op);
}

static void release_op(struct perf_ctx *x)
{
    if (x->op_index != PERF_OP_PREMULSUM || !x->coll->reduces)
        return;
    ccl_result_t res = ccl_redop_destroy(x->op, x->comm);
    if (res != CCL_SUCCESS)
        perf_die(x, "ccl_redop_destroy", res);
}

static size_t next_size(const struct perf_args *a, size_t size)
{
    if (a->step_factor > 1)
        return size ? size * a->step_factor : 1;
    return size + a->step_bytes;
}

/* Warmup, then one row per size (nccl-tests' TimeTest). */
static void time_test(struct perf_ctx *x)
{
    const struct perf_args *a = x->a;
    barrier(x);
    setup_size(x, a->max_bytes);
    run_iters(x, 0, a->warmup);
    setup_size(x, a->min_bytes);
    run_iters(x, 0, a->warmup);

    for (int cycle = 0; cycle < a->cycles; cycle++) {
        for (size_t size = a->min_bytes; size <= a->max_bytes;) {
            setup_size(x, size);
            print_row_head(x);
            bench_time(x, 0);
            bench_time(x, 1);
            PRINT("\n");
            size_t next = next_size(a, size);
            if (next <= size)
                break;
            size = next;
        }
    }
}

/* Every requested op and root of one dtype; returns how many tables ran. */
static int run_dtype(struct perf_ctx *x, const struct perf_dtype *dt)
{
    const struct perf_args *a = x->a;
    const struct perf_coll *c = x->coll;
    int skippable = a->dtypes_all || a->ops_all, tried = 0, ran = 0;
    int all_roots = c->rooted && a->root == PERF_ALL_ROOTS;
    x->dt = dt;
    for (int op = 0; op < PERF_NUM_OPS; op++) {
        int wanted = c->reduces ? (a->ops >> op) & 1 : op == CCL_SUM;
        if (!wanted)
            continue;
        x->op_index = op;
        int first_root = all_roots || !c->rooted ? 0 : a->root;
        int end_root = all_roots ? x->nranks : first_root + 1;
        x->root = first_root;
        int first_op = !tried++;
        enum probe p = make_op(x, skippable, first_op);
        if (p == PROBE_OK) {
            p = probe(x, skippable, first_op);
            if (p == PROBE_OK) {
                for (x->root = first_root; x->root < end_root; x->root++)
                    time_test(x);
                ran++;
            }
            release_op(x);
        }
        if (p == PROBE_SKIP_DTYPE)
            break;
    }
    return ran;
}

/* One nccl-tests table: every requested dtype, op, root and size of x->coll;
 * returns how many (dtype, op) pairs ran. */
static int run_coll(struct perf_ctx *x, const char *launch_desc,
                    const struct perf_rank_info *ranks)
{
    const struct perf_args *a = x->a;
    int ran = 0, errors = x->errors;
    x->bw_sum = 0;
    x->bw_count = 0;
    print_header(x, launch_desc, ranks);
    for (int t = 0; t < perf_num_dtypes; t++)
        if ((a->dtypes >> t) & 1)
            ran += run_dtype(x, &perf_dtypes[t]);
    print_footer(x, x->errors - errors);
    if (!ran && x->rank == 0)
        fprintf(stderr, "ccl-perf: %s: nothing was run: this ccl supports none of the "
                        "requested types/ops\n", x->coll->name);
    return ran;
}

int perf_bench(struct perf_ctx *x, const char *launch_desc, const struct perf_rank_info *ranks)
{
    const struct perf_args *a = x->a;
    int failed = 0;
    /* Every rank sees the same counts, so all stop here together. */
    for (int i = 0; i < perf_num_colls; i++)
        if ((a->colls >> i) & 1 && perf_colls[i].rooted && a->root >= x->nranks) {
            if (x->rank == 0)
                fprintf(stderr, "ccl-perf: -r %d: %s needs a rank below %d (or -1 for all)\n",
                        a->root, perf_colls[i].name, x->nranks);
            return EXIT_FAILURE;
        }
    x->seed = 99;
    if (x->rank == 0 && a->json_path && perf_json_open(a->json_path, x->nranks, launch_desc, a) != 0)
        failed = 1; /* reported; the tables still run, as every rank must */
    for (int i = 0; i < perf_num_colls; i++) {
        if (!((a->colls >> i) & 1))
            continue;
        x->coll = &perf_colls[i];
        failed |= !run_coll(x, launch_desc, ranks);
    }
    if (x->rank == 0)
        perf_json_close();
    return failed || x->errors ? EXIT_FAILURE : EXIT_SUCCESS;
}
