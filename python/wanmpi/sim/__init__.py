"""`wanmpi sim`: a topology simulated with SimGrid SMPI instead of emulated
(docs/scale.md, issue 20).

  platform.py  the topology as a SimGrid platform: overrides (nodes per
               cluster, NIC rate, WAN rate and delay), the platform XML, the
               hostfile and the ranks' clusters
  run.py       libwanmpi built with smpicc (`make smpi`), collbench (or the FT
               and IS kernels of bench/patterns.c) run by smpirun on the
               platform, the result in `wanmpi bench`'s format

The topology is read by wanmpi.topo like everywhere else, so a bad value
gives the testbed's own message.
"""
