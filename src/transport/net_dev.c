/*
 * net_dev.c - a rank's net device from the topology (see net_dev.h).
 */
#include "transport/net_dev.h"
#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int net_dev_path_has_busid(const char *pci_path, const char *busid)
{
    size_t n = busid ? strlen(busid) : 0;
    if (!pci_path || n == 0)
        return 0;
    for (const char *p = pci_path; (p = strchr(p, '/')) != NULL; p++)
        if (strncasecmp(p + 1, busid, n) == 0 && (p[1 + n] == '/' || p[1 + n] == '\0'))
            return 1;
    return 0;
}

int net_dev_choose(const topo_t *topo, const char *const *pci_paths, int ndev, int local_rank, int nlocal,
                   char *why, size_t whylen)
{
    topo_affinity_t aff = {.nic = -1};
    if (ndev <= 1) {
        snprintf(why, whylen, "the only device");
        return 0;
    }
    if (!topo || topo_rank_affinity(topo, local_rank, nlocal > 0 ? nlocal : 1, 1, &aff) != CCL_SUCCESS ||
        aff.nic < 0) {
        err_clear();
        snprintf(why, whylen, "the first of %d (no NIC in the topology)", ndev);
        return 0;
    }
    const topo_node_t *nic = &topo->nodes[aff.nic];
    /* Only RDMA NICs by topology: the addresses of a host's plain Ethernet
     * NICs may lie on networks other hosts cannot reach. */
    if (!nic->rdma) {
        snprintf(why, whylen, "the first of %d (the closest NIC, %s, has no RDMA device)", ndev, nic->name);
        return 0;
    }
    for (int d = 0; d < ndev; d++)
        if (pci_paths[d] && net_dev_path_has_busid(pci_paths[d], nic->busid)) {
            snprintf(why, whylen, "the NIC closest to local rank %d of %d: %s (%s)", local_rank, nlocal, nic->name,
                     nic->busid);
            return d;
        }
    snprintf(why, whylen, "the first of %d (the closest NIC, %s at %s, is none of them)", ndev, nic->name,
             nic->busid);
    return 0;
}

ccl_result_t net_dev_pick(const net_plugin_t *p, int local_rank, int nlocal, int *dev, char *why, size_t whylen)
{
    ccl_result_t res = CCL_SUCCESS;
    int ndev = p->ndev;
    const char **paths = NULL;
    const topo_t *topo = NULL;
    *dev = 0;
    if (ndev <= 1) {
        snprintf(why, whylen, "the only device");
        return CCL_SUCCESS;
    }
    paths = calloc((size_t)ndev, sizeof *paths);
    if (!paths)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    for (int d = 0; d < ndev; d++) {
        ccl_net_props_t props;
        CCL_TRY(net_plugin_error(p, p->net->get_properties(d, &props)));
        paths[d] = props.pci_path;
    }
    if (topo_machine(&topo) != CCL_SUCCESS) {
        err_clear();
        topo = NULL;
    }
    *dev = net_dev_choose(topo, paths, ndev, local_rank, nlocal, why, whylen);
out:
    free(paths);
    return res;
}
