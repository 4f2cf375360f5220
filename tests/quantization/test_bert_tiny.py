"""BERT, tiny (transformers' own BertModel: 2 layers, hidden 64), exported by portable, quantized with
a budget, validated: what a CI job on an encoder runs. The seeded token ids come from the
embedding table's rows, the mask is all ones; every output stays well above the budget."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import portable
from portable.quantization.data import index_ranges

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    import transformers

    config = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=128, max_position_embeddings=64, return_dict=False)
    torch.manual_seed(0)
    model = transformers.BertModel._from_config(config).eval()
    ids = torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(0))
    path = tmp_path_factory.mktemp("bert") / "bert.onnx"
    portable.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), path,
                    input_names=("input_ids", "attention_mask", "token_type_ids"))
    return path


@pytest.mark.slow
def test_bert_tiny_quantizes_validates_and_holds_its_budget(bert, tmp_path):
    result = portable.quantize(bert, tmp_path / "bert.int8.onnx", samples=32, eval_samples=64, min_sqnr=20.0,
                               latency=False)
    assert result.written and result.budgets_ok and portable.validate(result.path).ok
    assert [a.name for a in result.accuracy] == [o.name for o in onnx.load(str(bert)).graph.output]
    assert all(a.sqnr_db > 20.0 and a.rms > 1e-2 for a in result.accuracy)  # not degenerate, not exact
    assert len(result.worst_nodes) == 10
    # scope "auto" on a transformer: every MatMul reads int8 (both inputs behind a DequantizeLinear), the rest float
    proto = onnx.load(str(result.path))
    made = {o: n.op_type for n in proto.graph.node for o in n.output}
    matmuls = [n for n in proto.graph.node if n.op_type == "MatMul"]
    assert result.passes["scope"] == "linear" and len(matmuls) >= 8
    assert all(made.get(i) == "DequantizeLinear" for n in matmuls for i in n.input)
    assert not any(made.get(i) == "DequantizeLinear" for n in proto.graph.node if n.op_type == "Softmax" for i in n.input)
    # the embedding tables are quantized as uint8 with zero points near 128: measured without wrapping around
    assert all(n.qdq_sqnr_db > 25.0 for n in result.worst_nodes if n.qdq_sqnr_db is not None)
    assert {n.kind for n in result.worst_nodes} == {"activation", "weight"}


def test_token_ids_are_drawn_from_their_embedding_tables(bert):
    ranges = index_ranges(onnx.load(str(bert)))
    assert ranges == {"input_ids": (0, 1000), "token_type_ids": (0, 2)}  # the mask indexes no table: all ones
