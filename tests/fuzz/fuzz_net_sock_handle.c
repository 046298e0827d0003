/*
 * fuzz_net_sock_handle.c - net_sock_handle_parse: the socket plugin's
 * listen handle as another rank sends it through the bootstrap, before
 * connect() uses the address in it.
 */
#include "fuzz.h"

#include "transport/net_socket.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    net_sock_handle_t h;
    if (net_sock_handle_parse(data, size, &h) != CCL_SUCCESS)
        return 0;
    FUZZ_REQUIRE(size >= sizeof h);
    FUZZ_REQUIRE(h.magic == NET_SOCK_HANDLE_MAGIC && h.version == NET_SOCK_WIRE_VERSION);
    FUZZ_REQUIRE(sock_addr_valid(&h.addr));
    /* connect() keeps its own state there: a peer's must be empty. */
    FUZZ_REQUIRE(h.stage == 0 && h.pending == NULL);
    return 0;
}
