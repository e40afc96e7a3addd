"""Second review of recorded games, the auditor and rules queries against GAME_RECORD.md.

Each test pins a defect found in the review, fixed with it; the docstring says what was wrong.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from pinochle_client import RefereeError

from referee import cli
from referee.audit import audit_record, audit_text, verdict_exit_status
from referee.query import run_queries
from referee.service.errors import MAX_FIELD
from tests.service_helpers import serving
from tests.test_audit import BAD_PLAY, HAND0, HAND1_TO_LEAD, check_verdict
from tests.test_audit import record as _record


def record(*hands: list[Any], **extra: object) -> dict[str, Any]:
    """tests.test_audit.record, deep-copied (its helper shares the action dicts)."""
    return copy.deepcopy(_record(*hands, **extra))


def audit(data: object, keep_going: bool = False) -> dict[str, Any]:
    return audit_record(data, "-", keep_going)


# --------------------------------------------------------------------------------------------
# --keep-going and a record that stops short before its last hand


def test_keep_going_a_short_hand_is_a_record_error_after_another_hand_s_violation() -> None:
    """A.7 item 10: only the last hand may be unfinished, otherwise the record is malformed
    (exit 2). With --keep-going a skipped action in hand 0 (which still ends) made hand 1,
    cut short with no illegal action of its own, a verdict (exit 1) instead, and hand 2 was
    never looked at: the same malformed record was exit 2 or exit 1 by an unrelated action.
    Only a hand that skipped actions of its own may be left unfinished (README)."""
    out_of_turn = {"seat": 3, "type": "pass"}  # seat 1 is to act: NOT_YOUR_TURN, skipped
    short = HAND1_TO_LEAD[:3]
    clean = audit(record(HAND0, short, HAND0), keep_going=True)
    assert clean == {"record": "-", "error": "hands[1]: only the last hand may be unfinished"}
    verdict = audit(record([out_of_turn, *HAND0], short, HAND0), keep_going=True)
    assert verdict == clean
    assert verdict_exit_status(verdict) == 2


def test_keep_going_a_hand_its_own_skipped_actions_leave_short_still_ends_the_replay() -> None:
    """The README's ruling, unchanged: a hand that skipped actions of its own and is left
    unfinished ends the replay (no state exists to play later hands from)."""
    bad = {"seat": 2, "type": "bid", "amount": 250}  # seat 2 passed out: NOT_YOUR_TURN
    verdict = audit(record(HAND0, [*HAND1_TO_LEAD[:3], bad], HAND0), keep_going=True)
    assert verdict_exit_status(verdict) == 1
    assert [(v["hand"], v["code"]) for v in verdict["violations"]] == [(1, "NOT_YOUR_TURN")]
    assert len(verdict["hands"]) == 2 and verdict["hands"][1]["declarer"] is None


# --------------------------------------------------------------------------------------------
# Reading a record: a byte order mark, NaN and Infinity, a repeated key


def test_a_byte_order_mark_before_a_record_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record saved as UTF-8 by Notepad or PowerShell 5 starts with a byte order mark
    (EF BB BF). RFC 8259 §8.1 lets a reader ignore it; the audit said "not valid JSON:
    Unexpected UTF-8 BOM (decode using utf-8-sig)" (exit 2) for a record that is legal."""
    text = json.dumps(record(HAND0))
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert cli.main(["audit", str(path)]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict == audit_text(text, str(path))
    assert verdict["legal"] is True
    # Only the one mark a file may start with: a second is not JSON.
    assert "error" in audit_text("\ufeff\ufeff" + text)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_in_a_record_are_not_json(constant: str) -> None:
    """GAME_RECORD.md §1: a record is a JSON object. NaN and Infinity are not JSON (other
    tools refuse the file), yet Python's reader takes them: a record holding one under an
    ``x-`` key audited as legal (exit 0), and one as a bid's amount was a MALFORMED_ACTION
    violation (exit 1) instead of a file that is not a record (exit 2). ``query`` already
    refused them."""
    text = json.dumps(record(HAND0, **{"x-duration": 1.5})).replace("1.5", constant)
    verdict = audit_text(text, "r")
    assert verdict == {"record": "r", "error": f"not valid JSON: {constant} is not a JSON number"}
    assert verdict_exit_status(verdict) == 2
    bid = json.dumps(record(HAND0)).replace('"amount": 250', f'"amount": {constant}', 1)
    assert verdict_exit_status(audit_text(bid)) == 2


def test_a_repeated_key_is_a_record_error() -> None:
    """A key given twice in one object has no one meaning (RFC 8259 §4: names SHOULD be
    unique; Python keeps the last, other readers the first). Two records pasted into one, the
    second ``hands`` empty, audited as legal with no hand checked; a play with two ``card``
    keys was judged on the second. Now exit 2, naming the key."""
    illegal = json.dumps(record(HAND0, [*HAND1_TO_LEAD, BAD_PLAY]))
    assert audit_text(illegal)["legal"] is False
    pasted = illegal[:-1] + ', "hands": []}'
    verdict = audit_text(pasted, "r")
    assert verdict == {
        "record": "r",
        "error": "the key 'hands' appears twice in one object (JSON readers differ on which"
        " one counts)",
    }
    assert verdict_exit_status(verdict) == 2
    played = json.dumps(record(HAND0, HAND1_TO_LEAD))
    two_cards = played.replace('"card"', '"card": "AS", "card"', 1)
    assert "'card' appears twice" in str(audit_text(two_cards)["error"])
    # A text that is not JSON at all is reported as such, whatever it repeats first.
    assert str(audit_text(pasted + " x")["error"]).startswith("not valid JSON: Extra data")


async def test_audit_records_rpc_reads_records_as_the_command_line_does(tmp_path: Path) -> None:
    """The AuditRecords RPC and the Python client give the command line's verdicts for the
    same texts: a byte order mark skipped, NaN and a repeated key refused."""
    text = json.dumps(record(HAND0))
    texts = [
        "\ufeff" + text,
        text[:-1] + ', "x-a": NaN}',
        text[:-1] + ', "hands": []}',
    ]
    async with serving(tmp_path) as srv:
        items = [item async for item in srv.client.audit_records(texts)]
    assert [item["index"] for item in items] == [0, 1, 2]
    for index, item in enumerate(items):
        assert item["verdict"] == audit_text(texts[index], f"records[{index}]")
    assert items[0]["verdict"]["legal"] is True
    assert "error" in items[1]["verdict"] and "error" in items[2]["verdict"]


def test_verify_deal_reads_the_deal_as_a_record_is_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """verify-deal's DEAL_JSON: a repeated key is refused (exit 2) rather than hashed as the
    last one, and a byte order mark before it is skipped."""
    deal = record(HAND0)["hands"][0]["deal"]
    salt = "00a1ff7e"
    text = json.dumps(deal)
    assert cli.main(["verify-deal", "0" * 64, salt, text]) == 1
    computed = json.loads(capsys.readouterr().out)["computed"]
    assert cli.main(["verify-deal", computed, salt, "\ufeff" + text]) == 0
    capsys.readouterr()
    repeated = text[:-1] + ', "widow": []}'
    assert cli.main(["verify-deal", computed, salt, repeated]) == 2
    assert "'widow' appears twice" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Reading a query stream as records are read


def test_query_skips_a_byte_order_mark_before_the_first_line() -> None:
    """A query file saved by Notepad or PowerShell 5 starts with a byte order mark: its first
    query was answered "not a JSON line: Unexpected UTF-8 BOM". Only the input's start may
    hold one (a mark inside the stream is still not JSON)."""
    line = b'{"id": 1, "kind": "meld", "trump": "H", "hand": ["KH", "QH"]}\n'
    answers = [json.loads(a) for a in run_queries([b"\xef\xbb\xbf" + line, line])]
    assert answers[0] == answers[1]
    assert answers[0]["total"] == 40
    later = [json.loads(a) for a in run_queries([line, b"\xef\xbb\xbf" + line])]
    assert "error" in later[1]


def test_query_with_a_key_given_twice_is_an_error_answer_with_its_id() -> None:
    """A query naming ``hand`` twice was answered for the second one, which another reader
    would not have asked about. Now an error answer naming the key, the id copied (A.10
    item 5) unless the id is the key given twice."""
    twice = '{"id": 7, "kind": "meld", "trump": "H", "hand": ["AH"], "hand": ["KH", "QH"]}'
    ids = '{"id": 7, "id": 8, "kind": "meld", "trump": "H", "hand": []}'
    broken = '{"id": 9, "a": {"b": 1, "b": 2}} and more'  # not JSON: that comes first
    answers = [json.loads(a) for a in run_queries([twice, ids, broken])]
    message = "appears twice in one object (JSON readers differ on which one counts)"
    assert answers == [
        {"id": 7, "error": f"the key 'hand' {message}"},
        {"error": f"the key 'id' {message}"},
        {"error": "not a JSON line: Extra data: line 1 column 34 (char 33)"},
    ]


# --------------------------------------------------------------------------------------------
# A no-bid hand stopped between a dix exchange and the exchanger's meld


def _no_bid_exchange_record() -> dict[str, Any]:
    """partnership-no-bid, dealer 0, clubs turned (KC in the dealer's hand); seat 1, first to
    meld, holds both 9C and exchanges one."""
    rest = [rank + suit for suit in "SHDC" for rank in ("A", "10", "K", "Q", "J", "9")] * 2
    hands: list[list[str]] = [["KC"], ["9C", "9C"], [], []]
    for card in ("KC", "9C", "9C"):
        rest.remove(card)
    for hand in hands:
        while len(hand) < 12:
            hand.append(rest.pop(0))
    deal = {"hands": hands, "widow": [], "stock": [], "turn_up": "KC"}
    actions = [{"seat": 1, "type": "exchange_dix"}]
    return {
        "format": "pinochle-record/1",
        "variant": "partnership-no-bid",
        "dealer": 0,
        "hands": [{"deal": deal, "actions": actions}],
    }


def test_a_dix_exchange_counts_in_the_meld_of_a_hand_in_progress() -> None:
    """A.7 item 7: the exchanger "scores 10 at once (counted in its meld)", and A.7 item 10
    lists a hand in progress with the state reached. A record stopped after seat 1's
    ``exchange_dix`` and before its ``meld`` listed seat 1's meld as 0; it is 10, as it is
    once seat 1 has melded nothing more."""
    rec = _no_bid_exchange_record()
    verdict = audit(rec)
    assert verdict["legal"] is True
    assert verdict["hands"][0]["meld"] == [0, 10, 0, 0]
    rec["hands"][0]["actions"].append({"seat": 1, "type": "meld", "cards": []})
    assert audit(rec)["hands"][0]["meld"] == [0, 10, 0, 0]


# --------------------------------------------------------------------------------------------
# RulesService: a refusal naming a long option still reaches the client


async def test_rules_rpc_refusing_a_long_option_name_is_invalid_argument(tmp_path: Path) -> None:
    """A rules query naming an unknown option 20,000 characters long: the message was cut to
    MAX_MESSAGE, but the BadRequest's field (``options.<name>``) carried the name whole, the
    trailers passed gRPC's 16 KiB limit, and the client got RESOURCE_EXHAUSTED "Stream
    removed" instead of INVALID_ARGUMENT naming the field. The field is cut short now."""
    name = "Z" * 20_000
    async with serving(tmp_path) as srv:
        with pytest.raises(RefereeError) as caught:
            await srv.client.score_meld("partnership", [], "H", {name: 1})
        with pytest.raises(RefereeError) as caught_two:
            await srv.client.trick_winner("partnership", ["AS"], "H", {"meld_values": {name: 1}})
    for error in (caught.value, caught_two.value):
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT, error
        (field,) = error.fields
        assert field.startswith("options.") and field.endswith("ZZZ...")
        assert len(field) == MAX_FIELD


# --------------------------------------------------------------------------------------------
# null for an optional field, and one player per seat (third review)


def test_null_for_an_optional_field_reads_as_left_out() -> None:
    """GAME_RECORD.md §1: ``dealer`` has a default (0) and a hand's ``actions`` may be none yet.
    ``"options": null``, ``"players": null`` and ``"claimed": null`` were already read as left
    out, but ``"dealer": null`` and ``"actions": null`` were record errors ("dealer must be a
    seat", "hands[0].actions: must be a list"): null now means left out for every optional
    field (referee/audit.py's docstring), a claim's ``delta`` and ``scores`` included."""
    plain = audit(record(HAND0, []))
    edits: list[Callable[[dict[str, Any]], None]] = [
        lambda r: r.update(dealer=None),
        lambda r: r["hands"][1].update(actions=None),
        lambda r: r["hands"][0].update(claimed={"delta": None}),
        lambda r: r.update(claimed={"scores": None}),
    ]
    for edit in edits:
        rec = record(HAND0, [])
        edit(rec)
        assert audit(rec) == plain
    left_out = record(HAND0, [])
    del left_out["dealer"], left_out["hands"][1]["actions"]
    assert audit(left_out) == plain
    assert plain["legal"] and plain["hands"][1]["dealer"] == 1


def test_a_null_winner_claim_still_means_not_finished() -> None:
    """The one null with a meaning of its own (§1): ``"winner": null`` claims the game is not
    finished, so a finished game's record claiming it differs."""
    rec = record(HAND0, options={**record()["options"], "target": 10})
    rec["claimed"] = {"winner": None}
    verdict = audit(rec)
    assert verdict["finished"] and verdict["winner"] == 0
    assert verdict["claims"] == [{"hand": None, "field": "winner", "claimed": None, "computed": 0}]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda r: r.update(format=None), "format must be"),
        (lambda r: r.update(hands=None), "hands must be a list"),
        (lambda r: r["hands"][0].update(deal=None), "hands[0].deal: must be an object"),
        (lambda r: r.update(variant=None), "variant"),
    ],
)
def test_null_for_a_required_field_is_still_a_record_error(edit: Any, says: str) -> None:
    rec = record(HAND0)
    edit(rec)
    verdict = audit(rec)
    assert check_verdict(verdict) == 2 and says in verdict["error"], verdict


@pytest.mark.parametrize("names", [["Ann", "Bob", "Cid"], ["Ann", "Bob", "Cid", "Dee", "Eve"], []])
def test_players_names_every_seat_once(names: list[str]) -> None:
    """GAME_RECORD.md §1 gives one name per seat, in seat order (its example; CreateGame's
    player_names are "one per seat" and refused otherwise, so an export always has as many).
    A list of three names for a partnership game was accepted as if it named the game's
    players: it cannot say whose seat is missing. Fewer or more names than seats are a record
    error naming ``players``; leaving the list out (or null) stays fine."""
    verdict = audit(record(HAND0, players=names))
    assert check_verdict(verdict) == 2
    assert verdict["error"] == (
        f"players: must name every seat, one name each (4 for partnership), got {len(names)}"
    )
    assert check_verdict(audit(record(HAND0, players=None))) == 0
    assert check_verdict(audit(record(HAND0))) == 0


@pytest.mark.parametrize("text", ["", "{", "\udcff", "[" * 100_000])
def test_verify_deal_names_a_deal_that_is_not_json(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DEAL that is not JSON was one line naming neither the argument nor JSON
    ("pinochle-referee: Expecting value: line 1 column 1 (char 0)"): it says so, as audit's
    verdict for a record does ("not valid JSON: ...")."""
    assert cli.main(["verify-deal", "0" * 64, "00a1", text]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinochle-referee: DEAL is not valid JSON: "), err
    assert len(err.strip().splitlines()) == 1
