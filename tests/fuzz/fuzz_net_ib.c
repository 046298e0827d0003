/*
 * fuzz_net_ib.c - what the ib transport reads from outside: the connection
 * info a peer sends over the side channel (ib_conn_info_check), and
 * CCL_IB_HCA (ib_hca_filter_parse and matching).
 *
 * Input: one byte choosing the parser, then its input: the info as
 * received (the listener's id is its first 8 bytes' echo when the byte is
 * odd), or the text of CCL_IB_HCA followed by a device name to match.
 */
#include "fuzz.h"

#include "transport/net_ib.h"

#include <string.h>

#if CCL_HAVE_IBVERBS
static void fuzz_info(const uint8_t *data, size_t size, int known_id)
{
    ib_conn_info_t in;
    if (size != sizeof in)
        return; /* the handshake reads exactly this many bytes */
    memcpy(&in, data, sizeof in);
    if (ib_conn_info_check(&in, known_id ? in.listen_id : 0) == NULL) {
        FUZZ_REQUIRE(in.nqps >= 1 && in.nqps <= IB_MAX_QPS);
        FUZZ_REQUIRE(memchr(in.host, '\0', sizeof in.host) && memchr(in.dev, '\0', sizeof in.dev));
    }
}
#endif

static void fuzz_hca(const uint8_t *data, size_t size)
{
    char text[256], dev[64];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    snprintf(dev, sizeof dev, "mlx5_%zu", size % 5);
    ib_hca_filter_t f;
    if (ib_hca_filter_parse(text, &f) == CCL_SUCCESS) {
        FUZZ_REQUIRE(f.n >= 0 && f.n <= IB_HCA_MAX_SPECS);
        for (int i = 0; i < f.n; i++)
            FUZZ_REQUIRE(f.spec[i].name[0] && f.spec[i].port >= 0 && f.spec[i].port <= 255);
        (void)ib_hca_filter_match(&f, dev, (int)(size % 3));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int which = (int)fuzz_take(&data, &size, 1);
    if (which & 2)
        fuzz_hca(data, size);
#if CCL_HAVE_IBVERBS
    else
        fuzz_info(data, size, which & 1);
#endif
    return 0;
}
