"""Rules found by an independent review of the core against RULES.md (Part A rulings, Part B
test tables) that had no direct test: two the engine got wrong (the A.5 order for a two-handed
meld out of its window; a hand_score query with no contract), and two subtle ones it got right.
"""

from __future__ import annotations

from typing import Any

from referee.engine.engine import legal_actions
from referee.query import answer_query
from tests.test_two_handed import refuse, v_window
from tests.test_violations import act, begin


def ask(query: dict[str, Any]) -> dict[str, Any]:
    answer = answer_query(query)
    assert isinstance(answer, dict)
    return answer


# --------------------------------------------------------------------------------------------
# Fixed after the review


def test_two_handed_loser_melding_cards_it_does_not_hold_is_card_not_in_hand() -> None:
    """RULES.md A.5: "exactly one code, the first that applies in this order"; CARD_NOT_IN_HAND
    ("a named card is not held") comes before MELD_NOT_ALLOWED ("not the winner of the last
    trick"). A.8 item 3 only replaces NOT_YOUR_TURN / WRONG_PHASE by MELD_NOT_ALLOWED.

    Seat 0 has won trick 1; seat 1 (the loser) melds K-Q of diamonds, which it does not hold.
    (The engine used to check the meld window first and answer MELD_NOT_ALLOWED.)
    """
    state = v_window()
    assert state.hand is not None and state.hand.window_seat == 0
    assert refuse(state, 1, "meld", name="marriage", cards=["KD", "QD"]) == "CARD_NOT_IN_HAND"


def test_hand_score_without_a_contract_in_a_bidding_variant_scores_nothing() -> None:
    """RULES.md A.7 item 2: in the bidding variants a hand that ends with no numeric bid has
    "declarer, bid and trump null, every delta 0" (the engine's own hand summary does this).
    GAME_RECORD.md §3 gives ``declarer`` null "for no-bid". A hand_score query for
    ``partnership`` with bid and declarer null therefore answers zero deltas, as a game does.
    (The query used to score it like a no-bid hand: meld + card points.)"""
    query = {
        "kind": "hand_score",
        "variant": "partnership",
        "bid": None,
        "declarer": None,
        "meld": [100, 0, 0, 0],
        "points": [150, 100],
        "tricks": [6, 6],
    }
    assert ask(query) == {"delta": [0, 0], "saved": [True, True]}
    assert ask(
        {
            **query,
            "variant": "cutthroat",
            "meld": [100, 0, 0],
            "points": [150, 100, 0],
            "tricks": [6, 6, 3],
        }
    )["delta"] == [0, 0, 0]


# --------------------------------------------------------------------------------------------
# Subtle rules checked and found to agree


def test_double_deck_run_shares_marriage_cards_at_run_level_two() -> None:
    """RULES.md A.9 item 1: with run_shares_marriage_cards the royal marriages beside the runs
    are min(L + k, L + q, k + q). Double run of hearts + 2 extra KH + 1 extra QH (80 cards):
    L=2, k=2, q=1 -> 3 royal marriages (table §5.4: triple = 12): 150 + 12 = 162; without the
    option min(k, q) = 1 -> 150 + 4 = 154."""
    hand = ["AH", "10H", "KH", "QH", "JH"] * 2 + ["KH", "KH", "QH"]
    base = {"kind": "meld", "variant": "double-deck", "trump": "H", "hand": hand}
    assert ask(base)["total"] == 154
    shared = ask({**base, "options": {"run_shares_marriage_cards": True}})
    assert shared["total"] == 162


def _cutthroat_third_hand(
    options: dict[str, Any],
    hands: tuple[str, ...] = ("AC QC", "9C AH AH 10H 10H KH KH QH QH JH JH AS AS 10S 10S", "KC"),
    lead: str = "9C",
    follow: str = "KC",
) -> list[str]:
    """Cutthroat, dealer 0: seat 1 wins at 300, names hearts, buries the widow and leads
    ``lead``; seat 2 (a defender) plays ``follow``; the legal plays of seat 0 (the other
    defender). By default seat 2's KC is winning the trick."""
    state = begin("cutthroat", options, hands, widow="9S 9S 9D")
    state = act(state, 1, "bid", amount=300)
    state = act(state, 2, "pass")
    state = act(state, 0, "pass")
    state = act(state, 1, "declare_trump", suit="H")
    for seat in (1, 2, 0):
        state = act(state, seat, "meld", cards=[])
    state = act(state, 1, "discard", cards=["9S", "9S", "9D"])
    state = act(state, 1, "play", card=lead)
    state = act(state, 2, "play", card=follow)
    return [str(e["card"]) for e in legal_actions(state, 0) if e["type"] == "play"]


def test_cutthroat_defenders_are_partners_for_head_over_partner() -> None:
    """RULES.md A.9 item 10 and OPTIONS.md head_over_partner ("cutthroat: the two defenders are
    partners"): with head_over_partner false, a defender following suit while the other
    defender's card wins need not head it; by default it must (§1.5, L10)."""
    assert "QC" not in _cutthroat_third_hand({})
    assert "AC" in _cutthroat_third_hand({})
    assert "QC" in _cutthroat_third_hand({"head_over_partner": False})


# --------------------------------------------------------------------------------------------
# Pinned after a mutation-testing campaign (the suite passed with the rule inverted)


def test_cutthroat_declarer_is_nobodys_partner_for_head_over_partner() -> None:
    """RULES.md A.9 item 10 and OPTIONS.md head_over_partner: in cutthroat only the two
    defenders are partners. With head_over_partner false, a defender following the declarer's
    winning card must still head it (seat 1 declares hearts and leads KC, seat 2 plays 9C,
    seat 0 holds AC and 10C)."""
    hands = (
        "AC QC",
        "KC AH AH 10H 10H KH KH QH QH JH JH AS AS 10S 10S",
        "9C AD AD 10D 10D KD KD QD QD JD JD 9D KS KS QS",
    )
    plays = _cutthroat_third_hand({"head_over_partner": False}, hands, lead="KC", follow="9C")
    assert plays == ["AC", "10C"]


def _partnership_fourth_hand(options: dict[str, Any]) -> list[str]:
    """Partnership, dealer 0, no exchange: seat 1 wins at 250, names hearts and leads 9C; seat 2
    heads with KC, seat 3 follows with JC; the legal plays of seat 0, whose partner (seat 2)
    is winning the trick."""
    hands = (
        "AC QC",
        "9C AH AH 10H 10H KH KH QH QH JH JH AS",
        "KC AS 10S 10S KS KS QS QS JS JS 9S 9S",
        "JC AD AD 10D 10D KD KD QD QD JD JD 9D",
    )
    state = begin("partnership", {"exchange_mode": "none", **options}, hands)
    state = act(state, 1, "bid", amount=250)
    for seat in (2, 3, 0):
        state = act(state, seat, "pass")
    state = act(state, 1, "declare_trump", suit="H")
    for seat in (1, 2, 3, 0):
        state = act(state, seat, "meld", cards=[])
    for seat, card in ((1, "9C"), (2, "KC"), (3, "JC")):
        state = act(state, seat, "play", card=card)
    return [str(e["card"]) for e in legal_actions(state, 0) if e["type"] == "play"]


def test_partnership_partner_is_the_seat_opposite_for_head_over_partner() -> None:
    """RULES.md A.3 (team 0 is seats 0 and 2) and A.9 item 10: with head_over_partner false,
    seat 0 following suit while seat 2's card wins need not head it; by default it must."""
    assert _partnership_fourth_hand({}) == ["AC", "10C"]
    relaxed = _partnership_fourth_hand({"head_over_partner": False})
    assert relaxed == ["AC", "10C", "KC", "QC", "JC", "9C"]
