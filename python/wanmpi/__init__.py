"""wanmpi: run unmodified MPI programs fast across clusters joined by a WAN."""
