"""The server's background loops (``referee.service.server.keep_running``): following another
replica's commits, housekeeping and readiness each catch the failures they expect; anything
else used to end its task for good, seen by nobody, while the server went on serving. A failed
loop is now logged with its traceback, counted, and started again.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from grpc_health.v1 import health_pb2
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from referee.service import server as server_module
from referee.service.games import GameManager
from referee.service.server import SERVICE_NAMES, HealthServicer, StoreHealth
from referee.store import postgres as postgres_module
from referee.store.base import ALL_GAMES, SchemaChanged, StoreError
from referee.store.postgres import PostgresStore
from referee.store.sqlite import SqliteStore
from tests.service_helpers import (
    health_stub,
    new_managed_game,
    new_table,
    play_step,
    quiet_logs,
    serving,
)
from tests.test_store import POSTGRES_URL, postgres_marks, postgres_schema


def restarts(task: str) -> float:
    return REGISTRY.get_sample_value("referee_background_restarts_total", {"task": task}) or 0.0


async def eventually(condition: Any, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not within the time allowed"
        await asyncio.sleep(0.01)


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "BACKGROUND_RETRY_SECONDS", 0.01)


async def test_housekeeping_that_fails_is_logged_counted_and_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eviction failing twice for a reason nobody expected (not the store's) ended the
    housekeeping task: idle games were never evicted again, old responses never forgotten,
    games left behind by a failed catch-up never caught up."""
    quiet_logs()
    before = restarts("keep-house")
    async with serving(tmp_path, housekeeping_seconds=0.02) as srv:
        games = srv.running.games
        calls = 0
        evict = games.evict_idle_games

        async def failing_twice() -> int:
            nonlocal calls
            calls += 1
            if calls <= 2:
                raise RuntimeError(f"unexpected failure {calls}")
            return await evict()

        monkeypatch.setattr(games, "evict_idle_games", failing_twice)
        with capture_logs() as logs:
            await eventually(lambda: calls >= 4)
        failed = [entry for entry in logs if entry["event"] == "background_task_failed"]
        assert [entry["task"] for entry in failed] == ["keep-house", "keep-house"]
        assert [entry["restart_in_seconds"] for entry in failed] == [0.01, 0.02]
        assert all(entry["exc_info"] for entry in failed)
        assert restarts("keep-house") == before + 2
        # It works again: another game's table is served and housekeeping keeps running.
        await new_table(srv.client, "partnership", seed="after")
        seen = calls
        await eventually(lambda: calls > seen + 1)
        assert all(not task.done() for task in srv.running.background)


async def test_readiness_that_fails_goes_on_from_what_it_last_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The readiness loop is restarted with what it last found kept: a store unreachable
    before the failure and reachable after it puts RefereeService back to SERVING (a restarted
    loop that started from "reachable" would have left it NOT_SERVING for good)."""
    quiet_logs()
    before = restarts("follow-store-health")
    async with serving(tmp_path, store_check_seconds=0.02) as srv:
        stub = health_stub(srv.client.channel)
        referee = health_pb2.HealthCheckRequest(service=SERVICE_NAMES[0])
        state = "down"

        async def ping() -> None:
            nonlocal state
            if state == "down":
                raise StoreError("read failed: connection refused")
            if state == "broken":
                state = "up"
                raise RuntimeError("nobody expected this")

        monkeypatch.setattr(srv.running.store, "ping", ping)
        not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
        for _ in range(500):
            if (await stub.Check(referee)).status == not_serving:
                break
            await asyncio.sleep(0.01)
        assert (await stub.Check(referee)).status == not_serving
        state = "broken"
        await eventually(lambda: restarts("follow-store-health") == before + 1)
        for _ in range(500):
            if (await stub.Check(referee)).status == health_pb2.HealthCheckResponse.SERVING:
                break
            await asyncio.sleep(0.01)
        assert (await stub.Check(referee)).status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=postgres_marks())])
async def test_a_replica_whose_change_listener_fails_still_follows_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Replica B's listener for other replicas' commits fails once in a way the store does
    not expect (here: a bug while reading an announcement). Before, B's following task ended:
    a watcher on B saw nothing of what was played on A from then on. Now the listener starts
    again, begins by checking every game B holds, and the watcher sees every action."""
    quiet_logs()
    changes = PostgresStore.changes
    failures = 0

    async def failing_once(self: PostgresStore) -> AsyncIterator[str]:
        nonlocal failures
        async for game_id in changes(self):
            if failures == 0 and game_id != ALL_GAMES:
                failures += 1
                raise RuntimeError("a bug while reading an announcement")
            yield game_id

    before = restarts("follow-store-changes")
    with postgres_schema("background") as schema:
        async with serving(tmp_path / "a", db=POSTGRES_URL, db_schema=schema) as a:
            table = await new_table(a.client, "partnership", seed="listener")
            monkeypatch.setattr(PostgresStore, "changes", failing_once)
            async with serving(tmp_path / "b", db=POSTGRES_URL, db_schema=schema) as b:
                on_b = b.client.seat(table.game_id, table.seat_tokens[1])
                seen: list[int] = []

                async def watch() -> None:
                    async for item in on_b.watch(0):
                        if "event" in item:
                            seen.append(item["event"]["version"])

                watching = asyncio.create_task(watch())
                try:
                    rng = random.Random(5)
                    for _ in range(6):
                        step = await play_step(table, rng)
                        assert step is not None
                        version = step.result["version"]
                        await eventually(lambda v=version: bool(seen) and max(seen) >= v)
                finally:
                    watching.cancel()
                    await asyncio.gather(watching, return_exceptions=True)
                assert failures == 1
                assert restarts("follow-store-changes") == before + 1


@pytest.mark.parametrize(
    "held_read",
    ["load_log", "count_active_games"],
    ids=["during a catch-up", "during the recount"],
)
async def test_a_housekeeping_round_under_way_when_the_store_stops_serving_logs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_read: str
) -> None:
    """Was: the housekeeping read ``store_stopped`` only at the start of a round, so a round
    that was waiting for one of the store's reads when the store stopped serving its schema
    went on to its next reads, which the store refused, and logged them
    (``active_games_recount_failed``, ``responses_forget_failed``): the noise the flag is to
    spare. ``test_a_postgres_replica_downgraded_while_its_listener_reconnects_stops_serving``
    asserts that none is logged, with a round every 0.05 s, each open to this for as long as
    its recount reads (found by reading; not seen in some fifty runs here). Now the round
    reads the flag again after each await: it asks the store nothing more and logs nothing.
    Here the stop lands while ``held_read`` waits."""
    store = SqliteStore(tmp_path / "referee.db")
    await store.open()
    games = GameManager(store)
    created = await new_managed_game(games, "behind")
    games.behind.add(created.game_id)  # a change announced that failed to fold in
    lost = "schema 'public' has schema version 1, but this release serves a newer one"
    stopped = False  # the store's own flag (PostgresStore._schema_lost)
    refused_after_the_stop: list[str] = []
    entered, release = asyncio.Event(), asyncio.Event()

    def as_the_store_answers(name: str) -> Callable[..., Awaitable[Any]]:
        original: Callable[..., Awaitable[Any]] = getattr(store, name)

        async def answer(*args: Any, **kwargs: Any) -> Any:
            if stopped:  # refused before it takes a connection, as PostgresStore does
                refused_after_the_stop.append(name)
                raise SchemaChanged(lost)
            if name == held_read and not entered.is_set():
                entered.set()
                await release.wait()  # the read had begun: it ends as it would have
            return await original(*args, **kwargs)

        return answer

    for name in ("load_log", "count_active_games", "forget_responses"):
        monkeypatch.setattr(store, name, as_the_store_answers(name))

    stop = asyncio.Event()

    async def changes() -> AsyncIterator[str]:
        """The listener, reconnecting: it finds the schema changed once ``stop`` is set
        (PostgresStore._stop_serving), and so announces nothing."""
        nonlocal stopped
        await stop.wait()
        stopped = True
        raise SchemaChanged(lost)
        yield ALL_GAMES  # never: an async generator, as the store's

    monkeypatch.setattr(store, "changes", changes)
    following = asyncio.ensure_future(games.follow_changes())
    try:
        with capture_logs() as logs:
            housekeeping = asyncio.ensure_future(
                games.keep_house_once(structlog.get_logger("referee.games"))
            )
            await asyncio.wait_for(entered.wait(), 10)
            stop.set()
            for _ in range(100):  # until follow_changes has heard it (a few loop turns)
                if games.store_stopped:
                    break
                await asyncio.sleep(0)
            assert games.store_stopped
            release.set()
            await asyncio.wait_for(housekeeping, 10)
        assert refused_after_the_stop == []
        assert [entry["event"] for entry in logs if entry["log_level"] != "info"] == []
        await games.keep_house_once(structlog.get_logger("referee.games"))  # the next round
        assert refused_after_the_stop == []
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await store.close()


async def test_a_readiness_check_cancelled_as_the_store_answers_ends() -> None:
    """Was: the readiness check bounded its ping with ``asyncio.wait_for``, which in Python
    3.11 returns the ping's answer when the check is cancelled in the loop turn the answer
    comes in: the cancellation was lost, the loop went on checking every few seconds, and
    ``Running.stop``, which cancels it and waits for it to end, waited for ever. A stop of a
    server whose store had stopped serving its schema (each ping refused at once, every
    0.05 s) hung so in ``test_a_postgres_replica_downgraded_while_its_listener_reconnects_
    stops_serving``. Now the ping is bounded with ``asyncio.timeout`` and the check ends
    cancelled. Here the answer and the cancellation come in the same turn."""
    pinged, answer = asyncio.Event(), asyncio.Event()

    class AnsweringStore:
        async def ping(self) -> None:
            pinged.set()
            await answer.wait()

    readiness = StoreHealth(AnsweringStore(), HealthServicer(), every=60.0)  # type: ignore[arg-type]
    checking = asyncio.ensure_future(readiness.check())
    await asyncio.wait_for(pinged.wait(), 10)
    answer.set()  # the store answers in this turn...
    checking.cancel()  # ...and the server's stop cancels the check in it too
    with pytest.raises(asyncio.CancelledError):
        await checking


class _ListeningConnection:
    """What ``PostgresStore.changes`` uses of its connection: nothing is announced, and the
    first keep-alive is answered once ``answer`` is set; ``again`` is set by any later one."""

    def __init__(self) -> None:
        self.keep_alive, self.answer, self.again = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.info = type("Info", (), {"backend_pid": 4242})()

    async def execute(self, query: object) -> None:
        if query != "SELECT 1":  # LISTEN
            return
        if self.keep_alive.is_set():
            self.again.set()
            await asyncio.Event().wait()  # never answered: a cancellation ends it
        self.keep_alive.set()
        await self.answer.wait()

    async def notifies(self, *, timeout: float) -> AsyncIterator[object]:
        nothing: tuple[object, ...] = ()  # announced within the poll
        for notify in nothing:
            yield notify

    async def close(self) -> None:
        pass


async def test_a_change_listener_cancelled_as_its_keep_alive_is_answered_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was: the change listener bounded its keep-alive with ``asyncio.wait_for``, which in
    Python 3.11 returns the answer when the listener is cancelled in the loop turn the answer
    comes in: the cancellation was lost and the listener went on listening, while
    ``Running.stop`` waited for it to end (the store closes only after). Now it is bounded
    with ``asyncio.timeout`` and the listener ends cancelled, asking nothing more."""
    monkeypatch.setattr(postgres_module, "LISTEN_KEEPALIVE_SECONDS", 0.0)  # one every poll
    store = PostgresStore("postgresql://127.0.0.1:1/unused")
    connection = _ListeningConnection()
    store._pool = object()  # type: ignore[assignment]  # open (no connection is taken)
    store._lock_holder = connection  # type: ignore[assignment]  # as open() leaves it
    store.channel = "pinochle_referee"

    async def listen() -> None:
        async for _ in store.changes():
            pass

    listening = asyncio.ensure_future(listen())
    await asyncio.wait_for(connection.keep_alive.wait(), 10)
    connection.answer.set()  # the keep-alive is answered in this turn...
    listening.cancel()  # ...and the server's stop cancels the listener in it too
    went_on = asyncio.ensure_future(connection.again.wait())
    await asyncio.wait((listening, went_on), return_when=asyncio.FIRST_COMPLETED)
    went_on.cancel()
    listening.cancel()  # (a listener that went on: its second keep-alive is never answered)
    await asyncio.gather(listening, went_on, return_exceptions=True)
    assert not connection.again.is_set(), "the listener went on after it was cancelled"
