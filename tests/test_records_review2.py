"""Second review of recorded games, the auditor and rules queries against GAME_RECORD.md.

Each test pins a defect found in the review, fixed with it; the docstring says what was wrong.
"""

from __future__ import annotations

import copy
from typing import Any

from referee.audit import audit_record, verdict_exit_status
from tests.test_audit import HAND0, HAND1_TO_LEAD
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
