"""Input specifications (``-i NAME=1x3x224x224[:dtype]``), example tensors and batch handling."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portable.errors import UsageError

if TYPE_CHECKING:
    import torch

__all__ = ["TRACE_BATCH", "InputSpec", "parse_batch", "parse_input", "tree_map_tensors", "with_batch"]

_INPUT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\d+(?:x\d+)*)(?::([a-z0-9]+))?$")
_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool")
# torch specializes a dim whose example size is 0 or 1: a dynamic batch is traced at 2.
TRACE_BATCH = 2


@dataclass(frozen=True)
class InputSpec:
    """One model input as given on the command line."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    def tensor(self, batch: int | None = None, seed: int = 0) -> torch.Tensor:
        """A seeded random tensor of this spec (dim 0 replaced by ``batch`` when given)."""
        import torch

        shape = (batch, *self.shape[1:]) if batch is not None and self.shape else self.shape
        return random_like(shape, getattr(torch, self.dtype), seed)


def random_like(shape: tuple[int, ...], dtype: Any, seed: int) -> torch.Tensor:
    """Seeded inputs: normal floats, small non-negative integers (valid indices), random bools."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    return torch.randint(0, 8, shape, generator=gen).to(dtype)


def parse_input(text: str) -> InputSpec:
    """``NAME=1x3x224x224[:dtype]`` -> :class:`InputSpec`; a usage error otherwise."""
    match = _INPUT.match(text.strip())
    if not match:
        raise UsageError(f"bad input {text!r}: expected NAME=1x3x224x224[:dtype]")
    name, dims, dtype = match.group(1), match.group(2), match.group(3) or "float32"
    if dtype not in _DTYPES:
        raise UsageError(f"bad input {text!r}: unknown dtype {dtype!r} (choose from {', '.join(_DTYPES)})")
    return InputSpec(name, tuple(int(d) for d in dims.split("x")), dtype)


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
