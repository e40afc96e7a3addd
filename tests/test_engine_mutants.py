"""Behaviour of the validating engine that mutation testing found unpinned (RULES.md A.3-A.10).

Each test names the rule it pins. They were written against mutants of
``referee/engine/engine.py`` that the rest of the suite let through (a deal check dropped, a
boundary moved by one, a branch of the in-progress verdict negated, ...); each test fails with
its mutant applied and passes without it. Positions come from the explicit-deal helpers of
``tests.test_violations`` and ``tests.test_two_handed``.
"""

from __future__ import annotations

import dataclasses

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import (
    apply,
    hand_progress,
    legal_actions,
    matches,
    new_game,
    start_hand,
)
from referee.engine.errors import DealError, IllegalAction
from referee.engine.events import Event
from referee.engine.state import BURY, MELD, PARTNER_PASS, PLAY, GameState, HandState
from referee.rules.cards import parse_card
from referee.rules.dealing import Deal
from referee.rules.options import resolve_options
from tests.test_two_handed import LOSER, SEED_HAND, begin2, win_trick
from tests.test_violations import (
    NB_HANDS,
    NO_EXCHANGE,
    act,
    auto_action,
    begin,
    make_deal,
    meld_all,
    nb_exchanged,
    nb_meld,
    p_auction,
    refuse,
    win_auction,
)


def hand(state: GameState) -> HandState:
    assert state.hand is not None
    return state.hand


def progress(state: GameState) -> dict[str, object]:
    return hand_progress(state.setup, hand(state))


# --------------------------------------------------------------------------------------------
# Creating a game and dealing (A.3, A.10 item 4, GAME_RECORD.md)


def test_the_first_dealer_defaults_to_seat_0() -> None:
    """A.3: "The first hand's dealer is given at creation (default 0)": seat 1 calls first."""
    rules = resolve_options("partnership", {})
    state = new_game(rules)
    assert (state.first_dealer, state.next_dealer) == (0, 0)
    state, _ = start_hand(state, make_deal(rules, ()))
    assert (hand(state).dealer, hand(state).turn) == (0, 1)


def _swap_one_card(deal: Deal, giver: int, taker: int) -> Deal:
    """``deal`` with one card moved from hand ``giver`` to hand ``taker`` (sizes 11 and 13)."""
    hands = [list(h) for h in deal.hands]
    hands[taker].append(hands[giver].pop())
    return dataclasses.replace(deal, hands=tuple(tuple(sorted(h)) for h in hands))


def test_a_deal_with_one_hand_short_and_one_long_is_refused() -> None:
    """A.10 item 4: each seat gets exactly ``h`` cards. A whole deck dealt 11 and 13 is a bad
    deal (a record error), not a hand played with uneven hands."""
    rules = resolve_options("partnership", {})
    deal = _swap_one_card(make_deal(rules, ()), 0, 1)
    with pytest.raises(DealError, match="must have 12 cards"):
        start_hand(new_game(rules, 0), deal)


def test_a_deal_with_a_card_twice_and_one_missing_is_refused() -> None:
    """A.10 item 4, §1.1: the deal is the whole deck, two copies of each card. Every size right,
    but a third AS in place of one copy of another card: a bad deal."""
    rules = resolve_options("partnership", {})
    deal = make_deal(rules, ())
    hands = [list(h) for h in deal.hands]
    assert hands[0][:2] == [parse_card("AS")] * 2 and hands[1][0] != parse_card("AS")
    hands[1][0] = parse_card("AS")
    deal = dataclasses.replace(deal, hands=tuple(tuple(sorted(h)) for h in hands))
    with pytest.raises(DealError, match="whole 48-card deck"):
        start_hand(new_game(rules, 0), deal)


def test_a_no_bid_deal_with_too_few_hands_is_a_deal_error() -> None:
    """A record's deal with fewer hands than seats is a bad deal (DealError, exit 2 in the
    audit, A.7 item 10), checked before the no-bid turn-up is looked up in the dealer's hand (an
    IndexError there would be a crash, not a record error)."""
    rules = resolve_options("partnership-no-bid", {})
    deal = make_deal(rules, NB_HANDS, turn_up="AH")
    short = dataclasses.replace(deal, hands=deal.hands[:3])
    with pytest.raises(DealError, match="4 hands"):
        start_hand(new_game(rules, 3), short)


def test_a_no_bid_turn_up_outside_the_dealers_hand_is_refused() -> None:
    """A.1 (V5), GAME_RECORD.md §1: the no-bid turned card is the dealer's last card; a deal
    whose ``turn_up`` is another seat's card is a bad deal."""
    rules = resolve_options("partnership-no-bid", {})
    deal = make_deal(rules, NB_HANDS, turn_up="AH")
    elsewhere = deal.hands[1][0]
    with pytest.raises(DealError, match="dealer's cards"):
        start_hand(new_game(rules, 0), dataclasses.replace(deal, turn_up=elsewhere))


def test_a_no_bid_deal_announces_the_turned_trump() -> None:
    """A.1 (V5), §6.2: the dealer's last card is turned for trump, in sight of everyone: the
    deal's events say which card and suit, then the meld phase opens at the dealer's left."""
    rules = resolve_options("partnership-no-bid", {})
    state, events = start_hand(new_game(rules, 0), make_deal(rules, NB_HANDS, turn_up="AH"))
    turned = [e.to_json() for e in events if e.kind == "trump_turned"]
    assert turned == [{"kind": "trump_turned", "audience": "everyone", "card": "AH", "suit": "H"}]
    assert (hand(state).phase, hand(state).turn) == (MELD, 1)


# --------------------------------------------------------------------------------------------
# The entry point (A.5 order)


def test_an_action_before_the_first_deal_is_wrong_phase() -> None:
    """A.5: an action with no hand dealt is refused with WRONG_PHASE (not a crash)."""
    state = new_game(resolve_options("partnership", {}), 0)
    for data in ({"type": "bid", "amount": 250}, {"type": "pass"}, {"type": "concede"}):
        with pytest.raises(IllegalAction) as info:
            apply(state, 1, decode_action(data))
        assert info.value.code == "WRONG_PHASE"


def test_a_two_handed_meld_without_a_name_is_malformed_before_anything_else() -> None:
    """A.8 item 1 and A.5: a two-handed meld is ``{name, cards}``; without ``name`` it is
    MALFORMED_ACTION, the first code in A.5's order, so even with no hand dealt (where any
    well-formed action would be WRONG_PHASE)."""
    state = new_game(resolve_options("two-handed", {}), 0)
    with pytest.raises(IllegalAction) as info:
        apply(state, 1, decode_action({"type": "meld", "cards": ["KH", "QH"]}))
    assert info.value.code == "MALFORMED_ACTION"


class _Seat(int):
    """An int subclass (an enum member, say): a seat number all the same."""


def test_an_int_subclass_seat_0_is_seat_0() -> None:
    """A.5: only something that is not one of the table's seat numbers is MALFORMED_ACTION; an
    int subclass worth 0 is seat 0 (the dealer may pass)."""
    state = act(p_auction(), 1, "bid", amount=250)
    state = act(state, 2, "pass")
    state = act(state, 3, "pass")
    state, _ = apply(state, _Seat(0), decode_action({"type": "pass"}))
    assert (hand(state).declarer, hand(state).bid) == (1, 250)


# --------------------------------------------------------------------------------------------
# Auction, trump and exchange (A.2, A.7 items 1 and 3)


def test_a_schedule_step_counts_from_the_lowest_raise_not_from_zero() -> None:
    """A.2 ``bid_schedule``: the raise over the standing bid must be a multiple of the step in
    force at its level. Standing 62 under ``[[50,1],[60,5],[100,10]]``: raises of 5, so 67 and
    72 are legal and 70 (a multiple of 5, but a raise of 8) is BID_BAD_RAISE."""
    state = begin("double-deck", {"bid_schedule": [[50, 1], [60, 5], [100, 10]]})
    state = act(state, 1, "bid", amount=62)
    assert [e for e in legal_actions(state, 2) if e["type"] == "bid"] == [
        {"type": "bid", "min": 67, "step": 5, "max": None}
    ]
    (entry,) = [e for e in legal_actions(state, 2) if e["type"] == "bid"]
    assert matches(entry, {"type": "bid", "amount": 72})
    assert not matches(entry, {"type": "bid", "amount": 70})
    assert refuse(state, 2, "bid", amount=70).code == "BID_BAD_RAISE"
    state = act(state, 2, "bid", amount=72)
    assert hand(state).high_bid == 72


def test_a_window_of_one_bid_is_still_listed() -> None:
    """A.10 item 2: the bid entry's ``max`` is itself a legal bid. With ``max_raise`` equal to
    the step, the opening window is the one bid 250 (A.7 item 3: a raise of 10 over 240), listed
    as min = max = 250, and that bid is accepted."""
    state = p_auction(max_raise=10)
    assert {"type": "bid", "min": 250, "step": 10, "max": 250} in legal_actions(state, 1)
    assert refuse(state, 1, "bid", amount=260).code == "BID_BAD_RAISE"
    assert hand(act(state, 1, "bid", amount=250)).high_bid == 250


def test_an_exchange_of_one_card_each_way_is_still_an_exchange() -> None:
    """A.2 ``exchange_count`` (0 to 5), A.7 item 1: with a count of 1 the partner passes one card
    after trump is named; only a count of 0 skips the exchange."""
    state = win_auction(p_auction(exchange_count=1), 1)
    state = act(state, 1, "declare_trump", suit="H")
    assert (hand(state).phase, hand(state).turn) == (PARTNER_PASS, 3)
    (entry,) = legal_actions(state, 3)
    assert entry["type"] == "pass_cards" and entry["count"] == 1


# --------------------------------------------------------------------------------------------
# Meld and bury (A.7 items 1, 6, 7)


def test_after_a_dix_exchange_the_dealer_may_meld_without_the_nine() -> None:
    """A.7 item 7: the 9 the dealer took cannot score again, but the dealer need not show it: a
    meld of other cards (two jacks, worth nothing) is scored as any meld, and the exchanger keeps
    its 10."""
    state = nb_exchanged()
    state = act(state, 1, "meld", cards=[])
    state = act(state, 2, "meld", cards=[])
    state = act(state, 3, "meld", cards=[])
    state = act(state, 0, "meld", cards=["JD", "JD"], points=0)
    melds = hand(state).melds
    assert [m.points if m else None for m in melds] == [0, 10, 0, 0]
    assert hand(state).phase == PLAY


# The cutthroat declarer's 18 cards: 15 of them make its meld (run, aces, kings and queens
# around, pinochle, three marriages), the three 10s make nothing.
CT_MELDER = "AH 10H KH QH JH AS AD AC KS KD KC QS QD QC JD"
CT_FREE = "10S 10D 10C"


def test_a_bury_with_exactly_three_free_cards_must_bury_those() -> None:
    """A.7 item 1: the 15 cards kept must hold every card of the declarer's scored meld. When the
    meld uses exactly 15 of the 18 cards, the three others are the only legal bury (the
    fallback that frees every card applies only when fewer than three are free)."""
    state = begin("cutthroat", {}, ("", CT_MELDER), widow=CT_FREE)
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {1: CT_MELDER + " " + CT_FREE})
    record = hand(state).melds[1]
    assert record is not None and record.points == 150 + 100 + 80 + 60 + 40 + 3 * 20
    assert (hand(state).phase, hand(state).turn) == (BURY, 1)
    assert legal_actions(state, 1) == [
        {"type": "discard", "count": 3, "from": ["10S", "10D", "10C"]}
    ]
    assert refuse(state, 1, "discard", cards=["10S", "10D", "QS"]).code == "CANNOT_BURY_MELD"
    state = act(state, 1, "discard", cards=["10C", "10S", "10D"])
    assert hand(state).phase == PLAY


# --------------------------------------------------------------------------------------------
# The verdict of a hand in progress (A.7 items 7, 8 and 10)


def _partnership_to_meld(bid: int) -> GameState:
    """Partnership without exchange: seat 1 won at ``bid`` and named hearts; seat 1 melds."""
    state = win_auction(p_auction(**NO_EXCHANGE), 1, bid)
    return act(state, 1, "declare_trump", suit="H")


def test_progress_during_the_auction_has_no_contract_and_no_meld() -> None:
    """A.7 item 10: a hand stopped in the auction reports no declarer, bid or trump, meld 0 for
    every seat, not hopeless, and delta 0 for each side."""
    assert progress(act(p_auction(), 1, "bid", amount=250)) == {
        "hand": 0,
        "dealer": 0,
        "declarer": None,
        "bid": None,
        "trump": None,
        "conceded": False,
        "hopeless": False,
        "meld": [0, 0, 0, 0],
        "points": [0, 0],
        "delta": [0, 0],
    }


def test_progress_in_the_meld_phase_reports_the_meld_so_far() -> None:
    """A.7 item 10: the meld so far per seat (0 for a seat yet to meld), the contract and trump,
    delta 0; hopeless is not decided before every seat has melded (A.7 item 8)."""
    state = act(_partnership_to_meld(260), 1, "meld", cards=["KC", "QC"])
    assert progress(state) == {
        "hand": 0,
        "dealer": 0,
        "declarer": 1,
        "bid": 260,
        "trump": "H",
        "conceded": False,
        "hopeless": False,
        "meld": [0, 20, 0, 0],
        "points": [0, 0],
        "delta": [0, 0],
    }


@pytest.mark.parametrize(
    ("bid", "shown", "hopeless"),
    [
        # 260 - 0 > 250: hopeless; the defenders' marriage (seat 0) does not count.
        (260, {0: "KD QD"}, True),
        # 260 - 20 (the declarer's own marriage) = 240: not hopeless.
        (260, {1: "KC QC"}, False),
        # 250 - 0 = 250 is not more than the 250 in play.
        (250, {}, False),
    ],
)
def test_progress_marks_hopeless_as_the_hand_result_would(
    bid: int, shown: dict[int, str], hopeless: bool
) -> None:
    """A.7 item 8: hopeless = bid - the declaring side's meld > the card points in play (250),
    reported once every seat has melded, and the same as the hand result says after a
    concession."""
    state = _partnership_to_meld(bid)
    while hand(state).turn != 0:
        state = act(state, hand(state).turn, "meld", cards=shown.get(hand(state).turn, "").split())
    assert progress(state)["hopeless"] is False  # seat 0 has not melded yet
    state = meld_all(state, shown)
    assert progress(state)["hopeless"] is hopeless
    _, events = apply(state, 1, decode_action({"type": "concede"}))
    (result,) = [e.data for e in events if e.kind == "hand_result"]
    assert result["hopeless"] is hopeless


def test_progress_counts_a_no_bid_dix_exchange_at_once() -> None:
    """A.7 item 7: the exchanger scores the dix value (10) at once, before its own meld; after its
    meld the 10 is part of that meld, not added twice."""
    assert progress(nb_meld())["meld"] == [0, 0, 0, 0]
    state = nb_exchanged()
    assert progress(state)["meld"] == [0, 10, 0, 0]
    state = act(state, 1, "meld", cards=[])
    assert progress(state)["meld"] == [0, 10, 0, 0]
    state = act(state, 2, "meld", cards=["9H"])
    assert progress(state)["meld"] == [0, 10, 10, 0]
    assert progress(state)["declarer"] is None and progress(state)["bid"] is None


def test_an_automatic_meld_that_scores_nothing_shows_nothing() -> None:
    """A.10 item 3, A.2 ``meld_declaration: auto``: an automatic meld shows just the cards of
    what it scored, so a seat whose hand makes no combination shows no card at all (seat 2 holds
    no meld with hearts trump)."""
    state = win_auction(p_auction(meld_declaration="auto", **NO_EXCHANGE), 1)
    _, events = apply(state, 1, decode_action({"type": "declare_trump", "suit": "H"}))
    shown = {e.data["seat"]: e.data for e in events if e.kind == "meld_scored"}
    assert shown[2]["cards"] == [] and shown[2]["points"] == 0
    assert shown[1]["cards"] == ["9H", "9H", "KC", "KC", "QC", "QC"] and shown[1]["points"] == 60


# --------------------------------------------------------------------------------------------
# Hand results (A.7 items 5 and 8, §4.7)


def test_a_no_marriage_concession_one_over_the_points_in_play_is_hopeless() -> None:
    """A.7 items 5 and 8: with no marriage the declarer concedes in the trump phase, the
    declaring side loses the bid and has no meld, so at 51 against the 50 card points of the
    double deck the contract was hopeless; the other side is not bound by a save (saved)."""
    aces = "AS AS AS AS AH AH AH AH AD AD AD AD AC AC AC AC"
    state = begin("double-deck", {}, ("", aces + " 10S 10S 10S 10S"))
    state = win_auction(state, 1, 51)
    _, events = apply(state, 1, decode_action({"type": "concede"}))
    (result,) = [e.data for e in events if e.kind == "hand_result"]
    assert result["delta"] == [0, -51]
    assert result["hopeless"] is True
    assert result["saved"] == [True, False]


def test_a_side_that_fails_to_save_keeps_its_dix() -> None:
    """A.2 ``dix_exempt_from_save`` (partnership default true), §4.7: a side whose meld is lost
    for want of the save still scores its dix points. With ``save_meld`` 251 no side can save;
    the defenders' two dixes (9D 9D, diamonds trump) still count 20 on top of their points."""
    state = win_auction(p_auction(save_meld=251, **NO_EXCHANGE), 1)
    state = act(state, 1, "declare_trump", suit="D")
    state = meld_all(state, {0: "9D 9D"})
    events: list[Event] = []
    while state.hand is not None:
        seat, data = auto_action(state)
        state, more = apply(state, seat, decode_action(data))
        events += more
    (result,) = [e.data for e in events if e.kind == "hand_result"]
    assert result["saved"] == [False, False]
    assert result["meld"] == [20, 0, 0, 0]
    delta, points = result["delta"], result["points"]
    assert isinstance(delta, list) and isinstance(points, list)
    assert delta[0] == 20 + points[0]


def test_two_handed_progress_has_no_contract_and_counts_meld_as_delta() -> None:
    """A.8 item 9: a two-handed hand in progress reports the meld so far (the dealer's turned-up
    9 included), the card points so far and delta = meld; no declarer, bid or concession, never
    hopeless, and the trump turned at the deal."""
    state, _ = begin2([SEED_HAND, LOSER], "9H", dealer=1)
    state = win_trick(state, 0, "AC")
    state = act(state, 0, "meld", name="marriage", cards=["KS", "QS"])
    points = list(hand(state).side_points)
    assert points[0] > 0 and points[1] == 0
    assert progress(state) == {
        "hand": 0,
        "dealer": 1,
        "declarer": None,
        "bid": None,
        "trump": "H",
        "conceded": False,
        "hopeless": False,
        "meld": [20, 10],
        "points": points,
        "delta": [20, 10],
    }


def test_two_handed_window_entries_match_what_apply_accepts() -> None:
    """A.10 item 2 (an action is accepted exactly when it matches an entry), A.8 items 1-2: in
    the winner's window a meld entry is one concrete combination (same name and cards in any
    order, a points claim equal to its value), and the lead may be the card about to be drawn,
    so the ``drawn_card`` entry matches a play of any card."""
    state, _ = begin2([SEED_HAND, LOSER], "9H", dealer=1)
    state = win_trick(state, 0, "AC")
    entries = legal_actions(state, 0)
    (marriage,) = [
        e for e in entries if e.get("name") == "marriage" and e.get("cards") == ["KS", "QS"]
    ]
    assert marriage == {"type": "meld", "name": "marriage", "cards": ["KS", "QS"], "points": 20}
    same: dict[str, object] = {"type": "meld", "name": "marriage", "cards": ["QS", "KS"]}
    assert matches(marriage, same)
    assert matches(marriage, {**same, "points": 20})
    for other in (
        {**same, "points": 30},
        {**same, "name": "royal_marriage"},
        {**same, "cards": ["KS", "QH"]},
    ):
        assert not matches(marriage, other)
    (drawn,) = [e for e in entries if e.get("drawn_card")]
    assert drawn == {"type": "play", "drawn_card": True}
    assert matches(drawn, {"type": "play", "card": "9D"})
