"""The capstone: a learner's queue tree is checked statically against the brief (one line per
problem), then run on the lab inside an exercise built from it whose expectations the learner
does not see in advance."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import Field

from ..errors import InputError
from ..exercise.load import load_exercise
from ..exercise.spec import GpuShare, QueueNode, Strict, _name
from ..fleet import load_fleet
from ..labs import require_kai_lab
from ..inputs import read_yaml, validate
from .model import CAPSTONE_STEPS, Capstone, CourseSpec, Echo, Team, load_course
from .progress import mark_if_passed
from .words import check_text, num


# ============================================================================ the learner's file
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


@dataclass
class _View:
    """The tree flattened: names in tree order (duplicates kept, to be reported), node and parent by name."""
    names: list[str]
    node: dict[str, QueueNode]
    parent: dict[str, str | None]

    @classmethod
    def of(cls, tree: dict[str, QueueNode]) -> "_View":
        rows = _flatten(tree)
        return cls([n for n, _, _ in rows], {n: q for n, _, q in rows}, {n: p for n, p, _ in rows})

    def ancestors(self, n: str) -> list[str]:
        out, p = [], self.parent.get(n)
        while p is not None and p not in out:  # `not in out`: a duplicated name must not loop
            out.append(p)
            p = self.parent.get(p)
        return out

    def under(self, a: str) -> list[str]:
        return [n for n in self.names if a in self.ancestors(n)]

    def leaves(self) -> list[str]:
        return [n for n in self.names if not self.node[n].children]


# ============================================================================ the static check
def _name_problems(view: _View) -> list[str]:
    problems = []
    for n in view.names:
        try:
            _name(n)
        except ValueError as err:
            problems.append(f"queue name: {err}")
    for n in sorted({n for n in view.names if view.names.count(n) > 1}):
        problems.append(f"queue {n}: appears twice in the tree (names are cluster-wide: rename one)")
    return problems


def _unlimited_leaf_problems(view: _View, cap: Capstone) -> list[str]:
    return [f"queue {n}: quota -1 (unlimited) on a leaf queue leaves nothing guaranteed "
            "to the teams (give it a number)"
            for n in view.leaves() if view.node[n].gpu.quota < 0 and n not in cap.teams]


def _share_problems(team: str, t: Team, gpu: GpuShare, gpus: int) -> list[str]:
    """A team's own quota and limit against its guarantee (and room to borrow)."""
    problems = []
    if gpu.quota < 0:
        problems.append(f"queue {team}: quota -1 (unlimited) guarantees nothing on {gpus} shared GPUs "
                        f"(set its guarantee, {t.guarantee})")
    elif gpu.quota < t.guarantee and t.inference:
        problems.append(f"queue {team}: quota {num(gpu.quota)} is below the {t.guarantee} GPUs production "
                        "inference needs (non-preemptible pods never run above their quota)")
    elif gpu.quota < t.guarantee:
        problems.append(f"queue {team}: quota {num(gpu.quota)} is below the team's guarantee of "
                        f"{t.guarantee} GPUs")
    if 0 <= gpu.limit < t.guarantee:
        problems.append(f"queue {team}: limit {num(gpu.limit)} is below its guarantee of {t.guarantee} GPUs "
                        "(raise it, or -1 for no limit)")
    elif t.borrows and 0 <= gpu.limit <= max(gpu.quota, t.guarantee):
        problems.append(f"queue {team}: limit {num(gpu.limit)} leaves no room to borrow above its quota "
                        f"{num(gpu.quota)} (raise it, or -1 for no limit)")
    return problems


def _borrow_problems(view: _View, team: str, t: Team) -> list[str]:
    """A borrowing team needs a share of idle GPUs all the way up, and room under its parents' limits."""
    gpu = view.node[team].gpu
    problems = [f"queue {a}: overQuotaWeight 0 gives {team} no share of idle GPUs (set it above 0)"
                for a in [team, *view.ancestors(team)] if view.node[a].gpu.over_quota_weight <= 0]
    for a in view.ancestors(team):
        lim = view.node[a].gpu.limit
        if 0 < lim <= max(gpu.quota, t.guarantee):
            problems.append(f"queue {a}: limit {num(lim)} stops {team} from borrowing above its quota "
                            f"{num(gpu.quota)} (raise it, or -1 for no limit)")
    return problems


def _team_problems(view: _View, team: str, t: Team, gpus: int) -> list[str]:
    if team not in view.node:
        return [f"team {team}: no queue named {team} (add a leaf queue {team})"]
    problems = []
    if view.node[team].children:
        problems.append(f"queue {team}: has child queues; KAI schedules workloads in leaf queues only "
                        "(make the team a leaf)")
    problems += _share_problems(team, t, view.node[team].gpu, gpus)
    if t.borrows:
        problems += _borrow_problems(view, team, t)
    return problems


def _sum_problems(view: _View, gpus: int) -> list[str]:
    """Guarantees the fleet cannot hold: leaf quotas, and top-level quotas when there are several."""
    problems = []
    leaf_sum = sum(view.node[n].gpu.quota for n in view.leaves() if view.node[n].gpu.quota > 0)
    if leaf_sum > gpus:
        problems.append(f"leaf queue quotas add up to {num(leaf_sum)} GPUs, more than the fleet's {gpus}: "
                        "not every guarantee can be honoured")
    roots = [n for n in view.names if view.parent[n] is None]
    root_sum = sum(view.node[n].gpu.quota for n in roots if view.node[n].gpu.quota > 0)
    if len(roots) > 1 and root_sum > gpus:
        problems.append(f"top-level queue quotas add up to {num(root_sum)} GPUs, more than the fleet's {gpus}")
    return problems


def _parent_problems(view: _View, cap: Capstone) -> list[str]:
    """Parents that starve their children: quota below theirs, limit 0, limit below their teams' guarantees."""
    problems = []
    for n in view.names:
        q = view.node[n]
        if not q.children:
            continue
        kids = sum(c.gpu.quota for c in q.children.values() if c.gpu.quota > 0)
        if q.gpu.quota >= 0 and kids > q.gpu.quota:
            problems.append(f"queue {n}: its children's quotas add up to {num(kids)} GPUs, above its own quota "
                            f"{num(q.gpu.quota)} (raise it, or -1)")
        if q.gpu.limit == 0:
            problems.append(f"queue {n}: limit 0 blocks every queue below it (use -1 for no limit)")
        elif q.gpu.limit > 0:
            need = sum(t.guarantee for team, t in cap.teams.items() if team in view.under(n))
            if q.gpu.limit < need:
                problems.append(f"queue {n}: limit {num(q.gpu.limit)} is below the {need} GPUs guaranteed to "
                                "the teams under it (raise it, or -1)")
    return problems


def check_tree(tree: dict[str, QueueNode], cap: Capstone | None = None) -> list[str]:
    """Static checks of a learner's tree against the brief, before any lab work: one line per problem."""
    cap = cap or load_course().capstone
    gpus = load_fleet(cap.fleet).gpus_total
    view = _View.of(tree)
    problems = _name_problems(view) + _unlimited_leaf_problems(view, cap)
    for team, t in cap.teams.items():
        problems += _team_problems(view, team, t, gpus)
    return problems + _sum_problems(view, gpus) + _parent_problems(view, cap)


# ============================================================================ the hidden exercise
def _pods(name: str, queue: str, count: int) -> dict:
    return {"pods": {"name": name, "queue": queue, "count": count, "gpus": 1, "priorityClass": "train"}}


def _capstone_steps(cap: Capstone, tree: dict[str, QueueNode]) -> list[dict]:
    """One step per CAPSTONE_STEPS requirement, its numbers taken from the tree and the brief."""
    gpus = load_fleet(cap.fleet).gpus_total
    node = {n: q for n, _, q in _flatten(tree)}
    borrowers = [n for n, t in cap.teams.items() if t.borrows]
    serving = [n for n, t in cap.teams.items() if t.inference]
    batch = [n for n, t in cap.teams.items() if not t.borrows and not t.inference]
    g = {n: t.guarantee for n, t in cap.teams.items()}
    (lent, lent_text), (honoured, honoured_text), (kept, kept_text) = CAPSTONE_STEPS
    return [
        {"name": lent, "explain": lent_text,
         "apply": [_pods(f"{b}-train", b, gpus) for b in borrowers], "settle": "5s",
         "expect": [{"queue": b, "bound": {"min": int(node[b].gpu.quota) + 1,
                                           "why": "anything above its quota is borrowed"}} for b in borrowers]},
        {"name": honoured, "explain": honoured_text,
         "apply": [_pods(f"{t}-train", t, gpus) for t in batch]
         + [{"deployment": {"name": f"{s}-serve", "queue": s, "replicas": g[s], "gpus": 1}} for s in serving],
         "expect": [{"queue": t, "bound": {"min": g[t]}} for t in batch]
         + [{"workload": f"{s}-serve", "bound": g[s]} for s in serving]
         + [{"queue": b, "bound": {"min": g[b]}} for b in borrowers]
         + [{"workload": f"{b}-train", "evicted": {"min": 1, "why": "the borrowed GPUs go back"}}
            for b in borrowers]},
        {"name": kept, "explain": kept_text,
         "apply": [_pods(f"{t}-more", t, gpus) for t in batch + borrowers], "settle": "5s",
         "expect": [{"workload": f"{s}-serve", "bound": g[s], "evicted": 0} for s in serving]
         + [{"queue": t, "bound": {"min": g[t]}} for t in batch + borrowers],
         **({"stays": {"for": "10s", "that": [{"workload": f"{s}-serve", "bound": g[s]} for s in serving]}}
            if serving else {})},
    ]


def capstone_exercise(tree: dict[str, QueueNode], cap: Capstone) -> dict:
    """The hidden exercise: the learner's tree, the requirements of the brief as steps."""
    return {"exercise": cap.name, "title": cap.title, "concept": cap.brief, "fleet": cap.fleet,
            "queues": {n: q.model_dump(by_alias=True, exclude_none=True) for n, q in tree.items()},
            "steps": _capstone_steps(cap, tree),
            "invariants": ["no-gpu-overcommit", "nonpreemptible-within-quota", "queue-within-limit"],
            "proves": "the learner's queue tree meets the capstone brief, as KAI's scheduling decisions",
            "does_not_prove": "real workload behaviour under preemption; CPU and memory quotas"}


# ============================================================================ the capstone, run
def capstone_brief(course: CourseSpec | None = None) -> list[str]:
    cap = (course or load_course()).capstone
    return [f"Capstone: {cap.title}", "", *cap.brief.strip().splitlines(), "",
            f"Write the queue tree as a file (e.g. {cap.file}) in the format of an exercise's `queues:` block;",
            "the teams are leaf queues named " + ", ".join(cap.teams) + ". Then check it:",
            f"  kailab lesson {cap.name} --check {cap.file}",
            "Details: docs/course/99-capstone.md"]


def _static_check(path: Path, tree: dict[str, QueueNode], cap: Capstone, echo: Echo) -> bool:
    problems = check_tree(tree, cap)
    for p in problems:
        echo(f"{path}: {p}")
    if problems:
        echo(f"static check: {len(problems)} problem{'s' if len(problems) != 1 else ''}; nothing was run")
        return False
    echo(f"{path}: static check passed")
    return True


def _run_hidden(tree: dict[str, QueueNode], cap: Capstone, lab, evidence_root: Path | None, echo: Echo):
    """Write the hidden exercise to a temporary file, load it like any exercise, run it; the Outcome."""
    from ..exercise.runner import ExerciseRun  # the runner and its KAI tools: only when a run starts

    with tempfile.TemporaryDirectory(prefix="kailab-capstone-") as tmp:
        source = Path(tmp) / f"{cap.name}.yaml"
        source.write_text(yaml.safe_dump(capstone_exercise(tree, cap), sort_keys=False))
        ex = load_exercise(source)  # also checks names and leaves the way every exercise is checked
        run = ExerciseRun(ex, source, lab, evidence_root)
        echo(f"Running the capstone check on lab {lab.name!r} (namespace {run.names.namespace}) ...")
        return run.run()


def capstone_report(outcome) -> list[str]:
    """Each requirement PASS, FAIL (with what KAI did) or NOT REACHED; failed invariants; the verdict."""
    lines = []
    for name, _ in CAPSTONE_STEPS:
        results = [r for r in outcome.results if r.step == name]
        if not results:
            lines.append(f"NOT REACHED  {name}")
        elif all(r.passed for r in results):
            lines.append(f"PASS  {name}")
        else:
            lines.append(f"FAIL  {name}")
            lines += [f"        {check_text(r)}" for r in results if not r.passed]
    lines += [f"FAIL  whole run: {r.what}: {r.observed}"
              for r in outcome.results if r.kind == "invariant" and not r.passed]
    lines.append(f"verdict: {outcome.verdict.upper()}" + (f": {outcome.error}" if outcome.error else ""))
    lines.append(f"evidence: {outcome.evidence}/")
    return lines


def run_capstone(path: Path | str, lab_name: str, echo: Echo, evidence_root: Path | None = None,
                 course: CourseSpec | None = None) -> int:
    """Static checks, then the hidden exercise on the lab. Returns the exit code."""
    cap = (course or load_course()).capstone
    path = Path(path)
    tree = load_tree(path)
    if not _static_check(path, tree, cap, echo):
        return 1
    lab = require_kai_lab(lab_name, "lessons", cap.fleet)  # only after the static check: no lab needed to fail it
    outcome = _run_hidden(tree, cap, lab, evidence_root, echo)
    for line in capstone_report(outcome):
        echo(line)
    if not mark_if_passed(cap.name, outcome):
        return 1
    echo("capstone done (see `kailab course`)")
    return 0
