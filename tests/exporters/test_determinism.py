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


def test_the_fingerprint_of_a_lean_parse_is_the_files(tmp_path):
    """Exports hash the lean parse validation made (large payloads as views of the bytes): the same
    fingerprint as the whole file's, and a changed payload byte still changes it."""
    import onnx
    import torch

    import portable
    from portable.exporters.fingerprint import fingerprint
    from portable.validators.lean import parse_lean_bytes

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8)).eval()
    result = portable.export(module, (torch.randn(2, 256),), tmp_path / "wide.onnx", verify=False)
    data = bytearray(result.path.read_bytes())
    parsed = parse_lean_bytes(bytes(data), str(result.path))
    lean, payloads = parsed.proto, parsed.payload_views()
    assert payloads, "nothing stripped: the test would prove nothing"
    assert fingerprint(lean, payloads) == fingerprint(onnx.load_from_string(bytes(data))) == result.fingerprint
    assert fingerprint(lean) != result.fingerprint  # the stripped payloads are needed
    offset = bytes(data).find(next(iter(payloads.values())).tobytes())
    data[offset] ^= 1
    changed = parse_lean_bytes(bytes(data), str(result.path))
    assert fingerprint(changed.proto, changed.payload_views()) != result.fingerprint
