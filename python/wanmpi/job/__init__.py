"""One MPI job across the clusters of a topology, on the testbed or on real
clusters: how it is launched, what it preloads, the relays it goes through,
and what TCP did and needs on its nodes.

  launch.py     Job, run_job (re-exports launchers.py's names)
  launchers.py  registered launchers (Open MPI 4.1 and 5, MPICH, Intel MPI)
  placement.py  the node of every rank (--map)
  programs.py   the program: where it is, which MPI it is built with
  mpi4py.py     Python programs: which MPIs their mpi4py is built for
  libwanmpi.py  the libraries a job preloads (libwanmpi, libwanshim) and their environment
  relays.py     the relays of a job: wanrelay's configuration, processes, counters
  tcpstats.py   TCP counters of the job's nodes before and after it
  doctor.py     a node's TCP settings checked against what the topology asks
"""
