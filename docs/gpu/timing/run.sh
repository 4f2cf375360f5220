#!/usr/bin/env bash
# One device call, from the working tree without installing (portable/ copied to /tmp/shim with the three
# code folders linked in, as docs/gpu/run_ortgpu.sh does):
#   bash docs/gpu/timing/run.sh probe [--seconds 10]   # docs/gpu/timing/probe.py -> $OUT/probe.json
#   bash docs/gpu/timing/run.sh honesty [ARGS...]      # bench/honesty_bench.py (torch runners) -> $OUT/honesty.json
set -u
WHAT=${1:?probe or honesty}
shift
ROOT=$PWD
mkdir -p /tmp/shim && rm -rf /tmp/shim/portable && cp -r portable /tmp/shim/
for d in runners exporters validators; do ln -s "$ROOT/$d" "/tmp/shim/portable/$d"; done
export PYTHONPATH=/tmp/shim PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,pstate --format=csv
nproc; uptime
if [ "$WHAT" = probe ]; then
  python3 docs/gpu/timing/probe.py "$@" > "${OUT:-/tmp}/probe.json"
else
  (cd /tmp && python3 "$ROOT/bench/honesty_bench.py" --model resnet50 --providers "" "$@") > "${OUT:-/tmp}/honesty.json"
fi
rc=$?
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,pstate --format=csv
exit $rc
