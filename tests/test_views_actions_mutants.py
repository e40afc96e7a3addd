"""What each seat may see, and how actions are read and written, that mutation testing found
unpinned (RULES.md A.4, A.5, A.10 items 3-4).

Each test names the rule it pins. They were written against mutants of
``referee/engine/views.py``, ``referee/engine/actions.py`` and ``referee/rules/dealing.py`` that
the rest of the suite let through (seat -1 taken as a role, the views' memo left unbounded, a
play that is not a plain dict decoded as something else, a meld name left unchecked, a
malformed field misnamed, actions and deals made mutable, the shuffle's last swap skipped, a
deal's defaults flipped, ...); each test fails with its mutant applied and passes without it.
No mutant let a role the service hands out see another seat's concealed cards; seat -1, which
no caller passes, would have shown the last seat's hand, and is pinned here as refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import pytest

from referee.engine import views as views_module
from referee.engine.actions import (
    ACTION_FIELDS,
    ACTION_TYPES,
    Action,
    Bid,
    BidOrRedeal,
    Concede,
    DeclaredCombination,
    DeclareTrump,
    Discard,
    Draw,
    ExchangeDix,
    Meld,
    Pass,
    PassCards,
    Play,
    action_type,
    decode_action,
    encode_action,
)
from referee.engine.errors import IllegalAction
from referee.engine.state import GameState, HandState
from referee.engine.views import SPECTATOR, clear_memo, view
from referee.rules.cards import (
    Card,
    canonical_deck,
    format_cards,
    parse_card,
    parse_cards,
    parse_suit,
)
from referee.rules.dealing import (
    deal_from_order,
    seeded_deal,
    seeded_shuffle,
)
from tests.test_violations import p_play, p_trick


def _cards(text: str) -> tuple[Card, ...]:
    return tuple(parse_cards(text.split()))


def hand(state: GameState) -> HandState:
    assert state.hand is not None
    return state.hand


# --------------------------------------------------------------------------------------------
# Views (A.10 item 3)


def _hand_view(state: GameState, role: int | str) -> dict[str, Any]:
    seen = view(state, role)["hand"]
    assert isinstance(seen, dict)
    return seen


@pytest.mark.parametrize("role", [-1, -4, 4])
def test_a_seat_number_outside_the_table_is_not_a_role(role: int) -> None:
    """A.10 item 3: a seat sees its own concealed cards and nobody else's. Seat -1 would index
    the last seat's hand (``hands[-1]``) and show seat 3's cards, so it is refused like seat 4."""
    state = p_play()
    with pytest.raises(ValueError):
        view(state, role)
    assert _hand_view(state, 3)["cards"] == format_cards(hand(state).hands[3])


# The memo of a hand's unchanging parts (views.py ``_PARTS``): shared by every view, bounded.


def test_views_of_one_state_share_the_memoised_parts() -> None:
    """views.py: the auction, melds and tricks of a hand are built once per tuple and shared by
    every view that shows them (a quarter of a view's cost, bench/instructions.py)."""
    clear_memo()
    state = p_trick(3)
    first = _hand_view(state, 0)
    second = _hand_view(state, SPECTATOR)
    for part in ("auction", "melds", "tricks"):
        assert first[part] is second[part], part
    assert first["auction"] == second["auction"] != []


def test_clear_memo_empties_the_memo() -> None:
    """views.py: ``clear_memo`` empties the memo every game shares (bench/game_memory.py
    measures one game without it)."""
    view(p_play(), SPECTATOR)
    assert views_module._PARTS
    clear_memo()
    assert not views_module._PARTS


def test_the_memo_never_holds_more_than_its_bound() -> None:
    """views.py: the memo is emptied when full, so a long-running service's memo stays within
    ``_PARTS_MAX`` entries however many hands it shows."""
    clear_memo()
    keep = [(i,) for i in range(views_module._PARTS_MAX + 1)]
    for part in keep:
        views_module._part(part, list)
        assert len(views_module._PARTS) <= views_module._PARTS_MAX
    assert views_module._part(keep[-1], list) == [len(keep) - 1]
    clear_memo()


# --------------------------------------------------------------------------------------------
# Decoding and encoding actions (A.4, A.5 MALFORMED_ACTION)


def _malformed(data: object) -> IllegalAction:
    with pytest.raises(IllegalAction) as info:
        decode_action(data)
    assert info.value.code == "MALFORMED_ACTION"
    return info.value


def test_action_types_are_listed_in_the_contracts_order() -> None:
    """A.4: the eleven action types, in the contract's order; ``ACTION_TYPES`` (which the
    service's tests and the unknown-type message list) names the same types ``ACTION_FIELDS``
    decodes."""
    assert tuple(ACTION_FIELDS) == ACTION_TYPES
    assert ACTION_TYPES == (
        "bid",
        "pass",
        "bid_or_redeal",
        "declare_trump",
        "pass_cards",
        "discard",
        "meld",
        "exchange_dix",
        "concede",
        "draw",
        "play",
    )


def test_a_play_given_as_another_mapping_is_decoded_as_a_play() -> None:
    """A.4: an action is a JSON object, whatever mapping type holds it; a card play that is not
    a plain dict misses the fast path and must still decode as the play it is."""
    data = MappingProxyType({"type": "play", "card": "10C"})
    assert decode_action(data) == Play(parse_card("10C"))
    recorded = MappingProxyType({"seat": 1, "type": "play", "card": "10C"})
    assert decode_action(recorded, seat_key=True) == Play(parse_card("10C"))


@pytest.mark.parametrize(
    ("kind", "field"),
    [
        ("bid", "amount"),
        ("declare_trump", "suit"),
        ("pass_cards", "cards"),
        ("discard", "cards"),
        ("meld", "cards"),
        ("draw", "turn_up"),
        ("play", "card"),
    ],
)
def test_an_action_without_a_required_field_names_it(kind: str, field: str) -> None:
    """A.4, A.5: every action type's required field, left out, is MALFORMED_ACTION naming that
    field (never a KeyError from reading it)."""
    assert _malformed({"type": kind}).field == field


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"type": "meld", "cards": [], "melds": "marriage"}, "melds"),
        ({"type": "meld", "cards": ["KS", "ZZ"]}, "cards[1]"),
        ({"type": "meld", "cards": [], "points": "40"}, "points"),
        ({"type": "discard", "cards": ["9D", "ZZ"]}, "cards[1]"),
        ({"type": "draw", "turn_up": "yes"}, "turn_up"),
        (MappingProxyType({"type": "play", "card": "ZZ"}), "card"),
    ],
)
def test_a_malformed_value_names_its_field(data: object, field: str) -> None:
    """A.5 MALFORMED_ACTION (README, Errors): the error names the offending field, for every
    field of every type (these fields' paths were not checked elsewhere)."""
    assert _malformed(data).field == field


def test_the_canonical_form_of_each_action() -> None:
    """A.4: ``encode_action`` writes the canonical form: optional fields only when given (a
    two-handed meld's name first), and ``action_type`` names the type the form carries."""
    ks, qs = parse_card("KS"), parse_card("QS")
    assert encode_action(Meld((ks, qs))) == {"type": "meld", "cards": ["KS", "QS"]}
    named = Meld((ks, qs), name="marriage")
    assert encode_action(named) == {"type": "meld", "name": "marriage", "cards": ["KS", "QS"]}
    assert list(encode_action(named)) == ["type", "name", "cards"]
    claimed = Meld((ks, qs), (DeclaredCombination("marriage", (ks, qs)),), 20)
    assert encode_action(claimed) == {
        "type": "meld",
        "cards": ["KS", "QS"],
        "melds": [{"name": "marriage", "cards": ["KS", "QS"]}],
        "points": 20,
    }
    for action in (Play(ks), Pass(), named, Draw(turn_up=False), Bid(250), ExchangeDix()):
        assert action_type(action) == encode_action(action)["type"]


def test_actions_are_immutable_values() -> None:
    """Actions are values (states that hold them are immutable and shared): equal actions hash
    alike and a field cannot be assigned."""
    card = parse_card("QS")
    actions: list[Action] = [
        Bid(250),
        Pass(help=True),
        BidOrRedeal(),
        DeclareTrump(parse_suit("H")),
        PassCards((card,)),
        Discard((card,)),
        Meld((card,), (DeclaredCombination("pinochle", (card,)),), 40, None),
        ExchangeDix(),
        Concede(),
        Draw(turn_up=True),
        Play(card),
    ]
    for action in actions:
        assert hash(action) == hash(decode_action(encode_action(action)))
        assert decode_action(encode_action(action)) == action
        for f in dataclasses.fields(action):
            with pytest.raises(AttributeError):
                setattr(action, f.name, None)
    assert hash(actions[-1]) == hash(Play(parse_card("QS")))


def test_a_meld_name_that_is_not_a_string_is_malformed() -> None:
    """A.4: a two-handed meld's ``name`` is a string; any other value is MALFORMED_ACTION on the
    field ``name`` (null is the field left out)."""
    assert _malformed({"type": "meld", "cards": ["KS", "QS"], "name": 5}).field == "name"
    assert _malformed({"type": "meld", "cards": [], "name": ["marriage"]}).field == "name"
    assert decode_action({"type": "meld", "cards": [], "name": None}) == Meld(cards=())
    named = decode_action({"type": "meld", "cards": ["KS", "QS"], "name": "marriage"})
    assert named == Meld(cards=(parse_card("KS"), parse_card("QS")), name="marriage")


def test_a_pass_without_help_is_a_plain_pass() -> None:
    """A.4: ``help`` is optional and false when left out; a plain pass encodes without it."""
    assert Pass() == Pass(help=False) == decode_action({"type": "pass"})
    assert encode_action(Pass()) == {"type": "pass"}


# --------------------------------------------------------------------------------------------
# Dealing (A.10 item 4)


def _shuffle_as_written(cards: Sequence[Card], seed: str) -> list[Card]:
    """A.10 item 4 read literally: Fisher-Yates from the last index down to 1, j uniform in
    [0, i] by rejection sampling on 64-bit words, word k = the first 8 bytes (big-endian) of
    SHA-256(seed as UTF-8 + k as 8-byte big-endian)."""
    deck = list(cards)
    k = 0
    for i in range(len(deck) - 1, 0, -1):
        n = i + 1
        while True:
            digest = hashlib.sha256(seed.encode("utf-8") + k.to_bytes(8, "big")).digest()
            word = int.from_bytes(digest[:8], "big")
            k += 1
            if word < 2**64 - 2**64 % n:
                break
        j = word % n
        deck[i], deck[j] = deck[j], deck[i]
    return deck


@pytest.mark.parametrize("seed", ["", "0", "table 7", "Ære"])
def test_the_seeded_shuffle_is_fisher_yates_down_to_index_1(seed: str) -> None:
    """A.10 item 4: the whole shuffled order, not only the hands it deals (a swap of the first
    two cards, both in the first packet, would not change any sorted hand), is portable."""
    deck = canonical_deck(48)
    assert seeded_shuffle(deck, seed) == _shuffle_as_written(deck, seed)


def test_a_deal_is_neither_two_handed_nor_turned_unless_asked() -> None:
    """A.10 item 4: by default the cards after the packets are the widow (or kitty), in order,
    with no stock and no turned card; only two-handed and ``partnership-no-bid`` ask for
    those."""
    deck = canonical_deck(48)
    deal = deal_from_order(deck, players=3, hand_size=15, dealer=0)
    assert (deal.widow, deal.stock, deal.turn_up) == (tuple(deck[45:]), (), None)
    seeded = seeded_deal("s", deck_size=48, players=3, hand_size=15, dealer=0)
    assert (len(seeded.widow), seeded.stock, seeded.turn_up) == (3, (), None)


def test_a_deal_is_an_immutable_value() -> None:
    """A deal is handed to the engine and kept in its immutable state: equal deals hash alike
    and a field cannot be assigned."""
    deal = seeded_deal("s", deck_size=48, players=4, hand_size=12, dealer=0)
    again = seeded_deal("s", deck_size=48, players=4, hand_size=12, dealer=0)
    assert deal == again and hash(deal) == hash(again)
    with pytest.raises(AttributeError):
        deal.widow = ()  # type: ignore[misc]


def test_the_turned_card_is_the_dealers_last_card_whatever_follows() -> None:
    """A.10 item 4, ``partnership-no-bid``: the dealer takes the last packet and its last card
    (before sorting) is turned for trump: card ``n*h - 1`` of the order, not the deck's last."""
    deck = canonical_deck(48)
    deal = deal_from_order(deck, players=3, hand_size=15, dealer=0, dealer_turns_last_card=True)
    assert deal.turn_up == deck[44] and deal.turn_up in deal.hands[0]
    assert deal.widow == tuple(deck[45:])
