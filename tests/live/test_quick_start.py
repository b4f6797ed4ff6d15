"""README's quick start, as written: its commands, read from README's first bash block under
"Quick start", run one by one in a fresh clone of the project (the kailab cache CI already has; DIR is
the folder the registered repositories were fetched into), on the binary runtime. `make exercises` is
left out: every exercise runs live in test_lessons_live; the rest must pass in order, and `make lab-down`
must leave nothing. A lab name of the test's own (NAME, KAILAB_LAB) keeps it apart from other labs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from kailab.paths import PROJECT_ROOT, cache_dir, lab_dir
from kailab.testing.labs import LAB_PREFIX

pytestmark = [pytest.mark.lab, pytest.mark.kai]


def quick_start_commands() -> list[str]:
    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme[readme.index("## Quick start"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def _sources_folder() -> Path:
    origin = Path(json.loads((cache_dir() / "kai" / "source.json").read_text())["origin"])
    folder = origin.parent.parent if origin.name in ("repo", ".git") else origin.parent
    assert folder.is_dir(), f"the folder KAI's repository was registered from is gone: {folder}"
    return folder


def test_the_quick_start_runs_as_written(tmp_path):
    commands = quick_start_commands()
    assert commands[0] == "make setup" and "make lab-down" in commands and "make exercises" in commands
    clone = tmp_path / "kailab"
    subprocess.run(["git", "clone", "-q", str(PROJECT_ROOT), str(clone)], check=True, timeout=300)
    name = f"{LAB_PREFIX}{os.getpid()}-qs"
    env = {**os.environ, "NAME": name, "KAILAB_LAB": name, "KAILAB_EVIDENCE": str(tmp_path / "evidence"),
           "NO_COLOR": "1", "CI": "true"}
    for var in ("VIRTUAL_ENV", "RUNTIME", "FLEET", "KAI_VERSION", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST"):
        env.pop(var, None)
    ran = []
    try:
        for cmd in commands:
            if cmd == "make exercises":
                continue
            argv = [str(_sources_folder()) if a == "DIR" else a for a in shlex.split(cmd)]
            out = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True, timeout=1200,
                                 stdin=subprocess.DEVNULL)
            ran.append(cmd)
            assert out.returncode == 0, f"`{cmd}` exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
            if cmd.endswith("run quota"):
                assert "quota: passed" in out.stdout, out.stdout[-2000:]
    finally:
        if lab_dir(name).exists():  # a command failed before `make lab-down`
            subprocess.run(["make", "lab-down"], cwd=clone, env=env, capture_output=True, timeout=300)
    assert "make lab-down" in ran and not lab_dir(name).exists()
    assert any((tmp_path / "evidence").glob("*-quota/verdict.json"))
