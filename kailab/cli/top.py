"""`kailab top`: the live view of KAI's queues, waits, quota and GPUs."""

from __future__ import annotations

import contextlib
import json
import os
import time

import click
from rich.console import Console

from ..errors import KailabError
from ..labs import LabRecord, up_command
from ..runtimes import metrics
from .base import cli, console, out


@cli.command()
@click.option("--name", default=None, help="The lab to watch (default: $KAILAB_LAB, else `default`; not with --kubeconfig).")
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Any cluster running KAI instead of a lab (read only).")
@click.option("--prometheus", default=None, metavar="URL",
              help="A Prometheus scraping KAI (for the fair share column); a lab's own is used by default.")
@click.option("--once", is_flag=True, help="Print one picture and exit (for scripts and CI logs).")
@click.option("--json", "as_json", is_flag=True, help="One picture as JSON, and exit.")
@click.option("--interval", type=click.FloatRange(0.2, 60), default=1.0, show_default=True,
              help="Seconds between refreshes.")
def top(name, kubeconfig, prometheus, once, as_json, interval) -> None:
    """Watch the scheduler work: queues (GPUs against fair share, quota and limit; who waits and KAI's
    reason), GPUs per node pool and node, the last evictions. `q` quits. Not on a terminal (a pipe, a
    file), a picture every --interval, one after another."""
    from ..top import Top
    from ..top.screen import live, render

    if kubeconfig and name:
        raise KailabError("--name and --kubeconfig: give one (a lab, or any cluster running KAI)")
    if kubeconfig:
        title = f"cluster {kubeconfig}"
    else:
        name = name or os.environ.get("KAILAB_LAB", "default")
        rec = LabRecord.load(name)
        if rec is None or rec.state != "up":
            raise KailabError(f"no lab named {name!r} is up: bring one up with `{up_command(name)}`, "
                              "or watch another cluster with --kubeconfig FILE")
        kubeconfig, prometheus, title = rec.kubeconfig, prometheus or lab_prometheus(rec), f"lab {name!r}"
    with Top(kubeconfig, prometheus) as view:
        if as_json:
            click.echo(json.dumps(view.snapshot(), indent=2))
        elif once or not out.is_terminal:
            wide = Console(width=max(out.width, 160)) if not out.is_terminal else out
            # not a terminal (a pipe, a file): a picture every --interval, one after another, as `top -b`
            try:
                while True:
                    wide.print(render(view.snapshot(), title, width=wide.width))
                    if once:
                        break
                    wide.file.flush()
                    time.sleep(interval)
            except KeyboardInterrupt:
                pass
        else:
            try:
                live(view.snapshot, title, console=out, interval=interval)
            except KeyboardInterrupt:
                pass


def lab_prometheus(rec: LabRecord) -> str | None:
    return metrics.url(rec.ports) if rec.metrics else None


@contextlib.contextmanager
def watch_lab(rec: LabRecord | None, wanted: bool):
    """`--watch` of a command running on a lab: `kailab top`'s picture below the command's own lines
    while the block runs (nothing when not `wanted`)."""
    if not wanted or rec is None:
        yield
        return
    from ..top import Top
    from ..top.screen import watching

    with Top(rec.kubeconfig, lab_prometheus(rec)) as view, watching(view.snapshot, f"lab {rec.name!r}", console):
        yield


def watch_option(f):
    return click.option("--watch", is_flag=True,
                        help="Show `kailab top`'s live picture of the lab below the run's lines (KAI's queues, "
                             "waits, GPUs, evictions).")(f)


class LabsWatch:
    """`--watch` of a command whose labs come and go as it runs (replay's variants, side by side):
    a compact picture of each lab while it is up, stacked, redrawn every second."""

    def __init__(self):
        import threading

        self.views: dict[str, object] = {}
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def lab(self, label: str, rec: LabRecord):
        from ..top import Top

        view = Top(rec.kubeconfig, lab_prometheus(rec))
        try:
            view.__enter__()
        except KailabError as err:  # a lab without KAI's queues: said in its place, the replay goes on
            view = str(err)
        with self.lock:
            self.views[label] = view
        try:
            yield
        finally:
            with self.lock:
                self.views.pop(label, None)
            if not isinstance(view, str):
                view.__exit__(None, None, None)

    def picture(self):
        from rich.console import Group
        from rich.text import Text

        from ..top.screen import render

        with self.lock:
            views = sorted(self.views.items())
        if not views:
            return Text("kailab top: no lab of this run is up yet", style="bright_black")
        return Group(*[Text(f"{label}: {view}", style="yellow") if isinstance(view, str)
                       else render(view.snapshot(), label, width=console.width, compact=True) for label, view in views])

    @contextlib.contextmanager
    def shown(self):
        from rich.live import Live

        with Live(get_renderable=self.picture, console=console, refresh_per_second=1, vertical_overflow="visible"):
            yield
        if not console.is_terminal:  # as `watching`: the last picture's line closed
            console.line()
