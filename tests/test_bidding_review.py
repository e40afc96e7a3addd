"""A review of the bidding variants' option combinations and edge cases against RULES.md (Part A
rulings A.2, A.5, A.7, A.10; Part B §3-§5, §7) and OPTIONS.md.

Each test builds a small position with the engine (explicit deals through the helpers of
``test_violations``) and pins one rule that had no direct test: the auction under bid schedules
and ``max_raise``, pass with help, dealer stuck / redeal / bid-or-redeal rounds, the exchange
modes, the cutthroat widow and bury, concessions, the save rules, game end and the double-deck
specifics.
"""

from __future__ import annotations

from typing import Any

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import apply, legal_actions
from referee.engine.events import EVERYONE
from referee.engine.state import BURY, MELD, PLAY, GameState
from referee.rules.options import OptionError, resolve_options
from tests.test_violations import (
    act,
    auto_until,
    begin,
    meld_all,
    refuse,
    win_auction,
)

Events = list[Any]


def step(state: GameState, seat: int, kind: str, **fields: object) -> tuple[GameState, Events]:
    """Apply one accepted action, keeping its events."""
    return apply(state, seat, decode_action({"type": kind, **fields}))


def finish(state: GameState) -> tuple[GameState, dict[str, Any], Events]:
    """Play the hand out with simple legal choices; the hand result and every event."""
    from tests.test_violations import auto_action

    events: Events = []
    for _ in range(3000):
        if state.hand is None:
            break
        seat, data = auto_action(state)
        state, more = apply(state, seat, decode_action(data))
        events += more
    result = next(e.data for e in events if e.kind == "hand_result")
    return state, dict(result), events


def result_of(events: Events) -> dict[str, Any]:
    return dict(next(e.data for e in events if e.kind == "hand_result"))


def bid_entry(state: GameState, seat: int) -> dict[str, object] | None:
    return next((e for e in legal_actions(state, seat) if e["type"] == "bid"), None)


# --------------------------------------------------------------------------------------------
# Auction: steps, schedules, max_raise (A.2, A.7 item 3)


SCHEDULE = [[50, 1], [60, 5], [100, 10]]


def test_schedule_step_is_the_one_in_force_at_the_standing_bid() -> None:
    """A.2: "the raise ... must be a positive multiple of the step in force at the standing
    bid's level". Standing 59 (step 1): 61 is legal although it crosses 60; standing 61 (step 5):
    66, not 65; standing 96 (step 5): 101 although it crosses 100; standing 101: step 10."""
    state = begin("double-deck", {"bid_schedule": SCHEDULE})
    state = act(state, 1, "bid", amount=59)
    state = act(state, 2, "bid", amount=61)
    assert bid_entry(state, 3) == {"type": "bid", "min": 66, "step": 5, "max": None}
    assert refuse(state, 3, "bid", amount=65).code == "BID_BAD_RAISE"
    state = act(state, 3, "bid", amount=96)
    assert bid_entry(state, 0) == {"type": "bid", "min": 101, "step": 5, "max": None}
    state = act(state, 0, "bid", amount=101)
    assert refuse(state, 1, "bid", amount=106).code == "BID_BAD_RAISE"
    assert refuse(state, 1, "bid", amount=101).code == "BID_TOO_LOW"
    assert act(state, 1, "bid", amount=111).hand is not None


def test_opening_bid_uses_the_step_in_force_at_min_bid_and_max_raise() -> None:
    """A.7 item 3: "The first bid is a raise over min_bid minus the step in force at min_bid,
    so max_raise bounds it too". Schedule [[45, 5], [60, 1]], min_bid 50: openings 50, 55, ...;
    with max_raise 10 at most 55."""
    state = begin(
        "double-deck", {"min_bid": 50, "bid_schedule": [[45, 5], [60, 1]], "max_raise": 10}
    )
    assert bid_entry(state, 1) == {"type": "bid", "min": 50, "step": 5, "max": 55}
    assert refuse(state, 1, "bid", amount=52).code == "BID_BAD_RAISE"
    assert refuse(state, 1, "bid", amount=60).code == "BID_BAD_RAISE"
    assert refuse(state, 1, "bid", amount=49).code == "BID_TOO_LOW"
    state = act(state, 1, "bid", amount=55)
    # standing 55: step 5 still (the level 60 is not reached), raise at most 10
    assert bid_entry(state, 2) == {"type": "bid", "min": 60, "step": 5, "max": 65}


def test_max_raise_caps_every_level_and_can_close_the_bidding() -> None:
    """A.2: the raise is "at most max_raise when set"; from 100 the step (10) exceeds max_raise
    5, so no bid is legal any more and only passes remain."""
    state = begin("double-deck", {"bid_schedule": SCHEDULE, "max_raise": 5})
    assert bid_entry(state, 1) == {"type": "bid", "min": 50, "step": 1, "max": 54}
    state = act(state, 1, "bid", amount=54)
    assert refuse(state, 2, "bid", amount=60).code == "BID_BAD_RAISE"
    for amount, seat in ((59, 2), (64, 3), (69, 0), (74, 1)):
        state = act(state, seat, "bid", amount=amount)
    for amount, seat in ((79, 2), (84, 3), (89, 0), (94, 1), (99, 2)):
        state = act(state, seat, "bid", amount=amount)
    # standing 99: step 5, so 104 is the only bid (100 is not a multiple of 5 over 99)
    assert bid_entry(state, 3) == {"type": "bid", "min": 104, "step": 5, "max": 104}
    state = act(state, 3, "bid", amount=104)
    assert bid_entry(state, 0) is None
    assert refuse(state, 0, "bid", amount=114).code == "BID_BAD_RAISE"
    assert legal_actions(state, 0) == [{"type": "pass"}]


def test_the_bid_entrys_max_is_the_highest_legal_bid() -> None:
    """A.10 item 2: a bid entry's ``max`` is a bid (the example: min 260, step 10, max 270).
    With a max_raise of 15 by steps of 10, the highest raise is 10: the entry says 260, not 265,
    and the refusal names 260 as the limit. Under a schedule the grid is the standing level's
    step: max_raise 7 by 5s from 61 allows 66 only."""
    state = begin("partnership", {"max_raise": 15})
    assert bid_entry(state, 1) == {"type": "bid", "min": 250, "step": 10, "max": 250}
    state = act(state, 1, "bid", amount=250)
    assert bid_entry(state, 2) == {"type": "bid", "min": 260, "step": 10, "max": 260}
    refused = refuse(state, 2, "bid", amount=270)
    assert refused.code == "BID_BAD_RAISE" and "at most 260" in refused.message
    state = begin("double-deck", {"bid_schedule": SCHEDULE, "max_raise": 7})
    state = act(state, 1, "bid", amount=56)
    state = act(state, 2, "bid", amount=61)
    assert bid_entry(state, 3) == {"type": "bid", "min": 66, "step": 5, "max": 66}
    assert refuse(state, 3, "bid", amount=68).code == "BID_BAD_RAISE"


def test_a_step_above_max_raise_at_min_bid_is_refused_at_creation() -> None:
    """A.1: combinations that make no sense are refused at creation; a dealer stuck with no
    legal bid would have no legal action at all."""
    with pytest.raises(OptionError):
        resolve_options("partnership", {"bid_step": 30})


def test_the_step_checked_at_creation_is_the_one_in_force_at_min_bid() -> None:
    """A.7 item 3 and the A.1 refusal above, at their boundaries: a schedule level equal to
    min_bid is in force at min_bid (step 30 > max_raise 20: refused), and a step equal to
    max_raise leaves exactly one opening bid (accepted)."""
    with pytest.raises(OptionError):
        resolve_options(
            "double-deck", {"min_bid": 50, "bid_schedule": [[40, 1], [50, 30]], "max_raise": 20}
        )
    resolve_options("partnership", {"max_raise": 10})
    state = begin("partnership", {"max_raise": 10})
    assert bid_entry(state, 1) == {"type": "bid", "min": 250, "step": 10, "max": 250}


def test_partnership_opening_is_250_or_260_then_raises_of_10_or_20() -> None:
    """A.6: "raises of exactly 10 or 20"; A.7 item 3: "partnership: 250 or 260"."""
    state = begin("partnership")
    assert bid_entry(state, 1) == {"type": "bid", "min": 250, "step": 10, "max": 260}
    assert refuse(state, 1, "bid", amount=270).code == "BID_BAD_RAISE"
    assert refuse(state, 1, "bid", amount=255).code == "BID_BAD_RAISE"
    state = act(state, 1, "bid", amount=260)
    assert refuse(state, 2, "bid", amount=260).code == "BID_TOO_LOW"
    assert refuse(state, 2, "bid", amount=290).code == "BID_BAD_RAISE"
    state = act(state, 2, "bid", amount=280)
    state = act(state, 3, "bid", amount=290)  # an opponent's raise
    state = act(state, 0, "bid", amount=310)  # outbidding the partner's side is fine too
    assert state.hand is not None and state.hand.high_bid == 310


# --------------------------------------------------------------------------------------------
# Pass with help, dealer stuck, redeal, bid-or-redeal (A.7 items 2, 11; §4.2; §5.2)


def test_pass_with_help_is_a_final_public_pass_with_no_other_effect() -> None:
    """§4.2: "The referee treats it exactly like a pass (the player is out)", with a public flag;
    the stuck dealer still may not pass, with or without help."""
    plain = begin("partnership")
    helped = plain
    for seat in (1, 2, 3):
        plain = act(plain, seat, "pass")
        helped, events = step(helped, seat, "pass", help=True)
        assert [(e.kind, e.audience, e.data.get("help")) for e in events] == [
            ("call", EVERYONE, True)
        ]
    assert helped.hand is not None and plain.hand is not None
    assert helped.hand.out == plain.hand.out == (False, True, True, True)
    assert refuse(helped, 0, "pass", help=True).code == "DEALER_MUST_BID"
    assert legal_actions(helped, 0) == legal_actions(plain, 0)
    # A.7 item 11 in a variant where help is off
    assert refuse(begin("double-deck"), 1, "pass", help=True).code == "MALFORMED_ACTION"


def test_stuck_dealer_may_call_bid_or_redeal_which_redeals() -> None:
    """A.7 item 2: under dealer_stuck "the dealer may bid or call bid-or-redeal but not pass";
    a round of pass / bid-or-redeal calls with one bid-or-redeal ends the hand in a redeal."""
    state = begin("double-deck")
    for seat in (1, 2, 3):
        state = act(state, seat, "pass")
    assert legal_actions(state, 0) == [
        {"type": "bid", "min": 50, "step": 1, "max": None},
        {"type": "bid_or_redeal"},
    ]
    state, events = step(state, 0, "bid_or_redeal")
    assert state.hand is None and state.next_dealer == 1 and state.scores == (0, 0)
    result = result_of(events)
    assert (result["declarer"], result["bid"], result["trump"], result["delta"]) == (
        None,
        None,
        None,
        [0, 0],
    )


def test_an_earlier_bid_or_redeal_frees_the_dealer_to_pass() -> None:
    """A.7 item 2: DEALER_MUST_BID only "under dealer_stuck (and no bid-or-redeal call)"."""
    state = begin("double-deck")
    state = act(state, 1, "bid_or_redeal")
    state = act(state, 2, "pass")
    state = act(state, 3, "pass")
    assert {"type": "pass"} in legal_actions(state, 0)
    state, events = step(state, 0, "pass")
    assert state.hand is None and any(e.kind == "redeal" for e in events)


def test_bid_or_redeal_caller_stays_in_and_must_bid_or_pass_after_a_bid() -> None:
    """§5.2: "A BOR caller is not out"; after a numeric bid "they must bid higher or pass";
    A.5: bid-or-redeal after a numeric bid is BID_OR_REDEAL_NOT_ALLOWED."""
    state = begin("double-deck")
    state = act(state, 1, "bid_or_redeal")
    state = act(state, 2, "bid_or_redeal")
    state = act(state, 3, "pass")
    state = act(state, 0, "bid", amount=50)
    assert state.hand is not None and state.hand.turn == 1
    assert refuse(state, 1, "bid_or_redeal").code == "BID_OR_REDEAL_NOT_ALLOWED"
    assert legal_actions(state, 1) == [
        {"type": "bid", "min": 51, "step": 1, "max": None},
        {"type": "pass"},
    ]
    state = act(state, 1, "pass")
    state = act(state, 2, "bid", amount=55)
    state = act(state, 0, "pass")
    assert state.hand is not None and (state.hand.declarer, state.hand.bid) == (2, 55)


def test_bid_or_redeal_in_cutthroat_when_allowed() -> None:
    """OPTIONS.md allow_bid_or_redeal applies to cutthroat: a round of three calls, one of them
    bid-or-redeal, redeals (the next dealer deals)."""
    state = begin("cutthroat", {"allow_bid_or_redeal": True})
    state = act(state, 1, "pass")
    state = act(state, 2, "bid_or_redeal")
    state, events = step(state, 0, "pass")
    assert state.hand is None and state.next_dealer == 1
    assert result_of(events)["delta"] == [0, 0, 0]


def test_partnership_all_pass_redeal_and_cutthroat_dealer_stuck() -> None:
    """OPTIONS.md all_pass: redeal, everyone may pass; dealer_stuck, the dealer must bid (at the
    minimum or more) and becomes the declarer."""
    state = begin("partnership", {"all_pass": "redeal"})
    for seat in (1, 2, 3):
        state = act(state, seat, "pass")
    state, events = step(state, 0, "pass")
    assert state.hand is None and result_of(events)["bid"] is None
    ct = begin("cutthroat", {"all_pass": "dealer_stuck"})
    ct = act(act(ct, 1, "pass"), 2, "pass")
    assert refuse(ct, 0, "pass").code == "DEALER_MUST_BID"
    ct = act(ct, 0, "bid", amount=300)
    assert ct.hand is not None and ct.hand.declarer == 0 and len(ct.hand.hands[0]) == 18


# --------------------------------------------------------------------------------------------
# Exchange: partner, kitty, none (A.7 item 1, §4.3, §5.3)


def test_partner_exchange_declarer_may_return_cards_just_received() -> None:
    """§4.3: the declarer "returns exactly 4, which may include cards just received"."""
    state = win_auction(begin("partnership", {}, ("", "", "", "QH QH JH JH")), 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = act(state, 3, "pass_cards", cards=["QH", "QH", "JH", "JH"])
    assert state.hand is not None and state.hand.turn == 1
    state = act(state, 1, "pass_cards", cards=["QH", "QH", "JH", "JH"])
    assert state.hand is not None and state.hand.phase == MELD and state.hand.turn == 1


@pytest.mark.parametrize(
    ("variant", "options", "hand_size"),
    [
        ("partnership", {"exchange_count": 0}, 12),
        ("double-deck", {"exchange_mode": "none", "exchange_count": 5}, 20),
    ],
)
def test_no_exchange_goes_straight_to_meld(
    variant: str, options: dict[str, object], hand_size: int
) -> None:
    """A.7 item 1: "none at all when the count is 0 or the mode none"."""
    state = win_auction(begin(variant, options, ("", "KS QS")), 1)
    state = act(state, 1, "declare_trump", suit="S")
    assert state.hand is not None and state.hand.phase == MELD and state.hand.turn == 1
    assert len(state.hand.hands[1]) == hand_size


def test_kitty_in_partnership_deals_11_and_the_kitty_is_private() -> None:
    """OPTIONS.md exchange_mode kitty: 11 each with 48 cards; A.10 item 3: "a kitty and all
    discards only to the declarer"."""
    state = begin("partnership", {"exchange_mode": "kitty"}, widow="AS AS 10S 10S")
    assert state.hand is not None and len(state.hand.hands[1]) == 11
    state, events = _win_with_events(state, 1, 250)
    kitty_events = [e for e in events if e.kind in ("kitty_taken", "kitty_cards")]
    assert [(e.kind, e.audience) for e in kitty_events] == [
        ("kitty_taken", EVERYONE),
        ("kitty_cards", 1),
    ]
    state = act(state, 1, "declare_trump", suit="S")
    assert refuse(state, 1, "discard", cards=["AS", "AS", "10S"]).code == "WRONG_CARD_COUNT"
    state, events = step(state, 1, "discard", cards=["AS", "AS", "10S", "10S"])
    assert [(e.kind, e.audience) for e in events][:2] == [
        ("cards_discarded", EVERYONE),
        ("discarded_cards", 1),
    ]
    assert state.hand is not None and state.hand.phase == MELD and len(state.hand.hands[1]) == 11


def test_kitty_discard_counters_score_for_the_declaring_side() -> None:
    """A.7 item 1: "the discard's counters score for the declaring side": played out, the two
    sides' points still add up to the 50 of the 80-card deck (§5.6)."""
    state = begin("double-deck", {"exchange_mode": "kitty"}, ("", "KS QS"), widow="AS AS 10S 10S")
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="S")
    state = act(state, 1, "discard", cards=["AS", "AS", "10S", "10S"])
    _, result, events = finish(state)
    assert sum(result["points"]) == 50
    trick_points = [0, 0]
    for e in events:
        if e.kind == "trick_taken":
            trick_points[e.data["seat"] % 2] += e.data["points"]
    assert result["points"][1] == trick_points[1] + 4
    assert sum(1 for e in events if e.kind == "trick_taken") == 19


def test_marriage_from_the_kitty_allows_that_trump() -> None:
    """A.7 item 1 order: the kitty joins the declarer's hand at the contract, before
    declare_trump, so a marriage completed by the kitty counts (§5.3)."""
    aces = "AS AS AS AS AH AH AH AH AD AD AD AD AC AC AC AC 10S 10S 10S"
    state = begin("double-deck", {"exchange_mode": "kitty"}, ("", aces), widow="KD QD JD JD")
    state = win_auction(state, 1)
    assert legal_actions(state, 1) == [{"type": "declare_trump", "suit": "D"}]


# --------------------------------------------------------------------------------------------
# Cutthroat: widow, meld with 18 cards, bury (A.7 item 1, A.10 item 3, §3.3)

CT_HAND = "QS QS JD QH QD QC KS AC AC 10C 10C AD AD 10D 10D"


def ct_after_meld(shown: str, options: dict[str, object] | None = None) -> GameState:
    state = begin("cutthroat", options or {}, ("", CT_HAND), widow="9D 9D 9C")
    state, events = _win_with_events(state, 1)
    assert [(e.kind, e.audience, e.data.get("cards")) for e in events if "widow" in e.kind] == [
        ("widow_taken", EVERYONE, ["9D", "9D", "9C"])
    ]
    state = act(state, 1, "declare_trump", suit="H")
    assert state.hand is not None and state.hand.phase == MELD and state.hand.turn == 1
    return meld_all(state, {1: shown})


def _win_with_events(
    state: GameState, declarer: int, amount: int = 300
) -> tuple[GameState, Events]:
    events: Events = []
    while state.hand is not None and state.hand.declarer is None:
        seat = state.hand.turn
        if seat == declarer:
            state, more = step(state, seat, "bid", amount=amount)
        else:
            state, more = step(state, seat, "pass")
        events += more
    return state, events


def test_cutthroat_bury_shared_card_is_protected_once() -> None:
    """A.7 item 1: the 15 cards kept "must still hold every card of the declarer's scored
    combinations". QS serves pinochle, queens around and the spade marriage: one QS must stay,
    the second copy may be buried; JD (pinochle) may not."""
    state = ct_after_meld("QS QS JD QH QD QC KS")
    assert state.hand is not None and state.hand.phase == BURY
    entry = legal_actions(state, 1)[0]
    assert entry["type"] == "discard" and entry["count"] == 3
    source = entry["from"]
    assert isinstance(source, list)
    assert source.count("QS") == 1 and "JD" not in source and "KS" not in source
    assert refuse(state, 1, "discard", cards=["QS", "QS", "AC"]).code == "CANNOT_BURY_MELD"
    assert refuse(state, 1, "discard", cards=["JD", "AC", "AC"]).code == "CANNOT_BURY_MELD"
    # A.5 order: CARD_NOT_IN_HAND and WRONG_CARD_COUNT come first
    assert refuse(state, 1, "discard", cards=["JD", "KH", "AC"]).code == "CARD_NOT_IN_HAND"
    assert refuse(state, 1, "discard", cards=["JD", "AC"]).code == "WRONG_CARD_COUNT"
    assert act(state, 1, "discard", cards=["QS", "9D", "9D"]).hand is not None


def test_cutthroat_shown_but_unscored_cards_may_be_buried() -> None:
    """Only *scored* combinations bind the bury: a shown JD with no QS scores nothing."""
    state = ct_after_meld("JD AC")
    assert act(state, 1, "discard", cards=["JD", "AC", "AC"]).hand is not None


def test_cutthroat_may_bury_melded_cards_option() -> None:
    state = ct_after_meld("QS QS JD QH QD QC KS", {"may_bury_melded_cards": True})
    assert act(state, 1, "discard", cards=["QS", "QS", "JD"]).hand is not None


def _at_the_bury(eighteen: str, widow: list[str]) -> GameState:
    """Cutthroat: seat 1 holds ``eighteen`` less ``widow``, wins the auction, takes the widow,
    names hearts and shows all eighteen cards; every seat has melded and the bury is next."""
    cards = eighteen.split()
    for card in widow:
        cards.remove(card)
    state = begin("cutthroat", {}, ("", " ".join(cards)), widow=" ".join(widow))
    state, _ = _win_with_events(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {1: eighteen})
    assert state.hand is not None and state.hand.phase == BURY
    return state


def test_cutthroat_bury_is_free_when_the_scored_melds_leave_too_few_cards() -> None:
    """Ruling (A.7 item 1 cannot be met): run, marriage, dix, aces, queens and jacks around and
    a pinochle hold 16 of the declarer's 18 cards, so only two are free and three must be
    buried. Any card may then be buried, rather than the declarer having no legal action (a
    random game found this dead end)."""
    eighteen = "AS KS QS JS AH 10H KH QH JH 9H AD AD QD JD 9D AC QC JC"
    state = _at_the_bury(eighteen, widow=["AD", "9D", "JC"])
    (entry,) = [e for e in legal_actions(state, 1) if e["type"] == "discard"]
    offered = entry["from"]
    assert isinstance(offered, list)
    assert entry["count"] == 3 and sorted(offered) == sorted(eighteen.split())
    assert act(state, 1, "discard", cards=["AD", "9D", "KS"]).hand is not None


def test_cutthroat_bury_of_exactly_the_free_cards_is_still_bound() -> None:
    """A.7 item 1 with the ruling's boundary: run, dix, aces, queens and jacks around and a
    pinochle hold 15 of the 18 cards, so exactly three (the tens outside the run) are free.
    The bury can keep every scored card, so it must: those three and nothing else."""
    eighteen = "AS QS JS 10S AH 10H KH QH JH 9H AD QD JD 10D AC QC JC 10C"
    state = _at_the_bury(eighteen, widow=["10S", "10D", "10C"])
    (entry,) = [e for e in legal_actions(state, 1) if e["type"] == "discard"]
    assert entry["count"] == 3 and entry["from"] == ["10S", "10D", "10C"]
    assert refuse(state, 1, "discard", cards=["10S", "10D", "AS"]).code == "CANNOT_BURY_MELD"
    assert act(state, 1, "discard", cards=["10S", "10D", "10C"]).hand is not None


def test_cutthroat_buried_counters_count_for_the_bidder() -> None:
    """§3.3 / A.7 item 1: buried counters count in the declarer's points: played out, the
    three seats' points still add up to 250."""
    state = ct_after_meld("")
    state = act(state, 1, "discard", cards=["AC", "10C", "AD"])
    assert state.hand is not None and state.hand.phase == PLAY and state.hand.turn == 1
    _, result, events = finish(state)
    assert sum(result["points"]) == 250
    taken = sum(e.data["points"] for e in events if e.kind == "trick_taken" and e.data["seat"] == 1)
    assert result["points"][1] == taken + 30
    assert sum(1 for e in events if e.kind == "trick_taken") == 15


def test_cutthroat_concession_window_opens_after_the_bury() -> None:
    """A.7 item 4: the window "runs from the end of the meld phase (cutthroat: the bury
    included) to the first lead"; a defender is CONCEDE_NOT_ALLOWED once every seat melded."""
    state = ct_after_meld("QS JD")
    assert refuse(state, 1, "concede").code == "WRONG_PHASE"
    assert refuse(state, 2, "concede").code == "CONCEDE_NOT_ALLOWED"
    state = act(state, 1, "discard", cards=["9D", "9D", "9C"])
    assert refuse(state, 0, "concede").code == "CONCEDE_NOT_ALLOWED"
    state, events = step(state, 1, "concede")
    result = result_of(events)
    # §3.4 / A.6: the bidder loses the bid; each opponent scores his own meld only; points 0
    assert result["delta"][1] == -300
    assert result["points"] == [0, 0, 0]
    assert result["delta"][0] == result["meld"][0] and result["delta"][2] == result["meld"][2]


def test_cutthroat_no_marriage_counts_the_widow_and_concedes_for_zero() -> None:
    """A.7 item 5 with trump_requires_marriage in cutthroat: the widow's cards count for the
    marriage; with none, concede is the only action: bidder -bid, everyone else 0."""
    no_kq = "AS AS 10S 10S AH AH 10H 10H AD AD 10D 10D AC AC 10C"
    state = begin("cutthroat", {"trump_requires_marriage": True}, ("", no_kq), "JS JS JH")
    state = win_auction(state, 1, 300)
    assert legal_actions(state, 1) == [{"type": "concede"}]
    assert refuse(state, 0, "concede").code == "WRONG_PHASE"
    state, events = step(state, 1, "concede")
    assert result_of(events)["delta"] == [0, -300, 0]
    with_widow = begin("cutthroat", {"trump_requires_marriage": True}, ("", no_kq), "KC QC JH")
    with_widow = win_auction(with_widow, 1, 300)
    assert legal_actions(with_widow, 1) == [{"type": "declare_trump", "suit": "C"}]


# --------------------------------------------------------------------------------------------
# Concession and hopeless (A.6, A.7 items 4, 8; §4.5)


def p_meld_done(bid: int, declarer_meld: str) -> GameState:
    state = begin("partnership", {"exchange_count": 0, "max_raise": None}, ("", declarer_meld))
    state = win_auction(state, 1, bid)
    state = act(state, 1, "declare_trump", suit="H")
    return meld_all(state, {1: declarer_meld})


@pytest.mark.parametrize(("bid", "hopeless"), [(400, False), (410, True)])
def test_hopeless_is_strictly_more_than_250_short(bid: int, hopeless: bool) -> None:
    """§4.5: "Exactly 250 short is still playable"; A.7 item 8: hopeless = bid - meld > 250.
    The declaring side melds a heart run (150); the conceded hand scores points 0 (A.7 item 4)."""
    state = p_meld_done(bid, "AH 10H KH QH JH")
    assert state.hand is not None and state.hand.phase == PLAY
    record = state.hand.melds[1]
    assert record is not None and record.points == 150
    state, events = step(state, 1, "concede")
    result = result_of(events)
    assert result["hopeless"] is hopeless
    assert result["delta"][1] == -bid and result["points"] == [0, 0]


def test_concession_codes_by_phase_and_seat() -> None:
    """A.7 item 4: before every seat has melded WRONG_PHASE (whoever sends it); afterwards any
    seat but the declarer, or once a card has been played, CONCEDE_NOT_ALLOWED; never
    NOT_YOUR_TURN."""
    state = begin("partnership", {"exchange_count": 0})
    assert refuse(state, 2, "concede").code == "WRONG_PHASE"
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = act(state, 1, "meld", cards=[])
    assert refuse(state, 1, "concede").code == "WRONG_PHASE"
    state = meld_all(state)
    assert refuse(state, 3, "concede").code == "CONCEDE_NOT_ALLOWED"
    assert {"type": "concede"} in legal_actions(state, 1)
    assert {"type": "concede"} not in legal_actions(state, 3)
    held = legal_actions(state, 1)[0]
    assert held["type"] == "play"
    state = act(state, 1, "play", card=held["card"])
    assert refuse(state, 1, "concede").code == "CONCEDE_NOT_ALLOWED"


def test_no_bid_variant_never_concedes() -> None:
    state = begin("partnership-no-bid", {}, ("AH",), turn_up="AH")
    assert refuse(state, 1, "concede").code == "WRONG_PHASE"
    state = meld_all(state)
    assert state.hand is not None and state.hand.phase == PLAY
    assert refuse(state, 1, "concede").code == "WRONG_PHASE"


def test_concession_opponents_meld_respects_min_meld_to_record() -> None:
    """§4.5: opponents score "their meld only" with "no save requirement"; OPTIONS.md
    min_meld_to_record: a side whose meld totals less records none."""
    for minimum, expected in ((0, 20), (30, 0)):
        state = begin(
            "partnership", {"exchange_count": 0, "min_meld_to_record": minimum}, ("KD QD",)
        )
        state = win_auction(state, 1)
        state = act(state, 1, "declare_trump", suit="H")
        state = meld_all(state, {0: "KD QD"})
        state, events = step(state, 1, "concede")
        assert result_of(events)["delta"] == [expected, -250]


# --------------------------------------------------------------------------------------------
# Save rules, counted on a played-out hand (§10.3, A.2, A.9 item 4)


@pytest.mark.parametrize(
    "options",
    [
        {"save_meld": "trick"},
        {"save_meld": 200, "dix_exempt_from_save": True},
        {"save_meld": 200, "dix_exempt_from_save": False},
        {"save_meld": 200, "save_applies_to": "defenders"},
        {"save_meld": "none", "min_meld_to_record": 100},
    ],
)
def test_played_hand_matches_the_save_and_contract_formula(options: dict[str, object]) -> None:
    """§10.3 over one played hand per save option: each side's delta is its counted meld
    (A.2: the whole meld if saved, else only its dix when dix_exempt_from_save; OPTIONS.md
    min_meld_to_record) plus card points, the declaring side -bid when short. Team 0 melds a
    double dix (20) and a diamond marriage; team 1 (seat 1 declares) melds aces and a royal
    marriage."""
    rules = resolve_options("partnership", {"exchange_count": 0, **options})
    shown = {0: "9H 9H KD QD", 1: "AH AH KH QH", 3: "AS AS AD AD AC AC"}
    hands = tuple(shown.get(seat, "") for seat in range(4))
    state = begin("partnership", {"exchange_count": 0, **options}, hands)
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, shown)
    _, result, events = finish(state)
    tricks = [0, 0]
    for e in events:
        if e.kind == "trick_taken":
            tricks[e.data["seat"] % 2] += 1
    meld = [result["meld"][0] + result["meld"][2], result["meld"][1] + result["meld"][3]]
    points = result["points"]
    assert sum(points) == 250 and meld[0] >= 40
    for side in (0, 1):
        recorded = meld[side] if meld[side] >= rules.min_meld_to_record else 0
        rule = rules.save_meld
        saved = (
            (rules.save_applies_to == "defenders" and side == 1)
            or rule == "none"
            or (rule == "trick" and tricks[side] >= 1)
            or (isinstance(rule, int) and points[side] >= rule)
        )
        dix = 20 if side == 0 and recorded else 0
        counted = recorded if saved else (dix if rules.dix_exempt_from_save else 0)
        want = counted + points[side]
        if side == 1 and want < 250:
            want = -250
        assert result["delta"][side] == want
        assert result["saved"][side] is saved


# --------------------------------------------------------------------------------------------
# Game end (A.7 item 9, §4.8, §5.7, §3.6)


def with_scores(state: GameState, scores: tuple[int, ...]) -> GameState:
    return state._replace(scores=scores)


def redeal_dd(scores: tuple[int, int], **options: object) -> GameState:
    """A double-deck hand redealt (delta 0) from the given scores: the game-end check runs on
    exactly these totals (A.7 item 9: "after each completed hand (redeals included)")."""
    state = with_scores(begin("double-deck", dict(options)), scores)
    state = act(state, 1, "bid_or_redeal")
    for seat in (2, 3, 0):
        state = act(state, seat, "pass")
    assert state.hand is None
    return state


def test_double_deck_margin_win_without_reaching_the_target() -> None:
    """§5.7 item 2: "if either team leads by at least the target, it wins"."""
    assert redeal_dd((10, -490)).winner == 0
    assert redeal_dd((10, -489)).winner is None
    assert redeal_dd((-600, -50)).winner == 1
    assert redeal_dd((10, -490), margin_win=False).winner is None


def test_double_deck_both_reach_higher_total_and_tie_plays_on() -> None:
    """§5.7 items 3-4: both at the target: most points; equal totals: deal a new hand."""
    assert redeal_dd((520, 600)).winner == 1
    tied = redeal_dd((600, 600))
    assert tied.winner is None and not tied.over and tied.next_dealer == 1


def test_cutthroat_tie_between_two_players_at_the_target_plays_on() -> None:
    """A.7 item 9: cutthroat "several -> the higher total, equal -> play on"."""
    state = with_scores(begin("cutthroat"), (1500, 1500, 200))
    for seat in (1, 2, 0):
        state = act(state, seat, "pass")
    assert state.hand is None and state.winner is None and not state.over
    state = with_scores(begin("cutthroat"), (1500, 1510, 200))
    for seat in (1, 2, 0):
        state = act(state, seat, "pass")
    assert state.winner == 1


def test_partnership_both_reach_declaring_side_wins_with_the_lower_total() -> None:
    """§4.8: "Both teams reach 1500 in the same hand: the declaring team wins, whatever the
    totals" (A.7 item 9). Team 0 declares with a double pinochle, team 1 melds 8 aces."""
    hands = ("", "AS AS AH AH AD AD AC AC", "QS QS JD JD")
    state = begin("partnership", {"exchange_count": 0, "save_meld": "none"}, hands)
    state = with_scores(state, (1190, 1450))
    state = win_auction(state, 2)
    state = act(state, 2, "declare_trump", suit="S")
    state = meld_all(state, {1: "AS AS AH AH AD AD AC AC", 2: "QS QS JD JD"})
    state, result, _ = finish(state)
    assert result["delta"][0] >= 310 and state.scores[1] > state.scores[0] >= 1500
    assert state.over and state.winner == 0


def test_partnership_only_defenders_cross_after_a_concession() -> None:
    """§4.8: "Only the defenders cross ...: the defenders win"."""
    state = begin("partnership", {"exchange_count": 0}, ("KD QD",))
    state = with_scores(state, (1490, 1490))
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {0: "KD QD"})
    state = act(state, 1, "concede")
    assert state.scores == (1510, 1240) and state.winner == 0
    assert refuse(state, 0, "pass").code == "GAME_OVER"


def test_cutthroat_bidder_counted_first() -> None:
    """§3.6 / A.7 item 9: "the bidder >= target wins" even when an opponent reached it with a
    higher total."""
    declarer = "QS QS JD JD AH AH 10H"
    state = begin("cutthroat", {}, ("", declarer))
    state = with_scores(state, (1900, 1200, 0))
    state = win_auction(state, 1, 300)
    state = act(state, 1, "declare_trump", suit="S")
    state = meld_all(state, {1: "QS QS JD JD"})
    source = legal_actions(state, 1)[0]["from"]
    assert isinstance(source, list)
    state = act(state, 1, "discard", cards=source[:3])
    state, result, _ = finish(state)
    assert result["delta"][1] >= 300 and state.scores[0] > state.scores[1] >= 1500
    assert state.winner == 1


# --------------------------------------------------------------------------------------------
# Double-deck specifics (§5.1, §5.6, A.2 count_scheme / last_trick_bonus)


def test_double_deck_80_cards_20_tricks_50_points() -> None:
    """§5.1/§5.6: 80 cards without nines, 20 each, 20 tricks, counters 1, last trick 2."""
    state = begin("double-deck")
    assert state.hand is not None
    dealt = [c for h in state.hand.hands for c in h]
    assert len(dealt) == 80 and all(c % 6 != 5 for c in dealt)
    state = auto_until(state, lambda s: s.hand is not None and s.hand.phase == PLAY)
    _, result, events = finish(state)
    tricks = [e for e in events if e.kind == "trick_taken"]
    assert len(tricks) == 20 and sum(result["points"]) == 50
    assert [e.data["points"] for e in events if e.kind == "last_trick_bonus"] == [2]


@pytest.mark.parametrize(
    ("variant", "options", "bonus", "total"),
    [
        ("double-deck", {}, 2, 50),
        ("double-deck", {"deck": 48}, 1, 25),
        ("double-deck", {"count_scheme": "modern10"}, 10, 490),
        ("double-deck", {"count_scheme": "points1_single"}, 1, 49),
        ("double-deck", {"deck": 48, "count_scheme": "points1"}, 1, 25),
        ("partnership", {"count_scheme": "points1"}, 1, 25),
        ("partnership", {"count_scheme": "points1_double"}, 2, 26),
        ("partnership", {"count_scheme": "classic_11"}, 10, 250),
        ("cutthroat", {"count_scheme": "simple_10_5"}, 10, 250),
        ("partnership", {"count_scheme": "points1", "last_trick_bonus": 5}, 5, 29),
    ],
)
def test_last_trick_bonus_follows_the_scheme_and_deck(
    variant: str, options: dict[str, object], bonus: int, total: int
) -> None:
    """A.2: last_trick_bonus follows count_scheme when only the scheme is given: 10 for the
    first three, 1 for points1 with 48 cards, 2 with 80; A.7 item 8 uses the total in play."""
    from referee.engine.engine import make_setup

    rules = resolve_options(variant, options)
    assert rules.last_trick_bonus == bonus
    assert make_setup(rules).total_in_play == total


def test_double_deck_48_card_defaults() -> None:
    """OPTIONS.md (48 cards: ...) defaults: min_bid 25, target 150, no marriage needed, save 1,
    dix exempt, 12 each."""
    rules = resolve_options("double-deck", {"deck": 48})
    assert (rules.min_bid, rules.target, rules.trump_requires_marriage) == (25, 150, False)
    assert (rules.save_meld, rules.dix_exempt_from_save, rules.hand_size) == (1, True, 12)
    assert rules.last_trick_bonus == 1


def test_no_bid_game_end_options_refused() -> None:
    """OPTIONS.md both_reach: extend_250 only for two-handed; margin_win true refused in
    cutthroat; save_applies_to defenders refused in partnership-no-bid (A.9 item 6)."""
    for variant, options in (
        ("partnership", {"both_reach": "extend_250"}),
        ("double-deck", {"both_reach": "extend_250"}),
        ("cutthroat", {"margin_win": True}),
        ("partnership-no-bid", {"save_applies_to": "defenders"}),
        ("partnership-no-bid", {"both_reach": "bidder_wins"}),
    ):
        with pytest.raises(OptionError):
            resolve_options(variant, options)
