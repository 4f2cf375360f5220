"""Exporting again in a fresh process gives byte-identical files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from portable.exporters.spec_export import export_spec
for name in ("cnn", "transformer"):
    export_spec(f"{sys.argv[1]}/fixtures/models/{name}.py:build", f"{sys.argv[2]}/{name}.onnx", verify=False)
"""


def test_fresh_process_export_is_byte_identical(cnn_export, transformer_export, tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # a different str hash than this process
    subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT), str(tmp_path)], check=True, env=env,
                   cwd=tmp_path, capture_output=True, timeout=300)
    for result in (cnn_export, transformer_export):
        again = tmp_path / result.path.name
        assert again.read_bytes() == result.path.read_bytes(), result.path.name


def test_fingerprint_ignores_doc_strings_and_producer_but_not_weights(cnn_export):
    import onnx

    from portable.exporters.fingerprint import fingerprint

    proto = onnx.load(str(cnn_export.path))
    assert fingerprint(proto) == cnn_export.fingerprint
    proto.producer_version, proto.doc_string = "9.9", "changed"
    proto.graph.node[0].doc_string = "changed"
    assert fingerprint(proto) == cnn_export.fingerprint
    tensor = max(proto.graph.initializer, key=lambda t: len(t.raw_data))
    tensor.raw_data = bytes([tensor.raw_data[0] ^ 1]) + tensor.raw_data[1:]
    assert fingerprint(proto) != cnn_export.fingerprint
    proto = onnx.load(str(cnn_export.path))
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    assert fingerprint(proto) != cnn_export.fingerprint
