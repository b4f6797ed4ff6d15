"""The table of exercise outcomes shown after `kailab run` and `pytest exercises/`."""

from __future__ import annotations

from rich.table import Table


def summary_table(outcomes) -> Table:
    table = Table(title="exercises")
    for col in ("exercise", "verdict", "key figure", "evidence"):
        table.add_column(col)
    colours = {"passed": "green", "failed": "red", "error": "red", "interrupted": "yellow"}
    for o in outcomes:
        fig = ", ".join(f"{k}={v}" for k, v in o.figures.items()) or "-"
        table.add_row(o.exercise, f"[{colours.get(o.verdict, 'white')}]{o.verdict}[/]", fig, o.evidence)
    return table
