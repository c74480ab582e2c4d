/*
 * A NIC's speed where the system reports none (an offline hwloc XML, a
 * container whose sysfs gives no speed): estimated from what the topology
 * carries, the PCI vendor and device ids of well-known NIC families and the
 * PCIe link's bandwidth. Pure: the caller hands it the ids and the link.
 * An estimate is never taken for a measured speed; it is named as one.
 */
#include "topo/probe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    unsigned vendor, device;
    const char *family;
    int mbps; /* the family's fastest port */
} dd_topo_nic_family_t;

/* The families the default order meets most; a device missing here falls
 * back on its PCIe link. */
static const dd_topo_nic_family_t dd_topo_nic_families[] = {
    {0x15b3, 0x1003, "ConnectX-3", 40000},
    {0x15b3, 0x1007, "ConnectX-3 Pro", 40000},
    {0x15b3, 0x1013, "ConnectX-4", 100000},
    {0x15b3, 0x1015, "ConnectX-4 Lx", 50000},
    {0x15b3, 0x1017, "ConnectX-5", 100000},
    {0x15b3, 0x1019, "ConnectX-5 Ex", 100000},
    {0x15b3, 0x101b, "ConnectX-6", 200000},
    {0x15b3, 0x101d, "ConnectX-6 Dx", 100000},
    {0x15b3, 0x101f, "ConnectX-6 Lx", 25000},
    {0x15b3, 0x1021, "ConnectX-7", 400000},
    {0x15b3, 0xa2d6, "BlueField-2", 100000},
    {0x8086, 0x1591, "E810-C", 100000},
    {0x8086, 0x1592, "E810-C", 100000},
    {0x8086, 0x1593, "E810-C", 25000},
    {0x8086, 0x159b, "E810-XXV", 25000},
    {0x8086, 0x1572, "X710", 10000},
    {0x8086, 0x15ff, "X710", 10000},
    {0x8086, 0x1583, "XL710", 40000},
    {0x8086, 0x1584, "XL710", 40000},
    {0x8086, 0x158b, "XXV710", 25000},
    {0x8086, 0x10fb, "82599", 10000},
    {0x8086, 0x1528, "X540", 10000},
    {0x8086, 0x1563, "X550", 10000},
    {0x8086, 0x1521, "I350", 1000},
    {0x8086, 0x1533, "I210", 1000},
    {0x8086, 0x1536, "I210", 1000},
    {0x8086, 0x1537, "I210", 1000},
    {0x8086, 0x1538, "I210", 1000},
    {0x8086, 0x157b, "I210", 1000},
    {0x8086, 0x157c, "I210", 1000},
    {0x8086, 0x15f3, "I225", 2500},
    {0x14e4, 0x1657, "BCM5719", 1000},
    {0x14e4, 0x165f, "BCM5720", 1000},
    {0x14e4, 0x16d6, "BCM57412", 10000},
    {0x14e4, 0x16d7, "BCM57414", 25000},
    {0x14e4, 0x16d8, "BCM57416", 10000},
    {0x14e4, 0x1750, "BCM57508", 200000},
    {0x14e4, 0x1751, "BCM57504", 100000},
};

/* "PCIe x16 Gen3" for a link of gbytes_s GB/s (hwloc's linkspeed: lanes
 * times the lane's rate after encoding); 0 when no width and generation
 * give it. The rate alone is ambiguous (x16 Gen3 carries what x8 Gen4
 * does): the widths NICs use come first (x2 and x32 last), the wider
 * first, then the older generation. */
static int dd_topo_pcie_text(double gbytes_s, char *buf, size_t size)
{
    static const double lane[] = {0.25,
                                  0.5,
                                  8.0 * 128 / 130 / 8,
                                  16.0 * 128 / 130 / 8,
                                  32.0 * 128 / 130 / 8,
                                  64.0 * 242 / 256 / 8};
    static const int widths[] = {16, 8, 4, 1, 2, 32};

    for (size_t w = 0; w < sizeof(widths) / sizeof(*widths); w++) {
        for (int gen = 0; gen < (int)(sizeof(lane) / sizeof(*lane)); gen++) {
            if (fabs(gbytes_s - widths[w] * lane[gen]) <= 0.01 * gbytes_s) {
                snprintf(buf, size, "PCIe x%d Gen%d", widths[w], gen + 1);
                return 1;
            }
        }
    }
    return 0;
}

/* The fastest common Ethernet rate a link of mbps carries. */
static int dd_topo_rate_below(double mbps)
{
    static const int rates[] = {800000, 400000, 200000, 100000, 50000,
                                40000,  25000,  10000,  5000,   2500};

    for (size_t i = 0; i < sizeof(rates) / sizeof(*rates); i++) {
        if (mbps >= rates[i]) {
            return rates[i];
        }
    }
    return 1000;
}

void dd_topo_nic_estimate(dd_topo_nic_t *nic, unsigned vendor, unsigned device,
                          float link_gbytes_s)
{
    const dd_topo_nic_family_t *family = NULL;
    char link[32] = "";
    int mbps = 0;

    if (nic->speed_known || nic->kind == DD_TOPO_KIND_WIFI ||
        nic->kind == DD_TOPO_KIND_VIRTUAL ||
        nic->kind == DD_TOPO_KIND_LOOPBACK) {
        return; /* measured, or a link the PCIe bus says nothing of */
    }
    for (size_t i = 0;
         i < sizeof(dd_topo_nic_families) / sizeof(*dd_topo_nic_families);
         i++) {
        if (dd_topo_nic_families[i].vendor == vendor &&
            dd_topo_nic_families[i].device == device) {
            family = &dd_topo_nic_families[i];
        }
    }
    int has_link = link_gbytes_s > 0 &&
                   dd_topo_pcie_text(link_gbytes_s, link, sizeof(link));
    /* A port cannot outrun its PCIe link. */
    int link_mbps = has_link ? dd_topo_rate_below(link_gbytes_s * 8e3) : 0;
    if (family != NULL) {
        mbps = has_link && link_mbps < family->mbps ? link_mbps : family->mbps;
        snprintf(nic->speed_source, sizeof(nic->speed_source),
                 "%s (%04x:%04x)%s%s", family->family, vendor, device,
                 has_link ? " on " : "", link);
    } else if (has_link) {
        mbps = link_mbps;
        snprintf(nic->speed_source, sizeof(nic->speed_source), "%s", link);
    } else {
        return;
    }
    nic->speed_mbps = mbps;
}
