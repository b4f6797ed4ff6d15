"""Named waits: poll a condition until true; on timeout say what, show the component's log, hint.

Timeouts are data (the WAITS table), not magic numbers spread through the code.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_exponential

from ..errors import LabError
from . import processes
from .deaths import classify

WAITS: dict[str, float] = {
    "etcd-healthy": 60,
    "apiserver-ready": 120,
    "controller-healthy": 60,
    "kwok-healthy": 60,
    "nodes-ready": 300,
    "scheduler-component-healthy": 90,
    "operator-ready": 90,  # a workload operator's /readyz: it sets its controllers up after its certificates
    "metrics-healthy": 60,
    "crd-established": 60,
    "probe-pod-bound": 120,
    "exercise-clean-up": 120,
    "scheduler-reconfigured": 180,  # kind: KAI's operator renders the config, the scheduler restarts
}


# Poll fast, back off a little: every wait here is on a local process, and a poll costs little
# next to the time a slow first poll interval adds to each step of `up`.
FIRST_POLL_S, MAX_POLL_S = 0.05, 0.25

_abandoned: set[Path] = set()
_abandoned_lock = threading.Lock()


class _Died(Exception):
    """The component being waited on is no longer running: waiting longer cannot help."""


class _Abandoned(Exception):
    """Another part of a parallel `up` failed: this lab is being torn down."""


def abandon(lab: Path) -> None:
    """Make every wait on `lab` (in any thread) give up at its next poll."""
    with _abandoned_lock:
        _abandoned.add(lab.resolve())


def resume(lab: Path) -> None:
    with _abandoned_lock:
        _abandoned.discard(lab.resolve())


def wait_until(what: str, check: Callable[[], object], *, timeout: str | float,
               lab: Path | None = None, component: str | None = None, hint: str = "") -> object:
    """Return check()'s first truthy result; raise LabError with context when time runs out.

    `check` may raise: the error counts as 'not yet' and its text is shown on timeout.
    """
    seconds = WAITS[timeout] if isinstance(timeout, str) else float(timeout)
    last_error: list[str] = []

    key = lab.resolve() if lab is not None else None

    def attempt() -> object:
        if key is not None and key in _abandoned:
            raise _Abandoned()
        if lab is not None and component:
            rec = processes.records(lab).get(component)
            if rec is not None and not rec.alive():
                raise _Died()
        try:
            return check()
        except Exception as err:  # noqa: BLE001 - any failure is 'not yet'
            last_error[:] = [f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"]
            return None

    retrying = Retrying(stop=stop_after_delay(seconds), wait=wait_exponential(FIRST_POLL_S, max=MAX_POLL_S),
                        retry=retry_if_result(lambda r: not r), reraise=False)
    died = False
    try:
        return retrying(attempt)
    except RetryError:
        pass
    except _Died:
        died = True
    except _Abandoned:
        raise LabError(f"stopped waiting for {what}: another part of the lab's start failed") from None
    parts = [f"{component} exited while waiting for {what}" if died
             else f"timed out after {seconds:.0f}s waiting for {what}"]
    if died:  # why, in one line, above the log tail: from its whole last run's log and its exit
        parts[0] += f" — {why_it_died(lab, component)}"
    if last_error:
        parts.append(f"last error: {last_error[0]}")
    if hint:
        parts.append(f"hint: {hint}")
    message = "; ".join(parts)
    if lab is not None and component:
        rec = processes.records(lab).get(component)
        state = rec.exit_hint() if rec else "not started"
        message += (f"\n--- {component} ({state}), last log lines ---\n"
                    + processes.recent_log(lab, component, 15))
    raise LabError(message)


def why_it_died(lab: Path, component: str) -> str:
    """The class of a lab process's death (deaths.classify) from its whole log and its exit status."""
    rec = processes.records(lab).get(component)
    ended = processes.how_it_ended(rec.pid) if rec else ""
    try:
        log = (processes.logs_dir(lab) / f"{component}.log").read_text(errors="replace")
    except OSError:
        log = ""
    why = classify(log, ended)
    if why.startswith("too many open files"):  # which limit: the host's, counted at the death
        from .hostlimits import describe

        why += f" ({describe()})"
    return why
