/*
 * ccl_net.h - the network plugin ABI of ccl (version 2; version 1 still loads).
 *
 * A network plugin moves messages between processes on different hosts. ccl's
 * net transport (src/transport/) drives one from a progress thread: it posts
 * FIFO slots with isend/irecv, polls them with test and publishes completions
 * into the connection FIFO. The built-in TCP transport ("socket") implements
 * exactly this struct, so built-in and third-party transports are driven by
 * the same code.
 *
 * Writing a plugin
 * ----------------
 * Build a shared library named libccl-net-<name>.so that exports
 *
 *     const ccl_net_v2_t ccl_net_plugin_v2 = { .version = CCL_NET_ABI_VERSION, ... };
 *
 * (or, the older ABI, const ccl_net_v1_t ccl_net_plugin_v1 with .version 1).
 *
 * and select it with CCL_NET_PLUGIN=<name> (ccl dlopen()s
 * "libccl-net-<name>.so" through the normal library search path; a value
 * containing '/' is taken as a path). The plugin needs nothing from libccl:
 * this header and ccl.h (for ccl_result_t) are all it includes. ccl refuses a
 * library whose symbol is missing, whose version field differs from the ABI
 * it was built for, or whose function pointers are NULL, and says which.
 * ccl looks for ccl_net_plugin_v2 first, then ccl_net_plugin_v1. A later
 * ABI gets a new struct and symbol (ccl_net_v3_t, ccl_net_plugin_v3); a
 * plugin may export several to work with old and new ccl.
 *
 * Version 2 adds optional capabilities (see ccl_net_v2_t): an activity
 * callback, inline progress and poll descriptors, which let ccl's progress
 * thread sleep instead of spinning while nothing moves. The built-in TCP
 * plugin uses all three through this struct, like any other plugin. A v1
 * plugin is driven as a v2 plugin without any of them.
 *
 * Objects
 * -------
 *   device       one NIC (or interface); numbered 0..ndev-1.
 *   listen comm  a passive endpoint on a device. listen() fills an opaque
 *                handle (at most CCL_NET_HANDLE_MAXSIZE bytes) that the
 *                caller ships to the peer out of band (ccl's bootstrap).
 *   send comm    the connecting side of a one-way connection (connect()).
 *   recv comm    the accepting side of it (accept() on the listen comm).
 *   mhandle      a registered memory region (reg_mr) on a send or recv comm.
 *   request      one isend or irecv in flight; test() reports its end and
 *                frees it.
 *
 * Return values
 * -------------
 * Every function returns CCL_SUCCESS or an error: CCL_ERR_REMOTE when the peer
 * failed, closed the connection or sent something invalid; CCL_ERR_SYSTEM for
 * a local failure (memory, sockets); CCL_ERR_TIMEOUT when a connection could
 * not be set up within the plugin's deadline; CCL_ERR_INVALID_ARGUMENT for
 * bad arguments; CCL_ERR_UNSUPPORTED for valid requests the plugin cannot
 * serve (device memory on a host-only plugin). After a failure, last_error()
 * on the same thread returns a one-line message; messages about a connection
 * name the peer's address, and its rank when one was given to listen/connect.
 *
 * Threading
 * ---------
 * init and finalize are called once per process, by ccl, not concurrently
 * with anything. devices, get_properties, listen, connect, accept and reg_mr /
 * dereg_mr may be called from any thread. Calls on one comm - and on the
 * requests it created - come from one thread at a time (the progress thread
 * that owns it); different comms may be driven concurrently from different
 * threads. No function blocks waiting for the peer: connect and accept return
 * a NULL comm until the connection is ready, isend and irecv return a NULL
 * request when the comm cannot take more now, and test only reports.
 *
 * Ordering and matching
 * ---------------------
 * Messages on one connection are matched in order: the k-th isend on a send
 * comm is received by the k-th irecv on its recv comm, whatever the tags.
 * The tag is a check, not a selector: the k-th irecv must be posted with the
 * tag of the k-th isend, and a mismatch fails the recv comm (CCL_ERR_REMOTE).
 * The receive's posted size must be at least the sent size; a message larger
 * than its receive fails the recv comm with CCL_ERR_REMOTE (it is never
 * truncated and never written past the posted buffer). A send completes once
 * its buffer may be reused (the data may still be in flight); a receive
 * completes once all its bytes are in the buffer. Requests on one comm
 * complete in the order they were posted: test() never reports a request done
 * before every earlier request on that comm is done.
 *
 * Failures
 * --------
 * When the peer dies, closes or violates the protocol, the next test() on a
 * request of that comm returns the error (CCL_ERR_REMOTE) with a message
 * naming the peer and its address, and so do all later calls on the comm; the
 * only useful call left is close_send/close_recv. A request that had
 * completed before the failure is still reported done by test(): a peer's
 * last message counts even when the peer closes right after sending it. A dead peer is noticed by
 * the connection itself (closed socket, TCP keepalive); the caller still
 * bounds each wait with its own timeout (CCL_TIMEOUT).
 */
#ifndef CCL_NET_H
#define CCL_NET_H

#include "ccl.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes; the version field of ccl_net_v2_t. */
#define CCL_NET_ABI_VERSION 2
/* The symbol a plugin exports, and the library name pattern. */
#define CCL_NET_PLUGIN_SYMBOL "ccl_net_plugin_v2"
/* The previous ABI, still loaded: its struct's version field and symbol. */
#define CCL_NET_ABI_VERSION_V1 1
#define CCL_NET_PLUGIN_SYMBOL_V1 "ccl_net_plugin_v1"
#define CCL_NET_PLUGIN_LIB_PREFIX "libccl-net-"
/* Bytes of the opaque connection handle listen() fills. */
#define CCL_NET_HANDLE_MAXSIZE 128

/* What kind of memory a plugin can send from / receive into (bit set), and
 * the type argument of reg_mr. */
#define CCL_NET_PTR_HOST 0x1
#define CCL_NET_PTR_DEVICE 0x2

/* Levels of the log function ccl hands to init(); they match CCL_DEBUG. */
#define CCL_NET_LOG_WARN 2
#define CCL_NET_LOG_INFO 3
#define CCL_NET_LOG_TRACE 4

/* Writes one log line through ccl (CCL_DEBUG, CCL_DEBUG_FILE); lines below
 * the configured level cost one comparison. Thread-safe. */
typedef void (*ccl_net_log_fn_t)(int level, const char *file, int line, const char *fmt, ...);

/* What get_properties reports about one device. Strings belong to the plugin
 * and stay valid until finalize. */
typedef struct {
    const char *name;       /* for logs and CCL_SOCKET_IFNAME-style matching, e.g. "eth0" */
    const char *pci_path;   /* sysfs path of the NIC's PCI device, or NULL when virtual/unknown */
    uint64_t guid;          /* equal for two devices that are the same physical port */
    int ptr_support;        /* CCL_NET_PTR_* bits isend/irecv accept */
    int speed_mbps;         /* link speed in Mbit/s (an estimate when the OS does not say) */
    float latency_us;       /* one-way latency estimate in microseconds; 0 when unknown */
    int max_comms;          /* send + recv comms the device supports at once */
    int max_recvs;          /* largest n that irecv accepts (1: no grouped receives) */
    int max_requests;       /* requests one comm may have in flight; more get a NULL request */
    size_t reg_granularity; /* reg_mr regions need no alignment beyond this (1: any) */
    size_t max_size;        /* largest byte size of one message */
} ccl_net_props_t;

typedef struct {
    /* CCL_NET_ABI_VERSION of the header the plugin was built with. */
    uint32_t version;
    /* Short plugin name for logs ("socket", "ib"). */
    const char *name;

    /* Called once before anything else. log stays valid until finalize. */
    ccl_result_t (*init)(ccl_net_log_fn_t log);
    /* Number of usable devices (0 is a valid answer). */
    ccl_result_t (*devices)(int *ndev);
    ccl_result_t (*get_properties)(int dev, ccl_net_props_t *props);

    /* Opens a listen comm on dev and writes its handle (at most
     * CCL_NET_HANDLE_MAXSIZE bytes) for the peer. rank is the caller's rank
     * (or -1); the plugin may put it in the handle so that the connecting
     * side names it in errors. */
    ccl_result_t (*listen)(int dev, int rank, void *handle, void **listen_comm);
    /* Connects to the listen comm a handle describes. Returns with *send_comm
     * NULL while the connection is being set up: call again with the same
     * handle buffer (the plugin may keep its progress in it, so the buffer
     * must stay in place and unmodified) until *send_comm is non-NULL or an
     * error is returned. rank is the caller's rank (or -1), for the peer's
     * messages. A connect that is abandoned midway is released by finalize. */
    ccl_result_t (*connect)(int dev, int rank, void *handle, void **send_comm);
    /* Returns the next connection made to this listen comm, or NULL (call
     * again) when none is complete yet. One listen comm may accept any number
     * of connections, returned in the order they complete; ccl uses one
     * listen comm per expected peer, so it knows who is who. */
    ccl_result_t (*accept)(void *listen_comm, void **recv_comm);

    /* Registers [data, data+size) of the given CCL_NET_PTR_* type for use
     * with comm (a send or a recv comm). Regions may overlap. */
    ccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ccl_result_t (*dereg_mr)(void *comm, void *mhandle);

    /* Posts a send of size bytes (0 is valid) with a tag. mhandle is a region
     * of this comm covering the buffer (NULL is allowed by plugins that need
     * no registration, such as socket). *request is NULL when the comm has
     * max_requests in flight: nothing was posted, try again later. The buffer
     * must stay unmodified until test() reports the send done. */
    ccl_result_t (*isend)(void *send_comm, const void *data, size_t size, uint32_t tag,
                          void *mhandle, void **request);
    /* Posts a receive of up to sizes[i] bytes into data[i] for i < n (n is 1
     * up to the device's max_recvs; each buffer receives one message, tags[i]
     * must be that message's tag). *request is NULL when the comm cannot take
     * more now, as for isend. */
    ccl_result_t (*irecv)(void *recv_comm, int n, void **data, const size_t *sizes,
                          const uint32_t *tags, void **mhandles, void **request);
    /* Reports whether a request is done. When *done is 1 the request is freed
     * and, if sizes is not NULL, sizes[i] holds the bytes of the i-th message
     * (a send reports its own size in sizes[0]). On an error the request and
     * its comm are dead; only close remains. */
    ccl_result_t (*test)(void *request, int *done, size_t *sizes);

    /* Close a comm. Requests still in flight on it are dropped; their memory
     * may be reused at once. */
    ccl_result_t (*close_send)(void *send_comm);
    ccl_result_t (*close_recv)(void *recv_comm);
    ccl_result_t (*close_listen)(void *listen_comm);

    /* Called once after every comm is closed. */
    ccl_result_t (*finalize)(void);
    /* The message of the last failed call on the calling thread ("" if
     * none); valid until the next call on that thread. */
    const char *(*last_error)(void);
} ccl_net_v1_t;

/* ---- version 2 ------------------------------------------------------------ */

/* Most descriptors one comm returns from pollfds(). */
#define CCL_NET_MAX_POLLFDS 16

/* caps bits of a v2 plugin: promises that hold for every comm. */
/* The plugin calls callbacks->activity() whenever a request may have
 * completed or a comm failed, from whichever thread noticed it (calls made
 * inside the caller's own isend/irecv/test/progress may be skipped). ccl's
 * progress thread then sleeps until something rings, instead of waking
 * every few milliseconds to test: without this bit a plugin gets that
 * periodic look, which costs up to a few milliseconds of latency when a
 * request completes while the thread sleeps. */
#define CCL_NET_CAP_ACTIVITY 0x1
/* Duplex connections: a comm from connect() can also irecv(), and one from
 * accept() can also isend(). Each direction keeps its own order and
 * matching (the k-th isend at one end is the k-th irecv at the other), and
 * a failure of the connection fails both. ccl then makes one connection
 * per pair of ranks instead of two (the lower rank connects), so that on
 * TCP each direction's acknowledgements ride on the other's data, and it
 * closes such a comm once, with close_send. */
#define CCL_NET_CAP_DUPLEX 0x2

/* What ccl hands to a v2 plugin's init(). Stays valid until finalize. */
struct pollfd;
typedef struct {
    /* sizeof(ccl_net_callbacks_t) in the ccl that calls init: fields that
     * a later ccl appends lie beyond it. */
    uint32_t size;
    /* Writes one log line through ccl, as in v1. Never NULL. */
    ccl_net_log_fn_t log;
    /* Rings ccl's doorbell: a request may have completed or a comm failed,
     * so a sleeping progress thread looks again. Cheap when nobody sleeps
     * (an atomic add and a load), thread-safe, never blocks. Never NULL. */
    void (*activity)(void);
} ccl_net_callbacks_t;

/* The v2 struct: v1's functions (init takes the callbacks), then optional
 * capabilities; a NULL function means "not supported", with what ccl does
 * then said at each. */
typedef struct {
    /* CCL_NET_ABI_VERSION (2). */
    uint32_t version;
    const char *name;
    /* CCL_NET_CAP_* bits. */
    uint32_t caps;

    /* Called once before anything else, with ccl's callbacks. */
    ccl_result_t (*init)(const ccl_net_callbacks_t *callbacks);
    /* The rest as in ccl_net_v1_t. */
    ccl_result_t (*devices)(int *ndev);
    ccl_result_t (*get_properties)(int dev, ccl_net_props_t *props);
    ccl_result_t (*listen)(int dev, int rank, void *handle, void **listen_comm);
    ccl_result_t (*connect)(int dev, int rank, void *handle, void **send_comm);
    ccl_result_t (*accept)(void *listen_comm, void **recv_comm);
    ccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ccl_result_t (*dereg_mr)(void *comm, void *mhandle);
    ccl_result_t (*isend)(void *send_comm, const void *data, size_t size, uint32_t tag,
                          void *mhandle, void **request);
    ccl_result_t (*irecv)(void *recv_comm, int n, void **data, const size_t *sizes,
                          const uint32_t *tags, void **mhandles, void **request);
    ccl_result_t (*test)(void *request, int *done, size_t *sizes);
    ccl_result_t (*close_send)(void *send_comm);
    ccl_result_t (*close_recv)(void *recv_comm);
    ccl_result_t (*close_listen)(void *listen_comm);
    ccl_result_t (*finalize)(void);
    const char *(*last_error)(void);

    /* ---- optional capabilities (NULL: not supported) ---- */

    /* Inline progress. Some comms have nobody of their own to move their
     * data (no helper thread, no NIC engine: a TCP connection configured
     * with CCL_SOCKET_NTHREADS=0, for hosts where ranks already outnumber
     * cores); their bytes move only inside calls on them. progress() does
     * what can be done on comm now without blocking and sets *inline_io to
     * 1 for such a comm, 0 for one that progresses by itself. ccl asks each
     * comm once after it is connected; for an inline comm its progress
     * thread never sleeps on the doorbell while requests are in flight (it
     * keeps testing them, which moves the data) and, with pollfds, sleeps
     * in poll() on the comm's descriptors. NULL: every comm progresses by
     * itself. Called from the thread that owns comm. */
    ccl_result_t (*progress)(void *comm, int *inline_io);
    /* Poll descriptors. Fills at most max (<= CCL_NET_MAX_POLLFDS)
     * pollfds (fd, events) that become ready when comm can move again
     * (room to send, data to read), for an inline comm whose last calls
     * moved all they could; returns how many (0: nothing to wait for, or a
     * comm that progresses by itself). ccl sleeps in poll() on them and on
     * its doorbell, so that it wakes when the kernel has work rather than
     * spinning. NULL, or an inline comm without it: ccl's progress thread
     * does not sleep while such a comm has requests in flight (it yields
     * the CPU between tests). Called from the thread that owns comm. */
    int (*pollfds)(void *comm, struct pollfd *pfds, int max);
} ccl_net_v2_t;

#ifdef __cplusplus
}
#endif

#endif
