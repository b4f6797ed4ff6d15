"""The picture on a terminal: a rich renderable from a snapshot, and the live loop (the alternate
screen, redrawn in place each interval, `q` to quit)."""

from __future__ import annotations

import contextlib
import os
import re
import select
import sys
import time
from collections import deque

from rich.console import Group
from rich.table import Table
from rich.text import Text

SPARKS = "▁▂▃▄▅▆▇█"


def spark(values) -> str:
    return "".join(SPARKS[min(len(SPARKS) - 1, int(v * len(SPARKS)))] for v in values)


def _n(v, unlimited: bool = False) -> str:
    if v is None:
        return "-"
    if unlimited and v < 0:
        return "∞"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _wait(s: float) -> str:
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.0f}h"


def _ago(s: float) -> str:
    return f"{_wait(s)} ago"


def render(snap: dict, title: str, history=(), width: int = 160, compact: bool = False) -> Group:
    """The picture for a terminal `width` columns wide: the figures always shown, the words
    (KAI's reason, the pod groups evicted) cut to what is left. `compact`: the heading, the queues
    and the last evictions only (several labs on one screen)."""
    c = snap["cluster"]
    name_w = min(28, max([len(r["name"]) + 2 * r["depth"] for r in snap["queues"]] + [5]))
    words = max(12, width - name_w - 62)
    clock = time.strftime("%H:%M:%S", time.localtime(snap["at"]))
    head = Text.assemble((f"kailab top · {title} · {clock}", "bold"),
                         f" · {c['nodes']} nodes · GPUs {c['gpus_used']:g}/{c['gpus']:g} used "
                         f"({c['utilisation']:.0%}), {c['gpus_idle']:g} idle · pods {c['pods_running']} running, "
                         f"{c['pods_pending']} pending")
    parts: list = [head]
    if history:
        parts.append(Text(f"utilisation {spark(history)}  (one mark a refresh, newest right)", style="cyan"))

    q = Table(title="queues: GPUs held, KAI's fair share, quota, limit, over-quota weight; pods", title_justify="left", expand=False, pad_edge=False, box=None, header_style="bold")
    for col, just in (("queue", "left"), ("GPUs", "right"), ("fair", "right"), ("quota", "right"),
                      ("limit", "right"), ("weight", "right"), ("run", "right"), ("pend", "right"),
                      ("waits", "right"), ("KAI's reason (oldest pending)", "left")):
        q.add_column(col, justify=just, no_wrap=True, overflow="ellipsis", min_width=len(col))
    for row in snap["queues"]:
        old = row["oldest_pending"]
        reason = ""
        if old:
            reason = f"{old['reason']}: {old['message']}" if old["reason"] else old["message"] or "(no reason from KAI yet)"
        over = row["fair_share"] is not None and row["gpus"] > row["fair_share"] + 1e-6
        q.add_row(_cut("  " * row["depth"] + row["name"], name_w), Text(_n(row["gpus"]), style="yellow" if over else ""),
                  _n(row["fair_share"]), _n(row["quota"], True), _n(row["limit"], True), _n(row["over_quota_weight"]),
                  str(row["running"]), Text(str(row["pending"]), style="yellow" if row["pending"] else ""),
                  _wait(old["waiting_s"]) if old else "", Text(_cut(reason, words), style="magenta"))
    if not snap["queues"]:
        q.caption = "no KAI Queue on this cluster"
    parts.append(q)

    if compact:
        return Group(*parts, _evictions_table(snap, width, last=3))
    n = Table(title="GPUs by node pool", title_justify="left", box=None, pad_edge=False, header_style="bold")
    for col in ("pool", "nodes", "ready", "GPUs used", "of", "use"):
        n.add_column(col, justify="left" if col in ("pool", "use") else "right")
    for p in snap["pools"]:
        share = p["gpus_used"] / p["gpus"] if p["gpus"] else 0
        n.add_row(p["pool"], str(p["nodes"]), str(p["ready"]), _n(p["gpus_used"]), _n(p["gpus"]), _bar(share))
    parts.append(n)
    if len(snap["nodes"]) <= 12:
        nodes = Table(title="GPUs by node", title_justify="left", box=None, pad_edge=False, header_style="bold")
        for col in ("node", "pool", "GPUs used", "of", "use"):
            nodes.add_column(col, justify="left" if col in ("node", "pool", "use") else "right")
        for r in snap["nodes"]:
            share = r["gpus_used"] / r["gpus"] if r["gpus"] else 0
            nodes.add_row(r["name"] + ("" if r["ready"] else " (NotReady)"), r["pool"], _n(r["gpus_used"]),
                          _n(r["gpus"]), _bar(share))
        parts.append(nodes)

    parts.append(_evictions_table(snap, width))
    return Group(*parts)


def as_text(snap: dict, title: str, width: int = 120) -> str:
    """The picture as plain text (no colour, no escapes): for a lesson's log or a file."""
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(render(snap, title, width=width))
    return console.file.getvalue()


_UID_TAIL = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _groups(names: list[str] | str) -> str:
    """Pod groups for people: KAI's `pg-` prefix, the UID tail and a shared namespace left off."""
    names = [names] if isinstance(names, str) else names or []  # a picture written before lists
    short = [_UID_TAIL.sub("", n.split("/", 1)[-1]).removeprefix("pg-") for n in names]
    if len(short) <= 1:
        return short[0] if short else ""
    return f"{len(short)}: {', '.join(short)}"


def _evictions_table(snap: dict, width: int, last: int | None = None) -> Table:
    e = Table(title="last evictions (KAI's Evict events)", title_justify="left", box=None, pad_edge=False,
              header_style="bold")
    for col in ("when", "action", "pods", "made room for", "evicted"):
        e.add_column(col, no_wrap=True, overflow="ellipsis", min_width=len(col))
    half = max(12, (width - 30) // 2)
    for ev in snap["evictions"][:last]:
        e.add_row(_ago(ev["ago_s"]), Text(ev["action"] or "?", style="bold red"), str(ev["pods"]),
                  _cut(_groups(ev["for"]) or "-", half), _cut(_groups(ev["podgroups"]), half))
    if not snap["evictions"]:
        e.caption = "none yet"
    return e


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _bar(share: float, width: int = 20) -> Text:
    full = round(share * width)
    return Text.assemble(("█" * full, "green"), ("·" * (width - full), "bright_black"))


@contextlib.contextmanager
def _keys():
    """Single keys from the terminal without Enter (cbreak), restored on the way out; a
    `read(timeout)` that returns '' when nothing was pressed (or stdin is no terminal)."""
    fd = sys.stdin.fileno() if sys.stdin and sys.stdin.isatty() else None
    saved = None
    if fd is not None:
        import termios
        import tty

        saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)

    def read(timeout: float) -> str:
        if fd is None:
            time.sleep(timeout)
            return ""
        ready, _, _ = select.select([fd], [], [], timeout)
        return os.read(fd, 1).decode(errors="ignore") if ready else ""

    try:
        yield read
    finally:
        if saved is not None:
            import termios

            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def live(take, title: str, console, interval: float = 1.0, history_len: int = 120) -> None:
    """Redraw `take()`'s snapshot every `interval` seconds on the alternate screen until `q`."""
    from rich.live import Live

    history: deque = deque(maxlen=history_len)
    with _keys() as read, Live(console=console, screen=True, auto_refresh=False) as screen:
        while True:
            started = time.monotonic()
            snap = take()
            history.append(snap["cluster"]["utilisation"])
            screen.update(render(snap, title, history, console.width), refresh=True)
            left = max(0.05, interval - (time.monotonic() - started))
            deadline = time.monotonic() + left
            while (now := time.monotonic()) < deadline:
                if read(deadline - now).lower() == "q":
                    return


@contextlib.contextmanager
def watching(take, title: str, console, interval: float = 1.0, history_len: int = 120):
    """The picture redrawn below whatever the block prints (a run's log lines go above it), every
    `interval` seconds, until the block ends."""
    from rich.live import Live

    history: deque = deque(maxlen=history_len)

    def picture():
        snap = take()
        history.append(snap["cluster"]["utilisation"])
        return render(snap, title, history, console.width)

    with Live(get_renderable=picture, console=console, refresh_per_second=1 / interval, transient=False,
              vertical_overflow="visible"):
        yield
    if not console.is_terminal:  # rich leaves the last picture's line open in a file: what follows starts a line of its own
        console.line()
