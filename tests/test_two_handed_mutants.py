"""Two-handed behaviour that mutation testing found unpinned (RULES.md §2, A.5, A.8).

Each test names the rule it pins. They were written against mutants of
``referee/engine/two_handed.py`` that the two-handed tests and the wider engine suite (the
oracle comparison, golden games, vectors, properties) both let through: a refusal's ``field``
renamed, the removal of a named card from the cards still available (so a card named twice got
past the card check), and the first copy of A♠ on a table (physical id 0) taken for a card from
the concealed hand. Each test fails with its mutant applied and passes without it. Positions
come from the explicit-deal helpers of ``tests.test_two_handed`` and
``tests.test_two_handed_review``.
"""

from __future__ import annotations

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import apply
from referee.engine.errors import IllegalAction
from referee.engine.state import GameState
from tests.test_engine_mutants import hand
from tests.test_two_handed import (
    begin2,
    hand_of,
    meld,
    meld_events,
    send,
    send_events,
    snapshot,
    table_of,
    v_start,
    v_window,
    win_trick,
)
from tests.test_two_handed_review import playoff


def refusal(state: GameState, seat: int, kind: str, **fields: object) -> IllegalAction:
    """Send an action that must be refused; check that nothing changed; return the error."""
    before = snapshot(state)
    with pytest.raises(IllegalAction) as info:
        apply(state, seat, decode_action({"type": kind, **fields}))
    assert state == before
    return info.value


# --------------------------------------------------------------------------------------------
# A.5: each refusal names the field of the action at fault (the service reports it as
# ``action.<field>``)


def test_a_meld_card_not_held_names_the_cards_field() -> None:
    """A.5 / A.8 item 1: a meld card in neither the hand nor the seat's table is
    CARD_NOT_IN_HAND, and the field at fault is ``cards``."""
    error = refusal(v_window(), 0, "meld", name="marriage", cards=["KH", "QH"])
    assert (error.code, error.field) == ("CARD_NOT_IN_HAND", "cards")


def test_a_meld_naming_a_held_card_twice_is_card_not_in_hand() -> None:
    """A.5's order (CARD_NOT_IN_HAND before INVALID_MELD): each named card is taken once, so
    K♠ named twice by a seat holding one K♠ is a card the seat does not have, not a wrong set."""
    state = v_window()
    assert table_of(state, 0) == []
    error = refusal(state, 0, "meld", name="marriage", cards=["KS", "KS"])
    assert (error.code, error.field) == ("CARD_NOT_IN_HAND", "cards")


def test_a_miscount_names_the_points_field() -> None:
    """A.8 item 1: a wrong ``points`` claim is MELD_MISCOUNT on the field ``points``."""
    error = refusal(v_window(), 0, "meld", name="marriage", cards=["KS", "QS"], points=30)
    assert (error.code, error.field) == ("MELD_MISCOUNT", "points")


def test_a_meld_without_a_new_card_names_the_cards_field() -> None:
    """R3 / A.8 item 7: the same marriage named again from the table is MELD_NEEDS_NEW_CARD,
    on the field ``cards``."""
    state = meld(v_window(), 0, "marriage", "KS QS")
    state = win_trick(state, 0, "AC")
    error = refusal(state, 0, "meld", name="marriage", cards=["KS", "QS"])
    assert (error.code, error.field) == ("MELD_NEEDS_NEW_CARD", "cards")


def test_a_play_of_a_card_not_held_names_the_card_field() -> None:
    """A.8 item 4: a card neither in the hand nor on the seat's table is CARD_NOT_IN_HAND, on
    the field ``card``."""
    error = refusal(v_start(), 0, "play", card="AH")
    assert (error.code, error.field) == ("CARD_NOT_IN_HAND", "card")


def test_a_play_off_ladder_refusal_names_the_card_field() -> None:
    """§2.4: a lower spade on a spade lead when a higher one is held is MUST_HEAD_TRICK, on the
    field ``card``."""
    state = playoff(("10S KC", "AS 9S"))
    state = send(state, 0, "play", card="10S")
    error = refusal(state, 1, "play", card="9S")
    assert (error.code, error.field) == ("MUST_HEAD_TRICK", "card")


# --------------------------------------------------------------------------------------------
# Physical copies on the table (A.8 items 5 and 7): the first copy of A♠ is physical id 0

# The stock's top, so that the other A♠ is not drawn before it is wanted.
NO_ACE_STOCK = "9H 9H QH QH"


def test_the_first_ace_of_spades_on_the_table_melds_again_in_another_class() -> None:
    """R4 / A.8 item 5: with spades trump, the A♠ of a scored aces around (physical id 0, on
    the table, none in the hand) completes a run with four cards from the hand: 150 points,
    the A♠ reported as taken from the table, and only the four hand cards leave the hand."""
    own = "AS AH AD AD AC AC 10S KS QS JS 10C 10D"
    other = "9C 9C 9D 9D JC JC KC KC QC QC JD JD"
    state, _ = begin2([own, other], "KS", NO_ACE_STOCK)
    state = win_trick(state, 0, "AC")
    state = meld(state, 0, "aces_around", "AS AH AD AC")
    state = win_trick(state, 0, "AD")
    state, events = send_events(state, 0, "meld", name="run", cards=["AS", "10S", "KS", "QS", "JS"])
    assert [(m["points"], m["from_table"]) for m in meld_events(events)] == [(150, ["AS"])]
    assert hand(state).meld_points == (250, 0)
    assert table_of(state, 0).count("AS") == 1
    assert hand_of(state, 0) == ["9H", "10D", "10C"]  # 12, two leads, 4 + 4 melded, 1 drawn
    assert sorted(table_of(state, 0)) == sorted(["AS", "AH", "AD", "AC", "10S", "KS", "QS", "JS"])
