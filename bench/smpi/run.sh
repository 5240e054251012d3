#!/bin/sh
# run.sh NAME PROGRAM NP PLATFORM HOSTFILE SELECTOR [extra smpirun args...] -- [program args]
# (PLATFORM, HOSTFILE: from `wanmpi sim --platform-only DIR`; `wanmpi sim` itself runs collbench)
# prints the program's output, the wall time and max RSS of the simulation
name=$1 prog=$2 np=$3 plat=$4 hf=$5 sel=$6; shift 6
extra=""; while [ $# -gt 0 ] && [ "$1" != "--" ]; do extra="$extra $1"; shift; done; [ "$1" = "--" ] && shift
/usr/bin/time -f "wall %e s, maxrss %M KB" -o ${SMPI_WORK:-/tmp/smpi-explore}/logs/$name.time \
  nice -n 19 smpirun -np $np -platform $plat -hostfile $hf --cfg=smpi/coll-selector:$sel \
  --log=smpi_config.thresh:warning --log=xbt_cfg.thresh:warning --log=smpi_coll.thresh:warning $extra $prog "$@" \
  > ${SMPI_WORK:-/tmp/smpi-explore}/logs/$name.log 2>&1
echo "rc=$?" >> ${SMPI_WORK:-/tmp/smpi-explore}/logs/$name.log
grep -v "WARNING\]\|^wanmpi\[" ${SMPI_WORK:-/tmp/smpi-explore}/logs/$name.log | sed "s/^/$name: /"; sed "s/^/$name: /" ${SMPI_WORK:-/tmp/smpi-explore}/logs/$name.time
