"""Rules over a prefill/decode pair of a text-generation export (PORT301+), and :func:`validate_pair`.

One module per rule, listed explicitly in :data:`PAIR_RULES`; their records for the rule catalogue
(:mod:`portable.catalogue`) in :data:`PAIR_RULE_INFOS`. They read two graphs at once, so they run
through :func:`validate_pair` (``portable validate --pair PREFILL DECODE``), beside the model rules
each graph passes on its own; usable on pairs from elsewhere (Optimum's, Qualcomm AI Hub's names).
"""

from __future__ import annotations

from portable.ruleinfo import RuleInfo
from portable.validators.pairs.base import PairRule
from portable.validators.pairs.port301_shared_weights import SharedWeights
from portable.validators.pairs.port302_cache_length import CacheLength
from portable.validators.pairs.port303_cache_agreement import CacheAgreement
from portable.validators.pairs.port304_step_io import StepIO

__all__ = ["PAIR_RULES", "PAIR_RULE_INFOS", "PairRule"]

PAIR_RULES: tuple[type[PairRule], ...] = (
    SharedWeights,
    CacheLength,
    CacheAgreement,
    StepIO,
)

PAIR_RULE_INFOS: tuple[RuleInfo, ...] = tuple(rule.info() for rule in PAIR_RULES)
