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
"""

from __future__ import annotations

import contextlib
import os
import sys

import minidb.errors as errors
from minidb.config import SETTINGS

__all__ = ["BenchError", "open_target", "split_settings", "connect", "Log"]


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
    """A new ``(Session, Engine)`` on ``inst`` with the session settings SET."""
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
