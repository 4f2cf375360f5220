"""transformers entries: the library's own model classes, small configs, random weights (seeded).

Every model is built with ``return_dict=False`` (tuples, not ``ModelOutput``); only where the
example inputs are not the forward's first parameters (GPT-2's second is the cache, not the mask)
does :class:`TensorOutputs` map them to keyword arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from bench.zoo.models_vision import SEED, image
from bench.zoo.registry import Built, Entry

__all__ = ["HF", "TensorOutputs", "tensor_outputs", "text_inputs"]

SEQ = 64
SMALL = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024}


def _wrapper_class() -> type:
    import torch

    class TensorOutputs(torch.nn.Module):
        """``model(**dict(zip(names, args)), **fixed)``, its tensors as a tuple."""

        def __init__(self, model: Any, names: tuple[str, ...], **fixed: Any) -> None:
            super().__init__()
            self.model, self.names, self.fixed = model, names, fixed

        # Named parameters, not *args: torch.export binds dynamic_shapes to the signature's parameters.
        def forward(self, x0: Any, x1: Any = None, x2: Any = None) -> tuple[Any, ...]:
            out = self.model(**dict(zip(self.names, (x0, x1, x2))), **self.fixed)
            values = out.to_tuple() if hasattr(out, "to_tuple") else tuple(out)
            return tuple(v for v in values if isinstance(v, torch.Tensor))

    return TensorOutputs


def TensorOutputs(model: Any, names: tuple[str, ...], **fixed: Any) -> Any:  # noqa: N802 - a class, built lazily
    return _wrapper_class()(model, names, **fixed)


def text_inputs(vocab: int, names: tuple[str, ...] = ("input_ids", "attention_mask"), batch: int = 2,
                seq: int = SEQ) -> tuple[Any, ...]:
    """Token ids in the vocabulary, an all-ones attention mask, zero token types."""
    import torch

    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(SEED))
    made = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    return tuple(made[n] for n in names)


def _hf(model_class: str, config_class: str, config: dict[str, Any], inputs: Callable[[Any], tuple[Any, ...]],
        names: tuple[str, ...], attn: str | None = None, wrap: bool = False, **fixed: Any) -> Built:
    import torch

    from bench.zoo.tvops import register_torchvision_ops

    register_torchvision_ops()  # transformers imports torchvision (image processors) when it is installed
    import transformers

    torch.manual_seed(SEED)
    cfg = getattr(transformers, config_class)(**config, **fixed)
    # tuples of tensors, no wrapper needed where the inputs are the forward's first parameters; ``wrap``: a
    # model whose own code needs return_dict (SegFormer reads outputs.hidden_states) keeps it, and the wrapper
    cfg.return_dict = wrap
    kwargs = {"attn_implementation": attn} if attn else {}
    model = getattr(transformers, model_class)._from_config(cfg, **kwargs).eval()
    return Built(TensorOutputs(model, names).eval() if wrap else tensor_outputs(model, names), inputs(cfg), names)


def tensor_outputs(model: Any, names: tuple[str, ...]) -> Any:
    """The model itself when ``names`` are its forward's first parameters (findings then point into the
    library's code, not into a wrapper's forward), else :class:`TensorOutputs` around it."""
    import inspect

    first = list(inspect.signature(model.forward).parameters)[:len(names)]
    return model if first == list(names) else TensorOutputs(model, names).eval()


def _text(model_class: str, config_class: str, config: dict[str, Any], names: tuple[str, ...] = ("input_ids", "attention_mask"),
          **kwargs: Any) -> Callable[[], Built]:
    return partial(_hf, model_class, config_class, config, lambda cfg: text_inputs(cfg.vocab_size, names), names, **kwargs)


def _pixels(model_class: str, config_class: str, config: dict[str, Any], size: int = 224, **kwargs: Any) -> Callable[[], Built]:
    return partial(_hf, model_class, config_class, config, lambda _cfg: (image(size),), ("pixel_values",), **kwargs)


def _audio(model_class: str, config_class: str, config: dict[str, Any], shape: tuple[int, ...], name: str,
           encoder: bool = False) -> Callable[[], Built]:
    def build() -> Built:
        import torch

        built = _hf(model_class, config_class, config, lambda _cfg: (), (name,))
        module = built.module
        if encoder:  # WhisperModel -> its encoder, wrapped the same way
            module = tensor_outputs(module.model.get_encoder(), (name,))
        signal = torch.randn(2, *shape, generator=torch.Generator().manual_seed(SEED))
        return Built(module, (signal,), (name,))

    return build


_DECODER = {"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 8000, "max_position_embeddings": 256, "use_cache": False}

HF: tuple[Entry, ...] = (
    Entry("hf_bert", "transformers", "encoder", _text("BertModel", "BertConfig", SMALL,
                                                       ("input_ids", "attention_mask", "token_type_ids"))),
    Entry("hf_distilbert", "transformers", "encoder", _text("DistilBertModel", "DistilBertConfig",
                                                             {"dim": 256, "n_layers": 4, "n_heads": 4, "hidden_dim": 1024})),
    Entry("hf_roberta", "transformers", "encoder", _text("RobertaModel", "RobertaConfig", SMALL)),
    Entry("hf_deberta_v2", "transformers", "encoder", _text("DebertaV2Model", "DebertaV2Config", SMALL)),
    Entry("hf_electra", "transformers", "encoder", _text("ElectraModel", "ElectraConfig", SMALL | {"embedding_size": 128})),
    Entry("hf_albert", "transformers", "encoder", _text("AlbertModel", "AlbertConfig", SMALL | {"embedding_size": 128})),
    Entry("hf_vit", "transformers", "encoder", _pixels("ViTModel", "ViTConfig", SMALL)),
    Entry("hf_clip_text", "transformers", "encoder", _text("CLIPTextModel", "CLIPTextConfig", SMALL)),
    Entry("hf_clip_vision", "transformers", "encoder", _pixels("CLIPVisionModel", "CLIPVisionConfig", SMALL | {"patch_size": 32})),
    Entry("hf_whisper_encoder", "transformers", "encoder", _audio(
        "WhisperForConditionalGeneration", "WhisperConfig",
        {"d_model": 256, "encoder_layers": 4, "decoder_layers": 1, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
         "encoder_ffn_dim": 1024, "decoder_ffn_dim": 1024, "max_source_positions": 750}, (80, 1500), "input_features", encoder=True),
          note="WhisperForConditionalGeneration's encoder; 15 s of 80-bin log-mel frames"),
    Entry("hf_wav2vec2", "transformers", "encoder", _audio(
        "Wav2Vec2Model", "Wav2Vec2Config", SMALL | {"num_hidden_layers": 2}, (16000,), "input_values"),
          note="1 s of 16 kHz audio"),
    Entry("hf_segformer", "transformers", "segmentation",
          _pixels("SegformerForSemanticSegmentation", "SegformerConfig", {}, wrap=True),
          note="SegformerConfig() is MiT-b0"),
    Entry("hf_swin", "transformers", "encoder",
          _pixels("SwinModel", "SwinConfig", {"embed_dim": 48, "depths": [2, 2, 2, 2]}, wrap=True),
          expected="refused: PORT104", note="torch's decomposition fails in modeling_swin.py (bare torch.onnx too)"),
    Entry("hf_t5_encoder", "transformers", "encoder", _text(
        "T5EncoderModel", "T5Config", {"d_model": 256, "num_layers": 4, "num_heads": 4, "d_ff": 1024, "d_kv": 64},
        attn="eager"), note='attn_implementation="eager" (the known remedy for the sdpa path, see hf_t5_encoder_sdpa)'),
    Entry("hf_t5_encoder_sdpa", "transformers", "encoder", _text(
        "T5EncoderModel", "T5Config", {"d_model": 256, "num_layers": 4, "num_heads": 4, "d_ff": 1024, "d_kv": 64}),
          expected="refused: PORT104", note="default attention: torch's decomposition fails (bare torch.onnx too)"),
    Entry("hf_gpt2", "transformers", "decoder", _text("GPT2Model", "GPT2Config",
                                                      {"n_layer": 4, "n_embd": 256, "n_head": 4, "n_positions": 256,
                                                       "use_cache": False})),
    Entry("hf_llama", "transformers", "decoder", _text("LlamaModel", "LlamaConfig", _DECODER)),
    Entry("hf_mistral", "transformers", "decoder", _text("MistralModel", "MistralConfig", _DECODER | {"sliding_window": 32})),
    Entry("hf_qwen2", "transformers", "decoder", _text("Qwen2Model", "Qwen2Config", _DECODER)),
)
