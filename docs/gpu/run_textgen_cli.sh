#!/usr/bin/env bash
# Issue 34 item 3 on one H200: `portable compare --task text-generation --device cuda` from the CLI (the pair on
# ONNX Runtime's CUDA provider, strict fp32, against eager and compiled generate on the same GPU, with TTFT, decode
# p50/p90 and tokens/s for each; the decode steps as CUDA graphs by default, and with --ep cuda without them). One device call after the onnxruntime-gpu parts .ortgpu1-4 were left in
# /tmp/ortparts by the calls before it (../shared/tools/ort-gpu/prepare.sh); carries .ortgpu5 and .whl
# (transformers 5.24.0: the machine's 5.17 predates the `cache=` argument). Results under $OUT.
set -u
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
bash .ortgpu5/install.sh || exit 1
source docs/gpu/shim.sh  # portable from the tree: /tmp/shim, PATH, PYTHONPATH
printf 'try:\n    import onnxruntime\n    onnxruntime.preload_dlls()\nexcept Exception as exc:\n    print("preload_dlls:", exc)\n' \
  >/tmp/shim/sitecustomize.py
export PYTHONPATH=/tmp/ortsite:/tmp/site:/tmp/shim
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$OUT/nvidia-smi.txt"
python3 -c "import torch, transformers, onnxruntime as o; print(torch.__version__, transformers.__version__, o.__version__, o.get_available_providers())" \
  >"$OUT/versions.txt" 2>&1
# 1. the mode's GPU test (tests/runners/test_gpu.py): the tiny LLaMA pair, all three timed on the GPU
(cd /tmp/shim && timeout 200 python3 -m pytest "$ROOT/tests/runners/test_gpu.py" -q -p no:cacheprovider --rootdir "$ROOT" \
  -c "$ROOT/pyproject.toml" -o pythonpath=tests -rs -k "text_generation or cuda_graph_decode") >"$OUT/pytest-textgen-gpu.txt" 2>&1
# 2. the 100M LLaMA pair at C 1024, P 128: export (CPU), then the CLI's GPU mode, 100-token prompt, 32 tokens
mkdir -p /tmp/tg
(cd /tmp && timeout 120 portable export "$ROOT/docs/gpu/llama100m.py:model" --task text-generation --context 1024 \
  --prefill 128 --no-verify --force -o /tmp/tg/llama) >"$OUT/export.txt" 2>&1
(cd /tmp && timeout 300 portable compare /tmp/tg/llama.textgen.json --reference "$ROOT/docs/gpu/llama100m.py:model" \
  --task text-generation --device cuda --tokens 32 --prompt-length 100 --format json -o "$OUT/textgen-cli-h200.json") \
  >"$OUT/compare.txt" 2>&1
echo "compare exit $?" >>"$OUT/compare.txt"
(cd /tmp && timeout 300 portable compare /tmp/tg/llama.textgen.json --reference "$ROOT/docs/gpu/llama100m.py:model" \
  --task text-generation --device cuda --ep cuda --tokens 32 --prompt-length 100 --format json \
  -o "$OUT/textgen-cli-h200-plain.json") >"$OUT/compare-plain.txt" 2>&1
echo "compare --ep cuda exit $?" >>"$OUT/compare-plain.txt"
(cd /tmp && timeout 60 portable compare /tmp/tg/llama.textgen.json --reference "$ROOT/docs/gpu/llama100m.py:model" \
  --task text-generation --device cuda --tokens 32 --prompt-length 100 --no-compile --no-latency) >"$OUT/compare-text.txt" 2>&1
echo "text exit $?" >>"$OUT/compare-text.txt"
