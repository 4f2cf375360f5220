#!/usr/bin/env bash
# Issue 33, second round (docs/gpu/ortvc2/README.md): default-domain rewrites of `portable export` files,
# ConvNeXt-T and BERT-base, batch 32, strict fp32, ORT-CUDA (CUDA graphs) beside compiled reduce-overhead.
# One device call after the four staging calls of ../shared/tools/ort-gpu/prepare.sh. Results: $OUT/ortvc2.tar.gz.
#   bash docs/gpu/ortvc2/run.sh [STAGE]   # A: export, rewrite, parity, ORT's fused ops, levers; B: NHWC levers
#                                         # and profiles (ConvNeXt, a fresh machine); P: profiles of $PROFILE files
set -u
STAGE=${1:-A}
ROOT=$PWD
RES=/tmp/ortvc2-res
M=/tmp/ortvc2-models
S=docs/gpu/ortvc2/rewrite.py
mkdir -p "$RES/levers" "$RES/parity" "$RES/ops" "$RES/profiles" "$M" /tmp/shim
bash .ortgpu5/install.sh >"$RES/install.out" 2>&1 || { cat "$RES/install.out"; exit 1; }
source docs/gpu/shim.sh
printf 'import os\ntry:\n    import onnxruntime\n    onnxruntime.preload_dlls()\nexcept Exception as exc:\n    print("preload_dlls:", exc)\n' \
  >/tmp/shim/sitecustomize.py
export PYTHONPATH=/tmp/ortsite:/tmp/site:/tmp/shim
step() {  # step NAME LIMIT COMMAND...
  local name=$1 limit=$2; shift 2
  echo "\$ $*" >>"$RES/commands-$STAGE.txt"
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$RES/$name.out" 2>"$RES/$name.err"
  echo "$name rc=$? took $(($(date +%s) - t0))s" | tee -a "$RES/steps.txt"
}
CONV="layerscale gemm gemm-nobias gemm-keepgelu layerscale+gemm layerscale+gemm-nobias layerscale+gemm-keepgelu"
BERT="gemm gemm-nobias gemm-keepgelu scalarfold scalarfold+gemm scalarfold+gemm-keepgelu"
case "$STAGE" in
  A)
    step env 60 bash -c "nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c 'import onnxruntime as o, torch, onnx_ir; print(o.__version__, o.get_available_providers(), torch.__version__, onnx_ir.__version__)'"
    for m in convnext_tiny bert_base; do
      [ -f "$M/$m.onnx" ] || step "export-$m" 200 portable export "docs/gpu/models.py:$m" -o "$M/$m.onnx" --batch dynamic --no-verify &
    done
    wait
    for m in convnext_tiny bert_base; do
      [ $m = convnext_tiny ] && levers=$CONV || levers=$BERT
      also=()
      step "ops-$m-orig" 60 python3 $S --ops "$M/$m.onnx" --ep cuda
      cp "$RES/ops-$m-orig.out" "$RES/ops/$m.json"
      for l in $levers; do  # in parallel: CPU work and session creation only, nothing is timed meanwhile
        (
          step "rewrite-$m-$l" 60 python3 $S "$M/$m.onnx" "$M/$m.$l.onnx" "$l"
          step "parity-$m-$l" 90 python3 $S --parity "$M/$m.onnx" "$M/$m.$l.onnx" --batch 2
          cp "$RES/parity-$m-$l.out" "$RES/parity/$m.$l.json"
          step "ops-$m-$l" 90 python3 $S --ops "$M/$m.$l.onnx" --ep cuda
          cp "$RES/ops-$m-$l.out" "$RES/ops/$m.$l.json"
        ) &
        also+=(--also "ort-cuda-graph $l=$M/$m.$l.onnx")
      done
      wait
      step "levers-$m" 240 python3 docs/gpu/ortvc2/levers2.py levers --onnx "$M/$m.onnx" \
        --reference "docs/gpu/models.py:$m" --kind graph --batch 32 "${also[@]}" --out "$RES/levers/$m.json"
    done
    ;;
  B)  # ConvNeXt: the identity Gather of the head removed, so that NHWC (prefer_nhwc=1) works with CUDA graphs
    m=convnext_tiny
    [ -f "$M/$m.onnx" ] || step "export-$m" 200 portable export "docs/gpu/models.py:$m" -o "$M/$m.onnx" --batch dynamic --no-verify
    for l in layerscale idgather layerscale+idgather; do
      step "rewrite-$m-$l" 60 python3 $S "$M/$m.onnx" "$M/$m.$l.onnx" "$l"
    done
    for l in idgather layerscale+idgather; do
      step "parity-$m-$l" 90 python3 $S --parity "$M/$m.onnx" "$M/$m.$l.onnx" --batch 2 &
    done
    wait
    for l in idgather layerscale+idgather; do cp "$RES/parity-$m-$l.out" "$RES/parity/$m.$l.json"; done
    X="$M/$m"
    export ORTVC2_EXTRA='[["ort-cuda-graph-nhwc", {"prefer_nhwc": "1"}, true, "'$X.onnx'"],
      ["ort-cuda-graph-nhwc idgather", {"prefer_nhwc": "1"}, true, "'$X.idgather.onnx'"],
      ["ort-cuda-graph-nhwc layerscale+idgather", {"prefer_nhwc": "1"}, true, "'$X.layerscale+idgather.onnx'"],
      ["ort-cuda-nhwc layerscale+idgather (no graphs)", {"prefer_nhwc": "1"}, false, "'$X.layerscale+idgather.onnx'"]]'
    step "levers-$m-B" 240 python3 docs/gpu/ortvc2/levers2.py levers --onnx "$M/$m.onnx" \
      --reference "docs/gpu/models.py:$m" --kind graph --batch 32 --also "ort-cuda-graph layerscale=$M/$m.layerscale.onnx" \
      --also "ort-cuda-graph idgather=$M/$m.idgather.onnx" --out "$RES/levers/$m-B.json"
    unset ORTVC2_EXTRA
    step "profile-$m.layerscale" 150 python3 bench/ort_vs_compiled_bench.py profile --onnx "$M/$m.layerscale.onnx" \
      --reference "docs/gpu/models.py:$m" --batch 32 --out "$RES/profiles/$m.layerscale.json"
    step "profile-$m.layerscale+idgather-nhwc" 150 python3 bench/ort_vs_compiled_bench.py profile --nhwc \
      --onnx "$M/$m.layerscale+idgather.onnx" --reference "docs/gpu/models.py:$m" --batch 32 \
      --out "$RES/profiles/$m.layerscale+idgather-nhwc.json"
    ;;
  P)  # PROFILE="convnext_tiny.layerscale+gemm ...": where the time goes for chosen files
    for f in ${PROFILE:-}; do
      step "profile-$f" 150 python3 bench/ort_vs_compiled_bench.py profile --onnx "$M/$f.onnx" \
        --reference "docs/gpu/models.py:${f%%.*}" --batch 32 --out "$RES/profiles/$f.json"
    done
    ;;
esac
tar -czf "$OUT/ortvc2-$STAGE.tar.gz" -C "$RES" --exclude='*.onnx' .
