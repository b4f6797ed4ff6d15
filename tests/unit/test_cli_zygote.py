"""The CLI's runner in tests (tests/cli_zygote.py) behaves as `subprocess.run` of a fresh interpreter: only
the environment it is given, its working folder and stdin, its exit code, a timeout that kills it — and
kailab imported afresh in each run, never in the parent it forks from."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import cli_zygote

ENV = {k: v for k, v in os.environ.items() if k.startswith("PYTHON")} | {"PATH": "/usr/bin:/bin", "ONLY": "given"}


def run(code: str, *args: str, env: dict = ENV, **kw) -> subprocess.CompletedProcess:
    return cli_zygote.run(list(args), env, entry=code, **kw)


def test_the_child_has_the_given_environment_folder_stdin_and_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("KAILAB_ZYGOTE_PARENT_ONLY", "1")
    done = run("import os, sys; print(sorted(os.environ)); print(os.getcwd()); print(sys.stdin.read()); print(sys.argv)",
               "a", "b", cwd=tmp_path, input="typed")
    env, cwd, stdin, argv = done.stdout.splitlines()
    assert env == str(sorted(ENV)) and cwd == str(tmp_path) and stdin == "typed" and argv == "['-c', 'a', 'b']"
    assert done.returncode == 0 and done.stderr == ""
    assert run("import sys; print(repr(sys.stdin.read()))").stdout == "''\n"  # no input: /dev/null


@pytest.mark.parametrize("code, rc, err", [
    ("import sys; sys.exit(3)", 3, ""),
    ("import sys; sys.exit('gone')", 1, "gone\n"),
    ("raise RuntimeError('boom')", 1, "RuntimeError: boom"),
    ("import sys; sys.stderr.write('half'); sys.exit(None)", 0, "half"),
])
def test_exit_codes_and_stderr_are_a_fresh_interpreters(code, rc, err):
    done = run(code)
    real = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, stdin=subprocess.DEVNULL)
    assert done.returncode == real.returncode == rc
    assert err in done.stderr and err in real.stderr


def test_a_timeout_kills_the_child_and_the_next_run_still_works():
    with pytest.raises(subprocess.TimeoutExpired):
        run("import time; print('started', flush=True); time.sleep(60)", timeout=0.5)
    assert run("print('next')").stdout == "next\n"


def test_kailab_is_imported_in_the_child_never_in_the_parent():
    first = run("import sys; print('kailab' in sys.modules); import kailab.cli; print('kailab.cli' in sys.modules)")
    second = run("import sys; print('kailab' in sys.modules)")
    assert first.stdout.split() == ["False", "True"] and second.stdout.split() == ["False"]


def test_an_environment_that_changes_how_python_starts_runs_as_a_plain_subprocess(tmp_path):
    (tmp_path / "only_on_that_path.py").write_text("WHERE = 'found'\n")
    done = run("import only_on_that_path; print(only_on_that_path.WHERE)", env={**ENV, "PYTHONPATH": str(tmp_path)})
    assert done.stdout == "found\n", done.stderr
