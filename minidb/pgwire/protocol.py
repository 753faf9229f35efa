"""PostgreSQL's frontend/backend protocol, version 3.0: framing and the messages minidb uses.

Every message after start-up is one type byte, a big-endian int32 length that counts itself
but not the type byte, and the body.  The start-up packet has no type byte: a length, then a
protocol code (3.0 is ``196608``; ``80877103`` asks for SSL, ``80877104`` for GSS
encryption, ``80877102`` is a cancel request carrying a backend's pid and secret key).

Messages (F = from the client, B = from the server; the ones minidb sends or accepts)::

    type  dir  name                  body
    ----  ---  --------------------  -------------------------------------------------------
    Q     F    Query                 sql\\0 (one or more statements)
    P     F    Parse                 name\\0 sql\\0 int16 n, n x int32 parameter type OID
    B     F    Bind                  portal\\0 stmt\\0 int16 nfmt fmt..., int16 n params
                                     (int32 len, bytes; len -1 = NULL), int16 nfmt fmt...
    D     F    Describe              'S' or 'P', name\\0
    E     F    Execute               portal\\0 int32 max rows (0 = all)
    C     F    Close                 'S' or 'P', name\\0
    S     F    Sync                  -
    H     F    Flush                 -
    d     F/B  CopyData              bytes
    c     F/B  CopyDone              -
    f     F    CopyFail              message\\0
    X     F    Terminate             -
    R     B    Authentication        int32 0 (ok), 3 (cleartext password wanted)
    p     F    PasswordMessage       password\\0
    S     B    ParameterStatus       name\\0 value\\0
    K     B    BackendKeyData        int32 pid, int32 secret key
    Z     B    ReadyForQuery         'I' idle, 'T' in a transaction block, 'E' failed block
    T     B    RowDescription        int16 n, n x (name\\0 int32 table OID, int16 column,
                                     int32 type OID, int16 typlen, int32 typmod, int16 fmt)
    D     B    DataRow               int16 n, n x (int32 len, bytes; -1 = NULL)
    C     B    CommandComplete       tag\\0 ("SELECT 3", "INSERT 0 1", "UPDATE 5" ...)
    I     B    EmptyQueryResponse    -
    E     B    ErrorResponse         fields (code byte, text\\0) ... \\0: S severity,
                                     V severity (not localized), C SQLSTATE, M message,
                                     D detail, P position (1-based, in characters)
    N     B    NoticeResponse        as ErrorResponse
    1     B    ParseComplete         -
    2     B    BindComplete          -
    3     B    CloseComplete         -
    t     B    ParameterDescription  int16 n, n x int32 type OID
    n     B    NoData                -
    s     B    PortalSuspended       -
    G     B    CopyInResponse        int8 format, int16 n, n x int16 column format
    H     B    CopyOutResponse       as CopyInResponse

``Wire`` reads whole messages from a socket through one receive buffer and collects replies
in a send buffer that goes out at ``flush()`` - the backend flushes at ReadyForQuery, at
Flush and before it blocks on the client (COPY IN), as PostgreSQL's does, so a pipelined
Parse/Bind/Execute/Sync costs one send.

Limits: a start-up packet may be at most 10,000 bytes and any other message at most
``MAX_MESSAGE`` (1 GB less one byte, PostgreSQL's largest field); a longer length ends the
connection ("invalid message length") before any of the body is read.
"""

from __future__ import annotations

import socket
import struct

__all__ = ["Wire", "ProtocolViolation", "ClientGone", "PROTOCOL_3", "SSL_REQUEST",
           "GSS_REQUEST", "CANCEL_REQUEST", "MAX_MESSAGE", "MAX_STARTUP"]

PROTOCOL_3 = 196608          # 3 << 16
SSL_REQUEST = 80877103       # 1234 << 16 | 5679
GSS_REQUEST = 80877104       # 1234 << 16 | 5680
CANCEL_REQUEST = 80877102    # 1234 << 16 | 5678
MAX_STARTUP = 10_000
MAX_MESSAGE = (1 << 30) - 1

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_HDR = struct.Struct("!ci")


class ProtocolViolation(Exception):
    """The client broke the protocol (08P01): the connection ends after an ErrorResponse."""


class ClientGone(Exception):
    """The client closed the connection (or it broke): the backend ends quietly."""


class Wire:
    """One connection's message framing (see the module docstring)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._rbuf = bytearray()
        self._out: list[bytes] = []

    # -- receiving --------------------------------------------------------------------------------
    def _fill(self, n: int) -> None:
        while len(self._rbuf) < n:
            try:
                chunk = self.sock.recv(max(65536, n - len(self._rbuf)))
            except (ConnectionError, OSError) as e:
                raise ClientGone(str(e)) from None
            if not chunk:
                raise ClientGone("the client closed the connection")
            self._rbuf += chunk

    def _take(self, n: int) -> bytes:
        self._fill(n)
        data = bytes(self._rbuf[:n])
        del self._rbuf[:n]
        return data

    def read_startup(self) -> tuple[int, bytes]:
        """(protocol code, the rest of the packet) of a start-up packet."""
        (length,) = _I32.unpack(self._take(4))
        if length < 8 or length > MAX_STARTUP:
            raise ProtocolViolation(f"invalid length of startup packet: {length}")
        body = self._take(length - 4)
        return _I32.unpack_from(body)[0], body[4:]

    def read_message(self) -> tuple[bytes, bytes]:
        """(type byte, body) of the next message."""
        kind, length = _HDR.unpack(self._take(5))
        if length < 4 or length > MAX_MESSAGE:
            raise ProtocolViolation(f"invalid message length {length} (message type "
                                    f"{kind!r})")
        return kind, self._take(length - 4)

    # -- sending ----------------------------------------------------------------------------------
    def send(self, kind: bytes, body: bytes = b"") -> None:
        self._out.append(_HDR.pack(kind, len(body) + 4) + body)

    def send_raw(self, data: bytes) -> None:
        self._out.append(data)

    def flush(self) -> None:
        if not self._out:
            return
        data = b"".join(self._out)
        self._out.clear()
        try:
            self.sock.sendall(data)
        except (ConnectionError, OSError) as e:
            raise ClientGone(str(e)) from None


# -- reading message bodies --------------------------------------------------------------------------
class Reader:
    """Fields of one message body, in order; a short or malformed body is a ProtocolViolation."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def cstr(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise ProtocolViolation("invalid string in message")
        s = self.data[self.pos:end]
        self.pos = end + 1
        try:
            return s.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolViolation("invalid byte sequence for encoding \"UTF8\"") from None

    def int16(self) -> int:
        if self.pos + 2 > len(self.data):
            raise ProtocolViolation("insufficient data left in message")
        v = _I16.unpack_from(self.data, self.pos)[0]
        self.pos += 2
        return v

    def int32(self) -> int:
        if self.pos + 4 > len(self.data):
            raise ProtocolViolation("insufficient data left in message")
        v = _I32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return v

    def byte(self) -> bytes:
        if self.pos + 1 > len(self.data):
            raise ProtocolViolation("insufficient data left in message")
        b = self.data[self.pos:self.pos + 1]
        self.pos += 1
        return b

    def bytes(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("insufficient data left in message")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolViolation("invalid message format")


def startup_parameters(rest: bytes) -> dict[str, str]:
    """The name/value pairs of a 3.0 start-up packet."""
    r = Reader(rest)
    params: dict[str, str] = {}
    while True:
        name = r.cstr()
        if name == "":
            break
        params[name] = r.cstr()
    return params


# -- building message bodies ------------------------------------------------------------------------
def cstr(s: str) -> bytes:
    return s.encode("utf-8") + b"\0"


def int16(v: int) -> bytes:
    return _I16.pack(v)


def int32(v: int) -> bytes:
    return _I32.pack(v)


def error_fields(severity: str, sqlstate: str, message: str, detail: str | None = None,
                 hint: str | None = None, position: int | None = None) -> bytes:
    parts = [b"S" + cstr(severity), b"V" + cstr(severity), b"C" + cstr(sqlstate),
             b"M" + cstr(message)]
    if detail:
        parts.append(b"D" + cstr(detail))
    if hint:
        parts.append(b"H" + cstr(hint))
    if position:
        parts.append(b"P" + cstr(str(position)))
    parts.append(b"\0")
    return b"".join(parts)


_DATAROW_NULL = _I32.pack(-1)


def data_row(values: list) -> bytes:
    """A DataRow body from already encoded values (bytes, or None for NULL)."""
    out = [_I16.pack(len(values))]
    for v in values:
        if v is None:
            out.append(_DATAROW_NULL)
        else:
            out.append(_I32.pack(len(v)))
            out.append(v)
    return b"".join(out)
