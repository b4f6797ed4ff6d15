"""The labs a test session uses: one per fleet, brought up on first use and torn down at the end;
labs left by test sessions that died are reaped first."""

from __future__ import annotations

import os
import re

from ..errors import KailabError
from ..paths import state_dir
from ..runtimes import LabRecord, LabSpec, get_runtime
from ..toolchain import kai_unavailable_reason

LAB_PREFIX = "pytest-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_sessions() -> list[str]:
    """Take down labs left by test sessions whose pytest process no longer exists."""
    reaped = []
    for lab in sorted(state_dir().glob(f"{LAB_PREFIX}*")):
        m = re.match(rf"{LAB_PREFIX}(\d+)-", lab.name)
        if lab.is_dir() and m and not _pid_alive(int(m.group(1))):
            get_runtime("binary").down(lab.name)
            reaped.append(lab.name)
    return reaped


class LabPool:
    """Labs for this session, keyed by (fleet, with_kai); brought up lazily, all torn down at the end."""

    def __init__(self, config):
        self.config = config
        self.labs: dict[tuple[str, bool], LabRecord] = {}
        self.external = config.getoption("--kailab-lab")

    def get(self, fleet: str = "tiny", with_kai: bool | None = None, own: bool = False) -> LabRecord:
        """The session's lab for `fleet` (--kailab-lab's, unless `own`: then one of the session's)."""
        if self.external and not own:
            rec = LabRecord.load(self.external)
            if rec is None or rec.state != "up":
                raise KailabError(f"--kailab-lab {self.external}: no such lab is up")
            return rec
        if with_kai is None:
            with_kai = kai_unavailable_reason() is None
        key = (fleet, with_kai)
        if key not in self.labs:
            name = f"{LAB_PREFIX}{os.getpid()}-{fleet}" + ("" if with_kai else "-nokai")
            self.labs[key] = get_runtime("binary").up(LabSpec(name=name, runtime="binary", fleet=fleet,
                                                        with_kai=with_kai))
        return self.labs[key]

    def close(self) -> None:
        for rec in self.labs.values():
            get_runtime("binary").down(rec.name)
        self.labs.clear()


def lab_pool(config) -> LabPool:
    """The session's LabPool, shared by fixtures and exercise items; created on first use."""
    pool = getattr(config, "_kailab_pool", None)
    if pool is None:
        reap_dead_sessions()
        pool = config._kailab_pool = LabPool(config)
    return pool
