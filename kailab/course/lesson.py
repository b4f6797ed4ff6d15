"""The guided lesson on a lab: the exercise runs with the ordinary runner, one step at a time.
Before each step the learner predicts; after it (the runner's after_step hook hands over that
step's results) the answer is revealed against KAI's, with what was checked and why."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable

from ..labs import require_kai_lab
from .model import Echo, Lesson, StepLesson
from .progress import mark_if_passed
from .words import result_text, share_words

NUMBER = re.compile(r"-?\d+")


def interactive() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def intro(lesson: Lesson) -> list[str]:
    ex = lesson.exercise
    lines = [f"Lesson {lesson.number}: {ex.title}  (exercise {ex.exercise}, fleet {ex.fleet})", "",
             *ex.concept.strip().splitlines(), "", "Queues:"]
    for name, parent, gpu in ex.queue_tree():
        lines.append(f"  {name}{f' (in {parent})' if parent else ''}: {share_words(gpu)}")
    return lines


def judge(prediction: str | None, results: list) -> str:
    """One line: the learner's numbers against KAI's, in order. A predicted step's first checks
    answer its question (docs/exercise-format.md), so the n-th number meets the n-th check."""
    observed = [r.observed for r in results if NUMBER.fullmatch(str(r.observed))]
    said = NUMBER.findall(prediction or "")
    kai_said = ", ".join(f"{r.what} = {r.observed}" for r in results[:max(1, len(said))])
    if not said:
        return f"   your answer: {prediction or '(none)'}  |  KAI: {kai_said}"
    matched = len(said) <= len(observed) and all(a == b for a, b in zip(said, observed))
    return (f"   your answer: {prediction}  |  KAI: {kai_said}  ->  "
            + ("RIGHT: that is what KAI did" if matched else "NOT what KAI did"))


def reveal(s: StepLesson, results: list, prediction: str | None, step_dir: Path | None) -> list[str]:
    """After a step ran: the learner's answer against KAI's, what was checked, then why."""
    lines = []
    if s.predict:
        lines.append(judge(prediction, results))
    lines.append("   observed:")
    lines += [f"     {result_text(r)}" for r in results] or ["     (nothing to check: this step sets the stage)"]
    if s.explain:
        lines += ["   why:"] + ["     " + line for line in s.explain.strip().splitlines()]
    if step_dir is not None:
        lines.append(f"   evidence: {step_dir}/")
    return lines


def whole_run(results: list) -> list[str]:
    """The run's invariant results (Result.kind), watched over every step: the closing section."""
    invariants = [r for r in results if r.kind == "invariant"]
    if not invariants:
        return []
    return ["", "-- The whole run", *[f"     {result_text(r)}" for r in invariants]]


class _Guide:
    """The runner's step hooks for one lesson: ask before a step, reveal after it, then pause.
    `run` is set once the ExerciseRun exists (it needs these hooks to be built)."""

    def __init__(self, lesson: Lesson, lab, pause: bool, echo: Echo, ask: Callable[[str], str],
                 picture: Callable[[], str] | None = None):
        self.lesson, self.lab, self.echo, self.ask, self.picture = lesson, lab, echo, ask, picture
        self.asking = pause  # off for good once the learner's input ends
        self.predictions: dict[int, str] = {}
        self.run = None

    def prompt(self, text: str) -> str | None:
        if not self.asking:
            return None
        try:
            return self.ask(text).strip()
        except EOFError:
            self.asking = False
            return None

    def before(self, index: int, _step) -> None:
        s = self.lesson.steps[index]
        self.echo("")
        self.echo(f"-- Step {s.number}/{len(self.lesson.steps)}: {s.name}")
        for a in s.actions:
            self.echo(f"   * {a}")
        if s.predict:
            self.echo(f"   ? {s.predict.strip()}")
            answer = self.prompt("   your prediction> ")
            if answer is not None:
                self.predictions[s.number] = answer
        self.echo("   running this step on the lab ...")

    def after(self, index: int, _step, results: list) -> None:
        s = self.lesson.steps[index]
        for line in reveal(s, results, self.predictions.get(s.number), self.run.evidence.path / s.evidence):
            self.echo(line)
        if self.picture is not None:  # the lab as the step left it: queues, waits, GPUs, evictions
            self.echo(self.picture().rstrip())
        if index + 1 < len(self.lesson.steps):
            look = f"`eval \"$(kailab env --name {self.lab.name})\"` and kubectl -n {self.run.names.namespace}"
            self.prompt(f"   (the lab keeps this state: look around with {look}) Enter for the next step> ")


def run_lesson(lesson: Lesson, lab_name: str, pause: bool, echo: Echo, ask: Callable[[str], str] = input,
               evidence_root: Path | None = None, picture: Callable[..., Callable[[], str]] | None = None) -> int:
    """The guided lesson, one step at a time: ask, run the step, reveal (your answer vs KAI's),
    explain, show the lab (with `picture`: given the lab, a maker of its picture, `kailab top`'s),
    and (with `pause`) wait while the lab keeps the step's state. Exit code 0 only when the run passed."""
    from ..exercise.runner import ExerciseRun  # the runner loads the Kubernetes client: only when running

    lab = require_kai_lab(lab_name, "lessons", lesson.exercise.fleet)  # before any question: no lab, no lesson
    for line in intro(lesson):
        echo(line)
    guide = _Guide(lesson, lab, pause, echo, ask, picture(lab) if picture else None)
    run = guide.run = ExerciseRun(lesson.exercise, lesson.source, lab, evidence_root, guide.before, guide.after)
    echo("")
    echo(f"Running exercise {lesson.name} on lab {lab.name!r} (namespace {run.names.namespace}, "
         f"queues {run.names.prefix}-<name>), one step at a time ...")
    outcome = run.run()
    for line in whole_run(outcome.results) + [""]:
        echo(line)
    echo(f"verdict: {outcome.verdict.upper()}" + (f" ({outcome.error})" if outcome.error else ""))
    echo(f"evidence: {outcome.evidence}")
    if not mark_if_passed(lesson.name, outcome):
        return 1
    echo(f"lesson {lesson.name} is done (see `kailab course`)")
    return 0
