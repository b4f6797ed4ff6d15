"""Why a lab process died, in one line, from its log and how it ended.

A Go crash puts what matters first ("fatal error: …", "panic: …", "SIGSEGV: …") and a register
dump last, so the whole log of the process's last run is read, not its tail. The classes, first
match wins: port in use, too many open files, bad flag, out of memory, Go fatal error, panic,
signal, exit status.
"""

from __future__ import annotations

import re

_RESTART_MARK = "----- kailab restarted"

_PATTERNS = [
    ("port in use", re.compile(r"address already in use", re.I)),
    # EMFILE: from inotify_init when the user's inotify instances are used up (hostlimits.py), or
    # the process's open-file limit; controller-runtime says it as "problem running manager"
    ("too many open files", re.compile(r"too many open files", re.I)),
    ("bad flag", re.compile(r"flag provided but not defined|unknown (shorthand )?flag|invalid argument .* for .*flag", re.I)),
    ("out of memory", re.compile(r"(runtime: |fatal error: )out of memory|cannot allocate memory|OOMKilled", re.I)),
    ("Go fatal error", re.compile(r"^fatal error: (.+)$", re.M)),
    ("panic", re.compile(r"^panic: (.+)$", re.M)),
    ("signal", re.compile(r"^(SIG[A-Z]+): (.+)$", re.M)),
]


def last_run(log: str) -> str:
    """The log of the process's last start (kailab marks each restart in the log)."""
    return log.rsplit(_RESTART_MARK, 1)[-1]


def classify(log: str, ended: str = "") -> str:
    """One line: the class of the death and its first words of evidence, e.g.
    'Go fatal error: concurrent map writes (exited with status 2)'. `ended` is how the process
    ended as its parent saw it ('exited with status 2', 'was killed by SIGKILL', or '')."""
    text = last_run(log)
    how = f" ({ended})" if ended and ended != "ended" else ""
    for name, pattern in _PATTERNS:
        m = pattern.search(text)
        if m:
            detail = ""
            if name in ("Go fatal error", "panic"):
                detail = m.group(1).strip()[:160]
            elif name == "signal":
                detail = f"{m.group(1)}: {m.group(2).strip()[:140]}"
            return f"{name}: {detail}{how}" if detail else f"{name}{how}"
    m = re.search(r"killed by (SIG[A-Z]+)", ended)
    if m:
        return f"signal: killed by {m.group(1)}" + (" (the kernel's OOM killer sends SIGKILL)" if m.group(1) == "SIGKILL" else "")
    if ended.startswith("exited with status"):
        return f"{ended}" + (" with an empty log" if not text.strip() else "")
    return "ended (how is not known: not this process's child)" + (" with an empty log" if not text.strip() else "")
