"""Replica benchmark: run ``python -m bench.replicas`` (or ``make bench``) from the repository root.

It measures accepted ``SubmitAction`` calls per second on PostgreSQL with one and with two
``pinochle-referee serve`` replicas sharing one database (issue 5, "Several replicas"):

1. It creates a schema of its own in the database (``bench_replicas_<random>``; dropped at the
   end, whatever happens) and starts replica A on it: ``--db <url> --db-schema <schema>``, port
   0 of 127.0.0.1 (the address comes from the ``serving`` log line), metrics off.
2. ``one``: a separate client process (``multiprocessing``, spawn) drives 64 seeded games at
   once on A, one action in flight per game, the legal actions known from a client-side copy of
   the engine (``bench.service.ReplicaGame``), so the servers only see ``SubmitAction``.
3. Replica B is started on the same schema; ``two``: a new client process drives 64 new games,
   32 on each replica (one channel per replica). Every game stays on the replica it was created
   on, so no two replicas write the same game and there should be no version conflicts; any
   ``ABORTED`` response is counted as one (and stops that game's caller), as is any other error.

Each phase has a warm-up, then timed windows; its figure is the best window. For each window the
client process records the CPU time (``/proc/<pid>/stat``, every thread) of each server, of
itself, of every PostgreSQL process (postmaster, backends, WAL writer, ...; ``comm`` is
``postgres``) and of the whole machine (``/proc/stat``), each as a share of the window's wall
time (100 % is one core), plus PostgreSQL's own counters (``pg_stat_database.xact_commit``,
``pg_stat_wal.wal_sync``), which PostgreSQL flushes about once a second, so those are
approximate. Every loop is bounded in count and time. The table goes to the console and the
figures are merged into ``bench/results.json`` under the ``"replicas"`` key (the other keys are
kept). Where PostgreSQL cannot be reached the run prints one line saying so and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

import grpc
import psycopg
from pinochle_client import RefereeClient, RefereeError
from psycopg import sql
from rich.console import Console
from rich.table import Table

from bench.engine import add_run_arguments, environment, output_path
from bench.service import (
    CALL_TIMEOUT,
    HOST,
    MAX_CALLS_PER_CALLER,
    RESULTS_FORMAT,
    SEED,
    SERVER_START_TIMEOUT,
    VARIANT,
    Counter,
    Figure,
    ReplicaGame,
    Server,
    _server_command,
    cpu_seconds,
    merge_results,
    run_spawned,
    stop_server,
    wait_serving,
)
from referee.store.postgres import describe

DEFAULT_URL: Final = os.environ.get(
    "PINOCHLE_REFEREE_BENCH_POSTGRES", "postgresql://127.0.0.1:5432/test"
)
SCHEMA_PREFIX: Final = "bench_replicas"
CONNECT_TIMEOUT: Final = 3  # seconds, for the benchmark's own PostgreSQL connections
RESULTS_KEY: Final = "replicas"
OTHER_SHARE_WARNING: Final = 0.1  # more CPU than this taken by other processes: a warning


@dataclass(frozen=True, slots=True)
class Plan:
    """One phase's load; ``--quick`` shrinks it for a smoke run."""

    concurrency: int = 64  # concurrent games, spread evenly over the replicas
    warmup: float = 2.0  # seconds of load before the first window
    window: float = 6.0  # seconds counted per window
    rounds: int = 3  # windows; the best one is the figure


QUICK: Final = Plan(warmup=1.0, window=2.0, rounds=1)


# --------------------------------------------------------------------------------------------
# PostgreSQL


def unreachable(url: str) -> str | None:
    """Why PostgreSQL at ``url`` cannot be used, or None when it can."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        return " ".join(str(error).split())
    return None


@contextlib.contextmanager
def bench_schema(url: str) -> Iterator[str]:
    """A new schema, dropped with everything in it afterwards."""
    schema = f"{SCHEMA_PREFIX}_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield schema
    finally:
        with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def database_settings(url: str) -> dict[str, object]:
    names = ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "commit_delay")
    with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT) as conn:
        settings: dict[str, object] = {
            name: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()[0]  # type: ignore[index]
            for name in names
        }
    return {"url": describe(url), **settings}


async def database_counters(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> dict[str, int]:
    """Committed transactions of this database and WAL syncs of the cluster, so far."""
    cursor = await conn.execute(
        "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),"
        " (SELECT wal_sync FROM pg_stat_wal)"
    )
    row = await cursor.fetchone()
    assert row is not None
    return {"commits": int(str(row[0])), "wal_syncs": int(str(row[1]))}


# --------------------------------------------------------------------------------------------
# CPU accounting from /proc


def postgres_cpu() -> dict[int, float] | None:
    """CPU seconds of every process named ``postgres`` (the cluster's processes), by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            head, _, tail = (entry / "stat").read_text("ascii", "replace").rpartition(")")
            if head.partition("(")[2] == "postgres":
                fields = tail.split()
                found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    return found or None


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine, from the first line of ``/proc/stat``."""
    values = [int(v) for v in Path("/proc/stat").read_text("ascii").splitlines()[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # guest time is already in user
    return (total - idle) / tick, total / tick


def postgres_delta(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    """CPU seconds the cluster used between two readings (processes started since count from 0;
    a backend that exited in between is missed)."""
    if before is None or after is None:
        return None
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


# --------------------------------------------------------------------------------------------
# The replicas


def start_replica(folder: Path, name: str, url: str, schema: str) -> Server:
    """``pinochle-referee serve`` on ``schema`` of ``url``, port 0 of 127.0.0.1."""
    log = folder / f"replica-{name}.log"
    command = [
        *_server_command(),
        "--host",
        HOST,
        "--port",
        "0",
        "--db",
        url,
        "--db-schema",
        schema,
        "--metrics-port",
        "0",
        "--log-format",
        "json",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINOCHLE_REFEREE_")}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=env
        )
    server = Server(process, "", folder, log)  # no SQLite file: ``db`` names the log folder
    deadline = time.perf_counter() + SERVER_START_TIMEOUT
    while time.perf_counter() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"replica {name} exited with {process.returncode}:\n{server.log_tail()}"
            )
        for line in log.read_text("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("event") == "serving":
                    server.address = str(entry["address"])
                    asyncio.run(wait_serving(server.address))
                    return server
        time.sleep(0.05)
    stop_server(server)
    raise RuntimeError(f"replica {name} did not start in {SERVER_START_TIMEOUT:.0f} s")


# --------------------------------------------------------------------------------------------
# The client process


@dataclass(slots=True)
class Tally(Counter):
    conflicts: int = 0  # ABORTED responses (a version conflict)
    per_replica: list[int] = field(default_factory=list)  # accepted actions, by replica


async def _window(
    tally: Tally,
    window: float,
    server_pids: Sequence[int],
    db: psycopg.AsyncConnection[tuple[object, ...]],
) -> dict[str, object]:
    """Count what completes in ``window`` seconds, with every CPU and database reading."""
    db0 = await database_counters(db)
    pg0, machine0 = postgres_cpu(), machine_cpu()
    servers0 = [cpu_seconds(pid) for pid in server_pids]
    count0, replicas0 = tally.done, list(tally.per_replica)
    wall0, client0 = time.perf_counter(), time.process_time()
    await asyncio.sleep(window)
    wall1, client1 = time.perf_counter(), time.process_time()
    count1, replicas1 = tally.done, list(tally.per_replica)
    servers1 = [cpu_seconds(pid) for pid in server_pids]
    pg1, machine1 = postgres_cpu(), machine_cpu()
    db1 = await database_counters(db)
    seconds = wall1 - wall0
    count = count1 - count0
    pg = postgres_delta(pg0, pg1)
    busy, total = machine1[0] - machine0[0], machine1[1] - machine0[1]
    cores = os.cpu_count() or 1
    server_shares = [(b - a) / seconds for a, b in zip(servers0, servers1, strict=True)]
    client_share = (client1 - client0) / seconds
    machine_share = busy / total * cores if total > 0 else None
    other_share = (
        None
        if machine_share is None or pg is None
        else max(0.0, machine_share - sum(server_shares) - client_share - pg / seconds)
    )
    return {
        "count": count,
        "seconds": round(seconds, 4),
        "rate": count / seconds,
        "per_replica_rate": [
            round((b - a) / seconds, 1) for a, b in zip(replicas0, replicas1, strict=True)
        ],
        "server_cpu_share": [round(share, 3) for share in server_shares],
        "client_cpu_share": round(client_share, 3),
        "postgres_cpu_share": None if pg is None else round(pg / seconds, 3),
        # shares of one core, like the others: at most the number of cores
        "machine_cpu_share": None if machine_share is None else round(machine_share, 3),
        "other_cpu_share": None if other_share is None else round(other_share, 3),
        "db_commits": db1["commits"] - db0["commits"],
        "wal_syncs": db1["wal_syncs"] - db0["wal_syncs"],
    }


async def run_load(
    addresses: Sequence[str], server_pids: Sequence[int], plan: Plan, url: str, label: str
) -> dict[str, object]:
    """Play ``plan.concurrency`` games spread over ``addresses``; time ``plan.rounds`` windows."""
    numbers = itertools.count()
    tally = Tally(per_replica=[0] * len(addresses))
    clients = [RefereeClient(address) for address in addresses]
    try:

        async def new_game(replica: int) -> ReplicaGame:
            game = ReplicaGame(clients[replica], f"bench-{SEED}-replicas-{label}-{next(numbers)}")
            await game.create()
            return game

        async def caller(index: int, stop: asyncio.Event) -> None:
            replica = index % len(clients)  # the game's replica, for every game of this caller
            try:
                game = await new_game(replica)
                for _ in range(MAX_CALLS_PER_CALLER):
                    if stop.is_set():
                        return
                    if game.over:
                        game = await new_game(replica)
                    await game.step()
                    tally.done += 1
                    tally.per_replica[replica] += 1
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.ABORTED:
                    tally.conflicts += 1
                tally.failed(error)
            except (RefereeError, RuntimeError) as error:
                if isinstance(error, RefereeError) and error.code == grpc.StatusCode.ABORTED:
                    tally.conflicts += 1
                tally.failed(error)

        stop = asyncio.Event()
        async with await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
        ) as db:
            tasks = [asyncio.create_task(caller(i, stop)) for i in range(plan.concurrency)]
            try:
                await asyncio.sleep(plan.warmup)
                windows = [
                    await _window(tally, plan.window, server_pids, db) for _ in range(plan.rounds)
                ]
            finally:
                stop.set()
                _, pending = await asyncio.wait(tasks, timeout=CALL_TIMEOUT)
                for task in pending:
                    task.cancel()
    finally:
        for client in clients:
            await client.close()
    return {
        "windows": windows,
        "games": next(numbers),
        "actions": tally.done,
        "conflicts": tally.conflicts,
        "errors": tally.errors,
        "first_error": tally.first_error,
    }


def _client_main(
    addresses: list[str], pids: list[int], plan: Plan, url: str, label: str, conn: Connection
) -> None:
    """The client process: run the load under asyncio and send its result (or error) back."""
    try:
        conn.send(("ok", asyncio.run(run_load(addresses, pids, plan, url, label))))
    except BaseException as error:
        conn.send(("error", repr(error)))
        raise
    finally:
        conn.close()


def in_client_process(
    servers: Sequence[Server], plan: Plan, url: str, label: str
) -> dict[str, object]:
    """Run the load in a separate (spawned) process and return what it reports."""
    timeout = plan.warmup + plan.rounds * (plan.window + 5) + 2 * CALL_TIMEOUT + 30
    return run_spawned(
        _client_main,
        ([s.address for s in servers], [s.pid for s in servers], plan, url, label),
        f"bench-replicas-{label}",
        timeout,
    )


# --------------------------------------------------------------------------------------------
# Figures and output


def _share(value: object) -> str:
    return "n/a" if value is None else f"{float(value):.0%}"  # type: ignore[arg-type]


def phase_figure(label: str, replicas: int, result: Mapping[str, object], plan: Plan) -> Figure:
    windows = result["windows"]
    assert isinstance(windows, list)
    best = max(windows, key=lambda w: float(w["rate"]))
    actions = sum(int(w["count"]) for w in windows)
    syncs = sum(int(w["wal_syncs"]) for w in windows)
    commits = sum(int(w["db_commits"]) for w in windows)
    seconds = sum(float(w["seconds"]) for w in windows)
    servers = ", ".join(_share(s) for s in best["server_cpu_share"])
    return Figure(
        f"replicas.{label}",
        f"{replicas} replica{'s' if replicas > 1 else ''}, {plan.concurrency} games",
        float(best["rate"]),
        "actions/s",
        note=f"CPU: server{'s' if replicas > 1 else ''} {servers}, client "
        f"{_share(best['client_cpu_share'])}, PostgreSQL {_share(best['postgres_cpu_share'])}, "
        f"other processes {_share(best['other_cpu_share'])}, machine "
        f"{_share(best['machine_cpu_share'])} of {os.cpu_count()} cores; "
        f"conflicts {result['conflicts']}, errors {result['errors']}",
        detail={
            "replicas": replicas,
            "count": best["count"],
            "seconds": best["seconds"],
            "per_replica_rate": best["per_replica_rate"],
            "server_cpu_share": best["server_cpu_share"],
            "client_cpu_share": best["client_cpu_share"],
            "postgres_cpu_share": best["postgres_cpu_share"],
            "machine_cpu_share": best["machine_cpu_share"],
            "other_cpu_share": best["other_cpu_share"],
            "runs_rate": [round(float(w["rate"]), 1) for w in windows],
            "db_commits_per_second": round(commits / seconds, 1),
            "wal_syncs_per_second": round(syncs / seconds, 1),
            "actions_per_wal_sync": round(actions / syncs, 2) if syncs else None,
            "conflicts": result["conflicts"],
            "errors": result["errors"],
            "first_error": result["first_error"],
            "games": result["games"],
            "windows": windows,
        },
    )


def show(console: Console, figures: Sequence[Figure], env: Mapping[str, object]) -> None:
    table = Table(
        title="Pinochle referee replica benchmark (PostgreSQL)",
        caption=(
            f"pinochle-referee serve replicas on {HOST}, one PostgreSQL schema; "
            f"Python {env['python']} on {env['machine']} ({env['cores']} cores); "
            "client, servers and PostgreSQL share the machine; CPU 100 % = one core"
        ),
    )
    for column, justify in (
        ("run", "left"),
        ("actions/s", "right"),
        ("per replica", "right"),
        ("server CPU", "right"),
        ("client CPU", "right"),
        ("PostgreSQL CPU", "right"),
        ("other CPU", "right"),
        ("machine CPU", "right"),
        ("WAL syncs/s", "right"),
        ("actions/sync", "right"),
        ("conflicts", "right"),
        ("errors", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for figure in figures:
        d = figure.detail
        if "replicas" not in d:
            table.add_row(figure.label, f"{figure.value:.2f}x", *[""] * 10)
            continue
        per_sync = d["actions_per_wal_sync"]
        table.add_row(
            figure.label,
            f"{figure.value:,.0f}",
            " + ".join(f"{float(r):,.0f}" for r in d["per_replica_rate"]),  # type: ignore[attr-defined]
            " + ".join(_share(s) for s in d["server_cpu_share"]),  # type: ignore[attr-defined]
            _share(d["client_cpu_share"]),
            _share(d["postgres_cpu_share"]),
            _share(d["other_cpu_share"]),
            _share(d["machine_cpu_share"]),
            f"{float(d['wal_syncs_per_second']):,.0f}",  # type: ignore[arg-type]
            "—" if per_sync is None else f"{float(per_sync):.2f}",  # type: ignore[arg-type]
            str(d["conflicts"]),
            str(d["errors"]),
        )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replicas", description=__doc__)
    parser.add_argument(
        "--db",
        default=DEFAULT_URL,
        help="PostgreSQL URL (default: $PINOCHLE_REFEREE_BENCH_POSTGRES or %(default)s)",
    )
    add_run_arguments(parser, "short windows (a smoke run)", merges=True)
    args = parser.parse_args(argv)
    url: str = args.db
    plan = QUICK if args.quick else Plan()
    output = output_path(args)

    console = Console()
    if not console.is_terminal:
        console = Console(width=170)
    log = Console(stderr=True)
    reason = unreachable(url)
    if reason is not None:
        console.print(
            f"replica benchmark skipped: PostgreSQL not reachable at {describe(url)}: {reason}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return 0

    started = time.perf_counter()
    env = environment()
    database = database_settings(url)
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="referee-bench-replicas-") as folder:
        servers: list[Server] = []
        with bench_schema(url) as schema:
            database["schema"] = schema
            try:
                log.print(f"[dim]starting replica A on schema {schema} ...[/]")
                servers.append(start_replica(Path(folder), "a", url, schema))
                log.print(f"[dim]one replica: {plan.concurrency} games on A ...[/]")
                one = in_client_process(servers, plan, url, "one")
                figures.append(phase_figure("one", 1, one, plan))
                log.print("[dim]starting replica B on the same schema ...[/]")
                servers.append(start_replica(Path(folder), "b", url, schema))
                log.print(f"[dim]two replicas: {plan.concurrency // 2} games on each ...[/]")
                two = in_client_process(servers, plan, url, "two")
                figures.append(phase_figure("two", 2, two, plan))
            except BaseException:
                for server in servers:
                    log.print(
                        f"[red]replica log {server.log.name} (last lines):[/]\n{server.log_tail()}"
                    )
                raise
            finally:
                for server in servers:
                    stop_server(server)
    one_rate, two_rate = figures[0].value, figures[1].value
    figures.append(
        Figure(
            "replicas.speedup",
            "two replicas / one",
            two_rate / one_rate if one_rate else float("nan"),
            "x",
            note="the same machine: the replicas share its cores with PostgreSQL and the client",
            digits=2,
        )
    )
    elapsed = time.perf_counter() - started
    load_end = os.getloadavg() if hasattr(os, "getloadavg") else None

    show(console, figures, env)
    replicas = {
        "format": RESULTS_FORMAT,
        **env,
        "load_average_end": None if load_end is None else [round(x, 2) for x in load_end],
        "quick": args.quick,
        "seed": SEED,
        "variant": VARIANT,
        "plan": {
            "concurrency": plan.concurrency,
            "warmup_seconds": plan.warmup,
            "window_seconds": plan.window,
            "rounds": plan.rounds,
        },
        "total_seconds": round(elapsed, 2),
        "database": database,
        "server": "pinochle-referee serve --port 0 --metrics-port 0 --log-format json "
        "--db <url> --db-schema <schema> (log to a file)",
        "figures": {f.key: f.to_json() for f in figures},
    }
    if output is not None:
        merge_results(output, RESULTS_KEY, replicas)
        console.print(
            f'merged the figures into {output} under "{RESULTS_KEY}" ({elapsed:.0f} s in all)'
        )
    others = {
        f.key: f.detail["other_cpu_share"]
        for f in figures
        if isinstance(f.detail.get("other_cpu_share"), float)
    }
    busy = {k: v for k, v in others.items() if v > OTHER_SHARE_WARNING}  # type: ignore[operator]
    if busy:
        console.print(
            "[yellow]other processes used "
            + ", ".join(f"{v:.0%} of a core in {k}" for k, v in busy.items())
            + f" (the machine has {env['cores']} cores): those rates are pessimistic[/]"
        )
    conflicts = sum(int(f.detail.get("conflicts", 0)) for f in figures)  # type: ignore[call-overload]
    if conflicts:
        console.print(f"[yellow]{conflicts} version conflict(s): games should not share[/]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
