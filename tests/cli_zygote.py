"""kailab's entry point in a process of its own, forked from one that has already imported what every
start imports first (pydantic, rich, click, yaml): the unit tier starts the CLI over a hundred times, and
those imports were about 70 % of a start's CPU. The child is a process as the console script's is: the
caller's whole environment (nothing of the parent's), its working folder, its stdin, stdout and stderr;
it imports kailab afresh (the parent never does: kailab reads its environment as its modules load) and
runs `kailab.cli.main()`; its exit code is what `sys.exit` said. One parent per test process, started on
first use, ending with it. An environment that changes how Python itself starts (PYTHON* variables) runs
as a plain subprocess instead."""

from __future__ import annotations

import atexit
import json
import locale
import os
import select
import subprocess
import sys
import tempfile
import threading
import time

ENTRY = "from kailab.cli import main; main()"

# The parent: one request per line on its first argument's fd (JSON: argv, env, cwd, the child's three
# files), a fork for each, answering on the second's with the child's pid, then its exit code. It writes
# nothing to its own stdout or stderr, so a child starts with empty buffers there.
_PARENT = r'''
import json, os, sys, traceback
import click, pydantic, pydantic_core, rich.console, rich.table, urllib.request, yaml  # noqa: F401
requests, answers = os.fdopen(int(sys.argv[1]), "r"), int(sys.argv[2])
for line in requests:
    job = json.loads(line)
    pid = os.fork()
    if pid:
        os.write(answers, f"{pid}\n".encode())
        os.write(answers, f"{os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}\n".encode())
        continue
    code = 1
    try:
        os.environ.clear()
        os.environ.update(job["env"])
        os.chdir(job["cwd"])
        for fd, (path, flags) in enumerate(job["files"]):
            opened = os.open(path, flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        requests.close()
        os.close(answers)
        sys.argv = job["argv"]
        try:
            exec(compile(job["entry"], "<string>", "exec"), {"__name__": "__main__"})
            code = 0
        except SystemExit as done:
            if done.code is None or isinstance(done.code, int):
                code = done.code or 0
            else:
                print(done.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        try:
            import atexit
            atexit._run_exitfuncs()
        except BaseException:
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
    finally:
        os._exit(code)
'''


class _Parent:
    def __init__(self) -> None:
        requests_r, self._requests = os.pipe()
        self._answers, answers_w = os.pipe()
        self.python_env = _python_env(os.environ)  # what shaped the parent's interpreter
        self.proc = subprocess.Popen([sys.executable, "-c", _PARENT, str(requests_r), str(answers_w)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     pass_fds=(requests_r, answers_w))
        os.close(requests_r)
        os.close(answers_w)
        self._buffer = b""
        self.lock = threading.Lock()

    def _answer(self, deadline: float | None) -> int | None:
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._answers], [], [], wait)[0]:
                return None
            chunk = os.read(self._answers, 4096)
            if not chunk:
                raise RuntimeError("the CLI's parent process ended (tests/cli_zygote.py)")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return int(line)

    def run(self, argv: list[str], env: dict, cwd: str, stdin: str | None, timeout: float | None):
        """argv: [python, -c, the code, *its arguments]."""
        with tempfile.TemporaryDirectory(prefix="kailab-cli-") as tmp:
            out, err, source = (os.path.join(tmp, n) for n in ("out", "err", "in"))
            if stdin is None:
                source = os.devnull
            else:
                with open(source, "w") as f:
                    f.write(stdin)
            files = [(source, os.O_RDONLY), (out, os.O_WRONLY | os.O_CREAT), (err, os.O_WRONLY | os.O_CREAT)]
            job = {"argv": ["-c", *argv[3:]], "entry": argv[2], "env": env, "cwd": cwd, "files": files}
            with self.lock:
                os.write(self._requests, (json.dumps(job) + "\n").encode())
                pid = self._answer(None)
                code = self._answer(None if timeout is None else time.monotonic() + timeout)
                if code is None:  # as subprocess.run does: kill it, then say so
                    os.kill(pid, 9)
                    self._answer(None)
                    raise subprocess.TimeoutExpired(argv, timeout, output=_read(out), stderr=_read(err))
            return subprocess.CompletedProcess(argv, code, _read(out), _read(err))


def _read(path: str) -> str:
    with open(path, encoding=locale.getpreferredencoding(False), errors="replace") as f:
        return f.read()


_parents: dict[int, _Parent] = {}


def _parent() -> _Parent:
    parent = _parents.get(os.getpid())
    if parent is None or parent.proc.poll() is not None:
        parent = _parents[os.getpid()] = _Parent()
        atexit.register(parent.proc.kill)
    return parent


def _python_env(env) -> dict:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def run(args: list[str], env: dict, cwd: str | os.PathLike | None = None, input: str | None = None,
        timeout: float | None = None, entry: str = ENTRY) -> subprocess.CompletedProcess:
    """As `subprocess.run([python, -c, entry, *args], capture_output=True, text=True, env=env, cwd=cwd,
    input=input, timeout=timeout, stdin=DEVNULL unless input)`; `entry` is kailab's unless a test of this
    module says otherwise."""
    argv = [sys.executable, "-c", entry, *args]
    parent = _parent()
    if _python_env(env) != parent.python_env:
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, input=input, timeout=timeout,
                              **({} if input is not None else {"stdin": subprocess.DEVNULL}))
    return parent.run(argv, dict(env), os.path.abspath(cwd or os.getcwd()), input, timeout)
