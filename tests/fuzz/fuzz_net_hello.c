/*
 * fuzz_net_hello.c - net_hello_parse: the first message on every accepted
 * net connection, which decides which peer the connection belongs to.
 *
 * Input: this rank and the rank count (1 byte each), the comm id this rank
 * expects (8 bytes), then the hello as received.
 */
#include "fuzz.h"

#include "transport/net_hello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int nranks = (int)(fuzz_take(&data, &size, 1) % 64) + 1;
    int self = (int)(fuzz_take(&data, &size, 1) % (uint64_t)nranks);
    uint64_t comm_id = fuzz_take(&data, &size, 8);
    net_hello_t h;
    if (net_hello_parse(data, size, comm_id, nranks, self, "fuzz", &h) == CCL_SUCCESS) {
        FUZZ_REQUIRE(size == sizeof h);
        FUZZ_REQUIRE(h.magic == NET_HELLO_MAGIC && h.comm_id == comm_id && h.nranks == nranks);
        FUZZ_REQUIRE(h.rank >= 0 && h.rank < nranks && h.rank != self);
    }
    return 0;
}
