"""The game store, written against ``referee.store.base.GameStore``.

Every test runs once per backend in ``BACKENDS``; a backend makes stores that share one database
(so a test can reopen it) and can run raw SQL on it to tamper with rows (``?`` placeholders).
``sqlite`` uses a file under the test's temporary directory; ``postgres`` a schema of its own in
the database at ``PINOCHLE_REFEREE_TEST_POSTGRES`` (default: database ``test`` on
127.0.0.1:5432), created for the test and dropped after it. Where no PostgreSQL is reachable the
``postgres`` cases are skipped with one reason line saying why. The last tests are backend
specific: SQLite's pragmas and a crash of the writing process; PostgreSQL's migrations, row
locks and change notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import re
import secrets
import sqlite3
import subprocess
import sys
import textwrap
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import sql as pgsql

from referee.store import postgres as postgres_store
from referee.store import sqlite as sqlite_store
from referee.store.base import (
    ALL_GAMES,
    GENESIS_HASH,
    AuditRow,
    AuditVerification,
    Commit,
    GameExists,
    GameOver,
    GamePosition,
    GameRecord,
    GameStore,
    GameSummary,
    LogRow,
    SchemaChanged,
    StoreError,
    TooManyGames,
    UnknownGame,
    UnreadableAuditEntry,
    VersionConflict,
    canonical_json,
    compact_json,
)
from referee.store.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION
from referee.store.postgres import PostgresStore, describe
from referee.store.sqlite import SCHEMA_VERSION, SqliteStore
from referee.store.sqlite import downgrade as sqlite_downgrade

REPO = Path(__file__).resolve().parent.parent
POSTGRES_URL = os.environ.get(
    "PINOCHLE_REFEREE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


@dataclass(frozen=True)
class Backend:
    name: str
    make: Callable[[], GameStore]  # a new, unopened store on this test's database
    sql: Callable[[str, Sequence[object]], Awaitable[None]]  # run one statement and commit
    # Another store on the same database, to open while one from ``make`` is open: another
    # replica (PostgreSQL), or one standing for another process on the file, which a SQLite
    # store's serving lock would otherwise refuse (SQLite).
    beside: Callable[[], GameStore]


async def sqlite_sql(path: Path, statement: str, params: Sequence[object]) -> None:
    """Run one statement on the SQLite database at ``path`` and commit, as another process
    would (a connection of its own, off the event loop)."""

    def run() -> None:
        conn = sqlite3.connect(path)
        try:
            with conn:
                conn.execute(statement, tuple(params))
        finally:
            conn.close()

    await asyncio.to_thread(run)


@contextlib.contextmanager
def sqlite_backend(tmp_path: Path) -> Iterator[Backend]:
    path = tmp_path / "db" / "referee.sqlite3"  # the directory does not exist yet
    yield Backend(
        "sqlite",
        lambda: SqliteStore(path),
        functools.partial(sqlite_sql, path),
        lambda: SqliteStore(path, serving=False),
    )


# -- PostgreSQL -------------------------------------------------------------------------------


@functools.cache
def postgres_unreachable() -> str | None:
    """Why the test database cannot be used (one line), or None when it can."""
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        detail = " ".join(str(error).split())
        return f"PostgreSQL not reachable at {describe(POSTGRES_URL)}: {detail}"
    return None


def postgres_marks() -> list[pytest.MarkDecorator]:
    """Marks for every PostgreSQL case: one ``skip`` with the same reason when unreachable, which
    pytest's ``-rs`` summary folds into one line per file."""
    reason = postgres_unreachable()
    return [] if reason is None else [pytest.mark.skip(reason=reason)]


@pytest.fixture(params=[pytest.param("postgres", marks=postgres_marks())])
def postgres_url() -> str:
    """The test database's URL, for the PostgreSQL-only tests (skipped like the others)."""
    return POSTGRES_URL


@contextlib.contextmanager
def postgres_schema(prefix: str = "test_store", *, create: bool = True) -> Iterator[str]:
    """A fresh schema name (the schema created unless ``create`` is false), dropped afterwards
    with everything in it."""
    schema = f"{prefix}_{secrets.token_hex(6)}"
    if create:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
    try:
        yield schema
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            # Bounded: a test that failed may leave a session holding a lock in the schema
            # (an open() still running on the blocked event loop); the drop then fails
            # loudly instead of waiting for it for ever.
            conn.execute("SET lock_timeout = '30s'")
            conn.execute(
                pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema))
            )


async def postgres_sql(schema: str, statement: str, params: Sequence[object] = ()) -> None:
    """Run one statement (``?`` placeholders) on ``schema`` and commit."""
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL) as conn:
        await conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        await conn.execute(statement.replace("?", "%s"), tuple(params))


@contextlib.contextmanager
def postgres_backend(tmp_path: Path) -> Iterator[Backend]:
    with postgres_schema() as schema:

        def make() -> GameStore:
            return PostgresStore(POSTGRES_URL, schema=schema)

        yield Backend("postgres", make, functools.partial(postgres_sql, schema), make)


BACKENDS: dict[str, Callable[[Path], contextlib.AbstractContextManager[Backend]]] = {
    "sqlite": sqlite_backend,
    "postgres": postgres_backend,
}


@pytest.fixture(
    params=[
        pytest.param(name, marks=postgres_marks() if name == "postgres" else [])
        for name in sorted(BACKENDS)
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with BACKENDS[request.param](tmp_path) as made:
        yield made


@pytest_asyncio.fixture
async def store(backend: Backend) -> AsyncIterator[GameStore]:
    opened = backend.make()
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


# -- builders -------------------------------------------------------------------------------


def game_record(game_id: str = "g1", **changes: object) -> GameRecord:
    record = GameRecord(
        game_id=game_id,
        variant="partnership",
        options={"target": 1500, "dix": True},
        first_dealer=2,
        deal_source={"mode": "seed", "seed": 42},
        seat_token_hashes=("h0", "h1", "h2", "h3"),
        spectator_token_hash="hs",
        adjudicator_token_hash="ha",
        players=("Ann", "Bo", "Cy", "Di"),
        created_at=1_700_000_000.25,
    )
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


def deal_row(seq: int = 1, version: int = 0) -> LogRow:
    return LogRow(
        seq=seq,
        version=version,
        kind="deal",
        seat=None,
        payload={"deal": [["AS", "10H"], ["KD"], ["QC"], ["JS"]], "salt": "s"},
        events=[{"type": "dealt", "dealer": 2}],
    )


def action_row(seq: int, version: int, seat: int = 1) -> LogRow:
    return LogRow(
        seq=seq,
        version=version,
        kind="action",
        seat=seat,
        payload={"seat": seat, "type": "bid", "amount": 250 + 10 * version},
        events=[{"type": "bid", "seat": seat, "amount": 250 + 10 * version}],
    )


def audit_entry(version: int, outcome: str = "accepted", code: str = "") -> AuditRow:
    return AuditRow(
        seq=0,
        time=1_700_000_100.5 + version,
        role="seat",
        seat=1,
        rpc="SubmitAction",
        action={"seat": 1, "type": "bid", "amount": 250 + 10 * version},
        public_action={"seat": 1, "type": "bid"},
        outcome=outcome,
        code=code,
        request_id=f"r{version}",
        version=version,
        previous_hash="",
    )


def make_commit(
    game_id: str,
    expected: int,
    request_id: str | None = None,
    *,
    over: bool = False,
    with_deal: bool = False,
    seq: int = 0,
) -> Commit:
    version = expected + 1
    rows = [action_row(seq, version)]
    if with_deal:
        rows.append(deal_row(seq + 1 if seq else 0, version))
    return Commit(
        game_id=game_id,
        expected_version=expected,
        rows=rows,
        audit=audit_entry(version),
        request_id=f"{game_id}-r{version}" if request_id is None else request_id,
        response=f"response {game_id} {version}".encode(),
        over=over,
    )


async def new_game(store: GameStore, game_id: str = "g1", **changes: object) -> GameRecord:
    """Create a game; returns its record as ``get_game`` reads it back (the store keeps its
    last activity: its creation, until an action is accepted)."""
    record = game_record(game_id, **changes)
    await store.create_game(record, [deal_row()])
    return dataclasses.replace(record, last_active_at=record.created_at)


async def commit_many(store: GameStore, game_id: str, count: int, start: int = 0) -> None:
    for expected in range(start, start + count):
        await store.commit(make_commit(game_id, expected))


def assert_chain(rows: Sequence[AuditRow]) -> None:
    previous = GENESIS_HASH
    for seq, row in enumerate(rows, start=1):
        assert row.seq == seq
        assert row.previous_hash == previous
        assert row.hash == row.computed_hash()
        previous = row.hash


# -- games ----------------------------------------------------------------------------------


async def test_create_and_get_game(store: GameStore) -> None:
    record = await new_game(store)
    assert await store.get_game("g1") == record
    log = await store.load_log("g1")
    assert log == [deal_row()]
    assert await store.audit_log("g1") == []


async def test_duplicate_game_is_refused_and_changes_nothing(store: GameStore) -> None:
    record = await new_game(store)
    with pytest.raises(GameExists):
        await store.create_game(game_record("g1", variant="auction"), [deal_row(), deal_row(2)])
    assert await store.get_game("g1") == record
    assert len(await store.load_log("g1")) == 1


@pytest.mark.parametrize("unknown", ["nope", "no\x00pe"])
async def test_unknown_game(store: GameStore, unknown: str) -> None:
    """The same answer from both stores, for an id with U+0000 too (PostgreSQL text cannot
    hold it: such a query failed as a StoreError there, and no stored id can have one), and
    for reads after a seq too (PostgreSQL's load_log answered [] there)."""
    await new_game(store, "known")
    with pytest.raises(UnknownGame):
        await store.get_game(unknown)
    with pytest.raises(UnknownGame):
        await store.load_log(unknown)
    with pytest.raises(UnknownGame):
        await store.load_log(unknown, after_seq=3)
    with pytest.raises(UnknownGame):
        await store.commit(make_commit(unknown, 0, request_id="r1"))
    with pytest.raises(UnknownGame):
        await store.record_refusal(unknown, audit_entry(0, "refused", "NOT_YOUR_TURN"))
    with pytest.raises(UnknownGame):
        await store.audit_log(unknown)
    with pytest.raises(UnknownGame):
        await store.audit_log(unknown, after_seq=3)
    with pytest.raises(UnknownGame):
        await store.verify_audit_log(unknown)
    assert await store.stored_response(unknown, "r1") is None
    assert await store.count_active_games(excluding=[unknown]) == 1
    assert await store.list_games() == ["known"]


async def test_list_and_count_games(store: GameStore) -> None:
    assert await store.list_games() == []
    assert await store.count_active_games() == 0
    for game_id in ("c", "a", "b"):
        await new_game(store, game_id)
    await new_game(store, "d", over=True)
    assert sorted(await store.list_games()) == ["a", "b", "c", "d"]
    assert sorted(await store.list_games(active_only=True)) == ["a", "b", "c"]
    assert await store.count_active_games() == 3

    await store.commit(make_commit("b", 0, over=True))
    assert (await store.get_game("b")).over
    assert sorted(await store.list_games(active_only=True)) == ["a", "c"]
    assert await store.count_active_games() == 2


async def _all_summaries(
    store: GameStore, page: int, **filters: Any
) -> tuple[list[GameSummary], int]:
    """Every summary the filters select, read ``page`` at a time as ListGames pages them
    (each page after the last one's position); and how many reads it took."""
    found: list[GameSummary] = []
    after: GamePosition | None = None
    reads = 0
    while True:
        reads += 1
        batch = await store.list_game_summaries(after=after, limit=page, **filters)
        found += batch
        if len(batch) < page:
            return found, reads
        after = batch[-1].position


async def test_game_summaries_in_creation_order_with_their_public_fields(store: GameStore) -> None:
    """Oldest first, ids in byte order within one creation time (the same on both stores,
    whatever PostgreSQL's collation: "B" < "a" < "é"); a summary holds the public fields
    only, its version and last activity as the game moves on."""
    await new_game(store, "late", created_at=3_000.0, players=())
    for game_id in ("a", "é", "B"):
        await new_game(store, game_id, created_at=2_000.0)
    await new_game(store, "first", created_at=1_000.5, variant="cutthroat", players=("X", "Y", "Z"))
    await commit_many(store, "a", 2)  # accepted at 1_700_000_101.5 and 1_700_000_102.5
    await store.commit(make_commit("late", 0, over=True))
    summaries = await store.list_game_summaries()
    assert summaries == [
        GameSummary("first", "cutthroat", 0, False, 1_000.5, 1_000.5, ("X", "Y", "Z")),
        GameSummary("B", "partnership", 0, False, 2_000.0, 2_000.0, ("Ann", "Bo", "Cy", "Di")),
        GameSummary(
            "a", "partnership", 2, False, 2_000.0, 1_700_000_102.5, ("Ann", "Bo", "Cy", "Di")
        ),
        GameSummary("é", "partnership", 0, False, 2_000.0, 2_000.0, ("Ann", "Bo", "Cy", "Di")),
        GameSummary("late", "partnership", 1, True, 3_000.0, 1_700_000_101.5, ()),
    ]
    assert summaries[2].position == (2_000.0, "a")
    assert await store.list_game_summaries(limit=2) == summaries[:2]
    assert await store.list_game_summaries(after=(2_000.0, "B"), limit=2) == summaries[2:4]
    assert await store.list_game_summaries(after=(2_000.0, "é")) == summaries[4:]
    assert await store.list_game_summaries(after=(1_999.9, "zzz")) == summaries[1:]
    assert await store.list_game_summaries(after=(3_000.0, "late")) == []
    assert await store.list_game_summaries(limit=0) == []


async def test_game_summaries_filter_by_state_and_variant(store: GameStore) -> None:
    for index, variant in enumerate(("partnership", "cutthroat", "partnership", "cutthroat")):
        await new_game(store, f"g{index}", variant=variant, created_at=1_000.0 + index)
    await store.commit(make_commit("g2", 0, over=True))
    await store.commit(make_commit("g3", 0, over=True))

    async def ids(**filters: Any) -> list[str]:
        return [summary.game_id for summary in await store.list_game_summaries(**filters)]

    assert await ids() == ["g0", "g1", "g2", "g3"]
    assert await ids(over=False) == ["g0", "g1"]
    assert await ids(over=True) == ["g2", "g3"]
    assert await ids(variant="cutthroat") == ["g1", "g3"]
    assert await ids(variant="cutthroat", over=False) == ["g1"]
    assert await ids(variant="cutthroat", over=True, after=(1_001.0, "g1")) == ["g3"]
    assert await ids(variant="two-handed") == []


async def test_game_summary_pages_never_repeat_or_skip_a_game(store: GameStore) -> None:
    """Games created (some at the same time, some earlier than the page reached) and ended
    (before or after their page) between pages: every game that existed when the listing
    began is listed exactly once,
    games created after the page reached are listed too, and a game created at a time
    before the page reached is not (it was not there when that page was read)."""
    for index in range(7):
        await new_game(store, f"old{index}", created_at=1_000.0 + index // 2)
    found: list[GameSummary] = []
    after: GamePosition | None = None
    for page in range(6):
        batch = await store.list_game_summaries(after=after, limit=3)
        found += batch
        if not batch:
            break
        after = batch[-1].position
        await new_game(store, f"new{page}", created_at=2_000.0 + page)  # after every page
        await new_game(store, f"back{page}", created_at=1_000.0)  # before the page reached
        await store.commit(make_commit(f"old{6 - page}", 0, over=True))
    # Pages of three: old0-2, old3-5, old6 new0 new1, then one new game a page (each page
    # creates the one the next reads).
    assert [summary.game_id for summary in found] == [
        *(f"old{index}" for index in range(7)),
        *(f"new{page}" for page in range(5)),
    ]
    # old6 ended before its page was read (after the first); the others after theirs.
    assert [summary.over for summary in found[:7]] == [False] * 6 + [True]
    everything, reads = await _all_summaries(store, 4)
    assert len(everything) == len(await store.list_games()) and reads == len(everything) // 4 + 1


async def test_count_active_games_since_the_last_accepted_action(store: GameStore) -> None:
    """A game's activity is its creation, then each accepted action; refusals do not count,
    and a finished game is never active."""
    await new_game(store, "quiet", created_at=1_000.0)
    await new_game(store, "played", created_at=1_000.0)
    await new_game(store, "ended", created_at=1_000.0)
    assert await store.count_active_games(active_since=1_000.0) == 3
    assert await store.count_active_games(active_since=1_000.1) == 0
    await store.commit(make_commit("played", 0))  # accepted at 1_700_000_101.5
    await store.commit(make_commit("ended", 0, over=True))
    await store.record_refusal("quiet", audit_entry(5, "refused", "NOT_YOUR_TURN"))
    assert await store.count_active_games() == 2
    assert await store.count_active_games(active_since=1_000.1) == 1
    assert await store.count_active_games(active_since=1_700_000_101.5) == 1
    assert await store.count_active_games(active_since=1_700_000_101.6) == 0
    await store.commit(make_commit("played", 1))  # at 1_700_000_102.5
    assert await store.count_active_games(active_since=1_700_000_101.6) == 1


async def test_count_active_games_leaves_out_the_games_named(store: GameStore) -> None:
    """The game manager's recount counts the games it is writing itself, so the count leaves
    them out (an unknown id, or a finished game, changes nothing)."""
    for game_id in ("a", "b", "c"):
        await new_game(store, game_id, created_at=1_000.0)
    await new_game(store, "d", over=True)
    assert await store.count_active_games(excluding=["b"]) == 2
    assert await store.count_active_games(excluding={"a", "c", "d", "unknown"}) == 1
    assert await store.count_active_games(active_since=1_000.0, excluding=("a",)) == 2
    assert await store.count_active_games(active_since=1_000.1, excluding=("a",)) == 0
    assert await store.count_active_games(excluding=()) == 3


async def test_create_game_refuses_a_game_past_the_cap_and_stores_nothing(
    store: GameStore,
) -> None:
    """With ``max_active`` the creation counts the active games as ``count_active_games``
    does (ended games never, idle ones not with ``active_since``) and is refused at the cap."""
    await new_game(store, "idle", created_at=1_000.0)
    await new_game(store, "ended", over=True)
    await store.create_game(game_record("a"), [deal_row()], max_active=2, active_since=1_000.1)
    with pytest.raises(TooManyGames) as caught:  # "idle" counts without a threshold
        await store.create_game(game_record("b"), [deal_row()], max_active=2)
    assert caught.value.limit == 2
    with pytest.raises(UnknownGame):
        await store.get_game("b")
    await store.create_game(game_record("b"), [deal_row()], max_active=2, active_since=1_000.1)
    with pytest.raises(TooManyGames):
        await store.create_game(game_record("c"), [deal_row()], max_active=2, active_since=1_000.1)
    assert sorted(await store.list_games()) == ["a", "b", "ended", "idle"]
    assert await store.load_log("b") == [deal_row()]


async def test_creations_at_once_never_pass_the_cap(store: GameStore) -> None:
    """Ten creations at once with room for three: exactly three are stored, the others refused
    alone. SQLite runs the ten as jobs of one transaction, each counting the games the jobs
    before it inserted; PostgreSQL counts each after the creations committed before it."""
    batches = store.batches if isinstance(store, SqliteStore) else 0
    results = await asyncio.gather(
        *(
            store.create_game(game_record(f"g{index}"), [deal_row()], max_active=3)
            for index in range(10)
        ),
        return_exceptions=True,
    )
    assert sum(result is None for result in results) == 3, results
    assert all(isinstance(result, TooManyGames) for result in results if result is not None)
    assert await store.count_active_games() == 3
    if isinstance(store, SqliteStore):
        assert store.batches == batches + 1  # one transaction, its refusals failing alone


# -- commits --------------------------------------------------------------------------------


async def test_commit_appends_log_and_chains_audit(store: GameStore) -> None:
    await new_game(store)
    first = await store.commit(make_commit("g1", 0))
    assert (first.seq, first.previous_hash) == (1, GENESIS_HASH)
    assert first.hash == first.computed_hash()
    second = await store.commit(make_commit("g1", 1, with_deal=True))
    assert (second.seq, second.previous_hash) == (2, first.hash)
    third = await store.commit(make_commit("g1", 2, seq=5))  # a caller's seq, when given, agrees

    log = await store.load_log("g1")
    assert [row.seq for row in log] == [1, 2, 3, 4, 5]
    assert [(row.kind, row.version) for row in log] == [
        ("deal", 0),
        ("action", 1),
        ("action", 2),
        ("deal", 2),
        ("action", 3),
    ]
    assert log[1] == action_row(2, 1)
    assert (await store.get_game("g1")).version == 3

    audit = await store.audit_log("g1")
    assert audit == [first, second, third]  # returned exactly as stored
    assert_chain(audit)
    assert audit[0].action == {"seat": 1, "type": "bid", "amount": 260}


async def test_load_log_and_audit_log_after_seq(store: GameStore) -> None:
    await new_game(store)
    await commit_many(store, "g1", 4)
    assert [row.seq for row in await store.load_log("g1", after_seq=3)] == [4, 5]
    assert await store.load_log("g1", after_seq=5) == []
    await store.create_game(game_record("empty"), [])  # a known game with no rows at all
    assert await store.load_log("empty") == []
    assert await store.load_log("empty", after_seq=2) == []
    assert [row.seq for row in await store.audit_log("g1", after_seq=1)] == [2, 3, 4]
    assert [row.seq for row in await store.audit_log("g1", after_seq=1, limit=2)] == [2, 3]
    assert await store.audit_log("g1", after_seq=4) == []


async def test_stale_version_conflicts_and_writes_nothing(store: GameStore) -> None:
    await new_game(store)
    await commit_many(store, "g1", 2)
    before = (await store.load_log("g1"), await store.audit_log("g1"))

    for stale in (0, 1, 3):
        with pytest.raises(VersionConflict) as caught:
            await store.commit(make_commit("g1", stale, request_id=f"stale{stale}"))
        assert caught.value.current == 2
        assert await store.stored_response("g1", f"stale{stale}") is None

    assert (await store.load_log("g1"), await store.audit_log("g1")) == before
    assert (await store.get_game("g1")).version == 2
    assert (await store.verify_audit_log("g1")).intact


async def test_a_finished_game_takes_no_more_commits(store: GameStore) -> None:
    """The commit that ends a game is accepted; a commit after it is refused (GameOver, nothing
    written), though the engine refuses such an action first. The ending commit sent again
    still conflicts on its version (its retry finds the stored response), and refusals are
    still audited."""

    async def stored() -> tuple[GameRecord, list[LogRow], list[AuditRow]]:
        return await store.get_game("g1"), await store.load_log("g1"), await store.audit_log("g1")

    await new_game(store)
    await commit_many(store, "g1", 2)
    await store.commit(make_commit("g1", 2, over=True))
    ended = await stored()
    assert (ended[0].version, ended[0].over) == (3, True)

    with pytest.raises(GameOver) as caught:
        await store.commit(make_commit("g1", 3, request_id="after"))
    assert caught.value.version == 3
    with pytest.raises(VersionConflict) as conflict:
        await store.commit(make_commit("g1", 2, over=True))
    assert conflict.value.current == 3
    assert await store.stored_response("g1", "after") is None
    assert await stored() == ended
    await store.record_refusal("g1", audit_entry(3, "refused", "GAME_OVER"))
    assert (await store.verify_audit_log("g1")).intact

    await new_game(store, "born-over", over=True)  # stored as ended when created
    with pytest.raises(GameOver):
        await store.commit(make_commit("born-over", 0))
    assert (await store.get_game("born-over")).version == 0


async def test_concurrent_commits_at_one_version_exactly_one_wins(store: GameStore) -> None:
    await new_game(store)
    for expected in range(5):
        results = await asyncio.gather(
            *(store.commit(make_commit("g1", expected, f"race{expected}-{i}")) for i in range(3)),
            return_exceptions=True,
        )
        winners = [r for r in results if isinstance(r, AuditRow)]
        losers = [r for r in results if isinstance(r, VersionConflict)]
        assert len(winners) == 1
        assert len(losers) == 2
        assert all(conflict.current == expected + 1 for conflict in losers)
    assert (await store.get_game("g1")).version == 5
    assert len(await store.load_log("g1")) == 6
    assert_chain(await store.audit_log("g1"))


async def test_retried_request_id_is_applied_once(store: GameStore) -> None:
    await new_game(store)
    commit = make_commit("g1", 0, "req-1")
    await store.commit(commit)
    assert await store.stored_response("g1", "req-1") == commit.response
    assert await store.stored_response("g1", "req-2") is None

    # The service returns the stored response; if a retry ever reaches commit, it conflicts.
    retry = make_commit("g1", 1, "req-1")._replace(response=b"other")
    with pytest.raises(VersionConflict) as caught:
        await store.commit(retry)
    assert caught.value.current == 1
    assert await store.stored_response("g1", "req-1") == commit.response
    assert (await store.get_game("g1")).version == 1
    assert len(await store.load_log("g1")) == 2
    assert len(await store.audit_log("g1")) == 1

    # Request ids are per game: the same id in another game is neither a conflict nor an answer
    # (issue 4: a retried request_id returns *its* stored response; another game's would hand
    # its caller that game's view).
    await new_game(store, "g2")
    assert await store.stored_response("g2", "req-1") is None
    second = make_commit("g2", 0, "req-1")
    await store.commit(second)
    assert await store.stored_response("g2", "req-1") == second.response
    assert await store.stored_response("g1", "req-1") == commit.response


async def test_commit_rejects_malformed_input(store: GameStore) -> None:
    await new_game(store)
    pending = store.commit(make_commit("g1", 0, request_id=""))  # refused when awaited, not now
    with pytest.raises(ValueError, match="request_id"):
        await pending
    with pytest.raises(ValueError, match="version"):
        await store.commit(make_commit("g1", 0)._replace(rows=[action_row(0, 5)]))
    with pytest.raises(StoreError, match="seq"):
        await store.commit(make_commit("g1", 0, seq=7))  # the log continues at 2
    # A commit's audit entry is its action row's, accepted (VerifyAuditLog compares the two),
    # and a refusal's entry is refused.
    entry = audit_entry(1)
    for wrong in (
        entry._replace(outcome="refused", code="NOT_YOUR_TURN"),
        entry._replace(version=2),
        entry._replace(seat=2),
        entry._replace(action={"seat": 1, "type": "bid", "amount": 300}),
    ):
        with pytest.raises(ValueError, match="audit entry"):
            await store.commit(make_commit("g1", 0)._replace(audit=wrong))
    with pytest.raises(ValueError, match="action's log row"):
        await store.commit(make_commit("g1", 0)._replace(rows=[deal_row(0, 1)]))
    with pytest.raises(ValueError, match="refused"):
        await store.record_refusal("g1", audit_entry(0))
    assert (await store.get_game("g1")).version == 0
    assert await store.audit_log("g1") == []


async def test_a_time_of_minus_zero_is_stored_as_zero(store: GameStore) -> None:
    """-0.0 and 0.0 are one time but not one hash ("-0.0" and "0.0" in the audit row's JSON):
    SQLite gave -0.0 back as 0.0, so the row it had hashed with -0.0 failed verification,
    while PostgreSQL kept -0.0. Both stores now keep every time of -0.0 as 0.0."""
    await new_game(store)
    accepted = await store.commit(
        make_commit("g1", 0)._replace(audit=audit_entry(1)._replace(time=-0.0))
    )
    refused = await store.record_refusal(
        "g1", audit_entry(1, "refused", "NOT_YOUR_TURN")._replace(time=-0.0)
    )
    assert await store.verify_audit_log("g1") == AuditVerification(True, 2)
    stored = await store.audit_log("g1")
    assert stored == [accepted, refused]
    assert [repr(row.time) for row in (accepted, refused, *stored)] == ["0.0"] * 4
    assert repr((await store.get_game("g1")).last_active_at) == "0.0"
    await new_game(store, "g2", created_at=-0.0)
    record = await store.get_game("g2")
    assert (repr(record.created_at), repr(record.last_active_at)) == ("0.0", "0.0")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
async def test_a_time_that_is_no_number_is_refused_alone_before_the_batch(
    store: GameStore, bad: float
) -> None:
    """Was: SQLite wrote a commit's request row, then its NaN time (stored as NULL) broke the
    NOT NULL of games.last_active_at, an error after a write, which failed every job of the
    group-commit batch: other games' accepted actions answered StoreError. A time that is not a
    finite number is now refused (ValueError naming it) before the job is queued, so it fails
    alone and writes nothing, and the other games of the batch commit. The clock is the only
    source of times (no client sends one), so this guards the store's boundary."""
    for game_id in ("g0", "g1", "g2", "g3"):
        await new_game(store, game_id)
    first = asyncio.ensure_future(store.commit(make_commit("g0", 0)))
    await asyncio.sleep(0)  # g0's transaction is committing: the next jobs form one batch
    results = await asyncio.gather(
        store.commit(make_commit("g1", 0)),
        store.commit(make_commit("g2", 0)._replace(audit=audit_entry(1)._replace(time=bad))),
        store.record_refusal("g3", audit_entry(0, "refused", "NOT_YOUR_TURN")._replace(time=bad)),
        store.commit(make_commit("g3", 0)),
        return_exceptions=True,
    )
    assert isinstance(await first, AuditRow)
    assert isinstance(results[0], AuditRow) and isinstance(results[3], AuditRow), results
    for refused in results[1:3]:
        assert isinstance(refused, ValueError) and "time" in str(refused), results
    versions = [(await store.get_game(g)).version for g in ("g0", "g1", "g2", "g3")]
    assert versions == [1, 1, 0, 1]
    assert await store.stored_response("g2", "g2-r1") is None
    assert await store.audit_log("g2") == []
    assert [row.outcome for row in await store.audit_log("g3")] == ["accepted"]
    for game_id in ("g1", "g3"):
        assert await store.verify_audit_log(game_id) == AuditVerification(True, 1)
    with pytest.raises(ValueError, match="time"):
        await new_game(store, "g4", created_at=bad)
    with pytest.raises(UnknownGame):
        await store.get_game("g4")


async def test_record_refusal_extends_the_chain(store: GameStore) -> None:
    await new_game(store)
    accepted = await store.commit(make_commit("g1", 0))
    refused = await store.record_refusal("g1", audit_entry(1, "refused", "OUT_OF_TURN"))
    assert (refused.seq, refused.previous_hash) == (2, accepted.hash)
    assert refused.hash == refused.computed_hash()
    after = await store.commit(make_commit("g1", 1))
    assert (after.seq, after.previous_hash) == (3, refused.hash)
    assert (await store.get_game("g1")).version == 2  # a refusal does not move the version

    audit = await store.audit_log("g1")
    assert [row.outcome for row in audit] == ["accepted", "refused", "accepted"]
    assert audit[1] == refused
    assert_chain(audit)
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.entries) == (True, 3)


async def test_interleaved_refusals_and_commits_keep_audit_seqs_sequential(
    store: GameStore,
) -> None:
    await new_game(store)
    tasks = []
    for expected in range(10):
        tasks.append(store.commit(make_commit("g1", expected)))
        tasks.append(store.record_refusal("g1", audit_entry(expected, "refused", "X")))
    # Submitted in order on one loop: commit k sees version k because commit k-1 precedes it.
    await asyncio.gather(*tasks)
    audit = await store.audit_log("g1")
    assert len(audit) == 20
    assert_chain(audit)
    assert (await store.verify_audit_log("g1")).intact


# -- the audit log's integrity ---------------------------------------------------------------


async def test_verify_detects_a_tampered_row(store: GameStore, backend: Backend) -> None:
    await new_game(store)
    await new_game(store, "other")
    await commit_many(store, "g1", 3)
    await store.record_refusal("g1", audit_entry(3, "refused", "OUT_OF_TURN"))
    await commit_many(store, "other", 2)
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (True, 4, 0)

    await backend.sql("UPDATE audit SET code = 'X' WHERE game_id = ? AND seq = ?", ("g1", 2))
    verdict = await store.verify_audit_log("g1")
    assert not verdict.intact
    assert verdict.first_bad_seq == 2
    assert verdict.detail
    assert (await store.verify_audit_log("other")).intact  # other games are unaffected


@pytest.mark.parametrize("rows", [3, 5], ids=["the last row", "a middle row"])
async def test_verify_detects_a_rewritten_link(
    store: GameStore, backend: Backend, rows: int
) -> None:
    """Row 3 rewritten consistently (its own hash recomputed) from a forged predecessor is
    caught at that row by its link: as the last row, and in the middle of the log, where every
    later row still matches its own hash and the game's recorded head is untouched."""
    await new_game(store)
    await commit_many(store, "g1", rows)
    row = (await store.audit_log("g1"))[2]
    forged = row._replace(previous_hash="f" * 64)
    forged = forged._replace(hash=forged.computed_hash())
    await backend.sql(
        "UPDATE audit SET previous_hash = ?, hash = ? WHERE game_id = ? AND seq = 3",
        (forged.previous_hash, forged.hash, "g1"),
    )
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.first_bad_seq) == (False, 3)


# Every column the hash covers, with a value of its type that differs from audit_entry's: a
# change to any of them must be caught (issue 4: VerifyAuditLog reports whether the chain is
# intact; a field left out of AuditRow.content could be rewritten unnoticed).
TAMPERED_COLUMNS = {
    "time": 1_600_000_000.25,
    "role": "adjudicator",
    "seat": 2,
    "rpc": "GetGame",
    "action": '{"seat":1,"type":"pass"}',
    "public_action": '{"type":"pass"}',
    "outcome": "refused",
    "code": "NOT_YOUR_TURN",
    "request_id": "forged",
    "version": 9,
}


@pytest.mark.parametrize("column", sorted(TAMPERED_COLUMNS))
async def test_verify_detects_a_change_to_any_hashed_column(
    store: GameStore, backend: Backend, column: str
) -> None:
    """Pinned: each column of an audit row is covered by its hash, not just ``code``."""
    await new_game(store)
    await commit_many(store, "g1", 4)
    await backend.sql(
        f"UPDATE audit SET {column} = ? WHERE game_id = ? AND seq = 2",
        (TAMPERED_COLUMNS[column], "g1"),
    )
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.first_bad_seq) == (False, 2), column


async def test_verify_detects_a_consistently_rewritten_last_row(
    store: GameStore, backend: Backend
) -> None:
    """Pinned: the last row rewritten with its link intact and its hash recomputed matches
    everything in the audit table; only the head the game records (issue 4: a tampered row is
    detected) shows it was changed."""
    await new_game(store)
    await commit_many(store, "g1", 3)
    row = (await store.audit_log("g1"))[-1]
    forged = row._replace(code="NOT_YOUR_TURN", outcome="refused")
    forged = forged._replace(hash=forged.computed_hash())
    await backend.sql(
        "UPDATE audit SET code = ?, outcome = ?, hash = ? WHERE game_id = ? AND seq = 3",
        (forged.code, forged.outcome, forged.hash, "g1"),
    )
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 3, 3)


async def test_verify_detects_deleted_rows(store: GameStore, backend: Backend) -> None:
    await new_game(store)
    await commit_many(store, "g1", 5)
    await backend.sql("DELETE FROM audit WHERE game_id = ? AND seq = 3", ("g1",))
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.first_bad_seq) == (False, 3)

    await new_game(store, "g2")
    await commit_many(store, "g2", 5)
    await backend.sql("DELETE FROM audit WHERE game_id = ? AND seq >= 4", ("g2",))
    verdict = await store.verify_audit_log("g2")  # a truncated tail, every link intact
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 3, 4)


async def test_verify_counts_every_entry_of_a_broken_log(
    store: GameStore, backend: Backend
) -> None:
    """``entries`` is how many entries the log holds, a broken one too: it was how many were
    read up to the first bad one (2 for a log of 5 with its second entry changed)."""
    await new_game(store)
    await commit_many(store, "g1", 5)
    await backend.sql("UPDATE audit SET code = 'X' WHERE game_id = ? AND seq = 2", ("g1",))
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 5, 2)
    await backend.sql("DELETE FROM audit WHERE game_id = ? AND seq = 4", ("g1",))
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 4, 2)


async def test_verify_detects_reordered_and_inserted_rows(
    store: GameStore, backend: Backend
) -> None:
    """Two rows swapped (each keeping its own hash), and a forged row put in the middle with
    the later rows renumbered, are caught at the first position that changed, by its link."""
    await new_game(store)
    await commit_many(store, "g1", 5)
    await backend.sql(
        "UPDATE audit SET seq = seq + 100 WHERE game_id = ? AND seq IN (2, 3)", ("g1",)
    )
    await backend.sql("UPDATE audit SET seq = 105 - seq WHERE game_id = ? AND seq > 100", ("g1",))
    verdict = await store.verify_audit_log("g1")  # 2 and 3 are now 3 and 2
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 5, 2)

    await new_game(store, "g2")
    await commit_many(store, "g2", 5)
    rows = await store.audit_log("g2")
    await backend.sql("UPDATE audit SET seq = seq + 100 WHERE game_id = ? AND seq >= 3", ("g2",))
    await backend.sql("UPDATE audit SET seq = seq - 99 WHERE game_id = ? AND seq > 100", ("g2",))
    forged = rows[2]._replace(seq=3, previous_hash=rows[1].hash, code="forged")
    forged = forged._replace(hash=forged.computed_hash())
    await backend.sql(
        "INSERT INTO audit (game_id, seq, time, role, seat, rpc, action, public_action, outcome,"
        " code, request_id, version, previous_hash, hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "g2",
            forged.seq,
            forged.time,
            forged.role,
            forged.seat,
            forged.rpc,
            json.dumps(forged.action),
            json.dumps(forged.public_action),
            forged.outcome,
            forged.code,
            forged.request_id,
            forged.version,
            forged.previous_hash,
            forged.hash,
        ),
    )
    verdict = await store.verify_audit_log("g2")  # the forged row links; the next one does not
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 6, 4)


# Column values an attacker with write access can store that no audit row can be read from:
# JSON text with a number no double holds (valid JSON, so PostgreSQL's json type takes it) on
# both stores; on SQLite, whose columns take any type, text that is not JSON and blobs too.
# What PostgreSQL does with each (its columns are typed): "unreadable" as SQLite, "refused" by
# the UPDATE (that tampering cannot happen there), or "changed": bytes stored in a text column
# become their escaped text, a readable row whose hash no longer matches.
UNREADABLE_COLUMNS: list[tuple[str, object, str]] = [
    ("action", '{"type":"bid","amount":1e999}', "unreadable"),
    ("public_action", "[1e999]", "unreadable"),
    ("action", "not json", "refused"),
    ("seat", b"\x01", "refused"),
    ("rpc", b"SubmitAction", "changed"),
    ("time", b"\x00", "refused"),
]


@pytest.mark.parametrize(
    ("column", "value", "on_postgres"),
    UNREADABLE_COLUMNS,
    ids=[f"{column}={value!r}" for column, value, _ in UNREADABLE_COLUMNS],
)
async def test_verify_reports_a_row_that_cannot_be_read(
    store: GameStore, backend: Backend, column: str, value: object, on_postgres: str
) -> None:
    """A tampered row that cannot even be decoded is reported as that bad entry (VerifyAuditLog
    raised on it: an internal error, with nothing said about which entry), and so is it by the
    check ``backup`` makes of a copy (SQLite)."""
    await new_game(store)
    await commit_many(store, "g1", 4)
    cast = "::json" if backend.name == "postgres" and column.endswith("action") else ""
    tamper = backend.sql(
        f"UPDATE audit SET {column} = ?{cast} WHERE game_id = ? AND seq = 2", (value, "g1")
    )
    expected = "unreadable" if backend.name == "sqlite" else on_postgres
    if expected == "refused":
        with pytest.raises(psycopg.Error):
            await tamper
        assert (await store.verify_audit_log("g1")).intact
        return
    await tamper
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 4, 2)
    if expected == "unreadable":
        assert verdict.detail.startswith("entry 2 cannot be read: "), verdict.detail


@pytest.mark.parametrize(
    ("table", "column"), [("audit", "code"), ("audit", "action"), ("log", "payload")]
)
async def test_text_that_is_not_utf8_is_an_unreadable_entry_on_sqlite(
    tmp_path: Path, table: str, column: str
) -> None:
    """SQLite keeps whatever bytes a TEXT value is given (``CAST(x'ff' AS TEXT)``), which
    sqlite3 raised on at the fetch: a page reaching the row, VerifyAuditLog and ``backup``'s
    check failed as the store failing (StoreError: UNAVAILABLE, retry; verify-audit exit 2;
    "cannot be checked"), the error quoting the bytes, instead of naming the damaged entry as
    for any other unreadable row. (PostgreSQL refuses such text on the way in.)"""
    with sqlite_backend(tmp_path) as backend:
        store = backend.make()
        await store.open()
        try:
            await new_game(store)
            await commit_many(store, "g1", 4)
            await backend.sql(
                f"UPDATE {table} SET {column} = CAST(? AS TEXT) || {column}"
                " WHERE game_id = ? AND version = 2",  # entry 2, the log's action 2 (row 3)
                (b"\xffsecret", "g1"),
            )
            if table == "audit":
                with pytest.raises(UnreadableAuditEntry) as caught:
                    await store.audit_log("g1")
                assert caught.value.seq == 2
                assert "secret" not in str(caught.value)
                assert [row.seq for row in await store.audit_log("g1", 2)] == [3, 4]
            verdict = await store.verify_audit_log("g1")
            assert (verdict.intact, verdict.first_bad_seq) == (False, 2), verdict
            assert "secret" not in verdict.detail
        finally:
            await store.close()
    report = sqlite_store._check_copy(tmp_path / "db" / "referee.sqlite3")
    assert [game for game, _ in report.broken_audit_logs] == ["g1"], report


@pytest.mark.parametrize(
    ("table", "column", "read"),
    [
        ("log", "payload", lambda store: store.load_log("g1")),
        ("games", "variant", lambda store: store.get_game("g1")),
    ],
)
async def test_other_reads_of_text_that_is_not_utf8_name_the_column_not_the_text(
    tmp_path: Path, table: str, column: str, read: Callable[[GameStore], Awaitable[object]]
) -> None:
    """The game's own reads (its log, its row) of text that is not UTF-8 are refused as the
    store failing, as before, but naming the column alone: sqlite3's error quoted the text,
    and a log row holds a deal (every seat's hand) or an action, so the StoreError, its
    chained cause and the UNAVAILABLE's logged traceback showed them."""
    with sqlite_backend(tmp_path) as backend:
        store = backend.make()
        await store.open()
        try:
            await new_game(store)
            await commit_many(store, "g1", 2)
            await backend.sql(
                f"UPDATE {table} SET {column} = CAST(? AS TEXT) || {column} WHERE game_id = ?",
                (b"\xffsecret", "g1"),
            )
            with pytest.raises(StoreError) as caught:
                await read(store)
            assert column in str(caught.value) and "not UTF-8" in str(caught.value)
            shown = "".join(traceback.format_exception(caught.value))
            assert "secret" not in shown, shown
        finally:
            await store.close()


async def test_verify_cannot_see_a_rewrite_that_moves_the_head(
    store: GameStore, backend: Backend
) -> None:
    """Pinned, as the README says ("What a check finds, and what it cannot"): the chain's head
    is in the same database, so a truncation with the head moved back and the game's log cut
    to match, a refused entry forged at the end with the head moved on, a log rewritten from its
    first entry with every hash recomputed and the head moved, and a change to the events of
    the game's own log all verify as intact. Only a hash kept outside shows them."""
    await new_game(store)
    await commit_many(store, "g1", 5)
    rows = await store.audit_log("g1")
    await backend.sql("DELETE FROM audit WHERE game_id = ? AND seq > 3", ("g1",))
    await backend.sql(
        "UPDATE games SET audit_seq = 3, audit_head = ? WHERE game_id = ?", (rows[2].hash, "g1")
    )
    verdict = await store.verify_audit_log("g1")  # the game's log still holds versions 4 and 5
    assert (verdict.intact, verdict.first_bad_seq) == (False, 4), verdict
    await backend.sql("DELETE FROM log WHERE game_id = ? AND version > 3", ("g1",))
    assert await store.verify_audit_log("g1") == AuditVerification(True, 3)
    assert (await store.audit_log("g1"))[-1].hash != rows[-1].hash  # what an outside copy shows
    forged = rows[3]._replace(outcome="refused", code="forged", version=3)
    forged = forged._replace(hash=forged.computed_hash())
    await backend.sql(
        "INSERT INTO audit (game_id, seq, time, role, seat, rpc, action, public_action, outcome,"
        " code, request_id, version, previous_hash, hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "g1",
            *forged[:5],
            json.dumps(forged.action),
            json.dumps(forged.public_action),
            *forged[7:],
        ),
    )
    assert not (await store.verify_audit_log("g1")).intact  # appended, the head not moved
    await backend.sql(
        "UPDATE games SET audit_seq = 4, audit_head = ? WHERE game_id = ?", (forged.hash, "g1")
    )
    assert await store.verify_audit_log("g1") == AuditVerification(True, 4)

    await new_game(store, "g2")
    await commit_many(store, "g2", 3)
    previous = GENESIS_HASH
    for row in await store.audit_log("g2"):
        forged = row._replace(code="forged", previous_hash=previous)
        forged = forged._replace(hash=forged.computed_hash())
        await backend.sql(
            "UPDATE audit SET code = ?, previous_hash = ?, hash = ? WHERE game_id = ? AND seq = ?",
            (forged.code, forged.previous_hash, forged.hash, "g2", row.seq),
        )
        previous = forged.hash
    await backend.sql("UPDATE games SET audit_head = ? WHERE game_id = ?", (previous, "g2"))
    assert await store.verify_audit_log("g2") == AuditVerification(True, 3)

    await backend.sql("UPDATE log SET events = ? WHERE game_id = ? AND seq = 2", ("[]", "g2"))
    assert (await store.load_log("g2"))[1].events == []
    assert await store.verify_audit_log("g2") == AuditVerification(True, 3)


async def _refuse_and_rehash(
    store: GameStore, backend: Backend, game_id: str, seq: int, code: str
) -> None:
    """Entry ``seq`` made a refusal with ``code``, and the chain rehashed from it on with the
    head moved: a rewrite the chain itself cannot see."""
    previous = GENESIS_HASH
    for row in await store.audit_log(game_id):
        if row.seq < seq:
            previous = row.hash
            continue
        forged = row._replace(previous_hash=previous)
        if row.seq == seq:
            forged = forged._replace(outcome="refused", code=code)
        forged = forged._replace(hash=forged.computed_hash())
        await backend.sql(
            "UPDATE audit SET outcome = ?, code = ?, previous_hash = ?, hash = ?"
            " WHERE game_id = ? AND seq = ?",
            (forged.outcome, forged.code, forged.previous_hash, forged.hash, game_id, row.seq),
        )
        previous = forged.hash
    await backend.sql("UPDATE games SET audit_head = ? WHERE game_id = ?", (previous, game_id))


async def test_verify_compares_the_accepted_entries_with_the_games_log(
    store: GameStore, backend: Backend
) -> None:
    """The game's log (the actions a restart replays) against the audit log: a change to either
    that the chain does not show (the log is not hashed; a rewrite of the chain with the head
    moved) is found at the accepted entry where the two part, and ``detail`` names seqs,
    versions and seats, never the action (a seat may call VerifyAuditLog, and an action may
    hold its cards). Was: every one of these verified as intact."""
    # Log rows: the deal at seq 1, then action rows 2 to 6 at versions 1 to 5; audit entries
    # 1 to 5, accepted at versions 1 to 5, and a refusal (entry 6) that has no log row.
    changes: list[tuple[str, Sequence[object], int, str]] = [
        (
            "UPDATE log SET payload = ? WHERE game_id = ? AND seq = 3",
            ('{"seat":1,"type":"bid","amount":990}',),
            2,
            "log row 3 holds another action",
        ),
        ("UPDATE log SET seat = 2 WHERE game_id = ? AND seq = 4", (), 3, "by seat 2"),
        ("UPDATE log SET version = 9 WHERE game_id = ? AND seq = 5", (), 4, "has version 9"),
        ("UPDATE log SET kind = 'deal' WHERE game_id = ? AND seq = 3", (), 2, "has version 3"),
        ("DELETE FROM log WHERE game_id = ? AND seq = 6", (), 5, "holds 4 actions"),
        (
            "INSERT INTO log (game_id, seq, version, kind, seat, payload, events)"
            " SELECT game_id, 7, 6, kind, seat, payload, events FROM log"
            " WHERE game_id = ? AND seq = 6",
            (),
            7,
            "at version 6 (log row 7)",
        ),
    ]
    for number, (statement, params, first_bad, said) in enumerate(changes):
        game_id = f"g{number}"
        await new_game(store, game_id)
        await commit_many(store, game_id, 5)
        await store.record_refusal(game_id, audit_entry(5, "refused", "NOT_YOUR_TURN"))
        assert await store.verify_audit_log(game_id) == AuditVerification(True, 6)
        await backend.sql(statement, (*params, game_id))
        verdict = await store.verify_audit_log(game_id)
        assert (verdict.intact, verdict.entries, verdict.first_bad_seq) == (False, 6, first_bad), (
            statement,
            verdict,
        )
        assert said in verdict.detail and "990" not in verdict.detail, verdict.detail
        assert '"type"' not in verdict.detail and "bid" not in verdict.detail, verdict.detail

    # An accepted entry made refused, the chain rehashed and the head moved: intact as a chain,
    # but the log's action at version 3 has no entry, so entry 4 meets it.
    await new_game(store, "rewritten")
    await commit_many(store, "rewritten", 5)
    await _refuse_and_rehash(store, backend, "rewritten", 3, "NOT_YOUR_TURN")
    verdict = await store.verify_audit_log("rewritten")
    assert (verdict.intact, verdict.first_bad_seq) == (False, 4), verdict
    assert "log row 4" in verdict.detail, verdict.detail


async def test_verify_empty_log_is_intact(store: GameStore) -> None:
    await new_game(store)
    verdict = await store.verify_audit_log("g1")
    assert (verdict.intact, verdict.entries) == (True, 0)


# -- durability, group commit, life cycle ------------------------------------------------------


async def test_many_concurrent_games_are_all_durable(backend: Backend) -> None:
    games, per_game = 64, 5
    first = backend.make()
    await first.open()
    await asyncio.gather(*(new_game(first, f"g{i:02}") for i in range(games)))
    acknowledged = await asyncio.gather(
        *(commit_many(first, f"g{i:02}", per_game) for i in range(games))
    )
    assert len(acknowledged) == games
    if isinstance(first, SqliteStore):  # the writer did batch commits of different games
        assert first.batches < first.batched_jobs

    # A second store on the same database sees every acknowledged commit, before and after
    # the first one closes.
    second = backend.beside()
    await second.open()
    try:
        for check in (second, first):
            assert len(await check.list_games()) == games
            for i in range(games):
                game_id = f"g{i:02}"
                assert (await check.get_game(game_id)).version == per_game
                assert [row.seq for row in await check.load_log(game_id)] == list(
                    range(1, per_game + 2)
                )
                assert (await check.verify_audit_log(game_id)).entries == per_game
        await first.close()
        for i in range(games):
            assert (await second.verify_audit_log(f"g{i:02}")).intact
    finally:
        await first.close()
        await second.close()


async def test_a_conflict_in_a_batch_rolls_back_only_itself(store: GameStore) -> None:
    for i in range(8):
        await new_game(store, f"g{i}")
    results = await asyncio.gather(
        *(store.commit(make_commit(f"g{i}", 0)) for i in range(8)),
        store.commit(make_commit("g3", 7, "stale")),
        store.commit(make_commit("missing", 0)),
        *(store.commit(make_commit(f"g{i}", 1)) for i in range(8)),
        return_exceptions=True,
    )
    assert isinstance(results[8], VersionConflict)
    assert isinstance(results[9], UnknownGame)
    assert all(isinstance(r, AuditRow) for r in results[:8] + results[10:])
    for i in range(8):
        assert (await store.get_game(f"g{i}")).version == 2
        assert len(await store.load_log(f"g{i}")) == 3
    assert await store.stored_response("g3", "stale") is None


async def test_reopen_rebuilds_everything(backend: Backend) -> None:
    store = backend.make()
    await store.open()
    record = await new_game(store)
    await commit_many(store, "g1", 3)
    await store.record_refusal("g1", audit_entry(3, "refused", "X"))
    log, audit = await store.load_log("g1"), await store.audit_log("g1")
    await store.close()

    for version in (3, 4):  # opening an existing database again is harmless
        reopened = backend.make()
        await reopened.open()
        try:
            # last active: the last accepted action's audit time (audit_entry's clock)
            assert await reopened.get_game("g1") == dataclasses.replace(
                record, version=version, last_active_at=audit_entry(version).time
            )
            assert await reopened.load_log("g1") == log
            assert await reopened.audit_log("g1") == audit
            assert (await reopened.verify_audit_log("g1")).intact
            assert await reopened.stored_response("g1", "g1-r2") == b"response g1 2"
            after = await reopened.commit(make_commit("g1", version))
            assert (after.seq, after.previous_hash) == (len(audit) + 1, audit[-1].hash)
            audit.append(after)
            log = await reopened.load_log("g1")
        finally:
            await reopened.close()


async def test_close_finishes_queued_writes(backend: Backend) -> None:
    store = backend.make()
    await store.open()
    await asyncio.gather(*(new_game(store, f"g{i}") for i in range(20)))
    tasks = [asyncio.ensure_future(store.commit(make_commit(f"g{i}", 0))) for i in range(20)]
    await asyncio.sleep(0)  # every task has queued its write
    await store.close()
    for task in tasks:
        assert isinstance(await task, AuditRow)
    with pytest.raises(StoreError):
        await store.commit(make_commit("g0", 1))
    await store.close()  # closing twice is harmless

    reopened = backend.make()
    await reopened.open()
    try:
        assert await reopened.count_active_games() == 20
        for i in range(20):
            assert (await reopened.get_game(f"g{i}")).version == 1
    finally:
        await reopened.close()


async def test_finished_games_forget_their_responses_oldest_first(store: GameStore) -> None:
    """forget_responses: the stored responses of games that ended before the time given, at
    most ``limit`` games a call, the longest ended first; games in progress, or ended later,
    keep theirs; the logs and audit logs stay whole. (A commit's audit time, the game's last
    activity, is 1_700_000_100.5 + its version.)"""
    for game_id in ("older", "old", "later", "playing"):
        await new_game(store, game_id)
    await store.commit(make_commit("older", 0, over=True))  # ended at ...101.5
    await commit_many(store, "old", 1)
    await store.commit(make_commit("old", 1, over=True))  # ended at ...102.5
    await commit_many(store, "later", 4)
    await store.commit(make_commit("later", 4, over=True))  # ended at ...105.5
    await commit_many(store, "playing", 2)  # in progress, last active at ...102.5
    cutoff = 1_700_000_103.0
    assert await store.forget_responses(cutoff, limit=1) == 1
    assert await store.stored_response("older", "older-r1") is None
    assert await store.stored_response("old", "old-r1") == b"response old 1"
    assert await store.forget_responses(cutoff) == 1
    assert [await store.stored_response("old", f"old-r{v}") for v in (1, 2)] == [None, None]
    assert await store.forget_responses(cutoff) == 0
    assert await store.stored_response("later", "later-r5") == b"response later 5"
    assert len(await store.load_log("old")) == 3
    assert (await store.verify_audit_log("old")).intact
    assert await store.forget_responses(1_700_000_200.0) == 1  # "later"; never "playing"
    assert await store.stored_response("playing", "playing-r2") == b"response playing 2"
    assert await store.forget_responses(1_700_000_200.0) == 0


async def test_ping_reads_the_database_and_fails_once_it_cannot(backend: Backend) -> None:
    """Readiness (server.StoreHealth) asks ``ping``: quiet while the store can be read,
    StoreError once it cannot (here: closed)."""
    store = backend.make()
    await store.open()
    await store.ping()  # an empty database
    await new_game(store)
    await store.ping()
    await store.close()
    with pytest.raises(StoreError):
        await store.ping()


async def test_a_cancelled_caller_does_not_withdraw_its_write(store: GameStore) -> None:
    await new_game(store)
    task = asyncio.ensure_future(store.commit(make_commit("g1", 0, "cancelled")))
    await asyncio.sleep(0)  # queued
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await store.commit(make_commit("g1", 1))  # ordered after the cancelled one
    assert await store.stored_response("g1", "cancelled") == b"response g1 1"
    assert (await store.get_game("g1")).version == 2


async def test_two_stores_open_at_once(backend: Backend) -> None:
    one, two = backend.make(), backend.beside()
    await one.open()
    await two.open()
    try:
        await new_game(one)
        results = await asyncio.gather(
            one.commit(make_commit("g1", 0, "a")),
            two.commit(make_commit("g1", 0, "b")),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in results) == ["AuditRow", "VersionConflict"]
        assert (await two.get_game("g1")).version == 1
        assert (await one.verify_audit_log("g1")).intact
    finally:
        await one.close()
        await two.close()


# -- SQLite only --------------------------------------------------------------------------------


async def test_sqlite_pragmas_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "store.db"
    for _ in range(2):
        store = SqliteStore(path)
        await store.open()
        await store.open()  # opening an open store is a no-op
        await store.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        assert {"games", "log", "requests", "audit"} <= tables
    finally:
        conn.close()


def _posix_locks_on(path: Path) -> list[str]:
    """The POSIX (``fcntl``) locks this process holds on ``path``, as ``/proc/locks`` lists
    them (SQLite's own locks: in WAL mode a connection holds a read lock on the file)."""
    inode = path.stat().st_ino
    found = []
    with open("/proc/locks", encoding="ascii") as table:
        for line in table:
            fields = line.split()
            if fields[1] != "POSIX":  # a flock, or "->" (a request waiting for a lock)
                continue
            if fields[4] == str(os.getpid()) and fields[5].endswith(f":{inode}"):
                found.append(f"{fields[1]} {fields[3]}")
    return sorted(found)


async def test_sqlite_a_file_is_served_by_one_store_at_a_time(tmp_path: Path) -> None:
    """Two servers on one file each kept their own games in memory, refusing each other's
    actions and blind to them. A second serving store is refused, naming the file; a store
    that does not serve (export, a test standing for another process) opens beside it; once
    the first closes, a new one serves. The serving lock lives in a file of its own, beside
    the database (a symbolic link to the database shares it)."""
    path = tmp_path / "referee.db"
    first = SqliteStore(path)
    await first.open()
    try:
        await new_game(first)
        for name in (path, tmp_path / "link.db"):
            if name != path:
                name.symlink_to(path)
            with pytest.raises(StoreError) as refused:
                await SqliteStore(name).open()
            assert str(refused.value) == (
                f"another store of this process serves {name}: a SQLite database is served"
                " by one server at a time (stop that one first, or give this one another --db)"
            )
        beside = SqliteStore(path, serving=False)
        await beside.open()
        assert await beside.list_games() == ["g1"]
        await beside.close()
        await first.commit(make_commit("g1", 0))  # the first store is not disturbed
    finally:
        await first.close()
    assert sqlite_store.serving_lock_path(path) == tmp_path / "referee.db-serving"
    again = SqliteStore(path)
    await again.open()
    try:
        assert (await again.get_game("g1")).version == 1
    finally:
        await again.close()


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
async def test_sqlite_a_refused_store_leaves_the_servers_sqlite_locks(tmp_path: Path) -> None:
    """Why the serving lock is not a ``flock`` on the database itself: the refused store closes
    the descriptor it tried, and closing any descriptor of a file drops every POSIX lock the
    process holds on it, SQLite's among them (its WAL read lock, by which the last connection
    to close knows it is the last and may checkpoint and delete the WAL)."""
    path = tmp_path / "referee.db"
    first = SqliteStore(path)
    await first.open()
    try:
        await first.list_games()  # a reader connection too
        held = _posix_locks_on(path)
        assert held, "SQLite holds no lock on the file in WAL mode? (the test needs one)"
        with pytest.raises(StoreError, match="serves"):
            await SqliteStore(path).open()
        assert _posix_locks_on(path) == held
    finally:
        await first.close()


async def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="schema version"):
        await SqliteStore(path).open()


async def test_sqlite_acknowledged_commits_survive_a_crash(tmp_path: Path) -> None:
    """A process acknowledges commits, then dies without closing: every ack is on disk."""
    path = tmp_path / "crash.db"
    script = textwrap.dedent(
        f"""
        import asyncio, os, sys
        from tests.test_store import make_commit, new_game
        from referee.store.sqlite import SqliteStore

        async def main():
            store = SqliteStore({str(path)!r})
            await store.open()
            await asyncio.gather(*(new_game(store, f"g{{i}}") for i in range(16)))
            async def play(i):
                for v in range(10):
                    await store.commit(make_commit(f"g{{i}}", v))
                    print(f"g{{i}} {{v + 1}}", flush=True)
            await asyncio.gather(*(play(i) for i in range(16)))
            os._exit(0)  # no close(): the threads and connections just vanish

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    acknowledged: dict[str, int] = {}
    for line in done.stdout.splitlines():
        game_id, acked = line.split()
        acknowledged[game_id] = max(acknowledged.get(game_id, 0), int(acked))
    assert len(acknowledged) == 16

    store = SqliteStore(path)
    await store.open()
    try:
        for game_id, version in acknowledged.items():
            assert (await store.get_game(game_id)).version >= version
            assert (await store.verify_audit_log(game_id)).intact
    finally:
        await store.close()


# -- PostgreSQL only ----------------------------------------------------------------------------


async def pg_rows(schema: str, query: str) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL) as conn:
        await conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        cursor = await conn.execute(query)
        return await cursor.fetchall()


async def test_postgres_migrations_are_versioned_and_idempotent(postgres_url: str) -> None:
    with postgres_schema() as schema:
        for _ in range(2):
            store = PostgresStore(POSTGRES_URL, schema=schema)
            await store.open()
            await store.open()  # opening an open store is a no-op
            await store.close()
        versions = await pg_rows(schema, "SELECT version FROM schema_migrations ORDER BY version")
        assert versions == [(v,) for v in range(1, PG_SCHEMA_VERSION + 1)]
        tables = await pg_rows(
            schema, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )
        assert {"games", "log", "requests", "audit", "schema_migrations"} <= {
            name for (name,) in tables
        }


async def test_postgres_replicas_starting_together_migrate_once(postgres_url: str) -> None:
    with postgres_schema(create=False) as schema:  # the stores create the schema too
        stores = [PostgresStore(POSTGRES_URL, schema=schema) for _ in range(6)]
        try:
            await asyncio.gather(*(store.open() for store in stores))
            await new_game(stores[0])
            assert (await stores[5].get_game("g1")).version == 0
        finally:
            for store in stores:
                await store.close()
        versions = await pg_rows(schema, "SELECT version FROM schema_migrations")
        assert sorted(versions) == [(v,) for v in range(1, PG_SCHEMA_VERSION + 1)]


async def test_postgres_refuses_a_newer_schema(postgres_url: str) -> None:
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await store.close()
        await postgres_sql(
            schema, "INSERT INTO schema_migrations (version) VALUES (?)", (PG_SCHEMA_VERSION + 1,)
        )
        with pytest.raises(StoreError, match="schema version"):
            await PostgresStore(POSTGRES_URL, schema=schema).open()


async def test_postgres_unreachable_is_a_store_error() -> None:
    store = PostgresStore(
        "postgresql://postgres@127.0.0.1:1/test?connect_timeout=1", connect_timeout=1.0
    )
    with pytest.raises(StoreError, match=r"cannot open PostgreSQL at 127\.0\.0\.1:1/test"):
        await store.open()


async def test_postgres_many_stores_race_on_one_game(postgres_url: str) -> None:
    """Eight stores (eight replicas' pools) commit at the same version: the row lock and the
    version check let exactly one win each round, whatever the interleaving."""
    with postgres_schema() as schema:
        stores = [PostgresStore(POSTGRES_URL, schema=schema, max_size=2) for _ in range(8)]
        await asyncio.gather(*(store.open() for store in stores))
        try:
            await new_game(stores[0])
            for expected in range(6):
                results = await asyncio.gather(
                    *(
                        store.commit(make_commit("g1", expected, f"race{expected}-{i}"))
                        for i, store in enumerate(stores)
                    ),
                    return_exceptions=True,
                )
                winners = [r for r in results if isinstance(r, AuditRow)]
                losers = [r for r in results if isinstance(r, VersionConflict)]
                assert (len(winners), len(losers)) == (1, 7), results
                assert {conflict.current for conflict in losers} == {expected + 1}
            check = stores[3]
            assert (await check.get_game("g1")).version == 6
            assert [row.seq for row in await check.load_log("g1")] == list(range(1, 8))
            verdict = await check.verify_audit_log("g1")
            assert (verdict.intact, verdict.entries) == (True, 6)
        finally:
            for store in stores:
                await store.close()


async def _collect(store: PostgresStore, into: asyncio.Queue[str]) -> None:
    async for game_id in store.changes():
        await into.put(game_id)


async def _next(queue: asyncio.Queue[str]) -> str:
    return await asyncio.wait_for(queue.get(), timeout=5)


async def test_postgres_changes_announce_other_stores_commits(postgres_url: str) -> None:
    with postgres_schema() as schema:
        listener = PostgresStore(POSTGRES_URL, schema=schema)
        writer = PostgresStore(POSTGRES_URL, schema=schema)
        await listener.open()
        await writer.open()
        await new_game(writer, "g1")
        await new_game(writer, "g2")
        await new_game(writer, "done", over=True)
        heard: asyncio.Queue[str] = asyncio.Queue()
        following = asyncio.ensure_future(_collect(listener, heard))
        try:
            # On connecting, the listener says every game must be checked (it may have missed
            # announcements, a game's end included).
            assert await _next(heard) == ALL_GAMES

            await listener.commit(make_commit("g2", 0))  # its own commit: not announced to it
            await writer.commit(make_commit("g1", 0))  # another store's commit: announced
            assert await _next(heard) == "g1"
            await writer.commit(make_commit("g2", 1))
            assert await _next(heard) == "g2"

            # A refused commit announces nothing; the next real one is heard.
            with pytest.raises(VersionConflict):
                await writer.commit(make_commit("g1", 0, "again"))
            await writer.commit(make_commit("g1", 1))
            assert await _next(heard) == "g1"
            assert heard.empty()

            # The listening connection dies: the listener reconnects and announces again.
            old_pid = listener.listener_pid
            assert old_pid
            await postgres_sql(schema, "SELECT pg_terminate_backend(?)", (old_pid,))
            for _ in range(100):
                if listener.listener_pid not in (0, old_pid):
                    break
                await asyncio.sleep(0.05)
            assert listener.listener_pid not in (0, old_pid)
            assert await _next(heard) == ALL_GAMES
            await writer.commit(make_commit("g2", 2))
            assert await _next(heard) == "g2"

            # close() ends the iteration.
            await listener.close()
            await asyncio.wait_for(following, timeout=5)
        finally:
            following.cancel()
            await listener.close()
            await writer.close()


async def _serving_lock_holders(schema: str, *, granted: bool = True) -> list[int]:
    """The backend pids holding ``schema``'s serving lock (shared) in the test database (with
    ``granted=False``: waiting for it)."""
    rows = await pg_rows(
        schema,
        f"SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted = {granted}"
        f" AND mode = 'ShareLock' AND classid = {postgres_store.SERVING_LOCK} AND objsubid = 2"
        f" AND objid = (hashtext('{schema}')::bigint & 4294967295)::oid ORDER BY pid",
    )
    return [int(pid) for (pid,) in rows]  # type: ignore[call-overload]


async def _serving_lock_holders_become(schema: str, expected: list[int]) -> list[int]:
    """``schema``'s serving-lock holders once they are ``expected``, or as they are after 5 s.

    A client's close (or ``pg_terminate_backend``) returns before its backend has exited and
    released its locks: PostgreSQL ends the session asynchronously, so ``pg_locks`` may show
    the lock for a few milliseconds more (seen once on a loaded machine)."""
    holders = await _serving_lock_holders(schema)
    for _ in range(100):
        if holders == expected:
            break
        await asyncio.sleep(0.05)
        holders = await _serving_lock_holders(schema)
    return holders


async def test_postgres_a_serving_store_holds_the_schemas_serving_lock(postgres_url: str) -> None:
    """From open() to close() a serving store holds its schema's serving lock (shared), which
    ``downgrade`` must get exclusively: first on the connection open() used, which becomes the
    listener, then on every connection the listener makes after losing one. A store that does
    not serve (export's) holds none."""
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        reader = PostgresStore(POSTGRES_URL, schema=schema, serving=False, create=False)
        await store.open()
        await reader.open()
        heard: asyncio.Queue[str] = asyncio.Queue()
        following: asyncio.Future[None] | None = None
        try:
            (opened,) = await _serving_lock_holders(schema)  # before anything listens
            following = asyncio.ensure_future(_collect(store, heard))
            assert await _next(heard) == ALL_GAMES
            assert store.listener_pid == opened  # the same session: handed over, not a new one

            await postgres_sql(schema, "SELECT pg_terminate_backend(?)", (opened,))
            for _ in range(100):
                if store.listener_pid not in (0, opened):
                    break
                await asyncio.sleep(0.05)
            assert await _next(heard) == ALL_GAMES
            listener = store.listener_pid
            assert await _serving_lock_holders_become(schema, [listener]) == [listener]
            with pytest.raises(StoreError, match="still served: 1 session holds its serving"):
                await PostgresStore(POSTGRES_URL, schema=schema).downgrade(1)

            await store.close()
            await asyncio.wait_for(following, timeout=5)
            assert await _serving_lock_holders_become(schema, []) == []
        finally:
            if following is not None:
                following.cancel()
            await store.close()
            await reader.close()


def _hold_reconnection(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold ``store``'s listener at its next connection (made once it lost its own) until the
    second event is set; the first is set once it is held. Meanwhile the store holds no
    serving lock: the gap a downgrade may land in, kept open for as long as a test needs it
    instead of for the listener's pause before it reconnects."""
    held, release = asyncio.Event(), asyncio.Event()
    connect = store._connect

    async def held_connect() -> psycopg.AsyncConnection[Any]:
        held.set()
        await release.wait()
        return await connect()

    monkeypatch.setattr(store, "_connect", held_connect)
    return held, release


async def _lose_the_listener(store: PostgresStore, schema: str) -> None:
    """End the session of ``store``'s listener, held at its reconnection
    (``_hold_reconnection``), and wait until the session's serving lock is gone."""
    listener = store.listener_pid
    assert listener
    assert await _serving_lock_holders(schema) == [listener]
    await postgres_sql(schema, "SELECT pg_terminate_backend(?)", (listener,))
    assert await _serving_lock_holders_become(schema, []) == []


async def _stops_serving(store: PostgresStore) -> SchemaChanged:
    """What ``store`` refuses a read with, once it has (its ping refused, within 10 s)."""
    for _ in range(200):
        try:
            await store.ping()
        except SchemaChanged as refused:
            return refused
        await asyncio.sleep(0.05)
    with pytest.raises(SchemaChanged) as last:
        await store.ping()
    return last.value


_STORED_ROWS = (
    "SELECT (SELECT json_agg(t ORDER BY game_id) FROM (SELECT game_id, version, over,"
    " audit_seq, audit_head FROM games) t)::text, (SELECT count(*) FROM log),"
    " (SELECT count(*) FROM audit), (SELECT count(*) FROM requests)"
)


async def test_postgres_a_downgrade_while_the_listener_reconnects_stops_the_store(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Review: a downgrade that landed while a replica's listener was reconnecting (holding no
    serving lock) was not refused, and the replica went on serving a schema it did not know.
    The new listener now reads the schema's version under the lock it took again: older than
    this code's, the store stops serving: it says so once (an error naming the schema, both
    versions and what to do), lets the lock go, and refuses every read and write from then
    on with ``SchemaChanged``, writing nothing. What was acknowledged before stays."""
    older = PG_SCHEMA_VERSION - 1  # drops an index only: every write would still succeed
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        heard: asyncio.Queue[str] = asyncio.Queue()
        following = asyncio.ensure_future(_collect(store, heard))
        try:
            assert await _next(heard) == ALL_GAMES
            await new_game(store, "g1")
            await store.commit(make_commit("g1", 0))
            await new_game(store, "done", over=True)
            before = await pg_rows(schema, _STORED_ROWS)

            held, release = _hold_reconnection(store, monkeypatch)
            await _lose_the_listener(store, schema)
            await asyncio.wait_for(held.wait(), 10)
            with caplog.at_level(logging.ERROR, logger=postgres_store.__name__):
                downgrading = PostgresStore(POSTGRES_URL, schema=schema)
                assert await downgrading.downgrade(older) == PG_SCHEMA_VERSION  # not refused
                release.set()
                refused = await _stops_serving(store)
            expected = (
                f"{describe(POSTGRES_URL)} schema {schema!r} has schema version {older}, but"
                f" this release serves schema version {PG_SCHEMA_VERSION}: "
            )
            assert str(refused).startswith(expected)
            assert "restart it with the release that knows the schema's version, or migrate" in (
                str(refused)
            )
            errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
            assert [r.getMessage() for r in errors] == [f"stopped serving the schema: {refused}"]

            writes: list[Callable[[], Awaitable[object]]] = [
                lambda: store.commit(make_commit("g1", 1)),
                lambda: new_game(store, "g2"),
                lambda: store.record_refusal("g1", audit_entry(1, "refused", "NOT_YOUR_TURN")),
                lambda: store.forget_responses(1e12),
                lambda: store.get_game("g1"),
                lambda: store.load_log("g1"),
                store.count_active_games,
            ]
            for write in writes:
                with pytest.raises(SchemaChanged, match=re.escape(expected)):
                    await write()
            assert await pg_rows(schema, _STORED_ROWS) == before
            versions = await pg_rows(schema, "SELECT max(version) FROM schema_migrations")
            assert versions == [(older,)]
            assert await _serving_lock_holders(schema) == []  # it serves no more
            after = [r for r in caplog.records if r.levelno >= logging.ERROR]
            assert after == errors  # logged once: the refusals log nothing of their own

            # changes() yields nothing more: it ends, saying why (the server then ends its
            # watch streams, which would otherwise stay open and silent for good).
            with pytest.raises(SchemaChanged, match=re.escape(expected)):
                await asyncio.wait_for(following, timeout=5)
            assert heard.empty()
            with pytest.raises(SchemaChanged):  # and so does every later call
                await anext(store.changes())
        finally:
            following.cancel()
            await store.close()


async def test_postgres_a_listener_waits_for_a_downgrade_under_way_then_stops_the_store(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listener taking the serving lock again while a downgrade holds it (exclusively, to
    its transaction's end) waits for the downgrade's commit; the version it reads then is the
    downgraded one, and the store stops serving."""
    older = PG_SCHEMA_VERSION - 1
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        heard: asyncio.Queue[str] = asyncio.Queue()
        following = asyncio.ensure_future(_collect(store, heard))
        downgrade: asyncio.Future[int] | None = None
        finish = asyncio.Event()
        try:
            assert await _next(heard) == ALL_GAMES
            await new_game(store, "g1")
            held, release = _hold_reconnection(store, monkeypatch)
            await _lose_the_listener(store, schema)
            await asyncio.wait_for(held.wait(), 10)

            # A downgrade that has taken the serving lock and waits, inside its transaction.
            downgrading = PostgresStore(POSTGRES_URL, schema=schema)
            locked = asyncio.Event()
            refuse_while_served = PostgresStore._refuse_while_served

            async def lock_then_wait(conn: Any, where: str, locked_schema: str) -> None:
                await refuse_while_served(conn, where, locked_schema)
                locked.set()
                await finish.wait()

            monkeypatch.setattr(downgrading, "_refuse_while_served", lock_then_wait)
            downgrade = asyncio.ensure_future(downgrading.downgrade(older))
            await asyncio.wait_for(locked.wait(), 10)

            release.set()  # the listener connects and asks for the lock, which waits
            for _ in range(200):
                if await _serving_lock_holders(schema, granted=False):
                    break
                await asyncio.sleep(0.05)
            assert len(await _serving_lock_holders(schema, granted=False)) == 1
            await store.commit(make_commit("g1", 0))  # it serves on meanwhile: nothing seen yet

            finish.set()
            assert await asyncio.wait_for(downgrade, 10) == PG_SCHEMA_VERSION
            refused = await _stops_serving(store)
            assert f"has schema version {older}, but this release serves" in str(refused)
            with pytest.raises(SchemaChanged):
                await asyncio.wait_for(following, timeout=5)
            with pytest.raises(SchemaChanged):
                await store.commit(make_commit("g1", 1))
            assert await _serving_lock_holders_become(schema, []) == []
            assert await pg_rows(schema, "SELECT max(version) FROM log") == [(1,)]
        finally:
            finish.set()
            if downgrade is not None:
                with contextlib.suppress(StoreError):
                    await downgrade
            following.cancel()
            await store.close()


async def test_postgres_a_listener_reconnecting_serves_on_a_current_or_newer_schema(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reconnection that finds the schema at this code's version serves on; so does one that
    finds it newer: a newer release migrates it forward under the replicas still running in a
    rolling upgrade, whose migrations keep those replicas working (see MIGRATIONS)."""
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        heard: asyncio.Queue[str] = asyncio.Queue()
        following = asyncio.ensure_future(_collect(store, heard))
        try:
            assert await _next(heard) == ALL_GAMES
            await new_game(store, "g1")
            for version in range(2):
                newer = version == 1
                if newer:  # what a newer release's migration records
                    await postgres_sql(
                        schema,
                        "INSERT INTO schema_migrations (version) VALUES (?)",
                        (PG_SCHEMA_VERSION + 1,),
                    )
                listener = store.listener_pid
                await postgres_sql(schema, "SELECT pg_terminate_backend(?)", (listener,))
                assert await _next(heard) == ALL_GAMES  # listening again
                listening = store.listener_pid
                assert listening not in (0, listener)
                assert await _serving_lock_holders_become(schema, [listening]) == [listening]
                await store.commit(make_commit("g1", version))
                await store.ping()
            assert (await store.get_game("g1")).version == 2
        finally:
            following.cancel()
            await store.close()


async def test_sqlite_waits_for_another_writer_without_blocking_the_loop(tmp_path: Path) -> None:
    """Another connection holds the write lock: the commit waits (the loop keeps running) and
    lands once the lock is released."""
    store = SqliteStore(tmp_path / "busy.db")
    await store.open()
    try:
        await new_game(store)
        other = sqlite3.connect(tmp_path / "busy.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        pending = asyncio.ensure_future(store.commit(make_commit("g1", 0)))
        ticks = 0
        for _ in range(10):  # the loop is free while the commit waits for the lock
            await asyncio.sleep(0.005)
            ticks += 1
        assert ticks == 10 and not pending.done()
        other.execute("ROLLBACK")
        other.close()
        assert isinstance(await pending, AuditRow)
        assert (await store.get_game("g1")).version == 1
    finally:
        await store.close()


async def test_sqlite_gives_up_on_a_lock_held_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("referee.store.sqlite.BUSY_TIMEOUT_SECONDS", 0.05)
    store = SqliteStore(tmp_path / "busy.db")
    await store.open()
    other = sqlite3.connect(tmp_path / "busy.db", isolation_level=None)
    try:
        await new_game(store)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError, match="locked"):
            await store.commit(make_commit("g1", 0))
        other.execute("ROLLBACK")
        await store.commit(make_commit("g1", 0))  # the store works again once the lock is free
        assert (await store.get_game("g1")).version == 1
    finally:
        other.close()
        await store.close()


async def test_sqlite_writes_come_from_the_loop_that_opened_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "loop.db")
    await store.open()
    try:
        await new_game(store)

        async def commit_elsewhere() -> None:
            await store.commit(make_commit("g1", 0))

        def elsewhere() -> None:
            with pytest.raises(StoreError, match="event loop"):
                asyncio.run(commit_elsewhere())

        await asyncio.to_thread(elsewhere)
        assert (await store.get_game("g1")).version == 0
    finally:
        await store.close()


def fail_audit_inserts(monkeypatch: pytest.MonkeyPatch, game_id: str) -> None:
    """Make the SQLite store's audit insert fail for ``game_id``: a job failing after a write."""
    real_insert_audit = sqlite_store._insert_audit

    def failing_insert_audit(cursor: sqlite3.Cursor, failing: str, *rest: Any) -> None:
        if failing == game_id:
            raise RuntimeError("disk on fire")
        real_insert_audit(cursor, failing, *rest)

    monkeypatch.setattr(sqlite_store, "_insert_audit", failing_insert_audit)


async def test_sqlite_a_job_failing_after_a_write_fails_its_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refusals come before a job's first write; an error after one leaves the transaction
    half-done, so every job of the batch fails and none of it is durable."""
    store = SqliteStore(tmp_path / "batch.db")
    await store.open()
    try:
        for game_id in ("g0", "g1", "g2"):
            await new_game(store, game_id)
        fail_audit_inserts(monkeypatch, "g2")
        first = asyncio.ensure_future(store.commit(make_commit("g0", 0)))
        await asyncio.sleep(0)  # g0's transaction is committing: g1 and g2 form the next batch
        results = await asyncio.gather(
            store.commit(make_commit("g1", 0)),
            store.commit(make_commit("g2", 0)),
            return_exceptions=True,
        )
        assert isinstance(await first, AuditRow)
        assert all(isinstance(r, StoreError) for r in results), results
        assert [(await store.get_game(g)).version for g in ("g0", "g1", "g2")] == [1, 0, 0]
        assert await store.stored_response("g1", "g1-r1") is None
        monkeypatch.undo()
        await store.commit(make_commit("g1", 0))  # nothing of the failed batch is left behind
        assert (await store.verify_audit_log("g1")).intact
    finally:
        await store.close()


async def test_sqlite_migrates_a_version_1_database(tmp_path: Path) -> None:
    """Schema 1 had no games.log_seq: opening fills it from the log, and play continues."""
    path = tmp_path / "v1.db"
    store = SqliteStore(path)
    await store.open()
    await new_game(store)
    await store.commit(make_commit("g1", 0, with_deal=True))
    await store.close()
    _downgrade_sqlite(path, 1)

    reopened = SqliteStore(path)
    await reopened.open()
    try:
        await reopened.commit(make_commit("g1", 1))
        assert [row.seq for row in await reopened.load_log("g1")] == [1, 2, 3, 4]
    finally:
        await reopened.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("SELECT log_seq FROM games").fetchall() == [(4,)]
    finally:
        conn.close()


# What undoes each SQLite migration (to the schema version before it).
def _downgrade_sqlite(path: Path, version: int, *statements: str) -> None:
    """Take a current database back to schema ``version`` (the product's ``downgrade``), then
    run ``statements`` (what that version left in the rows)."""
    sqlite_downgrade(path, version)
    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


async def _games_for_the_last_active_migration(store: GameStore) -> None:
    """g1 with two accepted actions then a refusal, g2 with a refusal only, g3 untouched."""
    await new_game(store, "g1")
    await commit_many(store, "g1", 2)  # accepted at 1_700_000_101.5 and 1_700_000_102.5
    await store.record_refusal("g1", audit_entry(9, "refused", "NOT_YOUR_TURN"))
    await new_game(store, "g2", created_at=1_600_000_000.0)
    await store.record_refusal("g2", audit_entry(9, "refused", "NOT_YOUR_TURN"))
    await new_game(store, "g3", created_at=1_650_000_000.0)


# Filled by the migration: the last *accepted* request's time, else the creation time; a
# refusal (at 1_700_000_109.5) does not make a game active.
_LAST_ACTIVE_AFTER_MIGRATION = [
    ("g1", 1_700_000_102.5),
    ("g2", 1_600_000_000.0),
    ("g3", 1_650_000_000.0),
]


async def _assert_last_active_after_migration(store: GameStore) -> None:
    assert await store.count_active_games() == 3
    assert await store.count_active_games(active_since=1_650_000_000.0) == 2  # g1, g3
    assert await store.count_active_games(active_since=1_700_000_102.5) == 1  # g1
    assert await store.count_active_games(active_since=1_700_000_102.6) == 0
    await store.commit(make_commit("g2", 0))  # acting makes it active again
    assert await store.count_active_games(active_since=1_700_000_101.5) == 2


async def test_sqlite_migrates_a_version_2_database(tmp_path: Path) -> None:
    """Schema 2 had no games.last_active_at: opening fills it from the audit log."""
    path = tmp_path / "v2.db"
    store = SqliteStore(path)
    await store.open()
    await _games_for_the_last_active_migration(store)
    await store.close()
    _downgrade_sqlite(path, 2)

    reopened = SqliteStore(path)
    await reopened.open()
    try:
        conn = sqlite3.connect(path)
        try:
            rows = conn.execute("SELECT game_id, last_active_at FROM games ORDER BY game_id")
            assert rows.fetchall() == _LAST_ACTIVE_AFTER_MIGRATION
            assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        finally:
            conn.close()
        await _assert_last_active_after_migration(reopened)
    finally:
        await reopened.close()


async def test_sqlite_migrates_a_version_3_database(tmp_path: Path) -> None:
    """Schema 3 had no games.responses_kept, and left a game that ended before it with a last
    activity of 0: opening takes that from the audit log, so its responses are forgotten by
    when it ended, not at once."""
    path = tmp_path / "v3.db"
    store = SqliteStore(path)
    await store.open()
    await new_game(store, "ended")
    await commit_many(store, "ended", 1)
    await store.commit(make_commit("ended", 1, over=True))  # ended at 1_700_000_102.5
    await store.close()
    _downgrade_sqlite(path, 3, "UPDATE games SET last_active_at = 0 WHERE over = 1")
    reopened = SqliteStore(path)
    await reopened.open()
    try:
        assert (await reopened.get_game("ended")).last_active_at == 1_700_000_102.5
        assert await reopened.forget_responses(1_700_000_102.5) == 0
        assert await reopened.forget_responses(1_700_000_102.6) == 1
        assert await reopened.stored_response("ended", "ended-r2") is None
    finally:
        await reopened.close()


async def _games_to_list(store: GameStore) -> None:
    await new_game(store, "b", created_at=2_000.0)
    await new_game(store, "a", created_at=2_000.0)
    await new_game(store, "c", created_at=1_000.0)


async def test_sqlite_migrates_a_version_4_database(tmp_path: Path) -> None:
    """Schema 4 had no index in the listing order: opening adds it, and the games it held
    are listed in that order."""
    path = tmp_path / "v4.db"
    store = SqliteStore(path)
    await store.open()
    await _games_to_list(store)
    await store.close()
    _downgrade_sqlite(path, 4)

    def indexes() -> list[str]:
        conn = sqlite3.connect(path)
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
            return [name for (name,) in rows]
        finally:
            conn.close()

    assert "games_created" not in indexes()
    reopened = SqliteStore(path)
    await reopened.open()
    try:
        assert "games_created" in indexes()
        listed = await reopened.list_game_summaries()
        assert [summary.game_id for summary in listed] == ["c", "a", "b"]
    finally:
        await reopened.close()


async def test_postgres_migrates_a_version_5_schema(postgres_url: str) -> None:
    """The same on PostgreSQL, whose schema 5 is SQLite's 4."""
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await _games_to_list(store)
        await store.close()
        assert await PostgresStore(POSTGRES_URL, schema=schema).downgrade(5) == PG_SCHEMA_VERSION
        find = (
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
            " AND indexname = 'games_created'"
        )
        assert await pg_rows(schema, find) == []
        reopened = PostgresStore(POSTGRES_URL, schema=schema)
        await reopened.open()
        try:
            assert await pg_rows(schema, find) == [("games_created",)]
            listed = await reopened.list_game_summaries()
            assert [summary.game_id for summary in listed] == ["c", "a", "b"]
        finally:
            await reopened.close()


async def _downgrade_postgres_to_1(schema: str) -> None:
    """Take a current schema back to version 1 (the product's ``downgrade``)."""
    assert await PostgresStore(POSTGRES_URL, schema=schema).downgrade(1) == PG_SCHEMA_VERSION


async def test_postgres_migrates_a_version_1_schema(postgres_url: str) -> None:
    """Schema 1 had no games.last_active_at: opening fills it from the audit log."""
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await _games_for_the_last_active_migration(store)
        await store.close()
        await _downgrade_postgres_to_1(schema)

        reopened = PostgresStore(POSTGRES_URL, schema=schema)
        await reopened.open()
        try:
            rows = await pg_rows(schema, "SELECT game_id, last_active_at FROM games ORDER BY 1")
            assert rows == _LAST_ACTIVE_AFTER_MIGRATION
            await _assert_last_active_after_migration(reopened)
        finally:
            await reopened.close()


async def test_postgres_migration_runs_without_the_session_limits(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: the 1 -> 2 migration rewrites every game in progress and reads the audit log.
    It ran under the pool's statement and lock timeouts, so on a large store it timed out
    and the new version could never start; replicas starting meanwhile gave up at the lock.

    A statement added to the migration records the timeouts it ran under, with two replicas
    opening at once and session limits of their own in force: no timing is involved (this
    test once used 1 ms limits, which the quick statements around the migration could miss
    on a busy machine)."""
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await _games_for_the_last_active_migration(store)
        await store.close()
        await _downgrade_postgres_to_1(schema)
        probe = (
            "CREATE TABLE migration_limits AS SELECT"
            " current_setting('statement_timeout') AS statement_timeout,"
            " current_setting('lock_timeout') AS lock_timeout"
        )
        migrations = list(postgres_store.MIGRATIONS)
        migrations[2] = (*migrations[2], probe)
        monkeypatch.setattr(postgres_store, "MIGRATIONS", tuple(migrations))
        limits = dict(postgres_store.SESSION_LIMITS) | {
            "statement_timeout": "7s",
            "lock_timeout": "6s",
        }
        monkeypatch.setattr(postgres_store, "SESSION_LIMITS", tuple(limits.items()))
        replicas = [PostgresStore(POSTGRES_URL, schema=schema) for _ in range(2)]
        try:
            await asyncio.gather(*(replica.open() for replica in replicas))

            async def session_limits(conn: psycopg.AsyncConnection[Any]) -> list[Any]:
                cursor = await conn.execute(
                    "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
                )
                return list(await cursor.fetchall())

            assert await replicas[0]._read(session_limits) == [("7s", "6s")]  # the pool's
        finally:
            for replica in replicas:
                await replica.close()
        assert await pg_rows(schema, "SELECT * FROM migration_limits") == [("0", "0")]
        rows = await pg_rows(schema, "SELECT game_id, last_active_at FROM games ORDER BY 1")
        assert rows == _LAST_ACTIVE_AFTER_MIGRATION


async def test_sqlite_the_active_count_has_an_index(tmp_path: Path) -> None:
    """The count of active games runs in every CreateGame's write transaction (the cap) and in
    every recount: it must not scan the games, with an idle threshold or without one."""
    store = SqliteStore(tmp_path / "plan.db")
    await store.open()
    await store.close()
    conn = sqlite3.connect(tmp_path / "plan.db")
    try:
        for since in (5.0, None):
            query, params = sqlite_store._active_games_query(since, ())
            plan = str(conn.execute("EXPLAIN QUERY PLAN " + query, params).fetchall())
            assert "USING INDEX games_active" in plan, plan
    finally:
        conn.close()


async def test_postgres_the_active_count_has_an_index(postgres_url: str) -> None:
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await store.close()
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL) as conn:
            await conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
            await conn.execute("SET enable_seqscan = off")  # the table is empty
            for since in (5.0, None):
                query, params = postgres_store._active_games_query(since, ())
                cursor = await conn.execute("EXPLAIN " + query, params)
                plan = str(await cursor.fetchall())
                assert "Index" in plan and "games_active" in plan, plan


#: Every filter ListGames can send: a page's start or none, each state, a variant or none.
_PAGE_FILTERS = [
    (after, over, variant)
    for after in (None, (5.0, "x"))
    for over in (None, True, False)
    for variant in (None, "partnership")
]


async def test_sqlite_a_games_page_is_read_from_an_index(tmp_path: Path) -> None:
    """``list_game_summaries`` (ListGames) starts where its page starts, in the index's order,
    whatever the filter: neither a scan of every game nor a sort. The statement EXPLAINed is
    the store's own (was: a copy of its text, which a change to the store would not have
    followed)."""
    store = SqliteStore(tmp_path / "plan.db")
    await store.open()
    await store.close()
    conn = sqlite3.connect(tmp_path / "plan.db")
    try:
        for after, over, variant in _PAGE_FILTERS:
            query, params = sqlite_store._games_page_query(after, 101, over, variant)
            plan = str(conn.execute("EXPLAIN QUERY PLAN " + query, params).fetchall())
            assert "USING INDEX games_created" in plan, (after, over, variant, plan)
            assert "TEMP B-TREE" not in plan, (after, over, variant, plan)
            if after is not None:
                assert "SEARCH games USING INDEX games_created" in plan, plan
    finally:
        conn.close()


async def test_postgres_a_games_page_is_read_from_an_index(postgres_url: str) -> None:
    """The same on PostgreSQL, ids compared as bytes (``COLLATE "C"``, the index's)."""
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await store.close()
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL) as conn:
            await conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
            # The table is empty, so the planner's costs say little: with scans of the whole
            # table and sorts discouraged, a plan without a Sort exists only if an index gives
            # the order (PostgreSQL still sorts when nothing else can).
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                await conn.execute(f"SET {setting} = off")
            for after, over, variant in _PAGE_FILTERS:
                query, params = postgres_store._games_page_query(after, 101, over, variant)
                cursor = await conn.execute("EXPLAIN " + query, params)
                plan = str(await cursor.fetchall())
                assert "Index Scan using games_created" in plan, (after, over, variant, plan)
                assert "Sort" not in plan, (after, over, variant, plan)


# -- the audit hash's canonical form ----------------------------------------------------------

_JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.text(max_size=8)
    | st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=8)
)
_JSON_VALUES = st.recursive(
    _JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@settings(max_examples=400)
@example({"request_id": "r\x7f"}, 1.7e9)  # DEL: json escapes it, orjson does not
@example({"action": {"card": "\u00e9"}}, 1.7e9)  # non-ASCII
@example({"version": 2**64}, 1.7e9)  # beyond orjson's integers
@example({"seq": 1}, 1e-07)  # an exponent: "1e-07" against "1e-7"
@example({"seq": 1}, 1e16)
@given(
    st.dictionaries(st.text(max_size=6), _JSON_VALUES, max_size=4),
    st.floats(allow_nan=False, allow_infinity=False) | st.floats(min_value=1e9, max_value=4e9),
)
def test_canonical_json_is_json_dumps_sorted_and_compact(
    content: dict[str, object], stamp: float
) -> None:
    """The fast path (orjson) gives exactly the bytes of the reference form every verifier
    reproduces, or is not taken: non-ASCII, DEL, huge integers and exponent floats."""
    content["time"] = stamp
    expected = json.dumps(content, sort_keys=True, separators=(",", ":")).encode("utf-8")
    assert canonical_json(content) == expected


def test_compact_json_writes_int_keys_as_strings_and_str_keys_unchanged() -> None:
    """The plain encoder first, the non-str-key option only when it refuses: the same text."""
    assert compact_json({"a": [1, {"b": None}], "c": "é"}) == '{"a":[1,{"b":null}],"c":"é"}'
    assert compact_json({1: "x", "k": {2: [3]}}) == '{"1":"x","k":{"2":[3]}}'
