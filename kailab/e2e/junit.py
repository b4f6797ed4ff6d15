"""A suite's result, read from the JUnit report its Ginkgo binary wrote; and one merged report.

Counts are of specs (`[It]` test cases); a failed suite-level node ([BeforeSuite], [AfterSuite], …)
counts as a failure too, so a suite can never look green when its set-up broke.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
FAILING = {"failed", "panicked", "interrupted", "timedout", "aborted"}


def read(path: Path) -> dict:
    """{tests, passed, failed, skipped, seconds, specs: [{name, status, seconds, message}]}."""
    root = ET.parse(path).getroot()
    specs = []
    for case in root.iter("testcase"):
        name = case.get("name", "")
        status = case.get("status") or (FAILED if case.find("failure") is not None or case.find("error") is not None
                                        else SKIPPED if case.find("skipped") is not None else PASSED)
        status = FAILED if status in FAILING else SKIPPED if status == "pending" else status
        if not name.startswith("[It]") and status != FAILED:
            continue  # a suite-level node that went well is not a spec
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        message = (problem.get("message") if problem is not None
                   else skipped.get("message") if skipped is not None else "") or ""
        specs.append({"name": name.removeprefix("[It] "), "status": status,
                      "seconds": round(float(case.get("time") or 0), 1), "message": message.strip()})
    counts = {s: sum(1 for x in specs if x["status"] == s) for s in (PASSED, FAILED, SKIPPED)}
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    seconds = float((suite.get("time") if suite is not None else root.get("time")) or 0)
    return {"tests": len(specs), **counts, "seconds": round(seconds, 1), "specs": specs}


def merge(reports: list[tuple[str, Path]], out: Path) -> None:
    """One JUnit file holding every suite's <testsuite>, each named `<label>: <suite name>`."""
    merged = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0, "disabled": 0}
    for label, path in reports:
        root = ET.parse(path).getroot()
        for suite in ([root] if root.tag == "testsuite" else root.findall("testsuite")):
            suite.set("name", f"{label}: {suite.get('name', '')}")
            for key in totals:
                totals[key] += int(suite.get(key) or 0)
            merged.append(suite)
    for key, value in totals.items():
        merged.set(key, str(value))
    ET.ElementTree(merged).write(out, encoding="UTF-8", xml_declaration=True)
