/*
 * test_net_ib.c - the ib transport's choices that need no RDMA device
 * (src/transport/net_ib_dev.c, net_ib_io.c, net_ib_qp.c): CCL_IB_HCA
 * parsing and matching, RoCE GID selection from GID tables of mixed types
 * and families, queue-pair attributes for RoCE and for the native
 * InfiniBand link layer (which soft-RoCE cannot exercise), message
 * striping, and the connection info a peer sends. The data path itself
 * runs for real between soft-RoCE VMs (tests/rdma/).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "transport/net_ib.h"

#if CCL_HAVE_IBVERBS

static void test_hca_parse_and_match(void **state)
{
    (void)state;
    ib_hca_filter_t f;
    assert_int_equal(ib_hca_filter_parse("", &f), CCL_SUCCESS);
    assert_int_equal(f.n, 0);
    assert_true(ib_hca_filter_match(&f, "mlx5_0", 1));

    assert_int_equal(ib_hca_filter_parse("mlx5_0:1,mlx5_1", &f), CCL_SUCCESS);
    assert_int_equal(f.n, 2);
    assert_false(f.exclude);
    assert_false(f.exact);
    assert_string_equal(f.spec[0].name, "mlx5_0");
    assert_int_equal(f.spec[0].port, 1);
    assert_int_equal(f.spec[1].port, 0);
    assert_true(ib_hca_filter_match(&f, "mlx5_0", 1));
    assert_false(ib_hca_filter_match(&f, "mlx5_0", 2)); /* only port 1 of mlx5_0 */
    assert_true(ib_hca_filter_match(&f, "mlx5_1", 2));  /* every port of mlx5_1 */
    assert_true(ib_hca_filter_match(&f, "mlx5_10", 1)); /* prefix: mlx5_1 matches mlx5_10 */
    assert_false(ib_hca_filter_match(&f, "mlx4_0", 1));

    assert_int_equal(ib_hca_filter_parse("=mlx5_1", &f), CCL_SUCCESS);
    assert_true(f.exact);
    assert_true(ib_hca_filter_match(&f, "mlx5_1", 1));
    assert_false(ib_hca_filter_match(&f, "mlx5_10", 1));

    assert_int_equal(ib_hca_filter_parse("^mlx5_3,rxe", &f), CCL_SUCCESS);
    assert_true(f.exclude);
    assert_false(ib_hca_filter_match(&f, "mlx5_3", 1));
    assert_false(ib_hca_filter_match(&f, "rxe0", 1));
    assert_true(ib_hca_filter_match(&f, "mlx5_0", 1));

    assert_int_equal(ib_hca_filter_parse("^=mlx5_0:2", &f), CCL_SUCCESS);
    assert_true(f.exclude && f.exact);
    assert_false(ib_hca_filter_match(&f, "mlx5_0", 2));
    assert_true(ib_hca_filter_match(&f, "mlx5_0", 1));
    assert_true(ib_hca_filter_match(&f, "mlx5_01", 2));

    assert_int_equal(ib_hca_filter_parse("mlx5_0,,mlx5_1,", &f), CCL_SUCCESS); /* empty entries skipped */
    assert_int_equal(f.n, 2);

    /* Bad input: a specific error, naming the entry. */
    assert_int_equal(ib_hca_filter_parse("mlx5_0:0", &f), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(ib_hca_filter_parse("mlx5_0:x", &f), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(ib_hca_filter_parse("mlx5_0:", &f), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(ib_hca_filter_parse(":1", &f), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(ib_hca_filter_parse("^", &f), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(ib_hca_filter_parse("=", &f), CCL_ERR_INVALID_ARGUMENT);
    char many[20 * 4 + 1] = ""; /* 40 entries, more than IB_HCA_MAX_SPECS */
    for (int i = 0; i < 20; i++)
        strcat(many, "a,b,");
    assert_int_equal(ib_hca_filter_parse(many, &f), CCL_ERR_INVALID_ARGUMENT);
}

/* A GID entry from text ("::ffff:10.0.0.1", "fe80::1") and a type. */
static ib_gid_cand_t gid(const char *text, int type)
{
    ib_gid_cand_t c;
    memset(&c, 0, sizeof c);
    if (text)
        assert_int_equal(inet_pton(AF_INET6, text, c.raw), 1);
    c.type = type;
    return c;
}

static void test_gid_pick(void **state)
{
    (void)state;
    /* rxe's table: link-local v2, then IPv4-mapped v2. */
    ib_gid_cand_t rxe[] = {gid("fe80::5054:ff:fe12:3401", IB_GID_TYPE_ROCE_V2),
                           gid("::ffff:10.77.0.1", IB_GID_TYPE_ROCE_V2)};
    assert_int_equal(ib_gid_pick(rxe, 2, AF_INET), 1);
    assert_int_equal(ib_gid_pick(rxe, 2, AF_INET6), 0);

    /* A ConnectX table: v1 and v2 of each address, empty slots between. */
    ib_gid_cand_t cx[] = {gid("fe80::1", IB_GID_TYPE_ROCE_V1), gid("fe80::1", IB_GID_TYPE_ROCE_V2),
                          gid(NULL, 0), gid("::ffff:192.168.1.5", IB_GID_TYPE_ROCE_V1),
                          gid("::ffff:192.168.1.5", IB_GID_TYPE_ROCE_V2), gid("2001:db8::5", IB_GID_TYPE_ROCE_V1),
                          gid("2001:db8::5", IB_GID_TYPE_ROCE_V2)};
    assert_int_equal(ib_gid_pick(cx, 7, AF_INET), 4);  /* IPv4-mapped, v2 */
    assert_int_equal(ib_gid_pick(cx, 7, AF_INET6), 1); /* lowest v2 of the IPv6 ones */

    /* Only v1 of the family: v1 of it, rather than v2 of another family. */
    ib_gid_cand_t v1only[] = {gid("fe80::1", IB_GID_TYPE_ROCE_V2), gid("::ffff:10.0.0.2", IB_GID_TYPE_ROCE_V1)};
    assert_int_equal(ib_gid_pick(v1only, 2, AF_INET), 1);

    /* No entry of the family: the best of the rest. */
    ib_gid_cand_t v6only[] = {gid("fe80::1", IB_GID_TYPE_ROCE_V1), gid("fe80::1", IB_GID_TYPE_ROCE_V2)};
    assert_int_equal(ib_gid_pick(v6only, 2, AF_INET), 1);

    /* Nothing usable. */
    ib_gid_cand_t empty[] = {gid(NULL, 0), gid(NULL, 0)};
    assert_int_equal(ib_gid_pick(empty, 2, AF_INET), -1);
    assert_int_equal(ib_gid_pick(empty, 0, AF_INET), -1);

    assert_int_equal(ib_addr_family_parse("AF_INET"), AF_INET);
    assert_int_equal(ib_addr_family_parse("AF_INET6"), AF_INET6);
    assert_int_equal(ib_addr_family_parse("inet"), -1);
    assert_int_equal(ib_gid_type_from_sysfs("RoCE v2\n"), IB_GID_TYPE_ROCE_V2);
    assert_int_equal(ib_gid_type_from_sysfs("IB/RoCE v1\n"), IB_GID_TYPE_ROCE_V1);
    assert_int_equal(ib_gid_type_from_sysfs(""), IB_GID_TYPE_IB);
    char buf[64];
    assert_string_equal(ib_gid_str(rxe[1].raw, buf, sizeof buf), "::ffff:10.77.0.1");
}

static void test_qp_attrs(void **state)
{
    (void)state;
    ib_qp_params_t p = {.tc = 106, .sl = 3, .timeout = 14, .retry_cnt = 7};
    ib_end_t roce_a = {.link_layer = IBV_LINK_LAYER_ETHERNET, .gid_index = 3, .mtu = IBV_MTU_4096, .psn = 0x123};
    ib_end_t roce_b = {.link_layer = IBV_LINK_LAYER_ETHERNET, .gid_index = 1, .mtu = IBV_MTU_1024, .psn = 0x456};
    inet_pton(AF_INET6, "::ffff:10.0.0.2", roce_b.gid);
    struct ibv_qp_attr a;
    int mask;
    ib_qp_rtr_attr(&roce_a, &roce_b, 77, 1, &p, &a, &mask);
    assert_int_equal(a.qp_state, IBV_QPS_RTR);
    assert_int_equal(a.path_mtu, IBV_MTU_1024); /* the smaller of both ends */
    assert_int_equal(a.dest_qp_num, 77);
    assert_int_equal(a.rq_psn, 0x456);
    assert_int_equal(a.ah_attr.is_global, 1); /* RoCE: routed by GID */
    assert_memory_equal(a.ah_attr.grh.dgid.raw, roce_b.gid, 16);
    assert_int_equal(a.ah_attr.grh.sgid_index, 3); /* our GID index, not the peer's */
    assert_int_equal(a.ah_attr.grh.traffic_class, 106);
    assert_int_equal(a.ah_attr.port_num, 1);
    assert_true(mask & IBV_QP_AV);
    assert_true(mask & IBV_QP_PATH_MTU);

    ib_end_t ib_a = {.link_layer = IBV_LINK_LAYER_INFINIBAND, .lid = 5, .mtu = IBV_MTU_2048, .psn = 1};
    ib_end_t ib_b = {.link_layer = IBV_LINK_LAYER_INFINIBAND, .lid = 9, .mtu = IBV_MTU_4096, .psn = 2};
    ib_qp_rtr_attr(&ib_a, &ib_b, 12, 2, &p, &a, &mask);
    assert_int_equal(a.ah_attr.is_global, 0); /* InfiniBand: by LID */
    assert_int_equal(a.ah_attr.dlid, 9);
    assert_int_equal(a.ah_attr.sl, 3);
    assert_int_equal(a.path_mtu, IBV_MTU_2048);
    assert_int_equal(a.ah_attr.port_num, 2);

    ib_qp_rts_attr(&ib_a, &p, &a, &mask);
    assert_int_equal(a.qp_state, IBV_QPS_RTS);
    assert_int_equal(a.timeout, 14);
    assert_int_equal(a.retry_cnt, 7);
    assert_int_equal(a.sq_psn, 1);
    assert_true(mask & IBV_QP_SQ_PSN);
}

static void test_striping(void **state)
{
    (void)state;
    assert_int_equal(ib_npieces(0, 4), 1);
    assert_int_equal(ib_npieces(100, 4), 1);
    assert_int_equal(ib_npieces(2 * IB_STRIPE_MIN - 1, 4), 1);
    assert_int_equal(ib_npieces(2 * IB_STRIPE_MIN, 4), 2);
    assert_int_equal(ib_npieces(64u << 20, 4), 4);
    assert_int_equal(ib_npieces(64u << 20, 1), 1);
    /* Pieces cover the message exactly, in order, none empty. */
    static const size_t sizes[] = {2 * IB_STRIPE_MIN, 2 * IB_STRIPE_MIN + 1, 3 * IB_STRIPE_MIN + 63,
                                   (8u << 20) + 13, 64u << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int q = 1; q <= IB_MAX_QPS; q++) {
            int m = ib_npieces(sizes[s], q);
            assert_true(m >= 1 && m <= q);
            size_t next = 0;
            for (int j = 0; j < m; j++) {
                size_t off, len;
                ib_piece(sizes[s], m, j, &off, &len);
                assert_int_equal(off, next);
                assert_true(len > 0);
                next = off + len;
            }
            assert_int_equal(next, sizes[s]);
        }
}

static void test_conn_info_check(void **state)
{
    (void)state;
    ib_conn_info_t in;
    memset(&in, 0, sizeof in);
    in.magic = IB_INFO_MAGIC;
    in.version = IB_WIRE_VERSION;
    in.listen_id = 42;
    in.nqps = 2;
    in.link_layer = IBV_LINK_LAYER_ETHERNET;
    in.mtu = IBV_MTU_1024;
    strcpy(in.host, "vm1");
    strcpy(in.dev, "rxe0:1");
    assert_null(ib_conn_info_check(&in, 42));
    assert_null(ib_conn_info_check(&in, 0)); /* the connector does not know the id */
    assert_non_null(ib_conn_info_check(&in, 43));
    ib_conn_info_t bad = in;
    bad.magic ^= 1;
    assert_non_null(ib_conn_info_check(&bad, 42));
    bad = in;
    bad.version++;
    assert_non_null(ib_conn_info_check(&bad, 42));
    bad = in;
    bad.nqps = 0;
    assert_non_null(ib_conn_info_check(&bad, 42));
    bad.nqps = IB_MAX_QPS + 1;
    assert_non_null(ib_conn_info_check(&bad, 42));
    bad = in;
    bad.mtu = 9;
    assert_non_null(ib_conn_info_check(&bad, 42));
    bad = in;
    bad.link_layer = 7;
    assert_non_null(ib_conn_info_check(&bad, 42));
    bad = in;
    memset(bad.host, 'x', sizeof bad.host);
    assert_non_null(ib_conn_info_check(&bad, 42));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hca_parse_and_match),
        cmocka_unit_test(test_gid_pick),
        cmocka_unit_test(test_qp_attrs),
        cmocka_unit_test(test_striping),
        cmocka_unit_test(test_conn_info_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
#include <stdio.h>
int main(void)
{
    printf("SKIPPED: built without rdma-core's verbs headers (libibverbs-dev)\n");
    return 0;
}
#endif
