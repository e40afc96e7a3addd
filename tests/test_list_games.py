"""ListGames: the stored games, a page at a time, for the server's adjudicator or creator
credential only, as public summaries (no cards, no tokens), in a stable order that paging
never skips or repeats a game in, filtered by state and variant. On SQLite (the store method
itself is tested on both stores in tests/test_store.py)."""

from __future__ import annotations

import base64
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from pinochle_client import GamesPage
from prometheus_client import REGISTRY

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.service import servicers
from referee.service.observability import configure_logging
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    Served,
    Table,
    bearer,
    log_lines,
    new_table,
    play,
    refused,
    serving,
)

CREATOR = "creator-credential-for-list-tests"
ADJ = bearer(ADJUDICATOR_TOKEN)


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path, creator_token=CREATOR) as served:
        yield served


async def _list(
    srv: Served, metadata: tuple[tuple[str, str], ...] = ADJ, **fields: Any
) -> pb.ListGamesResponse:
    response: pb.ListGamesResponse = await srv.referee.ListGames(
        pb.ListGamesRequest(**fields), metadata=metadata
    )
    return response


async def _ids(srv: Served, **fields: Any) -> list[str]:
    """Every game the filter selects, paged through as a client would."""
    found: list[str] = []
    token = ""
    while True:
        page = await _list(srv, page_token=token, **fields)
        found += [game.game_id for game in page.games]
        token = page.next_page_token
        if not token:
            return found


async def _table(srv: Served, variant: str = "partnership", **kwargs: Any) -> Table:
    return await new_table(srv.client, variant, creator_token=CREATOR, **kwargs)


async def _finished(srv: Served, seed: str) -> Table:
    """A partnership game played to its end (a target of 1 ends it after a hand or two)."""
    table = await _table(srv, "partnership", options={"target": 1}, seed=seed)
    await play(table, random.Random(seed))
    assert (await table.adj.view())["over"]
    return table


# -- who may list ------------------------------------------------------------------------------


async def test_only_the_servers_adjudicator_and_creator_credentials_list_games(
    srv: Served,
) -> None:
    """A game's tokens, seat, spectator or adjudicator, reach that game only: listing every
    game is PERMISSION_DENIED for them, as for a wrong credential; no token at all is
    UNAUTHENTICATED. Each refusal changes nothing and says why."""
    table = await _table(srv)
    cases = {
        "no token": ((), grpc.StatusCode.UNAUTHENTICATED),
        "wrong token": (bearer("guess"), grpc.StatusCode.PERMISSION_DENIED),
        "seat token": (bearer(table.seat_tokens[0]), grpc.StatusCode.PERMISSION_DENIED),
        "spectator token": (bearer(table.spectator_token), grpc.StatusCode.PERMISSION_DENIED),
        "game adjudicator token": (
            bearer(table.adjudicator_token),
            grpc.StatusCode.PERMISSION_DENIED,
        ),
    }
    for name, (metadata, code) in cases.items():
        error = await refused(_list(srv, metadata))
        assert error.code == code, name
        assert error.reason == code.name, name
        assert "creator" in error.message and "adjudicator" in error.message, name
    for metadata in (bearer(CREATOR), ADJ):
        listed = await _list(srv, metadata)
        assert [game.game_id for game in listed.games] == [table.game_id]


async def test_only_the_credential_the_server_has_lists(tmp_path: Path) -> None:
    """A server with an adjudicator credential and no creator credential lists for the
    former only; one with a creator credential alone, for that one only."""
    async with serving(tmp_path / "adj") as adjudicated:
        await new_table(adjudicated.client)
        assert len((await _list(adjudicated)).games) == 1
        error = await refused(_list(adjudicated, bearer(CREATOR)))
        assert error.code == grpc.StatusCode.PERMISSION_DENIED
    async with serving(tmp_path / "creator", adjudicator_token="", creator_token=CREATOR) as made:
        await _table(made)
        assert len((await _list(made, bearer(CREATOR))).games) == 1
        error = await refused(_list(made, ADJ))
        assert error.code == grpc.StatusCode.PERMISSION_DENIED


async def test_a_server_with_no_credential_lists_to_no_one(tmp_path: Path) -> None:
    """Nobody holds a credential that could list, so no request can: PERMISSION_DENIED, with
    or without a token, saying which flags would allow it."""
    async with serving(tmp_path, adjudicator_token="") as open_server:
        table = await new_table(open_server.client)
        for metadata in ((), ADJ, bearer(table.adjudicator_token)):
            error = await refused(_list(open_server, metadata))
            assert error.code == grpc.StatusCode.PERMISSION_DENIED
            assert "lists games to no one" in error.message
            assert "--adjudicator-token" in error.message and "--creator-token" in error.message


async def test_the_credential_is_checked_before_the_request_is_read(srv: Served) -> None:
    """A caller without the credential learns nothing from the request it sends: a bad page
    token is refused for the credential, not for the token."""
    error = await refused(_list(srv, bearer("guess"), page_token="!!", page_size=-1))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED


# -- what a summary holds ----------------------------------------------------------------------


async def test_a_summary_holds_the_public_fields_and_no_card_or_token(srv: Served) -> None:
    before = time.time()
    table = await _table(srv, "cutthroat", players=["Ann", "Bo", "Cy"], seed="summary")
    created = time.time()
    first = (await _list(srv)).games[0]
    assert (first.game_id, first.variant, first.version, first.over) == (
        table.game_id,
        "cutthroat",
        0,
        False,
    )
    assert list(first.player_names) == ["Ann", "Bo", "Cy"]
    assert before - 1e-3 <= first.created_at.ToNanoseconds() / 1e9 <= created + 1e-3
    assert first.last_active_at == first.created_at  # nothing accepted yet
    assert {field.name for field, _ in first.ListFields()} == {
        "game_id",
        "variant",
        "created_at",
        "last_active_at",
        "player_names",
    }  # version 0 and over False are proto3 defaults, not sent

    view = await table.adj.view()
    seat = view["hand"]["turn"]
    entries = await table.seats[seat].legal_actions()
    bid = next(entry for entry in entries if entry["type"] == "bid")
    await table.seats[seat].submit({"type": "bid", "amount": bid["min"]})
    moved = (await _list(srv)).games[0]
    assert moved.version == 1
    assert moved.last_active_at.ToNanoseconds() > moved.created_at.ToNanoseconds()

    answer = (await _list(srv)).SerializeToString()
    for secret in (*table.seat_tokens, table.spectator_token, table.adjudicator_token):
        assert secret.encode() not in answer
    for seat_session in table.seats:
        for card in (await seat_session.view())["hand"]["cards"]:
            assert card.encode() not in answer


async def test_a_finished_game_is_listed_over(srv: Served) -> None:
    table = await _finished(srv, "over")
    (game,) = (await _list(srv)).games
    assert game.over and game.version == (await table.adj.view())["version"]


# -- paging and filters ------------------------------------------------------------------------


async def test_paging_lists_every_game_once_while_games_are_created_and_end(srv: Served) -> None:
    """Five games, read two at a time; after each of the first pages a game is created, and
    after the first one a game not listed yet ends: every game is listed exactly once, in
    creation order (the ones created meanwhile come after all the others), the one that
    ended as over. The last page's next_page_token is "" (and the one before it was not)."""
    tables = [await _table(srv, options={"target": 1}, seed=f"page-{i}") for i in range(5)]
    listed: list[pb.GameSummary] = []
    created: list[str] = []
    token = ""
    pages = 0
    while True:
        page = await _list(srv, page_size=2, page_token=token)
        pages += 1
        listed += page.games
        token = page.next_page_token
        if not token:
            break
        assert len(page.games) == 2
        if pages <= 3:
            created.append((await _table(srv, seed=f"between-{pages}")).game_id)
        if pages == 1:
            await play(tables[3], random.Random(3))
    ids = [game.game_id for game in listed]
    assert ids == [table.game_id for table in tables] + created
    assert pages == 4 and len(page.games) == 2
    assert [game.over for game in listed[:5]] == [False, False, False, True, False]


async def test_the_page_size(srv: Served) -> None:
    """0 is the server's default (100); 1 to 1000 as asked; negative or above 1000 refused,
    naming page_size."""
    for index in range(3):
        await _table(srv, seed=f"size-{index}")
    assert len((await _list(srv)).games) == 3
    one = await _list(srv, page_size=1)
    assert len(one.games) == 1 and one.next_page_token
    full = await _list(srv, page_size=3)
    assert len(full.games) == 3 and full.next_page_token == ""
    assert len((await _list(srv, page_size=1000)).games) == 3
    for size in (-1, 1001, -(2**31)):
        error = await refused(_list(srv, page_size=size))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        assert error.fields == ["page_size"]


async def test_the_default_page_holds_a_hundred_games(srv: Served) -> None:
    for index in range(101):
        await _table(srv, seed=f"hundred-{index}")
    page = await _list(srv)
    assert len(page.games) == 100 and page.next_page_token
    rest = await _list(srv, page_token=page.next_page_token)
    assert len(rest.games) == 1 and rest.next_page_token == ""


@pytest.mark.parametrize(
    "token",
    [
        "!!!",  # not base64
        "x" * 600,  # longer than any the server gives
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b"[1.5]").decode(),
        base64.urlsafe_b64encode(b'["1.5", "abc"]').decode(),
        base64.urlsafe_b64encode(b'[true, "abc"]').decode(),
        base64.urlsafe_b64encode(b'[1.5, ""]').decode(),
        base64.urlsafe_b64encode(b'[1.5, "a\\u0000b"]').decode(),
        base64.urlsafe_b64encode(b'[1e400, "abc"]').decode(),
        base64.urlsafe_b64encode(b'{"c": 1.5, "g": "abc"}').decode(),
        "é",
    ],
)
async def test_a_page_token_the_server_did_not_give_is_invalid_argument(
    srv: Served, token: str
) -> None:
    await _table(srv)
    error = await refused(_list(srv, page_token=token))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["page_token"]
    assert "next_page_token" in error.message


@pytest.mark.parametrize(
    "position",
    [
        (1_764_595_752.123456, "0123456789abcdef01234567"),  # the server's own ids
        (-0.0, "x"),
        (1.7976931348623157e308, "\U0001f600" * 64),  # the longest id, four bytes a character
        (5e-324, "é" * 64),
    ],
)
def test_a_page_token_gives_back_its_position_exactly(position: tuple[float, str]) -> None:
    """Whatever the id (up to the 64 characters any request may name) and time, the token
    fits the length the server reads and holds the position to the last bit of the float, so
    the next page starts exactly after it."""
    token = servicers._page_token(position)
    assert len(token) <= servicers.MAX_PAGE_TOKEN
    assert servicers._page_position(token) == position
    assert str(servicers._page_position(token)[0]) == str(position[0])  # type: ignore[index]


async def test_the_state_and_variant_filters(srv: Served) -> None:
    waiting = await _table(srv, "partnership", seed="waiting")
    cutthroat = await _table(srv, "cutthroat", seed="cutthroat")
    ended = await _finished(srv, "filtered")
    assert await _ids(srv) == [waiting.game_id, cutthroat.game_id, ended.game_id]
    assert await _ids(srv, state=pb.GAME_STATE_IN_PROGRESS) == [
        waiting.game_id,
        cutthroat.game_id,
    ]
    assert await _ids(srv, state=pb.GAME_STATE_OVER) == [ended.game_id]
    assert await _ids(srv, variant="cutthroat") == [cutthroat.game_id]
    assert await _ids(srv, variant="partnership", state=pb.GAME_STATE_OVER) == [ended.game_id]
    assert await _ids(srv, variant="two-handed") == []
    # Paged one at a time, the filter holds on every page.
    assert await _ids(srv, page_size=1, state=pb.GAME_STATE_IN_PROGRESS) == [
        waiting.game_id,
        cutthroat.game_id,
    ]
    unknown = await refused(_list(srv, variant="pinochle"))
    assert unknown.code == grpc.StatusCode.INVALID_ARGUMENT and unknown.fields == ["variant"]
    bad_state = await refused(_list(srv, state=7))
    assert bad_state.code == grpc.StatusCode.INVALID_ARGUMENT and bad_state.fields == ["state"]


async def test_a_page_stops_before_the_servers_response_limit(tmp_path: Path) -> None:
    """With a small --max-message-bytes (a response limit of 16 times it) a page of long
    names would not be sent: it holds fewer games, and the next page goes on after them."""
    async with serving(tmp_path, max_message_bytes=1024, creator_token=CREATOR) as small:
        names = ["é" * 64] * 4
        made = [(await _table(small, players=names, seed=f"big-{i}")).game_id for i in range(40)]
        first = await _list(small, page_size=40)
        assert 0 < len(first.games) < 40 and first.next_page_token
        assert first.ByteSize() <= 16 * 1024
        assert await _ids(small, page_size=40) == made


# -- observability -----------------------------------------------------------------------------


async def test_each_call_has_its_log_line_and_metrics(
    srv: Served, capfd: pytest.CaptureFixture[str]
) -> None:
    def handled(code: str) -> float:
        labels = {
            "grpc_type": "unary",
            "grpc_service": "pinochle.referee.v1.RefereeService",
            "grpc_method": "ListGames",
            "grpc_code": code,
        }
        return REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0

    codes = ("OK", "PERMISSION_DENIED", "INVALID_ARGUMENT")
    before = {code: handled(code) for code in codes}
    await _table(srv)
    configure_logging("json")
    capfd.readouterr()
    await _list(srv, bearer(CREATOR))
    await refused(_list(srv, bearer("guess")))
    lines = [line for line in await log_lines(capfd, rpcs=2) if line.get("event") == "rpc"]
    assert {code: handled(code) - before[code] for code in codes} == {
        "OK": 1,
        "PERMISSION_DENIED": 1,
        "INVALID_ARGUMENT": 0,
    }
    assert [(line["rpc"], line["grpc_code"]) for line in lines] == [
        ("ListGames", "OK"),
        ("ListGames", "PERMISSION_DENIED"),
    ]
    assert lines[0]["role"] == "creator"
    assert CREATOR not in str(lines)


# -- the Python client -------------------------------------------------------------------------


async def test_the_python_clients_list_games_and_all_games(srv: Served) -> None:
    """``list_games`` gives one page as plain data, every field present (Node's GameSummary,
    snake_case); ``all_games`` every game the filter selects, across pages; a refusal is a
    RefereeError; what it cannot send is refused before sending, naming the argument."""
    client = srv.client
    named = await _table(srv, "cutthroat", players=["Ann", "Bo", "Cy"], seed="client-0")
    others = [(await _table(srv, seed=f"client-{i}")).game_id for i in range(1, 4)]
    page = await client.list_games(CREATOR, page_size=2)
    assert isinstance(page, GamesPage) and page.next_page_token
    first = page.games[0]
    assert list(first) == [
        "game_id",
        "variant",
        "version",
        "over",
        "created_at",
        "last_active_at",
        "player_names",
    ]
    assert (first["game_id"], first["variant"], first["version"], first["over"]) == (
        named.game_id,
        "cutthroat",
        0,
        False,
    )
    assert first["player_names"] == ["Ann", "Bo", "Cy"]
    assert first["created_at"] == first["last_active_at"]
    assert set(first["created_at"]) == {"seconds", "nanos"}
    assert first["created_at"]["seconds"] > 1_700_000_000
    assert page.games[1]["player_names"] == []
    rest = await client.list_games(ADJUDICATOR_TOKEN, page_token=page.next_page_token)
    assert [g["game_id"] for g in rest.games] == others[1:] and rest.next_page_token == ""

    every = [game["game_id"] async for game in client.all_games(CREATOR, page_size=1)]
    assert every == [named.game_id, *others]
    only = client.all_games(CREATOR, variant="cutthroat", state="GAME_STATE_IN_PROGRESS")
    assert [game["game_id"] async for game in only] == [named.game_id]
    assert [game async for game in client.all_games(CREATOR, state="GAME_STATE_OVER")] == []

    denied = await refused(client.list_games(named.adjudicator_token))
    assert denied.code == grpc.StatusCode.PERMISSION_DENIED
    bad_token = await refused(client.list_games(CREATOR, page_token="nope"))
    assert bad_token.fields == ["page_token"]
    with pytest.raises(ValueError, match="state: 'OVER' is not a GameState"):
        await client.list_games(CREATOR, state="OVER")
    loose: Any = client
    with pytest.raises(TypeError, match="page_size"):
        await loose.list_games(CREATOR, page_size=1.5)
