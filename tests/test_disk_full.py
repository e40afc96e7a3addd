"""The embedded store when the disk fills up: refused, never lost, and on again afterwards.

A full disk is the usual way a single-machine SQLite service fails. Two ways in:

* a real full file system (a small tmpfs, filled up with a filler file but for room for a
  commit or two), where the WAL's write fails at ``COMMIT`` with ``SQLITE_FULL``. Mounting needs
  root with ``CAP_SYS_ADMIN``; elsewhere the test is skipped and says why;
* a database that may not grow (``PRAGMA max_page_count`` on the store's writer connection),
  where a statement of the batch fails before the ``COMMIT``. It runs everywhere.

Either way, every write is answered ``UNAVAILABLE`` ("retrying with the same request_id is
safe"), reads and health checks go on, nothing is acknowledged that is not durable, and once
there is room again the same request is applied exactly once, the game plays on, the audit log
verifies, the export audits as legal, and a restart finds every acknowledged action.
"""

from __future__ import annotations

import os
import random
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from pinochle_client import RefereeError

from referee.audit import audit_record
from referee.store.sqlite import SqliteStore
from tests.service_helpers import (
    Served,
    Table,
    actor,
    health_stub,
    new_table,
    pick,
    play,
    refused,
    serving,
)

STORE_FAILED = "the game store failed; retrying with the same request_id is safe"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted afterwards; skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(
            "a real full disk needs a tmpfs mount (root with CAP_SYS_ADMIN); mount said: "
            + (done.stderr.strip() or f"exit {done.returncode}")
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


async def _next_action(table: Table, rng: random.Random) -> tuple[int, dict[str, Any]]:
    found = await actor(table)
    assert found is not None, "the game ended before the disk filled"
    seat, entries = found
    return seat, pick(entries, rng)


async def _through_an_outage(
    srv: Served,
    table: Table,
    fill: Callable[[], None],
    free: Callable[[], None],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Play until a write fails, check the outage, make room, check the recovery; the
    adjudicator's final view and the export."""
    rng = random.Random(7)
    acknowledged = (await table.adj.view())["version"]
    fill()
    failed: tuple[int, dict[str, Any], str] | None = None
    for _ in range(400):
        seat, action = await _next_action(table, rng)
        request_id = uuid.uuid4().hex
        try:
            result = await table.seats[seat].submit(action, request_id=request_id)
        except RefereeError as error:
            assert (error.code, error.message) == (grpc.StatusCode.UNAVAILABLE, STORE_FAILED)
            failed = (seat, action, request_id)
            break
        assert result["version"] == acknowledged + 1
        acknowledged = result["version"]
    assert failed is not None, "no write failed: the disk never filled"
    seat, action, request_id = failed

    # The outage: writes fail, the same request again too; reads and health go on, and show
    # the last acknowledged version.
    again = await refused(table.seats[seat].submit(action, request_id=request_id))
    assert (again.code, again.message) == (grpc.StatusCode.UNAVAILABLE, STORE_FAILED)
    assert (await table.adj.view())["version"] == acknowledged
    assert await table.seats[seat].legal_actions()
    checked = await health_stub(srv.client.channel).Check(health_pb2.HealthCheckRequest())
    assert checked.status == health_pb2.HealthCheckResponse.SERVING

    # Room again: the same request is applied once, and the game plays on to its end.
    free()
    result = await table.seats[seat].submit(action, request_id=request_id)
    assert result["version"] == acknowledged + 1
    retried = await table.seats[seat].submit(
        action, expected_version=acknowledged, request_id=request_id
    )
    assert retried == result  # the stored answer, not a second action
    await play(table, rng)
    assert await table.adj.verify_audit_log()
    record = await table.adj.export()
    verdict = audit_record(record)
    assert verdict["legal"] and verdict["finished"], verdict
    return await table.adj.view(), record


async def _same_after_restart(
    tmp_path: Path, db: Path, table: Table, final: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """A new server on the same database finds the finished game as the old one left it."""
    async with serving(tmp_path, db=str(db)) as srv:
        adjudicator = srv.client.session(table.game_id, table.adjudicator_token)
        assert (await adjudicator.view(), await adjudicator.export()) == final


async def test_a_full_disk_refuses_writes_loses_nothing_and_recovers(
    tmp_path: Path, small_disk: Path
) -> None:
    db = small_disk / "referee.db"
    filler = small_disk / "filler"

    def fill() -> None:
        stat = os.statvfs(small_disk)
        room = stat.f_bavail * stat.f_frsize
        filler.write_bytes(bytes(max(0, room - 96 * 1024)))  # room for a commit or two

    async with serving(tmp_path, db=str(db)) as srv:
        table = await new_table(srv.client, "partnership", {"target": 200}, seed="full disk")
        final = await _through_an_outage(srv, table, fill, filler.unlink)
    await _same_after_restart(tmp_path, db, table, final)


async def test_a_database_that_cannot_grow_refuses_writes_loses_nothing_and_recovers(
    tmp_path: Path,
) -> None:
    db = tmp_path / "referee.db"
    async with serving(tmp_path, db=str(db)) as srv:
        store = srv.running.store
        assert isinstance(store, SqliteStore)
        writer = store._writer_conn  # the limit is per connection: the writer's
        assert writer is not None

        def limit(pages: Callable[[], int]) -> Callable[[], None]:
            return lambda: writer.execute(f"PRAGMA max_page_count = {pages()}").close()

        def current() -> int:
            (count,) = writer.execute("PRAGMA page_count").fetchone()
            return int(count) + 1

        table = await new_table(srv.client, "partnership", {"target": 200}, seed="no growth")
        final = await _through_an_outage(srv, table, limit(current), limit(lambda: 1 << 30))
    await _same_after_restart(tmp_path, db, table, final)
