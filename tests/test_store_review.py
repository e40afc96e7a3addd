"""A skeptical review of the storage paths (issue 4/5): group commit, failing COMMITs, refusals
that depend on a batch's rolled-back writes, idempotent retries across replicas and restarts,
the audit log of refused requests, and the audit chain under concurrent writes.

Each test pins behaviour no other test covered; those marked "Was a bug" failed before the fix
that came with them.
Store-level tests reuse ``tests.test_store``'s builders; manager-level ones drive
``GameManager`` directly (no gRPC) on a real ``SqliteStore``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from referee.service.errors import ServiceError
from referee.service.games import GameManager
from referee.store.base import (
    AuditRow,
    Commit,
    GameStore,
    LogRow,
    StoreError,
    VersionConflict,
)
from referee.store.postgres import PostgresStore
from referee.store.sqlite import SqliteStore
from tests.service_helpers import new_managed_game
from tests.test_store import (
    POSTGRES_URL,
    Backend,
    assert_chain,
    audit_entry,
    backend,  # noqa: F401 - a fixture, used by name
    fail_audit_inserts,
    make_commit,
    new_game,
    postgres_schema,
    postgres_url,  # noqa: F401 - a fixture, used by name
)

BID = {"type": "bid", "amount": 250}  # seat 1 opens the auction at version 0
PASS = {"type": "pass"}
BOUND = 10.0


# -- helpers ----------------------------------------------------------------------------------


class _CommitFails:
    """Wraps the SQLite writer connection: the ``COMMIT``s numbered in ``failing`` (1, 2, ...
    from the wrapping), or every one while ``always``, raise the way a full disk or an I/O error
    does (the transaction is left open, as SQLite leaves it).

    While ``held``, a ``COMMIT`` (run by the store's commit thread) waits for ``release``, so a
    test can queue jobs while a batch is certainly still committing; ``committing`` is set as
    soon as a ``COMMIT`` has started."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.failing: set[int] = set()
        self.always = False
        self.commits = 0
        self.commits_failed = 0
        self.held = False
        self.committing = threading.Event()
        self.release = threading.Event()

    def execute(self, statement: str, *args: Any) -> sqlite3.Cursor:
        if statement == "COMMIT":
            self.commits += 1
            self.committing.set()
            if self.held:
                self.release.wait(BOUND)  # bounded: a failed test never leaves the thread stuck
            if self.always or self.commits in self.failing:
                self.commits_failed += 1
                raise sqlite3.OperationalError("disk I/O error")
        return self._conn.execute(statement, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def fail_commits(store: SqliteStore) -> _CommitFails:
    conn = store._writer_conn
    assert conn is not None
    wrapper = _CommitFails(conn)
    setattr(store, "_writer_conn", wrapper)  # noqa: B010 - the attribute is typed as a Connection
    return wrapper


@pytest_asyncio.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "review.db")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def audit_of(store: GameStore, game_id: str) -> list[AuditRow]:
    return await store.audit_log(game_id, 0, 10_000)


async def drain(stream: AsyncIterator[Any]) -> None:
    async for _ in stream:
        pass


# -- SQLite group commit: a COMMIT that fails ---------------------------------------------------


async def test_a_failing_commit_fails_every_job_of_its_batch(sqlite: SqliteStore) -> None:
    """Pinned: COMMIT fails (I/O error) for a batch of several games: every job fails with
    StoreError, nothing of the batch is durable, and the store goes on working.

    Was: the four jobs were queued while g0's COMMIT was taken to be still running, but
    ``record_refusal`` (a coroutine) queues its job only once its task first runs; a COMMIT
    that finished before then (a loaded machine) started the next batch without it, and the
    refusal committed alone: an AuditRow among the results. Now g0's COMMIT waits until all
    four jobs are queued."""
    for game_id in ("g0", "g1", "g2", "g3"):
        await new_game(sqlite, game_id)
    wrapper = fail_commits(sqlite)
    wrapper.failing = {2}  # g0's COMMIT succeeds, the next batch's fails
    wrapper.held = True
    try:
        first = sqlite.commit(make_commit("g0", 0))
        assert await asyncio.to_thread(wrapper.committing.wait, BOUND)  # g0's COMMIT started
        jobs: list[asyncio.Future[AuditRow]] = [
            *(sqlite.commit(make_commit(g, 0)) for g in ("g1", "g2", "g3")),
            asyncio.ensure_future(sqlite.record_refusal("g1", audit_entry(0, "refused", "X"))),
        ]
        await asyncio.sleep(0)  # the refusal's task has run up to its write, which is queued
        assert wrapper.commits == 1 and len(sqlite._pending) == 4, "the next batch's four jobs"
    finally:
        wrapper.held = False
        wrapper.release.set()
    results = await asyncio.gather(*jobs, return_exceptions=True)
    assert isinstance(await first, AuditRow)  # its COMMIT had started before the failure
    assert wrapper.commits_failed == 1, "the four jobs were one batch"
    assert all(isinstance(r, StoreError) for r in results), results
    for game_id in ("g1", "g2", "g3"):
        assert (await sqlite.get_game(game_id)).version == 0
        assert await sqlite.stored_response(game_id, f"{game_id}-r1") is None
        assert await audit_of(sqlite, game_id) == []
        await sqlite.commit(make_commit(game_id, 0))  # nothing of the failed batch is left
        assert (await sqlite.verify_audit_log(game_id)).intact


async def test_close_while_a_failing_batch_is_pending_settles_every_job(
    sqlite: SqliteStore,
) -> None:
    """Pinned: close() with queued jobs whose COMMIT then fails returns, every job settled."""
    for i in range(5):
        await new_game(sqlite, f"g{i}")
    wrapper = fail_commits(sqlite)
    wrapper.failing = {2}
    tasks = [asyncio.ensure_future(sqlite.commit(make_commit("g0", 0)))]
    await asyncio.sleep(0)  # g0's COMMIT is in flight: the other four queue for the next one
    tasks += [asyncio.ensure_future(sqlite.commit(make_commit(f"g{i}", 0))) for i in range(1, 5)]
    await asyncio.sleep(0)
    await asyncio.wait_for(sqlite.close(), BOUND)
    assert all(t.done() for t in tasks)
    assert isinstance(tasks[0].result(), AuditRow)
    assert all(isinstance(t.exception(), StoreError) for t in tasks[1:])


async def test_a_failing_commit_leaves_the_live_game_untouched(sqlite: SqliteStore) -> None:
    """Pinned: the manager's in-memory game does not move when the store's COMMIT fails, and the
    retry with the same request_id is then applied exactly once."""
    games = GameManager(sqlite)
    created = await new_managed_game(games)
    live = games.games[created.game_id]
    seq_before, audit_before = live.last_seq, len(await audit_of(sqlite, created.game_id))
    wrapper = fail_commits(sqlite)
    wrapper.always = True
    with pytest.raises(StoreError):
        await games.submit(created.game_id, created.seat_tokens[1], BID, 0, "bid-1")
    assert (live.state.version, live.last_seq) == (0, seq_before)
    assert not live.lock.locked()
    wrapper.always = False
    first = await games.submit(created.game_id, created.seat_tokens[1], BID, 0, "bid-1")
    again = await games.submit(created.game_id, created.seat_tokens[1], BID, 0, "bid-1")
    assert first == again and first.version == 1
    audit = await audit_of(sqlite, created.game_id)
    assert [r.outcome for r in audit[audit_before:]] == ["accepted"]
    assert (await sqlite.verify_audit_log(created.game_id)).intact


# -- SQLite group commit: refusals that depend on writes the batch rolled back -------------------


async def test_a_conflict_caused_by_a_rolled_back_job_is_not_reported(
    sqlite: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was a bug. One batch: A commits g1 at version 0, B commits g1 at version 0 too (refused
    "alone": VersionConflict(1), seen through A's uncommitted write), C fails after writing, so
    the whole batch rolls back. B keeps its VersionConflict(current=1) although version 1 never
    became durable: the game is at 0, and B's caller is told another submission won."""
    for game_id in ("g0", "g1", "g2"):
        await new_game(sqlite, game_id)
    fail_audit_inserts(monkeypatch, "g2")
    first = asyncio.ensure_future(sqlite.commit(make_commit("g0", 0)))
    await asyncio.sleep(0)  # g0 is committing: A, B and C form the next batch
    a, b, c = await asyncio.gather(
        sqlite.commit(make_commit("g1", 0, "a")),
        sqlite.commit(make_commit("g1", 0, "b")),
        sqlite.commit(make_commit("g2", 0)),
        return_exceptions=True,
    )
    assert isinstance(await first, AuditRow)
    assert isinstance(a, StoreError) and isinstance(c, StoreError)
    stored = (await sqlite.get_game("g1")).version
    assert stored == 0 and await sqlite.stored_response("g1", "a") is None
    # B's refusal saw A's write, which rolled back: B fails with the batch (safe to retry).
    assert type(b) is StoreError, b


async def test_a_conflict_in_a_batch_whose_commit_fails_is_not_reported(
    sqlite: SqliteStore,
) -> None:
    """Was a bug (same cause, COMMIT failure): two submissions of g1 at version 0 share a batch, the
    COMMIT fails. Neither is durable, yet the second is refused with VersionConflict(1)."""
    await new_game(sqlite, "g0")
    await new_game(sqlite, "g1")
    wrapper = fail_commits(sqlite)
    wrapper.failing = {2}
    first = asyncio.ensure_future(sqlite.commit(make_commit("g0", 0)))
    await asyncio.sleep(0)
    a, b = await asyncio.gather(
        sqlite.commit(make_commit("g1", 0, "a")),
        sqlite.commit(make_commit("g1", 0, "b")),
        return_exceptions=True,
    )
    assert isinstance(await first, AuditRow) and wrapper.commits_failed == 1
    assert isinstance(a, StoreError)
    stored = (await sqlite.get_game("g1")).version
    assert stored == 0
    assert type(b) is StoreError, b


# -- the service: idempotent retries and the audit log of conflicts -------------------------------


async def test_a_retry_racing_its_original_on_another_replica_gets_the_stored_response(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was a bug. Two replicas (shared store). The client's first attempt of request "bid-1" is
    slow; it retries on replica 2, which catches up (still version 0) and commits. Meanwhile the
    first attempt lands on replica 1. Replica 2's commit meets VersionConflict and answers
    ABORTED, although its request *was* applied: the client is told its bid failed. The retry of
    an applied request_id must get the stored response (issue 4)."""
    path = tmp_path / "replicas.db"
    one, two = SqliteStore(path), SqliteStore(path, serving=False)  # two replicas' stores
    await one.open()
    await two.open()
    try:
        first = GameManager(one, shared_store=True)
        second = GameManager(two, shared_store=True)
        created = await new_managed_game(first)
        token = created.seat_tokens[1]
        await second.load(created.game_id)
        original: Callable[[Commit], Awaitable[AuditRow]] = two.commit
        entered, landed = asyncio.Event(), asyncio.Event()

        async def held_commit(commit: Commit) -> AuditRow:
            entered.set()
            await asyncio.wait_for(landed.wait(), BOUND)
            return await original(commit)

        monkeypatch.setattr(two, "commit", held_commit)
        retry = asyncio.create_task(second.submit(created.game_id, token, BID, 0, "bid-1"))
        await asyncio.wait_for(entered.wait(), BOUND)  # replica 2 checked version 0
        applied = await first.submit(created.game_id, token, BID, 0, "bid-1")
        landed.set()
        try:
            answer = await retry
        except ServiceError as error:
            pytest.fail(f"the retry of an applied request was refused: {error.code} {error}")
        assert answer == applied
    finally:
        await one.close()
        await two.close()


async def test_a_submission_refused_by_the_stores_version_check_is_audited(
    sqlite: SqliteStore,
) -> None:
    """Was a bug. The audit log holds every request, accepted or refused (base.py, games.py, issue
    4). A replica whose in-memory game is stale submits at version 0 after another replica made
    version 1: the store's version check refuses it (ABORTED, STALE_VERSION), but no audit entry
    recorded the refused request: the conflict path (now ``_conflicted``) never called
    ``record_refusal``."""
    games = GameManager(sqlite)
    created = await new_managed_game(games)
    other = GameManager(sqlite)  # a second replica that caught up just before the other commit
    await other.load(created.game_id)
    await games.submit(created.game_id, created.seat_tokens[1], BID, 0, "bid-1")
    with pytest.raises(ServiceError) as caught:
        await other.submit(created.game_id, created.seat_tokens[1], PASS, 0, "pass-late")
    # Issue 4: the loser gets ABORTED with the *current* version (1, made by the other replica),
    # not the stale one it sent, so a client can refresh and resend.
    assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.ABORTED, "STALE_VERSION")
    assert caught.value.metadata == {"version": "1"}
    audit = await audit_of(sqlite, created.game_id)
    assert [(r.request_id, r.outcome) for r in audit if r.request_id == "pass-late"] == [
        ("pass-late", "refused")
    ], [(r.request_id, r.outcome, r.code) for r in audit]


async def test_a_request_id_reused_at_the_current_version_is_not_a_phantom_conflict(
    sqlite: SqliteStore,
) -> None:
    """Was a bug. Seat 1 used "x" for its bid (version 0 -> 1). Later, at its turn again, it sends a
    different action with "x" at the *current* version. The store's unique key refuses it as a
    VersionConflict carrying the unchanged version, so the client gets ABORTED "the game moved
    to version N" with metadata version N == the expected_version it sent: a client that
    refreshes and resends on ABORTED loops forever, and the refusal is not audited."""
    games = GameManager(sqlite)
    created = await new_managed_game(games)
    gid, tokens = created.game_id, created.seat_tokens
    await games.submit(gid, tokens[1], BID, 0, "x")
    for version, seat in ((1, 2), (2, 3), (3, 0)):
        await games.submit(gid, tokens[seat], PASS, version, f"p{version}")
    version, legal = await games.legal(gid, tokens[1])
    assert version == 4 and legal, "seat 1 (the bidder) acts again at version 4"
    action = next(e for e in legal if "from" not in e and e["type"] != "concede")
    with pytest.raises(ServiceError) as caught:
        await games.submit(gid, tokens[1], action, 4, "x")
    assert (caught.value.code, caught.value.reason, caught.value.field) == (
        grpc.StatusCode.ALREADY_EXISTS,
        "REQUEST_ID_REUSED",
        "request_id",
    )
    assert caught.value.metadata == {"version": "4"}  # ErrorInfo carries the current version
    assert (await games.submit(gid, tokens[1], action, 4, "y")).version == 5  # a new id works
    audit = await audit_of(sqlite, gid)
    assert [r.request_id for r in audit].count("x") == 2, "both uses of x are in the audit log"


async def test_a_request_id_reused_at_the_current_version_for_an_illegal_action(
    sqlite: SqliteStore,
) -> None:
    """Pinned (README "Errors"): the rules are checked before the id's reuse, so an action they
    refuse is answered with its A.5 code; nothing changes either way, and the refusal is
    audited under the id."""
    games = GameManager(sqlite)
    created = await new_managed_game(games)
    gid, tokens = created.game_id, created.seat_tokens
    await games.submit(gid, tokens[1], BID, 0, "x")
    with pytest.raises(ServiceError) as caught:
        await games.submit(gid, tokens[1], PASS, 1, "x")  # seat 2 is to act
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "NOT_YOUR_TURN",
    )
    assert (await games.legal(gid, tokens[1]))[0] == 1  # nothing changed
    audit = await audit_of(sqlite, gid)
    assert [(r.request_id, r.outcome, r.code) for r in audit] == [
        ("x", "accepted", ""),
        ("x", "refused", "NOT_YOUR_TURN"),
    ]


async def test_a_request_id_reused_for_another_action_is_not_answered_as_accepted(
    sqlite: SqliteStore,
) -> None:
    """Was a bug (idempotency keyed on the id alone). Seat 1 bid with "x" (version 0 -> 1). It then
    sends a *pass* with the same id at version 0: the manager finds a stored response for "x"
    and answers success (version 1, the bid's events) for an action that was never applied nor
    checked. A reused id with a different action should be refused, not acknowledged."""
    games = GameManager(sqlite)
    created = await new_managed_game(games)
    gid, token = created.game_id, created.seat_tokens[1]
    bid = await games.submit(gid, token, BID, 0, "x")
    with pytest.raises(ServiceError) as caught:
        await games.submit(gid, token, PASS, 0, "x")
    assert caught.value.reason == "REQUEST_ID_REUSED"
    assert await games.submit(gid, token, BID, 0, "x") == bid  # the true retry still works
    audit = await audit_of(sqlite, gid)
    assert [(r.request_id, r.outcome, r.code) for r in audit] == [
        ("x", "accepted", ""),
        ("x", "refused", "REQUEST_ID_REUSED"),
    ]


async def test_a_retry_reads_the_log_from_its_own_action_on(
    sqlite: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry is checked against the action logged at its version, read from the row that
    must hold it (a row's seq is at least its version + 1), not from the log's first row: a
    long game's log is thousands of rows, and this read came with every retry."""
    games = GameManager(sqlite)
    created = await new_managed_game(games)
    gid, tokens = created.game_id, created.seat_tokens
    answers = [await games.submit(gid, tokens[1], BID, 0, "b")]
    for version, seat in ((1, 2), (2, 3), (3, 0)):
        answers.append(await games.submit(gid, tokens[seat], PASS, version, f"p{version}"))
    reads: list[int] = []
    load_log = sqlite.load_log

    async def counted(game_id: str, after_seq: int = 0) -> list[LogRow]:
        reads.append(after_seq)
        return await load_log(game_id, after_seq)

    monkeypatch.setattr(sqlite, "load_log", counted)
    assert await games.submit(gid, tokens[2], PASS, 1, "p1") == answers[1]  # a retry
    assert await games.submit(gid, tokens[0], PASS, 3, "p3") == answers[3]
    with pytest.raises(ServiceError) as caught:  # the id of a pass, with a bid: not a retry
        await games.submit(gid, tokens[3], {"type": "bid", "amount": 260}, 2, "p2")
    assert caught.value.reason == "REQUEST_ID_REUSED"
    assert reads == [2, 4, 3]


async def test_a_retry_after_a_restart_returns_the_stored_response(tmp_path: Path) -> None:
    """Pinned: the store is closed and reopened, a fresh manager rebuilds the game from its log;
    a retry at the stale version gets the stored response and is not applied again."""
    path = tmp_path / "restart.db"
    store = SqliteStore(path)
    await store.open()
    games = GameManager(store)
    created = await new_managed_game(games)
    first = await games.submit(created.game_id, created.seat_tokens[1], BID, 0, "bid-1")
    await games.submit(created.game_id, created.seat_tokens[2], PASS, 1, "pass-2")
    await store.close()

    reopened = SqliteStore(path)
    await reopened.open()
    try:
        restarted = GameManager(reopened)
        again = await restarted.submit(created.game_id, created.seat_tokens[1], BID, 0, "bid-1")
        assert again == first
        live = restarted.games[created.game_id]
        assert live.state.version == 2
        assert (await reopened.get_game(created.game_id)).version == 2
        accepted = [r for r in await audit_of(reopened, created.game_id) if r.outcome == "accepted"]
        assert [r.request_id for r in accepted] == ["bid-1", "pass-2"]
    finally:
        await reopened.close()


async def test_concurrent_refusals_outside_the_lock_keep_the_chain(sqlite: SqliteStore) -> None:
    """Pinned: refusals recorded outside the game's lock (a bad token) interleave with accepted
    actions in the same batches; the chain stays continuous and verifies."""
    games = GameManager(sqlite)
    created = await new_managed_game(games)
    gid, tokens = created.game_id, created.seat_tokens
    calls: list[Awaitable[Any]] = [games.submit(gid, tokens[1], BID, 0, "bid-1")]
    calls += [games.submit(gid, "not-a-token", PASS, 0, f"bad-{i}") for i in range(10)]
    calls += [games.submit(gid, tokens[2], PASS, 1, "pass-2")]
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert sum(isinstance(r, ServiceError) for r in results) >= 10
    audit = await audit_of(sqlite, gid)
    assert len([r for r in audit if r.outcome == "refused"]) >= 10
    assert_chain(audit)
    assert (await sqlite.verify_audit_log(gid)).intact
    assert sqlite.batches < sqlite.batched_jobs  # some of them did share a batch


# -- both backends ----------------------------------------------------------------------------


async def test_a_game_the_store_records_as_ended_is_over_in_memory_too(
    backend: Backend,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was a bug. The store refuses a commit to a game it records as ended (GameOver) though the
    log does not end it (a stored game changed by hand, or an engine bug). The manager answered
    GAME_OVER but its copy went on believing the game was not over: legal actions offered, the
    view in progress, watchers waiting, the game held among those in progress, and every later
    action checked and sent to the store, to be refused there again. Now the copy is over, as
    the store says: the next action is refused GAME_OVER (audited) without a commit, a watcher's
    stream ends, and a manager that rebuilds the game from the store (a restart) finds it over."""
    store = backend.make()
    await store.open()
    try:
        games = GameManager(store)
        created = await new_managed_game(games)
        gid, tokens = created.game_id, created.seat_tokens
        await games.submit(gid, tokens[1], BID, 0, "bid-1")
        live = games.games[gid]
        watcher = asyncio.create_task(drain(games.watch(gid, created.spectator_token, 0)))
        while live.changed is None:  # the watcher has every event and waits for more
            await asyncio.wait_for(asyncio.sleep(0.01), BOUND)
        await backend.sql("UPDATE games SET over = ? WHERE game_id = ?", (True, gid))
        commits = 0
        commit = store.commit

        def counted(sent: Commit) -> Awaitable[AuditRow]:
            nonlocal commits
            commits += 1
            return commit(sent)

        monkeypatch.setattr(store, "commit", counted)
        for request_id in ("pass-2", "pass-2-again"):
            with pytest.raises(ServiceError) as caught:
                await games.submit(gid, tokens[2], PASS, 1, request_id)
            refusal = (caught.value.code, caught.value.reason, caught.value.metadata)
            assert refusal == (grpc.StatusCode.FAILED_PRECONDITION, "GAME_OVER", {"version": "1"})
        assert commits == 1  # the second was refused here, as the engine refuses after the end
        assert await games.legal(gid, tokens[2]) == (1, [])
        view = games.view_of(*await games.get(gid, created.adjudicator_token))
        assert (view["over"], view["version"]) == (True, 1)
        assert gid not in games.games and gid in games.finished
        await asyncio.wait_for(watcher, BOUND)  # the stream ended with the game

        restarted = GameManager(store)  # the game rebuilt from the store
        assert await restarted.legal(gid, tokens[2]) == (1, [])
        with pytest.raises(ServiceError) as caught:
            await restarted.submit(gid, tokens[2], PASS, 1, "after-restart")
        assert caught.value.reason == "GAME_OVER" and commits == 1
        assert gid in restarted.finished
        assert [(r.request_id, r.outcome, r.code) for r in await audit_of(store, gid)] == [
            ("bid-1", "accepted", ""),
            ("pass-2", "refused", "GAME_OVER"),
            ("pass-2-again", "refused", "GAME_OVER"),
            ("after-restart", "refused", "GAME_OVER"),
        ]
        assert (await store.verify_audit_log(gid)).intact
    finally:
        await store.close()


async def test_verify_audit_log_is_intact_while_writes_go_on(backend: Backend) -> None:  # noqa: F811
    """Pinned: verification reads one snapshot (head and rows together), so it never reports a
    tampered log while commits and refusals of the game are being written."""
    store = backend.make()
    await store.open()
    try:
        await new_game(store)
        done = False
        verdicts: list[bool] = []

        async def verify() -> None:
            while not done:
                verdicts.append((await store.verify_audit_log("g1")).intact)

        checker = asyncio.create_task(verify())
        writes = []
        for expected in range(40):
            writes.append(store.commit(make_commit("g1", expected)))
            writes.append(store.record_refusal("g1", audit_entry(expected, "refused", "X")))
        await asyncio.gather(*writes)
        done = True
        await checker
        assert verdicts and all(verdicts)
        assert (await store.verify_audit_log("g1")).entries == 80
    finally:
        await store.close()


async def test_postgres_refusals_and_commits_from_two_stores_keep_one_chain(
    postgres_url: str,  # noqa: F811
) -> None:
    """Pinned: refusals and commits of one game from two PostgreSQL stores at once: the row
    lock orders them, every audit seq is used once and the chain verifies."""
    with postgres_schema("test_review") as schema:
        one = PostgresStore(POSTGRES_URL, schema=schema, max_size=3)
        two = PostgresStore(POSTGRES_URL, schema=schema, max_size=3)
        await one.open()
        await two.open()
        try:
            await new_game(one)

            async def commit_where_possible(store: PostgresStore, tag: str) -> int:
                won = 0
                for _ in range(15):
                    version = (await store.get_game("g1")).version
                    try:
                        await store.commit(make_commit("g1", version, f"{tag}-{version}"))
                        won += 1
                    except VersionConflict:
                        pass
                    await store.record_refusal("g1", audit_entry(version, "refused", tag))
                return won

            wins = await asyncio.gather(
                commit_where_possible(one, "one"), commit_where_possible(two, "two")
            )
            audit = await audit_of(one, "g1")
            assert len(audit) == sum(wins) + 30
            assert_chain(audit)
            assert (await two.verify_audit_log("g1")).intact
            assert (await one.get_game("g1")).version == sum(wins)
        finally:
            await one.close()
            await two.close()


async def test_postgres_a_one_connection_pool_serves_many_games_at_once(
    postgres_url: str,  # noqa: F811
) -> None:
    """Pinned: no write or read holds a pooled connection while waiting for another, so a pool
    of one connection serves concurrent commits, refusals and reads of many games."""
    with postgres_schema("test_review") as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema, min_size=1, max_size=1)
        await store.open()
        try:
            await asyncio.gather(*(new_game(store, f"g{i}") for i in range(8)))

            async def play(game_id: str) -> None:
                for expected in range(3):
                    await store.commit(make_commit(game_id, expected))
                    await store.record_refusal(game_id, audit_entry(expected, "refused", "X"))
                    assert (await store.verify_audit_log(game_id)).intact

            await asyncio.wait_for(asyncio.gather(*(play(f"g{i}") for i in range(8))), 60)
            for i in range(8):
                assert (await store.get_game(f"g{i}")).version == 3
        finally:
            await store.close()
