"""Cards, suits, ranks, decks and their notation (RULES.md A.3).

A card is a plain ``int`` from 0 to 23: ``suit * 6 + rank``. Suits are numbered in the canonical
order S H D C and ranks in the order A 10 K Q J 9, so

* sorting card ints gives the canonical order of A.3 (suits S H D C, then ranks A 10 K Q J 9);
* a *lower* rank index is a *higher* card (A = 0 beats 10 = 1 ... 9 = 5).

Copies of a card share one int; a hand is a sorted tuple that may hold a value twice (or four
times with 80 cards). Integers keep the hot paths (legal plays, trick winner, meld counting) free
of attribute look-ups and keep a game state small.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Final

Card = int
Suit = int

SUIT_LETTERS: Final = "SHDC"
SUIT_NAMES: Final = ("spades", "hearts", "diamonds", "clubs")
RANK_NAMES: Final = ("A", "10", "K", "Q", "J", "9")

SPADES: Final = 0
HEARTS: Final = 1
DIAMONDS: Final = 2
CLUBS: Final = 3
SUITS: Final = (SPADES, HEARTS, DIAMONDS, CLUBS)

ACE: Final = 0
TEN: Final = 1
KING: Final = 2
QUEEN: Final = 3
JACK: Final = 4
NINE: Final = 5
RANKS: Final = (ACE, TEN, KING, QUEEN, JACK, NINE)

CARD_COUNT: Final = 24  # distinct card faces

_RANK_BY_NAME: Final = {"A": ACE, "10": TEN, "T": TEN, "K": KING, "Q": QUEEN, "J": JACK, "9": NINE}
_SUIT_BY_LETTER: Final = {"S": SPADES, "H": HEARTS, "D": DIAMONDS, "C": CLUBS}


class CardSyntaxError(ValueError):
    """Raised for text that is not a card or suit in A.3 notation."""


def make_card(suit: Suit, rank: int) -> Card:
    return suit * 6 + rank


def suit_of(card: Card) -> Suit:
    return card // 6


def rank_of(card: Card) -> int:
    return card % 6


_CARD_TEXT: Final = tuple(RANK_NAMES[c % 6] + SUIT_LETTERS[c // 6] for c in range(CARD_COUNT))
_CARD_BY_TEXT: Final = {
    name + letter: make_card(suit, rank)
    for name, rank in _RANK_BY_NAME.items()
    for letter, suit in _SUIT_BY_LETTER.items()
}


def parse_card(text: object) -> Card:
    """Parse ``"QS"``, ``"10h"`` or ``"TH"`` (case-insensitive) into a card int."""
    if not isinstance(text, str):
        raise CardSyntaxError(f"a card must be a string like 'QS', got {text!r}")
    card = _CARD_BY_TEXT.get(text)  # the usual spelling first: no copies of the text
    if card is not None:
        return card
    card = _CARD_BY_TEXT.get(text.strip().upper())
    if card is None:
        raise CardSyntaxError(f"{text!r} is not a card (rank A 10 K Q J 9, then suit S H D C)")
    return card


def format_card(card: Card) -> str:
    return _CARD_TEXT[card]


def parse_suit(text: object) -> Suit:
    if not isinstance(text, str) or text.strip().upper() not in _SUIT_BY_LETTER:
        raise CardSyntaxError(f"{text!r} is not a suit (one of S H D C)")
    return _SUIT_BY_LETTER[text.strip().upper()]


def format_suit(suit: Suit) -> str:
    return SUIT_LETTERS[suit]


def parse_cards(items: object) -> tuple[Card, ...]:
    """Parse a JSON list of card strings, keeping its order."""
    if not isinstance(items, list | tuple):
        raise CardSyntaxError(f"expected a list of cards, got {type(items).__name__}")
    return tuple(parse_card(item) for item in items)


def format_cards(cards: Iterable[Card]) -> list[str]:
    return [_CARD_TEXT[c] for c in cards]


def deck_faces(deck_size: int) -> tuple[Card, ...]:
    """The card faces of a deck: 48 cards have all 24, 80 cards have no nines."""
    if deck_size == 80:
        return tuple(c for c in range(CARD_COUNT) if c % 6 != NINE)
    return tuple(range(CARD_COUNT))


def copies_per_face(deck_size: int) -> int:
    return 4 if deck_size == 80 else 2


@cache
def canonical_deck(deck_size: int) -> tuple[Card, ...]:
    """A.10 item 4: suits S H D C, ranks A 10 K Q J 9 (no 9 with 80 cards), copies adjacent.

    Cached (a tuple, so callers cannot change it): every deal is checked against it."""
    copies = copies_per_face(deck_size)
    return tuple(c for c in deck_faces(deck_size) for _ in range(copies))


def counts_of(cards: Iterable[Card]) -> list[int]:
    """A 24-slot count vector: how many copies of each face."""
    counts = [0] * CARD_COUNT
    for c in cards:
        counts[c] += 1
    return counts


def fits_deck(cards: Iterable[Card], deck_size: int) -> str | None:
    """None when every card could come from one deck of this size, else a reason."""
    limit = copies_per_face(deck_size)
    counts = counts_of(cards)
    for face, n in enumerate(counts):
        if n and face % 6 == NINE and deck_size == 80:
            return f"{format_card(face)}: the 80-card deck has no nines"
        if n > limit:
            return f"{format_card(face)} appears {n} times; the {deck_size}-card deck has {limit}"
    return None


def remove_cards(hand: Sequence[Card], cards: Iterable[Card]) -> tuple[Card, ...] | None:
    """The hand without ``cards`` (one copy each), or None when a card is not held."""
    remaining = list(hand)
    for c in cards:
        try:
            remaining.remove(c)
        except ValueError:
            return None
    return tuple(remaining)
