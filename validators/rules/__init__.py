"""The rule set: one module per rule, listed explicitly in :data:`ALL_RULES`; their records
for the rule catalogue (:mod:`portable.catalogue`) in :data:`RULE_INFOS`."""

from __future__ import annotations

from portable.ruleinfo import RuleInfo
from portable.validators.rules.base import Rule
from portable.validators.rules.port001_opset import OpsetVersion
from portable.validators.rules.port002_domains import DefaultDomainOnly
from portable.validators.rules.port003_known_ops import KnownOp
from portable.validators.rules.port004_control_flow import NoControlFlow
from portable.validators.rules.port005_sequences import NoSequenceTypes
from portable.validators.rules.port006_data_dependent import NoDataDependentShapes
from portable.validators.rules.port007_shape_computation import NoRuntimeShapeComputation
from portable.validators.rules.port008_io_shapes import StaticIOShapes
from portable.validators.rules.port009_static_values import StaticIntermediateShapes
from portable.validators.rules.port010_self_contained import SelfContained
from portable.validators.rules.port011_checker import OnnxChecker
from portable.validators.rules.port012_randomness import NoRandomness
from portable.validators.rules.port013_dtypes import AllowedDtypes
from portable.validators.rules.port014_ort_session import OrtSession
from portable.validators.rules.port015_finite_weights import FiniteWeights
from portable.validators.rules.port030_qdq_8bit import Qdq8Bit
from portable.validators.rules.port031_qdq_constants import QdqConstantParams
from portable.validators.rules.port032_qdq_per_axis import QdqPerAxisWeights
from portable.validators.rules.port201_target_ops import TargetOpSupport
from portable.validators.rules.port202_target_casts import TargetCasts
from portable.validators.rules.port203_target_partitions import TargetPartitions
from portable.validators.rules.port204_target_restrictions import TargetRestrictions

__all__ = ["ALL_RULES", "RULE_INFOS", "Rule", "get_rule"]

ALL_RULES: tuple[type[Rule], ...] = (
    OpsetVersion,
    DefaultDomainOnly,
    KnownOp,
    NoControlFlow,
    NoSequenceTypes,
    NoDataDependentShapes,
    NoRuntimeShapeComputation,
    StaticIOShapes,
    StaticIntermediateShapes,
    SelfContained,
    OnnxChecker,
    NoRandomness,
    AllowedDtypes,
    OrtSession,
    FiniteWeights,
    # the QDQ profile: on by default, they find nothing in a float model (no Q/DQ node)
    Qdq8Bit,
    QdqConstantParams,
    QdqPerAxisWeights,
    # per target (--target): the profiles of portable.validators.targets
    TargetOpSupport,
    TargetCasts,
    TargetPartitions,
    TargetRestrictions,
)

RULE_INFOS: tuple[RuleInfo, ...] = tuple(rule.info() for rule in ALL_RULES)

_BY_KEY = {r.id: r for r in ALL_RULES} | {r.name: r for r in ALL_RULES}


def get_rule(key: str) -> type[Rule]:
    """A rule by id (``PORT004``, any case) or name (``no-control-flow``); ``KeyError`` if none."""
    rule = _BY_KEY.get(key.upper()) or _BY_KEY.get(key.lower())
    if rule is None:
        raise KeyError(key)
    return rule
