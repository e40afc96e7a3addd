"""Auditing recorded games: verdicts, claims, record errors, exit statuses, the command line
(GAME_RECORD.md §1-§2, RULES.md A.7 item 10, A.10 item 6), and a fuzz test of malformed records."""

from __future__ import annotations

import asyncio
import copy
import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from referee import cli
from referee.audit import RecordError, audit_record, audit_text, parse_deal, verdict_exit_status
from referee.engine.actions import decode_action
from referee.engine.errors import VIOLATION_CODES
from referee.engine.game import Game, SeededDeals
from referee.rules.dealing import deal_commitment
from referee.rules.options import resolve_options
from referee.service.games import GameManager
from referee.store.sqlite import SCHEMA_VERSION, SqliteStore
from tests.service_helpers import SHORT_GAME
from tests.test_violations import NO_EXCHANGE, PLAY_HANDS, auto_action, make_deal

VERDICT_KEYS = [
    "record",
    "legal",
    "actions_checked",
    "violation",
    "hands",
    "scores",
    "finished",
    "winner",
    "claims",
]
HAND_KEYS = [
    "dealer",
    "declarer",
    "bid",
    "trump",
    "conceded",
    "hopeless",
    "meld",
    "points",
    "delta",
]
VIOLATION_KEYS = ["hand", "action", "seat", "code", "message"]

PARTNERSHIP = resolve_options("partnership", NO_EXCHANGE)
DEAL = make_deal(PARTNERSHIP, PLAY_HANDS).to_json()

# Hand 0 (dealer 0): seat 1 wins at 250, everyone melds, seat 0 shows KD QD, seat 1 concedes.
HAND0 = [
    {"seat": 1, "type": "bid", "amount": 250},
    {"seat": 2, "type": "pass"},
    {"seat": 3, "type": "pass"},
    {"seat": 0, "type": "pass"},
    {"seat": 1, "type": "declare_trump", "suit": "H"},
    {"seat": 1, "type": "meld", "cards": []},
    {"seat": 2, "type": "meld", "cards": []},
    {"seat": 3, "type": "meld", "cards": []},
    {"seat": 0, "type": "meld", "cards": ["KD", "QD"]},
    {"seat": 1, "type": "concede"},
]
HAND0_SUMMARY = {
    "dealer": 0,
    "declarer": 1,
    "bid": 250,
    "trump": "H",
    "conceded": True,
    "hopeless": False,
    "meld": [20, 0, 0, 0],
    "points": [0, 0],
    "delta": [20, -250],
}
# Hand 1 (dealer 1): the dealer is stuck at 250 and leads 10C; seat 2 then plays a spade.
HAND1_TO_LEAD = [
    {"seat": 2, "type": "pass"},
    {"seat": 3, "type": "pass"},
    {"seat": 0, "type": "pass"},
    {"seat": 1, "type": "bid", "amount": 250},
    {"seat": 1, "type": "declare_trump", "suit": "H"},
    {"seat": 1, "type": "meld", "cards": []},
    {"seat": 2, "type": "meld", "cards": []},
    {"seat": 3, "type": "meld", "cards": []},
    {"seat": 0, "type": "meld", "cards": []},
    {"seat": 1, "type": "play", "card": "10C"},
]
BAD_PLAY = {"seat": 2, "type": "play", "card": "AS"}  # holds clubs: MUST_FOLLOW_SUIT


def record(*hands: list[Any], **extra: object) -> dict[str, Any]:
    """A partnership record (no exchange) whose hands are all dealt PLAY_HANDS."""
    out: dict[str, Any] = {
        "format": "pinochle-record/1",
        "variant": "partnership",
        "options": dict(NO_EXCHANGE),
        "players": ["Ann", "Bob", "Cid", "Dee"],
        "dealer": 0,
        "hands": [{"deal": copy.deepcopy(DEAL), "actions": list(h)} for h in hands],
    }
    out.update(extra)
    return out


def check_verdict(verdict: dict[str, Any], name: str = "-") -> int:
    """Assert the verdict is well-formed (GAME_RECORD.md §2) and return its exit status."""
    json.dumps(verdict)
    assert verdict["record"] == name
    status = verdict_exit_status(verdict)
    if "error" in verdict:
        assert list(verdict) == ["record", "error"]
        assert isinstance(verdict["error"], str) and verdict["error"]
        assert status == 2
        return status
    keys = list(verdict)
    if "violations" in keys:
        keys.remove("violations")
        assert list(verdict).index("violations") == 4
        violations = verdict["violations"]
        assert isinstance(violations, list)
        assert (violations[0] if violations else None) == verdict["violation"]
    else:
        violations = [] if verdict["violation"] is None else [verdict["violation"]]
    assert keys == VERDICT_KEYS
    assert isinstance(verdict["legal"], bool)
    assert verdict["legal"] == (verdict["violation"] is None)
    checked = verdict["actions_checked"]
    assert isinstance(checked, int) and not isinstance(checked, bool) and checked >= 0
    for v in violations:
        assert list(v) == VIOLATION_KEYS
        assert isinstance(v["hand"], int) and isinstance(v["action"], int)
        assert v["seat"] is None or (isinstance(v["seat"], int) and not isinstance(v["seat"], bool))
        assert v["code"] in VIOLATION_CODES
        assert isinstance(v["message"], str) and v["message"]
    hands = verdict["hands"]
    assert isinstance(hands, list)
    for h in hands:
        assert list(h) == HAND_KEYS
        assert all(isinstance(x, int) for x in h["meld"] + h["points"] + h["delta"])
        assert isinstance(h["conceded"], bool) and isinstance(h["hopeless"], bool)
        assert h["trump"] in (None, "S", "H", "D", "C")
    scores = verdict["scores"]
    assert isinstance(scores, list) and all(isinstance(x, int) for x in scores)
    assert isinstance(verdict["finished"], bool)
    assert verdict["winner"] is None or isinstance(verdict["winner"], int)
    claims = verdict["claims"]
    assert isinstance(claims, list)
    for c in claims:
        assert list(c) == ["hand", "field", "claimed", "computed"]
        assert c["field"] in ("delta", "scores", "winner")
        assert (c["hand"] is None) == (c["field"] != "delta")
    assert status == (0 if verdict["legal"] and not claims else 1)
    return status


def audit(data: object, name: str = "-", keep_going: bool = False) -> dict[str, Any]:
    """``audit_record``, typed loosely for the assertions."""
    return audit_record(data, name, keep_going)


# --------------------------------------------------------------------------------------------
# Verdicts


def test_legal_record_verdict() -> None:
    """A legal record: the §2 fields in order, one summary per hand, no claims to report."""
    verdict = audit(record(HAND0), "t.json")
    assert check_verdict(verdict, "t.json") == 0
    assert verdict == {
        "record": "t.json",
        "legal": True,
        "actions_checked": 10,
        "violation": None,
        "hands": [HAND0_SUMMARY],
        "scores": [20, -250],
        "finished": False,
        "winner": None,
        "claims": [],
    }


def test_violation_verdict() -> None:
    """The first illegal action: hand and action indices from 0, the seat, the code, a message;
    the hand in progress is listed with the state reached and delta 0; scores add up completed
    hands; checking stops there."""
    actions = [*HAND1_TO_LEAD, BAD_PLAY, {"seat": 2, "type": "play", "card": "AC"}]
    verdict = audit(record(HAND0, actions))
    assert check_verdict(verdict) == 1
    assert verdict["legal"] is False
    violation = verdict["violation"]
    assert isinstance(violation, dict)
    assert {k: violation[k] for k in ("hand", "action", "seat", "code")} == {
        "hand": 1,
        "action": 10,
        "seat": 2,
        "code": "MUST_FOLLOW_SUIT",
    }
    assert "seat 2" in violation["message"] and "AS" in violation["message"]
    assert verdict["actions_checked"] == 10 + 11
    assert verdict["hands"] == [
        HAND0_SUMMARY,
        {
            "dealer": 1,
            "declarer": 1,
            "bid": 250,
            "trump": "H",
            "conceded": False,
            "hopeless": False,
            "meld": [0, 0, 0, 0],
            "points": [0, 0],
            "delta": [0, 0],
        },
    ]
    assert verdict["scores"] == [20, -250] and verdict["finished"] is False
    assert "violations" not in verdict


def test_keep_going_reports_every_violation_and_skips_it() -> None:
    """A.10 item 6: each illegal action is listed and skipped (the state is as if it had not
    been sent); actions_checked counts all; violation stays the first."""
    actions = [
        *HAND1_TO_LEAD,
        BAD_PLAY,
        {"seat": 2, "type": "play", "card": "AC"},
        {"seat": 1, "type": "play", "card": "10C"},  # seat 3 is to play: NOT_YOUR_TURN
        {"seat": 3, "type": "play", "card": "QH"},
        {"seat": 0, "type": "play", "card": "KD"},  # void in clubs, holds KH JH: MUST_TRUMP
        {"seat": 0, "type": "play", "card": "KH"},
    ]
    verdict = audit(record(HAND0, actions), keep_going=True)
    assert check_verdict(verdict) == 1
    violations = verdict["violations"]
    assert isinstance(violations, list)
    assert [(v["action"], v["seat"], v["code"]) for v in violations] == [
        (10, 2, "MUST_FOLLOW_SUIT"),
        (12, 1, "NOT_YOUR_TURN"),
        (14, 0, "MUST_TRUMP"),
    ]
    assert verdict["violation"] == violations[0]
    assert verdict["actions_checked"] == 10 + len(actions)
    assert verdict["hands"][-1]["points"] == [30, 0]
    assert list(verdict)[:6] == [*VERDICT_KEYS[:4], "violations", "hands"]


def test_keep_going_on_a_legal_record_has_an_empty_list() -> None:
    verdict = audit(record(HAND0), keep_going=True)
    assert verdict["violations"] == [] and verdict["legal"] is True


def test_actions_after_the_game_ended_are_game_over() -> None:
    """A.7 item 9: any action in a later hand is GAME_OVER; with --keep-going every one is
    reported and counted (A.10 item 6), and a malformed one is MALFORMED_ACTION (A.5 order)."""
    later = [
        {"seat": 2, "type": "pass"},
        {"seat": 3, "type": "shuffle"},
        {"seat": 0, "type": "pass"},
    ]
    rec = record(HAND0, later, options={"target": 10, **NO_EXCHANGE})
    verdict = audit(rec)
    assert check_verdict(verdict) == 1
    assert verdict["finished"] is True and verdict["winner"] == 0
    assert verdict["violation"] == {
        "hand": 1,
        "action": 0,
        "seat": 2,
        "code": "GAME_OVER",
        "message": verdict["violation"]["message"],
    }
    assert verdict["actions_checked"] == 11
    verdict = audit(rec, keep_going=True)
    assert [(v["action"], v["code"]) for v in verdict["violations"]] == [
        (0, "GAME_OVER"),
        (1, "MALFORMED_ACTION"),
        (2, "GAME_OVER"),
    ]
    assert verdict["actions_checked"] == 13
    assert len(verdict["hands"]) == 1
    # A later hand with no actions is no violation.
    assert audit(record(HAND0, [], options={"target": 10, **NO_EXCHANGE}))["legal"] is True


def test_an_empty_hand_after_the_game_ended_does_not_end_checking() -> None:
    """A.7 item 9: *any* action in a later hand is GAME_OVER, also one in a hand that follows
    an empty hand recorded after the game's end: checking goes on past the empty hand."""
    late = [{"seat": 2, "type": "pass"}]
    verdict = audit(record(HAND0, [], late, options={"target": 10, **NO_EXCHANGE}))
    assert check_verdict(verdict) == 1
    violation = verdict["violation"]
    assert isinstance(violation, dict)
    assert (violation["hand"], violation["action"], violation["code"]) == (2, 0, "GAME_OVER")
    assert verdict["actions_checked"] == len(HAND0) + 1


@pytest.mark.parametrize(
    ("bad", "seat"),
    [
        ("pass", None),
        ({"type": "pass"}, None),
        ({"seat": "1", "type": "bid", "amount": 250}, None),
        ({"seat": True, "type": "bid", "amount": 250}, None),
        ({"seat": 1, "type": "bid", "amount": 250.0}, 1),
        ({"seat": 7, "type": "pass"}, 7),
        ({"seat": 1, "type": "play"}, 1),
    ],
)
def test_malformed_actions_in_a_record_are_violations(bad: Any, seat: int | None) -> None:
    """Bad action shapes are MALFORMED_ACTION violations, never record errors or tracebacks;
    a seat that is not a number is reported as null."""
    verdict = audit(record([bad]))
    assert check_verdict(verdict) == 1
    assert verdict["violation"]["code"] == "MALFORMED_ACTION"
    assert verdict["violation"]["seat"] == seat


def test_an_action_after_the_hand_ended_is_a_violation() -> None:
    """An action listed after the hand is complete is refused, not applied to the next hand."""
    verdict = audit(record([*HAND0, {"seat": 2, "type": "pass"}]))
    assert check_verdict(verdict) == 1 and verdict["violation"]["action"] == 10


def test_a_redeal_hand_is_complete_and_the_deal_rotates() -> None:
    """A.7 item 2: an all-pass hand ends with declarer, bid and trump null and delta 0; the
    next hands entry is dealt by the next dealer."""
    rules = resolve_options("cutthroat")
    deal = make_deal(rules, ()).to_json()
    rec = {
        "format": "pinochle-record/1",
        "variant": "cutthroat",
        "hands": [
            {
                "deal": deal,
                "actions": [{"seat": s, "type": "pass"} for s in (1, 2, 0)],
                "claimed": {"delta": [0, 0, 0]},
            },
            {"deal": deal, "actions": [{"seat": 2, "type": "bid", "amount": 300}]},
        ],
    }
    verdict = audit(rec)
    assert check_verdict(verdict) == 0
    assert verdict["hands"][0] == {
        "dealer": 0,
        "declarer": None,
        "bid": None,
        "trump": None,
        "conceded": False,
        "hopeless": False,
        "meld": [0, 0, 0],
        "points": [0, 0, 0],
        "delta": [0, 0, 0],
    }
    assert verdict["hands"][1]["dealer"] == 1 and verdict["scores"] == [0, 0, 0]


def test_a_no_bid_turn_up_must_be_the_dealers_card() -> None:
    """GAME_RECORD.md §1: no-bid's turn_up is the dealer's last card; otherwise a bad deal."""
    rec = copy.deepcopy(BASES[4])
    deal = rec["hands"][0]["deal"]
    dealer_cards = deal["hands"][0]
    deal["turn_up"] = next(c for c in deal["hands"][1] if c not in dealer_cards)
    assert check_verdict(audit(rec)) == 2
    deal["turn_up"] = None
    assert check_verdict(audit(rec)) == 2


# --------------------------------------------------------------------------------------------
# Claims


def test_hand_delta_claims() -> None:
    """A hand's delta claim is checked once the hand is complete; only mismatches are listed."""
    rec = record(HAND0)
    rec["hands"][0]["claimed"] = {"delta": [20, -250]}
    verdict = audit(rec)
    assert verdict["claims"] == [] and check_verdict(verdict) == 0
    rec["hands"][0]["claimed"] = {"delta": [20, -240]}
    verdict = audit(rec)
    assert verdict["claims"] == [
        {"hand": 0, "field": "delta", "claimed": [20, -240], "computed": [20, -250]}
    ]
    assert verdict["legal"] is True and check_verdict(verdict) == 1


def test_an_unfinished_hand_claim_is_not_checked() -> None:
    """A.7 item 10: a delta claim is checked only once its hand is complete."""
    rec = record(HAND0[:5])
    rec["hands"][0]["claimed"] = {"delta": [1, 2]}
    verdict = audit(rec)
    assert verdict["claims"] == [] and check_verdict(verdict) == 0


def test_game_claims() -> None:
    """Game-level scores and winner claims are listed with "hand": null when they differ."""
    verdict = audit(record(HAND0, claimed={"scores": [20, -250], "winner": None}))
    assert verdict["claims"] == [] and check_verdict(verdict) == 0
    verdict = audit(record(HAND0, claimed={"scores": [0, 0], "winner": 1}))
    assert verdict["claims"] == [
        {"hand": None, "field": "scores", "claimed": [0, 0], "computed": [20, -250]},
        {"hand": None, "field": "winner", "claimed": 1, "computed": None},
    ]
    assert check_verdict(verdict) == 1


def test_a_winner_claim_is_checked_only_when_given_and_null_claims_an_unfinished_game() -> None:
    """GAME_RECORD.md §1: the game's claimed winner is "null if not finished", so a null claim
    on a finished game is a mismatch; a claim that leaves winner out claims no winner and is not
    compared (an absent field is not a claim of null)."""
    ended = {"target": 10, **NO_EXCHANGE}  # HAND0 (20 / -250) ends the game: team 0 wins
    verdict = audit(record(HAND0, options=ended, claimed={"scores": [20, -250], "winner": None}))
    assert verdict["finished"] is True and verdict["winner"] == 0
    assert verdict["claims"] == [{"hand": None, "field": "winner", "claimed": None, "computed": 0}]
    assert check_verdict(verdict) == 1
    verdict = audit(record(HAND0, options=ended, claimed={"scores": [20, -250]}))
    assert verdict["claims"] == [] and check_verdict(verdict) == 0
    verdict = audit(record(HAND0, options=ended, claimed={"winner": 0}))
    assert verdict["claims"] == [] and check_verdict(verdict) == 0


def test_an_empty_claimed_object_claims_nothing() -> None:
    """GAME_RECORD.md §1: claims are optional, field by field; ``"claimed": {}`` on a hand or on
    the game claims nothing, so nothing is compared (never a record error or a traceback)."""
    rec = record(HAND0, claimed={})
    rec["hands"][0]["claimed"] = {}
    verdict = audit(rec)
    assert verdict["claims"] == [] and check_verdict(verdict) == 0


def test_game_claims_are_not_checked_after_a_violation() -> None:
    """A.7 item 10: the game's scores and winner claims only when there is no violation."""
    rec = record(HAND0, [*HAND1_TO_LEAD, BAD_PLAY], claimed={"scores": [9, 9], "winner": 1})
    verdict = audit(rec)
    assert verdict["claims"] == [] and verdict["legal"] is False


# --------------------------------------------------------------------------------------------
# Record errors (exit 2)


def _bad_deal(mutate: Any) -> dict[str, Any]:
    rec = record(HAND0)
    mutate(rec["hands"][0]["deal"])
    return rec


RECORD_ERRORS = {
    "not an object": [],
    "unknown top-level key": record(HAND0, colour="red"),
    "wrong format": record(HAND0, format="pinochle-record/2"),
    "unknown variant": record(HAND0, variant="skat"),
    "unknown option": record(HAND0, options={"colour": 1}),
    "option of the wrong type": record(HAND0, options={"target": "high"}),
    "unsupported option": record(HAND0, options={"nines_redeal": True}),
    "variant missing": {k: v for k, v in record(HAND0).items() if k != "variant"},
    "hands not a list": record(HAND0, hands={}),
    "dealer out of range": record(HAND0, dealer=4),
    "players not names": record(HAND0, players=[1, 2, 3, 4]),
    "unknown hand key": {**record(), "hands": [{"deal": DEAL, "actions": [], "note": 1}]},
    "missing deal": {**record(), "hands": [{"actions": []}]},
    "short hand": _bad_deal(lambda d: d["hands"][0].pop()),
    "card twice too often": _bad_deal(lambda d: d["hands"][0].__setitem__(0, "AS")),
    "bad card in deal": _bad_deal(lambda d: d["hands"][0].__setitem__(0, "ZZ")),
    "widow in partnership": _bad_deal(lambda d: d.__setitem__("widow", ["AS"])),
    "unknown deal key": _bad_deal(lambda d: d.__setitem__("kitty", [])),
    "three hands": _bad_deal(lambda d: d["hands"].pop()),
    "actions not a list": {**record(), "hands": [{"deal": DEAL, "actions": {}}]},
    "unfinished hand before the last": record(HAND0[:4], HAND0),
    "bad delta claim": {
        **record(),
        "hands": [{"deal": DEAL, "actions": HAND0, "claimed": {"delta": "20"}}],
    },
    "bad game claim": record(HAND0, claimed={"winner": "team 0"}),
    # JSON true and false are not numbers, though Python's bool is an int: a seat, a delta, a
    # score or a winner given as a boolean is a malformed record (GAME_RECORD.md §1-§2).
    "dealer a boolean": record(HAND0, dealer=True),
    "delta claim of booleans": {
        **record(),
        "hands": [{"deal": DEAL, "actions": HAND0, "claimed": {"delta": [True, False]}}],
    },
    "scores claim of booleans": record(HAND0, claimed={"scores": [True, False]}),
    "winner claim a boolean": record(HAND0, claimed={"winner": True}),
}


@pytest.mark.parametrize("name", list(RECORD_ERRORS))
def test_record_errors(name: str) -> None:
    """Bad records are {"record", "error"} verdicts with exit status 2, never violations."""
    verdict = audit(RECORD_ERRORS[name], "r.json")
    assert check_verdict(verdict, "r.json") == 2, verdict


def test_not_json_is_a_record_error() -> None:
    for text in ("{", "", "nul", "[" * 100_000):
        verdict = audit_text(text, "x")
        assert check_verdict(verdict, "x") == 2


def test_x_keys_are_kept_and_ignored() -> None:
    """§1: top-level keys starting with x- are allowed (tournament ids and the like)."""
    verdict = audit(record(HAND0, **{"x-table": 7, "x-when": {"day": 1}}))
    assert check_verdict(verdict) == 0


def test_options_and_players_may_be_omitted() -> None:
    rec = record(HAND0)
    del rec["players"]
    rec["options"] = None
    rec["hands"][0]["actions"] = []
    verdict = audit(rec)
    assert check_verdict(verdict) == 0 and verdict["hands"][0]["delta"] == [0, 0]


# --------------------------------------------------------------------------------------------
# The command line


def _write(path: Path, data: object) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def _lines(capsys: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_cli_exit_statuses(tmp_path: Path, capsys) -> None:
    """0 all legal with matching claims; 1 a violation or claim mismatch; 2 an unreadable or
    invalid record, the other files still checked, one line per file in order."""
    legal = _write(tmp_path / "legal.json", record(HAND0))
    illegal = _write(tmp_path / "illegal.json", record(HAND0, [*HAND1_TO_LEAD, BAD_PLAY]))
    claim = _write(tmp_path / "claim.json", record(HAND0, claimed={"scores": [0, 0]}))
    broken = _write(tmp_path / "broken.json", "{not json")
    missing = str(tmp_path / "missing.json")

    assert cli.main(["audit", legal]) == 0
    assert [v["legal"] for v in _lines(capsys)] == [True]
    assert cli.main(["audit", legal, illegal]) == 1
    assert [v["legal"] for v in _lines(capsys)] == [True, False]
    assert cli.main(["audit", claim]) == 1
    capsys.readouterr()
    assert cli.main(["audit", broken, legal]) == 2
    lines = _lines(capsys)
    assert lines[0]["record"] == broken and "error" in lines[0] and lines[1]["legal"] is True
    assert cli.main(["audit", legal, missing, illegal]) == 2
    lines = _lines(capsys)
    assert [v["record"] for v in lines] == [legal, missing, illegal]
    assert list(lines[1]) == ["record", "error"]


def test_cli_keep_going(tmp_path: Path, capsys) -> None:
    illegal = _write(tmp_path / "illegal.json", record(HAND0, [*HAND1_TO_LEAD, BAD_PLAY]))
    assert cli.main(["audit", "--keep-going", illegal]) == 1
    (verdict,) = _lines(capsys)
    assert [v["code"] for v in verdict["violations"]] == ["MUST_FOLLOW_SUIT"]


def _stdin(monkeypatch, data: bytes) -> None:
    """Standard input holding ``data`` (its text layer in Latin-1, as a C locale may decode)."""
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="latin-1"))


def test_cli_reads_one_record_from_stdin(monkeypatch, capsys) -> None:
    """`audit -` reads one record from standard input."""
    _stdin(monkeypatch, json.dumps(record(HAND0)).encode())
    assert cli.main(["audit", "-"]) == 0
    (verdict,) = _lines(capsys)
    assert verdict["record"] == "-" and verdict["scores"] == [20, -250]
    _stdin(monkeypatch, b"nope")
    assert cli.main(["audit", "-"]) == 2


def test_cli_reads_stdin_once(monkeypatch, capsys) -> None:
    """Was: ``audit - -`` read standard input twice; empty the second time, the second verdict
    said "not valid JSON", blaming a record nobody sent. Now a usage error (exit 2), nothing
    audited."""
    _stdin(monkeypatch, json.dumps(record(HAND0)).encode())
    assert cli.main(["audit", "-", "-"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "pinochle-referee: - (standard input) can be given once\n"


def test_cli_stdin_must_be_utf8_like_a_file(monkeypatch, capsys, tmp_path: Path) -> None:
    """GAME_RECORD.md §1: a record is UTF-8. The same bytes get the same verdict from a file and
    from standard input, whatever the locale would decode them as."""
    data = json.dumps({**record(HAND0), "x-note": "\xff"}).encode().replace(b"\\u00ff", b"\xff")
    assert b"\xff" in data
    (tmp_path / "r.json").write_bytes(data)
    assert cli.main(["audit", str(tmp_path / "r.json")]) == 2
    assert "cannot read the file" in _lines(capsys)[0]["error"]
    _stdin(monkeypatch, data)
    assert cli.main(["audit", "-"]) == 2
    (verdict,) = _lines(capsys)
    assert verdict["record"] == "-" and "cannot read standard input" in verdict["error"]
    _stdin(monkeypatch, json.dumps({**record(HAND0), "x-note": "\u00ff"}).encode())
    assert cli.main(["audit", "-"]) == 0  # the same character, in UTF-8


def test_cli_jobs_give_the_same_lines(tmp_path: Path, capsys) -> None:
    """--jobs 2 over 10 files prints exactly what --jobs 1 prints, in file order."""
    sources = [
        record(HAND0),
        record(HAND0, [*HAND1_TO_LEAD, BAD_PLAY]),
        record(HAND0, claimed={"winner": 1}),
        "]",
        record(HAND0, colour=1),
    ]
    paths = [_write(tmp_path / f"r{i}.json", sources[i % len(sources)]) for i in range(10)]
    assert cli.main(["audit", "--jobs", "1", *paths]) == 2
    one = capsys.readouterr().out
    assert cli.main(["audit", "--jobs", "2", *paths]) == 2
    two = capsys.readouterr().out
    assert one == two and len(one.splitlines()) == 10
    assert [json.loads(line)["record"] for line in two.splitlines()] == paths


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_cli_jobs_below_one_is_a_usage_error(tmp_path: Path, capsys, jobs: str) -> None:
    """Exit 2 is for input the command cannot use (§2), never 1, which says a record broke a
    rule: --jobs below 1 is refused before any record is read."""
    legal = _write(tmp_path / "legal.json", record(HAND0))
    assert cli.main(["audit", "--jobs", jobs, legal]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "--jobs" in out.err


def test_cli_stdin_among_many_files_is_read_with_jobs(tmp_path: Path, monkeypatch, capsys) -> None:
    """§2: `-` reads one record from standard input, also among enough files for --jobs to use
    worker processes (which cannot read this process's standard input)."""
    paths = [_write(tmp_path / f"r{i}.json", record(HAND0)) for i in range(8)]
    _stdin(monkeypatch, json.dumps(record(HAND0, [*HAND1_TO_LEAD, BAD_PLAY])).encode())
    assert cli.main(["audit", "--jobs", "2", *paths, "-"]) == 1
    lines = _lines(capsys)
    assert [v["record"] for v in lines] == [*paths, "-"]
    assert [v["legal"] for v in lines] == [True] * 8 + [False]
    assert lines[-1]["violation"]["code"] == "MUST_FOLLOW_SUIT"


# --------------------------------------------------------------------------------------------
# Fuzz: random and mutated records never escape as exceptions


def _exported(variant: str, options: dict[str, object], seed: str, actions: int) -> Any:
    """A real exported record: a seeded game, seat (dealer + 1) declaring, cut after
    ``actions`` actions."""
    rules = resolve_options(variant, options)
    game = Game(rules, 0, SeededDeals(seed))
    for _ in range(actions):
        if game.state.over or game.state.hand is None:
            break
        h = game.state.hand
        if h.phase == "auction" and h.turn == (h.dealer + 1) % rules.players and h.high_bid is None:
            from referee.engine.engine import bid_window

            seat, data = h.turn, {"type": "bid", "amount": bid_window(game.state.setup, h)[0]}
        else:
            seat, data = auto_action(game.state)
        game.act(seat, decode_action(data))
    return json.loads(json.dumps(game.export(players=None)))


BASES = [
    record(HAND0, [*HAND1_TO_LEAD, BAD_PLAY], claimed={"scores": [20, -250]}),
    _exported("partnership", {}, "fuzz", 70),
    _exported("cutthroat", {}, "fuzz", 60),
    _exported("double-deck", {"deck": 48, "exchange_mode": "kitty"}, "fuzz", 60),
    _exported("partnership-no-bid", {}, "fuzz", 60),
]

CARDISH = st.sampled_from(
    ["AS", "10h", "TD", "qc", "9H", "JS", "KD", "1S", "AX", "", "A", "10", " QS "]
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=300)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | CARDISH,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=6) | st.sampled_from(["seat", "type", "x-a"]), children, max_size=4
        )
    ),
    max_leaves=8,
)


def _paths(value: object, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


def _mutate(rec: Any, data: Any) -> Any:
    """Apply one mutation at a random place: drop a key or item, replace a value (any JSON, or
    a card-like string), or truncate a list."""
    paths = [p for p in _paths(rec) if p]
    if not paths:
        return data.draw(JSON_VALUES)
    path = data.draw(st.sampled_from(paths))
    parent: Any = rec
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    kind = data.draw(st.sampled_from(["drop", "replace", "card", "truncate"]))
    target = parent[key]
    if kind == "drop":
        del parent[key]
    elif kind == "card" or (kind == "truncate" and not isinstance(target, list)):
        parent[key] = data.draw(CARDISH)
    elif kind == "truncate":
        del target[data.draw(st.integers(0, len(target))) :]
    else:
        parent[key] = data.draw(JSON_VALUES)
    return rec


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_records_give_well_formed_verdicts(data) -> None:
    """Drop keys, change types, replace cards, truncate lists of real records: audit_text always
    answers a well-formed verdict (an error, or every verdict field with the right types)."""
    rec = copy.deepcopy(data.draw(st.sampled_from(BASES)))
    for _ in range(data.draw(st.integers(1, 3))):
        rec = _mutate(rec, data)
    keep_going = data.draw(st.booleans())
    verdict = audit_text(json.dumps(rec), "m.json", keep_going)
    check_verdict(verdict, "m.json")
    if "error" not in verdict:
        assert ("violations" in verdict) == keep_going


@settings(max_examples=60, deadline=None)
@given(JSON_VALUES | st.text(max_size=30))
def test_random_input_gives_well_formed_verdicts(value) -> None:
    """Arbitrary JSON (or text) is a record error, never an exception."""
    text = value if isinstance(value, str) else json.dumps(value)
    verdict = audit_text(text, "r")
    check_verdict(verdict, "r")


def test_the_fuzz_bases_are_what_they_seem() -> None:
    """The exported bases audit as legal (a referee's own export is legal, §2)."""
    for base in BASES[1:]:
        verdict = audit(copy.deepcopy(base))
        assert check_verdict(verdict) == 0, verdict
    assert audit(copy.deepcopy(BASES[0]))["legal"] is False


@pytest.mark.parametrize("key", ["widow", "stock"])
@pytest.mark.parametrize("value", [0, False, "", {}, "AS", 1.5])
def test_a_widow_or_stock_not_a_card_list_is_a_record_error(key: str, value: object) -> None:
    """A deal's widow and stock are card lists (GAME_RECORD.md §1): absent or null is none, and
    anything else but a list is refused, not read as empty."""
    deal = {"hands": [["AS"]], key: value}
    with pytest.raises(RecordError, match=f"deal.{key}: must be a list of cards"):
        parse_deal(deal, "deal")
    assert parse_deal({"hands": [["AS"]], key: None}, "deal") == parse_deal(
        {"hands": [["AS"]]}, "deal"
    )


@pytest.mark.parametrize("keep_going", [False, True])
@pytest.mark.parametrize(
    "spoil",
    ["short deal", "garbage hand", "bad card in a deal", "actions not a list", "bad claim"],
)
def test_a_malformed_later_hand_is_a_record_error_despite_an_earlier_violation(
    spoil: str, keep_going: bool
) -> None:
    """A.7 item 10: bad deals and malformed records are record errors (exit 2), never
    violations, wherever they are: checking that stops at a violation in hand 0 must not let a
    broken hand 2 pass as merely illegal."""
    bad_bid = [{"seat": 1, "type": "bid", "amount": 5}, *HAND0[1:]]
    rec = record(bad_bid, HAND1_TO_LEAD, HAND1_TO_LEAD)
    later = rec["hands"][2]
    if spoil == "short deal":
        later["deal"]["hands"][0] = later["deal"]["hands"][0][:5]
    elif spoil == "garbage hand":
        rec["hands"][2] = "garbage"
    elif spoil == "bad card in a deal":
        later["deal"]["hands"][0][0] = "ZZ"
    elif spoil == "actions not a list":
        later["actions"] = {"seat": 1}
    else:
        later["claimed"] = {"delta": "all of it"}
    verdict = audit_record(rec, keep_going=keep_going)
    assert check_verdict(verdict) == 2
    assert str(verdict["error"]).startswith("hands[2]")
    healthy = audit_record(record(bad_bid, HAND1_TO_LEAD, HAND1_TO_LEAD), keep_going=keep_going)
    assert check_verdict(healthy) == 1


def test_a_completed_hand_s_claim_is_checked_even_when_an_action_follows_its_end() -> None:
    """A.7 item 10: "a hand's delta claim is checked once that hand is complete": an action
    recorded after the hand's end stops checking, but the claim of the complete hand stands."""
    rec = record([*HAND0, {"seat": 2, "type": "pass"}])
    rec["hands"][0]["claimed"] = {"delta": [0, 0]}
    for keep_going in (False, True):
        verdict = audit_record(rec, keep_going=keep_going)
        assert check_verdict(verdict) == 1
        violation = verdict["violation"]
        assert isinstance(violation, dict) and violation["code"] == "WRONG_PHASE"
        assert verdict["claims"] == [
            {"hand": 0, "field": "delta", "claimed": [0, 0], "computed": [20, -250]}
        ]


def test_the_shipped_examples_audit_as_the_readme_says() -> None:
    """``examples/``: a whole partnership game to 500 (legal, finished, side 1 wins) and the
    record of README "Auditing a recorded game" (illegal at its 27th action)."""
    examples = Path(__file__).resolve().parent.parent / "examples"
    assert sorted(path.name for path in examples.iterdir()) == [
        "partnership-game.json",
        "partnership-illegal.json",
    ]
    game = audit_text((examples / "partnership-game.json").read_text(encoding="utf-8"))
    assert (game["legal"], game["finished"], game["winner"], game["scores"]) == (
        True,
        True,
        1,
        [120, 500],
    )
    assert verdict_exit_status(game) == 0
    illegal = audit_text((examples / "partnership-illegal.json").read_text(encoding="utf-8"))
    assert illegal["legal"] is False and verdict_exit_status(illegal) == 1


def _audit_with_terminals(paths: list[str], stdout_terminal: bool) -> tuple[bytes, bytes]:
    """Run ``pinochle-referee audit`` with standard error on a pseudo-terminal, standard output
    on another one or on a pipe; return what each received."""
    error_main, error_side = pty.openpty()
    out_main, out_side = pty.openpty() if stdout_terminal else os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "referee.cli", "audit", *paths],
        stdout=out_side,
        stderr=error_side,
        env=os.environ | {"COLUMNS": "80", "TERM": "xterm"},
    )
    os.close(error_side)
    os.close(out_side)
    received: dict[int, bytearray] = {error_main: bytearray(), out_main: bytearray()}
    open_ends = set(received)
    while open_ends:
        ready, _, _ = select.select(list(open_ends), [], [], 60)
        assert ready, "audit wrote nothing for 60 s"
        for end in ready:
            try:
                chunk = os.read(end, 65536)
            except OSError:  # a pseudo-terminal whose other side closed
                chunk = b""
            if chunk:
                received[end] += chunk
            else:
                open_ends.discard(end)
    assert process.wait(60) == 1
    for end in received:
        os.close(end)
    return bytes(received[out_main]), bytes(received[error_main])


def test_the_audit_progress_bar_goes_to_standard_error_only() -> None:
    """Was: the bar used rich's default console, standard output: with the verdicts going to
    a file and standard error on a terminal, no bar showed and the JSON Lines ended with an
    empty line. The bar is drawn on standard error while the output goes to a file or a pipe;
    with the output on a terminal there is none (the lines show the progress)."""
    examples = Path(__file__).resolve().parent.parent / "examples"
    paths = [str(examples / "partnership-game.json"), str(examples / "partnership-illegal.json")]
    out, err = _audit_with_terminals(paths, stdout_terminal=False)
    lines = out.decode().split("\n")
    assert lines[-1] == "" and len(lines) == 3, lines
    assert [json.loads(line)["legal"] for line in lines[:-1]] == [True, False]
    assert b"auditing" in err
    out, err = _audit_with_terminals(paths, stdout_terminal=True)
    assert [json.loads(line)["legal"] for line in out.decode().splitlines()] == [True, False]
    assert err == b""


def _audit_process(paths: list[str], *flags: str) -> subprocess.Popen[bytes]:
    """``pinochle-referee audit`` in its own process group (as a terminal's job), its standard
    output and error on pipes."""
    return subprocess.Popen(
        [sys.executable, "-m", "referee.cli", "audit", *flags, *paths],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_reader_that_goes_away_ends_audit_quietly(jobs: str) -> None:
    """Was: ``audit *.json | head -1`` ended in a BrokenPipeError traceback. The command ends
    quietly with 141, the status the shell gives ``cat`` killed by SIGPIPE."""
    game = str(Path(__file__).resolve().parent.parent / "examples" / "partnership-game.json")
    process = _audit_process([game] * 100, "--jobs", jobs)
    assert process.stdout is not None and process.stderr is not None
    assert json.loads(process.stdout.readline())["legal"] is True
    process.stdout.close()  # the reader is gone; the other 99 verdicts have nowhere to go
    assert process.wait(60) == 141
    assert process.stderr.read() == b""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_ends_audit_quietly(jobs: str) -> None:
    """Was: Ctrl-C printed a KeyboardInterrupt traceback. The terminal interrupts the whole
    process group (workers too): exit 130, the shell's status for an interrupted command,
    nothing on standard error, and the records not yet started are dropped."""
    game = str(Path(__file__).resolve().parent.parent / "examples" / "partnership-game.json")
    process = _audit_process([game] * 2000, "--jobs", jobs)
    assert process.stdout is not None and process.stderr is not None
    assert json.loads(process.stdout.readline())["legal"] is True
    os.killpg(process.pid, signal.SIGINT)
    assert process.wait(30) == 130
    assert process.stderr.read() == b""
    assert len(process.stdout.read().splitlines()) < 1999


class _Pool:
    """A stand-in for the process pool: records how many processes were asked for, runs the
    jobs here."""

    asked: ClassVar[list[int]] = []

    def __init__(self, max_workers: int, initializer: Callable[[], None]) -> None:
        self.asked.append(max_workers)

    def map(self, job: Callable[[Any], Any], items: list[Any], chunksize: int) -> Iterator[Any]:
        return map(job, items)

    def shutdown(self, wait: bool, cancel_futures: bool) -> None:
        pass


def test_cli_jobs_start_no_more_processes_than_cpus_or_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: the pool started every process asked for at once, so --jobs 100000 forked 100,000
    processes for 10 files (and stopped the machine). At most one per usable CPU and per file."""
    monkeypatch.setattr(cli, "ProcessPoolExecutor", _Pool)
    monkeypatch.setattr(cli, "_usable_cpus", lambda: 4, raising=False)
    _Pool.asked.clear()
    paths = [_write(tmp_path / f"r{i}.json", record(HAND0)) for i in range(10)]
    assert cli.main(["audit", "--jobs", "100000", *paths]) == 0
    assert len(_lines(capsys)) == 10
    monkeypatch.setattr(cli, "_usable_cpus", lambda: 64, raising=False)
    assert cli.main(["audit", "--jobs", "100000", *paths]) == 0
    assert len(_lines(capsys)) == 10
    assert _Pool.asked == [4, 10]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_output_to_a_full_disk_is_one_line() -> None:
    """Was: verdicts written to a full disk (here /dev/full) ended in an OSError traceback.
    Now one line on standard error, exit 1."""
    game = str(Path(__file__).resolve().parent.parent / "examples" / "partnership-game.json")
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "referee.cli", "audit", game],
            stdout=full,
            stderr=subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr == b"pinochle-referee: cannot write the output: No space left on device\n"


def _stored_game(db: Path) -> str:
    """A SQLite database at ``db`` holding one new game; its id."""

    async def create() -> str:
        store = SqliteStore(db)
        await store.open()
        try:
            created = await GameManager(store).create(
                variant="partnership",
                options=None,
                first_dealer=0,
                deal_mode={"mode": "seed", "seed": "closed-output"},
                players=(),
                token=None,
            )
        finally:
            await store.close()
        return created.game_id

    return asyncio.run(create())


def _redirected(
    argv: Sequence[str],
    redirect: str,
    stdin: bytes = b"",
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``pinochle-referee ARGV`` run by the shell with ``redirect`` (``>&-``, ``<&-``, ...)
    applied to it; its standard output is captured unless the redirection replaces it."""
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-m", "referee.cli", *argv],
        input=stdin,
        capture_output=True,
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        timeout=120,
        check=False,
    )


_COMMANDS_THAT_PRINT = (
    "audit",
    "query",
    "export",
    "backup",
    "downgrade",
    "verify-audit",
    "list-games",
    "verify-deal",
    "demo",
)


def _commands_that_print(tmp_path: Path) -> dict[str, tuple[list[str], bytes]]:
    """Each command that writes to standard output, as it would succeed (exit 0) with an open
    one: its arguments and its standard input."""
    game = Path(__file__).resolve().parent.parent / "examples" / "partnership-game.json"
    deal = json.loads(game.read_text())["hands"][0]["deal"]
    commitment = deal_commitment(parse_deal(deal, "deal"), bytes.fromhex("00a1"))
    db = tmp_path / "referee.db"
    game_id = _stored_game(db)
    query = b'{"id": 1, "kind": "trick_points", "cards": ["AS"]}\n'
    return {
        "audit": (["audit", str(game)], b""),
        "query": (["query"], query),
        "export": (["export", game_id, "--db", str(db)], b""),
        "backup": (["backup", "--db", str(db), str(tmp_path / "copy.db")], b""),
        "downgrade": (["downgrade", "--db", str(db), "--to", str(SCHEMA_VERSION)], b""),
        "verify-audit": (["verify-audit", "--db", str(db)], b""),
        "list-games": (["list-games", "--db", str(db)], b""),
        "verify-deal": (["verify-deal", commitment, "00a1", json.dumps(deal)], b""),
        "demo": (["demo", "--options", json.dumps(SHORT_GAME["partnership"])], b""),
    }


@pytest.mark.parametrize(
    ("command", "redirect"),
    [(command, ">&-") for command in _COMMANDS_THAT_PRINT] + [("audit", "1</dev/null")],
)
def test_output_that_is_closed_is_one_line(tmp_path: Path, command: str, redirect: str) -> None:
    """Was: with standard output closed (``>&-``) Python makes ``sys.stdout`` None, print()
    writes nothing, and audit ended in an AttributeError traceback while query, export, backup,
    downgrade, verify-deal and demo exited 0 having printed nothing (backup having written its
    copy). Standard output opened for reading only (``1</dev/null``) made audit's write an
    OSError (EBADF) traceback. Now both are the output failure a full disk is: one line on
    standard error, exit 1, and nothing done (no copy made)."""
    argv, stdin = _commands_that_print(tmp_path)[command]
    # Without the redirection each command succeeds: the output is what fails below.
    done = subprocess.run(
        [sys.executable, "-m", "referee.cli", *argv],
        input=stdin,
        capture_output=True,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout != b"") == (0, True), done.stderr
    (tmp_path / "copy.db").unlink(missing_ok=True)
    done = _redirected(argv, redirect, stdin)
    assert done.returncode == 1, done.stderr.decode()
    assert done.stderr == b"pinochle-referee: cannot write the output: Bad file descriptor\n"
    assert not (tmp_path / "copy.db").exists()


def _buffered_environment() -> dict[str, str]:
    """The environment without PYTHONUNBUFFERED: standard output block-buffered, as for a user
    who runs the command (the test runner's environment may set it, and so may deploy/'s
    image)."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("redirect", [">/dev/full", "1</dev/null"])
@pytest.mark.parametrize("command", _COMMANDS_THAT_PRINT)
def test_output_that_fails_at_the_last_write_is_one_line(
    tmp_path: Path, command: str, redirect: str
) -> None:
    """Was: a command whose output fits Python's buffer (every one but audit, which flushes,
    and an export too large for it) wrote nothing until Python's own flush at exit, which
    failed there: "Exception ignored in: <_io.TextIOWrapper name='<stdout>' ...>", "OSError:
    [Errno 28] No space left on device" and exit 120, not the one line and exit 1 the README
    gives a full disk (or an output opened for reading only). Unseen with PYTHONUNBUFFERED set,
    which writes each line at once. Now standard output is flushed before the command's status
    is returned."""
    argv, stdin = _commands_that_print(tmp_path)[command]
    done = _redirected(argv, redirect, stdin, env=_buffered_environment())
    reason = "No space left on device" if redirect == ">/dev/full" else "Bad file descriptor"
    assert (done.returncode, done.stderr.decode()) == (
        1,
        f"pinochle-referee: cannot write the output: {reason}\n",
    )


def test_standard_input_opened_for_writing_only_is_the_inputs_failure() -> None:
    """Was: ``query`` with standard input open for writing only (``0>/dev/null``) met EBADF
    reading it, and main took every EBADF for the output's: "cannot write the output: Bad file
    descriptor", exit 1, about an output that was fine. Now it is the input's failure, as for
    a closed standard input: one line and exit 2 (audit - and verify-deal - were already)."""
    done = _redirected(["query"], "0>/dev/null")
    assert (done.returncode, done.stdout, done.stderr.decode()) == (
        2,
        b"",
        "pinochle-referee: cannot read standard input: Bad file descriptor\n",
    )


@pytest.mark.parametrize(
    ("argv", "expected_status", "expected_stderr"),
    [
        (["query"], 2, b"pinochle-referee: cannot read standard input: Bad file descriptor\n"),
        (
            ["verify-deal", "0" * 64, "00a1", "-"],
            2,
            b"pinochle-referee: cannot read standard input: Bad file descriptor\n",
        ),
        (["audit", "-"], 2, b""),
    ],
    ids=["query", "verify-deal", "audit"],
)
def test_input_that_is_closed_is_the_inputs_failure(
    argv: list[str], expected_status: int, expected_stderr: bytes
) -> None:
    """Was: with standard input closed (``<&-``) Python makes ``sys.stdin`` None, and
    ``query``, ``verify-deal ... -`` and ``audit -`` ended in an AttributeError traceback. Now
    it is the input's failure, as a file that cannot be read is: one line and exit 2 (audit: the
    record's verdict says standard input cannot be read)."""
    done = _redirected(argv, "<&-")
    assert (done.returncode, done.stderr) == (expected_status, expected_stderr), done.stderr
    if argv[0] == "audit":
        verdict = json.loads(done.stdout)
        assert verdict == {
            "record": "-",
            "error": "cannot read standard input: [Errno 9] Bad file descriptor",
        }
