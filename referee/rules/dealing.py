"""Dealing: the portable seeded shuffle (A.10 item 4), splitting a deck, and deal commitments.

A deal is the chance event at the start of a hand. The engine never draws randomness itself: a
``Deal`` is handed to it (explicit, from a seed, or from a secure source chosen by the caller), so
``apply`` stays pure and a game's action log replays exactly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from referee.rules.cards import Card, canonical_deck, format_card, format_cards
from referee.rules.frozen import Frozen

_WORD_SPACE = 1 << 64


@dataclass(frozen=True, slots=True)
class Deal(Frozen):
    """Every seat's dealt cards plus the undealt ones, as the record's ``deal`` object holds them.

    ``hands`` is indexed by seat. ``widow`` is the cutthroat widow or the kitty. ``stock`` is the
    two-handed stock, top card first, without the turned card. ``turn_up`` is the two-handed turned
    card, or in ``partnership-no-bid`` the dealer's last card (which is also in the dealer's hand).
    """

    hands: tuple[tuple[Card, ...], ...]
    widow: tuple[Card, ...] = ()
    stock: tuple[Card, ...] = ()
    turn_up: Card | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "hands": [format_cards(sorted(hand)) for hand in self.hands],
            "widow": format_cards(self.widow),
            "stock": format_cards(self.stock),
            "turn_up": None if self.turn_up is None else format_card(self.turn_up),
        }


def _seed_word(seed: bytes, k: int) -> int:
    """Word ``k`` of the seed's stream: the first 8 bytes of SHA-256(seed, k as 8 bytes).

    The hash is fed twice instead of given ``seed + k.to_bytes(...)``: compiled by mypyc 1.20
    (setup.py), concatenating bytes kept the left operand alive, a few dozen bytes lost with
    every deal (tests/test_native.py)."""
    hasher = hashlib.sha256(seed)
    hasher.update(k.to_bytes(8, "big"))
    return int.from_bytes(hasher.digest()[:8], "big")


def seeded_shuffle(cards: Sequence[Card], seed: str) -> list[Card]:
    """Fisher-Yates from the last index down to 1; j uniform in [0, i] by rejection sampling."""
    deck = list(cards)
    prefix = seed.encode("utf-8")
    k = 0
    for i in range(len(deck) - 1, 0, -1):
        n = i + 1
        limit = _WORD_SPACE - (_WORD_SPACE % n)
        word = _seed_word(prefix, k)
        k += 1
        while word >= limit:
            word = _seed_word(prefix, k)
            k += 1
        j = word % n
        deck[i], deck[j] = deck[j], deck[i]
    return deck


def deal_from_order(
    order: Sequence[Card],
    *,
    players: int,
    hand_size: int,
    dealer: int,
    two_handed: bool = False,
    dealer_turns_last_card: bool = False,
) -> Deal:
    """Split a shuffled deck as A.10 item 4 says: seat (dealer + 1 + m) mod n takes packet m."""
    hands: list[tuple[Card, ...]] = [()] * players
    for m in range(players):
        seat = (dealer + 1 + m) % players
        hands[seat] = tuple(sorted(order[m * hand_size : (m + 1) * hand_size]))
    rest = tuple(order[players * hand_size :])
    if two_handed:
        return Deal(tuple(hands), stock=rest[1:], turn_up=rest[0])
    # The dealer receives the last packet; its last card (before sorting) is turned for trump.
    turn_up = order[players * hand_size - 1] if dealer_turns_last_card else None
    return Deal(tuple(hands), widow=rest, turn_up=turn_up)


def seeded_deal(
    seed: str,
    *,
    deck_size: int,
    players: int,
    hand_size: int,
    dealer: int,
    two_handed: bool = False,
    dealer_turns_last_card: bool = False,
) -> Deal:
    order = seeded_shuffle(canonical_deck(deck_size), seed)
    return deal_from_order(
        order,
        players=players,
        hand_size=hand_size,
        dealer=dealer,
        two_handed=two_handed,
        dealer_turns_last_card=dealer_turns_last_card,
    )


def deal_commitment(deal: Deal, salt: bytes) -> str:
    """SHA-256 (hex) of the deal as compact JSON with sorted keys, followed by the salt."""
    canonical = json.dumps(deal.to_json(), sort_keys=True, separators=(",", ":"))
    hasher = hashlib.sha256(canonical.encode("utf-8"))
    hasher.update(salt)  # not ``+ salt``: see _seed_word
    return hasher.hexdigest()
