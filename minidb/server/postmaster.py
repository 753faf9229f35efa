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

The postmaster has one thread, as PostgreSQL's, so that every fork copies a process in a
known state (a fork copies only the forking thread: a lock another thread held would stay
held in the child for ever).  It opens the instance with ``background=``: the WAL writer and
checkpointer, an embedded opener's thread, run here as the main loop of a process of their
own (``BackgroundProcess``, PostgreSQL's walwriter and checkpointer in one), forked at open
and again after each crash restart; and the reaper thread's duties - free the slots of dead
backends, the crash restart - are this loop's (``Instance.postmaster_tick`` every
``REAPER_INTERVAL_S``).  The crash restart runs here too: it kills every process of the
instance (the backends, the background process, the pool and the monitor), makes new shared
memory, replays the WAL and forks the background process, the pool and the monitor again; the
backends it killed are reaped as any others.

Departure: PostgreSQL's postmaster attaches no shared memory of its own beyond creating it;
minidb's postmaster is the instance's owner - it holds the lock file, runs crash recovery at
start (PostgreSQL's startup process) and the shutdown checkpoint at the end (PostgreSQL's
checkpointer), in its one thread, while no backend runs.
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

__all__ = ["serve", "stop_server", "socket_path", "SOCKET_MAX", "BackgroundProcess"]

SOCKET_MAX = 107            # sun_path holds 108 bytes, one for the terminating NUL
SHUTDOWN_WAIT_S = 60.0
REAPER_INTERVAL_S = 0.1     # the instance's reaper thread's interval, this loop's here


class _StopFlag:
    """The background process's stop event: set by its SIGTERM handler, which must take no
    lock (``threading.Event.set`` takes the lock the interrupted ``wait`` may hold), so a flag
    polled in short sleeps."""

    POLL_S = 0.02

    def __init__(self):
        self.flag = False

    def set(self) -> None:
        self.flag = True

    def is_set(self) -> bool:
        return self.flag

    def wait(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while not self.flag:
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, self.POLL_S))
        return self.flag


class _SignalStop:
    """``stop_event`` of a ``BackgroundProcess`` as the instance sees it: set() is SIGTERM."""

    def __init__(self, proc: "BackgroundProcess"):
        self.proc = proc

    def set(self) -> None:
        if self.proc.pid:
            _kill(self.proc.pid, signal.SIGTERM)


class BackgroundProcess:
    """The WAL writer and checkpointer (``minidb.recovery.Background``) as a process of its
    own, forked by the single-threaded postmaster: what the instance's ``background=``
    factory makes.  ``start`` forks it, ``stop_event.set()`` sends SIGTERM (it ends its
    checkpoint without further pacing and exits), ``stop`` also waits for it.  ``close_fds``
    are the postmaster's descriptors (listening sockets, its wake pipe) the child closes."""

    STOP_WAIT_S = 60.0

    def __init__(self, inst, close_fds=()):
        self.inst = inst
        self.pid = 0
        self.close_fds = close_fds
        self.stop_event = _SignalStop(self)

    def start(self) -> None:
        from minidb.recovery import Background
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            self.pid = pid
            return
        code = 0
        try:
            for fd in list(self.close_fds):
                try:
                    os.close(fd)
                except OSError:
                    pass
            stop = _StopFlag()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            signal.signal(signal.SIGINT, signal.SIG_IGN)    # the postmaster's, not ours
            for sig in (signal.SIGQUIT, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            bg = Background(self.inst)
            bg.stop_event = stop
            bg.run()                    # in this process's one thread, until SIGTERM
            if bg.error is not None:
                print(f"minidb serve: background writer: {bg.error}", file=sys.stderr)
        except BaseException:  # noqa: BLE001 - never return into the postmaster's code
            import traceback
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def is_alive(self) -> bool:
        from minidb.shmem import pid_alive
        return bool(self.pid) and pid_alive(self.pid)

    def stop(self) -> None:
        pid = self.pid
        if not pid:
            return
        _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.STOP_WAIT_S
        while True:
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break           # reaped already (the postmaster's SIGCHLD handling)
            if done:
                break
            if time.monotonic() > deadline:
                _kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + self.STOP_WAIT_S
            time.sleep(0.005)
        self.pid = 0


def socket_path(datadir: str, port: int, socket_dir: str | None = None) -> str:
    return os.path.join(os.path.abspath(socket_dir or datadir), f".s.PGSQL.{port}")


class _Server:
    def __init__(self, instance, *, port: int, listen: str | None, socket_dir: str | None,
                 passwords: dict | None, log, auth: str = "scram-sha-256",
                 close_fds: list | None = None):
        close_fds = close_fds if close_fds is not None else []
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
        self.crash_seen: str | None = None
        # what a background process forked after a crash restart must not keep open
        close_fds.extend([s.fileno() for s, _ in self.listeners] + [self.wake_r, self.wake_w])

    def _listen_unix(self) -> None:
        try:
            os.unlink(self.sock_path)   # a stale socket of a crashed server (we hold the lock)
        except FileNotFoundError:
            pass
        # bound under a temporary name and renamed once it listens: a client that sees
        # the socket's name never gets "connection refused" between bind and listen
        # (a name as long as the socket's)
        tmp = os.path.join(os.path.dirname(self.sock_path), f".s.PGTMP.{self.port}")
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(tmp)
        os.chmod(tmp, 0o777)
        s.listen(128)
        os.rename(tmp, self.sock_path)
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
                for pid in list(self.children) + [self.instance._background.pid]:
                    _kill(pid, signal.SIGKILL)     # (the background process: no checkpoint)

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
            elif pid == getattr(self.instance._background, "pid", None) and \
                    self.shutdown is None and self.instance.locks.crashed() is None:
                self.log(f"background writer process (PID {pid}) exited with status "
                         f"{status}: no WAL writer or checkpointer until a restart")

    def _tick(self) -> None:
        """The reaper's round (``Instance.postmaster_tick``): free dead backends' slots, or
        the crash restart, said in the log as PostgreSQL says it."""
        if self.shutdown == "immediate":
            return
        inst = self.instance
        crashed = inst.locks.crashed()
        if crashed is not None and self.crash_seen != crashed:
            self.crash_seen = crashed
            self.log(f"{crashed}; terminating any other active server processes")
        before = len(inst.restarts)
        inst.postmaster_tick()
        if len(inst.restarts) > before:
            done = inst.restarts[-1]
            self.crash_seen = None
            self._reap()
            if "error" in done:
                self.log(f"crash restart failed: {done['error']}")
            else:
                self.log("all server processes terminated; reinitialized; "
                         f"{done.get('recovery', {}).get('records', 0)} WAL records replayed; "
                         "database system is ready to accept connections")

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
            for key, _ev in self.sel.select(timeout=REAPER_INTERVAL_S):
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
            self._tick()
        self.log("database system is shut down" if self.shutdown != "immediate"
                 else "database system was shut down without a checkpoint")


def _kill(pid: int, sig: int) -> None:
    if pid <= 0:
        return      # (0 or -1 would signal a process group)
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
    close_fds: list[int] = []
    inst = Instance(datadir, background=lambda i: BackgroundProcess(i, close_fds),
                    **instance_settings)
    srv = None
    try:
        srv = _Server(inst, port=port, listen=listen, socket_dir=socket_dir,
                      passwords=passwords, log=log, auth=auth, close_fds=close_fds)
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

