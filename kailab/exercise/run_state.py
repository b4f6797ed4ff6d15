"""What a step's actions read and write of the exercise run they belong to, typed in one place.

The runner (ExerciseRun) owns the run; the actions (actions.py) act on it through this protocol, so an
action's reach is visible here and not spread over the runner's attributes. ExerciseRun satisfies it
structurally (the runner imports the actions, never the reverse); tests/unit/test_run_state.py checks
that every member is the runner's and that the actions touch nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # types only: nothing here imports at run time
    from ..evidence import EvidenceDir
    from ..kube import Kube
    from ..labs import Lab
    from ..stacks.base import QueueDecl, Ref, Stack
    from .checks import Names
    from .observer import Observer
    from .spec import Exercise, Step


class RunState(Protocol):
    # what the run is: read only
    ex: "Exercise"
    source: Path
    lab: "Lab"                # the lab (its record, runtime and stack): faults, scheduler configuration
    names: "Names"            # the run's namespace, queue and topology names
    kube: "Kube"
    stack: "Stack"            # what schedules: the exercise's vocabulary as its objects
    observer: "Observer"      # the watch: state, events, settling
    evidence: "EvidenceDir"
    outcome: object           # runner.Outcome, the verdict so far (the runner imports this module)

    # bookkeeping the actions write, and the run's end reads to put things back
    applied: dict[str, str]                 # workload -> kind
    intake: dict[int, dict[str, int]]       # step index -> pods each workload it applied makes
    manifests_applied: dict[str, dict]      # raw manifests by workload name (to delete them)
    queue_gpu: dict[str, dict]              # queue (file name) -> its GPU share as a step patched it
    faulted: dict[str, set[str]]            # fault key -> what it took away and nothing put back yet (faults.py)
    nodes_changed: dict[str, set[str]]      # fleet nodes a `nodes:` step changed -> label keys touched
    scheduler_changed: bool                 # a step reconfigured the scheduler: put the default back
    scheduler_settings: dict                # step index -> its setting, rendered in preflight

    # what the runner does for them
    def workload_objects(self, step: "Step", item) -> list[dict]: ...
    def on_this_stack(self, items: list, step: "Step", how: str) -> list: ...
    def queue_decls(self) -> list["QueueDecl"]: ...
    def delete(self, refs: list["Ref"]) -> None: ...
    def list_events(self) -> list[dict]: ...
