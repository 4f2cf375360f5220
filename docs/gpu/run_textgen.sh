#!/usr/bin/env bash
# The GPU evidence of issue 23 (docs/llm.md, docs/gpu/textgen.md): one device call after the onnxruntime-gpu parts
# were left in /tmp/ortparts by the calls before it on the same warm machine (../shared/tools/ort-gpu/prepare.sh's
# scheme, the parts under build/ortgpuN). Carries: build/ortgpu5 (last part and installer), build/gpu-whl
# (transformers 5.24.0, the version of this branch: the machine's 5.17 predates the `cache=` argument).
# Results: $OUT/textgen-gpu.json, $OUT/textgen-gpu.log, $OUT/nvidia-smi.txt.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site build/gpu-whl/*.whl || exit 1
bash build/ortgpu5/install.sh || exit 1
source docs/gpu/shim.sh  # portable from the tree: /tmp/shim, PATH, PYTHONPATH
printf 'try:\n    import onnxruntime\n    onnxruntime.preload_dlls()\nexcept Exception as exc:\n    print("preload_dlls:", exc)\n' \
  >/tmp/shim/sitecustomize.py
export PYTHONPATH=/tmp/ortsite:/tmp/site:/tmp/shim
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$OUT/nvidia-smi.txt"
python3 docs/gpu/textgen_gpu.py --out "$OUT" --models /tmp/textgen "$@" 2>&1 | tee "$OUT/textgen-gpu.log"
