"""``--check``: do the balances agree with the history?  And what the tables look like.

Every committed TPC-B-like transaction adds the same ``delta`` to one account, one teller
and one branch, and inserts one pgbench_history row carrying that delta and the three ids.
So, starting from pgbench's initial state (all balances 0, history empty):

1. sum(abalance) = sum(tbalance) = sum(bbalance) = sum(delta);
2. per branch: bbalance of b = sum(delta) of the history rows with bid = b;
3. per teller: tbalance of t = sum(delta) of the history rows with tid = t;
4. per account: abalance of a = sum(delta) of the history rows with aid = a (checked as
   per-branch sums of the accounts, grouped by the account's own branch, and exactly for
   every account whose balance is not 0 or that appears in the history).

A lost update (two clients adding to the same branch row, one overwriting the other) breaks
2; a transaction half applied breaks 1.  The simple-update script touches only accounts and
history (tellers and branches must not change); select-only changes nothing.

``check_balances(target)`` checks the *absolute* rules above: they hold after ``-i`` and any
number of runs that did not truncate the history (``-n``).  A run without ``-n`` truncates
pgbench_history first, as pgbench does, which breaks the absolute rules once balances are
not 0; so ``run_bench(check=True)`` takes a ``BalanceState`` before its clients start and
checks the *changes* instead (rules 1-3 and the per-branch sums of 4 on the differences),
plus: history rows added = transactions committed by the writing built-in scripts.

``table_sizes(inst)`` reports each pgbench table's heap pages, its indexes' pages and its
``pg_stat_user_tables`` counters (live and dead tuples, updates, HOT updates).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from minidb.pgbench.conn import BenchError, connect, open_target
from minidb.pgbench.scripts import NACCOUNTS

__all__ = ["BalanceState", "CheckResult", "balance_state", "check_balances", "compare_states",
           "table_sizes"]

_TABLES = ("pgbench_accounts", "pgbench_tellers", "pgbench_branches", "pgbench_history")


@dataclass
class BalanceState:
    """Aggregates of the four tables at one moment (dicts map an id to a sum)."""
    accounts_total: int = 0
    tellers_total: int = 0
    branches_total: int = 0
    history_total: int = 0
    history_rows: int = 0
    branch: dict = field(default_factory=dict)          # bid -> bbalance
    teller: dict = field(default_factory=dict)          # tid -> tbalance
    account_branch: dict = field(default_factory=dict)  # account's bid -> sum(abalance)
    hist_bid: dict = field(default_factory=dict)        # bid -> sum(delta)
    hist_tid: dict = field(default_factory=dict)        # tid -> sum(delta)
    hist_account_branch: dict = field(default_factory=dict)  # (aid-1)//N+1 -> sum(delta)


@dataclass
class CheckResult:
    ok: bool
    summary: str
    problems: list = field(default_factory=list)
    state: BalanceState | None = None

    def __bool__(self) -> bool:
        return self.ok


def _one(engine, sql) -> int:
    v = engine.execute(sql).rows[0][0]
    return int(v) if v is not None else 0


def _pairs(engine, sql) -> dict:
    return {int(k): int(v) for k, v in engine.execute(sql).rows if k is not None and v}


def balance_state(engine, accounts_per_scale: int = NACCOUNTS) -> BalanceState:
    """Read the aggregates through ``engine`` (one statement each, READ COMMITTED: call it
    when no client is running)."""
    n = int(accounts_per_scale)
    try:
        return BalanceState(
            accounts_total=_one(engine, "SELECT sum(abalance) FROM pgbench_accounts"),
            tellers_total=_one(engine, "SELECT sum(tbalance) FROM pgbench_tellers"),
            branches_total=_one(engine, "SELECT sum(bbalance) FROM pgbench_branches"),
            history_total=_one(engine, "SELECT sum(delta) FROM pgbench_history"),
            history_rows=_one(engine, "SELECT count(*) FROM pgbench_history"),
            branch=_pairs(engine, "SELECT bid, bbalance FROM pgbench_branches"),
            teller=_pairs(engine, "SELECT tid, tbalance FROM pgbench_tellers"),
            account_branch=_pairs(engine, "SELECT bid, sum(abalance) FROM pgbench_accounts "
                                          "GROUP BY bid"),
            hist_bid=_pairs(engine, "SELECT bid, sum(delta) FROM pgbench_history GROUP BY bid"),
            hist_tid=_pairs(engine, "SELECT tid, sum(delta) FROM pgbench_history GROUP BY tid"),
            hist_account_branch=_pairs(
                engine, f"SELECT (aid - 1) / {n} + 1, sum(delta) FROM pgbench_history "
                        f"GROUP BY (aid - 1) / {n} + 1"),
        )
    except Exception as e:  # a missing table, most likely
        raise BenchError(f"could not read the pgbench tables: {e}") from e


def _diff(after: dict, before: dict) -> dict:
    out = Counter(after)
    out.subtract(before)
    return {k: v for k, v in out.items() if v}


def _compare_maps(what: str, left: dict, right: dict, lname: str, rname: str, problems: list,
                  limit: int = 5) -> None:
    keys = sorted(set(left) | set(right))
    bad = [k for k in keys if left.get(k, 0) != right.get(k, 0)]
    for k in bad[:limit]:
        problems.append(f"{what} {k}: {lname} {left.get(k, 0)} != {rname} {right.get(k, 0)}")
    if len(bad) > limit:
        problems.append(f"... and {len(bad) - limit} more {what}s disagree")


def compare_states(before: BalanceState | None, after: BalanceState, *,
                   expect: str = "tpcb-like", committed_writes: int | None = None
                   ) -> CheckResult:
    """Check the changes from ``before`` to ``after`` (``before`` None: from pgbench's
    initial state).  ``expect``: "tpcb-like" (all rules), "simple-update" (accounts ==
    history; tellers and branches unchanged), "select-only" (nothing changes), "mixed"
    (tpcb-like and simple-update: accounts == history, tellers == branches in total).
    ``committed_writes``: history rows the run must have added, when known."""
    b = before or BalanceState()
    d_acc = after.accounts_total - b.accounts_total
    d_tel = after.tellers_total - b.tellers_total
    d_br = after.branches_total - b.branches_total
    d_hist = after.history_total - b.history_total
    d_rows = after.history_rows - b.history_rows
    problems: list[str] = []
    hist_acc = _diff(after.hist_account_branch, b.hist_account_branch)
    acc_br = _diff(after.account_branch, b.account_branch)
    if expect == "select-only":
        for name, v in (("accounts", d_acc), ("tellers", d_tel), ("branches", d_br),
                        ("history deltas", d_hist), ("history rows", d_rows)):
            if v:
                problems.append(f"{name} changed by {v} in a read-only run")
    else:
        if d_acc != d_hist:
            problems.append(f"sum of account balances {d_acc} != sum of history deltas {d_hist}")
        _compare_maps("branch of accounts", acc_br, hist_acc, "accounts' balances",
                      "history deltas", problems)
        if expect == "tpcb-like":
            if d_tel != d_hist:
                problems.append(f"sum of teller balances {d_tel} != sum of history deltas "
                                f"{d_hist}")
            if d_br != d_hist:
                problems.append(f"sum of branch balances {d_br} != sum of history deltas "
                                f"{d_hist}")
            _compare_maps("branch", _diff(after.branch, b.branch),
                          _diff(after.hist_bid, b.hist_bid), "bbalance", "history deltas",
                          problems)
            _compare_maps("teller", _diff(after.teller, b.teller),
                          _diff(after.hist_tid, b.hist_tid), "tbalance", "history deltas",
                          problems)
        elif expect == "simple-update":
            if d_tel or d_br:
                problems.append(f"tellers changed by {d_tel} and branches by {d_br}, but "
                                "simple-update does not touch them")
        elif expect == "mixed":
            if d_tel != d_br:
                problems.append(f"sum of teller balances {d_tel} != sum of branch balances "
                                f"{d_br}")
    if committed_writes is not None and d_rows != committed_writes:
        problems.append(f"{d_rows} history rows added, but {committed_writes} writing "
                        "transactions committed")
    what = "changes of " if before is not None else ""
    if expect == "select-only":
        summary = "nothing changed" if not problems else "a read-only run changed the tables"
    elif expect == "tpcb-like":
        summary = (f"{what}accounts = tellers = branches = history deltas = {d_hist}" if not
                   problems else f"{what}accounts {d_acc}, tellers {d_tel}, branches {d_br}, "
                                 f"history deltas {d_hist}")
    else:
        summary = (f"{what}accounts = history deltas = {d_hist}; tellers {d_tel}, "
                   f"branches {d_br}")
    if committed_writes is not None and not problems and expect != "select-only":
        summary += f"; {d_rows} history rows = committed writing transactions"
    return CheckResult(not problems, summary, problems, after)


def _per_account(engine, problems: list, limit: int = 5) -> None:
    """Rule 4 exactly: every account's balance = the sum of its history deltas."""
    bal = _pairs(engine, "SELECT aid, abalance FROM pgbench_accounts WHERE abalance <> 0")
    hist = _pairs(engine, "SELECT aid, sum(delta) FROM pgbench_history GROUP BY aid")
    _compare_maps("account", bal, hist, "abalance", "history deltas", problems, limit)


def check_balances(target, *, accounts_per_scale: int = NACCOUNTS, expect: str = "tpcb-like",
                   settings: dict | None = None) -> CheckResult:
    """The absolute check (rules 1-4 from pgbench's initial state) on a data directory or
    an open Instance."""
    with open_target(target, settings) as (inst, sess):
        session, engine = connect(inst, sess)
        try:
            state = balance_state(engine, accounts_per_scale)
            res = compare_states(None, state, expect=expect)
            if expect != "select-only":
                _per_account(engine, res.problems)
                res.ok = not res.problems
        finally:
            session.close()
    return res


def table_sizes(inst) -> dict:
    """Per pgbench table: heap pages, index pages by name, and its statistics counters."""
    from minidb.heap import pgstat
    if not hasattr(inst, "catalog"):      # a server's (conn.Served): not in this process
        return {}
    cat = inst.catalog
    cat.refresh()
    out = {}
    for name in _TABLES:
        t = cat.tables.get(name)
        if t is None:
            continue
        d = {"pages": inst.smgr.nblocks(t.relfilenode), "indexes": {}}
        for iname in t.indexes:
            i = cat.indexes.get(iname)
            if i is not None:
                d["indexes"][iname] = inst.smgr.nblocks(i.relfilenode)
        d.update(pgstat.read(inst.seg, inst.locks.stats, t.oid))
        out[name] = d
    return out
