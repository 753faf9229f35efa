"""A blocking client of protocol 3.0: how minidb's own tools talk to ``minidb serve``.

``PGClient`` is one connection, over a unix socket (``path``: the socket file, as
``minidb.server.socket_path`` names it) or TCP (``host`` and ``port``).  It is what the
DB-API's remote connection (``minidb.dbapi``), the REPL and ``minidb bench -h`` use on a data
directory a server holds; it speaks only what PostgreSQL's protocol says, so it also talks to
a PostgreSQL server.

Start-up: the start-up packet (protocol 3.0, ``user``, ``database``, ``client_encoding``
UTF8, and any extra parameters - a minidb session setting by its name, or ``options``), then
the authentication the server asks for: none (trust), cleartext ``password`` (code 3) or
SASL SCRAM-SHA-256 (codes 10 / 11 / 12, ``minidb.pgwire.scram.ScramClient``, which also
checks the server's signature); md5 and the others are refused.  ParameterStatus messages
fill ``parameters``; BackendKeyData gives ``backend_pid`` and ``secret_key`` for ``cancel()``.

Statements:

* ``simple(sql)`` - one Query message, several statements allowed; one ``QueryResult``
  per statement;
* ``execute(sql, params)`` - the extended protocol in one round trip: Parse (unnamed),
  Bind (parameters by ``pgtypes.encode_param``; results in text), Describe portal, Execute,
  Sync;
* ``execute_many(sql, seq)`` - one Parse, then Bind / Describe / Execute per parameter
  sequence, one Sync: the whole batch in one round trip (an error skips the rest, as the
  server discards messages up to Sync);
* ``prepare(name, sql)`` / ``execute_prepared(name, oids, params)`` - a named statement,
  described once for its parameter types, then Bind / Execute / Sync per execution with
  the parameters in text (pgbench's ``-M prepared``);
* COPY: ``copy_data=`` on either call supplies what COPY FROM STDIN reads (CopyData, then
  CopyDone; CopyFail when ``copy_data`` is None); COPY TO STDOUT's CopyData collect in the
  result's ``copy_out``.

Results are decoded from text by each column's type OID (``pgtypes.decode_text``) into the
Python types the embedded DB-API returns.  An ErrorResponse is read to the ReadyForQuery that
follows and then raised as the ``minidb.errors`` class of its SQLSTATE (``error_class``; a
code minidb has no class for gets its PEP 249 class by the code's first two characters), with
``sqlstate``, ``severity``, ``detail``, ``hint`` and ``position`` attributes.
NoticeResponses are kept as ``"SEVERITY:  message"`` strings, as the engine writes its
messages.  ``transaction_status`` is the last ReadyForQuery's: ``I`` idle, ``T`` in a
transaction block, ``E`` in a failed one.

``cancel()`` opens a second connection and sends a CancelRequest with the backend's pid and
key (it may be called from another thread while a statement runs); the statement then ends
with 57014.  A connection the server closes (or a FATAL error) raises OperationalError
and leaves the client closed.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

import minidb.errors as errors
from minidb.pgwire import pgtypes
from minidb.pgwire.protocol import (CANCEL_REQUEST, PROTOCOL_3, ClientGone,
                                    ProtocolViolation, Reader, Wire, cstr, int16, int32)
from minidb.pgwire.scram import MECHANISM, ScramClient, ScramError

__all__ = ["PGClient", "QueryResult", "Column", "error_class", "error_from_fields"]


@dataclass
class Column:
    name: str
    type_oid: int
    typmod: int = -1

    @property
    def type_name(self) -> str:
        return pgtypes.type_name(self.type_oid)


@dataclass
class QueryResult:
    """One statement's outcome: ``columns`` None for a statement without rows."""
    columns: list | None = None
    rows: list = field(default_factory=list)
    status: str = ""
    notices: list = field(default_factory=list)
    copy_out: list = field(default_factory=list)    # COPY TO STDOUT's data, a bytes a row

    @property
    def rowcount(self) -> int:
        """The row count of the command tag (``INSERT 0 5`` -> 5), -1 when it has none."""
        parts = self.status.split()
        if parts and parts[0] in ("INSERT", "UPDATE", "DELETE", "SELECT", "MOVE", "FETCH",
                                  "COPY", "MERGE") and parts[-1].isdigit():
            return int(parts[-1])
        return -1

    @property
    def messages(self) -> list:
        """The notices (as the engine's ``Result.messages``)."""
        return self.notices

    @property
    def description(self) -> list | None:
        """The DB-API description (7-tuples: name, minidb type name, five Nones)."""
        if self.columns is None:
            return None
        return [(c.name, c.type_name, None, None, None, None, None) for c in self.columns]


# -- errors ---------------------------------------------------------------------------------------
_PREFERRED = {"XX000": errors.InternalError, "55006": errors.ObjectInUse,
              "42704": errors.UndefinedObject, "08P01": errors.ProtocolViolationError}
_BY_CLASS = {"22": errors.DataError, "23": errors.IntegrityError, "42": errors.ProgrammingError,
             "0A": errors.NotSupportedError, "XX": errors.InternalError,
             "25": errors.InternalError, "2D": errors.InternalError,
             "26": errors.ProgrammingError, "34": errors.ProgrammingError,
             "3D": errors.ProgrammingError, "3F": errors.ProgrammingError,
             "40": errors.OperationalError, "08": errors.OperationalError,
             "28": errors.OperationalError}


def _classes_by_sqlstate() -> dict:
    out: dict = {}
    for obj in vars(errors).values():
        if (isinstance(obj, type) and issubclass(obj, errors.Error)
                and "sqlstate" in obj.__dict__ and obj is not errors.Error):
            out.setdefault(obj.sqlstate, obj)
    out.update(_PREFERRED)
    return out


_BY_SQLSTATE = _classes_by_sqlstate()


def error_class(sqlstate: str, message: str = "") -> type:
    """The ``minidb.errors`` class for a SQLSTATE (the embedded engine's class for it)."""
    if sqlstate == "42704" and "configuration parameter" in message:
        return errors.UndefinedParameter
    if sqlstate == "55006" and message.startswith("database"):
        return errors.DatabaseInUse
    if sqlstate == "08P01" and message.startswith("bind message supplies"):
        return errors.InvalidParameterCount
    cls = _BY_SQLSTATE.get(sqlstate)
    if cls is None:
        cls = _BY_CLASS.get(sqlstate[:2], errors.OperationalError)
    return cls


def _fields(body: bytes) -> dict:
    out = {}
    r = Reader(body)
    while True:
        code = r.byte()
        if code == b"\0":
            return out
        out[code.decode("ascii", "replace")] = r.cstr()


def error_from_fields(fields: dict) -> errors.Error:
    sqlstate = fields.get("C", "XX000")
    message = fields.get("M", "")
    e = error_class(sqlstate, message)(message, sqlstate=sqlstate)
    e.severity = fields.get("V") or fields.get("S", "ERROR")
    e.detail = fields.get("D")
    e.hint = fields.get("H")
    pos = fields.get("P")
    e.position = int(pos) if pos and pos.isdigit() else None
    return e


def _notice_text(fields: dict) -> str:
    return f"{fields.get('V') or fields.get('S', 'NOTICE')}:  {fields.get('M', '')}"


# -- the connection -------------------------------------------------------------------------------
class PGClient:
    """One protocol 3.0 connection (see the module docstring)."""

    def __init__(self, *, path: str | None = None, host: str | None = None, port: int = 5432,
                 user: str = "minidb", password: str | None = None,
                 database: str = "minidb", params: dict | None = None,
                 timeout: float | None = None):
        self.address = path if path is not None else (host or "127.0.0.1", int(port))
        self.user = user
        self.parameters: dict[str, str] = {}
        self.backend_pid = 0
        self.secret_key = 0
        self.transaction_status = "I"
        self.notices: list[str] = []      # start-up notices
        self.closed = True
        self._param_oids: list[int] = []
        self.sock = self._open(timeout)
        self.wire = Wire(self.sock)
        self.closed = False
        try:
            self._startup(user, password, database, params or {})
        except BaseException:
            self._drop()
            raise

    def _open(self, timeout: float | None) -> socket.socket:
        family = socket.AF_UNIX if isinstance(self.address, str) else socket.AF_INET
        if family == socket.AF_INET and ":" in self.address[0]:
            family = socket.AF_INET6
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.address)
        except OSError as e:
            sock.close()
            where = self.address if isinstance(self.address, str) else "%s:%s" % self.address
            raise errors.OperationalError(f'connection to server at "{where}" failed: '
                                          f"{e.strerror or e}", sqlstate="08001") from None
        sock.settimeout(None)
        if family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    # -- start-up -------------------------------------------------------------------------------
    def _startup(self, user, password, database, params) -> None:
        body = int32(PROTOCOL_3) + cstr("user") + cstr(user) + cstr("database") + cstr(database)
        extra = {"client_encoding": "UTF8", **{k: str(v) for k, v in params.items()}}
        for k, v in extra.items():
            body += cstr(k) + cstr(v)
        body += b"\0"
        self.wire.send_raw(int32(len(body) + 4) + body)
        self._flush()
        scram = None
        while True:
            kind, body = self._read()
            if kind == b"R":
                r = Reader(body)
                code = r.int32()
                if code == 0:
                    continue
                if code == 3:
                    self._need_password(password)
                    self.wire.send(b"p", cstr(password))
                elif code == 10:
                    mechs = []
                    while (m := r.cstr()) != "":
                        mechs.append(m)
                    if MECHANISM not in mechs:
                        raise errors.OperationalError(
                            f"the server offers no SASL mechanism this client has: {mechs}",
                            sqlstate="08004")
                    self._need_password(password)
                    scram = ScramClient(password)
                    first = scram.first().encode()
                    self.wire.send(b"p", cstr(MECHANISM) + int32(len(first)) + first)
                elif code == 11:
                    self.wire.send(b"p", scram.final(body[4:].decode()).encode())
                elif code == 12:
                    try:
                        scram.verify(body[4:].decode())
                    except ScramError as e:
                        raise errors.OperationalError(str(e), sqlstate="28000") from None
                    continue
                else:
                    raise errors.NotSupportedError(
                        f"authentication method {code} is not supported (trust, password "
                        "and SCRAM-SHA-256 are)")
                self._flush()
            elif kind == b"S":
                r = Reader(body)
                name = r.cstr()
                self.parameters[name] = r.cstr()
            elif kind == b"K":
                r = Reader(body)
                self.backend_pid, self.secret_key = r.int32(), r.int32()
            elif kind == b"N":
                self.notices.append(_notice_text(_fields(body)))
            elif kind == b"E":
                raise error_from_fields(_fields(body))
            elif kind == b"Z":
                self.transaction_status = body.decode("ascii")
                return
            else:
                raise errors.ProtocolViolationError(
                    f"unexpected message type {kind!r} during start-up")

    def _need_password(self, password) -> None:
        if password is None:
            raise errors.OperationalError(
                f'password authentication failed for user "{self.user}": the server asks '
                "for a password and none was given", sqlstate="28P01")

    # -- statements -----------------------------------------------------------------------------
    def simple(self, sql: str, copy_data: list | None = None) -> list[QueryResult]:
        """Run ``sql`` (one or more statements) by the simple protocol."""
        self._check_open()
        self.wire.send(b"Q", cstr(sql))
        return self._exchange(copy_data)

    def execute(self, sql: str, params=(), copy_data: list | None = None) -> QueryResult:
        """Run one statement with parameters by the extended protocol."""
        return self.execute_many(sql, [params], copy_data)[-1]

    def execute_many(self, sql: str, seq_of_params, copy_data: list | None = None
                     ) -> list[QueryResult]:
        """One Parse, a Bind / Describe / Execute per parameter sequence, one Sync (a
        parameter sequence whose types differ from the parsed ones is parsed again)."""
        self._check_open()
        send = self.wire.send
        parsed = None     # the parameter types of the statement last parsed
        for params in seq_of_params:
            enc = [pgtypes.encode_param(v) for v in params]
            if parsed is None or len(parsed) != len(enc) or any(
                    d is not None and o != p for (o, _f, d), p in zip(enc, parsed)):
                # Parse again when a value's type differs from the parsed statement's
                parsed = [o for o, _f, _d in enc]
                send(b"P", cstr("") + cstr(sql) + int16(len(parsed))
                     + b"".join(int32(o) for o in parsed))
            parts = [cstr("") + cstr("") + int16(len(enc))]
            parts += [int16(f) for _o, f, _d in enc]
            parts.append(int16(len(enc)))
            for _o, _f, d in enc:
                parts.append(int32(-1) if d is None else int32(len(d)) + d)
            parts.append(int16(0))            # every result column in text
            send(b"B", b"".join(parts))
            send(b"D", b"P" + cstr(""))
            send(b"E", cstr("") + int32(0))
        send(b"S")
        return self._exchange(copy_data)

    def prepare(self, name: str, sql: str) -> list[int]:
        """Parse a named statement and describe it: the parameter type OIDs the server
        inferred (libpq's PQprepare and PQdescribePrepared in one round trip)."""
        self._check_open()
        self.wire.send(b"P", cstr(name) + cstr(sql) + int16(0))
        self.wire.send(b"D", b"S" + cstr(name))
        self.wire.send(b"S")
        self._param_oids = []
        self._exchange(None)
        return list(self._param_oids)

    def execute_prepared(self, name: str, oids: list[int], params=()) -> QueryResult:
        """Bind / Describe / Execute / Sync of a statement ``prepare`` made; the parameters
        go in text, read by the server as the types it inferred (``oids``)."""
        self._check_open()
        parts = [cstr("") + cstr(name) + int16(0) + int16(len(params))]
        for v in params:
            if v is None:
                parts.append(int32(-1))
            else:
                data = pgtypes.encode_text(v)
                parts.append(int32(len(data)) + data)
        parts.append(int16(0))
        self.wire.send(b"B", b"".join(parts))
        self.wire.send(b"D", b"P" + cstr(""))
        self.wire.send(b"E", cstr("") + int32(0))
        self.wire.send(b"S")
        out = self._exchange(None)
        return out[-1] if out else QueryResult()

    def _exchange(self, copy_data) -> list[QueryResult]:
        """Read replies up to ReadyForQuery; the results, or the first error raised."""
        results: list[QueryResult] = []
        cur = QueryResult()
        error = None
        while True:
            kind, body = self._read()
            if kind == b"D":
                cols = cur.columns
                r = Reader(body)
                row = []
                for i in range(r.int16()):
                    n = r.int32()
                    row.append(None if n < 0 else
                               pgtypes.decode_text(r.bytes(n), cols[i].type_oid))
                cur.rows.append(tuple(row))
            elif kind == b"T":
                r = Reader(body)
                cols = []
                for _ in range(r.int16()):
                    name = r.cstr()
                    r.int32(), r.int16()
                    oid = r.int32()
                    r.int16()
                    typmod = r.int32()
                    r.int16()
                    cols.append(Column(name, oid, typmod))
                cur.columns = cols
            elif kind == b"C":
                cur.status = Reader(body).cstr()
                results.append(cur)
                cur = QueryResult()
            elif kind == b"I":
                results.append(cur)
                cur = QueryResult()
            elif kind == b"N":
                cur.notices.append(_notice_text(_fields(body)))
            elif kind == b"E":
                fields = _fields(body)
                e = error_from_fields(fields)
                e.notices = cur.notices
                if fields.get("S") in ("FATAL", "PANIC"):
                    self._drop()
                    raise e
                error = error or e
                cur = QueryResult()
            elif kind == b"Z":
                self.transaction_status = body.decode("ascii")
                if error is not None:
                    raise error
                return results
            elif kind == b"G":           # CopyInResponse: send what COPY reads
                if copy_data is None:
                    self.wire.send(b"f", cstr("no COPY data was given"))
                else:
                    for chunk in copy_data:
                        self.wire.send(b"d", chunk.encode("utf-8") if isinstance(chunk, str)
                                       else bytes(chunk))
                    self.wire.send(b"c")
                self._flush()
            elif kind == b"d":
                cur.copy_out.append(body)
            elif kind == b"S":
                r = Reader(body)
                name = r.cstr()
                self.parameters[name] = r.cstr()
            elif kind == b"t":         # ParameterDescription (``prepare``)
                r = Reader(body)
                self._param_oids = [r.int32() for _ in range(r.int16())]
            elif kind in (b"1", b"2", b"3", b"n", b"s", b"H", b"c", b"A"):
                continue   # ParseComplete ... CopyOutResponse, CopyDone, notifications
            else:
                self._drop()
                raise errors.ProtocolViolationError(f"unexpected message type {kind!r} "
                                                    "from the server")

    # -- cancel and close -----------------------------------------------------------------------
    def cancel(self) -> None:
        """Ask the server to cancel this connection's running statement (a CancelRequest on
        a connection of its own)."""
        if not self.backend_pid:
            return
        s = self._open(10.0)
        try:
            s.sendall(struct.pack("!iiii", 16, CANCEL_REQUEST, self.backend_pid,
                                  self.secret_key))
            s.recv(1)          # the server closes the socket when it has handled it
        except OSError:
            pass
        finally:
            s.close()

    def close(self) -> None:
        """Terminate and close; closing twice is harmless."""
        if self.closed:
            return
        try:
            self.wire.send(b"X")
            self.wire.flush()
        except ClientGone:
            pass
        self._drop()

    def _drop(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass

    def _check_open(self) -> None:
        if self.closed:
            raise errors.InterfaceError("connection already closed")

    def _flush(self) -> None:
        try:
            self.wire.flush()
        except ClientGone:
            self._drop()
            raise errors.OperationalError("server closed the connection unexpectedly",
                                          sqlstate="08006") from None

    def _read(self) -> tuple[bytes, bytes]:
        self._flush()
        try:
            return self.wire.read_message()
        except ClientGone:
            self._drop()
            raise errors.OperationalError("server closed the connection unexpectedly",
                                          sqlstate="08006") from None
        except ProtocolViolation as e:
            self._drop()
            raise errors.ProtocolViolationError(str(e)) from None

    def __enter__(self) -> "PGClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
