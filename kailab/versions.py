"""Which versions of what the lab runs, and the per-version facts about KAI."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from .errors import KailabError

# KAI's processes the binary runtime runs (each is `<module>/cmd/<name>`): the five that schedule,
# and KAI's admission webhook server (pod mutation and validation, GPU sharing), as an install runs it
KAI_COMPONENTS = ("scheduler", "binder", "podgrouper", "queuecontroller", "podgroupcontroller", "admission")
KAI_BINARIES = KAI_COMPONENTS
# KAI moved from NVIDIA's GitHub organisation to its own at v0.13.4
KAI_MODULE_NEW, KAI_MODULE_OLD, KAI_MODULE_MOVED_AT = (
    "github.com/kai-scheduler/KAI-scheduler", "github.com/NVIDIA/KAI-scheduler", (0, 13, 4))


@lru_cache(maxsize=1)
def _data() -> dict:
    return yaml.safe_load(resources.files("kailab").joinpath("data/versions.yaml").read_text())


ETCD_VERSION: str = _data()["etcd"]
KWOK_VERSION: str = _data()["kwok"]
DEFAULT_KAI: str = _data()["default_kai"]
PROMETHEUS_VERSION: str = _data()["prometheus"]
KSM_VERSION: str = _data()["kube_state_metrics"]


def prometheus_release(module_version: str = PROMETHEUS_VERSION) -> str:
    """Prometheus' release for its Go module's version: v0.3MM.P is v3.MM.P (3.x's module scheme)."""
    m = re.fullmatch(r"v0\.3(\d\d)\.(\d+)", module_version)
    if not m:
        raise KailabError(f"Prometheus module version {module_version!r} is not of the 3.x form v0.3MM.P "
                          "(kailab/data/versions.yaml, prometheus:)")
    return f"v3.{int(m.group(1))}.{m.group(2)}"


def metrics_images() -> dict[str, str]:
    """The upstream images of a lab's metrics components, by component (what a kind lab runs)."""
    return {"prometheus": f"quay.io/prometheus/prometheus:{prometheus_release()}",
            "kube-state-metrics": f"registry.k8s.io/kube-state-metrics/kube-state-metrics:{KSM_VERSION}"}


def parse(version: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", version.strip())
    if not m:
        raise KailabError(f"KAI version {version!r} is not of the form vX.Y.Z (e.g. {DEFAULT_KAI})")
    return tuple(int(x) for x in m.groups())  # type: ignore[return-value]


@dataclass(frozen=True)
class KaiRelease:
    version: str
    kubernetes: str

    @property
    def module(self) -> str:
        return KAI_MODULE_NEW if parse(self.version) >= KAI_MODULE_MOVED_AT else KAI_MODULE_OLD


def normalise(version: str) -> str:
    return "v%d.%d.%d" % parse(version)


def kai_release(version: str) -> KaiRelease:
    """The release record, or a one-line error saying why the version cannot be used."""
    v = normalise(version)
    oldest = _data()["oldest_kai"]
    if parse(v) < parse(oldest):
        raise KailabError(f"KAI {v} predates kailab's support (oldest supported: {oldest}); "
                          f"choose --kai-version {oldest} or newer")
    known = _data()["kai_releases"]
    if v not in known:
        raise KailabError(f"unknown KAI version {v}: known releases are {', '.join(known)} "
                          "(add it to kailab/data/versions.yaml with its Kubernetes version)")
    return KaiRelease(v, known[v]["kubernetes"])


def go_minimum() -> str:
    """The Go every pinned build needs (data/versions.yaml)."""
    return str(_data()["go_minimum"])


def known_kai_releases() -> list[str]:
    return list(_data()["kai_releases"])
