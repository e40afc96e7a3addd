"""Soak benchmark: run ``python -m bench.soak`` (or ``make soak``) from the repository root.

Does a long-running server's memory stay flat? It starts the real server as bench/service.py
does (``pinochle-referee serve`` on port 0 of 127.0.0.1, a throw-away SQLite database in WAL
mode with ``synchronous=FULL``, metrics off) and a separate client process (``multiprocessing``,
spawn) that plays complete games through the gRPC API without a pause for ``--duration``
seconds (default 300), while it samples the server's resident set (``VmRSS``), its CPU time and
the database's size every few seconds.

The games are seeded partnership games with ``{"target": 1}``, so each ends after its first
hand (about 60 actions), and the client knows every legal action from a local replica of the
engine (``bench.service.ReplicaGame``). 32 workers each play one game at a time, one action in
flight, and start a new game as soon as theirs ends. Every accepted response's version (and
every read's) is checked against the replica; a mismatch, or any answer other than the one
expected, stops the run with an error.

Why the growth is measured only after a warm-up: the server keeps every game in progress (32
here) and the 1,024 most recently used finished games (``FINISHED_GAMES_KEPT`` in
referee/service/games.py), so its memory rightly grows until about 1,024 games have finished;
after that each game that finishes pushes an older one out, and a server without a leak stays
flat. One more thing must settle first: a finished game rebuilt from the store (the old reads
below) took about twice the memory of one played in memory until 1f5cd0d (about 60 KiB more), so
the cache's memory moves until its mix of the two is steady, 1,024 games after the first old
read (which comes once 1,152 games have finished). The warm-up therefore lasts until
``--warmup-games`` (2,300) games have finished, or 70 % of the duration has passed, whichever
comes first (the table says when the time bound ended it: the caches may then not be steady).
The figure is the RSS growth over the measured window after it, per 1,000 games finished: the
least-squares slope of RSS against games finished over the window's samples (one noisy sample
at either end cannot make or hide a trend), with the plain difference between the window's
last and first samples beside it.

Besides playing, the workers take the other paths a long-lived server sees, at a small rate, so
that a leak in any of them would show as well: an illegal ``SubmitAction`` from a seat that is
not to act (FAILED_PRECONDITION expected, counted), one with the spectator token
(PERMISSION_DENIED, through the per-game refusal budgets), ``GetGame`` and ``ListLegalActions``
(checked against the replica), a ``WatchGame`` stream opened at a game's start and cancelled a
few actions later, ``ExportGame`` of a game just finished (adjudicator token; its hands and
actions checked), and ``GetGame`` of a game finished long ago, which has left the server's cache
and is rebuilt from the store.

The table goes to the console, progress lines to stderr, and the figures, with every sample
(time, games, actions, RSS, server CPU, database size), are merged into ``bench/results.json``
under the ``"soak"`` key (the other keys are kept). ``make bench`` does not run it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import random
import statistics
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

import grpc
from pinochle_client import RefereeClient
from rich.console import Console

from bench.engine import add_run_arguments, environment, exit_status, output_path
from bench.service import (
    CALL_TIMEOUT,
    MB,
    RESULTS_FORMAT,
    SEED,
    VARIANT,
    Figure,
    ReplicaGame,
    cpu_seconds,
    merge_results,
    rss_bytes,
    run_spawned,
    show,
    start_server,
    stop_server,
    wait_serving,
)
from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.engine.engine import legal_actions
from referee.rules.options import resolve_options
from referee.service.convert import action_from_json, struct_to_dict
from referee.service.games import FINISHED_GAMES_KEPT

RESULTS_KEY: Final = "soak"
OPTIONS: Final[Mapping[str, object]] = {"target": 1}  # one hand per game, about 60 actions
# The rules the server and each ReplicaGame resolve from OPTIONS (a one-hand game).
RULES: Final = resolve_options(VARIANT, dict(OPTIONS), for_game=True)

# Target: at most this much RSS growth per 1,000 games finished after the warm-up. A game's
# state, log and tokens take about 60 KiB of RSS while it is cached (bench/README.md, "Soak
# benchmark"); a leak of 1 KiB per game (17 bytes per action) would reach the target, and a
# flat server measures within about +-0.3 here (the allocator's noise over a 5-minute run).
GROWTH_TARGET_MB: Final = 1.0


@dataclass(frozen=True, slots=True)
class Plan:
    """What the client process does; picklable, since it crosses to the spawned process."""

    duration: float = 300.0  # seconds of load
    concurrency: int = 32  # games in play at once, one action in flight each
    # Games finished before the window starts: the cache full (1,024) and its mix of played and
    # rebuilt games steady (1,024 games after the first old read, at 1,152; see the docstring).
    warmup_games: int = 2_300
    warmup_share: float = 0.7  # ... or this share of the duration, whichever comes first
    sample_every: float = 5.0  # seconds between samples
    # The side paths, each a small rate so that the load stays mostly SubmitAction.
    illegal_rate: float = 0.02  # per action: SubmitAction from a seat not to act
    spectator_rate: float = 0.005  # per action: SubmitAction with the spectator token
    read_rate: float = 0.02  # per action: GetGame (a seat's view)
    legal_rate: float = 0.02  # per action: ListLegalActions (the seat to act)
    watch_every: int = 8  # every n-th game of a worker: a WatchGame stream, cancelled early
    export_every: int = 8  # every n-th game of a worker: ExportGame once it has ended
    old_read_every: int = 16  # every n-th game of a worker: GetGame of a long-finished game


QUICK: Final = Plan(duration=20.0, warmup_games=150, sample_every=1.0)


# --------------------------------------------------------------------------------------------
# The client process


@dataclass(slots=True)
class Tally:
    """Counts shared by the workers of one event loop. Each is bumped by a plain statement after
    the awaited call has returned (never ``x += await f()``, which reads ``x`` before awaiting
    and so loses the other workers' updates made meanwhile)."""

    games: int = 0  # games finished (their last action accepted)
    actions: int = 0  # accepted SubmitActions
    refused_turn: int = 0  # SubmitAction from a seat not to act: FAILED_PRECONDITION
    refused_spectator: int = 0  # SubmitAction with the spectator token: PERMISSION_DENIED
    reads: int = 0  # GetGame of a game in play
    legal_lists: int = 0  # ListLegalActions
    watches: int = 0  # WatchGame streams opened (and cancelled or ended)
    watch_items: int = 0  # events and snapshots they received
    exports: int = 0  # ExportGame of a game just finished
    old_reads: int = 0  # GetGame of a game finished long ago (rebuilt from the store)
    error: str = ""  # the first error; it stops the run


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished game another worker may read much later (GetGame as its adjudicator)."""

    game_id: str
    adjudicator_token: str
    version: int


class Stop(Exception):
    """The run stops: a check failed (the message says which)."""


def _auth(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def _db_files(db: Path) -> list[int]:
    """Sizes in bytes of the database, its WAL and its shared-memory (wal-index) file."""
    sizes = []
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        try:
            sizes.append(path.stat().st_size)
        except OSError:
            sizes.append(0)
    return sizes


def _rss_parts(pid: int) -> list[int]:
    """``RssAnon``, ``RssFile`` and ``RssShmem`` of ``/proc/<pid>/status`` in bytes: the heap
    apart from mapped files (libraries, and SQLite's wal-index, which is a shared mapping), so a
    growth can be told apart from a WAL that grows."""
    parts = dict.fromkeys(("RssAnon:", "RssFile:", "RssShmem:"), 0)
    for line in Path(f"/proc/{pid}/status").read_text("ascii").splitlines():
        fields = line.split()
        if fields and fields[0] in parts:
            parts[fields[0]] = int(fields[1]) * 1024
    return list(parts.values())


async def _expect_refusal(call: Any, code: grpc.StatusCode, what: str) -> None:
    """Await ``call``, which must fail with ``code``; anything else stops the run."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        if error.code() != code:
            raise Stop(
                f"{what}: {error.code().name} ({error.details()}), not {code.name}"
            ) from None
        return
    raise Stop(f"{what}: accepted, but {code.name} was expected")


class Soak:
    """The workers and the sampler of one client process."""

    def __init__(self, client: RefereeClient, server_pid: int, db: Path, plan: Plan) -> None:
        self.client = client
        self.server_pid = server_pid
        self.db = db
        self.plan = plan
        self.tally = Tally()
        self.started = time.perf_counter()
        self.deadline = self.started + plan.duration
        self.stopped = asyncio.Event()
        self.samples: list[list[float]] = []
        self.warm_index: int | None = None  # the sample that ends the warm-up
        self.warm_by_time = False
        # Finished games, most recent last: a worker reads one from far enough back that the
        # server has dropped it from its cache (FINISHED_GAMES_KEPT).
        self.finished: deque[Finished] = deque(maxlen=self.old_read_depth)

    @property
    def old_read_depth(self) -> int:
        """How many finished games back an old read goes: beyond the server's cache, whatever
        the order the workers finish in (each finished game, and each export and old read,
        moves a game to the cache's recent end)."""
        return FINISHED_GAMES_KEPT + 4 * self.plan.concurrency

    @property
    def running(self) -> bool:
        return not self.stopped.is_set() and time.perf_counter() < self.deadline

    def fail(self, error: BaseException) -> None:
        if not self.tally.error:
            self.tally.error = f"{type(error).__name__}: {error}"[:500]
        self.stopped.set()

    # ---------------------------------------------------------------------------------------
    # Sampling

    def sample(self) -> None:
        """One row of ``SAMPLE_COLUMNS``."""
        tally = self.tally
        files = _db_files(self.db)
        self.samples.append(
            [
                round(time.perf_counter() - self.started, 3),
                tally.games,
                tally.actions,
                rss_bytes(self.server_pid),
                round(cpu_seconds(self.server_pid), 3),
                sum(files),
                *_rss_parts(self.server_pid),
                *files[1:],
            ]
        )

    async def sampler(self, log: Console) -> None:
        """A sample every ``plan.sample_every`` seconds, and one at the deadline."""
        plan = self.plan
        warm_at = self.started + plan.warmup_share * plan.duration
        self.sample()
        next_at = self.started + plan.sample_every
        while not self.stopped.is_set():
            now = time.perf_counter()
            wake = min(next_at, self.deadline)
            if now < wake:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopped.wait(), wake - now)
                continue
            self.sample()
            t, games, actions, rss, cpu, db, anon, *_, wal, _ = self.samples[-1]
            if self.warm_index is None and (games >= plan.warmup_games or now >= warm_at):
                self.warm_index = len(self.samples) - 1
                self.warm_by_time = games < plan.warmup_games
            phase = "warm-up" if self.warm_index is None else "window"
            log.print(
                f"[dim]{t:6.0f} s  {phase:7}  games {games:6,.0f}  actions {actions:9,.0f}  "
                f"RSS {rss / MB:6.1f} MB (anon {anon / MB:6.1f})  server CPU {cpu:7.1f} s  "
                f"db {db / MB:6.1f} MB (WAL {wal / MB:5.1f})[/]"
            )
            if now >= self.deadline:
                self.stopped.set()
                return
            next_at += plan.sample_every

    # ---------------------------------------------------------------------------------------
    # The side paths

    async def illegal_try(self, game: ReplicaGame, seat: int, action: dict[str, Any]) -> None:
        """``action`` (legal for ``seat``) sent by a seat with no legal action: refused with
        FAILED_PRECONDITION (audited, the game unchanged)."""
        state = game.game.state
        others = [s for s in range(RULES.players) if s != seat and not legal_actions(state, s)]
        if not others:
            return
        wrong = random.choice(others)
        request = pb.SubmitActionRequest(
            game_id=game.game_id,
            action=action_from_json(action),
            expected_version=state.version,
            request_id=uuid.uuid4().hex,
        )
        call = self.client.referee.SubmitAction(
            request, metadata=game.metadata[wrong], timeout=CALL_TIMEOUT
        )
        await _expect_refusal(call, grpc.StatusCode.FAILED_PRECONDITION, "a seat not to act")
        self.tally.refused_turn += 1

    async def spectator_try(self, game: ReplicaGame, action: dict[str, Any]) -> None:
        """The same with the spectator token: PERMISSION_DENIED, drawn from the game's refusal
        budget (60 at once, far more than this rate spends)."""
        request = pb.SubmitActionRequest(
            game_id=game.game_id,
            action=action_from_json(action),
            expected_version=game.game.state.version,
            request_id=uuid.uuid4().hex,
        )
        call = self.client.referee.SubmitAction(
            request, metadata=_auth(game.spectator_token), timeout=CALL_TIMEOUT
        )
        await _expect_refusal(call, grpc.StatusCode.PERMISSION_DENIED, "the spectator acting")
        self.tally.refused_spectator += 1

    async def read(self, game: ReplicaGame, seat: int) -> None:
        response = await self.client.referee.GetGame(
            pb.GetGameRequest(game_id=game.game_id),
            metadata=game.metadata[seat],
            timeout=CALL_TIMEOUT,
        )
        if response.version != game.game.state.version or response.seat != seat:
            raise Stop(
                f"GetGame of {game.seed}: version {response.version} seat {response.seat}, "
                f"replica at {game.game.state.version} seat {seat}"
            )
        self.tally.reads += 1

    async def list_legal(self, game: ReplicaGame, seat: int) -> None:
        response = await self.client.referee.ListLegalActions(
            pb.ListLegalActionsRequest(game_id=game.game_id),
            metadata=game.metadata[seat],
            timeout=CALL_TIMEOUT,
        )
        state = game.game.state
        expected = legal_actions(state, seat)
        listed = [struct_to_dict(a) for a in response.actions]
        if response.version != state.version or listed != expected:
            raise Stop(
                f"ListLegalActions of {game.seed} seat {seat}: version {response.version}, "
                f"{len(listed)} actions; replica at {state.version}, {len(expected)} actions"
            )
        self.tally.legal_lists += 1

    async def watch(self, game: ReplicaGame) -> None:
        """Follow the game as seat 0 until cancelled (or the game's last event); the versions
        received must never go down."""
        stream = self.client.referee.WatchGame(
            pb.WatchGameRequest(game_id=game.game_id, from_version=0),
            metadata=game.metadata[0],
        )
        self.tally.watches += 1
        last = -1
        try:
            async for item in stream:
                version = item.event.version if item.HasField("event") else item.snapshot.version
                if version < last:
                    raise Stop(f"WatchGame of {game.seed}: version {version} after {last}")
                last = version
                self.tally.watch_items += 1
        finally:
            stream.cancel()

    async def export(self, game: ReplicaGame) -> None:
        """ExportGame as the adjudicator: the record's hands and actions are the replica's."""
        response = await self.client.referee.ExportGame(
            pb.ExportGameRequest(game_id=game.game_id),
            metadata=_auth(game.adjudicator_token),
            timeout=CALL_TIMEOUT,
        )
        hands = struct_to_dict(response.record).get("hands")
        exported = (
            [len(h.get("actions", [])) for h in hands if isinstance(h, dict)]
            if isinstance(hands, list)
            else []
        )
        mine = game.game.export()["hands"]
        assert isinstance(mine, list)
        expected = [len(h["actions"]) for h in mine]
        if exported != expected:
            raise Stop(f"ExportGame of {game.seed}: actions per hand {exported}, not {expected}")
        self.tally.exports += 1

    async def read_old(self) -> None:
        """GetGame of a game finished more than the server's cache ago: rebuilt from the store
        and put back into the cache (pushing another out)."""
        if len(self.finished) < self.old_read_depth:
            return
        old = self.finished[0]  # each time another one: the deque moves on with every game finished
        response = await self.client.referee.GetGame(
            pb.GetGameRequest(game_id=old.game_id),
            metadata=_auth(old.adjudicator_token),
            timeout=CALL_TIMEOUT,
        )
        if response.version != old.version:
            raise Stop(f"GetGame of old game {old.game_id}: {response.version}, not {old.version}")
        self.tally.old_reads += 1

    # ---------------------------------------------------------------------------------------
    # Playing

    async def play(self, game: ReplicaGame, rng: random.Random, watch: bool) -> bool:
        """Play ``game`` to its end (True) or until the run stops (False)."""
        plan = self.plan
        await game.create()
        watcher: asyncio.Task[None] | None = None
        watch_until = rng.randrange(5, 40) if watch else -1
        if watch:
            watcher = asyncio.create_task(self.watch(game))
        try:
            while not game.game.state.over:
                if not self.running:
                    return False
                if watcher is not None and game.actions >= watch_until:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                    watcher = None
                seat, action = game.next_action()
                if rng.random() < plan.illegal_rate:
                    await self.illegal_try(game, seat, action)
                if rng.random() < plan.spectator_rate:
                    await self.spectator_try(game, action)
                if rng.random() < plan.read_rate:
                    await self.read(game, rng.randrange(RULES.players))
                if rng.random() < plan.legal_rate:
                    await self.list_legal(game, seat)
                await game.step((seat, action))  # checks the version against the replica
                self.tally.actions += 1
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        self.tally.games += 1
        return True

    async def worker(self, number: int) -> None:
        rng = random.Random(f"{SEED}:soak:{number}")
        plan = self.plan
        try:
            for count in range(1_000_000_000):
                if not self.running:
                    return
                game = ReplicaGame(
                    self.client, f"soak-{SEED}-{number}-{count}", options=dict(OPTIONS)
                )
                watch = count % plan.watch_every == plan.watch_every // 2
                if not await self.play(game, rng, watch):
                    return
                if count % plan.export_every == 0:
                    await self.export(game)
                self.finished.append(
                    Finished(game.game_id, game.adjudicator_token, game.game.state.version)
                )
                if count % plan.old_read_every == plan.old_read_every - 1:
                    await self.read_old()
        except (grpc.RpcError, RuntimeError, Stop) as error:  # ReplicaGame raises RuntimeError
            self.fail(error)

    async def run(self, log: Console) -> None:
        tasks = [asyncio.create_task(self.worker(n)) for n in range(self.plan.concurrency)]
        try:
            await self.sampler(log)
        finally:
            self.stopped.set()
            _, pending = await asyncio.wait(tasks, timeout=CALL_TIMEOUT)
            for task in pending:
                task.cancel()


async def run_soak(address: str, server_pid: int, db: str, plan: Plan) -> dict[str, object]:
    log = Console(stderr=True, soft_wrap=True)  # one progress line per sample, never wrapped
    async with RefereeClient(address) as client:
        soak = Soak(client, server_pid, Path(db), plan)
        await soak.run(log)
    return {
        "tally": asdict(soak.tally),
        "samples": soak.samples,
        "warm_index": soak.warm_index,
        "warm_by_time": soak.warm_by_time,
        "seconds": round(time.perf_counter() - soak.started, 3),
    }


def _client_main(address: str, server_pid: int, db: str, plan: Plan, conn: Connection) -> None:
    """The client process: run the soak under asyncio and send its result (or error) back."""
    try:
        conn.send(("ok", asyncio.run(run_soak(address, server_pid, db, plan))))
    except BaseException as error:
        conn.send(("error", repr(error)))
        raise
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------
# The figures

# One row per sample; db_bytes is the database, WAL and shm files together.
SAMPLE_COLUMNS: Final = (
    "seconds",
    "games",
    "actions",
    "rss_bytes",
    "server_cpu_s",
    "db_bytes",
    "rss_anon_bytes",
    "rss_file_bytes",
    "rss_shmem_bytes",
    "wal_bytes",
    "shm_bytes",
)
RSS, ANON, FILE, SHMEM, WAL = 3, 6, 7, 8, 9  # indices into a row


@dataclass(slots=True)
class Window:
    """The measured window: the samples from the end of the warm-up to the last one."""

    rows: list[list[float]]
    by_time: bool
    slope_mb: float = math.nan  # least-squares MB of RSS per 1,000 games
    anon_slope_mb: float = math.nan  # the same for RssAnon (the heap, no mapped files)

    @property
    def first(self) -> list[float]:
        return self.rows[0]

    @property
    def last(self) -> list[float]:
        return self.rows[-1]

    @property
    def games(self) -> float:
        return self.last[1] - self.first[1]


def measured_window(result: Mapping[str, object]) -> Window | None:
    samples = result["samples"]
    assert isinstance(samples, list)
    start = result["warm_index"]
    if not isinstance(start, int) or start >= len(samples) - 1:
        return None
    window = Window(samples[start:], bool(result["warm_by_time"]))
    games = [row[1] for row in window.rows]
    if len(set(games)) >= 2:
        for column, name in ((RSS, "slope_mb"), (ANON, "anon_slope_mb")):
            values = [row[column] / MB for row in window.rows]
            setattr(window, name, statistics.linear_regression(games, values).slope * 1000)
    return window


def soak_figures(result: Mapping[str, object], plan: Plan, quick: bool) -> list[Figure]:
    """The figures of one run. A ``quick`` run ends long before the server's caches are full,
    so its growth figure has no target (it measures the caches filling, not a leak)."""
    tally = result["tally"]
    samples = result["samples"]
    assert isinstance(tally, dict) and isinstance(samples, list) and samples
    seconds = float(result["seconds"])  # type: ignore[arg-type]
    start, end = samples[0], samples[-1]
    peak = max(row[3] for row in samples)
    games, actions = int(end[1]), int(end[2])
    figures = [
        Figure(
            "soak.games",
            "games finished",
            games,
            "games",
            note=f"{games / seconds:,.1f} games/s, {actions / seconds:,.0f} actions/s "
            f"({actions:,} accepted) over {seconds:,.0f} s; {plan.concurrency} games in play "
            f"at once, seeded {VARIANT} {dict(OPTIONS)}",
            detail={"actions": actions, "seconds": seconds},
        ),
        Figure(
            "soak.rss_start",
            "server RSS at start",
            start[3] / MB,
            "MB",
            note="before the first game",
            digits=1,
        ),
    ]
    target = None if quick else GROWTH_TARGET_MB
    window = measured_window(result)
    if window is None:
        figures.append(
            Figure(
                "soak.growth_per_1000_games",
                "RSS growth per 1,000 games after warm-up",
                math.nan,
                "MB",
                target=target,
                lower_is_better=True,
                note="no window: the warm-up did not end before the run did",
                digits=2,
            )
        )
    else:
        first, last = window.first, window.last
        growth = (last[3] - first[3]) / MB
        per_games = growth / window.games * 1000 if window.games else math.nan
        cpu = (last[4] - first[4]) / (last[0] - first[0])
        parts = [(last[c] - first[c]) / MB for c in (ANON, FILE, SHMEM)]
        warm = (
            f"warm-up ended by TIME at {first[0]:,.0f} s, {first[1]:,} games finished "
            f"(fewer than {plan.warmup_games:,}: the caches may not be full)"
            if window.by_time
            else f"warm-up: the first {first[1]:,} games finished ({first[0]:,.0f} s)"
        )
        figures += [
            Figure(
                "soak.rss_warm",
                "server RSS after warm-up",
                first[3] / MB,
                "MB",
                note=warm,
                digits=1,
                detail={"games": first[1], "seconds": first[0], "by_time": window.by_time},
            ),
            Figure(
                "soak.rss_end",
                "server RSS at the end",
                last[3] / MB,
                "MB",
                note=f"peak {peak / MB:,.1f} MB; {last[1]:,} games finished",
                digits=1,
                detail={"peak_mb": round(peak / MB, 1)},
            ),
            Figure(
                "soak.growth_mb",
                "RSS growth over the window",
                growth,
                "MB",
                note=f"last sample - first of the window: {window.games:,.0f} games, "
                f"{last[2] - first[2]:,.0f} actions in {last[0] - first[0]:,.0f} s "
                f"({per_games:+.2f} MB per 1,000 games); of it RssAnon {parts[0]:+.1f}, "
                f"RssFile {parts[1]:+.1f}, RssShmem {parts[2]:+.1f} MB; WAL "
                f"{first[WAL] / MB:,.0f} -> {last[WAL] / MB:,.0f} MB; server CPU {cpu:.0%}",
                digits=1,
                detail={
                    "games": window.games,
                    "actions": last[2] - first[2],
                    "seconds": round(last[0] - first[0], 3),
                    "per_1000_games_difference": round(per_games, 3),
                    "rss_anon_mb": round(parts[0], 2),
                    "rss_file_mb": round(parts[1], 2),
                    "rss_shmem_mb": round(parts[2], 2),
                    "wal_mb": [round(first[WAL] / MB, 1), round(last[WAL] / MB, 1)],
                    "server_cpu_share": round(cpu, 3),
                },
            ),
            Figure(
                "soak.growth_per_1000_games",
                "RSS growth per 1,000 games after warm-up",
                window.slope_mb,
                "MB",
                target=target,
                lower_is_better=True,
                note=f"least-squares slope of RSS over games finished, {len(window.rows)} "
                "samples of the window"
                + ("; warm-up ended by time" if window.by_time else "")
                + ("; --quick: the caches are still filling" if quick else ""),
                digits=2,
                detail={"samples": len(window.rows)},
            ),
            Figure(
                "soak.anon_growth_per_1000_games",
                "of which anonymous memory (heap)",
                window.anon_slope_mb,
                "MB",
                note="the same slope for RssAnon alone (RSS less mapped files: libraries, "
                "SQLite's wal-index)",
                digits=2,
            ),
        ]
    db_growth = end[5] - start[5]
    figures.append(
        Figure(
            "soak.db_per_action",
            "database growth per action",
            db_growth / max(actions, 1) / 1024,
            "KiB",
            note=f"{end[5] / MB:,.1f} MB at the end (database, WAL and shm files); refused "
            "requests are audited rows too",
            digits=2,
            detail={"db_mb_end": round(end[5] / MB, 1)},
        )
    )
    other = {
        key: tally[key]
        for key in (
            "refused_turn",
            "refused_spectator",
            "reads",
            "legal_lists",
            "watches",
            "watch_items",
            "exports",
            "old_reads",
        )
    }
    figures.append(
        Figure(
            "soak.other_calls",
            "other calls (all as expected)",
            sum(int(v) for k, v in other.items() if k != "watch_items"),
            "calls",
            note=f"refused: {other['refused_turn']:,} seat not to act (FAILED_PRECONDITION), "
            f"{other['refused_spectator']:,} spectator (PERMISSION_DENIED); GetGame "
            f"{other['reads']:,}, ListLegalActions {other['legal_lists']:,}, WatchGame "
            f"{other['watches']:,} ({other['watch_items']:,} items), ExportGame "
            f"{other['exports']:,}, GetGame of an evicted game {other['old_reads']:,}",
            detail=other,
        )
    )
    error = str(tally["error"])
    figures.append(
        Figure(
            "soak.errors",
            "errors",
            1 if error else 0,
            "runs stopped",
            target=0,
            lower_is_better=True,
            note=error or "every version and every refusal as the replica expected",
        )
    )
    return figures


# --------------------------------------------------------------------------------------------
# Output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    add_run_arguments(parser, f"a {QUICK.duration:g} s smoke run", merges=True)
    parser.add_argument("--check", action="store_true", help="exit 1 if any figure misses")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help=f"seconds of load (default {Plan().duration:g}; --quick {QUICK.duration:g})",
    )
    parser.add_argument(
        "--warmup-games",
        type=int,
        default=None,
        help=f"games finished before the measured window (default {Plan().warmup_games:,})",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else Plan()
    if args.duration is not None:
        if not args.duration > 0:
            parser.error("--duration must be positive")
        plan = Plan(**{**asdict(plan), "duration": args.duration})
    if args.warmup_games is not None:
        plan = Plan(**{**asdict(plan), "warmup_games": args.warmup_games})
    output = output_path(args)
    console = Console()
    if not console.is_terminal:
        console = Console(width=170)
    log = Console(stderr=True, soft_wrap=True)
    env = environment()
    started = time.perf_counter()
    server_info: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="referee-soak-") as folder:
        log.print("[dim]starting pinochle-referee serve ...[/]")
        server = start_server(Path(folder))
        try:
            asyncio.run(wait_serving(server.address))
            log.print(
                f"[dim]playing {VARIANT} {dict(OPTIONS)} games with {plan.concurrency} workers "
                f"for {plan.duration:g} s ({server.address}); a sample every "
                f"{plan.sample_every:g} s ...[/]"
            )
            result = run_spawned(
                _client_main,
                (server.address, server.pid, str(server.db), plan),
                "bench-soak",
                plan.duration + 2 * CALL_TIMEOUT + 60,
            )
            server_info = {
                "command": "pinochle-referee serve --port 0 --metrics-port 0 "
                "--max-games 1000000 --log-format json (log to a file)",
                "store": "sqlite, WAL, synchronous=FULL (temporary file)",
                "finished_games_kept": FINISHED_GAMES_KEPT,
            }
        except BaseException:
            log.print(f"[red]server log (last lines):[/]\n{server.log_tail()}")
            raise
        finally:
            stop_server(server)
    elapsed = time.perf_counter() - started

    figures = soak_figures(result, plan, args.quick)
    show(console, figures, env, title="Pinochle referee soak benchmark")
    tally = result["tally"]
    assert isinstance(tally, dict)
    if tally["error"]:
        console.print(f"[bold red]the run stopped: {tally['error']}; nothing written[/]")
        return 1
    samples = result["samples"]
    assert isinstance(samples, list)
    soak = {
        "format": RESULTS_FORMAT,
        **env,
        "quick": args.quick,
        "seed": SEED,
        "total_seconds": round(elapsed, 2),
        "server": server_info,
        "plan": {**asdict(plan), "options": dict(OPTIONS)},
        "figures": {f.key: f.to_json() for f in figures},
        "samples": {
            "columns": list(SAMPLE_COLUMNS),
            "warm_index": result["warm_index"],
            "rows": samples,
        },
    }
    if output is not None:
        merge_results(output, RESULTS_KEY, soak)
        console.print(f'merged the figures into {output} under "{RESULTS_KEY}" ({elapsed:.0f} s)')
    return exit_status(console, figures, args.check)


if __name__ == "__main__":
    raise SystemExit(main())
