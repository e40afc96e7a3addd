"""The Python client takes what a caller gives it as the Node client does (clients/node, the
12-02 fixes to ``checkText``, ``int32``, ``sendableToken`` and ``closedError``): a call after
``close()`` is RefereeError CANCELLED, an integer field is an integer within its range, a
string is Unicode text, and a refusal names the field at fault. Each test here failed before
the fix that came with it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from pinochle_client import RefereeClient, RefereeError

from tests.service_helpers import ADJUDICATOR_TOKEN, new_table, serving


async def test_a_watch_after_close_is_referee_error_cancelled(tmp_path: Path) -> None:
    """Was: ``watch()`` on a closed client (and a resumed watch opening again after
    ``close()``) raised gRPC's UsageError ("Channel is closed."), though every other call made
    after ``close()`` is RefereeError CANCELLED (README: "as it does any call made
    afterwards"): the stream was opened outside the code that turns errors into RefereeError."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="watch-closed")
        client = RefereeClient(srv.address)
        spectator = client.session(table.game_id, table.spectator_token)
        await spectator.view()
        await client.close()
        for resume in (False, True):
            with pytest.raises(RefereeError) as closed:
                async for _ in spectator.watch(resume=resume):
                    pass
            assert closed.value.code == grpc.StatusCode.CANCELLED
            assert "closed" in closed.value.message


async def test_an_integer_field_takes_an_integer_within_its_range_or_names_itself(
    tmp_path: Path,
) -> None:
    """Was: protobuf took a bool for an integer field as 0 or 1 (``first_dealer=True`` made a
    game dealt by seat 1, a DeprecationWarning aside), ``audit_log`` made ``after_seq`` an int
    by force (0.5 read the log from the start, True after entry 1), and a float or a number out
    of range was a bare TypeError or ValueError ("Value out of range: 4294967546") naming no
    field. Now each is refused before sending, naming the field, as by the Node client: a
    TypeError for what is not an integer, a ValueError for one out of the field's range."""
    async with serving(tmp_path) as srv:
        client: Any = srv.client  # Any: the arguments below are not what the types say
        table = await new_table(client, "partnership", seed="integers")
        seat: Any = table.seats[1]
        adj: Any = table.adj
        # Watches go to a game past version 1, so that one sent anyway (``from_version`` True
        # as 1) gets an event rather than waiting for one.
        moved = await new_table(client, "partnership", seed="integers-moved")
        await moved.seats[1].submit({"type": "bid", "amount": 250})
        await moved.seats[2].submit({"type": "pass"}, expected_version=1)
        spec: Any = moved.spec
        hand = {"meld": [0, 0], "points": [0, 0], "tricks": [0, 0], "bid": 250, "declarer": 0}
        cases: list[tuple[Any, type[Exception], str]] = [
            (
                lambda: client.create_game("partnership", first_dealer=True),
                TypeError,
                "first_dealer",
            ),
            (
                lambda: client.create_game("partnership", first_dealer=0.5),
                TypeError,
                "first_dealer",
            ),
            (
                lambda: client.create_game("partnership", first_dealer=2**32 + 1),
                ValueError,
                "first_dealer",
            ),
            (lambda: adj.audit_log(0.5), TypeError, "after_seq"),
            (lambda: adj.audit_log(True), TypeError, "after_seq"),
            (lambda: adj.audit_log(2**63), ValueError, "after_seq"),
            (lambda: adj.audit_log("1.5"), ValueError, "after_seq"),
            (lambda: adj.audit_log(0, 2**32 + 1), ValueError, "page_size"),
            (lambda: anext(spec.watch(0.5)), TypeError, "from_version"),
            (lambda: anext(spec.watch(True)), TypeError, "from_version"),
            (lambda: anext(spec.watch(after_seq=2**63)), ValueError, "after_seq"),
            (
                lambda: seat.submit({"type": "pass"}, expected_version=True),
                TypeError,
                "expected_version",
            ),
            (
                lambda: seat.submit({"type": "pass"}, expected_version=0.5),
                TypeError,
                "expected_version",
            ),
            (
                lambda: seat.submit({"type": "pass"}, expected_version=2**63),
                ValueError,
                "expected_version",
            ),
            (lambda: seat.submit({"type": "bid", "amount": 2**32 + 250}), ValueError, "amount"),
            (lambda: seat.submit({"type": "bid", "amount": 2.0**32}), ValueError, "amount"),
            (
                lambda: seat.submit({"type": "meld", "cards": [], "points": 2**31}),
                ValueError,
                "points",
            ),
            (
                lambda: client.legal_plays(
                    "partnership", ["AH"], ["KH"], "H", seat_of_partner_in_trick=True
                ),
                TypeError,
                "seat_of_partner_in_trick",
            ),
            (
                lambda: client.score_hand("partnership", **{**hand, "bid": 2**32 + 250}),
                ValueError,
                "bid",
            ),
            (
                lambda: client.score_hand("partnership", **{**hand, "declarer": False}),
                TypeError,
                "declarer",
            ),
            (
                lambda: client.score_hand("partnership", **{**hand, "meld": [True, 0]}),
                TypeError,
                r"meld\[0\]",
            ),
            (
                lambda: client.score_hand("partnership", **{**hand, "points": [0, 0.5]}),
                TypeError,
                r"points\[1\]",
            ),
            (
                lambda: client.score_hand("partnership", **{**hand, "tricks": [0, 2**31]}),
                ValueError,
                r"tricks\[1\]",
            ),
            (
                lambda: client.score_hand("partnership", **{**hand, "dix": [-(2**31) - 1]}),
                ValueError,
                r"dix\[0\]",
            ),
        ]
        games = len(await table.adj.audit_log())
        for call, kind, field in cases:
            with pytest.raises(kind, match=field):
                await call()
        assert (await table.adj.view())["version"] == 0
        assert len(await table.adj.audit_log()) == games == 0
        # integers within range still go through, a seq as text too
        assert (await client.create_game("partnership", first_dealer=3)).version == 0
        assert await table.adj.audit_log("0", 10) == []


async def test_a_string_with_a_lone_surrogate_is_refused_naming_its_field(tmp_path: Path) -> None:
    """Was: a str holding a lone surrogate (``json.loads('"\\ud800"')``, bytes decoded with
    ``surrogateescape``), which has no UTF-8 form, was a bare UnicodeEncodeError from protobuf
    naming no field (a player's name, a seed, a request id, a card, a record, a game id), and in
    a game option, a given deal or a rules query's options it was sent as the text of its escape
    (``\\ud800``, six characters nobody gave), which the server refused quoting that text. Now
    each is refused before sending with a UnicodeEncodeError naming the field, as the Node
    client names it (``options.target``, ``players[1]``, ``action.card``)."""
    lone = json.loads('"ab\\ud800"')
    escaped = b"caf\xe9".decode("utf-8", "surrogateescape")
    async with serving(tmp_path) as srv:
        client = srv.client
        table = await new_table(client, "partnership", seed="surrogates")
        seat = table.seats[1]
        deal = {"dealer": 0, "hands": [["AH", lone]]}
        cases: list[tuple[Callable[[], Awaitable[object]], str]] = [
            (lambda: client.create_game("partnership", {"target": lone}), r"options\.target"),
            (lambda: client.create_game("partnership", {lone: 1}), "options has a key"),
            (
                lambda: client.create_game("partnership", {"a": {"b": [lone]}}),
                r"options\.a\.b\[0\]",
            ),
            (lambda: client.create_game(lone), "variant"),
            (lambda: client.create_game("partnership", seed=lone), "seed"),
            (lambda: client.create_game("partnership", players=["A", escaped]), r"players\[1\]"),
            (
                lambda: client.create_game(
                    "partnership", given_deals=[deal], adjudicator_token=ADJUDICATOR_TOKEN
                ),
                r"given_deals\[0\]\.hands\[0\]\[1\]",
            ),
            (lambda: client.session(lone, table.spectator_token).view(), "game_id"),
            (lambda: seat.submit({"type": "play", "card": lone}), r"action\.card"),
            (
                lambda: seat.submit(
                    {"type": "meld", "cards": [], "melds": [{"name": lone, "cards": []}]}
                ),
                r"action\.melds\[0\]\.name",
            ),
            (lambda: seat.submit({"type": "pass"}, request_id=lone), "request_id"),
            (lambda: anext(client.audit_records(["{}", lone])), r"records\[1\]"),
            (lambda: client.score_meld("partnership", ["AH", lone], "H"), r"hand\[1\]"),
            (lambda: client.score_meld("partnership", ["AH"], "H", {lone: 1}), "options has a key"),
            (lambda: client.legal_plays("partnership", ["AH"], [lone], "H"), r"trick\[0\]"),
            (lambda: client.legal_plays("partnership", ["AH"], [], "H", phase=lone), "phase"),
            (lambda: client.trick_winner("partnership", ["AH"], lone), "trump"),
            (lambda: client.trick_points("partnership", [escaped]), r"cards\[0\]"),
            (
                lambda: client.score_hand(
                    "partnership", meld=[0], points=[0], options={"target": lone}
                ),
                r"options\.target",
            ),
        ]
        for call, field in cases:
            with pytest.raises(UnicodeEncodeError, match=f"{field}.* a lone surrogate"):
                await call()
        assert (await table.adj.view())["version"] == 0
        assert await table.adj.audit_log() == []
        # a character beyond the BMP (a surrogate pair in UTF-16) is text like any other
        card = json.loads('"\\ud83c\\udca1"')
        game = await client.create_game("partnership", players=["A", card, "C", "D"])
        assert (await client.session(game.game_id, game.spectator_token).view())["version"] == 0


async def test_a_token_no_header_can_carry_is_refused_naming_its_argument(tmp_path: Path) -> None:
    """Was: the refusal of a token that no header can carry (a line break or a non-ASCII
    character inside) said "a token is printable ASCII" without saying which argument held it,
    where the Node client names it (``token``, ``adjudicatorToken``, ``creatorToken``). A token
    with blanks around it is still sent without them."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="tokens")
        for bad in ("to\nken", "tok\u00e9n", json.loads('"\\ud800"')):
            with pytest.raises(ValueError, match=r"^token: a token is printable ASCII"):
                srv.client.seat(table.game_id, bad)
            with pytest.raises(ValueError, match=r"^token: a token is printable ASCII"):
                srv.client.session(table.game_id, bad)
            with pytest.raises(ValueError, match=r"^adjudicator_token: a token is printable"):
                await srv.client.create_game("partnership", adjudicator_token=bad)
            with pytest.raises(ValueError, match=r"^creator_token: a token is printable"):
                await srv.client.create_game("partnership", creator_token=bad)
        spectator = srv.client.session(table.game_id, f" {table.spectator_token}\n")
        assert (await spectator.view())["version"] == 0


async def test_audit_records_takes_a_record_as_a_dict_as_the_node_client_does(
    tmp_path: Path,
) -> None:
    """Was: ``audit_records`` took JSON text alone; a record given as the dict ``export()``
    returns (as the Node client's ``auditRecords()`` takes the object ``export()`` gives) was a
    bare TypeError from protobuf ("bad argument type for built-in operation"). Now a dict is
    sent as its JSON text; one that holds a lone surrogate or is not JSON is refused naming
    the record."""
    async with serving(tmp_path) as srv:
        client: Any = srv.client
        table = await new_table(client, "partnership", seed="records-as-dicts")
        await table.seats[1].submit({"type": "bid", "amount": 250})
        record = await table.adj.export()
        items = [item async for item in client.audit_records([record, json.dumps(record)])]
        assert [item["index"] for item in items] == [0, 1]
        verdicts = [item["verdict"] for item in items]
        assert [v.pop("record") for v in verdicts] == ["records[0]", "records[1]"]
        assert verdicts[0] == verdicts[1]
        assert verdicts[0]["legal"] is True
        lone = json.loads('"\\ud800"')
        with pytest.raises(UnicodeEncodeError, match=r"records\[1\]\.players\[1\] holds"):
            await anext(client.audit_records(["{}", {**record, "players": ["A", lone]}]))
        with pytest.raises(ValueError, match=r"records\[0\] is not JSON"):
            await anext(client.audit_records([{**record, "x": float("nan")}]))
        with pytest.raises(TypeError, match=r"records\[0\] is not JSON"):
            await anext(client.audit_records([{**record, "x": {1, 2}}]))


async def test_an_option_integer_no_struct_number_holds_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    """Options and given deals travel as a Struct, whose numbers are doubles. An int too large
    for any double (``10**400``) was sent as its decimal text, and the server answered that
    ``target`` "must be an integer, got "1000..."", a string nobody gave; one above 2**53 was
    rounded first. Both are refused before sending, naming the field; 2**53 itself is sent and
    refused by the server as out of range, quoting it exactly."""
    huge = 10**400
    async with serving(tmp_path) as srv:
        client = srv.client
        deal = {"hands": [["AH"]], "x": [2**53 + 1]}
        cases: list[tuple[Callable[[], Awaitable[object]], str]] = [
            (lambda: client.create_game("partnership", {"target": huge}), r"options\.target"),
            (
                lambda: client.create_game("partnership", {"meld_values": {"run": [-huge]}}),
                r"options\.meld_values\.run\[0\] is -100000000000\.\.\. \(401 digits\)",
            ),
            (
                lambda: client.create_game("partnership", {"last_trick_bonus": 2**53 + 1}),
                r"options\.last_trick_bonus is 9007199254740993",
            ),
            (
                lambda: client.create_game(
                    "partnership", given_deals=[deal], adjudicator_token=ADJUDICATOR_TOKEN
                ),
                r"given_deals\[0\]\.x\[0\]",
            ),
            (lambda: client.score_meld("partnership", [], "H", {"target": huge}), "options"),
            (lambda: client.trick_points("partnership", ["AS"], options={"x": huge}), "options"),
            (
                lambda: client.score_hand(
                    "partnership", meld=[0], points=[0], options={"last_trick_bonus": huge}
                ),
                r"options\.last_trick_bonus",
            ),
        ]
        for call, field in cases:
            with pytest.raises(ValueError, match=f"{field}.*beyond what a Struct number"):
                await call()
        with pytest.raises(RefereeError) as caught:
            await client.create_game("partnership", {"target": 2**53})
        assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "value 9007199254740992 is out of range" in caught.value.message
