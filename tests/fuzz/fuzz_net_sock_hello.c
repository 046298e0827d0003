/*
 * fuzz_net_sock_hello.c - net_sock_hello_parse: the first bytes on each TCP
 * socket accepted by the socket plugin's listener, from anyone who can
 * reach the port.
 *
 * Input: the listener's id (8 bytes), then the hello as received.
 */
#include "fuzz.h"

#include "transport/net_socket.h"
#include "transport/net_socket_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t listen_id = fuzz_take(&data, &size, 8);
    net_sock_hello_t m;
    const char *why = net_sock_hello_parse(data, size, listen_id, &m);
    if (why) {
        FUZZ_REQUIRE(why[0] != '\0');
        return 0;
    }
    FUZZ_REQUIRE(size == sizeof m);
    FUZZ_REQUIRE(m.magic == NET_SOCK_HELLO_MAGIC && m.version == NET_SOCK_WIRE_VERSION);
    FUZZ_REQUIRE(m.listen_id == listen_id && m.conn_id != 0);
    FUZZ_REQUIRE(m.nsocks >= 2 && m.nsocks <= NET_SOCK_MAX_SOCKS && m.index < m.nsocks);
    FUZZ_REQUIRE(m.rank >= -1);
    return 0;
}
