"""Every rule option's values, shown changing what the engine does (RULES.md §7, A.2, OPTIONS.md).

One test (or one parametrized row) per option value and variant where the value matters: the same
position played under two values of one option gives a different legal-action set, a different
A.5 code, a different score or a different phase. Everything goes through ``apply`` and
``legal_actions`` (the engine's one validating entry point) from explicit deals.

Two-handed's options have their own deterministic tests in ``test_two_handed*.py``; here the
seat games (cutthroat, partnership, double-deck with 80 and 48 cards, partnership-no-bid).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import apply, legal_actions
from referee.engine.errors import IllegalAction
from referee.engine.state import BURY, GameState
from referee.rules.cards import canonical_deck, format_card, parse_card
from referee.rules.options import resolve_options
from tests.test_violations import act, begin, meld_all, win_auction

# --------------------------------------------------------------------------------------------
# Positions in the first trick, from explicit deals

# (variant, extra options): every seat game; the 48-card double-deck too.
SEAT_GAMES: list[tuple[str, dict[str, object]]] = [
    ("cutthroat", {}),
    ("partnership", {}),
    ("double-deck", {}),
    ("double-deck", {"deck": 48}),
    ("partnership-no-bid", {}),
]
GAME_IDS = ["cutthroat", "partnership", "double-deck-80", "double-deck-48", "partnership-no-bid"]

SUIT_ORDER = "SHDC"


def _suit_cards(deck: int, suit: str) -> list[str]:
    return [c for c in (format_card(x) for x in canonical_deck(deck)) if c.endswith(suit)]


def trick_position(
    variant: str,
    options: dict[str, object],
    trump: str,
    trick: Sequence[str],
    acting: str,
    filler: str = "DS",
    others_filler: str = "HS",
) -> tuple[GameState, int, list[str]]:
    """A first trick in which seat 1 (the declarer; no-bid: the dealer's left, dealer 0) led
    ``trick[0]`` and the next seats played the rest; the seat after them holds ``acting`` filled
    up with cards of the suits ``filler`` (in that order). A seat that played after the lead
    holds its card filled up from the suits ``others_filler``.
    Returns the state, the acting seat and its full hand."""
    players = {"cutthroat": 3}.get(variant, 4)
    rules = resolve_options(variant, options)
    deck, size = rules.deck, rules.hand_size
    pool = [format_card(x) for x in canonical_deck(deck)]

    def take(cards: Sequence[str], fill_suit: str, reserved: bool = False) -> list[str]:
        hand = list(cards)
        for card in () if reserved else hand:
            pool.remove(card)
        for suit in fill_suit:
            for card in [c for c in pool if c.endswith(suit)]:
                if len(hand) == size:
                    break
                hand.append(card)
                pool.remove(card)
        assert len(hand) == size, "not enough filler"
        return hand

    hands: list[list[str]] = [[] for _ in range(players)]
    pool.remove(trick[0])
    turn_up = None
    if variant == "partnership-no-bid":
        # The dealer (seat 0) holds the turned card, the lowest trump nobody else needs.
        needed = [*trick[1:], *acting.split()]
        turn_up = next(
            c for c in reversed(pool) if c.endswith(trump) and pool.count(c) > needed.count(c)
        )
        pool.remove(turn_up)
        hands[0] = [turn_up]
    for card in acting.split():
        pool.remove(card)
    for index in range(1, len(trick)):
        hands[(1 + index) % players] = take([trick[index]], others_filler)
    seat = (1 + len(trick)) % players
    # A dealer acting in no-bid holds the turned card too.
    explicit = [*acting.split(), turn_up] if turn_up is not None and seat == 0 else acting.split()
    hands[seat] = take(explicit, filler, reserved=True)
    hands[1] = [trick[0]]
    strings = [" ".join(h) for h in hands]
    state = begin(variant, options, strings, turn_up=turn_up)
    if rules.bidding:
        state = win_auction(state, 1)
        state = act(state, 1, "declare_trump", suit=trump)
    else:
        assert state.hand is not None and state.hand.trump == SUIT_ORDER.index(trump)
    state = meld_all(state)
    if state.hand is not None and state.hand.phase == BURY:
        entry = next(e for e in legal_actions(state, 1) if e["type"] == "discard")
        held = entry["from"]
        assert isinstance(held, list)
        source = [c for c in held if c != trick[0]]
        state = act(state, 1, "discard", cards=source[:3])
    for index, card in enumerate(trick):
        state = act(state, (1 + index) % players, "play", card=card)
    assert state.hand is not None and state.hand.turn == seat
    return state, seat, sorted(set(state_hand(state, seat)), key=_canonical)


def state_hand(state: GameState, seat: int) -> list[str]:
    assert state.hand is not None
    return [format_card(c) for c in state.hand.hands[seat]]


def _canonical(card: str) -> int:
    return parse_card(card)


def legal_cards(state: GameState, seat: int) -> list[str]:
    return [str(e["card"]) for e in legal_actions(state, seat) if e["type"] == "play"]


def play_code(state: GameState, seat: int, card: str) -> str | None:
    """The A.5 code ``apply`` answers for playing ``card`` (None: accepted)."""
    try:
        apply(state, seat, decode_action({"type": "play", "card": card}))
    except IllegalAction as refused:
        return refused.code
    return None


def seat_game_options(variant: str, extra: dict[str, object], **options: object) -> dict[str, Any]:
    """``options`` for a first-trick position: no partner exchange and no trump marriage rule
    where the variant has them (the declarer names hearts whatever it holds)."""
    base: dict[str, Any] = dict(extra)
    if variant in ("partnership", "double-deck"):
        base["exchange_mode"] = "none"
    if variant != "partnership-no-bid":
        base["trump_requires_marriage"] = False
    return {**base, **options}


# --------------------------------------------------------------------------------------------
# Play obligations (§1.5, OPTIONS.md "Play obligations"): hearts trump, seat 1 leads.
#
# Each row: the option, the trick so far, the acting seat's relevant cards (the rest of its hand
# is of the filler suit), and for each value: the legal cards ("ALL" = the whole hand) and the
# code for the probe card (None: accepted).

ALL = "ALL"
PLAY_ROWS: list[
    tuple[str, str, list[str], str, str, str, dict[object, tuple[object, str | None]]]
] = [
    # head_rule: a plain lead (§1.5 "Head the trick"; L1) ...
    (
        "head_rule plain lead",
        "head_rule",
        ["10C"],
        "AC JC",
        "DS",
        "JC",
        {
            "always": (["AC"], "MUST_HEAD_TRICK"),
            "trump_lead_only": (["AC", "JC"], None),
            "never": (["AC", "JC"], None),
        },
    ),
    # ... and a trump lead (L7: "Trump led: follow with a trump and beat the highest").
    (
        "head_rule trump lead",
        "head_rule",
        ["KH"],
        "AH JH",
        "DS",
        "JH",
        {
            "always": (["AH"], "MUST_HEAD_TRICK"),
            "trump_lead_only": (["AH"], "MUST_HEAD_TRICK"),
            "never": (["AH", "JH"], None),
        },
    ),
    # head_when_trumped: a plain lead already trumped (L3, §8 D4).
    (
        "head_when_trumped",
        "head_when_trumped",
        ["10C", "QH"],
        "AC JC",
        "DS",
        "JC",
        {
            "not_required": (["AC", "JC"], None),
            "beat_highest_led_card": (["AC"], "MUST_HEAD_TRICK"),
        },
    ),
    # must_trump_when_void (§1.5 "Void in the suit led: you must play a trump").
    (
        "must_trump_when_void",
        "must_trump_when_void",
        ["10C"],
        "QH",
        "DS",
        "AD",
        {True: (["QH"], "MUST_TRUMP"), False: (ALL, None)},
    ),
    # must_overtrump (L4).
    (
        "must_overtrump",
        "must_overtrump",
        ["10C", "QH"],
        "KH JH",
        "DS",
        "JH",
        {True: (["KH"], "MUST_OVERTRUMP"), False: (["KH", "JH"], None)},
    ),
    # must_trump_even_if_cannot_overtrump (L5, §8 D5).
    (
        "must_trump_even_if_cannot_overtrump",
        "must_trump_even_if_cannot_overtrump",
        ["10C", "QH"],
        "JH",
        "DS",
        "AD",
        {True: (["JH"], "MUST_TRUMP"), False: (ALL, None)},
    ),
]


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize(
    ("label", "option", "trick", "acting", "filler", "probe", "by_value"),
    PLAY_ROWS,
    ids=[row[0] for row in PLAY_ROWS],
)
def test_each_play_option_value_changes_the_legal_cards_and_the_code(
    variant: str,
    extra: dict[str, object],
    label: str,
    option: str,
    trick: list[str],
    acting: str,
    filler: str,
    probe: str,
    by_value: dict[object, tuple[object, str | None]],
) -> None:
    """RULES.md §1.5's ladder, one rung per option, in every seat game: each value gives its own
    legal set (``legal_actions``) and ``apply``'s answer to the probe card."""
    seen = set()
    for value, (expected, code) in by_value.items():
        options = seat_game_options(variant, extra, **{option: value})
        state, seat, hand = trick_position(variant, options, "H", trick, acting, filler)
        wanted = hand if expected == ALL else expected
        assert legal_cards(state, seat) == wanted, (label, value)
        assert play_code(state, seat, probe) == code, (label, value)
        seen.add((tuple(legal_cards(state, seat)), code))
    assert len(seen) > 1  # the option changes what the engine does


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
def test_head_over_partner_each_value(variant: str, extra: dict[str, object]) -> None:
    """A.9 item 10: with the partner's card winning, ``true`` still makes the player head it,
    ``false`` lets it follow suit with any card (cutthroat: the two defenders are partners)."""
    # Four seats: seat 1 leads KC, seat 2 plays JC, seat 3 (seat 1's partner) holds AC QC.
    # Cutthroat: seat 1 (the bidder) leads JC, seat 2 heads with KC, seat 0 (seat 2's partner).
    trick = ["JC", "KC"] if variant == "cutthroat" else ["KC", "JC"]
    found = {}
    for value in (True, False):
        options = seat_game_options(variant, extra, head_over_partner=value)
        state, seat, _ = trick_position(variant, options, "H", trick, "AC QC")
        found[value] = (legal_cards(state, seat), play_code(state, seat, "QC"))
    assert found == {True: (["AC"], "MUST_HEAD_TRICK"), False: (["AC", "QC"], None)}


@pytest.mark.parametrize("value", [True, False])
def test_cutthroat_bidder_is_nobodys_partner(value: bool) -> None:
    """A.9 item 10 in cutthroat: only the two defenders are partners, so a defender following
    the bidder's winning card must head it whatever ``head_over_partner`` says."""
    options = seat_game_options("cutthroat", {}, head_over_partner=value)
    state, seat, _ = trick_position("cutthroat", options, "H", ["KC", "JC"], "AC QC")
    assert (legal_cards(state, seat), play_code(state, seat, "QC")) == (["AC"], "MUST_HEAD_TRICK")


# Options that RULES.md §1.5 makes interact: (options, trick, acting cards, legal cards).
COMBINATIONS: list[tuple[dict[str, object], list[str], str, object]] = [
    # No duty to trump at all: the over-trump rungs never come into play.
    ({"must_trump_when_void": False, "must_overtrump": True}, ["10C", "QH"], "KH JH", ALL),
    ({"must_trump_when_void": False}, ["10C", "QH"], "JH", ALL),
    # Over-trump not required: any trump when one beats; the under-trump rung decides otherwise.
    (
        {"must_overtrump": False, "must_trump_even_if_cannot_overtrump": False},
        ["10C", "QH"],
        "KH JH",
        ["KH", "JH"],
    ),
    (
        {"must_overtrump": False, "must_trump_even_if_cannot_overtrump": False},
        ["10C", "QH"],
        "JH",
        ALL,
    ),
    (
        {"must_overtrump": True, "must_trump_even_if_cannot_overtrump": False},
        ["10C", "QH"],
        "KH JH",
        ["KH"],
    ),
    # head_when_trumped only matters where head_rule makes the player head a plain lead.
    (
        {"head_rule": "never", "head_when_trumped": "beat_highest_led_card"},
        ["10C", "QH"],
        "AC JC",
        ["AC", "JC"],
    ),
    (
        {"head_rule": "trump_lead_only", "head_when_trumped": "beat_highest_led_card"},
        ["10C", "QH"],
        "AC JC",
        ["AC", "JC"],
    ),
    # Nothing of the led suit beats the highest led card: following suit is enough.
    ({"head_when_trumped": "beat_highest_led_card"}, ["AC", "QH"], "10C JC", ["10C", "JC"]),
    # Void in the suit led and in trumps: any card, whatever the options.
    ({"must_trump_even_if_cannot_overtrump": True}, ["10C", "QH"], "", ALL),
]


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize(("options", "trick", "acting", "expected"), COMBINATIONS)
def test_play_option_combinations(
    variant: str,
    extra: dict[str, object],
    options: dict[str, object],
    trick: list[str],
    acting: str,
    expected: object,
) -> None:
    """§1.5's pseudo-code: the rungs nest, so an option lower on the ladder has no effect once a
    higher one has decided (must_trump_when_void over the over-trump rungs, head_rule over
    head_when_trumped)."""
    state, seat, hand = trick_position(
        variant, seat_game_options(variant, extra, **options), "H", trick, acting
    )
    assert legal_cards(state, seat) == (hand if expected == ALL else expected)


# --------------------------------------------------------------------------------------------
# Auction (A.2, A.7 items 2-3, OPTIONS.md "Bidding and trump")

BIDDING_GAMES: list[tuple[str, dict[str, object]]] = [
    ("cutthroat", {}),
    ("partnership", {}),
    ("double-deck", {}),
    ("double-deck", {"deck": 48}),
]
BIDDING_IDS = ["cutthroat", "partnership", "double-deck-80", "double-deck-48"]


def opening(variant: str, options: dict[str, object]) -> GameState:
    """The first call of the first hand (dealer 0, seat 1 to speak)."""
    return begin(variant, options)


def bid_entry(state: GameState, seat: int) -> dict[str, object] | None:
    return next((e for e in legal_actions(state, seat) if e["type"] == "bid"), None)


def code_of(state: GameState, seat: int, data: dict[str, object]) -> str | None:
    try:
        apply(state, seat, decode_action(data))
    except IllegalAction as refused:
        return refused.code
    return None


@pytest.mark.parametrize(("variant", "extra"), BIDDING_GAMES, ids=BIDDING_IDS)
@pytest.mark.parametrize(
    ("options", "low", "step", "high"),
    [
        ({"min_bid": 40}, 40, None, None),
        ({"min_bid": 120, "bid_step": 7}, 120, 7, None),
        ({"min_bid": 100, "bid_step": 10, "max_raise": 25}, 100, 10, 110),
        ({"min_bid": 100, "bid_step": 10, "max_raise": None}, 100, 10, None),
        ({"min_bid": 100, "bid_schedule": [[50, 1], [100, 5], [150, 10]]}, 100, 5, None),
        ({"min_bid": 60, "bid_schedule": [[50, 1], [60, 5], [100, 10]]}, 60, 5, None),
    ],
)
def test_bid_window_options_set_the_opening_bids(
    variant: str,
    extra: dict[str, object],
    options: dict[str, object],
    low: int,
    step: int | None,
    high: int | None,
) -> None:
    """A.2 and A.7 item 3: the opening is a raise over min_bid minus the step in force at
    min_bid, a multiple of that step, at most max_raise. The entry and ``apply`` agree on each
    boundary: below min_bid BID_TOO_LOW, off the step or above the highest BID_BAD_RAISE."""
    state = opening(variant, {**extra, "max_raise": None, **options})
    rules = state.rules
    step = step if step is not None else rules.bid_step
    assert bid_entry(state, 1) == {"type": "bid", "min": low, "step": step, "max": high}
    assert code_of(state, 1, {"type": "bid", "amount": low}) is None
    assert code_of(state, 1, {"type": "bid", "amount": low - 1}) == "BID_TOO_LOW"
    assert code_of(state, 1, {"type": "bid", "amount": low + 2 * step}) == (
        None if high is None else "BID_BAD_RAISE"
    )
    if step > 1:
        assert code_of(state, 1, {"type": "bid", "amount": low + 1}) == "BID_BAD_RAISE"


@pytest.mark.parametrize(("variant", "extra"), BIDDING_GAMES, ids=BIDDING_IDS)
def test_bid_schedule_step_follows_the_standing_bid(variant: str, extra: dict[str, object]) -> None:
    """A.2 ``bid_schedule``: the step in force is the one of the standing bid's level."""
    options = {**extra, "min_bid": 50, "max_raise": None, "bid_schedule": [[50, 1], [60, 5]]}
    state = act(opening(variant, options), 1, "bid", amount=59)
    assert bid_entry(state, 2) == {"type": "bid", "min": 60, "step": 1, "max": None}
    state = act(state, 2, "bid", amount=60)
    assert bid_entry(state, 0 if variant == "cutthroat" else 3) == {
        "type": "bid",
        "min": 65,
        "step": 5,
        "max": None,
    }
    seat = 0 if variant == "cutthroat" else 3
    assert code_of(state, seat, {"type": "bid", "amount": 61}) == "BID_BAD_RAISE"
    without = act(opening(variant, {**extra, "min_bid": 50, "bid_step": 1}), 1, "bid", amount=60)
    assert code_of(without, 2, {"type": "bid", "amount": 61}) is None


@pytest.mark.parametrize(("variant", "extra"), BIDDING_GAMES, ids=BIDDING_IDS)
@pytest.mark.parametrize("value", [True, False])
def test_allow_pass_with_help_each_value(
    variant: str, extra: dict[str, object], value: bool
) -> None:
    """A.7 item 11: a help pass is listed and accepted only when allowed, else MALFORMED_ACTION;
    ``"help": false`` is a plain pass either way."""
    state = opening(variant, {**extra, "allow_pass_with_help": value})
    listed = {"type": "pass", "help": True} in legal_actions(state, 1)
    assert listed is value
    code = code_of(state, 1, {"type": "pass", "help": True})
    assert code == (None if value else "MALFORMED_ACTION")
    assert code_of(state, 1, {"type": "pass", "help": False}) is None


@pytest.mark.parametrize(("variant", "extra"), BIDDING_GAMES, ids=BIDDING_IDS)
@pytest.mark.parametrize("value", [True, False])
def test_allow_bid_or_redeal_each_value(
    variant: str, extra: dict[str, object], value: bool
) -> None:
    """A.7 item 2: with bid-or-redeal allowed a round of pass / bid_or_redeal calls redeals
    (the dealer's pass included, since a bid-or-redeal call was made); without it the call is
    BID_OR_REDEAL_NOT_ALLOWED."""
    state = opening(variant, {**extra, "allow_bid_or_redeal": value, "all_pass": "dealer_stuck"})
    assert ({"type": "bid_or_redeal"} in legal_actions(state, 1)) is value
    if not value:
        assert code_of(state, 1, {"type": "bid_or_redeal"}) == "BID_OR_REDEAL_NOT_ALLOWED"
        return
    state = act(state, 1, "bid_or_redeal")
    players = state.rules.players
    for seat in range(2, players):
        state = act(state, seat, "pass")
    state = act(state, 0, "pass")  # the dealer is not stuck after a bid-or-redeal call
    assert (
        state.hand is None
        and state.hands_completed == 1
        and state.scores == (0,) * len(state.scores)
    )
    assert state.next_dealer == 1


@pytest.mark.parametrize(("variant", "extra"), BIDDING_GAMES, ids=BIDDING_IDS)
@pytest.mark.parametrize("value", ["dealer_stuck", "redeal"])
def test_all_pass_each_value(variant: str, extra: dict[str, object], value: str) -> None:
    """A.7 item 2: everyone passes before any bid. ``dealer_stuck``: the dealer's pass is
    DEALER_MUST_BID and the dealer may bid the minimum; ``redeal``: the hand ends, every delta 0,
    and the next dealer deals."""
    state = opening(variant, {**extra, "all_pass": value, "allow_bid_or_redeal": False})
    players = state.rules.players
    for seat in range(1, players):
        state = act(state, seat, "pass")
    if value == "dealer_stuck":
        assert code_of(state, 0, {"type": "pass"}) == "DEALER_MUST_BID"
        assert {"type": "pass"} not in legal_actions(state, 0)
        state = act(state, 0, "bid", amount=state.rules.min_bid)
        assert state.hand is not None and state.hand.declarer == 0
    else:
        state = act(state, 0, "pass")
        assert state.hand is None and state.hands_completed == 1 and state.next_dealer == 1


@pytest.mark.parametrize(("variant", "extra"), BIDDING_GAMES, ids=BIDDING_IDS)
@pytest.mark.parametrize("value", [True, False])
def test_trump_requires_marriage_each_value(
    variant: str, extra: dict[str, object], value: bool
) -> None:
    """A.7 item 5: with the rule, trump only where the declarer holds K-Q (TRUMP_NEEDS_MARRIAGE
    elsewhere); a declarer with no marriage at all can only concede, for -bid and 0 elsewhere.
    Without it any suit may be named."""
    options = {**extra, "trump_requires_marriage": value}
    if variant in ("partnership", "double-deck"):
        options["exchange_mode"] = "none"
    rules = resolve_options(variant, options)
    # Seat 1 holds the spade marriage and no king or queen of hearts; its other cards are aces
    # and tens (no K-Q anywhere else); cutthroat's widow is jacks.
    counters = [
        c
        for c in (format_card(x) for x in canonical_deck(rules.deck))
        if c[:-1] in ("A", "10") and c != "AS"
    ]
    hand = ["KS", "QS", *counters[: rules.hand_size - 2]]
    widow = "JD JD JC" if variant == "cutthroat" else ""
    state = win_auction(begin(variant, options, ("", " ".join(hand)), widow=widow), 1)
    suits = [e["suit"] for e in legal_actions(state, 1) if e["type"] == "declare_trump"]
    assert suits == (["S"] if value else ["S", "H", "D", "C"])
    assert code_of(state, 1, {"type": "declare_trump", "suit": "H"}) == (
        "TRUMP_NEEDS_MARRIAGE" if value else None
    )
    # No marriage anywhere: only a concession (with the rule), for -bid and 0 elsewhere.
    bare = " ".join(counters[: rules.hand_size])
    state = win_auction(begin(variant, options, ("", bare), widow=widow), 1)
    kinds = [e["type"] for e in legal_actions(state, 1)]
    assert kinds == (["concede"] if value else ["declare_trump"] * 4)
    if value:
        bid = state.hand.bid if state.hand is not None else None
        assert bid is not None
        state = act(state, 1, "concede")
        sides = len(state.scores)  # seat 1 is side 1 in every bidding variant
        assert state.scores == tuple(-bid if s == 1 else 0 for s in range(sides))


# --------------------------------------------------------------------------------------------
# Exchange (A.7 item 1, OPTIONS.md "Exchange")

EXCHANGE_GAMES: list[tuple[str, dict[str, object]]] = [
    ("partnership", {}),
    ("double-deck", {"trump_requires_marriage": False}),
    ("double-deck", {"deck": 48}),
]
EXCHANGE_IDS = ["partnership", "double-deck-80", "double-deck-48"]


def named_trump(variant: str, options: dict[str, object]) -> GameState:
    """Seat 1 won the auction and named spades."""
    state = win_auction(begin(variant, options), 1)
    return act(state, 1, "declare_trump", suit="S")


@pytest.mark.parametrize(("variant", "extra"), EXCHANGE_GAMES, ids=EXCHANGE_IDS)
@pytest.mark.parametrize("count", [0, 1, 4, 5])
def test_exchange_partner_passes_exchange_count_each_way(
    variant: str, extra: dict[str, object], count: int
) -> None:
    """A.7 item 1: the partner passes ``exchange_count`` cards, then the declarer returns as
    many (WRONG_CARD_COUNT otherwise); with 0 there is no exchange action at all."""
    state = named_trump(variant, {**extra, "exchange_mode": "partner", "exchange_count": count})
    assert state.hand is not None
    if count == 0:
        assert state.hand.phase == "meld" and state.hand.turn == 1
        return
    assert state.hand.turn == 3
    entry = legal_actions(state, 3)[0]
    assert entry["type"] == "pass_cards" and entry["count"] == count
    held = state_hand(state, 3)
    assert code_of(state, 3, {"type": "pass_cards", "cards": held[: count + 1]}) == (
        "WRONG_CARD_COUNT"
    )
    state = act(state, 3, "pass_cards", cards=held[:count])
    assert state.hand is not None and state.hand.turn == 1
    size = state.rules.hand_size
    assert len(state_hand(state, 1)) == size + count and len(state_hand(state, 3)) == size - count
    state = act(state, 1, "pass_cards", cards=state_hand(state, 1)[:count])
    assert state.hand is not None and state.hand.phase == "meld"
    assert len(state_hand(state, 1)) == len(state_hand(state, 3)) == size


@pytest.mark.parametrize(("variant", "extra"), EXCHANGE_GAMES, ids=EXCHANGE_IDS)
@pytest.mark.parametrize("mode", ["none", "partner", "kitty"])
def test_exchange_mode_each_value(variant: str, extra: dict[str, object], mode: str) -> None:
    """OPTIONS.md ``exchange_mode``: none goes from trump to meld; partner starts the partner's
    pass; kitty deals 11 or 19 each and a kitty of 4 that joins the declarer's hand at the
    contract, the declarer discarding 4 after naming trump."""
    options = {**extra, "exchange_mode": mode}
    rules = resolve_options(variant, options)
    state = begin(variant, options)
    assert state.hand is not None
    sizes = {len(h) for h in state.hand.hands}
    assert sizes == ({rules.deck // 4 - 1} if mode == "kitty" else {rules.deck // 4})
    assert len(state.hand.deal.widow) == (4 if mode == "kitty" else 0)
    state = named_trump(variant, options)
    assert state.hand is not None
    phase = {"none": "meld", "partner": "partner_pass", "kitty": "kitty_discard"}[mode]
    assert state.hand.phase == phase
    if mode == "kitty":
        assert len(state_hand(state, 1)) == rules.deck // 4 + 3
        entry = legal_actions(state, 1)[0]
        assert entry["type"] == "discard" and entry["count"] == 4


# --------------------------------------------------------------------------------------------
# Meld declaration (A.2, A.7 items 6-7)


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize("value", ["declared", "auto"])
def test_meld_declaration_each_value(variant: str, extra: dict[str, object], value: str) -> None:
    """``declared``: every seat sends a meld action, in order from the declarer (no-bid: the
    dealer's left); ``auto``: the referee scores every seat's best meld and no meld action is
    taken (play, or cutthroat's bury, comes next)."""
    options = seat_game_options(variant, extra, meld_declaration=value)
    # Seat 1 (the first to meld) holds a double pinochle.
    no_bid = variant == "partnership-no-bid"
    state = begin(
        variant, options, ("AH" if no_bid else "", "QS QS JD JD"), turn_up="AH" if no_bid else None
    )
    if state.rules.bidding:
        state = win_auction(state, 1)
        state = act(state, 1, "declare_trump", suit="H")
    hand = state.hand
    assert hand is not None
    if value == "declared":
        assert hand.phase == "meld" and hand.turn == 1
        assert [e["type"] for e in legal_actions(state, 1)][-1] == "meld"
        assert all(m is None for m in hand.melds)
    else:
        assert hand.phase == ("bury" if variant == "cutthroat" else "play")
        assert code_of(state, 1, {"type": "meld", "cards": ["QS", "QS", "JD", "JD"]}) == (
            "WRONG_PHASE"
        )
        record = hand.melds[1]
        pinochle = state.rules.meld_values["pinochle"][1]
        assert record is not None and record.points >= pinochle


# --------------------------------------------------------------------------------------------
# Counting (§1.6, A.2 count_scheme and last_trick_bonus)


def play_out(state: GameState) -> dict[str, Any]:
    """Play the current hand to its end with simple legal choices; its ``hand_result``."""
    from tests.test_violations import auto_action

    for _ in range(3000):
        if state.hand is None:
            break
        seat, data = auto_action(state)
        state, events = apply(state, seat, decode_action(data))
        for event in events:
            if event.kind == "hand_result":
                return dict(event.data)
    raise AssertionError("the hand did not end")


# Card points of a whole deck per scheme (§1.6), without the last trick.
CARD_TOTAL = {
    48: {
        "modern10": 240,
        "simple_10_5": 240,
        "classic_11": 240,
        "points1": 24,
        "points1_single": 24,
        "points1_double": 24,
    },
    80: {
        "modern10": 480,
        "simple_10_5": 480,
        "classic_11": 480,
        "points1": 48,
        "points1_single": 48,
        "points1_double": 48,
    },
}
SCHEME_BONUS = {"modern10": 10, "simple_10_5": 10, "classic_11": 10, "points1_single": 1}
SCHEME_BONUS.update({"points1_double": 2})


def fresh(variant: str, options: dict[str, object]) -> GameState:
    """A first hand dealt in canonical order (no-bid: the dealer's AS turned for trump)."""
    return begin(variant, options, turn_up="AS" if variant == "partnership-no-bid" else None)


def counted_game(variant: str, extra: dict[str, object], **options: object) -> dict[str, Any]:
    options = seat_game_options(variant, extra, **options)
    if variant == "cutthroat":
        options["all_pass"] = "dealer_stuck"  # a played hand, not a redeal
    return options


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize("scheme", list(CARD_TOTAL[48]))
def test_count_scheme_each_value_sets_the_points_of_a_played_hand(
    variant: str, extra: dict[str, object], scheme: str
) -> None:
    """§1.6 and A.2: the card points of a played hand (buried and discarded counters included)
    add up to the scheme's deck total plus the last-trick bonus the scheme brings when
    ``last_trick_bonus`` is left out (points1: 1 with 48 cards, 2 with 80); an explicit
    ``last_trick_bonus`` replaces it."""
    deck = 80 if variant == "double-deck" and extra.get("deck") != 48 else 48
    bonus = SCHEME_BONUS.get(scheme, 1 if deck == 48 else 2)
    options = counted_game(variant, extra, count_scheme=scheme)
    result = play_out(fresh(variant, options))
    assert sum(result["points"]) == CARD_TOTAL[deck][scheme] + bonus
    options = counted_game(variant, extra, count_scheme=scheme, last_trick_bonus=7)
    result = play_out(fresh(variant, options))
    assert sum(result["points"]) == CARD_TOTAL[deck][scheme] + 7


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize(
    ("scheme", "points"),
    [("modern10", 30), ("simple_10_5", 30), ("classic_11", 28), ("points1", 3)],
)
def test_count_scheme_values_of_one_trick(
    variant: str, extra: dict[str, object], scheme: str, points: int
) -> None:
    """§1.6's table, one trick: A 10 K (and Q in four-seat games) of clubs, no trump."""
    trick = ["AC", "10C", "KC", "QC"][: 3 if variant == "cutthroat" else 4]
    if variant == "cutthroat":
        points -= {"modern10": 0, "simple_10_5": 5, "classic_11": 3, "points1": 0}[scheme]
    options = seat_game_options(variant, extra, count_scheme=scheme)
    state, seat, _ = trick_position(variant, options, "H", trick[:-1], trick[-1], "DSH", "DSH")
    state = act(state, seat, "play", card=trick[-1])
    assert state.hand is not None and len(state.hand.tricks) == 1
    assert state.hand.tricks[0].points == points


# --------------------------------------------------------------------------------------------
# Saving meld (A.2, A.9 items 4 and 6, §10.3), on hands played out by a fixed policy


def frugal_out(state: GameState) -> tuple[GameState, dict[str, Any]]:
    """Play the hand out: each seat plays its legal card of the lowest card value (a non-trump
    before a trump, then the lower rank). Returns the state and the ``hand_result``."""
    assert state.hand is not None and state.hand.trump is not None
    trump = state.hand.trump
    value = state.setup.counting.card_value
    while state.hand is not None:
        seat = state.hand.turn
        cards = [parse_card(c) for c in legal_cards(state, seat)]
        card = min(cards, key=lambda c: (value[c], c // 6 == trump, -(c % 6)))
        state, events = apply(
            state, seat, decode_action({"type": "play", "card": format_card(card)})
        )
        for event in events:
            if event.kind == "hand_result":
                return state, dict(event.data)
    raise AssertionError("no hand result")


# Four seats, hearts trump, seat 1 leads (the declarer; no-bid: the dealer's left, the dealer 0
# turning its 9H). Seat 0 melds the 9H (dix) and KD QD. In ``nothing`` seat 1 wins every trick;
# in ``one_trick`` it leads 9S, seat 2 heads with a J or Q, seat 3 (no spades) follows with a
# zero card and seat 0 trumps with its 9H: team 0 takes one trick worth no card points.
SAVE_DEALS = {
    "nothing": (
        "9H KD QD AD AD 10D 10D JD JD 9D 9D AC",
        "AS AH AH 10H 10H KH KH QH QH JH JH 9H",
        "AS 10S 10S KS KS QS QS JS JS 9S 9S AC",
    ),
    "one_trick": (
        "9H KD QD AD AD 10D 10D JD JD 9D 9D AC",
        "9S AH AH 10H 10H KH KH QH QH JH JH 9H",
        "AS AS 10S 10S KS KS QS QS JS JS 9S AC",
    ),
}
FOUR_SEAT_SAVE_GAMES: list[tuple[str, dict[str, object]]] = [
    ("partnership", {"exchange_mode": "none"}),
    ("double-deck", {"deck": 48, "exchange_mode": "none"}),
    ("partnership-no-bid", {}),
]
FOUR_SEAT_SAVE_IDS = ["partnership", "double-deck-48", "partnership-no-bid"]


def team0_result(variant: str, options: dict[str, object], deal: str) -> dict[str, Any]:
    """The hand result of a SAVE_DEALS hand; team 0 has melded dix and a marriage."""
    no_bid = variant == "partnership-no-bid"
    state = begin(variant, options, SAVE_DEALS[deal], turn_up="9H" if no_bid else None)
    if not no_bid:
        state = win_auction(state, 1)
        state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {0: "9H KD QD"})
    _, result = frugal_out(state)
    return result


@pytest.mark.parametrize(("variant", "extra"), FOUR_SEAT_SAVE_GAMES, ids=FOUR_SEAT_SAVE_IDS)
@pytest.mark.parametrize(
    ("save_meld", "deal", "saved"),
    [
        ("none", "nothing", True),
        ("trick", "nothing", False),
        ("trick", "one_trick", True),
        ("trick_point", "one_trick", False),
        ("trick_point", "nothing", False),
        (0, "nothing", True),
        (1, "one_trick", False),
    ],
)
@pytest.mark.parametrize("dix_exempt", [True, False])
def test_save_meld_each_value(
    variant: str,
    extra: dict[str, object],
    save_meld: object,
    deal: str,
    saved: bool,
    dix_exempt: bool,
) -> None:
    """A.2 ``save_meld``: a side's meld counts only if it took a trick (``trick``), a card point
    (``trick_point``) or that many card points (an integer, A.9 item 4); ``none`` disables it.
    A side that fails keeps only its dix under ``dix_exempt_from_save``."""
    options = {**extra, "save_meld": save_meld, "dix_exempt_from_save": dix_exempt}
    result = team0_result(variant, options, deal)
    scale = 1 if variant == "double-deck" else 10
    assert result["points"][0] == 0
    assert result["saved"][0] is saved
    expected = 3 * scale if saved else (scale if dix_exempt else 0)
    assert result["delta"][0] == expected


@pytest.mark.parametrize(("variant", "extra"), FOUR_SEAT_SAVE_GAMES, ids=FOUR_SEAT_SAVE_IDS)
@pytest.mark.parametrize("minimum", [0, 2, 3, 4, -5])
def test_min_meld_to_record_each_value(
    variant: str, extra: dict[str, object], minimum: int
) -> None:
    """OPTIONS.md ``min_meld_to_record``: a side whose meld totals less than this records none
    (team 0 melds 30, or 3 on the x1 table)."""
    scale = 1 if variant == "double-deck" else 10
    options = {**extra, "save_meld": "none", "min_meld_to_record": minimum * scale}
    result = team0_result(variant, options, "nothing")
    assert result["delta"][0] == (3 * scale if minimum <= 3 else 0)


# Cutthroat: the bidder (seat 1) wins every trick; seat 0 melds its 9H and KD QD.
CT_NOTHING = (
    "9H KD QD",
    "AS AS AD AD AH AH 10H 10H KH KH QH QH JH JH 9H",
)


@pytest.mark.parametrize(
    ("save_meld", "saved"),
    [("none", True), ("trick", False), ("trick_point", False), (0, True), (1, False)],
)
@pytest.mark.parametrize("dix_exempt", [True, False])
def test_cutthroat_save_meld_each_value(save_meld: object, saved: bool, dix_exempt: bool) -> None:
    """§3.6: an opponent scores his meld provided he took a trick (default ``trick``); the other
    values as in A.2. Seat 0 took nothing."""
    options = {"min_bid": 50, "save_meld": save_meld, "dix_exempt_from_save": dix_exempt}
    state = begin("cutthroat", options, CT_NOTHING, widow="JS JS JD")
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {0: "9H KD QD"})
    state = act(state, 1, "discard", cards=["JS", "JS", "JD"])
    _, result = frugal_out(state)
    assert result["points"][0] == 0 and result["saved"][0] is saved
    assert result["delta"][0] == (30 if saved else 10 if dix_exempt else 0)


@pytest.mark.parametrize(
    ("variant", "extra", "scale"),
    [
        ("partnership", {"exchange_mode": "none", "min_bid": 20}, 10),
        ("double-deck", {"deck": 48, "exchange_mode": "none", "min_bid": 2}, 1),
        ("cutthroat", {"min_bid": 20}, 10),
    ],
    ids=["partnership", "double-deck-48", "cutthroat"],
)
@pytest.mark.parametrize("applies_to", ["both", "defenders"])
def test_save_applies_to_each_value(
    variant: str, extra: dict[str, object], scale: int, applies_to: str
) -> None:
    """A.2 ``save_applies_to``, §4.7: "It only matters if their meld alone covers the bid and
    they win no trick point." The declaring side melds 4 (x10: 40) against a bid of 2 (20) and
    takes no trick: ``both`` loses its meld, so it is set; ``defenders`` counts it."""
    options = {**extra, "save_applies_to": applies_to, "save_meld": "trick_point"}
    if variant == "cutthroat":
        # Seat 1 bids and holds marriages in clubs and diamonds, no heart; seat 2 holds every
        # heart and both AS; the widow is worth nothing.
        hands: tuple[str, ...] = ("", "KD QD KC QC", "AS AS AH AH 10H 10H KH KH QH QH JH JH 9H 9H")
        state = begin(variant, options, hands, widow="JS JS JD")
        declarer = 1
    else:
        # Seat 0 (the dealer) declares with marriages in clubs and diamonds; seat 1 holds every
        # heart, so it trumps the first lead and wins every trick.
        hands = ("KD QD KC QC", "AH AH 10H 10H KH KH QH QH JH JH 9H 9H")
        state = begin(variant, options, hands)
        declarer = 0
    state = win_auction(state, declarer)
    state = act(state, declarer, "declare_trump", suit="H")
    shown = {declarer: "KD QD KC QC"}
    state = meld_all(state, shown)
    if variant == "cutthroat":
        state = act(state, 1, "discard", cards=["JS", "JS", "JD"])
    _, result = frugal_out(state)
    side = 1 if variant == "cutthroat" else 0
    assert result["points"][side] == 0 and result["bid"] == 2 * scale
    expected = -2 * scale if applies_to == "both" else 4 * scale
    assert result["delta"][side] == expected
    assert result["saved"][side] is (applies_to == "defenders")


# --------------------------------------------------------------------------------------------
# Game end (A.7 item 9, OPTIONS.md "Game end")


def redealt(
    variant: str, extra: dict[str, object], scores: tuple[int, ...], **options: object
) -> GameState:
    """A bidding game's hand passed out (``all_pass: redeal``, delta 0) from ``scores``: the
    game-end check runs on exactly these totals ("after each completed hand (redeals
    included)")."""
    options = {**extra, "all_pass": "redeal", "allow_bid_or_redeal": False, **options}
    state = begin(variant, options)._replace(scores=scores)
    while state.hand is not None:
        state = act(state, state.hand.turn, "pass")
    return state


@pytest.mark.parametrize(("variant", "extra"), BIDDING_GAMES, ids=BIDDING_IDS)
@pytest.mark.parametrize("target", [1, 300, 777])
def test_target_each_value(variant: str, extra: dict[str, object], target: int) -> None:
    """OPTIONS.md ``target``: a side at or above it after a completed hand has reached it."""
    sides = 3 if variant == "cutthroat" else 2
    rest = (0,) * (sides - 1)
    reached = redealt(variant, extra, (target, *rest), target=target, margin_win=False)
    short = redealt(variant, extra, (target - 1, *rest), target=target, margin_win=False)
    assert reached.over and reached.winner == 0
    assert not short.over and short.winner is None


@pytest.mark.parametrize("target", [1, 500])
def test_target_partnership_no_bid(target: int) -> None:
    """``target`` in partnership-no-bid: team 1 takes 250 card points in SAVE_DEALS "nothing"."""
    for start, over in ((target - 250, True), (target - 251, False)):
        state = begin("partnership-no-bid", {"target": target}, SAVE_DEALS["nothing"], turn_up="9H")
        state = meld_all(state._replace(scores=(0, start)))
        state, result = frugal_out(state)
        assert result["delta"][1] == 250
        assert state.over is over and state.winner == (1 if over else None)


def both_cross(variant: str, options: dict[str, object], lead: int) -> GameState:
    """A played hand in which both the declaring side (seat 1's) and seat 0's side end at or
    above the target, seat 0's side ahead by ``lead`` (0: equal totals)."""
    if variant == "cutthroat":
        state = begin("cutthroat", {"min_bid": 50, **options}, CT_NOTHING, widow="JS JS JD")
    elif variant == "partnership-no-bid":
        state = begin(variant, options, SAVE_DEALS["nothing"], turn_up="9H")
    else:
        state = begin(variant, {"exchange_mode": "none", **options}, SAVE_DEALS["nothing"])
    target = state.rules.target
    ours = 3 if variant == "double-deck" else 30  # seat 0's meld, saved under save_meld none
    theirs = 25 if variant == "double-deck" else 250  # the declaring side's card points
    scores = [target - theirs, target - theirs, 0][: len(state.scores)]
    scores[0] = target - ours + lead
    state = state._replace(scores=tuple(scores))
    if state.rules.bidding:
        state = win_auction(state, 1)
        state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {0: "9H KD QD"})
    if variant == "cutthroat":
        state = act(state, 1, "discard", cards=["JS", "JS", "JD"])
    state, result = frugal_out(state)
    assert result["delta"][:2] == [ours, theirs]
    return state


@pytest.mark.parametrize(
    ("variant", "extra"),
    [
        ("cutthroat", {}),
        ("partnership", {}),
        ("double-deck", {"deck": 48, "margin_win": False}),
    ],
    ids=["cutthroat", "partnership", "double-deck-48"],
)
@pytest.mark.parametrize("both_reach", ["higher_total", "bidder_wins"])
def test_both_reach_each_value(variant: str, extra: dict[str, object], both_reach: str) -> None:
    """OPTIONS.md ``both_reach``: both sides reach the target in one hand, seat 0's side ahead:
    ``higher_total`` gives it the game, ``bidder_wins`` the declaring side (seat 1's)."""
    options = {**extra, "save_meld": "none", "both_reach": both_reach}
    state = both_cross(variant, options, 5)
    assert state.over and state.winner == (0 if both_reach == "higher_total" else 1)
    tied = both_cross(variant, options, 0)
    assert tied.winner == (None if both_reach == "higher_total" else 1)


def test_both_reach_partnership_no_bid_equal_totals_play_on() -> None:
    """§6.5: "If both sides cross the target in the same hand, the higher total wins; on equal
    totals, play another hand" (``higher_total``, the only value there)."""
    options: dict[str, object] = {"save_meld": "none"}
    assert both_cross("partnership-no-bid", options, 5).winner == 0
    tied = both_cross("partnership-no-bid", options, 0)
    assert not tied.over and tied.winner is None


@pytest.mark.parametrize(
    ("variant", "extra"),
    [("partnership", {}), ("double-deck", {}), ("double-deck", {"deck": 48})],
    ids=["partnership", "double-deck-80", "double-deck-48"],
)
@pytest.mark.parametrize("margin", [True, False])
def test_margin_win_each_value(variant: str, extra: dict[str, object], margin: bool) -> None:
    """OPTIONS.md ``margin_win``: a side leading by at least the target wins without reaching
    it (checked before both_reach)."""
    target = resolve_options(variant, extra).target
    ahead = redealt(variant, extra, (target - 1, -1), margin_win=margin)
    assert ahead.winner == (0 if margin else None)
    behind = redealt(variant, extra, (target - 1, 0), margin_win=margin)
    assert behind.winner is None
    # Both sides at the target, one leading by the target: the margin decides first.
    both = redealt(
        variant, extra, (target, 2 * target), margin_win=margin, both_reach="bidder_wins"
    )
    assert both.winner == 1


@pytest.mark.parametrize("margin", [True, False])
def test_margin_win_partnership_no_bid(margin: bool) -> None:
    """``margin_win`` in partnership-no-bid: team 1 (+250) ends 1500 ahead of team 0 (+30)."""
    state = begin(
        "partnership-no-bid",
        {"margin_win": margin, "save_meld": "none"},
        SAVE_DEALS["nothing"],
        turn_up="9H",
    )
    state = meld_all(state._replace(scores=(-280, 1000)), {0: "9H KD QD"})
    state, _ = frugal_out(state)
    assert state.scores == (-250, 1250)
    assert state.winner == (1 if margin else None)


# --------------------------------------------------------------------------------------------
# Meld table options (A.2, A.9 items 1-2), scored from a meld action


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize(
    ("options", "shown", "x10", "x1"),
    [
        ({}, "AH 10H KH QH JH KH", 150, 15),
        ({"run_shares_marriage_cards": True}, "AH 10H KH QH JH KH", 190, 19),
        ({"run_shares_marriage_cards": True}, "AH 10H KH QH JH KH QH", 230, 23),
        ({"run_shares_marriage_cards": False}, "AH 10H KH QH JH KH QH", 190, 19),
        ({"run_counts_its_royal_marriage": True}, "AH 10H KH QH JH", 190, 19),
        (
            {"run_counts_its_royal_marriage": True, "run_shares_marriage_cards": True},
            "AH 10H KH QH JH KH",
            230,
            23,
        ),
        ({"meld_values": {"pinochle": [50]}}, "QS QS JD JD", 100, 100),
        ({"meld_values": {"pinochle": [50, 70]}}, "QS QS JD JD", 70, 70),
        ({}, "KS QS KH QH KD QD KC QC", 240, 24),
        ({"meld_values": {"roundhouse_bonus": [7]}}, "KS QS KH QH KD QD KC QC", 247, 31),
    ],
)
def test_meld_options_change_the_scored_meld(
    variant: str,
    extra: dict[str, object],
    options: dict[str, object],
    shown: str,
    x10: int,
    x1: int,
) -> None:
    """A.9 item 1 (run options, §1.9's table: run + K 190, run + K + Q 230), A.2 ``meld_values``
    (a shorter list grows by the single value) and A.9 item 2 (``roundhouse_bonus`` once), as a
    meld action scores them (the best meld of the shown cards); hearts trump."""
    opts = seat_game_options(variant, extra, **options)
    if variant == "partnership-no-bid":  # trump: the dealer's turned 9H
        state = begin(variant, opts, ("9H", shown), turn_up="9H")
    else:
        state = win_auction(begin(variant, opts, ("", shown)), 1)
        state = act(state, 1, "declare_trump", suit="H")
    assert state.hand is not None and state.hand.turn == 1
    state = act(state, 1, "meld", cards=shown.split())
    record = state.hand.melds[1] if state.hand is not None else None
    assert record is not None
    assert record.points == (x1 if variant == "double-deck" else x10)


# head_rule x head_over_partner on a trump lead the partner is winning, and head_when_trumped
# x head_over_partner when the partner has trumped.
PARTNER_ROWS: list[tuple[dict[str, object], list[str]]] = [
    ({"head_rule": "always", "head_over_partner": True}, ["AH"]),
    ({"head_rule": "always", "head_over_partner": False}, ["AH", "QH"]),
    ({"head_rule": "trump_lead_only", "head_over_partner": True}, ["AH"]),
    ({"head_rule": "trump_lead_only", "head_over_partner": False}, ["AH", "QH"]),
    ({"head_rule": "never", "head_over_partner": True}, ["AH", "QH"]),
]


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize(("options", "expected"), PARTNER_ROWS)
def test_head_rule_with_head_over_partner_on_a_trump_lead(
    variant: str, extra: dict[str, object], options: dict[str, object], expected: list[str]
) -> None:
    """§1.5 and A.9 item 10: a trump lead is headed under ``always`` and ``trump_lead_only``,
    except that ``head_over_partner: false`` waives it while the partner's card wins."""
    # Four seats: seat 1 leads KH, seat 2 plays JH, seat 3 (seat 1's partner) holds AH QH.
    # Cutthroat: seat 1 (the bidder) leads JH, seat 2 heads with KH, seat 0 is seat 2's partner.
    trick = ["JH", "KH"] if variant == "cutthroat" else ["KH", "JH"]
    opts = seat_game_options(variant, extra, **options)
    state, seat, _ = trick_position(variant, opts, "H", trick, "AH QH", "DSC", "SCD")
    assert legal_cards(state, seat) == expected


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize("over_partner", [True, False])
def test_head_when_trumped_with_the_partner_winning(
    variant: str, extra: dict[str, object], over_partner: bool
) -> None:
    """``head_when_trumped: beat_highest_led_card`` with the partner's trump winning: A.9 item
    10 makes following suit enough under ``head_over_partner: false``."""
    # Four seats: seat 1 leads 10C, seat 2 trumps with QH, seat 3 plays JC; seat 0 (seat 2's
    # partner) holds AC QC. Cutthroat: seat 1 leads 10C, seat 2 trumps, seat 0 (its partner).
    trick = ["10C", "QH"] if variant == "cutthroat" else ["10C", "QH", "JC"]
    options = seat_game_options(
        variant,
        extra,
        head_when_trumped="beat_highest_led_card",
        head_over_partner=over_partner,
    )
    state, seat, _ = trick_position(variant, options, "H", trick, "AC QC", "DS", "HS")
    assert legal_cards(state, seat) == (["AC"] if over_partner else ["AC", "QC"])


@pytest.mark.parametrize(("variant", "extra"), SEAT_GAMES, ids=GAME_IDS)
@pytest.mark.parametrize("over_partner", [True, False])
def test_a_void_player_over_trumps_its_partner_whatever_head_over_partner(
    variant: str, extra: dict[str, object], over_partner: bool
) -> None:
    """A.9 item 10 waives heading only for a player *following suit* (README "Rulings"): one
    out of the led suit still trumps and over-trumps its partner's winning trump."""
    # As above, but seat 0 holds no club: AH JH, then spades, diamonds and what hearts are left.
    trick = ["10C", "QH"] if variant == "cutthroat" else ["10C", "QH", "JC"]
    options = seat_game_options(
        variant,
        extra,
        must_trump_when_void=True,
        must_overtrump=True,
        head_over_partner=over_partner,
    )
    state, seat, hand = trick_position(variant, options, "H", trick, "AH JH", "SDH", "HDS")
    over_trumps = {card for card in hand if card in ("AH", "10H", "KH")}
    assert "AH" in over_trumps and not any(card.endswith("C") for card in hand)
    assert set(legal_cards(state, seat)) == over_trumps  # not JH, nor a diamond or spade


# The 80-card deck (no nines, 20 cards each), hearts trump, seat 1 declares and leads. Seat 0
# melds KD QD (2) and holds the 20th heart, a JH. In ``nothing`` seat 1 (AS and 19 hearts) wins
# every trick; in ``one_trick`` seat 1 leads JS, seat 2 heads with QS, seat 3 (no spade, no
# trump) throws a zero card and seat 0 trumps with its JH: team 0 takes one trick worth no card
# point.
def dd80_save_deal(deal: str) -> tuple[str, ...]:
    hearts = _suit_cards(80, "H")
    spades = _suit_cards(80, "S")
    plain = _suit_cards(80, "D") + _suit_cards(80, "C")
    for card in ("KD", "QD"):
        plain.remove(card)
    lead = "AS" if deal == "nothing" else "JS"
    head = "AS" if deal == "nothing" else "QS"
    spades.remove(lead)
    spades.remove(head)
    seat1 = [lead, *hearts[:19]]
    seat2 = [head, *spades, plain.pop(0)]  # 19 spades and one plain card
    seat3 = plain[:20]
    seat0 = ["KD", "QD", hearts[19], *plain[20:]]
    assert [len(h) for h in (seat0, seat1, seat2, seat3)] == [20] * 4
    return tuple(" ".join(h) for h in (seat0, seat1, seat2, seat3))


@pytest.mark.parametrize(
    ("save_meld", "deal", "saved"),
    [
        ("none", "nothing", True),
        ("trick", "nothing", False),
        ("trick", "one_trick", True),
        ("trick_point", "one_trick", False),
        (0, "nothing", True),
        (1, "one_trick", False),
        (20, "one_trick", False),
    ],
)
def test_save_meld_each_value_double_deck_80(save_meld: object, deal: str, saved: bool) -> None:
    """A.2 ``save_meld`` with 80 cards (default 20 card points, §5.6)."""
    options = {"exchange_mode": "none", "trump_requires_marriage": False, "save_meld": save_meld}
    state = begin("double-deck", options, dd80_save_deal(deal))
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {0: "KD QD"})
    _, result = frugal_out(state)
    assert result["points"][0] == 0 and result["saved"][0] is saved
    assert result["delta"][0] == (2 if saved else 0)


@pytest.mark.parametrize("applies_to", ["both", "defenders"])
def test_save_applies_to_each_value_double_deck_80(applies_to: str) -> None:
    """A.2 ``save_applies_to`` with 80 cards: seat 0 declares at 2 with marriages in clubs and
    diamonds (4); seat 1 holds every heart and wins every trick."""
    options = {
        "exchange_mode": "none",
        "trump_requires_marriage": False,
        "min_bid": 2,
        "save_applies_to": applies_to,
    }
    hearts = " ".join(_suit_cards(80, "H"))
    state = begin("double-deck", options, ("KD QD KC QC", hearts))
    state = win_auction(state, 0)
    state = act(state, 0, "declare_trump", suit="H")
    state = meld_all(state, {0: "KD QD KC QC"})
    _, result = frugal_out(state)
    assert result["points"][0] == 0 and result["bid"] == 2
    assert result["delta"][0] == (-2 if applies_to == "both" else 4)
