"""Authentication: SCRAM-SHA-256 (RFC 7677's worked example, then psycopg over TCP), the
cleartext ``password`` method, and trust on the unix socket."""

from __future__ import annotations

import base64
import socket

import pytest

from minidb.pgwire.scram import ScramError, ScramExchange, Verifier, verifier

psycopg = pytest.importorskip("psycopg")


def test_rfc7677_example():
    # RFC 7677 section 3: user "user", password "pencil"
    v = Verifier.from_password("pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    ex = ScramExchange(v)
    server_first = ex.first("n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                            server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert server_first == ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = ex.final("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    # the same exchange with a wrong proof fails
    ex = ScramExchange(v)
    ex.first("n,,n=user,r=rOprNGfwEbeRWgbNEkqO", server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    with pytest.raises(ScramError):
        ex.final("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                 "p=" + base64.b64encode(b"\0" * 32).decode())
    # the stored form reads back
    assert Verifier.parse(v.text()).stored_key == v.stored_key


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("auth", ["scram-sha-256", "password"])
def test_tcp_clients_authenticate(make_server, tmp_path, auth):
    pwfile = tmp_path / "passwords"
    pwfile.write_text(f"alice:secret\nbob:{verifier('hunter2')}\n")
    port = _free_port()
    srv = make_server(port=port, extra=["--listen", "127.0.0.1", "--password-file", str(pwfile),
                                        "--auth", auth])

    def connect(user, password):
        return psycopg.connect(host="127.0.0.1", port=port, user=user, password=password,
                               dbname="minidb", connect_timeout=60)

    for user, pw in (("alice", "secret"), ("bob", "hunter2")):
        with connect(user, pw) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
    for user, pw in (("alice", "wrong"), ("bob", "secret"), ("nobody", "x")):
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            connect(user, pw)
    # the unix socket trusts its users (only the owner's processes can reach it)
    with srv.connect() as c:
        assert c.execute("SELECT 2").fetchone() == (2,)
