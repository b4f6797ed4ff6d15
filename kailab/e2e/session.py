"""A run of KAI's e2e suites: one lane per KAI version and runtime (and per extra lab asked for), each
on a lab of its own, side by side; each suite on the runtime the registry names for it (binary labs
for most, a kind lab, KAI from its chart with its operator, for the suites that reconfigure KAI through
its Config / SchedulingShard objects), the label filter and skips that runtime's; suites run one after another within a lane (they share cluster-wide
state: KAI's clean-up deletes every queue), every result read from the suite's JUnit report.
A lane's lab runs the workload operators its suites need (the registry's `operators`: KAI's
third-party integrations), the union of them, beside KAI.

On disk (evidence/e2e-<stamp>/):
  plan.json                      what was asked: versions, suites and operators per lane, label filter, skips
  <lane>/lab.json                the lab (runtime, fleet, KAI version, operators, Ginkgo version)
  <lane>/<suite>/output.log      the suite binary's whole output;  junit.xml  its JUnit report
  <lane>/kai-logs/<component>.log  KAI's logs over the lane's run
  <lane>/error.txt               when the lane could not finish (a lab that did not come up, a death)
  junit.xml                      every suite of every lane, merged
  summary.json, summary.md, report.html
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import operators as workload_operators
from .. import versions
from ..errors import KailabError
from ..kube import Kube
from .. import labs
from ..labs import Lab, LabRecord, LabSpec
from ..evidence import new_folder, stamp_of
from ..paths import evidence_dir
from . import build, cluster, ginkgo, junit
from .suites import RUNTIMES, Suite, registry
from ..report.page import write_report
from ..variants import side_by_side

SUMMARY = "summary.json"
DEFAULT_FLEET = "kai-e2e"


def operators_needed(suites: list[Suite]) -> tuple[str, ...]:
    """The workload operators a lab running these suites needs: the union of theirs, in the
    operators' registry order (kailab/operators); a name a lab cannot run is one line naming its suite."""
    wanted: set[str] = set()
    for s in suites:
        for o in s.operators:
            if o not in workload_operators.OPERATORS:
                raise KailabError(f"KAI e2e suite {s.name!r} names operator {o!r}, which a lab cannot run "
                                  f"(data/kai-e2e.yaml; choose from {', '.join(workload_operators.OPERATORS)})")
            wanted.add(o)
    return tuple(o for o in workload_operators.OPERATORS if o in wanted)


def check_lab_operators(rec: LabRecord, suites: list[Suite]) -> None:
    """A running lab (`--name`) must run every operator these suites need (its record's
    `stack.operators`); one line naming what is missing, for which suites, and how to get it."""
    running = (rec.stack or {}).get("operators") or {}
    lacking: dict[str, list[str]] = {}
    for s in suites:
        for o in operators_needed([s]):
            if o not in running:
                lacking.setdefault(o, []).append(s.name)
    if lacking:
        need = ", ".join(f"{o} (for {', '.join(names)})" for o, names in lacking.items())
        have = ", ".join(running) or "none"
        raise KailabError(f"lab {rec.name} does not run the operators {need} (it runs: {have}): bring a lab up "
                          f"with `kailab up --operators {','.join(operators_needed(suites))}`, or run `kailab e2e` "
                          "without --name (its labs run what their suites need)")


@dataclass
class Lane:
    label: str
    kai_version: str
    suites: list[Suite]
    runtime: str = "binary"

    @property
    def operators(self) -> tuple[str, ...]:
        """What its lab runs beside KAI: the union of its suites' operators."""
        return operators_needed(self.suites)


@dataclass
class Plan:
    suites: list[Suite]
    kai_versions: list[str]
    labs: int = 1  # labs per KAI version; its suites are split over them
    fleet: str = DEFAULT_FLEET
    runtime: str | None = None  # a running lab's runtime (`lab_name`); None: each suite's own (registry)
    lab_name: str | None = None  # a running lab instead of labs of our own
    focus: list[str] = field(default_factory=list)
    # `--all`: each suite on the runtime that runs most of its specs (a binary suite with specs only a
    # kind lab runs goes to the kind lab)
    widest: bool = False

    def runtime_of(self, suite: Suite) -> str:
        return "kind" if self.widest and suite.wider_on_kind else suite.runtime

    def by_runtime(self) -> dict[str, list[Suite]]:
        """The suites per runtime of the labs that run them: all on the running lab's runtime, or each
        on its own (binary first, then kind)."""
        if self.runtime:
            return {self.runtime: list(self.suites)}
        out: dict[str, list[Suite]] = {}
        for rt in RUNTIMES:
            picked = [s for s in self.suites if self.runtime_of(s) == rt]
            if picked:
                out[rt] = picked
        return out

    def lanes(self) -> list[Lane]:
        """Per version and runtime, suites split over `labs` lanes (a kind runtime's over one: one
        kind lab at a time), longest first onto the least loaded lane (the registry's `seconds` say
        how long each took here)."""
        out = []
        groups_by_rt = self.by_runtime()
        for v in self.kai_versions:
            for rt, suites in groups_by_rt.items():
                n = min(self.labs if rt == "binary" or self.lab_name else 1, len(suites))
                groups: list[list[Suite]] = [[] for _ in range(n)]
                for s in sorted(suites, key=lambda s: -s.seconds):
                    min(groups, key=lambda g: sum(x.seconds for x in g)).append(s)
                for i, g in enumerate(groups):
                    order = [s for s in suites if s in g]  # the order asked for, within a lane
                    label = v if n == 1 else f"{v}-lab{i + 1}"
                    if rt != "binary" and not self.runtime:
                        label += f"-{rt}"
                    out.append(Lane(label, v, order, rt))
        return out


def run_e2e(plan: Plan, root: Path | None = None, echo=print) -> Path:
    out = new_folder(root or evidence_dir(), "e2e", "%Y%m%d-%H%M%S", utc=False)
    stamp = stamp_of(out, "e2e")
    lanes = plan.lanes()
    lock = threading.Lock()

    def say(label: str, text: str) -> None:
        with lock:
            echo(f"[{label}] {text}")

    # compile first, once per version: labs do not idle while Go builds
    trees = {}
    for v in plan.kai_versions:
        trees[v] = build.ensure(v, plan.suites, lambda text, v=v: say(v, text))
    reg = registry()
    (out / "plan.json").write_text(json.dumps({
        "kai_versions": plan.kai_versions, "fleet": plan.fleet, "lab": plan.lab_name,
        "runtimes": {ln.label: ln.runtime for ln in lanes}, "widest": plan.widest,
        "label_filter": {ln.label: reg.label_filter(ln.runtime) for ln in lanes},
        "labels_left_out": {rt: reg.labels_left_out(rt) for rt in sorted({ln.runtime for ln in lanes})},
        "focus": plan.focus,
        "lanes": {ln.label: [s.name for s in ln.suites] for ln in lanes},
        "operators": {ln.label: list(ln.operators) for ln in lanes},
        "suite_operators": {s.name: list(s.operators) for s in plan.suites if s.operators},
        "skipped_specs": {ln.label: {s.name: s.skips(ln.runtime) for s in ln.suites if s.skips(ln.runtime)}
                          for ln in lanes},
        "suite_label_filter": {s.name: reg.label_filter(s.runtime, s) for s in plan.suites if s.labels},
        "suites_not_run": {n: {"package": p, "why": w} for n, (p, w) in reg.not_run.items()},
    }, indent=2))
    try:
        side_by_side(lanes, lambda ln: _lane(plan, ln, trees[ln.kai_version], out / ln.label, stamp, say))
    finally:  # also on Ctrl-C: what ran is summarised
        write_summary(out)
    return out


def _lane(plan: Plan, ln: Lane, built: tuple[Path, dict[str, Path]], ldir: Path, stamp: str, say) -> None:
    ldir.mkdir(parents=True)
    tree, binaries = built
    try:
        if plan.lab_name:
            lab = labs.open(plan.lab_name)
            check_lab_operators(lab.record, ln.suites)
            _on_lab(lab, ln, tree, binaries, ldir, say, plan.focus)
            return
        spec = LabSpec(name=f"e2e-{stamp.lower()}-{ln.label.replace('.', '-')}"[:50].rstrip("-"),
                       runtime=ln.runtime, fleet=plan.fleet, kai_version=ln.kai_version, metrics=False,
                       operators=ln.operators)
        with_ops = f", operators {','.join(ln.operators)}" if ln.operators else ""
        say(ln.label, f"bringing up {ln.runtime} lab {spec.name} (fleet {plan.fleet}, KAI {ln.kai_version}{with_ops})")
        with labs.running(spec) as lab:
            _on_lab(lab, ln, tree, binaries, ldir, say, plan.focus)
    except KailabError as err:
        (ldir / "error.txt").write_text(str(err) + "\n")
        say(ln.label, f"error: {err}")


def _on_lab(lab: Lab, ln: Lane, tree: Path, binaries: dict[str, Path], ldir: Path, say, focus) -> None:
    rec = lab.record
    running = dict((rec.stack or {}).get("operators") or {})
    (ldir / "lab.json").write_text(json.dumps({
        "lab": rec.name, "runtime": rec.runtime, "fleet": rec.fleet, "kai_version": rec.kai_version,
        "nodes": rec.nodes, "gpus": rec.gpus, "operators": running, "ginkgo": build.ginkgo_version(tree),
        "kai_source": str(tree)}, indent=2))
    kube = Kube(rec.kubeconfig)
    mark = lab.log_mark()
    try:
        cluster.preflight(kube, rec.name)
        topology = any(s.node_topology for s in ln.suites)
        with cluster.stand_ins(kube, operators=running) as made, cluster.node_topology(kube, tree, topology) as nrts:
            if nrts:
                say(ln.label, f"NodeResourceTopology objects for KAI's numa specs: {', '.join(nrts)}")
            if made["pods"]:
                say(ln.label, f"stand-in pods for KAI's e2e clean-up: {', '.join(made['pods'])} (KAI itself runs as "
                              "local processes)")
            if made["deployments"]:
                say(ln.label, f"stand-in Deployments the operators' suites look for: {', '.join(made['deployments'])} "
                              "(0 replicas; the operators run as local processes)")
            for suite in ln.suites:
                _run_suite(rec, suite, tree, binaries[suite.name], ldir / suite.name, say, ln.label, focus, ln.runtime)
                dead = lab.dead_components(set())
                if dead:
                    name, lines = dead[0]
                    raise KailabError(f"KAI component died: {name} (during suite {suite.name}):\n{lines}")
    finally:
        logs = ldir / "kai-logs"
        logs.mkdir(exist_ok=True)
        for fname, data in lab.scheduler_logs(mark).items():
            (logs / fname).write_bytes(data)
        kube.close()


def _run_suite(rec: LabRecord, suite: Suite, tree: Path, binary: Path, sdir: Path, say, label: str, focus,
               runtime: str = "binary") -> None:
    sdir.mkdir(parents=True)
    report = sdir / "junit.xml"
    say(label, f"suite {suite.name} ({suite.path}) starts")
    started = time.monotonic()
    done = 0
    progress = ginkgo.Progress()
    env = {**os.environ, "KUBECONFIG": rec.kubeconfig}
    with open(sdir / "output.log", "w", buffering=1) as log:  # line by line: readable while it runs
        proc = subprocess.Popen([str(binary), *ginkgo.args(suite, report, focus, runtime)], cwd=tree / suite.path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                event = progress.feed(line)
                if event:
                    done += 1
                    say(label, f"  {suite.name} #{done} {event[0]}: {event[1][:110]}")
            proc.wait()
        except BaseException:
            proc.terminate()  # Ginkgo runs the specs' clean-up on SIGTERM and still writes its report
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    secs = time.monotonic() - started
    if not report.is_file():
        raise KailabError(f"suite {suite.name} wrote no JUnit report (exit {proc.returncode}); "
                          f"see {sdir / 'output.log'}")
    r = junit.read(report)
    say(label, f"suite {suite.name}: {r['passed']} passed, {r['failed']} failed, {r['skipped']} skipped "
               f"of {r['tests']} in {secs:.0f}s")


def write_summary(out: Path) -> dict:
    """summary.json/.md and the merged JUnit from whatever the lanes left on disk."""
    plan = json.loads((out / "plan.json").read_text())
    lanes, reports = [], []
    for label, names in plan["lanes"].items():
        ldir = out / label
        lab_info = json.loads((ldir / "lab.json").read_text()) if (ldir / "lab.json").is_file() else {}
        suites = {}
        for n in names:
            report = ldir / n / "junit.xml"
            if report.is_file():
                suites[n] = junit.read(report)
                reports.append((f"{label} {n}", report))
            elif (ldir / n).is_dir():
                suites[n] = {"error": "no JUnit report (interrupted or crashed): see output.log"}
            else:
                suites[n] = {"error": "not run"}
        error = (ldir / "error.txt").read_text().strip() if (ldir / "error.txt").is_file() else ""
        lanes.append({"label": label, "lab": lab_info, "suites": suites, "error": error})
    totals = {k: sum(s.get(k, 0) for ln in lanes for s in ln["suites"].values())
              for k in ("tests", "passed", "failed", "skipped")}
    broken = [f"{ln['label']} {n}" for ln in lanes for n, s in ln["suites"].items() if "error" in s]
    summary = {"plan": plan, "lanes": lanes, "totals": totals, "suites_without_result": broken,
               "ok": totals["failed"] == 0 and not broken and not any(ln["error"] for ln in lanes)}
    (out / SUMMARY).write_text(json.dumps(summary, indent=2))
    (out / "summary.md").write_text(markdown(summary) + "\n")
    if reports:
        junit.merge(reports, out / "junit.xml")

    write_report([out])
    return summary


def rows(summary: dict) -> list[list[str]]:
    """One row per lane and suite: lane, suite, ran, passed, failed, skipped, seconds."""
    out = []
    for ln in summary["lanes"]:
        for n, s in ln["suites"].items():
            if "error" in s:
                out.append([ln["label"], n, "—", "—", "—", "—", s["error"]])
            else:
                out.append([ln["label"], n, str(s["tests"] - s["skipped"]), str(s["passed"]), str(s["failed"]),
                            str(s["skipped"]), f"{s['seconds']:.0f}"])
    return out


def markdown(summary: dict) -> str:
    head = ["lab", "suite", "ran", "passed", "failed", "skipped", "seconds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(summary)]
    t = summary["totals"]
    lines += ["", f"**{t['tests'] - t['skipped']} specs ran: {t['passed']} passed, {t['failed']} failed; "
                  f"{t['skipped']} skipped.**"]
    for ln in summary["lanes"]:
        if ln["error"]:
            lines.append(f"- {ln['label']}: error: {ln['error'].splitlines()[0]}")
        for n, s in ln["suites"].items():
            for spec in s.get("specs", []):
                if spec["status"] == junit.FAILED:
                    lines.append(f"- FAILED {ln['label']} {n}: {spec['name']} — {spec['message'].splitlines()[0][:200]}")
    return "\n".join(lines)


def check_versions(text: str, lab_version: str | None) -> list[str]:
    if lab_version:
        return [lab_version]
    return [versions.kai_release(v.strip()).version for v in text.split(",") if v.strip()] or [versions.DEFAULT_KAI]
