/*
 * p2p.c - P2P connections over CUDA IPC (protocol in p2p.h).
 *
 * The counters' page is a POSIX shared-memory segment of one page, made
 * the way shm FIFOs are (shm_segment_create: the name went round the
 * bootstrap first, mode 0600, unlinked by the caller once both ends have
 * it mapped). Each end registers its own mapping with CUDA to get device
 * addresses for the stream memory operations.
 */
#include "transport/p2p.h"
#include "base/err.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define P2P_MAGIC 0x63636c70u /* "cclp" */
#define P2P_PAGE 4096
#define P2P_LINE 64
/* How far p2p_conn_release moves the counters: past anything queued, and
 * still within the serial-number window of every wait. */
#define P2P_RELEASE_AHEAD (1u << 30)

/* The counters, each on its own cache line: the sender's stream writes
 * only tail, the receiver's only head. The GPU writes them, so they are
 * plain volatile words. */
struct p2p_ctrl {
    uint32_t magic; /* written last by the receiver */
    uint32_t nslots;
    uint64_t slot_size;
    char pad0[P2P_LINE - 16];
    volatile uint32_t tail;
    char pad1[P2P_LINE - 4];
    volatile uint32_t head;
    char pad2[P2P_LINE - 4];
};

_Static_assert(sizeof(struct p2p_ctrl) <= P2P_PAGE, "the counters fit one page");

/* Registers the page and finds the counters' device addresses. */
static ccl_result_t p2p_ctrl_register(p2p_conn_t *conn)
{
    ccl_result_t res = CCL_SUCCESS;
    CCL_TRY(dev_host_register(conn->ctrl, P2P_PAGE));
    conn->registered = 1;
    CCL_TRY(dev_host_device_ptr(&conn->ctrl->tail, &conn->tail_dev));
    CCL_TRY(dev_host_device_ptr(&conn->ctrl->head, &conn->head_dev));
out:
    return res;
}

ccl_result_t p2p_recv_create(p2p_conn_t *conn, uint32_t nslots, size_t slot_size, const char *ctrl_name,
                             p2p_export_t *exp)
{
    ccl_result_t res = CCL_SUCCESS;
    void *map = NULL;
    memset(conn, 0, sizeof *conn);
    memset(exp, 0, sizeof *exp);
    /* Two slots at least: with one, the static order of a ring deadlocks
     * (tests/sim/test_sim_static.c). */
    if (nslots < 2 || nslots > SHM_MAX_SLOTS || slot_size == 0 || slot_size % 256 != 0)
        CCL_FAIL(CCL_ERR_INTERNAL, "p2p: %u slots of %zu bytes is not a valid FIFO", nslots, slot_size);
    conn->nslots = nslots;
    conn->slot_size = slot_size;
    CCL_TRY(dev_malloc((void **)&conn->slots, (size_t)nslots * slot_size));
    CCL_TRY(dev_ipc_export(conn->slots, exp->ipc));
    CCL_TRY(shm_segment_create(ctrl_name, P2P_PAGE, &map));
    conn->ctrl = map;
    memset(map, 0, P2P_PAGE);
    conn->ctrl->nslots = nslots;
    conn->ctrl->slot_size = slot_size;
    __atomic_store_n(&conn->ctrl->magic, P2P_MAGIC, __ATOMIC_RELEASE);
    CCL_TRY(p2p_ctrl_register(conn));
    exp->slots_addr = (uint64_t)(uintptr_t)conn->slots;
    exp->slot_size = slot_size;
    exp->nslots = nslots;
    exp->pid = (int32_t)getpid();
out:
    if (res != CCL_SUCCESS)
        p2p_conn_close(conn);
    return res;
}

ccl_result_t p2p_send_open(p2p_conn_t *conn, const char *ctrl_name, const p2p_export_t *exp)
{
    ccl_result_t res = CCL_SUCCESS;
    void *map = NULL;
    memset(conn, 0, sizeof *conn);
    conn->is_sender = 1;
    CCL_TRY(shm_segment_open(ctrl_name, P2P_PAGE, &map));
    conn->ctrl = map;
    /* The page is the receiver's word; the export came over the bootstrap:
     * both must describe the same FIFO. */
    if (__atomic_load_n(&conn->ctrl->magic, __ATOMIC_ACQUIRE) != P2P_MAGIC || conn->ctrl->nslots != exp->nslots ||
        conn->ctrl->slot_size != exp->slot_size || exp->nslots < 2 || exp->nslots > SHM_MAX_SLOTS ||
        exp->slot_size == 0)
        CCL_FAIL(CCL_ERR_REMOTE, "p2p: the peer's FIFO %s has a corrupt header", ctrl_name);
    conn->nslots = exp->nslots;
    conn->slot_size = (size_t)exp->slot_size;
    if (exp->pid == (int32_t)getpid()) {
        /* CUDA refuses to open a handle in the process that made it. */
        conn->slots = (char *)(uintptr_t)exp->slots_addr;
    } else {
        CCL_TRY(dev_ipc_open(exp->ipc, (void **)&conn->slots));
        conn->ipc_opened = 1;
    }
    CCL_TRY(p2p_ctrl_register(conn));
out:
    if (res != CCL_SUCCESS)
        p2p_conn_close(conn);
    return res;
}

void p2p_conn_close(p2p_conn_t *conn)
{
    if (conn->registered)
        dev_host_unregister(conn->ctrl);
    if (conn->ctrl)
        munmap(conn->ctrl, P2P_PAGE);
    if (conn->is_sender && conn->ipc_opened)
        dev_ipc_close(conn->slots);
    else if (!conn->is_sender)
        dev_free(conn->slots);
    memset(conn, 0, sizeof *conn);
}

void p2p_conn_release(p2p_conn_t *conn)
{
    if (!conn->ctrl)
        return;
    /* The watch thread calls this while a call may be queueing (pos moves
     * under p2p_queue_lock only): an atomic read, and whatever it reads, the
     * release is repeated until the GPU is done. */
    uint32_t ahead = __atomic_load_n(&conn->pos, __ATOMIC_RELAXED) + P2P_RELEASE_AHEAD;
    __atomic_store_n(&conn->ctrl->tail, ahead, __ATOMIC_RELEASE);
    __atomic_store_n(&conn->ctrl->head, ahead, __ATOMIC_RELEASE);
}

ccl_result_t p2p_recv_wait(p2p_conn_t *conn, void *stream, int use_kernel, const void **slot)
{
    *slot = conn->slots + (size_t)(conn->pos % conn->nslots) * conn->slot_size;
    return dev_stream_wait_word(conn->tail_dev, conn->pos + 1, stream, use_kernel);
}

ccl_result_t p2p_send_wait(p2p_conn_t *conn, void *stream, int use_kernel, void **slot)
{
    *slot = conn->slots + (size_t)(conn->pos % conn->nslots) * conn->slot_size;
    /* Slot pos was last filled as pos - nslots: free once head passed it
     * (at the start head is 0 and this holds at once). */
    return dev_stream_wait_word(conn->head_dev, conn->pos + 1 - conn->nslots, stream, use_kernel);
}

ccl_result_t p2p_recv_done(p2p_conn_t *conn, void *stream)
{
    ccl_result_t res = dev_stream_write_word(conn->head_dev, conn->pos + 1, stream);
    if (res == CCL_SUCCESS)
        __atomic_store_n(&conn->pos, conn->pos + 1, __ATOMIC_RELAXED);
    return res;
}

ccl_result_t p2p_send_post(p2p_conn_t *conn, void *stream)
{
    ccl_result_t res = dev_stream_write_word(conn->tail_dev, conn->pos + 1, stream);
    if (res == CCL_SUCCESS)
        __atomic_store_n(&conn->pos, conn->pos + 1, __ATOMIC_RELAXED);
    return res;
}
