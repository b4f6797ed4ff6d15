"""`make lab-up` passes what `kailab up` needs: with RUNTIME=existing, the cluster's kubeconfig (make's
KUBECONFIG, your environment's when set, else ~/.kube/config) as `--kubeconfig`, the flag `kailab up`
takes for it; with any other runtime no kubeconfig. Reads `make -n` (prints, runs nothing)."""

from __future__ import annotations

import os
import shlex
import subprocess

import click
import pytest

from kailab.cli import every_verb

cli = every_verb()  # the whole tree: a verb's module is imported when the verb is named
from kailab.paths import PROJECT_ROOT



def _up_command(*assignments: str, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("RUNTIME", "KUBECONFIG", "FLEET", "KAI_VERSION", "NAME", "MAKEFLAGS", "MAKELEVEL")}
    done = subprocess.run(["make", "-n", "-s", "-C", str(PROJECT_ROOT), "lab-up", *assignments], capture_output=True,
                          text=True, env={**clean, "HOME": "/home/someone", **env}, timeout=60)
    assert done.returncode == 0, done.stderr
    ups = [shlex.split(line) for line in done.stdout.splitlines() if "/kailab up " in line]
    assert len(ups) == 1, done.stdout
    return ups[0]


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_existing_gets_the_kubeconfig_named_on_the_command_line():
    argv = _up_command("RUNTIME=existing", "KUBECONFIG=/clusters/mine.yaml")
    assert _flag(argv, "--runtime") == "existing" and _flag(argv, "--kubeconfig") == "/clusters/mine.yaml", argv


def test_existing_gets_the_environments_kubeconfig():
    argv = _up_command(RUNTIME="existing", KUBECONFIG="/clusters/from-env.yaml")
    assert _flag(argv, "--kubeconfig") == "/clusters/from-env.yaml", argv


def test_existing_without_one_gets_kubectls_default():
    assert _flag(_up_command("RUNTIME=existing"), "--kubeconfig") == "/home/someone/.kube/config"


@pytest.mark.parametrize("runtime", ["binary", "kind", "auto"])
def test_other_runtimes_get_no_kubeconfig(runtime):
    argv = _up_command(f"RUNTIME={runtime}", "KUBECONFIG=/clusters/mine.yaml")
    assert _flag(argv, "--runtime") == runtime and "--kubeconfig" not in argv, argv


def test_every_flag_make_passes_is_one_kailab_up_takes():
    argv = _up_command("RUNTIME=existing")
    takes = {o for p in cli.commands["up"].params if isinstance(p, click.Option) for o in p.opts}
    passed = {a for a in argv if a.startswith("--")}
    assert passed <= takes, passed - takes
