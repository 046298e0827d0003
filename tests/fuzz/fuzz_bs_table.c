/*
 * fuzz_bs_table.c - bs_table_hdr_parse and bs_table_parse: the root's
 * reply to a rank, a header and then one bs_peer_t per rank, which the
 * rank uses to connect to its ring neighbours.
 *
 * Input: the rank count this rank expects (1 byte, 1..16), the header,
 * then the table.
 */
#include "fuzz.h"

#include "bootstrap/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int nranks = (int)(fuzz_take(&data, &size, 1) % 16) + 1;
    bs_table_hdr_t hdr;
    size_t hlen = size < sizeof hdr ? size : sizeof hdr;
    if (bs_table_hdr_parse(data, hlen, nranks, "fuzz", &hdr) == CCL_SUCCESS) {
        FUZZ_REQUIRE(hdr.magic == BS_MAGIC && hdr.nranks == nranks);
    }
    data += hlen;
    size -= hlen;
    bs_peer_t peers[16];
    /* Both the rank count it expects and the one the bytes would hold. */
    int counts[2] = {nranks, (int)(size / sizeof(bs_peer_t))};
    for (int k = 0; k < 2; k++) {
        int n = counts[k];
        if (n < 1 || n > 16)
            continue;
        if (bs_table_parse(data, size, n, "fuzz", peers) != CCL_SUCCESS)
            continue;
        FUZZ_REQUIRE(size == (size_t)n * sizeof(bs_peer_t));
        for (int r = 0; r < n; r++) {
            FUZZ_REQUIRE(peers[r].rank == r);
            FUZZ_REQUIRE(sock_addr_valid(&peers[r].addr));
            FUZZ_REQUIRE(strlen(peers[r].hostname) < sizeof peers[r].hostname);
        }
    }
    return 0;
}
