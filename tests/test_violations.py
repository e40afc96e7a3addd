"""Every A.5 violation code the bidding variants can raise, through ``apply`` (RULES.md A.5, A.7).

Each case builds an exact position from an explicit deal, sends one action and checks three things:
the code is the one A.5 names (the first that applies, in A.5 order), the old state is unchanged
(it still equals a copy taken before), and the message names the seat without quoting another
seat's concealed cards. The helpers at the top (explicit deals, driving a hand to a phase) are
shared with ``test_engine.py`` and ``test_audit.py``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import apply, bid_window, legal_actions, new_game, start_hand
from referee.engine.errors import VIOLATION_CODES, IllegalAction
from referee.engine.state import AUCTION, MELD, PLAY, GameState
from referee.rules.cards import Card, canonical_deck, format_card, parse_card
from referee.rules.dealing import Deal
from referee.rules.options import RuleSet, resolve_options

# --------------------------------------------------------------------------------------------
# Helpers: explicit deals and driving a hand


def cards(text: str) -> tuple[Card, ...]:
    """``"AS 10S QH"`` -> card ints."""
    return tuple(parse_card(token) for token in text.split())


def make_deal(
    rules: RuleSet, hands: Sequence[str], widow: str = "", turn_up: str | None = None
) -> Deal:
    """A whole deck dealt as given; a seat (or the widow) given fewer cards than it needs is
    filled from the rest of the deck in canonical order, so the cards that matter are exact."""
    given = [list(cards(h)) for h in hands]
    given += [[] for _ in range(rules.players - len(given))]
    rest_widow = list(cards(widow))
    rest = list(canonical_deck(rules.deck))
    for card in [c for h in given for c in h] + rest_widow:
        rest.remove(card)  # ValueError: more copies given than the deck has
    for held in given:
        while len(held) < rules.hand_size:
            held.append(rest.pop(0))
    while len(rest_widow) < rules.widow_size:
        rest_widow.append(rest.pop(0))
    assert not rest, "more cards than the deal has room for"
    return Deal(
        tuple(tuple(sorted(h)) for h in given),
        tuple(rest_widow),
        (),
        None if turn_up is None else parse_card(turn_up),
    )


def begin(
    variant: str,
    options: dict[str, object] | None = None,
    hands: Sequence[str] = (),
    widow: str = "",
    turn_up: str | None = None,
    dealer: int = 0,
) -> GameState:
    """A new game with its first hand dealt exactly as given."""
    rules = resolve_options(variant, options or {})
    state = new_game(rules, dealer)
    state, _ = start_hand(state, make_deal(rules, hands, widow, turn_up))
    return state


def act(state: GameState, seat: int, kind: str, **fields: object) -> GameState:
    """Apply one action given in its JSON form (A.4); it must be accepted."""
    return apply(state, seat, decode_action({"type": kind, **fields}))[0]


def snapshot(state: GameState) -> GameState:
    """A deep copy of everything an action could change (the per-game ``setup`` is immutable
    rule objects, shared)."""
    return state._replace(hand=copy.deepcopy(state.hand))


def refuse_json(state: GameState, seat: int, data: object) -> IllegalAction:
    """Send an action (JSON form) that must be refused; check that nothing changed."""
    before = snapshot(state)
    with pytest.raises(IllegalAction) as info:
        apply(state, seat, decode_action(data))
    assert state == before
    return info.value


def refuse(state: GameState, seat: int, kind: str, **fields: object) -> IllegalAction:
    return refuse_json(state, seat, {"type": kind, **fields})


def win_auction(state: GameState, declarer: int, amount: int | None = None) -> GameState:
    """``declarer`` bids (the lowest legal bid, or ``amount``) and every other seat passes."""
    while state.hand is not None and state.hand.phase == AUCTION:
        hand = state.hand
        seat = hand.turn
        if seat == declarer and hand.high_bidder != declarer:
            low, _, _ = bid_window(state.setup, hand)
            state = act(state, seat, "bid", amount=amount or low)
        else:
            state = act(state, seat, "pass")
    return state


def meld_all(state: GameState, shown: dict[int, str] | None = None) -> GameState:
    """Every seat melds in turn, showing ``shown[seat]`` (nothing by default)."""
    shown = shown or {}
    while state.hand is not None and state.hand.phase == MELD:
        seat = state.hand.turn
        state = act(state, seat, "meld", cards=shown.get(seat, "").split())
    return state


def auto_action(state: GameState) -> tuple[int, dict[str, object]]:
    """A simple legal choice for the seat to act: pass when possible, else the lowest bid, the
    first suit, the first cards of a pass or discard, the whole hand as meld, the first card."""
    assert state.hand is not None
    seat = state.hand.turn
    entries = legal_actions(state, seat)
    for entry in entries:
        if entry == {"type": "pass"}:
            return seat, entry
    entry = entries[0]
    kind = entry["type"]
    if kind == "bid":
        return seat, {"type": "bid", "amount": entry["min"]}
    if kind in ("pass_cards", "discard"):
        source = entry["from"]
        count = entry["count"]
        assert isinstance(source, list) and isinstance(count, int)
        return seat, {"type": kind, "cards": source[:count]}
    if kind == "meld":
        return seat, {"type": "meld", "cards": entry["from"]}
    return seat, dict(entry)


def auto_until(state: GameState, stop: Callable[[GameState], bool]) -> GameState:
    """Take ``auto_action`` steps until ``stop(state)``."""
    for _ in range(2000):
        if stop(state):
            return state
        seat, data = auto_action(state)
        state = apply(state, seat, decode_action(data))[0]
    raise AssertionError("the hand did not reach the wanted point")


def hand_over(state: GameState) -> bool:
    return state.hand is None


# --------------------------------------------------------------------------------------------
# Positions

# Partnership, dealer 0, hearts will be trump. Seats 0 and 3 hold no clubs; seat 2 holds the
# clubs that beat a 10C lead; seat 3 holds only QH in trump, seat 0 KH and JH.
PLAY_HANDS = (
    "KH KH JH JH KD KD QD QD JD JD 9D 9D",
    "10C 10C KC KC QC QC AH AH 10H 10H 9H 9H",
    "AC AC JC JC 9C 9C AS AS 10S 10S KS KS",
    "QH QH QS QS JS JS 9S 9S AD AD 10D 10D",
)
NO_EXCHANGE = {"exchange_count": 0}


@cache
def p_auction(**options: object) -> GameState:
    """Partnership, first call: seat 1 to act."""
    return begin("partnership", dict(options), PLAY_HANDS)


@cache
def p_after_bid() -> GameState:
    """Seat 1 opened 250; seat 2 to act."""
    return act(p_auction(), 1, "bid", amount=250)


@cache
def p_passed_out() -> GameState:
    """Seat 1 passed, seats 2 and 3 bid, seat 0 passed: seat 2 to act, seat 1 is out."""
    state = act(p_auction(), 1, "pass")
    state = act(state, 2, "bid", amount=250)
    state = act(state, 3, "bid", amount=260)
    return act(state, 0, "pass")


@cache
def p_dealer_stuck() -> GameState:
    """Seats 1-3 passed with no bid (all_pass: dealer_stuck): the dealer, seat 0, to act."""
    state = p_auction()
    for seat in (1, 2, 3):
        state = act(state, seat, "pass")
    return state


@cache
def p_trump() -> GameState:
    """Seat 1 won the auction at 250 (partner exchange of 4): seat 1 to name trump."""
    return win_auction(p_auction(), 1)


@cache
def p_partner_pass() -> GameState:
    """Hearts named: seat 3 (the declarer's partner) passes first."""
    return act(p_trump(), 1, "declare_trump", suit="H")


@cache
def p_meld() -> GameState:
    """No exchange (exchange_count 0), hearts trump: seat 1, the declarer, melds first."""
    state = win_auction(p_auction(**NO_EXCHANGE), 1)
    return act(state, 1, "declare_trump", suit="H")


@cache
def p_meld_seat2() -> GameState:
    """The declarer has melded; seat 2 to meld."""
    return act(p_meld(), 1, "meld", cards=[])


@cache
def p_play() -> GameState:
    """Everyone has melded nothing: the concession window; seat 1 to lead."""
    return meld_all(p_meld())


@cache
def p_trick(cards_played: int) -> GameState:
    """The first trick after seat 1 led 10C, seat 2 played AC and seat 3 trumped with QH."""
    state = p_play()
    for seat, card in list(zip((1, 2, 3), ("10C", "AC", "QH"), strict=True))[:cards_played]:
        state = act(state, seat, "play", card=card)
    return state


@cache
def p_over(**options: object) -> GameState:
    """Target 10: seat 1 concedes, seat 0's marriage (20) ends the game for team 0."""
    state = win_auction(p_auction(target=10, **NO_EXCHANGE, **options), 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {0: "KD QD"})
    state = act(state, 1, "concede")
    assert state.over and state.winner == 0
    return state


@cache
def dd_auction(**options: object) -> GameState:
    """Double-deck (80 cards), first call: seat 1 to act."""
    return begin("double-deck", dict(options))


@cache
def dd_trump() -> GameState:
    """Double-deck: seat 1 holds a spade marriage and no heart king; seat 1 to name trump."""
    state = begin("double-deck", {}, ("", "KS QS AS AS AS AS AH AH AH AH AD AD AD AD AC AC AC AC"))
    return win_auction(state, 1)


@cache
def dd_no_marriage() -> GameState:
    """Double-deck: the declarer (seat 1) holds K-Q in no suit, bid 60."""
    aces = "AS AS AS AS AH AH AH AH AD AD AD AD AC AC AC AC"
    state = begin("double-deck", {}, ("", aces + " 10S 10S 10S 10S"))
    return win_auction(state, 1, 60)


@cache
def dd_kitty() -> GameState:
    """Double-deck, kitty mode: seat 1 took the kitty (23 cards) and named spades; discards."""
    state = begin(
        "double-deck", {"exchange_mode": "kitty"}, ("", "KS QS AS 10S KD"), widow="JD JD JD JD"
    )
    state = win_auction(state, 1)
    return act(state, 1, "declare_trump", suit="S")


SCHEDULE = [[50, 1], [60, 5], [100, 10]]


@cache
def dd_schedule() -> GameState:
    """Double-deck with the traditional schedule: +1 from 50, +5 from 60, +10 from 100."""
    return begin("double-deck", {"bid_schedule": SCHEDULE})


CT_DECLARER = "KS QS AH AH 10H 10H KH QH JH 9H AC AC 10C 10C AD"


@cache
def ct_bury() -> GameState:
    """Cutthroat: seat 1 won at 300, took the widow, named hearts and showed KS QS only."""
    state = begin("cutthroat", {}, ("", CT_DECLARER), widow="9D 9D 9C")
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    return meld_all(state, {1: "KS QS"})


NB_HANDS = (
    "AH 9S 9S 9D 9D 9C 9C JS JS JH JD JD",  # dealer: AH is its last card, turned for trump
    "9H AS AS 10S 10S KS KS QS QS JC JC QC",
    "9H AD AD 10D 10D KD KD QD QD KC KC QC",
)


@cache
def nb_meld(turn_up: str = "AH") -> GameState:
    """Partnership-no-bid, dealer 0, AH turned: seat 1 (the dealer's left) melds first; seats 1
    and 2 each hold a 9H."""
    hands = NB_HANDS if turn_up == "AH" else (NB_HANDS[0].replace("AH", "9H"), NB_HANDS[1])
    return begin("partnership-no-bid", {}, hands, turn_up=turn_up)


@cache
def nb_exchanged() -> GameState:
    """Seat 1 has exchanged its 9H for the turned AH and not yet melded."""
    return act(nb_meld(), 1, "exchange_dix")


@cache
def nb_seat(seat: int) -> GameState:
    """No exchange made; the seats before ``seat`` melded nothing; ``seat`` to meld."""
    state = nb_meld()
    while state.hand is not None and state.hand.turn != seat:
        state = act(state, state.hand.turn, "meld", cards=[])
    return state


# --------------------------------------------------------------------------------------------
# The catalogue: one refused action per situation


@dataclass(frozen=True)
class Case:
    name: str
    position: Callable[[], GameState]
    seat: int
    action: dict[str, object]
    code: str


def _c(
    label: str, position: Callable[[], GameState], seat: int, code: str, /, **action: object
) -> Case:
    return Case(label, position, seat, action, code)


CASES = [
    # MALFORMED_ACTION: decoding (shape), then the apply-level checks.
    _c("unknown type", p_auction, 1, "MALFORMED_ACTION", type="shuffle"),
    _c("missing type", p_auction, 1, "MALFORMED_ACTION", amount=250),
    _c("missing field", p_auction, 1, "MALFORMED_ACTION", type="bid"),
    _c("extra field", p_auction, 1, "MALFORMED_ACTION", type="pass", amount=250),
    _c("bad card", p_play, 1, "MALFORMED_ACTION", type="play", card="1C"),
    _c("card not a string", p_play, 1, "MALFORMED_ACTION", type="play", card=10),
    _c("bad suit", p_trump, 1, "MALFORMED_ACTION", type="declare_trump", suit="X"),
    _c("amount as string", p_auction, 1, "MALFORMED_ACTION", type="bid", amount="250"),
    _c("amount as bool", p_auction, 1, "MALFORMED_ACTION", type="bid", amount=True),
    _c("help not bool", p_auction, 1, "MALFORMED_ACTION", type="pass", help="yes"),
    _c("cards not a list", p_partner_pass, 3, "MALFORMED_ACTION", type="pass_cards", cards="QH"),
    # An empty string is not an empty list: iterated, it would be a meld of no cards.
    _c("cards an empty string", p_meld, 1, "MALFORMED_ACTION", type="meld", cards=""),
    # A number is not a bool: 1 would otherwise pass with help.
    _c("help as a number", p_auction, 1, "MALFORMED_ACTION", type="pass", help=1),
    _c(
        "melds entry shape",
        p_meld,
        1,
        "MALFORMED_ACTION",
        type="meld",
        cards=["KC", "QC"],
        melds=[{"name": "marriage"}],
    ),
    _c(
        "melds entry extra field",
        p_meld,
        1,
        "MALFORMED_ACTION",
        type="meld",
        cards=["KC", "QC"],
        melds=[{"name": "marriage", "cards": ["KC", "QC"], "points": 20}],
    ),
    # An object is not a list: iterated, {} would declare no combinations at all.
    _c("melds an object", p_meld, 1, "MALFORMED_ACTION", type="meld", cards=["KC"], melds={}),
    _c(
        "melds entry name not a string",
        p_meld,
        1,
        "MALFORMED_ACTION",
        type="meld",
        cards=["KC", "QC"],
        melds=[{"name": 5, "cards": ["KC", "QC"]}],
    ),
    _c(
        "whole-hand meld with name",
        p_meld,
        1,
        "MALFORMED_ACTION",
        type="meld",
        name="marriage",
        cards=["KC", "QC"],
    ),
    _c(
        "help where not allowed",
        lambda: p_auction(allow_pass_with_help=False),
        1,
        "MALFORMED_ACTION",
        type="pass",
        help=True,
    ),
    _c("help in double-deck", dd_auction, 1, "MALFORMED_ACTION", type="pass", help=True),
    _c("seat out of range", p_auction, 4, "MALFORMED_ACTION", type="pass"),
    _c("negative seat", p_auction, -1, "MALFORMED_ACTION", type="pass"),
    # GAME_OVER
    _c("action after the game", p_over, 1, "GAME_OVER", type="bid", amount=250),
    _c("concede after the game", p_over, 1, "GAME_OVER", type="concede"),
    # NOT_YOUR_TURN
    _c("bid out of turn", p_auction, 2, "NOT_YOUR_TURN", type="bid", amount=250),
    _c("passed seat bids again", p_passed_out, 1, "NOT_YOUR_TURN", type="bid", amount=270),
    _c(
        "declarer passes before partner",
        p_partner_pass,
        1,
        "NOT_YOUR_TURN",
        type="pass_cards",
        cards=["AH", "AH", "10H", "10H"],
    ),
    _c("play out of turn", p_play, 2, "NOT_YOUR_TURN", type="play", card="AC"),
    _c("meld out of turn", p_meld, 2, "NOT_YOUR_TURN", type="meld", cards=[]),
    _c("exchange_dix by another seat", p_auction, 2, "NOT_YOUR_TURN", type="exchange_dix"),
    _c("draw by another seat", p_auction, 3, "NOT_YOUR_TURN", type="draw", turn_up=True),
    _c("no-bid exchange out of turn", nb_meld, 2, "NOT_YOUR_TURN", type="exchange_dix"),
    # WRONG_PHASE
    _c("exchange_dix in partnership", p_auction, 1, "WRONG_PHASE", type="exchange_dix"),
    # A.7 item 12: at the seat's own meld turn too, where no-bid would allow it.
    _c("exchange_dix at a partnership meld turn", p_meld, 1, "WRONG_PHASE", type="exchange_dix"),
    _c("draw in partnership", p_auction, 1, "WRONG_PHASE", type="draw", turn_up=False),
    _c("draw in play", p_play, 1, "WRONG_PHASE", type="draw", turn_up=True),
    _c("play in the auction", p_auction, 1, "WRONG_PHASE", type="play", card="AH"),
    _c("bid in play", p_play, 1, "WRONG_PHASE", type="bid", amount=300),
    _c("meld before trump", p_trump, 1, "WRONG_PHASE", type="meld", cards=[]),
    _c("bid_or_redeal in play", p_play, 1, "WRONG_PHASE", type="bid_or_redeal"),
    _c(
        "discard in partnership",
        p_partner_pass,
        3,
        "WRONG_PHASE",
        type="discard",
        cards=["QH", "QH", "AD", "AD"],
    ),
    _c("concede in the auction", p_auction, 1, "WRONG_PHASE", type="concede"),
    _c("declarer concedes before meld", p_meld, 1, "WRONG_PHASE", type="concede"),
    _c("declarer concedes mid-meld", p_meld_seat2, 1, "WRONG_PHASE", type="concede"),
    _c("defender concedes mid-meld", p_meld_seat2, 2, "WRONG_PHASE", type="concede"),
    _c("concede before the bury", ct_bury, 1, "WRONG_PHASE", type="concede"),
    _c("concede in no-bid", lambda: meld_all(nb_meld()), 1, "WRONG_PHASE", type="concede"),
    _c("concede in no-bid meld", nb_meld, 1, "WRONG_PHASE", type="concede"),
    _c(
        "another seat concedes for a declarer without trump",
        dd_no_marriage,
        2,
        "WRONG_PHASE",
        type="concede",
    ),
    _c(
        "no-bid exchange in play",
        lambda: meld_all(nb_meld()),
        1,
        "WRONG_PHASE",
        type="exchange_dix",
    ),
    # CARD_NOT_IN_HAND
    _c("play a card not held", p_play, 1, "CARD_NOT_IN_HAND", type="play", card="AS"),
    _c(
        "pass a card not held",
        p_partner_pass,
        3,
        "CARD_NOT_IN_HAND",
        type="pass_cards",
        cards=["QH", "QH", "AD", "AC"],
    ),
    _c(
        "pass one copy too many",
        p_partner_pass,
        3,
        "CARD_NOT_IN_HAND",
        type="pass_cards",
        cards=["QH", "QH", "QH", "AD"],
    ),
    _c(
        "kitty discard not held",
        dd_kitty,
        1,
        "CARD_NOT_IN_HAND",
        type="discard",
        cards=["JD", "JD", "JD", "9D"],
    ),
    _c(
        "bury a card not held",
        ct_bury,
        1,
        "CARD_NOT_IN_HAND",
        type="discard",
        cards=["9D", "9D", "KD"],
    ),
    _c("meld a card not held", p_meld, 1, "CARD_NOT_IN_HAND", type="meld", cards=["KC", "QS"]),
    # BID_TOO_LOW
    _c("below min_bid", p_auction, 1, "BID_TOO_LOW", type="bid", amount=240),
    _c("equal to the standing bid", p_after_bid, 2, "BID_TOO_LOW", type="bid", amount=250),
    _c("below the standing bid", p_after_bid, 2, "BID_TOO_LOW", type="bid", amount=240),
    _c("double-deck below 50", dd_auction, 1, "BID_TOO_LOW", type="bid", amount=49),
    # BID_BAD_RAISE
    _c("partnership opening 270", p_auction, 1, "BID_BAD_RAISE", type="bid", amount=270),
    _c("partnership opening 255", p_auction, 1, "BID_BAD_RAISE", type="bid", amount=255),
    _c("raise of 30", p_after_bid, 2, "BID_BAD_RAISE", type="bid", amount=280),
    _c("raise of 15", p_after_bid, 2, "BID_BAD_RAISE", type="bid", amount=265),
    _c(
        "schedule: step 5 at 60",
        lambda: act(dd_schedule(), 1, "bid", amount=60),
        2,
        "BID_BAD_RAISE",
        type="bid",
        amount=62,
    ),
    _c(
        "schedule: step 10 at 100",
        lambda: act(dd_schedule(), 1, "bid", amount=100),
        2,
        "BID_BAD_RAISE",
        type="bid",
        amount=105,
    ),
    # DEALER_MUST_BID
    _c("stuck dealer passes", p_dealer_stuck, 0, "DEALER_MUST_BID", type="pass"),
    _c(
        "stuck dealer passes with help",
        p_dealer_stuck,
        0,
        "DEALER_MUST_BID",
        type="pass",
        help=True,
    ),
    # BID_OR_REDEAL_NOT_ALLOWED
    _c(
        "bid-or-redeal in partnership",
        p_auction,
        1,
        "BID_OR_REDEAL_NOT_ALLOWED",
        type="bid_or_redeal",
    ),
    _c(
        "bid-or-redeal after a numeric bid",
        lambda: act(dd_auction(), 1, "bid", amount=50),
        2,
        "BID_OR_REDEAL_NOT_ALLOWED",
        type="bid_or_redeal",
    ),
    # TRUMP_NEEDS_MARRIAGE
    _c(
        "trump without its marriage",
        dd_trump,
        1,
        "TRUMP_NEEDS_MARRIAGE",
        type="declare_trump",
        suit="H",
    ),
    _c(
        "no marriage at all",
        dd_no_marriage,
        1,
        "TRUMP_NEEDS_MARRIAGE",
        type="declare_trump",
        suit="S",
    ),
    # WRONG_CARD_COUNT
    _c(
        "pass 3 of 4",
        p_partner_pass,
        3,
        "WRONG_CARD_COUNT",
        type="pass_cards",
        cards=["QH", "QH", "AD"],
    ),
    _c(
        "pass 5 of 4",
        p_partner_pass,
        3,
        "WRONG_CARD_COUNT",
        type="pass_cards",
        cards=["QH", "QH", "AD", "AD", "QS"],
    ),
    _c(
        "kitty discard of 3",
        dd_kitty,
        1,
        "WRONG_CARD_COUNT",
        type="discard",
        cards=["JD", "JD", "JD"],
    ),
    _c("bury 2", ct_bury, 1, "WRONG_CARD_COUNT", type="discard", cards=["9D", "9D"]),
    # CANNOT_BURY_MELD
    _c(
        "bury the shown king",
        ct_bury,
        1,
        "CANNOT_BURY_MELD",
        type="discard",
        cards=["KS", "9D", "9D"],
    ),
    # Trick play
    _c("must follow suit", lambda: p_trick(1), 2, "MUST_FOLLOW_SUIT", type="play", card="AS"),
    _c("must head the trick", lambda: p_trick(1), 2, "MUST_HEAD_TRICK", type="play", card="9C"),
    _c("must trump", lambda: p_trick(2), 3, "MUST_TRUMP", type="play", card="QS"),
    _c("must overtrump", lambda: p_trick(3), 0, "MUST_OVERTRUMP", type="play", card="JH"),
    _c("must trump (over a trump)", lambda: p_trick(3), 0, "MUST_TRUMP", type="play", card="KD"),
    # INVALID_MELD
    _c(
        "a marriage called a run",
        p_meld,
        1,
        "INVALID_MELD",
        type="meld",
        cards=["KC", "QC"],
        melds=[{"name": "run", "cards": ["KC", "QC"]}],
    ),
    _c(
        "an unknown meld name",
        p_meld,
        1,
        "INVALID_MELD",
        type="meld",
        cards=["KC", "QC"],
        melds=[{"name": "flush", "cards": ["KC", "QC"]}],
    ),
    _c(
        "declared cards not shown",
        p_meld,
        1,
        "INVALID_MELD",
        type="meld",
        cards=["KC", "QC"],
        melds=[{"name": "dix", "cards": ["9H"]}],
    ),
    _c(
        "a card twice in one class",
        p_meld,
        1,
        "INVALID_MELD",
        type="meld",
        cards=["KC", "QC", "9H"],
        melds=[
            {"name": "marriage", "cards": ["KC", "QC"]},
            {"name": "marriage", "cards": ["KC", "QC"]},
        ],
    ),
    _c(
        "a royal marriage in a plain suit",
        p_meld,
        1,
        "INVALID_MELD",
        type="meld",
        cards=["KC", "QC"],
        melds=[{"name": "royal_marriage", "cards": ["KC", "QC"]}],
    ),
    # MELD_MISCOUNT
    _c(
        "claim over the shown cards",
        p_meld,
        1,
        "MELD_MISCOUNT",
        type="meld",
        cards=["KC", "QC"],
        points=40,
    ),
    _c(
        "claim over the declared melds",
        p_meld,
        1,
        "MELD_MISCOUNT",
        type="meld",
        cards=["KC", "QC", "KC", "QC"],
        melds=[{"name": "marriage", "cards": ["KC", "QC"]}],
        points=40,
    ),
    _c(
        "claim that counts the exchange",
        nb_exchanged,
        1,
        "MELD_MISCOUNT",
        type="meld",
        cards=[],
        points=10,
    ),
    # DIX_EXCHANGE_NOT_ALLOWED
    _c(
        "the dealer exchanges",
        lambda: nb_seat(0),
        0,
        "DIX_EXCHANGE_NOT_ALLOWED",
        type="exchange_dix",
    ),
    _c("no 9 of trumps", lambda: nb_seat(3), 3, "DIX_EXCHANGE_NOT_ALLOWED", type="exchange_dix"),
    _c("a second exchange", nb_exchanged, 1, "DIX_EXCHANGE_NOT_ALLOWED", type="exchange_dix"),
    _c(
        "the other 9 after an exchange",
        lambda: act(nb_exchanged(), 1, "meld", cards=[]),
        2,
        "DIX_EXCHANGE_NOT_ALLOWED",
        type="exchange_dix",
    ),
    _c(
        "the turned card is a 9",
        lambda: nb_meld("9H"),
        1,
        "DIX_EXCHANGE_NOT_ALLOWED",
        type="exchange_dix",
    ),
    # CONCEDE_NOT_ALLOWED
    _c("a defender concedes", p_play, 2, "CONCEDE_NOT_ALLOWED", type="concede"),
    _c("the declarer's partner concedes", p_play, 3, "CONCEDE_NOT_ALLOWED", type="concede"),
    _c("concede after the lead", lambda: p_trick(1), 1, "CONCEDE_NOT_ALLOWED", type="concede"),
    _c("concede after a trick", lambda: p_trick(3), 1, "CONCEDE_NOT_ALLOWED", type="concede"),
    _c(
        "a cutthroat defender concedes after the bury",
        lambda: act(ct_bury(), 1, "discard", cards=["9D", "9D", "9C"]),
        2,
        "CONCEDE_NOT_ALLOWED",
        type="concede",
    ),
    # Precedence: where several codes apply, the earliest in A.5 wins.
    _c("game over + not your turn", p_over, 3, "GAME_OVER", type="play", card="AS"),
    _c("malformed + game over", p_over, 1, "MALFORMED_ACTION", type="pass", amount=1),
    _c("bad seat + game over", p_over, 9, "MALFORMED_ACTION", type="pass"),
    _c(
        "help not allowed + not your turn",
        dd_auction,
        3,
        "MALFORMED_ACTION",
        type="pass",
        help=True,
    ),
    _c(
        "help not allowed + game over",
        lambda: p_over(allow_pass_with_help=False),
        1,
        "MALFORMED_ACTION",
        type="pass",
        help=True,
    ),
    _c("help allowed + game over", p_over, 1, "GAME_OVER", type="pass", help=True),
    _c(
        "meld name + not your turn",
        p_meld,
        3,
        "MALFORMED_ACTION",
        type="meld",
        name="marriage",
        cards=["KC", "QC"],
    ),
    _c(
        "out of turn + card not in hand",
        lambda: p_trick(1),
        3,
        "NOT_YOUR_TURN",
        type="play",
        card="AC",
    ),
    _c("out of turn + wrong phase", p_auction, 2, "NOT_YOUR_TURN", type="play", card="AS"),
    _c("wrong phase + card not in hand", p_auction, 1, "WRONG_PHASE", type="play", card="AS"),
    _c(
        "card not in hand + wrong count",
        p_partner_pass,
        3,
        "CARD_NOT_IN_HAND",
        type="pass_cards",
        cards=["AC", "QH"],
    ),
    _c(
        "card not in hand + invalid meld",
        p_meld,
        1,
        "CARD_NOT_IN_HAND",
        type="meld",
        cards=["AS"],
        melds=[{"name": "run", "cards": ["AS"]}],
    ),
    _c("too low + bad raise", p_after_bid, 2, "BID_TOO_LOW", type="bid", amount=245),
    _c(
        "wrong count + cannot bury meld",
        ct_bury,
        1,
        "WRONG_CARD_COUNT",
        type="discard",
        cards=["KS", "QS"],
    ),
    _c(
        "invalid meld + miscount",
        p_meld,
        1,
        "INVALID_MELD",
        type="meld",
        cards=["KC", "QC"],
        melds=[{"name": "run", "cards": ["KC", "QC"]}],
        points=999,
    ),
    _c("wrong phase before concede-not-allowed", p_meld_seat2, 3, "WRONG_PHASE", type="concede"),
]

# The three two-handed meld codes are the only ones these variants never raise.
TWO_HANDED_ONLY = {"MELD_NOT_ALLOWED", "MELD_NEEDS_NEW_CARD", "MELD_CARD_REUSED"}

CARD_TOKEN = re.compile(r"(?<![0-9A-Z])(?:10|[AKQJ9T])[SHDC](?![A-Z])")


def _public_cards(state: GameState, case: Case) -> set[str]:
    """Cards a message may quote: those the action names, the trick, the turned card."""
    named = set(CARD_TOKEN.findall(repr(case.action).upper()))
    hand = state.hand
    if hand is not None:
        named |= {format_card(c) for c in hand.trick}
        if hand.turn_up is not None:
            named.add(format_card(hand.turn_up))
    return named


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_refused_with_the_first_applicable_code(case: Case) -> None:
    """A refused action gets exactly its A.5 code and leaves the state as it was."""
    state = case.position()
    error = refuse_json(state, case.seat, case.action)
    assert error.code == case.code, error.message
    assert error.message
    if error.code != "MALFORMED_ACTION":  # a decode error knows no seat and no hand
        assert f"seat {case.seat}" in error.message
        quoted = set(CARD_TOKEN.findall(error.message))
        assert quoted <= _public_cards(state, case), error.message


def test_catalogue_covers_every_code_of_the_bidding_variants() -> None:
    """Every A.5 code except the three two-handed meld codes has a case above."""
    assert {c.code for c in CASES} == set(VIOLATION_CODES) - TWO_HANDED_ONLY


def test_violation_codes_are_in_the_a5_order() -> None:
    """The engine's precedence list is A.5's table, in order (typed in from RULES.md)."""
    assert VIOLATION_CODES == (
        "MALFORMED_ACTION",
        "GAME_OVER",
        "NOT_YOUR_TURN",
        "WRONG_PHASE",
        "CARD_NOT_IN_HAND",
        "BID_TOO_LOW",
        "BID_BAD_RAISE",
        "DEALER_MUST_BID",
        "BID_OR_REDEAL_NOT_ALLOWED",
        "TRUMP_NEEDS_MARRIAGE",
        "WRONG_CARD_COUNT",
        "CANNOT_BURY_MELD",
        "MUST_FOLLOW_SUIT",
        "MUST_HEAD_TRICK",
        "MUST_TRUMP",
        "MUST_OVERTRUMP",
        "MELD_NOT_ALLOWED",
        "INVALID_MELD",
        "MELD_NEEDS_NEW_CARD",
        "MELD_CARD_REUSED",
        "MELD_MISCOUNT",
        "DIX_EXCHANGE_NOT_ALLOWED",
        "CONCEDE_NOT_ALLOWED",
    )


# --------------------------------------------------------------------------------------------
# Checks the catalogue's shape cannot express


def test_bool_seat_is_malformed() -> None:
    """``True`` is not a seat number, even though Python treats it as 1."""
    error = refuse(p_auction(), True, "pass")
    assert (error.code, error.field) == ("MALFORMED_ACTION", "seat")


@pytest.mark.parametrize(
    ("position", "seat", "action", "field"),
    [
        (p_auction, 1, ["pass"], ""),  # the action as a whole
        (p_auction, 1, {"type": "shuffle"}, "type"),
        (p_auction, 1, {"type": "bid"}, "amount"),
        (p_auction, 1, {"type": "pass", "amount": 250}, "amount"),
        (p_auction, 1, {"type": "bid", "amount": "250"}, "amount"),
        (p_auction, 1, {"type": "pass", "help": "yes"}, "help"),
        (p_trump, 1, {"type": "declare_trump", "suit": "X"}, "suit"),
        (p_partner_pass, 3, {"type": "pass_cards", "cards": ["QH", "1C", "AD", "AD"]}, "cards[1]"),
        (p_play, 1, {"type": "play", "card": 10}, "card"),
        (
            p_meld,
            1,
            {
                "type": "meld",
                "cards": ["KC"],
                "melds": [{"name": "marriage", "cards": ["KC", "X"]}],
            },
            "melds[0].cards[1]",
        ),
        (
            p_meld,
            1,
            {"type": "meld", "cards": [], "melds": [{"name": 5, "cards": []}]},
            "melds[0].name",
        ),
    ],
)
def test_a_malformed_action_names_the_offending_field(
    position: Callable[[], GameState], seat: int, action: object, field: str
) -> None:
    """A.5 ``MALFORMED_ACTION`` (README, Errors: the error names the field): ``field`` is the
    path of the offending value in the action's JSON form, down to the list index (``""``: the
    action as a whole)."""
    error = refuse_json(position(), seat, action)
    assert (error.code, error.field) == ("MALFORMED_ACTION", field)
    assert error.to_json() == {"code": "MALFORMED_ACTION", "field": field, "message": error.message}


def test_help_false_is_accepted_where_help_is_not_allowed() -> None:
    """A.7 item 11: ``"help": false`` is an ordinary pass."""
    state = act(dd_auction(), 1, "pass", help=False)
    assert state.hand is not None and state.hand.calls[-1].kind == "pass"


def test_the_refused_positions_were_legal_one_step_earlier() -> None:
    """The positions are what their docstrings say: the legal counterparts are accepted."""
    assert act(p_trick(1), 2, "play", card="AC").hand is not None
    assert act(p_trick(2), 3, "play", card="QH").hand is not None
    assert act(p_trick(3), 0, "play", card="KH").hand is not None
    assert act(ct_bury(), 1, "discard", cards=["9D", "9D", "9C"]).hand is not None
    assert act(dd_trump(), 1, "declare_trump", suit="S").hand is not None
    assert act(dd_kitty(), 1, "discard", cards=["JD", "JD", "JD", "JD"]).hand is not None
    assert act(p_partner_pass(), 3, "pass_cards", cards=["QH", "QH", "AD", "AD"]).hand is not None
    assert act(p_after_bid(), 2, "bid", amount=270).hand is not None
    assert act(p_dealer_stuck(), 0, "bid", amount=250).hand is not None
    assert act(nb_meld(), 1, "exchange_dix").hand is not None
    assert act(p_meld(), 1, "meld", cards=["KC", "QC"], points=20).hand is not None
    sched = act(dd_schedule(), 1, "bid", amount=60)
    assert act(sched, 2, "bid", amount=65).hand is not None


def test_refused_action_leaves_later_play_possible() -> None:
    """After a refusal the same state still accepts the legal action (nothing was consumed)."""
    state = p_trick(1)
    for card in ("AS", "9C", "KH"):
        with pytest.raises(IllegalAction):
            apply(state, 2, decode_action({"type": "play", "card": card}))
    state = act(state, 2, "play", card="AC")
    assert state.hand is not None and state.hand.turn == 3


def test_no_marriage_leaves_concede_as_the_only_action() -> None:
    """A.7 item 5: a declarer with no K-Q anywhere can only concede."""
    state = dd_no_marriage()
    assert legal_actions(state, 1) == [{"type": "concede"}]
    for seat in (0, 2, 3):
        assert legal_actions(state, seat) == []


def test_phases_of_the_catalogue_positions() -> None:
    """A guard for the fixtures: the play positions are in play, the meld ones in meld."""
    play, meld = p_play().hand, p_meld().hand
    assert play is not None and play.phase == PLAY
    assert meld is not None and meld.phase == MELD
