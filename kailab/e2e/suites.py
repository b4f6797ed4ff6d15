"""Which of KAI's e2e suites a lab can run, on which runtime, and which none can (data/kai-e2e.yaml: a
registry, with the reason for every suite, spec or label left out), and the workload operators each
one's lab runs beside KAI (its third-party integrations: Kubeflow, JobSet, LWS, KubeRay).

A suite's `runtime` is the lab that can run it: `binary` (KAI as local processes; a kind lab runs it
too) or `kind` (KAI installed from its own chart, operator included: the suites that reconfigure KAI
through its `Config` and `SchedulingShard` objects). A label or spec left out may be left out on some
runtimes only (`runs_on`: the runtimes that do run it), so the label filter depends on the runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

from ..errors import KailabError

SUITES_DIR = "test/e2e/suites"
RUNTIMES = ("binary", "kind")  # a suite's runtime, in the order `kailab e2e` runs their lanes
# which labs run a suite of each runtime: a binary-runtime suite runs on a kind lab too (and on an
# adopted cluster, as before); a kind-runtime one needs KAI's operator, which only a kind lab has here
RUNS_ON = {"binary": ("binary", "kind", "existing"), "kind": ("kind",)}


@dataclass(frozen=True)
class LeftOut:
    """A label or spec text left out, why, and the runtimes that run it all the same (none: left out
    everywhere)."""
    why: str
    runs_on: tuple[str, ...] = ()

    def on(self, runtime: str) -> bool:
        return runtime not in self.runs_on


def _left_out(value) -> LeftOut:
    if isinstance(value, str):
        return LeftOut(value)
    return LeftOut(str(value["why"]), tuple(value.get("runs_on") or ()))


@dataclass(frozen=True, eq=False)
class Suite:
    name: str
    package: str  # under test/e2e/suites
    ci: bool = False
    seconds: float = 60.0  # how long it took here (to split suites over labs evenly)
    skip: dict[str, LeftOut | str] = field(default_factory=dict)  # spec text -> why a lab cannot run it
    operators: tuple[str, ...] = ()  # workload operators its lab runs beside KAI (kailab/operators names)
    runtime: str = "binary"  # the lab that runs it (RUNTIMES)
    # labels left out elsewhere that this suite's run keeps (numa: its specs are `numa`, most `nightly`)
    labels: tuple[str, ...] = ()
    # kailab publishes NodeResourceTopology objects for its run (cluster.node_topology)
    node_topology: bool = False
    operated: bool = False  # holds specs labelled `operated` (a kind lab runs them)

    @property
    def wider_on_kind(self) -> bool:
        """A binary suite a kind lab runs more of: its `operated` specs, or specs skipped on binary labs only."""
        return self.runtime != "kind" and (self.operated or self.skips("binary") != self.skips("kind"))

    @property
    def path(self) -> str:
        return f"{SUITES_DIR}/{self.package}"

    def skips(self, runtime: str) -> dict[str, str]:
        """Spec texts left out on a lab of this runtime -> why."""
        out = {}
        for text, value in self.skip.items():
            left = value if isinstance(value, LeftOut) else LeftOut(value)
            if left.on(runtime):
                out[text] = left.why
        return out

    def runs_on(self, runtime: str) -> bool:
        return runtime in RUNS_ON[self.runtime]


@dataclass(frozen=True)
class Registry:
    labels: dict[str, LeftOut]  # KAI e2e labels left out -> why (and where they run all the same)
    run: dict[str, Suite]
    not_run: dict[str, tuple[str, str]]  # name -> (package, why)
    dra: dict  # `kailab e2e --dra`: fleet, suites, focus

    def labels_left_out(self, runtime: str = "binary", suite: Suite | None = None) -> dict[str, str]:
        kept = suite.labels if suite else ()
        return {label: left.why for label, left in self.labels.items() if left.on(runtime) and label not in kept}

    def label_filter(self, runtime: str = "binary", suite: Suite | None = None) -> str:
        return " && ".join(f"!{label}" for label in self.labels_left_out(runtime, suite))

    def select(self, names: list[str] | None, ci: bool = False, runtime: str | None = None) -> list[Suite]:
        """The suites asked for (all runnable ones by default, the CI set with `ci`); with `runtime`
        (a running lab's), only those a lab of that runtime can run: by default the others are left
        out, by name they are refused in one line. An unknown or unrunnable name is one line saying
        which exist."""
        if not names:
            return [s for s in self.run.values() if (s.ci or not ci) and (runtime is None or s.runs_on(runtime))]
        picked = []
        for n in names:
            if n in self.run:
                s = self.run[n]
                if runtime is not None and not s.runs_on(runtime):
                    raise KailabError(f"KAI e2e suite {n!r} runs on a {s.runtime} lab, not on this {runtime} lab "
                                      f"({s.path} reconfigures KAI through its operator, which a {runtime} lab "
                                      "lacks): run it on a kind lab, or without --name")
                picked.append(s)
            elif n in self.not_run:
                raise KailabError(f"KAI e2e suite {n!r} ({SUITES_DIR}/{self.not_run[n][0]}) cannot run on a lab: "
                                  f"{self.not_run[n][1]}")
            else:
                raise KailabError(f"no KAI e2e suite {n!r}; choose from {', '.join(self.run)}")
        return list({s.name: s for s in picked}.values())


@cache
def registry() -> Registry:
    data = yaml.safe_load(resources.files("kailab").joinpath("data/kai-e2e.yaml").read_text())
    run = {}
    for name, s in data["run"].items():
        runtime = s.get("runtime", "binary")
        if runtime not in RUNTIMES:
            raise KailabError(f"data/kai-e2e.yaml: suite {name!r} has runtime {runtime!r}; "
                              f"choose from {', '.join(RUNTIMES)}")
        kept = tuple(s.get("labels") or ())
        unknown = [label for label in kept if label not in data["labels"]]
        if unknown:
            raise KailabError(f"data/kai-e2e.yaml: suite {name!r} keeps labels {', '.join(unknown)} that no "
                              f"filter leaves out; choose from {', '.join(data['labels'])}")
        run[name] = Suite(name=name, package=s["package"], ci=bool(s.get("ci")), seconds=float(s.get("seconds", 60)),
                          skip={t: _left_out(w) for t, w in (s.get("skip") or {}).items()},
                          operators=tuple(s.get("operators") or ()), runtime=runtime, labels=kept,
                          node_topology=bool(s.get("node_topology")), operated=bool(s.get("operated")))
    not_run = {name: (s["package"], s["why"]) for name, s in data["not_run"].items()}
    labels = {label: _left_out(w) for label, w in data["labels"].items()}
    return Registry(labels=labels, run=run, not_run=not_run, dra=dict(data["dra"]))
