"""A cluster test that stops moving prints every process's stacks instead of hanging.

A test on the shared loopback cluster takes seconds; one that runs for ``STALL_SECONDS`` has
stalled somewhere among the test process (where the scheduler and the client live) and the
worker processes. The guard then prints the Python stacks of all of them -- the test
process through ``faulthandler``, each worker through the ``faulthandler`` handler
``StackDumps`` installed for SIGUSR1 -- so the log says where each process waited, and
kills the workers (their nannies start new ones), as the scheduler does with a worker that
stops heartbeating: the stuck query loses its tasks and pieces, raises WorkerLost and runs
once more (``run_on_cluster``). A
test still stuck ``STALL_SECONDS`` later fails with ``ClusterStalled`` carrying the stacks,
and later cluster tests fail at once (the cluster is not trusted any more).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

from distributed.diagnostics.plugin import WorkerPlugin

STALL_SECONDS = 600  # the slowest cluster test takes ~100 s on a loaded 2-core machine


class ClusterStalled(Exception):
    """A cluster test ran for ``STALL_SECONDS``; the message holds every process's stacks."""


class StackDumps(WorkerPlugin):
    """On each worker: SIGUSR1 writes all its threads' stacks to ``<directory>/<pid>.txt``."""

    def __init__(self, directory: str):
        self.directory = directory

    def setup(self, worker) -> None:
        self._file = open(os.path.join(self.directory, f"{os.getpid()}.txt"), "w")  # noqa: SIM115
        faulthandler.register(signal.SIGUSR1, file=self._file, all_threads=True)


class StallGuard:
    """One per test session: ``watch(nodeid)`` around each cluster test."""

    def __init__(self):
        self.directory = Path(tempfile.mkdtemp(prefix="plansight-stacks-"))
        self.client = None
        self.stalled: str | None = None  # the test that stalled for good, if one did
        self.restarts: list[str] = []  # the tests during which the workers were restarted

    def install(self, client) -> None:
        self.client = client
        client.register_plugin(StackDumps(str(self.directory)), name="plansight-stack-dumps")

    def restart_workers(self, timeout: float = 120) -> None:
        """SIGKILL every worker (as the kernel's OOM killer would); their nannies start new
        ones. Waits, bounded, until as many workers as before have joined."""
        if self.client is None:
            return
        before = set(self.client.scheduler_info()["workers"])
        for path in self.directory.glob("*.txt"):
            try:
                os.kill(int(path.stem), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
            path.unlink(missing_ok=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            workers = set(self.client.scheduler_info()["workers"])
            if len(workers) >= len(before) and not workers & before:
                return
            time.sleep(0.2)

    def watch(self, nodeid: str, seconds: float = STALL_SECONDS, restart: bool = True,
              grace: float | None = None):
        """A context manager: after ``seconds`` the workers restart (``restart``), after
        ``grace`` more (``seconds`` by default) ClusterStalled is raised in this thread."""
        return _Watch(self, nodeid, seconds, restart and self.client is not None,
                      seconds if grace is None else grace)

    def report(self, nodeid: str, seconds: float) -> str:
        """Every process's stacks now (the workers' through SIGUSR1)."""
        parts = [f"{nodeid} ran for {seconds} s; the stacks of every process follow.",
                 "--- test process (scheduler, client, test)"]
        with tempfile.TemporaryFile("w+") as own:
            faulthandler.dump_traceback(file=own, all_threads=True)
            own.seek(0)
            parts.append(own.read())
        dumps = sorted(self.directory.glob("*.txt"))
        for path in dumps:
            try:
                os.kill(int(path.stem), signal.SIGUSR1)
            except (ProcessLookupError, ValueError):
                path.unlink(missing_ok=True)
        time.sleep(2)  # faulthandler writes from the signal handler, at once
        for path in sorted(self.directory.glob("*.txt")):
            parts += [f"--- worker process {path.stem}", path.read_text()[-20_000:]]
        return "\n".join(parts)


class _Watch:
    def __init__(self, guard: StallGuard, nodeid: str, seconds: float, restart: bool,
                 grace: float):
        self.guard, self.nodeid, self.seconds, self.restart = guard, nodeid, seconds, restart
        self.grace = grace
        self.message: str | None = None
        self.lock = threading.Lock()  # orders the timer's steps against the block's end
        self.done = False

    def __enter__(self):
        self.main = threading.get_ident()
        self.previous = signal.signal(signal.SIGALRM, self._raise)
        self._arm(self.seconds, self._restart if self.restart else self._stalled)
        return self

    def _arm(self, seconds: float, then) -> None:
        with self.lock:
            if self.done:
                return
            self.timer = threading.Timer(seconds, then)
            self.timer.daemon = True
            self.timer.start()

    def _restart(self) -> None:
        """First stall: print the stacks, restart the workers, give the test ``grace``
        seconds more."""
        report = self.guard.report(self.nodeid, self.seconds)
        os.write(2, (report + "\n--- restarting the workers\n").encode())
        self.guard.restarts.append(self.nodeid)
        self.guard.restart_workers()
        self._arm(self.grace, self._stalled)

    def _stalled(self) -> None:
        message = self.guard.report(self.nodeid, self.seconds + self.restart * self.grace)
        with self.lock:  # the block may have ended meanwhile: then nothing is stuck
            if self.done:
                return
            self.message = message
            self.guard.stalled = self.nodeid
            os.write(2, message.encode() + b"\n")  # also when the main thread cannot raise
            signal.pthread_kill(self.main, signal.SIGALRM)

    def _raise(self, signum, frame):
        if self.message is not None:
            raise ClusterStalled(self.message)

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.done = True
            self.timer.cancel()
            signal.signal(signal.SIGALRM, self.previous)
