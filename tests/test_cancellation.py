"""SubmitAction cancelled by its deadline (issue 4: "nothing acknowledged is ever lost", "a
retried request_id returns the stored response and is applied once", "deadlines honoured").

gRPC cancels the handler when the client's deadline expires. Once the store has the commit it may
still make it durable, so the server must finish that commit and its in-memory update anyway;
when the cancellation comes before the commit, nothing may change. Either way a retry with the
same request_id ends with the action applied exactly once.

The store's commit is held on an ``asyncio.Event`` the test opens itself, so nothing here
depends on how fast the machine is: sleeps only give the server time to notice the cancellation,
and every wait is bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.service.errors import ServiceError
from referee.service.games import GameManager
from referee.service.observability import configure_logging
from referee.store.base import AuditRow, Commit
from tests.service_helpers import (
    Served,
    Table,
    bearer,
    log_lines,
    new_table,
    raw_action,
    serving,
)

BID = {"type": "bid", "amount": 250}  # seat 1 opens the auction at version 0
PASS = {"type": "pass"}
BOUND = 10.0  # seconds: the most any wait below may take before the test fails
# The deadline of a call that must reach the store before it expires (the store is then held
# until it has): 0.1 s left a loaded machine 6 times the slowest commit measured, 1 s leaves 60.
DEADLINE = 1.0


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as served:
        yield served


async def submit(
    srv: Served,
    table: Table,
    seat: int,
    action: dict[str, Any],
    version: int,
    request_id: str,
    timeout: float = BOUND,
) -> pb.SubmitActionResponse:
    return await srv.referee.SubmitAction(
        pb.SubmitActionRequest(
            game_id=table.game_id,
            action=raw_action(action),
            expected_version=version,
            request_id=request_id,
        ),
        metadata=bearer(table.seat_tokens[seat]),
        timeout=timeout,
    )


async def deadline_expires(call: Awaitable[Any]) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def accepted_ids(table: Table) -> list[str]:
    return [
        e.get("request_id", "")
        for e in await table.adj.audit_log()
        if e["outcome"] == "AUDIT_OUTCOME_ACCEPTED"
    ]


async def rpc_line(capfd: pytest.CaptureFixture[str], **fields: object) -> dict[str, Any]:
    """The canonical log line of the call whose line has ``fields`` (waited for, bounded)."""
    lines: list[dict[str, Any]] = []
    for _ in range(int(BOUND / 0.05)):
        lines += await log_lines(capfd, rpcs=0)
        found = [
            line
            for line in lines
            if line.get("event") == "rpc" and all(line.get(k) == v for k, v in fields.items())
        ]
        if found:
            (line,) = found
            return line
        await asyncio.sleep(0.05)
    raise AssertionError(f"no log line with {fields}")


async def next_event(stream: AsyncIterator[dict[str, Any]], version: int) -> dict[str, Any]:
    """The first event of ``version`` on a watch stream (events of earlier versions skipped)."""

    async def find() -> dict[str, Any]:
        async for item in stream:
            event: dict[str, Any] = item.get("event", {})
            if event.get("version") == version:
                return event
        raise AssertionError("the stream ended")

    return await asyncio.wait_for(find(), BOUND)


def record_handlers(
    monkeypatch: pytest.MonkeyPatch, games: Any, method: str
) -> list[asyncio.Task[Any]]:
    """The tasks that call ``games.<method>`` from now on: gRPC runs each call's handler in a
    task of its own, and the servicer calls the game manager from it."""
    tasks: list[asyncio.Task[Any]] = []
    original = getattr(games, method)

    async def recording(*args: Any, **kwargs: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        return await original(*args, **kwargs)

    monkeypatch.setattr(games, method, recording)
    return tasks


async def until_cancelled(handlers: list[asyncio.Task[Any]]) -> None:
    """Wait until the server has cancelled the one recorded handler. The server enforces a
    deadline on its own clock: on a loaded machine the client can see it expire well before
    the server cancels the handler, which, let go too early, would finish with OK."""
    (handler,) = handlers
    for _ in range(int(BOUND / 0.01)):
        if handler.cancelling():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the server never cancelled the handler")


@pytest.mark.usefixtures("json_logs")  # configured below, after serving() quieted the logs
@pytest.mark.parametrize("held", ["before", "after"])
async def test_a_commit_under_way_when_the_deadline_expires_is_finished(
    srv: Served, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], held: str
) -> None:
    """The store's commit is held either before it reaches the store or after it is durable;
    the client's deadline expires meanwhile. The server finishes the commit and its in-memory
    update, and keeps the game locked until then; the call's log line says the action was
    accepted though its caller had gone."""
    configure_logging("json")
    table = await new_table(srv.client, "partnership", seed="cancel")
    watch = table.adj.watch(0)
    assert (await next_event(watch, 0))["kind"]  # the stream is up before the action
    store = srv.running.games.store
    original: Callable[[Commit], Awaitable[AuditRow]] = store.commit
    entered, gate = asyncio.Event(), asyncio.Event()

    async def slow_commit(commit: Commit) -> AuditRow:
        if held == "before":
            entered.set()
            await asyncio.wait_for(gate.wait(), BOUND)
            return await original(commit)
        row = await original(commit)
        entered.set()
        await asyncio.wait_for(gate.wait(), BOUND)
        return row

    monkeypatch.setattr(store, "commit", slow_commit)
    handlers = record_handlers(monkeypatch, srv.running.games, "submit")
    await deadline_expires(submit(srv, table, 1, BID, 0, "bid-1", timeout=DEADLINE))
    assert entered.is_set()  # the manager had handed the commit over
    await until_cancelled(handlers)
    # Another action at the next version waits for the game's lock: the cancelled call still
    # holds it (were it released, this one would meet version 0 and be ABORTED).
    follower = asyncio.create_task(submit(srv, table, 2, PASS, 1, "pass-2"))
    await asyncio.sleep(0.2)
    assert not follower.done()
    gate.set()
    monkeypatch.undo()

    assert (await follower).version == 2
    line = await rpc_line(capfd, rpc="SubmitAction", request_id="bid-1")
    assert line["grpc_code"] == "DEADLINE_EXCEEDED" and line["game"] == table.game_id
    assert (line["outcome"], line["version"], line["seat"]) == ("accepted", 1, 1)
    assert (await table.adj.view())["version"] == 2
    assert (await next_event(watch, 1))["kind"] == "call"  # watchers were told
    # The retry, still at version 0, gets the stored response; the bid is not applied again.
    retry = await submit(srv, table, 1, BID, 0, "bid-1")
    assert retry.version == 1
    assert [e.kind for e in retry.events] == ["call"]
    assert (await table.adj.view())["version"] == 2
    assert await accepted_ids(table) == ["bid-1", "pass-2"]
    assert (await submit(srv, table, 3, PASS, 2, "pass-3")).version == 3
    assert await table.adj.verify_audit_log()


async def test_a_call_cancelled_before_its_commit_changes_nothing(srv: Served) -> None:
    """Cancelled while it waits for the game's lock, the call never reaches the store: the game
    stays where it was, and the retry applies the action once."""
    table = await new_table(srv.client, "partnership", seed="cancel-early")
    live = srv.running.games.games[table.game_id]
    async with live.lock:  # as if another action of the game were being committed
        await deadline_expires(submit(srv, table, 1, BID, 0, "bid-1", timeout=0.1))
        for _ in range(int(BOUND / 0.01)):  # the server notices the cancelled call
            if not live.lock._waiters:  # asyncio.Lock has no public count of waiters
                break
            await asyncio.sleep(0.01)
        assert not live.lock._waiters
    assert (await table.adj.view())["version"] == 0
    assert await accepted_ids(table) == []

    assert (await submit(srv, table, 1, BID, 0, "bid-1")).version == 1
    again = await submit(srv, table, 1, BID, 0, "bid-1")  # a second retry: the stored response
    assert again.version == 1
    assert (await table.adj.view())["version"] == 1
    assert await accepted_ids(table) == ["bid-1"]
    assert (await submit(srv, table, 2, PASS, 1, "pass-2")).version == 2


async def test_a_version_conflict_still_catches_up_and_is_aborted(srv: Served) -> None:
    """The store's version check still refuses a stale replica's commit: that replica folds in
    the rows it missed and answers ABORTED with the current version."""
    table = await new_table(srv.client, "partnership", seed="conflict")
    other = GameManager(srv.running.store)  # a second replica that never refreshes first
    live = await other.load(table.game_id)
    assert (await submit(srv, table, 1, BID, 0, "bid-1")).version == 1
    assert live.state.version == 0
    with pytest.raises(ServiceError) as caught:
        await other.submit(table.game_id, table.seat_tokens[1], BID, 0, "bid-again")
    assert caught.value.code == grpc.StatusCode.ABORTED
    assert caught.value.reason == "STALE_VERSION"
    assert live.state.version == 1 and not live.lock.locked()
    assert await accepted_ids(table) == ["bid-1"]


async def test_a_conflict_found_after_the_caller_left_is_still_audited(
    srv: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale replica's commit is refused while its caller is being cancelled: the replica
    still folds in the rows it missed and audits the refusal (ABORTED), then the cancellation
    goes on; the game's lock is free afterwards."""
    table = await new_table(srv.client, "partnership", seed="conflict-cancel")
    other = GameManager(srv.running.store)  # a second replica that never refreshes first
    live = await other.load(table.game_id)
    assert (await submit(srv, table, 1, BID, 0, "bid-1")).version == 1
    store = srv.running.store
    original: Callable[[Commit], Awaitable[AuditRow]] = store.commit
    entered, gate = asyncio.Event(), asyncio.Event()

    async def held_commit(commit: Commit) -> AuditRow:
        entered.set()
        await asyncio.wait_for(gate.wait(), BOUND)
        return await original(commit)  # refused: the game is at version 1

    monkeypatch.setattr(store, "commit", held_commit)
    call = asyncio.create_task(
        other.submit(table.game_id, table.seat_tokens[1], BID, 0, "bid-again")
    )
    await asyncio.wait_for(entered.wait(), BOUND)
    call.cancel()
    await asyncio.sleep(0.05)
    assert not call.done()  # it waits for the commit's outcome, holding the game's lock
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(call, BOUND)
    monkeypatch.undo()
    assert live.state.version == 1 and not live.lock.locked()
    refusals = [e for e in await table.adj.audit_log() if e["outcome"] == "AUDIT_OUTCOME_REFUSED"]
    assert [(e["request_id"], e["code"]) for e in refusals] == [("bid-again", "ABORTED")]
    assert await accepted_ids(table) == ["bid-1"]
    assert await table.adj.verify_audit_log()


@pytest.mark.usefixtures("json_logs")
async def test_a_create_game_cancelled_during_its_write_is_still_registered(
    srv: Served, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """CreateGame's deadline expires while the store writes the game: the game is durable, so
    the server registers it and counts it active, as the database does, and the call's log
    line names it."""
    configure_logging("json")
    games = srv.running.games
    store = games.store
    original = store.create_game
    entered, gate = asyncio.Event(), asyncio.Event()

    async def slow_create(*args: Any, **kwargs: Any) -> None:
        await original(*args, **kwargs)
        entered.set()
        await asyncio.wait_for(gate.wait(), BOUND)

    monkeypatch.setattr(store, "create_game", slow_create)
    handlers = record_handlers(monkeypatch, games, "create")
    before = set(games.games)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await srv.referee.CreateGame(pb.CreateGameRequest(variant="partnership"), timeout=DEADLINE)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert entered.is_set()
    await until_cancelled(handlers)
    gate.set()
    monkeypatch.undo()
    for _ in range(int(BOUND / 0.05)):
        if set(games.games) != before:
            break
        await asyncio.sleep(0.05)
    (created,) = set(games.games) - before
    assert created in await store.list_games(active_only=True)
    line = await rpc_line(capfd, rpc="CreateGame")
    assert (line["grpc_code"], line["outcome"], line["game"]) == (
        "DEADLINE_EXCEEDED",
        "created",
        created,
    )
    assert len(games.games) == await store.count_active_games()
