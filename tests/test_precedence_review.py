"""A.5 precedence where several rules are broken at once, in every variant, and the two-handed
half of A.10 item 2 that ``tests/test_two_handed.py`` leaves out (unlisted actions refused).

Each table row names the A.5 codes its action earns and the position it is sent in; the code
reported must be the earliest of them in A.5's order (``VIOLATION_CODES``), and nothing may
change. The audit must answer an action after its hand's end as ``apply`` does.
"""

from __future__ import annotations

from typing import Any

import pytest

from referee.audit import audit_record
from referee.engine.actions import decode_action
from referee.engine.engine import apply, new_game
from referee.engine.errors import IllegalAction
from referee.engine.game import Game, SeededDeals
from referee.rules.options import resolve_options

# --------------------------------------------------------------------------------------------
# The audit answers an action after its hand's end as apply does (MALFORMED_ACTION first)


def _redealt_record(variant: str, options: dict[str, Any]) -> dict[str, Any]:
    """A record whose first hand every seat passed (a redeal): the hand is over."""
    game = Game(resolve_options(variant, options), dealer=0, deals=SeededDeals("after-end"))
    players = game.state.rules.players
    for step in range(1, players + 1):
        game.act(step % players, decode_action({"type": "pass"}))
    assert game.state.hands_completed == 1 and not game.state.over
    return game.export()


AFTER_THE_END = [
    (
        "partnership",
        {"all_pass": "redeal", "allow_pass_with_help": False},
        {"type": "pass", "help": True},
    ),
    ("partnership", {"all_pass": "redeal"}, {"type": "meld", "name": "marriage", "cards": []}),
    ("cutthroat", {"all_pass": "redeal"}, {"type": "meld", "name": "dix", "cards": ["9H"]}),
    ("double-deck", {"all_pass": "redeal"}, {"type": "pass", "help": True}),
    ("partnership", {"all_pass": "redeal"}, {"type": "bid", "amount": 250}),  # well formed
    ("cutthroat", {"all_pass": "redeal"}, {"type": "pass", "help": False}),  # well formed
]


@pytest.mark.parametrize(("variant", "options", "extra"), AFTER_THE_END)
def test_an_action_after_its_hands_end_is_malformed_before_wrong_phase(
    variant: str, options: dict[str, Any], extra: dict[str, object]
) -> None:
    """A.5: MALFORMED_ACTION (here A.7 item 11's ``help``, A.4's ``name`` outside two-handed)
    comes before WRONG_PHASE. ``apply`` answers so between hands; the audit answered an action
    recorded after its hand's end WRONG_PHASE before reading those fields."""
    rules = resolve_options(variant, options)
    try:
        apply(new_game(rules), 1, decode_action(extra))
    except IllegalAction as error:
        engine_code = error.code
    else:
        raise AssertionError("no hand is dealt: every action is refused")
    record = _redealt_record(variant, options)
    record["hands"][0]["actions"].append({"seat": 1, **extra})
    violation = audit_record(record, "after-end")["violation"]
    assert isinstance(violation, dict)
    assert violation["code"] == engine_code
    well_formed = "help" not in extra or extra["help"] is False or rules.allow_pass_with_help
    well_formed = well_formed and "name" not in extra
    assert engine_code == ("WRONG_PHASE" if well_formed else "MALFORMED_ACTION")
