/*
 * net_plugin.h - choosing and loading the network plugin (CCL_NET_PLUGIN).
 *
 * The net transport talks to one ccl_net_v2_t (include/ccl_net.h). It is the
 * built-in TCP plugin ("socket", net_socket.c: this is the one file that
 * knows it) unless CCL_NET_PLUGIN names another: NAME loads
 * libccl-net-NAME.so through the usual library search path, a value
 * containing '/' is loaded as a path. ccl_net_plugin_v2 is looked for first,
 * then ccl_net_plugin_v1, whose functions are copied into a v2 struct with
 * no optional capability. A library that cannot be loaded, lacks both
 * symbols, declares another version or leaves a required function NULL is
 * refused with a message saying which; an explicit choice never silently
 * falls back to TCP.
 */
#ifndef CCL_TRANSPORT_NET_PLUGIN_H
#define CCL_TRANSPORT_NET_PLUGIN_H

#include "ccl_net.h"

typedef struct {
    const ccl_net_v2_t *net; /* the functions (&v1_as_v2 for a v1 plugin) */
    const ccl_net_v1_t *v1;  /* a v1 plugin's own struct, else NULL */
    ccl_net_v2_t v1_as_v2;   /* its functions, no capabilities */
    void *dl;                /* dlopen handle, NULL for the built-in */
    char name[256];          /* what was asked for ("socket", "example", a path) */
    int ndev;                /* devices() after init */
} net_plugin_t;

/* Loads and initialises a plugin. name NULL means CCL_NET_PLUGIN; "socket"
 * and "ib" are the built-in ones; "" picks a built-in one by CCL_NET (ib
 * where it finds an active port, else socket). Each open is matched by one
 * net_plugin_close. */
ccl_result_t net_plugin_open(const char *name, net_plugin_t **out);
/* Calls finalize and unloads. The caller has closed every comm. */
void net_plugin_close(net_plugin_t *plugin);

/* The process-wide plugin chosen by CCL_NET_PLUGIN, opened on the first get
 * and closed when the last reference is put (comms share it). */
ccl_result_t net_plugin_get(net_plugin_t **out);
void net_plugin_put(net_plugin_t *plugin);

/* Call after a function of plugin->net returned code: makes the plugin's
 * last_error() this thread's ccl error message (prefixed with the plugin's
 * name) so ccl_get_last_error shows it. The built-in plugin sets ccl's
 * message itself. Returns code. */
ccl_result_t net_plugin_error(const net_plugin_t *plugin, ccl_result_t code);
/* CCL_FAULT corrupt_wire: the built-in socket plugin's next message piece
 * goes out with a byte changed after its checksum. Returns 0 (nothing
 * done) for any other plugin: a fault cannot reach past the ABI. */
int net_plugin_fault_corrupt(const net_plugin_t *plugin);

#endif
