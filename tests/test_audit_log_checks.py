"""The checks of a stored game's audit log, through a real server and on both stores: a page of
``GetAuditLog`` that reaches a damaged row (DATA_LOSS, not INTERNAL), ``VerifyAuditLog``'s
comparison of the audit log with the game's log, ``pinochle-referee verify-audit``, and
``pinochle-referee list-games``, which finds the ids it and ``export`` take.

Each test runs on SQLite and on PostgreSQL (a schema of its own, dropped afterwards; skipped
with the reason when PostgreSQL is unreachable), and changes rows with SQL as someone with
write access to the database could.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from pinochle_client import RefereeError
from structlog.testing import capture_logs

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee import cli
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    SHORT_GAME,
    Served,
    Table,
    bearer,
    new_table,
    play,
    play_step,
    serving,
)
from tests.test_store import (
    POSTGRES_URL,
    postgres_marks,
    postgres_schema,
    postgres_sql,
    sqlite_sql,
)


@dataclass(frozen=True)
class Database:
    """A database to serve (``--db``, ``--db-schema``) and a way to change its rows."""

    name: str
    db: str
    schema: str
    sql: Callable[[str, Sequence[object]], Awaitable[None]]  # ``?`` placeholders, committed


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=postgres_marks())])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "referee.db"
        yield Database("sqlite", str(path), "", functools.partial(sqlite_sql, path))
        return
    with postgres_schema("test_audit_checks") as schema:
        yield Database("postgres", POSTGRES_URL, schema, functools.partial(postgres_sql, schema))


@contextlib.asynccontextmanager
async def served(tmp_path: Path, database: Database) -> AsyncIterator[Served]:
    async with serving(tmp_path, db=database.db, db_schema=database.schema) as srv:
        yield srv


async def _played(srv: Served, seed: str, actions: int) -> Table:
    """A partnership game with ``actions`` accepted actions and one refused request."""
    table = await new_table(srv.client, "partnership", seed=seed)
    rng = random.Random(seed)
    for _ in range(actions):
        assert await play_step(table, rng) is not None
    with contextlib.suppress(RefereeError):
        await table.seats[0].submit({"type": "play", "card": "AS"}, expected_version=0)
    return table


async def _data_loss(call: Awaitable[Any]) -> RefereeError:
    with pytest.raises(RefereeError) as caught:
        await call
    return caught.value


# JSON with a number no double holds: valid JSON (PostgreSQL's json column takes it), which no
# entry can be read from on either store.
UNREADABLE_ACTION = '{"type":"bid","amount":1e999}'


async def test_a_page_reaching_an_unreadable_row_is_data_loss(
    tmp_path: Path, database: Database
) -> None:
    """Was INTERNAL ("internal server error"): the store's read raised on the row. DATA_LOSS
    with reason AUDIT_ENTRY_UNREADABLE and the entry's seq, for every role, logged as an
    error; pages before and after the row still read, VerifyAuditLog still names it, and a
    row the store reads but no AuditEntry holds (a time beyond the Timestamp's range) is
    answered the same way."""
    async with served(tmp_path, database) as srv:
        table = await _played(srv, "unreadable", 6)
        cast = "::json" if database.name == "postgres" else ""
        await database.sql(
            f"UPDATE audit SET action = ?{cast} WHERE game_id = ? AND seq = 3",
            (UNREADABLE_ACTION, table.game_id),
        )
        with capture_logs() as logs:
            for session in (table.adj, table.seats[2], table.spec):
                error = await _data_loss(session.audit_log())
                assert error.code == grpc.StatusCode.DATA_LOSS, error
                assert (error.reason, error.metadata) == ("AUDIT_ENTRY_UNREADABLE", {"seq": "3"})
                assert "1e999" not in error.message
        lines = [line for line in logs if line["event"] == "audit_entry_unreadable"]
        assert [(line["log_level"], line["seq"]) for line in lines] == [("error", 3)] * 3
        assert [e["seq"] for e in await table.adj.audit_log(page_size=2)] == [1, 2]
        assert [e["seq"] for e in await table.adj.audit_log(after_seq=3)] == list(range(4, 8))
        check = await table.spec.check_audit_log()
        assert (check.intact, check.first_bad_seq) == (False, 3), check

        other = await _played(srv, "far-time", 3)
        await database.sql(
            "UPDATE audit SET time = ? WHERE game_id = ? AND seq = 2", (1e15, other.game_id)
        )
        error = await _data_loss(other.adj.audit_log())
        assert (error.code, error.reason) == (grpc.StatusCode.DATA_LOSS, "AUDIT_ENTRY_UNREADABLE")
        assert error.metadata == {"seq": "2"}


@pytest.mark.parametrize("action", ['["AS","KS"]', '"AS"', "5"])
async def test_an_action_that_is_no_json_object_is_data_loss(
    tmp_path: Path, database: Database, action: str
) -> None:
    """An entry's action (and public_action) is a JSON object or null. Valid JSON of another
    kind (either store's column takes it) was read back as it was, and building the entry
    raised AttributeError, which nothing caught: INTERNAL for every role, no entry named. Now
    the store refuses to read it, as any value no entry holds: DATA_LOSS naming the entry, and
    VerifyAuditLog says the entry cannot be read."""
    async with served(tmp_path, database) as srv:
        table = await _played(srv, f"not-an-object-{action}", 4)
        cast = "::json" if database.name == "postgres" else ""
        for column in ("action", "public_action"):
            await database.sql(
                f"UPDATE audit SET {column} = ?{cast} WHERE game_id = ? AND seq = 2",
                (action, table.game_id),
            )
        for session in (table.adj, table.seats[2], table.spec):
            error = await _data_loss(session.audit_log())
            assert (error.code, error.reason) == (
                grpc.StatusCode.DATA_LOSS,
                "AUDIT_ENTRY_UNREADABLE",
            ), error
            assert error.metadata == {"seq": "2"}
        check = await table.spec.check_audit_log()
        assert (check.intact, check.first_bad_seq) == (False, 2), check
        assert check.detail.startswith("entry 2 cannot be read: "), check


async def test_an_action_nested_deeper_than_a_struct_holds_is_data_loss(
    tmp_path: Path, database: Database
) -> None:
    """A JSON object nested deeper than protobuf takes a Struct (100 levels; either store's
    column takes it) made building the entry raise protobuf's DecodeError, which nothing
    caught: INTERNAL for every role. It is a value no AuditEntry holds, answered DATA_LOSS
    naming the entry as the others are."""
    async with served(tmp_path, database) as srv:
        table = await _played(srv, "nested", 4)
        cast = "::json" if database.name == "postgres" else ""
        nested = '{"type":"bid","n":' * 120 + "1" + "}" * 120
        for column in ("action", "public_action"):
            await database.sql(
                f"UPDATE audit SET {column} = ?{cast} WHERE game_id = ? AND seq = 2",
                (nested, table.game_id),
            )
        for session in (table.adj, table.seats[2], table.spec):
            error = await _data_loss(session.audit_log())
            assert (error.code, error.reason, error.metadata) == (
                grpc.StatusCode.DATA_LOSS,
                "AUDIT_ENTRY_UNREADABLE",
                {"seq": "2"},
            ), error
        check = await table.spec.check_audit_log()
        assert (check.intact, check.first_bad_seq) == (False, 2), check


async def _verify_audit(*argv: str, database: Database) -> int:
    """``pinochle-referee verify-audit`` in a thread (it runs its own event loop), as a user
    would run it beside the server."""
    schema = ["--db-schema", database.schema] if database.schema else []
    return await asyncio.to_thread(cli.main, ["verify-audit", *argv, "--db", database.db, *schema])


async def _accepted_play(table: Table) -> dict[str, Any]:
    """An accepted ``play`` entry of the game (the adjudicator's view: the card shows)."""
    entries = await table.adj.audit_log()
    plays = [
        e
        for e in entries
        if e["outcome"] == "AUDIT_OUTCOME_ACCEPTED" and e["action"]["type"] == "play"
    ]
    return plays[len(plays) // 2]


async def test_a_change_to_the_games_log_breaks_the_audit_log(
    tmp_path: Path, database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: the audit log was checked alone, so an accepted action changed in the game's log
    (what a restart replays, WatchGame and ExportGame send) left VerifyAuditLog intact. Each
    accepted entry is now compared with the game's log: a finished game and one mid-hand are
    intact, and a played card changed in the log is found at its entry, by every role, without
    the card in ``detail`` (a seat may ask). ``verify-audit`` says the same, beside the server."""
    async with served(tmp_path, database) as srv:
        finished = await new_table(srv.client, "two-handed", SHORT_GAME["two-handed"], seed="f")
        await play(finished, random.Random(2))
        mid_hand = await _played(srv, "mid-hand", 9)
        for table in (finished, mid_hand):
            assert await table.seats[1].verify_audit_log()
        capsys.readouterr()
        assert await _verify_audit(database=database) == 0
        out = capsys.readouterr().out
        assert out.endswith(": every audit log intact\n") and "checked 2 games in" in out, out

        entry = await _accepted_play(finished)
        card = entry["action"]["card"]
        other = next(c for c in ("AS", "9C", "QD") if c != card)
        changed = json.dumps({**entry["action"], "card": other}, separators=(",", ":"))
        await database.sql(
            "UPDATE log SET payload = ? WHERE game_id = ? AND kind = 'action' AND version = ?",
            (changed, finished.game_id, entry["version"]),
        )
        for session in (finished.seats[0], finished.spec, finished.adj):
            check = await session.check_audit_log()
            assert (check.intact, check.first_bad_seq) == (False, entry["seq"]), check
            assert "does not match the game's log" in check.detail, check.detail
            assert card not in check.detail and other not in check.detail, check.detail
        assert await mid_hand.seats[0].verify_audit_log()

        assert await _verify_audit(database=database) == 1
        lines = capsys.readouterr().out.splitlines()
        assert lines[0] == (
            f"game {finished.game_id}: audit log not intact at entry {entry['seq']}: {check.detail}"
        ), lines
        assert lines[1].startswith("checked 2 games in"), lines
        assert lines[1].endswith(": 1 audit log not intact"), lines
        assert await _verify_audit(mid_hand.game_id, database=database) == 0
        await play_step(mid_hand, random.Random(1))  # the server serves on


async def test_verify_audit_names_a_tampered_entry_and_refuses_what_it_cannot_check(
    tmp_path: Path, database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    """``verify-audit`` on both stores: a changed audit row is exit 1 with its seq, the games
    named are the ones checked, an id the database does not hold is exit 2 with nothing
    checked, and so is a database that holds no referee tables."""
    async with served(tmp_path, database) as srv:
        tampered = await _played(srv, "tampered", 4)
        intact = await _played(srv, "intact", 4)
        await database.sql(
            "UPDATE audit SET code = 'NOT_YOUR_TURN' WHERE game_id = ? AND seq = 3",
            (tampered.game_id,),
        )
        capsys.readouterr()
        assert await _verify_audit(intact.game_id, tampered.game_id, database=database) == 1
        out = capsys.readouterr().out.splitlines()
        assert out[0] == (
            f"game {tampered.game_id}: audit log not intact at entry 3: entry 3 does not match"
            " its hash"
        ), out
        assert "checked 2 games" in out[1] and "(10 audit entries)" in out[1], out
        assert await _verify_audit(intact.game_id, intact.game_id, database=database) == 0
        assert "checked 1 game in" in capsys.readouterr().out

        assert await _verify_audit(intact.game_id, "no-such-game", database=database) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "holds no game 'no-such-game'" in captured.err, captured

    if database.name == "sqlite":
        empty = tmp_path / "not-a-referee.db"
        sqlite3.connect(empty).close()
        gone, said = Database("sqlite", str(empty), "", database.sql), "holds no referee database"
    else:
        missing = database.schema + "_missing"
        gone, said = Database("postgres", database.db, missing, database.sql), "no schema"
    assert await _verify_audit(database=gone) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and said in captured.err, captured


RFC_3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


async def _list_games(*argv: str, database: Database) -> int:
    """``pinochle-referee list-games`` in a thread, beside the server (as ``_verify_audit``)."""
    schema = ["--db-schema", database.schema] if database.schema else []
    return await asyncio.to_thread(cli.main, ["list-games", *argv, "--db", database.db, *schema])


async def test_list_games_prints_each_stored_game_as_list_games_gives_it(
    tmp_path: Path,
    database: Database,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``list-games`` on both stores, beside the server: nothing for a database without games,
    then one JSON line per game in the store's order (oldest first), its public fields as
    ListGames gives them (the times as its JSON, RFC 3339 in UTC), read a page at a time (one
    game a page here, so the paging is crossed), and filtered by state and variant."""
    monkeypatch.setattr(cli, "_LIST_PAGE", 1)
    async with served(tmp_path, database) as srv:
        capsys.readouterr()
        assert await _list_games(database=database) == 0
        assert capsys.readouterr() == ("", "")

        finished = await new_table(srv.client, "two-handed", SHORT_GAME["two-handed"], seed="f")
        await play(finished, random.Random(3))
        playing = await new_table(srv.client, "cutthroat", players=["Ann", "Bo", "Cy"], seed="p")
        await play_step(playing, random.Random(4))
        page = await srv.referee.ListGames(
            pb.ListGamesRequest(), metadata=bearer(ADJUDICATOR_TOKEN)
        )
        given = json_format.MessageToDict(page)["games"]

        assert await _list_games(database=database) == 0
        captured = capsys.readouterr()
        listed = [json.loads(line) for line in captured.out.splitlines()]
        assert captured.err == "" and [game["game_id"] for game in listed] == [
            finished.game_id,
            playing.game_id,
        ], captured
        for game, expected, table in zip(listed, given, (finished, playing), strict=True):
            view = await table.adj.view()
            assert game == {
                "game_id": table.game_id,
                "variant": expected["variant"],
                "version": view["version"],
                "over": view["over"],
                "created_at": expected["createdAt"],
                "last_active_at": expected["lastActiveAt"],
                "players": expected.get("playerNames", []),
            }, game
            for stamp in (game["created_at"], game["last_active_at"]):
                assert RFC_3339_UTC.fullmatch(stamp), game
        assert [game["over"] for game in listed] == [True, False]
        assert listed[1]["players"] == ["Ann", "Bo", "Cy"]

        for argv, expected_ids in (
            (["--state", "over"], [finished.game_id]),
            (["--state", "in-progress"], [playing.game_id]),
            (["--variant", "cutthroat"], [playing.game_id]),
            (["--state", "over", "--variant", "cutthroat"], []),
            (["--variant", "partnership"], []),
        ):
            assert await _list_games(*argv, database=database) == 0
            out = capsys.readouterr().out
            assert [json.loads(line)["game_id"] for line in out.splitlines()] == expected_ids, argv
        await play_step(playing, random.Random(5))  # the server serves on


async def test_list_games_refuses_a_database_it_cannot_read(
    tmp_path: Path, database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 and one line, nothing listed, and nothing created: a missing SQLite file, one
    that is no database, a missing PostgreSQL schema."""
    if database.name == "sqlite":
        garbage = tmp_path / "garbage.db"
        garbage.write_bytes(b"no database here" * 100)
        unreadable = [
            (Database("sqlite", str(garbage), "", database.sql), "file is not a database"),
            (Database("sqlite", str(tmp_path / "missing.db"), "", database.sql), "no database at"),
        ]
    else:
        missing = database.schema + "_missing"
        unreadable = [(Database("postgres", database.db, missing, database.sql), "no schema")]
    for gone, said in unreadable:
        assert await _list_games(database=gone) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.splitlines()) == 1, captured
        assert captured.err.startswith("pinochle-referee: ") and said in captured.err, captured
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--state", "done"], "argument --state: invalid choice: 'done'"),
        (["--variant", "pinochle"], "argument --variant: invalid choice: 'pinochle'"),
    ],
)
def test_list_games_refuses_a_bad_option(
    tmp_path: Path, option: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state or a variant it does not know is exit 2, the error's line naming it, before the
    database is opened (argparse's usage line above it, as for every command's bad option)."""
    with pytest.raises(SystemExit) as exited:
        cli.main(["list-games", *option, "--db", str(tmp_path / "referee.db")])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and said in captured.err.splitlines()[-1], captured
    assert list(tmp_path.iterdir()) == []
