"""Every knob of minidb, in one place, with its default, range, unit and reason.

A setting has a *context*, as PostgreSQL's GUCs do:

=========  ==================================================================
context    when it can change
=========  ==================================================================
instance   fixed when the instance opens the data directory (shared memory is
           sized from it): ``shared_buffers``, ``max_connections`` ...
session    per backend, with ``SET`` / ``RESET`` (or ``connect(**settings)``)
=========  ==================================================================

``Settings`` holds one value per setting, validated on the way in; a backend's
session settings start as a copy of the instance's.  Later layers add their knobs
here (never elsewhere) so that ``SHOW ALL`` can list everything.

Invariants:
  1. Every value stored in a ``Settings`` object passed ``Setting.parse`` (type and
     range checked), so code reading a setting never re-validates it.
  2. Instance settings cannot change after the instance opened.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from minidb.errors import InvalidParameterValue, UndefinedParameter, CantChangeParameter

BLCKSZ = 8192  # block size in bytes; not a setting: the page format depends on it


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    type: type  # int, float, bool or str
    context: str  # "instance" or "session"
    reason: str
    min: float | None = None
    max: float | None = None
    unit: str = ""
    choices: tuple[str, ...] | None = None

    def parse(self, value: Any) -> Any:
        """Convert ``value`` (from SQL, a keyword argument or a string) and check range."""
        t = self.type
        try:
            if t is bool:
                if isinstance(value, str):
                    v = value.strip().lower()
                    if v in ("on", "true", "yes", "1", "t"):
                        value = True
                    elif v in ("off", "false", "no", "0", "f"):
                        value = False
                    else:
                        raise ValueError(value)
                elif isinstance(value, (int, bool)):
                    value = bool(value)
                else:
                    raise ValueError(value)
            elif t is int:
                if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                    raise ValueError(value)
                value = int(value)
            elif t is float:
                if isinstance(value, bool):
                    raise ValueError(value)
                value = float(value)
            else:
                value = str(value)
        except (TypeError, ValueError):
            raise InvalidParameterValue(
                f'invalid value for parameter "{self.name}": {value!r} (expected {t.__name__})'
            ) from None
        if self.choices is not None and value not in self.choices:
            raise InvalidParameterValue(
                f'invalid value for parameter "{self.name}": {value!r} '
                f"(one of {', '.join(self.choices)})"
            )
        if self.min is not None and value < self.min or self.max is not None and value > self.max:
            raise InvalidParameterValue(
                f'{value} is outside the valid range for parameter "{self.name}" '
                f"({self.min} .. {self.max})"
            )
        return value


def _s(name, default, type_, context, reason, **kw) -> Setting:
    return Setting(name, default, type_, context, reason, **kw)


_ALL = [
    # -- shared memory and processes -------------------------------------------------------
    _s("shared_buffers", 16384, int, "instance",
       "PostgreSQL's default, 128 MB of 8 KiB buffers; tests use a few dozen to force evictions",
       min=16, max=4 * 1024 * 1024, unit="8kB"),
    _s("max_connections", 40, int, "instance",
       "backend slots for sessions; with max_worker_processes they share the 64 wait-mask bits",
       min=1, max=55),
    _s("max_worker_processes", 8, int, "instance",
       "PostgreSQL's default; slots reserved for parallel workers", min=0, max=8),
    _s("buffer_partitions", 128, int, "instance",
       "NUM_BUFFER_PARTITIONS since PostgreSQL 9.5: lookups of different pages rarely contend",
       min=1, max=1024),
    # -- buffer manager ------------------------------------------------------------------------
    _s("bulkread_ring_kb", 256, int, "session",
       "BAS_BULKREAD: small enough to stay in L2, large enough for a synchronized scan to join",
       min=16, max=1024 * 1024, unit="kB"),
    _s("bulkwrite_ring_kb", 16384, int, "session",
       "BAS_BULKWRITE: 16 MB, so bulk loads do not evict the whole pool", min=16,
       max=1024 * 1024, unit="kB"),
    _s("vacuum_ring_kb", 256, int, "session",
       "BAS_VACUUM: 256 kB as in PostgreSQL up to 16", min=16, max=1024 * 1024, unit="kB"),
    _s("lock_wait_timeout_ms", 30000, int, "session",
       "upper bound on any buffer-content or I/O wait, so a bug shows up as an error, not a hang",
       min=1, max=3600 * 1000, unit="ms"),
    _s("trace_buffers", False, bool, "session",
       "print each buffer-manager decision (victim chosen, ring reuse, write-back)"),
    _s("verify_checksums", True, bool, "instance",
       "verify each page's checksum when it is read from disk; PostgreSQL: data_checksums"),
    # -- transactions ------------------------------------------------------------------------
    _s("default_transaction_isolation", "read committed", str, "session",
       "PostgreSQL's default: a fresh snapshot for every statement",
       choices=("read committed", "repeatable read", "serializable")),
    _s("deadlock_timeout", 1000, int, "session",
       "PostgreSQL's default: wait this long before looking for a deadlock, because most "
       "waits end sooner and the check costs", min=1, max=3600 * 1000, unit="ms"),
    _s("lock_timeout", 0, int, "session",
       "0 = wait for row locks without limit (bounded still by lock_wait_timeout_ms)",
       min=0, max=3600 * 1000, unit="ms"),
    _s("heap_page_pruning", True, bool, "session",
       "opportunistic pruning of heap pages on access (PostgreSQL 8.3+); off = as in 2002"),
    _s("trace_pruning", False, bool, "session",
       "print each heap page pruned (on access or by VACUUM) with what it freed"),
    _s("hot_updates", True, bool, "session",
       "heap-only tuples when no indexed column changes and the page has room (8.3+)"),
    _s("trace_xact", False, bool, "session",
       "print transaction starts and ends, snapshot xmin/xmax, row-lock waits"),
    _s("kill_index_tuples", True, bool, "session",
       "mark an index item LP_DEAD when the heap fetch finds its whole HOT chain dead to "
       "everyone, and skip such items in later scans (PostgreSQL 8.2+); off = as in 2002"),
    _s("trace_btree", False, bool, "session",
       "print each B-tree decision: page splits, new roots, items killed, simple deletions"),
    _s("heap_fillfactor", 100, int, "session",
       "HEAP_DEFAULT_FILLFACTOR: heap pages are filled completely by inserts",
       min=10, max=100, unit="%"),
]

SETTINGS: dict[str, Setting] = {s.name: s for s in _ALL}


def register(setting: Setting) -> None:
    """Add a setting (for layers that define their own knobs). Names are unique."""
    if setting.name in SETTINGS:
        raise ValueError(f"setting {setting.name} already defined")
    SETTINGS[setting.name] = setting


class Settings:
    """Validated values of every setting; attribute access reads them (``s.shared_buffers``)."""

    __slots__ = ("_values", "_frozen_instance")

    def __init__(self, overrides: dict[str, Any] | None = None, *, base: "Settings | None" = None):
        object.__setattr__(self, "_values",
                           dict(base._values) if base is not None
                           else {n: s.default for n, s in SETTINGS.items()})
        object.__setattr__(self, "_frozen_instance", False)
        for name, value in (overrides or {}).items():
            self.set(name, value)

    def freeze_instance_settings(self) -> None:
        object.__setattr__(self, "_frozen_instance", True)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError("use Settings.set(name, value)")

    def get(self, name: str) -> Any:
        return self._values[self._lookup(name).name]

    def set(self, name: str, value: Any) -> None:
        s = self._lookup(name)
        if s.context == "instance" and self._frozen_instance:
            raise CantChangeParameter(
                f'parameter "{s.name}" cannot be changed without reopening the database')
        self._values[s.name] = s.parse(value)

    def reset(self, name: str) -> None:
        self.set(name, self._lookup(name).default)

    def copy(self) -> "Settings":
        new = Settings(base=self)
        object.__setattr__(new, "_frozen_instance", self._frozen_instance)
        return new

    def items(self):
        return sorted(self._values.items())

    @staticmethod
    def _lookup(name: str) -> Setting:
        s = SETTINGS.get(name.lower())
        if s is None:
            raise UndefinedParameter(f'unrecognized configuration parameter "{name}"')
        return s
