"""The ``minidb bench`` click command (registered on ``minidb.cli.main``).

Options are pgbench's, spelled as pgbench spells them; see README.md in this package.  Exit
status: 0 success; 1 bad arguments, unusable tables or a failed initialization; 2 the run
was aborted (a client hit an error other than a serialization failure or a deadlock); 3
``--check`` found the balances inconsistent.

Heavy modules are imported inside the command, so that ``minidb --help`` stays fast.
"""

from __future__ import annotations

import sys

import click

__all__ = ["bench"]

_INIT_ONLY = ("init_steps", "fillfactor", "quiet", "foreign_keys")
_RUN_ONLY = ("client", "jobs", "transactions", "duration", "progress", "protocol", "builtin",
             "select_only", "skip_some_updates", "files", "define", "report_per_command",
             "vacuum_all", "max_tries", "failures_detailed", "verbose_errors", "random_seed",
             "check", "rate", "latency_limit", "connect", "log", "log_prefix",
             "aggregate_interval", "sampling_rate", "progress_timestamp", "wal_stats")
INT_MAX = 2147483647


def _int_option(text, name: str, lo: int = 1):
    """An integer option checked as pgbench 15 checks it (``option_parse_int``)."""
    if text is None:
        return None
    try:
        v = int(str(text).strip())
    except ValueError:
        from minidb.pgbench.conn import BenchError
        raise BenchError(f'invalid value "{text}" for option {name}') from None
    if not lo <= v <= INT_MAX:
        from minidb.pgbench.conn import BenchError
        raise BenchError(f"{name} must be in range {lo}..{INT_MAX}")
    return v


def _float_option(text, what: str):
    """A double option (-R, -L, --sampling-rate): pgbench's 'invalid rate limit: "x"'."""
    if text is None:
        return None
    try:
        v = float(str(text).strip())
    except ValueError:
        v = float("nan")
    if not v > 0:
        from minidb.pgbench.conn import BenchError
        raise BenchError(f'invalid {what}: "{text}"')
    return v


def version_line() -> str:
    """The first line of a run's output: pgbench's ``pgbench (15.18)``, minidb's own."""
    return f"pgbench ({_version()}, pgbench 15 compatible)"


def _print_version(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    v = _version().split(" ", 1)
    click.echo(f"pgbench ({v[0]}) {v[1]}, pgbench 15 compatible")
    ctx.exit(0)


def _pairs(items, option: str) -> dict:
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint=option)
        out[name.strip()] = value.strip()
    return out


@click.command(context_settings={"help_option_names": ["--help"]})
@click.argument("datadir", required=False, default="minidb-data")
@click.option("-h", "--host", default=None, metavar="HOSTNAME",
              help="a minidb serve to benchmark through its socket: the directory that holds "
                   "the socket (a served DATADIR) or a TCP address (a served DATADIR given "
                   "as the argument is reached through its socket too)")
@click.option("-p", "--port", type=int, default=None, help="the server's port (5432)")
@click.option("-U", "--username", default=None, help="user name for the server")
@click.option("-i", "--initialize", is_flag=True, help="create and fill pgbench's tables")
@click.option("-I", "--init-steps", metavar="[dtgvp]+",
              help="initialization steps (default dtgvp: drop, tables, generate, vacuum, "
                   "primary keys)")
@click.option("-F", "--fillfactor", type=int, default=100, show_default=True,
              help="-i: fill the tables' pages to this percentage")
@click.option("-q", "--quiet", is_flag=True, help="-i: a progress line every 5 s only")
@click.option("--foreign-keys", is_flag=True, hidden=True)
@click.option("-s", "--scale", default=None, metavar="NUM",
              help="-i: scale factor (default 1); runs: reported only (custom scripts)")
@click.option("-n", "--no-vacuum", is_flag=True,
              help="-i: no VACUUM step; runs: no VACUUM/TRUNCATE before the run")
@click.option("-c", "--client", type=int, default=1, show_default=True,
              help="concurrent clients (each a forked process)")
@click.option("-j", "--jobs", type=int, default=1, show_default=True,
              help="accepted and reported as pgbench's threads; every client is a process")
@click.option("-t", "--transactions", type=int, default=None,
              help="transactions per client (default 10)")
@click.option("-T", "--time", "duration", type=float, default=None,
              help="run for this many seconds instead")
@click.option("-P", "--progress", type=float, default=None, metavar="SEC",
              help="a progress line every SEC seconds")
@click.option("-M", "--protocol", type=click.Choice(["simple", "extended", "prepared"]),
              default="simple", show_default=True, help="how statements reach the engine")
@click.option("-b", "--builtin", multiple=True, metavar="NAME[@W]",
              help="built-in script (tpcb-like, simple-update, select-only; 'list' lists "
                   "them)")
@click.option("-S", "--select-only", is_flag=True, help="same as -b select-only")
@click.option("-N", "--skip-some-updates", is_flag=True, help="same as -b simple-update")
@click.option("-f", "--file", "files", multiple=True, metavar="FILE[@W]",
              help="a script file (pgbench syntax: SQL and \\set / \\sleep)")
@click.option("-D", "--define", multiple=True, metavar="NAME=VALUE",
              help="a script variable")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="a minidb setting for every session (SET), e.g. enable_seqscan=off")
@click.option("-r", "--report-per-command", is_flag=True,
              help="per-statement latencies, failures and retries")
@click.option("-v", "--vacuum-all", is_flag=True,
              help="also VACUUM ANALYZE pgbench_accounts before the run")
@click.option("--max-tries", type=int, default=1, show_default=True,
              help="tries per transaction on serialization failures and deadlocks (0: "
                   "unlimited, with -T)")
@click.option("--failures-detailed", is_flag=True,
              help="report serialization failures and deadlocks separately")
@click.option("--verbose-errors", is_flag=True, help="print every failure and retry")
@click.option("--random-seed", default=None, metavar="SEED|time|rand",
              help="seed of the clients' random generators (default: time)")
@click.option("--check", is_flag=True,
              help="after the run, check that balances and history deltas agree")
@click.option("-R", "--rate", default=None, metavar="NUM",
              help="target rate in transactions per second (a Poisson schedule; the "
                   "summary adds the schedule lag)")
@click.option("-L", "--latency-limit", default=None, metavar="NUM",
              help="count transactions lasting more than NUM ms as late; with -R, skip "
                   "those that could only start later than that")
@click.option("-C", "--connect", is_flag=True,
              help="a new connection (session) for each transaction")
@click.option("-l", "--log", is_flag=True,
              help="write transaction times to log files (pgbench_log.PID[.N])")
@click.option("--log-prefix", default=None, metavar="PREFIX",
              help='prefix of the log files (default: "pgbench_log")')
@click.option("--aggregate-interval", default=None, metavar="NUM",
              help="-l: aggregate the log over NUM seconds")
@click.option("--sampling-rate", default=None, metavar="NUM",
              help="-l: fraction of transactions to log (e.g. 0.01 for 1%)")
@click.option("--progress-timestamp", is_flag=True,
              help="use Unix epoch timestamps for progress")
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="output version information, then exit")
@click.option("--wal-stats", is_flag=True,
              help="after the summary, one line of the WAL the run wrote (records, full-page "
                   "images, bytes, flushes; per transaction)")
@click.option("--accounts-per-scale", type=int, default=None, hidden=True)
@click.pass_context
def bench(ctx, datadir, host, port, username, initialize, init_steps, fillfactor, quiet, foreign_keys, scale,
          no_vacuum, client, jobs, transactions, duration, progress, protocol, builtin,
          select_only, skip_some_updates, files, define, settings, report_per_command,
          vacuum_all, max_tries, failures_detailed, verbose_errors, random_seed, check,
          rate, latency_limit, connect, log, log_prefix, aggregate_interval, sampling_rate,
          progress_timestamp, wal_stats, accounts_per_scale):
    """pgbench for minidb: -i creates pgbench's tables in DATADIR; otherwise run
    clients against them and print pgbench's summary."""
    from minidb.pgbench.conn import BenchError
    from minidb.pgbench.scripts import BUILTIN_SCRIPTS, NACCOUNTS

    def given(name):
        src = ctx.get_parameter_source(name)
        return src is not None and src.name == "COMMANDLINE"

    err = click.get_text_stream("stderr")
    target = datadir
    if host is not None:
        from minidb.pgbench.conn import Served
        target = Served(host=host, port=port, user=username)
    aps = accounts_per_scale or NACCOUNTS
    try:
        sets = _pairs(settings, "--set")
        scale = _int_option(scale, "-s/--scale")
        if "list" in builtin:
            click.echo("Available builtin scripts:", err=True)
            for name, (desc, _) in BUILTIN_SCRIPTS.items():
                click.echo(f"{name:>15}: {desc}", err=True)
            sys.exit(0)
        if initialize:
            if any(given(n) for n in _RUN_ONLY):
                raise BenchError("some of the specified options cannot be used in "
                                 "initialization (-i) mode")
            if foreign_keys:
                raise BenchError("foreign keys (--foreign-keys) are not supported by minidb")
            from minidb.pgbench.init import init_pgbench
            # (a DATADIR that a server holds goes through its socket, as -h does)
            init_pgbench(target, scale or 1, fillfactor=fillfactor, vacuum=not no_vacuum,
                         steps=init_steps, quiet=quiet, accounts_per_scale=aps,
                         settings=sets, log=err)
            sys.exit(0)
        if any(given(n) for n in _INIT_ONLY):
            raise BenchError("some of the specified options cannot be used in benchmarking "
                             "mode")
        from minidb.pgbench.driver import run_bench
        from minidb.pgbench.report import check_lines
        rate = _float_option(rate, "rate limit")
        latency_limit = _float_option(latency_limit, "latency limit")
        sampling_rate = _float_option(sampling_rate, "sampling rate")
        aggregate_interval = _int_option(aggregate_interval, "--aggregate-interval")
        if log_prefix is not None and not log:
            raise BenchError("log file prefix (--log-prefix) is allowed only when logging "
                             "transactions (-l)")
        scripts = list(builtin)
        if select_only:
            scripts.append("select-only")
        if skip_some_updates:
            scripts.append("simple-update")
        r = run_bench(target, clients=client, threads=jobs, transactions=transactions,
                      duration=duration, script=scripts, files=files, mode=protocol,
                      scale=scale, settings=sets, variables=_pairs(define, "-D"),
                      no_vacuum=no_vacuum, vacuum_all=vacuum_all, progress=progress,
                      max_tries=max_tries, failures_detailed=failures_detailed,
                      verbose_errors=verbose_errors, per_command=report_per_command,
                      check=check, random_seed=random_seed, accounts_per_scale=aps, log=err,
                      rate=rate, latency_limit=latency_limit, connect_each=connect,
                      log_prefix=(log_prefix or "pgbench_log") if log else None,
                      aggregate_interval=aggregate_interval, sampling_rate=sampling_rate,
                      progress_timestamp=progress_timestamp)
    except BenchError as e:
        click.echo(f"minidb bench: error: {e}", err=True)
        sys.exit(1)
    click.echo(version_line())
    for line in r.lines():
        click.echo(line)
    if wal_stats:
        click.echo(r.wal_line())
    status = 0
    if r.aborted:
        click.echo("minidb bench: error: Run was aborted; the above results are incomplete.",
                   err=True)
        status = 2
    if r.check is not None:
        for line in check_lines(r.check):
            click.echo(line)
        if not r.check.ok:
            click.echo("minidb bench: error: --check: the balances do not agree", err=True)
            status = status or 3
    sys.stdout.flush()
    sys.exit(status)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return "minidb " + version("minidb")
    except PackageNotFoundError:
        return "minidb (source tree)"
