"""A.5 precedence where several rules are broken at once, in every variant, and the two-handed
half of A.10 item 2 that ``tests/test_two_handed.py`` leaves out (unlisted actions refused).

Each table row names the A.5 codes its action earns and the position it is sent in; the code
reported must be the earliest of them in A.5's order (``VIOLATION_CODES``), and nothing may
change. The audit must answer an action after its hand's end as ``apply`` does.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.audit import audit_record
from referee.engine.actions import decode_action
from referee.engine.engine import apply, legal_actions, matches, new_game
from referee.engine.errors import VIOLATION_CODES, IllegalAction
from referee.engine.game import Game, SeededDeals
from referee.engine.state import GameState
from referee.rules.cards import SUITS, format_card, format_cards
from referee.rules.melds import MELD_NAMES, single_sets
from referee.rules.options import resolve_options
from tests.test_two_handed import HOYLE, choose, v_playoff, v_seat1_window, v_start, v_window
from tests.test_violations import (
    act,
    ct_bury,
    dd_auction,
    dd_kitty,
    dd_schedule,
    dd_trump,
    nb_exchanged,
    nb_meld,
    nb_seat,
    p_auction,
    p_meld,
    p_over,
    p_partner_pass,
    p_passed_out,
    p_play,
    p_trick,
    p_trump,
    refuse_json,
)

# --------------------------------------------------------------------------------------------
# Helpers


def not_held(state: GameState, seat: int, suit: str | None = None) -> str:
    """A card (of ``suit``, if given) that ``seat`` holds neither in hand nor on its table."""
    hand = state.hand
    assert hand is not None
    held = set(hand.hands[seat])
    if hand.table:
        held |= {pid >> 1 for pid, _ in hand.table[seat]}
    for card in range(24):
        text = format_card(card)
        if card not in held and (suit is None or text.endswith(suit)):
            return text
    raise AssertionError(f"seat {seat} holds every card of {suit}")


def held(state: GameState, seat: int) -> list[str]:
    hand = state.hand
    assert hand is not None
    return format_cards(hand.hands[seat])


def p_stuck_no_help() -> GameState:
    state = p_auction(allow_pass_with_help=False)
    for seat in (1, 2, 3):
        state = act(state, seat, "pass")
    return state


def _turn(state: GameState) -> int:
    assert state.hand is not None
    return state.hand.turn


def _nb_dealer_after_exchange() -> GameState:
    """No-bid: seat 1 exchanged its 9H for the turned AH; seats 1-3 melded nothing; the
    dealer, who took the 9H, to meld."""
    state = nb_exchanged()
    while state.hand is not None and state.hand.turn != 0:
        state = act(state, state.hand.turn, "meld", cards=[])
    return state


def _playoff_follower() -> GameState:
    """Two-handed play-off: the leader has led a card of a suit the follower holds."""
    state = v_playoff()
    hand = state.hand
    assert hand is not None
    follower = 1 - hand.turn
    suits = {c // 6 for c in hand.hands[follower]}
    lead = next(c for c in hand.hands[hand.turn] if c // 6 in suits)
    return act(state, hand.turn, "play", card=format_card(lead))


def _offsuit_not_held(state: GameState) -> str:
    hand = state.hand
    assert hand is not None and hand.trick
    led = hand.trick[0] // 6
    for card in range(24):
        if card // 6 != led and card not in hand.hands[hand.turn]:
            return format_card(card)
    raise AssertionError("no such card")


# --------------------------------------------------------------------------------------------
# The table: (position, seat, action, the codes that apply)

Action = Callable[[GameState], dict[str, object]]


@dataclass(frozen=True)
class Row:
    name: str
    position: Callable[[], GameState]
    seat: int
    action: Action
    applies: frozenset[str]


def _r(
    name: str, position: Callable[[], GameState], seat: int, action: Action, *applies: str
) -> Row:
    assert all(code in VIOLATION_CODES for code in applies), applies
    assert len(applies) >= 2, "a precedence row breaks two rules or more"
    return Row(name, position, seat, action, frozenset(applies))


def fixed(**action: object) -> Action:
    return lambda _state: dict(action)


ROWS = [
    # partnership
    _r(
        "partnership: meld name in the auction",
        p_auction,
        1,
        fixed(type="meld", name="marriage", cards=["KC", "QC"]),
        "MALFORMED_ACTION",
        "WRONG_PHASE",
    ),
    _r(
        "partnership: passed-out seat bids too low",
        p_passed_out,
        1,
        fixed(type="bid", amount=100),
        "NOT_YOUR_TURN",
        "BID_TOO_LOW",
        "BID_BAD_RAISE",
    ),
    _r(
        "partnership: stuck dealer passes with help not allowed",
        p_stuck_no_help,
        0,
        fixed(type="pass", help=True),
        "MALFORMED_ACTION",
        "DEALER_MUST_BID",
    ),
    _r(
        "partnership: bid in the trump phase, too low",
        p_trump,
        1,
        fixed(type="bid", amount=10),
        "WRONG_PHASE",
        "BID_TOO_LOW",
    ),
    _r(
        "partnership: declare trump out of turn",
        p_trump,
        2,
        fixed(type="declare_trump", suit="H"),
        "NOT_YOUR_TURN",
        "WRONG_PHASE",
    ),
    _r(
        "partnership: the declarer passes first, a card not held, wrong count",
        p_partner_pass,
        1,
        lambda s: {"type": "pass_cards", "cards": [not_held(s, 1)]},
        "NOT_YOUR_TURN",
        "CARD_NOT_IN_HAND",
        "WRONG_CARD_COUNT",
    ),
    _r(
        "partnership: discard in the pass, a card not held",
        p_partner_pass,
        3,
        lambda s: {"type": "discard", "cards": [not_held(s, 3)]},
        "WRONG_PHASE",
        "CARD_NOT_IN_HAND",
    ),
    _r(
        "partnership: a card not held that would not follow suit",
        lambda: p_trick(1),
        2,
        lambda s: {"type": "play", "card": not_held(s, 2, "S")},
        "CARD_NOT_IN_HAND",
        "MUST_FOLLOW_SUIT",
    ),
    _r(
        "partnership: meld in play, a card not held",
        p_play,
        1,
        lambda s: {"type": "meld", "cards": [not_held(s, 1)]},
        "WRONG_PHASE",
        "CARD_NOT_IN_HAND",
    ),
    _r(
        "partnership: a card not held with a miscount",
        p_meld,
        1,
        lambda s: {"type": "meld", "cards": [not_held(s, 1)], "points": 999},
        "CARD_NOT_IN_HAND",
        "MELD_MISCOUNT",
    ),
    _r(
        "partnership: game over, out of turn, a card not held",
        p_over,
        2,
        lambda s: {"type": "play", "card": "9S"},
        "GAME_OVER",
        "NOT_YOUR_TURN",
    ),
    _r(
        "partnership: game over, a meld with name",
        p_over,
        1,
        fixed(type="meld", name="dix", cards=["9H"]),
        "MALFORMED_ACTION",
        "GAME_OVER",
    ),
    # double-deck
    _r(
        "double-deck: trump without marriage, out of turn",
        dd_trump,
        2,
        fixed(type="declare_trump", suit="H"),
        "NOT_YOUR_TURN",
        "TRUMP_NEEDS_MARRIAGE",
    ),
    _r(
        "double-deck: bid-or-redeal not allowed, out of turn",
        lambda: act(dd_auction(allow_bid_or_redeal=True), 1, "bid", amount=50),
        3,
        fixed(type="bid_or_redeal"),
        "NOT_YOUR_TURN",
        "BID_OR_REDEAL_NOT_ALLOWED",
    ),
    _r(
        "double-deck: schedule, too low and off the step",
        lambda: act(dd_schedule(), 1, "bid", amount=60),
        2,
        fixed(type="bid", amount=59),
        "BID_TOO_LOW",
        "BID_BAD_RAISE",
    ),
    _r(
        "double-deck: kitty discard by another seat, wrong count",
        dd_kitty,
        2,
        fixed(type="discard", cards=["JD"]),
        "NOT_YOUR_TURN",
        "WRONG_CARD_COUNT",
    ),
    _r(
        "double-deck: kitty discard, a card not held, wrong count",
        dd_kitty,
        1,
        lambda s: {"type": "discard", "cards": [not_held(s, 1), *held(s, 1)[:4]]},
        "CARD_NOT_IN_HAND",
        "WRONG_CARD_COUNT",
    ),
    _r(
        "double-deck: pass_cards in the kitty discard, wrong count",
        dd_kitty,
        1,
        fixed(type="pass_cards", cards=["JD"]),
        "WRONG_PHASE",
        "WRONG_CARD_COUNT",
    ),
    _r(
        "double-deck: help where not allowed, wrong phase",
        dd_kitty,
        1,
        fixed(type="pass", help=True),
        "MALFORMED_ACTION",
        "WRONG_PHASE",
    ),
    # cutthroat
    _r(
        "cutthroat: bury by another seat, a shown card",
        ct_bury,
        2,
        fixed(type="discard", cards=["KS", "9D", "9D"]),
        "NOT_YOUR_TURN",
        "CANNOT_BURY_MELD",
    ),
    _r(
        "cutthroat: bury a card not held, a shown card, wrong count",
        ct_bury,
        1,
        lambda s: {"type": "discard", "cards": ["KS", not_held(s, 1)]},
        "CARD_NOT_IN_HAND",
        "WRONG_CARD_COUNT",
        "CANNOT_BURY_MELD",
    ),
    _r(
        "cutthroat: bury a shown card, wrong count",
        ct_bury,
        1,
        fixed(type="discard", cards=["KS", "QS", "9D", "9D"]),
        "WRONG_CARD_COUNT",
        "CANNOT_BURY_MELD",
    ),
    _r(
        "cutthroat: play during the bury, a card not held",
        ct_bury,
        1,
        lambda s: {"type": "play", "card": not_held(s, 1)},
        "WRONG_PHASE",
        "CARD_NOT_IN_HAND",
    ),
    # partnership-no-bid
    _r(
        "no-bid: bid out of turn",
        nb_meld,
        2,
        fixed(type="bid", amount=10),
        "NOT_YOUR_TURN",
        "WRONG_PHASE",
    ),
    _r(
        "no-bid: the dealer exchanges out of turn",
        nb_meld,
        0,
        fixed(type="exchange_dix"),
        "NOT_YOUR_TURN",
        "DIX_EXCHANGE_NOT_ALLOWED",
    ),
    _r(
        "no-bid: help where not allowed, out of turn",
        nb_meld,
        3,
        fixed(type="pass", help=True),
        "MALFORMED_ACTION",
        "NOT_YOUR_TURN",
    ),
    _r(
        "no-bid: a card not held, invalid meld, miscount",
        nb_exchanged,
        1,
        lambda s: {
            "type": "meld",
            "cards": [not_held(s, 1)],
            "melds": [{"name": "run", "cards": [not_held(s, 1)]}],
            "points": 7,
        },
        "CARD_NOT_IN_HAND",
        "INVALID_MELD",
        "MELD_MISCOUNT",
    ),
    _r(
        "no-bid: the dealer's received 9 declared, with a miscount",
        _nb_dealer_after_exchange,
        0,
        fixed(type="meld", cards=["9H"], melds=[{"name": "dix", "cards": ["9H"]}], points=99),
        "INVALID_MELD",
        "MELD_MISCOUNT",
    ),
    _r(
        "no-bid: a second exchange with an extra field",
        nb_exchanged,
        1,
        fixed(type="exchange_dix", suit="H"),
        "MALFORMED_ACTION",
        "DIX_EXCHANGE_NOT_ALLOWED",
    ),
    _r(
        "no-bid: concede out of turn",
        lambda: nb_seat(2),
        1,
        fixed(type="concede"),
        "WRONG_PHASE",
        "CONCEDE_NOT_ALLOWED",
    ),
    # two-handed
    _r(
        "two-handed: meld before the first trick, a card not held",
        v_start,
        0,
        lambda s: {"type": "meld", "name": "pinochle", "cards": ["QS", not_held(s, 0)]},
        "CARD_NOT_IN_HAND",
        "MELD_NOT_ALLOWED",
        "INVALID_MELD",
    ),
    _r(
        "two-handed: the loser melds an invalid set",
        v_window,
        1,
        fixed(type="meld", name="run", cards=["KC", "QC"]),
        "MELD_NOT_ALLOWED",
        "INVALID_MELD",
    ),
    _r(
        "two-handed: the winner's invalid set with a miscount",
        v_window,
        0,
        fixed(type="meld", name="run", cards=["KS", "QS"], points=999),
        "INVALID_MELD",
        "MELD_MISCOUNT",
    ),
    _r(
        "two-handed: a second meld of the window, a miscount",
        v_seat1_window,
        1,
        fixed(type="meld", name="marriage", cards=["KC", "QC"], points=1),
        "MELD_NOT_ALLOWED",
        "MELD_CARD_REUSED",
        "MELD_MISCOUNT",
    ),
    _r(
        "two-handed: a meld without name, by the loser",
        v_window,
        1,
        fixed(type="meld", cards=["KC", "QC"]),
        "MALFORMED_ACTION",
        "MELD_NOT_ALLOWED",
    ),
    _r(
        "two-handed: the loser plays a card not held in the window",
        v_window,
        1,
        lambda s: {"type": "play", "card": not_held(s, 1)},
        "NOT_YOUR_TURN",
        "CARD_NOT_IN_HAND",
    ),
    _r(
        "two-handed: the loser bids",
        v_window,
        1,
        fixed(type="bid", amount=10),
        "NOT_YOUR_TURN",
        "WRONG_PHASE",
    ),
    _r(
        "two-handed: help, out of turn",
        v_window,
        1,
        fixed(type="pass", help=True),
        "MALFORMED_ACTION",
        "NOT_YOUR_TURN",
    ),
    _r(
        "two-handed: draw by the loser outside winner_chooses",
        v_window,
        1,
        fixed(type="draw", turn_up=True),
        "NOT_YOUR_TURN",
        "WRONG_PHASE",
    ),
    _r(
        "two-handed: play-off, a card not held that would not follow",
        _playoff_follower,
        -1,
        lambda s: {"type": "play", "card": _offsuit_not_held(s)},
        "CARD_NOT_IN_HAND",
        "MUST_FOLLOW_SUIT",
    ),
    _r(
        "two-handed: meld in the play-off with a card not held",
        v_playoff,
        -1,
        lambda s: {"type": "meld", "name": "dix", "cards": [not_held(s, _turn(s))]},
        "CARD_NOT_IN_HAND",
        "MELD_NOT_ALLOWED",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_the_earliest_applicable_code_is_reported(row: Row) -> None:
    state = row.position()
    seat = _turn(state) if row.seat < 0 else row.seat
    action = row.action(state)
    error = refuse_json(state, seat, action)
    expected = min(row.applies, key=VIOLATION_CODES.index)
    assert error.code == expected, (action, error.message)


def test_the_rows_cover_every_variant() -> None:
    seen = {row.name.split(":")[0] for row in ROWS}
    assert seen == {"partnership", "double-deck", "cutthroat", "no-bid", "two-handed"}


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


# --------------------------------------------------------------------------------------------
# Two-handed: an unlisted action is refused (A.10 item 2, both directions)


def two_handed_candidates(state: GameState) -> list[tuple[int, dict[str, object]]]:
    """Every card played by either seat, every one-set meld of every suit (with the right and
    a wrong claim, another name, a card short, a card more), and every other action type."""
    table = state.setup.meld_table
    out: list[tuple[int, dict[str, object]]] = []
    faces = [format_card(c) for c in range(24)]
    for seat in (0, 1):
        out += [(seat, {"type": "play", "card": c}) for c in faces]
        for suit in SUITS:
            for name, cards in single_sets(suit):
                shown = format_cards(cards)
                out += [
                    (seat, {"type": "meld", "name": name, "cards": shown}),
                    (seat, {"type": "meld", "name": name, "cards": shown[::-1]}),
                    (
                        seat,
                        {
                            "type": "meld",
                            "name": name,
                            "cards": shown,
                            "points": table.value(name, 1),
                        },
                    ),
                    (seat, {"type": "meld", "name": name, "cards": shown, "points": 1}),
                    (seat, {"type": "meld", "name": name, "cards": shown[:-1]}),
                    (seat, {"type": "meld", "name": name, "cards": [*shown, "AS"]}),
                ]
                others = [other for other in MELD_NAMES if other != name][:3]
                for other in others:
                    out.append((seat, {"type": "meld", "name": other, "cards": shown}))
        out += [
            (seat, {"type": "exchange_dix"}),
            (seat, {"type": "draw", "turn_up": True}),
            (seat, {"type": "draw", "turn_up": False}),
            (seat, {"type": "concede"}),
            (seat, {"type": "pass"}),
            (seat, {"type": "bid", "amount": 250}),
            (seat, {"type": "bid_or_redeal"}),
            (seat, {"type": "declare_trump", "suit": "H"}),
            (seat, {"type": "discard", "cards": []}),
            (seat, {"type": "pass_cards", "cards": []}),
            (seat, {"type": "meld", "name": "flush", "cards": ["AS"]}),
        ]
    return out


def check_two_handed_state(state: GameState) -> None:
    listed = {seat: legal_actions(state, seat) for seat in (0, 1)}
    for seat, action in two_handed_candidates(state):
        entries = listed[seat]
        matched = any(matches(e, action) for e in entries if not e.get("drawn_card"))
        drawn = any(e.get("drawn_card") for e in entries)
        try:
            apply(state, seat, decode_action(action))
        except IllegalAction as error:
            assert not matched, f"seat {seat} {action} is listed but refused: {error.to_json()}"
        else:
            # The drawn-card entry stands for a card nobody may name yet: any lead may be it.
            assert matched or (drawn and action["type"] == "play"), (
                f"seat {seat} {action} is not listed but was accepted"
            )


@st.composite
def two_handed_options(draw: st.DrawFn) -> dict[str, Any]:
    options: dict[str, Any] = {"target": 500}
    choices: dict[str, st.SearchStrategy[Any]] = {
        "new_card_required": st.booleans(),
        "deferred_meld_scoring": st.booleans(),
        "dix_scores_when_played": st.booleans(),
        "last_draw": st.sampled_from(["winner_facedown", "winner_chooses"]),
        "head_rule": st.sampled_from(["always", "trump_lead_only", "never"]),
        "must_trump_when_void": st.booleans(),
        "meld_values": st.sampled_from([{"pinochle": [50]}, {"dix": [20]}]),
    }
    for name, values in choices.items():
        if draw(st.booleans()):
            options[name] = draw(values)
    if draw(st.booleans()):
        options |= HOYLE
    return options


@given(two_handed_options(), st.integers(0, 10**9), st.integers(0, 10**9))
@settings(max_examples=25, deadline=None)
def test_two_handed_unlisted_actions_are_refused(
    options: dict[str, Any], seed: int, rng_seed: int
) -> None:
    """Over a whole hand (the windows, the last draw's choice, the play-off), every action
    either seat could send is accepted exactly when a listed entry matches it."""
    game = Game(
        resolve_options("two-handed", options), dealer=seed % 2, deals=SeededDeals(str(seed))
    )
    rng = random.Random(rng_seed)
    while not game.state.over and game.state.hands_completed == 0:
        hand = game.state.hand
        window = hand is not None and hand.window_seat is not None
        if rng.random() < (0.5 if window else 0.2):
            check_two_handed_state(game.state)
        seat, action = choose(game.state, rng)
        game.act(seat, decode_action(action))
