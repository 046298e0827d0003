/*
 * ccl_perf.h - declarations shared by the files of ccl-perf, the benchmark
 * binary of ccl (an nccl-tests look-alike for the ccl API).
 *
 *   ccl_perf.c        main: launch modes (forked ranks, launcher, MPI), memory check
 *   ccl_perf_args.c   command line and --help
 *   ccl_perf_coll.c   one entry per collective: counts, bus bandwidth, call, check
 *   ccl_perf_bench.c  the timing loop and nccl-tests' result table
 *   ccl_perf_data.c   dtype table, input fill and result check
 *   ccl_perf_cuda.c   -m device: GPU buffers, the CUDA stream, host <-> device copies
 */
#ifndef CCL_PERF_H
#define CCL_PERF_H

#include <stddef.h>
#include <stdint.h>

#include "ccl.h"

/* ---- dtypes (ccl_perf_data.c) ------------------------------------------- */

enum perf_kind { PERF_SINT, PERF_UINT, PERF_FLOAT, PERF_MINIFLOAT };

struct perf_dtype {
    ccl_datatype_t id;
    const char *name;    /* as nccl-tests prints it */
    const char *aliases; /* other accepted -d spellings, space separated */
    size_t size;
    enum perf_kind kind;
    int ebits, mbits;  /* floats: exponent and stored mantissa bits */
    int ieee;          /* minifloat: all-ones exponent is inf/NaN (not e4m3) */
    double exact;      /* largest n such that all integers 0..n are exact */
    int prod_twos;     /* how many factors of 2 a product may hold exactly */
};

extern const struct perf_dtype perf_dtypes[]; /* nccl-tests' -d all order */
extern const int perf_num_dtypes;
const struct perf_dtype *perf_dtype_by_name(const char *name);
const struct perf_dtype *perf_dtype_by_id(ccl_datatype_t id);

/* Operations of -o: ccl's built-in ones, then premulsum, which is not a
 * ccl_redop_t value but an operator created on each comm for each dtype. */
enum { PERF_OP_PREMULSUM = CCL_NUM_OPS, PERF_NUM_OPS };
extern const char *const perf_op_names[PERF_NUM_OPS]; /* as nccl-tests prints them */

/* The premulsum scalar of a rank: 1 or 2, so products stay small integers
 * and ranks differ. */
int perf_premul_scalar(int rank);

/* What the inputs of one checked call are; every rank can rebuild any
 * rank's input from it, which is how results are checked without an
 * exchange. Input element i of rank r depends only on (seed, r, i). */
struct perf_data {
    const struct perf_dtype *dt;
    int op;     /* perf op index (ccl_redop_t value or PERF_OP_PREMULSUM) */
    int reduce; /* 0: data is moved, not combined (allgather, broadcast...) */
    int nranks;
    uint32_t seed;
    int64_t maxval;  /* inputs lie in 0..maxval */
    int value_ranks; /* ranks >= this contribute 0 so sums stay exact */
    int twos_ranks;  /* prod: ranks that may contribute a 2 instead of 1 */
};

void perf_data_plan(struct perf_data *d, const struct perf_dtype *dt, int op, int reduce,
                    int nranks, uint32_t seed);
/* buf[i] = input element first+i of `rank`, for i < count. */
void perf_data_fill(const struct perf_data *d, void *buf, size_t count, int rank, size_t first);
void perf_data_poison(void *buf, size_t bytes);
/* Writes the integer v as one element of dtype t (exact for the values the
 * inputs and scalars use). */
void perf_data_encode(const struct perf_dtype *t, void *buf, int64_t v);
/* Number of elements of buf that differ from the expected result: element
 * i is the reduction over ranks of input element first+i ... */
int64_t perf_data_check_reduce(const struct perf_data *d, const void *buf, size_t count,
                               size_t first);
/* ... or input element first+i of rank src. */
int64_t perf_data_check_copy(const struct perf_data *d, const void *buf, size_t count, int src,
                             size_t first);

/* ---- collectives (ccl_perf_coll.c) ---------------------------------------- */

/* Element counts of one call, in nccl-tests' terms (getCollByteCount). */
struct perf_counts {
    size_t send, recv;     /* elements in send and recv buffer */
    size_t param;          /* the count argument of the call */
    size_t send_inplace;   /* in place: sendbuf = recvbuf + rank*send_inplace */
    size_t recv_inplace;   /* in place: recvbuf = recvbuf + rank*recv_inplace */
};

struct perf_ctx;

struct perf_coll {
    const char *name;
    int reduces;    /* takes a reduction op (-o) */
    int rooted;     /* takes a root (-r); rootless ones print root -1 */
    int no_inplace; /* no in-place form (alltoall, sendrecv): those cells print N/A */
    void (*counts)(size_t count, int nranks, struct perf_counts *c);
    double (*bus_factor)(int nranks); /* busbw = algbw * factor */
    /* One call with x's comm, stream, dtype and root. */
    ccl_result_t (*run)(const struct perf_ctx *x, const void *send, void *recv, size_t count,
                        ccl_redop_t op);
    const char *run_name; /* the ccl call, for error messages */
    /* Fills inputs (and poisons outputs) for a checked call, then checks;
     * both see the buffers of the call through perf_call_buffers. */
    void (*fill)(struct perf_ctx *x, const struct perf_data *d, int in_place);
    int64_t (*check)(struct perf_ctx *x, const struct perf_data *d, int in_place);
};

extern const struct perf_coll perf_colls[]; /* -C all order */
extern const int perf_num_colls;
/* NULL when unknown. */
const struct perf_coll *perf_coll_by_name(const char *name);
/* The names -C takes, laid out for --help. */
const char *perf_coll_supported(void);

/* ---- options (ccl_perf_args.c) ------------------------------------------ */

#define PERF_ALL_ROOTS (-1) /* -r -1: every rank in turn, as nccl-tests */

/* Every byte of both buffers before anything runs, timed calls included:
 * not zeros, since on the project's VMs copying zeros that sit in the
 * cache ran up to 3x faster than copying anything else (a 2-rank 2 MiB
 * allgather through a peer's buffer: 48 us a call on zeros, 152 on 0x01
 * bytes), which would time a case no application has. 0x3f3f... is a
 * normal number in every float type (0.75 in float32 and bfloat16, 1.8 in
 * float16, 1.75-1.9 in fp8), so no out-of-place reduction meets NaN or
 * denormals (in place, timed calls compound: sums climb to inf, products
 * fall to 0 through a few denormal calls, on every benchmark alike).
 * mpi-bench fills its buffers with the same byte. */
#define PERF_FILL_BYTE 0x3f

/* -m: where the buffers live. */
enum perf_mem { PERF_MEM_AUTO, PERF_MEM_HOST, PERF_MEM_DEVICE };

struct perf_args {
    size_t min_bytes, max_bytes, step_bytes, step_factor;
    int iters, warmup, check, blocking, root, average;
    int cycles; /* -N: times the whole size sweep runs and prints */
    int warmup_every_size; /* -W 1: -w warmup calls before each row too */
    /* -d, -o, -C: bit i selects perf_dtypes[i], op i, perf_colls[i]; the
     * *_all flags say the list was "all", whose unsupported members are
     * skipped rather than fatal. */
    uint32_t dtypes, ops, colls;
    int dtypes_all, ops_all;
    int np; /* --np, 0 when not given */
    int bind; /* forked ranks pinned to one CPU each (--bind core, default) */
    enum perf_mem mem; /* -m; AUTO until each rank decides */
    const char *json_path; /* -J: also write the rows as JSON there (rank 0) */
};

/* 0 with *done = 0: run. 0 with *done = 1: --help or --help-env was printed.
 * Non-zero: a usage error, already reported; it is the exit status. */
int perf_parse_args(int argc, char **argv, struct perf_args *a, int *done);
/* Bytes of each of the two buffers one rank needs at -e for every selected
 * collective (in place, one buffer holds both sides, so both get the larger). */
size_t perf_buffer_bytes(const struct perf_args *a, int nranks);

/* ---- -J FILE (ccl_perf_json.c, rank 0 only) ------------------------------ */

struct perf_json_row_t {
    const char *collective, *type, *redop;
    size_t bytes, count;
    int root, in_place, applicable; /* applicable 0: N/A (alltoall in place) */
    double us, algbw, busbw;
    long long wrong; /* -1: not checked */
};
/* Opens FILE and writes the run's description; -1 (reported) on failure. */
int perf_json_open(const char *path, int nranks, const char *launch_desc, const struct perf_args *a);
void perf_json_row(const struct perf_json_row_t *row);
void perf_json_close(void);

/* ---- the benchmark (ccl_perf_bench.c) ------------------------------------ */

/* One rank's process, gathered from all ranks for the header and to count
 * ranks sharing this machine's memory. */
struct perf_rank_info {
    int32_t pid;
    char host[64];
    char boot_id[40]; /* with host: the same running machine */
    char pad[20];
};
_Static_assert(sizeof(struct perf_rank_info) == 128, "fixed size for ccl_allgather");

struct perf_ctx {
    const struct perf_args *a;
    ccl_comm_t comm;
    int rank, nranks;
    ccl_stream_t stream; /* NULL with -z 1; the CUDA stream with -m device */
    void *send, *recv;   /* the buffers the calls get (device memory with -m device) */
    void *hsend, *hrecv; /* where inputs are filled and results checked (== send, recv on the host) */
    size_t send_cap, recv_cap;
    int device;          /* -m device: the GPU this rank uses, else -1 */
    void *cuda_stream;   /* -m device: its cudaStream_t */
    char device_name[96];
    const struct perf_coll *coll; /* of the current table */
    const struct perf_dtype *dt;  /* of the current row */
    int root;                     /* of the current row (0 when not rooted) */
    int op_index;                 /* of the current row: perf op index ... */
    ccl_redop_t op;               /* ... and the operator the calls get */
    struct perf_counts cur;       /* of the current row */
    uint32_t seed;                /* advances identically on every rank */
    double bw_sum;
    int bw_count, errors;
};

/* The send and recv pointers of call `iter` of the current row: the slice
 * of the buffers it rotates to, and NCCL's in-place layout when in_place. */
void perf_call_buffers(const struct perf_ctx *x, int in_place, int iter, char **send,
                       char **recv);
/* The same slice of the host buffers, where inputs are written and results
 * read (the call's own buffers when they are host memory). */
void perf_host_buffers(const struct perf_ctx *x, int in_place, int iter, char **send,
                       char **recv);

/* ---- device buffers (ccl_perf_cuda.c) --------------------------------------- */

/* 1 when this rank can use a GPU; else 0 and why in msg. No CUDA call
 * happens before this (forked ranks must not inherit CUDA state). */
int perf_dev_available(char *msg, size_t len);
/* Picks GPU local_rank % count, creates the stream and device buffers of
 * x->send_cap / x->recv_cap (filled with PERF_FILL_BYTE); exits on failure. */
void perf_dev_setup(struct perf_ctx *x, int local_rank);
/* Copies the first `bytes` of both host buffers to the device ones ... */
void perf_dev_upload(struct perf_ctx *x, size_t bytes);
/* ... and of the device receive buffer back, after waiting for the stream. */
void perf_dev_download(struct perf_ctx *x, size_t bytes);
/* Waits for everything queued on the rank's CUDA stream. */
void perf_dev_sync(struct perf_ctx *x);
void perf_dev_release(struct perf_ctx *x);
/* Runs every requested collective, dtype, op and size and prints the tables
 * on rank 0. Returns the process exit status. */
int perf_bench(struct perf_ctx *x, const char *launch_desc,
               const struct perf_rank_info *ranks);
/* Prints "ccl-perf: rank R: <call> failed: ..." and exits. */
void perf_die(const struct perf_ctx *x, const char *call, ccl_result_t res)
    __attribute__((noreturn));
/* Blocking allreduce of one int64 on the comm (also the barrier). */
int64_t perf_allreduce_i64(struct perf_ctx *x, int64_t v, ccl_redop_t op);

#endif /* CCL_PERF_H */
