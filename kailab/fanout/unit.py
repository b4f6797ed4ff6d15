"""One unit of a fanned-out run and the objects that run it on a cluster: a ConfigMap with its input
files and a Job whose pod brings a binary lab up inside itself, runs the unit, says it is done in its
log and waits to be collected (run.py copies /evidence out, then deletes the Job)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..exercise.load import load_exercise
from ..fleet import fleet_path
from ..images.lab import EVIDENCE
from .costs import FALLBACK, requests_for

RUN_LABEL = "kailab.io/fanout"  # every object of a run carries it: its namespace too
DONE = "kailab-unit: done"  # the pod's log line: the unit's exit status follows
CPU = "kailab-unit: cpu-seconds"  # the pod's log line: its container's CPU-seconds follow
MEMORY = "kailab-unit: memory-peak-bytes"  # the pod's log line: its container's memory peak follows
# how long a pod waits to be collected after its unit is done before it ends by itself (a harness
# that died leaves no pod running for ever; its namespace it still leaves, named by RUN_LABEL)
COLLECT_WINDOW_S = 900
UNIT_TIMEOUT_S = 3600  # the most a unit may take before the run calls it failed (run.py), and its Job ends
# A binary lab in a pod: KAI's podgroupcontroller runs in a network namespace of its own (it listens
# on :8080 on every interface), which needs unshare (CAP_SYS_ADMIN) and bringing its loopback up
# (CAP_NET_ADMIN); nothing else beyond a plain container. Not privileged: a kind node on a host
# without CAP_SYS_RESOURCE cannot grant a privileged pod every capability.
CAPABILITIES = ["SYS_ADMIN", "NET_ADMIN"]

# the unit's command (its files are in /unit); its status is said in the log, then the pod waits
# Its container's CPU-seconds and memory peak are said too (cgroup v2, else v1): what a unit costs,
# measured where it ran, for the cost model (docs/dev/fan-out-design.md) and units' requests (costs.py)
SCRIPT = f"""set -u
eval "$KAILAB_UNIT_COMMAND"
rc=$?
cpu=$(awk '/^usage_usec/{{printf "%.1f", $2/1e6}}' /sys/fs/cgroup/cpu.stat 2>/dev/null)
for f in /sys/fs/cgroup/cpuacct/cpuacct.usage /sys/fs/cgroup/cpu,cpuacct/cpuacct.usage; do
  [ -n "$cpu" ] || cpu=$(awk '{{printf "%.1f", $1/1e9}}' "$f" 2>/dev/null)
done
echo "{CPU} ${{cpu:-unknown}}"
mem=$(cat /sys/fs/cgroup/memory.peak 2>/dev/null || cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes 2>/dev/null)
echo "{MEMORY} ${{mem:-unknown}}"
echo "{DONE} $rc"
sleep {COLLECT_WINDOW_S}
"""
LAB = "unit"  # the lab's name inside an exercise unit's pod


def _exercise_outcome(root: Path, dirs: list[str]) -> tuple[Path, str] | None:
    """An exercise unit's run folder and verdict (its verdict.json)."""
    found = [root / d for d in dirs if (root / d / "verdict.json").is_file()]
    return (found[-1], json.loads((found[-1] / "verdict.json").read_text()).get("verdict", "")) if found else None


def summary_outcome(summary: str, ok: Callable[[dict], bool] = lambda s: bool(s.get("ok"))):
    """A fill's, replay's or trial's unit: its folder (fill-<time>, …) and `passed` when its summary
    says its part finished; the user's expectations are checked on the whole, not per unit."""
    def read(root: Path, dirs: list[str]) -> tuple[Path, str] | None:
        found = [root / d for d in dirs if (root / d / summary).is_file()]
        if not found:
            return None
        return found[-1], "passed" if ok(json.loads((found[-1] / summary).read_text())) else "failed"
    return read


@dataclass(frozen=True)
class Kind:
    """How a unit's evidence is read back: its folder and verdict from what its pod wrote, and where it
    goes here: as if run here, or (a folder named by its second, units starting together) under the
    run's record in a folder of the unit's name."""

    name: str
    read: Callable[[Path, list[str]], tuple[Path, str] | None]
    own_folder: bool = False


EXERCISE = Kind("exercise", _exercise_outcome)


@dataclass(frozen=True)
class Unit:
    """One independent piece of a run, run in a lab (or labs) of its own in one pod."""

    name: str        # a DNS label: the Job's and ConfigMap's name
    title: str       # what the user reads: the exercise's file, "fill binpack seed 1"
    kind: Kind       # how its evidence is read back
    files: tuple[tuple[str, str], ...]  # (path under /unit, text): its input files, shipped in a ConfigMap
    command: str     # the shell command the pod runs in /unit; its exit status is the unit's
    kai_version: str
    env: tuple[tuple[str, str], ...] = ()
    part: tuple[str, ...] = ()  # which part of the whole it is (a fill's design and seed), for the merge
    requests: tuple[str, str] = FALLBACK  # (cpu, memory) its pod asks for: from its kind's measured cost


@dataclass
class UnitResult:
    unit: str
    title: str                  # what ran: an exercise's file, "fill binpack seed 1"
    state: str = "pending"      # pending | running | collected | failed
    pod: str = ""
    node: str = ""
    exit_status: int | None = None
    verdict: str = ""
    evidence: str = ""          # the run's folder, copied back here
    error: str = ""
    seconds: float = 0.0        # from the Job's creation to its collection
    cpu_seconds: float | None = None  # its container's, as its pod said (every process of its lab)
    memory_peak_mib: float | None = None  # its container's memory peak, as its pod said
    requests: dict = field(default_factory=dict)  # what its pod asked for
    log: str = ""               # the pod's whole log, kept in the run's record


def dns_label(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40] or "unit"


def cli_command(*argv: object) -> str:
    return " ".join(["python3", "-m", "kailab.cli", *(shlex.quote(str(a)) for a in argv)])


def exercise_unit(path: Path, index: int, kai_version: str) -> Unit:
    """The unit that runs the exercise at `path`; a fleet given as a path is refused in one line (the
    pod has the fleets this project names, and the one shipped beside the exercise)."""
    ex = load_exercise(path)  # validated here: bad input never reaches a cluster
    if "/" in ex.fleet or ex.fleet.endswith((".yaml", ".yml")):
        raise InputError(path, "fleet", f"{ex.fleet!r} is a path", "name a fleet of fleets/ to run it with --on")
    command = (cli_command("up", "--fleet", ex.fleet, "--kai-version", kai_version, "--name", LAB) + " && "
               + cli_command("run", f"/unit/{path.name}", "--name", LAB))
    return Unit(name=f"u{index:02d}-{dns_label(path.stem)}", title=path.name, kind=EXERCISE,
                files=((path.name, path.read_text()), (f"fleets/{ex.fleet}.yaml", fleet_path(ex.fleet).read_text())),
                command=command, kai_version=kai_version, env=(("KAILAB_FLEETS", "/unit/fleets"),),
                requests=requests_for(EXERCISE.name))


def objects(unit: Unit, namespace: str, run_id: str, image: str, cpu: str, memory: str) -> list[dict]:
    """The ConfigMap holding the unit's files and the Job running it (pure)."""
    labels = {RUN_LABEL: run_id, "kailab.io/unit": unit.name}
    keys = [f"f{i}" for i in range(len(unit.files))]  # a ConfigMap key holds no '/': the item gives the path
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": unit.name, "namespace": namespace,
                                                                     "labels": labels},
              "data": {k: text for k, (_, text) in zip(keys, unit.files)}}
    container = {
        "name": "lab", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", SCRIPT],
        "env": [{"name": "KAILAB_UNIT_COMMAND", "value": unit.command}, {"name": "KAILAB_UNIT_KAI", "value": unit.kai_version},
                *({"name": k, "value": v} for k, v in unit.env)],
        "securityContext": {"capabilities": {"add": CAPABILITIES}},
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
        "volumeMounts": [{"name": "unit", "mountPath": "/unit"}, {"name": "evidence", "mountPath": EVIDENCE}],
    }
    pod = {
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": "Never",
            # its evidence is out or the run is over: nothing in the pod needs a clean stop (a shell
            # waiting in `sleep` ignores SIGTERM, and each deletion waited out the default 30 s)
            "terminationGracePeriodSeconds": 2,
            "containers": [container],
            # never on a fleet's KWOK nodes (a kailab lab as the host): nothing runs there
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}]}}},
            "volumes": [{"name": "unit", "configMap": {"name": unit.name, "items": [
                {"key": k, "path": path} for k, (path, _) in zip(keys, unit.files)]}},
                {"name": "evidence", "emptyDir": {}}],
        },
    }
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": unit.name, "namespace": namespace, "labels": labels},
           "spec": {"backoffLimit": 0, "template": pod,
                    "activeDeadlineSeconds": UNIT_TIMEOUT_S + COLLECT_WINDOW_S}}  # a unit that hangs ends by itself
    return [config, job]


def bring_back(unit: Unit, result: UnitResult, part: str, dest: Path, error_file: str = "error.txt") -> None:
    """A unit's part (the folder `part` in what its pod brought back) at `dest`, as a local run writes it;
    a unit that brought nothing back is that part's error file there."""
    src = Path(result.evidence) / part if result.evidence else None
    if src is not None and src.is_dir():
        shutil.copytree(src, dest)
    else:
        dest.mkdir(exist_ok=True)
        (dest / error_file).write_text(f"{result.error or result.state} (fan-out unit {unit.name})\n")
