"""Input specifications (``-i NAME=1x3x224x224[:dtype]``), example tensors and batch handling."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portable.errors import UsageError

if TYPE_CHECKING:
    import torch

__all__ = ["CLI_INT_RANGE", "TRACE_BATCH", "CliInput", "parse_batch", "parse_input", "tree_map_tensors", "with_batch"]

_INPUT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\d+(?:x\d+)*)(?::([a-z0-9]+))?$")
_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool")
# torch specializes a dim whose example size is 0 or 1: a dynamic batch is traced at 2.
TRACE_BATCH = 2


# integers of -i inputs: small non-negative values, valid as indices into any table of 8 or more
CLI_INT_RANGE = (0, 8)


@dataclass(frozen=True)
class CliInput:
    """One model input as given on the command line (``-i NAME=1x3x224x224[:dtype]``).

    Not :class:`portable.runners.inputs.InputSpec` (a graph input as ONNX declares it, with
    symbolic dims); this one is what the user asked to trace with.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    dtype_given: bool = True  # False: ``-i NAME=1x12`` without ``:dtype``, float32 unless the example says otherwise

    def tensor(self, batch: int | None = None, seed: int = 0) -> torch.Tensor:
        """A seeded random tensor of this input (dim 0 replaced by ``batch`` when given), drawn by the
        runners' generator (:func:`portable.runners.inputs.make_feeds`): normal floats, integers in
        :data:`CLI_INT_RANGE`, fair bools."""
        import torch

        from portable.runners.inputs import InputSpec, make_feeds

        shape = (batch, *self.shape[1:]) if batch is not None and self.shape else self.shape
        spec = InputSpec(self.name, self.dtype, shape)
        array = make_feeds([spec], shape[0] if shape else 1, seed=seed, int_range=CLI_INT_RANGE)[self.name]
        return torch.from_numpy(array).to(getattr(torch, self.dtype))


def parse_input(text: str) -> CliInput:
    """``NAME=1x3x224x224[:dtype]`` -> :class:`CliInput`; a usage error otherwise."""
    match = _INPUT.match(text.strip())
    if not match:
        raise UsageError(f"bad input {text!r}: expected NAME=1x3x224x224[:dtype]")
    name, dims, dtype = match.group(1), match.group(2), match.group(3) or "float32"
    if dtype not in _DTYPES:
        raise UsageError(f"bad input {text!r}: unknown dtype {dtype!r} (choose from {', '.join(_DTYPES)})")
    return CliInput(name, tuple(int(d) for d in dims.split("x")), dtype, dtype_given=match.group(3) is not None)


def parse_batch(text: str | int) -> str | int:
    """``dynamic`` or a positive integer."""
    if text == "dynamic":
        return "dynamic"
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UsageError(f"bad --batch {text!r}: expected 'dynamic' or a positive integer") from None
    if value < 1:
        raise UsageError(f"bad --batch {text!r}: expected 'dynamic' or a positive integer")
    return value


def tree_map_tensors(fn: Callable[[torch.Tensor], Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``fn`` applied to every tensor leaf of ``args`` (lists, tuples, dicts, nested); other leaves kept."""
    import torch
    from torch.utils import _pytree

    return tuple(_pytree.tree_map(lambda a: fn(a) if isinstance(a, torch.Tensor) else a, arg) for arg in args)


def with_batch(tensor: torch.Tensor, batch: int) -> torch.Tensor:
    """The tensor with dim 0 resized to ``batch`` (rows repeated cyclically)."""
    import torch

    if tensor.dim() == 0 or tensor.shape[0] == batch:
        return tensor
    index = torch.arange(batch) % max(tensor.shape[0], 1)
    return tensor.index_select(0, index).contiguous()
