"""The training course: guided lessons built from the exercise files.

One source of truth: a lesson IS an exercise (exercises/<name>.yaml). Its concept, each step's
`explain` and `predict`, and the answers (derived from the step's `expect`/`stays`) come from the
file; kailab/data/course.yaml only orders the lessons and holds the capstone brief.

- `render_all()` writes docs/course/ (deterministic: a test compares it byte for byte).
- `run_lesson()` runs the exercise with the ordinary runner one step at a time: before each step
  it asks the learner's prediction, after it reveals (their answer vs KAI's, right or not), shows
  what was checked, explains why, and waits while the lab keeps the step's state.
- The capstone: a learner's queue tree is checked statically (one line per problem), then run
  against the lab inside an exercise built from it whose expectations the learner does not see
  in advance.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml
from pydantic import Field

from .errors import InputError, KailabError
from . import evidence
from .exercise.spec import (
    ConditionExpect,
    CountExpect,
    EventExpect,
    Exercise,
    GpuShare,
    QueueNode,
    Range,
    Step,
    Strict,
    _name,
    load_exercise,
)
from .fleet import load_fleet
from .runtimes.base import kai_lab
from .paths import PROJECT_ROOT, exercises_dir, state_dir
from .specs import read_yaml, validate
from .workloads import OWNER_LABEL, QUEUE_LABEL

COURSE_FILE = Path(__file__).resolve().parent / "data" / "course.yaml"
DOCS_DIR = PROJECT_ROOT / "docs" / "course"
CAPSTONE_PAGE = "99-capstone.md"
LAB_BLOCK = "bash lab"  # info string of fenced blocks holding commands to type against a lab
METRICS = ("bound", "running", "pending", "evicted")

# the views a learner uses to watch any lesson by hand (the brief's five, in reading order)
WATCH_COMMANDS = [
    "kubectl get nodes -L nvidia.com/gpu.count",
    "kubectl get queues",
    "kubectl get podgroups -A",
    "kubectl get pods -A -o wide",
    "kubectl get events -A --sort-by=.lastTimestamp",
]
# same fields the checks read (kailab.exercise.checks.podgroup_reasons)
PODGROUP_REASONS = ("kubectl get podgroups -A -o custom-columns=NAME:.metadata.name,QUEUE:.spec.queue,"
                    "CONDITION:.status.schedulingConditions[*].reason,"
                    "REASONS:.status.schedulingConditions[*].reasons[*].reason")

INVARIANT_TEXT = {
    "no-gpu-overcommit": "no node's bound pods ask for more GPUs than the node has",
    "gang-never-partial": "a gang Job has either none or at least its gang size of pods allocated",
    "nonpreemptible-within-quota": "no queue holds more non-preemptible GPUs than its quota",
    "queue-within-limit": "no queue's subtree holds more GPUs than its limit",
}
FAKE_GPU_NOTE = ("The nodes are KWOK fakes: no GPU, driver or container exists and pods run no code "
                 "(KWOK marks them Running). What a lesson shows is KAI's decisions - which pod is bound "
                 "where, which is evicted, what the PodGroups say - not what a workload would do.")


# ============================================================================ the course file
class Team(Strict):
    guarantee: int = Field(ge=0, description="GPUs the team is promised")
    borrows: bool = Field(False, description="may run on idle GPUs beyond its guarantee")
    inference: bool = Field(False, description="production serving: non-preemptible, never evicted")


class Capstone(Strict):
    name: str = "capstone"
    title: str
    fleet: str
    file: str
    brief: str
    teams: dict[str, Team] = Field(min_length=1)


class CourseSpec(Strict):
    title: str
    lessons: list[str] = Field(min_length=1)
    capstone: Capstone


def load_course(path: Path = COURSE_FILE) -> CourseSpec:
    course = validate(CourseSpec, read_yaml(path), path)
    seen: set[str] = set()
    for i, name in enumerate(course.lessons):
        if name in seen:
            raise InputError(path, f"lessons[{i}]", f"lesson {name!r} appears twice", "keep one")
        seen.add(name)
    if course.capstone.name in seen:
        raise InputError(path, "capstone.name", f"{course.capstone.name!r} is also a lesson", "rename it")
    return course


# ============================================================================ the lesson model
@dataclass
class StepLesson:
    number: int
    name: str
    explain: str
    predict: str | None
    actions: list[str]
    answer: list[str]     # what KAI must do for the step to pass, from expect/stays
    commands: list[str]   # kubectl commands that show this step by hand
    evidence: str         # the step's directory inside a run's evidence
    results: int          # how many Results the runner records for this step


@dataclass
class Lesson:
    number: int
    name: str
    exercise: Exercise
    source: Path
    fleet_gpus: int
    steps: list[StepLesson] = field(default_factory=list)
    prev_page: str | None = None  # set by lessons(): the course order
    next_page: str | None = None

    @property
    def title(self) -> str:
        return self.exercise.title

    @property
    def page(self) -> str:
        return f"{self.number:02d}-{self.name}.md"


def num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def count_words(c: int | Range) -> str:
    if isinstance(c, int):
        return str(c)
    if c.min is not None and c.max is not None:
        return str(c.min) if c.min == c.max else f"{c.min} to {c.max}"
    return f"at least {c.min}" if c.min is not None else f"at most {c.max}"


def _why(c: int | Range) -> str:
    return f" ({c.why})" if isinstance(c, Range) and c.why else ""


def describe_count(e: CountExpect) -> str:
    subject = f"queue {e.queue}" if e.queue is not None else f"workload {e.workload}"
    parts = [f"{count_words(v)} {m}{_why(v)}" for m in METRICS if (v := getattr(e, m)) is not None]
    return f"{subject}: {', '.join(parts)}" + (f" - why: {e.why}" if e.why else "")


def describe_expect(e: CountExpect | ConditionExpect | EventExpect) -> str:
    if isinstance(e, CountExpect):
        return describe_count(e)
    if isinstance(e, ConditionExpect):
        verb = "carry" if e.present else "do not carry"
        who = "every PodGroup" if e.every else "PodGroups"
        return f"{who} of {e.podgroup_of} {verb} the reason {e.reason}" + (f" - why: {e.why}" if e.why else "")
    return f"workload {e.workload}: {count_words(e.count)} {e.event_reason} event(s){_why(e.count)}"


def answer_lines(step: Step) -> list[str]:
    lines = [describe_expect(e) for e in step.expect]
    if step.stays:
        lines += [f"for the whole {step.stays.for_}: {describe_count(c)}" for c in step.stays.that]
    return lines


def share_words(gpu: GpuShare) -> str:
    quota = "unlimited" if gpu.quota < 0 else num(gpu.quota)
    limit = "none" if gpu.limit < 0 else num(gpu.limit)
    return f"quota {quota}, limit {limit}, overQuotaWeight {num(gpu.over_quota_weight)}"


def _gpus(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def _class_words(w) -> str:
    out = f"priority class {w.priority_class}" if w.priority_class else "no priority class"
    if w.preemptible is not None:
        out += ", labelled " + ("preemptible" if w.preemptible else "non-preemptible")
    if getattr(w, "run_duration", None):
        out += f", each finishing {w.run_duration} after it starts"
    return out


def action_lines(step: Step) -> list[str]:
    """What the runner does in this step, in its order: delete, patch, apply, settle."""
    out = [f"deletes workload {d.workload}" for d in step.delete]
    for p in step.patch:
        if p.queue is not None and p.gpu is not None:
            out.append(f"changes queue {p.queue} to {share_words(p.gpu)}")
        else:
            out.append(f"scales Deployment {p.deployment} to {p.replicas} replicas")
    for item in step.apply:
        if item.pods:
            p = item.pods
            out.append(f"creates {p.count} pods {p.name}-0..{p.count - 1} in queue {p.queue}: "
                       f"{_gpus(p.gpus)} each, {_class_words(p)}")
        elif item.job:
            j = item.job
            gang = f"a gang of {j.gang} (all or nothing)" if j.gang else "no gang size"
            out.append(f"creates Job {j.name} with {j.parallelism} pods in queue {j.queue}: {_gpus(j.gpus)} each, "
                       f"{gang}, {_class_words(j)}")
        elif item.deployment:
            d = item.deployment
            cls = (_class_words(d) if d.priority_class else
                   "no priority class, so KAI's podgrouper gives it inference (non-preemptible)")
            out.append(f"creates Deployment {d.name} with {d.replicas} replicas in queue {d.queue}: "
                       f"{_gpus(d.gpus)} each, {cls}")
    if step.settle:
        out.append(f"waits until no pod changes placement for {step.settle}")
    return out


def step_commands(step: Step) -> list[str]:
    """kubectl commands that show this step's subjects; real names are per run, so -A and labels."""
    workloads: list[str] = []

    def add(w: str | None) -> None:
        if w and w not in workloads:
            workloads.append(w)

    for item in step.apply:
        add(item.workload.name)
    for p in step.patch:
        add(p.deployment)
    for d in step.delete:
        add(d.workload)
    checks = list(step.expect) + (list(step.stays.that) if step.stays else [])
    for e in checks:
        add(e.podgroup_of if isinstance(e, ConditionExpect) else e.workload)
    cmds = [f"kubectl get pods -A -l {OWNER_LABEL}={w} -o wide" for w in workloads]
    if any(isinstance(e, CountExpect) and e.queue is not None for e in checks) or any(p.queue for p in step.patch):
        cmds.append(f"kubectl get pods -A -o wide -L {QUEUE_LABEL}")
    if any(isinstance(e, ConditionExpect) for e in checks):
        cmds.append(PODGROUP_REASONS)
    for reason in dict.fromkeys(e.event_reason for e in checks if isinstance(e, EventExpect)):
        cmds.append(f"kubectl get events -A --field-selector reason={reason} --sort-by=.lastTimestamp")
    return cmds


def result_count(step: Step) -> int:
    """Results the runner appends for this step: one per metric of a count, one per other check."""
    n = sum(sum(getattr(e, m) is not None for m in METRICS) if isinstance(e, CountExpect) else 1
            for e in step.expect)
    if step.stays:
        n += sum(sum(getattr(c, m) is not None for m in METRICS) for c in step.stays.that)
    return n


def build_lesson(ex: Exercise, number: int, source: Path) -> Lesson:
    lesson = Lesson(number=number, name=ex.exercise, exercise=ex, source=Path(source),
                    fleet_gpus=load_fleet(ex.fleet).gpus_total)
    for i, step in enumerate(ex.steps, 1):
        lesson.steps.append(StepLesson(
            number=i, name=step.name, explain=step.explain.strip(), predict=step.predict,
            actions=action_lines(step), answer=answer_lines(step), commands=step_commands(step),
            evidence=evidence.step_dir(i, step.name), results=result_count(step)))
    return lesson


def lessons(course: CourseSpec | None = None) -> list[Lesson]:
    course = course or load_course()
    out = []
    for i, name in enumerate(course.lessons):
        path = exercises_dir() / f"{name}.yaml"
        if not path.is_file():
            raise InputError(COURSE_FILE, f"lessons[{i}]", f"no exercise {name!r} in {exercises_dir()}",
                             "add exercises/NAME.yaml or remove the lesson")
        out.append(build_lesson(load_exercise(path), i + 1, path))
    for before, after in zip(out, out[1:]):
        before.next_page, after.prev_page = after.page, before.page
    if out:
        out[-1].next_page = CAPSTONE_PAGE
    return out


def find_lesson(name: str, course: CourseSpec | None = None) -> Lesson:
    course = course or load_course()
    all_ = lessons(course)
    for lesson in all_:
        if name in (lesson.name, str(lesson.number), f"{lesson.number:02d}"):
            return lesson
    known = ", ".join([lesson.name for lesson in all_] + [course.capstone.name])
    raise KailabError(f"no lesson {name!r} in the course (lessons: {known})")


# ============================================================================ Markdown
def _fence(lines: list[str], info: str = LAB_BLOCK) -> list[str]:
    return [f"```{info}", *lines, "```"]


def _queue_table(ex: Exercise) -> list[str]:
    rows = ["| queue | parent | quota (guaranteed GPUs) | limit | overQuotaWeight |", "|---|---|---|---|---|"]
    for name, parent, gpu in ex.queue_tree():
        rows.append(f"| `{name}` | {f'`{parent}`' if parent else '-'} | "
                    f"{'unlimited' if gpu.quota < 0 else num(gpu.quota)} | "
                    f"{'none' if gpu.limit < 0 else num(gpu.limit)} | {num(gpu.over_quota_weight)} |")
    return rows


def _watch_section(what: str) -> list[str]:
    return ["## Watch it by hand", "",
            f"While {what} runs, in a second terminal (after `eval \"$(kailab env)\"`):", "",
            *_fence(WATCH_COMMANDS), "",
            "Each run uses its own namespace (`kx-<exercise>-<id>`) and queue names (`x<id>-<queue>`) and deletes "
            "them when it ends; afterwards the same views are in its evidence directory "
            "(`evidence/<time>-<exercise>/`: `queues.yaml`, `podgroups.yaml`, `pods.yaml`, `nodes.yaml`, "
            "`events.yaml` per step, `timeline.jsonl`, `verdict.json`).", ""]


def render_markdown(lesson: Lesson) -> str:
    """The lesson page (links to its neighbours when built by lessons())."""
    ex = lesson.exercise
    n = len(lesson.steps)
    lines = [f"# Lesson {lesson.number}: {ex.title}", "",
             f"> Exercise [`{ex.exercise}`](../../exercises/{lesson.source.name}) - fleet `{ex.fleet}` "
             f"({lesson.fleet_gpus} GPUs) - {n} step{'s' if n != 1 else ''}.",
             "> Generated from the exercise file by `kailab course --render`: edit the exercise, not this page.",
             "", "## The idea", "", ex.concept.strip(), "",
             "## The queues", "", *_queue_table(ex), "",
             "Workloads go to the leaf queues. A queue's counts include its whole subtree.", "",
             "## Run it", "",
             f"On a lab with KAI and the `{ex.fleet}` fleet:", "",
             *_fence([f"kailab up --fleet {ex.fleet}", "eval \"$(kailab env)\"", f"kailab lesson {ex.exercise}"]), "",
             f"`kailab lesson {ex.exercise}` shows each step and asks for your prediction, runs the exercise, then "
             "puts what you predicted next to what KAI did, step by step, with the evidence directory. "
             "`--no-pause` skips the questions. Without the guidance: "
             f"`kailab run {ex.exercise}` (exit 0 only when every expectation held).", "",
             *_watch_section("the lesson")]
    for s in lesson.steps:
        lines += [f"## Step {s.number}: {s.name}", ""]
        if s.explain:
            lines += [f"**What happens.** {s.explain}", ""]
        if s.actions:
            lines += ["**What the exercise does:**", "", *[f"- {a}" for a in s.actions], ""]
        if s.predict:
            lines += [f"**Predict.** {s.predict.strip()}", ""]
        summary = "Answer" if s.predict else "What KAI must do"
        answer = [f"- {a}" for a in s.answer] or ["- nothing is checked here: this step sets the stage"]
        lines += ["<details>", f"<summary>{summary}</summary>", "", *answer, "", "</details>", ""]
        if s.commands:
            lines += ["**See it by hand:**", "", *_fence(s.commands), ""]
        lines += [f"Evidence of this step: `{s.evidence}/` in the run's evidence directory "
                  "(queues, PodGroups, pods, nodes and events at the step's end).", ""]
    if ex.invariants:
        lines += ["## Checked for the whole run", "",
                  *[f"- `{inv}`: {INVARIANT_TEXT[inv]}" for inv in ex.invariants], ""]
    lines += ["## What this proves on fake GPUs / what it does not", "",
              f"- **Proves:** {ex.proves.strip() or '(not stated in the exercise)'}",
              f"- **Does not prove:** {ex.does_not_prove.strip() or '(not stated in the exercise)'}", "",
              FAKE_GPU_NOTE, ""]
    nav = [f"[previous lesson]({lesson.prev_page})"] if lesson.prev_page else []
    nav.append("[course index](README.md)")
    if lesson.next_page:
        nav.append(f"[{'capstone' if lesson.next_page == CAPSTONE_PAGE else 'next lesson'}]({lesson.next_page})")
    lines += [" - ".join(nav), ""]
    return "\n".join(lines)


def render_capstone(course: CourseSpec) -> str:
    cap = course.capstone
    gpus = load_fleet(cap.fleet).gpus_total
    teams = ["| team | guaranteed GPUs | also |", "|---|---|---|"]
    for name, t in cap.teams.items():
        also = ("may borrow idle GPUs, and gives them back" if t.borrows else
                "production serving: its pods must never be evicted" if t.inference else "-")
        teams.append(f"| `{name}` | {t.guarantee} | {also} |")
    skeleton = ["# " + cap.file + ": a starting point - every number is yours to choose",
                "org:", "  gpu: {quota: -1, limit: -1}", "  children:"]
    width = max(len(n) for n in cap.teams) + 1
    skeleton += [f"    {(name + ':').ljust(width)} {{gpu: {{quota: 0, limit: -1, overQuotaWeight: 1}}}}"
                 for name in cap.teams]
    lines = [f"# Capstone: {cap.title}", "",
             "> Generated by `kailab course --render` from kailab/data/course.yaml and kailab/course.py.", "",
             "## The brief", "", cap.brief.strip(), "", *teams, "",
             "## What to write", "",
             f"A file, say `{cap.file}`, holding a queue tree in the format of an exercise's `queues:` block "
             "([the exercise format](../exercise-format.md)): a mapping from queue name to "
             "`{gpu: {quota, limit, overQuotaWeight}, children: {...}}`, where quota -1 means unlimited and "
             "limit -1 means no limit. The teams must be leaf queues with exactly these names: "
             + ", ".join(f"`{n}`" for n in cap.teams)
             + ". Parent queues are yours to choose. The file may also start with a `queues:` key.", "",
             *_fence(skeleton, "yaml"), "",
             "The lessons before this one hold everything you need: quotas, borrowing, reclaim, and why "
             "inference stops at its quota.", "",
             "## Check it", "",
             *_fence([f"kailab up --fleet {cap.fleet}", f"kailab lesson {cap.name} --check {cap.file}"]), "",
             "First a static check, before any lab work, with one line per problem: the teams' quotas add up "
             f"to at most the fleet's {gpus} GPUs; no team's quota or limit is below its guarantee; no parent "
             "queue has limit 0 (it blocks everything below it) or a limit below its teams' guarantees; the "
             "borrowing team (and its parents) have overQuotaWeight above 0 and room under their limits; "
             "the inference team's quota covers what production inference needs "
             "(non-preemptible pods never run above quota).", "",
             "Then the check builds an exercise from your tree whose numbers you do not see in advance, and "
             "runs it on the lab like any other exercise. Its steps, each one requirement:", ""]
    lines += [f"{i}. **{name}**: {text}" for i, (name, text) in enumerate(CAPSTONE_STEPS, 1)]
    lines += ["",
              "The report names each requirement that failed with what KAI did, and the evidence directory "
              "(`evidence/<time>-capstone/`). A passing check marks the capstone done in `kailab course`.", "",
              *_watch_section("the check"),
              "## What this proves on fake GPUs / what it does not", "",
              "- **Proves:** that KAI, given your queue tree, honours each team's guarantee, lends idle GPUs "
              "and takes them back, and never evicts production inference - as scheduling decisions on "
              f"a {gpus}-GPU fake fleet.",
              "- **Does not prove:** how your real workloads behave when preempted (checkpointing), real GPU "
              "performance, or CPU/memory quotas (the lab leaves those unlimited).", "",
              FAKE_GPU_NOTE, "", "[course index](README.md)", ""]
    return "\n".join(lines)


def render_index(course: CourseSpec, all_: list[Lesson]) -> str:
    lines = [f"# Training course: {course.title}", "",
             "> Generated by `kailab course --render` from kailab/data/course.yaml and exercises/*.yaml: "
             "edit those, not these pages (a test fails when they are stale).", "",
             "Each lesson is one exercise from `exercises/`. You read the idea, predict what KAI will do at "
             "each step, run the exercise on a fake-GPU fleet, and compare your prediction with what KAI "
             "did. The answer to every question is what the exercise asserts, so a lesson that passes has "
             "shown it on the lab, with the evidence kept. The README's Status section says which of the "
             "exercises have been observed against KAI.", "",
             "## Before you start", "",
             *_fence(["kailab up --fleet small", "eval \"$(kailab env)\"", "kailab course"]), "",
             "`kailab course` lists the lessons in order with your progress; a lesson is done when its "
             "`kailab lesson NAME` run passes.", "",
             "## Lessons", "",
             "| # | lesson | exercise | steps | what it proves |", "|---|---|---|---|---|"]
    for lesson in all_:
        lines.append(f"| {lesson.number} | [{lesson.title}]({lesson.page}) | `{lesson.name}` | "
                     f"{len(lesson.steps)} | {lesson.exercise.proves.strip()} |")
    cap = course.capstone
    lines += ["", "## Capstone", "",
              f"[{cap.title}]({CAPSTONE_PAGE}): write the queue tree for an organisation's "
              f"{load_fleet(cap.fleet).gpus_total} GPUs and check it with "
              f"`kailab lesson {cap.name} --check FILE`.", ""]
    return "\n".join(lines)


def render_all(out_dir: Path | str | None = None) -> list[Path]:
    """Write README.md, one page per lesson and the capstone page; remove pages of old lessons."""
    out = Path(out_dir) if out_dir is not None else DOCS_DIR
    course = load_course()
    all_ = lessons(course)
    pages = {"README.md": render_index(course, all_), CAPSTONE_PAGE: render_capstone(course)}
    for lesson in all_:
        pages[lesson.page] = render_markdown(lesson)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.md"):
        if old.name not in pages:
            old.unlink()
    written = []
    for name in sorted(pages):
        (out / name).write_text(pages[name], encoding="utf-8")
        written.append(out / name)
    return written


def lab_commands(markdown: str) -> list[str]:
    """Every command line inside the ```bash lab blocks of a page (comments and blanks skipped)."""
    cmds, inside = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            inside = (not inside) and line[3:].strip() == LAB_BLOCK
            continue
        if inside and line.strip() and not line.lstrip().startswith("#"):
            cmds.append(line.strip())
    return cmds


# ============================================================================ progress
def status_path() -> Path:
    """The learner's progress (KAILAB_COURSE_STATUS overrides: a classroom machine, a test)."""
    return Path(os.environ.get("KAILAB_COURSE_STATUS") or state_dir().parent / "course.json")


def load_status() -> dict:
    try:
        data = json.loads(status_path().read_text())
    except (OSError, ValueError):
        return {"done": {}}
    if not isinstance(data, dict) or not isinstance(data.get("done"), dict):
        return {"done": {}}
    return data


def mark_done(name: str, evidence: str) -> None:
    data = load_status()
    data["done"][name] = {"at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                          "evidence": evidence}
    path = status_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def course_rows(course: CourseSpec | None = None) -> list[tuple[str, str, str, str]]:
    """(number, name, title, status) in teaching order, the capstone last. Needs no cluster."""
    course = course or load_course()
    done = load_status()["done"]
    rows = []
    for i, name in enumerate(course.lessons, 1):
        path = exercises_dir() / f"{name}.yaml"
        title = load_exercise(path).title if path.is_file() else "(exercise file missing)"
        rows.append((str(i), name, title, "done" if name in done else "not started"))
    cap = course.capstone
    rows.append(("capstone", cap.name, cap.title, "done" if cap.name in done else "not started"))
    return rows


# ============================================================================ running a lesson
Echo = Callable[[str], None]


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


def split_results(lesson: Lesson, results: list) -> tuple[list[list], list]:
    """The runner's results, per step (in order), and the whole-run invariant results."""
    per_step: list[list] = []
    i = 0
    for s in lesson.steps:
        mine = []
        while i < len(results) and len(mine) < s.results and results[i].step == s.name \
                and results[i].kind != "invariant":
            mine.append(results[i])
            i += 1
        per_step.append(mine)
    rest = [r for r in results[i:] if r.kind == "invariant"]
    return per_step, rest


def result_text(r) -> str:
    text = f"{'PASS' if r.passed else 'FAIL'}  {r.what}: expected {r.expected}, observed {r.observed}"
    if r.offending and not r.passed:
        text += f" (e.g. {', '.join(r.offending[:5])})"
    return text


NUMBER = re.compile(r"-?\d+")


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


def run_lesson(lesson: Lesson, lab_name: str, pause: bool, echo: Echo, ask: Callable[[str], str] = input,
               evidence_root: Path | None = None) -> int:
    """The guided lesson, one step at a time: ask, run the step, reveal (your answer vs KAI's),
    explain, and (with `pause`) wait while the lab keeps the step's state. Exit code 0 only when
    the run passed."""
    from .exercise.runner import ExerciseRun

    lab = kai_lab(lab_name, "lessons", lesson.exercise.fleet)  # before any question: no lab, no lesson
    for line in intro(lesson):
        echo(line)
    predictions: dict[int, str] = {}
    interactive_ = [pause]

    def prompt(text: str) -> str | None:
        if not interactive_[0]:
            return None
        try:
            return ask(text).strip()
        except EOFError:
            interactive_[0] = False
            return None

    def before(index: int, _step) -> None:
        s = lesson.steps[index]
        echo("")
        echo(f"-- Step {s.number}/{len(lesson.steps)}: {s.name}")
        for a in s.actions:
            echo(f"   * {a}")
        if s.predict:
            echo(f"   ? {s.predict.strip()}")
            answer = prompt("   your prediction> ")
            if answer is not None:
                predictions[s.number] = answer
        echo("   running this step on the lab ...")

    def after(index: int, _step, results: list) -> None:
        s = lesson.steps[index]
        for line in reveal(s, results, predictions.get(s.number), run.evidence.path / s.evidence):
            echo(line)
        if index + 1 < len(lesson.steps):
            prompt(f"   (the lab keeps this state: look around with `eval \"$(kailab env --name {lab.name})\"` "
                   f"and kubectl -n {run.names.namespace}) Enter for the next step> ")

    run = ExerciseRun(lesson.exercise, lesson.source, lab, evidence_root, before, after)
    echo("")
    echo(f"Running exercise {lesson.name} on lab {lab.name!r} (namespace {run.names.namespace}, "
         f"queues {run.names.prefix}-<name>), one step at a time ...")
    outcome = run.run()
    _, invariants = split_results(lesson, outcome.results)
    if invariants:
        echo("")
        echo("-- The whole run")
        for r in invariants:
            echo(f"     {result_text(r)}")
    echo("")
    echo(f"verdict: {outcome.verdict.upper()}" + (f" ({outcome.error})" if outcome.error else ""))
    echo(f"evidence: {outcome.evidence}")
    if outcome.verdict == "passed":
        mark_done(lesson.name, outcome.evidence)
        echo(f"lesson {lesson.name} is done (see `kailab course`)")
        return 0
    return 1


# ============================================================================ the capstone
CAPSTONE_STEPS = [
    ("idle GPUs are lent",
     "the borrowing team, alone on the fleet, runs more pods than its own quota"),
    ("guarantees are honoured and lenders get their GPUs back",
     "every team saturates the fleet; each gets at least its guarantee, taking back what was lent "
     "(KAI evicts borrowed pods)"),
    ("production inference is never evicted",
     "the other teams flood the fleet with more work; inference keeps every pod, none evicted"),
]


class _Tree(Strict):
    queues: dict[str, QueueNode] = Field(min_length=1)


def load_tree(path: Path | str) -> dict[str, QueueNode]:
    """A learner's queue tree: the mapping of an exercise's `queues:` block (optionally under `queues:`)."""
    path = Path(path)
    data = read_yaml(path)
    if isinstance(data, dict) and set(data) == {"queues"} and isinstance(data["queues"], dict) \
            and (not data["queues"] or not set(data["queues"]) <= {"gpu", "children"}):
        data = data["queues"]  # the block as it appears in an exercise file
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a mapping of queue names to {gpu: ..., children: ...}",
                         "see docs/course/99-capstone.md")
    return validate(_Tree, {"queues": data}, path).queues


def _flatten(tree: dict[str, QueueNode]) -> list[tuple[str, str | None, QueueNode]]:
    out: list[tuple[str, str | None, QueueNode]] = []

    def walk(nodes: dict[str, QueueNode], parent: str | None) -> None:
        for name, node in nodes.items():
            out.append((name, parent, node))
            walk(node.children, name)

    walk(tree, None)
    return out


def check_tree(tree: dict[str, QueueNode], cap: Capstone | None = None) -> list[str]:
    """Static checks of a learner's tree against the brief, before any lab work: one line per problem."""
    cap = cap or load_course().capstone
    gpus = load_fleet(cap.fleet).gpus_total
    rows = _flatten(tree)
    problems: list[str] = []
    names = [n for n, _, _ in rows]
    for n in names:
        try:
            _name(n)
        except ValueError as err:
            problems.append(f"queue name: {err}")
    for n in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"queue {n}: appears twice in the tree (names are cluster-wide: rename one)")
    node = {n: q for n, _, q in rows}
    parent = {n: p for n, p, _ in rows}

    def ancestors(n: str) -> list[str]:
        out, p = [], parent.get(n)
        while p is not None and p not in out:
            out.append(p)
            p = parent.get(p)
        return out

    def under(a: str) -> list[str]:
        return [n for n in names if a in ancestors(n)]

    leaves = [n for n in names if not node[n].children]
    for n in leaves:
        if node[n].gpu.quota < 0 and n not in cap.teams:
            problems.append(f"queue {n}: quota -1 (unlimited) on a leaf queue leaves nothing guaranteed "
                            "to the teams (give it a number)")
    for team, t in cap.teams.items():
        if team not in node:
            problems.append(f"team {team}: no queue named {team} (add a leaf queue {team})")
            continue
        gpu = node[team].gpu
        if node[team].children:
            problems.append(f"queue {team}: has child queues; KAI schedules workloads in leaf queues only "
                            "(make the team a leaf)")
        if gpu.quota < 0:
            problems.append(f"queue {team}: quota -1 (unlimited) guarantees nothing on {gpus} shared GPUs "
                            f"(set its guarantee, {t.guarantee})")
        elif gpu.quota < t.guarantee:
            if t.inference:
                problems.append(f"queue {team}: quota {num(gpu.quota)} is below the {t.guarantee} GPUs production "
                                "inference needs (non-preemptible pods never run above their quota)")
            else:
                problems.append(f"queue {team}: quota {num(gpu.quota)} is below the team's guarantee of "
                                f"{t.guarantee} GPUs")
        if 0 <= gpu.limit < t.guarantee:
            problems.append(f"queue {team}: limit {num(gpu.limit)} is below its guarantee of {t.guarantee} GPUs "
                            "(raise it, or -1 for no limit)")
        elif t.borrows and 0 <= gpu.limit <= max(gpu.quota, t.guarantee):
            problems.append(f"queue {team}: limit {num(gpu.limit)} leaves no room to borrow above its quota "
                            f"{num(gpu.quota)} (raise it, or -1 for no limit)")
        if t.borrows:
            for a in [team, *ancestors(team)]:
                if node[a].gpu.over_quota_weight <= 0:
                    problems.append(f"queue {a}: overQuotaWeight 0 gives {team} no share of idle GPUs "
                                    "(set it above 0)")
            for a in ancestors(team):
                lim = node[a].gpu.limit
                if 0 < lim <= max(gpu.quota, t.guarantee):
                    problems.append(f"queue {a}: limit {num(lim)} stops {team} from borrowing above its quota "
                                    f"{num(gpu.quota)} (raise it, or -1 for no limit)")
    leaf_sum = sum(node[n].gpu.quota for n in leaves if node[n].gpu.quota > 0)
    if leaf_sum > gpus:
        problems.append(f"leaf queue quotas add up to {num(leaf_sum)} GPUs, more than the fleet's {gpus}: "
                        "not every guarantee can be honoured")
    roots = [n for n in names if parent[n] is None]
    root_sum = sum(node[n].gpu.quota for n in roots if node[n].gpu.quota > 0)
    if len(roots) > 1 and root_sum > gpus:
        problems.append(f"top-level queue quotas add up to {num(root_sum)} GPUs, more than the fleet's {gpus}")
    for n in names:
        q = node[n]
        if not q.children:
            continue
        kids = sum(c.gpu.quota for c in q.children.values() if c.gpu.quota > 0)
        if q.gpu.quota >= 0 and kids > q.gpu.quota:
            problems.append(f"queue {n}: its children's quotas add up to {num(kids)} GPUs, above its own quota "
                            f"{num(q.gpu.quota)} (raise it, or -1)")
        if q.gpu.limit == 0:
            problems.append(f"queue {n}: limit 0 blocks every queue below it (use -1 for no limit)")
        elif q.gpu.limit > 0:
            need = sum(t.guarantee for team, t in cap.teams.items() if team in under(n))
            if q.gpu.limit < need:
                problems.append(f"queue {n}: limit {num(q.gpu.limit)} is below the {need} GPUs guaranteed to "
                                "the teams under it (raise it, or -1)")
    return problems


def capstone_exercise(tree: dict[str, QueueNode], cap: Capstone) -> dict:
    """The hidden exercise: the learner's tree, the requirements of the brief as steps."""
    gpus = load_fleet(cap.fleet).gpus_total
    node = {n: q for n, _, q in _flatten(tree)}
    borrowers = [n for n, t in cap.teams.items() if t.borrows]
    serving = [n for n, t in cap.teams.items() if t.inference]
    batch = [n for n, t in cap.teams.items() if not t.borrows and not t.inference]
    g = {n: t.guarantee for n, t in cap.teams.items()}

    def pods(name: str, queue: str, count: int) -> dict:
        return {"pods": {"name": name, "queue": queue, "count": count, "gpus": 1, "priorityClass": "train"}}

    (lent, lent_text), (honoured, honoured_text), (kept, kept_text) = CAPSTONE_STEPS
    steps = [
        {"name": lent, "explain": lent_text,
         "apply": [pods(f"{b}-train", b, gpus) for b in borrowers], "settle": "5s",
         "expect": [{"queue": b, "bound": {"min": int(node[b].gpu.quota) + 1,
                                           "why": "anything above its quota is borrowed"}} for b in borrowers]},
        {"name": honoured, "explain": honoured_text,
         "apply": [pods(f"{t}-train", t, gpus) for t in batch]
         + [{"deployment": {"name": f"{s}-serve", "queue": s, "replicas": g[s], "gpus": 1}} for s in serving],
         "expect": [{"queue": t, "bound": {"min": g[t]}} for t in batch]
         + [{"workload": f"{s}-serve", "bound": g[s]} for s in serving]
         + [{"queue": b, "bound": {"min": g[b]}} for b in borrowers]
         + [{"workload": f"{b}-train", "evicted": {"min": 1, "why": "the borrowed GPUs go back"}}
            for b in borrowers]},
        {"name": kept, "explain": kept_text,
         "apply": [pods(f"{t}-more", t, gpus) for t in batch + borrowers], "settle": "5s",
         "expect": [{"workload": f"{s}-serve", "bound": g[s], "evicted": 0} for s in serving]
         + [{"queue": t, "bound": {"min": g[t]}} for t in batch + borrowers],
         **({"stays": {"for": "10s", "that": [{"workload": f"{s}-serve", "bound": g[s]} for s in serving]}}
            if serving else {})},
    ]
    return {"exercise": cap.name, "title": cap.title, "concept": cap.brief, "fleet": cap.fleet,
            "queues": {n: q.model_dump(by_alias=True, exclude_none=True) for n, q in tree.items()},
            "steps": steps,
            "invariants": ["no-gpu-overcommit", "nonpreemptible-within-quota", "queue-within-limit"],
            "proves": "the learner's queue tree meets the capstone brief, as KAI's scheduling decisions",
            "does_not_prove": "real workload behaviour under preemption; CPU and memory quotas"}


def capstone_brief(course: CourseSpec | None = None) -> list[str]:
    cap = (course or load_course()).capstone
    lines = [f"Capstone: {cap.title}", "", *cap.brief.strip().splitlines(), "",
             f"Write the queue tree as a file (e.g. {cap.file}) in the format of an exercise's `queues:` block;",
             "the teams are leaf queues named " + ", ".join(cap.teams) + ". Then check it:",
             f"  kailab lesson {cap.name} --check {cap.file}",
             "Details: docs/course/99-capstone.md"]
    return lines


def run_capstone(path: Path | str, lab_name: str, echo: Echo, evidence_root: Path | None = None,
                 course: CourseSpec | None = None) -> int:
    """Static checks, then the hidden exercise on the lab. Returns the exit code."""
    from .exercise.runner import ExerciseRun

    cap = (course or load_course()).capstone
    path = Path(path)
    tree = load_tree(path)
    problems = check_tree(tree, cap)
    if problems:
        for p in problems:
            echo(f"{path}: {p}")
        echo(f"static check: {len(problems)} problem{'s' if len(problems) != 1 else ''}; nothing was run")
        return 1
    echo(f"{path}: static check passed")
    lab = kai_lab(lab_name, "lessons", cap.fleet)
    with tempfile.TemporaryDirectory(prefix="kailab-capstone-") as tmp:
        source = Path(tmp) / f"{cap.name}.yaml"
        source.write_text(yaml.safe_dump(capstone_exercise(tree, cap), sort_keys=False))
        ex = load_exercise(source)  # also checks names and leaves the way every exercise is checked
        run = ExerciseRun(ex, source, lab, evidence_root)
        echo(f"Running the capstone check on lab {lab.name!r} (namespace {run.names.namespace}) ...")
        outcome = run.run()
    for name, _ in CAPSTONE_STEPS:
        results = [r for r in outcome.results if r.step == name]
        if not results:
            echo(f"NOT REACHED  {name}")
        elif all(r.passed for r in results):
            echo(f"PASS  {name}")
        else:
            echo(f"FAIL  {name}")
            for r in results:
                if not r.passed:
                    echo(f"        {r.what}: expected {r.expected}, observed {r.observed}")
    for r in outcome.results:
        if r.kind == "invariant" and not r.passed:
            echo(f"FAIL  whole run: {r.what}: {r.observed}")
    echo(f"verdict: {outcome.verdict.upper()}" + (f": {outcome.error}" if outcome.error else ""))
    echo(f"evidence: {outcome.evidence}/")
    if outcome.verdict == "passed":
        mark_done(cap.name, outcome.evidence)
        echo("capstone done (see `kailab course`)")
        return 0
    return 1
