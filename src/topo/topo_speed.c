/*
 * topo_speed.c - how fast a NIC is, from what the machine or its name says
 * (see topo.h): sysfs on a live machine (/sys/class/net/<if>/speed in
 * Mbit/s, /sys/class/infiniband/<dev>/ports/<n>/rate), and, for exports of
 * other machines, the PCI device name ("Gigabit", "40GbE", "ConnectX-4").
 * The sysfs root is a parameter so tests can point it at a fake tree.
 */
#include "topo/topo.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int topo_read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

double topo_sysfs_net_gbps(const char *sysroot, const char *ifname)
{
    char path[512], line[64];
    snprintf(path, sizeof path, "%s/class/net/%s/speed", sysroot, ifname);
    /* Reading speed fails (EINVAL) on links that are down or virtual. */
    if (topo_read_line(path, line, sizeof line) != 0)
        return 0;
    long mbps = strtol(line, NULL, 10);
    return mbps > 0 ? mbps / 1000.0 : 0;
}

double topo_sysfs_ib_gbps(const char *sysroot, const char *ibdev, char *link_layer, size_t len)
{
    char path[512], line[128];
    double best = 0;
    snprintf(path, sizeof path, "%s/class/infiniband/%s/ports", sysroot, ibdev);
    DIR *dir = opendir(path);
    if (!dir)
        return 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/class/infiniband/%s/ports/%s/rate", sysroot, ibdev, e->d_name);
        if (topo_read_line(path, line, sizeof line) != 0)
            continue;
        double gbps = strtod(line, NULL); /* "100 Gb/sec (4X EDR)" */
        if (gbps <= best)
            continue;
        best = gbps;
        snprintf(path, sizeof path, "%s/class/infiniband/%s/ports/%s/link_layer", sysroot, ibdev, e->d_name);
        if (link_layer && len && topo_read_line(path, link_layer, len) != 0)
            link_layer[0] = '\0';
    }
    closedir(dir);
    return best;
}

/* The Ethernet speed written just before position at in s ("10" in
 * "10-Gigabit", "40" in "40GbE"), skipping one space or dash; 0 if none.
 * Only a standard speed standing as its own word counts: "82576 Gigabit"
 * and "BCM5709 Gigabit" name a chip, not a speed. */
static double topo_speed_before(const char *s, const char *at)
{
    static const double standard[] = {1, 2.5, 5, 10, 25, 40, 50, 100, 200, 400, 800};
    const char *p = at;
    if (p > s && (p[-1] == ' ' || p[-1] == '-'))
        p--;
    const char *end = p;
    while (p > s && (isdigit((unsigned char)p[-1]) || p[-1] == '.'))
        p--;
    if (p == end || (p > s && isalnum((unsigned char)p[-1])))
        return 0;
    double v = strtod(p, NULL);
    for (size_t i = 0; i < sizeof standard / sizeof standard[0]; i++)
        if (v == standard[i])
            return v;
    return 0;
}

double topo_name_gbps(const char *name)
{
    if (!name)
        return 0;
    /* Mellanox/NVIDIA ConnectX generations at their fastest port speed. */
    static const struct {
        const char *tag;
        double gbps;
    } cx[] = {
        {"ConnectX-3", 56}, {"ConnectX-4 Lx", 50}, {"ConnectX-4", 100}, {"ConnectX-5", 100},
        {"ConnectX-6 Lx", 50}, {"ConnectX-6", 200}, {"ConnectX-7", 400}, {"ConnectX-8", 800},
    };
    for (size_t i = 0; i < sizeof cx / sizeof cx[0]; i++)
        if (strstr(name, cx[i].tag))
            return cx[i].gbps;
    const char *p;
    if ((p = strstr(name, "GbE")) != NULL) {
        double n = topo_speed_before(name, p);
        if (n > 0)
            return n;
    }
    if ((p = strstr(name, "Gigabit")) != NULL) {
        double n = topo_speed_before(name, p);
        return n > 0 ? n : 1;
    }
    return 0;
}
