"""One benchmark client: a process forked by ``driver.run_bench``.

The client opens its own session (``conn.connect``: the run's session settings SET),
compiles each command of each script into a callable (``\\set`` -> the expression's
closure; SQL -> ``Engine.execute`` of the text with the values written in (simple),
``Engine.execute`` of the ``?`` text with parameters (extended), or a ``Prepared``
(prepared)), waits at the start barrier, then runs transactions:

====================  ===========================================================================
outcome of a try      what happens
====================  ===========================================================================
committed             latency (first try to end) counted; progress counters bumped
40001 / 40P01         rollback; if tries and time remain: restore the random generator's state
                      (same draws) and try again; else the transaction is *failed*
any other error       rollback; the client is *aborted* (reported, the run goes on without it)
script ends in BEGIN  the client is aborted ("end of script reached without completing ...")
====================  ===========================================================================

Rate limit (``-R``): each client keeps its own schedule, a Poisson process at ``rate /
clients`` transactions per second (pgbench keeps one per thread; the clients' independent
Poisson processes add up to one at the total rate).  The next start is the previous one plus
an exponentially distributed delay drawn from a generator of its own (a retry restores the
script's generator, never the schedule's); the client sleeps until then.  The schedule lag
is the actual start minus the scheduled start, and latency is measured from the scheduled
start, as pgbench measures it.  With ``-L`` too, a transaction whose scheduled start is
already more than the limit in the past is *skipped*: counted, logged, not run (with ``-t``
it counts towards the client's transactions).  ``-L`` alone counts committed transactions
whose latency exceeds it ("late").

``-C``: the client closes its session after every transaction and opens a new one (SETs and
prepared statements included) before the next; the time spent connecting and closing is
summed as pgbench's connection time.

``-l``: each client records one tuple per transaction (``LOG_*`` fields: transaction number,
status, latency and lag in microseconds, script, end time in microseconds since the epoch,
retries) and sends them with its figures; the parent writes pgbench's log files
(``driver._write_logs``).

Progress counters live in shared memory (one row of ``P_WIDTH`` doubles per client) so
the parent can print ``-P`` lines without talking to the clients; the final figures go
back through a pipe as one dict.
"""

from __future__ import annotations

import datetime
import math
import random
import re
import sys
import threading
import time
import traceback
from array import array
from dataclasses import dataclass


import minidb.errors as errors
from minidb.pgbench.conn import BenchError, connect
from minidb.pgbench.expr import ExprError, to_sql_text
from minidb.pgbench.results import ScriptStats

__all__ = ["Plan", "client_entry", "P_WIDTH", "P_COMMITTED", "P_FAILED", "P_RETRIED",
           "P_RETRIES", "P_LAT", "P_LAT2", "P_LAG", "P_SKIPPED", "LOG_OK", "LOG_SKIPPED",
           "LOG_SERIALIZATION", "LOG_DEADLOCK"]

_NOW = "\x00now"                   # pseudo-variable: the current time (CURRENT_TIMESTAMP)
_MISSING = object()                # no such variable (yet): ask _value

# per-client progress counters in shared memory
P_COMMITTED, P_FAILED, P_RETRIED, P_RETRIES, P_LAT, P_LAT2, P_LAG, P_SKIPPED = range(8)
P_WIDTH = 8

# a transaction's status in the -l records
LOG_OK, LOG_SKIPPED, LOG_SERIALIZATION, LOG_DEADLOCK = range(4)


@dataclass
class Plan:
    """What every client needs; inherited through fork, never pickled."""
    inst: object
    settings: dict
    scripts: list
    mode: str
    transactions: int | None
    duration: float | None
    max_tries: int
    verbose_errors: bool
    per_command: bool
    scale: int
    seed: int
    variables: dict
    now_ok: bool
    rate: float | None = None              # -R, transactions per second over all clients
    latency_limit_ms: float | None = None  # -L
    clients: int = 1
    connect_each: bool = False             # -C
    log_xacts: bool = False                # -l
    sampling_rate: float | None = None     # --sampling-rate (-l without aggregation)
    epoch_shift: float = 0.0               # time.time() - time.perf_counter() in the parent
    failures_detailed: bool = False        # the -l files name the failure


def client_entry(plan, cid, shared, start, connected, barrier, send) -> None:
    try:
        client = _Client(plan, cid, shared)
    except BaseException as e:  # noqa: BLE001 - reported to the parent, then give up
        try:
            send.send({"error": _describe(e)})
        finally:
            barrier.abort()
            send.close()
        return
    try:
        connected[cid] = time.perf_counter()
        if plan.connect_each:
            client.close()        # -C: each transaction connects anew
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            send.send({"error": "another client failed to connect", "bystander": True})
            return
        send.send(client.run(start.value))
    except BaseException as e:  # noqa: BLE001
        try:
            send.send({"died": f"client {cid} failed: {_describe(e)}"})
        except OSError:
            pass
    finally:
        client.close()
        send.close()


def _describe(e: BaseException) -> str:
    if isinstance(e, errors.Error):
        return f"ERROR:  {e}"
    if isinstance(e, (ExprError, BenchError)):
        return str(e)
    return "".join(traceback.format_exception_only(type(e), e)).strip() + "\n" + \
        "".join(traceback.format_tb(e.__traceback__))


class _Retryable(Exception):
    def __init__(self, kind: str, cmd: int, err: Exception):
        self.kind, self.cmd, self.err = kind, cmd, err


class _Abort(Exception):
    def __init__(self, cmd: int, message: str):
        self.cmd, self.message = cmd, message


class _Client:
    """One client: its session, compiled scripts, random generator and figures."""

    def __init__(self, plan: Plan, cid: int, shared):
        self.plan = plan
        self.cid = cid
        self.session = None
        self.rng = random.Random(f"{plan.seed}:{cid}")
        self.vars = dict(plan.variables)
        self.vars.update(scale=plan.scale, client_id=cid, random_seed=plan.seed)
        # (a memoryview of doubles: an element's += is ~0.05 us where a numpy view's is
        # ~0.17, and a committed transaction bumps three of them)
        self.progress = memoryview(shared).cast("B").cast("d")[cid * P_WIDTH:
                                                              (cid + 1) * P_WIDTH]
        self.weights = [s.weight for s in plan.scripts]
        self.stats = [ScriptStats(s.desc, s.weight, s.builtin) for s in plan.scripts]
        self.cmd_stats = [[[0, 0.0, 0, 0] for _ in s.commands] for s in plan.scripts]
        self.latencies = array("d")
        self.connections = 0          # -C: connections opened by transactions
        self.conn_time_s = 0.0        # -C: time spent opening and closing them
        self.lag_max_ms = 0.0
        self.late = 0
        self.log = [] if plan.log_xacts else None
        self.open()

    def open(self) -> None:
        """A session with the run's settings and the scripts compiled against it."""
        self.session, self.engine = connect(self.plan.inst, self.plan.settings)
        self.xact = self.session.xact
        try:
            self.runners = [[self._runner(c) for c in s.commands] for s in self.plan.scripts]
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.session is None:
            return
        try:
            self.session.close()
        except Exception:  # pragma: no cover - the process is ending anyway
            pass
        self.session = None

    # -- compiling commands into callables ----------------------------------------------------
    def _runner(self, cmd):
        if cmd.kind == "set":
            fn, var, rng = cmd.expr.fn, cmd.var, self.rng

            def run_set(vs):
                vs[var] = fn(vs, rng)
            return run_set
        if cmd.kind == "sleep":
            fn, unit, rng = cmd.expr.fn, cmd.unit_s, self.rng

            def run_sleep(vs):
                v = fn(vs, rng)
                if type(v) not in (int, float):
                    raise ExprError(f"invalid sleep time {v!r}")
                if v > 0:
                    time.sleep(v * unit)
            return run_sleep
        run = self._sql_runner(cmd)
        if cmd.gset is None:
            return run
        prefix, every = cmd.gset, cmd.aset

        def run_gset(vs):
            r = run(vs)
            if not every and len(r.rows) != 1:
                raise ExprError(f"expected one row, got {len(r.rows)}")
            names = [d[0] for d in (r.description or [])]
            for row in r.rows:
                for name, value in zip(names, row):
                    vs[prefix + name] = value
        return run_gset

    def _sql_runner(self, cmd):
        """A callable running ``cmd`` with the variables' values; it returns the Result."""
        fragments, params = cmd.fragments, cmd.params
        if not self.plan.now_ok:
            fragments, params = _now_as_parameter(fragments, params)
        engine = self.engine
        mode = self.plan.mode
        if mode == "simple":
            first, pairs = fragments[0], list(zip(params, fragments[1:]))

            def run_simple(vs):
                out = [first]
                for name, frag in pairs:
                    v = vs.get(name, _MISSING)
                    if v is _MISSING:        # CURRENT_TIMESTAMP, or an undefined variable
                        v = _value(vs, name)
                    # (an integer, the usual value, written as to_sql_text writes it)
                    out.append(str(v) if type(v) is int else _literal(v))
                    out.append(frag)
                return engine.execute("".join(out))
            return run_simple
        qmark = "?".join(fragments)
        if _NOW in params:
            def values(vs):
                return [_value(vs, n) for n in params]
        else:
            def values(vs):
                try:
                    return [vs[n] for n in params]
                except KeyError as e:
                    raise ExprError(f'undefined variable "{e.args[0]}"') from None
        if mode == "extended":
            def run_extended(vs):
                return engine.execute(qmark, values(vs))
            return run_extended
        # Prepared now, outside the measured interval; a statement that does not parse is
        # prepared again at its first execution, so that its error aborts the client there
        # (as pgbench reports it) instead of failing the connection.
        try:
            holder = [engine.prepare(qmark).execute]
        except errors.Error:
            holder = []

        def run_prepared(vs):
            if not holder:
                holder.append(engine.prepare(qmark).execute)
            return holder[0](values(vs))
        return run_prepared

    # -- the transaction loop -----------------------------------------------------------------
    def run(self, t0: float) -> dict:
        plan = self.plan
        deadline = t0 + plan.duration if plan.duration is not None else None
        nx = plan.transactions
        rate = plan.rate
        if rate:
            mean_s = plan.clients / rate
            schedule = random.Random(f"{plan.seed}:{self.cid}:schedule")
        limit_s = plan.latency_limit_ms / 1000.0 if plan.latency_limit_ms else None
        sampler = random.Random(f"{plan.seed}:{self.cid}:sample") if plan.sampling_rate \
            else None
        trigger = t0
        done = 0
        si = 0
        abort = None
        end = time.perf_counter()
        while True:
            if nx is not None and done >= nx:
                break
            scheduled = None
            if rate:
                trigger += _poisson(schedule, mean_s)
                if deadline is not None and (trigger > deadline or
                                             time.perf_counter() >= deadline):
                    break
                if limit_s is not None:
                    now = time.perf_counter()
                    while trigger < now - limit_s and (nx is None or done < nx):
                        done += 1
                        self._record_skipped(si, done, now, sampler)
                        trigger += _poisson(schedule, mean_s)
                    end = now
                    if (nx is not None and done >= nx) or \
                            (deadline is not None and trigger > deadline):
                        break
                wait = trigger - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                scheduled = trigger
            elif deadline is not None and time.perf_counter() >= deadline:
                break
            if plan.connect_each:
                tc = time.perf_counter()
                self.open()
                self.connections += 1
                self.conn_time_s += time.perf_counter() - tc
            si = self.rng.choices(range(len(self.weights)), self.weights)[0] \
                if len(self.weights) > 1 else 0
            done += 1
            abort = self._transaction(si, done, scheduled, deadline, limit_s, sampler)
            if plan.connect_each:
                tc = time.perf_counter()
                self.close()
                self.conn_time_s += time.perf_counter() - tc
            end = time.perf_counter()
            if abort is not None:
                break
        out = {"end": end, "scripts": self.stats, "latencies": self.latencies.tobytes(),
               "connections": self.connections, "conn_time_s": self.conn_time_s,
               "lag_max_ms": self.lag_max_ms, "late": self.late}
        if self.log is not None:
            out["log"] = self.log
        if plan.per_command:
            out["commands"] = [[tuple(c) for c in per] for per in self.cmd_stats]
        if abort is not None:
            out["abort"] = abort
        return out

    def _transaction(self, si: int, number: int, scheduled, deadline, limit_s,
                     sampler) -> str | None:
        """Run script ``si`` once, with its retries; count and log the outcome.  Returns
        the abort message when the client must stop."""
        plan = self.plan
        rng = self.rng
        prog = self.progress
        st = self.stats[si]
        state = rng.getstate() if plan.max_tries != 1 else None
        tries = 0
        t_start = time.perf_counter()
        status, lat, lag, abort = LOG_OK, 0.0, 0.0, None
        while True:
            tries += 1
            try:
                self._run_script(si)
            except _Retryable as e:
                self._rollback()
                if plan.verbose_errors:
                    _stderr(f"client {self.cid} got an error in command {e.cmd} (SQL) of "
                            f"script {si}; ERROR:  {e.err}")
                if self._can_retry(tries, deadline):
                    if plan.per_command:
                        self.cmd_stats[si][e.cmd][3] += 1
                    if plan.verbose_errors:
                        _stderr(f"client {self.cid} repeats the transaction after the "
                                f"error (try {tries + 1}/{plan.max_tries or 'unlimited'})")
                    rng.setstate(state)
                    continue
                st.failed += 1
                if e.kind == "serialization":
                    st.serialization_failures += 1
                    status = LOG_SERIALIZATION
                else:
                    st.deadlock_failures += 1
                    status = LOG_DEADLOCK
                if plan.per_command:
                    self.cmd_stats[si][e.cmd][2] += 1
                prog[P_FAILED] += 1
            except _Abort as e:
                self._rollback()
                abort = (f"client {self.cid} script {si} aborted in command {e.cmd} "
                         f"query 0: {e.message}")
            else:
                t_end = time.perf_counter()
                # under -R, latency runs from the scheduled start (pgbench's measure)
                lat = (t_end - (t_start if scheduled is None else scheduled)) * 1000.0
                st.committed += 1
                st.latency_sum_ms += lat
                st.latency_sum2_ms += lat * lat
                self.latencies.append(lat)
                prog[P_COMMITTED] += 1
                prog[P_LAT] += lat
                prog[P_LAT2] += lat * lat
                if scheduled is not None:
                    lag = (t_start - scheduled) * 1000.0
                    st.lag_sum_ms += lag
                    self.lag_max_ms = max(self.lag_max_ms, lag)
                    prog[P_LAG] += lag
                if limit_s is not None and lat > limit_s * 1000.0:
                    self.late += 1
            break
        if tries > 1:
            st.retried += 1
            st.retries += tries - 1
            prog[P_RETRIED] += 1
            prog[P_RETRIES] += tries - 1
        if abort is None and self.log is not None and \
                (sampler is None or sampler.random() <= plan.sampling_rate):
            self.log.append((number, status, round(lat * 1000.0), round(lag * 1000.0), si,
                             self._epoch_us(), tries - 1))
        return abort

    def _record_skipped(self, si: int, number: int, now: float, sampler) -> None:
        self.stats[si].skipped += 1
        self.progress[P_SKIPPED] += 1
        if self.log is not None and \
                (sampler is None or sampler.random() <= self.plan.sampling_rate):
            self.log.append((number, LOG_SKIPPED, 0, 0, si,
                             round((now + self.plan.epoch_shift) * 1e6), 0))

    def _epoch_us(self) -> int:
        return round((time.perf_counter() + self.plan.epoch_shift) * 1e6)

    def _can_retry(self, tries: int, deadline) -> bool:
        mt = self.plan.max_tries
        if mt != 0 and tries >= mt:
            return False
        return deadline is None or time.perf_counter() < deadline

    def _rollback(self) -> None:
        if self.xact.state != "idle":
            self.session.rollback()

    def _run_script(self, si: int) -> None:
        vs = self.vars
        runners = self.runners[si]
        timed = self.plan.per_command
        i = 0
        try:
            if timed:
                cs = self.cmd_stats[si]
                for i, run in enumerate(runners):
                    t = time.perf_counter()
                    run(vs)
                    c = cs[i]
                    c[0] += 1
                    c[1] += (time.perf_counter() - t) * 1000.0
            else:
                for i, run in enumerate(runners):
                    run(vs)
        except errors.SerializationFailure as e:
            raise _Retryable("serialization", i, e) from None
        except errors.DeadlockDetected as e:
            raise _Retryable("deadlock", i, e) from None
        except errors.Error as e:
            raise _Abort(i, f"ERROR:  {e}") from None
        except ExprError as e:
            raise _Abort(i, f"evaluation of meta-command failed: {e}") from None
        except Exception as e:  # noqa: BLE001 - a bug somewhere below: report it whole
            raise _Abort(i, _describe(e)) from None
        if self.xact.in_block:
            raise _Abort(len(runners) - 1, "end of script reached without completing the "
                                           "last transaction")


def _poisson(rng: random.Random, mean_s: float) -> float:
    """The delay to the next scheduled start: exponential with mean ``mean_s`` seconds,
    rounded to a microsecond as pgbench's ``getPoissonRand``."""
    return round(-math.log(1.0 - rng.random()) * mean_s * 1e6) / 1e6


def _value(vs: dict, name: str):
    if name == _NOW:
        return datetime.datetime.now()
    try:
        return vs[name]
    except KeyError:
        raise ExprError(f'undefined variable "{name}"') from None


def _literal(v) -> str:
    if isinstance(v, datetime.datetime):
        return f"'{v.isoformat(sep=' ')}'"
    if isinstance(v, str):
        # a text value (-D, \gset) becomes a string literal, so that ":name" works the same
        # in every query mode; pgbench writes it in unquoted
        return "'" + v.replace("'", "''") + "'"
    return to_sql_text(v)


def _now_as_parameter(fragments: list, params: list) -> tuple[list, list]:
    """Replace CURRENT_TIMESTAMP in the fragments by the pseudo-variable _NOW."""
    pat = re.compile(r"\bcurrent_timestamp\b", re.IGNORECASE)
    new_f, new_p = [], []
    for i, frag in enumerate(fragments):
        pieces = pat.split(frag)
        if new_f:
            new_f[-1] += pieces[0]
        else:
            new_f.append(pieces[0])
        for piece in pieces[1:]:
            new_p.append(_NOW)
            new_f.append(piece)
        if i < len(params):
            new_p.append(params[i])
            new_f.append("")
    return new_f, new_p


def _stderr(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()
