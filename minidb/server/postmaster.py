"""``minidb serve``: the postmaster's front door - listen, fork a backend per connection.

The server process opens the data directory as its owner (``minidb.instance``: the lock file,
the shared segment, the worker pool, the WAL writer), then listens:

* on a unix socket named as PostgreSQL names it, ``.s.PGSQL.<port>`` in the data directory
  (or in ``--socket-dir``), so ``psql -h DATADIR`` and ``pgbench -h DATADIR`` find it; a path
  longer than the 107 bytes a unix socket address holds is refused with a message that names
  ``--socket-dir``;
* with ``--listen ADDRESS``, also on TCP at that address and the same port (nothing else by
  default; give 127.0.0.1 for loopback).

Each accepted connection gets a forked backend (``minidb.server.backend``) with a random
secret key, which the client learns in BackendKeyData and sends back in a CancelRequest on a
new connection; the postmaster answers that request itself - it signals the backend whose pid
and key match (SIGINT: the backend's statement ends with 57014 at its next check) and closes
the socket, as PostgreSQL does.  At ``max_connections`` backends a new connection gets
FATAL 53300 "sorry, too many clients already".

The accept loop uses ``selectors`` with a self-pipe for signals:

* SIGCHLD: finished backends are reaped (the instance frees a dead process's backend slot);
* SIGTERM - smart shutdown: stop accepting, wait for the clients to disconnect, then close;
* SIGINT - fast shutdown: SIGTERM to every backend (each rolls back, sends FATAL 57P01 and
  exits), wait, close the instance (a checkpoint), exit;
* SIGQUIT - immediate: SIGKILL the backends and exit without a checkpoint (the next start
  recovers from the WAL).

``minidb serve --stop DATADIR [--mode smart|fast|immediate]`` reads the server's pid from
``postmaster.pid`` and sends the matching signal, as ``pg_ctl stop -m``.

Departure: PostgreSQL's postmaster attaches no shared state and forks from a single thread;
minidb's server is the instance's owner, whose WAL writer and reaper run as threads, so it
forks from a process with threads, as ``minidb bench`` does for its clients (the child uses
only its own session; the threads it does not inherit are the owner's).
"""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import socket
import struct
import sys
import time

import minidb.errors as errors

__all__ = ["serve", "stop_server", "socket_path", "SOCKET_MAX"]

SOCKET_MAX = 107            # sun_path holds 108 bytes, one for the terminating NUL
SHUTDOWN_WAIT_S = 60.0


def socket_path(datadir: str, port: int, socket_dir: str | None = None) -> str:
    return os.path.join(os.path.abspath(socket_dir or datadir), f".s.PGSQL.{port}")


class _Server:
    def __init__(self, instance, *, port: int, listen: str | None, socket_dir: str | None,
                 passwords: dict | None, log, auth: str = "scram-sha-256"):
        self.instance = instance
        self.port = port
        self.log = log
        self.passwords = passwords
        self.auth = auth
        self.children: dict[int, int] = {}      # pid -> secret key
        self.max_connections = instance.settings.max_connections
        self.sel = selectors.DefaultSelector()
        self.listeners: list[tuple[socket.socket, bool]] = []
        self.shutdown: str | None = None
        self.sock_path = socket_path(instance.datadir, port, socket_dir)
        if len(self.sock_path.encode()) > SOCKET_MAX:
            raise errors.InvalidParameterValue(
                f'unix socket path "{self.sock_path}" is too long (maximum {SOCKET_MAX} bytes): '
                "give a shorter directory with --socket-dir")
        self._listen_unix()
        if listen:
            self._listen_tcp(listen)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.sel.register(self.wake_r, selectors.EVENT_READ, None)
        self.pending_signals: list[int] = []

    def _listen_unix(self) -> None:
        try:
            os.unlink(self.sock_path)   # a stale socket of a crashed server (we hold the lock)
        except FileNotFoundError:
            pass
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.sock_path)
        os.chmod(self.sock_path, 0o777)
        s.listen(128)
        s.setblocking(False)
        self.listeners.append((s, False))
        self.sel.register(s, selectors.EVENT_READ, False)

    def _listen_tcp(self, address: str) -> None:
        fam = socket.AF_INET6 if ":" in address else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((address, self.port))
        s.listen(128)
        s.setblocking(False)
        self.listeners.append((s, True))
        self.sel.register(s, selectors.EVENT_READ, True)

    # -- signals ----------------------------------------------------------------------------------
    def _on_signal(self, signum, frame) -> None:
        self.pending_signals.append(signum)
        try:
            os.write(self.wake_w, b"x")
        except OSError:
            pass

    def _handle_signals(self) -> None:
        while self.pending_signals:
            sig = self.pending_signals.pop(0)
            if sig == signal.SIGCHLD:
                self._reap()
            elif sig == signal.SIGTERM and self.shutdown is None:
                self.shutdown = "smart"
                self.log("received smart shutdown request")
                self._stop_listening()
            elif sig == signal.SIGINT and self.shutdown in (None, "smart"):
                self.shutdown = "fast"
                self.log("received fast shutdown request")
                self._stop_listening()
                for pid in self.children:
                    _kill(pid, signal.SIGTERM)
            elif sig == signal.SIGQUIT:
                self.shutdown = "immediate"
                self.log("received immediate shutdown request")
                self._stop_listening()
                for pid in self.children:
                    _kill(pid, signal.SIGKILL)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.children.pop(pid, None) is not None:
                if os.WIFSIGNALED(status):
                    self.log(f"server process (PID {pid}) was terminated by signal "
                             f"{os.WTERMSIG(status)}")

    def _stop_listening(self) -> None:
        for s, _tcp in self.listeners:
            try:
                self.sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        self.listeners = []
        try:
            os.unlink(self.sock_path)
        except FileNotFoundError:
            pass

    # -- connections ------------------------------------------------------------------------------
    def _accept(self, lsock: socket.socket, tcp: bool) -> None:
        try:
            conn, _addr = lsock.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn.setblocking(True)
        if tcp:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if _is_cancel(conn, self.children):
            conn.close()
            return
        if len(self.children) >= self.max_connections:
            _refuse(conn, "53300", "sorry, too many clients already")
            return
        key = secrets.randbits(31)
        pid = os.fork()
        if pid == 0:
            self._child(conn, key, tcp)       # never returns
        self.children[pid] = key
        conn.close()

    def _child(self, conn, key: int, tcp: bool) -> None:
        code = 1
        try:
            for s, _ in self.listeners:
                s.close()
            self.sel.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            for sig in (signal.SIGCHLD, signal.SIGQUIT):
                signal.signal(sig, signal.SIG_DFL)
            from minidb.server.backend import serve_connection
            code = serve_connection(conn, self.instance, key=key, tcp=tcp,
                                    passwords=self.passwords, auth=self.auth)
        except BaseException:  # noqa: BLE001 - a backend never returns into the accept loop
            import traceback
            traceback.print_exc()
        finally:
            try:
                conn.close()
            except OSError:
                pass
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            signal.signal(sig, self._on_signal)
        self.log(f'listening on unix socket "{self.sock_path}"')
        for s, tcp in self.listeners:
            if tcp:
                host, port = s.getsockname()[:2]
                self.log(f'listening on address "{host}", port {port}')
        self.log("database system is ready to accept connections")
        deadline = None
        while True:
            if self.shutdown is not None and not self.children:
                break
            if self.shutdown in ("fast", "smart") and deadline is None and \
                    self.shutdown == "fast":
                deadline = time.monotonic() + SHUTDOWN_WAIT_S
            if deadline is not None and time.monotonic() > deadline:
                for pid in self.children:
                    _kill(pid, signal.SIGKILL)
            for key, _ev in self.sel.select(timeout=1.0):
                if key.data is None:
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    self._accept(key.fileobj, key.data)
            self._handle_signals()
            self._reap()
        self.log("database system is shut down" if self.shutdown != "immediate"
                 else "database system was shut down without a checkpoint")


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _is_cancel(conn: socket.socket, children: dict) -> bool:
    """Answer a CancelRequest (16 bytes: length, code, pid, key) if that is what came."""
    try:
        conn.settimeout(10.0)
        head = conn.recv(16, socket.MSG_PEEK)
    except OSError:
        return False
    finally:
        conn.settimeout(None)
    if len(head) < 16:
        return False
    length, code, pid, key = struct.unpack("!iiii", head)
    if length != 16 or code != 80877102:
        return False
    conn.recv(16)
    if children.get(pid) == key:
        _kill(pid, signal.SIGINT)
    return True


def _refuse(conn: socket.socket, sqlstate: str, message: str) -> None:
    from minidb.pgwire.protocol import error_fields
    body = error_fields("FATAL", sqlstate, message)
    try:
        conn.settimeout(5.0)
        try:
            conn.recv(65536)    # the start-up packet (a client sends it before reading)
        except OSError:
            pass
        conn.sendall(b"E" + struct.pack("!i", len(body) + 4) + body)
    except OSError:
        pass
    finally:
        conn.close()


def read_password_file(path: str) -> dict:
    """``user:password`` per line (# comments): the passwords TCP clients must give; a
    password may be given in SCRAM's stored form (``minidb.pgwire.scram.verifier``)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, pw = line.partition(":")
            if sep:
                out[user] = pw
    return out


def serve(datadir: str, *, port: int = 5432, listen: str | None = None,
          socket_dir: str | None = None, password_file: str | None = None, log=None,
          auth: str = "scram-sha-256", **instance_settings) -> None:
    """Run a server on ``datadir`` until it is shut down (see the module docstring)."""
    from minidb.instance import Instance
    log = log or (lambda msg: print(f"minidb serve: {msg}", file=sys.stderr, flush=True))
    passwords = read_password_file(password_file) if password_file else None
    # what every backend needs, imported once here rather than after each fork
    import minidb.server.backend  # noqa: F401
    import minidb.sql.engine  # noqa: F401
    import minidb.sql.parser  # noqa: F401  (sqlglot)
    inst = Instance(datadir, **instance_settings)
    srv = None
    try:
        srv = _Server(inst, port=port, listen=listen, socket_dir=socket_dir,
                      passwords=passwords, log=log, auth=auth)
        srv.run()
    finally:
        if srv is not None:
            srv._stop_listening()
            if srv.shutdown == "immediate":
                os._exit(0)     # no checkpoint: the next start recovers from the WAL
        inst.close()


def stop_server(datadir: str, mode: str = "fast", wait_s: float = 60.0) -> int:
    """Signal the server of ``datadir`` to stop (pg_ctl stop -m MODE); the pid signalled."""
    from minidb.instance import LOCK_FILE
    path = os.path.join(datadir, LOCK_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            pid = int(f.readline().strip())
    except (OSError, ValueError):
        raise errors.UndefinedObject(f'no server running on "{datadir}" (no {LOCK_FILE})') \
            from None
    sig = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}[mode]
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        raise errors.UndefinedObject(f'no server running on "{datadir}" (pid {pid} is gone)') \
            from None
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        time.sleep(0.05)
    raise errors.ObjectInUse(f"server (pid {pid}) did not stop within {wait_s:.0f} s")

