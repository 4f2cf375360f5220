#!/usr/bin/env bash
# The GPU evidence of issue 12: ONNX Runtime's CUDA provider against eager and compiled PyTorch on one H200,
# numerics matched, order-free timing. Stages, each one device call (< 9 minutes; BUDGET_S seconds):
#   bash docs/gpu/run_ortgpu.sh A   # exports; ResNet-50 strict parity, correct and weight x1.01; matrix;
#                                   # tests/runners on CUDA; honesty bench
#   bash docs/gpu/run_ortgpu.sh B   # compares, most wanted first: strict fp32 (ResNet-50, BERT-base, ViT-B/16),
#                                   # then TF32, then fp16; a step that would outrun the budget is skipped
#   bash docs/gpu/run_ortgpu.sh C   # the compares B skipped (a compare whose JSON exists is not run again)
#   bash docs/gpu/run_ortgpu.sh D   # a fresh machine: tests/runners, and the honesty bench again (HONESTY_TAG)
#   bash docs/gpu/run_ortgpu.sh E   # ViT-B/16 parity with a non-zero head (strict, TF32, fp16), no latency
#   bash docs/gpu/run_ortgpu.sh T   # tests/runners with the CUDA provider, nothing else
# Needs onnxruntime-gpu installed in /tmp/ortsite (../shared/tools/ort-gpu/prepare.sh) on the same machine.
# Runs from the working tree without installing (the shim of run_evidence.sh). Results: /tmp/ortgpu-res/ and
# $OUT/ortgpu-STAGE.tar.gz (everything so far on this machine); exports stay in /tmp/ortgpu-models.
set -u
STAGE=${1:?stage A, B or C}
ROOT=$PWD
RES=/tmp/ortgpu-res
MODELS=/tmp/ortgpu-models  # kept on the warm machine between calls (the carried tree is replaced)
START=$(date +%s)
DEADLINE=$((START + ${BUDGET_S:-530}))
mkdir -p "$RES" "$MODELS" /tmp/shim
source docs/gpu/shim.sh  # portable from the tree: /tmp/shim, PATH, PYTHONPATH
# onnxruntime-gpu finds the machine's CUDA 13 / cuDNN libraries through preload_dlls() (its README); every Python
# started here does it first, so that a command that creates a CUDA session before importing torch finds them too.
# (Not for the tests: PORTABLE_NO_PRELOAD=1, since one of them checks that `portable compare --help` imports no
# onnxruntime; their CUDA sessions are created after torch is imported, which loads the libraries.)
printf 'import os\nif not os.environ.get("PORTABLE_NO_PRELOAD"):\n    try:\n        import onnxruntime\n        onnxruntime.preload_dlls()\n    except Exception as exc:\n        print("preload_dlls:", exc)\n' \
  >/tmp/shim/sitecustomize.py
export PYTHONPATH=/tmp/ortsite:/tmp/shim  # onnxruntime-gpu, staged there, first

step() {  # step NAME LIMIT_S COMMAND...: run with a time limit, unless too little time is left
  local name=$1 limit=$2 left
  shift 2
  left=$((DEADLINE - $(date +%s)))
  if [ "$left" -lt 20 ]; then echo "SKIP $name (${left}s left)" | tee -a "$RES/steps.txt"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "\$ $*" >>"$RES/commands-$STAGE.txt"
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$RES/$name.out" 2>"$RES/$name.err"
  echo "$name rc=$? ${limit}s-limit took $(($(date +%s) - t0))s" | tee -a "$RES/steps.txt"
}

export_models() {  # in parallel: exports use the CPUs only, and nothing is timed meanwhile
  for m in "$@"; do
    [ -f "$MODELS/$m.onnx" ] || step "export-$m" 200 python3 docs/gpu/models.py "$m" "$MODELS/$m.onnx" --raw &  # torch.onnx's own file, which issue 12 ran
  done
  wait
}

TIMING=(--duration-ms 300 --warmup-max-ms 4000)
cmp() {  # cmp NAME MODEL SPEC ARGS...: compare with JSON and a Markdown report (plots beside it)
  local name=$1 model=$2 spec=$3
  shift 3
  [ -f "$RES/$name.json" ] && return
  step "$name" "${CMP_LIMIT_S:-240}" portable compare "$MODELS/$model.onnx" --reference "docs/gpu/models.py:$spec" \
    --device cuda --format json -o "$RES/$name.json" --report "$RES/$name.md" "$@"
}
# eager, compiled (default and reduce-overhead), ORT-CUDA with and without CUDA graphs; ORT-CPU in strict fp32 only
# (no TF32 on a CPU); fp16 without reduce-overhead (device time)
MODES=(--compile-mode default,reduce-overhead)
strict() { cmp "$1-strict" "$2" "$2" --batch 1,32 --ep cuda,cuda-graph,cpu "${MODES[@]}" "${TIMING[@]}"; }
tf32() { cmp "$1-tf32" "$2" "$2" --batch 1,32 --ep cuda,cuda-graph "${MODES[@]}" --tf32 "${TIMING[@]}"; }
fp16() { cmp "$1-fp16" "$2_fp16" "$2_fp16" --batch 1,32 --ep cuda,cuda-graph --compile-mode default "${TIMING[@]}"; }
all_compares() {
  strict resnet50 resnet50; strict bert bert_base; strict vit vit_b16
  tf32 resnet50 resnet50; tf32 bert bert_base; tf32 vit vit_b16
  fp16 resnet50 resnet50; fp16 bert bert_base; fp16 vit vit_b16
}

tests() {  # tests/runners with the CUDA provider, once per machine
  grep -q passed "$RES/pytest.out" 2>/dev/null && return
  PORTABLE_NO_PRELOAD=1 step pytest 240 bash -c "cd /tmp/shim && python3 -m pytest '$ROOT/tests/runners' -q -p no:cacheprovider \
    --rootdir '$ROOT' -c '$ROOT/pyproject.toml' -rs --junitxml '$RES/pytest.xml'"
}

honesty() {  # honesty TAG: bench/honesty_bench.py on ResNet-50, b1 and b32, strict fp32 and TF32
  step "honesty$1" 300 bash -c "cd /tmp && python3 '$ROOT/bench/honesty_bench.py' --model resnet50 \
    --onnx '$MODELS/resnet50.onnx' --providers cuda,cuda-graph --batch 1,32 --tf32 off,on --min-seconds 0.3 \
    --jsonl '$RES/honesty$1-ortgpu.jsonl' > '$RES/honesty$1-ortgpu.json'"
}

if [ "$STAGE" = T ]; then
  tests
elif [ "$STAGE" = E ]; then
  export_models vit_b16_head vit_b16_head_fp16
  PARITY=(--no-compile --no-latency --batch 1,32)
  cmp vit-head-strict vit_b16_head vit_b16_head --ep cuda,cpu "${PARITY[@]}"
  cmp vit-head-tf32 vit_b16_head vit_b16_head --ep cuda "${PARITY[@]}" --tf32
  cmp vit-head-fp16 vit_b16_head_fp16 vit_b16_head_fp16 --ep cuda "${PARITY[@]}"
elif [ "$STAGE" = D ]; then
  export_models resnet50
  tests
  honesty "${HONESTY_TAG:--2}"
elif [ "$STAGE" = A ]; then
  step env 60 bash -c 'nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv; nproc; python3 -c "import sys, torch, onnxruntime, onnx, transformers, torchvision; print(sys.version); print(torch.__version__, torch.version.cuda, onnxruntime.__version__, onnxruntime.get_available_providers(), onnx.__version__, transformers.__version__, torchvision.__version__)"; python3 -c "import pynvml; print(\"pynvml\", pynvml.__file__)"'
  export_models resnet50 bert_base vit_b16 resnet50_fp16 bert_base_fp16 vit_b16_fp16
  step scale-resnet50 60 python3 docs/gpu/scale_weight.py "$MODELS/resnet50.onnx" "$MODELS/resnet50_x1.01.onnx" \
    layer3.0.conv2.weight,fc.weight 1.01
  step parity-resnet50-strict 150 portable compare "$MODELS/resnet50.onnx" --reference docs/gpu/models.py:resnet50 \
    --device cuda --ep cuda,cpu --no-compile --no-latency --batch 1,32 --format json -o "$RES/parity-resnet50-strict.json"
  step parity-resnet50-x1.01 150 portable compare "$MODELS/resnet50_x1.01.onnx" \
    --reference docs/gpu/models.py:resnet50 --device cuda --ep cuda,cpu --no-compile --no-latency --batch 1,32 \
    --format json -o "$RES/parity-resnet50-x1.01.json"
  step matrix-resnet50 120 portable matrix "$MODELS/resnet50.onnx" --ep cpu,cuda,tensorrt --batch 1,32 \
    --target h200 --format json -o "$RES/matrix-h200-ortgpu.json" --markdown "$RES/matrix-h200-ortgpu.md"
  step honesty 300 bash -c "cd /tmp && python3 '$ROOT/bench/honesty_bench.py' --model resnet50 \
    --onnx '$MODELS/resnet50.onnx' --providers cuda,cuda-graph --batch 1,32 --tf32 off,on --min-seconds 0.3 \
    --jsonl '$RES/honesty-ortgpu.jsonl' > '$RES/honesty-ortgpu.json'"
  tests
else
  export_models resnet50 bert_base vit_b16 resnet50_fp16 bert_base_fp16 vit_b16_fp16
  [ "$STAGE" = C ] && tests
  all_compares
fi
cp "$RES/steps.txt" "$RES/steps-$STAGE.txt" 2>/dev/null
tar czf "${OUT:-/tmp}/ortgpu-$STAGE.tar.gz" -C /tmp ortgpu-res
