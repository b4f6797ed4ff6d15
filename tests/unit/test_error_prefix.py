"""Every error path of `kailab` ends in the same line, `kailab: error: ...`, and a non-zero exit: a lab
that does not exist (`status`, `env`), click's own refusals (an unknown flag or command, a missing
argument, a bad value: their usage lines first, as click shows them) and kailab's. Runs the real
entry point in a subprocess with its own state and cache: no lab, no cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ERROR = "kailab: error: "
SCRIPT = Path(sys.executable).parent / "kailab"  # the console script users run (it calls main())


@pytest.fixture
def kailab(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("KAILAB_LAB", "RUNTIME", "FLEET", "KAI_VERSION")}
    env.update(KAILAB_STATE=str(tmp_path / "state"), KAILAB_CACHE=str(tmp_path / "cache"), NO_COLOR="1")

    def run(*args: str) -> subprocess.CompletedProcess:
        argv = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "kailab.cli"]
        return subprocess.run([*argv, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    return run


def the_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode not in (0, None), proc
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and lines[-1].startswith(ERROR), proc.stderr
    assert not any(line.startswith("Error:") for line in lines), proc.stderr
    return lines[-1][len(ERROR):]


def test_status_of_a_lab_that_does_not_exist(kailab):
    proc = kailab("status", "--name", "no-such-lab")
    assert the_error(proc) == "no lab named 'no-such-lab': bring one up with `kailab up --name no-such-lab`"
    assert proc.stderr.count("\n") == 1 and proc.stdout == "", proc


def test_status_json_of_a_lab_that_does_not_exist_still_says_absent_on_stdout(kailab):
    proc = kailab("status", "--json", "--name", "none")
    assert "no lab named 'none'" in the_error(proc)
    assert json.loads(proc.stdout) == {"name": "none", "state": "absent"}


def test_env_of_a_lab_that_does_not_exist(kailab):
    assert "no lab named 'no-such-lab'" in the_error(kailab("env", "--name", "no-such-lab"))


@pytest.mark.parametrize("args, said", [
    (["up", "--bogus"], "No such option '--bogus'"),
    (["no-such-command"], "No such command 'no-such-command'"),
    (["fill"], "Missing argument 'TRACE'"),
    (["up", "--runtime", "nowhere"], "Invalid value for '--runtime'"),
    (["trial", "--repeat", "0", "--kai-versions", "v0.17.0"], "Invalid value for '--repeat'"),
], ids=["unknown-flag", "unknown-command", "missing-argument", "bad-choice", "out-of-range"])
def test_clicks_refusals_carry_the_prefix_after_the_usage(kailab, args, said):
    proc = kailab(*args)
    assert said in the_error(proc)
    assert proc.returncode == 2
    assert proc.stderr.startswith("Usage: "), proc.stderr
    assert "--help' for help." in proc.stderr


def test_kailabs_refusals_carry_the_prefix(kailab):
    assert "unknown source 'nope'" in the_error(kailab("tools", "source", "nope", "."))
