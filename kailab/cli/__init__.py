"""The `kailab` command line: one module per verb group, each imported when one of its verbs is named
(base.py's VERBS)."""

from __future__ import annotations

import signal
import sys

import click

from ..errors import KailabError
from .base import cli, console, every_verb  # noqa: F401 - every_verb: the whole tree, for docs and tests


def _terminate(signum, frame):  # noqa: ARG001
    # SIGTERM takes the same clean path as Ctrl-C: nothing half-made is left behind
    raise KeyboardInterrupt


def _show(err: click.ClickException) -> None:
    """click's own errors (an unknown flag, a bad value) as click shows them - the usage and where to
    find help - but the error line as kailab's every other: `kailab: error: ...`."""
    ctx = getattr(err, "ctx", None)
    if isinstance(err, click.UsageError) and ctx is not None:
        hint = (f"Try '{ctx.command_path} {max(ctx.command.get_help_option_names(ctx), key=len)}' for help.\n"
                if ctx.command.get_help_option(ctx) is not None else "")
        click.echo(f"{ctx.get_usage()}\n{hint}", err=True, color=ctx.color)
    click.echo(f"kailab: error: {err.format_message()}", err=True)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # (under nohup, hangups stay ignored)
        signal.signal(signal.SIGHUP, _terminate)  # the terminal closed (tmux or ssh gone): the same clean path
    # a shell starting us in the background may have set SIGINT to 'ignore'; Ctrl-C must still
    # take the clean path (interrupt, stop what started, keep evidence)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        console.print("interrupted")
        sys.exit(130)
    except click.ClickException as err:
        _show(err)
        sys.exit(err.exit_code)
    except KailabError as err:
        for each in getattr(err, "errors", None) or [err]:  # InputErrors: every problem, a line each
            click.echo(f"kailab: error: {each}", err=True)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
