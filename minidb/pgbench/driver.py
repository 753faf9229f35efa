"""``minidb bench`` runs: clients as forked processes, pgbench's accounting of the results.

One run, in order:

1. open the instance (``conn.open_target``), find the scale (built-in scripts: ``count(*)``
   of pgbench_branches, as pgbench; custom scripts: ``-s``, default 1);
2. unless ``-n``: ``VACUUM pgbench_branches``, ``VACUUM pgbench_tellers``,
   ``TRUNCATE pgbench_history`` (and with ``-v`` ``VACUUM ANALYZE pgbench_accounts``);
   errors are reported and ignored, as pgbench does;
3. fork the clients (``multiprocessing`` "fork" context, after the instance is open: they
   inherit the shared segment and its locks).  Each opens its own session, SETs the run's
   session settings, prepares its statements (``-M prepared``), then waits at a barrier;
4. when every client is connected, the barrier's action stamps the start time and releases
   them together: the clock starts after all connections, and "initial connection time" is
   the time from the first fork to the last client's connection (process creation
   included, as a PostgreSQL backend's fork is part of its connection);
5. each client runs transactions: ``-t`` of them, or until ``-T`` seconds after the start
   (a transaction that started in time completes).  The parent prints a progress line every
   ``-P`` seconds from counters the clients keep in shared memory;
6. each client sends its figures through a pipe and exits; the parent sums them, reads the
   tables' sizes and, with ``--check``, checks the balances.

The clients' side (compiling commands, the transaction loop, retries, the ``-R`` schedule
with ``-L`` skipping, ``-C`` reconnecting) is ``client.py``; the figures are
``results.BenchResult``; with ``-l`` the clients' records become pgbench's log files in
``txlog.py`` once the run is over.  The options pgbench 15 checks (``-R``, ``-L``,
``--aggregate-interval``, ``--sampling-rate``, ``--progress-timestamp``) are checked here
with its messages.

Clients are processes, never threads (``-j`` is accepted and printed as pgbench prints it,
``min(-j, -c)``, but every client is its own process: CPython threads would serialise on
the interpreter lock, and minidb's backends are per-process anyway).

Query modes (``-M``):

=========  ===================================================================================
simple     each SQL command's text is rebuilt with the variables' values written in as
           literals and sent to ``Engine.execute``: a new text is parsed and planned, as
           PostgreSQL's simple protocol is.  minidb's plan cache keys on the text, so a text
           that recurs (``BEGIN``, ``END``, or the same aid drawn twice) skips both
extended   ``Engine.execute(text_with_?, params)``: the same text every time, so after the
           first execution the plan cache serves it (PostgreSQL re-parses an unnamed
           statement; minidb only looks it up)
prepared   ``Engine.prepare`` once per command and client, then ``Prepared.execute(params)``
=========  ===================================================================================

Failures and retries (pgbench 15): a serialization failure (40001) or a deadlock (40P01)
rolls the transaction back; with ``--max-tries N`` (N > 1, or 0 for no limit with ``-T``)
the transaction is run again from its first command with the same random draws (the
client's generator is restored), while tries and time remain.  A transaction that still
fails is counted as *failed*, is not in tps nor in the latency figures, and the client goes
on.  ``retried`` counts transactions that needed more than one try (whether they finally
committed or failed), ``retries`` the extra tries.  Any other error aborts the client; the
run then ends with "Run was aborted" and exit status 2.

Latency is measured for every transaction (first try to commit, retries included); the
summary prints it as pgbench does (measured average and stddev with ``-P``, otherwise the
estimate duration x clients / transactions), and ``BenchResult`` keeps both, with every
latency.

``CURRENT_TIMESTAMP``: when the SQL engine does not support it (probed once per run), each
client passes the current time instead - a parameter in the extended and prepared modes, a
timestamp literal in simple mode - so the built-in scripts run unchanged.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import threading
import time

import numpy as np

import minidb.errors as errors
from minidb.pgbench import report
from minidb.pgbench.check import balance_state, compare_states, table_sizes
from minidb.pgbench.client import (P_COMMITTED, P_FAILED, P_LAG, P_LAT, P_LAT2, P_RETRIED,
                                   P_RETRIES, P_SKIPPED, P_WIDTH, Plan, client_entry)
from minidb.pgbench.txlog import write_logs
from minidb.pgbench.conn import BenchError, Log, connect, open_target
from minidb.pgbench.results import BenchResult, CommandStats, ScriptStats
from minidb.pgbench.scripts import NACCOUNTS, Script, ScriptError, builtin_script, load_script

__all__ = ["run_bench", "BenchResult", "ScriptStats", "CommandStats", "QUERY_MODES"]

QUERY_MODES = ("simple", "extended", "prepared")
DEFAULT_TRANSACTIONS = 10          # pgbench's default -t
CONNECT_TIMEOUT_S = 120.0          # clients that are not all connected by then: give up


# ---------------------------------------------------------------------------------------------
# the run
def run_bench(target, *, clients: int = 1, threads: int = 1, transactions: int | None = None,
              duration: float | None = None, script=None, files=(), mode: str = "simple",
              scale: int | None = None, settings: dict | None = None,
              variables: dict | None = None, no_vacuum: bool = False,
              vacuum_all: bool = False, progress: float | None = None, max_tries: int = 1,
              failures_detailed: bool = False, verbose_errors: bool = False,
              per_command: bool = False, check: bool = False, random_seed=None,
              accounts_per_scale: int = NACCOUNTS, log=None, rate: float | None = None,
              latency_limit: float | None = None, connect_each: bool = False,
              log_prefix: str | None = None, aggregate_interval: int | None = None,
              sampling_rate: float | None = None,
              progress_timestamp: bool = False) -> BenchResult:
    """Run a benchmark on ``target`` (a data directory or an open ``Instance``).

    ``script``: a built-in name (``"tpcb-like"``, ``"simple-update"``, ``"select-only"``,
    abbreviations and ``@weight`` allowed), a ``Script`` (``scripts.parse_script``), or a
    list of those; ``files``: script files (``-f``).  Neither: tpcb-like.  ``transactions``
    per client (``-t``) or ``duration`` in seconds (``-T``); neither: 10 transactions.
    ``settings``: minidb settings (session ones SET in every client; instance ones used when
    this opens the directory).  ``variables``: ``-D`` variables.  ``progress``: seconds
    between progress lines (written to ``log``).  ``log``: a stream for pgbench's messages
    (None: silent).  ``rate`` (``-R``): target transactions per second over all clients,
    on a Poisson schedule; ``latency_limit`` (``-L``, ms): count later transactions as late
    and, with ``rate``, skip those whose start is already that late; ``connect_each`` (``-C``):
    a new session per transaction; ``log_prefix`` (``-l``; pgbench's is "pgbench_log"):
    write pgbench's transaction log files, per transaction or, with
    ``aggregate_interval`` seconds, per interval; ``sampling_rate``: the fraction of
    transactions logged; ``progress_timestamp``: progress lines carry the Unix time.
    Returns a ``BenchResult``.
    """
    say = Log.of(log)
    if clients < 1:
        raise BenchError(f'invalid number of clients: "{clients}"')
    if threads < 1:
        raise BenchError(f'invalid number of threads: "{threads}"')
    if transactions is not None and duration is not None:
        raise BenchError("specify either a number of transactions (-t) or a duration (-T), "
                         "not both")
    if transactions is None and duration is None:
        transactions = DEFAULT_TRANSACTIONS
    if transactions is not None and transactions < 1:
        raise BenchError(f'invalid number of transactions: "{transactions}"')
    if duration is not None and duration <= 0:
        raise BenchError(f'invalid duration: "{duration}"')
    if mode not in QUERY_MODES:
        raise BenchError(f'invalid query mode (-M): "{mode}"')
    if max_tries < 0:
        raise BenchError(f'invalid number of maximum tries: "{max_tries}"')
    if max_tries == 0 and duration is None:
        raise BenchError("an unlimited number of transaction tries can only be used with "
                         "--latency-limit or a duration (-T)")
    if progress is not None and progress <= 0:
        raise BenchError(f'invalid thread progress delay: "{progress}"')
    _check_pgbench_options(rate, latency_limit, log_prefix, aggregate_interval,
                           sampling_rate, progress, progress_timestamp, duration)
    variables = {k: _typed(v) for k, v in (variables or {}).items()}
    scripts = _scripts(script, files, accounts_per_scale)
    seed = _seed(random_seed)
    threads = min(threads, clients)
    with open_target(target, settings) as (inst, sess_settings):
        session, engine = connect(inst, sess_settings)
        try:
            if any(s.builtin for s in scripts):
                found = _count_branches(engine, inst)
                if scale is not None:
                    say(f"minidb bench: warning: scale option ignored, using count from "
                        f"pgbench_branches table ({found})")
                scale = found
            elif scale is None:
                scale = 1
            now_ok = _supports_current_timestamp(engine)
            if not no_vacuum:
                _pre_run_vacuum(engine, vacuum_all, say)
            baseline = balance_state(engine, accounts_per_scale) if check else None
        finally:
            session.close()
        res = BenchResult(
            transaction_type=scripts[0].desc if len(scripts) == 1 else "multiple scripts",
            scale=scale, query_mode=mode, clients=clients, threads=threads,
            max_tries=max_tries, transactions_per_client=transactions, duration=duration,
            failures_detailed=failures_detailed, latency_measured=progress is not None,
            settings=dict(sess_settings), rate=rate, latency_limit_ms=latency_limit,
            connect_each=connect_each)
        res.scripts = [ScriptStats(s.desc, s.weight, s.builtin) for s in scripts]
        res.tables_before = table_sizes(inst)
        counters0 = inst.counters()
        wal0 = inst.wal_stats()
        plan = Plan(inst, sess_settings, scripts, mode, transactions, duration, max_tries,
                    verbose_errors, per_command, scale, seed, variables, now_ok,
                    rate=rate, latency_limit_ms=latency_limit, clients=clients,
                    connect_each=connect_each, log_xacts=log_prefix is not None,
                    sampling_rate=sampling_rate, failures_detailed=failures_detailed,
                    epoch_shift=time.time() - time.perf_counter())
        results, t0 = _run_clients(plan, res, clients, progress, say, progress_timestamp)
        if log_prefix is not None:
            res.log_files = write_logs(log_prefix, results, t0, plan, threads,
                                       aggregate_interval)
        c1 = inst.counters()
        res.counters = {k: c1[k] - counters0.get(k, 0) for k in c1}
        wal1 = inst.wal_stats()
        res.wal = {k: wal1[k] - wal0.get(k, 0) for k in wal1}
        res.tables = table_sizes(inst)
        if check:
            session, engine = connect(inst, sess_settings)
            try:
                after = balance_state(engine, accounts_per_scale)
            finally:
                session.close()
            res.check = compare_states(baseline, after, expect=_expect(scripts),
                                       committed_writes=_committed_writes(scripts, res))
    return res


def _check_pgbench_options(rate, latency_limit, log_prefix, aggregate_interval, sampling_rate,
                           progress, progress_timestamp, duration) -> None:
    """pgbench 15's checks of -R, -L, -l and friends, with its messages."""
    if rate is not None and not rate > 0:
        raise BenchError(f'invalid rate limit: "{_num(rate)}"')
    if latency_limit is not None and not latency_limit > 0:
        raise BenchError(f'invalid latency limit: "{_num(latency_limit)}"')
    if aggregate_interval is not None:
        if aggregate_interval < 1:
            raise BenchError("--aggregate-interval must be in range 1..2147483647")
        if log_prefix is None:
            raise BenchError("log aggregation is allowed only when actually logging "
                             "transactions")
        if sampling_rate is not None:
            raise BenchError("log sampling (--sampling-rate) and aggregation "
                             "(--aggregate-interval) cannot be used at the same time")
        if duration is not None and duration % aggregate_interval:
            raise BenchError("duration (-T) must be a multiple of aggregation interval "
                             "(--aggregate-interval)")
    if sampling_rate is not None:
        if not 0.0 < sampling_rate <= 1.0:
            raise BenchError(f'invalid sampling rate: "{_num(sampling_rate)}"')
        if log_prefix is None:
            raise BenchError("log sampling (--sampling-rate) is allowed only when logging "
                             "transactions (-l)")
    if progress_timestamp and progress is None:
        raise BenchError("--progress-timestamp is allowed only under --progress")


def _num(v) -> str:
    return str(int(v)) if isinstance(v, (int, float)) and float(v).is_integer() else str(v)


def _typed(v):
    """A ``-D`` value: an integer or a double when it reads as one, else the text."""
    if isinstance(v, (int, float)):
        return v
    s = str(v)
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


def _scripts(script, files, aps) -> list[Script]:
    specs = script if isinstance(script, (list, tuple)) else ([script] if script else [])
    out = []
    try:
        for s in specs:
            out.append(s if isinstance(s, Script) else
                       builtin_script(s, accounts_per_scale=aps))
        for f in files:
            out.append(load_script(f))
        if not out:
            out.append(builtin_script("tpcb-like", accounts_per_scale=aps))
    except ScriptError as e:
        raise BenchError(str(e)) from None
    if sum(s.weight for s in out) == 0:
        raise BenchError("total script weight must not be zero")
    return out


def _seed(random_seed) -> int:
    if random_seed is None or random_seed == "time":
        return time.time_ns() & ((1 << 63) - 1)
    if random_seed == "rand":
        return int.from_bytes(os.urandom(8), "little") >> 1
    try:
        return int(random_seed)
    except (TypeError, ValueError):
        raise BenchError(f'unrecognized random seed option "{random_seed}": expecting an '
                         'unsigned integer, "time" or "rand"') from None


def _count_branches(engine, inst) -> int:
    try:
        n = engine.execute("SELECT count(*) FROM pgbench_branches").rows[0][0]
    except errors.Error as e:
        raise BenchError(f"could not count number of branches: ERROR:  {e}\n"
                         f'hint: Perhaps you need to do initialization ("minidb bench -i") '
                         f'in data directory "{inst.datadir}"') from None
    if not n:
        raise BenchError(f"count(*) from pgbench_branches invalid ({n})")
    return int(n)


def _supports_current_timestamp(engine) -> bool:
    try:
        engine.prepare("SELECT CURRENT_TIMESTAMP")
        return True
    except errors.NotSupportedError:
        return False


def _pre_run_vacuum(engine, vacuum_all: bool, say) -> None:
    def attempt(sql):
        try:
            engine.execute(sql)
        except errors.Error as e:
            say(f"minidb bench: error: ERROR:  {e}\n(ignoring this error and continuing anyway)")
    say("starting vacuum...", end="")
    for sql in ("VACUUM pgbench_branches", "VACUUM pgbench_tellers",
                "TRUNCATE pgbench_history"):
        attempt(sql)
    say("end.")
    if vacuum_all:
        say("starting vacuum pgbench_accounts...", end="")
        attempt("VACUUM ANALYZE pgbench_accounts")
        say("end.")


def _expect(scripts) -> str:
    kinds = {s.builtin for s in scripts}
    if None in kinds:
        return "tpcb-like"   # a custom script: check it as TPC-B-like (the user asked)
    writers = kinds - {"select-only"}
    if not writers:
        return "select-only"
    if writers == {"tpcb-like"}:
        return "tpcb-like"
    if writers == {"simple-update"}:
        return "simple-update"
    return "mixed"


def _committed_writes(scripts, res) -> int | None:
    if any(s.builtin is None for s in scripts):
        return None
    return sum(st.committed for s, st in zip(scripts, res.scripts) if s.writes)


# ---------------------------------------------------------------------------------------------
# process orchestration (the parent)
def _run_clients(plan: Plan, res: BenchResult, nclients: int, progress, say,
                 progress_timestamp: bool = False) -> tuple[list, float]:
    """Fork the clients, wait for them, sum their figures into ``res``; returns the
    clients' reports and the start time."""
    ctx = multiprocessing.get_context("fork")
    shared = ctx.RawArray("d", nclients * P_WIDTH)
    start = ctx.RawValue("d", 0.0)
    connected = ctx.RawArray("d", nclients)

    def stamp():
        start.value = time.perf_counter()
    barrier = ctx.Barrier(nclients + 1, action=stamp, timeout=CONNECT_TIMEOUT_S)
    procs, conns = [], []
    t_fork = time.perf_counter()
    try:
        for cid in range(nclients):
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=client_entry,
                            args=(plan, cid, shared, start, connected, barrier, send),
                            name=f"minidb-bench-client-{cid}", daemon=True)
            p.start()
            send.close()  # the child holds the only write end: EOF if it dies
            procs.append(p)
            conns.append(recv)
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            msgs = _collect_errors(conns, procs)
            raise BenchError("clients could not connect:\n" + "\n".join(msgs)) from None
        t0 = start.value
        res.initial_connection_ms = (max(connected) - t_fork) * 1000.0
        results = _wait_for_clients(procs, conns, shared, t0, progress, plan, res, say,
                                    progress_timestamp)
    finally:
        for p in procs:
            if p.is_alive():
                p.join(5)
            if p.is_alive():  # pragma: no cover - a client stuck after the run
                p.terminate()
                p.join(5)
        for c in conns:
            c.close()
    _sum_results(res, results, t0, t_fork, plan, nclients)
    return results, t0


def _collect_errors(conns, procs) -> list[str]:
    msgs, others = [], []
    for cid, c in enumerate(conns):
        try:
            if c.poll(2.0):
                r = c.recv()
                if r.get("error"):
                    (others if r.get("bystander") else msgs).append(f"client {cid}: {r['error']}")
        except (EOFError, OSError):
            msgs.append(f"client {cid}: process ended (exit code {procs[cid].exitcode})")
    return msgs or others or ["(no client reported an error)"]


def _wait_for_clients(procs, conns, shared, t0, progress, plan, res, say,
                      progress_timestamp=False) -> list:
    results: list = [None] * len(procs)
    pending = {c: i for i, c in enumerate(conns)}
    view = np.frombuffer(shared, dtype=np.float64).reshape(len(procs), P_WIDTH)
    last = np.zeros(P_WIDTH)
    last_t = t0
    next_report = t0 + progress if progress else None
    duration, max_tries = plan.duration, plan.max_tries
    while pending:
        timeout = None if next_report is None else max(next_report - time.perf_counter(), 0)
        ready = multiprocessing.connection.wait(list(pending), timeout)
        for c in ready:
            i = pending.pop(c)
            try:
                results[i] = c.recv()
            except (EOFError, OSError):
                procs[i].join(5)
                results[i] = {"died": f"client {i} process ended without reporting "
                                      f"(exit code {procs[i].exitcode})"}
            msg = results[i].get("abort") or results[i].get("died")
            if msg:
                say(f"minidb bench: error: {msg}")
        now = time.perf_counter()
        if not pending and next_report is not None and duration is not None:
            # -T: the report due at the deadline itself, which pgbench's threads print
            # as they finish
            if next_report - t0 <= duration + 1e-6:
                now = max(now, next_report)
        if next_report is not None and now >= next_report:
            cur = view.sum(axis=0)
            d = cur - last
            n = int(d[P_COMMITTED])
            lat = d[P_LAT] / n if n else 0.0
            sd = report.stddev(n, d[P_LAT], d[P_LAT2])
            tps = n / (now - last_t) if now > last_t else 0.0
            retr = (int(d[P_RETRIED]), int(d[P_RETRIES])) if max_tries != 1 else (None, None)
            lag = (d[P_LAG] / n if n else 0.0) if plan.rate else None
            skipped = int(d[P_SKIPPED]) if plan.rate and plan.latency_limit_ms else None
            epoch = now + plan.epoch_shift if progress_timestamp else None
            say(report.progress_line(now - t0, tps, lat, sd, int(d[P_FAILED]), *retr,
                                     lag_ms=lag, skipped=skipped, epoch_s=epoch))
            res.progress.append((now - t0, tps, lat, sd, int(d[P_FAILED])))
            last, last_t = cur, now
            while next_report <= now:
                next_report += progress
    return results


def _sum_results(res: BenchResult, results: list, t0: float, t_fork: float, plan: Plan,
                 nclients: int):
    ends = []
    lats = []
    cmds = [[CommandStats(c.text) for c in s.commands] for s in plan.scripts]
    for r in results:
        if r is None:
            continue
        if "abort" in r:
            res.aborted.append(r["abort"])
        if "died" in r:
            res.aborted.append(r["died"])
            continue
        ends.append(r["end"])
        res.late += r["late"]
        res.lag_max_ms = max(res.lag_max_ms, r["lag_max_ms"])
        res.connections += r["connections"]
        res.connection_time_ms += r["conn_time_s"] * 1000.0
        for total, part in zip(res.scripts, r["scripts"]):
            total.add(part)
        lats.append(np.frombuffer(r["latencies"], dtype=np.float64))
        if plan.per_command:
            for si, per in enumerate(r["commands"]):
                for ci, (n, s, f, rt) in enumerate(per):
                    c = cmds[si][ci]
                    c.count += n
                    c.latency_sum_ms += s
                    c.failures += f
                    c.retries += rt
    for k in ("committed", "failed", "skipped", "serialization_failures",
              "deadlock_failures", "retried", "retries"):
        total = sum(getattr(s, k) for s in res.scripts)
        setattr(res, "processed" if k == "committed" else k, total)
    res.bench_duration = (max(ends) - t0) if ends else 0.0
    lat_sum = sum(s.latency_sum_ms for s in res.scripts)
    lat_sum2 = sum(s.latency_sum2_ms for s in res.scripts)
    res.latency_avg_ms = lat_sum / res.processed if res.processed else 0.0
    res.latency_stddev_ms = report.stddev(res.processed, lat_sum, lat_sum2)
    lag_sum = sum(s.lag_sum_ms for s in res.scripts)
    res.lag_avg_ms = lag_sum / res.processed if res.processed else 0.0
    ended = res.processed + res.failed
    res.latency_estimated_ms = (1000.0 * res.bench_duration * nclients / ended) if ended else 0.0
    res.tps = res.processed / res.bench_duration if res.bench_duration > 0 else 0.0
    if ends:
        res.tps_including_connections = res.processed / (max(ends) - t_fork)
    res.latencies_ms = np.concatenate(lats) if lats else np.zeros(0)
    if plan.per_command:
        res.commands = cmds


