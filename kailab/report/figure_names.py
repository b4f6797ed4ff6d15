"""A run's key figures for people: words and units instead of the verdict's machine keys.

One place names every figure, so the report's table, the terminal summary and the JUnit/allure
properties call a figure the same. The machine keys (`wait_p99_s.prod`, `expected_after_s.02`) stay
in verdict.json and run.json; the report shows them on hover.
"""

from __future__ import annotations

import re

_GROUPS = {  # key prefix -> (label, unit)
    "wait_p99": ("waits p99", "s"),
    "gang_bind_spread": ("gang bind spread", "s"),
    "gang_decision_to_bound": ("gang decision to last bind", "s"),
    "never_bound": ("never bound", "pods"),
    "evicted": ("evicted", "pods"),
    "evicted_by_action": ("evicted by KAI's", ""),
}
# p50, p95 and max waits are detail a person does not need in one line: they are in the run's own
# figures table, and on hover


def _num(v) -> str:
    if isinstance(v, float):  # 1.678 -> 1.7, 0.012 -> 0.012 (a gang's spread is milliseconds), 312.4 -> 312
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 1 else f"{v:.2g}"
    return str(v)


def step_titles(exercise: dict | None) -> dict[int, str]:
    """Step number (1-based, as `expected_after_s.NN` counts) -> the step's own name in the file."""
    steps = (exercise or {}).get("steps") if isinstance(exercise, dict) else None
    return {i: str(s.get("name", "")) for i, s in enumerate(steps or [], 1) if isinstance(s, dict)}


def described(figures: dict, titles: dict[int, str] | None = None) -> list[tuple[str, str]]:
    """(label, value with its unit) in reading order: binds, evictions, gangs, per-queue waits,
    pods never bound or evicted, when each step's expectations held."""
    if not isinstance(figures, dict):
        return []
    titles = titles or {}
    out: list[tuple[str, str]] = []
    if "binds" in figures:
        out.append(("binds", _num(figures["binds"])))
    if "evictions" in figures:
        out.append(("evictions", _num(figures["evictions"])))
    if "pending_peak" in figures:
        out.append(("most pods waiting at once", _num(figures["pending_peak"])))
    if "gangs_complete" in figures:
        total = figures["gangs_complete"] + figures.get("gangs_incomplete", 0)
        out.append(("gangs complete", f"{_num(figures['gangs_complete'])} of {_num(total)}"))
    for prefix, (label, unit) in _GROUPS.items():
        parts = [f"{k.split('.', 1)[1]} {_num(v)}{' ' + unit if unit else ''}" for k, v in figures.items()
                 if k.startswith(prefix + ("_s." if unit == "s" else ".")) and "." in k]
        if parts:
            out.append((label, ", ".join(parts)))
    for k, v in figures.items():
        m = re.match(r"^expected_after_s\.(\d+)$", k)
        if m:
            n = int(m.group(1))
            title = titles.get(n)
            out.append((f"step {n}" + (f" “{title}”" if title else ""), f"held after {_num(v)} s"))
    known = re.compile(r"^(binds|evictions|pending_peak|gangs_(in)?complete|expected_after_s\.\d+|wait_(p50|p95|p99|max)_s\..+|"
                       r"(gang_bind_spread|gang_decision_to_bound)_s\..+|never_bound\..+|evicted\..+|evicted_by_action\..+)$")
    for k, v in figures.items():  # a figure this module does not know yet: shown, never dropped
        if not known.match(k):
            out.append((k.replace("_", " "), _num(v)))
    return out


def text(figures: dict, titles: dict[int, str] | None = None) -> str:
    """The figures in one line, e.g. '24 binds · 0 evictions · waits p99: prod 1.7 s'."""
    parts = []
    for label, value in described(figures, titles):
        parts.append(f"{value} {label}" if label in ("binds", "evictions") else f"{label}: {value}")
    return " · ".join(parts) or "-"
