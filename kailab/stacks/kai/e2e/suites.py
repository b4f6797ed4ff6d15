"""Which of KAI's e2e suites a lab can run, and which it cannot (data/kai-e2e.yaml: a registry,
with the reason for every suite, spec or label left out), and the workload operators each one's lab
runs beside KAI (its third-party integrations: Kubeflow, JobSet, LWS, KubeRay)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

from ....errors import KailabError

SUITES_DIR = "test/e2e/suites"


@dataclass(frozen=True, eq=False)
class Suite:
    name: str
    package: str  # under test/e2e/suites
    ci: bool = False
    seconds: float = 60.0  # how long it took here (to split suites over labs evenly)
    skip: dict[str, str] = field(default_factory=dict)  # spec text -> why a lab cannot run it
    operators: tuple[str, ...] = ()  # workload operators its lab runs beside KAI (kailab/operators names)

    @property
    def path(self) -> str:
        return f"{SUITES_DIR}/{self.package}"


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
                 skip=dict(s.get("skip") or {}), operators=tuple(s.get("operators") or ()))
           for name, s in data["run"].items()}
    not_run = {name: (s["package"], s["why"]) for name, s in data["not_run"].items()}
    return Registry(labels=dict(data["labels"]), run=run, not_run=not_run, dra=dict(data["dra"]))
