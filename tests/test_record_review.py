"""Conformance review of GAME_RECORD.md (records, verdicts, queries, commands), RULES.md A.7.

Tests marked "DISCREPANCY" pin places where the audit did not do what the contract says, fixed
with them (a bad deal after the game's end, a claim's shape, a seat out of range after a hand's
end). The others pin down contract behaviour that had no test of its own.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import random
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from referee import cli
from referee.audit import audit_record, verdict_exit_status
from tests.service_helpers import SHORT_GAME, Served, new_table, play, serving
from tests.test_audit import HAND0, HAND1_TO_LEAD
from tests.test_audit import record as _record

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / ".venv" / "bin" / "pinochle-referee"
# Partnership without exchange, target 10: HAND0 (a concession, 20 / -250) ends the game.
ENDS_AFTER_HAND0 = {"exchange_count": 0, "target": 10}


def record(*hands: list[Any], **extra: object) -> dict[str, Any]:
    """tests.test_audit.record, deep-copied (its helper shares the action dicts)."""
    return copy.deepcopy(_record(*hands, **extra))


def audit(data: object, keep_going: bool = False) -> dict[str, Any]:
    return audit_record(data, "-", keep_going)


# --------------------------------------------------------------------------------------------
# DISCREPANCY 1: a bad deal in a hand after the game ended is never checked.
# GAME_RECORD.md §1: "The deal must be a whole, correct deck for the variant"; §2: exit 2 when a
# file "is not a valid record"; RULES.md A.7 item 10: "Bad deals ... are record errors (exit 2),
# never violations." referee/audit.py _audit skips parse_deal/start_hand once state.over, so the
# record below audits as legal (exit 0), or as GAME_OVER (exit 1) when the hand has actions.


@pytest.mark.parametrize(
    ("deal", "actions"),
    [
        ({"hands": [["AS"]]}, []),  # one card: not a deck
        (5, []),  # not even an object
        (None, []),  # deal left out
        ({"hands": [["AS"]]}, HAND1_TO_LEAD[:1]),  # with an action: GAME_OVER instead of exit 2
    ],
    ids=["one-card", "not-an-object", "missing", "with-actions"],
)
def test_bad_deal_after_the_game_ended_is_a_record_error(deal: object, actions: list[Any]) -> None:
    data = record(HAND0, actions, options=ENDS_AFTER_HAND0)
    assert audit(record(HAND0, options=ENDS_AFTER_HAND0))["finished"] is True
    if deal is None:
        del data["hands"][1]["deal"]
    else:
        data["hands"][1]["deal"] = deal
    verdict = audit(data)
    assert "error" in verdict, verdict  # actual: legal (exit 0) or GAME_OVER (exit 1)
    assert verdict_exit_status(verdict) == 2


# --------------------------------------------------------------------------------------------
# DISCREPANCY 2: a malformed claim is a record error only when the audit happens to compare it.
# GAME_RECORD.md §1 gives the claim shapes ({"delta": [...]}, {"scores": [...], "winner": n});
# §2: exit 2 when a file "is not a valid record". A.7 item 10 says *when* claims are compared, not
# that their shape goes unchecked. referee/audit.py validates claim shapes only inside
# _check_hand_claim/_check_game_claim, which run for complete hands / violation-free records, so
# the same malformed field is exit 2 in one record and exit 0 or 1 in another.


def test_malformed_hand_claim_is_an_error_even_when_the_hand_is_unfinished() -> None:
    complete = record(HAND0)
    complete["hands"][0]["claimed"] = {"delta": "junk"}
    assert verdict_exit_status(audit(complete)) == 2  # complete hand: a record error
    unfinished = record(HAND0[:5])
    unfinished["hands"][0]["claimed"] = {"delta": "junk"}
    verdict = audit(unfinished)
    assert "error" in verdict, verdict  # actual: legal, exit 0, claims []


def test_malformed_game_claim_is_an_error_even_after_a_violation() -> None:
    assert verdict_exit_status(audit(record(HAND0, claimed="junk"))) == 2
    bad_concede = [*HAND0[:5], {"seat": 3, "type": "concede"}]  # WRONG_PHASE at action 5
    verdict = audit(record(bad_concede, claimed="junk"))
    assert "error" in verdict, verdict  # actual: violation verdict, exit 1


# --------------------------------------------------------------------------------------------
# DISCREPANCY 3: after a hand ends, an out-of-range seat gets WRONG_PHASE, not MALFORMED_ACTION.
# RULES.md A.5: exactly one code, "the first that applies in this order", MALFORMED_ACTION first.
# The engine calls seat 9 MALFORMED_ACTION ("seat must be a number from 0 to 3") mid-hand and after
# the game ended; referee/audit.py _play_hand raises WRONG_PHASE ("the hand is over") before apply
# or any seat-range check.


@pytest.mark.parametrize("seat", [9, -1])
def test_out_of_range_seat_after_a_hand_ended_is_malformed(seat: int) -> None:
    action = {"seat": seat, "type": "pass"}
    mid_hand = audit(record([action]))["violation"]
    after_game = audit(record(HAND0, [action], options=ENDS_AFTER_HAND0))["violation"]
    assert mid_hand["code"] == after_game["code"] == "MALFORMED_ACTION"
    after_hand = audit(record([*HAND0, action]))["violation"]
    assert (after_hand["hand"], after_hand["action"]) == (0, 10)
    assert after_hand["code"] == "MALFORMED_ACTION"  # actual: WRONG_PHASE


# --------------------------------------------------------------------------------------------
# Behaviour the contract states that had no test of its own.


def test_bidding_hand_in_progress_reports_meld_so_far_and_delta_zero() -> None:
    """A.7 item 10 / GAME_RECORD.md §2: the hand in progress is listed last, state reached,
    delta 0; scores add completed hands only (A.9 item 8)."""
    verdict = audit(record(HAND0, HAND1_TO_LEAD[:5]))
    assert verdict["legal"] and not verdict["finished"] and verdict["winner"] is None
    assert verdict["scores"] == [20, -250]
    in_progress = audit(record(HAND0[:9]))
    assert in_progress["hands"][-1]["meld"] == [20, 0, 0, 0]
    assert in_progress["hands"][-1]["delta"] == [0, 0] and in_progress["scores"] == [0, 0]


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as served:
        yield served


def _commitment(deal: object, salt_hex: str) -> str:
    """RULES.md A.10 item 4, computed independently of referee.rules.dealing."""
    canonical = json.dumps(deal, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(canonical + bytes.fromhex(salt_hex)).hexdigest()


@pytest.mark.parametrize(
    ("variant", "options"),
    [
        ("two-handed", SHORT_GAME["two-handed"]),
        ("cutthroat", SHORT_GAME["cutthroat"]),
        ("partnership", SHORT_GAME["partnership"]),
        ("double-deck", SHORT_GAME["double-deck"]),
        ("double-deck", {"deck": 48, "exchange_mode": "kitty", "target": 60}),
        ("partnership-no-bid", SHORT_GAME["partnership-no-bid"]),
    ],
)
async def test_service_export_of_a_finished_game_audits_legal_with_revealed_deals(
    srv: Served, variant: str, options: dict[str, object]
) -> None:
    """GAME_RECORD.md §2: the service's export audits as legal; its scores and winner are the
    game's, true claims check out, and every hand carries its deal (§1 shapes) with a salt that
    opens the deal's commitment (A.10 item 4)."""
    table = await new_table(srv.client, variant, options, seed=f"review-{variant}")
    await play(table, random.Random(7))
    final = await table.adj.view()
    exported = await table.adj.export()
    data = json.loads(json.dumps(exported))
    assert data["format"] == "pinochle-record/1" and data["variant"] == variant
    verdict = audit(data)
    assert verdict["legal"] and verdict["finished"], verdict
    assert (verdict["scores"], verdict["winner"]) == (final["scores"], final["winner"])
    assert len(verdict["hands"]) == len(data["hands"])
    for number, hand in enumerate(data["hands"]):
        deal = hand["deal"]
        assert set(deal) == {"hands", "widow", "stock", "turn_up"}
        assert _commitment(deal, hand["x-deal-salt"]) == hand["x-deal-commitment"]
        dealt = sum(len(h) for h in deal["hands"]) + len(deal["widow"]) + len(deal["stock"])
        if variant == "two-handed":
            assert deal["turn_up"] is not None and len(deal["stock"]) == 23
            assert dealt + 1 == 48  # the stock is given without the turned card
        elif variant == "partnership-no-bid":
            dealer = verdict["hands"][number]["dealer"]
            assert deal["turn_up"] in deal["hands"][dealer] and dealt == 48
        else:
            assert deal["turn_up"] is None and not deal["stock"]
        hand["claimed"] = {"delta": verdict["hands"][number]["delta"]}
    data["claimed"] = {"scores": final["scores"], "winner": final["winner"]}
    claimed = audit(data)
    assert claimed["claims"] == [] and verdict_exit_status(claimed) == 0


def test_verify_deal_checks_a_commitment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 4's `verify-deal COMMITMENT SALT DEAL` against A.10 item 4's commitment, computed
    here independently: one JSON line {valid, commitment as given, computed}; the hex
    commitment is read in either case and without surrounding space; `-` reads the deal from
    standard input; a mismatch is exit 1 (0 when it opens)."""
    deal = record(HAND0)["hands"][0]["deal"]
    salt = "00a1ff7e"
    expected = _commitment(deal, salt)
    given = f" {expected.upper()}\n"
    assert cli.main(["verify-deal", given, salt, json.dumps(deal)]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line == {"valid": True, "commitment": given, "computed": expected}
    stdin = io.TextIOWrapper(io.BytesIO(json.dumps(deal).encode()), encoding="latin-1")
    monkeypatch.setattr("sys.stdin", stdin)
    assert cli.main(["verify-deal", expected, salt, "-"]) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True
    assert cli.main(["verify-deal", expected, "00a1ff7f", json.dumps(deal)]) == 1
    line = json.loads(capsys.readouterr().out)
    assert line["valid"] is False and line["commitment"] == expected
    assert line["computed"] == _commitment(deal, "00a1ff7f")


def test_verify_deal_refuses_a_salt_that_is_no_salt(capsys: pytest.CaptureFixture[str]) -> None:
    """An empty salt (its hand's ``deal_salt`` not sent yet, a shell variable never set) or
    one with a space or an odd digit in it was never revealed: exit 2, like a commitment that
    is no SHA-256, and nothing on standard output. It was ``"valid": false``, exit 1, which
    says the server changed the deal after committing to it (``bytes.fromhex`` takes "" and
    skips spaces inside)."""
    deal = record(HAND0)["hands"][0]["deal"]
    salt = "00a1ff7e"
    real = _commitment(deal, salt)
    for given in ("", "  ", "00a1 ff7e", "00a1ff7", "0x00a1ff7e", "00a1ff7g"):
        assert cli.main(["verify-deal", real, given, json.dumps(deal)]) == 2, given
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            f"pinochle-referee: SALT must be hex digits, two for each byte, got {given!r}\n"
        )
    assert cli.main(["verify-deal", real, f" {salt.upper()}\n", json.dumps(deal)]) == 0


def test_verify_deal_refuses_a_commitment_that_is_no_sha256(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Was: a commitment cut short in a copy, or with ``0x`` before it, was answered
    ``"valid": false``, exit 1, which says the deal was changed after it was committed. Not 64
    hex digits, it is no published commitment: exit 2 (an argument that cannot be used, as a
    salt that is not hex), one line on standard error, nothing on standard output."""
    deal = record(HAND0)["hands"][0]["deal"]
    salt = "00a1ff7e"
    real = _commitment(deal, salt)
    for given in (real[:-1], f"0x{real}", f"{real}0", "", f"zz{real[2:]}", "not a commitment"):
        assert cli.main(["verify-deal", given, salt, json.dumps(deal)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            f"pinochle-referee: COMMITMENT must be 64 hex digits (a SHA-256), got {given!r}\n"
        )


def _run(args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed")
def test_console_script_audit_and_query(tmp_path: Path) -> None:
    """GAME_RECORD.md §2-§3 through the installed entry point: JSON Lines in argument order,
    error lines hold only record and error, the worst status wins, `-` reads stdin, and the
    §3 example is answered."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(record(HAND0)), encoding="utf-8")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(record(HAND0, claimed={"scores": [0, 0]})), encoding="utf-8")
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    done = _run(["audit", str(good), str(wrong)])
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [v["record"] for v in lines] == [str(good), str(wrong)]
    assert lines[1]["claims"] == [
        {"hand": None, "field": "scores", "claimed": [0, 0], "computed": [20, -250]}
    ]
    done = _run(["audit", str(broken), str(tmp_path / "missing.json"), str(good)])
    assert done.returncode == 2
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [sorted(v) for v in lines[:2]] == [["error", "record"], ["error", "record"]]
    assert lines[2]["legal"] is True
    done = _run(["audit", "-"], good.read_text(encoding="utf-8"))
    assert done.returncode == 0 and json.loads(done.stdout)["record"] == "-"
    example = {
        "id": 1,
        "kind": "meld",
        "trump": "H",
        "hand": ["AH", "10H", "KH", "QH", "JH", "KH", "QH", "9H"],
    }
    done = _run(["query"], json.dumps(example) + "\n" + '{"id": 2, "kind": "nope"}\n')
    assert done.returncode == 0
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first == {
        "id": 1,
        "total": 200,
        "melds": [
            {"name": "run", "level": 1, "points": 150, "cards": ["AH", "10H", "KH", "QH", "JH"]},
            {"name": "royal_marriage", "level": 1, "points": 40, "cards": ["KH", "QH"]},
            {"name": "dix", "level": 1, "points": 10, "cards": ["9H"]},
        ],
    }
    assert second["id"] == 2 and "error" in second
