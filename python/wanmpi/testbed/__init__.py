"""The emulated testbed: a topology's clusters built out of network namespaces
on this machine, their WAN links served by the wanem emulator, and the probes
that measure them from inside.

  net.py       builds, checks and removes the testbed (Net, State, clean)
  emulator.py  wanem as the testbed runs it: config, process, control socket
  ssh.py       an sshd in every node (testbed up --ssh), for real-host mode
  real_sites.py  the testbed that is up, written as a topology of real hosts
  vpn.py       a WireGuard tunnel between two clusters' routers (bench vpn)
  probe.py     ping, TCP flows, the UDP probe and counters, run in the namespaces
  pinger.py, flow.py, transfer.py  the small programs those probes and the
               benchmarks start inside nodes (`python -m wanmpi.testbed.flow`)
  ns-exec      the remote-shell agent MPI launchers use to enter a node
"""
