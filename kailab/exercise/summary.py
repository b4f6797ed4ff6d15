"""The outcomes shown after `kailab run` and `pytest exercises/`: a table on a terminal, one full
line per exercise elsewhere (a CI log, `| tee`), where a table cut to 80 columns would hide the
evidence paths and figures a reader needs."""

from __future__ import annotations

from rich.table import Table

from ..report.figure_names import text

COLOURS = {"passed": "green", "failed": "red", "error": "red", "interrupted": "yellow"}


def _figures(o) -> str:
    """In words and units, as the report names them (report/figure_names.py)."""
    return text(o.figures, getattr(o, "step_titles", None))


def summary_table(outcomes) -> Table:
    table = Table(title="exercises")
    for col in ("exercise", "verdict", "key figure", "evidence"):
        table.add_column(col)
    for o in outcomes:
        table.add_row(o.exercise, f"[{COLOURS.get(o.verdict, 'white')}]{o.verdict}[/]", _figures(o), o.evidence)
    return table


def heading(outcomes) -> str:
    """What the lines below say, in one: 'exercises: 3 passed, 1 failed'."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.verdict] = counts.get(o.verdict, 0) + 1
    return "exercises: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items())


def summary_lines(outcomes) -> list[str]:
    """One uncut line per exercise: verdict, every figure, the evidence's full path."""
    return [f"{o.exercise}: {o.verdict}  {_figures(o)}  evidence: {o.evidence}" for o in outcomes]


def retry_lines(outcomes) -> list[str]:
    """The labs' start retries (components `up` started again), each lab counted once."""
    by_lab = {o.lab: o.start_retries for o in outcomes if getattr(o, "start_retries", None)}
    total = sum(len(r) for r in by_lab.values())
    if not total:
        return []
    return [f"lab start retries: {total}"] + [f"  {lab}: {r['component']}: {r['reason']}"
                                              for lab, rs in sorted(by_lab.items()) for r in rs]


def print_summary(console, outcomes) -> None:
    """A table where a terminal shows it whole, plain lines everywhere else; then the labs' start retries."""
    if console.is_terminal:
        console.print(summary_table(outcomes))
    else:
        console.print(heading(outcomes), markup=False, highlight=False)
        for line in summary_lines(outcomes):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    for line in retry_lines(outcomes):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
