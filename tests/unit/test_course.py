"""The training course: docs/course is generated from the exercise files and must be current; the
course and exercises/ agree; lessons carry each step's question and its answer from the
expectations; the capstone's static check refuses bad queue trees with one line each; and the
kubectl commands the pages tell a learner to type (extracted from their ```bash lab blocks) run
against a real lab - the ones about KAI's resources only where KAI runs (marked `kai`)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import yaml

from kailab import course
from kailab.errors import InputError
from kailab.exercise.checks import Result
from kailab.exercise.runner import Outcome
from kailab.exercise.load import load_exercise
from kailab.paths import PROJECT_ROOT

from helpers import involves_kai, kailab_cli as kailab, page_commands

DOCS = PROJECT_ROOT / "docs" / "course"
EXERCISES = PROJECT_ROOT / "exercises"


@pytest.fixture(autouse=True)
def _shipped_files(monkeypatch):
    monkeypatch.delenv("KAILAB_FLEETS", raising=False)
    monkeypatch.delenv("KAILAB_EXERCISES", raising=False)


# ----------------------------------------------------------------------------- (a) the docs are current
def test_committed_docs_course_equal_a_fresh_render(tmp_path):
    course.render_all(tmp_path)
    fresh = {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}
    committed = {p.name: p.read_bytes() for p in sorted(DOCS.iterdir())} if DOCS.is_dir() else {}
    hint = "docs/course is stale: regenerate it with `kailab course --render`"
    assert sorted(committed) == sorted(fresh), hint
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"{hint} (differs: {', '.join(stale)})"


def test_render_is_deterministic_and_drops_pages_of_removed_lessons(tmp_path):
    (tmp_path / "42-old-lesson.md").write_text("a lesson that no longer exists\n")
    first = {p.name: p.read_bytes() for p in course.render_all(tmp_path)}
    second = {p.name: p.read_bytes() for p in course.render_all(tmp_path)}
    assert first == second
    assert not (tmp_path / "42-old-lesson.md").exists()
    assert set(first) == {"README.md", "99-capstone.md", *(f"{i:02d}-{n}.md" for i, n in
                                                         enumerate(course.load_course().lessons, 1))}


# ----------------------------------------------------------------------------- (b) course <-> exercises
def test_every_lesson_is_an_exercise_and_every_exercise_is_a_lesson():
    spec = course.load_course()
    exercises = sorted(p.stem for p in EXERCISES.glob("*.yaml"))
    assert [n for n in spec.lessons if n not in exercises] == [], "lessons without exercises/NAME.yaml"
    assert [n for n in exercises if n not in spec.lessons] == [], \
        "exercises missing from the course: add them to kailab/data/course.yaml"
    assert len(spec.lessons) == len(set(spec.lessons))
    assert spec.capstone.name not in exercises


def test_index_lists_the_lessons_in_course_order():
    index = (DOCS / "README.md").read_text()
    positions = [index.index(f"]({i:02d}-{name}.md)") for i, name in enumerate(course.load_course().lessons, 1)]
    assert positions == sorted(positions)
    assert "](99-capstone.md)" in index


# ----------------------------------------------------------------------------- lessons come from the exercises
@pytest.mark.parametrize("lesson", course.lessons(), ids=lambda lesson: lesson.name)
def test_lesson_page_carries_the_exercise_text_and_hides_answers(lesson):
    page = (DOCS / lesson.page).read_text()
    ex = load_exercise(EXERCISES / f"{lesson.name}.yaml")
    assert ex.concept.strip() in page
    for cmd in course.WATCH_COMMANDS:
        assert cmd in course.lab_commands(page)
    assert f"kailab lesson {lesson.name}" in course.lab_commands(page)
    assert f"`kailab run {lesson.name}`" in page
    for step in ex.steps:
        section = page.split(f"## Step {ex.steps.index(step) + 1}: {step.name}\n", 1)[1].split("\n## ", 1)[0]
        if step.explain:
            assert step.explain.strip() in section
        if step.predict:
            assert f"**Predict.** {step.predict.strip()}" in section
        answer = section.split("<details>", 1)[1].split("</details>", 1)[0]  # hidden until opened
        assert len(answer.strip().splitlines()) >= 3
    assert f"**Proves:** {ex.proves.strip()}" in page
    assert f"**Does not prove:** {ex.does_not_prove.strip()}" in page


def test_answers_are_derived_from_the_expectations():
    reclaim = {lesson.name: lesson for lesson in course.lessons()}["reclaim"]
    assert reclaim.steps[1].answer == [
        "queue prod: 16 bound - why: the fleet is full: prod keeps its own quota of 16, no more",
        "workload prod-train: 16 evicted - why: exactly research's quota, reclaimed",
        "queue research: 16 bound",
        "workload prod-train: at least 1 Evict event(s) (KAI records evictions on the PodGroups; "
        "one event may cover several pods)",
        "for the whole 6s: queue prod: at least 16 bound",
    ]
    borrow = {lesson.name: lesson for lesson in course.lessons()}["borrow"]
    assert "PodGroups of prod-more carry the reason OverLimit" in borrow.steps[1].answer
    assert "kubectl get pods -A -l kailab.io/workload=prod-more -o wide" in borrow.steps[1].commands


# ----------------------------------------------------------------------------- reveal after each step
def _result(step: str, what: str, observed: str, passed: bool = True, kind: str = "expect") -> Result:
    return Result(step, kind, what, observed, observed, passed)


def test_the_reveal_says_whether_the_learners_numbers_are_what_kai_did(tmp_path):
    lesson = {lesson.name: lesson for lesson in course.lessons()}["reclaim"]
    s2 = lesson.steps[1]
    results = [_result(s2.name, "queue prod bound", "16"), _result(s2.name, "workload prod-train evicted", "16"),
               _result(s2.name, "queue research bound", "16")]
    right = "\n".join(course.reveal(s2, results, "16 stay, 16 evicted", tmp_path))
    assert "your answer: 16 stay, 16 evicted  |  KAI: queue prod bound = 16, workload prod-train evicted = 16" \
        "  ->  RIGHT: that is what KAI did" in right
    wrong = "\n".join(course.reveal(s2, results, "24", tmp_path))
    assert "your answer: 24  |  KAI: queue prod bound = 16  ->  NOT what KAI did" in wrong
    # the explanation comes after the answer, never before the step has run
    assert wrong.index("NOT what KAI did") < wrong.index("why:") and s2.explain.split()[0] in wrong
    assert f"evidence: {tmp_path}/" in wrong
    none = "\n".join(course.reveal(s2, results, None, None))
    assert "your answer: (none)" in none and "RIGHT" not in none


def test_whole_run_section_lists_the_invariant_results_by_kind():
    """The closing section is the results whose kind is "invariant", wherever the runner put them."""
    results = [_result("a", "queue prod bound", "16"), _result("whole run", "no-gpu-overcommit", "0", kind="invariant"),
               _result("b", "prod for 10s", "16", kind="stays"),
               _result("whole run", "queue-within-limit", "2", passed=False, kind="invariant")]
    assert course.whole_run(results) == ["", "-- The whole run",
                                         "     PASS  no-gpu-overcommit: expected 0, observed 0",
                                         "     FAIL  queue-within-limit: expected 2, observed 2"]
    assert course.whole_run(results[:1] + results[2:3]) == []


class FakeRun:
    """Stands in for ExerciseRun: calls the lesson's step hooks with results it chooses per step."""

    per_step: list[list[Result]] = []
    invariants: list[Result] = []

    def __init__(self, ex, source, lab, evidence_root, before_step, after_step):
        self.ex, self.before, self.after = ex, before_step, after_step
        self.names = types.SimpleNamespace(namespace="kx-fake", prefix="xfake")
        self.evidence = types.SimpleNamespace(path=Path(evidence_root))

    def run(self) -> Outcome:
        results: list[Result] = []
        for index, step in enumerate(self.ex.steps):
            self.before(index, step)
            results += self.per_step[index]
            self.after(index, step, self.per_step[index])
        return Outcome(self.ex.exercise, "passed", results + self.invariants, evidence=str(self.evidence.path))


def test_a_lesson_reveals_each_step_with_the_results_its_hook_got(tmp_path, monkeypatch):
    """Each step's reveal shows exactly the results the runner's after_step hook handed over, however
    many (step 1 gets one its expectations do not name); the whole run shows only the invariants."""
    import kailab.exercise.runner as runner

    lesson = {lesson.name: lesson for lesson in course.lessons()}["reclaim"]
    s1, s2 = (s.name for s in lesson.steps)
    FakeRun.per_step = [[_result(s1, "queue prod bound", "32"), _result(s1, "extra check", "1")],
                        [_result(s2, "queue prod bound", "16"), _result(s2, "workload prod-train evicted", "16")]]
    FakeRun.invariants = [_result("whole run", "no-gpu-overcommit", "never violated", kind="invariant")]
    monkeypatch.setattr(runner, "ExerciseRun", FakeRun)
    monkeypatch.setattr(course.lesson, "require_kai_lab", lambda name, purpose, fleet: types.SimpleNamespace(name=name))
    monkeypatch.setenv("KAILAB_COURSE_STATUS", str(tmp_path / "progress.json"))
    shown: list[str] = []
    assert course.run_lesson(lesson, "fake", True, shown.append, ask=lambda _: "16 and 16",
                             evidence_root=tmp_path) == 0
    screen = "\n".join(shown)
    step2 = screen.split(f"-- Step 2/2: {s2}", 1)[1]
    observed = step2.split("   observed:\n", 1)[1].split("   why:", 1)[0].splitlines()
    assert observed == ["     PASS  queue prod bound: expected 16, observed 16",
                        "     PASS  workload prod-train evicted: expected 16, observed 16"]
    assert "RIGHT: that is what KAI did" in step2
    assert "extra check" in screen.split("-- Step 2/2", 1)[0]
    assert step2.split("-- The whole run\n", 1)[1].splitlines()[0] == \
        "     PASS  no-gpu-overcommit: expected never violated, observed never violated"
    assert f"evidence: {tmp_path / lesson.steps[1].evidence}/" in step2
    assert course.load_status()["done"]["reclaim"]["evidence"] == str(tmp_path)


# ----------------------------------------------------------------------------- progress
def test_course_lists_lessons_in_order_and_marks_done(tmp_path, monkeypatch):
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))
    spec = course.load_course()
    rows = course.course_rows(spec)
    assert [r[1] for r in rows] == [*spec.lessons, spec.capstone.name]
    assert {r[3] for r in rows} == {"not started"}
    course.mark_done("borrow", "/evidence/x")
    assert course.status_path() == tmp_path / "state" / "course.json"
    assert {r[1]: r[3] for r in course.course_rows(spec)}["borrow"] == "done"
    out = kailab("course", env={"KAILAB_STATE": str(tmp_path / "state")})
    assert out.returncode == 0, out.stderr
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in out.stdout.splitlines()]
    table = {c[1]: c for c in cells if len(c) == 4 and c[1]}  # (#, lesson, title, status) rows
    assert list(table) == [*spec.lessons, spec.capstone.name]
    assert table["borrow"][3] == "done" and table["quota"][3] == "not started"


def test_course_file_is_corrupt_proof(tmp_path, monkeypatch):
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))
    course.status_path().parent.mkdir(parents=True)
    course.status_path().write_text("{not json")
    assert {r[3] for r in course.course_rows()} == {"not started"}
    course.mark_done("quota", "/e")
    assert {r[1]: r[3] for r in course.course_rows()}["quota"] == "done"


def test_lesson_refuses_unknown_names_misplaced_check_and_a_missing_lab(tmp_path):
    env = {"KAILAB_STATE": str(tmp_path / "state")}
    out = kailab("lesson", "nosuch", env=env)
    assert out.returncode != 0 and "kailab: error: no lesson 'nosuch'" in out.stderr
    out = kailab("lesson", "quota", "--check", "x.yaml", env=env)
    assert out.returncode != 0 and "--check is for `kailab lesson capstone` only" in out.stderr
    out = kailab("lesson", "quota", "--no-pause", "--name", "nolab", env=env)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [
        "kailab: error: no lab named 'nolab' is up: bring one up with `kailab up --fleet small --name nolab`"]
    assert not (tmp_path / "state" / "course.json").exists()


def test_capstone_without_check_prints_the_brief():
    out = kailab("lesson", "capstone")
    assert out.returncode == 0, out.stderr
    assert "32 GPUs" in out.stdout and "kailab lesson capstone --check org-queues.yaml" in out.stdout


# ----------------------------------------------------------------------------- (c) the capstone's static check
def good_tree() -> dict:
    return {"org": {"gpu": {"quota": -1, "limit": -1}, "children": {
        "training": {"gpu": {"quota": 16, "limit": -1, "overQuotaWeight": 1}},
        "research": {"gpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1}},
        "inference": {"gpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1}}}}}


def write_tree(tmp_path: Path, tree: dict, name: str = "org-queues.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def check(tmp_path: Path, tree: dict) -> list[str]:
    return course.check_tree(course.load_tree(write_tree(tmp_path, tree)))


def test_capstone_accepts_a_good_tree_bare_or_under_queues(tmp_path):
    assert check(tmp_path, good_tree()) == []
    assert check(tmp_path, {"queues": good_tree()}) == []
    nested = good_tree()
    kids = nested["org"]["children"]
    nested["org"]["children"] = {"batch": {"gpu": {"quota": 24, "limit": -1}, "children": {
        "training": kids["training"], "research": kids["research"]}}, "inference": kids["inference"]}
    assert check(tmp_path, nested) == []


def _edit(path: str, value) -> dict:
    tree = good_tree()
    node = tree
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return tree


BAD_TREES = {
    "quotas over 32": (_edit("org.children.training.gpu.quota", 24),
                       "leaf queue quotas add up to 40 GPUs, more than the fleet's 32"),
    "parent limit 0": (_edit("org.gpu.limit", 0), "queue org: limit 0 blocks every queue below it"),
    "borrower weight 0": (_edit("org.children.research.gpu.overQuotaWeight", 0),
                          "queue research: overQuotaWeight 0 gives research no share of idle GPUs"),
    "parent weight 0": (_edit("org.gpu.overQuotaWeight", 0),
                        "queue org: overQuotaWeight 0 gives research no share of idle GPUs"),
    "inference under its need": (_edit("org.children.inference.gpu.quota", 4),
                                 "queue inference: quota 4 is below the 8 GPUs production inference needs"),
    "guarantee not honoured": (_edit("org.children.training.gpu.quota", 12),
                               "queue training: quota 12 is below the team's guarantee of 16 GPUs"),
    "unlimited team quota": (_edit("org.children.training.gpu.quota", -1),
                             "queue training: quota -1 (unlimited) guarantees nothing"),
    "borrower capped at quota": (_edit("org.children.research.gpu.limit", 8),
                                 "queue research: limit 8 leaves no room to borrow above its quota 8"),
    "limit under guarantee": (_edit("org.children.inference.gpu.limit", 4),
                              "queue inference: limit 4 is below its guarantee of 8 GPUs"),
    "parent limit under guarantees": (_edit("org.gpu.limit", 24),
                                      "queue org: limit 24 is below the 32 GPUs guaranteed"),
    "team missing": (_edit("org.children", {"training": {"gpu": {"quota": 16}},
                                            "inference": {"gpu": {"quota": 8}}}),
                     "team research: no queue named research"),
    "team not a leaf": (_edit("org.children.research.children", {"r1": {"gpu": {"quota": 8}}}),
                        "queue research: has child queues"),
    "children above parent quota": (_edit("org.gpu.quota", 16),
                                    "queue org: its children's quotas add up to 32 GPUs, above its own quota 16"),
}


@pytest.mark.parametrize("case", BAD_TREES, ids=list(BAD_TREES))
def test_capstone_rejects_bad_trees_with_one_line_each(tmp_path, case):
    tree, expected = BAD_TREES[case]
    problems = check(tmp_path, tree)
    assert problems, f"{case}: accepted"
    assert all("\n" not in p and p.strip() == p for p in problems)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("content, expected", [
    ("org: {gpu: {quota: 16, weight: 1}}\n", "org-queues.yaml: queues.org.gpu.weight: unknown field"),
    ("org: {gpu: {quota: many}}\n", "org-queues.yaml: queues.org.gpu.quota:"),
    ("- org\n", "expected a mapping of queue names"),
    ("org: {gpu: [\n", "not valid YAML"),
    ("queues: {}\n", "queues: "),
])
def test_capstone_refuses_malformed_files_with_one_line(tmp_path, content, expected):
    path = tmp_path / "org-queues.yaml"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        course.load_tree(path)
    assert "\n" not in str(err.value) and expected in str(err.value)


def test_capstone_cli_static_check_reports_every_problem_before_any_lab_work(tmp_path):
    tree = _edit("org.gpu.limit", 0)
    tree["org"]["children"]["research"]["gpu"]["overQuotaWeight"] = 0
    path = write_tree(tmp_path, tree)
    out = kailab("lesson", "capstone", "--check", str(path), "--name", "nolab",
                 env={"KAILAB_STATE": str(tmp_path / "state")})
    assert out.returncode == 1, out.stderr
    lines = out.stdout.strip().splitlines()
    assert f"{path}: queue org: limit 0 blocks every queue below it (use -1 for no limit)" in lines
    assert any(line.startswith(f"{path}: queue research: overQuotaWeight 0") for line in lines)
    assert lines[-1].startswith("static check: 2 problems; nothing was run")
    assert "no lab" not in out.stderr  # stopped before looking for a lab


def test_capstone_cli_good_tree_passes_statically_then_needs_a_lab(tmp_path):
    path = write_tree(tmp_path, good_tree())
    out = kailab("lesson", "capstone", "--check", str(path), "--name", "nolab",
                 env={"KAILAB_STATE": str(tmp_path / "state")})
    assert out.returncode != 0
    assert f"{path}: static check passed" in out.stdout
    assert "kailab: error: no lab named 'nolab' is up" in out.stderr


def test_capstone_hidden_exercise_is_a_valid_exercise_built_from_the_tree(tmp_path):
    tree = course.load_tree(write_tree(tmp_path, good_tree()))
    doc = course.capstone_exercise(tree, course.load_course().capstone)
    (tmp_path / "capstone.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    ex = load_exercise(tmp_path / "capstone.yaml")
    assert [s.name for s in ex.steps] == [name for name, _ in course.CAPSTONE_STEPS]
    assert ex.leaf_queues() == {"training", "research", "inference"}
    lent, honoured, kept = ex.steps
    assert lent.expect[0].queue == "research" and lent.expect[0].bound.min == 9  # above its quota of 8
    assert {(e.workload, e.bound) for e in honoured.expect if e.workload == "inference-serve"} == {
        ("inference-serve", 8)}
    assert any(e.workload == "research-train" and e.evicted.min == 1 for e in honoured.expect)
    assert any(e.workload == "inference-serve" and e.evicted == 0 for e in kept.expect)
    assert kept.stays.that[0].workload == "inference-serve"
    assert "nonpreemptible-within-quota" in ex.invariants


# ----------------------------------------------------------------------------- (d) the pages' commands on a lab
def test_pages_have_kubectl_commands_of_both_kinds():
    cmds = [c for _, c in page_commands()]
    assert {c for c in cmds if not involves_kai(c)} >= {"kubectl get nodes -L nvidia.com/gpu.count",
                                                       "kubectl get pods -A -o wide",
                                                       "kubectl get events -A --sort-by=.lastTimestamp"}
    assert {"kubectl get queues", "kubectl get podgroups -A"} <= {c for c in cmds if involves_kai(c)}


