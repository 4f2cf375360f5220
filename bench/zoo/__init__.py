"""The model zoo: real torchvision, timm and transformers architectures through ``portable export``.

``make zoo`` (or ``python -m bench.zoo.run [--only bert,gpt2]``) runs each model of
:mod:`bench.zoo.registry` in its own subprocess (:mod:`bench.zoo.worker`), caches one JSON per
model in ``bench/results/zoo/`` and rebuilds ``docs/zoo.md`` / ``docs/zoo.json`` from the cache
(:mod:`bench.zoo.report`). Not part of the package: nothing in ``portable`` imports it.
"""

__all__: list[str] = []
