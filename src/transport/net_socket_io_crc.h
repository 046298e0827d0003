/*
 * net_socket_io_crc.h - checksums of the TCP plugin's data path
 * (net_socket_io.h, "Checksums"), for net_socket_io.c.
 */
#ifndef CCL_TRANSPORT_NET_SOCKET_IO_CRC_H
#define CCL_TRANSPORT_NET_SOCKET_IO_CRC_H

#include "transport/net_socket_io_types.h"

/* A piece's checksum state, once its size and place are known (s->req,
 * s->piece, s->ptr, s->left). */
void net_io_piece_begin(net_sock_comm_t *c, net_sock_t *s);
/* Sender, CCL_FAULT corrupt_wire: the piece (with data) goes out with its
 * first byte changed, after its checksum was taken. */
void net_io_piece_flip(net_sock_comm_t *c, net_sock_t *s);
/* Sender: the checksum reaches at most NET_IO_CRC_AHEAD past what went
 * out; once it covers the whole piece the trailer holds it. */
void net_io_crc_ahead(net_sock_t *s);

#endif
