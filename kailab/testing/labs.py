"""The labs a test session uses: one per fleet, brought up on first use and torn down at the end;
labs left by test sessions that died are reaped first."""

from __future__ import annotations

import contextlib
import os
import re
import time
import warnings
from pathlib import Path

import pytest

from .. import operators as ops
from ..errors import KailabError, LabBusy
from ..paths import state_dir
from .. import labs
from ..labs import LabRecord, LabSpec
from ..toolchain import kai_unavailable_reason
from ..runtimes.processes import pid_alive
from ..runtimes.base import docker_answers

LAB_PREFIX = "pytest-"
FIRST_WORKER = "gw0"  # pytest-xdist's first worker
# The Docker engine tests marked `kind` use: set only around their Docker work, so a private engine
# (kailab/data/docker-host.sh in CI) never turns `--runtime auto` into kind for the other tests
KIND_DOCKER_ENV = "KAILAB_KIND_DOCKER_HOST"


@contextlib.contextmanager
def kind_docker():
    """DOCKER_HOST pointed at the kind tests' engine for the length of the block."""
    host = os.environ.get(KIND_DOCKER_ENV)
    before = os.environ.get("DOCKER_HOST")
    if host:
        os.environ["DOCKER_HOST"] = host
    try:
        yield
    finally:
        if host:
            if before is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = before


def kind_unavailable_reason() -> str | None:
    """None when a Docker engine answers for the kind tests; else why not."""
    with kind_docker():
        if docker_answers():
            return None
    return (f"no Docker engine answers ({KIND_DOCKER_ENV}, DOCKER_HOST or /var/run/docker.sock); "
            "start one (kailab/data/docker-host.sh start) and build the images (kailab tools images)")


# A cold CI builds the kind images in the background while the other tests run (.ci/run): this names
# the file that says "running", then each stage as it is ready — "main" (the node image, the stacks' and
# the operators': what most kind tests use), "trial" (vCluster's and KAI v0.16.8's too: the vCluster
# trial's), "done" (the lab image too: the fan-out's) — or "failed …". A test marked `kind` waits for
# the stage it names (`pytest.mark.kind(images="trial")`): by default "main", "done" when marked `alone`
PENDING_ENV = "KAILAB_KIND_IMAGES_PENDING"
IMAGE_STAGES = ("running", "main", "trial", "done")
# and what only some tests need (.ci/builds): set while it builds, so those tests run last
BUILDS_PENDING_ENV = "KAILAB_BUILDS_PENDING"


def builds_pending() -> bool:
    return bool(os.environ.get(BUILDS_PENDING_ENV))


def wait_for_kind_images(status: str, timeout: float = 90 * 60, every: float = 5.0, stage: str = "done") -> None:
    """Return once the file `status` says the kind images of `stage` are ready (IMAGE_STAGES: a later
    stage holds the earlier ones' too); fail the test when it says their build failed, or when it
    still says they build after `timeout` seconds."""
    if stage not in IMAGE_STAGES[1:]:
        pytest.fail(f"pytest.mark.kind(images={stage!r}): no such stage of the kind images (one of "
                    f"{', '.join(IMAGE_STAGES[1:])})", pytrace=False)
    deadline = time.monotonic() + timeout
    while True:
        text = Path(status).read_text().strip() if Path(status).is_file() else "(no such file)"
        if text in IMAGE_STAGES and IMAGE_STAGES.index(text) >= IMAGE_STAGES.index(stage):
            return
        if text not in IMAGE_STAGES:  # (every writer writes it whole, by a rename: .ci/images, .ci/run)
            pytest.fail(f"the kind images built in the background ({PENDING_ENV}={status}) are not ready: "
                        f"{text or '(an empty file)'}",
                        pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"the kind images built in the background ({PENDING_ENV}={status}) were still "
                        f"building after {timeout:g} s", pytrace=False)
        time.sleep(every)


def owner_pid(lab_name: str) -> int | None:
    """The pytest process a test lab belongs to: its name is pytest-<pid>-…; None for any other lab."""
    m = re.match(rf"{LAB_PREFIX}(\d+)-", lab_name)
    return int(m.group(1)) if m else None


def reap_dead_sessions() -> list[str]:
    """Take down labs left by test sessions whose pytest process no longer exists. A lab whose lock
    another process holds is left to it: under pytest -n every worker reaps at its first lab, and
    the first to reach a dead session's lab takes it down while the others pass it by."""
    reaped = []
    for lab in sorted(state_dir().glob(f"{LAB_PREFIX}*")):
        pid = owner_pid(lab.name)
        if not (lab.is_dir() and pid and not pid_alive(pid)):
            continue
        try:
            with kind_docker():
                labs.down(lab.name)
        except LabBusy:
            continue
        except KailabError as e:  # a leftover that will not go is this session's warning, not its failure
            warnings.warn(f"could not take down {lab.name}, left by a test session that died: {e}")
            continue
        reaped.append(lab.name)
    return reaped


class LabPool:
    """Labs for this session, keyed by (runtime, fleet, stack); brought up lazily, all torn down at the end."""

    def __init__(self, config):
        self.config = config
        self.labs: dict[tuple, LabRecord] = {}
        self.external = config.getoption("--kailab-lab")
        # pytest -n (pytest-xdist): each worker process has its own pool; the first uses
        # --kailab-lab's lab, the others a lab of their own beside it (same runtime and KAI)
        self.worker = getattr(config, "workerinput", {}).get("workerid")

    def get(self, fleet: str = "tiny", stack: str | None = None, own: bool = False,
            runtime: str = "binary", kai_version: str = "", operators: tuple[str, ...] = ()) -> LabRecord:
        """The session's lab for `fleet` (--kailab-lab's, unless `own`: then one of the session's, of
        `runtime` and `kai_version` — e.g. a racks lab beside a kind lab). With `operators`, a lab
        that runs every workload operator (one such lab per fleet serves any exercise needing some)."""
        if self.external and not own:
            rec = LabRecord.load(self.external)
            if rec is None or rec.state != "up":
                raise KailabError(f"--kailab-lab {self.external}: no such lab is up")
            if self.worker in (None, FIRST_WORKER):
                return rec
            # (a runtime that adopts a cluster cannot make a second: refused before workers start, plugin.py)
            return self.get(fleet, stack, own=True, runtime=rec.runtime, kai_version=rec.kai_version)
        if stack is None:  # KAI where this machine has it
            stack = "kai" if kai_unavailable_reason() is None else "none"
        every = ops.parse(list(ops.OPERATORS)) if operators else ()
        key = (runtime, fleet, stack) + ((every,) if every else ())
        if key not in self.labs:
            kind = "" if runtime == "binary" else f"{runtime}-"
            name = f"{LAB_PREFIX}{os.getpid()}-{kind}{fleet}" + {"kai": "", "none": "-nokai"}.get(stack, f"-{stack.replace('+', '-')}") + ("-ops" if every else "")
            spec = LabSpec(name=name, runtime=runtime, fleet=fleet, stack=stack, kai_version=kai_version,
                           operators=every)
            with kind_docker():
                self.labs[key] = labs.up(spec).record
        return self.labs[key]

    def get_kind(self, fleet: str = "small") -> LabRecord:
        """The session's kind lab for `fleet` (KAI from its chart; images built here when present)."""
        return self.get(fleet, "kai", own=True, runtime="kind")

    def release(self, keep_fleets: tuple[str, ...]) -> None:
        """Down the session's labs of other fleets than `keep_fleets`, and those with workload operators
        (a later `get` brings one up again): an idle lab still spends ~9 % of a core on its control
        plane, KAI and Prometheus."""
        for key, rec in list(self.labs.items()):
            with_operators = len(key) > 3  # a lab with the workload operators: its group's alone
            if (rec.fleet not in keep_fleets or with_operators) and rec.runtime == "binary":
                self.down(rec)

    def down(self, rec: LabRecord) -> None:
        """Down one of the session's labs now, not at the session's end (a later `get` brings one up again)."""
        with kind_docker():
            labs.down(rec.name)
        self.forget(rec.name)

    def forget(self, name: str) -> None:
        """The lab `name` was taken down by other means (a test's own `kailab down`)."""
        self.labs = {key: rec for key, rec in self.labs.items() if rec.name != name}

    def close(self) -> None:
        for rec in list(self.labs.values()):
            self.down(rec)


def lab_pool(config) -> LabPool:
    """The session's LabPool, shared by fixtures and exercise items; created on first use."""
    pool = getattr(config, "_kailab_pool", None)
    if pool is None:
        reap_dead_sessions()
        pool = config._kailab_pool = LabPool(config)
    return pool
