"""The topology file: clusters, WAN links and testbed settings, as pure data.

`load(path)` reads a TOML file, checks every key and value, and returns a
`Topology`; any problem raises `TopologyError("FILE: KEY: PROBLEM")`. Nothing
here touches the system: the testbed (wanmpi.testbed) builds a `Topology`,
a job (wanmpi.job) runs on one.

  model.py   the data: Topology, Cluster, Node, Relay, WanLink and the settings
  reader.py  the file: load, loads and every check of its keys and values
This package hands on their public names, so `topo.load` and `topo.Topology`
are all a caller needs.
"""
from .model import (ALLTOALLS, COLLECTIVES, NETNS_PREFIX, RELAY_INSIDE_PORT, RELAY_METRICS_PORT, RELAY_OUTSIDE_PORT,
                    UDP_IP_HEADERS, Cluster, Collectives, Node, Pacing, Relay, RelaySettings, Topology, TopologyError, WanLink)
from .reader import CLUSTER_DEFAULTS, WAN_DEFAULTS, load, loads

__all__ = ["ALLTOALLS", "CLUSTER_DEFAULTS", "COLLECTIVES", "NETNS_PREFIX", "RELAY_INSIDE_PORT", "RELAY_METRICS_PORT",
           "RELAY_OUTSIDE_PORT", "UDP_IP_HEADERS", "WAN_DEFAULTS", "Cluster", "Collectives", "Node", "Pacing", "Relay", "RelaySettings", "Topology",
           "TopologyError", "WanLink", "load", "loads"]
