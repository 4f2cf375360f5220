"""Tiny-config transformers architectures of the zoo (docs/zoo.md) through ``portable.export``.

Each model is the library's own class (2 layers, hidden 64, small images, random weights),
exported with a dynamic batch, then checked: dim 0 of every input and output is the batch
symbol, the export's verify compared ONNX Runtime with eager at batch 1 and 3, ``portable
validate`` passes on the written file, and the outputs are not degenerate (a zero output would
make the parity proof empty). transformers only, so CI needs no torchvision/timm.
"""

from __future__ import annotations

from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import portable  # noqa: E402

SEQ, VOCAB = 16, 1000
TEXT = {"vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
        "max_position_embeddings": 64}
DECODER = TEXT | {"num_key_value_heads": 1}
PIXELS = {"image_size": 32, "patch_size": 8, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 128}


class TensorOutputs(torch.nn.Module):
    """The model called with keyword inputs; its ``ModelOutput``'s tensors as a tuple."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...], **fixed: object) -> None:
        super().__init__()
        self.model, self.names, self.fixed = model, names, fixed

    # Named parameters, not *args: torch.export binds dynamic_shapes to the signature's parameters.
    def forward(self, x0: torch.Tensor, x1: torch.Tensor | None = None, x2: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.names, (x0, x1, x2))), **self.fixed)
        return tuple(v for v in out.to_tuple() if isinstance(v, torch.Tensor))


def _text(names: tuple[str, ...] = ("input_ids", "attention_mask")) -> tuple[torch.Tensor, ...]:
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(0))
    made = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    return tuple(made[n] for n in names)


def _image(size: int = 32) -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0)),)


# name -> (model class, config class, config, input names, extra forward kwargs)
CASES = {
    "bert": ("BertModel", "BertConfig", TEXT, ("input_ids", "attention_mask", "token_type_ids"), {}),
    "distilbert": ("DistilBertModel", "DistilBertConfig",
                   {"vocab_size": VOCAB, "dim": 64, "n_layers": 2, "n_heads": 2, "hidden_dim": 128}, None, {}),
    "roberta": ("RobertaModel", "RobertaConfig", TEXT | {"max_position_embeddings": 66}, None, {}),
    "albert": ("AlbertModel", "AlbertConfig", TEXT | {"embedding_size": 32}, None, {}),
    "electra": ("ElectraModel", "ElectraConfig", TEXT | {"embedding_size": 32}, None, {}),
    "gpt2": ("GPT2Model", "GPT2Config", {"vocab_size": VOCAB, "n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": 64},
             None, {"use_cache": False}),
    "llama": ("LlamaModel", "LlamaConfig", DECODER, None, {"use_cache": False}),
    "deberta_v2": ("DebertaV2Model", "DebertaV2Config", TEXT, None, {}),
    "vit": ("ViTModel", "ViTConfig", PIXELS, ("pixel_values",), {}),
    "clip_vision": ("CLIPVisionModel", "CLIPVisionConfig", PIXELS, ("pixel_values",), {}),
    "convnext": ("ConvNextModel", "ConvNextConfig", {"hidden_sizes": [16, 32, 48, 64], "depths": [1, 1, 1, 1]},
                 ("pixel_values",), {}),
}


def build(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], tuple[str, ...]]:
    model_class, config_class, config, names, fixed = CASES[name]
    names = names or ("input_ids", "attention_mask")
    torch.manual_seed(0)
    model = getattr(transformers, model_class)._from_config(getattr(transformers, config_class)(**config)).eval()
    args = _image(64 if name == "convnext" else 32) if names == ("pixel_values",) else _text(names)
    return TensorOutputs(model, names, **fixed).eval(), args, names


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_exports_with_a_dynamic_batch(name: str, tmp_path: Path) -> None:
    module, args, names = build(name)
    path = tmp_path / f"{name}.onnx"
    result = portable.export(module, args, path, batch="dynamic", input_names=names)
    assert result.parity is not None and result.parity.ok and result.parity.batches == (1, 3), result.parity
    assert portable.validate(path).ok
    _assert_batch_symbol(path)
    _assert_not_degenerate(module, args)


def _assert_batch_symbol(path: Path) -> None:
    import onnx

    graph = onnx.load(str(path)).graph
    for value in (*graph.input, *graph.output):
        dims = value.type.tensor_type.shape.dim
        assert dims[0].dim_param == "batch", f"{value.name}: dim 0 is {dims[0]}"
        assert all(d.HasField("dim_value") for d in dims[1:]), f"{value.name}: a non-batch dim is symbolic"


def _assert_not_degenerate(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
    with torch.no_grad():
        outputs = module(*args)
    for index, out in enumerate(outputs):
        assert out.float().pow(2).mean().sqrt() > 1e-3, f"output {index} is degenerate: parity on it proves nothing"


def test_a_zero_output_is_caught_as_degenerate() -> None:
    class Zeros(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (x * 0.0,)

    with pytest.raises(AssertionError, match="degenerate"):
        _assert_not_degenerate(Zeros(), _image())
