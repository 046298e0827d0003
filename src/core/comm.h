/*
 * comm.h - the communicator and the core layer's internal interfaces.
 */
#ifndef CCL_CORE_COMM_H
#define CCL_CORE_COMM_H

#include "algos/schedule.h"
#include "bootstrap/bootstrap.h"
#include "ccl.h"
#include "transport/shm.h"
#include "transport/shm_board.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define COMM_ERR_MAX 1024

typedef enum { ALGO_RING = 0, ALGO_DIRECT, ALGO_ONESHOT, ALGO_COUNT } algo_t;

struct ccl_comm {
    int rank, nranks;
    int nlocal;              /* ranks on this host, this one included */
    bs_t bs;                 /* peers[] holds every rank's pid and host */
    shm_conn_t *send_conns;  /* [nranks]; fifo == NULL where unconnected */
    shm_conn_t *recv_conns;
    shm_board_t board;       /* one-shot board; hdr == NULL when not all ranks are local */
    size_t slot_size;        /* agreed by all ranks at init */
    uint32_t nslots;
    int spin, yield;         /* wait policy (us), from the local rank count */
    void *scratch;           /* slot_size bytes for reductions that stream out */
    size_t stream_threshold; /* results this large are written non-temporally */
    size_t single_copy_threshold; /* messages this large may go by reference */
    shm_peer_cache_t peer_maps;   /* peers' registered buffers we mapped */

    pthread_mutex_t exec_lock; /* one collective at a time per comm */
    sched_t sched;             /* reused schedule storage, under exec_lock */
    uint64_t seq;              /* collectives run, for error messages */
    int broken;                /* an earlier collective failed mid-way */

    _Atomic int aborted;
    pthread_mutex_t pending_lock;
    pthread_cond_t pending_cond;
    _Atomic int pending;       /* queued or running calls */
    _Atomic int draining;      /* destroy/abort waits for pending to reach 0 */

    char last_error[COMM_ERR_MAX];
};

/* The arguments of one collective call, as queued on a stream. */
typedef struct {
    sched_coll_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    ccl_datatype_t dtype;
    ccl_redop_t op;
    struct ccl_comm *comm;
} coll_args_t;

/* comm.c */
int comm_is_live(const struct ccl_comm *comm);
void comm_pending_add(struct ccl_comm *comm);
void comm_pending_done(struct ccl_comm *comm);
/* Copies this thread's error message into the comm (for ccl_get_last_error). */
void comm_record_error(struct ccl_comm *comm);

/* connect.c: shm FIFOs along the ring, and the one-shot board. */
ccl_result_t connect_ring(struct ccl_comm *comm);
ccl_result_t connect_board(struct ccl_comm *comm);
void connect_close(struct ccl_comm *comm);
void connect_poison(struct ccl_comm *comm);

/* exec_host.c */
ccl_result_t exec_host_run(struct ccl_comm *comm, const sched_t *sched, const coll_args_t *args);
/* The one-shot path: every rank reads every rank's input from the board. */
ccl_result_t exec_host_oneshot(struct ccl_comm *comm, const coll_args_t *args);

/* coll.c: runs one collective now, on the calling thread. */
ccl_result_t coll_run(const coll_args_t *args);
const char *coll_name(sched_coll_t coll);

/* tuner.c */
algo_t tuner_pick(const struct ccl_comm *comm, sched_coll_t coll, size_t bytes);
const char *tuner_algo_name(algo_t algo);

/* stream.c */
int stream_is_host(ccl_stream_t stream);
ccl_result_t stream_enqueue(ccl_stream_t stream, const coll_args_t *args);

#endif
