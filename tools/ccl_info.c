/*
 * ccl_info.c - ccl-info: prints the topology ccl sees, without running a
 * job: sockets, NUMA nodes, cores, the PCI tree with GPUs and NICs (bus
 * ids, link rates, NIC speeds and where they came from), and the best-path
 * matrices GPU<->GPU and GPU/NUMA->NIC. It reads this machine, or the hwloc
 * XML export named by --topo or CCL_TOPO_FILE, and honours
 * CCL_TOPO_DUMP_FILE like the library does.
 *
 * It links libccl.a and uses the library's internal topology API
 * (src/topo/topo.h), so what it prints is what the library works from.
 */
#include "core/err.h"
#include "core/param.h"
#include "topo/topo.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "USAGE: %s [--topo FILE] [--ranks N]\n"
            "Prints the topology ccl finds on this machine.\n"
            "  --topo FILE   an hwloc XML export to read instead (as CCL_TOPO_FILE=FILE does)\n"
            "  --ranks N     also show the GPU, NUMA node, NIC and CPUs each of N local ranks\n"
            "                would use (GPUs when present, else NUMA nodes in blocks)\n"
            "  -h, --help    this text\n"
            "Environment: CCL_TOPO_FILE, CCL_TOPO_DUMP_FILE (write what was found: hwloc XML,\n"
            "or this text when the name ends in .txt), CCL_DEBUG=INFO.\n",
            prog);
}

static const char *name_of(const topo_t *t, int idx)
{
    return idx >= 0 ? t->nodes[idx].name : "-";
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"topo", required_argument, 0, 't'}, {"ranks", required_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},       {0, 0, 0, 0},
    };
    const char *file = NULL;
    int ranks = 0, c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': file = optarg; break;
        case 'r':
            ranks = atoi(optarg);
            if (ranks < 1) {
                fprintf(stderr, "%s: --ranks needs a positive number\n", argv[0]);
                return 2;
            }
            break;
        case 'h': usage(stdout, argv[0]); return 0;
        default: usage(stderr, argv[0]); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr, argv[0]);
        return 2;
    }

    topo_t *t = NULL;
    ccl_result_t res;
    if (file) {
        res = topo_load(file, &t);
        const char *dump = param_str(PARAM_TOPO_DUMP_FILE);
        if (res == CCL_SUCCESS && dump[0])
            res = topo_dump(t, dump);
    } else {
        res = topo_discover(&t);
    }
    if (res != CCL_SUCCESS) {
        fprintf(stderr, "ccl-info: %s: %s\n", ccl_get_error_string(res), err_message());
        topo_free(t);
        return 1;
    }
    topo_print(t, stdout);
    if (ranks > 0) {
        printf("\nlocal rank affinity (%d ranks)\n%-6s %-8s %-8s %-10s %s\n", ranks, "rank", "gpu", "numa", "nic",
               "cpus");
        for (int r = 0; r < ranks && res == CCL_SUCCESS; r++) {
            topo_affinity_t a;
            res = topo_rank_affinity(t, r, ranks, 1, &a);
            if (res == CCL_SUCCESS)
                printf("%-6d %-8s %-8s %-10s %s\n", r, name_of(t, a.gpu), name_of(t, a.numa), name_of(t, a.nic),
                       a.cpus[0] ? a.cpus : "-");
        }
        if (res != CCL_SUCCESS)
            fprintf(stderr, "ccl-info: %s: %s\n", ccl_get_error_string(res), err_message());
    }
    topo_free(t);
    return res == CCL_SUCCESS ? 0 : 1;
}
