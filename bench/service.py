"""Service benchmark: run ``python -m bench.service`` (or ``make bench``) from the repository root.

It starts ``pinochle-referee serve`` as a subprocess on a free port of 127.0.0.1 (``--port 0``;
the address is read from the server's ``serving`` log line) with a throw-away SQLite database
(WAL, ``synchronous=FULL``, the store's default) and ``--metrics-port 0`` (no metrics listener),
and measures it side by side with the standard gRPC health ``Check`` served by the same process:

1. ``latency.*``: one client, one channel, sequential calls. Each step asks ``ListLegalActions``
   for the seat to act (not timed), picks one of the legal actions with the demo bots' rule, then
   times one health ``Check`` and the ``SubmitAction`` (in alternating order, so neither always
   follows the other). The games are server-shuffled partnership games; a new one starts when one
   ends. p50/p90/p99 of both calls, and the ratio of the p50s (target: at most 1.5).
2. ``throughput.*``: a separate client process (``multiprocessing``, spawn) drives 64 games at
   once over one channel, one action in flight per game, and counts the accepted actions per
   second over a timed window; the same process then runs 64 concurrent callers of the health
   ``Check`` over a window of the same length. Rounds alternate (health, actions, health,
   actions) and each figure is the best round. The games are seeded (``CreateGame`` with
   ``seed``), so the client knows every legal action from a local replica of the same engine
   and the server only sees ``SubmitAction`` calls; every response's version is checked
   against the replica. The ratio actions/s over checks/s has the target >= 0.5.
3. ``memory.*``: the server's resident set (``VmRSS`` of ``/proc/<pid>/status``) before and after
   a client process creates 10,000 games (each dealt, with a few actions played) with 64
   concurrent callers. When the time budget runs out first, the figure is extrapolated from the
   games created (the table says so). The target is on the server's whole RSS: <= 300 MB.

Timing is ``time.perf_counter`` on the client; warm-up calls come first and are not counted. Every
loop is bounded in calls and in time. The table goes to the console and the figures are merged
into ``bench/results.json`` under the ``"service"`` key (the other keys are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

import grpc
from grpc_health.v1 import health_pb2
from pinochle_client import RefereeClient, SeatSession
from rich.console import Console
from rich.table import Table

from bench.engine import add_run_arguments, environment, exit_status, output_path
from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.demo import bot_action
from referee.engine.actions import decode_action
from referee.engine.engine import legal_actions
from referee.engine.game import Game, SeededDeals
from referee.rules.options import resolve_options
from referee.service.convert import action_from_json

RESULTS_FORMAT: Final = "referee-bench/1"
RESULTS_PATH: Final = Path(__file__).with_name("results.json")
SEED: Final = 20_240_601
VARIANT: Final = "partnership"
HEALTH_CHECK: Final = "/grpc.health.v1.Health/Check"
HOST: Final = "127.0.0.1"

CALL_TIMEOUT: Final = 30.0  # seconds: the deadline of every RPC the benchmark makes
SERVER_START_TIMEOUT: Final = 30.0
SERVER_STOP_TIMEOUT: Final = 15.0
MAX_CALLS_PER_CALLER: Final = 1_000_000  # bounds each concurrent caller's loop in count
MAX_ACTIONS_PER_GAME: Final = 5_000  # a game ends by itself well before this
MB: Final = 1024 * 1024
BUSY_SHARE: Final = 0.9  # a saturated server below this CPU share did not have its core

# Targets (issue 4, "Performance").
LATENCY_RATIO_TARGET: Final = 1.5
THROUGHPUT_RATIO_TARGET: Final = 0.5
MEMORY_TARGET_MB: Final = 300.0


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much work each figure does; ``--quick`` shrinks it for a smoke run."""

    latency_warmup: int = 100  # steps not counted
    latency_samples: int = 1_000  # timed SubmitAction calls (and as many health checks)
    latency_seconds: float = 45.0  # time bound of the latency phase
    concurrency: int = 64  # concurrent games (and concurrent health callers)
    throughput_warmup: float = 1.5  # seconds of load before each window
    throughput_window: float = 5.0  # seconds counted per round
    throughput_rounds: int = 2  # rounds of (health, actions); the best of each is the figure
    memory_games: int = 10_000
    memory_actions: int = 3  # actions played in each game after its deal
    memory_seconds: float = 75.0  # time budget to create them; extrapolated when exceeded


QUICK: Final = Sizes(
    latency_warmup=20,
    latency_samples=200,
    latency_seconds=15.0,
    throughput_warmup=0.5,
    throughput_window=2.0,
    throughput_rounds=1,
    memory_games=1_000,
    memory_seconds=20.0,
)


# --------------------------------------------------------------------------------------------
# Figures


@dataclass(slots=True)
class Figure:
    key: str
    label: str
    value: float
    unit: str
    target: float | None = None
    lower_is_better: bool = False
    note: str = ""
    digits: int = 0  # decimals shown in the table and kept in results.json (at least 1 there)
    detail: dict[str, object] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.target is None:
            return "info"
        met = self.value <= self.target if self.lower_is_better else self.value >= self.target
        return "PASS" if met else "MISS"

    @property
    def target_text(self) -> str:
        if self.target is None:
            return "—"
        sign = "<=" if self.lower_is_better else ">="
        return f"{sign} {self.target:,.{self.digits}f}"

    def to_json(self) -> dict[str, object]:
        return {
            "label": self.label,
            "value": round(self.value, max(1, self.digits)),
            "unit": self.unit,
            "target": self.target,
            "comparison": None if self.target is None else ("<=" if self.lower_is_better else ">="),
            "status": self.status,
            "note": self.note,
            **self.detail,
        }


def quantiles_ms(samples: Sequence[float]) -> dict[str, float]:
    """p50, p90 and p99 (inclusive method) of ``samples`` seconds, in milliseconds."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {
        "p50": cuts[49] * 1000,
        "p90": cuts[89] * 1000,
        "p99": cuts[98] * 1000,
        "mean": statistics.fmean(samples) * 1000,
    }


# --------------------------------------------------------------------------------------------
# The server process


def _server_command() -> list[str]:
    script = Path(sys.executable).with_name("pinochle-referee")
    if script.exists():
        return [str(script), "serve"]
    found = shutil.which("pinochle-referee")
    if found is not None:
        return [found, "serve"]
    return [sys.executable, "-m", "referee.cli", "serve"]


@dataclass(slots=True)
class Server:
    process: subprocess.Popen[bytes]
    address: str
    db: Path
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text("utf-8", "replace").splitlines()[-lines:])
        return ""


def start_server(folder: Path, cores: set[int] | None = None) -> Server:
    """``pinochle-referee serve`` on port 0 of 127.0.0.1; its address comes from its log.

    ``cores``: the CPUs the server (every thread it will start) may run on; None, any."""
    db = folder / "bench.db"
    log = folder / "server.log"
    command = [
        *_server_command(),
        "--host",
        HOST,
        "--port",
        "0",
        "--db",
        str(db),
        "--metrics-port",
        "0",
        # The default cap (10,000 active games) would refuse the memory phase's last games,
        # since the other phases' games are active too.
        "--max-games",
        "1000000",
        "--log-format",
        "json",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINOCHLE_REFEREE_")}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=env
        )
    if cores is not None:
        # Popen returns once the program is exec'd; Python starts no thread of its own before
        # the server's start-up, so gRPC's and the store's threads, started later, inherit it.
        os.sched_setaffinity(process.pid, cores)
    server = Server(process, "", db, log)
    deadline = time.perf_counter() + SERVER_START_TIMEOUT
    while time.perf_counter() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{server.log_tail()}")
        for line in log.read_text("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("event") == "serving":
                    server.address = str(entry["address"])
                    return server
        time.sleep(0.05)
    stop_server(server)
    raise RuntimeError(f"the server did not start in {SERVER_START_TIMEOUT:.0f} s")


def stop_server(server: Server) -> None:
    """SIGTERM (graceful shutdown), then SIGKILL if it does not exit in time."""
    process = server.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(SERVER_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(SERVER_STOP_TIMEOUT)


def rss_bytes(pid: int) -> int:
    """``VmRSS`` of ``/proc/<pid>/status``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text("ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (every thread), from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text("ascii").rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_serving(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        check = health_check(channel)
        response = await check(health_pb2.HealthCheckRequest(), timeout=SERVER_START_TIMEOUT)
        if response.status != health_pb2.HealthCheckResponse.SERVING:
            raise RuntimeError(f"the server's health is {response.status}")


# --------------------------------------------------------------------------------------------
# Clients


def health_check(
    channel: grpc.aio.Channel,
) -> grpc.aio.UnaryUnaryMultiCallable[
    health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
]:
    """The standard ``grpc.health.v1.Health/Check`` call on ``channel``."""
    return channel.unary_unary(
        HEALTH_CHECK,
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )


def _metadata(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


class ReplicaGame:
    """One seeded game played through the API, its legal actions known from a local replica of
    the engine (the server deals hand n of a seeded game from ``f"{seed}:{n}"``, as
    ``SeededDeals`` does here), so the server sees only ``SubmitAction``.

    ``options`` are the variant's options as sent to ``CreateGame`` (None: the defaults, a
    whole partnership game); the replica resolves them as the server does, so both play the
    same game (bench/soak.py plays one-hand games with ``{"target": 1}``)."""

    RULES: Final = resolve_options(VARIANT, None, for_game=True)

    def __init__(
        self,
        client: RefereeClient,
        seed: str,
        options: Mapping[str, object] | None = None,
    ) -> None:
        self.client = client
        self.seed = seed
        self.options = None if options is None else dict(options)
        self.rules = (
            self.RULES
            if self.options is None
            else resolve_options(VARIANT, self.options, for_game=True)
        )
        self.rng = random.Random(seed)
        self.game = Game(self.rules, 0, SeededDeals(seed))
        self.game_id = ""
        self.tokens: list[str] = []  # the seats' tokens, as CreateGame answered them
        self.spectator_token = ""
        self.adjudicator_token = ""
        self.metadata: list[tuple[tuple[str, str], ...]] = []
        self.actions = 0

    async def create(self) -> None:
        created = await self.client.create_game(VARIANT, self.options, seed=self.seed)
        if created.version != self.game.state.version:
            raise RuntimeError(f"game {self.seed}: server at {created.version}, replica not")
        self.game_id = created.game_id
        self.tokens = list(created.seat_tokens)
        self.spectator_token = created.spectator_token
        self.adjudicator_token = created.adjudicator_token
        self.metadata = [_metadata(t) for t in created.seat_tokens]

    @property
    def over(self) -> bool:
        return self.game.state.over or self.actions >= MAX_ACTIONS_PER_GAME

    def next_action(self) -> tuple[int, dict[str, Any]]:
        """The seat to act (the first with legal actions from the hand's turn on) and the
        action the demo bots' rule picks for it, from the replica."""
        state = self.game.state
        hand = state.hand
        assert hand is not None
        players = self.rules.players
        for seat in ((hand.turn + i) % players for i in range(players)):
            entries = legal_actions(state, seat)
            if entries:
                return seat, bot_action(entries, self.rng)
        raise RuntimeError(f"game {self.seed}: no seat can act")

    async def step(self, chosen: tuple[int, dict[str, Any]] | None = None) -> None:
        """Submit one legal action (``chosen``, from ``next_action``, or the next one); raises if
        the server refuses it or disagrees on the version."""
        seat, action = self.next_action() if chosen is None else chosen
        request = pb.SubmitActionRequest(
            game_id=self.game_id,
            action=action_from_json(action),
            expected_version=self.game.state.version,
            request_id=uuid.uuid4().hex,
        )
        response = await self.client.referee.SubmitAction(
            request, metadata=self.metadata[seat], timeout=CALL_TIMEOUT
        )
        self.game.act(seat, decode_action(action))
        self.actions += 1
        if response.version != self.game.state.version:
            raise RuntimeError(
                f"game {self.seed}: server at {response.version}, "
                f"replica at {self.game.state.version}"
            )


# --------------------------------------------------------------------------------------------
# 1. Sequential latency (in this process)


@dataclass(slots=True)
class LatencyRun:
    submit: list[float] = field(default_factory=list)
    health: list[float] = field(default_factory=list)
    games: int = 0
    seconds: float = 0.0


async def _seat_to_act(
    seats: Sequence[SeatSession], turn: int
) -> tuple[int, list[dict[str, Any]]] | None:
    """The first seat, from ``turn`` on, with legal actions (``ListLegalActions``)."""
    for i in range(len(seats)):
        seat = (turn + i) % len(seats)
        entries = await seats[seat].legal_actions()
        if entries:
            return seat, entries
    return None


async def measure_latency(address: str, sizes: Sizes) -> LatencyRun:
    run = LatencyRun()
    rng = random.Random(f"{SEED}:latency")
    started = time.perf_counter()
    deadline = started + sizes.latency_seconds
    clock = time.perf_counter
    async with RefereeClient(address) as client:
        check = health_check(client.channel)
        ping = health_pb2.HealthCheckRequest()
        seats: list[SeatSession] = []
        version, turn = 0, 0
        for step in range(sizes.latency_warmup + sizes.latency_samples + MAX_ACTIONS_PER_GAME):
            if len(run.submit) >= sizes.latency_samples or clock() > deadline:
                break
            found = await _seat_to_act(seats, turn) if seats else None
            if found is None:  # no game yet, or the game is over: a new server-shuffled one
                created = await client.create_game(VARIANT)
                seats = [client.seat(created.game_id, t) for t in created.seat_tokens]
                version, turn = created.version, 0
                run.games += 1
                continue
            seat, entries = found
            request = pb.SubmitActionRequest(
                game_id=seats[seat].game_id,
                action=action_from_json(bot_action(entries, rng)),
                expected_version=version,
                request_id=uuid.uuid4().hex,
            )
            metadata = seats[seat].metadata
            if step % 2:
                t0 = clock()
                await check(ping, timeout=CALL_TIMEOUT)
                t1 = clock()
                response = await client.referee.SubmitAction(
                    request, metadata=metadata, timeout=CALL_TIMEOUT
                )
                t2 = clock()
                health, submit = t1 - t0, t2 - t1
            else:
                t0 = clock()
                response = await client.referee.SubmitAction(
                    request, metadata=metadata, timeout=CALL_TIMEOUT
                )
                t1 = clock()
                await check(ping, timeout=CALL_TIMEOUT)
                t2 = clock()
                submit, health = t1 - t0, t2 - t1
            if step >= sizes.latency_warmup:
                run.submit.append(submit)
                run.health.append(health)
            version = response.version
            hand = json.loads(response.view_json).get("hand")
            turn = int(hand["turn"]) if isinstance(hand, dict) else 0
    run.seconds = time.perf_counter() - started
    return run


# --------------------------------------------------------------------------------------------
# 2 and 3. Load from a separate client process


@dataclass(frozen=True, slots=True)
class ThroughputPlan:
    concurrency: int
    warmup: float
    window: float
    rounds: int


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    games: int
    actions: int
    concurrency: int
    seconds: float


@dataclass(slots=True)
class Counter:
    done: int = 0
    errors: int = 0
    first_error: str = ""

    def failed(self, error: BaseException) -> None:
        self.errors += 1
        if not self.first_error:
            self.first_error = repr(error)[:300]


async def _timed_window(
    caller: Callable[[Counter, asyncio.Event], Coroutine[Any, Any, None]],
    concurrency: int,
    warmup: float,
    window: float,
    server_pid: int,
) -> dict[str, object]:
    """Run ``concurrency`` callers; count what completes in ``window`` seconds after ``warmup``."""
    counter = Counter()
    stop = asyncio.Event()
    tasks = [asyncio.create_task(caller(counter, stop)) for _ in range(concurrency)]
    try:
        await asyncio.sleep(warmup)
        count0, wall0, cpu0, server0 = (
            counter.done,
            time.perf_counter(),
            time.process_time(),
            cpu_seconds(server_pid),
        )
        await asyncio.sleep(window)
        count1, wall1, cpu1, server1 = (
            counter.done,
            time.perf_counter(),
            time.process_time(),
            cpu_seconds(server_pid),
        )
    finally:
        stop.set()
        _, pending = await asyncio.wait(tasks, timeout=CALL_TIMEOUT)
        for task in pending:
            task.cancel()
    seconds = wall1 - wall0
    return {
        "count": count1 - count0,
        "seconds": round(seconds, 4),
        "rate": (count1 - count0) / seconds,
        "client_cpu_share": round((cpu1 - cpu0) / seconds, 3),
        "server_cpu_share": round((server1 - server0) / seconds, 3),
        "errors": counter.errors,
        "first_error": counter.first_error,
    }


async def run_throughput(address: str, server_pid: int, plan: ThroughputPlan) -> dict[str, object]:
    rounds: dict[str, list[dict[str, object]]] = {"health": [], "submit": []}
    games_started = itertools.count()
    async with RefereeClient(address) as client:
        check = health_check(client.channel)
        ping = health_pb2.HealthCheckRequest()

        async def health_caller(counter: Counter, stop: asyncio.Event) -> None:
            for _ in range(MAX_CALLS_PER_CALLER):
                if stop.is_set():
                    return
                try:
                    await check(ping, timeout=CALL_TIMEOUT)
                except grpc.RpcError as error:
                    counter.failed(error)
                    return
                counter.done += 1

        async def new_game() -> ReplicaGame:
            game = ReplicaGame(client, f"bench-{SEED}-throughput-{next(games_started)}")
            await game.create()
            return game

        games = list(await asyncio.gather(*(new_game() for _ in range(plan.concurrency))))
        free = list(games)  # each caller takes one game and keeps it (a new one when it ends)

        async def game_caller(counter: Counter, stop: asyncio.Event) -> None:
            game = free.pop()
            try:
                for _ in range(MAX_CALLS_PER_CALLER):
                    if stop.is_set():
                        return
                    if game.over:
                        game = await new_game()
                    try:
                        await game.step()
                    except (grpc.RpcError, RuntimeError) as error:
                        counter.failed(error)
                        return
                    counter.done += 1
            finally:
                free.append(game)

        for _ in range(plan.rounds):
            for kind, caller in (("health", health_caller), ("submit", game_caller)):
                rounds[kind].append(
                    await _timed_window(
                        caller, plan.concurrency, plan.warmup, plan.window, server_pid
                    )
                )
    return {"rounds": rounds, "games": next(games_started)}


async def run_memory(address: str, server_pid: int, plan: MemoryPlan) -> dict[str, object]:
    """Create ``plan.games`` seeded games, each dealt and ``plan.actions`` actions in."""
    del server_pid
    numbers = iter(range(plan.games))
    counter = Counter()
    actions = 0
    started = time.perf_counter()
    deadline = started + plan.seconds
    async with RefereeClient(address) as client:

        async def creator() -> None:
            nonlocal actions
            for number in numbers:  # shared: each game number is taken once
                if time.perf_counter() > deadline:
                    return
                game = ReplicaGame(client, f"bench-{SEED}-memory-{number}")
                try:
                    await game.create()
                    for _ in range(plan.actions):
                        await game.step()
                        actions += 1
                except (grpc.RpcError, RuntimeError) as error:
                    counter.failed(error)
                    return
                counter.done += 1

        await asyncio.gather(*(creator() for _ in range(plan.concurrency)))
    return {
        "games": counter.done,
        "actions": actions,
        "seconds": round(time.perf_counter() - started, 3),
        "errors": counter.errors,
        "first_error": counter.first_error,
    }


# How client and server use the machine's CPUs, as the table's caption and results.json say it
# (``make bench``'s way; ``--split-cores`` names the CPUs instead).
SHARED_CORES: Final = "client and server share the machine"


def split_cores() -> tuple[set[int], set[int]]:
    """The server's CPU and the clients' for ``--split-cores``: the first this process may use
    for the server, the rest for the clients, so neither takes CPU time from the other."""
    if not hasattr(os, "sched_setaffinity"):
        raise SystemExit("--split-cores needs os.sched_setaffinity (Linux)")
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        raise SystemExit(f"--split-cores needs at least 2 CPUs; this process may use {usable}")
    return {usable[0]}, set(usable[1:])


def _client_main(job: str, address: str, server_pid: int, plan: object, conn: Connection) -> None:
    """The client process: run one job under asyncio and send its result (or error) back."""
    try:
        if job == "throughput":
            assert isinstance(plan, ThroughputPlan)
            result = asyncio.run(run_throughput(address, server_pid, plan))
        else:
            assert isinstance(plan, MemoryPlan)
            result = asyncio.run(run_memory(address, server_pid, plan))
        conn.send(("ok", result))
    except BaseException as error:
        conn.send(("error", repr(error)))
        raise
    finally:
        conn.close()


def run_spawned(
    target: Callable[..., None], args: tuple[object, ...], name: str, timeout: float
) -> dict[str, object]:
    """Run ``target(*args, sender)`` in a spawned process and return the dict it sends back.

    The target sends ("ok", result) or ("error", text) through the pipe. Shared with
    bench/replicas.py so both benchmarks drive their load from a separate process the same way.
    """
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=target, args=(*args, sender), name=name)
    process.start()
    sender.close()
    try:
        if not receiver.poll(timeout):
            raise RuntimeError(f"the {name} client did not answer in {timeout:.0f} s")
        try:
            status, result = receiver.recv()
        except EOFError:
            raise RuntimeError(f"the {name} client exited without an answer") from None
    finally:
        process.join(10)
        if process.is_alive():
            process.terminate()
            process.join(10)
    if status != "ok":
        raise RuntimeError(f"the {name} client failed: {result}")
    assert isinstance(result, dict)
    return result


def in_client_process(
    job: str, server: Server, plan: ThroughputPlan | MemoryPlan, timeout: float
) -> dict[str, object]:
    """Run ``job`` in a separate (spawned) process and return what it reports."""
    return run_spawned(
        _client_main, (job, server.address, server.pid, plan), f"bench-{job}", timeout
    )


# --------------------------------------------------------------------------------------------
# The figures


def latency_figures(run: LatencyRun) -> list[Figure]:
    submit, health = quantiles_ms(run.submit), quantiles_ms(run.health)
    count = len(run.submit)
    note = (
        f"{count:,} sequential calls on one channel, {run.games} server-shuffled "
        f"{VARIANT} game(s); legal actions asked first, off the clock"
    )
    figures = [
        Figure(
            f"latency.submit_{q}",
            f"SubmitAction {q}",
            submit[q],
            "ms",
            note=note if q == "p50" else "the same calls",
            digits=3,
            detail={"count": count, "mean_ms": round(submit["mean"], 4)},
        )
        for q in ("p50", "p90", "p99")
    ]
    figures += [
        Figure(
            f"latency.health_{q}",
            f"health Check {q}",
            health[q],
            "ms",
            note="one call next to each SubmitAction (alternating order), same channel"
            if q == "p50"
            else "the same calls",
            digits=3,
            detail={"count": count, "mean_ms": round(health["mean"], 4)},
        )
        for q in ("p50", "p90", "p99")
    ]
    figures.append(
        Figure(
            "latency.ratio_p50",
            "SubmitAction p50 / health p50",
            submit["p50"] / health["p50"],
            "x",
            target=LATENCY_RATIO_TARGET,
            lower_is_better=True,
            note=f"p90 ratio {submit['p90'] / health['p90']:.2f}, "
            f"p99 ratio {submit['p99'] / health['p99']:.2f}",
            digits=2,
            detail={"seconds": round(run.seconds, 2)},
        )
    )
    return figures


def _best(runs: Sequence[Mapping[str, object]]) -> Mapping[str, object]:
    return max(runs, key=lambda r: float(r["rate"]))  # type: ignore[arg-type]


def throughput_figures(result: Mapping[str, object], plan: ThroughputPlan) -> list[Figure]:
    rounds = result["rounds"]
    assert isinstance(rounds, dict)
    health, submit = _best(rounds["health"]), _best(rounds["submit"])
    health_rate, submit_rate = float(health["rate"]), float(submit["rate"])  # type: ignore[arg-type]

    def detail(kind: str, best: Mapping[str, object]) -> dict[str, object]:
        return {
            "count": best["count"],
            "seconds": best["seconds"],
            "client_cpu_share": best["client_cpu_share"],
            "server_cpu_share": best["server_cpu_share"],
            "errors": sum(int(r["errors"]) for r in rounds[kind]),
            "runs_rate": [round(float(r["rate"]), 1) for r in rounds[kind]],
        }

    cpu = "CPU server {:.0%}, client {:.0%}"
    return [
        Figure(
            "throughput.submit",
            f"SubmitAction, {plan.concurrency} games",
            submit_rate,
            "actions/s",
            note=f"accepted actions, seeded {VARIANT} games, one action in flight per game; "
            + cpu.format(submit["server_cpu_share"], submit["client_cpu_share"]),
            detail={**detail("submit", submit), "games": result["games"]},
        ),
        Figure(
            "throughput.health",
            f"health Check, {plan.concurrency} callers",
            health_rate,
            "calls/s",
            note=cpu.format(health["server_cpu_share"], health["client_cpu_share"]),
            detail=detail("health", health),
        ),
        Figure(
            "throughput.ratio",
            "actions/s / health calls/s",
            submit_rate / health_rate,
            "x",
            target=THROUGHPUT_RATIO_TARGET,
            note=f"one client process, best of {plan.rounds} window(s) of "
            f"{plan.window:g} s after {plan.warmup:g} s of warm-up, each",
            digits=2,
        ),
    ]


def memory_figures(
    before: int, after: int, result: Mapping[str, object], plan: MemoryPlan
) -> list[Figure]:
    created = int(result["games"])  # type: ignore[call-overload]
    per_game = (after - before) / created if created else float("nan")
    complete = created >= plan.games
    projected = after if complete else before + per_game * plan.games
    how = (
        f"{created:,} games created"
        if complete
        else f"EXTRAPOLATED: only {created:,} of {plan.games:,} games created in "
        f"{plan.seconds:g} s; before + {plan.games:,} x per-game growth"
    )
    return [
        Figure(
            "memory.rss_before",
            "server RSS before",
            before / MB,
            "MB",
            note="after the latency and throughput phases",
            digits=1,
        ),
        Figure(
            "memory.rss_after",
            f"server RSS, {plan.games:,} more games",
            projected / MB,
            "MB",
            target=MEMORY_TARGET_MB,
            lower_is_better=True,
            note=how,
            digits=1,
            detail={
                "measured_rss_mb": round(after / MB, 1),
                "games_created": created,
                "extrapolated": not complete,
                "actions": result["actions"],
                "seconds": result["seconds"],
                "errors": result["errors"],
            },
        ),
        Figure(
            "memory.per_game",
            "RSS growth per game",
            per_game / 1024,
            "KiB",
            note=f"each game dealt and {plan.actions} actions in; "
            f"created at {created / float(result['seconds']):,.0f} games/s"  # type: ignore[arg-type]
            f" by {plan.concurrency} callers",
            digits=1,
        ),
    ]


# --------------------------------------------------------------------------------------------
# Output


def show(
    console: Console,
    figures: Sequence[Figure],
    env: Mapping[str, object],
    title: str = "Pinochle referee service benchmark",
    caption: str = "",
    sharing: str = SHARED_CORES,
) -> None:
    """The figures as a table (bench/soak.py and bench/game_memory.py print theirs with it)."""
    table = Table(
        title=title,
        caption=caption
        or (
            f"pinochle-referee serve on {HOST}, SQLite WAL synchronous=FULL, metrics off; "
            f"Python {env['python']} on {env['machine']} ({env['cores']} cores); {sharing}"
        ),
    )
    table.add_column("figure")
    table.add_column("measured", justify="right")
    table.add_column("unit")
    table.add_column("target", justify="right")
    table.add_column("result")
    table.add_column("workload", overflow="fold")
    styles = {"PASS": "green", "MISS": "bold red", "info": "dim"}
    for figure in figures:
        table.add_row(
            figure.label,
            f"{figure.value:,.{figure.digits}f}",
            figure.unit,
            figure.target_text,
            f"[{styles[figure.status]}]{figure.status}[/]",
            figure.note,
        )
    console.print(table)


def merge_results(path: Path, key: str, figures: Mapping[str, object]) -> None:
    """Write ``figures`` under ``key`` of ``path``, keeping every other key (each benchmark
    after bench.engine, which rewrites the file, merges its own key)."""
    results: dict[str, object] = {}
    if path.exists():
        loaded = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            results = loaded
    results[key] = figures
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.service", description=__doc__)
    add_run_arguments(parser, "small workloads (a smoke run)", merges=True)
    parser.add_argument("--check", action="store_true", help="exit 1 if any figure misses")
    parser.add_argument(
        "--split-cores",
        action="store_true",
        help="the server on the first CPU, the clients on the others (Linux; not make bench's"
        " way: one of the options issue 4's timed targets wait on a ruling for)",
    )
    args = parser.parse_args(argv)
    server_cores, client_cores = split_cores() if args.split_cores else (None, None)
    sharing = (
        SHARED_CORES
        if server_cores is None
        else f"server on CPU {sorted(server_cores)}, clients on {sorted(client_cores or ())}"
    )
    sizes = QUICK if args.quick else Sizes()
    output = output_path(args)

    console = Console()
    if not console.is_terminal:
        console = Console(width=170)
    log = Console(stderr=True)
    started = time.perf_counter()
    env = environment()
    throughput = ThroughputPlan(
        sizes.concurrency, sizes.throughput_warmup, sizes.throughput_window, sizes.throughput_rounds
    )
    memory = MemoryPlan(
        sizes.memory_games, sizes.memory_actions, sizes.concurrency, sizes.memory_seconds
    )
    figures: list[Figure] = []
    server_info: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="referee-bench-") as folder:
        log.print("[dim]starting pinochle-referee serve ...[/]")
        server = start_server(Path(folder), server_cores)
        if client_cores is not None:
            # This thread runs the latency client, and the spawned clients inherit its CPUs.
            os.sched_setaffinity(0, client_cores)
        try:
            asyncio.run(wait_serving(server.address))
            rss_start = rss_bytes(server.pid)
            log.print(
                f"[dim]timing sequential SubmitAction and health Check ({server.address}) ...[/]"
            )
            figures += latency_figures(asyncio.run(measure_latency(server.address, sizes)))
            log.print(
                f"[dim]throughput with {sizes.concurrency} concurrent games and callers ...[/]"
            )
            limit = (
                sizes.throughput_rounds
                * 2
                * (sizes.throughput_warmup + sizes.throughput_window + CALL_TIMEOUT)
                + 60
            )
            figures += throughput_figures(
                in_client_process("throughput", server, throughput, limit), throughput
            )
            time.sleep(0.5)
            before = rss_bytes(server.pid)
            log.print(f"[dim]creating {sizes.memory_games:,} games for the memory figure ...[/]")
            result = in_client_process(
                "memory", server, memory, sizes.memory_seconds + CALL_TIMEOUT + 60
            )
            time.sleep(0.5)
            after = rss_bytes(server.pid)
            figures += memory_figures(before, after, result, memory)
            server_info = {
                "command": "pinochle-referee serve --port 0 --metrics-port 0 "
                "--max-games 1000000 --log-format json (log to a file)",
                "cores": sharing,
                "store": "sqlite, WAL, synchronous=FULL (temporary file)",
                "rss_at_start_mb": round(rss_start / MB, 1),
                "db_mb": round(
                    sum(p.stat().st_size for p in Path(folder).glob("bench.db*")) / MB, 1
                ),
            }
        except BaseException:
            log.print(f"[red]server log (last lines):[/]\n{server.log_tail()}")
            raise
        finally:
            stop_server(server)
    elapsed = time.perf_counter() - started
    load_end = os.getloadavg() if hasattr(os, "getloadavg") else None

    show(console, figures, env, sharing=sharing)
    service = {
        "format": RESULTS_FORMAT,
        **env,
        "load_average_end": None if load_end is None else [round(x, 2) for x in load_end],
        "quick": args.quick,
        "seed": SEED,
        "total_seconds": round(elapsed, 2),
        "server": server_info,
        "figures": {f.key: f.to_json() for f in figures},
    }
    if output is not None:
        merge_results(output, "service", service)
        console.print(f'merged the figures into {output} under "service" ({elapsed:.0f} s in all)')
    shares = {
        f.key: f.detail["server_cpu_share"]
        for f in figures
        if f.key in ("throughput.submit", "throughput.health")
    }
    busy = {k: v for k, v in shares.items() if isinstance(v, float) and v < BUSY_SHARE}
    if busy:
        console.print(
            "[yellow]the server was on a CPU only "
            + ", ".join(f"{v:.0%} of {k}" for k, v in busy.items())
            + f" (64 callers should keep it busy): the machine ({env['cores']} cores, load "
            f"{env['load_average']} at the start) was shared; those rates are pessimistic[/]"
        )
    return exit_status(console, figures, args.check)


if __name__ == "__main__":
    raise SystemExit(main())
