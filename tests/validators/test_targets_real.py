"""The target check on a real export: a tiny-config transformers BERT (the library's own class,
exact GELU) through ``portable.export``, checked against every profile; its partition estimate
against ONNX Runtime's usability checker on the same file and table; ONNX Runtime asked live."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from portable.exporters.api import export  # noqa: E402 - not `import portable`: tests/portable/ shadows it here
from portable.policy import Policy  # noqa: E402
from portable.validators import validate  # noqa: E402
from portable.validators.targets import TARGETS, load_profile  # noqa: E402
from portable.validators.targets.facts import ModelFacts  # noqa: E402
from portable.validators.targets.partition import partition  # noqa: E402

SEQ, VOCAB = 16, 1000
CONFIG = {"vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 128, "max_position_embeddings": 64}


class _Outputs(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, attention_mask=mask).last_hidden_state


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    model = _Outputs(transformers.BertModel(transformers.BertConfig(**CONFIG)).eval())
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(0))
    path = tmp_path_factory.mktemp("bert") / "bert.onnx"
    export(model, (ids, torch.ones_like(ids)), path, batch="dynamic", input_names=("ids", "mask"),
                    verify=False, force=True)
    return path


@pytest.fixture(scope="module")
def report(bert: Path):
    return validate(bert, Policy(targets=TARGETS, targets_live=True))


def test_every_target_has_a_line(report):
    assert report.error is None and [t.name for t in report.targets] == list(TARGETS)
    lines = {t.name: t for t in report.targets}
    assert lines["ort-cpu"].loads and dict(lines["ort-cpu"].live)["verdict"].startswith("loads")
    nodes = lines["ort-cpu"].nodes
    assert dict(lines["ort-cpu"].live)["verdict"].endswith(f"{nodes} nodes on CPUExecutionProvider")


def test_qnn_loses_the_exact_gelu_and_the_finding_points_at_the_python(report):
    qnn = {t.name: t for t in report.targets}["qnn"]
    assert dict(qnn.fallback)["Erf"] == CONFIG["num_hidden_layers"] and qnn.partitions > 1
    erf = [f for f in report.findings if f.rule_id == "PORT201" and f.message.startswith("qnn: Erf")]
    assert len(erf) == CONFIG["num_hidden_layers"]
    sources = [f.location.source for f in erf]  # the user's frame (this file's forward), in the GELU's module
    assert all(s is not None and s.file.endswith("test_targets_real.py") and "intermediate_act_fn" in (s.module or "")
               for s in sources), sources
    assert "approximate='tanh'" in erf[0].hint


def test_nnapi_runs_nothing_with_a_dynamic_batch_and_more_with_it_fixed(report):
    nnapi = {t.name: t for t in report.targets}["nnapi"]
    assert nnapi.fixed_batch is not None and nnapi.fixed_batch[0] > nnapi.supported


def test_the_estimate_matches_the_usability_checker_on_a_real_file(bert):
    """Support by op type from the NNAPI table, shapes ignored: the checker's own function agrees."""
    from onnxruntime.tools.mobile_helpers.usability_checker import _SupportedOpsChecker, check_partitioning

    from portable.validators.targets.sources import wheel_file

    model = onnx.load(str(bert), load_external_data=False)
    facts = ModelFacts.of(model, ("batch",))
    table = load_profile("nnapi")
    ours = partition(len(facts.nodes), facts.producers, facts.consumers,
                     lambda i: table.entry(facts.nodes[i].domain, facts.nodes[i].op_type) is not None)
    saved = onnx.NodeProto.__hash__
    try:
        checker = _SupportedOpsChecker(str(wheel_file("tools/mobile_helpers/nnapi_supported_ops.md")))
        theirs = check_partitioning(model.graph, checker, require_fixed_input_sizes=False)
    finally:
        onnx.NodeProto.__hash__ = saved
    assert ours.partitions > 1
    assert (ours.partitions, ours.supported) == (theirs.num_partitions, theirs.num_supported_nodes)
