/*
 * fuzz_net_sock_msg.c - net_sock_msg_hdr_parse: the header that heads each
 * message on a socket plugin connection and tells the receiver how many
 * bytes to write into the posted buffer.
 *
 * Input: the message number, posted capacity and tag this side expects
 * (8 + 8 + 4 bytes), then the header as received.
 */
#include "fuzz.h"

#include "transport/net_socket_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seq = fuzz_take(&data, &size, 8);
    size_t cap = (size_t)fuzz_take(&data, &size, 8);
    uint32_t tag = (uint32_t)fuzz_take(&data, &size, 4);
    net_sock_msg_hdr_t h;
    char why[400];
    why[0] = '\0';
    if (net_sock_msg_hdr_parse(data, size, seq, cap, tag, "fuzz peer", &h, why, sizeof why) != 0) {
        FUZZ_REQUIRE(strstr(why, "fuzz peer") != NULL);
        return 0;
    }
    FUZZ_REQUIRE(size == sizeof h);
    FUZZ_REQUIRE(h.magic == NET_SOCK_MSG_MAGIC && h.seq == seq && h.tag == tag);
    /* The one that matters: never more bytes than the receive holds. */
    FUZZ_REQUIRE(h.size <= cap);
    return 0;
}
