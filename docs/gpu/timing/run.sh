#!/usr/bin/env bash
# One device call, from the working tree without installing (docs/gpu/shim.sh):
#   bash docs/gpu/timing/run.sh probe [--seconds 10]   # docs/gpu/timing/probe.py -> $OUT/probe.json
#   bash docs/gpu/timing/run.sh honesty [ARGS...]      # bench/honesty_bench.py (torch runners) -> $OUT/honesty.json
#   bash docs/gpu/timing/run.sh export [ARGS...]       # bench/export_bench.py (export overhead, CPU) -> $OUT/export.json
#   bash docs/gpu/timing/run.sh host [--seconds 8]     # host_probe.py unpinned, then under taskset on two CPUs
#                                                      # -> $OUT/host-unpinned.json, host-cpuN.json
set -u
WHAT=${1:?probe, honesty or export}
shift
ROOT=$PWD
source docs/gpu/shim.sh  # portable from the tree: /tmp/shim, PATH, PYTHONPATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,pstate --format=csv
nproc; uptime
if [ "$WHAT" = probe ]; then
  python3 docs/gpu/timing/probe.py "$@" > "${OUT:-/tmp}/probe.json"
elif [ "$WHAT" = host ]; then
  nvidia-smi topo -m; lscpu | grep -E "Model name|NUMA|Thread|Core|Socket|MHz"; top -bn1 | head -15
  read -r near far < <(python3 -c "import os; c = sorted(os.sched_getaffinity(0)); print(c[2], c[-1])")
  python3 docs/gpu/timing/host_probe.py "$@" > "${OUT:-/tmp}/host-unpinned.json"
  for cpu in "$near" "$far"; do
    taskset -c "$cpu" python3 docs/gpu/timing/host_probe.py "$@" > "${OUT:-/tmp}/host-cpu$cpu.json"
  done
elif [ "$WHAT" = export ]; then
  python3 -c "import torch, onnx, onnxruntime, onnxscript, onnx_ir, transformers, torchvision; print(torch.__version__, onnx.__version__, onnxruntime.__version__, onnxscript.__version__, onnx_ir.__version__, transformers.__version__, torchvision.__version__)"
  python3 bench/export_bench.py "$@" > "${OUT:-/tmp}/export.json"
else
  (cd /tmp && python3 "$ROOT/bench/honesty_bench.py" --model resnet50 --providers "" "$@") > "${OUT:-/tmp}/honesty.json"
fi
rc=$?
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,pstate --format=csv
exit $rc
