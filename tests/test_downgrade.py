"""``pinochle-referee downgrade``: taking a database back to an older schema, so that an older
release can be started again after an upgrade (an older release refuses a newer schema).

For every version the stores know, a downgraded database must have exactly the schema that
release's migrations make (columns, indexes, the recorded version: what an older release
would find), keep every game, and migrate forward again when the current release opens it,
its games playing on. Both stores (PostgreSQL skipped, with the reason, where unreachable).
"""

from __future__ import annotations

import asyncio
import random
import re
import signal
import socket
import sqlite3
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from pinochle_client import RefereeClient, RefereeError

from referee.cli import main
from referee.service.server import SERVICE_NAMES, start_server
from referee.service.settings import Settings
from referee.store import postgres as postgres_store
from referee.store import sqlite as sqlite_store
from referee.store.base import GameStore, StoreError
from referee.store.postgres import PostgresStore, describe
from referee.store.sqlite import SqliteStore
from tests.service_helpers import actor, free_port, health_stub, new_table, pick, quiet_logs
from tests.test_replicas import replica
from tests.test_service_crash import running
from tests.test_store import (
    _STORED_ROWS,
    POSTGRES_URL,
    _hold_reconnection,
    _lose_the_listener,
    commit_many,
    make_commit,
    new_game,
    pg_rows,
    postgres_marks,
    postgres_schema,
    postgres_sql,
)

SQLITE_VERSIONS = range(1, sqlite_store.SCHEMA_VERSION)
POSTGRES_VERSIONS = range(1, postgres_store.SCHEMA_VERSION)


async def _games(store: GameStore) -> None:
    """Three games: one played on, one just created, one over."""
    await new_game(store, "played")
    await commit_many(store, "played", 3)
    await new_game(store, "fresh", created_at=1_650_000_000.0)
    await new_game(store, "ended")
    await commit_many(store, "ended", 1)
    await store.commit(make_commit("ended", 1, over=True))


async def _contents(store: GameStore) -> dict[str, object]:
    """What the games hold that no migration may change: logs, audit logs, versions."""
    found: dict[str, object] = {}
    for game_id in ("played", "fresh", "ended"):
        record = await store.get_game(game_id)
        found[game_id] = (
            record.version,
            record.over,
            await store.load_log(game_id),
            await store.audit_log(game_id),
        )
    return found


async def _forward_again(store: GameStore, before: dict[str, object]) -> None:
    """The current release opens the downgraded database (migrating it forward): every game
    is as it was, and plays on."""
    await store.open()
    try:
        assert await _contents(store) == before
        await store.commit(make_commit("played", 3))
        assert (await store.get_game("played")).version == 4
        for game_id in ("played", "fresh", "ended"):
            assert (await store.verify_audit_log(game_id)).intact
    finally:
        await store.close()


# -- SQLite ----------------------------------------------------------------------------------


def _sqlite_schema(path: Path) -> dict[str, object]:
    """Tables with their columns (name, type, not null, default, key), indexes with their SQL,
    and the recorded version. A table's CREATE text is left out: SQLite edits it in place on
    ADD and DROP COLUMN, so it differs in layout from one made at once."""
    conn = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        return {
            "columns": {
                table: [row[1:] for row in conn.execute(f"PRAGMA table_info({table})")]
                for table in tables
            },
            "indexes": conn.execute(
                "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
            ).fetchall(),
            "version": conn.execute("PRAGMA user_version").fetchone()[0],
        }
    finally:
        conn.close()


async def _sqlite_made_at(path: Path, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new database made by the migrations up to ``version`` (the older release's)."""
    with monkeypatch.context() as older:
        older.setattr(sqlite_store, "MIGRATIONS", sqlite_store.MIGRATIONS[:version])
        older.setattr(sqlite_store, "SCHEMA_VERSION", version)
        store = SqliteStore(path)
        await store.open()
        await store.close()


@pytest.mark.parametrize("version", SQLITE_VERSIONS)
async def test_sqlite_downgrade_gives_the_older_schema_and_keeps_every_game(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "referee.db"
    store = SqliteStore(path)
    await store.open()
    await _games(store)
    before = await _contents(store)
    await store.close()

    assert sqlite_store.downgrade(path, version) == sqlite_store.SCHEMA_VERSION
    await _sqlite_made_at(tmp_path / "older.db", version, monkeypatch)
    assert _sqlite_schema(path) == _sqlite_schema(tmp_path / "older.db")

    await _forward_again(SqliteStore(path), before)
    assert _sqlite_schema(path)["version"] == sqlite_store.SCHEMA_VERSION


async def test_sqlite_downgrade_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    path = tmp_path / "referee.db"
    with pytest.raises(StoreError, match="no database at"):
        sqlite_store.downgrade(path, 1)
    store = SqliteStore(path)
    await store.open()
    await _games(store)
    await store.close()
    current = sqlite_store.SCHEMA_VERSION
    with pytest.raises(StoreError, match="goes back to version 1 at most"):
        sqlite_store.downgrade(path, 0)
    with pytest.raises(StoreError, match=f"has schema version {current}; a downgrade goes to"):
        sqlite_store.downgrade(path, current + 1)
    assert sqlite_store.downgrade(path, current) == current  # nothing to do
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {current + 1}")
    conn.close()
    with pytest.raises(StoreError, match="downgrade it with the release that made it"):
        sqlite_store.downgrade(path, 1)
    assert _sqlite_schema(path)["version"] == current + 1  # refused: nothing changed


async def test_a_failed_sqlite_downgrade_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps run in one transaction: one that fails leaves the database as it was."""
    path = tmp_path / "referee.db"
    store = SqliteStore(path)
    await store.open()
    await _games(store)
    await store.close()
    before = _sqlite_schema(path)
    steps = list(sqlite_store.DOWNGRADES)
    steps[1] = (*steps[1], "DROP TABLE no_such_table")
    monkeypatch.setattr(sqlite_store, "DOWNGRADES", tuple(steps))
    with pytest.raises(StoreError, match="no such table"):
        sqlite_store.downgrade(path, 1)
    assert _sqlite_schema(path) == before


async def test_the_downgrade_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``pinochle-referee downgrade --to N --db PATH``: says what it did; exit 1 naming the
    reason when it cannot."""
    path = tmp_path / "referee.db"
    assert await _run_main(["downgrade", "--to", "1", "--db", str(path)]) == 1
    assert f"no database at {path}" in capsys.readouterr().err
    store = SqliteStore(path)
    await store.open()
    await store.close()
    current = sqlite_store.SCHEMA_VERSION
    assert await _run_main(["downgrade", "--to", str(current - 1), "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"downgraded {path} from schema version {current} to {current - 1}: a release that knows"
        f" schema {current - 1} may serve it now (this one would migrate it forward again)\n"
    )
    assert await _run_main(["downgrade", "--to", str(current - 1), "--db", str(path)]) == 0
    assert capsys.readouterr().out == f"{path} has schema version {current - 1} already\n"
    assert await _run_main(["downgrade", "--to", str(current), "--db", str(path)]) == 1
    assert "a downgrade goes to an older one" in capsys.readouterr().err


async def test_a_sqlite_downgrade_is_refused_while_a_server_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was done under the server, which went on serving a schema it does not know. Refused
    now (exit 1, one line, the database unchanged) while a server holds the file's serving
    lock; done once the server has stopped."""
    path = tmp_path / "referee.db"
    current = sqlite_store.SCHEMA_VERSION
    args = ["downgrade", "--to", str(current - 1), "--db", str(path)]
    with running(path, free_port(), tmp_path / "server.log") as server:
        await server.wait_serving()
        capsys.readouterr()
        assert await _run_main(args) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            f"pinochle-referee: {path} is still served: another process (pid"
            f" {server.process.pid} on {socket.gethostname()}) serves {path}; stop every"
            " server of it, then downgrade it\n"
        )
        assert _sqlite_schema(path)["version"] == current
        async with RefereeClient(server.address) as client:  # it serves on
            await client.create_game("partnership", seed="still-served")
        server.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.process.wait, 15) == 0
    assert await _run_main(args) == 0
    assert _sqlite_schema(path)["version"] == current - 1


# -- PostgreSQL ------------------------------------------------------------------------------


async def _postgres_schema_of(schema: str) -> dict[str, object]:
    """Columns (name, type, nullable, default) per table, index definitions, and the recorded
    versions; the schema's own name taken out of the definitions."""
    columns = await pg_rows(
        schema,
        "SELECT table_name, column_name, data_type, is_nullable, column_default"
        " FROM information_schema.columns WHERE table_schema = current_schema()"
        " ORDER BY table_name, ordinal_position",
    )
    indexes = await pg_rows(
        schema,
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        " ORDER BY indexname",
    )
    versions = await pg_rows(schema, "SELECT version FROM schema_migrations ORDER BY version")
    own = re.compile(rf"\b{re.escape(schema)}\.")
    return {
        "columns": columns,
        "indexes": [(name, own.sub("", str(definition))) for name, definition in indexes],
        "versions": versions,
    }


@pytest.mark.parametrize(
    "version", [pytest.param(v, marks=postgres_marks()) for v in POSTGRES_VERSIONS]
)
async def test_postgres_downgrade_gives_the_older_schema_and_keeps_every_game(
    version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with postgres_schema() as schema, postgres_schema() as older:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await _games(store)
        before = await _contents(store)
        await store.close()

        downgrading = PostgresStore(POSTGRES_URL, schema=schema)
        assert await downgrading.downgrade(version) == postgres_store.SCHEMA_VERSION
        with monkeypatch.context() as release:
            release.setattr(postgres_store, "MIGRATIONS", postgres_store.MIGRATIONS[:version])
            release.setattr(postgres_store, "SCHEMA_VERSION", version)
            made = PostgresStore(POSTGRES_URL, schema=older)
            await made.open()
            await made.close()
        assert await _postgres_schema_of(schema) == await _postgres_schema_of(older)

        await _forward_again(PostgresStore(POSTGRES_URL, schema=schema), before)
        versions = await pg_rows(schema, "SELECT version FROM schema_migrations")
        assert len(versions) == postgres_store.SCHEMA_VERSION


@pytest.mark.parametrize("database", [pytest.param("postgres", marks=postgres_marks())])
async def test_postgres_downgrade_refuses_what_it_cannot_do(database: str) -> None:
    current = postgres_store.SCHEMA_VERSION
    with postgres_schema() as schema:
        with pytest.raises(StoreError, match="a downgrade goes to an older one"):
            await PostgresStore(POSTGRES_URL, schema=schema).downgrade(1)  # no tables yet
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await store.close()
        with pytest.raises(StoreError, match="goes back to version 1 at most"):
            await PostgresStore(POSTGRES_URL, schema=schema).downgrade(0)
        with pytest.raises(StoreError, match=f"has schema version {current}; a downgrade"):
            await PostgresStore(POSTGRES_URL, schema=schema).downgrade(current + 1)
        assert await PostgresStore(POSTGRES_URL, schema=schema).downgrade(current) == current
        await postgres_sql(
            schema, "INSERT INTO schema_migrations (version) VALUES (?)", (current + 1,)
        )
        with pytest.raises(StoreError, match="downgrade it with the release that made it"):
            await PostgresStore(POSTGRES_URL, schema=schema).downgrade(1)
        assert len(await pg_rows(schema, "SELECT version FROM schema_migrations")) == current + 1
    with pytest.raises(StoreError, match="no schema 'no_such_schema_here' to downgrade"):
        await PostgresStore(POSTGRES_URL, schema="no_such_schema_here").downgrade(1)


@pytest.mark.parametrize("database", [pytest.param("postgres", marks=postgres_marks())])
async def test_the_downgrade_command_on_postgres(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    current = postgres_store.SCHEMA_VERSION
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await store.close()
        args = ["downgrade", "--to", "2", "--db", POSTGRES_URL, "--db-schema", schema]
        assert await _run_main(args) == 0
        assert capsys.readouterr().out.startswith(
            f"downgraded {describe(POSTGRES_URL)} schema {schema} from schema version {current}"
            " to 2: "
        )
        versions = await pg_rows(schema, "SELECT version FROM schema_migrations ORDER BY 1")
        assert versions == [(1,), (2,)]


def _still_served(schema: str, sessions: int) -> re.Pattern[str]:
    """The one line ``downgrade`` prints when ``sessions`` replicas serve ``schema``."""
    pids = r"\d+" + r", \d+" * (sessions - 1)
    held = "1 session holds" if sessions == 1 else f"{sessions} sessions hold"
    plural = "s" if sessions != 1 else ""
    return re.compile(
        re.escape(
            f"pinochle-referee: {describe(POSTGRES_URL)} schema {schema!r} is still served:"
            f" {held} its serving lock (backend pid{plural} "
        )
        + pids
        + re.escape("); stop every server of it, then downgrade it\n")
    )


@pytest.mark.parametrize("database", [pytest.param("postgres", marks=postgres_marks())])
async def test_a_postgres_downgrade_is_refused_while_a_replica_serves(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was done under running replicas, which went on serving a schema they do not know. Each
    replica holds the schema's serving lock shared; the downgrade refuses (exit 1, one line,
    nothing changed) while any does, and is done once every replica has stopped."""
    current = postgres_store.SCHEMA_VERSION
    with postgres_schema() as schema:
        args = ["downgrade", "--to", str(current - 1), "--db", POSTGRES_URL, "--db-schema", schema]
        with replica("a", schema, tmp_path) as a, replica("b", schema, tmp_path) as b:
            capsys.readouterr()
            assert await _run_main(args) == 1
            captured = capsys.readouterr()
            assert captured.out == "" and _still_served(schema, 2).fullmatch(captured.err), (
                captured.err
            )
            versions = await pg_rows(schema, "SELECT version FROM schema_migrations")
            assert len(versions) == current
            async with RefereeClient(a.address) as client:  # it serves on
                await client.create_game("partnership", seed="still-served")
            a.process.terminate()
            assert await asyncio.to_thread(a.process.wait, 15) == 0
            assert await _run_main(args) == 1  # b still serves
            assert _still_served(schema, 1).fullmatch(capsys.readouterr().err)
            async with RefereeClient(b.address) as client:
                await client.create_game("partnership", seed="b-serves-on")
        assert await _run_main(args) == 0
        versions = await pg_rows(schema, "SELECT version FROM schema_migrations")
        assert len(versions) == current - 1


@pytest.mark.parametrize("database", [pytest.param("postgres", marks=postgres_marks())])
async def test_a_killed_postgres_replica_no_longer_blocks_a_downgrade(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica that crashes or is SIGKILLed never releases anything itself: its sessions end
    with its connections, and the serving lock with them."""
    current = postgres_store.SCHEMA_VERSION
    with postgres_schema() as schema:
        args = ["downgrade", "--to", str(current - 1), "--db", POSTGRES_URL, "--db-schema", schema]
        with replica("killed", schema, tmp_path) as killed:
            capsys.readouterr()
            assert await _run_main(args) == 1
            assert _still_served(schema, 1).fullmatch(capsys.readouterr().err)
            killed.process.kill()
            await asyncio.to_thread(killed.process.wait, 15)
            # PostgreSQL ends the sessions once it sees their connections closed: soon, not
            # at once.
            async with asyncio.timeout(30):
                while await _run_main(args) != 0:
                    await asyncio.sleep(0.2)
        versions = await pg_rows(schema, "SELECT version FROM schema_migrations")
        assert len(versions) == current - 1


@pytest.mark.parametrize("database", [pytest.param("postgres", marks=postgres_marks())])
async def test_a_postgres_replica_downgraded_while_its_listener_reconnects_stops_serving(
    database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica holds no serving lock while its listener reconnects, and a downgrade landing
    then is not refused. The replica went on serving the older schema; now, once its listener
    has the lock again and finds the schema older than its own, RefereeService's health turns
    NOT_SERVING (the balancer's and readiness probe's; the server as a whole stays SERVING:
    restarting this release would migrate the schema forward again, undoing the rollback),
    and every call that needs the store is answered UNAVAILABLE, reason
    STORE_SCHEMA_CHANGED, nothing of it written. The downgrade is the real command."""
    current = postgres_store.SCHEMA_VERSION
    with postgres_schema() as schema:
        quiet_logs()
        settings = Settings(
            host="127.0.0.1",
            port=0,
            db=POSTGRES_URL,
            db_schema=schema,
            metrics_port=0,
            store_check_seconds=0.05,
            housekeeping_seconds=0.05,
        )
        running = await start_server(settings)
        try:
            store = running.store
            assert isinstance(store, PostgresStore)
            address = f"127.0.0.1:{running.port}"
            async with RefereeClient(address) as client, grpc.aio.insecure_channel(address) as ch:
                table = await new_table(client, "partnership")
                found = await actor(table)
                assert found is not None
                seat, entries = found
                action = pick(entries, random.Random(7))
                health = health_stub(ch)
                watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAMES[0]))
                serving_status = health_pb2.HealthCheckResponse.SERVING
                assert (await watch.read()).status == serving_status
                async with asyncio.timeout(10):
                    while not store.listener_pid:
                        await asyncio.sleep(0.05)
                before = await pg_rows(schema, _STORED_ROWS)
                # A watch open before: it would hear nothing more, ever, so it ends, resumable.
                received: list[dict[str, Any]] = []

                async def watch_until_refused() -> RefereeError | None:
                    try:
                        async for item in table.adj.watch(0):
                            received.append(item)
                    except RefereeError as error:
                        return error
                    return None

                watching = asyncio.ensure_future(watch_until_refused())
                async with asyncio.timeout(10):
                    while not received:
                        await asyncio.sleep(0.02)

                held, release = _hold_reconnection(store, monkeypatch)
                await _lose_the_listener(store, schema)
                await asyncio.wait_for(held.wait(), 10)
                args = ["downgrade", "--to", str(current - 1), "--db", POSTGRES_URL]
                assert await _run_main([*args, "--db-schema", schema]) == 0
                assert capsys.readouterr().out.startswith("downgraded ")
                release.set()

                changed = await asyncio.wait_for(watch.read(), 20)
                assert changed.status == health_pb2.HealthCheckResponse.NOT_SERVING
                for name in ("", SERVICE_NAMES[1]):
                    answer = await health.Check(health_pb2.HealthCheckRequest(service=name))
                    assert answer.status == serving_status, name
                for call in (
                    lambda: table.seats[seat].submit(action),
                    lambda: client.create_game("partnership", seed="after-the-downgrade"),
                ):
                    with pytest.raises(RefereeError) as refused:
                        await call()
                    assert (refused.value.code, refused.value.reason) == (
                        grpc.StatusCode.UNAVAILABLE,
                        "STORE_SCHEMA_CHANGED",
                    )
                    assert "database schema was changed under it" in refused.value.message
                assert await pg_rows(schema, _STORED_ROWS) == before
                ended = await asyncio.wait_for(watching, 10)
                assert ended is not None, "the watch stream stayed open"
                assert (ended.code, ended.reason) == (
                    grpc.StatusCode.UNAVAILABLE,
                    "STORE_SCHEMA_CHANGED",
                )
                last_seq = received[-1]["event"]["seq"]
                assert ended.metadata["after_seq"] == str(last_seq)
                assert f"watch again with after_seq={last_seq} (to another server)" in (
                    ended.message
                )
                with pytest.raises(RefereeError) as again:  # a new one is refused alike
                    await anext(table.adj.watch(0))
                assert again.value.reason == "STORE_SCHEMA_CHANGED"
                # The store said it once; the housekeeping (every 0.05 s here) stops rather
                # than fail and log every round (the refused SubmitAction left its game behind).
                await asyncio.sleep(0.5)
                logged = capsys.readouterr().out
                for noise in (
                    "catch_up_failed",
                    "active_games_recount_failed",
                    "responses_forget_failed",
                ):
                    assert noise not in logged, logged
                watch.cancel()
        finally:
            await running.stop(0)


async def _run_main(args: list[str]) -> int:
    """``main`` runs its own event loop: from a test's loop, in a thread."""

    return await asyncio.to_thread(main, args)


# -- export reads a database as it is --------------------------------------------------------


async def test_export_leaves_a_downgraded_database_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``export`` with the newer release after a downgrade refuses, naming the schema, instead of
    migrating the database forward again (the older release would then refuse to start)."""
    path = tmp_path / "referee.db"
    store = SqliteStore(path)
    await store.open()
    await _games(store)
    await store.close()
    older = sqlite_store.SCHEMA_VERSION - 1
    assert await _run_main(["downgrade", "--to", str(older), "--db", str(path)]) == 0
    capsys.readouterr()
    before = path.read_bytes()
    assert await _run_main(["export", "played", "--db", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"pinochle-referee: {path} has schema version {older}; this code knows"
        f" {sqlite_store.SCHEMA_VERSION}: read it with the release that serves it (serve"
        " migrates a database forward)\n"
    )
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (older,)
    conn.close()


@pytest.mark.parametrize("database", [pytest.param("postgres", marks=postgres_marks())])
async def test_export_creates_no_postgres_schema_and_migrates_none(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --db-schema is an error, not a new schema with empty tables; a downgraded
    schema is refused, not migrated forward."""
    with postgres_schema(create=False) as missing:
        args = ["export", "played", "--db", POSTGRES_URL, "--db-schema", missing]
        assert await _run_main(args) == 1
        assert capsys.readouterr().err == (
            f"pinochle-referee: {describe(POSTGRES_URL)}: no schema {missing!r}\n"
        )
        rows = await pg_rows("public", f"SELECT 1 FROM pg_namespace WHERE nspname = '{missing}'")
        assert rows == []
    with postgres_schema() as empty:  # a schema, but no referee tables in it
        args = ["export", "played", "--db", POSTGRES_URL, "--db-schema", empty]
        assert await _run_main(args) == 1
        assert "holds no referee database" in capsys.readouterr().err
        assert await pg_rows(empty, "SELECT to_regclass('schema_migrations')") == [(None,)]
    with postgres_schema() as schema:
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        await store.close()
        assert await PostgresStore(POSTGRES_URL, schema=schema).downgrade(2)
        args = ["export", "played", "--db", POSTGRES_URL, "--db-schema", schema]
        assert await _run_main(args) == 1
        assert "has schema version 2; this code knows" in capsys.readouterr().err
        versions = await pg_rows(schema, "SELECT version FROM schema_migrations ORDER BY 1")
        assert versions == [(1,), (2,)]
