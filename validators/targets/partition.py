"""The partition estimate: how many subgraphs an execution provider would be given, as ONNX Runtime's
mobile usability checker estimates it.

:func:`partition` is ``usability_checker._check_partitioning_for_graph`` (itself a port of
``CreateSupportedPartitionNodeGroups`` in ``onnxruntime/core/providers/partitioning_utils.cc``)
over node indices. It is written out here rather than called because the checker decides support
by op type alone (this estimate also weighs op versions and element types), patches
``onnx.NodeProto.__hash__`` for the whole process, and needs onnxruntime imported on the validate
path. Two deliberate differences: consumers are visited in graph order (the checker iterates a set
of nodes hashed by ``id()``, an order that changes from run to run), and an empty optional input is
not a value (the checker counts ``""`` as a value without a fixed shape). ``tests/validators/
test_targets.py`` checks the counts against the checker's own function.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Partitioning", "partition"]


@dataclass(frozen=True)
class Partitioning:
    """Which nodes the target would take, and in how many groups."""

    nodes: int
    groups: tuple[tuple[int, ...], ...]  # node indices of each partition, in the order they close
    unsupported: tuple[int, ...]  # nodes left to the fallback (or that stop the load)

    @property
    def partitions(self) -> int:
        return len(self.groups)

    @property
    def supported(self) -> int:
        return sum(len(g) for g in self.groups)


def partition(count: int, producers: Sequence[frozenset[int]], consumers: Sequence[frozenset[int]],
              supported: Callable[[int], bool], absent: frozenset[int] = frozenset()) -> Partitioning:
    """Group the supported nodes of a graph of ``count`` nodes into partitions: a topological walk
    that grows the current group while it can, and defers an unsupported node on the group's border
    to after the group closes (so the group never depends on it). ``absent`` nodes are not in the
    graph the runtime partitions (it made them initializers at load): what they feed reads data."""
    in_degree = [len(producers[i] - absent) for i in range(count)]
    ready = deque(i for i in range(count) if in_degree[i] == 0 and i not in absent)
    later: deque[int] = deque()
    groups: list[tuple[int, ...]] = []
    group: list[int] = []
    border: set[int] = set()
    unsupported: list[int] = []
    while ready or later:
        if not ready:
            if group:
                groups.append(tuple(group))
            group, border = [], set()
            ready, later = later, deque()
            continue
        node = ready.popleft()
        if supported(node):
            group.append(node)
            border.discard(node)
            border.update(consumers[node])
        elif node in border:
            later.append(node)  # processed with the next group: its consumers stay blocked until then
            continue
        else:
            unsupported.append(node)
        for consumer in sorted(consumers[node]):
            in_degree[consumer] -= 1
            if in_degree[consumer] == 0:
                ready.append(consumer)
    if group:
        groups.append(tuple(group))
    return Partitioning(nodes=count - len(absent), groups=tuple(groups), unsupported=tuple(sorted(unsupported)))
