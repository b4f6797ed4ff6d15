"""The `kailab` group imports a verb's module only when the verb is named (kailab/cli/base.py's VERBS):
the map names every verb the modules register, each with its own module, and naming one verb leaves the
other modules unimported."""

from __future__ import annotations

import subprocess
import sys

from kailab.cli import every_verb
from kailab.cli.base import VERBS


def _module(cmd) -> str:
    """The verb module that registered a command (a group without a callback of its own: its first subcommand's)."""
    callback = cmd.callback or next(iter(cmd.commands.values())).callback
    return callback.__module__.rsplit(".", 1)[-1]


def test_every_verb_is_in_the_map_with_the_module_that_registers_it():
    assert {name: _module(cmd) for name, cmd in every_verb().commands.items()} == VERBS


def test_naming_one_verb_imports_only_its_module():
    code = ("import sys; from kailab.cli import cli; cli.get_command(None, 'status'); "
            "print(sorted(m for m in sys.modules if m.startswith('kailab.cli.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "kailab.cli.labs" in loaded
    assert not any(f"kailab.cli.{m}'" in loaded for m in set(VERBS.values()) - {"labs"}), loaded


def test_an_unknown_verb_is_named_as_click_names_it():
    run = subprocess.run([sys.executable, "-m", "kailab.cli", "no-such-verb"], capture_output=True, text=True)
    assert run.returncode == 2 and "No such command 'no-such-verb'" in run.stderr, run.stderr
