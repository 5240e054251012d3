#!/usr/bin/env python3
"""2 clusters of N hosts: each host a 100 Mbit/s NIC to its cluster's switch/router;
routers joined by a 200 Mbit/s WAN link of 10 ms. Writes platform XML and a hostfile."""
import sys
n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
nic = sys.argv[2] if len(sys.argv) > 2 else "100Mbps"
wan = sys.argv[3] if len(sys.argv) > 3 else "200Mbps"
lat = sys.argv[4] if len(sys.argv) > 4 else "10ms"
out = sys.argv[5] if len(sys.argv) > 5 else f"platform-2x{n}.xml"
L = ['<?xml version="1.0"?>', '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
     '<platform version="4.1">', '<zone id="world" routing="Full">']
for c in "ab":
    # star cluster: every host has a private link (its NIC; SPLITDUPLEX: each
    # direction has the full rate), the backbone is the switch (never the
    # bottleneck), the router the cluster's gateway to the WAN
    L.append(f'  <cluster id="{c}" prefix="{c}-" suffix="" radical="0-{n-1}" speed="1Gf" '
             f'bw="{nic}" lat="50us" sharing_policy="SPLITDUPLEX" bb_bw="100Gbps" bb_lat="0us" '
             f'router_id="{c}-router"/>')
L.append(f'  <link id="wan" bandwidth="{wan}" latency="{lat}" sharing_policy="SPLITDUPLEX"/>')
L.append('  <zoneRoute src="a" dst="b" gw_src="a-router" gw_dst="b-router" symmetrical="NO">'
         '<link_ctn id="wan" direction="UP"/></zoneRoute>')
L.append('  <zoneRoute src="b" dst="a" gw_src="b-router" gw_dst="a-router" symmetrical="NO">'
         '<link_ctn id="wan" direction="DOWN"/></zoneRoute>')
L += ['</zone>', '</platform>']
open(out, "w").write("\n".join(L) + "\n")
with open(f"hostfile-2x{n}", "w") as f:
    for c in "ab":
        for i in range(n):
            f.write(f"{c}-{i}\n")
print(out)
