"""The `kailab` command group, its consoles and shared options (each verb group in its own module)."""

from __future__ import annotations

import importlib
import os

import click
from click.core import ParameterSource
from rich.console import Console

# into a file or a pipe (no terminal, no COLUMNS) a table is as wide as its cells, up to 200 columns,
# not rich's 80: `kailab tools list > f` keeps whole paths
console = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)
for _c in (console, out):
    if not _c.is_terminal and not os.environ.get("COLUMNS"):
        _c.width = 200


def name_option(f):
    return click.option("--name", default=lambda: os.environ.get("KAILAB_LAB", "default"),
                        show_default="default", help="Lab name (several labs can run side by side).")(f)


_OLD = "kailab.old_spellings"


class _Spelled(click.Option):
    """An option that also takes the value given under its old spelling (a hidden option of its own)."""

    old: str = ""

    def consume_value(self, ctx, opts):
        value, source = super().consume_value(ctx, opts)
        given = ctx.meta.get(_OLD, {}).get(self.name)
        if given is None:
            return value, source
        if source is ParameterSource.COMMANDLINE:
            raise click.UsageError(f"{self.old} is the old spelling of {self.opts[0]}: give one of them", ctx)
        return given, ParameterSource.COMMANDLINE


def option(*decls, old: str, **attrs):
    """click.option(*decls, **attrs), and OLD, the option's former spelling, kept for one release: hidden
    from --help, its value taken as the option's own, with a line on stderr naming the new spelling."""

    def decorate(f):
        f = click.option(*decls, cls=_Spelled, **attrs)(f)
        new = f.__click_params__[-1]
        new.old = old

        def keep(ctx, param, value):
            if value is None:
                return
            if ctx.get_parameter_source(new.name) is ParameterSource.COMMANDLINE:
                raise click.UsageError(f"{old} is the old spelling of {new.opts[0]}: give one of them", ctx)
            click.echo(f"kailab: note: {old} is deprecated (kept for one release): use {new.opts[0]}", err=True)
            ctx.meta.setdefault(_OLD, {})[new.name] = value

        f = click.option(old, f"old_{new.name}", hidden=True, expose_value=False, default=None,
                         metavar=new.metavar, callback=keep)(f)
        f.__click_params__[-1].renamed_to = new.opts[0]
        return f

    return decorate


# Each verb's module, imported only when the verb is named: `kailab status` loads what a lab's status
# needs, not the bench's, the twin's and the course's too (`kailab bench --help`: 0.20 s before, 0.12 s;
# the unit tier starts the CLI ~120 times). A module registers its verbs on `cli` when imported; every verb is in this
# map (a unit test holds the two equal, tests/unit/test_cli_verbs.py).
VERBS = {
    "up": "labs", "down": "labs", "status": "labs", "env": "labs",
    "run": "exercises", "validate": "exercises", "report": "exercises", "schema": "exercises",
    "compare": "trials", "trial": "trials", "replay": "trials", "fill": "trials", "fill-merge": "trials",
    "trace": "trials",
    "bench": "bench", "course": "course", "lesson": "course", "e2e": "e2e", "tools": "tools", "top": "top",
    "twin": "twin",
}


class Verbs(click.Group):
    """The `kailab` group: a verb's module is imported when the verb is named (or all, to list them)."""

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands and cmd_name in VERBS:
            importlib.import_module(f"{__package__}.{VERBS[cmd_name]}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx):
        every_verb()
        return super().list_commands(ctx)


def every_verb() -> click.Group:
    """The group with every verb's module imported: its whole tree, as `--help` lists it and docs/cli.md
    describes it."""
    for module in sorted(set(VERBS.values())):
        importlib.import_module(f"{__package__}.{module}")
    return cli


@click.group(cls=Verbs, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kailab")
def cli() -> None:
    """A validation lab for the KAI Scheduler on fake-GPU Kubernetes fleets."""
