/*
 * net_dev.h - which device of the net plugin a rank uses.
 *
 * Where a node has several NICs (ports), each rank should use the one the
 * topology puts closest to it (its GPU's, or its NUMA node's), and ranks
 * that share a GPU or NUMA node should spread over the NICs equally close
 * to it (rails): topo_rank_affinity decides, and the plugin device whose
 * PCI path holds that NIC's bus id is the one. Only RDMA NICs are chosen
 * this way (a host's plain Ethernet NICs may sit on networks other hosts
 * do not reach); otherwise, and without a topology or a match, device 0.
 */
#ifndef CCL_TRANSPORT_NET_DEV_H
#define CCL_TRANSPORT_NET_DEV_H

#include "ccl.h"
#include "topo/topo.h"
#include "transport/net_plugin.h"

#include <stddef.h>

/* Whether a sysfs PCI path ("/sys/devices/pci0000:00/0000:00:02.0/
 * 0000:03:00.0[/virtio0]") names the PCI function busid ("0000:03:00.0"),
 * case-insensitively, as one of its components. */
int net_dev_path_has_busid(const char *pci_path, const char *busid);

/* The device for local rank local_rank of nlocal among ndev devices with
 * these PCI paths (NULL entries: unknown), from topo (NULL: none); why
 * says how it was chosen. */
int net_dev_choose(const topo_t *topo, const char *const *pci_paths, int ndev, int local_rank, int nlocal,
                   char *why, size_t whylen);

/* The same for the plugin's devices and this machine's topology (read
 * only when there is more than one device). */
ccl_result_t net_dev_pick(const net_plugin_t *p, int local_rank, int nlocal, int *dev, char *why, size_t whylen);

#endif
