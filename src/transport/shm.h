/*
 * shm.h - shared-memory FIFO connections between ranks of one host.
 *
 * A connection is one-way: a FIFO of nslots slots in a POSIX shared-memory
 * segment. The receiver picks a random name, which goes round the bootstrap
 * before the segment exists; then the receiver creates it (mode 0600), the
 * sender maps it by name, and once both have it mapped the name is
 * unlinked, so nothing is left in /dev/shm even if a process dies later.
 * Since every rank learns every name before any segment exists, the
 * survivors of a rank that dies during init unlink its segments too
 * (mesh.c).
 *
 * The sender fills slot (tail % nslots) and publishes tail+1; the receiver
 * consumes slot (head % nslots) and publishes head+1. tail and head live on
 * separate cache lines so the two sides never write the same line.
 */
#ifndef CCL_TRANSPORT_SHM_H
#define CCL_TRANSPORT_SHM_H

#include "ccl.h"
#include "base/wait.h"
#include "transport/shm_peer.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHM_NAME_MAX 48
#define SHM_MAX_SLOTS 512

/* What a slot holds: the data itself, or a shm_ref_t naming where the data
 * lies in the sender's registered buffer (single copy, shm_peer.h). */
enum { SHM_SLOT_DATA = 0, SHM_SLOT_REF = 1 };
/* Slots carry their payload length next to the kind, so slots must be
 * smaller than this. */
#define SHM_SLOT_MAX_BYTES (1u << 31)

typedef struct shm_fifo shm_fifo_t;

typedef struct {
    shm_fifo_t *fifo;      /* the mapped segment */
    size_t map_len;
    char *slots;
    uint32_t nslots;
    size_t slot_size;
    uint32_t *crcs;        /* CCL_CHECKSUM=2: each data slot's CRC-32C (NULL: none) */
    uint32_t pos;          /* sender: next tail; receiver: next head */
    int is_sender;
    /* A local FIFO (shm_conn_create_local): the other end is this process's
     * net proxy thread, which moves the slots over the network. Nothing may
     * go by reference over it, and each post rings the proxy's doorbell. */
    int via_net;
    void (*doorbell)(void);
    /* Receiver: the slot at head holds a reference this rank forwarded to
     * rank held - 1 (0: none); the executor consumes it once that send is
     * drained, so that the buffer's owner waits for every rank that reads
     * it. */
    int held;
    /* Sender: a whole-step reference to lent_len bytes of our buffer at
     * lent_src sits at FIFO position lent_pos, and we may help the reader
     * copy it (shm_help.h); lent_len 0: none. Kept here, not read back from
     * the shared slot, so that a peer cannot point us at other memory of
     * ours. */
    uint32_t lent_pos;
    const char *lent_src;
    size_t lent_len;
    /* Sender: that reference names a twin (shm_help.h), lent_len bytes of
     * our own buffer at lent_twin that our drain fills (with the reader,
     * if it helps); NULL: none. twin_open: the reader may write into it
     * until that send is drained. */
    char *lent_twin;
    int twin_open;
    /* Sender: the reader posts to us as we post to it (an allgather):
     * it copies every slice itself, and we only wait (shm_help.h). */
    int lent_exchange;
    int lent_stream; /* the twin's copies stream (exec/host.c, stream_twin) */
    /* After our call failed: 1 + the slices the peer took to copy into our
     * buffer (our twin as sender, our destination as receiver), which we
     * wait for before returning; 0: nothing to wait for. */
    uint32_t closing;
    /* Receiver: we offered the sender the destination of the whole-step
     * reference at head, of this many slices, to copy into; 0: none. */
    uint32_t help_slices;
    /* Receiver: the sender's twin of that reference, mapped: every slice
     * we copy goes there too; NULL: none. */
    char *help_twin;
} shm_conn_t;

/* A fresh random segment name: prefix followed by 128 random bits. */
ccl_result_t shm_name_new(char name[SHM_NAME_MAX], const char *prefix);
/* Creates a segment of len bytes under name (refusing a name that exists)
 * and maps it; the name is removed again when that fails. */
ccl_result_t shm_segment_create(const char *name, size_t len, void **map);
/* Maps a segment a peer created under name, which must be exactly len
 * bytes long. */
ccl_result_t shm_segment_open(const char *name, size_t len, void **map);
/* Receiver side: creates and maps the segment under name (shm_name_new).
 * pretouch: fault every page in now rather than on first use. */
ccl_result_t shm_conn_create(shm_conn_t *conn, uint32_t nslots, size_t slot_size, const char *name,
                             int pretouch);
/* Sender side: maps the segment a peer created. */
ccl_result_t shm_conn_open(shm_conn_t *conn, const char *name);
/* Faults every page of the FIFO in now, on this side of it, so that an
 * algorithm's first calls over it do not pay ~11 us per page inside a
 * collective (shm: both sides map the pages; net: the executor's end holds
 * the proxy's too). Best effort: a page left out faults on first use. */
void shm_conn_prefault(shm_conn_t *conn);
/* Both ends of a FIFO in private memory of this process, for a connection
 * whose far end is the network: the executor uses one end (exec_sends says
 * which), the net proxy thread the other. Posts on the executor's end call
 * doorbell so the proxy notices new work. */
ccl_result_t shm_conn_create_local(shm_conn_t *exec_end, shm_conn_t *proxy_end, int exec_sends,
                                   uint32_t nslots, size_t slot_size,
                                   void (*doorbell)(void));
/* Removes the name; the mapping stays valid. Safe to call twice. */
void shm_name_unlink(const char *name);
/* A segment name received from a peer (len bytes): only a name that
 * shm_conn_create or shm_board_create writes ("/ccl-" or "/ccl-b", then 32
 * lowercase hex digits) is ever opened, never a path of the peer's choice.
 * CCL_ERR_REMOTE with a message starting with `from` otherwise. */
ccl_result_t shm_name_check(const char *name, size_t len, const char *from);
/* Marks the connection failed so the peer's waits end (abort, errors).
 * why (may be NULL) says what happened, for the peer's error message; the
 * first reason given stays. */
void shm_conn_poison(shm_conn_t *conn, const char *why);
void shm_conn_close(shm_conn_t *conn);

/* Data path. The wait functions block through `policy` (spin/yield/futex with
 * abort, liveness and deadline checks) and return the slot to use. */
ccl_result_t shm_recv_wait(shm_conn_t *conn, const wait_policy_t *policy, const void **slot);
void shm_recv_done(shm_conn_t *conn);
ccl_result_t shm_send_wait(shm_conn_t *conn, const wait_policy_t *policy, void **slot);
/* Publishes the slot from shm_send_wait; kind is SHM_SLOT_DATA or _REF,
 * len the bytes of payload it stands for (< SHM_SLOT_MAX_BYTES). */
void shm_send_post(shm_conn_t *conn, int kind, size_t len);
/* Receiver, on the slot from shm_recv_wait: with checksums (CCL_CHECKSUM=2,
 * chosen by the receiver when it created the FIFO) a data slot's bytes
 * must match the CRC-32C its sender wrote, else CCL_ERR_CORRUPT naming the
 * message. References (single copy) are not covered. */
ccl_result_t shm_recv_verify(const shm_conn_t *conn);
/* CCL_FAULT corrupt_wire without a network: the next data slot this
 * process posts to a checksummed FIFO has a byte changed after its
 * checksum was taken. */
void shm_fault_corrupt(void);
/* Non-blocking: whether shm_recv_wait / shm_send_wait would return at once. */
int shm_recv_ready(const shm_conn_t *conn);
int shm_send_ready(const shm_conn_t *conn);
/* Whether the slot from shm_recv_wait holds a reference, and the payload
 * length its sender posted. */
int shm_recv_is_ref(const shm_conn_t *conn);
size_t shm_recv_len(const shm_conn_t *conn);
/* For the net proxy, which keeps several slots in flight beyond pos:
 * the counter the other end publishes, slot i's memory and its length. */
uint32_t shm_peer_count(const shm_conn_t *conn);
void *shm_slot_at(const shm_conn_t *conn, uint32_t i);
size_t shm_slot_len_at(const shm_conn_t *conn, uint32_t i);
int shm_slot_is_ref_at(const shm_conn_t *conn, uint32_t i);
int shm_conn_poisoned(const shm_conn_t *conn);
/* Whether the peer closed its end (destroyed or aborted its communicator):
 * a peer that exits after that left in order, one that exits without it
 * died. */
int shm_conn_closed(const shm_conn_t *conn);
/* The reason a poisoner gave (shm_conn_poison), copied into buf; NULL when
 * the connection is not poisoned or nobody said why. */
const char *shm_conn_poison_why(const shm_conn_t *conn, char *buf, size_t len);
/* Sender side: waits until the receiver consumed everything posted. */
ccl_result_t shm_send_drain(shm_conn_t *conn, const wait_policy_t *policy);

#endif
