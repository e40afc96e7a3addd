"""Review of how replicas share games through PostgreSQL (second pass): interleavings forced
with row locks held by a foreign session, store calls held at a chosen point, and
announcements the test makes; never with timing.

Skipped, with one reason line, where no PostgreSQL is reachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql as pgsql

from referee.store.base import AuditRow, TooManyGames, VersionConflict
from referee.store.postgres import PostgresStore
from tests.test_postgres_review import _lock_waiter, _named, _row_locked
from tests.test_store import (
    POSTGRES_URL,
    audit_entry,
    deal_row,
    game_record,
    make_commit,
    new_game,
    postgres_marks,
    postgres_schema,
)

BOUND = 20.0  # seconds any wait below may take before the test fails


@pytest.fixture(params=[pytest.param("postgres", marks=postgres_marks())])
def schema() -> Iterator[str]:
    with postgres_schema("test_shared_review") as name:
        yield name


def _with_options(url: str, **settings: str) -> str:
    """``url`` whose sessions start with ``settings``, as a database or role configured with
    ``ALTER DATABASE/ROLE ... SET`` would give them."""
    # libpq's options: a space inside a value is escaped with a backslash.
    escaped = {name: value.replace(" ", "\\ ") for name, value in settings.items()}
    options = " ".join(f"-c {name}={value}" for name, value in escaped.items())
    return f"{url}{'&' if '?' in url else '?'}options={quote(options)}"


@contextlib.asynccontextmanager
async def _stores(
    schema: str, count: int, **settings: str
) -> AsyncIterator[list[tuple[PostgresStore, str]]]:
    """``count`` stores (replicas) on ``schema``, each with an application_name of its own."""
    stores: list[tuple[PostgresStore, str]] = []
    try:
        for _ in range(count):
            name = f"shared_review_{secrets.token_hex(4)}"
            store = PostgresStore(
                _named(_with_options(POSTGRES_URL, **settings), name), schema=schema, max_size=2
            )
            await store.open()
            stores.append((store, name))
        yield stores
    finally:
        for store, _ in stores:
            await store.close()


# -- the database's own settings ----------------------------------------------------------------


async def test_two_replicas_at_one_version_get_a_version_conflict_whatever_the_isolation(
    schema: str,
) -> None:
    """Was a bug: the commit's version check relies on READ COMMITTED (the game row's lock,
    once granted, shows the winner's version; the log's end is read by a later statement). A
    database or role whose default_transaction_isolation is REPEATABLE READ made the loser of
    two replicas committing at one version fail with "could not serialize access" (UNAVAILABLE,
    the game marked behind), not a VersionConflict answered ABORTED with the current version;
    two refusals audited at once on two replicas failed the same way (the second refused request
    answered UNAVAILABLE, and missing from the audit log)."""
    async with _stores(schema, 2, default_transaction_isolation="repeatable read") as stores:
        first = stores[0][0]
        await new_game(first, "g1")
        async with _row_locked(schema, "g1"):
            commits = []
            for store, name in stores:
                commits.append(asyncio.ensure_future(store.commit(make_commit("g1", 0, name))))
                await _lock_waiter(name)  # its transaction has begun, and waits for the row
        results = await asyncio.wait_for(asyncio.gather(*commits, return_exceptions=True), BOUND)
        won = [r for r in results if isinstance(r, AuditRow)]
        lost = [r for r in results if not isinstance(r, AuditRow)]
        assert len(won) == 1, results
        assert len(lost) == 1 and isinstance(lost[0], VersionConflict), results
        assert lost[0].current == 1

        async with _row_locked(schema, "g1"):
            refusals = []
            for store, name in stores:
                refused = audit_entry(1, "refused", "NOT_YOUR_TURN")
                refusals.append(asyncio.ensure_future(store.record_refusal("g1", refused)))
                await _lock_waiter(name)
        rows = await asyncio.wait_for(asyncio.gather(*refusals, return_exceptions=True), BOUND)
        assert sorted(row.seq for row in rows if isinstance(row, AuditRow)) == [2, 3], rows
        verification = await first.verify_audit_log("g1")
        assert verification.intact and verification.entries == 3, verification


async def test_audit_times_survive_a_database_that_prints_floats_short(schema: str) -> None:
    """Was a bug: the audit hash covers the row's ``time`` (a double), which comes back as
    PostgreSQL prints it. With extra_float_digits = 0 (PostgreSQL 11's default, or a database
    or role set so) a double is printed with 15 digits: the wall-clock times read back were
    not the times hashed, so every replica's VerifyAuditLog found the first entry broken, and
    the games' creation and last-activity times lost their fraction."""
    async with _stores(schema, 1, extra_float_digits="0") as stores:
        store = stores[0][0]
        created_at = 1_700_000_000.123_456_7
        record = await new_game(store, "g1", created_at=created_at)
        assert (await store.get_game("g1")).created_at == record.created_at
        commit = make_commit("g1", 0)
        commit = commit._replace(audit=commit.audit._replace(time=1_700_000_100.987_654_3))
        stored = await store.commit(commit)
        refused = audit_entry(1, "refused", "NOT_YOUR_TURN")._replace(time=1_700_000_200.1)
        await store.record_refusal("g1", refused)
        read = await store.audit_log("g1")
        assert read[0] == stored
        assert [row.time for row in read] == [1_700_000_100.987_654_3, 1_700_000_200.1]
        verification = await store.verify_audit_log("g1")
        assert verification.intact and verification.entries == 2, verification


# -- the cap of active games --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _log_locked(schema: str) -> AsyncIterator[None]:
    """An open transaction of a foreign session that keeps every insert into the log waiting."""
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL) as conn:
        await conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        await conn.execute("LOCK TABLE log IN SHARE MODE")
        try:
            yield
        finally:
            await conn.rollback()


async def test_two_replicas_creating_the_last_place_at_once_store_one_game(schema: str) -> None:
    """Was: each replica counted the active games for the cap on its own, before its write, so
    two replicas creating at once both counted the same games and together passed the cap.
    Each creation now counts inside its write, after an advisory lock every replica takes:
    here the first creation holds it while its insert waits (a foreign session holds the log),
    the second waits for it, then counts the first's game and is refused."""
    async with _stores(schema, 2) as stores:
        async with _log_locked(schema):
            creations = []
            for index, (store, name) in enumerate(stores):
                write = store.create_game(game_record(f"g{index}"), [deal_row()], max_active=1)
                creations.append(asyncio.ensure_future(write))
                await _lock_waiter(name)  # the first at the log, the second at the count
        results = await asyncio.wait_for(asyncio.gather(*creations, return_exceptions=True), BOUND)
        assert results[0] is None, results
        assert isinstance(results[1], TooManyGames) and results[1].limit == 1, results
        first = stores[0][0]
        assert await first.list_games() == ["g0"]
