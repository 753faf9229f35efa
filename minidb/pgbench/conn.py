"""What every part of ``minidb bench`` needs: the instance to work on, sessions with the
user's settings applied, and a place to write messages.

``open_target(target, settings)`` accepts a data directory or an open ``Instance``:

* a directory is opened through the process's shared registry
  (``minidb.instance.acquire_shared``), so a program that already holds DB-API connections to
  it can run the benchmark too; instance settings among ``settings`` (``shared_buffers``,
  ``io_model`` ...) are given to the instance if this opens it;
* an open Instance is used as it is; an instance setting that differs from its value is an
  error (shared memory is sized already).

Session settings are applied to each session with ``SET name = 'value'`` through its SQL
engine, as a psql user would (so a bad value fails the way SET fails).

A data directory a ``minidb serve`` holds (``minidb.dbapi.served_socket``), or a server named
with ``-h`` / ``-p`` (a ``Served`` target), is benchmarked through the server's socket:
``connect`` then gives each client a session and an engine that are protocol clients
(``minidb.pgwire.client``) with the interface the clients use - ``execute`` (the simple
protocol without parameters, the extended one with them), ``prepare(...).execute``
(a named statement, pgbench's ``-M prepared``), ``xact.state`` / ``xact.in_block`` from
ReadyForQuery's transaction status, ``rollback``, ``close`` - and session settings go in the
start-up packet.  The instance's counters, WAL figures and table sizes are the server's and
are left out of the result.
"""

from __future__ import annotations

import contextlib
import os
import sys

import minidb.errors as errors
from minidb.config import SETTINGS

__all__ = ["BenchError", "open_target", "split_settings", "connect", "Log", "Served"]


class BenchError(Exception):
    """A problem with the benchmark's arguments or its tables: reported as pgbench reports
    its errors, and the command exits with status 1."""


def split_settings(settings: dict | None) -> tuple[dict, dict]:
    """(instance settings, session settings), each validated; unknown names are errors."""
    inst, sess = {}, {}
    for name, value in (settings or {}).items():
        s = SETTINGS.get(str(name).lower())
        if s is None:
            raise BenchError(f'unrecognized configuration parameter "{name}"')
        try:
            parsed = s.parse(value)
        except errors.Error as e:
            raise BenchError(str(e)) from None
        (inst if s.context == "instance" else sess)[s.name] = parsed
    return inst, sess


@contextlib.contextmanager
def open_target(target, settings: dict | None = None, *, create: bool = False):
    """Yield ``(instance, session_settings)`` for a data directory or an open Instance;
    a directory that does not exist is an error unless ``create`` (``-i``)."""
    from minidb.instance import Instance, acquire_shared, release_shared
    inst_settings, sess_settings = split_settings(settings)
    if isinstance(target, Instance):
        for name, want in inst_settings.items():
            have = target.settings.get(name)
            if have != want:
                raise BenchError(f'parameter "{name}" cannot be changed on an open instance '
                                 f"(it is {have})")
        yield target, sess_settings
        return
    if not isinstance(target, Served) and os.path.isdir(str(target)):
        from minidb.dbapi import served_socket
        sock = served_socket(str(target))
        if sock is not None:
            target = Served(path=sock, datadir=str(target))
    if isinstance(target, Served):
        yield target, sess_settings
        return
    if not create and not os.path.isdir(str(target)):
        raise BenchError(f'data directory "{target}" does not exist')
    try:
        inst = acquire_shared(str(target), **inst_settings)
    except errors.Error as e:
        raise BenchError(str(e)) from None
    try:
        yield inst, sess_settings
    finally:
        release_shared(inst)


def _literal(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "'" + str(value).replace("'", "''") + "'"


def connect(inst, session_settings: dict | None = None):
    """A new ``(Session, Engine)`` on ``inst`` with the session settings SET (through a
    server for a ``Served`` target)."""
    if isinstance(inst, Served):
        return inst.connect(session_settings)
    from minidb.session import Session
    from minidb.sql.engine import Engine
    session = Session(inst)
    try:
        engine = Engine(session)
        for name, value in (session_settings or {}).items():
            engine.execute(f"SET {name} = {_literal(value)}")
    except BaseException:
        session.close()
        raise
    return session, engine


class Log:
    """Messages to a stream (the CLI's stderr) or nowhere (the Python API's default)."""

    def __init__(self, stream=None):
        self.stream = stream

    def __call__(self, text: str, end: str = "\n") -> None:
        if self.stream is not None:
            self.stream.write(text + end)
            self.stream.flush()

    @classmethod
    def of(cls, log) -> "Log":
        if isinstance(log, Log):
            return log
        if log is True:
            return cls(sys.stderr)
        return cls(log if log else None)


# -- a server's socket instead of the instance ------------------------------------------------------
class Served:
    """A server to benchmark through its socket: ``path`` (a unix socket) or ``host`` and
    ``port`` (TCP, or a directory holding the socket as libpq reads ``host``)."""

    def __init__(self, *, path: str | None = None, host: str | None = None,
                 port: int | None = None, user: str | None = None,
                 password: str | None = None, datadir: str | None = None):
        port = 5432 if port is None else int(port)
        if path is None and host is not None and (host.startswith("/") or
                                                  host.startswith(".") or os.path.isdir(host)):
            path, datadir = os.path.join(host, f".s.PGSQL.{port}"), datadir or host
        self.path, self.host, self.port = path, host, port
        self.user = user or os.environ.get("PGUSER") or "minidb"
        self.password = password if password is not None else os.environ.get("PGPASSWORD")
        self.datadir = datadir or f"{host}:{port}"

    def connect(self, session_settings: dict | None = None):
        from minidb.pgwire.client import PGClient
        params = {k: ("on" if v is True else "off" if v is False else str(v))
                  for k, v in (session_settings or {}).items()}
        try:
            client = PGClient(path=self.path, host=self.host, port=self.port, user=self.user,
                              password=self.password, params=params)
        except errors.Error as e:
            raise BenchError(f"connection to server failed: {e}") from None
        return _ServedSession(client), _ServedEngine(client)

    # what a run reads from an open instance: the server's, so none here
    def counters(self) -> dict:
        return {}

    def wal_stats(self) -> dict:
        return {}


class _ServedXact:
    __slots__ = ("client",)

    def __init__(self, client):
        self.client = client

    @property
    def state(self) -> str:
        from minidb.txn.xact import FAILED, IDLE, INPROGRESS
        return {"I": IDLE, "E": FAILED}.get(self.client.transaction_status, INPROGRESS)

    @property
    def in_block(self) -> bool:
        return self.client.transaction_status != "I"


class _ServedSession:
    def __init__(self, client):
        self.client = client
        self.xact = _ServedXact(client)

    def rollback(self) -> None:
        if self.client.transaction_status != "I" and not self.client.closed:
            self.client.simple("ROLLBACK")

    def close(self) -> None:
        self.client.close()


def _dollars(sql: str) -> str:
    if "?" not in sql:
        return sql
    from minidb.sql.parser.translate import number_placeholders
    return number_placeholders(sql)[0]


class _ServedEngine:
    def __init__(self, client):
        self.client = client
        self._count = 0

    def execute(self, sql: str, params=None):
        if params is None:          # -M simple: one Query message
            from minidb.pgwire.client import QueryResult
            out = self.client.simple(sql)
            return out[-1] if out else QueryResult()
        return self.client.execute(_dollars(sql), params)

    def prepare(self, sql: str):
        self._count += 1
        name = f"minidb_bench_{self._count}"
        oids = self.client.prepare(name, _dollars(sql))
        client = self.client

        class _Prepared:
            def execute(self, params=()):
                return client.execute_prepared(name, oids, params)
        return _Prepared()
