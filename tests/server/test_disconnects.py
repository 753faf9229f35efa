"""Clients that go away at the worst moment: mid-COPY FROM STDIN, mid-COPY TO STDOUT and in
the middle of a large result.  Each ends only its own connection: its backend exits, its
transaction is rolled back (its locks released), the server and the other clients go on."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from test_serve_processes import children_of, wait_until  # noqa: E402 - the same helpers

psycopg = pytest.importorskip("psycopg")


def _connect_raw(server) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(server.sock)
    body = struct.pack("!i", 196608) + b"user\0raw\0\0"
    s.sendall(struct.pack("!i", len(body) + 4) + body)
    _read_until(s, b"Z\0\0\0\x05I")
    return s


def _read_until(s: socket.socket, tail: bytes, limit: int = 1 << 20) -> bytes:
    data = b""
    while not data.endswith(tail) and len(data) < limit:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _query(s: socket.socket, sql: str) -> None:
    body = sql.encode() + b"\0"
    s.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)


def _backends(server) -> set[int]:
    """The postmaster's children that are backends (not the background process or monitor)."""
    return children_of(server.proc.pid) - _BASE.get(server.proc.pid, set())


_BASE: dict[int, set[int]] = {}


@pytest.fixture
def served(server):
    _BASE[server.proc.pid] = children_of(server.proc.pid)
    with server.connect(autocommit=True) as c:
        c.execute("CREATE TABLE d (id integer PRIMARY KEY, v text)")
        c.execute("INSERT INTO d SELECT g, 'row ' || g FROM generate_series(1, 20000) g")
    return server


def _gone_and_server_goes_on(server) -> None:
    wait_until(lambda: not _backends(server), "the backend exited")
    with server.connect(autocommit=True) as c:
        c.execute("SET lock_timeout = 60000")
        # no lock left behind: an exclusive lock on the table is granted at once
        c.execute("BEGIN")
        c.execute("LOCK TABLE d IN ACCESS EXCLUSIVE MODE")
        c.execute("COMMIT")
        assert c.execute("SELECT count(*) FROM d").fetchone() == (20000,)


def test_disconnect_mid_copy_in(served):
    s = _connect_raw(served)
    _query(s, "COPY d FROM STDIN")
    assert s.recv(1) == b"G"                         # CopyInResponse
    for i in range(100):
        line = f"{100000 + i}\tnew\n".encode()
        s.sendall(b"d" + struct.pack("!i", len(line) + 4) + line)
    s.close()                                        # no CopyDone: the client is gone
    _gone_and_server_goes_on(served)
    with served.connect() as c:
        assert c.execute("SELECT count(*) FROM d WHERE id >= 100000").fetchone() == (0,)


def test_disconnect_mid_copy_out(served):
    s = _connect_raw(served)
    _query(s, "COPY d TO STDOUT")
    assert s.recv(1) == b"H"                         # CopyOutResponse; the rest unread
    s.close()
    _gone_and_server_goes_on(served)


def test_disconnect_mid_result_in_a_transaction(served):
    s = _connect_raw(served)
    _query(s, "BEGIN; UPDATE d SET v = 'changed' WHERE id = 1")
    _read_until(s, b"Z\0\0\0\x05T")
    # a result far larger than the socket buffers: the backend blocks sending it
    _query(s, "SELECT a.id, a.v, b.v FROM d a, d b WHERE b.id < 50")
    time.sleep(0.2)
    first = s.recv(4096)
    assert first[:1] == b"T"                         # RowDescription, then rows
    s.close()
    _gone_and_server_goes_on(served)
    with served.connect() as c:                      # the update was rolled back
        assert c.execute("SELECT v FROM d WHERE id = 1").fetchone() == ("row 1",)
