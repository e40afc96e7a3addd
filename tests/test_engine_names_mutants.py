"""The engine's contract names that mutation testing found unpinned (RULES.md A.4, A.7, A.10).

Each test names the shape it pins. They were written against mutants of
``referee/engine/engine.py`` that change one string constant and that the rest of the suite
let through: the key names of most events' data (the kinds of ``trump_declared``,
``card_played`` and the kitty events too), of the verdict's per-hand object, the field a
refusal names, and the variant name that makes the two-handed meld table count per set.
Clients, recorded games and the audit read those names, so a misspelt one breaks the contract
without breaking the game. Each test fails with its mutants applied and passes without them.
Messages (the human-readable text of a refusal) are not pinned here.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import (
    apply,
    hand_progress,
    legal_actions,
    make_setup,
    new_game,
    start_hand,
)
from referee.engine.state import GameState
from referee.rules.options import resolve_options
from tests.test_violations import (
    CT_DECLARER,
    NO_EXCHANGE,
    PLAY_HANDS,
    begin,
    ct_bury,
    dd_auction,
    dd_kitty,
    dd_trump,
    make_deal,
    meld_all,
    nb_meld,
    p_auction,
    p_meld,
    p_partner_pass,
    p_play,
    p_trick,
    p_trump,
    refuse_json,
    win_auction,
)

Json = dict[str, object]


def send(state: GameState, seat: int, kind: str, **fields: object) -> tuple[GameState, list[Json]]:
    """Apply one action (JSON form, A.4); the new state and its events as JSON."""
    new, events = apply(state, seat, decode_action({"type": kind, **fields}))
    return new, [e.to_json() for e in events]


def without_deal(event: Json) -> Json:
    """``event`` with its ``deal`` object (checked elsewhere) replaced by its key names."""
    deal = event.get("deal")
    if isinstance(deal, dict):
        return {**event, "deal": sorted(deal)}
    return event


# --------------------------------------------------------------------------------------------
# The per-game rule objects (A.2, A.9 item 3)


def test_the_two_handed_meld_table_counts_every_set_at_its_single_value() -> None:
    """A.2 ``meld_values``, A.9 item 3, A.10 item 5: in ``two-handed`` every meld is one set, so
    only the first value of a list counts and two sets are worth twice it: with ``pinochle:
    [40, 300]`` two pinochles make 80, not the 300 a whole-hand variant reads from the list."""
    options: dict[str, object] = {"meld_values": {"pinochle": [40, 300]}}
    two_handed = make_setup(resolve_options("two-handed", options)).meld_table
    assert (two_handed.value("pinochle", 1), two_handed.value("pinochle", 2)) == (40, 80)
    partnership = make_setup(resolve_options("partnership", options)).meld_table
    assert partnership.value("pinochle", 2) == 300


# --------------------------------------------------------------------------------------------
# Dealing (A.10 items 3-4)


def test_a_hand_opens_with_hand_started_each_seats_cards_and_the_sealed_deal() -> None:
    """A.10 item 3: every role sees the hand number and the dealer; a seat sees its own cards;
    the deal itself is sealed until the hand ends. The event kinds and keys are the contract."""
    rules = resolve_options("partnership", {})
    deal = make_deal(rules, PLAY_HANDS)
    _, events = start_hand(new_game(rules, 2), deal)
    shown = [without_deal(e.to_json()) for e in events]
    assert shown[0] == {"kind": "hand_started", "audience": "everyone", "hand": 0, "dealer": 2}
    assert shown[1] == {
        "kind": "cards_dealt",
        "audience": 0,
        "hand": 0,
        "cards": PLAY_HANDS[0].split(),
    }
    assert [e["kind"] for e in shown[1:5]] == ["cards_dealt"] * 4
    assert shown[5]["kind"] == "deal" and shown[5]["hand"] == 0
    assert events[5].data["deal"] == deal.to_json()


# --------------------------------------------------------------------------------------------
# Auction, contract and trump (A.4, A.7 items 1-3)


def test_auction_calls_are_call_events_with_seat_type_amount_and_help() -> None:
    """A.10 item 3: the auction calls are public, ``help`` flags included. A call event names
    the seat and the call's A.4 type; a bid adds its amount, a pass with help ``help: true``."""
    state, events = send(p_auction(), 1, "bid", amount=250)
    assert events == [
        {"kind": "call", "audience": "everyone", "seat": 1, "type": "bid", "amount": 250}
    ]
    state, events = send(state, 2, "pass", help=True)
    assert events == [
        {"kind": "call", "audience": "everyone", "seat": 2, "type": "pass", "help": True}
    ]
    _, events = send(state, 3, "pass")
    assert events == [{"kind": "call", "audience": "everyone", "seat": 3, "type": "pass"}]


def test_a_bid_or_redeal_call_and_a_redeal_are_named_as_the_contract_says() -> None:
    """A.4 ``bid_or_redeal``: the call event's type is the action's name, and a round of such
    calls with no numeric bid is a ``redeal`` of that hand number. The stuck dealer is not
    forced to bid after a bid-or-redeal call."""
    state = begin("double-deck", {"allow_bid_or_redeal": True})
    state, events = send(state, 1, "bid_or_redeal")
    assert events == [{"kind": "call", "audience": "everyone", "seat": 1, "type": "bid_or_redeal"}]
    state, _ = send(state, 2, "pass")
    state, _ = send(state, 3, "pass")
    assert {"type": "pass"} in legal_actions(state, 0)
    _, events = send(state, 0, "pass")
    assert events[-3:-2] == [{"kind": "redeal", "audience": "everyone", "hand": 0}]


def test_the_contract_and_trump_events_name_declarer_bid_seat_and_suit() -> None:
    """A.10 item 3: the contract and trump are public: ``contract {declarer, bid}``, then
    ``trump_declared {seat, suit}``."""
    state = p_auction()
    state, _ = send(state, 1, "bid", amount=250)
    state, _ = send(state, 2, "pass")
    state, _ = send(state, 3, "pass")
    state, events = send(state, 0, "pass")
    assert events[-1] == {"kind": "contract", "audience": "everyone", "declarer": 1, "bid": 250}
    _, events = send(p_trump(), 1, "declare_trump", suit="H")
    assert events == [{"kind": "trump_declared", "audience": "everyone", "seat": 1, "suit": "H"}]


# --------------------------------------------------------------------------------------------
# Widow, kitty and the partner exchange (A.7 item 1, A.10 item 3)


def test_the_cutthroat_widow_is_shown_to_all_as_widow_taken() -> None:
    """A.10 item 3: the cutthroat widow is shown to all when it joins the declarer's hand."""
    state = begin("cutthroat", {}, ("", CT_DECLARER), widow="9D 9D 9C")
    state, _ = send(state, 1, "bid", amount=300)
    state, _ = send(state, 2, "pass")
    _, events = send(state, 0, "pass")
    assert events[-1] == {
        "kind": "widow_taken",
        "audience": "everyone",
        "seat": 1,
        "cards": ["9D", "9D", "9C"],
    }


def test_a_kitty_is_counted_to_all_and_shown_to_the_declarer_then_discarded() -> None:
    """A.10 item 3: a kitty and the discards are seen by the declarer only; everyone sees how
    many cards were taken and discarded (``kitty_taken``/``cards_discarded`` with a count,
    ``kitty_cards``/``discarded_cards`` with the cards, to the declarer's seat)."""
    state = begin(
        "double-deck", {"exchange_mode": "kitty"}, ("", "KS QS AS 10S KD"), widow="JD JD JD JD"
    )
    state, _ = send(state, 1, "bid", amount=50)
    state, _ = send(state, 2, "pass")
    state, _ = send(state, 3, "pass")
    _, events = send(state, 0, "pass")
    assert events[-2:] == [
        {"kind": "kitty_taken", "audience": "everyone", "seat": 1, "count": 4},
        {"kind": "kitty_cards", "audience": 1, "cards": ["JD", "JD", "JD", "JD"]},
    ]
    _, events = send(dd_kitty(), 1, "discard", cards=["JD", "JD", "JD", "KD"])
    assert events[:2] == [
        {"kind": "cards_discarded", "audience": "everyone", "seat": 1, "count": 4},
        {"kind": "discarded_cards", "audience": 1, "cards": ["KD", "JD", "JD", "JD"]},
    ]


def test_a_partner_exchange_is_counted_to_all_and_shown_to_the_receiver() -> None:
    """A.10 item 3: the number of cards passed is public (``cards_passed {from, to, count}``),
    which cards only to the seat they were passed to (``cards_received {from, cards}``)."""
    state = p_trump()
    state, _ = send(state, 1, "declare_trump", suit="H")
    _, events = send(state, 3, "pass_cards", cards=["QS", "QS", "JS", "JS"])
    assert events == [
        {"kind": "cards_passed", "audience": "everyone", "from": 3, "to": 1, "count": 4},
        {"kind": "cards_received", "audience": 1, "from": 3, "cards": ["QS", "QS", "JS", "JS"]},
    ]


# --------------------------------------------------------------------------------------------
# Meld and the dix (A.2, A.7 item 7)


def test_a_meld_event_lists_name_level_points_and_cards_per_combination() -> None:
    """A.2: "A meld answer lists ``{name, level, points, cards}`` per combination"; the
    ``meld_scored`` event also names the seat, the cards shown and the total."""
    state = win_auction(begin("partnership", dict(NO_EXCHANGE), ("", "KH QH 9H")), 1)
    state, _ = send(state, 1, "declare_trump", suit="H")
    _, events = send(state, 1, "meld", cards=["KH", "QH", "9H"])
    assert events == [
        {
            "kind": "meld_scored",
            "audience": "everyone",
            "seat": 1,
            "cards": ["KH", "QH", "9H"],
            "melds": [
                {"name": "royal_marriage", "level": 1, "points": 40, "cards": ["KH", "QH"]},
                {"name": "dix", "level": 1, "points": 10, "cards": ["9H"]},
            ],
            "points": 50,
        }
    ]


def test_a_dix_exchange_names_the_seat_the_cards_and_its_points() -> None:
    """A.7 item 7: the no-bid dix exchange is public: ``dix_exchanged {seat, took, gave,
    points}``; it scores at once in the in-progress verdict."""
    state, events = send(nb_meld(), 1, "exchange_dix")
    assert events == [
        {
            "kind": "dix_exchanged",
            "audience": "everyone",
            "seat": 1,
            "took": "AH",
            "gave": "9H",
            "points": 10,
        }
    ]
    assert state.hand is not None
    assert hand_progress(state.setup, state.hand)["meld"] == [0, 10, 0, 0]


# --------------------------------------------------------------------------------------------
# Play, concession and the end of a hand (A.7 items 4-10, GAME_RECORD.md §2)


def test_a_card_played_event_names_the_seat_and_the_card() -> None:
    """A.10 item 3: every card played to every trick is public: ``card_played {seat, card}``."""
    _, events = send(meld_all(p_meld()), 1, "play", card="10C")
    assert events == [{"kind": "card_played", "audience": "everyone", "seat": 1, "card": "10C"}]


def test_a_concession_ends_the_hand_with_the_verdicts_per_hand_object() -> None:
    """A.7 items 4 and 10: ``conceded {seat, no_trump}``, then ``hand_result`` with every field
    of the verdict's per-hand object and the running scores, then the deal revealed to all
    (``deal_revealed {hand, deal}``) and, when the game is decided, ``game_over {winner,
    scores}``."""
    state = win_auction(p_auction(target=10, **NO_EXCHANGE), 1)
    state, _ = send(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {0: "KD QD"})
    assert state.hand is not None
    deal = state.hand.deal.to_json()
    state, events = send(state, 1, "concede")
    assert state.over
    assert events == [
        {"kind": "conceded", "audience": "everyone", "seat": 1, "no_trump": False},
        {
            "kind": "hand_result",
            "audience": "everyone",
            "hand": 0,
            "dealer": 0,
            "declarer": 1,
            "bid": 250,
            "trump": "H",
            "conceded": True,
            "hopeless": False,
            "meld": [20, 0, 0, 0],
            "points": [0, 0],
            "delta": [20, -250],
            "saved": [True, False],
            "scores": [20, -250],
        },
        {"kind": "deal_revealed", "audience": "everyone", "hand": 0, "deal": deal},
        {"kind": "game_over", "audience": "everyone", "winner": 0, "scores": [20, -250]},
    ]


# --------------------------------------------------------------------------------------------
# The field a refusal names (A.5, README Errors)


def _two_handed_unstarted() -> GameState:
    return new_game(resolve_options("two-handed", {}), 0)


@pytest.mark.parametrize(
    ("position", "seat", "action", "code", "field"),
    [
        (dd_auction, 1, {"type": "pass", "help": True}, "MALFORMED_ACTION", "help"),
        (
            _two_handed_unstarted,
            1,
            {"type": "meld", "cards": ["KH", "QH"]},
            "MALFORMED_ACTION",
            "name",
        ),
        (
            p_meld,
            1,
            {"type": "meld", "name": "marriage", "cards": ["KC", "QC"]},
            "MALFORMED_ACTION",
            "name",
        ),
        (p_auction, 1, {"type": "bid", "amount": 240}, "BID_TOO_LOW", "amount"),
        (p_auction, 1, {"type": "bid", "amount": 255}, "BID_BAD_RAISE", "amount"),
        (dd_trump, 1, {"type": "declare_trump", "suit": "H"}, "TRUMP_NEEDS_MARRIAGE", "suit"),
        (
            p_partner_pass,
            3,
            {"type": "pass_cards", "cards": ["AS", "AS", "AS", "AS"]},
            "CARD_NOT_IN_HAND",
            "cards",
        ),
        (
            p_partner_pass,
            3,
            {"type": "pass_cards", "cards": ["QS", "QS", "JS"]},
            "WRONG_CARD_COUNT",
            "cards",
        ),
        (ct_bury, 1, {"type": "discard", "cards": ["KS", "9D", "9D"]}, "CANNOT_BURY_MELD", "cards"),
        (p_meld, 1, {"type": "meld", "cards": ["KC", "QS"]}, "CARD_NOT_IN_HAND", "cards"),
        (
            p_meld,
            1,
            {"type": "meld", "cards": ["KC", "QC"], "points": 30},
            "MELD_MISCOUNT",
            "points",
        ),
        (p_play, 1, {"type": "play", "card": "AS"}, "CARD_NOT_IN_HAND", "card"),
        (lambda: p_trick(1), 2, {"type": "play", "card": "AS"}, "MUST_FOLLOW_SUIT", "card"),
    ],
)
def test_a_refusal_names_the_offending_field(
    position: Callable[[], GameState], seat: int, action: Json, code: str, field: str
) -> None:
    """A.5 and the README (Errors): a refusal carries its code and the action field at fault, so
    a client can point at it: ``help`` or ``name`` for an option-dependent malformed field,
    ``amount`` for a bid, ``suit`` for trump, ``cards`` for shown, passed or buried cards,
    ``points`` for a meld claim, ``card`` for a play."""
    error = refuse_json(position(), seat, action)
    assert (error.code, error.field) == (code, field)
