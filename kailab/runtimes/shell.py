"""Running host commands for the cluster runtimes (kind, vCluster): logged, bounded, one-line errors."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

from ..errors import LabError

COMMAND_TIMEOUT = 1800  # seconds; every command has its own shorter --timeout/--wait as well

# `kubectl wait --for=condition=...` on an object whose status has no conditions yet (a CRD created a
# moment ago) fails at once with this, instead of waiting (a CI's kind lab met it on KWOK's Stage CRD)
TOO_EARLY_FOR_CONDITIONS = ".status.conditions accessor error: <nil> is of the type <nil>"
TOO_EARLY_RETRY_FOR = 60.0  # seconds of asking again, one a second


def progress(message: str) -> None:
    print(f"kailab: {message}", file=sys.stderr, flush=True)


def run_logged(argv: list[str], log: Path, shown: list[str], what: str = "") -> None:
    """Run one command, appending its output to the lab's log; a LabError if it fails."""
    step = f"{what}: " if what else ""
    with log.open("a") as f:
        f.write(f"$ {shlex.join(shown)}\n")
        f.flush()
        deadline = time.monotonic() + TOO_EARLY_RETRY_FOR
        while True:
            try:
                out = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise LabError(f"{step}`{short(shown)}` did not finish in {COMMAND_TIMEOUT}s; "
                               f"log: {log}") from None
            f.write(out.stdout + out.stderr + f"(exit {out.returncode})\n")
            if out.returncode == 0 or TOO_EARLY_FOR_CONDITIONS not in out.stderr + out.stdout \
                    or time.monotonic() > deadline:
                break
            f.write("(the object has no conditions yet: asking again in 1 s)\n")
            f.flush()
            time.sleep(1)
    if out.returncode != 0:
        raise LabError(f"{step}`{short(shown)}` failed (exit {out.returncode}): "
                       f"{telling_line(out.stderr or out.stdout)}; full command and output: {log}")


def short(argv: list[str], words: int = 6) -> str:
    """The command's first words, without the lab's --kubeconfig (the log has it all)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--kubeconfig":
            skip = True
        else:
            out.append(arg)
    return shlex.join(out[:words]) + (" ..." if len(out) > words else "")


# the line a Go tool states its error on: kind (`ERROR: failed to create cluster: ...`) prints it before
# a stack trace whose last line (`runtime/asm_amd64.s:1771`) was all a CI failure showed
ERROR_PREFIXES = ("ERROR:", "Error:", "error:", "panic:", "fatal error:")


def telling_line(text: str) -> str:
    """The output's first line stating an error (see ERROR_PREFIXES), else its last line."""
    for line in (text or "").splitlines():
        if line.strip().startswith(ERROR_PREFIXES):
            return line.strip()[:300]
    return last_line(text)


def last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"
