"""A version trial in vClusters, run: the host made (kind) or adopted (existing), one vCluster per KAI
version with KAI from its chart inside it, every version's exercises through the same runner as a
binary trial (each vCluster adopted as an `existing` lab), both versions at once; then the promises,
measured: the host untouched, the rollback's seconds, no interference, the blast radius.

Evidence, in the trial directory beside what trial.py writes (plan.json, matrix, report):
`<version>/run-<i>/…` (exercise runs, as a binary trial's), `<version>/kai.json` (the KAI that ran)
and `<version>/setup.json` (each set-up step's seconds); `host/` (snapshots before and after, their
difference, the interference watch); `blast/<version>/run-1/…`; `promises.json`; `trial.log`
(every command and its output).

Over 500 lines would be a smell; the parts that are not the sequence itself live beside it
(snapshot.py, watch.py, host.py, state.py).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from .. import versions
from ..errors import KailabError, LabError
from ..exercise.load import load_exercise
from ..exercise.runner import ExerciseRun
from ..fleet import load_fleet
from ..kube import Kube
from .. import labs
from ..labs import Lab, LabSpec
from ..runtimes.shell import COMMAND_TIMEOUT, telling_line, progress, short
from ..runtimes.waits import wait_until
from ..stacks import get_stack
from . import plan as plan_mod
from . import host as host_mod
from . import snapshot, state
from .tools import resolve, tools_for
from .watch import HostWatch
from ..variants import side_by_side

ROLLBACK_LIMIT = 300  # seconds: what is still on the host after this is a broken promise


class Trial:
    def __init__(self, trial_dir: Path, stamp: str, the_plan: dict, host_kubeconfig: str | None,
                 hooks: dict | None = None) -> None:
        self.dir, self.plan = trial_dir, the_plan
        self.hooks = hooks or {}  # "ready" (every vCluster up) and "end" (before clean-up): fn(trial), for tests
        self.name = f"trial-{stamp.lower()}"
        self.fleet = load_fleet(the_plan["fleet"])
        self.versions = [versions.kai_release(v).version for v in the_plan["versions"]]
        self.host_kubeconfig = host_kubeconfig
        self.work = state.trial_dir(self.name)
        self.log = trial_dir / "trial.log"
        self.tools = tools_for(the_plan["runtime"])
        self.timings: dict = {"versions": {}}
        self.host_lab = None
        self.plans: list[plan_mod.VersionPlan] = []
        self.labs: dict[str, Lab] = {}
        self.before: dict | None = None
        self.watch: HostWatch | None = None
        self.promises: dict = {}

    # ------------------------------------------------------------------ commands
    def run(self, argv: list[str], what: str, stdout: str | None = None) -> float:
        """Run one plan command (logged); its seconds. A LabError naming it when it fails."""
        started = time.monotonic()
        with self.log.open("a") as f:
            f.write(f"$ {plan_mod.shown(argv, stdout)}\n")
            f.flush()
            try:
                out = subprocess.run(resolve(argv, self.tools, self.work), capture_output=True, text=True,
                                     timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise LabError(f"{what}: `{short(argv)}` did not finish in {COMMAND_TIMEOUT}s; log: {self.log}") from None
            f.write((out.stdout if stdout is None else "") + out.stderr + f"(exit {out.returncode})\n")
        if out.returncode != 0:
            raise LabError(f"{what}: `{short(argv)}` failed (exit {out.returncode}): "
                           f"{telling_line(out.stderr or out.stdout)}; full output: {self.log}")
        if stdout is not None:
            Path(stdout).write_text(out.stdout)
            Path(stdout).chmod(0o600)
        return round(time.monotonic() - started, 2)

    def best_effort(self, steps: list[tuple[str, list[str]]]) -> dict[str, float]:
        took = {}
        for what, argv in steps:
            try:
                took[what] = self.run(argv, what)
            except KailabError as err:
                progress(f"clean-up step failed (continuing): {err}")
                took[what] = -1
        return took

    # ------------------------------------------------------------------ the whole trial
    def go(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        state.clean_dead_trials(self.tools, mine=self.name)
        state.claim(self.name, {"versions": self.versions, "runtime": self.plan["runtime"], "fleet": self.fleet.name,
                                "host_kubeconfig": self.host_kubeconfig})
        try:
            self.set_up_host()
            self.set_up_versions()
            self.hooks.get("ready", lambda t: None)(self)
            self.run_exercises()
            if self.plan.get("blast") and len(self.plans) > 1:
                self.blast()
            self.hooks.get("end", lambda t: None)(self)
        except KailabError as err:
            (self.dir / "trial-error.txt").write_text(str(err) + "\n")
            progress(f"the trial stopped: {err}")
        finally:
            self.tear_down()

    # ------------------------------------------------------------------ host
    def set_up_host(self) -> None:
        started = time.monotonic()
        newest = max(self.versions, key=versions.parse)
        if self.plan["runtime"] == "kind":
            progress(f"[host] a kind lab {self.name}: KWOK, fake-gpu-operator, fleet {self.fleet.name}, no scheduler of ours")
            spec = LabSpec(name=self.name, runtime="kind", fleet=self.fleet.name, stack="none", kai_version=newest,
                           metrics=False, images="local")
            state.note(self.name, {"host_lab": self.name})
            self.host_lab = labs.up(spec)
            self.host_kubeconfig = self.host_lab.kubeconfig
        self.timings["host_up_seconds"] = round(time.monotonic() - started, 1)
        kube = Kube(self.host_kubeconfig)
        try:
            from ..runtimes.clusterinfo import api_server

            facts = host_mod.facts(kube, api_server(self.host_kubeconfig))
            self.th = plan_mod.TrialHost(kubeconfig=str(self.host_kubeconfig), infra_node=facts.infra_node,
                                         infra_ip=facts.infra_ip, lab_dir=str(self.work), kind_cluster=facts.kind_cluster,
                                         kubernetes=versions.kai_release(newest).kubernetes)
            self.plans = plan_mod.trial_plans(self.versions, self.fleet, self.th, self.name, state.coredns_image(kube))
            for p in self.plans:
                for rel, text in p.files.items():
                    (self.work / rel).parent.mkdir(parents=True, exist_ok=True)
                    (self.work / rel).write_text(text)
            state.note(self.name, {"slugs": [p.slug for p in self.plans], "infra_node": facts.infra_node,
                                   "host_kubeconfig": str(self.host_kubeconfig)})
            load = plan_mod.images_to_load(self.versions, self.th.kubernetes)
            if facts.kind_cluster:
                from ..runtimes.kind.images import to_load

                # the node image holds the default KAI version's already
                lacks, absent = to_load(facts.kind_cluster, load)
                load = lacks + absent  # one Docker lacks: kind names it
                progress(f"[host] loading {len(load)} images (KAI's of every version, vCluster's) into its nodes")
                if load:
                    self.run(["kind", "load", "docker-image", *load, "--name", facts.kind_cluster], "kind load")
            for stage in host_mod.trial_stages():
                kube.apply(stage)
            state.sentinel_up(kube, state.SENTINEL_NAMESPACE, [plan_mod.sync_label(p.slug) for p in self.plans])
            skip = {p.namespace for p in self.plans}
            self.before = snapshot.take(kube, skip)
            (self.dir / "host").mkdir(exist_ok=True)
            (self.dir / "host" / "before.json").write_text(json.dumps(self.before, indent=1))
        finally:
            kube.close()
        own = {p.version: {f"{p.slug}-", facts.infra_node} for p in self.plans}
        self.watch = HostWatch(str(self.host_kubeconfig), {p.namespace: p.version for p in self.plans}, own)
        self.watch.start_baseline()
        self.watch.start()

    # ------------------------------------------------------------------ versions
    def set_up_versions(self) -> None:
        for p in self.plans:
            vdir = self.dir / p.version
            vdir.mkdir(exist_ok=True)
            took: dict[str, float] = {}
            started = time.monotonic()
            try:
                for i, (what, argv) in enumerate(p.steps):
                    progress(f"[{p.version} {i + 1}/{len(p.steps)}] {what}")
                    took[what] = self.run(argv, what, stdout=p.stdout_files.get(i))
                    if i in p.stdout_files:  # its kubeconfig: its API server must answer before helm asks it
                        took[what] += self.wait_api(p)
                self.labs[p.version] = self.adopt(p)
                took["adopted, KAI's probe bound"] = round(time.monotonic() - started - sum(took.values()), 2)
            except KailabError as err:
                (vdir / "lab-error.txt").write_text(str(err) + "\n")
                progress(f"[{p.version}] set-up failed: {err}")
            total = round(time.monotonic() - started, 1)
            self.timings["versions"][p.version] = {"setup_seconds": total, "steps": took}
            (vdir / "setup.json").write_text(json.dumps({"seconds": total, "steps": took}, indent=2))

    @staticmethod
    def wait_api(p: plan_mod.VersionPlan) -> float:
        started = time.monotonic()
        kube = Kube(p.kubeconfig, timeout=5)
        try:
            wait_until(f"vCluster {p.vcluster_name}'s API server to answer at {p.server}",
                       lambda: _answers(kube) or None, timeout=180,
                       hint=f"kubectl -n {p.namespace} get pods,svc -o wide (on the host)")
        finally:
            kube.close()
        return round(time.monotonic() - started, 2)

    def adopt(self, p: plan_mod.VersionPlan):
        """The vCluster as an `existing` lab: its fleet pool by prefix, its control plane's
        StatefulSet on the host as a component; then KAI must bind the probe pod."""
        control_plane = {"kubeconfig": str(self.host_kubeconfig), "namespace": p.namespace,
                         "deployments": {f"vcluster {p.vcluster_name} (syncer, virtual API server)": p.vcluster_name}}
        spec = LabSpec(name=p.lab_name, runtime="existing", fleet=self.fleet.name, kai_version=p.version,
                       kubeconfig=p.kubeconfig, fleet_prefix=f"{p.slug}-", control_plane=control_plane)
        lab = labs.up(spec)
        kube = Kube(lab.kubeconfig)
        try:
            get_stack("kai").addon(spec).await_ready(kube)
            (self.dir / p.version / "kai.json").write_text(json.dumps(state.kai_ran(kube, p.version), indent=2))
        finally:
            kube.close()
        return lab

    # ------------------------------------------------------------------ exercises
    def run_exercises(self) -> None:
        paths = self.plan["exercises"]
        started = time.monotonic()

        def one(p: plan_mod.VersionPlan) -> None:
            lab = self.labs.get(p.version)
            if lab is None:
                return
            for i in range(1, self.plan["repeat"] + 1):
                for path in paths:
                    progress(f"[{p.version}] run {i}: {Path(path).stem}")
                    ExerciseRun(load_exercise(path), Path(path), lab, self.dir / p.version / f"run-{i}").run()

        side_by_side(self.plans, one)  # every version at once
        self.timings["exercises_seconds"] = round(time.monotonic() - started, 1)

    def blast(self) -> None:
        """The first version's KAI made to misbehave (its scheduler crash-looping on a bad flag, its
        operator stopped), the second's exercises run once more meanwhile: they and the host must
        not notice."""
        broken, other = self.plans[0], self.plans[1]
        if broken.version not in self.labs or other.version not in self.labs:
            return
        breaker = state.SchedulerBreaker(broken.kubeconfig)
        out: dict = {"broken": broken.version, "ran": other.version,
                     "how": f"KAI {broken.version}'s operator stopped and its scheduler given a flag it does not know "
                            f"({breaker.FLAG}): it exits at start and is restarted with back-off"}
        violations_before = len(self.watch.violations) if self.watch else 0
        verdicts = {}
        try:
            breaker.start()
        except Exception as err:  # noqa: BLE001 - could not break it: nothing was shown, the promise is not kept
            out.update({"verdicts": {}, "errors": [str(err)], "verdict": "broken"})
            progress(f"[blast] KAI {broken.version} could not be broken: {err}")
            self.promises["blast_radius"] = out
            return
        progress(f"[blast] KAI {broken.version}'s scheduler crash-looping; KAI {other.version}'s exercises again")
        try:
            for path in self.plan.get("blast_exercises") or self.plan["exercises"]:
                o = ExerciseRun(load_exercise(path), Path(path), self.labs[other.version],
                                self.dir / "blast" / other.version / "run-1").run()
                verdicts[o.exercise] = o.verdict
        finally:
            out.update(breaker.stop())
        out["verdicts"] = verdicts
        out["host_violations_meanwhile"] = self.watch.violations[violations_before:] if self.watch else []
        ok = (all(v == "passed" for v in verdicts.values()) and not out["host_violations_meanwhile"]
              and out["scheduler_restarts"] > 0 and not out["scheduler_ready_at_end"])
        out["verdict"] = "passed" if ok else "broken"
        self.promises["blast_radius"] = out

    # ------------------------------------------------------------------ clean-up, timed
    def tear_down(self) -> None:
        """Every part guarded: one failing never keeps the rest (the host above all) from going."""
        notes: list[str] = []

        def part(what: str, fn) -> None:
            try:
                fn()
            except BaseException as err:  # noqa: BLE001 - keep going, say what failed
                notes.append(f"{what}: {type(err).__name__}: {err}")
                progress(f"clean-up: {what} failed: {err}")

        if self.watch is not None:
            part("the interference watch", lambda: self.promises.__setitem__("no_interference", self.watch.stop()))
        kube = Kube(self.host_kubeconfig) if self.host_kubeconfig else None
        rollback: dict = {}
        for p in self.plans:
            if p.version in self.labs:
                part(f"forget lab {p.lab_name}", lambda p=p: self.labs[p.version].down())
            part(f"roll {p.version} back", lambda p=p: rollback.__setitem__(p.version, self.roll_back(p, kube)))
            Path(p.kubeconfig).unlink(missing_ok=True)
        if kube is not None and self.before is not None:
            part("the host's snapshot after", lambda: self._after(kube))
        if kube is not None:
            part("the sentinel", lambda: state.sentinel_down(kube, state.SENTINEL_NAMESPACE))
            for stage in host_mod.trial_stages():
                part(f"KWOK Stage {stage['metadata']['name']}",
                     lambda n=stage["metadata"]["name"]: kube.delete("kwok.x-k8s.io/v1alpha1", "Stage", n))
            kube.close()
        self.promises["rollback_seconds"] = rollback
        self.promises["timings"] = self.timings
        if notes:
            self.promises["clean_up_notes"] = notes
        (self.dir / "promises.json").write_text(json.dumps(self.promises, indent=2))
        if self.host_lab is not None:
            part("the kind host", lambda: progress(f"[host] down: {', '.join(self.host_lab.down())}"))
        state.release(self.name)

    def _after(self, kube: Kube) -> None:
        after = snapshot.take(kube, {p.namespace for p in self.plans})
        left = snapshot.diff(self.before, after)
        (self.dir / "host" / "after.json").write_text(json.dumps(after, indent=1))
        (self.dir / "host" / "diff.txt").write_text("".join(f"{line}\n" for line in left))
        self.promises["host_untouched"] = {"verdict": "passed" if not left else "broken", "left": left}

    def roll_back(self, p: plan_mod.VersionPlan, kube: Kube | None) -> dict:
        """The version's clean-up, and the seconds from its first command until nothing of it is left
        on the host; the host is read every half second meanwhile, so each object's own second shows
        (what bounds the total)."""
        started = time.monotonic()
        words = [p.slug, p.namespace, p.vcluster_name]
        gone_at: dict[str, float] = {}
        left: list[str] = []
        done = threading.Event()

        def watch() -> None:
            seen: set[str] = set()
            while True:
                try:
                    now_left = [line for line in snapshot.diff(self.before, snapshot.take(kube, set()))
                                if snapshot.mentions(line, words)]
                except Exception:  # noqa: BLE001 - a read that failed: the next one tells
                    now_left = sorted(seen - set(gone_at))
                t = round(time.monotonic() - started, 1)
                for line in seen - set(now_left):
                    gone_at.setdefault(line, t)
                seen |= set(now_left)
                left[:] = now_left
                if (done.is_set() and not now_left) or t > ROLLBACK_LIMIT:
                    return
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True) if kube is not None and self.before is not None else None
        if watcher:
            watcher.start()
        steps = self.best_effort(p.cleanup)
        done.set()
        if watcher:
            watcher.join(ROLLBACK_LIMIT + 30)
        # from the first command to the last of its objects gone (all the time there was, if some stayed)
        total = round(time.monotonic() - started, 1) if left or not gone_at else max(gone_at.values())
        return {"seconds": total, "commands": steps,
                "objects_gone_at": dict(sorted(gone_at.items(), key=lambda kv: kv[1])), "left": left}


def _answers(kube: Kube) -> bool:
    try:
        return kube.readyz()
    except Exception:  # noqa: BLE001 - refused, reset, timed out: not yet
        return False


def run_versions(trial_dir: Path, stamp: str, the_plan: dict, host_kubeconfig: str | None = None,
                 hooks: dict | None = None) -> None:
    """Run a trial's versions in vClusters; evidence lands in trial_dir as a binary trial's does."""
    Trial(trial_dir, stamp, the_plan, host_kubeconfig, hooks).go()


def check(the_plan: dict, host_kubeconfig: str | None) -> None:
    """Everything checked before anything is made: tools, a Docker engine (kind), the images."""
    tools_for(the_plan["runtime"])
    state.require_images(the_plan["versions"])
    if host_kubeconfig is not None and not Path(host_kubeconfig).expanduser().is_file():
        raise KailabError(f"--kubeconfig {host_kubeconfig}: no such file (the host cluster's kubeconfig)")
