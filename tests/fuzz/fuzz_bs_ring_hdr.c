/*
 * fuzz_bs_ring_hdr.c - bs_ring_hdr_parse: the header that opens each
 * bootstrap allgather on the ring, from the previous rank.
 *
 * Input: the allgather number and block size this rank expects (4 + 8
 * bytes), then the header as received.
 */
#include "fuzz.h"

#include "bootstrap/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t seq = (uint32_t)fuzz_take(&data, &size, 4);
    uint64_t block = fuzz_take(&data, &size, 8);
    bs_ring_hdr_t h;
    if (bs_ring_hdr_parse(data, size, seq, block, "fuzz", &h) == CCL_SUCCESS) {
        FUZZ_REQUIRE(size == sizeof h);
        FUZZ_REQUIRE(h.magic == BS_RING_MAGIC && h.seq == seq && h.size == block);
    }
    return 0;
}
