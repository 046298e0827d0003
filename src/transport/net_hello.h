/*
 * net_hello.h - the first message on every net connection, connector to
 * acceptor: accepted connections do not say who calls, this does.
 *
 * A wire format of its own, below the rest of the net transport, because
 * three sides need it and none of them should pull in the others: each
 * connection's state keeps the hello it sends or receives (net_state.h),
 * the setup sends and checks them (net_setup.c), and the wire tests and a
 * fuzz target forge them. Byte order is the host's: both ends run the same
 * build of ccl, as with the bootstrap.
 */
#ifndef CCL_TRANSPORT_NET_HELLO_H
#define CCL_TRANSPORT_NET_HELLO_H

#include "ccl.h"

#include <stddef.h>
#include <stdint.h>

#define NET_HELLO_MAGIC 0x6f6c6c65686c6363ull /* "cclhello" */
/* The plugin tag hellos travel with (a slot's tag is its number). */
#define NET_HELLO_TAG 0xffffffffu

typedef struct {
    uint64_t magic;
    uint64_t comm_id;  /* a hash of the bootstrap's secret: refuses strays from other comms */
    int32_t rank;
    int32_t nranks;
} net_hello_t;

/* Validates a hello of len bytes (what the plugin reported) for this comm:
 * its comm id, nranks, and a rank in range other than `self`. On failure
 * CCL_ERR_REMOTE, with a message that starts with `from`. */
ccl_result_t net_hello_parse(const void *buf, size_t len, uint64_t comm_id, int nranks, int self, const char *from,
                             net_hello_t *out);

#endif
