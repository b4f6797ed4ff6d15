"""`kailab e2e`: KAI's own e2e suites on labs."""

from __future__ import annotations

import json
import sys

import click

from ..errors import KailabError
from .base import cli, console, option, out



def _left_out_text(left: dict[str, str]) -> str:
    """Spec texts left out, each reason said once: "a; b (why); c (why)"."""
    by_why: dict[str, list[str]] = {}
    for text, why in left.items():
        by_why.setdefault(why, []).append(text)
    return "; ".join(f"{'; '.join(texts)} ({why})" for why, texts in by_why.items())

@cli.command()
@click.argument("suite_names", nargs=-1, metavar="[SUITE]...")
@click.option("--kai-versions", "version_text", default="",
              help="Comma-separated KAI versions, one lab each side by side (default: the default KAI).")
@click.option("--labs", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Labs per KAI version, side by side; the suites are split over them.")
@click.option("--ci", "ci_set", is_flag=True, help="Only the suites CI runs (quota, reclaim, preempt).")
@click.option("--all", "all_set", is_flag=True,
              help="Every suite a lab can run, each on the runtime that runs most of its specs (node-order, "
                   "predicates and reclaim on the kind lab, for their operated specs), the binary and kind labs "
                   "side by side; --dra's specs are a run of their own (their fleet).")
@click.option("--fleet", default="kai-e2e", show_default=True, help="The fleet of the labs it brings up.")
@option("--name", "lab_name", old="--lab", default=None,
        help="A running lab to use instead (it must have no queues of its own: KAI's clean-up deletes every queue).")
@click.option("--focus", multiple=True, help="Only specs matching this regular expression (Ginkgo --focus); repeatable.")
@click.option("--list", "list_only", is_flag=True,
              help="List the suites with the runtime that runs each (binary or kind) and the operators each needs, "
                   "and those no lab can run, with why.")
@click.option("--dra", "dra_set", is_flag=True,
              help="KAI's DRA specs (resources, preempt, reclaim) on fleet kai-e2e-dra, which has DRA devices.")
@click.option("--build-only", is_flag=True, help="Only compile the suites (into kailab's cache) and exit.")
def e2e(suite_names, version_text, labs, ci_set, all_set, fleet, lab_name, focus, list_only, dra_set, build_only) -> None:
    """Run KAI's own e2e suites (Ginkgo, from the KAI version's source) against labs; report ran /
    passed / failed / skipped per suite in the terminal, JUnit and report.html. Exit 1 on a failure.
    A lab runs the workload operators its suites need beside KAI (the third-party integrations:
    jobset, pytorch, mpi, tfjob, jax, xgboost, lws, ray; `--list` says which)."""
    from ..e2e import session
    from ..e2e.suites import RUNTIMES, registry
    from ..fleet import load_fleet

    reg = registry()
    if list_only:
        out.print(f"{'suite':20} {'runtime':8} {'operators':10} package (runtime: the lab that runs it, "
                  "a binary one's suites run on kind too; operators: what its lab runs beside KAI)",
                  markup=False, highlight=False)
        for s in reg.run.values():
            ops = ",".join(session.operators_needed([s])) or "none"
            left = s.skips(s.runtime)
            extra = f"; leaves out: {_left_out_text(left)}" if left else ""
            more = {t: w for t, w in s.skips("kind").items() if t not in left} if s.runtime != "kind" else {}
            on_kind = [t for t in left if t not in s.skips("kind")]
            if on_kind:
                extra += f"; on a kind lab also runs: {'; '.join(on_kind)}"
            if more:
                extra += f"; on a kind lab leaves out: {_left_out_text(more)}"
            if s.labels:
                extra += f"; keeps the labels {', '.join(s.labels)}"
            out.print(f"{s.name:20} {s.runtime:8} {ops:10} {s.path}{' [ci]' if s.ci else ''}{extra}",
                      markup=False, highlight=False)
        for n, (pkg, why) in reg.not_run.items():
            out.print(f"{n:20} {'none':8} cannot run on a lab: {why}", markup=False, highlight=False)
        for label, left in reg.labels.items():
            where = f"left out except on a {', '.join(left.runs_on)} lab" if left.runs_on else "left out"
            out.print(f"label {label}: {where}: {left.why}", markup=False, highlight=False)
        for rt in RUNTIMES:
            out.print(f"label filter on a {rt} lab: {reg.label_filter(rt)}", markup=False, highlight=False)
        return
    if dra_set:
        if suite_names or focus or ci_set or fleet != "kai-e2e":
            raise KailabError("--dra picks its own suites, focus and fleet (data/kai-e2e.yaml): leave out SUITE, "
                              "--focus, --ci and --fleet")
        suite_names, focus, fleet = tuple(reg.dra["suites"]), tuple(reg.dra["focus"]), reg.dra["fleet"]
    if all_set and (suite_names or ci_set or dra_set or lab_name):
        raise KailabError("--all picks every suite and its labs: leave out SUITE, --ci, --dra and --name")
    lab_runtime = None
    if lab_name:
        from ..labs import require_kai_lab

        lab_runtime = require_kai_lab(lab_name, "KAI's e2e suites").runtime
    suites = reg.select(list(suite_names), ci=ci_set, runtime=lab_runtime)
    session.operators_needed(suites)  # a registry naming an operator no lab runs: one line, before any build
    if build_only:
        from ..e2e import build

        for v in session.check_versions(version_text, None):
            _, binaries = build.ensure(v, suites, out.print)
            for name, path in binaries.items():
                out.print(f"{v} {name}: {path}", markup=False, highlight=False)
        return
    lab_version = None
    if lab_name:
        from ..labs import require_kai_lab

        if version_text or labs != 1:
            raise KailabError("--name runs on that one lab: leave out --kai-versions and --labs")
        from ..e2e import cluster
        from ..kube import Kube

        rec = require_kai_lab(lab_name, "KAI's e2e suites")
        session.check_lab_operators(rec, suites)  # the operators its suites need, before anything is built
        kube = Kube(rec.kubeconfig)
        try:
            cluster.preflight(kube, lab_name)  # refused before anything is built or written
        finally:
            kube.close()
        lab_version = rec.kai_version
    else:
        load_fleet(fleet)  # a bad fleet is one line before anything is built
    plan = session.Plan(suites=suites, kai_versions=session.check_versions(version_text, lab_version), labs=labs,
                        fleet=fleet, lab_name=lab_name, runtime=lab_runtime, focus=list(focus), widest=all_set)
    out_dir = session.run_e2e(plan, echo=lambda text: console.print(text, markup=False, highlight=False))
    summary = json.loads((out_dir / session.SUMMARY).read_text())
    out.print(session.markdown(summary), markup=False, highlight=False)
    out.print(f"e2e evidence: {out_dir} (report: {out_dir / 'report.html'}, JUnit: {out_dir / 'junit.xml'})")
    sys.exit(0 if summary["ok"] else 1)
