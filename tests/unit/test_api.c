/*
 * test_api.c - the public API's contract on bad input and its simplest real
 * results, in one process (cmocka). Every refusal must come back with its
 * specific code and leave a non-empty message in ccl_get_last_error: for a
 * call on a communicator the comm's message (each such case gets a fresh
 * comm, so the message cannot be left over from an earlier case), for a
 * call without one the calling thread's message (each such case runs in a
 * fresh thread for the same reason). Calls that must be refused on argument
 * checks alone are also required to return at once, never to block.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ccl.h"
#include "device/cuda_rt.h"
#include "test_coll.h"
#include "test_common.h"

/* A refused call must not wait for peers; anything slower hangs somewhere. */
#define REFUSE_FAST_S 2.0

static ccl_unique_id_t g_id;
static float g_send[64], g_recv[64 * 4];

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "test_api: timed out (a call that should fail at once blocked)\n";
    ssize_t w = write(2, m, sizeof(m) - 1);
    (void)w;
    _exit(2);
}

static const char *code_name(ccl_result_t rc)
{
    return ccl_get_error_string(rc);
}

/* ---- calls on a fresh 1-rank communicator -------------------------------- */

typedef ccl_result_t (*comm_call_fn)(ccl_comm_t comm);

static void expect_comm_error_n(int nranks, comm_call_fn fn, ccl_result_t want, ccl_result_t alt,
                                const char *what)
{
    ccl_comm_t comms[4] = {0};
    assert_int_equal(ccl_comm_init_all(comms, nranks, NULL), CCL_SUCCESS);
    const char *before = ccl_get_last_error(comms[0]);
    assert_non_null(before);
    if (before[0] != '\0')
        fail_msg("%s: fresh comm already has an error message: \"%s\"", what, before);
    double t0 = tst_now();
    ccl_result_t rc = fn(comms[0]);
    double dt = tst_now() - t0;
    if (rc != want && rc != alt)
        fail_msg("%s: returned %d (%s), expected %d (%s)", what, (int)rc, code_name(rc),
                 (int)want, code_name(want));
    const char *msg = ccl_get_last_error(comms[0]);
    assert_non_null(msg);
    if (msg[0] == '\0')
        fail_msg("%s: refused with %s but ccl_get_last_error(comm) is empty", what,
                 code_name(rc));
    if (dt > REFUSE_FAST_S)
        fail_msg("%s: took %.1f s to refuse", what, dt);
    for (int r = 0; r < nranks; r++)
        assert_int_equal(ccl_comm_destroy(comms[r]), CCL_SUCCESS);
}

static void expect_comm_error(comm_call_fn fn, ccl_result_t want, const char *what)
{
    expect_comm_error_n(1, fn, want, want, what);
}

#define COMM_CALL(name, expr)                   \
    static ccl_result_t name(ccl_comm_t comm)   \
    {                                           \
        return (expr);                          \
    }

/* ---- calls without a communicator, each in a fresh thread ---------------- */

typedef ccl_result_t (*plain_call_fn)(void);

typedef struct {
    plain_call_fn fn;
    ccl_result_t rc;
    char before[256];
    char after[256];
    double seconds;
} thread_call_t;

static void *thread_call_main(void *p)
{
    thread_call_t *t = p;
    const char *b = ccl_get_last_error(NULL);
    snprintf(t->before, sizeof(t->before), "%s", b ? b : "(NULL)");
    double t0 = tst_now();
    t->rc = t->fn();
    t->seconds = tst_now() - t0;
    const char *a = ccl_get_last_error(NULL);
    snprintf(t->after, sizeof(t->after), "%s", a ? a : "(NULL)");
    return NULL;
}

static void expect_thread_error2(plain_call_fn fn, ccl_result_t want, ccl_result_t alt,
                                 const char *what)
{
    thread_call_t t;
    pthread_t th;
    memset(&t, 0, sizeof(t));
    t.fn = fn;
    assert_int_equal(pthread_create(&th, NULL, thread_call_main, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    if (t.before[0] != '\0')
        fail_msg("%s: a new thread already has an error message: \"%s\"", what, t.before);
    if (t.rc != want && t.rc != alt)
        fail_msg("%s: returned %d (%s), expected %d (%s)", what, (int)t.rc, code_name(t.rc),
                 (int)want, code_name(want));
    if (t.after[0] == '\0' || strcmp(t.after, "(NULL)") == 0)
        fail_msg("%s: refused with %s but ccl_get_last_error(NULL) is \"%s\"", what,
                 code_name(t.rc), t.after);
    if (t.seconds > REFUSE_FAST_S)
        fail_msg("%s: took %.1f s to refuse", what, t.seconds);
}

static void expect_thread_error(plain_call_fn fn, ccl_result_t want, const char *what)
{
    expect_thread_error2(fn, want, want, what);
}

#define PLAIN_CALL(name, expr)         \
    static ccl_result_t name(void)     \
    {                                  \
        return (expr);                 \
    }

/* ---- version and error strings ------------------------------------------- */

static void test_version(void **state)
{
    (void)state;
    int v = -1;
    assert_int_equal(ccl_get_version(&v), CCL_SUCCESS);
    assert_int_equal(v, CCL_VERSION_CODE);
    assert_int_equal(CCL_VERSION_CODE, CCL_MAJOR * 10000 + CCL_MINOR * 100 + CCL_PATCH);
}

static void test_error_strings(void **state)
{
    (void)state;
    const char *s[CCL_NUM_RESULTS];
    for (int r = 0; r < CCL_NUM_RESULTS; r++) {
        s[r] = ccl_get_error_string((ccl_result_t)r);
        assert_non_null(s[r]);
        if (s[r][0] == '\0')
            fail_msg("error string of code %d is empty", r);
        if (strcasestr(s[r], "unknown"))
            fail_msg("valid code %d has an \"unknown\" string: %s", r, s[r]);
        for (int q = 0; q < r; q++) {
            if (strcmp(s[q], s[r]) == 0)
                fail_msg("codes %d and %d share the string \"%s\"", q, r, s[r]);
        }
    }
    const int bad[] = {CCL_NUM_RESULTS, CCL_NUM_RESULTS + 1, -1, 12345, INT32_MIN};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        const char *u = ccl_get_error_string((ccl_result_t)bad[k]);
        assert_non_null(u);
        if (!strcasestr(u, "unknown"))
            fail_msg("code %d gives \"%s\", expected an \"unknown\" string", bad[k], u);
    }
}

/* ---- NULL out-pointers and bad sizes without a communicator -------------- */

PLAIN_CALL(call_version_null, ccl_get_version(NULL))
PLAIN_CALL(call_unique_id_null, ccl_get_unique_id(NULL))
PLAIN_CALL(call_init_rank_null, ccl_comm_init_rank(NULL, 1, g_id, 0))
PLAIN_CALL(call_init_all_null, ccl_comm_init_all(NULL, 1, NULL))
PLAIN_CALL(call_stream_create_null, ccl_stream_create(NULL))
PLAIN_CALL(call_mem_alloc_null, ccl_mem_alloc(NULL, 4096))

static ccl_result_t call_init_all_zero(void)
{
    ccl_comm_t c[2] = {0};
    return ccl_comm_init_all(c, 0, NULL);
}
static ccl_result_t call_init_all_negative(void)
{
    ccl_comm_t c[2] = {0};
    return ccl_comm_init_all(c, -3, NULL);
}

static void test_null_out_pointers(void **state)
{
    (void)state;
    expect_thread_error(call_version_null, CCL_ERR_INVALID_ARGUMENT, "ccl_get_version(NULL)");
    expect_thread_error(call_unique_id_null, CCL_ERR_INVALID_ARGUMENT, "ccl_get_unique_id(NULL)");
    expect_thread_error(call_init_rank_null, CCL_ERR_INVALID_ARGUMENT,
                        "ccl_comm_init_rank(NULL, ...)");
    expect_thread_error(call_init_all_null, CCL_ERR_INVALID_ARGUMENT,
                        "ccl_comm_init_all(NULL, 1, NULL)");
    expect_thread_error(call_stream_create_null, CCL_ERR_INVALID_ARGUMENT,
                        "ccl_stream_create(NULL)");
    expect_thread_error(call_mem_alloc_null, CCL_ERR_INVALID_ARGUMENT, "ccl_mem_alloc(NULL, 4096)");
    expect_thread_error(call_init_all_zero, CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_all(ndev=0)");
    expect_thread_error(call_init_all_negative, CCL_ERR_INVALID_ARGUMENT,
                        "ccl_comm_init_all(ndev=-3)");
}

COMM_CALL(call_count_null, ccl_comm_count(comm, NULL))
COMM_CALL(call_user_rank_null, ccl_comm_user_rank(comm, NULL))

static void test_null_out_pointers_on_comm(void **state)
{
    (void)state;
    expect_comm_error(call_count_null, CCL_ERR_INVALID_ARGUMENT, "ccl_comm_count(comm, NULL)");
    expect_comm_error(call_user_rank_null, CCL_ERR_INVALID_ARGUMENT,
                      "ccl_comm_user_rank(comm, NULL)");
}

/* ---- init_rank argument checks ------------------------------------------- */

static ccl_result_t init_rank_bad(int nranks, int rank)
{
    ccl_comm_t c = NULL;
    ccl_result_t rc = ccl_comm_init_rank(&c, nranks, g_id, rank);
    if (rc == CCL_SUCCESS)
        ccl_comm_destroy(c);
    return rc;
}
PLAIN_CALL(call_rank_negative, init_rank_bad(2, -1))
PLAIN_CALL(call_rank_too_big, init_rank_bad(2, 2))
PLAIN_CALL(call_rank_way_too_big, init_rank_bad(3, 1000))
PLAIN_CALL(call_nranks_zero, init_rank_bad(0, 0))
PLAIN_CALL(call_nranks_negative, init_rank_bad(-4, 0))

static void test_init_rank_args(void **state)
{
    (void)state;
    expect_thread_error2(call_rank_negative, CCL_ERR_INVALID_RANK, CCL_ERR_INVALID_ARGUMENT,
                         "ccl_comm_init_rank(nranks=2, rank=-1)");
    expect_thread_error2(call_rank_too_big, CCL_ERR_INVALID_RANK, CCL_ERR_INVALID_ARGUMENT,
                         "ccl_comm_init_rank(nranks=2, rank=2)");
    expect_thread_error2(call_rank_way_too_big, CCL_ERR_INVALID_RANK, CCL_ERR_INVALID_ARGUMENT,
                         "ccl_comm_init_rank(nranks=3, rank=1000)");
    expect_thread_error2(call_nranks_zero, CCL_ERR_INVALID_ARGUMENT, CCL_ERR_INVALID_RANK,
                         "ccl_comm_init_rank(nranks=0, rank=0)");
    expect_thread_error2(call_nranks_negative, CCL_ERR_INVALID_ARGUMENT, CCL_ERR_INVALID_RANK,
                         "ccl_comm_init_rank(nranks=-4, rank=0)");
}

/* ---- NULL communicator ----------------------------------------------------- */

static int g_int;
PLAIN_CALL(call_ar_null_comm, ccl_allreduce(g_send, g_recv, 4, CCL_FLOAT32, CCL_SUM, NULL, NULL))
PLAIN_CALL(call_ag_null_comm, ccl_allgather(g_send, g_recv, 4, CCL_FLOAT32, NULL, NULL))
PLAIN_CALL(call_count_null_comm, ccl_comm_count(NULL, &g_int))
PLAIN_CALL(call_rank_null_comm, ccl_comm_user_rank(NULL, &g_int))
PLAIN_CALL(call_destroy_null_comm, ccl_comm_destroy(NULL))
PLAIN_CALL(call_abort_null_comm, ccl_comm_abort(NULL))

static void test_null_comm(void **state)
{
    (void)state;
    expect_thread_error(call_ar_null_comm, CCL_ERR_NULL_COMM, "ccl_allreduce(comm=NULL)");
    expect_thread_error(call_ag_null_comm, CCL_ERR_NULL_COMM, "ccl_allgather(comm=NULL)");
    expect_thread_error(call_count_null_comm, CCL_ERR_NULL_COMM, "ccl_comm_count(NULL)");
    expect_thread_error(call_rank_null_comm, CCL_ERR_NULL_COMM, "ccl_comm_user_rank(NULL)");
    expect_thread_error(call_destroy_null_comm, CCL_ERR_NULL_COMM, "ccl_comm_destroy(NULL)");
    expect_thread_error(call_abort_null_comm, CCL_ERR_NULL_COMM, "ccl_comm_abort(NULL)");
}

/* ---- buffers, dtypes, ops, counts ------------------------------------------ */

COMM_CALL(call_ar_null_send, ccl_allreduce(NULL, g_recv, 4, CCL_FLOAT32, CCL_SUM, comm, NULL))
COMM_CALL(call_ar_null_recv, ccl_allreduce(g_send, NULL, 4, CCL_FLOAT32, CCL_SUM, comm, NULL))
COMM_CALL(call_ar_null_both, ccl_allreduce(NULL, NULL, 1, CCL_INT8, CCL_MAX, comm, NULL))
COMM_CALL(call_ag_null_send, ccl_allgather(NULL, g_recv, 4, CCL_FLOAT32, comm, NULL))
COMM_CALL(call_ag_null_recv, ccl_allgather(g_send, NULL, 4, CCL_FLOAT32, comm, NULL))

static void test_null_buffers(void **state)
{
    (void)state;
    expect_comm_error(call_ar_null_send, CCL_ERR_NULL_BUFFER, "ccl_allreduce(sendbuf=NULL, count=4)");
    expect_comm_error(call_ar_null_recv, CCL_ERR_NULL_BUFFER, "ccl_allreduce(recvbuf=NULL, count=4)");
    expect_comm_error(call_ar_null_both, CCL_ERR_NULL_BUFFER, "ccl_allreduce(NULL, NULL, count=1)");
    expect_comm_error(call_ag_null_send, CCL_ERR_NULL_BUFFER, "ccl_allgather(sendbuf=NULL, count=4)");
    expect_comm_error(call_ag_null_recv, CCL_ERR_NULL_BUFFER, "ccl_allgather(recvbuf=NULL, count=4)");
}

static void test_count_zero_null_buffers(void **state)
{
    (void)state;
    /* NULL is only an error "while count > 0": an empty call is valid. */
    ccl_comm_t c;
    assert_int_equal(ccl_comm_init_all(&c, 1, NULL), CCL_SUCCESS);
    assert_int_equal(ccl_allreduce(NULL, NULL, 0, CCL_FLOAT32, CCL_SUM, c, NULL), CCL_SUCCESS);
    assert_int_equal(ccl_allgather(NULL, NULL, 0, CCL_INT64, c, NULL), CCL_SUCCESS);
    assert_int_equal(ccl_comm_destroy(c), CCL_SUCCESS);
}

COMM_CALL(call_ar_dtype_num, ccl_allreduce(g_send, g_recv, 4, CCL_NUM_DTYPES, CCL_SUM, comm, NULL))
COMM_CALL(call_ar_dtype_neg, ccl_allreduce(g_send, g_recv, 4, (ccl_datatype_t)-1, CCL_SUM, comm, NULL))
COMM_CALL(call_ar_dtype_big, ccl_allreduce(g_send, g_recv, 4, (ccl_datatype_t)1000, CCL_MAX, comm, NULL))
COMM_CALL(call_ag_dtype_num, ccl_allgather(g_send, g_recv, 4, CCL_NUM_DTYPES, comm, NULL))
COMM_CALL(call_ag_dtype_neg, ccl_allgather(g_send, g_recv, 4, (ccl_datatype_t)-7, comm, NULL))

static void test_invalid_dtype(void **state)
{
    (void)state;
    expect_comm_error(call_ar_dtype_num, CCL_ERR_INVALID_DTYPE, "ccl_allreduce(dtype=CCL_NUM_DTYPES)");
    expect_comm_error(call_ar_dtype_neg, CCL_ERR_INVALID_DTYPE, "ccl_allreduce(dtype=-1)");
    expect_comm_error(call_ar_dtype_big, CCL_ERR_INVALID_DTYPE, "ccl_allreduce(dtype=1000)");
    expect_comm_error(call_ag_dtype_num, CCL_ERR_INVALID_DTYPE, "ccl_allgather(dtype=CCL_NUM_DTYPES)");
    expect_comm_error(call_ag_dtype_neg, CCL_ERR_INVALID_DTYPE, "ccl_allgather(dtype=-7)");
}

COMM_CALL(call_ar_op_num, ccl_allreduce(g_send, g_recv, 4, CCL_FLOAT32, CCL_NUM_OPS, comm, NULL))
COMM_CALL(call_ar_op_neg, ccl_allreduce(g_send, g_recv, 4, CCL_FLOAT32, (ccl_redop_t)-1, comm, NULL))
COMM_CALL(call_ar_op_big, ccl_allreduce(g_send, g_recv, 4, CCL_INT32, (ccl_redop_t)77, comm, NULL))

static void test_invalid_op(void **state)
{
    (void)state;
    expect_comm_error(call_ar_op_num, CCL_ERR_INVALID_OP, "ccl_allreduce(op=CCL_NUM_OPS)");
    expect_comm_error(call_ar_op_neg, CCL_ERR_INVALID_OP, "ccl_allreduce(op=-1)");
    expect_comm_error(call_ar_op_big, CCL_ERR_INVALID_OP, "ccl_allreduce(op=77)");
}

/* count * element size wraps size_t: refused before any byte is touched. */
COMM_CALL(call_ar_overflow_f32,
          ccl_allreduce(g_send, g_recv, SIZE_MAX / 4 + 1, CCL_FLOAT32, CCL_SUM, comm, NULL))
COMM_CALL(call_ar_overflow_f64,
          ccl_allreduce(g_send, g_recv, SIZE_MAX / 2, CCL_FLOAT64, CCL_MIN, comm, NULL))
COMM_CALL(call_ar_overflow_max,
          ccl_allreduce(g_send, g_recv, SIZE_MAX, CCL_INT32, CCL_SUM, comm, NULL))
COMM_CALL(call_ag_overflow_1rank,
          ccl_allgather(g_send, g_recv, SIZE_MAX / 8 + 1, CCL_UINT64, comm, NULL))
/* On 2 ranks: sendcount*8 = 2^63 fits, the 2^64-byte recvbuf does not. */
COMM_CALL(call_ag_overflow_nranks,
          ccl_allgather(g_send, g_recv, ((size_t)1 << 60), CCL_INT64, comm, NULL))

static void test_count_overflow(void **state)
{
    (void)state;
    expect_comm_error(call_ar_overflow_f32, CCL_ERR_COUNT_OVERFLOW,
                      "ccl_allreduce(count=SIZE_MAX/4+1, float32)");
    expect_comm_error(call_ar_overflow_f64, CCL_ERR_COUNT_OVERFLOW,
                      "ccl_allreduce(count=SIZE_MAX/2, float64)");
    expect_comm_error(call_ar_overflow_max, CCL_ERR_COUNT_OVERFLOW,
                      "ccl_allreduce(count=SIZE_MAX, int32)");
    expect_comm_error(call_ag_overflow_1rank, CCL_ERR_COUNT_OVERFLOW,
                      "ccl_allgather(sendcount=SIZE_MAX/8+1, uint64)");
    expect_comm_error_n(2, call_ag_overflow_nranks, CCL_ERR_COUNT_OVERFLOW, CCL_ERR_COUNT_OVERFLOW,
                        "ccl_allgather(sendcount=2^60, int64) on 2 ranks");
}

/* ---- in-place layout --------------------------------------------------------- */

/* Partial overlap is neither in place nor out of place. */
COMM_CALL(call_ar_overlap,
          ccl_allreduce(g_recv, g_recv + 1, 8, CCL_FLOAT32, CCL_SUM, comm, NULL))
COMM_CALL(call_ag_overlap_1rank, ccl_allgather(g_recv + 1, g_recv, 8, CCL_FLOAT32, comm, NULL))
/* Rank 0 of 2 handing in rank 1's slot of recvbuf as its sendbuf. */
COMM_CALL(call_ag_wrong_slot, ccl_allgather(g_recv + 8, g_recv, 8, CCL_FLOAT32, comm, NULL))

static void test_inplace_layout(void **state)
{
    (void)state;
    expect_comm_error(call_ar_overlap, CCL_ERR_INPLACE_LAYOUT,
                      "ccl_allreduce(recvbuf = sendbuf + 1 element)");
    expect_comm_error(call_ag_overlap_1rank, CCL_ERR_INPLACE_LAYOUT,
                      "ccl_allgather(sendbuf = recvbuf + 1 element)");
    expect_comm_error_n(2, call_ag_wrong_slot, CCL_ERR_INPLACE_LAYOUT, CCL_ERR_INPLACE_LAYOUT,
                        "ccl_allgather on rank 0 of 2 with sendbuf = recvbuf + 1*count");
}

/* ---- streams ----------------------------------------------------------------- */

static void test_stream_bad_args(void **state)
{
    (void)state;
    ccl_comm_t c;
    ccl_stream_t s = NULL;
    assert_int_equal(ccl_comm_init_all(&c, 1, NULL), CCL_SUCCESS);
    assert_int_equal(ccl_stream_create(&s), CCL_SUCCESS);
    assert_non_null(s);
    /* Refused at the call ("before anything is sent"), not queued. */
    ccl_result_t rc = ccl_allreduce(g_send, g_recv, 4, CCL_NUM_DTYPES, CCL_SUM, c, s);
    if (rc != CCL_ERR_INVALID_DTYPE)
        fail_msg("invalid dtype on a host stream returned %s, expected CCL_ERR_INVALID_DTYPE",
                 code_name(rc));
    rc = ccl_allgather(NULL, g_recv, 4, CCL_FLOAT32, c, s);
    if (rc != CCL_ERR_NULL_BUFFER)
        fail_msg("NULL sendbuf on a host stream returned %s, expected CCL_ERR_NULL_BUFFER",
                 code_name(rc));
    /* Nothing was queued, so the stream holds no error. */
    assert_int_equal(ccl_stream_synchronize(s), CCL_SUCCESS);
    assert_int_equal(ccl_stream_query(s), CCL_SUCCESS);
    assert_int_equal(ccl_stream_destroy(s), CCL_SUCCESS);
    assert_int_equal(ccl_comm_destroy(c), CCL_SUCCESS);
}

/* Any pointer that is not a live host stream is taken for a cudaStream_t;
 * without CUDA (no driver or GPU, or a CUDA=0 build) such a call is
 * unsupported. Where a GPU is, this pointer would be used as a stream, so
 * the case is skipped (tests/gpu covers real CUDA streams). */
static int g_not_a_stream;
COMM_CALL(call_ar_cuda_stream, ccl_allreduce(g_send, g_recv, 4, CCL_FLOAT32, CCL_SUM, comm,
                                             (ccl_stream_t)&g_not_a_stream))

static void test_non_host_stream(void **state)
{
    (void)state;
    if (dev_cuda_usable(NULL))
        skip();
    expect_comm_error(call_ar_cuda_stream, CCL_ERR_UNSUPPORTED,
                      "ccl_allreduce on a stream that is not a ccl host stream (no CUDA)");
}

/* ---- real results on one rank ---------------------------------------------- */

static void test_one_rank_results(void **state)
{
    (void)state;
    ccl_comm_t c;
    int n = -1, r = -1;
    char msg[512];
    assert_int_equal(ccl_comm_init_all(&c, 1, NULL), CCL_SUCCESS);
    assert_int_equal(ccl_comm_count(c, &n), CCL_SUCCESS);
    assert_int_equal(ccl_comm_user_rank(c, &r), CCL_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(r, 0);
    static const size_t counts[] = {1, 3, 1021};
    int k = 0;
    for (int d = 0; d < tst_num_dtypes; d++) {
        for (int o = -1; o < tst_num_ops; o++) {
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                for (int inplace = 0; inplace < 2; inplace++, k++) {
                    tst_case_t tc = {
                        .coll = o < 0 ? TST_ALLGATHER : TST_ALLREDUCE,
                        .dt = tst_dtypes[d],
                        .op = o < 0 ? TST_OP_COPY : tst_ops[o],
                        .count = counts[ci],
                        .inplace = inplace,
                        .misalign = 0,
                        .seed = tst_case_seed(777, (uint64_t)k, 0, 0, 0),
                    };
                    tst_bufs_t b;
                    tst_case_prepare(&tc, 0, 1, &b, 0);
                    ccl_result_t rc = tst_case_issue(&tc, &b, c, NULL);
                    if (rc != CCL_SUCCESS) {
                        tst_case_str(&tc, 1, msg, sizeof(msg));
                        fail_msg("%s returned %s: %s", msg, code_name(rc), ccl_get_last_error(c));
                    }
                    if (tst_case_verify(&tc, 0, 1, &b, msg, sizeof(msg)))
                        fail_msg("%s", msg);
                    tst_case_release(&b);
                }
            }
        }
    }
    /* A successful call leaves no message behind on a fresh comm. */
    assert_string_equal(ccl_get_last_error(c), "");
    assert_int_equal(ccl_comm_destroy(c), CCL_SUCCESS);
}

static void test_mem_alloc(void **state)
{
    (void)state;
    void *p = NULL;
    assert_int_equal(ccl_mem_alloc(&p, 12345), CCL_SUCCESS);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
    memset(p, 0x77, 12345);
    assert_int_equal(((unsigned char *)p)[12344], 0x77);
    assert_int_equal(ccl_mem_free(p), CCL_SUCCESS);
}

/* ---- life cycle ------------------------------------------------------------- */

static void test_abort_idle(void **state)
{
    (void)state;
    ccl_comm_t c[3];
    assert_int_equal(ccl_comm_init_all(c, 3, NULL), CCL_SUCCESS);
    /* Abort frees the comm like destroy does, on every rank. */
    for (int r = 0; r < 3; r++)
        assert_int_equal(ccl_comm_abort(c[r]), CCL_SUCCESS);
}

static void test_destroyed_comm(void **state)
{
    (void)state;
    /* The header promises CCL_ERR_NULL_COMM for a comm "that was destroyed". */
    ccl_comm_t c;
    assert_int_equal(ccl_comm_init_all(&c, 1, NULL), CCL_SUCCESS);
    assert_int_equal(ccl_comm_destroy(c), CCL_SUCCESS);
    ccl_result_t rc = ccl_allreduce(g_send, g_recv, 4, CCL_FLOAT32, CCL_SUM, c, NULL);
    if (rc != CCL_ERR_NULL_COMM)
        fail_msg("allreduce on a destroyed comm returned %s, expected CCL_ERR_NULL_COMM",
                 code_name(rc));
    rc = ccl_comm_destroy(c);
    if (rc != CCL_ERR_NULL_COMM)
        fail_msg("second destroy of a comm returned %s, expected CCL_ERR_NULL_COMM",
                 code_name(rc));
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm((unsigned)tst_timeout(120));
    if (ccl_get_unique_id(&g_id) != CCL_SUCCESS) {
        fprintf(stderr, "ccl_get_unique_id failed: %s\n", ccl_get_last_error(NULL));
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_error_strings),
        cmocka_unit_test(test_null_out_pointers),
        cmocka_unit_test(test_null_out_pointers_on_comm),
        cmocka_unit_test(test_init_rank_args),
        cmocka_unit_test(test_null_comm),
        cmocka_unit_test(test_null_buffers),
        cmocka_unit_test(test_count_zero_null_buffers),
        cmocka_unit_test(test_invalid_dtype),
        cmocka_unit_test(test_invalid_op),
        cmocka_unit_test(test_count_overflow),
        cmocka_unit_test(test_inplace_layout),
        cmocka_unit_test(test_stream_bad_args),
        cmocka_unit_test(test_non_host_stream),
        cmocka_unit_test(test_one_rank_results),
        cmocka_unit_test(test_mem_alloc),
        cmocka_unit_test(test_abort_idle),
        cmocka_unit_test(test_destroyed_comm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
