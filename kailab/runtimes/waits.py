"""Named waits: poll a condition until true; on timeout say what, show the component's log, hint.

Timeouts are data (the WAITS table), not magic numbers spread through the code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_exponential

from ..errors import LabError
from . import processes

WAITS: dict[str, float] = {
    "etcd-healthy": 60,
    "apiserver-ready": 120,
    "controller-healthy": 60,
    "kwok-healthy": 60,
    "nodes-ready": 300,
    "kai-component-healthy": 90,
    "crd-established": 60,
    "probe-pod-bound": 120,
    "namespace-serviceaccount": 60,
}


class _Died(Exception):
    """The component being waited on is no longer running: waiting longer cannot help."""


def wait_until(what: str, check: Callable[[], object], *, timeout: str | float,
               lab: Path | None = None, component: str | None = None, hint: str = "") -> object:
    """Return check()'s first truthy result; raise LabError with context when time runs out.

    `check` may raise: the error counts as 'not yet' and its text is shown on timeout.
    """
    seconds = WAITS[timeout] if isinstance(timeout, str) else float(timeout)
    last_error: list[str] = []

    def attempt() -> object:
        if lab is not None and component:
            rec = processes.records(lab).get(component)
            if rec is not None and not rec.alive():
                raise _Died()
        try:
            return check()
        except Exception as err:  # noqa: BLE001 - any failure is 'not yet'
            last_error[:] = [f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"]
            return None

    retrying = Retrying(stop=stop_after_delay(seconds), wait=wait_exponential(0.05, max=1.0),
                        retry=retry_if_result(lambda r: not r), reraise=False)
    died = False
    try:
        return retrying(attempt)
    except RetryError:
        pass
    except _Died:
        died = True
    parts = [f"{component} exited while waiting for {what}" if died
             else f"timed out after {seconds:.0f}s waiting for {what}"]
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
