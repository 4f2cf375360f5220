"""The zoo's int8 measurement (issue 24): ``portable.quantize`` on portable's own file, and whether
OpenVINO's CPU plugin loads and runs the int8 file (when openvino is installed).

Seeded calibration (32 samples; token ids from their embedding table, an all-ones mask) and 128
held-out samples: the figures are random data's, as the zoo's weights are random.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CALIBRATION", "HELD_OUT", "openvino_check", "quantized"]

CALIBRATION, HELD_OUT = 32, 128


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def quantized(path: Path, folder: Path) -> dict[str, Any]:
    """Quantize ``path``; the figures, or why it failed (``QuantizeFailed``: the findings or a budget)."""
    import portable

    out, start = folder / "int8.onnx", time.perf_counter()
    try:
        result = portable.quantize(path, out, samples=CALIBRATION, eval_samples=HELD_OUT, force=True)
    except portable.QuantizeFailed as exc:
        return {"ok": False, "message": str(exc), "findings": [f.rule_id for f in exc.result.findings],
                "seconds": round(time.perf_counter() - start, 1)}
    except Exception as exc:  # noqa: BLE001 - one model's failure is a figure
        return {"ok": False, "message": _line(exc), "seconds": round(time.perf_counter() - start, 1)}
    return {"ok": True, **_figures(result), "seconds": round(time.perf_counter() - start, 1),
            "openvino": openvino_check(out)}


def _figures(result: Any) -> dict[str, Any]:
    import portable

    top1 = [a.top1_agreement for a in result.accuracy if a.top1_agreement is not None]
    lat = result.latency
    worst = next((n for n in result.worst_nodes if n.qdq_sqnr_db is not None), None)
    return {"validate_ok": portable.validate(result.path).ok,
            "accuracy": [a.to_dict() for a in result.accuracy],
            "min_sqnr_db": round(min(a.sqnr_db for a in result.accuracy), 2),
            "top1_agreement": top1[0] if top1 else None, "ops": dict(result.ops),
            "latency_ratio_p50": round(lat.ratio_p50, 3), "batch": lat.batch,
            "float_p50_ms": round(lat.float_stats.p50_s * 1e3, 2), "int8_p50_ms": round(lat.int8_stats.p50_s * 1e3, 2),
            "worst_node": worst.to_dict() if worst else None}


def _feeds(path: Path) -> dict[str, np.ndarray]:
    import onnx

    from portable.quantization.data import index_ranges, seeded_samples
    from portable.runners.inputs import io_of_proto

    proto = onnx.load(str(path), load_external_data=False)
    samples = seeded_samples(io_of_proto(proto)[0], 2, seed=3, salt=0, batch=2, static=False,
                             int_ranges=index_ranges(proto))
    return samples.arrays


def openvino_check(path: Path, feeds: dict[str, np.ndarray] | None = None,
                   float_path: Path | None = None) -> dict[str, Any]:
    """OpenVINO reads the int8 file, compiles it for CPU and runs it: its outputs against ONNX Runtime's
    on the same int8 file (max abs, and the least SQNR over the outputs: two int8 runtimes round apart).
    ``feeds``: real inputs (default: seeded ones); ``float_path``: the float model, whose first output's
    argmax OpenVINO's int8 one is held to too (``top1_agreement_vs_float``, for ``[batch, classes]`` outputs)."""
    if importlib.util.find_spec("openvino") is None:
        return {"installed": False}
    import openvino as ov

    from portable.quantization.speed import cpu_session
    from portable.runners.openvino_runner import CONFIG  # f32 where the file is float: no bf16 on AMX/AVX-512 CPUs

    feeds = _feeds(path) if feeds is None else feeds
    try:
        compiled = ov.Core().compile_model(ov.Core().read_model(str(path)), "CPU", CONFIG)
        got = compiled(feeds)
    except Exception as exc:  # noqa: BLE001 - a refusal is the figure
        return {"installed": True, "version": ov.__version__, "loads": False, "error": _line(exc)}
    from portable.quantization.accuracy import sqnr_db

    expected = cpu_session(path).run(None, feeds)
    pairs = [(np.asarray(got[i]), e) for i, e in enumerate(expected)]
    out = {"installed": True, "version": ov.__version__, "loads": True, "runs": True,
           "max_abs_vs_onnxruntime": max(float(np.max(np.abs(a - e))) for a, e in pairs),
           "sqnr_vs_onnxruntime_db": round(min(sqnr_db(e, a) for a, e in pairs), 2)}
    if float_path is not None and pairs[0][0].ndim == 2:
        reference = cpu_session(float_path).run(None, feeds)[0]
        out["sqnr_vs_float_db"] = round(sqnr_db(reference, pairs[0][0]), 2)
        out["top1_agreement_vs_float"] = round(float((reference.argmax(1) == pairs[0][0].argmax(1)).mean()), 4)
    return out
