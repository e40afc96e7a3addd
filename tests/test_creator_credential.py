"""The optional creator credential (``--creator-token``): when a server has one, only its holders
and the server's adjudicator create games; without one, anyone may (issue 4's default)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
import structlog
from pinochle_client import RefereeClient

from referee.cli import build_parser, main
from referee.service.observability import configure_logging
from referee.service.server import start_server
from referee.service.settings import ENV_PREFIX, Settings, settings_from
from referee.store.base import StoreError
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    SHORT_GAME,
    Served,
    log_lines,
    refused,
    serving,
)

CREATOR = "creator-credential-for-tests"


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path, creator_token=CREATOR) as served:
        yield served


async def _stored_games(srv: Served) -> list[str]:
    return await srv.running.store.list_games()


async def test_creating_needs_the_creator_or_the_adjudicator_credential(srv: Served) -> None:
    client = srv.client
    no_token = await refused(client.create_game("partnership"))
    assert no_token.code == grpc.StatusCode.UNAUTHENTICATED
    assert "creator credential" in no_token.message
    wrong = await refused(client.create_game("partnership", creator_token="guess"))
    assert wrong.code == grpc.StatusCode.PERMISSION_DENIED
    assert await _stored_games(srv) == []  # refused: nothing created

    by_creator = await client.create_game("partnership", creator_token=CREATOR)
    by_adjudicator = await client.create_game("cutthroat", adjudicator_token=ADJUDICATOR_TOKEN)
    assert sorted(await _stored_games(srv)) == sorted([by_creator.game_id, by_adjudicator.game_id])

    # A game's own tokens are no creator credential.
    for token in (*by_creator.seat_tokens, by_creator.adjudicator_token):
        denied = await refused(client.create_game("partnership", creator_token=token))
        assert denied.code == grpc.StatusCode.PERMISSION_DENIED
    assert len(await _stored_games(srv)) == 2


async def test_the_credential_is_checked_before_the_request(srv: Served) -> None:
    """Without the credential a caller learns nothing about what the server would accept."""
    for call in (
        srv.client.create_game(""),  # the servicer's own checks come after the credential
        srv.client.create_game("partnership", seed=""),
        srv.client.create_game("no-such-variant"),
        srv.client.create_game("partnership", {"target": -5}),
        srv.client.create_game("partnership", given_deals=[]),
    ):
        assert (await refused(call)).code == grpc.StatusCode.UNAUTHENTICATED
    bad = await refused(srv.client.create_game("no-such-variant", creator_token=CREATOR))
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT


async def test_given_deals_still_need_the_adjudicator_credential(srv: Served) -> None:
    seeded = await srv.client.create_game("cutthroat", seed="creator", creator_token=CREATOR)
    record = await srv.client.session(seeded.game_id, seeded.adjudicator_token).export()
    deal = record["hands"][0]["deal"]
    denied = await refused(
        srv.client.create_game("cutthroat", given_deals=[deal], creator_token=CREATOR)
    )
    assert denied.code == grpc.StatusCode.PERMISSION_DENIED
    assert "adjudicator credential" in denied.message
    given = await srv.client.create_game(
        "cutthroat", given_deals=[deal], adjudicator_token=ADJUDICATOR_TOKEN
    )
    assert given.version == seeded.version


async def test_without_a_creator_credential_anyone_creates(tmp_path: Path) -> None:
    async with serving(tmp_path) as served:
        assert served.settings.creator_token == ""
        assert (await served.client.create_game("partnership")).game_id


async def test_the_client_sends_one_credential() -> None:
    async with RefereeClient("127.0.0.1:1") as client:
        with pytest.raises(ValueError, match="send one credential"):
            await client.create_game(
                "partnership", adjudicator_token=ADJUDICATOR_TOKEN, creator_token=CREATOR
            )


@pytest.mark.usefixtures("json_logs")
async def test_a_failed_create_game_does_not_log_the_credential(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Second review: structlog's tracebacks showed each frame's local variables, so a store
    failure logged the creator credential (``create``'s ``token``) in clear; a SubmitAction
    failure, the seat's token."""
    async with serving(tmp_path, creator_token=CREATOR) as srv:
        configure_logging("json")
        table = await srv.client.create_game("partnership", creator_token=CREATOR)

        async def store_down(*args: object, **kwargs: object) -> Any:
            raise StoreError("down")

        capfd.readouterr()
        monkeypatch.setattr(srv.running.store, "create_game", store_down)
        monkeypatch.setattr(srv.running.store, "commit", store_down)
        error = await refused(srv.client.create_game("partnership", creator_token=CREATOR))
        assert error.code == grpc.StatusCode.UNAVAILABLE
        seat = srv.client.seat(table.game_id, table.seat_tokens[1])
        assert (await refused(seat.submit({"type": "bid", "amount": 250}))).code == (
            grpc.StatusCode.UNAVAILABLE
        )
        lines = await log_lines(capfd, rpcs=5)
    failed = [line for line in lines if line.get("event") == "rpc_failed"]
    # CreateGame once; SubmitAction four times, as the client retries it on UNAVAILABLE.
    assert [line["rpc"] for line in failed] == ["CreateGame", *["SubmitAction"] * 4]
    assert all("exception" in line for line in failed)
    logged = json.dumps(lines)
    assert "StoreError" in logged  # the traceback is there, without the frames' variables
    for secret in (CREATOR, *table.seat_tokens, table.adjudicator_token):
        assert secret not in logged


def test_an_empty_or_unreadable_credential_file_stops_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Second review: an empty file (a Secret mounted without its key) silently left
    CreateGame open to anyone; a missing one gave a traceback."""
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    for flag in ("--creator-token-file", "--adjudicator-token-file"):
        for path, says in ((empty, "is empty"), (tmp_path / "missing", "cannot read")):
            with pytest.raises(SystemExit) as exit_info:
                _serve_settings(flag, str(path))
            assert exit_info.value.code == 2
            assert f"{flag}: " in (err := capsys.readouterr().err) and says in err


def test_a_credential_no_client_can_send_stops_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of 12-03: ``--creator-token é`` started a server on which no client could ever
    create a game (gRPC metadata carries printable ASCII only), and a credential with a space
    at either end could never match the stripped bearer token. Refused at start-up, exit 2,
    saying where the character is but not what it is (the credential is a secret)."""
    for name in ("ADJUDICATOR_TOKEN", "CREATOR_TOKEN"):
        monkeypatch.delenv(ENV_PREFIX + name, raising=False)
    for flag in ("--creator-token", "--adjudicator-token"):
        for credential, says in (
            ("caf\u00e9", "character 4 of the credential is not printable ASCII"),
            ("tab\there", "character 4 of the credential is not printable ASCII"),
            (" padded", "the credential starts or ends with a space"),
            ("padded ", "the credential starts or ends with a space"),
        ):
            with pytest.raises(SystemExit) as exit_info:
                _serve_settings(flag, credential)
            assert exit_info.value.code == 2
            err = capsys.readouterr().err
            assert f"{flag}: {says}" in err and credential.strip() not in err
        secret = tmp_path / "secret"
        secret.write_text("s\u00e9cret\n", encoding="utf-8")
        with pytest.raises(SystemExit):
            _serve_settings(f"{flag}-file", str(secret))
        err = capsys.readouterr().err
        assert f"{flag}-file: {secret}: character 2 of the credential" in err
    monkeypatch.setenv(ENV_PREFIX + "CREATOR_TOKEN", "\u00e9")
    with pytest.raises(SystemExit):
        _serve_settings()
    assert "--creator-token: character 1" in capsys.readouterr().err
    monkeypatch.delenv(ENV_PREFIX + "CREATOR_TOKEN")
    # Printable ASCII with spaces inside is sendable, and kept as given.
    assert _serve_settings("--creator-token", "a b~!").creator_token == "a b~!"


def _serve_settings(*flags: str) -> Settings:
    return settings_from(build_parser().parse_args(["serve", *flags]))


def test_the_credential_comes_from_a_flag_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CREATOR_TOKEN", "CREATOR_TOKEN_FILE"):
        monkeypatch.delenv(ENV_PREFIX + name, raising=False)
    assert _serve_settings().creator_token == ""
    assert _serve_settings("--creator-token", "abc").creator_token == "abc"
    secret = tmp_path / "creator"
    secret.write_text("from-file\n", encoding="utf-8")
    assert _serve_settings("--creator-token", "abc", "--creator-token-file", str(secret)) == (
        _serve_settings("--creator-token-file", str(secret))
    )
    assert _serve_settings("--creator-token-file", str(secret)).creator_token == "from-file"
    monkeypatch.setenv(ENV_PREFIX + "CREATOR_TOKEN", "from-env")
    assert _serve_settings().creator_token == "from-env"


@contextlib.contextmanager
def _server_in_a_thread(tmp_path: Path, **overrides: object) -> Iterator[str]:
    """A server on its own event loop and thread, for commands that run their own loop."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    address: list[str] = []
    stop = asyncio.Event()

    async def serve() -> None:
        settings = Settings(port=0, db=str(tmp_path / "demo.db"), metrics_port=0)
        running = await start_server(dataclasses.replace(settings, **overrides))  # type: ignore[arg-type]
        address.append(f"127.0.0.1:{running.port}")
        started.set()
        await stop.wait()
        await running.stop(0)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    try:
        assert started.wait(30), "the server did not start"
        yield address[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()


def test_the_demo_sends_the_creator_credential(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_PREFIX + "CREATOR_TOKEN", raising=False)
    saved = structlog.get_config()  # the demo quiets structlog for the process
    saved["processors"] = list(saved["processors"])  # reset_defaults empties the list in place
    try:
        with _server_in_a_thread(tmp_path, creator_token=CREATOR) as address:
            flags = ["demo", "--address", address, "--variant", "cutthroat", "--seed", "c"]
            flags += ["--options", json.dumps(SHORT_GAME["cutthroat"])]
            assert main(flags) == 1
            err = capsys.readouterr().err
            assert "UNAUTHENTICATED" in err and len(err.strip().splitlines()) == 1
            assert main([*flags, "--creator-token", CREATOR]) == 0
            assert "game over" in capsys.readouterr().out
    finally:
        structlog.reset_defaults()
        structlog.configure(**saved)
