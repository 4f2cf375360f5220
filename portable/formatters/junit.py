"""JUnit XML: one test suite per model, one test case per rule that ran."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from portable.catalogue import catalogue
from portable.findings import Finding, Severity
from portable.formatters.base import Formatter
from portable.report import ValidationReport

__all__ = ["JunitFormatter"]


def _details(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        where = f.location.describe() + (f" at {f.location.source}" if f.location.source else "")
        fix = "" if f.severity is Severity.INFO else f" (fix: {f.hint})"
        lines.append(f"[{f.severity.value}] {where}: {f.message}{fix}")
    return "\n".join(lines)


class JunitFormatter(Formatter):
    name = "junit"

    def render(self, reports: Sequence[ValidationReport]) -> str:
        root = ET.Element("testsuites", name="portable")
        totals = {"tests": 0, "failures": 0, "errors": 0}
        for report in reports:
            suite = self._suite(report)
            root.append(suite)
            for key in totals:
                totals[key] += int(suite.get(key, "0"))
        for key, value in totals.items():
            root.set(key, str(value))
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

    def _suite(self, report: ValidationReport) -> ET.Element:
        suite = ET.Element("testsuite", name=report.path)
        if report.error is not None:
            case = ET.SubElement(suite, "testcase", classname=report.path, name="load")
            ET.SubElement(case, "error", message=report.error, type="unreadable")
            suite.attrib.update(tests="1", failures="0", errors="1")
            return suite
        failing = set(report.failing())
        failures = 0
        names = {f.rule_id: f.rule_name for f in report.findings}
        ran = report.rules or tuple(sorted(names))  # pre-export reports list only what they found
        for rule_id in ran:
            found = [f for f in report.findings if f.rule_id == rule_id]
            name = f"{rule_id} {names.get(rule_id) or catalogue()[rule_id].name}"
            case = ET.SubElement(suite, "testcase", classname=report.path, name=name)
            bad = [f for f in found if f in failing]
            if bad:
                failures += 1
                ET.SubElement(case, "failure", message=bad[0].message, type=rule_id).text = _details(bad)
            elif found:
                ET.SubElement(case, "system-out").text = _details(found)
        for target in report.targets:  # one case per target: its line (a failed gate is PORT203's failure)
            case = ET.SubElement(suite, "testcase", classname=report.path, name=f"target {target.name}")
            ET.SubElement(case, "system-out").text = target.line()
        suite.attrib.update(tests=str(len(ran) + len(report.targets)), failures=str(failures), errors="0")
        return suite
