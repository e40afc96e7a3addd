"""Verdicts on recorded games that mutation testing found unpinned (GAME_RECORD.md §1-§2,
RULES.md A.5, A.7 item 10, A.10 items 6-7).

Each test names the rule it pins. They were written against mutants of ``referee/audit.py``
that the rest of the suite let through (a record with no hands crashing, a claim that is not an
object read as one, checking going on past the first violation, a later hand's claim compared
with the first hand's delta, ...); each test fails with its mutant applied and passes without
it. Records are built with the helpers of ``tests.test_audit``.
"""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from referee.audit import audit_record, audit_text
from tests.test_audit import (
    BAD_PLAY,
    DEAL,
    HAND0,
    HAND1_TO_LEAD,
    audit,
    check_verdict,
    record,
)
from tests.test_violations import NO_EXCHANGE

# Hand 1 (dealer 1) conceded by its declarer, seat 1, before the first lead: delta [0, -250].
HAND1_CONCEDED = [*HAND1_TO_LEAD[:-1], {"seat": 1, "type": "concede"}]
GAME_OVER_OPTIONS = {"target": 10, **NO_EXCHANGE}


def is_record_error(data: object) -> bool:
    verdict = audit(data)
    return check_verdict(verdict) == 2


# --------------------------------------------------------------------------------------------
# Reading a record (GAME_RECORD.md §1)


def test_a_record_with_no_hands_is_a_legal_game_not_started() -> None:
    """GAME_RECORD.md §1: a record may stop anywhere, even before the first deal; its verdict
    is legal with nothing checked (never a traceback)."""
    verdict = audit(record())
    assert check_verdict(verdict) == 0
    assert (verdict["actions_checked"], verdict["hands"], verdict["scores"]) == (0, [], [0, 0])
    assert verdict["finished"] is False


@pytest.mark.parametrize(
    "entry",
    [
        [],
        5,
        {"deal": DEAL, "actions": HAND0, "claimed": []},
        {"deal": DEAL, "actions": HAND0, "claimed": 5},
    ],
)
def test_a_hands_entry_or_its_claim_that_is_not_an_object_is_a_record_error(entry: object) -> None:
    """GAME_RECORD.md §1: a ``hands`` entry and its ``claimed`` are objects; anything else is a
    record error (exit 2), never a traceback."""
    assert is_record_error({**record(), "hands": [entry]})


@pytest.mark.parametrize("claimed", [[], 5, [["scores", [20, -250]]]])
def test_a_game_claim_that_is_not_an_object_is_a_record_error(claimed: object) -> None:
    """GAME_RECORD.md §1: the game's ``claimed`` is an object with ``scores`` and ``winner``."""
    assert is_record_error(record(HAND0, claimed=claimed))


def test_an_unknown_key_in_a_claim_is_a_record_error() -> None:
    """GAME_RECORD.md §1: unknown keys are errors (usually typos), in a claim too: a claimed
    ``score`` or ``deltas`` is not silently ignored as claiming nothing."""
    hand = {"deal": DEAL, "actions": HAND0, "claimed": {"deltas": [20, -250]}}
    assert is_record_error({**record(), "hands": [hand]})
    hand["claimed"] = {"delta": [20, -250], "x-note": "checked"}
    assert check_verdict(audit({**record(), "hands": [hand]})) == 0
    assert is_record_error(record(HAND0, claimed={"score": [20, -250]}))
    assert check_verdict(audit(record(HAND0, claimed={"scores": [20, -250]}))) == 0


@pytest.mark.parametrize("hands", [None, 5, {"0": []}])
def test_a_deals_hands_not_a_list_is_a_record_error(hands: object) -> None:
    """GAME_RECORD.md §1: ``deal.hands`` is a list of every seat's cards."""
    rec = record(HAND0)
    rec["hands"][0]["deal"]["hands"] = hands
    assert is_record_error(rec)


@pytest.mark.parametrize("dealer", [-1, -4])
def test_a_negative_dealer_is_a_record_error(dealer: int) -> None:
    """GAME_RECORD.md §1: ``dealer`` is a seat from 0 to n-1; a negative one is a record error,
    never a traceback."""
    assert is_record_error(record(HAND0, dealer=dealer))


def test_a_two_handed_game_refuses_what_only_a_rules_query_accepts() -> None:
    """OPTIONS.json ``game_values_by_variant`` (A.10 items 1 and 7): a two-handed *game* refuses
    ``run_counts_its_royal_marriage: true``, which a rules query accepts; a recorded game is a
    game, so such a record is a record error."""
    rec = {
        "format": "pinochle-record/1",
        "variant": "two-handed",
        "options": {"run_counts_its_royal_marriage": True},
        "hands": [],
    }
    assert is_record_error(rec)
    rec["options"] = {"run_counts_its_royal_marriage": False}
    assert check_verdict(audit(rec)) == 0


def test_a_record_held_in_other_mappings_audits_as_json_does() -> None:
    """``audit_record`` takes a record already parsed: any mapping, not only a dict, for the
    record and for each action (a read-only view of a record is audited the same)."""
    rec = record(HAND0)
    rec["hands"][0]["actions"] = [MappingProxyType(a) for a in HAND0]
    verdict = audit(MappingProxyType(rec))
    assert verdict == audit(record(HAND0))
    assert check_verdict(verdict) == 0


def test_a_number_too_long_for_python_is_not_valid_json() -> None:
    """GAME_RECORD.md §2: a record Python cannot read (an integer of more than 4,300 digits)
    gets the ``{"record", "error"}`` verdict, exit 2, not a traceback."""
    text = json.dumps(record(HAND0)).replace('"dealer": 0', '"dealer": ' + "1" * 5000)
    verdict = audit_text(text, "big.json")
    assert verdict == {
        "record": "big.json",
        "error": "not valid JSON: a number has too many digits",
    }


def test_the_defaults_of_audit_record_and_audit_text() -> None:
    """GAME_RECORD.md §2: without ``--keep-going`` checking stops at the first violation and
    the verdict has no ``violations`` list; a record read without a name is ``-`` (stdin)."""
    rec = record(HAND0, [*HAND1_TO_LEAD, BAD_PLAY, {"seat": 1, "type": "play", "card": "10C"}])
    for verdict in (audit_record(rec), audit_text(json.dumps(rec))):
        assert verdict["record"] == "-"
        assert "violations" not in verdict
        assert verdict["actions_checked"] == len(HAND0) + len(HAND1_TO_LEAD) + 1


# --------------------------------------------------------------------------------------------
# Checking stops at the first violation (A.7 item 10, A.10 item 6)


def test_checking_stops_at_the_first_game_over() -> None:
    """A.7 item 9 and item 10: after the game's end the first action is GAME_OVER and checking
    stops there; the hands recorded after it are not read on (A.10 item 6 counts them only with
    --keep-going)."""
    late = [{"seat": 2, "type": "pass"}, {"seat": 3, "type": "pass"}]
    verdict = audit(record(HAND0, late, late, options=GAME_OVER_OPTIONS))
    assert check_verdict(verdict) == 1
    assert verdict["violation"]["code"] == "GAME_OVER"
    assert verdict["actions_checked"] == len(HAND0) + 1
    verdict = audit(record(HAND0, late, late, options=GAME_OVER_OPTIONS), keep_going=True)
    assert verdict["actions_checked"] == len(HAND0) + 4


def test_after_the_hand_ended_a_bad_seat_or_field_is_malformed_first() -> None:
    """A.5: MALFORMED_ACTION comes before WRONG_PHASE, also for an action recorded after its
    hand ended: a seat the game has not, or a field the game's options refuse (a meld's
    ``name`` outside two-handed), is MALFORMED_ACTION; a well-formed one is WRONG_PHASE."""
    for late, code in [
        ({"seat": 9, "type": "pass"}, "MALFORMED_ACTION"),
        ({"seat": 2, "type": "meld", "cards": [], "name": "marriage"}, "MALFORMED_ACTION"),
        ({"seat": 2, "type": "meld", "cards": []}, "WRONG_PHASE"),
    ]:
        verdict = audit(record([*HAND0, late]))
        assert check_verdict(verdict) == 1
        assert (verdict["violation"]["action"], verdict["violation"]["code"]) == (10, code)


# --------------------------------------------------------------------------------------------
# Claims (GAME_RECORD.md §1-§2)


def test_a_later_hands_claim_is_compared_with_that_hands_delta() -> None:
    """GAME_RECORD.md §2: each hand's claimed delta is checked against that hand's computed
    delta (hand 1: [0, -250]), not against another hand's (hand 0: [20, -250])."""
    rec = record(HAND0, HAND1_CONCEDED)
    rec["hands"][0]["claimed"] = {"delta": [20, -250]}
    rec["hands"][1]["claimed"] = {"delta": [0, -250]}
    verdict = audit(rec)
    assert check_verdict(verdict) == 0
    assert [h["delta"] for h in verdict["hands"]] == [[20, -250], [0, -250]]
    rec["hands"][1]["claimed"] = {"delta": [20, -250]}
    assert audit(rec)["claims"] == [
        {"hand": 1, "field": "delta", "claimed": [20, -250], "computed": [0, -250]}
    ]
