"""PORT303 pair-cache-agreement."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Location, Severity
from portable.validators.pairs.base import PairFinding, PairRule
from portable.validators.pairs.context import CacheValue, GraphSide, PairContext

__all__ = ["CacheAgreement"]


class CacheAgreement(PairRule):
    """The two graphs agree on the cache: the same layers, dtypes and shapes, an output for every input.

    *Why*: the host allocates the cache once and hands it from call to call: the prefill graph's
    ``present_*`` outputs become the decode graph's ``past_*`` inputs, and each decode step's
    outputs its next inputs. That plain loop works only if both graphs name the same layers' keys
    and values, with one dtype and one shape (apart from the sequence axis where the past holds
    C - T slots), and if each graph gives back every cache tensor it takes, in a shape the host can
    store: the whole cache (same shape) or the new slice (T slots).

    *Bad*: a decode graph with an fp16 cache beside an fp32 prefill graph; ``past_key_3`` without
    ``present_key_3``; a prefill graph with 12 layers' cache and a decode graph with 11.

    *Fix*: export both graphs from one model at one precision (``portable export SPEC --task
    text-generation``); do not convert or prune one graph of the pair alone.
    """

    id = "PORT303"
    name = "pair-cache-agreement"
    severity = Severity.ERROR
    message = "{role} graph: {problem}{more}"
    hint = "export both graphs from one model at one precision; convert or edit the pair together"

    def check_pair(self, ctx: PairContext) -> Iterator[PairFinding]:
        """One finding per graph and kind of disagreement, at its first cache value."""
        prefill, decode = ctx.sides
        if not prefill.cache_inputs and not decode.cache_inputs:
            yield decode, self.finding(Location(), role="decode", more="", problem="neither graph has cache inputs "
                                       "(past_key_0, past_key_values.0.key or past_key_0_in)")
            return
        problems: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (role, kind) -> [(value, problem)]
        for slot in sorted(set(prefill.cache_inputs) | set(decode.cache_inputs)):
            for role, kind, value, problem in _across(prefill, decode, slot):
                problems.setdefault((role, kind), []).append((value, problem))
        for side in ctx.sides:
            for slot, cached in sorted(side.cache_inputs.items()):
                returned = _returned(side, slot, cached)
                if returned:
                    problems.setdefault((side.role, "returned"), []).append((cached.name, returned))
        for (role, _), found in problems.items():
            more = f" (and {len(found) - 1} more cache value(s) alike)" if len(found) > 1 else ""
            yield ctx.side(role), self.finding(Location(value=found[0][0]), role=role, problem=found[0][1], more=more)


def _across(prefill: GraphSide, decode: GraphSide, slot: tuple[int, str]) -> Iterator[tuple[str, str, str, str]]:
    """(role, kind, value, problem) where the graphs' cache inputs for ``slot`` disagree."""
    a, b = prefill.cache_inputs.get(slot), decode.cache_inputs.get(slot)
    if a is None or b is None:
        lacking, having = (prefill, b) if a is None else (decode, a)
        assert having is not None
        yield (lacking.role, "missing", having.name, f"no cache input for layer {slot[0]}'s {slot[1]}s, which the other "
               f"graph takes as {having.describe()}")
    elif a.dtype != b.dtype or not _same_but_sequence(a, b, prefill, decode):
        yield "decode", "differs", b.name, f"cache input {b.describe()} differs from the prefill graph's {a.describe()}"


def _same_but_sequence(a: CacheValue, b: CacheValue, prefill: GraphSide, decode: GraphSide) -> bool:
    """Equal dims, or equal but on one axis where the past holds C - T slots in each graph."""
    if a.dims == b.dims:
        return True
    if len(a.dims) != len(b.dims) or prefill.tokens is None or decode.tokens is None:
        return False
    apart = [i for i, (x, y) in enumerate(zip(a.dims, b.dims)) if x != y]
    if len(apart) != 1:
        return False
    x, y = a.dims[apart[0]], b.dims[apart[0]]
    return isinstance(x, int) and isinstance(y, int) and x + prefill.tokens == y + decode.tokens


def _returned(side: GraphSide, slot: tuple[int, str], value: CacheValue) -> str | None:
    """Why the graph's output for this cache input cannot be stored back, or None."""
    out = side.cache_outputs.get(slot)
    if out is None:
        return f"cache input {value.describe()} has no cache output (present_*): the host cannot carry the cache on"
    if out.dtype != value.dtype:
        return f"cache output {out.describe()} has another dtype than its input {value.describe()}"
    slices = side.tokens is not None and len(out.dims) == len(value.dims) and sum(
        x != y for x, y in zip(out.dims, value.dims)) == 1 and side.tokens in out.dims
    if out.dims != value.dims and not slices:
        return (f"cache output {out.describe()} is neither the whole cache {value.describe()} nor the new slice of "
                f"{side.tokens} slot(s)")
    return None
