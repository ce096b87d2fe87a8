"""``herald serve --workers N``: N processes serving one port, on PostgreSQL, kept running.

The port is bound once, here, and each worker (a fork) serves that socket as a whole
``herald serve`` would: its own hub, sessions, streams and webhook worker. They share the work as
separate ``herald serve`` processes on one database already do: the store's claims send each
delivery once, and LISTEN/NOTIFY tells every worker what the others committed. The kernel hands
each new connection to one of them: connections that arrive together are spread unevenly, often
most of them to the worker that wakes first, and a keep-alive connection stays with the worker
that accepted it (measured in docs/scaling.md). A worker that is stuck takes no new connection,
since it does not accept.

The first process manages them: a worker that ends while herald is not stopping (killed, the
OOM killer, a crash) is logged in one line (its pid, and the signal or exit code it ended by)
and a new one is forked on the same socket; the others serve on meanwhile, and the new one
takes its share of the connections. Only a worker that dies again and again as it starts
(``START_FAILURES`` in a row, each within ``STARTING_S`` of its start: a setting or a store it
cannot get past) stops the whole, in one line, with a non-zero exit code.

The workers keep their metrics in files in a directory of the first process's own, so that a
scrape of any one of them counts what all did (``herald.metrics``); a dead worker's counts stay.

SIGTERM is passed on to every worker (each stops gracefully, its webhook stop grace included);
SIGINT from a terminal reaches the whole process group, and the parent passes SIGTERM, so that
a SIGINT sent to it alone stops them too. Once told to stop, it starts no other worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from herald.config import ServeConfig
from herald.errors import HeraldError

Run = Callable[[Coroutine[Any, Any, None]], None]

log = logging.getLogger("herald.workers")

STARTING_S = 10.0
"""A worker that ends within this long of its start is taken as one that could not start."""
START_FAILURES = 3
"""Workers in a row that could not start before herald gives up and stops the whole."""
SHARED_METRICS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""The client library's variable naming where its values are kept in files, one per process
(``herald.metrics`` reads it too); named here without importing the library."""
STOPPING = {signal.SIGTERM, signal.SIGINT}


def serve_in_workers(
    config: ServeConfig, admin_key: str | None, run: Run, before_fork: Callable[[], None]
) -> int:
    """Serve with ``config.workers`` processes until told to stop, or until workers keep
    failing to start; returns the exit code. ``before_fork`` is called once the server is
    imported, before the first worker is forked.

    Raises:
        HeraldError: the port cannot be taken.
    """
    with _shared_metrics() as metrics_dir:
        return _serve_in_workers(config, admin_key, run, before_fork, metrics_dir)


@contextlib.contextmanager
def _shared_metrics() -> Iterator[str]:
    """A directory of its own where every worker keeps its metrics, so that a scrape of any one
    adds them all up (``herald.metrics``), removed at the end. It is named to the client
    library before it is imported (before the server is): the library chooses to keep its
    values in files as it is imported."""
    if "prometheus_client" in sys.modules:
        raise RuntimeError(
            "the metrics library was imported before the workers' shared metrics were set up:"
            " each worker would count for itself"
        )
    directory = tempfile.mkdtemp(prefix="herald-metrics-")
    before = os.environ.get(SHARED_METRICS_VARIABLE)
    os.environ[SHARED_METRICS_VARIABLE] = directory
    try:
        yield directory
    finally:
        if before is None:
            del os.environ[SHARED_METRICS_VARIABLE]
        else:
            os.environ[SHARED_METRICS_VARIABLE] = before
        shutil.rmtree(directory, ignore_errors=True)


def _serve_in_workers(
    config: ServeConfig,
    admin_key: str | None,
    run: Run,
    before_fork: Callable[[], None],
    metrics_dir: str,
) -> int:
    from prometheus_client.multiprocess import mark_process_dead

    from herald.serve import listen, serve

    sock = listen(config.http.host, config.http.port)
    print(
        f"herald: {config.workers} workers on http://{config.http.host}:{sock.getsockname()[1]}",
        flush=True,
    )
    first = os.getpid()
    before_fork()

    def work() -> None:
        _worker(lambda: run(serve(config, admin_key=admin_key, sock=sock)), first)

    def ended(pid: int) -> None:  # its streams are no longer open
        mark_process_dead(pid, metrics_dir)  # type: ignore[no-untyped-call]

    workers = _Workers(work, on_end=ended)
    for _ in range(config.workers):
        workers.start()
    signal.signal(signal.SIGTERM, workers.stop)
    # Ctrl-C in a terminal reaches the workers too; a SIGINT sent to this process alone (a
    # supervisor, kill -INT) must stop them as well, or they outlive it. They are told SIGTERM:
    # one that had the terminal's SIGINT first only goes on stopping gracefully (a second SIGINT
    # would make uvicorn give up waiting for open requests).
    signal.signal(signal.SIGINT, workers.stop)
    try:
        return workers.manage()
    finally:
        sock.close()


def _worker(serve: Callable[[], None], first: int) -> None:
    """The forked worker's life: serve, then end the process with its exit code."""
    code = 0
    try:
        # The first process's handlers are not the worker's (uvicorn sets its own); the
        # signals were held for the fork, and come now.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
        _stop_with(first)
        serve()
    except HeraldError as exc:
        print(f"herald: {exc.message}", file=sys.stderr, flush=True)
        code = 2
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception:
        log.exception("worker %d crashed", os.getpid())
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


@dataclass
class _Workers:
    """The running workers, by pid with the time each started; what forks and keeps them."""

    work: Callable[[], None]
    on_end: Callable[[int], None]
    """Told the pid of each worker that ended."""
    started: dict[int, float] = field(default_factory=dict)
    stopping: bool = False
    failed_starts: int = 0
    status: int = 0

    def start(self) -> None:
        # A signal between the fork and the worker's own handlers would run this process's
        # handler in the worker: they are held until each side is ready.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
        try:
            pid = os.fork()
            if pid == 0:
                self.work()  # never returns: the worker ends its process
            self.started[pid] = time.monotonic()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
        if self.stopping:  # told to stop as it was forked: it must not serve on
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def stop(self, signum: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        """Tell every worker to stop gracefully, and start no other."""
        self.stopping = True
        for pid in list(self.started):
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signal.SIGTERM)

    def manage(self) -> int:
        """Wait for the workers' ends, starting a new one for each that dies, until all have
        ended; returns the exit code."""
        while self.started:
            try:
                pid, wait_status = os.wait()
            except ChildProcessError:
                break
            began = self.started.pop(pid, None)
            if began is None:
                continue  # not a worker (none is started otherwise)
            self.on_end(pid)
            code = os.waitstatus_to_exitcode(wait_status)
            if self.stopping:
                self._stopped(code)
            else:
                self._died(pid, code, time.monotonic() - began)
        return self.status

    def _stopped(self, code: int) -> None:
        if code in (0, -signal.SIGTERM, -signal.SIGINT):
            return  # stopped as asked: uvicorn ends by raising the signal it was stopped by
        if self.status == 0:
            self.status = code if code > 0 else 1

    def _died(self, pid: int, code: int, lived_s: float) -> None:
        cause = _cause(code)
        fields = {"worker": pid, "cause": cause, "lived_s": round(lived_s, 3)}
        if lived_s >= STARTING_S:
            self.failed_starts = 0
        else:
            self.failed_starts += 1
        if self.failed_starts >= START_FAILURES:
            log.error(
                "worker %d ended (%s) %.1f s after its start, %d in a row: herald stops"
                " (see the lines above for why they cannot start)",
                pid, cause, lived_s, self.failed_starts, extra=fields,
            )  # fmt: skip
            self.status = code if code > 0 else 1
            self.stop()
            return
        log.warning(
            "worker %d ended (%s) after %.1f s: starting another", pid, cause, lived_s,
            extra=fields,
        )  # fmt: skip
        self.start()


def _cause(code: int) -> str:
    """What a worker ended by: the signal's name, or its exit code."""
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


PR_SET_PDEATHSIG = 1
"""Linux's prctl option: the signal a process gets when its parent ends."""


def _stop_with(parent: int) -> None:
    """A worker is told SIGTERM when the first process ends, however it ends (killed outright
    too, when it can tell its workers nothing): no worker serves on alone. On Linux only; a
    parent already gone is an end as well."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the prctl: nobody will tell
        os.kill(os.getpid(), signal.SIGTERM)
