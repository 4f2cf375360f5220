#!/usr/bin/env bash
# Issue 33 item 3 on the H200 machine: a provider that falls back says ONNX Runtime's own reason in matrix's cell
# and in compare's JSON (TensorRT's provider is listed by onnxruntime-gpu but libnvinfer.so.10 is not on the
# machine). One call after .ortgpu1-4 were copied to /tmp/ortparts; carries .ortgpu5. Results under $OUT.
set -u
ROOT=$PWD
bash .ortgpu5/install.sh || exit 1
source docs/gpu/shim.sh
printf 'try:\n    import onnxruntime\n    onnxruntime.preload_dlls()\nexcept Exception as exc:\n    print("preload_dlls:", exc)\n' \
  >/tmp/shim/sitecustomize.py
export PYTHONPATH=/tmp/ortsite:/tmp/shim
cd /tmp
portable export "$ROOT/fixtures/models/cnn.py:build" -o /tmp/cnn.onnx --force >"$OUT/export.txt" 2>&1
portable matrix /tmp/cnn.onnx --ep tensorrt,cuda,cpu --batch 1 --format json -o "$OUT/matrix.json" >"$OUT/matrix.txt" 2>&1
echo "matrix exit $?" >>"$OUT/matrix.txt"
portable compare /tmp/cnn.onnx --reference "$ROOT/fixtures/models/cnn.py:build" --device cuda --ep tensorrt,cuda \
  --batch 1 --no-compile --no-latency --format json -o "$OUT/compare.json" >"$OUT/compare.txt" 2>&1
echo "compare exit $?" >>"$OUT/compare.txt"
