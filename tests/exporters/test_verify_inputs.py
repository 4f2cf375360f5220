"""Export's verify feeds a transformer the inputs it meets in use (issue 48 item 4).

``-i input_ids=1x16:int64 -i attention_mask=1x16:int64`` traces with integers in [0, 8). Verify used to draw
both inputs from that range: an attention mask with values up to 7, which no tokenizer makes, and token ids from
8 of the vocabulary's rows. Now the graph says what each input is (runners/constraints.py): token ids index the
embedding table (drawn over all of it), the mask is real padding (each row ones, then zeros). Eager PyTorch is
fed the same arrays, and the manifest says how each input was drawn. A tiny random-init BERT (transformers'
own class) keeps it cheap.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import portable  # noqa: E402
from portable.exporters.inputs import parse_input  # noqa: E402
from portable.runners.constraints import MASK_DRAW  # noqa: E402

SEQ, VOCAB = 16, 300


class RecordingBert(torch.nn.Module):
    """A one-layer random-init BERT that keeps each (ids, mask) pair eager PyTorch runs on outside tracing."""

    def __init__(self) -> None:
        super().__init__()
        config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=64, max_position_embeddings=SEQ)
        torch.manual_seed(0)
        self.bert = transformers.BertModel(config).eval()
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if not (torch.compiler.is_compiling() or torch.compiler.is_exporting()):
            self.seen.append((input_ids.numpy().copy(), attention_mask.numpy().copy()))
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[RecordingBert, tuple, object]:
    module = RecordingBert()
    # the examples `portable export -i NAME=1x16:int64` traces with (batch 2 for a dynamic batch)
    args = tuple(parse_input(f"{name}=1x{SEQ}:int64").tensor(batch=2) for name in ("input_ids", "attention_mask"))
    assert int(max(a.max() for a in args)) < 8
    result = portable.export(module, args, tmp_path_factory.mktemp("verify") / "bert.onnx",
                             input_names=("input_ids", "attention_mask"))
    return module, args, result


def _is_padding(mask: np.ndarray) -> bool:
    """Each row ones then zeros, with at least one of each."""
    kept = mask.sum(axis=-1)
    expected = np.arange(mask.shape[-1]) < kept[..., None]
    return bool(np.array_equal(mask, expected) and (kept >= 1).all() and (kept < mask.shape[-1]).all())


def test_verify_feeds_eager_pytorch_real_padding_and_ids_over_the_whole_table(exported) -> None:
    module, args, result = exported
    assert result.parity is not None and result.parity.ok and result.parity.batches == (1, 3), result.parity
    examples = [a.numpy() for a in args]
    fed = [(ids, mask) for ids, mask in module.seen
           if not (np.array_equal(ids, examples[0]) and np.array_equal(mask, examples[1]))]
    assert sorted({len(ids) for ids, _ in fed}) == [1, 3]  # verify's runs, at batch 1 and 3
    for ids, mask in fed:
        assert _is_padding(mask), mask  # was: values in [0, 8), an attention mask no tokenizer makes
        assert ids.min() >= 0 and ids.max() < VOCAB
    assert max(int(ids.max()) for ids, _ in fed) >= 8  # was: ids from the examples' [0, 8) only


def test_the_report_and_the_manifest_say_how_each_input_was_drawn(exported) -> None:
    _, _, result = exported
    drawn = result.parity.inputs
    assert drawn["attention_mask"].startswith(MASK_DRAW) and "attention_mask" in drawn["attention_mask"]
    assert drawn["input_ids"].startswith(f"integers in [0, {VOCAB}): indices of Gather")
    manifest = json.loads(Path(f"{result.path}.json").read_text())
    assert manifest["parity"]["inputs"] == drawn and manifest["parity"]["seed"] == 0


def test_compare_draws_as_verify_did(exported) -> None:
    """One analysis: compare with the same module and examples draws each input as verify did, and agrees."""
    module, args, result = exported
    report = portable.compare(result.path, module, example_inputs=args, device="cpu", compile_mode=None,
                              providers="cpu", batches=[1, 3], seed=0, timing=None)
    assert report.passed, report.failures
    assert report.setup["drawn"] == result.parity.inputs
    by_batch = {p.batch: max(o.stats.max_abs for o in p.outputs) for p in report.parity}
    assert by_batch == {d["batch"]: d["max_abs_diff"] for d in result.parity.details}
