"""minidb bench: pgbench's workload, options and output, for minidb (see README.md here).

Python API (the experiments under ``minidb/experiments`` use it)::

    from minidb.pgbench import init_pgbench, run_bench, check_balances
    init_pgbench("data", scale=10)                       # minidb bench -i -s 10 data
    r = run_bench("data", clients=5, transactions=1000,  # minidb bench -c 5 -t 1000 -n data
                  no_vacuum=True, mode="prepared")
    r.tps, r.latency_avg_ms, r.failed, r.tables["pgbench_branches"]["pages"]
    print(r)                                             # pgbench's summary lines
    assert check_balances("data")
"""

from minidb.pgbench.check import BalanceState, CheckResult, check_balances, table_sizes
from minidb.pgbench.conn import BenchError
from minidb.pgbench.driver import run_bench
from minidb.pgbench.results import BenchResult, CommandStats, ScriptStats
from minidb.pgbench.init import InitResult, init_pgbench
from minidb.pgbench.scripts import (BUILTIN_SCRIPTS, Script, ScriptError, builtin_script,
                                  load_script, parse_script)

__all__ = ["run_bench", "init_pgbench", "check_balances", "table_sizes", "BenchResult",
           "ScriptStats", "CommandStats", "InitResult", "CheckResult", "BalanceState",
           "BenchError", "Script", "ScriptError", "BUILTIN_SCRIPTS", "builtin_script",
           "load_script", "parse_script"]
