"""Replicas sharing a store (review of the PostgreSQL deployment): a replica folds in the other
replicas' commits as the store announces them (``GameManager.follow_changes``). Two ways an
announcement used to be lost for good, leaving the replica's copy, its reads and its watchers a
version behind until the game's next commit there:

* it arrived while the replica was loading the game (the game was not held yet);
* folding it in failed (the store failed meanwhile).

A replica ignores its own announcements, so a third case needs the same remedy: its own commit
landed but was reported failed (the connection lost after ``COMMIT``).

The store here is SQLite, shared by two managers in one process; the announcements come from a
queue the test fills, so every order is forced, not hoped for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio
import structlog
import structlog.testing

from referee.engine.engine import apply as engine_apply
from referee.service import games as games_module
from referee.service.games import GameManager
from referee.store.base import AuditRow, Commit, GameStore, LogRow, StoreError
from referee.store.sqlite import SqliteStore
from tests.service_helpers import new_managed_game, quiet_logs

BOUND = 10.0  # seconds any wait below may take before the test fails


class AnnouncedStore:
    """A store whose announcements (``changes``) the test makes, and whose next ``load_log``
    the test can hold back (after it has read its rows) or fail."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.announced: asyncio.Queue[str] = asyncio.Queue()
        self.holding = False  # the next load_log waits for ``gate`` once it has read
        self.read = asyncio.Event()  # set when a held load_log has read its rows
        self.gate = asyncio.Event()
        self.failing = 0  # how many load_log calls still fail
        self.handled = 0  # how many announcements the follower has handled

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def load_log(self, game_id: str, after_seq: int = 0) -> Sequence[LogRow]:
        if self.failing:
            self.failing -= 1
            raise StoreError("the store failed (test)")
        rows = await self.store.load_log(game_id, after_seq)
        if self.holding:
            self.holding = False
            self.read.set()
            await asyncio.wait_for(self.gate.wait(), BOUND)
        return rows

    async def changes(self) -> AsyncIterator[str]:
        while True:
            yield await self.announced.get()
            self.handled += 1  # the follower asks for the next one: it has handled this one


@dataclass
class Pair:
    shared: AnnouncedStore
    player: GameManager  # the replica where the game is played
    follower: GameManager  # the replica that follows it through announcements
    game_id: str
    seats: list[str]

    async def act(self, seat: int, action: dict[str, object]) -> int:
        live = await self.player.load(self.game_id)
        response = await self.player.submit(
            self.game_id, self.seats[seat], action, live.state.version, ""
        )
        return response.version

    async def announce(self) -> None:
        """Announce the game and wait until the follower has handled the announcement (it asks
        for the next one). Waiting until it had taken it, then a fixed 0.05 s, was not enough
        on a loaded machine: the follower reads the log in SQLite's reader thread first."""
        handled = self.shared.handled
        await self.shared.announced.put(self.game_id)
        for _ in range(int(BOUND / 0.01)):
            if self.shared.handled > handled:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the follower never handled the announcement")

    async def followed_version(self, version: int) -> int:
        """The follower's version of the game once it reaches ``version`` (or BOUND passes)."""
        for _ in range(int(BOUND / 0.01)):
            live = self.follower.games.get(self.game_id)
            if live is not None and live.state.version >= version:
                break
            await asyncio.sleep(0.01)
        live = self.follower.games.get(self.game_id)
        assert live is not None
        return live.state.version


@pytest_asyncio.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    store = SqliteStore(tmp_path / "shared.db")
    await store.open()
    quiet_logs()
    shared = AnnouncedStore(store)
    player = GameManager(store, shared_store=True)
    follower = GameManager(cast(GameStore, shared), shared_store=True)
    game_id, seats = await _new_game(player, "catch-up")
    following = asyncio.create_task(follower.follow_changes())
    try:
        yield Pair(shared, player, follower, game_id, seats)
    finally:
        shared.gate.set()
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await store.close()


async def test_a_commit_announced_while_the_follower_loads_the_game_is_folded_in(
    pair: Pair,
) -> None:
    assert await pair.act(1, {"type": "bid", "amount": 250}) == 1
    pair.shared.holding = True
    loading = asyncio.create_task(pair.follower.load(pair.game_id))
    await asyncio.wait_for(pair.shared.read.wait(), BOUND)  # the follower has read version 1
    # Meanwhile the game moves on and the store announces it: the follower does not hold the
    # game yet, so follow_changes has nothing to fold it into.
    assert await pair.act(2, {"type": "pass"}) == 2
    await pair.announce()
    pair.shared.gate.set()
    await asyncio.wait_for(loading, BOUND)
    assert await pair.followed_version(2) == 2


async def test_a_change_that_failed_to_fold_in_is_caught_up_by_housekeeping(pair: Pair) -> None:
    await pair.follower.load(pair.game_id)
    assert await pair.act(1, {"type": "bid", "amount": 250}) == 1
    pair.shared.failing = 1
    await pair.announce()  # folding it in fails: no further announcement will come
    assert pair.shared.failing == 0
    assert pair.game_id in pair.follower.behind
    assert pair.follower.games[pair.game_id].state.version == 0
    housekeeping = asyncio.create_task(pair.follower.keep_house(0.05))
    try:
        assert await pair.followed_version(1) == 1  # housekeeping caught it up
        for _ in range(int(BOUND / 0.01)):
            if not pair.follower.behind:
                break
            await asyncio.sleep(0.01)
        assert not pair.follower.behind
    finally:
        housekeeping.cancel()
        await asyncio.gather(housekeeping, return_exceptions=True)


class LandsThenFails:
    """A store whose next commit lands and is then reported failed, as when a PostgreSQL
    connection is lost after ``COMMIT`` was sent."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.failing = False
        self.failing_reads = 0  # how many load_log calls still fail
        self.reads_failing_after = 0  # failing_reads once the failing commit has been reported
        self.reads = 0  # load_log calls made

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def load_log(self, game_id: str, after_seq: int = 0) -> Sequence[LogRow]:
        self.reads += 1
        if self.failing_reads:
            self.failing_reads -= 1
            raise StoreError("the store is still failing (test)")
        return await self.store.load_log(game_id, after_seq)

    def commit(self, commit: Commit) -> Awaitable[AuditRow]:
        landed = self.store.commit(commit)
        if not self.failing:
            return landed

        async def reported_failed() -> AuditRow:
            await landed
            self.failing = False
            self.failing_reads = self.reads_failing_after
            raise StoreError("the connection was lost after COMMIT (test)")

        return reported_failed()


@contextlib.asynccontextmanager
async def _landing(tmp_path: Path) -> AsyncIterator[tuple[LandsThenFails, GameManager]]:
    """A manager on a store whose commits the test can make land and then fail."""
    store = SqliteStore(tmp_path / "shared.db")
    await store.open()
    quiet_logs()
    try:
        lands = LandsThenFails(store)
        yield lands, GameManager(cast(GameStore, lands), shared_store=True)
    finally:
        await store.close()


async def _new_game(manager: GameManager, seed: str = "landed") -> tuple[str, list[str]]:
    """A seeded partnership game: its id and seat tokens."""
    created = await new_managed_game(manager, seed)
    return created.game_id, created.seat_tokens


async def _bid_lands_but_fails(
    lands: LandsThenFails, manager: GameManager, game_id: str, seat_1: str
) -> None:
    """Seat 1's bid (request ``r1``), the game's first action, lands but is reported failed."""
    lands.failing = True
    with pytest.raises(StoreError):
        await manager.submit(game_id, seat_1, {"type": "bid", "amount": 250}, 0, "r1")
    assert not lands.failing  # the commit did land
    assert manager.games[game_id].state.version == 0  # but this replica did not see it
    assert game_id in manager.behind


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(int(BOUND / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)


async def test_a_commit_that_landed_but_was_reported_failed_reaches_the_watchers_at_once(
    tmp_path: Path,
) -> None:
    """The game is caught up as soon as the failed call lets go of it: the watcher is told of
    the action without waiting for housekeeping (which used to catch it up, up to 15 s
    later), and the retry is answered from the stored response."""
    async with _landing(tmp_path) as (lands, manager):
        following = asyncio.create_task(manager.follow_doubtful_commits())
        try:
            game_id, seats = await _new_game(manager)
            first_seq = manager.games[game_id].event_count
            watch = manager.watch(game_id, seats[2], 0, after_seq=first_seq)
            waiting = asyncio.ensure_future(watch.__anext__())
            await _bid_lands_but_fails(lands, manager, game_id, seats[1])
            message = await asyncio.wait_for(waiting, BOUND)
            assert message.event.kind == "call"  # the watcher is told of the bid
            assert manager.games[game_id].state.version == 1
            # The catch-up ends just after it has told the watchers.
            await _until(lambda: game_id not in manager.behind)
            assert game_id not in manager.behind
            await cast(AsyncGenerator[object, None], watch).aclose()
            # The retry is answered from the stored response, as after any lost answer.
            retried = {"type": "bid", "amount": 250}
            response = await manager.submit(game_id, seats[1], retried, 0, "r1")
            assert response.version == 1
        finally:
            await _stop(following)


async def test_a_doubtful_commit_the_store_cannot_catch_up_is_left_to_housekeeping(
    tmp_path: Path,
) -> None:
    """While the store still fails, the prompt catch-up tries once, quietly (the commit's own
    failure was logged and answered), and the game stays ``behind`` for housekeeping, which
    catches it up once the store answers."""
    async with _landing(tmp_path) as (lands, manager):
        lands.reads_failing_after = 1
        with structlog.testing.capture_logs() as logged:
            following = asyncio.create_task(manager.follow_doubtful_commits())
            try:
                game_id, seats = await _new_game(manager)
                await _bid_lands_but_fails(lands, manager, game_id, seats[1])
                await _until(lambda: not lands.failing_reads)
                assert not lands.failing_reads  # it tried, and the read failed
                reads = lands.reads
                await asyncio.sleep(0.05)  # nothing more comes of it
                assert lands.reads == reads
                assert game_id in manager.behind
                assert manager.games[game_id].state.version == 0
                await manager.keep_house_once(structlog.get_logger("test"))
                assert manager.games[game_id].state.version == 1
                assert game_id not in manager.behind
            finally:
                await _stop(following)
        assert not [e for e in logged if e["event"] == "catch_up_failed"]


async def test_a_game_played_on_another_replica_is_active_on_this_one(pair: Pair) -> None:
    """Folding another replica's actions in moves the game's last activity on here too, so
    this replica does not drop a game in play from memory as idle (nor count it as idle)."""
    now = [pair.follower.clock()]
    pair.follower.clock = lambda: now[0]
    await pair.follower.load(pair.game_id)
    now[0] += 2 * pair.follower.idle_after  # idle by now, unless it was played meanwhile
    assert await pair.act(1, {"type": "bid", "amount": 250}) == 1
    await pair.announce()
    assert await pair.followed_version(1) == 1
    assert pair.follower.games[pair.game_id].active_at == now[0]
    assert await pair.follower.evict_idle_games() == 0
    assert pair.game_id in pair.follower.games


async def test_a_row_that_fails_to_apply_leaves_the_game_at_the_row_before(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: a catch-up moved the game's log position row by row but its state only after
    the last row, so a row that failed to apply (only a log the engine rejects could) left the
    position past rows whose state was never taken, and the next catch-up skipped them. Each
    row is now taken whole: the game stays at the row before the failing one, and once it
    applies, the next catch-up goes on from there."""
    await pair.follower.load(pair.game_id)
    assert await pair.act(1, {"type": "bid", "amount": 250}) == 1
    assert await pair.act(2, {"type": "pass"}) == 2
    real = engine_apply
    calls = 0

    def second_fails(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("the engine rejects this row (test)")
        return real(*args, **kwargs)

    monkeypatch.setattr(games_module, "apply", second_fails)
    await pair.announce()  # folding in fails at the pass
    live = pair.follower.games[pair.game_id]
    assert pair.game_id in pair.follower.behind
    assert live.state.version == 1
    rows = await pair.shared.store.load_log(pair.game_id)
    assert next(row for row in rows if row.seq == live.last_seq).version == 1  # the bid's row
    monkeypatch.setattr(games_module, "apply", real)
    await pair.announce()
    assert await pair.followed_version(2) == 2
    assert live.state == (await pair.player.load(pair.game_id)).state
