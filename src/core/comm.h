/*
 * comm.h - the communicator and the core layer's internal interfaces.
 */
#ifndef CCL_CORE_COMM_H
#define CCL_CORE_COMM_H

#include "algos/engine.h"
#include "algos/schedule.h"
#include "bootstrap/bootstrap.h"
#include "ccl.h"
#include "core/exec_lock.h"
#include "topo/topo.h"
#include "topo/tune.h"
#include "transport/net.h"
#include "transport/p2p.h"
#include "transport/shm.h"
#include "transport/shm_board.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define COMM_ERR_MAX 1024

/* A premulsum operator created on this comm (ccl_redop_create_premulsum). */
typedef struct {
    int in_use;
    ccl_datatype_t dtype;
    const void *scalar_ptr;        /* CCL_SCALAR_DEVICE: read at each call */
    unsigned char scalar[8];       /* CCL_SCALAR_HOST_IMMEDIATE: the value */
} comm_redop_t;

#define COMM_MAX_REDOPS 1024

/* The tuner's last pick for one collective (tuner.c). */
typedef struct {
    size_t size;
    int grouped;
    int algo; /* -1: none yet */
} tuner_last_t;

/* The P2P transport of a communicator (connect_p2p.c), set up at its first
 * device-buffer call that may use it (under bs_lock); used under
 * exec_lock once state is UP (state itself is read atomically), except
 * that a call's queueing (the conns' positions, done) is under
 * p2p_queue_lock. Only the ring
 * neighbours' connections exist: every schedule the device executor runs
 * (ring, chain) receives from rank-1 and sends to rank+1. */
enum { COMM_P2P_UNTRIED = 0, COMM_P2P_UP, COMM_P2P_OFF };
typedef struct {
    int state;              /* COMM_P2P_*, the same on every rank once tried */
    int device;             /* the GPU (this process's ordinal) our slots are on */
    size_t slot_size;       /* agreed by all ranks: the slice of the device executor */
    p2p_conn_t recv, send;  /* from rank-1, to rank+1 (none with one rank) */
    int use_kernel_wait;    /* CCL_CUDA_STREAM_WAIT=kernel */
    void *done;             /* event recorded after each call's work (NULL before the first) */
    pthread_t watch;        /* watch_p2p.c, while state is UP */
    int watching;
    _Atomic int watch_stop;
} comm_p2p_t;

struct ccl_comm {
    int rank, nranks;
    int nlocal;              /* ranks on this host, this one included */
    int local_rank;          /* our index among them */
    /* How ranks sit on nodes (hosts), from the peers' host ids: nodes are
     * numbered by their lowest rank. Arrays are owned by the comm. */
    sched_layout_t layout;
    int max_local;           /* ranks on the fullest node */
    int kernel_ranks;        /* ranks on this kernel (boot id), this one included: they share our cores */
    bs_t bs;                 /* peers[] holds every rank's pid and host */
    shm_conn_t *send_conns;  /* [nranks]; fifo == NULL where unconnected */
    shm_conn_t *recv_conns;
    net_t *net;              /* connections to other hosts; NULL on one host */
    shm_board_t board;       /* one-shot board; hdr == NULL when not all ranks are local */
    size_t slot_size;        /* agreed by all ranks at init */
    uint32_t nslots;
    int spin, yield;         /* wait policy (us), from the local rank count */
    int copy_help;           /* CCL_COPY_HELP, settled: we copy part of what peers read from us (shm_help.h) */
    int copy_help_idle;      /* ... at least in calls where we receive nothing (exec_ctx_init) */
    void *scratch;           /* 2 * slot_size bytes: reductions that stream out, premultiplied input */
    size_t stream_threshold; /* results this large are written non-temporally */
    size_t stream_copies_from; /* ... and those of allgather and broadcast (comm_stream_thresholds) */
    size_t stream_pair_from;   /* ... and the fused 2-rank allreduce's, out of place */
    size_t single_copy_from[SCHED_NUM_COLLS]; /* calls this large may go by reference (tuner_single_copy_bytes) */
    size_t eng_window;       /* CCL_ENGINE_WINDOW: rounds in flight (eng_job_t.window) */
    size_t net_zero_copy_threshold; /* calls this large send to other hosts from the user buffer */
    shm_peer_cache_t peer_maps;   /* peers' registered buffers we mapped */

    exec_lock_t exec_lock;     /* one collective at a time per comm (exec_lock.c) */
    /* The bootstrap ring after init (ccl_comm_split): not exec_lock, which a
     * collective holds while it waits for peers that may be in the split. */
    pthread_mutex_t bs_lock;
    sched_t sched;             /* reused schedule storage, under exec_lock */
    sched_t *group_scheds;     /* ... and for the calls of a group (coll.c), grown as needed */
    int group_scheds_cap;
    void *eng_arena;           /* reused engine state, under exec_lock */
    size_t eng_arena_cap;
    int check_args;            /* CCL_CHECK_ARGS: verify calls across ranks first */
    tune_model_t tune;         /* the tuner's cost model, the same on every rank */
    unsigned algo_allowed[SCHED_NUM_COLLS]; /* CCL_ALGO (rank 0's): TUNE_BIT mask per collective */
    tuner_last_t tune_last[SCHED_NUM_COLLS]; /* last pick per collective, under exec_lock */

    pthread_mutex_t redop_lock;
    comm_redop_t *redops;      /* [COMM_MAX_REDOPS], allocated on first use */
    int redop_tag;             /* tells this comm's operators from others' */
    uint64_t seq;              /* collectives run, for error messages */
    uint64_t coll_calls;       /* collectives entered (not send/recv), under exec_lock; the
                                * same count on every rank, published on the board */
    int verify_every;          /* CCL_VERIFY */
    uint64_t verify_calls;     /* verifiable calls run, under exec_lock */
    int broken;                /* an earlier collective failed mid-way */
    _Atomic int broken_code;   /* ... with this result (ccl_comm_get_async_error) */

    comm_p2p_t p2p;            /* under exec_lock; the P2P queues under p2p_queue_lock */
    /* Queueing a P2P call's work on its stream (exec_device.c says why not
     * under exec_lock); taken with exec_lock held, never the other way. */
    pthread_mutex_t p2p_queue_lock;
    sched_t p2p_sched;         /* reused schedule storage, under p2p_queue_lock */

    _Atomic int aborted;
    pthread_mutex_t pending_lock;
    pthread_cond_t pending_cond;
    _Atomic int pending;       /* queued or running calls */
    _Atomic int draining;      /* destroy/abort waits for pending to reach 0 */

    char last_error[COMM_ERR_MAX];
    int nonblocking;           /* made with ccl_config_t.blocking = 0: finalize runs in a thread too */
    struct comm_async *async;  /* the thread and state of a nonblocking init or of a finalize
                                * (comm_config.c); NULL otherwise */
};

/* The arguments of one call, as checked, grouped and queued. */
typedef struct {
    sched_coll_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    ccl_datatype_t dtype;
    ccl_redop_t op;          /* as the caller passed it */
    int root;                /* root of rooted collectives, peer of send/recv */
    struct ccl_comm *comm;
    /* Filled by redop_resolve: the operator the kernels apply (a premulsum
     * reduces with sum after multiplying this rank's input by the scalar). */
    ccl_redop_t kop;
    int premul;
    const void *premul_ptr;  /* read when the call runs, if not NULL */
    unsigned char premul_scalar[8];
    int internal;            /* ccl's own call (CCL_VERIFY's exchange): never verified itself */
    /* Filled by dstream_classify: which of the call's buffers (and the
     * premulsum scalar) are device memory, so go through staging. */
    unsigned char dev_send, dev_recv, dev_premul;
    /* Bytes this rank reads from sendbuf and writes to recvbuf: filled once
     * by coll_args_size (argcheck_coll does it for user calls; ccl's own
     * calls call it), read by everything after. */
    size_t send_bytes, recv_bytes;
} coll_args_t;

/* comm.c */
int comm_is_live(const struct ccl_comm *comm);
/* The error of a call given a comm that is not live: CCL_ERR_NULL_COMM, or
 * CCL_ERR_INVALID_USAGE for a comm whose nonblocking init has not ended
 * well. `who` names the call. */
ccl_result_t comm_not_live(const struct ccl_comm *comm, const char *who);
/* Joins the communicator of id as `rank` of nranks (arguments checked). */
ccl_result_t comm_create(struct ccl_comm **out, int nranks, const ccl_unique_id_t *id, int rank);
/* comm_create in steps, for a nonblocking init: a comm that holds nothing
 * yet, then everything it connects (the slow, collective part; on failure
 * what it made stays for comm_free), then the handle made valid. */
ccl_result_t comm_alloc(struct ccl_comm **out, int nranks, int rank);
ccl_result_t comm_build(struct ccl_comm *comm, const ccl_unique_id_t *id);
ccl_result_t comm_publish(struct ccl_comm *comm);
/* Frees whatever the comm holds, built or not (no peer is told). */
void comm_free(struct ccl_comm *comm);
/* Destroy or abort of a live comm: waits for its calls, then frees. */
ccl_result_t comm_teardown(struct ccl_comm *comm, const char *who);

/* comm_config.c: comms in a phase where they are not live (calls refused
 * by comm_not_live): a nonblocking init until it has ended well, and a
 * comm from ccl_comm_finalize on. */
typedef enum { COMM_PHASE_INIT, COMM_PHASE_FINALIZE } comm_phase_t;
/* 1 when comm is one (ready or not; failed ones stay until destroyed). */
int comm_async_known(const struct ccl_comm *comm);
/* CCL_IN_PROGRESS while its phase's work runs, else that work's result
 * (after an init, CCL_SUCCESS once the comm is live). */
ccl_result_t comm_async_state(const struct ccl_comm *comm);
comm_phase_t comm_async_phase(const struct ccl_comm *comm);
/* Lists comm in the set, in `phase`, state CCL_IN_PROGRESS (joins the
 * ended thread of an earlier nonblocking init). */
ccl_result_t comm_async_enter(struct ccl_comm *comm, comm_phase_t phase);
/* Runs the phase's work in a thread of its own, which ends with
 * comm_async_end and must not touch the comm after it. */
ccl_result_t comm_async_start(struct ccl_comm *comm, void *(*run)(void *));
void comm_async_end(struct ccl_comm *comm, ccl_result_t res);
/* Destroy (abort = 0: waits for the phase's work to end) or abort (cancels
 * it) of such a comm; CCL_ERR_NULL_COMM if comm is not one. */
ccl_result_t comm_async_teardown(struct ccl_comm *comm, int abort, const char *who);
/* Joins the thread and frees its state (comm_free). */
void comm_async_free(struct ccl_comm *comm);
/* comm.c: takes a live comm out of the live set (its calls are refused
 * from then on); 0 if it was not there. */
int comm_unpublish(struct ccl_comm *comm);
/* Waits until every queued and running call of comm has ended. */
void comm_pending_wait(struct ccl_comm *comm);
void comm_pending_add(struct ccl_comm *comm);
void comm_pending_done(struct ccl_comm *comm);
/* Copies this thread's error message into the comm (for ccl_get_last_error). */
void comm_record_error(struct ccl_comm *comm);

/* connect.c: shm FIFOs between every pair of local ranks, net connections
 * to every rank of another host, and the one-shot board. */
ccl_result_t connect_mesh(struct ccl_comm *comm);
ccl_result_t connect_net(struct ccl_comm *comm);
ccl_result_t connect_board(struct ccl_comm *comm);
/* Faults in, at init, the FIFOs to and from the peers of the reduction
 * algorithms this communicator may run (after tuner_init: CCL_ALGO). */
ccl_result_t connect_prefault(struct ccl_comm *comm);
void connect_close(struct ccl_comm *comm);
/* Ends every connection now so that peers fail instead of waiting: why
 * says how a collective failed here (NULL: ccl_comm_abort), and reaches
 * them in their error messages. */
void connect_poison(struct ccl_comm *comm, const char *why);

/* connect_p2p.c: sets up the P2P connections on device `device` (a
 * collective over the bootstrap; every rank makes it at its first
 * candidate call). Leaves p2p.state UP or OFF (the same on every rank);
 * fails only when the exchange itself fails. */
ccl_result_t connect_p2p(struct ccl_comm *comm, int device);
/* Waits (bounded) for the GPU to finish the comm's P2P work, releasing
 * its waits when the comm was aborted or broke, then frees it all. */
void connect_p2p_close(struct ccl_comm *comm);
/* Lets streams waiting on the comm's P2P connections go on (abort). */
void connect_p2p_release(struct ccl_comm *comm);

/* exec_device.c: collectives on device buffers over P2P, queued on the
 * user's stream. Candidate: a collective the device executor runs whose
 * buffers are all device memory, on a CUDA stream or NULL, on a comm where
 * P2P was not found impossible. Cheap and local; the call then decides
 * (sets up P2P if needed) and *taken says whether it ran the call: if
 * not, the caller stages it. */
int exec_device_candidate(const coll_args_t *a, ccl_stream_t stream);
ccl_result_t exec_device_run(const coll_args_t *a, ccl_stream_t stream, int *taken);
/* Calls this process queued through the device executor (for tests). */
extern _Atomic unsigned long exec_device_calls;

/* exec_host.c. One job per communicator: the calls on it, in the order
 * every rank agrees on, each with its schedule. */
typedef struct {
    struct ccl_comm *comm;
    const coll_args_t *calls; /* ncalls, in engine order */
    const sched_t *scheds;    /* ncalls */
    int ncalls;
} exec_job_t;
/* Groups of up to this many calls keep their bookkeeping (coll.c) and
 * executor state (exec_host.c) on the stack: with a malloc and a free per
 * array, an 8-byte send/recv pair spent a fifth of its time in the
 * allocator. */
#define COMM_GROUP_INLINE 8
/* Runs all jobs to completion, progressing them together (one thread may
 * drive every rank of a ccl_comm_init_all group). On failure *failed is the
 * index of the job that failed. */
ccl_result_t exec_host_run(exec_job_t *jobs, int njobs, int *failed);
/* The one-shot path: every rank reads what it needs from the board. */
ccl_result_t exec_host_oneshot(struct ccl_comm *comm, const coll_args_t *args);
/* Bytes one call puts on the board per rank at most (same on every rank). */
size_t exec_board_bytes(const coll_args_t *args, int nranks);

/* coll.c: runs calls now, on the calling thread (one call, or a group's
 * calls; several comms allowed). Takes every comm's exec_lock. */
ccl_result_t coll_run(const coll_args_t *calls, int ncalls);
ccl_result_t coll_run_owned(coll_args_t *calls, int ncalls);
/* Fills a->send_bytes and a->recv_bytes: what the call reads and writes
 * of the user's buffers on this rank (a->comm must be live). */
void coll_args_size(coll_args_t *a);
/* The schedule of one operation by one algorithm: the registry's generator
 * (algo_schedule; a direct algorithm's peers are the ring's). */
ccl_result_t coll_algo_schedule(const sched_op_t *op, algo_t algo, sched_t *out);

/* watch_p2p.c: the thread that breaks the comm and lets its streams go
 * when a peer fails while the GPU has P2P work queued. start: once the
 * P2P setup has succeeded here; stop (joins; idempotent): before the P2P
 * connections close. */
ccl_result_t watch_p2p_start(struct ccl_comm *comm);
void watch_p2p_stop(struct ccl_comm *comm);

/* The fused 2-rank allreduce on one host (exec_pair.c, ALGO_PAIR): each
 * rank reduces slices of both inputs into both outputs. *ran is 0 when it
 * did nothing because a rank's buffers are not ccl_mem_alloc ones (or
 * cannot be mapped): both ranks then run another algorithm. */
ccl_result_t exec_host_pair(struct ccl_comm *comm, const coll_args_t *args, int *ran);

/* exec_host.c: what an executor's wait checks while it sleeps
 * (exec_wait_check, a wait_check_fn): the failures exec_local_failure
 * finds, and CCL_TIMEOUT without progress, naming the rank behind. */
typedef struct {
    struct ccl_comm *comm;
    int peer;            /* -1: every rank (the board) */
    const char *what;    /* "receive from" / "send to" */
    uint64_t idle_since; /* last progress of the whole executor; 0: this wait's start */
    int others;          /* other steps wait too: come back to re-check them */
} exec_wait_ctx_t;
ccl_result_t exec_wait_check(void *arg, uint64_t waited_ns);
/* exec_host.c: after a call failed, waits until a peer that copies into
 * our buffer has finished the `want` slices it took (*count), or marked
 * *count closed (bit 31), or died, or a few seconds passed. */
void exec_wait_copier(struct ccl_comm *comm, int peer, const _Atomic uint32_t *count, uint32_t want);

/* exec_host.c: whether a process of this host has exited (a zombie counts). */
int exec_pid_dead(pid_t pid);
/* exec_host.c: what ends every wait of this comm, whatever it waits for:
 * abort, a failed network, a local rank that failed (its reason) or exited
 * (only ranks first..last are looked at for that, none when last < first;
 * with closed_ok, not a rank that closed the comm in order first). CCL_SUCCESS, or the error
 * with a message ending "while we waited to <what>". */
ccl_result_t exec_local_failure(struct ccl_comm *comm, int first, int last, int closed_ok, const char *what);
/* coll.c: counts a call that is about to run (fault injection, progress
 * beacon); under exec_lock. */
void coll_enter(struct ccl_comm *comm, const coll_args_t *a, uint64_t seq);

/* verify.c (CCL_VERIFY): whether call a is one to check (counts it;
 * under exec_lock), and the check, run after it succeeded. */
int verify_due(struct ccl_comm *comm, const coll_args_t *a);
ccl_result_t verify_result(struct ccl_comm *comm, const coll_args_t *a, uint64_t seq);

/* group.c: whether this thread is inside ccl_group_start/end; queue a
 * call there (takes the comm's pending count with it); `checked` is the
 * result of its checks, remembered for ccl_group_end when it failed. */
int group_active(void);
/* Whether this thread's open group holds calls on comm; group_drop removes
 * them (abort: they can never run). */
int group_holds(const struct ccl_comm *comm);
void group_drop(struct ccl_comm *comm);
ccl_result_t group_add(const coll_args_t *args, ccl_result_t checked, ccl_stream_t stream, const char *name);

/* redop.c: fills args->kop/premul from args->op, or fails (INVALID_OP). */
ccl_result_t redop_resolve(struct ccl_comm *comm, coll_args_t *args, const char *name);
void redop_free(struct ccl_comm *comm);
int redop_new_tag(void);

/* check_args.c: CCL_CHECK_ARGS=1, before anything is sent: all ranks of
 * each job exchange what they were called with. Runs the exchange through
 * the executor (so it works when one thread drives several ranks). */
ccl_result_t check_args_run(exec_job_t *jobs, int njobs, int *failed);

/* tuner.c: the cost model's inputs, agreed by all ranks (at init, after
 * the FIFOs and the board exist); the pick for one call (bytes: as
 * exec_board_bytes counts them, the same on every rank). */
ccl_result_t tuner_init(struct ccl_comm *comm);
/* One rank's view of the link costs before the ranks agree: CCL_SHM_*,
 * CCL_NET_*, else defaults and, on local rank 0 only, the topology's NIC
 * closest to it (topo NULL: discovered if the network is used); other
 * local ranks leave what is not set at net_bw 0, net_lat -1. kernel_ranks
 * share this machine's cores (nlocal of them on this node; more with fake
 * nodes or network namespaces): out->cores is this node's share. Slot and
 * board are left 0. ccl-info --explain shows local rank 0's. */
void tuner_links_local(const topo_t *topo, int local_rank, int nlocal, int kernel_ranks, int nnodes,
                       tune_links_t *out);
/* The algorithm for a call: what the tuner picked for the comm's last call
 * of coll when it had this size (the memo, inline: it is on every call's
 * path), else the model's pick for `size` (tuner_pick_model, which updates
 * the memo). bytes: what the largest rank puts on the board
 * (exec_board_bytes), the same on every rank; the model wants nccl-tests'
 * size, which for allgather and gather is every rank's block. Under the
 * comm's exec_lock. */
algo_t tuner_pick_model(const struct ccl_comm *comm, sched_coll_t coll, size_t size, int grouped);
static inline algo_t tuner_pick(const struct ccl_comm *comm, sched_coll_t coll, size_t bytes, int grouped)
{
    if (coll == SCHED_P2P_SEND || coll == SCHED_P2P_RECV)
        return ALGO_PAIRWISE;
    size_t size = coll == SCHED_ALLGATHER || coll == SCHED_GATHER ? bytes * (size_t)comm->nranks : bytes;
    const tuner_last_t *last = &comm->tune_last[coll];
    if (last->algo >= 0 && last->size == size && last->grouped == grouped)
        return (algo_t)last->algo;
    return tuner_pick_model(comm, coll, size, grouped);
}
/* From how many bytes per rank a call of coll reads local peers' registered
 * buffers in place: CCL_SINGLE_COPY_THRESHOLD as the ranks agreed, or
 * where that is automatic, the figure for this collective; 0: never. */
size_t tuner_single_copy_bytes(const struct ccl_comm *comm, sched_coll_t coll);
/* The modelled time (us) of call a on its comm, with the algorithm the
 * tuner picks for it (ccl_group_simulate_end). */
double tuner_estimate_us(const coll_args_t *a, int grouped);
const char *tuner_algo_name(algo_t algo);

/* stream.c: the stream takes a copy of the calls (one call or a group). */
int stream_is_host(ccl_stream_t stream);
ccl_result_t stream_enqueue(ccl_stream_t stream, const coll_args_t *calls, int ncalls);
/* The staged device path queues its jobs in two steps, so that it can hold
 * a job before it commits the CUDA stream to waiting for it. On the
 * worker, `before` runs first (an error skips the calls and is recorded on
 * their comms), then the calls, then `after` with the result, always. */
typedef struct {
    ccl_result_t (*before)(void *arg);
    void (*after)(void *arg, ccl_result_t res);
    void *arg;
} stream_hooks_t;
typedef struct stream_op stream_op_t;
/* NULL when out of memory (message set); the calls keep their pending counts. */
stream_op_t *stream_op_new(ccl_stream_t stream, const coll_args_t *calls, int ncalls, const stream_hooks_t *hooks);
void stream_op_submit(ccl_stream_t stream, stream_op_t *op);
/* An op made but never submitted goes back (or is freed). */
void stream_op_discard(ccl_stream_t stream, stream_op_t *op);

/* dev_stream.c: device buffers (staged through pinned host memory). Sets
 * the dev_* flags of a checked call; CCL_SUCCESS or the refusal (device
 * buffers on a ccl host stream, a CUDA stream where CUDA cannot run). Host
 * pointers in a process without the CUDA driver cost ~15 ns here. */
ccl_result_t dstream_classify(coll_args_t *args, ccl_stream_t stream, const char *name);
/* Whether a stream passed to a collective is a CUDA stream (not NULL and
 * not a ccl host stream). */
int dstream_is_cuda(ccl_stream_t stream);
/* Runs calls now, like coll_run, staging the device buffers among them
 * (NULL stream: blocks until the results are in device memory). */
ccl_result_t dstream_run(const coll_args_t *calls, int ncalls);
/* Queues calls on a CUDA stream and returns at once; takes over their
 * pending counts, as stream_enqueue does. */
ccl_result_t dstream_enqueue(ccl_stream_t stream, const coll_args_t *calls, int ncalls);

#endif
