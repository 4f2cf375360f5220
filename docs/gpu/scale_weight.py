"""Write a copy of an ONNX model with one initializer scaled (the wrong-export case of the evidence).

    python3 docs/gpu/scale_weight.py IN.onnx OUT.onnx NAME[,FALLBACK...] FACTOR

The first of the comma-separated initializer names that the model has is scaled.
"""

from __future__ import annotations

import sys

import onnx
from onnx import numpy_helper


def main(source: str, target: str, names: str, factor: float) -> None:
    model = onnx.load(source)
    by_name = {init.name: init for init in model.graph.initializer}
    for name in names.split(","):
        init = by_name.get(name)
        if init is not None:
            array = numpy_helper.to_array(init)
            init.CopyFrom(numpy_helper.from_array((array * factor).astype(array.dtype), name))
            onnx.save(model, target)
            print(f"{name} x {factor} -> {target}")
            return
    weights = [n for n in by_name if "weight" in n][:20]
    raise SystemExit(f"none of the initializers {names!r}; weights include {weights}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
