#!/usr/bin/env bash
# Issue 33 on one H200: ONNX Runtime CUDA against compiled PyTorch for portable's files, the levers one at a time,
# where the time goes, and the live ort-cuda verdicts. Stages, each one device call (< 9.5 minutes):
#   bash docs/gpu/run_ort_vs_compiled.sh A   # exports; strict fp32 compares (ConvNeXt-T, ResNet-50, BERT-base)
#   bash docs/gpu/run_ort_vs_compiled.sh B   # fp16 compares; profiles (ORT's profiler vs PyTorch's) at batch 32
#   bash docs/gpu/run_ort_vs_compiled.sh C   # 100M LLaMA decode (CUDA-graph lever); validate --target ort-cuda --live
#                                            # over every file here; the summary docs/gpu/ort-vs-compiled.json
#   bash docs/gpu/run_ort_vs_compiled.sh D   # a fresh machine: the profiles again with CUPTI's kernel times on the
#                                            # ONNX Runtime side too; the provider levers one at a time (ConvNeXt-T,
#                                            # BERT-base, batch 32); live ort-cuda again with the seeded run
#   bash docs/gpu/run_ort_vs_compiled.sh E   # a fresh machine: `portable export` files (GELU in ORT's fusable order)
#                                            # against torch.onnx's own, ConvNeXt-T and BERT-base, batch 32, beside
#                                            # compiled PyTorch in one process
#   bash docs/gpu/run_ort_vs_compiled.sh F1  # round 3, the product: `portable export` files of the three models
#                                            # (every pass of today's exporter: IdentityGatherPass lets NHWC and
#                                            # CUDA graphs run together), strict fp32 compares at batch 1 and 32
#   bash docs/gpu/run_ort_vs_compiled.sh F2  # the same machine: fp16 exports, the 100M LLaMA decode, live
#                                            # ort-cuda over every file, the summary (docs/gpu/ort-vs-compiled.json)
#   bash docs/gpu/run_ort_vs_compiled.sh G1  # round 4 (H200): F1 with today's exporter (attention clean-ups), and BERT-base's
#                                            # file before/after them timed side by side with compiled PyTorch
#   bash docs/gpu/run_ort_vs_compiled.sh G2  # the same machine: F2 (fp16 exports, decode, live ort-cuda, the summary)
# Needs onnxruntime-gpu in /tmp/ortsite (../shared/tools/ort-gpu/prepare.sh; stage A's call runs its installer),
# transformers 5.24 as a wheel in .whl (stages C and F2: the machine's 5.17 predates the `cache=` argument), the CPU-made
# EfficientNet-Lite0 files in .gpuwork (stages C and F2). Results: /tmp/ovc-res, and $OUT/ovc-STAGE.tar.gz.
set -u
STAGE=${1:?stage A, B or C}
ROOT=$PWD
RES=/tmp/ovc-res
MODELS=/tmp/ovc-models  # kept on the warm machine between calls (the carried tree is replaced)
START=$(date +%s)
DEADLINE=$((START + ${BUDGET_S:-540}))
mkdir -p "$RES/compares" "$RES/profiles" "$RES/live" "$MODELS" /tmp/shim
source docs/gpu/shim.sh  # portable from the tree: /tmp/shim, PATH, PYTHONPATH
printf 'import os\nif not os.environ.get("PORTABLE_NO_PRELOAD"):\n    try:\n        import onnxruntime\n        onnxruntime.preload_dlls()\n    except Exception as exc:\n        print("preload_dlls:", exc)\n' \
  >/tmp/shim/sitecustomize.py
export PYTHONPATH=/tmp/ortsite:/tmp/site:/tmp/shim

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
    # torch.onnx's own file (--raw), as the A-E runs of 2026-12-03 had it (stage E adds portable export's);
    # RAW= bash ... exports through portable's pipeline instead
    [ -f "$MODELS/$m.onnx" ] || step "export-$m" 240 python3 docs/gpu/models.py "$m" "$MODELS/$m.onnx" ${RAW---raw} &
  done
  wait
}

TIMING=(--duration-ms 300 --warmup-max-ms 4000 --batch 1,32 --compile-mode default,reduce-overhead)
CONV_EPS=cuda,cuda-graph,cuda-nhwc,cuda-graph-nhwc
cmp() {  # cmp NAME SPEC EPS ARGS...: one compare, every runner round-robin in one process, JSON + Markdown
  local name=$1 spec=$2 eps=$3
  shift 3
  [ -f "$RES/compares/$name.json" ] && return
  step "$name" "${CMP_LIMIT_S:-200}" portable compare "$MODELS/$spec.onnx" --reference "docs/gpu/models.py:$spec" \
    --device cuda --ep "$eps" "${TIMING[@]}" --format json -o "$RES/compares/$name.json" --report "$RES/$name.md" "$@"
}

prof() {  # prof NAME SPEC [--nhwc]: where the time goes at batch 32
  [ -f "$RES/profiles/$1.json" ] && return
  step "profile-$1" 150 python3 "$ROOT/bench/ort_vs_compiled_bench.py" profile --onnx "$MODELS/$2.onnx" \
    --reference "docs/gpu/models.py:$2" --batch 32 "${@:3}" --out "$RES/profiles/$1.json"
}

live() {  # live NAME FILE: validate --target ort-cuda --live, JSON
  step "live-$1" 120 portable validate "$2" --target ort-cuda --live --format json -o "$RES/live/$1.json"
}

lever() {  # lever NAME SPEC KIND: the provider options one at a time beside compiled PyTorch (reduce-overhead)
  step "levers-$1" 200 python3 "$ROOT/bench/ort_vs_compiled_bench.py" levers --onnx "$MODELS/$2.onnx" \
    --reference "docs/gpu/models.py:$2" --kind "$3" --batch 32 --out "$RES/levers/$1.json"
}

install_and_env() {  # onnxruntime-gpu from the staged parts, and what the machine has
  bash .ortgpu5/install.sh >"$RES/install.out" 2>&1 || { cat "$RES/install.out"; exit 1; }
  step env 60 bash -c "nvidia-smi; python3 -c 'import onnxruntime as o, torch, transformers, torchvision; \
    print(o.__version__, o.get_available_providers(), torch.__version__, transformers.__version__, torchvision.__version__)'"
}

decode_live_summary() {  # decode_live_summary LIMIT_S: the LLaMA decode lever, live ort-cuda over every file, the summary
  step textgen "$1" python3 docs/gpu/textgen_gpu.py --out "$RES" --models "$MODELS/textgen" --seconds 1.5
  for f in "$MODELS"/*.onnx "$MODELS"/textgen/*.onnx "$ROOT"/.gpuwork/*.onnx; do
    [ -f "$f" ] && live "$(basename "$f" .onnx)" "$f"
  done
  step summarize 60 python3 "$ROOT/bench/ort_vs_compiled_bench.py" summarize --compares "$RES/compares" \
    --live "$RES/live" --decode "$RES/textgen-gpu.json" --out "$RES/ort-vs-compiled.json"
}

case "$STAGE" in
  A)
    install_and_env
    export_models convnext_tiny resnet50 bert_base convnext_tiny_fp16 resnet50_fp16 bert_base_fp16
    cmp convnext_tiny-strict convnext_tiny "$CONV_EPS"
    cmp resnet50-strict resnet50 "$CONV_EPS"
    cmp bert_base-strict bert_base cuda,cuda-graph
    ;;
  B)
    cmp convnext_tiny-fp16 convnext_tiny_fp16 "$CONV_EPS"
    cmp resnet50-fp16 resnet50_fp16 "$CONV_EPS"
    cmp bert_base-fp16 bert_base_fp16 cuda,cuda-graph
    prof convnext_tiny-strict convnext_tiny --nhwc
    prof resnet50-strict resnet50
    prof bert_base-strict bert_base
    ;;
  C)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
    decode_live_summary 300
    ;;
  D)
    bash .ortgpu5/install.sh >"$RES/install.out" 2>&1 || { cat "$RES/install.out"; exit 1; }
    mkdir -p "$RES/levers"
    export_models convnext_tiny resnet50 bert_base
    prof convnext_tiny-strict convnext_tiny --nhwc
    prof bert_base-strict bert_base
    prof resnet50-strict resnet50
    lever convnext_tiny convnext_tiny conv
    lever bert_base bert_base bert
    for f in "$MODELS"/*.onnx; do live "$(basename "$f" .onnx)" "$f"; done
    ;;
  E)
    bash .ortgpu5/install.sh >"$RES/install.out" 2>&1 || { cat "$RES/install.out"; exit 1; }
    mkdir -p "$RES/levers" "$MODELS/portable"
    export_models convnext_tiny bert_base
    for m in convnext_tiny bert_base; do
      step "portable-export-$m" 200 portable export "docs/gpu/models.py:$m" -o "$MODELS/portable/$m.onnx" \
        --batch dynamic --no-verify &
    done
    wait
    for m in convnext_tiny:conv bert_base:bert; do
      step "levers-portable-${m%%:*}" 150 python3 "$ROOT/bench/ort_vs_compiled_bench.py" levers \
        --onnx "$MODELS/portable/${m%%:*}.onnx" --reference "docs/gpu/models.py:${m%%:*}" --kind "${m##*:}" \
        --batch 32 --also "ort-cuda-graph (torch.onnx file)=$MODELS/${m%%:*}.onnx" --out "$RES/levers/portable-${m%%:*}.json"
    done
    ;;
  F1)
    install_and_env
    RAW= export_models convnext_tiny resnet50 bert_base
    cmp convnext_tiny-strict convnext_tiny cuda-graph,cuda-graph-nhwc
    cmp resnet50-strict resnet50 cuda-graph,cuda-graph-nhwc
    cmp bert_base-strict bert_base cuda,cuda-graph
    ;;
  G1)
    install_and_env
    step export-bert_base-kept 240 python3 docs/gpu/models.py bert_base /tmp/bert_base-kept.onnx \
      --without-attention-rewrites &
    RAW= export_models convnext_tiny resnet50 bert_base
    wait
    cmp convnext_tiny-strict convnext_tiny cuda-graph,cuda-graph-nhwc
    cmp resnet50-strict resnet50 cuda-graph,cuda-graph-nhwc
    cmp bert_base-strict bert_base cuda,cuda-graph
    mkdir -p "$RES/levers"
    step levers-bert-attention 200 python3 "$ROOT/bench/ort_vs_compiled_bench.py" levers --onnx "$MODELS/bert_base.onnx" \
      --reference docs/gpu/models.py:bert_base --kind bert --batch 32 \
      --also "ort-cuda-graph (attention clean-ups off)=/tmp/bert_base-kept.onnx" --out "$RES/levers/bert-attention.json"
    ;;
  F2 | G2)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
    RAW= export_models convnext_tiny_fp16 resnet50_fp16 bert_base_fp16
    decode_live_summary 240
    ;;
esac
cat "$RES/steps.txt"
tar -czf "$OUT/ovc-$STAGE.tar.gz" -C "$RES" .
