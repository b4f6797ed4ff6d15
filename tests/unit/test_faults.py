"""Faults are a registry (kailab/exercise/faults.py): the format's `faults:` item, the format doc's
Faults table and the loader's checks are each read from it, so a fault is one class there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kailab.exercise.faults import FAULTS, FaultItem
from kailab.exercise.spec import Step, json_schema
from kailab.fleet import load_fleet

DOC = Path(__file__).resolve().parents[2] / "docs" / "exercise-format.md"


def _doc_rows() -> list[str]:
    section = DOC.read_text().split("\n## Faults\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| `")]


def test_the_format_docs_faults_table_is_the_registrys_rows_in_order():
    want = [f"| {' | '.join(f.doc)} |" for f in FAULTS.values()]
    assert _doc_rows() == want, "docs/exercise-format.md's Faults table, row by row:\n" + "\n".join(want)


def test_a_faults_item_has_one_field_a_fault_under_its_key():
    props = json_schema()["$defs"]["FaultItem"]["properties"]
    assert list(props) == list(FAULTS)
    for key, fault in FAULTS.items():
        items = []
        for value in ("scheduler", "a100-0", "5s"):  # a process, a node, a duration: one of them fits
            try:
                items.append(FaultItem.model_validate({key: value}))
            except ValueError:
                pass
        assert items and all(item.fault is fault and item.words() for item in items), key


@pytest.mark.parametrize("item", [{}, {"kill": "scheduler", "pause": "5s"}])
def test_a_faults_item_names_exactly_one_fault(item):
    with pytest.raises(ValueError, match=re.escape(f"each fault is exactly one of: {', '.join(FAULTS)}")):
        Step.model_validate({"name": "s", "faults": [item]})


def test_a_node_fault_is_checked_against_the_fleet():
    fleet = load_fleet("tiny")
    node = fleet.node_manifests()[0]["metadata"]["name"]
    step = Step.model_validate({"name": "s", "faults": [{"nodeDown": node}, {"nodeUp": "z-9"}, {"kill": "binder"}]})
    assert [f.check(fleet) for f in step.faults][::2] == [None, None]
    problem, fix = step.faults[1].check(fleet)
    assert problem == "node 'z-9' is not in fleet 'tiny'" and fix.startswith(f"nodes: {node}")
