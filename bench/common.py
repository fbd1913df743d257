"""Shared helpers of the benchmarks: machine facts, a subprocess worker harness, tables.

Each engine runs in its own worker process, so that engines do not share a heap, a thread
pool or an allocator, and a hung or crashed engine can be killed without losing the run::

    parent (run_*.py)                          worker (run_*.py --worker ENGINE)
    ----------------                           ---------------------------------
    Worker.call({"cmd": "setup", ...})  --->   load data, register tables
    Worker.call({"cmd": "run", ...})    --->   run the query N times, materialize results
         <--- {"times": [...], "cpu": [...], "rows": n, "peak_rss": bytes, "base_rss": bytes}
    (no reply within the timeout: the worker's process group is killed, the cell is
    recorded as a timeout, and a fresh worker is started for the next query)

Messages are JSON lines on the worker's stdin/stdout; the worker moves its real stdout to a
private descriptor first, so an engine that prints cannot corrupt the protocol.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DATA_DIR = BENCH_DIR / "data"

MISSING = "—"  # a cell with no measurement (engine failed, timed out or cannot run it)


def ensure_plansight_importable() -> None:
    """Make ``import plansight.datasets`` work from a source checkout without installing.

    The engine subpackages need the installed (``pip install -e .``) package-dir mapping;
    the datasets do not, so a checkout can still generate data and run the other engines.
    """
    try:
        import plansight.datasets  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO_DIR))


# ---------------------------------------------------------------------------- machine


def machine_info() -> dict[str, str]:
    """Date, CPU, cores, memory, OS and Python of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    return {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": cpu,
        "nproc": str(os.cpu_count() or "?"),
        "usable cores": str(len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity")
        else "?",
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def package_versions(packages: Iterable[str]) -> dict[str, str]:
    """Installed versions of the given distributions ("not installed" when absent)."""
    versions = {}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def environment_markdown(packages: Iterable[str]) -> str:
    """Machine facts and package versions as a markdown bullet list."""
    info = machine_info()
    versions = package_versions(packages)
    lines = [f"- {key}: {value}" for key, value in info.items()]
    lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- statistics


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def geomean(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


# ---------------------------------------------------------------------------- formatting


def fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    ms = seconds * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.2f}"


def fmt_ratio(ratio: float | None) -> str:
    return MISSING if ratio is None else f"{ratio:.2f}×"


def fmt_mb(size: int | None) -> str:
    return MISSING if size is None else f"{size / 2**20:,.0f}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
                   right_align_from: int = 1) -> str:
    """A GitHub markdown table; columns from ``right_align_from`` on are right-aligned."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if i >= right_align_from else c.ljust(w)
                  for i, (c, w) in enumerate(zip(cells, widths))]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * (w - 1) + ":" if i >= right_align_from else "-" * w
            for i, w in enumerate(widths)]
    return "\n".join([line(headers), "| " + " | ".join(rule) + " |", *map(line, rows)])


def write_report(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n")


# ---------------------------------------------------------------------------- parent side


class WorkerError(Exception):
    """The worker died, or could not start."""


class WorkerTimeout(WorkerError):
    """The worker did not answer in time and was killed."""


class QueryFailed(Exception):
    """The engine raised an error for this request; the worker is still usable."""


class Worker:
    """One engine's worker process, spoken to with JSON lines.

    Its stderr goes to a log file whose tail is quoted when the worker dies.
    """

    def __init__(self, argv: Sequence[str], name: str):
        self.name = name
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (lives as long as the worker)
            prefix=f"bench-{name}-", suffix=".log", delete=False)
        self._process = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            start_new_session=True,  # its own process group: a timeout kills it and its children
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    def call(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``message``, return the reply; raise QueryFailed, WorkerTimeout, WorkerError."""
        if self._process.poll() is not None:
            raise WorkerError(f"{self.name} worker has exited: {self.log_tail()}")
        try:
            self._process.stdin.write((json.dumps(message) + "\n").encode())
            self._process.stdin.flush()
        except BrokenPipeError as error:
            raise WorkerError(f"{self.name} worker has exited: {self.log_tail()}") from error
        deadline = time.monotonic() + timeout
        stdout = self._process.stdout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerTimeout(f"{self.name}: no answer within {timeout:.0f} s")
            ready, _, _ = select.select([stdout], [], [], min(remaining, 1.0))
            if ready:
                break
        line = stdout.readline()
        if not line:
            code = self._process.wait()
            raise WorkerError(f"{self.name} worker exited with code {code}: {self.log_tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise QueryFailed(reply["error"])
        return reply

    def close(self, timeout: float = 30.0) -> None:
        """Ask the worker to exit; kill it if it does not."""
        if self._process.poll() is None:
            try:
                self._process.stdin.write(b'{"cmd": "exit"}\n')
                self._process.stdin.flush()
                self._process.wait(timeout)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.kill()
        self._cleanup()

    def kill(self) -> None:
        if self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._process.wait()

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = Path(self._log.name).read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def _cleanup(self) -> None:
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self._cleanup()


# ---------------------------------------------------------------------------- worker side


def serve(handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    """Worker main loop: answer JSON-line requests on stdin until ``{"cmd": "exit"}``."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything an engine prints goes to the log, not into the protocol
    sys.stdout = sys.stderr
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("cmd") == "exit":
            break
        try:
            reply = handlers[message["cmd"]](message)
        except Exception as error:  # noqa: BLE001 (reported to the parent, which records it)
            text = " ".join(str(error).split())
            reply = {"error": f"{type(error).__name__}: {text}"[:500]}
        protocol.write(json.dumps(reply) + "\n")
    protocol.close()


class PeakRss:
    """Peak resident memory of this process while the ``with`` block runs.

    Exact on Linux: the high-water mark (VmHWM) is reset through /proc/self/clear_refs
    before the block and read after it. Elsewhere a thread samples the RSS every 5 ms.
    """

    def __init__(self) -> None:
        self.base: int | None = None
        self.peak: int | None = None
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()

    def __enter__(self):
        self.base = _status_bytes("VmRSS")
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self._exact = _status_bytes("VmHWM") is not None
        except OSError:
            self._exact = False
        if not self._exact:
            self.peak = self.base or 0
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._exact:
            self.peak = _status_bytes("VmHWM")
        else:
            self._stop.set()
            self._sampler.join()

    def _sample(self) -> None:
        import psutil

        process = psutil.Process()
        while not self._stop.wait(0.005):
            self.peak = max(self.peak or 0, process.memory_info().rss)


def current_rss() -> int | None:
    """Resident memory of this process now, in bytes (Linux; None elsewhere)."""
    return _status_bytes("VmRSS")


def _status_bytes(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def timed_runs(run: Callable[[], int], repeat: int) -> dict[str, Any]:
    """Call ``run`` (which returns a row count) ``repeat`` times; wall times, CPU times (the
    whole process, every thread: comparable between engines on a loaded machine, where wall
    time mostly measures the neighbours) and peak memory."""
    times, cpu = [], []
    rows = None
    with PeakRss() as memory:
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            rows = run()
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    return {"times": times, "cpu": cpu, "rows": rows, "peak_rss": memory.peak,
            "base_rss": memory.base}


def max_rss() -> int:
    """Peak resident memory of this whole process so far (ru_maxrss), in bytes."""
    import resource

    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
