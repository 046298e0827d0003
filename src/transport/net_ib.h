/*
 * net_ib.h - the built-in "ib" net plugin: InfiniBand verbs and RoCE v2
 * behind ccl_net.h, with libibverbs loaded at run time.
 *
 * Connections. listen() opens a TCP side channel (on the interface the
 * bootstrap uses) whose address goes in the handle. connect() and accept()
 * trade an ib_conn_info_t over it: queue pair numbers, PSN, LID/GID, MTU,
 * and the sender's FIFO address and key; both ends move their RC queue
 * pairs to ready-to-send and the connector says "ready" before the
 * acceptor hands out its comm, so that nothing is written to a queue pair
 * that cannot take it yet. The side channel stays open for the life of
 * the connection: a peer process that dies closes it, which is how a
 * waiting rank learns of it at once (a queue pair only notices a dead
 * peer when it next sends).
 *
 * Data (net_ib_io.c). Zero copy, receiver-driven: irecv() writes the
 * buffer's address, key, size and tag into entry k of the sender's FIFO by
 * an RDMA write; isend() of message k waits for that entry, checks size and
 * tag, and RDMA-writes the data straight into the posted buffer, with
 * immediate data that completes a receive work request at the receiver.
 * A message is striped over the connection's queue pairs
 * (CCL_IB_QPS_PER_CONNECTION) from IB_STRIPE_MIN bytes. A send larger
 * than the posted receive fails at the sender and, by an immediate that
 * says so, at the receiver: never truncated.
 *
 * The formats are here so that the unit tests can forge them.
 */
#ifndef CCL_TRANSPORT_NET_IB_H
#define CCL_TRANSPORT_NET_IB_H

#include "bootstrap/socket.h"
#include "ccl_net.h"
#include "transport/net_ib_dev.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define IB_HANDLE_MAGIC 0x62696363u /* "ccib" */
#define IB_INFO_MAGIC 0x6f666e69u   /* "info" */
#define IB_WIRE_VERSION 1
#define IB_MAX_QPS 8
/* Messages in flight per comm: the sender's FIFO entries. */
#define IB_NREQ 64
/* Messages of at least this many bytes per queue pair are striped. */
#define IB_STRIPE_MIN (128u << 10)
/* Immediate data of a message's first piece: its size, or this bit and
 * the size when the sender refused it (larger than the posted receive or
 * another tag). Messages are below 2^31 bytes (max_size). */
#define IB_IMM_REFUSED 0x80000000u
#define IB_MAX_MSG 0x7fffffffu

/* What listen() writes into the handle; connect() keeps its progress in
 * the rest (its own process only). */
typedef struct {
    uint32_t magic;
    uint32_t version;
    int32_t rank;
    uint32_t reserved;
    uint64_t listen_id;
    sock_addr_t addr;
    uint32_t stage;
    void *pending;
} ib_handle_t;
_Static_assert(sizeof(ib_handle_t) <= CCL_NET_HANDLE_MAXSIZE, "handle too large");

/* What each end of a connection tells the other over the side channel. */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint64_t listen_id;
    int32_t rank;
    uint32_t nqps;
    uint32_t qpn[IB_MAX_QPS];
    uint32_t psn;
    uint32_t link_layer;
    uint32_t lid;
    uint32_t mtu;
    uint32_t gid_index;
    uint8_t gid[16];
    uint64_t fifo_addr; /* the connector's (sender's) FIFO; 0 from the acceptor */
    uint32_t fifo_rkey;
    uint32_t reserved;
    char host[64];
    char dev[IB_NAME_LEN + 8];
} ib_conn_info_t;

/* One entry of a sender's FIFO, written by the receiver; seq (message
 * index + 1) last, so that a sender that sees it sees the rest. */
typedef struct {
    uint64_t addr;
    uint32_t rkey;
    uint32_t size;
    uint32_t tag;
    uint32_t seq;
    uint64_t reserved;
} ib_fifo_entry_t;
_Static_assert(sizeof(ib_fifo_entry_t) == 32, "FIFO entry layout");

/* How many pieces a message of size bytes is cut into over nqps queue
 * pairs, and piece j's offset and length. */
int ib_npieces(size_t size, int nqps);
void ib_piece(size_t size, int npieces, int j, size_t *off, size_t *len);

extern const ccl_net_v2_t net_ib_plugin;
/* After init: what it found ("2 active port(s)") or why it found none. */
const char *net_ib_why(void);

#if CCL_HAVE_IBVERBS
/* ---- between net_ib.c and net_ib_io.c ----------------------------------- */

enum { IB_REQ_FREE = 0, IB_REQ_POSTED, IB_REQ_DONE };

typedef struct {
    int state;
    int pending;           /* pieces (send) not completed yet */
    int npieces;           /* recv: known once the first piece arrived (0 before) */
    int got;               /* recv: pieces arrived */
    uint32_t msg;          /* message index */
    size_t size;           /* send: bytes; recv: bytes arrived (from piece 0) */
    size_t posted;         /* recv: the buffer's size */
    struct ibv_mr *own_mr; /* registered for this request alone */
    void *cached;          /* a registration cache entry held (net_ib_mr.c) */
    struct ib_comm *comm;
} ib_req_t;

typedef struct ib_comm {
    int is_send;
    ib_dev_t *dev;
    int fd;                       /* side channel */
    int nqps;
    struct ibv_qp *qp[IB_MAX_QPS];
    struct ibv_cq *cq;
    ib_fifo_entry_t *fifo;        /* send: written by the peer; recv: our entries' source */
    struct ibv_mr *fifo_mr;
    uint64_t rfifo_addr;          /* recv: the peer's FIFO */
    uint32_t rfifo_rkey;
    uint32_t max_inline;
    uint32_t nposted;             /* messages posted */
    uint32_t ndone;               /* messages done, in order */
    uint32_t q0_next;             /* recv: the message the next first piece belongs to */
    ib_req_t req[IB_NREQ];
    uint64_t next_check_ns;
    uint64_t async_seen;          /* async events of the device looked at */
    ccl_result_t fail_code;       /* CCL_SUCCESS while healthy */
    char err[1024];
    int peer_rank;
    char peer_host[64];
    char peer_dev[IB_NAME_LEN + 8];
    uint8_t peer_gid[16];
} ib_comm_t;

/* Fails the comm (first cause kept) and returns the code. */
ccl_result_t ib_comm_fail(ib_comm_t *c, ccl_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Who the peer is, for messages: "rank R (host, dev GID g)". */
const char *ib_comm_peer(const ib_comm_t *c, char *buf, size_t len);
/* The side channel and the device's async events, at most every few ms. */
ccl_result_t ib_comm_check(ib_comm_t *c);
/* Posts a receive work request on queue pair q (one per message piece). */
int ib_post_recv_wr(ib_comm_t *c, int q);
/* A comm on device d with its CQ, nqps queue pairs (INIT, receives
 * posted) and FIFO; fd (the side channel) becomes its on success. */
ccl_result_t ib_comm_create(ib_dev_t *d, int is_send, int nqps, int fd, ib_comm_t **out);
void ib_comm_destroy(ib_comm_t *c);
/* What we tell the peer about comm c (net_ib.h's ib_conn_info_t). */
void ib_info_fill(const ib_comm_t *c, uint64_t listen_id, int rank, uint32_t psn, const char *host,
                  ib_conn_info_t *info);
/* Checks a peer's connection info; NULL or what is wrong with it. */
const char *ib_conn_info_check(const ib_conn_info_t *info, uint64_t listen_id);
/* Our queue pairs to RTR and RTS, aimed at the peer's (same count). */
ccl_result_t ib_comm_connect_qps(ib_comm_t *c, uint32_t psn, const ib_qp_params_t *qp, const ib_conn_info_t *peer);
const ib_verbs_t *ib_verbs(void);
/* The cached registration of a ccl_mem_alloc buffer holding [data,
 * data + size) on dev: 1 with *mr and a token to put back when the request
 * is done, 0 when the range is not such a buffer (net_ib_mr.c). */
int ib_mr_cache_get(const ib_dev_t *dev, const void *data, size_t size, struct ibv_mr **mr, void **token);
void ib_mr_cache_put(void *token);
/* Deregisters every cached region (finalize). */
void ib_mr_cache_clear(void);

ccl_result_t ib_isend(void *comm, const void *data, size_t size, uint32_t tag, void *mhandle, void **request);
ccl_result_t ib_irecv(void *comm, int n, void **data, const size_t *sizes, const uint32_t *tags, void **mhandles,
                      void **request);
ccl_result_t ib_test(void *request, int *done, size_t *sizes);
#endif

#endif
