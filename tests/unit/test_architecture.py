"""The architecture is a contract: layers import only downwards, packages have no cycles
(pyproject.toml [tool.importlinter]; docs/architecture.md: Layout)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    tool = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert tool, "import-linter is a test dependency: pip install -e '.[test]'"
    out = subprocess.run([tool], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_an_upward_import_would_break_them(tmp_path):
    """The contract can fail: a copy of the package where a base module imports the CLI breaks it."""
    shutil.copytree(ROOT / "kailab", tmp_path / "kailab")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "kailab" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom . import cli  # noqa: E402,F401\n")
    tool = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    out = subprocess.run([tool], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode != 0 and "BROKEN" in out.stdout.upper(), out.stdout[-2000:]


def test_no_module_is_over_500_lines_without_saying_why():
    """A long module says in its docstring why it is one module ("Over 500 lines: ...")."""
    import ast

    long_ = {}
    for path in sorted((ROOT / "kailab").rglob("*.py")):
        lines = path.read_text().count("\n")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > 500 and "Over 500 lines:" not in doc:
            long_[str(path.relative_to(ROOT))] = lines
    assert long_ == {}


def test_the_contracts_hold_without_exceptions():
    """No import is whitelisted: an orchestrator that brings labs up lives above the lab, not in a stack."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert "ignore_imports" not in contracts
    assert all(not c.get("ignore_imports") for c in contracts["contracts"])


def test_the_exercise_axis_names_every_stack():
    """"The exercise layer never imports a stack's internals" forbids every stack of the registry, and
    every package in kailab/stacks/ is one: a new stack is named there, or this fails."""
    import tomllib

    from kailab.stacks import STACKS

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (axes,) = [c for c in contracts if c["name"].startswith("the two axes")]
    stacks = {target.split(":")[0] for target in STACKS.values()}
    packages = {f"kailab.stacks.{p.name}" for p in (ROOT / "kailab" / "stacks").iterdir() if (p / "__init__.py").is_file()}
    assert packages <= stacks
    assert set(axes["forbidden_modules"]) == stacks
