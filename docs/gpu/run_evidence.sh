#!/usr/bin/env bash
# The GPU evidence run, in stages that each fit one device call (< 10 minutes).
#   bash docs/gpu/run_evidence.sh 1    # exports, ResNet-50 (default mode, TF32 check), fixtures, matrix, tests
#   bash docs/gpu/run_evidence.sh 2    # BERT-base (default), ResNet-50 and BERT-base (max-autotune)
#   bash docs/gpu/run_evidence.sh 3    # BERT-base, max-autotune, batch 1 only
#   bash docs/gpu/run_evidence.sh 4    # nvidia-h200-x2, two pipelines (one GPU and 16 cores each):
#                                      # ResNet-50 max-autotune b1 | fp16/bf16 runs, BERT-base max-autotune b32
#   bash docs/gpu/run_evidence.sh 5    # nvidia-h200-x2: BERT-base max-autotune b32 | fp16/bf16 raw outputs
#                                      # (precision.py, for the tolerance analysis)
#   bash docs/gpu/run_evidence.sh 6    # nvidia-h200-x2: fp16/bf16 compares with the measured defaults | tests
#   bash docs/gpu/run_evidence.sh 7    # one H200, nothing beside: the fp16/bf16 compares again, for latency
# Runs from the working tree without installing: a shim folder maps portable.runners etc.
# to runners/ etc., as pyproject's package-dir does. Results: out/gpu/, and $OUT/evidence-STAGE.tar.gz.
set -u
STAGE=${1:?stage 1 or 2}
ROOT=$PWD
RES=$ROOT/out/gpu
MODELS=$ROOT/out/models
START=$(date +%s)
DEADLINE=$((START + ${BUDGET_S:-550}))
mkdir -p "$RES" "$MODELS" /tmp/shim
source docs/gpu/shim.sh  # portable from the tree: /tmp/shim, PATH, PYTHONPATH

step() {  # step NAME LIMIT_S COMMAND...: run with a time limit, unless too little time is left
  local name=$1 limit=${LIMIT_S:-$2} left
  shift 2
  left=$((DEADLINE - $(date +%s)))
  if [ "$left" -lt 30 ]; then echo "SKIP $name (${left}s left)" | tee -a "$RES/steps.txt"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "\$ $*" >>"$RES/commands-$STAGE.txt"
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$RES/$name.out" 2>"$RES/$name.err"
  echo "$name rc=$? ${limit}s-limit took $(($(date +%s) - t0))s${GPU_TAG:-}" | tee -a "$RES/steps.txt"
}

export_model() {  # export_model NAME: once per machine
  [ -f "$MODELS/$1.onnx" ] || step "export-$1" 150 python3 docs/gpu/models.py "$1" "$MODELS/$1.onnx"
}

cmp() {  # cmp NAME MODEL SPEC ARGS...: compare with JSON and a Markdown report
  local name=$1 model=$2 spec=$3
  shift 3
  step "$name" "${CMP_LIMIT_S:-300}" portable compare "$MODELS/$model.onnx" --reference "docs/gpu/models.py:$spec" \
    --format json -o "$RES/$name.json" --report "$RES/$name.md" "$@"
}

if [ "$STAGE" = 1 ]; then
  step env 60 bash -c 'nvidia-smi -L; nproc; python3 -c "import sys, torch, onnxruntime, onnx, transformers, torchvision; print(sys.version); print(torch.__version__, torch.version.cuda, onnxruntime.__version__, onnxruntime.get_available_providers(), onnx.__version__, transformers.__version__, torchvision.__version__)"'
  for m in resnet50 cnn encoder bert_base; do export_model "$m"; done
  cmp resnet50-default resnet50 resnet50 --batch 1,32 --compile-mode default
  cmp resnet50-tf32 resnet50 resnet50 --batch 32 --tf32 --no-compile --no-latency
  cmp cnn-default cnn cnn --batch 1,32 --compile-mode default
  cmp encoder-default encoder encoder --batch 1,32 --compile-mode default
  step matrix-resnet50 120 portable matrix "$MODELS/resnet50.onnx" --batch 1,32 --target h200 --format json \
    -o "$RES/matrix-h200.json" --markdown "$RES/matrix-h200.md"
  step pytest 200 bash -c "cd /tmp/shim && python3 -m pytest '$ROOT/tests/runners' -q -p no:cacheprovider \
    --rootdir '$ROOT' -c '$ROOT/pyproject.toml'"
elif [ "$STAGE" = 4 ] || [ "$STAGE" = 5 ] || [ "$STAGE" = 6 ]; then
  # Two pipelines side by side, each pinned to one GPU and 16 of the 32 cores, so one's compilation
  # does not take the other's CPUs; they share the host's memory bandwidth, which is noted with the results.
  pin() {  # pin GPU CORES: this subshell and its children
    export CUDA_VISIBLE_DEVICES=$1 GPU_TAG=" (gpu $1, cores $2)"
    taskset -cp "$2" "$BASHPID" >/dev/null
  }
  step env 60 bash -c 'nvidia-smi -L; nproc; python3 -c "import sys, torch, onnxruntime; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.device_count(), onnxruntime.__version__, onnxruntime.get_available_providers())"'
  if [ "$STAGE" = 4 ]; then
    ( pin 0 0-15; export_model resnet50
      CMP_LIMIT_S=600 cmp resnet50-max-autotune-b1 resnet50 resnet50 --batch 1 --compile-mode max-autotune ) &
    ( pin 1 16-31
      for m in resnet50_fp16 bert_base_fp16 bert_base_bf16; do export_model "$m"; done
      cmp resnet50-fp16 resnet50_fp16 resnet50_fp16 --batch 1,32 --compile-mode default
      cmp bert-fp16 bert_base_fp16 bert_base_fp16 --batch 1,32 --compile-mode default
      cmp bert-bf16 bert_base_bf16 bert_base_bf16 --batch 1,32 --compile-mode default
      export_model bert_base
      CMP_LIMIT_S=600 cmp bert-max-autotune-b32 bert_base bert_base --batch 32 --compile-mode max-autotune ) &
  elif [ "$STAGE" = 6 ]; then
    ( pin 0 0-15
      for m in resnet50_fp16 bert_base_bf16; do export_model "$m"; done
      cmp resnet50-fp16 resnet50_fp16 resnet50_fp16 --batch 1,32 --compile-mode default
      cmp bert-bf16 bert_base_bf16 bert_base_bf16 --batch 1,32 --compile-mode default ) &
    ( pin 1 16-31; export_model bert_base_fp16
      cmp bert-fp16 bert_base_fp16 bert_base_fp16 --batch 1,32 --compile-mode default
      step pytest 200 bash -c "cd /tmp/shim && python3 -m pytest '$ROOT/tests/runners' -q -p no:cacheprovider \
        --rootdir '$ROOT' -c '$ROOT/pyproject.toml'" ) &
  else
    ( pin 0 0-15; export_model bert_base
      CMP_LIMIT_S=600 cmp bert-max-autotune-b32 bert_base bert_base --batch 32 --compile-mode max-autotune ) &
    ( pin 1 16-31
      for m in resnet50_fp16 bert_base_fp16; do export_model "$m"; done
      for p in fp16 bf16; do
        step "precision-resnet50-$p" 200 python3 docs/gpu/precision.py resnet50 "$p" "$MODELS/resnet50_fp16.onnx" \
          "${OUT:-$RES}" --batch 1,32 --perturb layer3.0.conv2.weight --perturb fc.weight
        step "precision-bert-$p" 200 python3 docs/gpu/precision.py bert_base "$p" "$MODELS/bert_base_fp16.onnx" \
          "${OUT:-$RES}" --batch 1,4 --perturb bert.encoder.layer.5.attention.self.query.weight \
          --perturb bert.encoder.layer.11.output.dense.weight
      done ) &
  fi
  wait
elif [ "$STAGE" = 7 ]; then
  step env 60 bash -c 'nvidia-smi -L; nproc'
  for m in resnet50_fp16 bert_base_fp16 bert_base_bf16; do export_model "$m"; done
  cmp resnet50-fp16 resnet50_fp16 resnet50_fp16 --batch 1,32 --compile-mode default
  cmp bert-fp16 bert_base_fp16 bert_base_fp16 --batch 1,32 --compile-mode default
  cmp bert-bf16 bert_base_bf16 bert_base_bf16 --batch 1,32 --compile-mode default
elif [ "$STAGE" = smoke ]; then  # a CPU check of this script: bash docs/gpu/run_evidence.sh smoke
  export_model cnn
  cmp cnn-smoke cnn cnn --batch 1,4 --no-compile --device cpu --warmup-ms 10 --duration-ms 100
elif [ "$STAGE" = 3 ]; then  # max-autotune for BERT-base at batch 1 alone (stage 2's runs outlived 300 s)
  export_model bert_base
  cmp bert-max-autotune-b1 bert_base bert_base --batch 1 --compile-mode max-autotune
else
  cmp bert-default bert_base bert_base --batch 1,32 --compile-mode default
  cmp resnet50-max-autotune resnet50 resnet50 --batch 1,32 --compile-mode max-autotune
  cmp bert-max-autotune bert_base bert_base --batch 1,32 --compile-mode max-autotune
fi
tar czf "${OUT:-/tmp}/evidence-$STAGE.tar.gz" -C "$ROOT/out" gpu
