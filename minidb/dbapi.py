"""DB-API 2.0 (PEP 249): ``Connection`` and ``Cursor`` over a session and its SQL engine.

A ``Connection`` is one ``minidb.session.Session`` (one backend slot of the data directory's
shared Instance) plus one ``minidb.sql.engine.Engine``.  ``minidb.connect(path)`` may be
called any number of times in a process, from threads or not: the connections share one
Instance (``minidb.instance.acquire_shared``), which the last one to close closes.

Parameters (``paramstyle = "qmark"``)::

    cur.execute("SELECT * FROM t WHERE a = ? AND b < ?", (1, 2.5))

Parameters are bound by position to the ``?`` marks, as sqlite3 does; they are values, never
SQL text (a string parameter is never parsed).  The engine's prepared statements do the
binding, so ``executemany`` parses and plans its statement once.  A mapping instead of a
sequence, or a bare string, is refused with ProgrammingError (the usual slip
``execute(sql, "abc")`` would otherwise bind three parameters).

``executemany`` of an ``INSERT ... VALUES (?, ...)`` with at least
``BULK_EXECUTEMANY_MIN_ROWS`` parameter sequences is a bulk load
(``minidb.sql.bulkload``): the parameters are converted a column at a time and the rows
inserted as ONE statement through the heap's bulk path - all rows or none, in autocommit
mode too (a driver that executes once per row would commit the rows before a failing one).
Parameters a column cannot take as one type (mixed Python types in a column) fall back to
one execution per row, with the same result.

Values both ways (a parameter is converted to the type its context wants, a result column
comes back as the Python value of its type):

=======================================  ================================================
SQL type                                 Python value
=======================================  ================================================
smallint, integer, bigint                int
real, double precision                   float (a real holds a float32 value)
numeric, numeric(p,s)                    decimal.Decimal (exact; int and float accepted)
boolean                                  bool
char, varchar, text                      str
bytea                                    bytes (bytearray and memoryview accepted)
date                                     datetime.date
time                                     datetime.time
timestamp                                datetime.datetime, naive (an aware one is
                                         converted to the session's TimeZone)
timestamptz                              datetime.datetime, aware, in the session's
                                         TimeZone (a naive one is read in it)
interval                                 minidb.types.Interval, a datetime.timedelta of
                                         months * 30 + days days (any timedelta accepted)
uuid                                     uuid.UUID
=======================================  ================================================

Transactions (the ``autocommit`` attribute, as in psycopg and sqlite3):

==================  ==========================================================================
mode                what happens
==================  ==========================================================================
autocommit False    (the default, as PEP 249 asks) the first statement after connect, commit()
                    or rollback() begins a transaction (``isolation_level``, or the session's
                    ``default_transaction_isolation``); it lasts until commit() or rollback().
                    An error inside it fails it: every later statement raises
                    InFailedSqlTransaction (25P02) until rollback().  commit() of a failed
                    transaction rolls it back and raises InFailedSqlTransaction.
                    Statements BEGIN / START TRANSACTION / COMMIT / END / ROLLBACK / ABORT
                    are passed to the engine without an implicit BEGIN before them.
                    VACUUM cannot run inside a transaction block (25001, as in
                    PostgreSQL): run it in autocommit mode, as psycopg users do.
autocommit True     every statement outside an explicit ``BEGIN`` is its own transaction;
                    ``BEGIN`` ... ``COMMIT`` / ``ROLLBACK`` statements work as in psql.
==================  ==========================================================================

Changing ``autocommit`` or ``isolation_level`` while a transaction is open raises
ProgrammingError (commit or roll back first), as psycopg does.  ``with connect(...) as conn:``
commits when the block succeeds, rolls back when it raises, and closes the connection in
both cases, as psycopg 3 does (sqlite3 leaves the connection open; minidb closes it because
the data directory stays locked while any connection is open).  Closing a connection rolls
back what it had not committed.

Threads (``threadsafety = 1``): threads may share the module, not connections.  Each thread
opens its own connection (each is its own session with its own transaction, so they isolate
one another as PostgreSQL sessions do).  A connection used by two threads *at the same time*
raises ProgrammingError instead of interleaving two threads' statements in one transaction;
handing a connection from one thread to another between calls is fine.

Errors: everything raised is a class of PEP 249's hierarchy (``minidb.errors``) with a
``sqlstate``; an unexpected Python exception inside the engine is reported as InternalError
(XX000) chained to the original.  Any use of a closed connection or cursor raises
InterfaceError.

COPY through the client (psycopg 3's ``cursor.copy()`` is the model)::

    with cur.copy("COPY t (a, b) FROM STDIN") as copy:
        copy.write_row((1, "one"))             # or copy.write("2\ttwo\n") (str or bytes)
    with cur.copy("COPY t TO STDOUT (FORMAT csv)") as copy:
        for row in copy.rows():                # tuples of str, None for NULL
            ...                                # (or: for data in copy: ... bytes, a row each)

Server files (``COPY t FROM '/path'``) need the instance setting ``allow_server_files``
(off by default); STDIN / STDOUT need nothing.  Departure from psycopg: the data is kept in
memory - written data is sent when the ``with`` block ends (an error inside the block sends
nothing), and COPY TO STDOUT runs when the block begins.

Over a server's socket: when ``minidb serve`` holds the data directory, ``connect(path)``
returns a ``RemoteConnection`` (``minidb.pgwire.client``) with the same surface and the same
rules - the implicit BEGIN, the failed-transaction rules, the thread guard, ``?``
parameters, COPY, the exception classes and SQLSTATEs - so a script and a REPL can work on one
directory side by side; ``connect(host=...)`` reaches a server by TCP or by its socket
directory.  ``connection.session`` is not there (the session lives in the server's backend);
``connection.cancel()`` sends a CancelRequest.  See minidb/pgwire/README.md.

Left out: ``callproc``, ``nextset`` (one result set per statement), two-phase commit,
``lastrowid`` (always None: minidb has no rowid), scrollable cursors.
"""

from __future__ import annotations

import datetime
import io
import os
import re
import socket
import threading
import time
from collections.abc import Mapping

import minidb.errors as errors
from minidb.config import SETTINGS
from minidb.errors import InterfaceError, ProgrammingError
from minidb.instance import acquire_shared, release_shared
from minidb.session import Session
from minidb.txn.xact import FAILED, IDLE

DEFAULT_DATADIR = "minidb-data"
# executemany of an INSERT with at least this many rows runs as one bulk statement
BULK_EXECUTEMANY_MIN_ROWS = 2

apilevel = "2.0"
threadsafety = 1
paramstyle = "qmark"

_ISOLATION_LEVELS = {"read committed": "read committed", "repeatable read": "repeatable read",
                     "read uncommitted": "read committed"}  # PostgreSQL's reading of it

# first keyword of a statement, skipping blanks and comments
_FIRST_WORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*([A-Za-z_]+)", re.S)
_TRANSACTION_CONTROL = frozenset({"begin", "start", "commit", "end", "rollback", "abort"})


def _engine_class():
    """The SQL engine (a function, so tests can substitute a fake one)."""
    from minidb.sql.engine import Engine
    return Engine


def connect(path: str | None = None, *, host: str | None = None, port: int | None = None,
            user: str | None = None, password: str | None = None, dbname: str = "minidb",
            **settings) -> "Connection | RemoteConnection":
    """Open a connection to the data directory ``path`` (default ``./minidb-data``, created
    if new).  ``settings`` are minidb settings (``minidb.config``): instance settings
    (``shared_buffers``, ``max_connections``...) apply when this call opens the directory
    for the process and must match the open instance's values otherwise; session settings
    (``lock_timeout``, ``default_transaction_isolation``...) apply to this connection only,
    as ``SET`` would.

    When a ``minidb serve`` holds the directory (``served_socket``), the connection goes
    through the server's unix socket instead (a ``RemoteConnection``: the same DB-API;
    session settings are sent in the start-up packet, instance settings are the server's
    and are not checked).  ``host=`` connects to a server without a data directory: an
    address for TCP (``port``, default 5432; ``user`` and ``password`` for its password
    file), or a directory that holds the server's socket, as libpq reads ``host``."""
    if host is not None:
        if path is not None:
            raise ProgrammingError("give either a data directory or host=, not both")
        _split_settings(settings)
        port = 5432 if port is None else int(port)
        if host.startswith("/") or host.startswith("."):
            return RemoteConnection(_client(path=os.path.join(host, f".s.PGSQL.{port}"),
                                            user=user, password=password, dbname=dbname,
                                            settings=settings), datadir=None)
        return RemoteConnection(_client(host=host, port=port, user=user, password=password,
                                        dbname=dbname, settings=settings), datadir=None)
    datadir = DEFAULT_DATADIR if path is None else path
    sock = served_socket(datadir, port)
    if sock is not None:
        _split_settings(settings)
        return RemoteConnection(_client(path=sock, user=user, password=password,
                                        dbname=dbname, settings=settings),
                                datadir=os.path.abspath(datadir))
    return Connection(datadir, **settings)


def served_socket(datadir: str, port: int | None = None) -> str | None:
    """The unix socket of the live ``minidb serve`` that holds ``datadir``, or None.

    Held means: ``postmaster.pid`` names a live process other than this one, and a socket
    ``DATADIR/.s.PGSQL.<port>`` (``port``, else 5432, else any) accepts a connection.  A
    directory opened embedded by another process has no socket: the embedded open then
    reports it in use, as before."""
    from minidb.instance import LOCK_FILE
    try:
        with open(os.path.join(datadir, LOCK_FILE), encoding="utf-8") as f:
            pid = int(f.readline().strip())
    except (OSError, ValueError):
        return None
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    if port is not None:
        names = [f".s.PGSQL.{port}"]
    else:
        try:
            names = sorted((n for n in os.listdir(datadir) if n.startswith(".s.PGSQL.")),
                           key=lambda n: n != ".s.PGSQL.5432")
        except OSError:
            return None
    for name in names:
        path = os.path.join(datadir, name)
        if len(os.path.abspath(path).encode()) > 107:
            path = os.path.relpath(path)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(5.0)
        try:
            probe.connect(path)
        except OSError:
            continue
        finally:
            probe.close()
        return path
    return None


def _split_settings(settings: dict) -> tuple[dict, dict]:
    instance_settings, session_settings = {}, {}
    for name, value in settings.items():
        s = SETTINGS.get(name.lower())
        if s is None:
            raise errors.UndefinedParameter(f'unrecognized configuration parameter "{name}"')
        (instance_settings if s.context == "instance" else session_settings)[s.name] = value
    return instance_settings, session_settings


def _client(*, path=None, host=None, port=5432, user=None, password=None, dbname="minidb",
            settings=None):
    """A ``PGClient``; session settings go in the start-up packet (the server SETs them)."""
    from minidb.pgwire.client import PGClient
    _inst, session_settings = _split_settings(settings or {})
    params = {k: _setting_text(v) for k, v in session_settings.items()}
    return PGClient(path=path, host=host, port=port, user=user or _user_name(),
                    password=password, database=dbname, params=params)


def _setting_text(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _user_name() -> str:
    import getpass
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in the environment
        return "minidb"


class _ConnectionBase:
    """What the embedded ``Connection`` and the ``RemoteConnection`` share: PEP 249's
    exceptions as attributes, the ``autocommit`` / ``isolation_level`` rules, the context
    manager, closing when collected, the thread guard and the implicit BEGIN of
    non-autocommit mode.  A subclass says whether no transaction is open (``_idle``), how
    to begin one (``_begin``) and how a call holds the connection (``_using``)."""

    # -- PEP 249 exceptions as attributes (optional extension, as sqlite3 and psycopg have) --
    Warning = errors.Warning
    Error = errors.Error
    InterfaceError = errors.InterfaceError
    DatabaseError = errors.DatabaseError
    DataError = errors.DataError
    OperationalError = errors.OperationalError
    IntegrityError = errors.IntegrityError
    InternalError = errors.InternalError
    ProgrammingError = errors.ProgrammingError
    NotSupportedError = errors.NotSupportedError

    _closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def autocommit(self) -> bool:
        return self._autocommit

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self._check_open()
        value = bool(value)
        if value != self._autocommit:
            self._check_no_transaction("autocommit")
        self._autocommit = value

    @property
    def isolation_level(self) -> str | None:
        """Isolation of the transactions the connection begins in non-autocommit mode: None
        (the session's ``default_transaction_isolation``), "READ COMMITTED" or
        "REPEATABLE READ"."""
        return None if self._isolation_level is None else self._isolation_level.upper()

    @isolation_level.setter
    def isolation_level(self, value: str | None) -> None:
        self._check_open()
        level = _isolation(value)
        if level != self._isolation_level:
            self._check_no_transaction("isolation_level")
        self._isolation_level = level

    def execute(self, sql: str, params=None):
        """A new cursor that has executed ``sql`` (sqlite3's and psycopg's shortcut)."""
        return self.cursor().execute(sql, params)

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._closed:
            return
        try:
            if exc_type is None:
                self.commit()
            else:
                self.rollback()
        finally:
            self.close()

    def __del__(self):
        if getattr(self, "_closed", True):
            return
        try:
            self.close()
        except Exception:  # pragma: no cover - at interpreter shutdown, nothing to tell
            pass

    # -- running statements (for the cursors) -------------------------------------------------
    def _run(self, sql: str, fn):
        """``fn()`` under the thread guard, after the implicit BEGIN of non-autocommit mode;
        non-minidb exceptions become InternalError."""
        self._check_open()
        with self._using():
            if not self._autocommit and self._idle() and not _is_transaction_control(sql):
                self._begin(self._isolation_level)
            try:
                return fn()
            except errors.Error:
                raise
            except Exception as e:
                raise errors.InternalError(
                    f"internal error: {type(e).__name__}: {e}") from e

    def _acquire(self) -> None:
        if not self._busy.acquire(blocking=False):
            raise ProgrammingError(
                "this connection is in use by another thread at the same time; minidb "
                "connections are not shared between threads (threadsafety 1): open one "
                "connection per thread")

    def _check_no_transaction(self, what: str) -> None:
        if not self._idle():
            raise ProgrammingError(f"cannot change {what} while a transaction is in "
                                   "progress; commit() or rollback() first")


class Connection(_ConnectionBase):
    """A DB-API connection: one session, one engine (see the module docstring)."""

    def __init__(self, path, **settings):
        instance_settings, session_settings = _split_settings(settings)
        self._instance = acquire_shared(str(path), **instance_settings)
        try:
            self._session = Session(self._instance, **session_settings)
            try:
                self._engine = _engine_class()(self._session)
            except BaseException:
                self._session.close()
                raise
        except BaseException:
            release_shared(self._instance)
            raise
        self._closed = False
        self._autocommit = False
        self._isolation_level: str | None = None
        self._busy = threading.Lock()  # held while a call runs: detects use from two threads
        self.datadir = self._instance.datadir

    # -- state ----------------------------------------------------------------------------------
    @property
    def session(self):
        """The ``minidb.session.Session`` (for inspection tools such as the REPL's ``\\page``;
        not part of DB-API)."""
        self._check_open()
        return self._session

    @property
    def transaction_status(self) -> str:
        """"idle", "in transaction" or "failed" (psql's prompt shows it as ``=``, ``*``,
        ``!``)."""
        self._check_open()
        state = self._session.xact.state
        return "idle" if state == IDLE else "failed" if state == FAILED else "in transaction"

    # -- PEP 249 methods ------------------------------------------------------------------------
    def cursor(self) -> "Cursor":
        self._check_open()
        return Cursor(self)

    def commit(self) -> None:
        """Commit the open transaction (whether the connection or a ``BEGIN`` opened it);
        nothing to do when none is open."""
        self._check_open()
        with self._using():
            xact = self._session.xact
            if xact.state == IDLE:
                return
            if not self._session.commit():  # a FAILED transaction is rolled back instead
                raise errors.InFailedSqlTransaction(
                    "the transaction had failed (a statement in it raised an error); "
                    "it was rolled back, not committed")

    def rollback(self) -> None:
        self._check_open()
        with self._using():
            self._session.rollback()

    def close(self) -> None:
        """Roll back what is not committed and give the backend slot back; closing twice is
        harmless."""
        if self._closed:
            return
        with self._using():
            self._closed = True
            try:
                close = getattr(self._engine, "close", None)
                if close is not None:
                    close()
            finally:
                try:
                    self._session.close()
                finally:
                    release_shared(self._instance)

    # -- what _ConnectionBase asks of it ------------------------------------------------------
    def _idle(self) -> bool:
        return self._session.xact.state == IDLE

    def _begin(self, level) -> None:
        self._session.begin(level)

    def _using(self):
        self._acquire()
        self._instance.enter_call()  # a crash restart waits until the call is over
        return _Release(self._busy, self._instance)

    def _check_open(self) -> None:
        if self._closed:
            raise InterfaceError("connection already closed")


def _isolation(value: str | None) -> str | None:
    """An ``isolation_level`` value as the level's lower-case name (None: the default)."""
    if value is None:
        return None
    key = " ".join(str(value).lower().replace("_", " ").split())
    if key == "serializable":
        raise errors.NotSupportedError(
            "isolation level SERIALIZABLE is not supported (minidb has no SSI); "
            "use REPEATABLE READ, which gives snapshot isolation")
    if key not in _ISOLATION_LEVELS:
        raise ProgrammingError(f"unknown isolation level {value!r} (READ COMMITTED "
                               "or REPEATABLE READ)")
    return _ISOLATION_LEVELS[key]


class _Release:
    __slots__ = ("_lock", "_instance")

    def __init__(self, lock, instance):
        self._lock = lock
        self._instance = instance

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._instance.leave_call()
        self._lock.release()


def _is_transaction_control(sql: str) -> bool:
    m = _FIRST_WORD.match(sql)
    return m is not None and m.group(1).lower() in _TRANSACTION_CONTROL


def _check_params(params) -> tuple:
    if params is None:
        return ()
    if isinstance(params, Mapping):
        raise ProgrammingError('paramstyle is "qmark": pass the parameters as a sequence '
                               "bound to the ? marks in order, not as a mapping")
    if isinstance(params, (str, bytes, bytearray)):
        raise ProgrammingError('parameters must be a sequence such as a tuple or list, '
                               f'not {type(params).__name__} (write ("abc",) for one string)')
    try:
        return tuple(params)
    except TypeError:
        raise ProgrammingError("parameters must be a sequence such as a tuple or list, not "
                               f"{type(params).__name__}") from None


class Cursor:
    """A DB-API cursor: runs statements on its connection and holds the last result."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.arraysize = 1
        self._closed = False
        self._reset()

    def _reset(self) -> None:
        self._rows: list[tuple] | None = None
        self._pos = 0
        self.description = None
        self.rowcount = -1
        self.statusmessage: str | None = None  # the command tag ("INSERT 0 1"), as psycopg
        self.notices: list[str] = []  # NOTICE / WARNING lines of the last statement

    @property
    def lastrowid(self):
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    # -- running --------------------------------------------------------------------------------
    def execute(self, sql: str, params=None) -> "Cursor":
        """Run one statement; ``params`` fill its ``?`` marks in order."""
        self._check_open()
        bound = _check_params(params)
        self._reset()
        engine = self.connection._engine
        result = self.connection._run(sql, lambda: engine.execute(sql, bound))
        self._set_result(result)
        return self

    def executemany(self, sql: str, seq_of_params) -> "Cursor":
        """Run one statement once per parameter sequence, parsed and planned once (a
        prepared statement).  ``rowcount`` is the total of the executions' row counts.
        An INSERT of many rows is one bulk statement instead (see the module docstring)."""
        self._check_open()
        self._reset()
        engine = self.connection._engine
        if not isinstance(seq_of_params, (list, tuple)):
            seq_of_params = list(seq_of_params)
        if len(seq_of_params) >= BULK_EXECUTEMANY_MIN_ROWS and hasattr(engine, "executemany"):
            rows = [_check_params(p) for p in seq_of_params]
            result = self.connection._run(sql, lambda: engine.executemany(sql, rows))
            if result is not None:   # one bulk statement (minidb.sql.bulkload)
                self._set_result(result)
                return self
            seq_of_params = rows
        prepared = self.connection._run(sql, lambda: engine.prepare(sql))
        total, result = 0, None
        for params in seq_of_params:
            bound = _check_params(params)
            result = self.connection._run(sql, lambda: prepared.execute(bound))
            if total >= 0:
                total = total + result.rowcount if result.rowcount >= 0 else -1
        if result is not None:
            self._set_result(result)
        self.rowcount = total
        return self

    def copy(self, statement: str, params=None) -> "Copy":
        """A ``COPY ... FROM STDIN`` or ``COPY ... TO STDOUT`` statement as a context
        manager (see "COPY through the client" in the module docstring)."""
        self._check_open()
        return Copy(self, statement, _check_params(params))

    def _set_result(self, result) -> None:
        self.description = result.description
        self._rows = result.rows if result.description is not None else None
        self._pos = 0
        self.rowcount = result.rowcount
        self.statusmessage = result.status
        self.notices = list(result.messages)

    # -- fetching -------------------------------------------------------------------------------
    def _result_rows(self) -> list[tuple]:
        self._check_open()
        if self._rows is None:
            raise ProgrammingError("no results to fetch (the last statement returned no "
                                   "rows, or nothing was executed)")
        return self._rows

    def fetchone(self) -> tuple | None:
        rows = self._result_rows()
        if self._pos >= len(rows):
            return None
        self._pos += 1
        return rows[self._pos - 1]

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        rows = self._result_rows()
        n = self.arraysize if size is None else size
        if n < 0:
            raise ProgrammingError("fetchmany size must not be negative")
        out = rows[self._pos:self._pos + n]
        self._pos += len(out)
        return out

    def fetchall(self) -> list[tuple]:
        rows = self._result_rows()
        out = rows[self._pos:]
        self._pos = len(rows)
        return out

    def __iter__(self):
        return self

    def __next__(self) -> tuple:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    # -- the rest of PEP 249 -------------------------------------------------------------------
    def setinputsizes(self, sizes) -> None:
        self._check_open()

    def setoutputsize(self, size, column=None) -> None:
        self._check_open()

    def close(self) -> None:
        self._closed = True
        self._rows = None

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise InterfaceError("cursor already closed")
        if self.connection._closed:
            raise InterfaceError("connection already closed")


# -- type objects and constructors (PEP 249) -------------------------------------------------


class Copy:
    """COPY FROM STDIN / TO STDOUT of one cursor (psycopg 3's ``Copy``; made by
    ``Cursor.copy``)."""

    def __init__(self, cursor: Cursor, sql: str, params: tuple):
        from minidb.sql.ast import CopyStmt
        from minidb.sql.parser import parse
        self._cursor, self._sql, self._params = cursor, sql, params
        stmt = cursor.connection._run(sql, lambda: parse(sql))
        if not isinstance(stmt, CopyStmt) or stmt.path is not None:
            raise ProgrammingError("cursor.copy() runs COPY ... FROM STDIN or COPY ... TO "
                                   "STDOUT; use execute() for other statements")
        self._stmt = stmt
        self._in = io.StringIO(newline="")  # FROM: what the client wrote
        self._out: list[str] = []           # TO: the output, one row each
        self._pos = 0
        self._entered = False

    @property
    def direction(self) -> str:
        return self._stmt.direction

    def __enter__(self) -> "Copy":
        self._entered = True
        if self._stmt.direction == "to":
            sink = io.StringIO(newline="")
            self._execute(sink)
            self._out = sink.getvalue().splitlines(keepends=True)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and self._stmt.direction == "from":
            self._execute(io.StringIO(self._in.getvalue(), newline=""))

    def _execute(self, stream) -> None:
        cur = self._cursor
        cur._reset()
        engine = cur.connection._engine

        def run():
            engine.copy_stream = stream
            try:
                return engine.execute(self._sql, self._params)
            finally:
                engine.copy_stream = None
        cur._set_result(cur.connection._run(self._sql, run))

    # -- FROM STDIN ---------------------------------------------------------------------------------
    def write(self, data) -> None:
        """Raw COPY data (str, or bytes in UTF-8), in the statement's format."""
        self._check("from", "write")
        self._in.write(data.decode("utf-8") if isinstance(data, (bytes, bytearray,
                                                                 memoryview)) else data)

    def write_row(self, row) -> None:
        """One row of Python values (None is NULL), formatted as the statement asks."""
        from minidb.sql.copy import format_row
        self._check("from", "write_row")
        st = self._stmt
        self._in.write(format_row(row, st.format, st.delimiter, st.null))

    # -- TO STDOUT ----------------------------------------------------------------------------------
    def read(self) -> bytes:
        """The next row of COPY data (UTF-8 bytes); b"" at the end."""
        self._check("to", "read")
        if self._pos >= len(self._out):
            return b""
        self._pos += 1
        return self._out[self._pos - 1].encode("utf-8")

    def rows(self):
        """The remaining rows as tuples of str (None for NULL)."""
        from minidb.sql.copy import parse_rows
        self._check("to", "rows")
        st = self._stmt
        rest, self._pos = self._out[self._pos:], len(self._out)
        yield from parse_rows("".join(rest), st.format, st.delimiter, st.null)

    def __iter__(self):
        while True:
            data = self.read()
            if not data:
                return
            yield data

    def _check(self, direction: str, what: str) -> None:
        if not self._entered:
            raise ProgrammingError(f"Copy.{what}() outside its with block")
        if self._stmt.direction != direction:
            raise ProgrammingError(
                f"Copy.{what}() is for COPY {'FROM STDIN' if direction == 'from' else 'TO STDOUT'}")


# -- a data directory a server holds: the same DB-API over the protocol ------------------------


class RemoteConnection(_ConnectionBase):
    """A DB-API connection through ``minidb serve``'s socket (``minidb.pgwire.client``):
    ``minidb.connect(path)`` returns one when a server holds ``path``, and
    ``minidb.connect(host=...)`` always.  Same surface and rules as ``Connection`` (see the
    module docstring "Over a server's socket")."""

    def __init__(self, client, datadir: str | None):
        self._client = client
        self._closed = False
        self._autocommit = False
        self._isolation_level: str | None = None
        self._busy = threading.Lock()
        self.datadir = datadir

    @property
    def client(self):
        """The ``minidb.pgwire.client.PGClient`` (server parameters, backend pid, cancel)."""
        return self._client

    @property
    def session(self):
        where = f'"{self.datadir}"' if self.datadir else "the host's data directory"
        raise errors.NotSupportedError(
            f"this needs the data directory open in this process, and {where} is held by "
            f"a server (this connection's backend is its pid {self._client.backend_pid}): "
            "stop the server (minidb serve --stop) and open the directory embedded")

    @property
    def transaction_status(self) -> str:
        self._check_open()
        return {"I": "idle", "E": "failed"}.get(self._client.transaction_status,
                                                 "in transaction")

    def cursor(self) -> "RemoteCursor":
        self._check_open()
        return RemoteCursor(self)

    def commit(self) -> None:
        self._check_open()
        with self._using():
            status = self._client.transaction_status
            if status == "I":
                return
            if status == "E":
                self._client.simple("ROLLBACK")
                raise errors.InFailedSqlTransaction(
                    "the transaction had failed (a statement in it raised an error); "
                    "it was rolled back, not committed")
            self._client.simple("COMMIT")

    def rollback(self) -> None:
        self._check_open()
        with self._using():
            if self._client.transaction_status != "I":
                self._client.simple("ROLLBACK")

    def cancel(self) -> None:
        """Cancel the statement this connection runs (from another thread): it raises
        QueryCanceled (57014)."""
        self._client.cancel()

    def close(self) -> None:
        """Terminate the connection (the server rolls back what is not committed)."""
        if self._closed:
            return
        self._closed = True
        self._client.close()

    # -- what _ConnectionBase asks of it ------------------------------------------------------
    def _idle(self) -> bool:
        return self._client.transaction_status == "I"

    def _begin(self, level) -> None:
        self._client.simple("BEGIN" if level is None else
                            f"BEGIN ISOLATION LEVEL {level.upper()}")

    def _using(self):
        self._acquire()
        return _Unlock(self._busy)

    def _check_open(self) -> None:
        if self._closed or self._client.closed:
            self._closed = True
            raise InterfaceError("connection already closed")


class _Unlock:
    __slots__ = ("_lock",)

    def __init__(self, lock):
        self._lock = lock

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._lock.release()


def _dollar_params(sql: str) -> str:
    """``?`` marks as ``$n`` (the engine's own rewriting), for the server."""
    if "?" not in sql:
        return sql
    from minidb.sql.parser.translate import number_placeholders
    text, nq, nd = number_placeholders(sql)
    if nq and nd > nq:
        raise ProgrammingError("cannot mix ? and $n placeholders")
    return text


class RemoteCursor(Cursor):
    """A cursor of a ``RemoteConnection``: each statement is one round trip of the
    extended protocol (Parse / Bind / Describe / Execute / Sync)."""

    def execute(self, sql: str, params=None) -> "RemoteCursor":
        self._check_open()
        bound = _check_params(params)
        self._reset()
        client = self.connection._client
        text = _dollar_params(sql)
        result = self.connection._run(sql, lambda: client.execute(text, bound))
        self._set_result(result)
        return self

    def executemany(self, sql: str, seq_of_params) -> "RemoteCursor":
        """One Parse, then a Bind / Execute per parameter sequence, in one round trip.  An
        INSERT of several rows in autocommit mode is wrapped in one transaction: all rows
        or none, as the embedded bulk load."""
        self._check_open()
        self._reset()
        conn = self.connection
        client = conn._client
        rows = [_check_params(p) for p in seq_of_params]
        text = _dollar_params(sql)
        m = _FIRST_WORD.match(sql)
        whole = (conn._autocommit and len(rows) >= BULK_EXECUTEMANY_MIN_ROWS
                 and m is not None and m.group(1).lower() == "insert")

        def run():
            if not whole or client.transaction_status != "I":
                return client.execute_many(text, rows)
            client.simple("BEGIN")
            try:
                out = client.execute_many(text, rows)
            except BaseException:
                if not client.closed:
                    client.simple("ROLLBACK")
                raise
            client.simple("COMMIT")
            return out
        results = conn._run(sql, run)
        total = 0
        for r in results:
            if total >= 0:
                total = total + r.rowcount if r.rowcount >= 0 else -1
        if results:
            self._set_result(results[-1])
        self.rowcount = total
        return self

    def copy(self, statement: str, params=None) -> "RemoteCopy":
        self._check_open()
        return RemoteCopy(self, statement, _check_params(params))


class RemoteCopy(Copy):
    """``cursor.copy()`` through the server: COPY ... FROM STDIN / TO STDOUT by the simple
    protocol (CopyData messages), kept in memory as the embedded ``Copy`` keeps it."""

    def _execute(self, stream) -> None:
        cur = self._cursor
        cur._reset()
        if self._params:
            raise errors.NotSupportedError("COPY with parameters is not supported through a "
                                           "server")
        client = cur.connection._client
        if self._stmt.direction == "from":
            data = [stream.getvalue()]
            res = cur.connection._run(self._sql, lambda: client.simple(self._sql, data))[-1]
        else:
            res = cur.connection._run(self._sql, lambda: client.simple(self._sql))[-1]
            stream.write(b"".join(res.copy_out).decode("utf-8"))
        cur._set_result(res)


class DBAPITypeObject:
    """Compares equal to every ``type_code`` (a SQL type name, as ``description`` gives it) of
    its group: ``cursor.description[0][1] == minidb.NUMBER``."""

    def __init__(self, name: str, *sql_types: str):
        self.name = name
        self.values = frozenset(sql_types)

    def __eq__(self, other) -> bool:
        if isinstance(other, DBAPITypeObject):
            return self is other
        if isinstance(other, str):
            return _base_type(other) in self.values
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"<minidb type object {self.name}>"


def _base_type(type_code: str) -> str:
    """'character varying(20)' -> 'character varying'; 'INT4' -> 'int4'."""
    return type_code.split("(", 1)[0].strip().lower()


STRING = DBAPITypeObject("STRING", "text", "varchar", "character varying", "char",
                         "character", "bpchar")
BINARY = DBAPITypeObject("BINARY", "bytea")
NUMBER = DBAPITypeObject("NUMBER", "integer", "int", "int4", "bigint", "int8", "smallint",
                         "int2", "double precision", "float8", "float", "real", "float4",
                         "numeric", "decimal")
DATETIME = DBAPITypeObject("DATETIME", "timestamp", "timestamp without time zone", "date",
                           "time", "time without time zone", "timestamptz",
                           "timestamp with time zone", "interval")
ROWID = DBAPITypeObject("ROWID", "tid")

Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> datetime.date:
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:
    return Timestamp(*time.localtime(ticks)[:6])


__all__ = ["Connection", "Cursor", "RemoteConnection", "RemoteCursor", "connect",
           "served_socket", "apilevel", "threadsafety", "paramstyle",
           "STRING", "BINARY", "NUMBER", "DATETIME", "ROWID", "Date", "Time", "Timestamp",
           "DateFromTicks", "TimeFromTicks", "TimestampFromTicks", "Binary"]
