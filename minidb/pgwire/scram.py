"""SCRAM-SHA-256 authentication, both sides (RFC 5802 and RFC 7677, as PostgreSQL 10+ speaks
it): the password never crosses the wire, and the client checks that the server knows it too.
``ScramExchange`` is the server's side (``minidb.server.backend``), ``ScramClient`` the
client's (``minidb.pgwire.client``).

The exchange, inside protocol messages (Authentication ``R`` with codes 10 / 11 / 12 from the
server, ``p`` messages from the client)::

    S: AuthenticationSASL           mechanisms: "SCRAM-SHA-256"
    C: SASLInitialResponse          "SCRAM-SHA-256", client-first  "n,,n=,r=<client nonce>"
    S: AuthenticationSASLContinue   server-first  "r=<client nonce + server nonce>,s=<salt>,i=<n>"
    C: SASLResponse                 client-final  "c=biws,r=<nonce>,p=<client proof>"
    S: AuthenticationSASLFinal      "v=<server signature>"   (then AuthenticationOk)

With ``SaltedPassword = PBKDF2-HMAC-SHA-256(password, salt, n)``, ``ClientKey =
HMAC(SaltedPassword, "Client Key")``, ``StoredKey = SHA-256(ClientKey)``, ``ServerKey =
HMAC(SaltedPassword, "Server Key")`` and ``AuthMessage`` the client-first (without its
``n,,`` header), the server-first and the client-final (without the proof) joined by commas:
the proof is ``ClientKey XOR HMAC(StoredKey, AuthMessage)``; the server recovers ClientKey from
it and checks its hash against StoredKey, then signs with ``HMAC(ServerKey, AuthMessage)``.

The password file (``minidb serve --password-file``) holds per user either the password or
PostgreSQL's stored form of it, ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``
(what ``pg_authid.rolpassword`` holds; ``verifier()`` makes one), so the file need not
contain passwords.  Channel binding is not offered (no SSL): a client that says it could bind
(``y,,``) is accepted, as PostgreSQL accepts it without SSL.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

__all__ = ["Verifier", "verifier", "ScramExchange", "ScramClient", "ScramError", "ITERATIONS"]

ITERATIONS = 4096           # PostgreSQL's scram_iterations default
MECHANISM = "SCRAM-SHA-256"


class ScramError(Exception):
    """The client's messages are malformed or its proof is wrong."""


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


class Verifier:
    """What the server keeps of a password: salt, iterations, StoredKey and ServerKey."""

    __slots__ = ("salt", "iterations", "stored_key", "server_key")

    def __init__(self, salt: bytes, iterations: int, stored_key: bytes, server_key: bytes):
        self.salt, self.iterations = salt, iterations
        self.stored_key, self.server_key = stored_key, server_key

    @classmethod
    def from_password(cls, password: str, salt: bytes | None = None,
                      iterations: int = ITERATIONS) -> "Verifier":
        salt = salt or secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
        client_key = _hmac(salted, b"Client Key")
        return cls(salt, iterations, hashlib.sha256(client_key).digest(),
                   _hmac(salted, b"Server Key"))

    @classmethod
    def parse(cls, text: str) -> "Verifier | None":
        """PostgreSQL's stored form, or None when ``text`` is not one."""
        if not text.startswith(MECHANISM + "$"):
            return None
        try:
            head, keys = text[len(MECHANISM) + 1:].split("$")
            iters, salt = head.split(":")
            stored, server = keys.split(":")
            return cls(base64.b64decode(salt), int(iters), base64.b64decode(stored),
                       base64.b64decode(server))
        except ValueError:
            return None

    def text(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"{MECHANISM}${self.iterations}:{b64(self.salt)}$"
                f"{b64(self.stored_key)}:{b64(self.server_key)}")


def verifier(password: str) -> str:
    """The stored form of ``password`` for a password file."""
    return Verifier.from_password(password).text()


def _attrs(msg: str) -> dict[str, str]:
    out = {}
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f'malformed SCRAM message "{msg}"')
        out[part[0]] = part[2:]
    return out


class ScramExchange:
    """One authentication: ``first(client_first) -> server_first``, then
    ``final(client_final) -> server_final`` (ScramError when the proof is wrong)."""

    def __init__(self, stored: Verifier):
        self.v = stored
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""

    def first(self, client_first: str, server_nonce: str | None = None) -> str:
        """``server_nonce``: for tests (RFC 7677's example); random otherwise."""
        if not client_first[:2] in ("n,", "y,"):
            raise ScramError("channel binding is not supported (SSL is off)")
        parts = client_first.split(",", 2)
        if len(parts) != 3 or parts[1] != "":
            raise ScramError("malformed SCRAM client-first-message")
        self._gs2 = parts[0] + "," + parts[1] + ","
        self._client_first_bare = parts[2]
        a = _attrs(parts[2])
        cnonce = a.get("r")
        if not cnonce:
            raise ScramError("SCRAM client-first-message without a nonce")
        self._nonce = cnonce + (server_nonce or base64.b64encode(secrets.token_bytes(18)).decode())
        self._server_first = (f"r={self._nonce},s={base64.b64encode(self.v.salt).decode()},"
                              f"i={self.v.iterations}")
        return self._server_first

    def final(self, client_final: str) -> str:
        without_proof, sep, proof_part = client_final.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final-message without a proof")
        a = _attrs(without_proof)
        if a.get("r") != self._nonce:
            raise ScramError("SCRAM nonce mismatch")
        if a.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise ScramError("SCRAM channel binding does not match")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("malformed SCRAM proof") from None
        auth = ",".join((self._client_first_bare, self._server_first, without_proof)).encode()
        signature = _hmac(self.v.stored_key, auth)
        if len(proof) != len(signature):
            raise ScramError("SCRAM proof of the wrong length")
        client_key = bytes(x ^ y for x, y in zip(proof, signature))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self.v.stored_key):
            raise ScramError("wrong password")
        return "v=" + base64.b64encode(_hmac(self.v.server_key, auth)).decode()


class ScramClient:
    """The client's side of one authentication: ``first() -> client_first``, then
    ``final(server_first) -> client_final``, then ``verify(server_final)`` (ScramError when
    the server's signature is wrong: it does not know the password)."""

    def __init__(self, password: str, user: str = "", client_nonce: str | None = None):
        """``user`` is empty as libpq sends it (PostgreSQL takes the start-up packet's);
        ``client_nonce``: for tests (RFC 7677's example); random otherwise."""
        self._password = password
        self._cnonce = client_nonce or base64.b64encode(secrets.token_bytes(18)).decode()
        name = user.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={self._cnonce}"
        self._server_key = b""
        self._auth = b""

    def first(self) -> str:
        return "n,," + self._client_first_bare

    def final(self, server_first: str) -> str:
        a = _attrs(server_first)
        nonce, salt, iters = a.get("r", ""), a.get("s"), a.get("i")
        if not nonce.startswith(self._cnonce) or salt is None or iters is None:
            raise ScramError(f'malformed SCRAM server-first-message "{server_first}"')
        try:
            salt_b, n = base64.b64decode(salt, validate=True), int(iters)
        except ValueError:
            raise ScramError("malformed SCRAM salt or iteration count") from None
        salted = hashlib.pbkdf2_hmac("sha256", self._password.encode("utf-8"), salt_b, n)
        client_key = _hmac(salted, b"Client Key")
        self._server_key = _hmac(salted, b"Server Key")
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        self._auth = ",".join((self._client_first_bare, server_first, without_proof)).encode()
        signature = _hmac(hashlib.sha256(client_key).digest(), self._auth)
        proof = bytes(x ^ y for x, y in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}"

    def verify(self, server_final: str) -> None:
        a = _attrs(server_final)
        if "e" in a:
            raise ScramError(f"SCRAM authentication failed: {a['e']}")
        expected = base64.b64encode(_hmac(self._server_key, self._auth)).decode()
        if not hmac.compare_digest(a.get("v", ""), expected):
            raise ScramError("the server's SCRAM signature is wrong (it does not know the "
                             "password)")
