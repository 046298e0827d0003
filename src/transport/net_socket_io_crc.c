/*
 * net_socket_io_crc.c - the checksums of the TCP plugin's messages
 * (net_socket_io.h, "Checksums"): each piece's seed, the sender's
 * checksum taken ahead of what goes out, and CCL_FAULT corrupt_wire's
 * changed byte.
 */
#include "transport/net_socket_io_crc.h"
#include "base/crc32c.h"
#include "base/log.h"

/* What a piece's checksum starts from: the message's header and the
 * piece's place, so that a stripe of another message, or in another
 * place, fails the check like changed bytes do. */
static uint32_t net_io_seed(const net_sock_req_t *r, int piece)
{
    struct {
        net_sock_msg_hdr_t hdr;
        uint32_t piece, reserved;
    } seed = {{NET_SOCK_MSG_MAGIC, r->tag, r->seq, r->size}, (uint32_t)piece, 0};
    return crc32c_update(CRC32C_INIT, &seed, sizeof seed);
}

void net_io_piece_begin(net_sock_comm_t *c, net_sock_t *s)
{
    s->trail_left = c->checksum ? sizeof s->trail : 0;
    s->flip_left = 0;
    if (!c->checksum)
        return;
    s->crc = net_io_seed(s->req, s->piece);
    s->crc_at = s->ptr;
}

void net_io_piece_flip(net_sock_comm_t *c, net_sock_t *s)
{
    if (c->checksum) {
        s->crc = crc32c_update(s->crc, s->ptr, s->left);
        s->crc_at = s->ptr + s->left;
    }
    s->flip = (unsigned char)(s->ptr[0] ^ 0x10);
    s->flip_left = 1;
    s->ptr++;
    s->left--;
    LOG_WARN(SUB_ALL, "CCL_FAULT: corrupt_wire: message %llu to %s goes out with byte 0 of stripe %d changed",
             (unsigned long long)s->req->seq, c->peer, s->piece);
}

void net_io_crc_ahead(net_sock_t *s)
{
    size_t ahead = (size_t)(s->crc_at - s->ptr), rest = s->left - ahead;
    if (rest && ahead < NET_IO_CRC_AHEAD / 2) {
        size_t n = rest < NET_IO_CRC_AHEAD ? rest : NET_IO_CRC_AHEAD;
        s->crc = crc32c_update(s->crc, s->crc_at, n);
        s->crc_at += n;
        rest -= n;
    }
    if (!rest)
        s->trail = s->crc;
}

