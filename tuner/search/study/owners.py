"""Who holds a claim, and whether it still can: a claim's owner is a process
(``host/pid-namespace:pid:start-time``); on this host it is alive while that
process runs, elsewhere while its heartbeat is fresher than the lease."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from tuner.search.study.claims import Claim, ClaimStore


def _host() -> str:
    # Processes in other pid namespaces (containers) are on "another host":
    # their pids mean nothing here.
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{socket.gethostname()}/{namespace}"


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, so that a
    reused pid is told apart), "?" where /proc is missing and the process
    exists, None where it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "?"
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # exited, not yet reaped by its parent
        return None
    return fields[19]


_OWNER: tuple[int, str] | None = None


def this_owner() -> str:
    """This process as a claim owner: ``host/pid-namespace:pid:start-time``."""
    global _OWNER
    pid = os.getpid()
    if _OWNER is None or _OWNER[0] != pid:  # recomputed in a forked child
        _OWNER = (pid, f"{_host()}:{pid}:{_start_time(pid)}")
    return _OWNER[1]


def owner_alive(claim: Claim, lease_s: float, now: float | None = None) -> bool:
    """Whether the owner of ``claim`` may still be working on it: on this host,
    its process still runs; on another, its last heartbeat is under
    ``lease_s`` seconds old."""
    try:
        host, pid, start = claim.owner.rsplit(":", 2)
        pid_number = int(pid)
    except ValueError:
        host, pid_number, start = "", 0, ""
    if host == _host():
        return _start_time(pid_number) == start
    return (time.time() if now is None else now) - claim.updated <= lease_s


class Heartbeat:
    """Refreshes the lease of the claim being measured (``holding``) every
    ``interval_s``, from one thread for the whole run (nothing where
    ``interval_s`` is None). One thread, not one per trial: a trial takes
    milliseconds, and starting and joining a thread for each cost a tenth of
    a millisecond of the measuring thread's time."""

    def __init__(self, store: ClaimStore, owner: str, interval_s: float | None) -> None:
        self.store, self.owner, self.interval_s = store, owner, interval_s
        self._key: str | None = None
        self._beating = threading.Lock()  # held while a beat is written: none lands after ``holding``
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def holding(self, key: str) -> Iterator[None]:
        """While in this block, ``key``'s lease is refreshed; once it is left,
        no beat for ``key`` is written."""
        if self.interval_s and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="claim-heartbeat", daemon=True)
            self._thread.start()
        self._key = key
        try:
            yield
        finally:
            with self._beating:
                self._key = None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._beating:
                if self._key is None:
                    continue
                try:
                    self.store.beat(self._key, self.owner)
                except Exception:  # noqa: BLE001 - a missed beat only shortens the lease
                    pass
