"""docs/course/ in Markdown: an index, one page per lesson, the capstone page. Deterministic: a
test compares the committed pages with a fresh render byte for byte."""

from __future__ import annotations

from pathlib import Path

from .. import evidence
from ..exercise.spec import Exercise
from ..fleet import load_fleet
from ..paths import PROJECT_ROOT
from .model import CAPSTONE_PAGE, CAPSTONE_STEPS, CourseSpec, Lesson, StepLesson, lessons, load_course
from .words import INVARIANT_TEXT, limit_words, num, quota_words

DOCS_DIR = PROJECT_ROOT / "docs" / "course"
LAB_BLOCK = "bash lab"  # info string of fenced blocks holding commands to type against a lab

# the views a learner uses to watch any lesson by hand (the brief's five, in reading order)
WATCH_COMMANDS = [
    "kubectl get nodes -L nvidia.com/gpu.count",
    "kubectl get queues",
    "kubectl get podgroups -A",
    "kubectl get pods -A -o wide",
    "kubectl get events -A --sort-by=.lastTimestamp",
]
FAKE_GPU_NOTE = ("The nodes are KWOK fakes: no GPU, driver or container exists and pods run no code "
                 "(KWOK marks them Running). What a lesson shows is KAI's decisions - which pod is bound "
                 "where, which is evicted, what the PodGroups say - not what a workload would do.")
# the files a run leaves, named by kailab.evidence (it owns the layout)
EVIDENCE_FILES = (", ".join(f"`{name}`" for name in evidence.SNAPSHOT_FILES)
                  + f" per step, `{evidence.TIMELINE}`, `{evidence.VERDICT}`")


# ============================================================================ shared pieces
def _fence(lines: list[str], info: str = LAB_BLOCK) -> list[str]:
    return [f"```{info}", *lines, "```"]


def _queue_table(ex: Exercise) -> list[str]:
    rows = ["| queue | parent | quota (guaranteed GPUs) | limit | overQuotaWeight |", "|---|---|---|---|---|"]
    for name, parent, gpu in ex.queue_tree():
        rows.append(f"| `{name}` | {f'`{parent}`' if parent else '-'} | {quota_words(gpu.quota)} | "
                    f"{limit_words(gpu.limit)} | {num(gpu.over_quota_weight)} |")
    return rows


def _watch_section(what: str) -> list[str]:
    return ["## Watch it by hand", "",
            f"While {what} runs, in a second terminal (after `eval \"$(kailab env)\"`):", "",
            *_fence(WATCH_COMMANDS), "",
            "Each run uses its own namespace (`kx-<exercise>-<id>`) and queue names (`x<id>-<queue>`) and deletes "
            "them when it ends; afterwards the same views are in its evidence directory "
            f"(`evidence/<time>-<exercise>/`: {EVIDENCE_FILES}).", ""]


# ============================================================================ a lesson's page
def _lesson_intro(lesson: Lesson) -> list[str]:
    """From the title to the watch section: the idea, the queues, how to run it."""
    ex = lesson.exercise
    n = len(lesson.steps)
    return [f"# Lesson {lesson.number}: {ex.title}", "",
            f"> Exercise [`{ex.exercise}`](../../exercises/{lesson.source.name}) - fleet `{ex.fleet}` "
            f"({lesson.fleet_gpus} GPUs) - {n} step{'s' if n != 1 else ''}.",
            "> Generated from the exercise file by `kailab course --render`: edit the exercise, not this page.",
            "", "## The idea", "", ex.concept.strip(), "",
            "## The queues", "", *_queue_table(ex), "",
            "Workloads go to the leaf queues. A queue's counts include its whole subtree.", "",
            "## Run it", "",
            f"On a lab with KAI and the `{ex.fleet}` fleet:", "",
            *_fence([f"kailab up --fleet {ex.fleet}" + (f" --operators {','.join(n.split('@')[0] for n in ex.operators)}"
                                                          if ex.operators else ""),
                     "eval \"$(kailab env)\"", f"kailab lesson {ex.exercise}"]), "",
            f"`kailab lesson {ex.exercise}` shows each step and asks for your prediction, runs the exercise, then "
            "puts what you predicted next to what KAI did, step by step, with the evidence directory. "
            "`--no-pause` skips the questions. Without the guidance: "
            f"`kailab run {ex.exercise}` (exit 0 only when every expectation held).", "",
            *_watch_section("the lesson")]


def _step_section(s: StepLesson) -> list[str]:
    """One step: what happens, what the exercise does, the question, the answer folded away."""
    lines = [f"## Step {s.number}: {s.name}", ""]
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
    return lines


def _lesson_end(lesson: Lesson) -> list[str]:
    """The whole-run checks, what the lesson proves, and the links to its neighbours."""
    ex = lesson.exercise
    lines = []
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
    return lines + [" - ".join(nav), ""]


def render_markdown(lesson: Lesson) -> str:
    """The lesson page (links to its neighbours when built by lessons())."""
    lines = _lesson_intro(lesson)
    for s in lesson.steps:
        lines += _step_section(s)
    return "\n".join(lines + _lesson_end(lesson))


# ============================================================================ the capstone's page
def _teams_table(course: CourseSpec) -> list[str]:
    rows = ["| team | guaranteed GPUs | also |", "|---|---|---|"]
    for name, t in course.capstone.teams.items():
        also = ("may borrow idle GPUs, and gives them back" if t.borrows else
                "production serving: its pods must never be evicted" if t.inference else "-")
        rows.append(f"| `{name}` | {t.guarantee} | {also} |")
    return rows


def _skeleton(course: CourseSpec) -> list[str]:
    """A starting file: the teams as leaves of one parent, every number left to the learner."""
    cap = course.capstone
    lines = ["# " + cap.file + ": a starting point - every number is yours to choose",
             "org:", "  gpu: {quota: -1, limit: -1}", "  children:"]
    width = max(len(n) for n in cap.teams) + 1
    return lines + [f"    {(name + ':').ljust(width)} {{gpu: {{quota: 0, limit: -1, overQuotaWeight: 1}}}}"
                    for name in cap.teams]


def _capstone_task(course: CourseSpec, gpus: int) -> list[str]:
    """What to write and how it is checked, statically then on the lab."""
    cap = course.capstone
    return ["## What to write", "",
            f"A file, say `{cap.file}`, holding a queue tree in the format of an exercise's `queues:` block "
            "([the exercise format](../exercise-format.md)): a mapping from queue name to "
            "`{gpu: {quota, limit, overQuotaWeight}, children: {...}}`, where quota -1 means unlimited and "
            "limit -1 means no limit. The teams must be leaf queues with exactly these names: "
            + ", ".join(f"`{n}`" for n in cap.teams)
            + ". Parent queues are yours to choose. The file may also start with a `queues:` key.", "",
            *_fence(_skeleton(course), "yaml"), "",
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
            "runs it on the lab like any other exercise. Its steps, each one requirement:", "",
            *[f"{i}. **{name}**: {text}" for i, (name, text) in enumerate(CAPSTONE_STEPS, 1)]]


def render_capstone(course: CourseSpec) -> str:
    cap = course.capstone
    gpus = load_fleet(cap.fleet).gpus_total
    lines = [f"# Capstone: {cap.title}", "",
             "> Generated by `kailab course --render` from kailab/data/course.yaml and kailab/course.py.", "",
             "## The brief", "", cap.brief.strip(), "", *_teams_table(course), "",
             *_capstone_task(course, gpus), "",
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


# ============================================================================ the index, all pages
def render_index(course: CourseSpec, all_: list[Lesson]) -> str:
    lines = [f"# Training course: {course.title}", "",
             "> Generated by `kailab course --render` from kailab/data/course.yaml and exercises/*.yaml: "
             "edit those, not these pages (a test fails when they are stale).", "",
             "Each lesson is one exercise from `exercises/`. You read the idea, predict what KAI will do at "
             "each step, run the exercise on a fake-GPU fleet, and compare your prediction with what KAI "
             "did. The answer to every question is what the exercise asserts, so a lesson that passes has "
             "shown it on the lab, with the evidence kept. Every lesson's exercise passes against real KAI "
             "v0.17.0 (CI runs each one live).", "",
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
