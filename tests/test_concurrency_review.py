"""Concurrency and cancellation review of the live-game layer (``GameManager``): interleavings
forced with events and store calls held at a chosen point, never with timing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio

from referee.service.games import Created, GameManager
from referee.store.base import GameRecord, GameStore
from referee.store.sqlite import SqliteStore
from tests.service_helpers import new_managed_game, quiet_logs

BOUND = 10.0  # seconds any wait below may take before the test fails
BID = {"type": "bid", "amount": 250}  # seat 1 opens a partnership auction dealt by seat 0
PASS = {"type": "pass"}


class Gated:
    """A store whose calls the test can hold: ``hold(name)`` makes the next call of ``name``
    wait (before doing anything) until the returned gate is opened; ``entered[name]`` counts
    the calls that reached the wrapper."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.holds: dict[str, list[tuple[asyncio.Event, asyncio.Event]]] = {}
        self.entered: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def hold(self, name: str) -> tuple[asyncio.Event, asyncio.Event]:
        """(reached, gate) of the next call of ``name``."""
        pair = (asyncio.Event(), asyncio.Event())
        self.holds.setdefault(name, []).append(pair)
        return pair

    async def _held(self, name: str) -> None:
        self.entered[name] = self.entered.get(name, 0) + 1
        queue = self.holds.get(name)
        if queue:
            reached, gate = queue.pop(0)
            reached.set()
            await asyncio.wait_for(gate.wait(), BOUND)

    async def get_game(self, game_id: str) -> GameRecord:
        await self._held("get_game")
        return await self.store.get_game(game_id)


@pytest_asyncio.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "review.db")
    await store.open()
    quiet_logs()
    try:
        yield store
    finally:
        await store.close()


async def _new_game(games: GameManager) -> Created:
    return await new_managed_game(games)


async def _turns() -> None:
    """Let every task that is ready run until it next waits (no store read is involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_load_that_failed_does_not_let_two_loads_of_one_game_run_at_once(
    sqlite: SqliteStore,
) -> None:
    """A load of a game not in memory is cancelled (its caller's deadline) while a second load
    of the same game waits for the loading lock. The failed load used to drop that lock from
    ``_loading`` though the second still waited on it, so a third load took a new lock and
    rebuilt the game beside the second: each registered its own copy, the later replacing the
    one a watcher already followed and an action had been applied to."""
    created = await _new_game(GameManager(sqlite))
    game_id, seats = created.game_id, created.seat_tokens
    gated = Gated(sqlite)
    games = GameManager(cast(GameStore, gated))  # as after a restart: nothing in memory
    first_reached, _first_gate = gated.hold("get_game")
    second_reached, second_gate = gated.hold("get_game")
    _third_reached, third_gate = gated.hold("get_game")

    first = asyncio.create_task(games.load(game_id))
    await asyncio.wait_for(first_reached.wait(), BOUND)
    second = asyncio.create_task(games.load(game_id))
    await _turns()  # waiting for the loading lock the first load holds
    assert not second_reached.is_set()
    first.cancel()  # its caller's deadline
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second_reached.wait(), BOUND)  # the second load reads the game
    third = asyncio.create_task(games.load(game_id))
    await _turns()
    second_gate.set()
    held = await asyncio.wait_for(second, BOUND)
    # A watcher follows the game and an action is applied to it.
    watch = games.watch(game_id, created.spectator_token, 0)
    assert (await asyncio.wait_for(anext(watch), BOUND)).HasField("event")
    assert held.watchers == 1
    assert (await games.submit(game_id, seats[1], BID, 0, "bid")).version == 1
    third_gate.set()
    assert await asyncio.wait_for(third, BOUND) is held
    assert games.games[game_id] is held
    assert (await games.submit(game_id, seats[2], PASS, 1, "pass")).version == 2
    assert held.state.version == 2  # the watcher's object moved on with the game
    await cast(Any, watch).aclose()
    assert held.watchers == 0 and games.watching == 0


async def test_events_committed_while_a_snapshot_is_being_sent_are_not_skipped(
    sqlite: SqliteStore,
) -> None:
    """A watcher whose first events have left the window gets a snapshot of its view first,
    then the events after it. The stream waits at each message until its client takes it (the
    network), and an action committed meanwhile came after the snapshot's state; the stream
    used to note the events it had handled only after that wait, so it skipped that action's
    events: the watcher never learned of the pass."""
    games = GameManager(sqlite, watch_window=3)  # fewer than the first deal's events
    created = await _new_game(games)
    game_id, seats = created.game_id, created.seat_tokens
    assert (await games.submit(game_id, seats[1], BID, 0, "bid")).version == 1
    watch = games.watch(game_id, created.adjudicator_token, 0)
    first = await anext(watch)
    assert first.HasField("snapshot") and first.snapshot.version == 1
    # The snapshot is on its way to the client; a pass is committed meanwhile.
    assert (await games.submit(game_id, seats[2], PASS, 1, "pass")).version == 2
    following = asyncio.ensure_future(anext(watch))
    await _turns()
    try:
        assert following.done(), "the stream waits for a change it has already had"
        message = following.result()
        assert message.HasField("event") and message.event.version == 2
        assert message.event.kind == "call"
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await cast(Any, watch).aclose()


async def test_events_dropped_while_a_snapshot_is_being_sent_bring_another_snapshot(
    sqlite: SqliteStore,
) -> None:
    """The same, when so many events are committed while the snapshot is on its way that some
    of them leave the window too: the stream must not go on from the window's first event
    (skipping the ones before it) but send a newer snapshot."""
    games = GameManager(sqlite, watch_window=3)
    created = await _new_game(games)
    game_id, seats = created.game_id, created.seat_tokens
    assert (await games.submit(game_id, seats[1], BID, 0, "bid")).version == 1
    watch = games.watch(game_id, created.adjudicator_token, 0)
    first = await anext(watch)
    assert first.HasField("snapshot") and first.snapshot.version == 1
    shown = games.games[game_id].event_count
    for version, seat in enumerate((2, 3, 0), start=1):  # the auction ends: 4 more events
        assert (await games.submit(game_id, seats[seat], PASS, version, f"p{seat}")).version
    following = asyncio.ensure_future(anext(watch))
    await _turns()
    try:
        assert following.done(), "the stream waits for a change it has already had"
        message = following.result()
        if message.HasField("event"):
            assert message.event.seq == shown + 1, "events were skipped"
        else:
            assert message.snapshot.version == 4
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await cast(Any, watch).aclose()


async def test_a_new_game_keeps_no_more_events_than_the_window(sqlite: SqliteStore) -> None:
    """Was: a game just created kept all its first deal's events in memory, whatever
    ``--watch-window``; only its first action trimmed them. A watcher from version 0 then gets
    the snapshot it gets once events have left the window, and no event is lost to it."""
    games = GameManager(sqlite, watch_window=3)
    created = await _new_game(games)
    live = games.games[created.game_id]
    assert live.event_count > 3 and len(live.events) == 3
    watch = games.watch(created.game_id, created.adjudicator_token, 0)
    try:
        first = await anext(watch)
        assert first.HasField("snapshot") and first.snapshot.version == 0
    finally:
        await cast(Any, watch).aclose()
