"""The actions' view of a run (kailab.exercise.run_state.RunState) is the runner's, and all they touch:
every member is set or defined by ExerciseRun, and every attribute the actions (and the faults) read or
write of their run is a member."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kailab.exercise import run_state

EXERCISE = Path(run_state.__file__).parent


def _members() -> set[str]:
    cls = run_state.RunState
    return set(cls.__annotations__) | {
        n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}


def _runner_has() -> set[str]:
    tree = ast.parse((EXERCISE / "runner.py").read_text())
    run = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ExerciseRun")
    have = {f.name for f in run.body if isinstance(f, ast.FunctionDef)}
    for node in ast.walk(run):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                    have.add(e.attr)
    return have


def _actions_touch(module: str = "actions.py") -> set[str]:
    tree = ast.parse((EXERCISE / module).read_text())
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute):
            v = n.value
            if isinstance(v, ast.Name) and v.id == "r":
                out.add(n.attr)
            if isinstance(v, ast.Attribute) and v.attr == "run" and isinstance(v.value, ast.Name) and v.value.id == "ctx":
                out.add(n.attr)
    return out


def test_every_member_is_the_runners():
    assert _members() - _runner_has() == set()


@pytest.mark.parametrize("module", ["actions.py", "faults.py"])
def test_the_actions_touch_only_members(module):
    """The step actions and the faults (faults.py), which act on the run as the actions do."""
    touched = _actions_touch(module)
    assert touched and touched - _members() == set()
