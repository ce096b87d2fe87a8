"""``herald serve --workers N``: N processes serving one port, on PostgreSQL.

The port is bound once, here, and each worker (a fork) serves that socket as a whole
``herald serve`` would: its own hub, sessions, streams and webhook worker. They share the work as
separate ``herald serve`` processes on one database already do: the store's claims send each
delivery once, and LISTEN/NOTIFY tells every worker what the others committed. The kernel hands
each new connection to one of them.

The parent only waits: SIGTERM is passed on to every worker (each stops gracefully); SIGINT from
a terminal reaches the whole process group, so it is not passed on a second time. When one worker
ends, the others are stopped too, and the exit code is the first failing worker's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any

from herald.config import ServeConfig
from herald.errors import HeraldError

Run = Callable[[Coroutine[Any, Any, None]], None]


def serve_in_workers(config: ServeConfig, admin_key: str | None, run: Run) -> int:
    """Serve with ``config.workers`` processes until they stop; returns the exit code.

    Raises:
        HeraldError: the port cannot be taken.
    """
    from herald.serve import listen, serve

    sock = listen(config.http.host, config.http.port)
    print(
        f"herald: {config.workers} workers on http://{config.http.host}:{sock.getsockname()[1]}",
        flush=True,
    )
    workers: list[int] = []
    first = os.getpid()
    for _ in range(config.workers):
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                _stop_with(first)
                run(serve(config, admin_key=admin_key, sock=sock))
            except HeraldError as exc:
                print(f"herald: {exc.message}", file=sys.stderr, flush=True)
                code = 2
            except KeyboardInterrupt:
                pass
            os._exit(code)
        workers.append(pid)
    sock.close()  # the workers hold it

    def stop_all(signum: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        for pid in running:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signum)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        # Ctrl-C in a terminal reaches the workers too; a SIGINT sent to this process alone
        # (a supervisor, kill -INT) must stop them as well, or they outlive it. They are told
        # SIGTERM: one that had the terminal's SIGINT first only goes on stopping gracefully
        # (a second SIGINT would make uvicorn give up waiting for open requests).
        stop_all(signal.SIGTERM)

    running = set(workers)
    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGINT, interrupted)
    status = 0
    while running:
        try:
            pid, wait_status = os.wait()
        except ChildProcessError:
            break
        running.discard(pid)
        code = os.waitstatus_to_exitcode(wait_status)
        if code in (-signal.SIGTERM, -signal.SIGINT):
            code = 0  # stopped as asked: uvicorn ends by raising the signal it was stopped by
        if code != 0 and status == 0:
            status = code if code > 0 else 1
        stop_all()  # one ended: the others stop too, gracefully
    return status


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
