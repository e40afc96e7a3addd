"""Instruction-count benchmark: run ``python -m bench.instructions`` (or ``make bench``).

The service's throughput figure (bench/service.py) moves by a quarter from run to run on a
shared 2-core machine, so it cannot tell whether a change to the hot path helped by 5 %. This
benchmark counts instead of timing: it runs the real server under valgrind's callgrind
(``pinochle-referee serve`` on a throw-away SQLite database, instrumentation off until the
measured phases) and counts the instructions the server's event-loop thread executes per call:

1. ``health``: health ``Check`` calls, 32 concurrent callers;
2. ``submit``: accepted ``SubmitAction`` calls, 32 seeded partnership games at once, one action
   in flight per game, the legal actions known from a client-side copy of the engine
   (``bench.service.ReplicaGame``), so the server sees nothing but ``SubmitAction``; no game
   ends during the phase, so no ``CreateGame`` is counted;
3. ``health`` again (the figure is the mean of the two health phases).

The loop thread is where a Python server's throughput is bound (the GIL): the ratio of
instructions per health check to instructions per action is what ``throughput.ratio``
measures in seconds, without the timing noise (runs agree to within about 3 %). Counts are of
instructions, not cycles: cache misses and the fsync are not in them, so the ratio is an
estimate of the throughput ratio, not a replacement. It needs valgrind (``callgrind_control``);
without it the run prints one line and exits 0. The figures are merged into
``bench/results.json`` under ``"instructions"``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from grpc_health.v1 import health_pb2
from pinochle_client import RefereeClient
from rich.console import Console
from rich.table import Table

from bench.engine import add_run_arguments, environment, output_path
from bench.service import (
    CALL_TIMEOUT,
    HOST,
    RESULTS_FORMAT,
    ReplicaGame,
    _server_command,
    health_check,
    merge_results,
)

RESULTS_KEY: Final = "instructions"
CALLERS: Final = 32  # concurrent health callers, and concurrent games
CALLS: Final = 640  # calls counted per phase (20 per caller)
QUICK_CALLS: Final = 160
WARMUP_CALLS: Final = 10  # per caller, not counted
START_TIMEOUT: Final = 240.0  # seconds: the server starts slowly under valgrind
STOP_TIMEOUT: Final = 120.0
PHASES: Final = ("health", "submit", "health-again")
LOOP_THREAD: Final = "-01"  # callgrind numbers threads from 1, in creation order: 1 is the loop


def _control(pid: int, *arguments: str) -> None:
    """``callgrind_control`` on the server: switch counting on or off, or dump the counts."""
    subprocess.run(
        ["callgrind_control", *arguments, str(pid)], capture_output=True, check=True, timeout=60
    )


async def _drive(address: str, pid: int, calls: int) -> dict[str, float]:
    """Warm up, then run the three phases, each counted and dumped on its own."""
    per_caller = calls // CALLERS
    seconds: dict[str, float] = {}
    async with RefereeClient(address) as client:
        check = health_check(client.channel)
        ping = health_pb2.HealthCheckRequest()
        games = [ReplicaGame(client, f"instructions-{i}") for i in range(CALLERS)]
        for game in games:
            await game.create()

        async def health(count: int) -> None:
            for _ in range(count):
                await check(ping, timeout=CALL_TIMEOUT)

        async def play(game: ReplicaGame, count: int) -> None:
            for _ in range(count):
                if game.over:  # cannot happen in 30 actions; counted phases must not create
                    raise RuntimeError(f"game {game.seed} ended during the benchmark")
                await game.step()

        await asyncio.gather(*(play(game, WARMUP_CALLS) for game in games))
        await asyncio.gather(*(health(WARMUP_CALLS) for _ in range(CALLERS)))
        for phase in PHASES:
            started = time.perf_counter()
            _control(pid, "-i", "on")
            if phase == "submit":
                await asyncio.gather(*(play(game, per_caller) for game in games))
            else:
                await asyncio.gather(*(health(per_caller) for _ in range(CALLERS)))
            _control(pid, "-i", "off")
            _control(pid, "-d", phase)
            seconds[phase] = time.perf_counter() - started
    return seconds


def _totals(out: Path) -> list[int]:
    """The loop thread's instruction count of each dump, in dump order."""
    counts: list[int] = []
    for number in range(1, len(PHASES) + 1):
        dump = out.with_name(f"{out.name}.{number}{LOOP_THREAD}")
        for line in dump.read_text("utf-8", "replace").splitlines():
            if line.startswith("totals:"):
                counts.append(int(line.split()[1]))
                break
        else:
            raise RuntimeError(f"{dump.name} has no totals line")
    return counts


def measure(calls: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="referee-instructions-") as folder:
        out = Path(folder) / "callgrind.out"
        log = Path(folder) / "server.log"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--separate-threads=yes",
            f"--callgrind-out-file={out}",
            *_server_command(),
            *("--host", HOST, "--port", "0", "--metrics-port", "0"),
            *("--db", str(Path(folder) / "bench.db"), "--log-format", "json"),
        ]
        with log.open("wb") as sink:
            server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
        try:
            address = _wait_serving(server, log)
            seconds = asyncio.run(_drive(address, server.pid, calls))
        finally:
            server.terminate()
            try:
                server.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(STOP_TIMEOUT)
        health, submit, health_again = _totals(out)
    per_health = (health + health_again) / 2 / calls
    per_action = submit / calls
    return {
        "calls_per_phase": calls,
        "callers": CALLERS,
        "health_instructions_per_call": round(per_health),
        "health_phases": [round(health / calls), round(health_again / calls)],
        "submit_instructions_per_action": round(per_action),
        "ratio": round(per_health / per_action, 3),
        "seconds_under_valgrind": {k: round(v, 1) for k, v in seconds.items()},
    }


def _wait_serving(server: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.perf_counter() + START_TIMEOUT
    while time.perf_counter() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}")
        for line in log.read_text("utf-8", "replace").splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                if entry.get("event") == "serving":
                    return str(entry["address"])
        time.sleep(0.2)
    raise RuntimeError(f"the server did not start under valgrind in {START_TIMEOUT:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    add_run_arguments(parser, "fewer calls (a smoke run)", merges=True)
    args = parser.parse_args(argv)
    console = Console()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        console.print("valgrind (callgrind_control) is not installed: no instruction counts")
        return 0
    output = output_path(args)
    env = environment()
    started = time.perf_counter()
    Console(stderr=True).print("[dim]counting the server's instructions under callgrind ...[/]")
    figures = measure(QUICK_CALLS if args.quick else CALLS)
    table = Table(title="Server event-loop instructions per call (callgrind)")
    for column in ("figure", "value"):
        table.add_column(column)
    table.add_row("health Check", f"{figures['health_instructions_per_call']:,}")
    table.add_row("SubmitAction (accepted)", f"{figures['submit_instructions_per_action']:,}")
    table.add_row("health / SubmitAction", f"{figures['ratio']:.3f}")
    console.print(table)
    result = {
        "format": RESULTS_FORMAT,
        **env,
        "quick": args.quick,
        "total_seconds": round(time.perf_counter() - started, 1),
        "figures": figures,
    }
    if output is not None:
        merge_results(output, RESULTS_KEY, result)
        console.print(f'merged the figures into {output} under "{RESULTS_KEY}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
