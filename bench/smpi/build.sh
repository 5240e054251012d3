#!/bin/sh
# The SMPI feasibility study (docs/scale.md): libwanmpi's sources compiled by
# smpicc (SimGrid 3.32: apt-get install libsimgrid-dev), with the three
# patches the study needed, into a work directory; then the test programs.
# usage: bench/smpi/build.sh [WORKDIR]   (default /tmp/smpi-explore)
set -e
S=$(cd "$(dirname "$0")/../.." && pwd); H=$S/bench/smpi; T=${1:-/tmp/smpi-explore}
mkdir -p $T/obj $T/solib $T/logs; cd $T
CF="-O2 -Wall -Wextra -g -I$S/lib/include"
# the Makefile's LIB_SOURCES, compiled by smpicc (-fPIC added by smpicc)
for f in $S/lib/src/common/*.c $S/lib/src/coll/*.c $S/lib/src/pacing/*.c $S/lib/src/blast/*.c \
         $S/lib/src/fortran/*.c $S/lib/src/fence/fence.c; do
  case $f in */coll/own_alltoall.c|*/coll/sched.c|*/coll/progress.c|*/coll/nb.c) continue;; esac
  nice -n 19 smpicc $CF -c $f -o obj/$(basename $(dirname $f))_$(basename $f .c).o
done
# C1: no MPI_T in SMPI
nice -n 19 smpicc $CF -iquote $S/lib/src/coll -c $H/own_alltoall_smpi.c -o obj/patched_own_alltoall_smpi.o
# B1: block in Waitsome (patch 1), sched_yield as a simulated sleep (patch 2)
cp $S/lib/src/coll/sched.c $T/sched.c && patch -s $T/sched.c $H/sched-smpi.patch
nice -n 19 smpicc $CF -DWANMPI_SMPI -iquote $S/lib/src/coll -c $T/sched.c -o obj/patched_sched.o
for f in progress nb; do
  nice -n 19 smpicc $CF -include $H/smpi_yield.h -c $S/lib/src/coll/$f.c -o obj/patched_yield_$f.o
done
OBJS=$(ls obj/*.o)
nice -n 19 smpicc -o solib/libwanmpi-smpi.so $OBJS -ldl -lpthread        # shared variant
nice -n 19 smpicc -O2 -o collbench-plain $S/bench/collbench.c
nice -n 19 smpicc -O2 -o collbench-wan $S/bench/collbench.c $OBJS -ldl -lpthread
nice -n 19 smpicc -O2 -o tiny-plain $H/tiny.c
nice -n 19 smpicc -O2 -o tiny-wan $H/tiny.c $OBJS -ldl -lpthread
nice -n 19 smpicc -O2 -o fifo $H/fifo.c
for n in 4 32 128; do python3 $H/gen_platform.py $n >/dev/null; done
