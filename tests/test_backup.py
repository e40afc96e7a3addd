"""``pinochle-referee backup``: a consistent copy of the embedded database while it is served,
checked, and a server that restores from it plays on (README "Backing up").

Copying the SQLite file itself while a server runs is not safe (the WAL holds commits the main
file does not have yet), so the command uses SQLite's online backup in one step: the copy holds
every transaction committed before it began.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pinochle_client import RefereeClient

from referee import cli
from referee.audit import audit_record
from referee.store import sqlite as sqlite_store
from referee.store.sqlite import SqliteStore
from tests.service_helpers import (
    SHORT_GAME,
    Table,
    free_port,
    new_table,
    play,
    play_step,
    serving,
)
from tests.test_service_crash import running


def _backup(
    capsys: pytest.CaptureFixture[str], db: str | Path, destination: Path
) -> tuple[int, str]:
    code = cli.main(["backup", "--db", str(db), str(destination)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


async def test_a_backup_under_load_holds_every_action_acknowledged_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four games are played while the copy is made; the copy is checked by the command, then
    served: each game stands at a version between the last one acknowledged before the
    backup began and the last one acknowledged at all, its audit log is intact, it plays on to
    its end from the copy, and its export audits as legal."""
    source, copy = tmp_path / "x.db", tmp_path / "backup" / "copy.db"
    copy.parent.mkdir()
    async with serving(tmp_path) as srv:
        tables = [
            await new_table(srv.client, "partnership", SHORT_GAME["partnership"], seed=f"b{i}")
            for i in range(4)
        ]
        acknowledged = {table.game_id: 0 for table in tables}
        stopping = asyncio.Event()

        async def player(table: Table, rng: random.Random) -> None:
            while not stopping.is_set():
                step = await play_step(table, rng)
                if step is None:
                    return
                acknowledged[table.game_id] = step.result["version"]

        players = [
            asyncio.ensure_future(player(table, random.Random(index)))
            for index, table in enumerate(tables)
        ]
        async with asyncio.timeout(20):  # the load is running
            while min(acknowledged.values()) < 5:
                await asyncio.sleep(0.01)
        before = dict(acknowledged)
        code = await asyncio.to_thread(cli.main, ["backup", "--db", str(source), str(copy)])
        stopping.set()
        await asyncio.gather(*players)
        last = dict(acknowledged)
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"backed up {source} to {copy}: 4 games (4 in progress)" in out, out
    assert "integrity ok; every audit log intact" in out, out
    assert sorted(path.name for path in copy.parent.iterdir()) == ["copy.db"]  # no -wal, .partial
    async with serving(tmp_path / "restored", db=str(copy)) as restored:
        for index, table in enumerate(tables):
            again = table.through(restored.client)
            version = (await again.adj.view())["version"]
            assert before[table.game_id] <= version <= last[table.game_id], (before, last)
            assert await again.adj.verify_audit_log()
            await play(again, random.Random(50 + index))
            final = await again.adj.view()
            verdict = audit_record(await again.seats[0].export())
            assert final["over"] and verdict["legal"] and verdict["finished"], verdict


async def test_backup_and_export_work_while_another_process_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server holds its database's serving lock (one server per file); ``backup`` and
    ``export`` take none, so both read a database another process serves, which serves on."""
    db, copy = tmp_path / "referee.db", tmp_path / "copy.db"
    with running(db, free_port(), tmp_path / "server.log") as server:
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            table = await new_table(client, "partnership", seed="b")
            await play(table, random.Random(4), hands=1)
            capsys.readouterr()
            code, text = await asyncio.to_thread(_backup, capsys, db, copy)
            assert code == 0 and "1 game (1 in progress)" in text, text
            code = await asyncio.to_thread(cli.main, ["export", table.game_id, "--db", str(db)])
            captured = capsys.readouterr()
            assert code == 0, captured.err
            assert audit_record(json.loads(captured.out))["legal"]
            await play(table, random.Random(5), hands=1)  # served on


async def test_export_reads_a_backup_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A backup is a file whole in itself (journal mode DELETE, no -wal beside it). Was:
    ``export`` switched it to WAL to read it, which wrote to it and left -wal and -shm files
    beside it. Reading now changes nothing."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="read-as-is")
        await play(table, random.Random(6), hands=1)
    copy = tmp_path / "copy.db"
    code, text = _backup(capsys, tmp_path / "x.db", copy)
    assert code == 0, text
    before = copy.read_bytes()
    code = await asyncio.to_thread(cli.main, ["export", table.game_id, "--db", str(copy)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert audit_record(json.loads(captured.out))["legal"]
    assert copy.read_bytes() == before
    assert sorted(p.name for p in tmp_path.glob("copy.db*")) == ["copy.db"]


def test_a_backup_of_what_is_no_referee_database_copies_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: another program's SQLite file (or an empty one) was copied and kept, with "integrity
    cannot be checked: no such table: games; every audit log intact". Now refused, one line,
    exit 1, nothing copied."""
    other, copy = tmp_path / "other.db", tmp_path / "copy.db"
    conn = sqlite3.connect(other)
    with conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    code, text = _backup(capsys, other, copy)
    assert code == 1
    assert text == f"pinochle-referee: {other} holds no referee database: nothing copied\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


async def test_a_backup_of_a_tampered_database_is_kept_and_says_what_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The copy is what the source held, so it is kept; the exit status (1) and the message
    name the game whose audit chain does not verify."""
    async with serving(tmp_path) as srv:
        intact = await new_table(srv.client, "partnership", seed="intact")
        tampered = await new_table(srv.client, "partnership", seed="tampered")
        for table in (intact, tampered):
            await play(table, random.Random(3), hands=1)
    conn = sqlite3.connect(tmp_path / "x.db")
    with conn:
        conn.execute(
            "UPDATE audit SET outcome = 'refused' WHERE game_id = ? AND seq = 4",
            (tampered.game_id,),
        )
    conn.close()
    copy = tmp_path / "copy.db"
    code, text = _backup(capsys, tmp_path / "x.db", copy)
    assert code == 1 and copy.is_file(), text
    assert "1 audit log not intact" in text, text
    assert f"game {tampered.game_id}: audit log not intact: entry 4" in text, text
    assert intact.game_id not in text


async def test_a_backup_names_a_tampered_row_it_cannot_read_and_counts_every_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row whose action is not JSON any more (SQLite's columns take any text) is a broken
    audit log like any other: the check raised on it (a JSONDecodeError out of ``backup``), and
    the entries counted stopped at a game's first bad row."""
    async with serving(tmp_path) as srv:
        tampered = await new_table(srv.client, "partnership", seed="unreadable")
        await play(tampered, random.Random(3), hands=1)
    conn = sqlite3.connect(tmp_path / "x.db")
    with conn:
        conn.execute(
            "UPDATE audit SET action = 'not json' WHERE game_id = ? AND seq = 2",
            (tampered.game_id,),
        )
        ((entries,),) = conn.execute("SELECT COUNT(*) FROM audit").fetchall()
    conn.close()
    copy = tmp_path / "copy.db"
    code, text = _backup(capsys, tmp_path / "x.db", copy)
    assert code == 1 and copy.is_file(), text
    assert f"game {tampered.game_id}: audit log not intact: entry 2 cannot be read" in text, text
    assert f"{entries:,} audit entries" in text, text


async def test_a_backup_names_a_game_whose_log_no_longer_matches_its_audit_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The copy's check is VerifyAuditLog's, the game's log compared too: an accepted action
    moved to another seat in the log (the audit chain untouched) is a broken audit log."""
    async with serving(tmp_path) as srv:
        changed = await new_table(srv.client, "partnership", seed="changed-log")
        await play(changed, random.Random(3), hands=1)
    conn = sqlite3.connect(tmp_path / "x.db")
    with conn:
        conn.execute(
            "UPDATE log SET seat = (seat + 1) % 4 WHERE game_id = ? AND kind = 'action'"
            " AND version = 2",
            (changed.game_id,),
        )
    conn.close()
    code, text = _backup(capsys, tmp_path / "x.db", tmp_path / "copy.db")
    assert code == 1, text
    assert (
        f"game {changed.game_id}: audit log not intact: entry 2 (accepted, version 2) does not"
        " match the game's log"
    ) in text, text


async def _empty_referee_database(path: Path) -> Path:
    """A referee database with no game: the store's schema, made as a server makes it."""
    store = SqliteStore(path)
    await store.open()
    await store.close()
    return path


def test_backup_refuses_what_it_cannot_do_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.db"
    code, text = _backup(capsys, missing, tmp_path / "copy.db")
    assert (code, sorted(p.name for p in tmp_path.iterdir())) == (1, []), text
    assert f"no database at {missing}" in text
    source = tmp_path / "source.db"
    sqlite3.connect(source).close()
    existing = tmp_path / "existing.db"
    existing.write_bytes(b"keep me")
    code, text = _backup(capsys, source, existing)
    assert code == 1 and existing.read_bytes() == b"keep me", text
    assert "already exists" in text
    code, text = _backup(capsys, "postgresql://127.0.0.1/test", tmp_path / "pg.db")
    assert code == 2 and "pg_dump" in text and not (tmp_path / "pg.db").exists(), text


async def test_a_file_named_like_the_copy_in_progress_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the copy was written in DESTINATION.partial, deleted first when it existed, so a
    file of that name (another user's, or a concurrent backup's copy half-made) was lost. Now
    the copy is written in a new file of its own, and a DESTINATION.partial is left as it was
    whether the backup finishes or not. The copy keeps the permissions a backup always had:
    SQLite's for a new database (0644 less the umask), not a temporary file's 0600."""
    source = await _empty_referee_database(tmp_path / "source.db")
    backups = tmp_path / "backups"
    backups.mkdir()
    theirs = backups / "copy.db.partial"
    theirs.write_bytes(b"another backup's copy, half made")

    code, text = _backup(capsys, source, backups / "copy.db")
    assert code == 0, text
    assert sorted(p.name for p in backups.iterdir()) == ["copy.db", "copy.db.partial"]
    assert theirs.read_bytes() == b"another backup's copy, half made"
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE((backups / "copy.db").stat().st_mode) == 0o644 & ~umask

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)  # the copy's flush, before it is renamed
    (backups / "again.db.partial").write_bytes(b"someone's")
    code, text = _backup(capsys, source, backups / "again.db")
    assert code == 1 and "No space left on device" in text, text
    assert sorted(p.name for p in backups.iterdir()) == [
        "again.db.partial",
        "copy.db",
        "copy.db.partial",
    ]
    assert (backups / "again.db.partial").read_bytes() == b"someone's"
    assert theirs.read_bytes() == b"another backup's copy, half made"


@pytest.mark.parametrize(
    ("stop", "status"),
    [(OSError(errno.ENOSPC, "No space left on device"), 1), (KeyboardInterrupt(), 130)],
)
def test_a_backup_that_does_not_finish_leaves_no_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stop: BaseException,
    status: int,
) -> None:
    """Was: a full disk when the copy was flushed was a traceback, and it or Ctrl-C left the
    half-made ``.partial`` file behind. Now one line (exit 1), or, for Ctrl-C, exit 130 and a
    line saying that nothing was written (it said nothing, so a user could not tell whether a
    file at the destination would be a backup), and nothing is left: neither the copy nor the
    partial file."""
    source = tmp_path / "source.db"
    conn = sqlite3.connect(source)
    conn.execute("PRAGMA user_version = 1")  # a referee database's schema version
    conn.close()
    backups = tmp_path / "backups"
    backups.mkdir()

    def fsync(fd: int) -> None:
        raise stop

    monkeypatch.setattr(os, "fsync", fsync)  # the copy's flush, before it is renamed
    code, text = _backup(capsys, source, backups / "copy.db")
    assert (code, list(backups.iterdir())) == (status, []), text
    if status == 1:
        assert (
            text
            == f"pinochle-referee: cannot back up {source}: [Errno 28] No space left on device\n"
        )
    else:
        assert text == (
            f"pinochle-referee: backup interrupted: nothing was written to {backups / 'copy.db'}\n"
        )


def test_a_backup_interrupted_once_the_copy_has_its_name_says_the_copy_is_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the finished, flushed copy took the destination's name (while it was checked,
    or before the copy's temporary name went): the destination is a whole backup, and the line
    says so and that it was not checked (exit 130; it said nothing, as if nothing were there).
    No ``.partial`` file is left."""
    source = asyncio.run(_empty_referee_database(tmp_path / "source.db"))
    backups = tmp_path / "backups"
    backups.mkdir()
    link = os.link

    def link_then_stop(src: object, dst: object) -> None:
        link(src, dst)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    def check_then_stop(path: Path) -> object:
        raise KeyboardInterrupt

    for name, target, stop in (
        ("linked.db", os, ("link", link_then_stop)),
        ("checked.db", sqlite_store, ("_check_copy", check_then_stop)),
    ):
        destination = backups / name
        with monkeypatch.context() as patched:
            patched.setattr(target, *stop)
            code, text = _backup(capsys, source, destination)
        assert (code, text) == (
            130,
            f"pinochle-referee: backup interrupted: {destination} holds the whole copy, but it"
            " was not checked (back up again to have it checked)\n",
        )
        copy = sqlite3.connect(destination)
        try:
            assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert copy.execute("SELECT COUNT(*) FROM games").fetchone() == (0,)
        finally:
            copy.close()
    assert sorted(path.name for path in backups.iterdir()) == ["checked.db", "linked.db"]


def test_ctrl_c_as_the_copys_file_is_made_leaves_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: Ctrl-C that came just after the copy's new, empty ``.partial`` file was made, before
    the backup knew its name, left that file behind. Ctrl-C is held back for those few steps
    and comes right after them: exit 130, nothing written, nothing left."""
    source = asyncio.run(_empty_referee_database(tmp_path / "source.db"))
    backups = tmp_path / "backups"
    backups.mkdir()
    close = os.close
    sent: list[int] = []

    def close_then_ctrl_c(fd: int) -> None:
        close(fd)
        if not sent:  # the first close is the new .partial file's
            sent.append(fd)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "close", close_then_ctrl_c)
    code, text = _backup(capsys, source, backups / "copy.db")
    assert sent, "the partial file was made"
    assert (code, text) == (
        130,
        f"pinochle-referee: backup interrupted: nothing was written to {backups / 'copy.db'}\n",
    )
    assert list(backups.iterdir()) == []


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_a_backup_stopped_by_a_signal_leaves_no_file(tmp_path: Path, stop: signal.Signals) -> None:
    """Was: SIGTERM (``timeout``, a service manager, a job being stopped) or SIGHUP (the terminal
    closed) killed the process in the middle of the copy, and its half-made ``.partial`` file
    stayed beside the destination. Now they stop a backup as Ctrl-C does: nothing is left, one
    line says so, and the exit status is the shell's for that signal (128 + its number)."""
    source = asyncio.run(_empty_referee_database(tmp_path / "source.db"))
    backups = tmp_path / "backups"
    backups.mkdir()
    destination = backups / "copy.db"
    script = (
        "import os, sys\n"
        "from referee import cli\n"
        "def fsync(fd):\n"  # the copy is written, not yet flushed: the signal comes now
        f"    os.kill(os.getpid(), {int(stop)})\n"
        "os.fsync = fsync\n"
        f"sys.exit(cli.main(['backup', '--db', {str(source)!r}, {str(destination)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        128 + stop,
        "",
        f"pinochle-referee: backup interrupted: nothing was written to {destination}\n",
    )
    assert list(backups.iterdir()) == []


def test_a_backup_into_a_missing_directory_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: "cannot back up SOURCE: unable to open database file", which blamed the source."""
    source = tmp_path / "source.db"
    sqlite3.connect(source).close()
    destination = tmp_path / "typo" / "copy.db"
    code, text = _backup(capsys, source, destination)
    assert (
        code == 1
        and text == f"pinochle-referee: no directory {destination.parent} for {destination}\n"
    )
    assert not destination.parent.exists()


@pytest.mark.parametrize(
    "link_error", [None, errno.EPERM, errno.ENOSYS], ids=["hard-links", "EPERM", "ENOSYS"]
)
async def test_a_destination_made_while_the_copy_is_written_is_not_replaced(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    link_error: int | None,
) -> None:
    """Was: two backups to one destination started together both found it free, and the later
    rename replaced the earlier's finished copy without a word (an existing destination is
    refused). Now the copy takes its name only if the name is still free: the other copy stays,
    this one goes (exit 1, "already exists"), and nothing else is left. On a file system
    without hard links (``os.link`` refused) the same, checked just before the rename; and
    there a backup that meets no other still finishes."""
    source = await _empty_referee_database(tmp_path / "source.db")
    destination = tmp_path / "copy.db"
    if link_error is not None:

        def link(src: object, dst: object) -> None:
            raise OSError(link_error, os.strerror(link_error))

        monkeypatch.setattr(os, "link", link)
        code, text = _backup(capsys, source, tmp_path / "alone.db")
        assert code == 0 and (tmp_path / "alone.db").is_file(), text
        (tmp_path / "alone.db").unlink()
    flush = os.fsync

    def fsync(fd: int) -> None:
        flush(fd)
        if not destination.exists():  # the copy's flush: the other backup finishes now
            destination.write_bytes(b"the other backup's copy")

    monkeypatch.setattr(os, "fsync", fsync)
    code, text = _backup(capsys, source, destination)
    assert code == 1 and "already exists" in text, text
    assert destination.read_bytes() == b"the other backup's copy"
    assert not list(tmp_path.glob("*.partial")), "this copy is gone"


async def test_a_destination_whose_name_is_near_the_longest_allowed_is_backed_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was a regression: the copy in progress is named DESTINATION.<random>.partial, 21
    characters more than the destination's name (DESTINATION.partial was 8), so a destination
    whose name was within 21 characters of the file system's longest (NAME_MAX, 255 bytes on
    most) was refused, "File name too long", naming a file nobody gave. Such a name is a
    destination like any other: the copy's own name is shortened to fit, and nothing is left
    beside it."""
    source = await _empty_referee_database(tmp_path / "source.db")
    backups = tmp_path / "backups"
    backups.mkdir()
    longest = os.pathconf(backups, "PC_NAME_MAX")
    for length in (longest - len(".partial-journal"), longest):
        destination = backups / ("é" + "b" * (length - len("é".encode()) - 3) + ".db")
        assert len(os.fsencode(destination.name)) == length
        code, text = _backup(capsys, source, destination)
        assert code == 0, text
    assert len(list(backups.iterdir())) == 2
