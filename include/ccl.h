/*
 * ccl.h - the public C API of ccl, a collective-communication library.
 *
 * This is the only header a user includes. It is plain C11, usable from C and
 * C++, and needs no CUDA headers. The shape follows NCCL (unique-id bootstrap,
 * communicators, NCCL's argument order and type numbering), so code written
 * for NCCL maps onto it function by function at the source level; names are
 * lower_snake_case with a ccl_ prefix. It is not NCCL's ABI.
 *
 * Streams, host and device buffers
 * --------------------------------
 * Every collective takes a `ccl_stream_t` as its last argument:
 *   - NULL: the call is blocking. It returns once this rank's part of the
 *     collective is complete and recvbuf holds the result (device buffers
 *     included: their copies are done too).
 *   - a host stream from ccl_stream_create(): the call is queued and returns
 *     at once (unless the stream already holds CCL_STREAM_DEPTH calls, 1024
 *     by default, that its worker has not started on: then it first waits
 *     for the worker, as a full CUDA launch queue blocks the host); the
 *     stream's worker thread runs queued operations in order.
 *     ccl_stream_synchronize() waits for all of them and returns the first
 *     error; ccl_stream_query() polls. Buffers must stay valid and unmodified
 *     until the stream is synchronized (as with a CUDA stream). Host
 *     buffers only: device buffers there are CCL_ERR_INVALID_USAGE.
 *   - a cudaStream_t, cast to ccl_stream_t (any pointer that is not a live
 *     ccl host stream is taken for one): the call is queued on that CUDA
 *     stream and returns at once, as with NCCL; it runs after the work
 *     queued before it and before the work queued after it. Buffers may be
 *     device memory (cudaMalloc, managed) or host memory. Between ranks
 *     of one host, allreduce, allgather, reduce-scatter, broadcast and
 *     reduce on device buffers run on the GPU over CUDA IPC (P2P, unless
 *     CCL_P2P_DISABLE=1); other calls on device buffers are staged through
 *     pinned host memory around the host collective: correct, not fast
 *     (docs/gpu.md). In a build without CUDA, or where no
 *     driver or GPU is found, such a call fails with CCL_ERR_UNSUPPORTED
 *     ("device buffer passed but no CUDA driver/GPU: ..."). The calling
 *     thread's current device must be the stream's. A failure after the
 *     call returned is logged, recorded for ccl_get_last_error(comm),
 *     reported by ccl_comm_get_async_error, and makes the communicator's
 *     next call fail.
 * All ranks must issue collectives on a communicator in the same order, as
 * with NCCL and MPI. Device buffers are told from host buffers with
 * cudaPointerGetAttributes, asked only when the process has loaded the CUDA
 * driver, so host-only programs never initialise CUDA.
 */
#ifndef CCL_H
#define CCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CCL_MAJOR 0
#define CCL_MINOR 1
#define CCL_PATCH 0
/* Encoded like NCCL_VERSION_CODE: major*10000 + minor*100 + patch. */
#define CCL_VERSION_CODE (CCL_MAJOR * 10000 + CCL_MINOR * 100 + CCL_PATCH)

/* Result codes. Values are stable ABI; new codes are only ever appended. */
typedef enum {
    CCL_SUCCESS = 0,
    CCL_ERR_CUDA = 1,             /* a CUDA call failed */
    CCL_ERR_SYSTEM = 2,           /* a system call failed (out of memory, socket, shm) */
    CCL_ERR_INTERNAL = 3,         /* a bug in ccl */
    CCL_ERR_INVALID_ARGUMENT = 4, /* an argument is out of range */
    CCL_ERR_INVALID_USAGE = 5,    /* the calls do not fit together */
    CCL_ERR_REMOTE = 6,           /* a peer failed, exited or sent something wrong */
    CCL_IN_PROGRESS = 7,          /* an asynchronous operation has not finished */
    CCL_ERR_TIMEOUT = 8,          /* a wait ran past CCL_TIMEOUT */
    CCL_ERR_ABORTED = 9,          /* the communicator was aborted */
    CCL_ERR_UNSUPPORTED = 10,     /* valid, but not supported by this build or machine */
    CCL_ERR_NULL_COMM = 11,       /* comm is NULL or was destroyed */
    CCL_ERR_NULL_BUFFER = 12,     /* a buffer is NULL while count > 0 */
    CCL_ERR_INVALID_DTYPE = 13,   /* not a ccl_datatype_t value */
    CCL_ERR_INVALID_OP = 14,      /* not a ccl_redop_t value */
    CCL_ERR_INVALID_RANK = 15,    /* rank, root or peer out of range */
    CCL_ERR_COUNT_OVERFLOW = 16,  /* count * element size does not fit */
    CCL_ERR_INPLACE_LAYOUT = 17,  /* buffers overlap in a way the in-place rules forbid */
    CCL_ERR_MISMATCH = 18,        /* ranks called different collectives/arguments */
    CCL_ERR_GROUP = 19,           /* a call that cannot be part of a group (or no group open) */
    CCL_ERR_CORRUPT = 20,         /* ranks' results differ (CCL_VERIFY), or data changed in flight (CCL_CHECKSUM) */
    CCL_NUM_RESULTS
} ccl_result_t;

/* Element types. Numbered as NCCL's ncclDataType_t. */
typedef enum {
    CCL_INT8 = 0,
    CCL_UINT8 = 1,
    CCL_INT32 = 2,
    CCL_UINT32 = 3,
    CCL_INT64 = 4,
    CCL_UINT64 = 5,
    CCL_FLOAT16 = 6,
    CCL_FLOAT32 = 7,
    CCL_FLOAT64 = 8,
    CCL_BFLOAT16 = 9,
    CCL_FLOAT8_E4M3 = 10,
    CCL_FLOAT8_E5M2 = 11,
    CCL_NUM_DTYPES
} ccl_datatype_t;

/* Reduction operations. CCL_AVG is sum divided by the number of ranks
 * (integer division for integer types, as NCCL defines it). */
typedef enum {
    CCL_SUM = 0,
    CCL_PROD = 1,
    CCL_MAX = 2,
    CCL_MIN = 3,
    CCL_AVG = 4,
    CCL_NUM_OPS,
    /* Values above CCL_NUM_OPS are operators created on one communicator
     * (ccl_redop_create_premulsum); this keeps the enum int-sized. */
    CCL_MAX_REDOP = 0x7fffffff
} ccl_redop_t;

/* Where a premulsum scalar lives and when it is read (NCCL's
 * ncclScalarResidence_t). With host buffers, CCL_SCALAR_DEVICE means "a
 * pointer read each time a collective runs", so the value may change
 * between calls; CCL_SCALAR_HOST_IMMEDIATE copies it at creation. */
typedef enum {
    CCL_SCALAR_DEVICE = 0,
    CCL_SCALAR_HOST_IMMEDIATE = 1
} ccl_scalar_residence_t;

/* Opaque bootstrap token: created once (ccl_get_unique_id) and passed to every
 * rank by the user (MPI_Bcast, a file, the launcher). Holds the root's
 * address and a random secret; 128 bytes like NCCL's. */
#define CCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[CCL_UNIQUE_ID_BYTES];
} ccl_unique_id_t;

typedef struct ccl_comm *ccl_comm_t;
/* NULL (blocking), a host stream (ccl_stream_create) or a cudaStream_t. */
typedef void *ccl_stream_t;

/* ---- version and errors -------------------------------------------------- */

/* *version = CCL_VERSION_CODE of the linked library. */
ccl_result_t ccl_get_version(int *version);
/* Static text for a code; never NULL. */
const char *ccl_get_error_string(ccl_result_t result);
/* The message of the last failed call on comm (comm may be NULL: then the
 * last failure of this thread, e.g. of an init). "" when there was none. */
const char *ccl_get_last_error(ccl_comm_t comm);

/* ---- communicators ------------------------------------------------------- */

/* Creates the bootstrap root and writes the token to *id. Call on one rank.
 * With CCL_COMM_ID=host:port set, the root is instead started by rank 0 in
 * ccl_comm_init_rank at that address, and every rank may build the id itself. */
ccl_result_t ccl_get_unique_id(ccl_unique_id_t *id);
/* Collective over nranks processes or threads; blocks until all have joined
 * or CCL_TIMEOUT passes. */
ccl_result_t ccl_comm_init_rank(ccl_comm_t *comm, int nranks, ccl_unique_id_t id, int rank);

/* Options of ccl_comm_init_rank_config, like ncclConfig_t. Declare with
 *     ccl_config_t config = CCL_CONFIG_INITIALIZER;
 * then set the fields wanted: size, magic and version say which fields a
 * program was built with, so later releases can append fields. */
typedef struct {
    size_t size;          /* sizeof(ccl_config_t) the program was built with */
    unsigned int magic;   /* CCL_CONFIG_MAGIC */
    unsigned int version; /* CCL_VERSION_CODE the program was built with */
    /* 1 (default): init returns once the comm is ready, as
     * ccl_comm_init_rank. 0: init returns CCL_IN_PROGRESS at once with
     * *comm set, and builds the comm in a thread of its own; poll
     * ccl_comm_get_async_error until it is no longer CCL_IN_PROGRESS
     * (CCL_SUCCESS: ready; an error: init failed, destroy the comm). Until
     * then, only ccl_comm_get_async_error, ccl_get_last_error,
     * ccl_comm_count, ccl_comm_user_rank, ccl_comm_abort (ends the init's
     * waits within tens of ms) and ccl_comm_destroy (waits for the init to
     * end) accept it; other calls are CCL_ERR_INVALID_USAGE. */
    int blocking;
} ccl_config_t;

#define CCL_CONFIG_MAGIC 0xcc1c0f16u
#define CCL_CONFIG_INITIALIZER {sizeof(ccl_config_t), CCL_CONFIG_MAGIC, CCL_VERSION_CODE, 1}

/* ccl_comm_init_rank with options; config NULL means the defaults. A
 * config without CCL_CONFIG_INITIALIZER's size and magic, or with a field
 * out of range, is CCL_ERR_INVALID_ARGUMENT before anything starts. */
ccl_result_t ccl_comm_init_rank_config(ccl_comm_t *comm, int nranks, ccl_unique_id_t id, int rank,
                                       const ccl_config_t *config);
/* ndev ranks inside this process (one thread each runs the init);
 * devlist is reserved for GPU ordinals and may be NULL for host ranks.
 * comms[i] is rank i. */
ccl_result_t ccl_comm_init_all(ccl_comm_t *comms, int ndev, const int *devlist);
/* Collective, like ncclCommFinalize: waits for this rank's queued and
 * running calls, then for every rank of comm to do the same (a barrier).
 * On CCL_SUCCESS every rank has finished every call it made on comm before
 * its finalize, so their buffers may be reused or freed anywhere, and the
 * ccl_comm_destroy that must follow frees local state without waiting.
 * From the call on, every call on comm but ccl_comm_destroy,
 * ccl_comm_abort, ccl_comm_get_async_error, ccl_get_last_error,
 * ccl_comm_count and ccl_comm_user_rank is CCL_ERR_INVALID_USAGE. On a comm
 * made with ccl_config_t.blocking = 0 it returns CCL_IN_PROGRESS at once;
 * ccl_comm_get_async_error says CCL_IN_PROGRESS until the barrier is
 * passed (CCL_SUCCESS) or failed (the error). A rank that is gone makes it
 * fail within CCL_TIMEOUT on the others; ccl_comm_abort ends it at once. */
ccl_result_t ccl_comm_finalize(ccl_comm_t comm);
/* Waits for queued work, then frees everything the comm holds. Without a
 * ccl_comm_finalize before it, peers may still be in calls on comm. */
ccl_result_t ccl_comm_destroy(ccl_comm_t comm);
/* Stops outstanding work as soon as possible and frees the comm; peers see an
 * error instead of hanging. Safe to call from another thread. */
ccl_result_t ccl_comm_abort(ccl_comm_t comm);
ccl_result_t ccl_comm_count(ccl_comm_t comm, int *count);
ccl_result_t ccl_comm_user_rank(ccl_comm_t comm, int *rank);
/* Whether the comm has failed in the background, without running anything:
 * *async_error is CCL_SUCCESS, or the error (a peer of this host exited,
 * a network connection broke, an earlier collective failed, abort) with
 * its message in ccl_get_last_error; CCL_IN_PROGRESS while a nonblocking
 * init (ccl_config_t.blocking = 0) still runs. Cheap enough to poll. */
ccl_result_t ccl_comm_get_async_error(ccl_comm_t comm, ccl_result_t *async_error);

/* color for ranks that take part in ccl_comm_split but join no new comm. */
#define CCL_SPLIT_NOCOLOR (-1)
/* Collective over every rank of comm (which must be healthy): ranks that
 * pass the same color form a new comm, ranked by key, then by their rank in
 * comm. CCL_SPLIT_NOCOLOR: *newcomm is NULL. May run while another thread
 * or a host stream is in a call on comm. */
ccl_result_t ccl_comm_split(ccl_comm_t comm, int color, int key, ccl_comm_t *newcomm);
/* Called by every rank of comm not in exclude_ranks, all with the same list:
 * they form a new comm, in their order in comm, without touching comm's
 * data connections (comm may be broken: ranks dead, connections poisoned)
 * and without waiting for calls in flight on it. Excluded ranks must not
 * call. Another list on any caller is CCL_ERR_MISMATCH on every caller; a
 * first survivor that is gone, CCL_ERR_REMOTE naming it. Abort or destroy
 * comm afterwards (that ends its calls in flight). Like ncclCommShrink
 * with NCCL_SHRINK_DEFAULT, and MPIX_Comm_shrink. */
ccl_result_t ccl_comm_shrink(ccl_comm_t comm, const int *exclude_ranks, int nexclude, ccl_comm_t *newcomm);

/* ---- memory -------------------------------------------------------------- */

/* Host memory suited to collectives: page-aligned, backed by transparent huge
 * pages where the kernel allows, and already touched (on these VMs the first
 * touch of a 4 KiB page costs ~10 us, so fresh memory per call is slow).
 * Like ncclMemAlloc; a later release allocates device memory here too. */
ccl_result_t ccl_mem_alloc(void **ptr, size_t size);
ccl_result_t ccl_mem_free(void *ptr);

/* ---- host streams -------------------------------------------------------- */

ccl_result_t ccl_stream_create(ccl_stream_t *stream);
/* Waits for everything queued; returns the first error of a queued call. */
ccl_result_t ccl_stream_synchronize(ccl_stream_t stream);
/* CCL_SUCCESS when idle, CCL_IN_PROGRESS while work is queued, or the error. */
ccl_result_t ccl_stream_query(ccl_stream_t stream);
/* Synchronizes, then frees. */
ccl_result_t ccl_stream_destroy(ccl_stream_t stream);

/* ---- reduction operators ------------------------------------------------- */

/* Creates an operator that multiplies this rank's input by *scalar (of
 * type dtype) and then sums across ranks. Valid only on comm and with dtype;
 * each rank creates its own (scalars may differ between ranks). */
ccl_result_t ccl_redop_create_premulsum(ccl_redop_t *op, void *scalar, ccl_datatype_t dtype,
                                        ccl_scalar_residence_t residence, ccl_comm_t comm);
ccl_result_t ccl_redop_destroy(ccl_redop_t op, ccl_comm_t comm);

/* ---- group calls --------------------------------------------------------- */

/* Calls between ccl_group_start and ccl_group_end are checked and queued,
 * then run together at ccl_group_end: several collectives on one comm,
 * collectives on several comms driven by one thread (ccl_comm_init_all), and
 * send/recv patterns (ring exchange, all-to-all-v) that would deadlock as
 * separate blocking calls. Groups nest; the outermost end runs them. Every
 * call of a group must use the same stream (NULL: ccl_group_end blocks; a
 * host stream: the group is queued on it), else ccl_group_end fails with
 * CCL_ERR_GROUP (the call on the other stream returns it at once) and runs
 * nothing. When a call inside a group fails
 * its checks, it returns the error and ccl_group_end returns it too, having
 * run nothing. */
ccl_result_t ccl_group_start(void);
ccl_result_t ccl_group_end(void);

/* What ccl_group_simulate_end reports, like ncclSimInfo_t: declare with
 *     ccl_sim_info_t info = CCL_SIM_INFO_INITIALIZER; */
typedef struct {
    size_t size;             /* sizeof(ccl_sim_info_t) the program was built with */
    unsigned int magic;      /* CCL_SIM_INFO_MAGIC */
    unsigned int version;    /* CCL_VERSION_CODE the program was built with */
    float estimated_time_us; /* set by ccl_group_simulate_end */
} ccl_sim_info_t;

#define CCL_SIM_INFO_MAGIC 0xcc15171fu
#define CCL_SIM_INFO_INITIALIZER {sizeof(ccl_sim_info_t), CCL_SIM_INFO_MAGIC, CCL_VERSION_CODE, 0.0f}

/* Ends a group like ccl_group_end but runs nothing (like
 * ncclGroupSimulateEnd): info->estimated_time_us is the tuner's modelled
 * time of the queued calls, each with the algorithm the tuner would pick
 * (CCL_ALGO respected); per communicator the calls' times add up, and
 * communicators count as running side by side (the slowest one's sum).
 * The same on every rank for the same calls. An inner group's end only
 * closes that level (as ccl_group_end): the outermost one reports. */
ccl_result_t ccl_group_simulate_end(ccl_sim_info_t *info);

/* ---- collectives --------------------------------------------------------- */

/* recvbuf[i] = op over ranks of sendbuf[i], on every rank. In place when
 * sendbuf == recvbuf. */
ccl_result_t ccl_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                           ccl_datatype_t dtype, ccl_redop_t op, ccl_comm_t comm,
                           ccl_stream_t stream);
/* recvbuf[r*count .. (r+1)*count) = sendbuf of rank r. sendcount elements per
 * rank. In place when sendbuf == recvbuf + rank*sendcount (NCCL's rule). */
ccl_result_t ccl_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                           ccl_datatype_t dtype, ccl_comm_t comm, ccl_stream_t stream);
/* recvbuf (recvcount elements) = op over ranks of block `rank` of sendbuf
 * (nranks * recvcount elements). In place when recvbuf == sendbuf +
 * rank*recvcount. */
ccl_result_t ccl_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                ccl_datatype_t dtype, ccl_redop_t op, ccl_comm_t comm,
                                ccl_stream_t stream);
/* recvbuf = sendbuf of root, on every rank (sendbuf is read on root only).
 * In place when sendbuf == recvbuf. */
ccl_result_t ccl_broadcast(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                           int root, ccl_comm_t comm, ccl_stream_t stream);
/* In-place broadcast (NCCL's legacy ncclBcast). */
ccl_result_t ccl_bcast(void *buf, size_t count, ccl_datatype_t dtype, int root, ccl_comm_t comm,
                       ccl_stream_t stream);
/* recvbuf on root = op over ranks of sendbuf; recvbuf is ignored elsewhere.
 * In place when sendbuf == recvbuf. */
ccl_result_t ccl_reduce(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                        ccl_redop_t op, int root, ccl_comm_t comm, ccl_stream_t stream);
/* Block p (count elements) of sendbuf goes to rank p, landing at block
 * `rank` of its recvbuf. sendbuf and recvbuf must not overlap. */
ccl_result_t ccl_alltoall(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                          ccl_comm_t comm, ccl_stream_t stream);
/* recvbuf on root, block p = sendbuf (count elements) of rank p. In place
 * when, on root, sendbuf == recvbuf + root*count. */
ccl_result_t ccl_gather(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                        int root, ccl_comm_t comm, ccl_stream_t stream);
/* recvbuf (count elements) = block `rank` of root's sendbuf. In place when,
 * on root, recvbuf == sendbuf + root*count. */
ccl_result_t ccl_scatter(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                         int root, ccl_comm_t comm, ccl_stream_t stream);
/* Blocks every rank until all have called it. */
ccl_result_t ccl_barrier(ccl_comm_t comm, ccl_stream_t stream);

/* ---- point to point ------------------------------------------------------ */

/* Sends and receives match in call order per (sender, receiver) pair and
 * must agree on count * element size. Outside a group each call blocks until
 * its data is handed over, so two ranks that both send first can deadlock on
 * large messages (as with MPI_Send): put exchanges in a group. */
ccl_result_t ccl_send(const void *sendbuf, size_t count, ccl_datatype_t dtype, int peer,
                      ccl_comm_t comm, ccl_stream_t stream);
ccl_result_t ccl_recv(void *recvbuf, size_t count, ccl_datatype_t dtype, int peer,
                      ccl_comm_t comm, ccl_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CCL_H */
