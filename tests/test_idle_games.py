"""Idle games (``--idle-after``): games nobody plays stop counting against ``--max-games`` and
leave memory, yet stay stored, whole, and play on as soon as anyone acts."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from pinochle_client import RefereeClient
from prometheus_client import REGISTRY

from referee.audit import audit_record
from referee.cli import build_parser
from referee.service.errors import ServiceError
from referee.service.games import Created, GameManager
from referee.service.settings import ENV_PREFIX, IDLE_AFTER, Settings, settings_from
from referee.store.base import AuditRow, Commit
from referee.store.postgres import PostgresStore
from referee.store.sqlite import SqliteStore
from tests.service_helpers import (
    Served,
    Table,
    new_managed_game,
    new_table,
    play,
    play_step,
    refused,
    serving,
)
from tests.test_store import POSTGRES_URL, postgres_marks, postgres_schema

IDLE = 100.0  # seconds
CAP = 2
BID = {"type": "bid", "amount": 250}  # seat 1 opens a partnership auction dealt by seat 0
PASS = {"type": "pass"}
QUIET = 0.5  # seconds without a stream message after which a watch has sent all there is


class FakeClock:
    """A clock the test moves by hand (the manager's wall clock or its monotonic clock)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path, max_games=CAP, idle_after=IDLE) as served:
        served.running.games.clock = FakeClock(1_800_000_000.0)
        served.running.games.monotonic = FakeClock(5_000.0)
        yield served


def _advance(srv: Served, seconds: float) -> None:
    """Move both of the manager's clocks on."""
    for clock in (srv.running.games.clock, srv.running.games.monotonic):
        assert isinstance(clock, FakeClock)
        clock.now += seconds


async def _cap_refuses(srv: Served) -> None:
    error = await refused(srv.client.create_game("partnership"))
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"at most {CAP} active games" in error.message


def _games_active() -> float | None:
    return REGISTRY.get_sample_value("referee_games_active")


async def test_idle_games_stop_counting_against_the_cap(srv: Served) -> None:
    rng = random.Random(3)
    first = await new_table(srv.client)
    second = await new_table(srv.client)
    await _cap_refuses(srv)
    _advance(srv, IDLE / 2)
    await _cap_refuses(srv)  # neither is idle yet
    await play_step(first, rng)  # first is active again, from now
    _advance(srv, IDLE / 2 + 1)  # second: idle (created IDLE + 1 ago); first: IDLE / 2 + 1
    third = await new_table(srv.client)
    await _cap_refuses(srv)  # first and third count

    # A refused request does not wake a game: a stranger's, nor a seat's illegal action.
    error = await refused(
        second.client.seat(second.game_id, "not-a-token").submit({"type": "pass"})
    )
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    view = await second.adj.view()
    seat = next(s for s in range(4) if s != view["hand"]["turn"])
    await refused(second.seats[seat].submit({"type": "pass"}))
    _advance(srv, 1)  # first still active (IDLE / 2 + 2 ago)
    await _cap_refuses(srv)

    # An idle game plays on though the cap is full; it then counts again. (No recount has run
    # since it went idle, so the gauge still held it: it is not added twice.)
    assert _games_active() == 3
    step = await play_step(second, rng)
    assert step is not None and step.result["version"] == 1
    assert await srv.running.store.count_active_games(srv.running.games.active_since()) == 3
    assert _games_active() == 3
    await _cap_refuses(srv)
    _advance(srv, IDLE + 1)  # all three idle
    fourth = await new_table(srv.client)
    assert {third.game_id, fourth.game_id}.isdisjoint({first.game_id, second.game_id})


async def test_an_idle_game_leaves_memory_and_plays_on_where_it_was(srv: Served) -> None:
    rng = random.Random(11)
    table = await new_table(srv.client, "partnership", seed="idle")  # target 1500
    await play(table, rng, hands=1)
    assert not (await table.adj.view())["over"]
    before = await _everything_seen(table)
    games = srv.running.games
    assert table.game_id in games.games

    _advance(srv, IDLE - 1)
    assert await games.evict_idle_games() == 0  # played IDLE - 1 seconds ago: kept
    _advance(srv, 2)
    assert await games.evict_idle_games() == 1
    assert table.game_id not in games.games

    assert await _everything_seen(table) == before  # rebuilt from the store, the same game
    assert table.game_id in games.games  # the requests brought it back
    # Reads, even a stranger's, do not make it active: it leaves memory again.
    assert (await refused(table.client.session(table.game_id, "guess").view())).code == (
        grpc.StatusCode.UNAUTHENTICATED
    )
    assert await games.evict_idle_games() == 1
    await play(table, rng, hands=1)  # and it plays on
    verdict = audit_record(await table.adj.export())
    hands = verdict["hands"]
    assert isinstance(hands, list)
    assert verdict["legal"] is True and len(hands) >= 2, verdict
    assert await table.adj.verify_audit_log()


async def _everything_seen(table: Table) -> list[object]:
    """Every role's view and legal actions, the whole event stream and the audit log."""
    seen: list[object] = [await table.adj.view(), await table.spec.view()]
    for seat in table.seats:
        seen += [await seat.view(), await seat.legal_actions()]
    seen.append(await _events_so_far(table))
    seen.append(await table.adj.audit_log())
    return seen


async def _events_so_far(table: Table) -> list[dict[str, object]]:
    """The adjudicator's stream from version 0 until it waits for the next action."""
    stream = table.adj.watch(0)
    events: list[dict[str, object]] = []
    try:
        while True:
            try:
                events.append(await asyncio.wait_for(anext(stream), QUIET))
            except (TimeoutError, StopAsyncIteration):
                return events
    finally:
        await stream.aclose()


async def test_a_watched_or_busy_game_stays_in_memory(srv: Served) -> None:
    table = await new_table(srv.client)
    games = srv.running.games
    live = games.games[table.game_id]
    stream = table.spec.watch(0)
    first = await anext(stream)  # the stream now follows the game
    assert first
    assert live.watchers == 1
    _advance(srv, IDLE + 1)
    assert await games.evict_idle_games() == 0
    async with live.lock:  # as while a commit is in flight
        await stream.aclose()  # the server's stream ends when it sees the cancellation
        for _ in range(500):
            if not live.watchers:
                break
            await asyncio.sleep(0.01)
        assert live.watchers == 0
        eviction = asyncio.create_task(games.evict_idle_games())
        await asyncio.sleep(0.05)
        assert not eviction.done()  # it waits for the lock
        assert table.game_id in games.games
    assert await eviction == 1
    assert table.game_id not in games.games


async def test_a_watcher_that_disconnects_stops_holding_the_game(srv: Served) -> None:
    """A client that goes away without cancelling (its connection closes) ends the stream on
    the server too, so the game can leave memory once idle."""
    table = await new_table(srv.client)
    live = srv.running.games.games[table.game_id]
    other = RefereeClient(srv.address)
    stream = other.session(table.game_id, table.spectator_token).watch(0)
    assert await anext(stream)
    assert live.watchers == 1
    await other.close()  # the connection goes; the stream is not cancelled by the client
    for _ in range(500):
        if not live.watchers:
            break
        await asyncio.sleep(0.01)
    assert live.watchers == 0
    _advance(srv, IDLE + 1)
    assert await srv.running.games.evict_idle_games() == 1


async def test_housekeeping_evicts_idle_games_and_recounts_the_gauge(tmp_path: Path) -> None:
    async with serving(tmp_path, idle_after=IDLE, housekeeping_seconds=0.02) as served:
        games = served.running.games
        games.clock = FakeClock(1_800_000_000.0)
        games.monotonic = FakeClock(5_000.0)
        tables = [await new_table(served.client) for _ in range(3)]
        assert _games_active() == 3
        _advance(served, IDLE / 2)
        await play_step(tables[0], random.Random(1))
        _advance(served, IDLE / 2 + 1)  # tables 1 and 2 idle; table 0 played IDLE / 2 + 1 ago
        for _ in range(500):
            if _games_active() == 1 and len(games.games) == 1:
                break
            await asyncio.sleep(0.01)
        assert _games_active() == 1
        assert list(games.games) == [tables[0].game_id]


async def test_the_gauge_counts_each_game_once_between_recounts(srv: Served) -> None:
    """The gauge is exact at a recount and moved by creations, ends and wakings in between,
    each judged against the recount's threshold: a game that went idle after the last
    recount is still in the gauge, so waking it adds nothing and ending it takes it out."""
    games = srv.running.games
    rng = random.Random(5)
    woken = await new_table(srv.client, "partnership", seed="woken")
    await games.recount_active_games()
    assert _games_active() == 1
    _advance(srv, IDLE + 1)  # idle now, but the gauge was counted before
    ended = await new_table(srv.client, "partnership", {"target": 1}, seed="ended")
    assert _games_active() == 2  # counted on creation
    await play_step(woken, rng)  # wakes: already in the gauge
    assert _games_active() == 2
    actions = 0
    while True:  # every action of this game, its last too, comes when it is idle
        _advance(srv, IDLE + 1)
        step = await play_step(ended, rng)
        if step is None:
            break
        actions += 1
        if (await ended.adj.view())["over"]:
            break
        assert _games_active() == 2
    assert actions > 1  # a whole hand
    assert _games_active() == 1  # ended: out of the gauge, once
    assert await srv.running.store.count_active_games(games.active_since()) == 0
    await games.recount_active_games()
    assert _games_active() == 0  # woken went idle again
    await play_step(woken, rng)  # wakes after a recount that left it out: counted again
    assert _games_active() == 1
    await games.recount_active_games()
    assert _games_active() == 1


async def test_idle_after_zero_means_games_count_until_they_end(tmp_path: Path) -> None:
    async with serving(tmp_path, max_games=1, idle_after=0) as served:
        served.running.games.clock = FakeClock(1_800_000_000.0)
        served.running.games.monotonic = FakeClock(5_000.0)
        table = await new_table(served.client)
        _advance(served, 10 * 365 * 86_400)
        assert served.running.games.active_since() is None
        assert await served.running.games.evict_idle_games() == 0
        assert table.game_id in served.running.games.games
        error = await refused(served.client.create_game("partnership"))
        assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED


@dataclass
class Race:
    """A manager on its own SQLite store, with a clock the test moves (no server around it)."""

    store: SqliteStore
    clock: FakeClock
    games: GameManager


@pytest_asyncio.fixture
async def race(tmp_path: Path) -> AsyncIterator[Race]:
    store = SqliteStore(tmp_path / "race.db")
    await store.open()
    clock = FakeClock(1_800_000_000.0)
    try:
        yield Race(store, clock, GameManager(store, idle_after=IDLE, clock=clock))
    finally:
        await _closing(store)


async def test_eviction_passes_over_a_game_that_requests_hold(race: Race) -> None:
    """Review: a request that waits for a game's lock (behind a commit held up by a slow store)
    while the game becomes idle must not be left with an object that has left memory: its
    acknowledged action would be missing from the game rebuilt for the next request."""
    store, clock, games = race.store, race.clock, race.games
    created = await _race_game(games)
    game_id, seats = created.game_id, created.seat_tokens
    held = games.games[game_id]
    committed = _held_back(store, "commit")
    first = asyncio.create_task(games.submit(game_id, seats[1], BID, 0, "a"))
    await asyncio.sleep(0.05)  # its commit is in flight, under the lock
    second = asyncio.create_task(games.submit(game_id, seats[2], PASS, 1, "b"))
    await asyncio.sleep(0.05)  # waiting for the lock
    assert held.users == 2
    clock.now += IDLE + 1
    eviction = asyncio.create_task(games.evict_idle_games())
    await asyncio.sleep(0.05)
    done = eviction.done()  # in use: passed over, not waited for
    assert done, "the eviction waits for a game that requests hold"
    assert eviction.result() == 0
    committed.set()
    assert [(await first).version, (await second).version] == [1, 2]
    assert held.users == 0
    assert games.games[game_id] is held and held.state.version == 2
    # Idle and unused: it leaves memory, and the game rebuilt from the store is the same.
    clock.now += IDLE + 1
    assert await games.evict_idle_games() == 1
    rebuilt, _ = await games.get(game_id, created.adjudicator_token)
    assert rebuilt is not held and rebuilt.state == held.state


def _held_back(store: object, name: str) -> asyncio.Event:
    """Make ``store.<name>`` wait for the returned event before doing its work (released in
    any case when the test ends: see ``_closing``)."""
    release = asyncio.Event()
    _RELEASES.append(release)
    original: Callable[..., Awaitable[Any]] = getattr(store, name)

    def held(*args: Any) -> asyncio.Future[Any]:
        async def later() -> Any:
            await release.wait()
            return await original(*args)

        return asyncio.ensure_future(later())

    setattr(store, name, held)
    return release


_RELEASES: list[asyncio.Event] = []


async def _closing(*stores: SqliteStore | PostgresStore) -> None:
    """Let every held-back store call go (a failed test must not leave ``close`` waiting for
    a write that never comes), then close the stores."""
    for release in _RELEASES:
        release.set()
    _RELEASES.clear()
    await asyncio.sleep(0)
    for store in stores:
        await store.close()


async def _race_game(games: GameManager) -> Created:
    return await new_managed_game(games, "race")


async def test_a_request_that_arrives_while_the_eviction_waits_keeps_the_game(
    race: Race,
) -> None:
    """Second review: a request that looks the game up while the eviction waits for the lock
    queues behind it. Dropped then, the game would be rebuilt (by a read) without the action
    that request then commits; the next seat would be refused STALE_VERSION for good."""
    store, clock, games = race.store, race.clock, race.games
    created = await _race_game(games)
    game_id, seats, adjudicator = (
        created.game_id,
        created.seat_tokens,
        created.adjudicator_token,
    )
    held = games.games[game_id]
    clock.now += IDLE + 1  # idle
    refusal_written = _held_back(store, "record_refusal")
    committed = _held_back(store, "commit")
    out_of_turn = asyncio.create_task(games.submit(game_id, seats[2], PASS, 0, "x"))
    await asyncio.sleep(0.05)  # refused; its audit row is being written, under the lock
    eviction = asyncio.create_task(games.evict_idle_games())
    await asyncio.sleep(0.05)  # waiting for the lock
    bid = asyncio.create_task(games.submit(game_id, seats[1], BID, 0, "b"))
    await asyncio.sleep(0.05)  # waiting for the lock, behind the eviction
    refusal_written.set()
    with pytest.raises(ServiceError):
        await out_of_turn
    assert await eviction == 0  # the bid holds the game
    await asyncio.sleep(0.05)
    assert (await games.get(game_id, adjudicator))[0] is held  # a read meanwhile
    committed.set()
    assert (await bid).version == 1
    assert held.state.version == 1 and games.games[game_id] is held
    assert (await games.submit(game_id, seats[2], PASS, 1, "next")).version == 2


async def _watch_that_arrives_while_the_eviction_waits(
    games: GameManager, store: object, act: Callable[[Created], Awaitable[object]]
) -> list[int]:
    """The versions of the events a watcher (spectator) sees when it starts while the eviction
    of its idle game waits for the game's lock, and ``act`` is then played."""
    created = await _race_game(games)
    clock = games.clock
    assert isinstance(clock, FakeClock)
    clock.now += IDLE + 1
    refusal_written = _held_back(store, "record_refusal")
    out_of_turn = asyncio.create_task(
        games.submit(created.game_id, created.seat_tokens[2], PASS, 0, "x")
    )
    await asyncio.sleep(0.1)  # holds the lock
    eviction = asyncio.create_task(games.evict_idle_games())
    await asyncio.sleep(0.1)
    seen: list[int] = []

    async def follow() -> None:
        async for message in games.watch(created.game_id, created.spectator_token, 0):
            if message.HasField("event"):
                seen.append(message.event.version)

    watcher = asyncio.create_task(follow())  # a shared store: load() refreshes under the lock
    try:
        await asyncio.sleep(0.1)
        refusal_written.set()
        with pytest.raises(ServiceError):
            await out_of_turn
        assert await eviction == 0
        await act(created)
        for _ in range(300):
            if 1 in seen:
                break
            await asyncio.sleep(0.01)
        return seen
    finally:
        watcher.cancel()


async def test_a_watch_that_arrives_while_the_eviction_waits_sees_what_follows(
    tmp_path: Path,
) -> None:
    """Second review, shared store: the watch's refresh queued behind the eviction and then
    followed the dropped object, so the stream never saw another event."""
    store = SqliteStore(tmp_path / "race.db")
    await store.open()
    games = GameManager(store, idle_after=IDLE, clock=FakeClock(1_800_000_000.0), shared_store=True)
    try:

        async def bid(created: Created) -> object:
            return await games.submit(created.game_id, created.seat_tokens[1], BID, 0, "b")

        assert 1 in await _watch_that_arrives_while_the_eviction_waits(games, store, bid)
    finally:
        await _closing(store)


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=postgres_marks())])
async def test_postgres_a_watch_that_arrives_while_the_eviction_waits_sees_other_replicas(
    backend: str,
) -> None:
    """The same with two replicas on one PostgreSQL schema, the action played on the other."""
    del backend
    with postgres_schema("test_idle") as schema:
        here, there = (
            PostgresStore(POSTGRES_URL, schema=schema),
            PostgresStore(POSTGRES_URL, schema=schema),
        )
        await here.open()
        await there.open()
        clock = FakeClock(1_800_000_000.0)
        games = GameManager(here, idle_after=IDLE, clock=clock, shared_store=True)
        other = GameManager(there, idle_after=IDLE, clock=clock, shared_store=True)
        following = asyncio.create_task(games.follow_changes())
        try:

            async def bid_there(created: Created) -> object:
                return await other.submit(created.game_id, created.seat_tokens[1], BID, 0, "b")

            seen = await _watch_that_arrives_while_the_eviction_waits(games, here, bid_there)
            assert 1 in seen, seen
        finally:
            following.cancel()
            await _closing(here, there)


def _serve_settings(*flags: str) -> Settings:
    return settings_from(build_parser().parse_args(["serve", *flags]))


def test_idle_after_defaults_and_comes_from_a_flag_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_PREFIX + "IDLE_AFTER", raising=False)
    assert _serve_settings().idle_after == IDLE_AFTER == 86_400.0
    monkeypatch.setenv(ENV_PREFIX + "IDLE_AFTER", "3600")
    assert _serve_settings().idle_after == 3600.0
    assert _serve_settings("--idle-after", "0").idle_after == 0.0
    assert _serve_settings("--idle-after", "90.5").idle_after == 90.5


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "a day"])
def test_a_bad_idle_after_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _serve_settings("--idle-after", value)
    assert exit_info.value.code == 2
    assert "--idle-after: must be a number of seconds from 0 up" in capsys.readouterr().err


async def test_a_game_rebuilt_from_its_log_holds_what_the_played_one_holds(
    tmp_path: Path,
) -> None:
    """A game rebuilt from the store (after a restart, out of the finished-games cache) keeps
    the same state and the same recent events, byte for byte, as the game played in memory.
    Its events were dicts decoded from JSON, each with its own copy of every key and card, and
    such a game took 2.5 times the memory of the played one; both now keep each event as its
    compact JSON (``_packed``), and the memory is the same (bench/game_memory.py)."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="shared strings")
        await play(table, random.Random(5), hands=1)
        played = srv.running.games.games[table.game_id]
        rebuilt = await GameManager(srv.running.store).load(table.game_id)
        assert rebuilt.state == played.state
        assert len(rebuilt.events) > 50 and rebuilt.events == played.events
        assert all(type(event) is str for event in rebuilt.events)


async def _one_action_short(srv: Served, kind: str) -> tuple[Table, random.Random]:
    """A game whose next action ends it (``ends``) or wakes it (``wakes``; it is idle, and out
    of the gauge since a recount), and the bots' generator that plays that action."""
    games = srv.running.games
    options = {"target": 1}
    if kind == "wakes":
        table = await new_table(srv.client, "partnership", options, seed="gauge")
        _advance(srv, IDLE + 1)
        await games.recount_active_games()
        assert _games_active() == 0
        return table, random.Random(5)
    rehearsal = await new_table(srv.client, "partnership", options, seed="gauge")
    steps = len(await play(rehearsal, random.Random(5)))  # the same deal and choices, below
    table = await new_table(srv.client, "partnership", options, seed="gauge")
    rng = random.Random(5)
    for _ in range(steps - 1):
        assert await play_step(table, rng) is not None
    assert not (await table.adj.view())["over"]
    return table, rng


@pytest.mark.parametrize("kind", ["ends", "wakes"])
@pytest.mark.parametrize("landed", ["during the read", "before the read"])
async def test_a_game_that_ends_or_wakes_while_the_gauge_is_recounted_is_counted_right(
    srv: Served, monkeypatch: pytest.MonkeyPatch, kind: str, landed: str
) -> None:
    """Was: the recount set the gauge to the store's number as it was read, so a game whose
    action ended or woke it while the store read left the gauge one off until the next
    recount (15 s later): counted though it had ended, when its commit landed after the read
    began and was acknowledged before the read ended; counted as ended twice, or woken twice,
    when its commit landed before the read and was acknowledged after it. Now such games are
    left out of the read and counted from memory (the read made again for one that began
    meanwhile)."""
    games = srv.running.games
    store = games.store
    table, rng = await _one_action_short(srv, kind)
    entered, gate = asyncio.Event(), asyncio.Event()
    if landed == "during the read":
        count: Callable[..., Awaitable[int]] = store.count_active_games
        reads = 0

        async def held_read(*args: Any, **kwargs: Any) -> int:
            nonlocal reads
            reads += 1
            counted = await count(*args, **kwargs)
            if reads == 1:  # the first read has its number; the action comes meanwhile
                entered.set()
                await asyncio.wait_for(gate.wait(), 30)
            return counted

        monkeypatch.setattr(store, "count_active_games", held_read)
        recount = asyncio.ensure_future(games.recount_active_games())
        await asyncio.wait_for(entered.wait(), 30)
        assert await play_step(table, rng) is not None
        gate.set()
        await recount
    else:
        commit: Callable[[Commit], Awaitable[AuditRow]] = store.commit

        async def held_commit(committed: Commit) -> AuditRow:
            row = await commit(committed)  # durable: the read below sees it
            entered.set()
            await asyncio.wait_for(gate.wait(), 30)
            return row

        monkeypatch.setattr(store, "commit", held_commit)
        step = asyncio.ensure_future(play_step(table, rng))
        await asyncio.wait_for(entered.wait(), 30)
        await games.recount_active_games()
        gate.set()
        assert await step is not None
    monkeypatch.undo()
    assert (await table.adj.view())["over"] == (kind == "ends")
    assert _games_active() == await store.count_active_games(games.active_since())
    assert _games_active() == (kind == "wakes")
