"""docs/cli.md holds what `kailab --help` holds: every command and subcommand of the click tree has its
`### kailab ...` section (a group of subcommands with no flags of its own needs none), every flag it shows (not the hidden ones) is named in that section, and the
doc names no command or flag that does not exist. The pytest options the plugin adds, the exit codes
the CLI uses and the environment variables the code reads are checked the same way."""

from __future__ import annotations

import re
from pathlib import Path

import click
import rich.console

from kailab.cli import every_verb

cli = every_verb()  # the whole tree: a verb's module is imported when the verb is named
from kailab.errors import InputError, KailabError, LabError
from kailab.paths import PROJECT_ROOT
from kailab.testing import plugin

DOC = PROJECT_ROOT / "docs" / "cli.md"
FLAG = r"(?<![\w-]){}(?![\w-])"
# set by kailab for processes it starts (a Go test it runs, a fan-out unit's pod), never by users
INTERNAL_ENV = {"KAILAB_SHARD_SPEC", "KAILAB_OUT", "KAILAB_OUT_ARGS", "KAILAB_UNIT_COMMAND", "KAILAB_UNIT_KAI"}


def _commands(cmd: click.Command = cli, path: tuple[str, ...] = ("kailab",)):
    yield " ".join(path), cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        if not sub.hidden:
            yield from _commands(sub, (*path, name))


def _flags(cmd: click.Command) -> list[str]:
    return [o for p in cmd.params if isinstance(p, click.Option) and not p.hidden
            for o in (*p.opts, *p.secondary_opts)]


def _sections(text: str, level: str = "###") -> dict[str, str]:
    """Each `### title` (backticks dropped) with its text up to the next heading of any level."""
    parts = re.split(r"^(#{1,6} .+)$", text, flags=re.M)
    return {h.lstrip("#").strip().strip("`"): body for h, body in zip(parts[1::2], parts[2::2])
            if h.startswith(level + " ")}


def _table_names(section: str, prefix: str) -> set[str]:
    """The names (`--x`, `KAILAB_X`) in the first column of a section's table rows."""
    first = [row.split("|")[1] for row in section.splitlines() if row.startswith("| `")]
    return {name for cell in first for name in re.findall(rf"`({prefix}[\w-]*)`", cell)}


def test_every_command_has_its_section():
    sections = _sections(DOC.read_text())
    missing = [path for path, cmd in _commands() if path not in sections
               and (not isinstance(cmd, click.Group) or _flags(cmd))]  # `tools`, `trace`: only their subcommands
    assert not missing, f"docs/cli.md has no `### <command>` section for: {missing}"


def test_every_flag_is_in_its_commands_section():
    sections = _sections(DOC.read_text())
    missing = [f"{path} {flag}" for path, cmd in _commands() if path in sections
               for flag in _flags(cmd) if not re.search(FLAG.format(re.escape(flag)), sections[path])]
    assert not missing, f"flags docs/cli.md does not name in their command's section: {missing}"


def test_the_doc_names_no_command_or_flag_that_does_not_exist():
    commands = dict(_commands())
    stale = []
    for title, body in _sections(DOC.read_text()).items():
        if not title.startswith("kailab"):
            continue
        if title not in commands:
            stale.append(title)
            continue
        real = set(_flags(commands[title])) | {"-h", "--help"}
        stale += [f"{title} {flag}" for flag in _table_names(body, "--") - real]
    assert not stale, f"docs/cli.md names what `kailab --help` does not have: {stale}"


class _Group:
    def __init__(self):
        self.names: list[str] = []

    def addoption(self, *names, **_):
        self.names += names


class _Parser:
    def __init__(self):
        self.group = _Group()

    def getgroup(self, *_):
        return self.group


def test_every_pytest_option_is_documented_and_no_other():
    parser = _Parser()
    plugin.pytest_addoption(parser)
    options = set(parser.group.names)
    assert {"--kailab-all", "--kailab-on", "--kailab-lab", "--kailab-evidence"} <= options
    section = _sections(DOC.read_text(), "##")["pytest options"]
    documented = _table_names(section, "--kailab")
    assert options - documented == set(), f"pytest options missing from docs/cli.md: {options - documented}"
    assert documented - options == set(), f"docs/cli.md names pytest options the plugin lacks: {documented - options}"


def test_exit_codes_are_the_ones_the_cli_uses():
    section = _sections(DOC.read_text(), "##")["Exit codes"]
    codes = {int(c) for c in re.findall(r"^\| (\d+) \|", section, re.M)}
    main = (PROJECT_ROOT / "kailab" / "cli" / "__init__.py").read_text()
    used = {0, 1, KailabError.exit_code, InputError.exit_code, LabError.exit_code,
            *map(int, re.findall(r"sys\.exit\((\d+)\)", main))}
    assert codes == used, f"docs/cli.md's exit codes {sorted(codes)}, the CLI's {sorted(used)}"


def _code_text() -> str:
    files = [*(PROJECT_ROOT / "kailab").rglob("*.py"), *(PROJECT_ROOT / "kailab").rglob("*.sh")]
    return "\n".join(f.read_text() for f in files)


def test_every_environment_variable_the_code_reads_is_documented():
    code = _code_text()
    read = set(re.findall(r"\bKAILAB_[A-Z][A-Z_]*[A-Z]\b", code)) - INTERNAL_ENV - {"KAILAB_PACKAGE_DATA"}
    section = _sections(DOC.read_text(), "##")["Environment variables"]
    documented = _table_names(section, "")
    assert read - documented == set(), f"variables kailab reads that docs/cli.md does not list: {read - documented}"
    ci = (PROJECT_ROOT / ".ci" / "run").read_text()
    rich_reads = Path(rich.console.__file__).read_text()
    not_read = [v for v in documented
                if not re.search(rf"[\"'{{$]{v}\b|\b{v}=", code) and f"${{{v}" not in ci and f'"{v}"' not in rich_reads]
    assert not not_read, f"docs/cli.md lists variables nothing reads: {not_read}"
