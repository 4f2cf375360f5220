"""Pre-export rules (PORT101+): what torch.export and dynamo say about the model's Python code.

They are :class:`portable.findings.Finding` like the validators' rules, so a precheck
result is a :class:`portable.report.ValidationReport` that every formatter renders.
"""

from __future__ import annotations

import inspect

from portable.findings import Finding, Location, Severity, SourceLocation
from portable.ruleinfo import RuleInfo, summary_of

__all__ = ["PRECHECK_RULES", "precheck_finding"]


def _rule(rule_id: str, name: str, severity: Severity, hint: str, docs: str) -> RuleInfo:
    text = inspect.cleandoc(docs)
    return RuleInfo(id=rule_id, name=name, severity=severity, summary=summary_of(text), docs=text, hint=hint,
                    phase="pre-export")


PRECHECK_RULES: dict[str, RuleInfo] = {r.id: r for r in (
    _rule("PORT101", "data-dependent-branch", Severity.ERROR,
          "decide the branch from configuration, or compute both sides and select with torch.where", """
        No Python branch decided by tensor values: ``torch.export`` stops on it.

        *Why*: an exported graph is one dataflow graph; ``if x.sum() > 0:`` in ``forward``
        needs the value of ``x`` while tracing, which ``torch.export`` does not have (it
        raises ``GuardOnDataDependentSymNode``), so there is no graph to export.

        *Bad*: ``if x.mean() > 0: return self.a(x)`` or ``while (x > 0).any(): ...``.

        *Fix*: decide the branch in Python from configuration, not from tensors; or compute
        both sides and select with ``torch.where(cond, a(x), b(x))``.
        """),
    _rule("PORT102", "graph-break", Severity.WARNING,
          "remove the construct dynamo cannot trace (print, data-dependent Python, unsupported calls)", """
        No graph break: ``torch._dynamo`` can trace ``forward`` in one graph.

        *Why*: at a graph break dynamo ends the graph and runs the Python itself; the
        compiled model (the ``torch.compile`` reference ``portable compare`` runs) is then
        several graphs with Python between them, and the construct (a print, a Python value
        read from a tensor) is what no exported graph can keep.

        *Bad*: ``print(x.shape)``, ``x.item()`` used in Python, a call into a C extension or
        an unsupported library inside ``forward``.

        *Fix*: remove the construct from ``forward`` (log outside it), keep values as tensors,
        or move the unsupported call out of the traced code.
        """),
    _rule("PORT103", "batch-specialized", Severity.ERROR,
          "size buffers and views from configuration or x.shape[0], not the example batch; or export with --batch N", """
        The batch dim stays dynamic: the model's code does not fix it to the example's batch.

        *Why*: a portable model has one batch symbol on dim 0 of its inputs and outputs; code
        that builds a tensor from the example's batch size (a buffer of that size, a
        ``view(8, ...)``) makes torch.export specialize the batch, and the exported graph
        then only runs at that batch.

        *Bad*: ``self.register_buffer("h", torch.zeros(8, 16))`` added to a batch-8 input, or
        ``x.view(8, -1)``.

        *Fix*: size tensors from ``x.shape[0]`` or configuration (``x.view(x.shape[0], -1)``,
        ``h.expand(x.shape[0], -1)``); or export a fixed batch with ``--batch N``.
        """),
    _rule("PORT104", "export-failed", Severity.ERROR,
          "make the model traceable by torch.export (see the torch message)", """
        ``torch.export`` captures the model: no other failure stops it.

        *Why*: the export starts from ``torch.export``'s program; when it fails for a reason
        that is not a data-dependent branch (PORT101) or a specialized batch (PORT103), there
        is no program to translate, and the torch message says why.

        *Bad*: an operator torch.export does not support, an input of an unsupported type
        (a custom object), a call into a library torch cannot trace.

        *Fix*: follow the torch message quoted in the finding: replace the unsupported
        construct, pass tensors (or tuples/dicts of tensors), or export a wrapper module that
        hides what cannot be traced.
        """),
    _rule("PORT105", "control-flow-operator", Severity.ERROR,
          "torch.cond/while_loop export to If/Loop (PORT004): compute both sides and select with torch.where", """
        No ``torch.cond`` / ``while_loop`` / ``map`` / ``scan`` in the captured program.

        *Why*: these higher-order operators export to ONNX ``If`` and ``Loop``, which a
        portable model may not hold (PORT004): NPU and many GPU compilers need one static
        dataflow graph.

        *Bad*: ``torch.cond(x.sum() > 0, f, g, (x,))``; ``torch._higher_order_ops.while_loop``.

        *Fix*: compute both branches and select with ``torch.where``; unroll a loop whose
        count is fixed; decide the branch in Python from configuration.
        """),
    _rule("PORT106", "data-dependent-shape", Severity.ERROR,
          "avoid ops whose output size depends on values (nonzero, masked_select, unique); use masks of fixed size", """
        No op whose output size depends on tensor values.

        *Why*: the size of ``nonzero``'s or ``masked_select``'s output is known only when the
        model runs; the exported graph then has a data-dependent shape (PORT006), which
        static compilers reject and which hides every later shape.

        *Bad*: ``x[x > 0]``, ``torch.nonzero(mask)``, ``torch.unique(ids)``.

        *Fix*: keep fixed sizes with masks: ``torch.where(x > 0, x, 0)``, a multiplication by
        the mask, or ``topk`` with a fixed ``k``.
        """),
    _rule("PORT107", "static-cache-unsupported", Severity.ERROR,
          "export a transformers causal LM whose layers all keep keys and values (full or sliding attention)", """
        ``--task text-generation``: the model's cache can be a static KV cache held as graph inputs.

        *Why*: the text-generation export makes two fixed-shape graphs over a cache of C slots per
        layer (``past_key_i`` / ``past_value_i``, ``[batch, kv_heads, C, head_dim]``), built with
        transformers' ``StaticCache``. A model that takes no ``cache=`` argument, has no config to
        size the cache from, or keeps another state (Mamba's convolution and SSM state, linear
        attention) has no such cache, and a graph made without one would recompute every token.

        *Bad*: ``portable export model.py:mamba --task text-generation`` (``MambaForCausalLM``);
        a plain ``nn.Module`` LM whose ``forward`` takes only ``input_ids``.

        *Fix*: export a transformers causal LM (``AutoModelForCausalLM``) of an attention
        architecture, or give the module the same protocol (``forward(input_ids, position_ids,
        attention_mask, cache=...)`` returning ``.logits``, a ``config``); export a recurrent model
        without ``--task``, as one forward over the whole sequence.
        """),
)}


def precheck_finding(rule_id: str, message: str, source: SourceLocation | None = None,
                     value: str | None = None, hint: str | None = None) -> Finding:
    """A finding of one of the :data:`PRECHECK_RULES`, located at the user's source line
    (``hint``: a remedy known for this case, instead of the rule's general one)."""
    rule = PRECHECK_RULES[rule_id]
    location = Location(graph="torch.export", value=value, source=source)
    return Finding(rule.id, rule.name, rule.severity, message, hint or rule.hint, location)
