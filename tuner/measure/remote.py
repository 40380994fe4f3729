"""A stage's GPU work in a measuring process of its own, restarted after a
device fault.

The ``sweep`` and ``tune`` stages choose what to measure and record it (the
sweep's store; the sampler, the study's storage, the claims) in their own
process, which never touches CUDA, and send each configuration to one
measuring process per GPU. Apart, the two never wait for each other's
Python: in one process every return from a GPU wait queued behind the
asking thread, so a trial took about as long as its measurement plus the
next ask, and longer the more workers shared the study.

* ``prefetch(cfg)``: the stage chose ``cfg`` ahead (asked and claimed while
  the one before is measured); the measuring process starts compiling its
  module at once and measures it as soon as the one before is done, while
  the stage records that one;
* ``expect(cfgs)``: configurations the stage will likely choose next; the
  measuring process compiles their modules if a thread is free, and
  measures nothing for them;
* ``measure(cfg)``: its row (prefetching it first if it was not);
* ``close()``: queued configurations are dropped, the process ends, and its
  summary comes back.

The one fault protocol: a ``FatalDeviceError`` in the measuring process (an
illegal address poisons the CUDA context for every later call) ends it and is
raised again in the stage, with the faulting row, as if it had been raised
there; so is a measuring process that dies. The stage records that row, and
``restarting`` starts a fresh measuring process (a fresh context) that goes
on from what is recorded. The rows are the same as measuring in the stage's
process would give.

A refusal (``tuner.errors.Refusal``: a config error, a damaged device.json or
peaks.json, no GPU) that stops the measuring side before it measures is
raised again in the stage as ``Refused``, its one line and exit status, which
the command reports as its own; any other exception there is a bug, and its
traceback goes to the stage's log.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import queue
import sys
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable, TypeVar

from tuner.errors import FatalDeviceError, Refusal, Refused, measure_raised

CLOSE_WAIT_S = 60.0  # for the measurement under way when the stage closes (one takes at most timing.max_time_s)
# Fresh measuring processes started after device faults, per GPU and stage run.
MAX_RESTARTS = 20

T = TypeVar("T")

# What the measuring side provides: measure(cfg) -> row, hurry(cfg) (start
# compiling cfg's module now), summary() -> what ``close`` returns (picklable),
# and optionally expect(cfgs) (configurations likely asked next: compile them
# if a thread is free); entered before the first measurement and left after the last.
Side = contextlib.AbstractContextManager[tuple[Callable[..., Any], ...]]


def serve(conn: Connection, open_side: Callable[..., Side], *args: Any) -> bool:
    """The measuring process's loop: measure what ``conn`` sends, in order,
    and send back each row. Returns False after a device fault (the context
    is unusable: the process should end without tearing it down)."""
    requests: queue.Queue = queue.Queue()
    stopping = threading.Event()

    def read() -> None:  # a thread, so a prefetched module compiles while the one before is measured
        try:
            while (message := conn.recv())[0] in ("measure", "expect"):
                if message[0] == "expect":
                    expect(message[1])
                    continue
                requests.put(message[1])
                hurry(message[1])
        except (EOFError, OSError):
            pass  # the stage is gone
        finally:
            stopping.set()
            requests.put(None)

    with contextlib.ExitStack() as stack:
        try:
            measure, hurry, summary, *more = stack.enter_context(open_side(*args))
            expect = more[0] if more else _nothing
        except BaseException as error:  # noqa: BLE001 - told to the stage, which stops with it
            conn.send(_failure(error))
            return True
        conn.send(("ready",))
        threading.Thread(target=read, name="measure-requests", daemon=True).start()
        while (cfg := requests.get()) is not None and not stopping.is_set():
            try:
                conn.send(("row", measure(cfg)))
            except FatalDeviceError as error:
                conn.send(("fault", str(error), error.row))
                return False
            except Exception as error:  # noqa: BLE001 - a failure of one configuration is data
                conn.send(("row", measure_raised(error)))
    conn.send(("summary", summary()))
    return True


def _nothing(cfgs: list[dict]) -> None:
    pass


def _failure(error: BaseException) -> tuple[str, str, int]:
    """What the stage stops with when the measuring side could not start:
    ``("refused", line, status)`` for a refusal or a ``SystemExit`` with a
    line, raised again in the stage as ``Refused``; ``("failed", "", status)``
    for a ``SystemExit`` with a status alone (the side printed its own lines);
    else ``("failed", traceback, 1)``: a bug."""
    if isinstance(error, Refusal):
        return "refused", " ".join(error.line().split()), error.exit_status
    if isinstance(error, SystemExit):
        code = error.code
        if isinstance(code, str):
            return "refused", f"error: {code.removeprefix('error: ')}", 1
        return "failed", "", int(code or 0)
    return "failed", "".join(traceback.format_exception(error)).rstrip(), 1


def _serve_process(conn: Connection, open_side: Callable[..., Side], *args: Any) -> None:
    try:
        healthy = serve(conn, open_side, *args)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the stage reports it
        return
    sys.stdout.flush()
    sys.stderr.flush()
    if not healthy:
        os._exit(0)  # releasing a poisoned context can abort the process


class MeasuringProcess:
    """The stage's end: ``measure``, ``prefetch``, ``expect`` and ``close`` (see the module).

    ``open_side(*args)`` runs in a fresh process (``spawn``: no CUDA state is
    inherited), so it and its arguments must be importable and picklable;
    ``in_thread`` runs it in a thread of this process instead (tests)."""

    def __init__(self, open_side: Callable[..., Side], *args: Any, in_thread: bool = False) -> None:
        self._conn, theirs = multiprocessing.Pipe()
        if in_thread:
            self._process = threading.Thread(target=serve, args=(theirs, open_side, *args), name="measuring", daemon=True)
        else:
            self._process = multiprocessing.get_context("spawn").Process(
                target=_serve_process, args=(theirs, open_side, *args), name="measuring", daemon=True
            )
        self._process.start()
        if not in_thread:
            theirs.close()  # so that its death reads as end of file here
        self._sent: collections.deque = collections.deque()  # configurations sent, rows not yet read, in order
        self._send_lock = threading.Lock()  # prefetch runs in the asking thread
        self._ended = ""
        self._ready = False

    def wait_ready(self) -> None:
        """Wait until the measuring side has started (its GPU, harness and
        peaks). Where it could not, raise ``Refused`` (its one line and exit
        status) for a refusal, else ``SystemExit`` (a bug's traceback printed)."""
        if not self._ready:
            self._ready = self._receive()[0] == "ready"  # the side's first word

    def prefetch(self, cfg: dict) -> None:
        """Queue ``cfg``; never raises (a gone process is ``measure``'s to report)."""
        with self._send_lock:
            if self._ended:
                return
            try:
                self._conn.send(("measure", dict(cfg)))
            except OSError:
                return  # it is gone: its last words (a fault?) are still to be read, by ``measure``
            self._sent.append(dict(cfg))

    def expect(self, cfgs: list[dict]) -> None:
        """Configurations likely asked next (their modules compiled if a
        thread is free); never raises, as ``prefetch``."""
        with self._send_lock:
            if self._ended:
                return
            with contextlib.suppress(OSError):
                self._conn.send(("expect", [dict(cfg) for cfg in cfgs]))

    def measure(self, cfg: dict) -> dict:
        with self._send_lock:
            sent = cfg in self._sent
        if not sent:
            self.prefetch(cfg)
        while True:
            kind, *rest = self._reply()
            with self._send_lock:
                measured = self._sent.popleft()
            if kind == "fault":
                self._ended = "a device fault"
                raise FatalDeviceError(rest[0], rest[1] if measured == cfg else None)
            if measured == cfg:
                return rest[0]
            # a row of a configuration prefetched and then dropped by the stage: not its to keep

    def _reply(self) -> tuple:
        """The next row or fault."""
        while (reply := self._receive())[0] == "ready":
            self._ready = True
        return reply

    def _receive(self) -> tuple:
        """The next word of the measuring process; where it could not start
        or is gone, raise what the stage stops with."""
        if not self._ended:
            try:
                reply = self._conn.recv()
            except (EOFError, OSError):
                self._ended = "it ended without a word"
                if not self._ready:
                    print("error: the measuring process ended before it started measuring", file=sys.stderr, flush=True)
                    raise SystemExit(1) from None
            else:
                if reply[0] not in ("failed", "refused"):
                    return reply
                self._ended = "it could not start"
                if reply[0] == "refused":
                    raise Refused(reply[1], reply[2])
                if reply[1]:
                    print(f"error: {reply[1]}", file=sys.stderr, flush=True)
                raise SystemExit(reply[2])
        raise FatalDeviceError(f"the measuring process is gone ({self._ended})")

    def close(self) -> Any:
        """Drop what is queued, end the process (after the measurement under
        way, if any); its summary (None if it had none: it failed, faulted or
        died)."""
        summary = None
        with self._send_lock:
            ended, self._ended = self._ended, self._ended or "closed"
        try:
            if not ended:
                self._conn.send(("stop",))
                while self._conn.poll(CLOSE_WAIT_S):
                    kind, *rest = self._conn.recv()
                    if kind == "summary":
                        summary = rest[0]
                        break
                    if kind == "fault":  # in a configuration the stage had dropped: nothing to record it on
                        print(f"error: device fault in a configuration no longer wanted: {rest[0]}", file=sys.stderr, flush=True)
                        break
        except (EOFError, OSError):
            pass  # it is gone
        self._process.join(timeout=CLOSE_WAIT_S)
        if not isinstance(self._process, threading.Thread) and self._process.is_alive():
            self._process.terminate()  # hung: not worth waiting for
            self._process.join()
        self._conn.close()
        return summary

    def __enter__(self) -> "MeasuringProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def restarting(open_side: Callable[..., Side], args: tuple, body: Callable[[MeasuringProcess], T], what: str) -> tuple[T, Any]:
    """``body(measuring)`` with a measuring process on ``open_side(*args)``,
    started and ready; where ``body`` raises ``FatalDeviceError`` (once it has
    recorded the faulting row it carries), a fresh process and ``body`` again,
    which goes on from what is recorded. Returns (what ``body`` returned, the
    last process's summary).

    Raises:
        Refused: the measuring side refused to start (its line and status).
        SystemExit: the measuring side could not start otherwise (its line
            is printed), or ``MAX_RESTARTS`` fresh processes faulted too.
    """
    for restart in range(MAX_RESTARTS + 1):
        measuring = MeasuringProcess(open_side, *args)
        try:
            measuring.wait_ready()
            result = body(measuring)
        except FatalDeviceError as fault:
            measuring.close()
            if restart < MAX_RESTARTS:
                print(f"{what}: device fault recorded ({fault}); starting a fresh process (fresh CUDA context), restart {restart + 1}",
                      file=sys.stderr, flush=True)  # fmt: skip
            continue
        except BaseException:
            measuring.close()
            raise
        return result, measuring.close()
    raise SystemExit(f"error: {what} hit {MAX_RESTARTS + 1} device faults in a row; stopped (what was measured is kept)")
