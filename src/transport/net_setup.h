/*
 * net_setup.h - making the net transport's connections: net_create's part
 * before the proxy starts (net_setup.c). Internal to the net transport,
 * like the state it fills (net_state.h); a header of its own so that the
 * proxy and the setup stay two modules, each with one header.
 */
#ifndef CCL_TRANSPORT_NET_SETUP_H
#define CCL_TRANSPORT_NET_SETUP_H

#include "bootstrap/bootstrap.h"
#include "transport/net_state.h"

/* Connects to every remote peer (net->conns) through the listen comm and
 * the peers' handles (CCL_NET_HANDLE_MAXSIZE bytes per rank), accepts
 * theirs and matches them by their hellos, before the bootstrap's
 * deadline. */
ccl_result_t net_setup_conns(net_t *net, bs_t *bs, void *listen_comm, char *handles);

#endif
