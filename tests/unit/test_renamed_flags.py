"""One idea, one spelling: the flags renamed for it keep their former spelling for one release, hidden
from --help, taken as the new one with a line on stderr; the new spelling is in --help and docs/cli.md,
and no page of the docs still writes the former one."""

from __future__ import annotations

import re

import click
import pytest

from kailab.cli import every_verb

cli = every_verb()  # the whole tree: a verb's module is imported when the verb is named
from kailab.paths import PROJECT_ROOT

# (command, former spelling, new spelling, its parameter, a value, what else the command needs to parse)
RENAMED = [
    ("trial", "--versions", "--kai-versions", "version_text", "v0.16.8,v0.17.0", []),
    ("trial", "--parallel", "--labs", "parallel", "3", ["--kai-versions", "v0.16.8,v0.17.0"]),
    ("compare", "--parallel", "--labs", "parallel", "3", []),
    ("twin", "--versions", "--kai-versions", "kai_versions", "v0.16.8,v0.17.0", ["snapshot.zip"]),
    ("bench", "--repeats", "--repeat", "repeats", "4", []),
    ("bench repeat-exercises", "--lab", "--name", "lab_name", "lab-7", ["3"]),
    ("e2e", "--lab", "--name", "lab_name", "lab-7", []),
]
FLAG = r"(?<![\w-]){}(?![\w-])"
DOC = PROJECT_ROOT / "docs" / "cli.md"


def _hidden_old_spellings(cmd: click.Command = cli, path: str = ""):
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _hidden_old_spellings(sub, f"{path} {name}".strip())
    for p in cmd.params:
        if getattr(p, "renamed_to", None):
            yield path, p.opts[0], p.renamed_to


def _command(command: str) -> click.Command:
    """`bench repeat-exercises`: a subcommand by its path."""
    cmd = cli
    for name in command.split():
        cmd = cmd.commands[name]
    return cmd


def _parse(command: str, args: list[str]) -> dict:
    return _command(command).make_context(command, list(args)).params


def _section(command: str) -> str:
    parts = re.split(r"^(#{1,6} .+)$", DOC.read_text(), flags=re.M)
    return next(body for h, body in zip(parts[1::2], parts[2::2]) if h.strip("# `") == f"kailab {command}")


def test_every_former_spelling_in_the_tree_is_one_of_these():
    assert sorted(_hidden_old_spellings()) == sorted((c, old, new) for c, old, new, *_ in RENAMED)


@pytest.mark.parametrize(("command", "old", "new", "param", "value", "rest"), RENAMED,
                         ids=[f"{c} {o}" for c, o, *_ in RENAMED])
def test_the_former_spelling_still_works_hidden_and_says_so(command, old, new, param, value, rest, capsys):
    as_new = _parse(command, [*rest, new, value])
    capsys.readouterr()
    as_old = _parse(command, [*rest, old, value])
    err = capsys.readouterr().err
    default = next(p.default for p in _command(command).params if p.name == param)
    assert as_old == as_new and as_old[param] not in (None, default)
    assert err.strip() == f"kailab: note: {old} is deprecated (kept for one release): use {new}"
    helptext = _command(command).get_help(click.Context(_command(command), info_name=command))
    assert re.search(FLAG.format(re.escape(new)), helptext), f"{new} is not in `kailab {command} --help`"
    assert not re.search(FLAG.format(re.escape(old)), helptext), f"`kailab {command} --help` still shows {old}"
    assert re.search(FLAG.format(re.escape(new)), _section(command)), f"docs/cli.md's kailab {command} lacks {new}"


@pytest.mark.parametrize(("command", "old", "new", "rest"), [(c, o, n, r) for c, o, n, _, _, r in RENAMED])
def test_both_spellings_at_once_are_refused(command, old, new, rest):
    for args in ([*rest, old, "1", new, "2"], [*rest, new, "2", old, "1"]):
        with pytest.raises(click.UsageError, match=f"{old} is the old spelling of {new}"):
            _parse(command, args)


def test_no_page_writes_a_former_spelling():
    pages = [PROJECT_ROOT / "README.md", PROJECT_ROOT / "Makefile", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        text = page.read_text()
        if page == DOC:  # its table of renamed flags names them
            text = re.sub(r"^## Renamed flags$.*?(?=^## )", "", text, flags=re.M | re.S)
        for old in {old for _, old, *_ in RENAMED}:
            found += [f"{page.relative_to(PROJECT_ROOT)}: {old}" for _ in re.finditer(FLAG.format(re.escape(old)), text)]
    assert not found, f"pages still writing a former spelling: {found}"
