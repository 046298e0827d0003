/*
 * p2p.h - P2P connections between ranks of one host: FIFOs whose slots are
 * GPU memory, driven entirely by CUDA streams.
 *
 * A connection is one-way, like a shm FIFO (shm.h), and speaks the same
 * protocol: the sender fills slot (tail % nslots) and publishes tail+1,
 * the receiver consumes slot (head % nslots) and publishes head+1. What
 * differs is who does it. The slots are device memory of the receiver
 * (cudaMalloc), exported with CUDA IPC and opened by the sender, so the
 * sender's kernel writes straight into the receiver's GPU (over NVLink or
 * PCIe when the GPUs differ, in place when they are the same GPU). The
 * counters live in a page of host shared memory that the receiver creates
 * and both map and register with CUDA (cudaHostRegister, mapped), so that
 * neither host thread takes part: every wait and every publish is a stream
 * memory operation queued on the user's stream around the kernel that
 * moves the slice:
 *
 *   sender's stream                       receiver's stream
 *   wait head >= n+1-nslots (free slot)   wait tail >= n+1 (slot n posted)
 *   kernel: ... -> slot n                 kernel: slot n -> ...
 *   write tail = n+1 (fenced)             write head = n+1
 *
 * The write is preceded by the driver's memory fence, so the slot's data
 * is visible before the counter moves. Comparisons are on serial numbers,
 * so the counters may wrap. Positions (`pos`) are assigned when work is
 * queued, on the host, in the order calls are made; the counters only
 * ever move when the GPU runs that work.
 *
 * Nothing watches a stream that waits: a peer that dies leaves it waiting
 * until p2p_conn_release (ccl_comm_abort) moves the counters out of its
 * way.
 */
#ifndef CCL_TRANSPORT_P2P_H
#define CCL_TRANSPORT_P2P_H

#include "ccl.h"
#include "device/cuda_rt.h"
#include "transport/shm.h"

#include <stddef.h>
#include <stdint.h>

/* What the receiver tells its sender about its FIFO (travels over the
 * bootstrap; fixed layout). */
typedef struct {
    unsigned char ipc[DEV_IPC_HANDLE_BYTES]; /* the slots, exported */
    uint64_t slots_addr;  /* the slots' address in the receiver's process */
    uint64_t slot_size;
    uint32_t nslots;
    int32_t pid;          /* a sender in the same process uses slots_addr as is */
} p2p_export_t;

typedef struct p2p_ctrl p2p_ctrl_t;

typedef struct {
    char *slots;         /* device memory: ours (receiver) or the peer's, opened (sender) */
    p2p_ctrl_t *ctrl;    /* the counters' page, mapped here */
    void *tail_dev, *head_dev; /* the counters' device addresses */
    uint32_t nslots;
    size_t slot_size;
    uint32_t pos;        /* next slot number to queue (under p2p_queue_lock; read atomically by the release) */
    int is_sender;
    int ipc_opened;      /* sender: slots were opened with CUDA IPC (closed at the end) */
    int registered;      /* the page is registered with CUDA */
} p2p_conn_t;

/* Receiver side: allocates the slots on the current device, creates the
 * counters' page under ctrl_name (shm_name_new, already sent round) and
 * fills *exp for the sender. */
ccl_result_t p2p_recv_create(p2p_conn_t *conn, uint32_t nslots, size_t slot_size, const char *ctrl_name,
                             p2p_export_t *exp);
/* Sender side: maps the receiver's page and opens its slots. */
ccl_result_t p2p_send_open(p2p_conn_t *conn, const char *ctrl_name, const p2p_export_t *exp);
/* Frees what the connection holds; the GPU must be done with it. */
void p2p_conn_close(p2p_conn_t *conn);
/* Moves both counters far past every position queued, so that streams
 * waiting on them go on (their slices carry garbage): for abort, when
 * peers will never publish. */
void p2p_conn_release(p2p_conn_t *conn);

/* Queues on the stream the wait for the next slot (receiver: posted;
 * sender: free) and returns its device address. use_kernel: wait with the
 * polling kernel instead of the driver's stream wait. */
ccl_result_t p2p_recv_wait(p2p_conn_t *conn, void *stream, int use_kernel, const void **slot);
ccl_result_t p2p_send_wait(p2p_conn_t *conn, void *stream, int use_kernel, void **slot);
/* Queues the publish of the slot of the last wait: head (receiver, the
 * slot is free again) or tail (sender, the slot is full). */
ccl_result_t p2p_recv_done(p2p_conn_t *conn, void *stream);
ccl_result_t p2p_send_post(p2p_conn_t *conn, void *stream);

#endif
