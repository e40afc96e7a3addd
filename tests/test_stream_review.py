"""Review of the streaming and log APIs against referee.proto and issue 4: WatchGame (from_version,
resumption, the in-memory window's snapshot, redaction, the end of the game, many watchers, a
restart), GetAuditLog paging and redaction, VerifyAuditLog tampering, ListLegalActions/GetGame
versions. Everything goes through the real in-process gRPC server; tampering edits the SQLite
file directly, as the existing tests do. Tests saying "was a bug" failed before the fixes that
came with them: a watcher mid-stream at the game's end lost the last events, resuming needed a
seq cursor (``after_seq``), and a snapshot was sent when every wanted event was still kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import random
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
import pytest_asyncio
from pinochle_client import RefereeClient, RefereeError, Session
from prometheus_client import REGISTRY

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.service.settings import RECENT_EVENTS
from referee.store.base import AuditRow
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    Served,
    SilentNetwork,
    Step,
    Table,
    actor,
    bearer,
    concrete,
    free_port,
    new_table,
    pick,
    play,
    play_step,
    refused,
    serving,
)
from tests.test_service_crash import running
from tests.test_store import POSTGRES_URL, postgres_marks, postgres_schema

WINDOW = RECENT_EVENTS  # how far back a watch resumes with events (the proto's snapshot)
RACE_OPTIONS: dict[str, object] = {"target": 400}  # one seeded game of ~350 actions, ~510 events
_recorded: list[Step] = []


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as served:
        yield served


# ----------------------------------------------------------------------------------------------
# Helpers


class Collector:
    """A WatchGame stream read into a list by a task of its own."""

    def __init__(self, session: Session, from_version: int = 0) -> None:
        self.items: list[dict[str, Any]] = []
        self.task = asyncio.ensure_future(self._run(session, from_version))

    async def _run(self, session: Session, from_version: int) -> None:
        async for item in session.watch(from_version):
            self.items.append(item)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [i["event"] for i in self.items if "event" in i]

    async def wait_for_version(self, version: int, timeout: float = 10) -> None:
        """Until an event of ``version`` has come: its first one. A version may carry several
        (a play, the trick it took, the next hand's deal), which may come later: to have them
        all, wait for the server's ``event_count`` (``wait_for_count``)."""
        async with asyncio.timeout(timeout):
            while not any(e["version"] >= version for e in self.events):
                await asyncio.sleep(0.005)

    async def wait_for_count(self, count: int, timeout: float = 10) -> None:
        """Until ``count`` events have come (a version's events may come in several messages)."""
        async with asyncio.timeout(timeout):
            while len(self.events) < count:
                await asyncio.sleep(0.005)

    async def finish(self, timeout: float = 10) -> list[dict[str, Any]]:
        await asyncio.wait_for(self.task, timeout)
        return self.items


async def until_idle(stream: Any, idle: float = 0.5, first: float = 10) -> list[dict[str, Any]]:
    """Items of an open stream until nothing comes for ``idle`` seconds (or it ends); closes it.

    Every stream read here has something to send at once, so the first item is waited for up
    to ``first`` seconds: on a loaded machine the server may take longer than ``idle`` to start
    (that cut a list short once). The idle wait only decides that the backlog is over."""
    items: list[dict[str, Any]] = []
    try:
        items.append(await asyncio.wait_for(anext(stream), first))
        while True:
            items.append(await asyncio.wait_for(anext(stream), idle))
    except (TimeoutError, StopAsyncIteration):
        pass
    await stream.aclose()
    return items


async def _backlog(
    stream: AsyncGenerator[pb.WatchGameResponse, None], count: int, quiet: float = 0.05
) -> list[pb.WatchGameResponse]:
    """The ``count`` items a manager's watch must send at once, and any it sends beyond them
    within ``quiet`` seconds (so one too many is seen); the stream is then closed.

    Each of the ``count`` is waited for up to 10 s, not ``quiet``: the first may need a read of
    the log (a PostgreSQL round trip, a SQLite reader thread), which a loaded machine can hold
    up longer than a short quiet spell; a stream that sends too few still fails the test."""
    items: list[pb.WatchGameResponse] = []
    try:
        for _ in range(count):
            items.append(await asyncio.wait_for(anext(stream), 10))
        with contextlib.suppress(TimeoutError):
            while True:
                items.append(await asyncio.wait_for(anext(stream), quiet))
    finally:
        await stream.aclose()
    return items


def seqs(items: list[dict[str, Any]]) -> list[int]:
    return [i["event"]["seq"] for i in items if "event" in i]


def shape(event: dict[str, Any]) -> tuple[Any, ...]:
    """An event without its random data (salts, commitments differ between replays)."""
    return (event["seq"], event["version"], event["kind"], event["audience"])


async def recorded_game(srv: Served) -> list[Step]:
    """The actions of one whole seeded game (computed once; the same on every server)."""
    if not _recorded:
        table = await new_table(srv.client, "partnership", RACE_OPTIONS, seed="race")
        _recorded.extend(await play(table, random.Random(1)))
    return list(_recorded)


async def replay(table: Table, steps: list[Step], first: int = 0) -> None:
    for version, step in enumerate(steps, first):
        await table.seats[step.seat].submit(step.action, expected_version=version)


async def step_once(table: Table, rng: random.Random) -> int:
    step = await play_step(table, rng)
    assert step is not None
    version: int = step.result["version"]
    return version


# ----------------------------------------------------------------------------------------------
# WatchGame: bugs


async def test_a_watcher_mid_stream_when_the_game_ends_still_gets_the_final_events(
    srv: Served,
) -> None:
    """A watcher still sending older events when the final action commits must not stop before
    that action's events (card, trick, hand_result, deal_revealed, game_over, deal_salt)."""
    steps = await recorded_game(srv)
    table = await new_table(srv.client, "partnership", RACE_OPTIONS, seed="race")
    await replay(table, steps[:-1])
    stream: Any = table.adj.watch(0)
    got = [await anext(stream)]  # the watcher is now working through ~500 stored events
    await table.seats[steps[-1].seat].submit(steps[-1].action, expected_version=len(steps) - 1)
    got += [item async for item in stream]  # ends by itself: the game is over
    complete = [item async for item in table.adj.watch(0)]  # the finished game's stream
    kinds = [i["event"]["kind"] for i in got]
    assert seqs(got) == seqs(complete), f"missing {len(complete) - len(got)} events"
    assert "game_over" in kinds


async def test_resuming_from_the_last_version_seen_after_a_cut_inside_a_version(
    srv: Served,
) -> None:
    """One action's events (and the next hand's deal, same version) come as several messages. A
    client cut after the first of them cannot resume by version (the rest of that version would
    be lost, or repeated); it resumes with ``after_seq``, the seq of the last event it got, and
    gets exactly the rest. (Was a bug: there was no other cursor than the version.)"""
    table = await new_table(srv.client, "partnership", seed="cut-inside")
    rng = random.Random(4)
    await play(table, rng, hands=1)
    await step_once(table, rng)  # one action of the next hand
    full = await until_idle(table.seats[0].watch(0))
    ending = next(i["event"] for i in full if i["event"]["kind"] == "hand_result")["version"]
    at_end = [i for i in full if i["event"]["version"] == ending]
    assert len(at_end) > 3  # card_played, trick_taken, ..., hand_started, cards_dealt (seat 0)
    cut = [i for i in full if i["event"]["version"] < ending] + at_end[:1]
    resumed = await until_idle(table.seats[0].watch(after_seq=seqs(cut)[-1]))
    missed = [i["event"]["kind"] for i in at_end[1:]]
    assert seqs(cut) + seqs(resumed) == seqs(full), f"never delivered: {missed}"
    assert cut + resumed == full
    # By version alone the rest of that version is skipped: hence the seq cursor.
    by_version = await until_idle(table.seats[0].watch(ending))
    assert seqs(by_version) == [s for s in seqs(full) if s > at_end[-1]["event"]["seq"]]


async def test_resuming_after_seeing_only_the_first_deal_gives_no_duplicates(srv: Served) -> None:
    """The first deal's events carry version 0, and from_version 0 means "the whole game": a
    client that saw exactly those events resumes with ``after_seq`` and gets only what followed.
    (Was a bug: by version it could only ask for the whole game again.)"""
    table = await new_table(srv.client, "partnership", seed="zero")
    first = await until_idle(table.seats[0].watch(0))
    assert first and {i["event"]["version"] for i in first} == {0}
    await table.seats[1].submit({"type": "pass"}, expected_version=0)
    again = await until_idle(table.seats[0].watch(after_seq=seqs(first)[-1]))
    assert again and not set(seqs(first)) & set(seqs(again)), "the version-0 events came twice"
    assert {i["event"]["version"] for i in again} == {1}


async def test_a_negative_after_seq_is_invalid(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="negative")
    request = pb.WatchGameRequest(game_id=table.game_id, after_seq=-1)
    stream = srv.referee.WatchGame(request, metadata=bearer(table.seat_tokens[0]))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stream:
            pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# ----------------------------------------------------------------------------------------------
# WatchGame: behaviour pinned


async def test_from_version_beyond_the_current_one(srv: Served) -> None:
    """Pinned: a version the game has not reached is accepted; events up to it are skipped, and
    on a finished game the stream ends at once, empty."""
    table = await new_table(srv.client, "partnership", seed="future")
    stream: Any = table.seats[0].watch(2)
    for seat in (1, 2, 3):
        await table.seats[seat].submit({"type": "pass"}, expected_version=seat - 1)
    items = await until_idle(stream)
    assert items and {i["event"]["version"] for i in items} == {3}
    full = await until_idle(table.seats[0].watch(0))
    assert items == [i for i in full if i["event"]["version"] > 2]
    done = await new_table(srv.client, "partnership", {"target": 100}, seed="future-done")
    await play(done, random.Random(2))
    assert [item async for item in done.seats[0].watch(10**9)] == []


async def test_a_negative_from_version_is_invalid(srv: Served) -> None:
    """Refused, as a negative after_seq is: it used to be read as 0 (the whole game), so a
    client's broken cursor went unnoticed. Nothing is sent and the game is unchanged."""
    table = await new_table(srv.client, "partnership", seed="negative-version")
    for session in (table.seats[0], table.spec, table.adj):
        for version in (-1, -(2**40)):
            error = await refused(asyncio.wait_for(anext(session.watch(version)), 5))
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT
            assert error.fields == ["from_version"]
            assert "from_version must not be negative" in error.message
    await table.seats[0].view()
    assert table.seats[0].version == 0
    # A version the game has not reached stays accepted (pinned above).
    await table.seats[1].submit({"type": "pass"}, expected_version=0)
    assert await until_idle(table.seats[0].watch(10**9)) == []


async def test_after_seq_beyond_the_last_event_is_refused(srv: Served) -> None:
    """A cursor the game has not reached (another game's, or corrupt) would skip every event up
    to it without a word: it is refused. The last event's own seq is a valid cursor, whoever
    could see that event (seq numbers the game's events, not the caller's)."""
    table = await new_table(srv.client, "partnership", seed="cursor")
    events = await until_idle(table.adj.watch(0))  # the adjudicator sees every event
    last = int(events[-1]["event"]["seq"])
    seen_by_seat = await until_idle(table.seats[0].watch(0))
    assert int(seen_by_seat[-1]["event"]["seq"]) < last  # other seats' cards were dealt after
    for session in (table.seats[0], table.spec, table.adj):
        error = await refused(asyncio.wait_for(anext(session.watch(0, after_seq=last + 1)), 5))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.fields == ["after_seq"]
        assert f"seq {last})" in error.message
    # The cursor must reach the server while it is still the last event's: a stream opened
    # lazily (the client's generator) after the next action would test a cursor behind it.
    request = pb.WatchGameRequest(game_id=table.game_id, after_seq=last)
    call = srv.referee.WatchGame(request, metadata=bearer(table.seat_tokens[0]))
    live = srv.running.games.games[table.game_id]
    async with asyncio.timeout(5):
        while not live.watchers and not call.done():
            await asyncio.sleep(0.005)
    assert not call.done(), await call.details()  # following the game, not refused
    await table.seats[1].submit({"type": "pass"})
    message = await asyncio.wait_for(call.read(), 5)
    assert isinstance(message, pb.WatchGameResponse) and message.event.seq == last + 1
    call.cancel()


async def test_the_real_window_snapshot_and_its_continuation(srv: Served) -> None:
    """With the real 512-event window: a version whose later events are all kept gets them
    exactly, with no snapshot; an older one gets a snapshot of the caller's current view, then the
    events after it; resuming from the snapshot's version loses nothing."""
    table = await new_table(srv.client, "partnership", seed="window")
    everything = Collector(table.adj)  # keeps up from the start: never needs a snapshot
    rng = random.Random(9)
    version = 0
    while len(everything.events) < WINDOW + 150:
        await play(table, rng, hands=1)
        version = (await table.adj.view())["version"]
        await everything.wait_for_count(srv.running.games.games[table.game_id].event_count)
    assert not (await table.adj.view())["over"]
    assert all("event" in i for i in everything.items)
    events = everything.events
    kept, evicted = events[-WINDOW:], events[:-WINDOW]
    first_kept, last_evicted = kept[0]["version"], evicted[-1]["version"]
    # Within the window: exactly the events after the version, no snapshot.
    tail = await until_idle(table.adj.watch(first_kept))
    assert [i["event"] for i in tail] == [e for e in events if e["version"] > first_kept]
    # Older than the window: a snapshot of the caller's current view, then new events only.
    for from_version in (0, last_evicted - 1):
        stream: Any = table.seats[2].watch(from_version)
        first = await anext(stream)
        assert first["snapshot"]["version"] == version
        assert first["snapshot"]["view"] == await table.seats[2].view()
        later = await step_once(table, rng)
        following = await asyncio.wait_for(anext(stream), 5)
        assert following["event"]["version"] == later == version + 1
        await stream.aclose()
        resumed = await until_idle(table.seats[2].watch(version))
        assert resumed[0] == following
        assert all(i["event"]["version"] == later for i in resumed)
        version = later
    everything.task.cancel()


def _audience(events: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    return [e for e in events if e["audience"] in ("everyone", role)]


async def test_events_that_left_memory_are_read_from_the_log(tmp_path: Path) -> None:
    """A game keeps only its last ``--events-in-memory`` events in memory (a long game's
    memory was mostly its events); a watcher behind them but within the watch window gets the
    ones it missed read from the store's log: exactly the events a watcher that kept up got,
    redacted for its role, whether it asks from the start, from a version or after a seq."""
    async with serving(tmp_path, events_in_memory=4) as srv:
        table = await new_table(srv.client, "partnership", seed="memory")
        everything = Collector(table.adj)  # keeps up from the start: served from memory
        await play(table, random.Random(3), hands=1)
        live = srv.running.games.games[table.game_id]
        await everything.wait_for_count(live.event_count)
        events = everything.events
        assert len(live.events) == 4 and 50 < live.event_count == len(events) < WINDOW
        assert [i["event"] for i in await until_idle(table.adj.watch(0))] == events
        for seat, session in enumerate(table.seats):
            got = await until_idle(session.watch(0))
            assert [i.get("event") for i in got] == _audience(events, str(seat)), seat
        got = await until_idle(table.spec.watch(0))
        assert [i.get("event") for i in got] == _audience(events, "everyone")
        middle = events[len(events) // 2]
        got = await until_idle(table.seats[2].watch(middle["version"]))
        later = [e for e in events if e["version"] > middle["version"]]
        assert [i.get("event") for i in got] == _audience(later, "2")
        got = await until_idle(table.seats[2].watch(0, after_seq=middle["seq"]))
        after = [e for e in events if e["seq"] > middle["seq"]]
        assert [i.get("event") for i in got] == _audience(after, "2")
        everything.task.cancel()


async def test_older_than_the_watch_window_is_still_a_snapshot(tmp_path: Path) -> None:
    """The log is read only within the watch window: further back, the protocol's snapshot of
    the caller's view comes first, as before; within it, events, even those out of memory."""
    async with serving(tmp_path, watch_window=30, events_in_memory=5) as srv:
        table = await new_table(srv.client, "partnership", seed="window-log")
        everything = Collector(table.adj)
        await play(table, random.Random(5), hands=1)
        version = (await table.adj.view())["version"]
        await everything.wait_for_count(srv.running.games.games[table.game_id].event_count)
        events = everything.events
        assert len(events) > 60
        first = (await until_idle(table.seats[1].watch(0)))[0]
        assert first["snapshot"]["version"] == version
        recent = events[-20]["version"]  # its events are in the window, not all in memory
        got = await until_idle(table.seats[1].watch(recent))
        expected = _audience([e for e in events if e["version"] > recent], "1")
        assert len(expected) > 5 and [i.get("event") for i in got] == expected
        everything.task.cancel()


async def test_a_version_surely_older_than_the_window_gets_its_snapshot_without_a_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was wasteful: a watch from a version read the game's log before deciding that it was
    older than the watch window, and then sent the snapshot without the events read. What
    memory keeps settles it when the version is far enough back (the last event before the
    window is at least the last dropped one's version less one per event between them): the
    same snapshot of the caller's view comes, and the stream goes on, without a read. A version
    nearer the window is still decided by the read, and the one after it gets events."""
    async with serving(tmp_path, watch_window=30, events_in_memory=5) as srv:
        table = await new_table(srv.client, "partnership", seed="no wasted read")
        everything = Collector(table.adj)
        rng = random.Random(5)
        await play(table, rng, hands=2)
        live = srv.running.games.games[table.game_id]
        await everything.wait_for_count(live.event_count)
        version = live.state.version

        def known_from_memory() -> tuple[int, int]:
            """The first version the server cannot tell is older than the window without the
            log, and the version of the last event before the window."""
            last_dropped = live.event_count - len(live.events)
            before_window = live.event_count - 30  # a seq
            surely = live.dropped_version - (last_dropped - before_window)
            return surely, everything.events[before_window - 1]["version"]

        surely_older, before_window = known_from_memory()
        assert 1 < surely_older < before_window < version
        reads = _rows_read(monkeypatch, srv)
        for from_version in (1, surely_older - 1):
            stream: Any = table.seats[2].watch(from_version)
            first = await anext(stream)
            assert first["snapshot"]["version"] == version
            assert first["snapshot"]["view"] == await table.seats[2].view()
            version = await step_once(table, rng)
            following = await asyncio.wait_for(anext(stream), 5)
            assert following["event"]["version"] == version
            await stream.aclose()
            await everything.wait_for_version(version)
        assert reads == []
        surely_older, before_window = known_from_memory()
        assert surely_older < before_window
        got = await until_idle(table.seats[2].watch(before_window - 1))
        assert [i.get("event") for i in got] == [None]  # the snapshot, decided by the read
        assert got[0]["snapshot"]["version"] == version and len(reads) == 1
        got = await until_idle(table.seats[2].watch(before_window))
        await everything.wait_for_count(live.event_count)
        events = everything.events
        expected = _audience([e for e in events if e["version"] > before_window], "2")
        assert len(expected) > 5 and [i.get("event") for i in got] == expected
        everything.task.cancel()


def _moving_on_while_the_log_is_read(
    monkeypatch: pytest.MonkeyPatch,
    srv: Served,
    table: Table,
    rng: random.Random,
    actions: list[int],
) -> list[int]:
    """Make the server's ``load_log`` play ``actions[n]`` more actions of ``table`` after the
    rows of its read n (from 0) were read, before they are returned; the list it returns grows
    by one entry per read."""
    store = srv.running.store
    load_log = store.load_log
    reads: list[int] = []

    async def moving_on(game_id: str, after_seq: int = 0) -> list[Any]:
        rows = await load_log(game_id, after_seq)
        moves = actions[len(reads)] if len(reads) < len(actions) else 0
        reads.append(moves)
        for _ in range(moves):
            await step_once(table, rng)
        return rows

    monkeypatch.setattr(store, "load_log", moving_on)
    return reads


async def test_a_watcher_reading_the_log_while_the_game_moves_on_misses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a watcher reads missed events from the log, the game moves on by more than memory
    holds: the events between what it read and what is still in memory are read again, none
    lost or sent twice."""
    async with serving(tmp_path, events_in_memory=3) as srv:
        table = await new_table(srv.client, "partnership", seed="log-race")
        everything = Collector(table.adj)
        rng = random.Random(8)
        for _ in range(30):
            await step_once(table, rng)
        # The game moves on by ten actions after the first read's rows were read.
        reads = _moving_on_while_the_log_is_read(monkeypatch, srv, table, rng, [10])
        got = await until_idle(table.adj.watch(0))
        monkeypatch.undo()
        await everything.wait_for_count(srv.running.games.games[table.game_id].event_count)
        assert len(reads) >= 2
        assert [i.get("event") for i in got] == everything.events
        everything.task.cancel()


async def test_a_watcher_behind_memory_catches_up_from_one_read_while_the_game_moves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was a bug: a read of the log covered only the events that had left memory before it
    began, so each action committed while it was read dropped another event the watcher had
    not had out of memory, and the next pass read the game's whole log again for it. While the
    game kept moving (bots act in milliseconds; a long game's log takes longer to read) the
    watcher never got back to memory: one read of the whole log per action, per watcher, until
    the game paused. The read covers every event this replica has that it found, so one is
    enough when fewer than ``--events-in-memory`` events come while it is read."""
    async with serving(tmp_path, events_in_memory=16) as srv:
        table = await new_table(srv.client, "partnership", seed="log-loop")
        everything = Collector(table.adj)
        rng = random.Random(11)
        for _ in range(40):
            await step_once(table, rng)
        live = srv.running.games.games[table.game_id]
        await everything.wait_for_count(live.event_count)
        resume_after = live.event_count - 30  # in the window, out of memory
        # One action commits while each read is in flight (the first twenty).
        reads = _moving_on_while_the_log_is_read(monkeypatch, srv, table, rng, [1] * 20)
        got = await until_idle(table.adj.watch(0, after_seq=resume_after))
        monkeypatch.undo()
        await everything.wait_for_count(live.event_count)
        assert [i.get("event") for i in got] == everything.events[resume_after:]
        assert len(reads) == 1
        everything.task.cancel()


def _rows_read(monkeypatch: pytest.MonkeyPatch, srv: Served) -> list[tuple[int, int]]:
    """Wrap the server's ``load_log`` (as it is now: possibly wrapped already): the list it
    returns gets each read's ``after_seq`` and the number of rows it returned."""
    store = srv.running.store
    load_log = store.load_log
    reads: list[tuple[int, int]] = []

    async def counted(game_id: str, after_seq: int = 0) -> list[Any]:
        rows = await load_log(game_id, after_seq)
        reads.append((after_seq, len(rows)))
        return rows

    monkeypatch.setattr(store, "load_log", counted)
    return reads


async def test_a_watcher_behind_memory_reads_only_the_rows_it_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was wasteful: every read of the events that had left memory read the game's whole log
    from its first row (thousands of rows in a long game), however few events the watcher had
    missed, and a watcher that stayed behind did so again every ``--events-in-memory`` events.
    A read starts at the row of the first event wanted, or a little before: a watcher resuming
    after a seq reads at most one row per event it missed (every row holds one at least), one
    resuming from a version at most one per version after it and one per hand dealt (a row's
    seq is at least its version + 1, the deals before it making up the rest), and a watcher
    that fell behind again reads on from where its last read ended."""
    async with serving(tmp_path, events_in_memory=4) as srv:
        table = await new_table(srv.client, "partnership", seed="bounded-read")
        everything = Collector(table.adj)
        rng = random.Random(12)
        await play(table, rng, hands=2)
        live = srv.running.games.games[table.game_id]
        await everything.wait_for_count(live.event_count)
        events = everything.events
        log = await srv.running.store.load_log(table.game_id)
        assert len(log) == live.last_seq > 100 and len(events) < WINDOW
        behind = 30
        reads = _rows_read(monkeypatch, srv)
        got = await until_idle(table.adj.watch(0, after_seq=len(events) - behind))
        assert [i.get("event") for i in got] == events[-behind:]
        [(_, rows)] = reads
        assert rows <= behind
        # From a version: a row per version after it, and one per deal.
        reads.clear()
        middle = events[-behind]["version"]
        got = await until_idle(table.seats[1].watch(middle))
        later = [e for e in events if e["version"] > middle]
        assert [i.get("event") for i in got] == _audience(later, "1")
        [(_, rows)] = reads
        deals = sum(row.kind == "deal" for row in log)
        assert rows <= live.state.version - middle + deals
        # The game moves on by ten actions, more than memory holds, while the first read is
        # read: the second read starts where the first ended.
        monkeypatch.undo()
        _moving_on_while_the_log_is_read(monkeypatch, srv, table, rng, [10])
        reads = _rows_read(monkeypatch, srv)
        held = live.event_count
        got = await until_idle(table.adj.watch(0, after_seq=held - behind))
        monkeypatch.undo()
        await everything.wait_for_count(live.event_count)
        assert [i.get("event") for i in got] == everything.events[held - behind :]
        assert len(reads) == 2 and live.event_count - held > 4
        assert reads[0][1] <= behind and reads[1][1] <= live.event_count - held
        everything.task.cancel()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=postgres_marks())])
@pytest.mark.parametrize("window", [WINDOW, 5])
async def test_where_each_row_holds_one_event_a_read_is_exactly_the_rows_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int, backend: str
) -> None:
    """Both of the read's bounds are exact where every row after the first deal holds one
    event (an auction of bids alone): resuming after a seq or from a version, a watcher behind
    memory reads exactly the rows that hold the events it wants; not one more, and not one
    fewer, which would lose the first of them. So is memory's bound on the version of the last
    event before the window: with a window of 5, a watcher that wants an event older than it
    gets a snapshot with no read, and one that does not gets its events. Both stores number a
    game's log rows alike, so the same reads come from each."""
    with contextlib.ExitStack() as stack:
        db: dict[str, str] = {}
        if backend == "postgres":
            schema = stack.enter_context(postgres_schema("stream_review"))
            db = {"db": POSTGRES_URL, "db_schema": schema}
        async with serving(tmp_path, watch_window=window, events_in_memory=2, **db) as srv:
            table = await new_table(srv.client, "partnership", seed="bidding war")
            rng = random.Random(1)
            for _ in range(8):
                found = await actor(table)
                assert found is not None
                seat, entries = found
                bid = concrete(next(e for e in entries if e["type"] == "bid"), rng)
                await table.seats[seat].submit(bid)
            manager = srv.running.games
            live = manager.games[table.game_id]
            log = await manager.store.load_log(table.game_id)
            full: list[dict[str, Any]] = [dict(e) for row in log for e in row.events]
            assert [len(row.events) for row in log] == [len(log[0].events)] + [1] * 8
            last_event_of = list(itertools.accumulate(len(row.events) for row in log))
            reads = _rows_read(monkeypatch, srv)
            first_kept = live.event_count - len(live.events) + 1
            resume_points = [(0, seq) for seq in range(first_kept - 1)]
            # One event a version after the deal: these versions' next events have left memory.
            resume_points += [(v, 0) for v in range(1, live.state.version - len(live.events))]
            for from_version, after_seq in resume_points:
                if after_seq or not from_version:
                    ends = zip(log, last_event_of, strict=True)
                    wanted = [row for row, last in ends if last > after_seq]
                    expected = full[after_seq:]
                else:
                    wanted = [row for row in log if row.version > from_version]
                    expected = [e for e in full if e["version"] > from_version]
                where = (from_version, after_seq)
                snapshot = expected[0]["seq"] <= live.event_count - window
                reads.clear()
                stream = cast(
                    AsyncGenerator[pb.WatchGameResponse, None],
                    manager.watch(
                        table.game_id, table.adjudicator_token, from_version, after_seq=after_seq
                    ),
                )
                got = await _backlog(stream, 1 if snapshot else len(expected))
                # PostgreSQL: each watch catches the game up first, reading after its last row.
                watchers = [read for read in reads if read[0] < live.last_seq]
                if snapshot:
                    assert [item.WhichOneof("item") for item in got] == ["snapshot"], where
                    assert watchers == [], where
                    continue
                assert [item.event.seq for item in got] == [e["seq"] for e in expected], where
                assert watchers == [(log[-1].seq - len(wanted), len(wanted))], where


async def test_a_log_row_without_events_does_not_cut_a_read_short(tmp_path: Path) -> None:
    """The read of the events that left memory counts on every log row holding an event to
    skip the rows before the first one wanted; this code writes none without, but a log may
    hold one (written elsewhere, or edited). Was a bug then: the read started past the events
    wanted, found none, and the watcher read the log again and again, sending nothing. The
    read checks that its first row holds the first event wanted, or one before it, and
    otherwise reads from where the rows' versions alone say to."""
    async with serving(tmp_path, events_in_memory=2) as srv:
        table = await new_table(srv.client, "partnership", seed="a row without events")
        rng = random.Random(1)
        for _ in range(8):
            found = await actor(table)
            assert found is not None
            seat, entries = found
            await table.seats[seat].submit(
                concrete(next(e for e in entries if e["type"] == "bid"), rng)
            )
        log = await srv.running.store.load_log(table.game_id)
    assert [len(row.events) for row in log][1:] == [1] * 8  # the deal, then eight bids
    # The last four bids' events move to the bid before them: four rows hold none.
    moved = [e for row in log[-5:] for e in row.events]
    db = tmp_path / "x.db"
    _sql(db, "UPDATE log SET events = ? WHERE seq = ?", json.dumps(moved), log[-5].seq)
    _sql(db, "UPDATE log SET events = '[]' WHERE seq > ?", log[-5].seq)
    async with serving(tmp_path, events_in_memory=2) as srv:
        manager = srv.running.games
        live = await manager.load(table.game_id)
        assert live.event_count == len(log) + len(log[0].events) - 1 and live.last_seq == 9
        after_seq = _seq_of(moved[0])  # two of the events after it have left memory
        stream = cast(
            AsyncGenerator[pb.WatchGameResponse, None],
            manager.watch(table.game_id, table.adjudicator_token, 0, after_seq=after_seq),
        )
        got: list[pb.WatchGameResponse] = []
        with contextlib.suppress(TimeoutError):
            while True:
                got.append(await asyncio.wait_for(anext(stream), 1))
        await stream.aclose()
        assert [item.event.seq for item in got] == [_seq_of(e) for e in moved[1:]]


def _seq_of(event: Mapping[str, object]) -> int:
    seq = event["seq"]
    assert isinstance(seq, int)
    return seq


@pytest.mark.parametrize("window", [40, WINDOW])
async def test_every_resume_point_behind_memory_gets_the_same_answer_from_fewer_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """The read of the events that left memory starts at the row of the first event wanted,
    not at the log's first row, and misses nothing: from every seq and every version of a
    finished game (four events in memory; a window smaller than the game, or all of it), each
    role gets exactly the events it wanted, or a snapshot when one of them is older than the
    window, as computed from the whole log; and every read returned at most one row per event
    (after a seq) or per version (from a version, plus one per deal) after the resume point."""
    async with serving(tmp_path, watch_window=window, events_in_memory=4) as srv:
        table = await new_table(srv.client, "partnership", {"target": 300}, seed="every read")
        await play(table, random.Random(6))
        manager = srv.running.games
        live = await manager.load(table.game_id)
        assert live.state.over
        log = await manager.store.load_log(table.game_id)
        full: list[dict[str, Any]] = [dict(e) for row in log for e in row.events]
        ends = live.event_count
        assert [e["seq"] for e in full] == list(range(1, ends + 1)) and 3 * 40 < ends < WINDOW
        deals = sum(row.kind == "deal" for row in log)
        reads = _rows_read(monkeypatch, srv)
        for token in (table.adjudicator_token, table.seat_tokens[2]):
            caller = manager.authenticate(live, token)
            resume_points = [(0, seq) for seq in range(ends + 1)]
            resume_points += [(version, 0) for version in range(1, live.state.version + 1)]
            for from_version, after_seq in resume_points:
                reads.clear()
                stream = manager.watch(table.game_id, token, from_version, after_seq=after_seq)
                got = [item async for item in stream]
                if after_seq or not from_version:
                    wanted = full[after_seq:]
                    most_rows = ends - after_seq
                else:
                    wanted = [e for e in full if e["version"] > from_version]
                    most_rows = live.state.version - from_version + deals
                where = (caller.role, from_version, after_seq)
                if wanted and wanted[0]["seq"] <= ends - window:
                    assert [item.WhichOneof("item") for item in got] == ["snapshot"], where
                else:
                    expected = [e["seq"] for e in wanted if manager.visible(caller, e)]
                    assert [item.event.seq for item in got] == expected, where
                    assert all(item.WhichOneof("item") == "event" for item in got), where
                assert all(rows <= most_rows for _, rows in reads), (where, reads)


async def test_no_snapshot_when_every_event_after_from_version_is_still_kept(srv: Served) -> None:
    """Minor: the events after from_version are all in the window (it starts exactly at the next
    version), so by the proto ("older than the server keeps events") no snapshot is due; the
    client gets one instead of the kept events."""
    table = await new_table(srv.client, "partnership", seed="window")
    everything = Collector(table.adj)
    rng = random.Random(9)
    await play(table, rng, hands=5)
    while True:
        await step_once(table, rng)
        await everything.wait_for_count(srv.running.games.games[table.game_id].event_count)
        events = everything.events
        dropped = events[-WINDOW - 1]["version"] if len(events) > WINDOW else 0
        # The window's first event opens a version: nothing of it was dropped. (Not version 0:
        # from_version 0 asks for the whole game.)
        if dropped > 0 and events[-WINDOW]["version"] > dropped:
            break
    last_dropped = events[-WINDOW - 1]["version"]
    items = await until_idle(table.adj.watch(last_dropped))
    assert "snapshot" not in items[0], "snapshot although every event after it is kept"
    assert [i["event"] for i in items] == [e for e in events if e["version"] > last_dropped]
    everything.task.cancel()


async def test_resuming_across_a_server_restart(tmp_path: Path) -> None:
    """The game is rebuilt from the store with the same event numbers: a client that saw up to
    version V before the restart gets exactly the events after V from the new server."""
    rng = random.Random(7)
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="restart")
        await play(table, rng, hands=1)
        for _ in range(3):
            version = await step_once(table, rng)
        before = await until_idle(table.seats[1].watch(0))
        assert before[-1]["event"]["version"] == version
    async with serving(tmp_path) as srv:
        again = table.through(srv.client)
        for _ in range(5):
            await step_once(again, rng)
        after = await until_idle(again.seats[1].watch(version))
        full = await until_idle(again.seats[1].watch(0))
        assert before + after == full


async def test_many_watchers_get_their_own_redacted_stream_to_the_end(srv: Served) -> None:
    """Pinned (watchers idle when the game ends, see the first test): 40 concurrent watchers of
    every role each get their role's events, in order, once, and their streams end at game over."""
    steps = await recorded_game(srv)
    table = await new_table(srv.client, "partnership", RACE_OPTIONS, seed="race")
    sessions: list[tuple[str | int, Session]] = [("adjudicator", table.adj)] * 8
    sessions += [("spectator", table.spec)] * 8
    sessions += [(seat, table.seats[seat]) for seat in range(4) for _ in range(6)]
    watchers = [(role, Collector(session)) for role, session in sessions]
    await replay(table, steps[:-1])
    for _, watcher in watchers:  # every role sees the card played at the last version
        await watcher.wait_for_version(len(steps) - 1)
    await asyncio.sleep(0.1)
    await table.seats[steps[-1].seat].submit(steps[-1].action, expected_version=len(steps) - 1)
    reference = [i["event"] async for i in table.adj.watch(0)]
    assert any(e["audience"] == "sealed" for e in reference)
    for role, watcher in watchers:
        items = await watcher.finish()
        events = [i["event"] for i in items]
        if role == "adjudicator":
            expected = reference
        elif role == "spectator":
            expected = [e for e in reference if e["audience"] == "everyone"]
        else:
            expected = [e for e in reference if e["audience"] in ("everyone", str(role))]
        assert [shape(e) for e in events] == [shape(e) for e in expected], role
        assert events[-1]["kind"] == "deal_salt" and "game_over" in {e["kind"] for e in events}


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=postgres_marks())])
async def test_a_watcher_on_another_replica(tmp_path: Path, backend: str) -> None:
    """Pinned: two in-process replicas on one PostgreSQL schema; a watcher on B, opened before
    anything happened and from a version later, follows actions submitted on A to the game's end,
    with the same events A's watchers get."""
    with postgres_schema("stream_review") as schema:
        async with (
            serving(tmp_path / "a", db=POSTGRES_URL, db_schema=schema) as a,
            serving(tmp_path / "b", db=POSTGRES_URL, db_schema=schema) as b,
        ):
            steps = await recorded_game(a)
            on_a = await new_table(a.client, "partnership", RACE_OPTIONS, seed="race")
            on_b = b.client.seat(on_a.game_id, on_a.seat_tokens[3])
            from_start = Collector(on_b)
            await replay(on_a, steps[:100])
            later = Collector(on_b, 100)
            await replay(on_a, steps[100:-1], 100)
            await from_start.wait_for_version(len(steps) - 1)
            await later.wait_for_version(len(steps) - 1)
            await asyncio.sleep(0.1)
            last = steps[-1]
            await on_a.seats[last.seat].submit(last.action, expected_version=len(steps) - 1)
            expected = [i["event"] async for i in on_a.seats[3].watch(0)]
            assert expected[-1]["kind"] == "deal_salt"
            assert [i["event"] for i in await from_start.finish()] == expected
            assert [i["event"] for i in await later.finish()] == [
                e for e in expected if e["version"] > 100
            ]


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=postgres_marks())])
async def test_a_watcher_reading_the_log_on_a_replica_behind_it_stays_with_the_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Pinned: a watcher on replica B behind B's memory reads the log while it holds actions
    committed on A that B has not folded in yet. It gets the events B has, no further (its
    stream never runs ahead of B's copy of the game), then A's from B's memory once B folds
    them in: every event once, in order, as A's own watcher gets them."""
    with postgres_schema("stream_review") as schema:
        async with (
            serving(tmp_path / "a", db=POSTGRES_URL, db_schema=schema) as a,
            serving(tmp_path / "b", db=POSTGRES_URL, db_schema=schema, events_in_memory=4) as b,
        ):
            on_a = await new_table(a.client, "partnership", seed="replica-log")
            everything = Collector(on_a.adj)
            rng = random.Random(4)
            for _ in range(30):
                await step_once(on_a, rng)
            on_b = b.client.session(on_a.game_id, on_a.adjudicator_token)
            await on_b.view()  # B holds the game, caught up
            games_b = b.running.games
            live_b = games_b.games[on_a.game_id]
            held = live_b.event_count
            gate = asyncio.Event()
            fold_in = games_b._fold_in

            async def gated(live: Any, log: Any) -> None:
                await gate.wait()
                await fold_in(live, log)

            monkeypatch.setattr(games_b, "_fold_in", gated)
            load_log = b.running.store.load_log
            reads = 0

            async def after_a_moves_on(game_id: str, after_seq: int = 0) -> list[Any]:
                nonlocal reads
                # The watcher's read starts before B's last row; B's catch-ups start after it.
                watchers = after_seq < live_b.last_seq
                reads += watchers
                if reads == 1 and watchers:  # the watcher's first: A commits, B not told
                    for _ in range(5):
                        await step_once(on_a, rng)
                return await load_log(game_id, after_seq)

            monkeypatch.setattr(b.running.store, "load_log", after_a_moves_on)
            watcher = Collector.__new__(Collector)
            watcher.items = []

            async def run() -> None:
                async for item in on_b.watch(0, after_seq=held - 20):
                    watcher.items.append(item)

            watcher.task = asyncio.ensure_future(run())
            await watcher.wait_for_count(20)
            await asyncio.sleep(0.2)
            assert live_b.event_count == held  # B has not folded A's actions in
            assert seqs(watcher.items) == list(range(held - 19, held + 1))  # none beyond B's
            gate.set()
            total = a.running.games.games[on_a.game_id].event_count
            assert total > held
            await everything.wait_for_count(total)
            await watcher.wait_for_count(total - (held - 20))
            await asyncio.sleep(0.1)
            assert watcher.events == everything.events[held - 20 :]
            watcher.task.cancel()
            everything.task.cancel()


# ----------------------------------------------------------------------------------------------
# GetAuditLog


async def test_audit_log_pages_past_the_maximum_page_size(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="pages")
    await asyncio.gather(
        *(
            refused(table.seats[n % 4].submit({"type": "pass"}, expected_version=5))
            for n in range(1003)
        )
    )
    await table.seats[1].submit({"type": "pass"}, expected_version=0)
    adj = bearer(table.adjudicator_token)

    async def page(after: int, size: int, token: Any = adj) -> list[pb.AuditEntry]:
        request = pb.GetAuditLogRequest(game_id=table.game_id, after_seq=after, page_size=size)
        return list((await srv.referee.GetAuditLog(request, metadata=token)).entries)

    default = await page(0, 0)
    assert [e.seq for e in default] == list(range(1, 1001))  # 0: the server's default, 1000
    rest = await page(1000, 1000)
    assert [e.seq for e in rest] == [1001, 1002, 1003, 1004]
    assert rest[-1].outcome == pb.AUDIT_OUTCOME_ACCEPTED and rest[-1].version == 1
    walked: list[int] = []
    while batch := await page(walked[-1] if walked else 0, 97):
        walked += [e.seq for e in batch]
    assert walked == list(range(1, 1005))
    assert await page(1004, 5) == [] and await page(10**12, 5) == []
    # A negative after_seq is refused, as WatchGame refuses it (it read the log from the start).
    for after, size in ((-7, 2), (-1, 0)):
        error = await refused(page(after, size))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.fields == ["after_seq"]
    error = await refused(page(0, -1))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.fields == ["page_size"]
    # The server's adjudicator credential sees what the game's adjudicator sees.
    assert await page(990, 20, bearer(ADJUDICATOR_TOKEN)) == await page(990, 20)


async def test_audit_log_redaction_by_role(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="audit-roles")
    await refused(table.seats[0].submit({"type": "play", "card": "AS"}, expected_version=0))
    await refused(table.seats[2].submit({"type": "bid", "amount": 250}, expected_version=0))
    await table.seats[1].submit({"type": "bid", "amount": 250}, expected_version=0)
    full = await table.adj.audit_log()
    assert [e["code"] for e in full] == ["NOT_YOUR_TURN", "NOT_YOUR_TURN", ""]
    assert all(len(e["hash"]) == 64 for e in full)
    spectator = await table.spec.audit_log()
    assert [e["action"] for e in spectator] == [
        {"type": "play"},
        {"type": "bid"},
        {"type": "bid", "amount": 250},
    ]
    assert all(e["code"] == e["hash"] == e["previous_hash"] == "" for e in spectator)
    mine = await table.seats[0].audit_log()
    assert mine[0]["code"] == "NOT_YOUR_TURN" and mine[0]["action"] == {
        "type": "play",
        "card": "AS",
    }
    assert mine[1]["code"] == "" and mine[1]["action"] == {"type": "bid"}
    for session in (table.spec, *table.seats):
        assert [e["seq"] for e in await session.audit_log()] == [1, 2, 3]


# ----------------------------------------------------------------------------------------------
# VerifyAuditLog


async def _verdict(srv: Served, table: Table) -> pb.VerifyAuditLogResponse:
    return await srv.referee.VerifyAuditLog(
        pb.VerifyAuditLogRequest(game_id=table.game_id), metadata=bearer(table.spectator_token)
    )


async def _audited_game(srv: Served) -> Table:
    """A game with 8 audit rows, accepted and refused."""
    table = await new_table(srv.client, "partnership", seed="verify")
    await refused(table.seats[0].submit({"type": "pass"}, expected_version=0))
    for seat in (1, 2, 3):
        await table.seats[seat].submit({"type": "pass"}, expected_version=seat - 1)
        await refused(table.seats[seat].submit({"type": "pass"}, expected_version=0))
    await refused(table.seats[2].submit({"type": "pass"}, expected_version=3))
    return table


def _sql(db: Path, statement: str, *args: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute(statement, args).rowcount >= 1
    conn.close()


async def test_verify_audit_log_reports_each_kind_of_tampering(srv: Served) -> None:
    intact = await _audited_game(srv)
    verdict = await _verdict(srv, intact)
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (True, 8, 0)

    deleted = await _audited_game(srv)  # a row removed from the middle
    _sql(srv.db, "DELETE FROM audit WHERE game_id = ? AND seq = 5", deleted.game_id)
    verdict = await _verdict(srv, deleted)
    assert (verdict.intact, verdict.first_bad_seq) == (False, 5) and "5" in verdict.detail

    swapped = await _audited_game(srv)  # rows 3 and 4 exchanged
    for old, new in ((3, 1000), (4, 3), (1000, 4)):
        _sql(
            srv.db,
            "UPDATE audit SET seq = ? WHERE game_id = ? AND seq = ?",
            new,
            swapped.game_id,
            old,
        )
    verdict = await _verdict(srv, swapped)
    assert (verdict.intact, verdict.first_bad_seq) == (False, 3)

    rehashed = await _audited_game(srv)  # refused row 3 made accepted, with a matching hash
    names = [
        *("seq", "time", "role", "seat", "rpc", "action", "public_action", "outcome", "code"),
        *("request_id", "version", "previous_hash"),
    ]
    conn = sqlite3.connect(srv.db)
    values = conn.execute(
        f"SELECT {', '.join(names)} FROM audit WHERE game_id = ? AND seq = 3",
        (rehashed.game_id,),
    ).fetchone()
    conn.close()
    fields = dict(zip(names, values, strict=True))
    assert fields["outcome"] == "refused"
    for name in ("action", "public_action"):
        fields[name] = json.loads(fields[name]) if fields[name] else None
    forged = AuditRow(**{**fields, "outcome": "accepted", "code": ""})
    _sql(
        srv.db,
        "UPDATE audit SET outcome = 'accepted', code = '', hash = ? WHERE game_id = ? AND seq = 3",
        forged.computed_hash(),
        rehashed.game_id,
    )
    verdict = await _verdict(srv, rehashed)
    assert (verdict.intact, verdict.first_bad_seq) == (False, 4)

    cut = await _audited_game(srv)  # the last row removed
    _sql(srv.db, "DELETE FROM audit WHERE game_id = ? AND seq = 8", cut.game_id)
    verdict = await _verdict(srv, cut)
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 7, 8)
    assert (await _verdict(srv, intact)).intact  # the other games are untouched


# ----------------------------------------------------------------------------------------------
# ListLegalActions, GetGame, ExportGame


async def test_legal_actions_and_get_game_share_the_version(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="legal")
    rng = random.Random(3)
    for _ in range(25):
        game = await srv.referee.GetGame(
            pb.GetGameRequest(game_id=table.game_id), metadata=bearer(table.seat_tokens[0])
        )
        assert json.loads(game.view_json)["version"] == game.version
        turn = json.loads(game.view_json)["hand"]["turn"]
        for seat in range(4):
            answer = await srv.referee.ListLegalActions(
                pb.ListLegalActionsRequest(game_id=table.game_id),
                metadata=bearer(table.seat_tokens[seat]),
            )
            assert answer.version == game.version
            assert answer.actions or seat != turn
        entries = await table.seats[turn].legal_actions()
        await table.seats[turn].submit(pick(entries, rng), expected_version=game.version)
    for token in (table.spectator_token, table.adjudicator_token, ADJUDICATOR_TOKEN):
        error = await refused(
            srv.referee.ListLegalActions(
                pb.ListLegalActionsRequest(game_id=table.game_id), metadata=bearer(token)
            )
        )
        assert error.code == grpc.StatusCode.PERMISSION_DENIED


async def test_the_server_credential_may_export_a_game_in_progress(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="export")
    await table.seats[1].submit({"type": "pass"}, expected_version=0)
    server = srv.client.session(table.game_id, ADJUDICATOR_TOKEN)
    assert await server.export() == await table.adj.export()
    for session in (table.spec, *table.seats):
        assert (await refused(session.export())).code == grpc.StatusCode.PERMISSION_DENIED


async def test_closing_a_client_watch_ends_its_call_at_once(srv: Served) -> None:
    """The Python client cancels a watch's call when the iterator is closed, so the server
    stops following the game for it then, not whenever the call object is collected. With the
    garbage collector paused, only the cancellation can end the server's stream."""
    table = await new_table(srv.client, "partnership", seed="close-watch")
    live = srv.running.games.games[table.game_id]
    gc.disable()
    try:
        stream = table.spec.watch(0)
        assert await anext(stream)
        assert live.watchers == 1
        await stream.aclose()
        async with asyncio.timeout(5):
            while live.watchers:
                await asyncio.sleep(0.01)
    finally:
        gc.enable()


# ----------------------------------------------------------------------------------------------
# WatchGame: a bounded number of streams


def _watchers_active() -> float:
    return REGISTRY.get_sample_value("referee_watchers_active") or 0.0


async def test_watch_streams_are_capped_and_a_closed_one_frees_its_place(tmp_path: Path) -> None:
    """--max-watchers: streams hold server memory and a spectator token may open any number,
    so one beyond the cap is refused (RESOURCE_EXHAUSTED, TOO_MANY_WATCHERS) while the open
    ones go on; a stream that ends, or is refused, gives its place back."""
    async with serving(tmp_path, max_watchers=2) as srv:
        table = await new_table(srv.client, "partnership", seed="capped")
        spectator = bearer(table.spectator_token)
        request = pb.WatchGameRequest(game_id=table.game_id)
        first = srv.referee.WatchGame(request, metadata=spectator)
        second = srv.referee.WatchGame(request, metadata=bearer(table.seat_tokens[0]))
        assert await first.read() and await second.read()  # both streaming
        assert _watchers_active() == 2
        third = srv.referee.WatchGame(request, metadata=spectator)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await third.read()
        refused_one = RefereeError(caught.value)
        assert refused_one.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused_one.reason == "TOO_MANY_WATCHERS" and "2" in refused_one.message
        # The cap in metadata["limit"], as every other cap's refusal (it had only the version).
        assert refused_one.metadata == {"limit": "2", "version": "0"}
        assert _watchers_active() == 2
        # The open streams still follow the game.
        await table.seats[1].submit({"type": "pass"}, expected_version=0)
        for stream in (first, second):
            while True:
                item = await asyncio.wait_for(stream.read(), 10)
                assert isinstance(item, pb.WatchGameResponse)
                if item.WhichOneof("item") == "event" and item.event.version == 1:
                    break
        first.cancel()
        for _ in range(200):  # the handler ends soon after the cancellation reaches it
            if _watchers_active() == 1:
                break
            await asyncio.sleep(0.05)
        assert _watchers_active() == 1
        again = srv.referee.WatchGame(request, metadata=spectator)
        assert await again.read()
        assert _watchers_active() == 2
        again.cancel()
        second.cancel()


# ----------------------------------------------------------------------------------------------
# WatchGame: the compact window read from any resume point


async def test_a_watch_from_any_seq_sends_exactly_the_events_after_it(tmp_path: Path) -> None:
    """The window keeps each event as its JSON text and a watch skips those already sent by
    their position (seq - the window's first seq), unread. From every resume point of a game
    whose window has slid (a small --watch-window), a watcher gets exactly the events after it
    that it may see, in order, compared with the full log; or, when some it asked for have left
    the window, a snapshot of the present and nothing more until the game moves on."""
    async with serving(tmp_path, watch_window=7) as srv:
        table = await new_table(srv.client, "partnership", seed="window offsets")
        await play(table, random.Random(3), max_actions=5000, hands=1)
        manager = srv.running.games
        live = manager.games[table.game_id]
        full = [e for row in await manager.store.load_log(table.game_id) for e in row.events]
        assert [e["seq"] for e in full] == list(range(1, live.event_count + 1))
        first_kept = live.event_count - len(live.events) + 1
        assert len(live.events) == 7 and first_kept > 1
        for token in (table.adjudicator_token, table.seat_tokens[2]):
            caller = manager.authenticate(live, token)
            ends = live.event_count
            edges = {0, 1, first_kept - 2, first_kept - 1, first_kept, ends - 1, ends}
            for after_seq in sorted(edges | set(range(0, ends, 11))):
                left_the_window = after_seq + 1 < first_kept  # some it asks for have left it
                expected = [e["seq"] for e in full[after_seq:] if manager.visible(caller, e)]
                stream = cast(
                    AsyncGenerator[pb.WatchGameResponse, None],
                    manager.watch(table.game_id, token, 0, after_seq=after_seq),
                )
                got = await _backlog(stream, 1 if left_the_window else len(expected))
                if left_the_window:
                    assert [item.WhichOneof("item") for item in got] == ["snapshot"], after_seq
                    continue
                assert [item.event.seq for item in got] == expected, (caller.role, after_seq)
                assert all(item.WhichOneof("item") == "event" for item in got)


# ----------------------------------------------------------------------------------------------
# WatchGame across a shutdown


def _sessions(table: Table) -> dict[str, Session]:
    return {"seat 0": table.seats[0], "seat 3": table.seats[3], "spectator": table.spec}


async def _watch_until_refused(
    session: Session, received: list[dict[str, Any]]
) -> RefereeError | None:
    try:
        async for item in session.watch(0):
            received.append(item)
    except RefereeError as error:
        return error
    return None


async def test_a_shutdown_ends_every_watch_at_once_and_each_resumes_exactly(
    tmp_path: Path,
) -> None:
    """Was: a stream follows its game until the game ends, so a graceful shutdown held every
    watcher for its whole grace period and gRPC then cancelled the streams with a bare
    "Cancelling all calls", not saying where to resume. Now each stream gets the events already
    committed and ends UNAVAILABLE, reason SHUTTING_DOWN, ``after_seq`` saying where to resume;
    the shutdown waits only for the unary calls in flight (none here, with an hour's grace);
    and each caller resumes on the restarted server with exactly the events it had not had."""
    rng = random.Random(11)
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="shutdown")
        for _ in range(6):
            version = await step_once(table, rng)
        received: dict[str, list[dict[str, Any]]] = {name: [] for name in _sessions(table)}
        watches = {
            name: asyncio.ensure_future(_watch_until_refused(session, received[name]))
            for name, session in _sessions(table).items()
        }
        async with asyncio.timeout(10):  # each stream has sent its backlog and now waits
            while not all(
                items and items[-1]["event"]["version"] == version for items in received.values()
            ):
                await asyncio.sleep(0.01)
        stopping = asyncio.ensure_future(srv.running.stop(3600))
        ended = await asyncio.wait_for(asyncio.gather(*watches.values()), 30)
        await asyncio.wait_for(stopping, 30)
        cursors = {}
        for name, error in zip(watches, ended, strict=True):
            assert error is not None, f"{name}'s stream ended without an error"
            assert error.code == grpc.StatusCode.UNAVAILABLE, error
            assert error.reason == "SHUTTING_DOWN" and error.version == version, error
            cursors[name] = int(error.metadata["after_seq"])
            assert f"after_seq={cursors[name]}" in error.message
            assert cursors[name] >= seqs(received[name])[-1]
        assert cursors["seat 0"] == cursors["spectator"]  # every event was handled, shown or not
    async with serving(tmp_path) as srv:
        again = table.through(srv.client)
        for _ in range(4):
            await step_once(again, rng)
        for name, session in _sessions(again).items():
            resumed = await until_idle(session.watch(0, after_seq=cursors[name]))
            full = await until_idle(session.watch(0))
            assert received[name] + resumed == full, name


async def test_a_watch_opened_while_the_server_shuts_down_is_refused_resumably(
    srv: Served,
) -> None:
    """Between NOT_SERVING and gRPC's own stop a new stream could still arrive: it is refused
    the way open streams end, its ``after_seq`` the one it asked for (nothing was sent)."""
    table = await new_table(srv.client, "partnership", seed="late")
    await table.seats[1].submit({"type": "pass"}, expected_version=0)
    srv.running.games.stop_watching()
    error = await refused(anext(table.spec.watch(0, after_seq=3)))
    assert (error.code, error.reason, error.metadata["after_seq"]) == (
        grpc.StatusCode.UNAVAILABLE,
        "SHUTTING_DOWN",
        "3",
    )
    fresh = await refused(anext(table.seats[2].watch(0)))
    assert fresh.metadata["after_seq"] == "0" and "send the same request again" in fresh.message
    assert (await table.spec.view())["version"] == 1  # the rest of the service goes on


async def _collect(stream: AsyncIterator[dict[str, Any]], items: list[dict[str, Any]]) -> None:
    async for item in stream:
        items.append(item)


async def _until_version(items: list[dict[str, Any]], version: int) -> None:
    async with asyncio.timeout(20):
        while not (items and "event" in items[-1] and items[-1]["event"]["version"] >= version):
            await asyncio.sleep(0.01)


async def test_a_resuming_watch_follows_its_game_across_a_restart(tmp_path: Path) -> None:
    """``watch(resume=True)`` (the Python client; the Node client has the same option): the
    stream the shutdown ends is opened again after its ``after_seq`` once the server is back,
    and yields exactly what a watch opened afterwards gives. A resumed call sends an after_seq,
    which makes the server ignore from_version: the client leaves out what from_version
    excludes (a watch from beyond the current version, which had been sent nothing)."""
    port = free_port()
    rng = random.Random(5)
    async with RefereeClient(f"127.0.0.1:{port}") as client:
        async with serving(tmp_path, port=port) as srv:
            table = await new_table(srv.client, "partnership", seed="resume")
            for _ in range(5):
                version = await step_once(table, rng)
            seat = client.session(table.game_id, table.seat_tokens[2])
            ahead = client.session(table.game_id, table.spectator_token)
            whole: list[dict[str, Any]] = []
            later: list[dict[str, Any]] = []
            watches = [
                asyncio.ensure_future(_collect(seat.watch(0, resume=True), whole)),
                asyncio.ensure_future(_collect(ahead.watch(version + 3, resume=True), later)),
            ]
            await _until_version(whole, version)
        assert [watch.done() for watch in watches] == [False, False]  # waiting for the server
        assert later == []
        async with serving(tmp_path, port=port) as srv:
            # Channels to one address share gRPC's connection to it, which the waiting watch
            # left in reconnect backoff: a call now would fail fast, before it reconnects.
            await asyncio.wait_for(srv.client.channel.channel_ready(), 30)
            again = table.through(srv.client)
            for _ in range(6):
                version = await step_once(again, rng)
            await _until_version(whole, version)
            await _until_version(later, version)
            assert whole == await until_idle(again.seats[2].watch(0))
            assert later == await until_idle(again.spec.watch(version - 3))
            for watch in watches:
                watch.cancel()


async def test_a_resuming_watch_survives_a_killed_server(tmp_path: Path) -> None:
    """A server killed outright sends no after_seq: the stream fails UNAVAILABLE (the connection
    lost) and the client resumes after the last event it received, once a new server answers
    on the address. Without ``resume`` the same loss is a RefereeError."""
    port = free_port()
    db, log = tmp_path / "referee.db", tmp_path / "server.log"
    rng = random.Random(9)
    async with RefereeClient(f"127.0.0.1:{port}") as client:
        with running(db, port, log) as server:
            await server.wait_serving()
            table = await new_table(client, "partnership", seed="killed")
            for _ in range(4):
                version = await step_once(table, rng)
            items: list[dict[str, Any]] = []
            watch = asyncio.ensure_future(_collect(table.seats[1].watch(0, resume=True), items))
            plain = asyncio.ensure_future(_collect(table.seats[0].watch(0), []))
            await _until_version(items, version)
            server.kill()
            error = await refused(asyncio.wait_for(plain, 20))
            assert error.code == grpc.StatusCode.UNAVAILABLE and "after_seq" not in error.metadata
        await asyncio.sleep(0.3)  # a few attempts fail while nothing listens
        assert not watch.done()
        with running(db, port, log) as server:
            await server.wait_serving()
            await asyncio.wait_for(client.channel.channel_ready(), 30)  # out of its backoff
            for _ in range(3):
                version = await step_once(table, rng)
            await _until_version(items, version)
            assert items == await until_idle(table.seats[1].watch(0))
            watch.cancel()


async def test_a_resuming_watch_raises_any_other_error_at_once(srv: Served) -> None:
    """Only UNAVAILABLE is resumed: a refusal is raised as without ``resume``."""
    table = await new_table(srv.client, "partnership", seed="other-errors")
    beyond = await refused(
        asyncio.wait_for(anext(table.spec.watch(0, after_seq=999, resume=True)), 20)
    )
    assert beyond.code == grpc.StatusCode.INVALID_ARGUMENT
    stranger = srv.client.session(table.game_id, "not-a-token")
    unknown = await refused(asyncio.wait_for(anext(stranger.watch(0, resume=True)), 20))
    assert unknown.code == grpc.StatusCode.UNAUTHENTICATED


# ----------------------------------------------------------------------------------------------
# WatchGame over a network that goes silent


async def test_a_watcher_whose_network_goes_silent_is_dropped(tmp_path: Path) -> None:
    """Was: gRPC's server pings a silent connection only after two hours, so a watcher whose
    network went away without closing (nothing arrives, nothing is refused) kept its stream,
    and its place under --max-watchers, that long. --keepalive-seconds (60) pings it; an
    unanswered ping closes the connection and the stream's place is free again."""
    async with serving(tmp_path, keepalive_seconds=1) as srv:
        table = await new_table(srv.client, "partnership", seed="silent")
        async with (
            SilentNetwork(srv.running.port) as network,
            RefereeClient(f"127.0.0.1:{network.port}") as far,
        ):
            stream = far.session(table.game_id, table.spectator_token).watch(0)
            assert "event" in await anext(stream)
            assert _watchers_active() == 1
            network.cut()
            async with asyncio.timeout(30):  # about two seconds: a ping, its timeout
                while _watchers_active():
                    await asyncio.sleep(0.05)
            await stream.aclose()


async def test_a_resuming_watch_finds_a_silent_connection_dead_and_resumes(
    tmp_path: Path,
) -> None:
    """The client's side of the same cut: nothing arrives and nothing is refused, so a watch
    would wait for ever. While a call is open the client pings a silent connection
    (``keepalive_seconds``, 30 by default), drops it when the ping goes unanswered, and a
    ``resume=True`` watch opens the stream again on a new connection, missing nothing. The
    server's own keepalive is left at its default here, so only the client can notice."""
    rng = random.Random(21)
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="silent-client")
        for _ in range(3):
            version = await step_once(table, rng)
        async with (
            SilentNetwork(srv.running.port) as network,
            RefereeClient(f"127.0.0.1:{network.port}", keepalive_seconds=1) as far,
        ):
            items: list[dict[str, Any]] = []
            seat = far.session(table.game_id, table.seat_tokens[3])
            watch = asyncio.ensure_future(_collect(seat.watch(0, resume=True), items))
            await _until_version(items, version)
            network.cut()
            for _ in range(4):
                version = await step_once(table, rng)
            await _until_version(items, version)
            assert items == await until_idle(table.seats[3].watch(0))
            watch.cancel()


async def test_a_client_that_pings_keeps_its_quiet_watch(tmp_path: Path) -> None:
    """gRPC's server answers a client that pings a quiet connection more often than every five
    minutes with GOAWAY ("too many pings"), which would end after a minute and a half the
    watches of a client that pings to find dead servers (the Python client pings every 30 s
    while a call is open). The server lets clients ping every 10 s; here every 1 s, with a
    client pinging every 1.5 s through six quiet seconds: its watch goes on."""
    async with serving(tmp_path, client_ping_seconds=1) as srv:
        table = await new_table(srv.client, "partnership", seed="pinging")
        async with RefereeClient(srv.address, keepalive_seconds=1.5) as pinging:
            watcher = Collector(pinging.session(table.game_id, table.spectator_token))
            await watcher.wait_for_version(0)
            await asyncio.sleep(6)
            assert not watcher.task.done(), watcher.task
            await table.seats[1].submit({"type": "pass"}, expected_version=0)
            await watcher.wait_for_version(1)
            watcher.task.cancel()


async def test_connections_past_their_age_are_replaced_and_watches_resume(
    tmp_path: Path,
) -> None:
    """--max-connection-age-seconds: behind an L4 balancer a client's one connection pins it to
    one replica for good. Past the age gRPC asks the client to reconnect (GOAWAY): unary calls
    go on over new connections without a failure, and a watch, cut after the grace period
    with UNAVAILABLE, resumes with ``resume=True`` and misses nothing."""
    rng = random.Random(33)
    async with serving(tmp_path, max_connection_age_seconds=1) as srv:
        table = await new_table(srv.client, "partnership", seed="aged")
        async with (
            SilentNetwork(srv.running.port) as network,
            RefereeClient(f"127.0.0.1:{network.port}") as client,
        ):
            spectator = client.session(table.game_id, table.spectator_token)
            items: list[dict[str, Any]] = []
            watch = asyncio.ensure_future(_collect(spectator.watch(0, resume=True), items))
            loop = asyncio.get_running_loop()
            started = loop.time()
            while loop.time() - started < 4:
                version = await step_once(table, rng)
                assert (await spectator.view())["version"] == version
                await asyncio.sleep(0.05)  # a few dozen actions: all within the watch window
            await _until_version(items, version)
            assert network.connections >= 3
            assert items == await until_idle(table.spec.watch(0))
            watch.cancel()


# ----------------------------------------------------------------------------------------------
# Reconnecting after the server was away


async def test_a_client_works_again_soon_after_its_server_is_back(tmp_path: Path) -> None:
    """Was: gRPC's reconnect backoff grows from 1 s to 120 s while a server is away, and a
    channel waits for its next attempt even once the server is back: after 6 s away the
    client's calls went on failing UNAVAILABLE for 2 to 5 s (10 s away: 7 s). The client caps
    the backoff (``max_reconnect_backoff_seconds``, 5 s by default; 0.5 s here)."""
    port = free_port()
    loop = asyncio.get_running_loop()
    async with RefereeClient(f"127.0.0.1:{port}", max_reconnect_backoff_seconds=0.5) as client:
        async with serving(tmp_path, port=port):
            assert await client.list_variants()
        away_until = loop.time() + 6.0
        while loop.time() < away_until:
            with pytest.raises(RefereeError) as away:
                await client.list_variants()
            assert away.value.code == grpc.StatusCode.UNAVAILABLE
            await asyncio.sleep(0.2)
        async with serving(tmp_path, port=port):
            back = loop.time()
            while True:
                try:
                    await client.list_variants()
                    break
                except RefereeError as failed:
                    assert failed.code == grpc.StatusCode.UNAVAILABLE
                    assert loop.time() - back < 30
                    await asyncio.sleep(0.05)
            late = loop.time() - back
    assert late < 1.5, f"calls failed for {late:.2f} s after the server was back"


async def test_the_clients_reconnect_backoff_is_capped_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default cap reaches the channel: 5 s, gRPC's first backoff (1 s) kept below it;
    None leaves gRPC's own backoff."""
    seen: list[list[tuple[str, object]]] = []

    def channel(target: str, options: list[tuple[str, object]]) -> grpc.aio.Channel:
        seen.append(options)
        return real(target, options)

    real = grpc.aio.insecure_channel
    monkeypatch.setattr(grpc.aio, "insecure_channel", channel)
    await RefereeClient("127.0.0.1:1").close()
    await RefereeClient("127.0.0.1:1", max_reconnect_backoff_seconds=0.25).close()
    await RefereeClient("127.0.0.1:1", max_reconnect_backoff_seconds=None).close()
    backoff = [
        {name: value for name, value in options if "reconnect_backoff" in name} for options in seen
    ]
    assert backoff == [
        {"grpc.max_reconnect_backoff_ms": 5000, "grpc.initial_reconnect_backoff_ms": 1000},
        {"grpc.max_reconnect_backoff_ms": 250, "grpc.initial_reconnect_backoff_ms": 250},
        {},  # gRPC's own
    ]


async def test_unary_calls_have_a_deadline_and_watches_none(tmp_path: Path) -> None:
    """Was: the Python client's calls had no deadline (the Node client's have 30 s), so a call
    on a connection gone silent waited until keepalive gave up on it, and one to a server that
    never answered waited for ever. Each unary call now has ``deadline_seconds`` (30 by
    default; 0.5 here, keepalive off so only the deadline can end it), and fails
    DEADLINE_EXCEEDED past it, retries included; a watch, which lasts as long as its game,
    outlives it."""
    rng = random.Random(8)
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="deadlines")
        async with (
            SilentNetwork(srv.running.port) as network,
            RefereeClient(
                f"127.0.0.1:{network.port}", keepalive_seconds=None, deadline_seconds=0.5
            ) as far,
        ):
            seat = far.seat(table.game_id, table.seat_tokens[1])
            watched: list[dict[str, Any]] = []
            watch = asyncio.ensure_future(_collect(seat.watch(0), watched))
            await asyncio.sleep(1.0)  # past the deadline: the watch goes on
            version = await step_once(table, rng)
            await _until_version(watched, version)
            assert not watch.done()
            await seat.view()
            network.cut()
            calls: dict[str, Callable[[], Awaitable[Any]]] = {
                "view": seat.view,
                "submit": lambda: seat.submit({"type": "pass"}),
                "score_meld": lambda: far.score_meld("partnership", ["AH"], "H"),
                "create_game": lambda: far.create_game("partnership"),
            }
            for name, call in calls.items():
                with pytest.raises(RefereeError) as late:
                    await asyncio.wait_for(call(), 10)
                assert late.value.code == grpc.StatusCode.DEADLINE_EXCEEDED, name
            watch.cancel()
    async with RefereeClient("127.0.0.1:1") as default:
        assert default.deadline_seconds == 30.0
    async with RefereeClient("127.0.0.1:1", deadline_seconds=0) as none:
        assert none.deadline_seconds is None  # as in the Node client, not "fail at once"
