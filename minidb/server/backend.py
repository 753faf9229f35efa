"""One client connection: a forked backend speaking protocol 3.0 over one session.

The postmaster (``minidb.server.postmaster``) forks this process for an accepted socket; it
inherits the open instance, as ``minidb bench``'s forked clients do, makes its own
``Session`` and ``Engine``, and serves the client until Terminate or the socket closes.

Start-up: the client's start-up packet (an SSL or GSS encryption request is answered ``N``,
and the client goes on in the clear, as with PostgreSQL's ``ssl = off``), then
authentication - ``trust`` on the unix socket; on TCP, SCRAM-SHA-256 (``minidb.pgwire.scram``)
when the server was given a password file (or cleartext ``password`` with ``--auth
password``), else ``trust`` (the server listens where it is told, loopback by intent) - then ParameterStatus for the parameters
drivers read (``server_version``, ``client_encoding`` UTF8, ``DateStyle`` ISO,
``integer_datetimes`` on, ``standard_conforming_strings`` on ...), BackendKeyData and
ReadyForQuery.  A session setting given in the start-up packet (``options=-c name=value``,
or a minidb setting's name as a packet parameter) is SET for the session.

Simple query (``Q``): the text is split into statements; a SELECT sends RowDescription,
DataRows and CommandComplete; an error sends ErrorResponse and skips the rest of the text.
Several statements outside a transaction block run as one implicit transaction, as
PostgreSQL runs them (an error rolls back the ones before it), unless one of them controls
transactions itself (BEGIN, COMMIT, VACUUM ...): then each commits on its own.

Extended query: Parse makes a prepared statement (``Engine.prepare``: parsed once, planned
on first use and cached), Bind a portal with its parameters decoded
(``minidb.pgwire.pgtypes``), Describe of a portal runs it (so its RowDescription comes from
the real result) and Execute sends its rows, ``max rows`` at a time with PortalSuspended
between; Describe of a statement plans it and reports the parameter types the binder
inferred.  After an error, messages up to the next Sync are discarded (PostgreSQL's rule).

COPY FROM STDIN / TO STDOUT go through the engine's ``copy_stream``: CopyInResponse, the
client's CopyData up to CopyDone (CopyFail aborts the statement), or CopyOutResponse and one
CopyData per row.

Errors carry severity, SQLSTATE, message and, for syntax errors, the 1-based position.  A
protocol violation (unknown message type, bad length, malformed body) ends the connection
after an ErrorResponse (08P01); the client disconnecting ends it quietly.  Either way the
session closes, which rolls back an open transaction, and the server goes on.
"""

from __future__ import annotations

import io
import os
import re
import signal

import minidb.errors as errors
from minidb.config import SETTINGS
from minidb.txn.xact import FAILED, IDLE
from minidb.pgwire import pgtypes, scram
from minidb.pgwire.protocol import (CANCEL_REQUEST, GSS_REQUEST, SSL_REQUEST,
                                    ClientGone, ProtocolViolation, Reader, Wire, cstr,
                                    data_row, error_fields, int16, int32, startup_parameters)

__all__ = ["serve_connection", "SERVER_VERSION"]

SERVER_VERSION = "15.0 (minidb)"


class _Terminate(Exception):
    """SIGTERM while idle: end the connection with 57P01."""


class _Prepared:
    __slots__ = ("stmt", "sql", "oids", "is_copy")

    def __init__(self, stmt, sql, oids, is_copy):
        self.stmt, self.sql, self.oids, self.is_copy = stmt, sql, oids, is_copy


class _Portal:
    __slots__ = ("prep", "params", "formats", "result", "pos", "described")

    def __init__(self, prep, params, formats):
        self.prep, self.params, self.formats = prep, params, formats
        self.result = None
        self.pos = 0
        self.described = False


_DEALLOCATE = re.compile(r'\s*deallocate\s+(?:prepare\s+)?("(?:[^"]|"")+"|\w+)\s*;?\s*$',
                         re.IGNORECASE)


_TXN_CONTROL = re.compile(r"\s*(begin|start|commit|end|rollback|abort|savepoint|release|"
                          r"prepare|vacuum)\b", re.IGNORECASE)
_LINE_COL = re.compile(r" \(line \d+, column \d+\)")


def _looks_like_copy(sql: str) -> bool:
    from minidb.sql.parser.lexer import strip_comments
    return strip_comments(sql).lstrip()[:4].lower() == "copy"


class Backend:
    """The protocol loop of one connection (see the module docstring)."""

    def __init__(self, sock, instance, *, key: int, tcp: bool, passwords: dict | None,
                 auth: str = "scram-sha-256"):
        self.wire = Wire(sock)
        self.instance = instance
        self.key = key
        self.tcp = tcp
        self.passwords = passwords
        self.auth = auth
        self.session = None
        self.engine = None
        self.statements: dict[str, _Prepared] = {}
        self.portals: dict[str, _Portal] = {}
        self.skip_to_sync = False
        self.idle = False
        self.terminating = False

    # -- start-up ---------------------------------------------------------------------------------
    def startup(self) -> bool:
        """Run the start-up exchange; False when the connection ends there."""
        while True:
            code, rest = self.wire.read_startup()
            if code in (SSL_REQUEST, GSS_REQUEST):
                self.wire.send_raw(b"N")
                self.wire.flush()
                continue
            break
        if code == CANCEL_REQUEST:
            return False    # the postmaster answers cancel requests before forking
        if code >> 16 != 3:
            self._fatal("0A000", f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
                                 "server supports 3.0 to 3.0")
            return False
        params = startup_parameters(rest)
        user = params.get("user", "")
        if not user:
            self._fatal("28000", "no PostgreSQL user name specified in startup packet")
            return False
        if self.tcp and self.passwords is not None and not self._password(user):
            return False
        from minidb.session import Session
        from minidb.sql.engine import Engine
        try:
            self.session = Session(self.instance)
            self.engine = Engine(self.session)
            for name, value in _session_settings(params).items():
                self.engine.execute(f"SET {name} = '{value.replace(chr(39), chr(39) * 2)}'")
        except errors.Error as e:
            self._fatal(e.sqlstate, str(e))
            return False
        w = self.wire
        w.send(b"R", int32(0))
        status = {"server_version": SERVER_VERSION, "server_encoding": "UTF8",
                  "client_encoding": "UTF8", "DateStyle": "ISO, MDY",
                  "integer_datetimes": "on", "IntervalStyle": "postgres",
                  "TimeZone": "UTC", "standard_conforming_strings": "on",
                  "is_superuser": "on", "session_authorization": user,
                  "application_name": params.get("application_name", "")}
        for name, value in status.items():
            w.send(b"S", cstr(name) + cstr(value))
        w.send(b"K", int32(os.getpid()) + int32(self.key))
        self._ready()
        return True

    def _password(self, user: str) -> bool:
        """Authentication for a TCP client: SCRAM-SHA-256 (``minidb.pgwire.scram``), or the
        cleartext ``password`` method when the server was started with ``--auth password``."""
        stored = self.passwords.get(user)
        if self.auth == "password":
            self.wire.send(b"R", int32(3))      # AuthenticationCleartextPassword
            self.wire.flush()
            given = Reader(self._expect_password_message()).cstr()
            ok = stored is not None and (
                given == stored if scram.Verifier.parse(stored) is None else
                _scram_matches(scram.Verifier.parse(stored), given))
        else:
            ok = self._scram(stored)
        if not ok:
            self._fatal("28P01", f'password authentication failed for user "{user}"')
        return ok

    def _expect_password_message(self) -> bytes:
        kind, body = self.wire.read_message()
        if kind != b"p":
            raise ProtocolViolation(f"expected password response, got message type {kind!r}")
        return body

    def _scram(self, stored: str | None) -> bool:
        w = self.wire
        w.send(b"R", int32(10) + cstr(scram.MECHANISM) + b"\0")     # AuthenticationSASL
        w.flush()
        r = Reader(self._expect_password_message())
        mech = r.cstr()
        n = r.int32()
        client_first = r.bytes(n).decode("utf-8", "replace") if n >= 0 else ""
        if mech != scram.MECHANISM:
            raise ProtocolViolation(f'client selected an invalid SASL authentication '
                                    f'mechanism "{mech}"')
        # an unknown user runs the exchange with a made-up verifier and fails at the proof,
        # so a client cannot tell which user names exist (as PostgreSQL does)
        v = scram.Verifier.parse(stored) if stored is not None else None
        if v is None:
            v = scram.Verifier.from_password(stored if stored is not None
                                             else secrets_token())
        ex = scram.ScramExchange(v)
        try:
            w.send(b"R", int32(11) + ex.first(client_first).encode())   # SASLContinue
            w.flush()
            client_final = self._expect_password_message().decode("utf-8", "replace")
            final = ex.final(client_final)
        except scram.ScramError:
            return False
        if stored is None:
            return False
        w.send(b"R", int32(12) + final.encode())                        # SASLFinal
        return True

    # -- the loop -----------------------------------------------------------------------------------
    def run(self) -> None:
        handlers = {b"Q": self._query, b"P": self._parse, b"B": self._bind,
                    b"D": self._describe, b"E": self._execute, b"C": self._close,
                    b"S": self._sync, b"H": self._flush}
        while True:
            self.idle = True
            if self.terminating:
                raise _Terminate()
            kind, body = self.wire.read_message()
            self.idle = False
            self.instance.cancel_pending = False   # a cancel that came late cancels nothing
            if kind == b"X":
                return
            handler = handlers.get(kind)
            if handler is None:
                if kind in (b"d", b"c", b"f"):
                    continue      # COPY data after the COPY ended: ignored, as PostgreSQL
                raise ProtocolViolation(f"invalid frontend message type {kind[0]}")
            if self.skip_to_sync and kind != b"S":
                continue
            try:
                handler(body)
            except (ProtocolViolation, ClientGone, _Terminate):
                raise
            except Exception as e:  # noqa: BLE001 - a bug answers this message, not the line
                self.wire._out.clear()
                self._error(errors.InternalError(f"internal error: {type(e).__name__}: {e}"))
                if kind == b"Q":
                    self._ready()
                else:
                    self.skip_to_sync = True

    # -- simple query -------------------------------------------------------------------------------
    def _query(self, body: bytes) -> None:
        r = Reader(body)
        text = r.cstr()
        self.portals.pop("", None)
        self.statements.pop("", None)
        stmts, rest = self.engine.split_statements(text)
        if rest:
            stmts.append(rest)
        if not stmts:
            self.wire.send(b"I")
        # several statements outside a block run as one implicit transaction, as PostgreSQL
        # runs them: an error undoes the ones before it (unless they control transactions)
        implicit = (len(stmts) > 1 and self.session.xact.state == IDLE
                    and not any(_TXN_CONTROL.match(x) for x in stmts))
        if implicit:
            self.engine.execute("BEGIN")
        cursor = 0
        for sql in stmts:
            at = text.find(sql, cursor)     # where the statement starts, for error positions
            cursor = at + len(sql) if at >= 0 else cursor
            try:
                if _looks_like_copy(sql) and self._copy(sql, []):
                    continue
                m = _DEALLOCATE.match(sql)
                if m:
                    self._deallocate(m.group(1))
                    continue
                res = self.engine.execute(sql)
            except errors.Error as e:
                self._error(e, max(at, 0))
                break
            self._send_result(res, None, describe=True)
        if implicit:
            failed = self.session.xact.state == FAILED
            try:
                self.engine.execute("ROLLBACK" if failed else "COMMIT")
            except errors.Error as e:       # a commit that fails (serialization, disk)
                self._error(e, 0)
        self._ready()

    def _deallocate(self, name: str) -> None:
        """DEALLOCATE [PREPARE] name | ALL: drivers (psycopg) free the statements they
        prepared through the protocol with it."""
        if name.upper() == "ALL":
            self.statements = {k: v for k, v in self.statements.items() if k == ""}
        else:
            key = name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()
            if self.statements.pop(key, None) is None and self.statements.pop(name, None) is None:
                raise errors.InvalidSqlStatementName(
                    f'prepared statement "{key}" does not exist')
        self.wire.send(b"C", cstr("DEALLOCATE ALL" if name.upper() == "ALL" else "DEALLOCATE"))

    # -- extended query -----------------------------------------------------------------------------
    def _parse(self, body: bytes) -> None:
        r = Reader(body)
        name, sql = r.cstr(), r.cstr()
        oids = [r.int32() for _ in range(r.int16())]
        try:
            if name and name in self.statements:
                raise errors.DuplicatePreparedStatement(
                    f'prepared statement "{name}" already exists')
            stmts, rest = self.engine.split_statements(sql)
            if rest:
                stmts.append(rest)
            if len(stmts) > 1:
                raise errors.SyntaxError_("cannot insert multiple commands into a prepared "
                                          "statement")
            text = stmts[0] if stmts else ""
            is_copy = bool(text) and _looks_like_copy(text)
            stmt = self.engine.prepare(text) if text and not is_copy else None
        except errors.Error as e:
            return self._ext_error(e, sql)
        nparams = stmt.nparams if stmt is not None else 0
        oids = (oids + [0] * nparams)[:max(nparams, len(oids))]
        self.statements[name] = _Prepared(stmt, text, oids, is_copy)
        self.wire.send(b"1")

    def _bind(self, body: bytes) -> None:
        r = Reader(body)
        portal, name = r.cstr(), r.cstr()
        pfmts = [r.int16() for _ in range(r.int16())]
        raw = []
        for _ in range(r.int16()):
            n = r.int32()
            raw.append(None if n == -1 else r.bytes(n))
        rfmts = [r.int16() for _ in range(r.int16())]
        try:
            prep = self.statements.get(name)
            if prep is None:
                raise errors.InvalidSqlStatementName(
                    f'prepared statement "{name}" does not exist')
            need = prep.stmt.nparams if prep.stmt is not None else 0
            if len(raw) != need:
                raise errors.ProtocolViolationError(
                    f'bind message supplies {len(raw)} parameters, but prepared statement '
                    f'"{name}" requires {need}')
            if len(pfmts) not in (0, 1, len(raw)):
                raise errors.ProtocolViolationError(
                    f"bind message has {len(pfmts)} parameter formats but {len(raw)} "
                    "parameters")
            params = []
            for i, data in enumerate(raw):
                fmt = pfmts[0] if len(pfmts) == 1 else (pfmts[i] if pfmts else 0)
                oid = prep.oids[i] if i < len(prep.oids) else 0
                params.append(pgtypes.decode_param(data, oid, fmt == 1))
            if portal and portal in self.portals:
                raise errors.DuplicateCursor(f'portal "{portal}" already exists')
        except errors.Error as e:
            return self._ext_error(e, prep.sql if prep else None)
        self.portals[portal] = _Portal(prep, params, rfmts)
        self.wire.send(b"2")

    def _describe(self, body: bytes) -> None:
        r = Reader(body)
        what, name = r.byte(), r.cstr()
        try:
            if what == b"S":
                prep = self.statements.get(name)
                if prep is None:
                    raise errors.InvalidSqlStatementName(
                        f'prepared statement "{name}" does not exist')
                self._describe_statement(prep)
            elif what == b"P":
                portal = self.portals.get(name)
                if portal is None:
                    raise errors.InvalidCursorName(f'portal "{name}" does not exist')
                self._run_portal(portal)
                res = portal.result
                if res is not None and res.description is not None:
                    self._row_description(res.description, portal.formats)
                else:
                    self.wire.send(b"n")
                portal.described = True
            else:
                raise errors.ProtocolViolationError(
                    f"invalid DESCRIBE message subtype {what[0]}")
        except errors.Error as e:
            self._ext_error(e, None)

    def _describe_statement(self, prep: _Prepared) -> None:
        if prep.stmt is None:
            self.wire.send(b"t", int16(0))
            self.wire.send(b"n")
            return
        ptypes, names, types = self.engine.describe(prep.stmt)
        oids = []
        for i, oid in enumerate(prep.oids):
            if oid == 0 and i in ptypes:
                oid = pgtypes.type_oid(ptypes[i])
            oids.append(oid or 25)
        prep.oids = oids
        self.wire.send(b"t", int16(len(oids)) + b"".join(int32(o) for o in oids))
        if names is None:
            self.wire.send(b"n")
        else:
            self._row_description([(n, t) for n, t in zip(names, types)], None)

    def _execute(self, body: bytes) -> None:
        r = Reader(body)
        name, maxrows = r.cstr(), r.int32()
        portal = self.portals.get(name)
        try:
            if portal is None:
                raise errors.InvalidCursorName(f'portal "{name}" does not exist')
            self._run_portal(portal)
        except errors.Error as e:
            return self._ext_error(e, portal.prep.sql if portal else None)
        res = portal.result
        if res is None:          # an empty statement
            self.wire.send(b"I")
            return
        if res.description is None:
            self._send_result(res, None, describe=False)
            return
        rows = res.rows
        end = len(rows) if maxrows <= 0 else min(len(rows), portal.pos + maxrows)
        self._data_rows(rows[portal.pos:end], res.description, portal.formats)
        portal.pos = end
        if end < len(rows):
            self.wire.send(b"s")
        else:
            self._complete(res)

    def _run_portal(self, portal: _Portal) -> None:
        if portal.result is not None:
            return
        prep = portal.prep
        if prep.is_copy:
            self._copy(prep.sql, portal.params, portal=portal)
            return
        if prep.stmt is None:
            return
        portal.result = prep.stmt.execute(portal.params)

    def _close(self, body: bytes) -> None:
        r = Reader(body)
        what, name = r.byte(), r.cstr()
        if what == b"S":
            self.statements.pop(name, None)
        elif what == b"P":
            self.portals.pop(name, None)
        else:
            return self._ext_error(errors.ProtocolViolationError(
                f"invalid CLOSE message subtype {what[0]}"), None)
        self.wire.send(b"3")

    def _sync(self, body: bytes) -> None:
        self.skip_to_sync = False
        self.portals.pop("", None)
        self._ready()

    def _flush(self, body: bytes) -> None:
        self.wire.flush()

    # -- COPY ---------------------------------------------------------------------------------------
    def _copy(self, sql: str, params: list, portal: _Portal | None = None) -> bool:
        """Run a COPY FROM STDIN / TO STDOUT with the client; False for a COPY of a file
        (the engine runs it as any statement)."""
        from minidb.sql.ast import CopyStmt
        from minidb.sql.parser import parse
        stmt = parse(sql)
        if not isinstance(stmt, CopyStmt) or stmt.path is not None:
            if portal is not None:
                portal.result = self.engine.execute(sql, params)
            return False
        if stmt.columns:
            ncols = len(stmt.columns)
        else:
            try:
                ncols = len(self.session.backend.catalog.table(stmt.table).columns)
            except errors.Error:
                ncols = 0       # the statement reports the missing table
        w = self.wire
        fmt = int16(ncols) + int16(0) * ncols
        if stmt.direction == "from":
            w.send(b"G", b"\0" + fmt)
            w.flush()
            buf = io.StringIO(newline="")
            failed = None
            while True:
                kind, body = w.read_message()
                if kind == b"d":
                    try:
                        buf.write(body.decode("utf-8"))
                    except UnicodeDecodeError:
                        failed = failed or 'invalid byte sequence for encoding "UTF8"'
                elif kind == b"c":
                    break
                elif kind == b"f":
                    failed = "COPY from stdin failed: " + Reader(body).cstr()
                    break
                elif kind in (b"H", b"S"):
                    continue
                else:
                    raise ProtocolViolation(f"unexpected message type 0x{kind[0]:02X} "
                                            "during COPY from stdin")
            if failed:
                raise errors.QueryCanceled(failed)
            self.engine.copy_stream = io.StringIO(buf.getvalue(), newline="")
            try:
                res = self.engine.execute(sql, params)
            finally:
                self.engine.copy_stream = None
        else:
            sink = io.StringIO(newline="")
            self.engine.copy_stream = sink
            try:
                res = self.engine.execute(sql, params)
            finally:
                self.engine.copy_stream = None
            w.send(b"H", b"\0" + fmt)
            for line in sink.getvalue().splitlines(keepends=True):
                w.send(b"d", line.encode("utf-8"))
            w.send(b"c")
        if portal is not None:
            portal.result = res
            return True
        self._complete(res)
        return True

    # -- results ------------------------------------------------------------------------------------
    def _send_result(self, res, formats, describe: bool) -> None:
        for m in res.messages:
            self._notice(m)
        if res.description is not None:
            if describe:
                self._row_description(res.description, formats)
            self._data_rows(res.rows, res.description, formats)
        self._complete(res)

    def _row_description(self, desc, formats) -> None:
        parts = [int16(len(desc))]
        for i, d in enumerate(desc):
            name, tname = d[0], d[1]
            oid, typlen, typmod = pgtypes.column_type(str(tname))
            fmt = _fmt(formats, i)
            parts.append(cstr(str(name)) + int32(0) + int16(0) + int32(oid) + int16(typlen)
                         + int32(typmod) + int16(fmt))
        self.wire.send(b"T", b"".join(parts))

    def _data_rows(self, rows, desc, formats) -> None:
        send = self.wire.send
        oids = [pgtypes.column_type(str(d[1]))[0] for d in desc]
        if (not formats or all(f == 0 for f in formats)) and 700 not in oids:
            enc = pgtypes.encode_text       # the common case: text, no real column
            for row in rows:
                send(b"D", data_row([None if v is None else enc(v) for v in row]))
            return
        encs = [(lambda v, o=o: pgtypes.encode_binary(v, o)) if _fmt(formats, i) == 1
                else (lambda v, o=o: pgtypes.encode_text_as(v, o))
                for i, o in enumerate(oids)]
        for row in rows:
            send(b"D", data_row([None if v is None else encs[i](v)
                                 for i, v in enumerate(row)]))

    def _complete(self, res) -> None:
        tag = res.status or "SELECT 0"
        self.wire.send(b"C", cstr(tag))

    def _notice(self, message) -> None:
        text = str(message)
        severity = "WARNING" if text.startswith("WARNING") else "NOTICE"
        for prefix in ("WARNING:", "NOTICE:", "INFO:"):
            if text.startswith(prefix):
                text = text[len(prefix):].strip()
        self.wire.send(b"N", error_fields(severity, "00000", text))

    def _ready(self) -> None:
        state = self.session.xact.state if self.session is not None else IDLE
        status = b"I" if state == IDLE else b"E" if state == FAILED else b"T"
        self.wire.send(b"Z", status)
        self.wire.flush()

    # -- errors -------------------------------------------------------------------------------------
    def _error(self, e: errors.Error, offset: int | None = 0) -> None:
        """An ErrorResponse; ``offset``: where the failing statement starts in the text the
        client sent (a syntax error's position counts from the start of that text)."""
        msg = str(e)
        position = getattr(e, "position", None)
        if position:    # the client shows the position itself (psql's LINE 1: ... ^)
            msg = _LINE_COL.sub("", msg, count=1)
            position += offset or 0
        self.wire.send(b"E", error_fields("ERROR", getattr(e, "sqlstate", "XX000"), msg,
                                          detail=getattr(e, "detail", None),
                                          hint=getattr(e, "hint", None), position=position))

    def _ext_error(self, e: errors.Error, sql: str | None) -> None:
        self._error(e, 0)
        self.skip_to_sync = True

    def _fatal(self, sqlstate: str, message: str) -> None:
        self.wire.send(b"E", error_fields("FATAL", sqlstate, message))
        try:
            self.wire.flush()
        except ClientGone:
            pass

    def close(self) -> None:
        if self.session is not None:
            try:
                self.session.close()
            except Exception:  # noqa: BLE001 - the connection ends either way
                pass
            self.session = None


def secrets_token() -> str:
    import secrets
    return secrets.token_hex(16)


def _scram_matches(v, password: str) -> bool:
    """A cleartext password against a stored SCRAM verifier."""
    mine = scram.Verifier.from_password(password, v.salt, v.iterations)
    import hmac
    return hmac.compare_digest(mine.stored_key, v.stored_key)


def _fmt(formats, i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else (formats[i] if i < len(formats) else 0)


def _session_settings(params: dict) -> dict:
    """Session settings from the start-up packet: ``options`` (``-c name=value`` ...) and
    packet parameters that name a minidb session setting."""
    out = {}
    for name, value in params.items():
        s = SETTINGS.get(name.lower())
        if s is not None and s.context != "instance":
            out[s.name] = value
    opts = params.get("options", "").split()
    i = 0
    while i < len(opts):
        o = opts[i]
        arg = None
        if o == "-c" and i + 1 < len(opts):
            arg, i = opts[i + 1], i + 1
        elif o.startswith("-c"):
            arg = o[2:]
        elif o.startswith("--"):
            arg = o[2:]
        if arg and "=" in arg:
            k, v = arg.split("=", 1)
            s = SETTINGS.get(k.replace("-", "_").lower())
            if s is not None and s.context != "instance":
                out[s.name] = v
        i += 1
    return out


def serve_connection(sock, instance, *, key: int, tcp: bool = False,
                     passwords: dict | None = None, auth: str = "scram-sha-256") -> int:
    """Serve one accepted connection to its end (in the forked backend); the exit code."""
    b = Backend(sock, instance, key=key, tcp=tcp, passwords=passwords, auth=auth)

    def on_term(signum, frame):
        b.terminating = True
        if b.idle:
            raise _Terminate()

    def on_cancel(signum, frame):
        if not b.idle:     # a CancelRequest: the running statement ends at its next check
            instance.cancel_pending = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_cancel)
    try:
        if b.startup():
            b.run()
        return 0
    except _Terminate:
        try:
            b.wire._out.clear()
            b._fatal("57P01", "terminating connection due to administrator command")
        except ClientGone:
            pass
        return 0
    except ProtocolViolation as e:
        try:
            b._fatal("08P01", str(e))
        except ClientGone:
            pass
        return 0
    except ClientGone:
        return 0
    except errors.Error as e:   # an error outside a statement (57P02, the owner's death ...)
        try:
            b._fatal(e.sqlstate, str(e))
        except ClientGone:
            pass
        return 0
    finally:
        b.close()
