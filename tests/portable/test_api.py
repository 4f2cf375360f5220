"""The Python API: one validate() for paths, protos and onnx-ir models; a cheap import."""

from __future__ import annotations

import subprocess
import sys

import onnx_ir as ir
import pytest
from support import rule_fixtures, save

import portable
from portable.errors import UsageError


def test_validate_accepts_path_proto_and_ir_model(tmp_path):
    proto = rule_fixtures.load("PORT004", "bad")
    path = save(proto, tmp_path / "m.onnx")
    reports = [portable.validate(path), portable.validate(proto), portable.validate(ir.serde.deserialize_model(proto))]
    assert [[f.rule_id for f in r.findings] for r in reports] == [["PORT004"]] * 3
    assert reports[0].path == str(path) and reports[1].path == "<memory>"
    assert all(r.exit_code == 1 and not r.ok for r in reports)


def test_validate_rejects_other_types():
    with pytest.raises(UsageError):
        portable.validate(42)


def test_policy_from_api():
    report = portable.validate(rule_fixtures.load("PORT013", "bad"), portable.Policy(strict=True))
    assert report.exit_code == 1
    assert portable.validate(rule_fixtures.load("PORT013", "bad")).exit_code == 0


def test_report_to_dict_round_trips_findings():
    data = portable.validate(rule_fixtures.load("PORT004", "bad")).to_dict()
    assert data["exit_code"] == 1
    assert data["findings"][0]["location"]["node"] == "<unnamed If #3>"


def test_import_and_validate_do_not_import_torch_or_onnxruntime(tmp_path):
    path = save(rule_fixtures.load("PORT004", "good"), tmp_path / "m.onnx")
    code = ("import sys, portable; r = portable.validate(sys.argv[1]); assert r.ok, r.findings;"
            "heavy = sorted(m for m in ('torch', 'onnxruntime') if m in sys.modules); print(heavy)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_public_names_stay_what_they_are_once_their_modules_are_imported():
    """``portable.fix`` is a function, and stays one whatever is imported: no lazy public name of a package
    is also the name of one of its modules (Python sets a package's attribute to a submodule once it is
    imported, which a second ``portable.fix`` in a process used to return)."""
    import importlib
    import pkgutil
    import types

    import portable.exporters
    import portable.repair

    for package in (portable, portable.exporters, portable.repair):
        for info in pkgutil.iter_modules(package.__path__):
            if info.name != "__main__":  # it runs the CLI
                importlib.import_module(f"{package.__name__}.{info.name}")
        for name in package.__all__:
            assert not isinstance(getattr(package, name), types.ModuleType), f"{package.__name__}.{name}"
    from portable.repair.api import fix

    assert portable.fix is fix
