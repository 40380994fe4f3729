"""Database servers (PostgreSQL, MySQL) as study storages: reached at load
in a few seconds, and their passwords never printed.

A server that is down, refuses, cannot be resolved, or accepts connections
and never answers is found by the settings check before any GPU work, with
one line naming its host (``server_problem``). The check speaks only the
first bytes of the server's protocol (PostgreSQL's SSLRequest, MySQL's
greeting), so it needs no driver, no credentials and no timeout of a driver.

A password in a storage URL never reaches a command line, where Snakemake's
error report and ``.snakemake/log`` would print it: the stages are handed the
URL with its password hidden (``public``), and the password travels in the
environment variable ``TUNER_STORAGE_PASSWORDS`` (``export_passwords``), where
``with_password`` finds it again. Drivers' own sources of passwords
(PostgreSQL's ``PGPASSWORD`` and ``~/.pgpass``) work as they always do.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from typing import Iterable

# Seconds for each step of reaching a server: resolving its name, connecting,
# its first answer. The tune stage's driver gets the same connect timeout.
CONNECT_TIMEOUT_S = 3.0
PASSWORDS_ENV = "TUNER_STORAGE_PASSWORDS"
HIDDEN = "***"  # what SQLAlchemy prints for a hidden password
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306}
# PostgreSQL's SSLRequest: length 8, code 1234.5679; a server answers one byte, S or N.
_SSL_REQUEST = struct.pack("!ii", 8, 80877103)


def _url(text: str):
    import sqlalchemy

    try:
        return sqlalchemy.engine.make_url(text)
    except Exception:  # noqa: BLE001 - not a URL: a journal path, or a malformed URL storage_problem reports
        return None


def public(text: str | os.PathLike) -> str:
    """``text`` with a URL's password hidden (``postgresql://me:***@host/db``);
    a journal path or a URL without a password as it is."""
    text = os.fspath(text)
    url = _url(text) if "://" in text else None
    if url is None or url.password is None:
        return text
    return url.render_as_string(hide_password=True)


def export_passwords(storages: Iterable[str]) -> None:
    """Put the passwords of ``storages`` in this process's environment, keyed
    by their ``public`` URL, for the stages it starts (``with_password``)."""
    known = _passwords()
    for text in storages:
        url = _url(text) if "://" in text else None
        if url is not None and url.password is not None and url.password != HIDDEN:
            known[public(text)] = url.password
    if known:
        os.environ[PASSWORDS_ENV] = json.dumps(known, sort_keys=True)


def with_password(text: str) -> str:
    """The storage URL to connect with: a ``public`` URL given back its
    password from ``TUNER_STORAGE_PASSWORDS``; anything else as it is.

    Raises:
        ValueError: a hidden password this process was not handed (one line).
    """
    url = _url(text) if "://" in text else None
    if url is None or url.password != HIDDEN:
        return text
    password = _passwords().get(text)
    if password is None:
        raise ValueError(f"storage URL {text}: its password is handed to stages in the environment variable "
                         f"{PASSWORDS_ENV}, which this process lacks; run the stage through snakemake, or give --config")  # fmt: skip
    return url.set(password=password).render_as_string(hide_password=False)


def _passwords() -> dict:
    try:
        known = json.loads(os.environ.get(PASSWORDS_ENV, "{}"))
    except ValueError:
        return {}
    return known if isinstance(known, dict) else {}


def driver_connect_timeout_s() -> int:
    """The connect timeout the stage's driver gets (libpq counts whole
    seconds, and takes 1 as 2)."""
    return max(2, round(CONNECT_TIMEOUT_S))


def server_engine_kwargs(text: str) -> dict:
    """SQLAlchemy engine arguments for a server URL: the driver's connect
    timeout, so the stage's own connections give up rather than hang."""
    url = _url(text) if "://" in text else None
    if url is None or url.get_backend_name() not in _DEFAULT_PORTS:
        return {}
    return {"connect_args": {"connect_timeout": driver_connect_timeout_s()}}


def server_problem(text: str, timeout_s: float | None = None) -> str | None:
    """Why the PostgreSQL or MySQL server of ``text`` cannot be reached, in one
    line naming its host (never the password), or None where it answers (or
    ``text`` names no server over TCP: a file, a Unix socket). Each step waits
    at most ``timeout_s`` (``CONNECT_TIMEOUT_S``)."""
    timeout_s = CONNECT_TIMEOUT_S if timeout_s is None else timeout_s
    url = _url(text) if "://" in text else None
    if url is None or url.get_backend_name() not in _DEFAULT_PORTS or not url.host or url.host.startswith("/"):
        return None
    backend, host = url.get_backend_name(), url.host
    port = url.port or _DEFAULT_PORTS[backend]
    where = f"storage URL {public(text)}: the {backend} server at {host}:{port}"
    addresses, error = _resolve(host, port, timeout_s)
    if error:
        return f"{where} cannot be reached: the host name {host!r} {error}"
    sock, error = None, "has no address"
    for family, kind, proto, _, address in addresses:
        try:
            sock = socket.socket(family, kind, proto)
            sock.settimeout(timeout_s)
            sock.connect(address)
            break
        except TimeoutError:
            error = f"did not accept a connection within {timeout_s:g} s"
        except OSError as exc:
            error = f"refused the connection ({exc.strerror or type(exc).__name__})"
        sock.close()
        sock = None
    if sock is None:
        return f"{where} {error}; check the host, the port and that the server runs"
    with sock:
        try:
            if backend == "postgresql":
                sock.sendall(_SSL_REQUEST)
                answer = sock.recv(1)
                fine = answer in (b"S", b"N", b"E")
            else:  # MySQL speaks first: a packet header, then protocol version 10 (or 0xff, an error packet)
                answer = sock.recv(5)
                fine = len(answer) == 5 and answer[4] in (10, 0xFF)
        except TimeoutError:
            return f"{where} accepted the connection but did not answer within {timeout_s:g} s; is it a {backend} server?"
        except OSError as exc:
            return f"{where} dropped the connection ({exc.strerror or type(exc).__name__}); is it a {backend} server?"
    if not fine:
        return f"{where} answered, but not as a {backend} server (got {answer[:8]!r})"
    return None


def _resolve(host: str, port: int, timeout_s: float) -> tuple[list, str | None]:
    """getaddrinfo, given up after ``timeout_s`` (it has no timeout of its own;
    a DNS server that does not answer would hold the check for a minute)."""
    found: dict = {}

    def look_up() -> None:
        try:
            found["addresses"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            found["error"] = f"does not resolve ({exc.strerror or type(exc).__name__})"

    thread = threading.Thread(target=look_up, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return [], f"did not resolve within {timeout_s:g} s"
    return found.get("addresses", []), found.get("error")
