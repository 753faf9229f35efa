"""Every knob of minidb, in one place, with its default, range, unit and reason.

A setting has a *context*, as PostgreSQL's GUCs do:

=========  ==================================================================
context    when it can change
=========  ==================================================================
instance   fixed when the instance opens the data directory (shared memory is
           sized from it): ``shared_buffers``, ``max_connections`` ...
session    per backend, with ``SET`` / ``RESET`` (or ``connect(**settings)``)
=========  ==================================================================

A setting marked ``plan=True`` is read while a statement is planned or its expressions
compiled (the planner's costs and switches, ``trace_planner``, the parallel-plan rules):
a plan made under one value may be wrong under another.  ``PLAN_SETTINGS`` lists them, and
``Settings.plan_signature()`` gives their values - the SQL engine keys its cached plans on
it, so marking the setting is all a new planner knob needs to replan when it is SET.

``Settings`` holds one value per setting, validated on the way in; a backend's
session settings start as a copy of the instance's.  Every layer adds its knobs
here (never elsewhere) so that ``SHOW ALL`` can list everything.

Invariants:
  1. Every value stored in a ``Settings`` object passed ``Setting.parse`` (type and
     range checked), so code reading a setting never re-validates it.
  2. Instance settings cannot change after the instance opened.
  3. Every setting the planner or the expression compiler reads is marked ``plan=True``
     (tests/sql check it by recording what planning reads).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from minidb.errors import InvalidParameterValue, UndefinedParameter, CantChangeParameter

BLCKSZ = 8192  # block size in bytes; not a setting: the page format depends on it
# The system catalogs' format (PostgreSQL's CATALOG_VERSION_NO, yyyymmddN): written into
# pg_control when a data directory is made and checked at every open, so a directory made
# with other catalog columns is refused with a message instead of failing half-way.  Bump
# it with every change to a catalog's columns or to what the bootstrap creates.
CATALOG_VERSION_NO = 202612011


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
    plan: bool = False  # read while planning or compiling: cached plans depend on it
    check: Any = None   # a function value -> None that raises ValueError for a bad value

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
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as e:
                raise InvalidParameterValue(
                    f'invalid value for parameter "{self.name}": "{value}" ({e})') from None
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
       "PostgreSQL's default: the parallel worker pool (and its reserved backend slots); "
       "opening forks one pool master, which forks each worker on first use; 0 = no pool, "
       "every scan is the leader's alone", min=0, max=8),
    _s("buffer_partitions", 128, int, "instance",
       "NUM_BUFFER_PARTITIONS since PostgreSQL 9.5: lookups of different pages rarely contend",
       min=1, max=1024),
    _s("transaction_buffers", 0, int, "instance",
       "commit-log (pg_xact) page buffers in shared memory, PostgreSQL 17's name; 0 = "
       "PostgreSQL 13-16's size, shared_buffers / 512 between 4 and 128 (32 at the default)",
       min=0, max=1024, unit="8kB"),
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
    _s("allow_server_files", False, bool, "instance",
       "on: COPY may read and write files of the server's file system (PostgreSQL's "
       "pg_read_server_files / pg_write_server_files roles); never inside the data "
       "directory. Off: only COPY FROM STDIN / TO STDOUT (cursor.copy(), \\copy)"),
    _s("verify_checksums", True, bool, "instance",
       "verify each page's checksum when it is read from disk; PostgreSQL: data_checksums"),
    # -- write-ahead log ---------------------------------------------------------------------
    _s("wal_buffers", 512, int, "instance",
       "WAL buffer pages in the shared segment (PostgreSQL: shared_buffers / 32, 8..2048); "
       "4 MB: a ring that writes out whole pages long before it wraps", min=8, max=2048,
       unit="8kB"),
    _s("wal_segment_size", 16 * 1024 * 1024, int, "instance",
       "bytes per file in pg_wal (PostgreSQL's initdb --wal-segsize, default 16 MB); fixed "
       "when the data directory is created (the control file keeps it); tests use 1 MB so "
       "that segment switches and removal are exercised", min=1 << 20, max=1 << 30),
    _s("fsync", True, bool, "instance",
       "PostgreSQL's default: flush the WAL and relation files to disk; off survives "
       "process crashes but not power loss (for experiments)"),
    _s("wal_sync_method", "fdatasync", str, "instance",
       "fdatasync is PostgreSQL's default on Linux", choices=("fdatasync", "fsync")),
    _s("synchronous_commit", True, bool, "session",
       "on: COMMIT returns after its commit record is flushed; off: returns at once and the "
       "WAL writer flushes within 3 x wal_writer_delay (the last commits may be lost in a "
       "crash, consistency never)"),
    _s("commit_delay", 0, int, "session",
       "microseconds a committer that is about to flush waits for others to join the "
       "flush (PostgreSQL's default 0: group commit comes from queueing alone)",
       min=0, max=100000, unit="us"),
    _s("commit_siblings", 5, int, "session",
       "commit_delay applies only with at least this many other transactions running",
       min=0, max=1000),
    _s("wal_writer_delay", 200, int, "instance",
       "PostgreSQL's default: how often the WAL writer flushes asynchronous commits",
       min=1, max=10000, unit="ms"),
    _s("full_page_writes", True, bool, "instance",
       "PostgreSQL's default: the first change of a page after a checkpoint logs the whole "
       "page, so a torn page write is repaired by replay"),
    _s("checkpoint_timeout", 300, int, "instance",
       "PostgreSQL's default, 5 minutes between automatic checkpoints", min=1,
       max=86400, unit="s"),
    _s("checkpoint_completion_target", 0.9, float, "instance",
       "PostgreSQL's default: a timed or WAL-triggered checkpoint spreads its writes over "
       "this fraction of checkpoint_timeout (and of max_wal_size / 2 of WAL); 0 writes at "
       "full speed.  CHECKPOINT and shutdown never wait", min=0.0, max=1.0),
    _s("max_wal_size", 1024, int, "instance",
       "PostgreSQL's default 1 GB: a checkpoint is requested when this much WAL / 2 was "
       "written since the last redo point", min=2, max=1024 * 1024, unit="MB"),
    _s("trace_recovery", False, bool, "instance",
       "print crash recovery's progress (every 10000 records) and where redo ended"),
    # -- crash restart and fault injection (minidb.monitor, minidb.instance) ----------------
    _s("restart_after_crash", True, bool, "instance",
       "PostgreSQL's default: when a process of the instance dies inside a shared-memory "
       "change, the instance kills its other processes, resets shared memory and runs crash "
       "recovery by itself (open connections get 57P02 and reconnect); off: the instance "
       "stays down (57P02) until it is closed and reopened"),
    # -- transactions ------------------------------------------------------------------------
    _s("default_transaction_isolation", "read committed", str, "session",
       "PostgreSQL's default: a fresh snapshot for every statement",
       choices=("read committed", "repeatable read", "serializable")),
    _s("deadlock_timeout", 1000, int, "session",
       "PostgreSQL's default: wait this long before looking for a deadlock, because most "
       "waits end sooner and the check costs", min=1, max=3600 * 1000, unit="ms"),
    _s("max_locks_per_transaction", 64, int, "instance",
       "PostgreSQL's default: sizes the shared heavyweight lock table (x 2 x backend slots "
       "entries, a pool shared by all); running out gives 53200 out of shared memory",
       min=10, max=100000),
    _s("lock_timeout", 0, int, "session",
       "0 = wait for row and relation locks without limit (bounded still by "
       "lock_wait_timeout_ms)",
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
    _s("btree_descent_cache", True, bool, "session",
       "descend B-trees over a per-process cache of decoded internal pages, checked "
       "against each page's LSN under its lock, and through remembered buffer numbers "
       "(ReadRecentBuffer); off = decode every page on every descent (same results and "
       "buffer counts)"),
    _s("trace_btree", False, bool, "session",
       "print each B-tree decision: page splits, new roots, items killed, simple deletions"),
    _s("heap_fillfactor", 100, int, "session",
       "HEAP_DEFAULT_FILLFACTOR: heap pages are filled completely by inserts",
       min=10, max=100, unit="%"),
    _s("stats_flush_interval", 500, int, "session",
       "PostgreSQL 15's PGSTAT_MIN_INTERVAL idea: a backend publishes its table counters at "
       "most this often (at a transaction's end), so a short transaction does not take the "
       "statistics lock; a reader in the same process flushes first; 0 = at every "
       "transaction's end", min=0, max=60 * 1000, unit="ms"),
    # -- planner (minidb.sql.planner); costs in PostgreSQL's units ---------------------------
    _s("enable_seqscan", True, bool, "session",
       "off: a sequential scan costs disable_cost (1e10) more, so any other path wins",
       plan=True),
    _s("enable_indexscan", True, bool, "session",
       "off: an index scan costs disable_cost more (PostgreSQL's enable_indexscan)", plan=True),
    _s("enable_hashjoin", True, bool, "session", "off: hash joins cost disable_cost more",
       plan=True),
    _s("enable_fast_path", True, bool, "session",
       "on: a cached plan of a point statement (a SELECT / UPDATE / DELETE by an index "
       "equality, a one-row INSERT ... VALUES) runs as one compiled closure "
       "(minidb.exec.point), and a unique index matched by equality on all its columns is "
       "taken over a sequential scan (not under planner_trusts_stale_stats, PostgreSQL 7's "
       "planner); off: every plan runs through the plan nodes (the "
       "two give the same rows and counters: off is for comparing them)", plan=True),
    _s("enable_nestloop", True, bool, "session",
       "off: nested loops (plain and over an index) cost disable_cost more", plan=True),
    _s("seq_page_cost", 1.0, float, "session",
       "PostgreSQL's default: the unit of cost, one sequentially read page", min=0, max=1e10,
       plan=True),
    _s("random_page_cost", 4.0, float, "session",
       "PostgreSQL's default: a random page read costs 4 sequential ones", min=0, max=1e10,
       plan=True),
    _s("cpu_tuple_cost", 0.01, float, "session",
       "PostgreSQL's default: processing one row", min=0, max=1e10, plan=True),
    _s("cpu_index_tuple_cost", 0.005, float, "session",
       "PostgreSQL's default: processing one index entry", min=0, max=1e10, plan=True),
    _s("cpu_operator_cost", 0.0025, float, "session",
       "PostgreSQL's default: evaluating one operator or function", min=0, max=1e10, plan=True),
    _s("effective_cache_size", 524288, int, "session",
       "PostgreSQL's default (4 GB in pages): the cache the Mackert-Lohman estimate of index "
       "scan page fetches assumes", min=1, max=1 << 31, unit="8kB", plan=True),
    _s("default_statistics_target", 100, int, "session",
       "PostgreSQL's default: ANALYZE samples 300 x this many rows and keeps this many "
       "histogram buckets and most common values", min=1, max=10000),
    _s("planner_trusts_stale_stats", False, bool, "session",
       "on: a table's size is the relpages and reltuples of its last VACUUM or ANALYZE, not "
       "scaled to its current length, as PostgreSQL 7 planned; tables that bloat since "
       "keep looking small and keep being scanned sequentially (seed 003's 2002 engine)",
       plan=True),
    _s("trace_planner", False, bool, "session",
       "print each access path and join the planner costs, and the one it chose", plan=True),
    # -- I/O model (minidb.storage.iomodel) ----------------------------------------------------
    _s("io_model", "none", str, "instance",
       "none: reads cost what this machine's disk costs (a GB in half a second, cached); hdd, "
       "ssd or custom put a simulated OS cache, read-ahead and disk beneath the buffer pool "
       "so that the I/O effects of the seed experiments show", choices=("none", "hdd", "ssd",
                                                                          "custom")),
    _s("io_seq_mb_per_s", 150.0, float, "instance",
       "io_model=custom: sequential bandwidth of the simulated disk (a 7200 rpm disk's)",
       min=0.01, max=1e6, unit="MB/s"),
    _s("io_seek_ms", 8.0, float, "instance",
       "io_model=custom: cost of a request that does not continue the disk's stream (a "
       "7200 rpm disk's average seek plus half a rotation)", min=0, max=10000, unit="ms"),
    _s("io_rotational", True, bool, "instance",
       "io_model=custom: a spinning disk (seeks, the drive's read-ahead cache, the I/O "
       "scheduler's slices) rather than a solid-state device (a latency per request, "
       "io_queue_depth requests at once); the hdd preset is rotational, ssd is not"),
    _s("io_queue_depth", 1, int, "instance",
       "io_model=custom, not rotational: requests the device serves at once (their "
       "latencies overlap; the transfers share the bandwidth); the ssd preset has 32, "
       "SATA's NCQ depth", min=1, max=256),
    _s("io_drive_cache_kb", 8192, int, "instance",
       "rotational: the drive's read-ahead (track) cache, which keeps reading after a "
       "request while the disk is idle, so a late request that continues it pays no "
       "seek; 8 MB, the buffer of a 2006-2007 7,200 rpm desktop drive (Western Digital "
       "Caviar SE, Seagate Barracuda 7200.10 datasheets); 0 = none", min=0, max=1 << 20,
       unit="kB"),
    _s("io_scheduler", "deadline", str, "instance",
       "rotational: the kernel's I/O scheduler; noop and deadline serve requests in "
       "arrival order (Linux's default for a disk today is mq-deadline), cfq gives each "
       "process time slices (Linux's default from 2.6.18, 2006, to 4.x)",
       choices=("noop", "deadline", "cfq")),
    _s("io_cfq_slice_sync_ms", 100, int, "instance",
       "io_scheduler=cfq: a process's time slice for reads, Linux's default slice_sync "
       "(HZ/10 in block/cfq-iosched.c since 2.6.18)", min=1, max=10000, unit="ms"),
    _s("io_cfq_slice_idle_ms", 8, int, "instance",
       "io_scheduler=cfq: how long the disk waits for the slice's process to issue its "
       "next read, Linux's default slice_idle (HZ/125 in block/cfq-iosched.c since "
       "2.6.18)", min=0, max=1000, unit="ms"),
    _s("io_readahead_kb", 128, int, "instance",
       "Linux's default read_ahead_kb: the largest read-ahead window of a stream (16 blocks); "
       "0 turns read-ahead off", min=0, max=1 << 20, unit="kB"),
    _s("io_combine_limit", 16, int, "session",
       "PostgreSQL 17's default (128 kB): the most consecutive missing blocks the buffer "
       "manager reads with one call; 1 = one 8 kB read per block, as PostgreSQL 16 and "
       "older (the seeds' 7.x to 15) read", min=1, max=256, unit="8kB"),
    _s("io_readahead_policy", "ondemand", str, "instance",
       "Linux's read-ahead: ondemand (2.6.23 and later, with 2.6.31's context read-ahead: "
       "a read-ahead marker page in the shared page cache, so any process that reaches it "
       "starts the next window, and a stream recognised from the pages before it in the "
       "cache) or perfile (the kernels before 2.6.23: each open file keeps its own "
       "sequential detection; what seed 001's 2007 kernel did)",
       choices=("ondemand", "perfile")),
    _s("os_cache_mb", 256, int, "instance",
       "size of the simulated OS page cache shared by all processes; the seeds need tables "
       "at least 8 times larger than it", min=1, max=1 << 20, unit="MB"),
    # -- sequential scans (minidb.heap.syncscan, minidb.heap.parallel, minidb.exec.gather) -----
    _s("synchronize_seqscans", True, bool, "session",
       "PostgreSQL 8.3+: a scan of a table larger than shared_buffers/4 starts where another "
       "scan of it is; off = always start at block 0 (row order of unordered queries is then "
       "stable)"),
    _s("trace_syncscan", False, bool, "session",
       "print the start block of each synchronized scan (PostgreSQL's trace_syncscan)"),
    _s("parallel_chunk_policy", "pg14", str, "session",
       "how a parallel scan hands out blocks: pg14 = chunks of nblocks/2048 rounded to a power "
       "of two with ramp-down (PostgreSQL 14+); block = one block at a time (9.6-13); fixed = "
       "parallel_fixed_chunk_blocks", choices=("block", "fixed", "pg14")),
    _s("parallel_max_chunk_blocks", 8192, int, "session",
       "PARALLEL_SEQSCAN_MAX_CHUNK_SIZE: larger chunks were measured to hurt synchronized "
       "scans (seed 000)", min=1, max=1 << 24, unit="8kB"),
    _s("parallel_fixed_chunk_blocks", 64, int, "session",
       "chunk size of the fixed policy: 64 as in the first patch of 2020 (seed 002), four "
       "times Linux's read-ahead window", min=1, max=1 << 24, unit="8kB"),
    _s("parallel_seqscan_nchunks", 2048, int, "session",
       "PARALLEL_SEQSCAN_NCHUNKS, the number of chunks pg14 aims at; lower it to keep the "
       "chunk sizes of a seed experiment on a scaled-down table", min=1, max=1 << 24),
    _s("max_parallel_workers_per_gather", 2, int, "session",
       "PostgreSQL's default: workers one parallel scan may use (0 = no parallel scans)",
       min=0, max=8, plan=True),
    _s("max_parallel_workers", 8, int, "session",
       "PostgreSQL's default: workers all parallel scans of the instance may use at once",
       min=0, max=8),
    _s("parallel_leader_participation", True, bool, "session",
       "PostgreSQL's default: the leader scans too while it waits for its workers' rows",
       plan=True),
    _s("parallel_setup_cost", 1000.0, float, "session",
       "PostgreSQL's default: the planner's cost of starting the workers of a Gather; with "
       "it a parallel plan must save more than it costs, so small scans stay serial",
       min=0, max=1e10, plan=True),
    _s("parallel_tuple_cost", 0.1, float, "session",
       "PostgreSQL's default: the planner's cost of passing one row from a worker to the "
       "leader", min=0, max=1e10, plan=True),
    _s("min_parallel_table_scan_size", 1024, int, "session",
       "PostgreSQL's default (8 MB): smaller tables are not scanned in parallel; one more "
       "worker each time the table triples", min=0, max=1 << 30, unit="8kB", plan=True),
    _s("trace_parallel", False, bool, "session",
       "print each parallel scan decision: workers launched, start block, every chunk taken"),
    # -- data types ------------------------------------------------------------------------
    _s("timezone", "UTC", str, "session",
       "PostgreSQL's TimeZone: how timestamptz is shown and read without an offset, where "
       "its days and months are added; an IANA name or an offset ('+02', '-05:30'); UTC "
       "by default (PostgreSQL takes the server's), so results do not depend on the machine",
       plan=True, check=lambda v: _check_timezone(v)),
]


def _check_timezone(name: str) -> None:
    """A TimeZone value minidb.types.timezone_named accepts (checked here, below types)."""
    import re
    import zoneinfo
    low = name.strip().lower()
    if low in ("utc", "gmt", "z", "zulu", "uct", "etc/utc"):
        return
    if re.fullmatch(r"(?:utc|gmt)?\s*[+-]\d{1,2}(?::?\d{2}){0,2}", low):
        return
    try:
        zoneinfo.ZoneInfo(name.strip())
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError("time zone not recognized") from None

SETTINGS: dict[str, Setting] = {s.name: s for s in _ALL}
# the settings a plan depends on (``plan=True``), in definition order
PLAN_SETTINGS: tuple[str, ...] = tuple(s.name for s in _ALL if s.plan)


def register(setting: Setting) -> None:
    """Add a setting (for layers that define their own knobs). Names are unique."""
    global PLAN_SETTINGS
    if setting.name in SETTINGS:
        raise ValueError(f"setting {setting.name} already defined")
    SETTINGS[setting.name] = setting
    if setting.plan:
        PLAN_SETTINGS += (setting.name,)


class Settings:
    """Validated values of every setting; attribute access reads them (``s.shared_buffers``)."""

    # Every value is also an entry of the instance's __dict__, so ``s.name`` is a plain
    # attribute read (~30 ns); a ``__getattr__`` lookup cost 0.74 us, and hot paths (heap
    # pruning, heap_update, statement start) read several settings per row or statement.
    # ``_values`` stays the one source ``set`` writes first; the two never differ.
    __slots__ = ("_values", "_frozen_instance", "changes", "__dict__")

    def __init__(self, overrides: dict[str, Any] | None = None, *, base: "Settings | None" = None):
        object.__setattr__(self, "_values",
                           dict(base._values) if base is not None
                           else {n: s.default for n, s in SETTINGS.items()})
        self.__dict__.update(self._values)
        object.__setattr__(self, "_frozen_instance", False)
        # bumped by every set(): lets a reader cache what it derived from the values
        # (the SQL engine's plan_signature(), checked at every statement)
        object.__setattr__(self, "changes", 0)
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
        self._values[s.name] = self.__dict__[s.name] = s.parse(value)
        object.__setattr__(self, "changes", self.changes + 1)

    def plan_signature(self) -> tuple:
        """The values of ``PLAN_SETTINGS``: two plans made under equal signatures (and the
        same catalog) are the same plan."""
        values = self._values
        return tuple(values[n] for n in PLAN_SETTINGS)

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
