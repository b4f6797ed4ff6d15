"""Exercises on a lab per variant, side by side: what `kailab trial` (a KAI version a variant) and
`kailab compare` (a stack a variant) each run here, and the matrix page they both write."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .. import evidence, labs
from ..errors import KailabError
from ..exercise.load import load_exercise
from ..exercise.runner import ExerciseRun
from ..labs import Lab, LabSpec
from ..report import write_report
from .here import at_once_for, side_by_side

LAB_ERROR = "lab-error.txt"  # a variant whose lab did not come up (or broke): its one line, in its folder


def exercises_side_by_side(folder: Path, variants: dict[str, LabSpec], exercises: list[str], repeat: int,
                           at_once: int | None = None,
                           prepare: Callable[[str, Lab, Path], Callable[[], None] | None] | None = None) -> None:
    """Each variant (its folder name -> its lab's spec) on a lab of its own, its exercises `repeat` times
    into `folder/<variant>/run-<i>/`. `prepare(variant, lab, its folder)` runs once its lab is up and may
    return what to do before every run (a column's scheduler setting, put back after a run's own)."""

    def one(name: str) -> None:
        vdir = folder / name
        vdir.mkdir()
        try:
            with labs.running(variants[name]) as lab:
                before = prepare(name, lab, vdir) if prepare else None
                for i in range(1, repeat + 1):
                    for p in exercises:
                        if before is not None:
                            before()
                        ExerciseRun(load_exercise(p), Path(p), lab, vdir / f"run-{i}").run()
        except KailabError as err:
            (vdir / LAB_ERROR).write_text(str(err) + "\n")

    side_by_side(list(variants), one, at_once_for(len(variants), at_once))


def write_matrix_page(folder: Path, matrix: dict, markdown: str) -> dict:
    """matrix.json, matrix.md and report.html (every run's evidence) of a side-by-side; the matrix."""
    evidence.write_matrix(folder, matrix, markdown)
    write_report([folder])
    return matrix
