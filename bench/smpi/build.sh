#!/bin/sh
# The SMPI feasibility study's probes (docs/scale.md). libwanmpi for SMPI is
# built by `make smpi` (build/smpi: its objects, collbench-wan and
# collbench-plain; the simulator's patches are in lib/smpi/); this builds the
# study's test programs beside them in a work directory, and 2 x N platforms
# with `wanmpi sim --platform-only` (platform-2xN/platform.xml, .../hostfile).
# usage: bench/smpi/build.sh [WORKDIR]   (default /tmp/smpi-explore)
set -e
S=$(cd "$(dirname "$0")/../.." && pwd); H=$S/bench/smpi; T=${1:-/tmp/smpi-explore}
nice -n 19 make -s -C $S smpi
mkdir -p $T/solib $T/logs; cd $T
OBJS=$(find $S/build/smpi/obj -name '*.o' | sort)
nice -n 19 smpicc -o solib/libwanmpi-smpi.so $OBJS -ldl -lpthread        # shared variant
cp $S/build/smpi/collbench-wan $S/build/smpi/collbench-plain .
nice -n 19 smpicc -O2 -o tiny-plain $H/tiny.c
nice -n 19 smpicc -O2 -o tiny-wan $H/tiny.c $OBJS -ldl -lpthread
nice -n 19 smpicc -O2 -o fifo $H/fifo.c
for n in 4 32 128; do
  $S/.venv/bin/wanmpi sim -t $S/examples/two-clusters.toml --nodes-per-cluster $n --platform-only platform-2x$n >/dev/null
done
