/*
 * fuzz_unique_id.c - bs_id_parse: the 128-byte unique id a user hands to
 * ccl_comm_init_rank (through MPI, a file, a launcher), and
 * sock_addr_split: the host:port syntax of CCL_COMM_ID.
 */
#include "fuzz.h"

#include "bootstrap/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bs_id_t id;
    if (bs_id_parse(data, size, &id) == CCL_SUCCESS) {
        FUZZ_REQUIRE(size >= sizeof id);
        FUZZ_REQUIRE(id.magic == BS_MAGIC && id.version == BS_VERSION);
        FUZZ_REQUIRE(sock_addr_valid(&id.root));
        FUZZ_REQUIRE(id.root_in_rank0 <= 1);
        char abuf[80];
        FUZZ_REQUIRE(strlen(sock_addr_str(&id.root, abuf, sizeof abuf)) < sizeof abuf);
    }
    /* The same bytes as CCL_COMM_ID text (no name resolution here). */
    char text[300], host[64];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    int port = 0;
    if (sock_addr_split(text, host, sizeof host, &port) == CCL_SUCCESS) {
        FUZZ_REQUIRE(port >= 1 && port <= 65535);
        FUZZ_REQUIRE(strlen(host) < sizeof host);
        FUZZ_REQUIRE(strstr(text, host) != NULL);
    }
    return 0;
}
