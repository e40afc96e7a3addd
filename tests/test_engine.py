"""The engine's phase flow and scoring for the bidding variants and no-bid (RULES.md A.4, A.6-A.10).

Positions come from explicit deals (``tests.test_violations`` helpers) where a situation must be
exact, and from seeded deals played by a simple legal policy where any hand will do (invariants:
card points, trick order, replay, export and audit).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from referee.audit import audit_record
from referee.engine import views as views_module
from referee.engine.actions import decode_action, encode_action
from referee.engine.engine import (
    apply,
    bid_window,
    legal_actions,
    matches,
    new_game,
    start_hand,
)
from referee.engine.errors import DealError, IllegalAction
from referee.engine.events import EVERYONE, Event, visible_to
from referee.engine.game import Game, GivenDeals, SeededDeals, replay
from referee.engine.state import (
    AUCTION,
    BURY,
    DECLARER_PASS,
    KITTY_DISCARD,
    MELD,
    PARTNER_PASS,
    PLAY,
    TRUMP,
    GameState,
    HandState,
    evolve_game,
    evolve_hand,
)
from referee.engine.views import view
from referee.rules.cards import format_card, format_cards
from referee.rules.melds import best_meld
from referee.rules.options import resolve_options
from referee.rules.scoring import GameEndRule, SaveRule, game_winner, score_hand
from tests.test_violations import (
    CT_DECLARER,
    NB_HANDS,
    NO_EXCHANGE,
    PLAY_HANDS,
    act,
    auto_action,
    auto_until,
    begin,
    cards,
    ct_bury,
    dd_auction,
    dd_kitty,
    dd_no_marriage,
    dd_trump,
    hand_over,
    make_deal,
    meld_all,
    nb_exchanged,
    nb_meld,
    p_after_bid,
    p_auction,
    p_dealer_stuck,
    p_meld,
    p_partner_pass,
    p_play,
    p_trick,
    p_trump,
    refuse,
    win_auction,
)


def step(state: GameState, seat: int, kind: str, **fields: object) -> tuple[GameState, list[Event]]:
    """Apply an action in JSON form and return the state and its events."""
    return apply(state, seat, decode_action({"type": kind, **fields}))


def ev(event: Event) -> dict[str, Any]:
    """An event's data, JSON-like."""
    return dict(event.data)


def result_of(events: list[Event]) -> dict[str, Any]:
    """The ``hand_result`` event's data (the hand must have ended)."""
    found = [e.data for e in events if e.kind == "hand_result"]
    assert len(found) == 1
    return dict(found[0])


def one_hand(
    variant: str, options: dict[str, object], seed: str, declarer: int = 1
) -> tuple[GameState, dict[str, Any]]:
    """A seeded first hand (dealer 0): ``declarer`` wins the auction at the lowest bid, then
    ``auto_action`` plays it out. Returns the state after it and its result."""
    rules = resolve_options(variant, options)
    state = new_game(rules, 0)
    state, _ = start_hand(state, SeededDeals(seed).next_deal(rules, 0, 0))
    if rules.bidding:
        state = win_auction(state, declarer)
    events: list[Event] = []
    while state.hand is not None:
        seat, data = auto_action(state)
        state, more = apply(state, seat, decode_action(data))
        events += more
    return state, result_of(events)


def hand_view(state: GameState, role: int | str) -> Any:
    """The ``hand`` part of ``role``'s view (JSON-ready data)."""
    return view(state, role)["hand"]


def hand(state: GameState) -> HandState:
    """The hand in progress (asserted present)."""
    assert state.hand is not None
    return state.hand


# --------------------------------------------------------------------------------------------
# Auction


def test_partnership_opening_is_250_or_260() -> None:
    """A.7 item 3: the opening is a raise over 240 of 10 or 20."""
    state = p_auction()
    assert legal_actions(state, 1)[0] == {"type": "bid", "min": 250, "step": 10, "max": 260}
    for amount in (250, 260):
        assert hand(act(state, 1, "bid", amount=amount)).high_bid == amount
    assert refuse(state, 1, "bid", amount=270).code == "BID_BAD_RAISE"
    assert refuse(state, 1, "bid", amount=240).code == "BID_TOO_LOW"


def test_partnership_raises_are_10_or_20() -> None:
    """A.6: raises of exactly 10 or 20 over the standing bid."""
    state = p_after_bid()
    assert bid_window(state.setup, hand(state)) == (260, 10, 270)
    assert hand(act(state, 2, "bid", amount=260)).high_bid == 260
    assert hand(act(state, 2, "bid", amount=270)).high_bid == 270
    assert refuse(state, 2, "bid", amount=280).code == "BID_BAD_RAISE"


def test_a_seat_may_outbid_its_partner_and_bid_again() -> None:
    """§4.2: a seat that has not passed bids again when its turn comes round."""
    state = p_after_bid()
    state = act(state, 2, "pass")
    state = act(state, 3, "bid", amount=260)  # seat 3 outbids its partner, seat 1
    state = act(state, 0, "pass")
    assert hand(state).turn == 1
    state = act(state, 1, "bid", amount=280)
    assert hand(state).turn == 3 and hand(state).high_bidder == 1


def test_pass_is_final() -> None:
    """A passed seat is skipped for the rest of the auction."""
    state = act(p_auction(), 1, "pass")
    state = act(state, 2, "bid", amount=250)
    state = act(state, 3, "bid", amount=260)
    state = act(state, 0, "bid", amount=270)
    assert hand(state).turn == 2  # seat 1 is out
    assert legal_actions(state, 1) == []
    assert refuse(state, 1, "bid", amount=280).code == "NOT_YOUR_TURN"


def test_pass_with_help_is_public() -> None:
    """§4.2, A.10 item 3: a pass with help is a pass, and every role sees the help flag."""
    state, events = step(p_auction(), 1, "pass", help=True)
    assert hand(state).out[1] and hand(state).turn == 2
    assert [e.to_json() for e in events] == [
        {"kind": "call", "audience": "everyone", "seat": 1, "type": "pass", "help": True}
    ]
    for role in (0, 1, 2, 3, "spectator", "adjudicator"):
        auction = hand_view(state, role)["auction"]
        assert auction == [{"seat": 1, "type": "pass", "help": True}]


def test_dealer_stuck_must_bid_and_takes_the_contract() -> None:
    """all_pass dealer_stuck: the dealer cannot pass; bidding 250 wins the contract."""
    state = p_dealer_stuck()
    entries = legal_actions(state, 0)
    assert {"type": "pass"} not in entries
    assert entries == [{"type": "bid", "min": 250, "step": 10, "max": 260}]
    state, events = step(state, 0, "bid", amount=250)
    assert hand(state).phase == TRUMP and hand(state).declarer == 0 and hand(state).bid == 250
    assert any(e.kind == "contract" and e.data == {"declarer": 0, "bid": 250} for e in events)


@pytest.mark.parametrize(
    ("variant", "options"),
    [
        ("partnership", {"all_pass": "redeal"}),
        ("cutthroat", {}),
        ("double-deck", {"all_pass": "redeal"}),
    ],
)
def test_all_pass_redeal_ends_the_hand_with_nothing_scored(variant, options) -> None:
    """A.7 item 2: no bid under all_pass redeal: declarer, bid, trump null, deltas 0, the deal
    passes to the next dealer."""
    rules = resolve_options(variant, options)
    game = Game(rules, dealer=2, deals=SeededDeals("redeal"))
    events: list[Event] = []
    for _ in range(rules.players):
        events += game.act(hand(game.state).turn, decode_action({"type": "pass"}))
    result = result_of(events)
    assert result["declarer"] is None and result["bid"] is None and result["trump"] is None
    assert result["delta"] == [0] * game.state.setup.sides
    assert any(e.kind == "redeal" for e in events)
    state = game.state
    assert state.hands_completed == 1 and state.scores == (0,) * state.setup.sides
    assert hand(state).dealer == 3 % rules.players and hand(state).phase == AUCTION
    assert hand(state).turn == (hand(state).dealer + 1) % rules.players


def test_double_deck_bid_or_redeal_consensus_redeals() -> None:
    """§5.2, A.7 item 2: a round of pass / bid_or_redeal calls with one BOR is a redeal, even
    under dealer_stuck (the dealer may pass once someone called BOR)."""
    state = dd_auction()
    state = act(state, 1, "bid_or_redeal")
    state = act(state, 2, "pass")
    state = act(state, 3, "bid_or_redeal")
    assert {"type": "pass"} in legal_actions(state, 0)
    state, events = step(state, 0, "pass")
    assert state.hand is None and state.hands_completed == 1 and state.next_dealer == 1
    assert result_of(events)["delta"] == [0, 0]


def test_stuck_dealer_may_call_bid_or_redeal() -> None:
    """A.7 item 2: under dealer_stuck the dealer may bid or call bid-or-redeal, not pass."""
    state = dd_auction()
    for seat in (1, 2, 3):
        state = act(state, seat, "pass")
    entries = legal_actions(state, 0)
    assert {"type": "bid_or_redeal"} in entries and {"type": "pass"} not in entries
    state, events = step(state, 0, "bid_or_redeal")
    assert state.hand is None and result_of(events)["bid"] is None


def test_bid_or_redeal_caller_must_bid_or_pass_after_a_numeric_bid() -> None:
    """§5.2: a BOR caller is not out; after a numeric bid it must bid higher or pass."""
    state = act(dd_auction(), 1, "bid_or_redeal")
    state = act(state, 2, "bid", amount=50)
    state = act(state, 3, "pass")
    state = act(state, 0, "pass")
    assert hand(state).phase == AUCTION and hand(state).turn == 1
    assert legal_actions(state, 1) == [
        {"type": "bid", "min": 51, "step": 1, "max": None},
        {"type": "pass"},
    ]
    assert refuse(state, 1, "bid_or_redeal").code == "BID_OR_REDEAL_NOT_ALLOWED"
    assert hand(act(state, 1, "bid", amount=55)).high_bidder == 1
    state = act(state, 1, "pass")
    assert hand(state).phase == TRUMP and hand(state).declarer == 2


def test_partnership_contract_after_three_passes() -> None:
    """§4.2: with a bid standing, the auction ends when the other three have passed."""
    state = act(p_auction(), 1, "bid", amount=250)
    state = act(state, 2, "pass")
    state = act(state, 3, "pass")
    assert hand(state).phase == AUCTION and hand(state).turn == 0
    state = act(state, 0, "pass")
    assert (hand(state).phase, hand(state).declarer, hand(state).bid) == (TRUMP, 1, 250)


def test_cutthroat_contract_after_two_passes() -> None:
    """§3.2, §10.1: three-handed, the auction ends after two passes."""
    state = begin("cutthroat")
    state = act(state, 1, "bid", amount=300)
    state = act(state, 2, "pass")
    assert hand(state).phase == AUCTION
    state = act(state, 0, "pass")
    assert (hand(state).phase, hand(state).declarer, hand(state).bid) == (TRUMP, 1, 300)


def test_bid_schedule_sets_the_step_by_level() -> None:
    """A.2: with [[50,1],[60,5],[100,10]] the step is 1 below 60, 5 from 60, 10 from 100."""
    state = begin("double-deck", {"bid_schedule": [[50, 1], [60, 5], [100, 10]]})
    assert bid_window(state.setup, hand(state))[:2] == (50, 1)
    state = act(state, 1, "bid", amount=59)
    assert bid_window(state.setup, hand(state))[:2] == (60, 1)
    state = act(state, 2, "bid", amount=60)
    assert bid_window(state.setup, hand(state))[:2] == (65, 5)
    state = act(state, 3, "bid", amount=100)
    assert bid_window(state.setup, hand(state))[:2] == (110, 10)


# --------------------------------------------------------------------------------------------
# Widow, kitty, exchange


def test_cutthroat_widow_joins_the_declarer_and_is_public() -> None:
    """A.4, A.10 item 3: the widow joins the declarer's hand at the contract, shown to all."""
    state = begin("cutthroat", {}, ("", CT_DECLARER), widow="9D 9D 9C")
    for role in (0, 1, 2, "spectator"):
        assert hand_view(state, role)["widow"] is None
    state = act(state, 1, "bid", amount=300)
    state = act(state, 2, "pass")
    state, events = step(state, 0, "pass")
    assert len(hand(state).hands[1]) == 18
    assert sorted(hand(state).hands[1]) == sorted(cards(CT_DECLARER + " 9D 9D 9C"))
    widow_events = [e for e in events if e.kind == "widow_taken"]
    assert [(e.audience, e.data["cards"]) for e in widow_events] == [
        ("everyone", ["9D", "9D", "9C"])
    ]
    for role in (0, 1, 2, "spectator"):
        public = hand_view(state, role)
        assert public["widow"] == ["9D", "9D", "9C"]
        assert public["hand_sizes"] == [15, 18, 15]


def test_cutthroat_order_trump_meld_bury_play() -> None:
    """A.7 item 1: trump, then meld (declarer first, 18 cards), then the bury of 3, then play."""
    state = win_auction(begin("cutthroat", {}, ("", CT_DECLARER), widow="9D 9D 9C"), 1)
    assert hand(state).phase == TRUMP
    state = act(state, 1, "declare_trump", suit="H")
    assert (hand(state).phase, hand(state).turn) == (MELD, 1)
    order = []
    while hand(state).phase == MELD:
        order.append(hand(state).turn)
        state = act(state, hand(state).turn, "meld", cards=[])
    assert order == [1, 2, 0]
    assert (hand(state).phase, hand(state).turn) == (BURY, 1)
    state, events = step(state, 1, "discard", cards=["9D", "9D", "9C"])
    assert (hand(state).phase, hand(state).turn) == (PLAY, 1)
    assert [len(h) for h in hand(state).hands] == [15, 15, 15]
    assert [(e.kind, e.audience) for e in events] == [
        ("cards_discarded", "everyone"),
        ("discarded_cards", 1),
    ]


def test_cutthroat_buried_counters_count_for_the_declarer() -> None:
    """A.7 item 1: buried counters count in the declarer's points."""
    state = act(ct_bury(), 1, "discard", cards=["AH", "10H", "AD"])  # 30 points buried
    events: list[Event] = []
    tricks: dict[int, int] = {0: 0, 1: 0, 2: 0}
    while state.hand is not None:
        seat, data = auto_action(state)
        state, more = apply(state, seat, decode_action(data))
        events += more
    for e in events:
        if e.kind == "trick_taken":  # a trick's points include the last-trick bonus
            tricks[ev(e)["seat"]] += ev(e)["points"]
    result = result_of(events)
    assert result["points"] == [tricks[0], tricks[1] + 30, tricks[2]]
    assert sum(result["points"]) == 250


def test_kitty_joins_the_declarer_who_discards_four() -> None:
    """A.7 item 1, A.10 item 3: the kitty joins the declarer's hand, seen by the declarer only;
    after trump the declarer discards 4, and only the declarer sees which."""
    state = dd_kitty()
    assert (hand(state).phase, hand(state).turn) == (KITTY_DISCARD, 1)
    assert len(hand(state).hands[1]) == 23
    assert hand_view(state, 1)["kitty"] == ["JD", "JD", "JD", "JD"]
    for role in (0, 2, 3, "spectator"):
        assert "kitty" not in hand_view(state, role)
    state = act(state, 1, "discard", cards=["JD", "JD", "JD", "JD"])
    assert (hand(state).phase, hand(state).turn) == (MELD, 1)
    assert [len(h) for h in hand(state).hands] == [19, 19, 19, 19]
    assert hand_view(state, 1)["discards"] == ["JD", "JD", "JD", "JD"]
    assert hand_view(state, 0)["passes"] == [{"seat": 1, "count": 4}]
    for role in (0, 2, 3, "spectator"):
        assert "discards" not in hand_view(state, role)


def test_kitty_discard_counters_score_for_the_declaring_side() -> None:
    """A.7 item 1: the discard's counters count for the declaring side; 50 points in all."""
    state = dd_kitty()
    state = act(state, 1, "discard", cards=["AS", "10S", "KD", "JD"])  # 3 counters
    events: list[Event] = []
    taken = [0, 0]
    while state.hand is not None:
        seat, data = auto_action(state)
        state, more = apply(state, seat, decode_action(data))
        events += more
    for e in events:
        if e.kind == "trick_taken":
            taken[ev(e)["seat"] % 2] += ev(e)["points"]
    result = result_of(events)
    assert result["points"] == [taken[0], taken[1] + 3]
    assert sum(result["points"]) == 50


def test_partner_passes_first_then_the_declarer() -> None:
    """§4.3, A.7 item 1: the partner gives 4, the declarer returns 4 (may include cards just
    received); each seat sees the cards passed to it, the others only the count."""
    state = p_partner_pass()
    assert (hand(state).phase, hand(state).turn) == (PARTNER_PASS, 3)
    state, events = step(state, 3, "pass_cards", cards=["QH", "QH", "AD", "AD"])
    assert (hand(state).phase, hand(state).turn) == (DECLARER_PASS, 1)
    assert [(e.kind, e.audience) for e in events] == [
        ("cards_passed", "everyone"),
        ("cards_received", 1),
    ]
    assert len(hand(state).hands[1]) == 16 and len(hand(state).hands[3]) == 8
    assert hand_view(state, 1)["received"] == ["QH", "QH", "AD", "AD"]
    assert hand_view(state, 0)["received"] == []
    state = act(state, 1, "pass_cards", cards=["AD", "9H", "9H", "10C"])
    assert (hand(state).phase, hand(state).turn) == (MELD, 1)
    assert [len(h) for h in hand(state).hands] == [12, 12, 12, 12]
    assert format_cards(hand(state).hands[3]) == format_cards(
        sorted(cards("QS QS JS JS 9S 9S 10D 10D AD 9H 9H 10C"))
    )
    assert hand_view(state, 3)["received"] == ["9H", "9H", "AD", "10C"]
    assert hand_view(state, 2)["passes"] == [
        {"seat": 3, "count": 4},
        {"seat": 1, "count": 4},
    ]


def test_no_exchange_goes_from_trump_to_meld() -> None:
    """exchange_count 0: no exchange actions at all."""
    state = p_meld()
    assert (hand(state).phase, hand(state).turn) == (MELD, 1)
    state = begin("partnership", {"exchange_mode": "none"}, PLAY_HANDS)
    state = act(win_auction(state, 2), 2, "declare_trump", suit="S")
    assert (hand(state).phase, hand(state).turn) == (MELD, 2)


# --------------------------------------------------------------------------------------------
# Meld


def test_meld_order_starts_with_the_declarer_and_the_declarer_leads() -> None:
    """A.4: the declarer melds first, then clockwise; §4.6: the declarer leads."""
    state = win_auction(p_auction(**NO_EXCHANGE), 2)
    state = act(state, 2, "declare_trump", suit="S")
    order = []
    while hand(state).phase == MELD:
        order.append(hand(state).turn)
        state = act(state, hand(state).turn, "meld", cards=[])
    assert order == [2, 3, 0, 1]
    assert (hand(state).phase, hand(state).turn, hand(state).trick_leader) == (PLAY, 2, 2)


def test_meld_with_only_cards_scores_the_best_meld_of_those_cards() -> None:
    """A.4: a meld with only cards is worth the best meld the shown cards make."""
    state = p_meld()
    whole = format_cards(hand(state).hands[1])
    after, events = step(state, 1, "meld", cards=whole)
    record = hand(after).melds[1]
    assert record is not None
    expected = best_meld(hand(state).hands[1], 1, state.setup.meld_table)
    assert record.points == expected.total == 60  # 9H 9H (20) + KC QC twice (40)
    scored: dict[str, Any] = dict(events[0].data)
    assert scored["points"] == 60 and scored["seat"] == 1
    assert [m["name"] for m in scored["melds"]] == ["marriage", "dix"]
    # Showing part of the hand scores only what that part makes.
    part = hand(act(state, 1, "meld", cards=["KC", "QC", "9H"])).melds[1]
    assert part is not None and part.points == 30


def test_declared_melds_score_exactly_what_is_declared() -> None:
    """A.7 item 6: with melds, the meld is worth exactly what is declared."""
    state = p_meld()
    after = act(
        state,
        1,
        "meld",
        cards=["KC", "QC", "KC", "QC", "9H"],
        melds=[{"name": "marriage", "cards": ["KC", "QC"]}],
        points=20,
    )
    record = hand(after).melds[1]
    assert record is not None and record.points == 20
    both = act(
        state,
        1,
        "meld",
        cards=["KC", "QC", "KC", "QC", "9H", "9H"],
        melds=[
            {"name": "marriage", "cards": ["KC", "KC", "QC", "QC"]},
            {"name": "dix", "cards": ["9H"]},
        ],
    )
    record = hand(both).melds[1]
    assert record is not None and record.points == 50


def test_melds_are_public() -> None:
    """A.10 item 3: every meld shown, with its points, is seen by every role."""
    state = act(p_meld(), 1, "meld", cards=["KC", "QC"])
    for role in (0, 2, "spectator"):
        melds = hand_view(state, role)["melds"]
        assert melds[1]["cards"] == ["KC", "QC"] and melds[1]["points"] == 20
        assert melds[0] is None


def test_auto_meld_takes_no_meld_actions() -> None:
    """meld_declaration auto: every seat's best meld of the whole hand, straight to play."""
    state = begin("partnership", {"meld_declaration": "auto", "exchange_count": 0}, PLAY_HANDS)
    state = win_auction(state, 1)
    state, events = step(state, 1, "declare_trump", suit="H")
    assert (hand(state).phase, hand(state).turn) == (PLAY, 1)
    points = [m.points if m else None for m in hand(state).melds]
    expected = [best_meld(h, 1, state.setup.meld_table).total for h in hand(state).hands]
    assert points == expected
    assert [e.data["seat"] for e in events if e.kind == "meld_scored"] == [1, 2, 3, 0]
    assert refuse(state, 1, "meld", cards=[]).code == "WRONG_PHASE"
    assert all(e["type"] == "play" for e in legal_actions(state, 1)[:-1])


def test_auto_meld_in_no_bid_has_no_dix_exchange() -> None:
    """A.7 item 7: under meld_declaration auto there is no exchange; play starts at once."""
    state = begin("partnership-no-bid", {"meld_declaration": "auto"}, NB_HANDS, turn_up="AH")
    assert (hand(state).phase, hand(state).turn) == (PLAY, 1)
    melds = hand(state).melds
    assert melds[1] is not None  # two spade marriages and its own 9H, no exchange bonus
    assert (melds[1].points, melds[1].dix_points) == (50, 10)
    assert hand(state).turn_up == cards("AH")[0] and hand(state).dix_exchanged_by is None
    assert refuse(state, 1, "exchange_dix").code == "WRONG_PHASE"


def test_auto_meld_shows_every_copy_its_combinations_use() -> None:
    """A.10 item 3: every role sees every meld shown. An automatic meld shows the cards of what
    it scored, each copy a double combination uses: two marriages in spades show both kings and
    both queens, not one of each."""
    state = begin("partnership-no-bid", {"meld_declaration": "auto"}, NB_HANDS, turn_up="AH")
    for role in (0, 3, "spectator"):
        melds = hand_view(state, role)["melds"]
        assert melds[1]["cards"] == ["KS", "KS", "QS", "QS", "9H"]
        assert melds[2]["cards"] == ["9H", "KD", "KD", "QD", "QD", "KC", "QC"]


def test_no_bid_dix_exchange() -> None:
    """A.7 item 7: the exchanger takes the turned card and scores 10 in its meld; the dealer
    takes the 9, which cannot score again; the other 9 still scores for its holder."""
    before = nb_meld()
    state, events = step(before, 1, "exchange_dix")
    assert [e.to_json() for e in events] == [
        {
            "kind": "dix_exchanged",
            "audience": "everyone",
            "seat": 1,
            "took": "AH",
            "gave": "9H",
            "points": 10,
        }
    ]
    held = hand(state).hands
    assert "AH" in format_cards(held[1]) and "9H" not in format_cards(held[1])
    assert "9H" in format_cards(held[0]) and "AH" not in format_cards(held[0])
    assert hand_view(state, 2)["turn_up"] == "9H"
    assert hand(state).turn == 1  # the exchange does not use the meld turn
    state = act(state, 1, "meld", cards=[], points=0)
    state = act(state, 2, "meld", cards=["9H"], points=10)
    state = act(state, 3, "meld", cards=[])
    state = act(state, 0, "meld", cards=["9H"])
    melds = hand(state).melds
    assert [m.points if m else None for m in melds] == [0, 10, 10, 0]
    assert [m.dix_points if m else None for m in melds] == [0, 10, 10, 0]
    assert hand(state).phase == PLAY and hand(state).turn == 1


def test_no_bid_dealer_scores_a_dealt_dix_beside_the_exchanged_one() -> None:
    """A.7 item 7: only the 9 the dealer received is dead; a 9 it was dealt still scores."""
    dealer = "AH 9H 9S 9D 9D 9C 9C JS JS JH JD JD"
    others = ("9H AS AS 10S 10S KS KS QS QS JC JC QC",)
    state = begin("partnership-no-bid", {}, (dealer, *others), turn_up="AH")
    state = act(state, 1, "exchange_dix")
    state = meld_all(state, {0: "9H 9H"})
    melds = hand(state).melds
    assert melds[0] is not None and melds[0].points == 10


def test_exchanged_dix_points_are_exempt_like_any_dix() -> None:
    """The exchange bonus is dix points of the exchanger's meld (A.7 item 7)."""
    state = nb_exchanged()
    state = act(state, 1, "meld", cards=["AH"])
    record = hand(state).melds[1]
    assert record is not None and (record.points, record.dix_points) == (10, 10)


# --------------------------------------------------------------------------------------------
# Concession


def test_concession_scores_minus_bid_and_the_others_meld_only() -> None:
    """§4.5, A.7 item 4: declarers -bid, the others their meld only (no save needed), points 0."""
    state = win_auction(p_auction(**NO_EXCHANGE), 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {1: "KC QC", 0: "KD QD KD QD", 3: "QS"})
    assert {"type": "concede"} in legal_actions(state, 1)
    assert {"type": "concede"} not in legal_actions(state, 0)
    state, events = step(state, 1, "concede")
    result = result_of(events)
    assert result["conceded"] is True and result["points"] == [0, 0]
    assert result["meld"] == [40, 20, 0, 0]
    assert result["delta"] == [40, -250] and state.scores == (40, -250)
    assert result["hopeless"] is False


def test_concession_of_a_hopeless_contract_is_marked() -> None:
    """A.6, A.7 item 8: hopeless when bid - own meld > 250."""
    state = win_auction(p_auction(min_bid=300, **NO_EXCHANGE), 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {1: "KC QC"})
    state, events = step(state, 1, "concede")
    result = result_of(events)
    assert result["hopeless"] is True and result["delta"] == [0, -300]


def test_cutthroat_concession_after_the_bury() -> None:
    """§3.4, A.7 item 4: the bidder concedes after meld and bury; each opponent scores its meld."""
    state = act(ct_bury(), 1, "discard", cards=["9D", "9D", "9C"])
    state, events = step(state, 1, "concede")
    result = result_of(events)
    assert result["delta"] == [0, -300, 0] and result["points"] == [0, 0, 0]


def test_no_marriage_concession() -> None:
    """A.7 item 5: the only legal action is the declarer's concede: declaring side -bid,
    everyone else 0, no meld; the hopeless flag follows A.7 item 8 (60 > 50)."""
    state = dd_no_marriage()
    assert hand(state).phase == TRUMP and hand(state).bid == 60
    state, events = step(state, 1, "concede")
    result = result_of(events)
    assert result["declarer"] == 1 and result["trump"] is None and result["conceded"] is True
    assert result["delta"] == [0, -60] and result["meld"] == [0, 0, 0, 0]
    assert result["points"] == [0, 0] and result["hopeless"] is True
    assert any(e.kind == "conceded" and e.data["no_trump"] is True for e in events)


def test_no_marriage_is_checked_in_the_declarers_hand() -> None:
    """§5.3: the marriage check is made in the declarer's hand when trump is named."""
    state = dd_trump()
    assert legal_actions(state, 1) == [{"type": "declare_trump", "suit": "S"}]


# --------------------------------------------------------------------------------------------
# Play and hand scoring


def test_play_order_declarer_leads_and_winner_leads_next() -> None:
    """§4.6: the declarer leads the first trick; each trick's winner leads the next."""
    state = p_trick(3)
    state, events = step(state, 0, "play", card="KH")
    taken = [e for e in events if e.kind == "trick_taken"]
    assert [t.data for t in taken] == [
        {"seat": 0, "cards": ["10C", "AC", "QH", "KH"], "points": 30}
    ]
    assert (hand(state).turn, hand(state).trick_leader, hand(state).side_points) == (0, 0, (30, 0))
    assert hand_view(state, 2)["tricks"] == [
        {"leader": 1, "cards": ["10C", "AC", "QH", "KH"], "winner": 0, "points": 30}
    ]


PLAYED_OUT = [
    ("partnership", {}, 250, 12),
    ("partnership", {"count_scheme": "classic_11"}, 250, 12),
    ("cutthroat", {}, 250, 15),
    ("double-deck", {}, 50, 20),
    ("double-deck", {"deck": 48}, 25, 12),
    ("double-deck", {"exchange_mode": "kitty"}, 50, 19),
    ("partnership-no-bid", {}, 250, 12),
]


@pytest.mark.parametrize(("variant", "options", "total", "tricks"), PLAYED_OUT)
def test_a_played_hand_counts_every_point_once(variant, options, total, tricks) -> None:
    """§1.6, §10.3: card points (discards included) plus the last-trick bonus make the total;
    the first leader is the declarer (no-bid: the dealer's left); each winner leads next; the
    last trick's winner gets the bonus."""
    for seed in ("a", "b", "c"):
        rules = resolve_options(variant, options)
        state = new_game(rules, 0)
        state, _ = start_hand(state, SeededDeals(seed).next_deal(rules, 0, 0))
        if rules.bidding:
            state = win_auction(state, 2)
        state = auto_until(state, lambda s: s.hand is None or s.hand.phase == PLAY)
        if state.hand is None:  # a double-deck declarer without a marriage conceded
            continue
        first = hand(state).turn
        assert first == (2 if rules.bidding else 1)
        events: list[Event] = []
        last_hand = hand(state)
        while state.hand is not None:
            last_hand = state.hand
            seat, data = auto_action(state)
            state, more = apply(state, seat, decode_action(data))
            events += more
        taken = [e.data for e in events if e.kind == "trick_taken"]
        assert len(taken) == tricks
        leaders = [first] + [t["seat"] for t in taken[:-1]]
        assert [t.leader for t in last_hand.tricks] == leaders[: len(last_hand.tricks)]
        bonus = [e.data for e in events if e.kind == "last_trick_bonus"]
        assert bonus == [{"seat": taken[-1]["seat"], "points": rules.last_trick_bonus}]
        result = result_of(events)
        assert sum(result["points"]) == total
        assert state.setup.total_in_play == total


def test_made_and_set_contracts_score_as_section_10_3() -> None:
    """§4.7, §10.3 through the engine (team 1 declares at 250): made, meld + points; set, -250;
    defenders with a trick point score meld + points, without one at most their dix."""
    outcomes = set()
    for seed in ("s0", "s1", "s2", "s3", "s4", "s5"):
        _, result = one_hand("partnership", {}, seed)
        meld, points, delta = result["meld"], result["points"], result["delta"]
        team_meld = [meld[0] + meld[2], meld[1] + meld[3]]
        assert points[0] + points[1] == 250
        assert points[1] >= 1  # (the dix exemption is not exercised for the declarers here)
        made = team_meld[1] + points[1] >= 250
        assert delta[1] == (team_meld[1] + points[1] if made else -250)
        if points[0] >= 1:
            assert delta[0] == team_meld[0] + points[0]
        else:  # §4.9 example 4: not saved, only dix points may remain
            assert 0 <= delta[0] <= team_meld[0] and delta[0] % 10 == 0
        outcomes.add((made, points[0] >= 1))
    assert outcomes == {(True, True), (False, True), (True, False)}


SEED0_SAVE = SaveRule(save_meld="trick_point", applies_to="both", dix_exempt=True)


def test_worked_example_1_declarers_make_the_bid() -> None:
    """§4.9 example 1: bid 350, meld 120 + 230 = 350 -> +350; defenders 60 + 20 = +80."""
    score = score_hand(
        SEED0_SAVE,
        bid=350,
        declaring_side=0,
        meld=[120, 60],
        dix=[0, 0],
        points=[230, 20],
        tricks=[10, 2],
        conceded=False,
        total_in_play=250,
    )
    assert score.delta == (350, 80)


def test_worked_example_2_declarers_set() -> None:
    """§4.9 example 2: 120 + 220 = 340 < 350 -> -350; defenders 60 + 30 = +90."""
    score = score_hand(
        SEED0_SAVE,
        bid=350,
        declaring_side=0,
        meld=[120, 60],
        dix=[0, 0],
        points=[220, 30],
        tricks=[10, 2],
        conceded=False,
        total_in_play=250,
    )
    assert score.delta == (-350, 90)


def test_worked_example_3_throw_in() -> None:
    """§4.9 example 3: bid 400, meld 140: 260 > 250, hopeless; -400, defenders their meld."""
    score = score_hand(
        SEED0_SAVE,
        bid=400,
        declaring_side=0,
        meld=[140, 70],
        dix=[0, 0],
        points=[0, 0],
        tricks=[0, 0],
        conceded=True,
        total_in_play=250,
    )
    assert score.delta == (-400, 70) and score.hopeless


def test_worked_example_4_defenders_fail_to_save() -> None:
    """§4.9 example 4: no trick points: the defenders' meld is void apart from dix points."""
    score = score_hand(
        SEED0_SAVE,
        bid=250,
        declaring_side=0,
        meld=[200, 70],
        dix=[0, 20],
        points=[250, 0],
        tricks=[11, 1],
        conceded=False,
        total_in_play=250,
    )
    assert score.delta == (450, 20) and score.saved == (True, False)


def test_worked_example_5_both_reach_the_declarers_win() -> None:
    """§4.9 example 5: declarers 1530, defenders 1510: the declarers win."""
    rule = GameEndRule(target=1500, both_reach="bidder_wins")
    assert game_winner(rule, [1530, 1510], 0, 1500) == (0, 1500)
    assert game_winner(rule, [1510, 1530], 0, 1500) == (0, 1500)  # "whatever the totals"
    assert game_winner(rule, [1400, 1510], 0, 1500) == (1, 1500)  # only the defenders cross


# --------------------------------------------------------------------------------------------
# Game end


def _finish_with_scores(
    variant: str, options: dict[str, object], seed: str, before: Callable[[list[int]], list[int]]
) -> tuple[GameState, list[int]]:
    """Play the seeded first hand twice: once to learn its deltas, then again from scores
    ``before(deltas)``. Returns the final state and the deltas."""
    _, result = one_hand(variant, options, seed)
    delta = result["delta"]
    assert isinstance(delta, list)
    rules = resolve_options(variant, options)
    state = new_game(rules, 0)._replace(scores=tuple(before(delta)))
    state, _ = start_hand(state, SeededDeals(seed).next_deal(rules, 0, 0))
    state = win_auction(state, 1) if rules.bidding else state
    return auto_until(state, hand_over), delta


def test_partnership_both_reach_the_declaring_side_wins_with_the_lower_total() -> None:
    """§4.8, A.7 item 9: both sides at 1500 after a hand: the declaring side (team 1) wins."""
    state, delta = _finish_with_scores(
        "partnership", {"min_bid": 20}, "s2", lambda d: [1600 - d[0], 1500 - d[1]]
    )
    assert delta[1] > 0  # the declarers made it
    assert state.scores == (1600, 1500) and state.over and state.winner == 1


def test_partnership_one_side_reaches() -> None:
    """A.7 item 9: one side at the target wins, declaring or not."""
    state, _ = _finish_with_scores(
        "partnership", {"min_bid": 20}, "s2", lambda d: [1500 - d[0], 1000]
    )
    assert state.over and state.winner == 0
    state, _ = _finish_with_scores(
        "partnership", {"min_bid": 20}, "s2", lambda d: [1400 - d[0], 1000]
    )
    assert not state.over and state.winner is None and state.hand is None


def test_double_deck_margin_win() -> None:
    """§5.7, A.7 item 9: nobody at 500, but a lead of 500 or more wins (margin_win)."""
    state, delta = _finish_with_scores("double-deck", {}, "s2", lambda d: [400 - d[0], -100 - d[1]])
    assert delta[1] < 0  # the declarers were set
    assert state.scores == (400, -100) and state.over and state.winner == 0
    state, _ = _finish_with_scores(
        "double-deck", {"margin_win": False}, "s2", lambda d: [400 - d[0], -100 - d[1]]
    )
    assert not state.over


def test_double_deck_both_reach_higher_total() -> None:
    """§5.7: both at the target with a lead under it: the higher total wins (both_reach
    higher_total), whoever declared; equal totals play on."""
    state, _ = _finish_with_scores("double-deck", {}, "s2", lambda d: [520 - d[0], 510 - d[1]])
    assert state.over and state.winner == 0
    state, _ = _finish_with_scores("double-deck", {}, "s2", lambda d: [510 - d[0], 520 - d[1]])
    assert state.over and state.winner == 1
    state, _ = _finish_with_scores("double-deck", {}, "s2", lambda d: [510 - d[0], 510 - d[1]])
    assert not state.over


def test_no_bid_higher_total_wins() -> None:
    """§6.5, A.7 item 9: both sides at 1500: the higher total wins; equal totals play on."""
    state, _ = _finish_with_scores(
        "partnership-no-bid", {}, "s0", lambda d: [1500 - d[0], 1510 - d[1]]
    )
    assert state.over and state.winner == 1
    state, _ = _finish_with_scores(
        "partnership-no-bid", {}, "s0", lambda d: [1510 - d[0], 1510 - d[1]]
    )
    assert not state.over


def test_cutthroat_bidder_is_counted_first() -> None:
    """§3.6, A.7 item 9: the bidder at the target wins even with a lower total than another
    player at it; without the bidder, the higher total wins."""
    state, delta = _finish_with_scores(
        "cutthroat", {"min_bid": 50}, "s0", lambda d: [1600 - d[0], 1500 - d[1], 0]
    )
    assert delta[1] > 0 and state.over and state.winner == 1
    state, _ = _finish_with_scores(
        "cutthroat", {"min_bid": 50}, "s0", lambda d: [1600 - d[0], 0, 1550 - d[2]]
    )
    assert state.over and state.winner == 0


def test_game_over_refuses_everything_afterwards() -> None:
    """A.7 item 9: once the game has ended every action is GAME_OVER and no hand is dealt."""
    state = begin("partnership", {"target": 10, **NO_EXCHANGE}, PLAY_HANDS)
    deal = hand(state).deal
    game = Game(state.rules, 0, GivenDeals([deal], then=SeededDeals("x")))
    for seat, data in [
        (1, {"type": "bid", "amount": 250}),
        (2, {"type": "pass"}),
        (3, {"type": "pass"}),
        (0, {"type": "pass"}),
        (1, {"type": "declare_trump", "suit": "H"}),
        (1, {"type": "meld", "cards": []}),
        (2, {"type": "meld", "cards": []}),
        (3, {"type": "meld", "cards": []}),
        (0, {"type": "meld", "cards": ["KD", "QD"]}),
    ]:
        game.act(seat, decode_action(data))
    events = game.act(1, decode_action({"type": "concede"}))
    assert game.state.over and game.state.winner == 0 and game.state.hand is None
    assert [e.data for e in events if e.kind == "game_over"] == [
        {"winner": 0, "scores": [20, -250]}
    ]
    for seat in range(4):
        assert legal_actions(game.state, seat) == []
        for data in ({"type": "pass"}, {"type": "play", "card": "AS"}, {"type": "concede"}):
            with pytest.raises(IllegalAction) as info:
                game.act(seat, decode_action(data))
            assert info.value.code == "GAME_OVER"
    with pytest.raises(DealError):
        start_hand(game.state, deal)


def test_no_deal_while_a_hand_is_in_progress() -> None:
    """A.7 items 1-2: a hand runs to its result before the next deal; dealing again while it is
    in progress is a DealError (a record error, never a new hand), and changes nothing."""
    state = p_auction()
    with pytest.raises(DealError):
        start_hand(state, hand(state).deal)
    state = act(state, 1, "bid", amount=250)
    with pytest.raises(DealError):
        start_hand(state, hand(state).deal)


@pytest.mark.parametrize("variant", ["partnership", "cutthroat", "double-deck"])
def test_a_deal_turns_a_card_up_only_where_the_variant_does(variant: str) -> None:
    """A.10 item 4, GAME_RECORD.md: ``turn_up`` is the two-handed turned card or the no-bid
    dealer's last card; in the other variants a deal with one is a DealError, even when the card
    is the dealer's."""
    rules = resolve_options(variant, {})
    deal = make_deal(rules, ())
    start_hand(new_game(rules, 0), deal)  # the same deal without turn_up is whole and correct
    with pytest.raises(DealError):
        start_hand(new_game(rules, 0), dataclasses.replace(deal, turn_up=deal.hands[0][-1]))


@pytest.mark.parametrize(
    "variant", ["partnership", "cutthroat", "double-deck", "partnership-no-bid", "two-handed"]
)
def test_the_default_deal_source_deals_every_variant(variant: str) -> None:
    """A ``Game`` without a deal source shuffles with the CSPRNG and deals as the variant deals
    (A.10 item 4's split): every hand dealt passes the deal check; in no-bid the dealer's last
    card is turned for trump (A.1, V5)."""
    rules = resolve_options(variant, {})
    for dealer in range(rules.players):
        game = Game(rules, dealer)
        dealt = hand(game.state)
        assert dealt.dealer == dealer and game.log[0].deal == dealt.deal
        if variant == "partnership-no-bid":
            assert dealt.turn_up is not None and dealt.turn_up in dealt.deal.hands[dealer]
            assert dealt.trump == dealt.turn_up // 6


@pytest.mark.parametrize("variant", ["partnership", "cutthroat", "two-handed"])
def test_the_first_dealer_is_one_of_the_seats(variant: str) -> None:
    """A.3: the dealer is a seat, 0 to players - 1; one past the last seat is refused."""
    rules = resolve_options(variant, {})
    assert new_game(rules, rules.players - 1).next_dealer == rules.players - 1
    for dealer in (-1, rules.players):
        with pytest.raises(ValueError):
            new_game(rules, dealer)


# --------------------------------------------------------------------------------------------
# Views


def _views(state: GameState) -> dict[object, str]:
    return {
        role: json.dumps(view(state, role), sort_keys=True)
        for role in (0, 1, 2, 3, "spectator", "adjudicator")
    }


def test_views_never_show_another_seats_concealed_cards() -> None:
    """A.10 item 3: two deals that differ only in seats 2 and 3's concealed cards look the same
    to seats 0 and 1 and to spectators, through the auction, exchange, meld and a trick; the
    adjudicator (and seats 2 and 3) see the difference."""
    swapped = (
        PLAY_HANDS[0],
        PLAY_HANDS[1],
        PLAY_HANDS[2].replace("AS AS", "AS QS"),
        PLAY_HANDS[3].replace("QS QS", "QS AS"),
    )
    script = [
        (1, {"type": "bid", "amount": 250}),
        (2, {"type": "pass", "help": True}),
        (3, {"type": "pass"}),
        (0, {"type": "pass"}),
        (1, {"type": "declare_trump", "suit": "H"}),
        (3, {"type": "pass_cards", "cards": ["QH", "QH", "AD", "AD"]}),
        (1, {"type": "pass_cards", "cards": ["QH", "QH", "AD", "AD"]}),
        (1, {"type": "meld", "cards": ["KC", "QC"]}),
        (2, {"type": "meld", "cards": []}),
        (3, {"type": "meld", "cards": []}),
        (0, {"type": "meld", "cards": ["KD", "QD"]}),
        (1, {"type": "play", "card": "10C"}),
        (2, {"type": "play", "card": "AC"}),
        (3, {"type": "play", "card": "QH"}),
    ]
    a = begin("partnership", {}, PLAY_HANDS)
    b = begin("partnership", {}, swapped)
    for seat, data in [(None, None), *script]:
        if seat is not None:
            a = apply(a, seat, decode_action(data))[0]
            b = apply(b, seat, decode_action(data))[0]
        va, vb = _views(a), _views(b)
        for role in (0, 1, "spectator"):
            assert va[role] == vb[role], (role, data)
        for role in (2, 3, "adjudicator"):
            assert va[role] != vb[role], (role, data)


@pytest.mark.parametrize(
    "variant", ["partnership", "cutthroat", "double-deck", "partnership-no-bid", "two-handed"]
)
def test_views_from_the_memo_equal_views_built_afresh(variant: str) -> None:
    """The view memoises a hand's unchanging parts (auction, melds, completed tricks) by
    identity: every view of every state of a game played by the demo's bots, for every role,
    is what a build from an empty memo gives, and what the service adds to a view (top-level
    keys) never reaches the memo."""
    from referee.demo import bot_action

    rng = random.Random(5)
    game = Game(resolve_options(variant, {"target": 200}), 0, SeededDeals(f"memo-{variant}"))
    players = game.state.rules.players
    roles: list[int | str] = [*range(players), "spectator", "adjudicator"]
    checked = 0
    for _ in range(400):
        state = game.state
        if state.over or state.hand is None:
            break
        for role in roles:
            memoised = view(state, role)
            memoised["game_id"] = "x"  # what the service adds
            views_module._PARTS.clear()
            fresh = view(state, role)
            assert view(state, role) == fresh  # from the memo just filled
            fresh["game_id"] = "x"
            assert memoised == fresh
            checked += 1
        seats = [(state.hand.turn + i) % players for i in range(players)]
        seat, entries = next((s, e) for s in seats if (e := legal_actions(state, s)))
        game.act(seat, decode_action(bot_action(entries, rng)))
    assert checked > 300


def test_seat_view_holds_its_own_cards_and_the_adjudicator_all() -> None:
    """A.10 item 3: a seat sees its own cards; only the adjudicator sees every hand and the deal."""
    state = p_play()
    for seat in range(4):
        public = hand_view(state, seat)
        assert public["cards"] == format_cards(hand(state).hands[seat])
        assert "hands" not in public and "deal" not in public
    spectator = hand_view(state, "spectator")
    assert "cards" not in spectator and "hands" not in spectator
    adjudicator = hand_view(state, "adjudicator")
    assert adjudicator["hands"] == [format_cards(h) for h in hand(state).hands]
    assert adjudicator["deal"] == hand(state).deal.to_json()
    with pytest.raises(ValueError):
        view(state, 4)


def test_bury_is_seen_by_the_declarer_only() -> None:
    """A.10 item 3: discards (the cutthroat bury) only to the declarer; the count to all."""
    a = act(ct_bury(), 1, "discard", cards=["9D", "9D", "9C"])
    b = act(ct_bury(), 1, "discard", cards=["AD", "9D", "9C"])
    for role in (0, 2, "spectator"):
        assert view(a, role) == view(b, role)
    assert hand_view(a, 1)["discards"] == ["9D", "9D", "9C"]
    assert hand_view(a, 0)["passes"] == [{"seat": 1, "count": 3}]


def test_dealt_cards_are_private_events_and_the_deal_is_revealed_at_the_end() -> None:
    """Events: each seat's cards go to that seat; the deal is sealed until the hand ends."""
    rules = resolve_options("partnership", NO_EXCHANGE)
    deal = make_deal(rules, PLAY_HANDS)
    state, events = start_hand(new_game(rules, 0), deal)
    dealt = [e for e in events if e.kind == "cards_dealt"]
    assert [e.audience for e in dealt] == [0, 1, 2, 3]
    sealed = [e for e in events if e.kind == "deal"]
    assert not visible_to(sealed[0], 0) and visible_to(sealed[0], 0, hand_ended=True)
    assert visible_to(sealed[0], "adjudicator")
    state = win_auction(state, 1)
    state = meld_all(act(state, 1, "declare_trump", suit="H"))
    state, events = step(state, 1, "concede")
    revealed = [e for e in events if e.kind == "deal_revealed"]
    assert revealed[0].audience == "everyone" and revealed[0].data["deal"] == deal.to_json()


def test_equal_events_serialize_equally() -> None:
    """Events are stored, hashed and compared between replays (events.py): the serialization is
    compact JSON with sorted keys, so equal events built in another key order give equal text."""
    a = Event("cards_passed", EVERYONE, {"from": 3, "to": 1, "count": 4})
    b = Event("cards_passed", EVERYONE, {"count": 4, "to": 1, "from": 3})
    assert a == b
    assert a.serialize() == b.serialize()
    assert (
        a.serialize() == '{"audience":"everyone","count":4,"from":3,"kind":"cards_passed","to":1}'
    )


# --------------------------------------------------------------------------------------------
# State values


def test_evolving_a_state_changes_only_the_named_fields() -> None:
    """``evolve_hand`` and ``evolve_game`` build new values by field index (not ``_replace``):
    the copy has the right type and the named fields, the rest and the original are unchanged,
    and a name that is not a field is refused."""
    rules = resolve_options("partnership", {})
    state, _ = start_hand(new_game(rules, 0), SeededDeals("evolve").next_deal(rules, 0, 0))
    old_hand = hand(state)
    new_hand = evolve_hand(old_hand, turn=3, trick_leader=2, scored_melds=((0, "x", (), 0),))
    assert type(new_hand) is HandState
    assert (new_hand.turn, new_hand.trick_leader) == (3, 2)
    assert new_hand.scored_melds == ((0, "x", (), 0),)
    assert new_hand._replace(turn=old_hand.turn, trick_leader=0, scored_melds=()) == old_hand
    assert (old_hand.turn, old_hand.trick_leader, old_hand.scored_melds) == (1, 0, ())
    new_state = evolve_game(state, version=7, over=True)
    assert type(new_state) is GameState
    assert new_state._replace(version=state.version, over=False) == state
    assert (new_state.version, new_state.over, state.version, state.over) == (7, True, 0, False)
    with pytest.raises(ValueError, match="no field 'trun'"):
        evolve_hand(old_hand, trun=1)
    with pytest.raises(ValueError, match="no field 'hand_state'"):
        evolve_game(state, hand_state=None)


# --------------------------------------------------------------------------------------------
# legal_actions agrees with apply


def _candidates(state: GameState) -> list[tuple[int, dict[str, object]]]:
    """A spread of actions for every seat: bids around the window, calls, suits, every card,
    pass/discard sets of the right size and not, meld subsets, concede."""
    h = hand(state)
    rules = state.rules
    out: list[tuple[int, dict[str, object]]] = []
    faces = [format_card(c) for c in range(24)]
    for seat in range(rules.players):
        held = format_cards(h.hands[seat])
        low = (h.high_bid or rules.min_bid) - 30
        out += [(seat, {"type": "bid", "amount": a}) for a in range(max(low, 1), low + 90)]
        out += [
            (seat, {"type": "pass"}),
            (seat, {"type": "pass", "help": True}),
            (seat, {"type": "bid_or_redeal"}),
            (seat, {"type": "concede"}),
            (seat, {"type": "exchange_dix"}),
            (seat, {"type": "draw", "turn_up": True}),
        ]
        out += [(seat, {"type": "declare_trump", "suit": s}) for s in "SHDC"]
        out += [(seat, {"type": "play", "card": c}) for c in faces]
        for kind in ("pass_cards", "discard"):
            for size in (2, 3, 4, 5):
                for combo in itertools.islice(itertools.combinations(held, size), 0, None, 7):
                    out.append((seat, {"type": kind, "cards": list(combo)}))
            out.append((seat, {"type": kind, "cards": ["AS", "AS", "AS", "AS"]}))
        for size in (0, 1, 2, 4):
            for combo in itertools.islice(itertools.combinations(held, size), 0, None, 11):
                out.append((seat, {"type": "meld", "cards": list(combo)}))
        out.append((seat, {"type": "meld", "cards": held}))
        if held:
            out.append((seat, {"type": "meld", "cards": [*held, held[0]]}))
        # Other notations apply accepts (A.3: T for 10, any case), and malformed actions.
        out += [(seat, {"type": "declare_trump", "suit": s}) for s in "shdc"]
        out += [(seat, {"type": "play", "card": c.lower()}) for c in faces]
        out += [(seat, {"type": "play", "card": c.replace("10", "T")}) for c in faces if "10" in c]
        for kind in ("pass_cards", "discard"):
            for size in (3, 4):
                for combo in itertools.islice(itertools.combinations(held, size), 0, None, 13):
                    out.append((seat, {"type": kind, "cards": [c.lower() for c in combo]}))
        out.append((seat, {"type": "meld", "cards": [c.replace("10", "t") for c in held]}))
        out += [
            (seat, {"type": "pass", "help": "yes"}),
            (seat, {"type": "bid", "amount": str(rules.min_bid)}),
            (seat, {"type": "play", "card": "ZZ"}),
            (seat, {"type": "concede", "extra": 1}),
        ]
    return out


LEGALITY_POSITIONS: dict[str, Callable[[], GameState]] = {
    "auction": p_auction,
    "after a bid": p_after_bid,
    "dealer stuck": p_dealer_stuck,
    "trump": p_trump,
    "partner pass": p_partner_pass,
    "meld": p_meld,
    "concession window": p_play,
    "mid-trick": lambda: p_trick(2),
    "trick end": lambda: p_trick(3),
    "double-deck auction": dd_auction,
    "double-deck after bid-or-redeal": lambda: act(dd_auction(), 1, "bid_or_redeal"),
    "double-deck trump": dd_trump,
    "no marriage": dd_no_marriage,
    "kitty discard": dd_kitty,
    "bury": ct_bury,
    "no-bid meld": nb_meld,
    "no-bid after exchange": nb_exchanged,
}


@pytest.mark.parametrize("name", list(LEGALITY_POSITIONS))
def test_legal_actions_match_exactly_what_apply_accepts(name: str) -> None:
    """A.10 item 2: an action is accepted exactly when it matches a legal_actions entry."""
    state = LEGALITY_POSITIONS[name]()
    entries = {seat: legal_actions(state, seat) for seat in range(state.rules.players)}
    accepted_any = False
    for seat, data in _candidates(state):
        listed = any(matches(entry, data) for entry in entries[seat])
        try:
            apply(state, seat, decode_action(data))
            accepted = True
        except IllegalAction:
            accepted = False
        assert accepted == listed, (seat, data)
        accepted_any |= accepted
    assert accepted_any


# --------------------------------------------------------------------------------------------
# Replay, export, audit


def _play_game(variant: str, options: dict[str, object], seed: str, hands: int) -> Game:
    """A game from seeded deals: seat (dealer + 1) declares, the rest by ``auto_action``."""
    rules = resolve_options(variant, options)
    game = Game(rules, 1, SeededDeals(seed))
    for _ in range(hands):
        if game.state.over:
            break
        while game.state.hand is not None:
            h = game.state.hand
            seat = h.turn
            if h.phase == AUCTION and seat == (h.dealer + 1) % rules.players and h.high_bid is None:
                low, _, _ = bid_window(game.state.setup, h)
                data: dict[str, object] = {"type": "bid", "amount": low}
            else:
                seat, data = auto_action(game.state)
            game.act(seat, decode_action(data))
    return game


GAMES = [
    ("partnership", {"target": 600}),
    ("cutthroat", {"target": 600}),
    ("double-deck", {}),
    ("double-deck", {"deck": 48, "exchange_mode": "kitty"}),
    ("partnership-no-bid", {"target": 900}),
    ("partnership", {"meld_declaration": "auto", "all_pass": "redeal"}),
]


@pytest.mark.parametrize(("variant", "options"), GAMES)
def test_replay_export_and_audit_agree_with_the_live_game(variant, options) -> None:
    """The log replays to the live state; the exported record audits as legal with the same
    scores, winner and one verdict hand per hand dealt (GAME_RECORD.md §2)."""
    game = _play_game(variant, options, "replay", hands=4)
    assert replay(game.state.rules, 1, game.log) == game.state
    players = ["a", "b", "c", "d"][: game.state.rules.players]
    record = game.export(players=players)
    record = json.loads(json.dumps(record))  # as a file would hold it
    assert record["players"] == players and "players" not in game.export()
    verdict: dict[str, Any] = audit_record(record, "game.json")
    assert verdict["legal"] is True and verdict["violation"] is None
    assert verdict["scores"] == list(game.state.scores)
    assert verdict["finished"] == game.state.over and verdict["winner"] == game.state.winner
    assert verdict["claims"] == []
    dealt = sum(1 for entry in game.log if entry.deal is not None)
    assert len(verdict["hands"]) == dealt
    assert verdict["actions_checked"] == sum(1 for entry in game.log if entry.deal is None)
    deltas = [h["delta"] for h in verdict["hands"][: game.state.hands_completed]]
    assert [sum(col) for col in zip(*deltas, strict=True)] == list(game.state.scores) or not deltas


def test_encode_action_gives_the_canonical_a4_form() -> None:
    """A.4: the record holds each action in its JSON form, optional fields only when set (a
    plain pass has no ``help``, which is a partnership-only field), and decoding it gives the
    action back."""
    forms: list[dict[str, object]] = [
        {"type": "pass"},
        {"type": "pass", "help": True},
        {"type": "bid", "amount": 250},
        {"type": "meld", "cards": ["KS", "QS"]},
        {
            "type": "meld",
            "cards": ["KS", "QS"],
            "melds": [{"name": "marriage", "cards": ["KS", "QS"]}],
            "points": 20,
        },
        {"type": "meld", "name": "dix", "cards": ["9H"], "points": 10},
        {"type": "draw", "turn_up": False},
    ]
    for form in forms:
        assert encode_action(decode_action(form)) == form
    assert encode_action(decode_action({"type": "pass", "help": False})) == {"type": "pass"}


@pytest.mark.parametrize(
    ("given", "absent"),
    [
        ({"type": "pass", "help": None}, {"type": "pass"}),
        (
            {"type": "meld", "cards": ["KS", "QS"], "melds": None, "points": None, "name": None},
            {"type": "meld", "cards": ["KS", "QS"]},
        ),
    ],
)
def test_an_optional_field_given_as_null_is_left_out(
    given: dict[str, object], absent: dict[str, object]
) -> None:
    """Ruling (A.4 is silent): every optional field given as null reads as left out; ``help``
    was the one refused as MALFORMED_ACTION while a meld's ``melds``, ``points`` and ``name``
    were read as absent. A required field is never optional: ``cards: null`` is malformed."""
    assert decode_action(given) == decode_action(absent)
    with pytest.raises(IllegalAction) as caught:
        decode_action({"type": "meld", "cards": None})
    assert (caught.value.code, caught.value.field) == ("MALFORMED_ACTION", "cards")


@pytest.mark.parametrize("seat", [True, False, -1, 4, "1", 1.0, None])
def test_apply_refuses_a_seat_that_is_not_one_at_the_table(seat: object) -> None:
    """A.5: a seat outside the table (a bool, another type, out of range) is MALFORMED_ACTION
    before any other check, here before NOT_YOUR_TURN; the state is untouched."""
    game = Game(resolve_options("partnership", {}), dealer=0, deals=SeededDeals("seats"))
    before = game.state
    with pytest.raises(IllegalAction) as caught:
        apply(before, seat, decode_action({"type": "pass"}))
    assert (caught.value.code, caught.value.field) == ("MALFORMED_ACTION", "seat")
    assert game.state is before


def test_apply_takes_an_int_subclass_as_a_seat() -> None:
    """Only bool among int's subclasses is refused: an ``IntEnum`` seat is its number."""

    class Seat(enum.IntEnum):
        FIRST = 1

    game = Game(resolve_options("partnership", {}), dealer=0, deals=SeededDeals("seats"))
    state, events = apply(game.state, Seat.FIRST, decode_action({"type": "pass"}))
    assert [e.kind for e in events][:1] == ["call"] and state.version == game.state.version + 1


def test_a_seat_key_is_read_only_where_the_caller_says_actions_carry_one() -> None:
    """A recorded action carries its seat beside its fields; the audit decodes it in place
    (``seat_key=True``) instead of copying it without the seat. Anywhere else ``seat`` is an
    extra field, and a ``seat_key`` allows no other extra field."""
    assert decode_action({"type": "play", "seat": 2, "card": "AS"}, seat_key=True) == (
        decode_action({"type": "play", "card": "AS"})
    )
    with pytest.raises(IllegalAction) as caught:
        decode_action({"type": "play", "seat": 2, "card": "AS"})
    assert (caught.value.code, caught.value.field) == ("MALFORMED_ACTION", "seat")
    with pytest.raises(IllegalAction) as caught:
        decode_action({"type": "play", "seat": 2, "card": "AS", "suit": "H"}, seat_key=True)
    assert (caught.value.code, caught.value.field) == ("MALFORMED_ACTION", "suit")


@pytest.mark.parametrize(
    ("data", "seat_key", "field"),
    [
        ({"type": "play", "card": 5}, False, "card"),
        ({"type": "play", "card": "ZZ"}, False, "card"),
        ({"type": "play", "cards": "AS"}, False, "cards"),
        ({"type": "play", "card": "AS", "seat": 1}, False, "seat"),
        ({"type": "play", "card": "AS", "suit": "H"}, True, "suit"),
        ({"type": "play", "seat": 1, "cards": ["AS"]}, True, "cards"),
        ({"type": "play", "seat": 1}, True, "card"),
        ({"type": "Play", "card": "AS"}, False, "type"),
    ],
)
def test_a_play_of_any_other_shape_is_malformed_naming_the_field(
    data: dict[str, object], seat_key: bool, field: str
) -> None:
    """A card play is decoded on a fast path only in its exact shape (type and card, and the
    record's seat); every other shape gets the general path's MALFORMED_ACTION and field."""
    with pytest.raises(IllegalAction) as caught:
        decode_action(data, seat_key=seat_key)
    assert (caught.value.code, caught.value.field) == ("MALFORMED_ACTION", field)


def test_the_game_keeps_every_event_once() -> None:
    """``Game.events`` is the deal's events then each accepted action's, each exactly once, as
    ``act`` returned them (the next deal included)."""
    rules = resolve_options("partnership", {**NO_EXCHANGE, "all_pass": "redeal"})
    game = Game(rules, 0, SeededDeals("events-once"))
    seen = list(game.events)
    assert seen[0].kind == "hand_started"
    for seat in (1, 2, 3, 0):  # all pass: a redeal, and the next hand is dealt
        seen += game.act(seat, decode_action({"type": "pass"}))
    assert game.events == seen
    assert [e.kind for e in seen].count("hand_started") == 2


def test_a_game_played_to_the_end_audits_as_finished() -> None:
    """A whole partnership game to a low target: finished, with the same winner on audit."""
    game = _play_game("partnership", {"target": 300}, "end", hands=50)
    assert game.state.over and game.state.winner is not None
    verdict = audit_record(game.export())
    assert verdict["finished"] is True and verdict["winner"] == game.state.winner
    assert verdict["legal"] is True
