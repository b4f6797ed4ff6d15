"""Which of KAI's e2e suites a lab can run, and which it cannot (data/kai-e2e.yaml: a registry,
with the reason for every suite, spec or label left out), and the workload operators each one's lab
runs beside KAI (its third-party integrations: Kubeflow, JobSet, LWS, KubeRay)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

from .... import operators as workload_operators
from ....errors import KailabError

SUITES_DIR = "test/e2e/suites"


@dataclass(frozen=True, eq=False)
class Suite:
    name: str
    package: str  # under test/e2e/suites
    ci: bool = False
    seconds: float = 60.0  # how long it took here (to split suites over labs evenly)
    skip: dict[str, str] = field(default_factory=dict)  # spec text -> why a lab cannot run it
    operators: tuple[str, ...] = ()  # workload operators its lab runs (kailab/operators names)

    @property
    def path(self) -> str:
        return f"{SUITES_DIR}/{self.package}"


def operators_of(suites: list[Suite]) -> tuple[str, ...]:
    """The workload operators a lab running these suites needs: the union, in the operators'
    registry order (kailab/operators.OPERATORS)."""
    wanted = {o for s in suites for o in s.operators}
    return tuple(o for o in workload_operators.OPERATORS if o in wanted)


def missing_operators(suites: list[Suite], running: dict | None) -> dict[str, list[str]]:
    """{operator: [suite, ...]} for what these suites need that a lab (its record's
    `stack.operators`) does not run."""
    out: dict[str, list[str]] = {}
    for s in suites:
        for o in s.operators:
            if o not in (running or {}):
                out.setdefault(o, []).append(s.name)
    return out


@dataclass(frozen=True)
class Registry:
    labels: dict[str, str]  # KAI e2e labels left out -> why
    run: dict[str, Suite]
    not_run: dict[str, tuple[str, str]]  # name -> (package, why)
    dra: dict  # `kailab e2e --dra`: fleet, suites, focus

    def label_filter(self) -> str:
        return " && ".join(f"!{label}" for label in self.labels)

    def select(self, names: list[str] | None, ci: bool = False) -> list[Suite]:
        """The suites asked for (all runnable ones by default, the CI set with `ci`); an unknown or
        unrunnable name is one line saying which exist."""
        if not names:
            return [s for s in self.run.values() if s.ci or not ci]
        picked = []
        for n in names:
            if n in self.run:
                picked.append(self.run[n])
            elif n in self.not_run:
                raise KailabError(f"KAI e2e suite {n!r} ({SUITES_DIR}/{self.not_run[n][0]}) cannot run on a lab: "
                                  f"{self.not_run[n][1]}")
            else:
                raise KailabError(f"no KAI e2e suite {n!r}; choose from {', '.join(self.run)}")
        return list({s.name: s for s in picked}.values())


@cache
def registry() -> Registry:
    data = yaml.safe_load(resources.files("kailab").joinpath("data/kai-e2e.yaml").read_text())
    run = {name: Suite(name=name, package=s["package"], ci=bool(s.get("ci")), seconds=float(s.get("seconds", 60)),
                 skip=dict(s.get("skip") or {}), operators=_operators(name, s.get("operators") or []))
           for name, s in data["run"].items()}
    not_run = {name: (s["package"], s["why"]) for name, s in data["not_run"].items()}
    return Registry(labels=dict(data["labels"]), run=run, not_run=not_run, dra=dict(data["dra"]))


def _operators(suite: str, names: list[str]) -> tuple[str, ...]:
    """A suite's operators as the registry has them, each a lab operator (by name, no version: a
    lab runs the version KAI pins, data/operators.yaml)."""
    for n in names:
        if n not in workload_operators.OPERATORS:
            raise KailabError(f"data/kai-e2e.yaml: suite {suite!r} names operator {n!r}, which a lab cannot run "
                              f"(choose from {', '.join(workload_operators.OPERATORS)})")
    return tuple(o for o in workload_operators.OPERATORS if o in names)
