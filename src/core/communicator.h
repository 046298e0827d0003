/*
 * communicator.h - the communicator and the arguments of one call: types
 * only, no functions. Every module of core and the executors read the
 * communicator; the functions that make, run and end it are declared in
 * their own modules' headers (comm.h, coll.h, connect.h, ...).
 */
#ifndef CCL_CORE_COMMUNICATOR_H
#define CCL_CORE_COMMUNICATOR_H

#include "algos/engine.h"
#include "algos/schedule.h"
#include "bootstrap/bootstrap.h"
#include "ccl.h"
#include "exec/lock.h"
#include "topo/topo.h"
#include "topo/tune.h"
#include "transport/net.h"
#include "transport/p2p.h"
#include "transport/shm.h"
#include "transport/mesh.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define COMM_ERR_MAX 1024


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
    pthread_t watch;        /* connect_p2p_watch.c, while state is UP */
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
    mesh_t mesh;             /* FIFOs to every rank (shm, net), the one-shot board */
    size_t slot_size;        /* agreed by all ranks at init */
    uint32_t nslots;
    int spin, yield;         /* wait policy (us), from the local rank count */
    int copy_help;           /* CCL_COPY_HELP, settled: we copy part of what peers read from us (shm_help.h) */
    int copy_help_idle;      /* ... at least in calls where we receive nothing (exec/host.c, exec_ctx_init) */
    void *scratch;           /* 2 * slot_size bytes: reductions that stream out, premultiplied input */
    size_t stream_threshold; /* results this large are written non-temporally */
    size_t stream_copies_from; /* ... and those of allgather and broadcast (comm_stream_thresholds) */
    size_t stream_pair_from;   /* ... and the fused 2-rank allreduce's, out of place */
    size_t single_copy_from[SCHED_NUM_COLLS]; /* calls this large may go by reference (tuner_single_copy_bytes) */
    size_t eng_window;       /* CCL_ENGINE_WINDOW: rounds in flight (eng_job_t.window) */
    size_t net_zero_copy_threshold; /* calls this large send to other hosts from the user buffer */
    shm_peer_cache_t peer_maps;   /* peers' registered buffers we mapped */

    exec_lock_t exec_lock;     /* one collective at a time per comm (exec/lock.c) */
    /* The bootstrap ring after init (ccl_comm_split): not exec_lock, which a
     * collective holds while it waits for peers that may be in the split. */
    pthread_mutex_t bs_lock;
    sched_t sched;             /* reused schedule storage, under exec_lock */
    sched_t *group_scheds;     /* ... and for the calls of a group (coll_run.c), grown as needed */
    int group_scheds_cap;
    void *eng_arena;           /* reused engine state, under exec_lock */
    size_t eng_arena_cap;
    int check_args;            /* CCL_CHECK_ARGS: verify calls across ranks first */
    tune_model_t tune;         /* the tuner's cost model, the same on every rank */
    unsigned algo_allowed[SCHED_NUM_COLLS]; /* CCL_ALGO (rank 0's): TUNE_BIT mask per collective */
    tuner_last_t tune_last[SCHED_NUM_COLLS]; /* last pick per collective, under exec_lock */

    pthread_mutex_t redop_lock;
    struct comm_redop *redops;      /* [COMM_MAX_REDOPS], allocated on first use */
    int redop_tag;             /* tells this comm's operators from others' */
    uint64_t seq;              /* collectives run, for error messages */
    uint64_t coll_calls;       /* collectives entered (not send/recv), under exec_lock; the
                                * same count on every rank, published on the board */
    int verify_every;          /* CCL_VERIFY */
    uint64_t verify_calls;     /* verifiable calls run, under exec_lock */
    int broken;                /* an earlier collective failed mid-way */
    _Atomic int broken_code;   /* ... with this result (ccl_comm_get_async_error) */

    comm_p2p_t p2p;            /* under exec_lock; the P2P queues under p2p_queue_lock */
    /* Queueing a P2P call's work on its stream (exec/device.c says why not
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

#endif
