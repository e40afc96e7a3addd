"""Trick winner (§1.3), the play-obligation ladder (§1.5) and card-point counting (§1.6).

``play_ladder`` is the one place the play obligations live: it answers the legal cards *and* the
rung that restricted them. ``legal_plays`` (for ``legal_actions`` and the ``legal_plays`` query)
and ``play_violation`` (for ``apply``) are both thin readings of it, so the enumeration and the
validation can never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from referee.rules.cards import Card, Suit, deck_faces
from referee.rules.frozen import Frozen

# Rungs of the ladder: which obligation produced the legal set.
RUNG_FREE: Final = 0  # leading, free play, or void in the suit led and in trumps
RUNG_FOLLOW: Final = 1  # must follow suit (any card of it)
RUNG_HEAD: Final = 2  # must follow suit with a card that beats the current winner
RUNG_TRUMP: Final = 3  # void in the suit led: must play a trump
RUNG_OVERTRUMP: Final = 4  # void: must play a trump that beats the highest trump in the trick


@dataclass(frozen=True, slots=True)
class PlayRules(Frozen):
    """The §1.5 switches, resolved once per game (or query) so the hot path reads plain fields."""

    head_rule: str = "always"  # always | trump_lead_only | never
    head_when_trumped: str = "not_required"  # not_required | beat_highest_led_card
    head_over_partner: bool = True
    must_trump_when_void: bool = True
    must_overtrump: bool = True
    must_trump_even_if_cannot_overtrump: bool = True
    free_play: bool = False  # two-handed phase 1: no obligation at all


FREE_PLAY: Final = PlayRules(free_play=True)


def trick_winner(trick: Sequence[Card], trump: Suit) -> int:
    """Index of the winning card: highest trump, else highest of the suit led; first copy wins."""
    best = trick[0]
    best_index = 0
    for index in range(1, len(trick)):
        card = trick[index]
        suit = card // 6
        best_suit = best // 6
        if suit == best_suit:
            if card % 6 < best % 6:  # strictly higher rank; an identical copy never beats
                best, best_index = card, index
        elif suit == trump:
            best, best_index = card, index
    return best_index


def play_ladder(
    hand: Sequence[Card],
    trick: Sequence[Card],
    trump: Suit,
    rules: PlayRules,
    partner_winning: bool = False,
) -> tuple[Sequence[Card], int]:
    """The cards of ``hand`` that may be played now, and the rung that chose them.

    ``partner_winning`` says the current winner of the trick is the player's partner (only read
    when ``head_over_partner`` is off). The returned cards keep the hand's order and copies.

    Hot path (every card play ``apply`` checks, every ``legal_actions`` call): the card winning
    the trick is found once and answers both "has the trick been trumped" and "what must a
    card beat", and the filters are list comprehensions, which cost about a third less than
    ``tuple(generator)`` on CPython 3.11.
    """
    if not trick or rules.free_play:
        return hand, RUNG_FREE
    led = trick[0] // 6
    # The winning card is of the suit led unless a trump has beaten it (``trick_winner``), so
    # the trick has been trumped exactly when it is of another suit; when it has, it is the
    # highest trump in the trick.
    top = trick[trick_winner(trick, trump)]
    trumped = top // 6 != led
    follow = [c for c in hand if c // 6 == led]
    if follow:
        head_rule = rules.head_rule
        must_head = head_rule == "always" or (head_rule == "trump_lead_only" and led == trump)
        if must_head and not (partner_winning and not rules.head_over_partner):
            if not trumped:
                # ``top`` and ``follow`` are of one suit, so a lower int is a higher rank.
                higher = [c for c in follow if c < top]
                if higher:
                    return higher, RUNG_HEAD
            elif rules.head_when_trumped == "beat_highest_led_card":
                top_rank = min(c % 6 for c in trick if c // 6 == led)
                higher = [c for c in follow if c % 6 < top_rank]
                if higher:
                    return higher, RUNG_HEAD
        return follow, RUNG_FOLLOW
    if led == trump or not rules.must_trump_when_void:
        return hand, RUNG_FREE
    trumps = [c for c in hand if c // 6 == trump]
    if not trumps:
        return hand, RUNG_FREE
    if not trumped:
        return trumps, RUNG_TRUMP
    over = [c for c in trumps if c < top]  # ``top`` is the highest trump in the trick
    if over:
        return (over, RUNG_OVERTRUMP) if rules.must_overtrump else (trumps, RUNG_TRUMP)
    if rules.must_trump_even_if_cannot_overtrump:
        return trumps, RUNG_TRUMP
    return hand, RUNG_FREE


def legal_plays(
    hand: Sequence[Card],
    trick: Sequence[Card],
    trump: Suit,
    rules: PlayRules,
    partner_winning: bool = False,
) -> tuple[Card, ...]:
    """Distinct legal cards in canonical order (A.3)."""
    cards, _ = play_ladder(hand, trick, trump, rules, partner_winning)
    return tuple(sorted(set(cards)))


def play_violation(
    card: Card,
    hand: Sequence[Card],
    trick: Sequence[Card],
    trump: Suit,
    rules: PlayRules,
    partner_winning: bool = False,
) -> str | None:
    """The A.5 code for playing ``card`` (held) now, or None when it is legal."""
    allowed, rung = play_ladder(hand, trick, trump, rules, partner_winning)
    if card in allowed:
        return None
    if rung == RUNG_HEAD:
        return "MUST_HEAD_TRICK" if card // 6 == trick[0] // 6 else "MUST_FOLLOW_SUIT"
    if rung == RUNG_FOLLOW:
        return "MUST_FOLLOW_SUIT"
    if rung == RUNG_OVERTRUMP and card // 6 == trump:
        return "MUST_OVERTRUMP"
    return "MUST_TRUMP"


# Card values by rank index (A 10 K Q J 9) for each counting scheme of §1.6.
SCHEME_VALUES: Final[dict[str, tuple[int, int, int, int, int, int]]] = {
    "modern10": (10, 10, 10, 0, 0, 0),
    "simple_10_5": (10, 10, 5, 5, 0, 0),
    "classic_11": (11, 10, 4, 3, 2, 0),
    "points1": (1, 1, 1, 0, 0, 0),
    "points1_single": (1, 1, 1, 0, 0, 0),
    "points1_double": (1, 1, 1, 0, 0, 0),
}


@dataclass(frozen=True, slots=True)
class Counting(Frozen):
    """A counting scheme with its last-trick bonus; ``card_value`` is indexed by card int."""

    card_value: tuple[int, ...]
    last_trick_bonus: int

    @classmethod
    def of(cls, scheme: str, last_trick_bonus: int) -> Counting:
        ranks = SCHEME_VALUES[scheme]
        return cls(tuple(ranks[c % 6] for c in range(24)), last_trick_bonus)

    def trick_points(self, cards: Sequence[Card], last: bool) -> int:
        value = self.card_value
        total = sum(value[c] for c in cards)
        return total + self.last_trick_bonus if last else total

    def total_in_play(self, deck_size: int) -> int:
        """Every card point of the deck plus the last trick: 250, 25 or 50 with the defaults."""
        copies = 4 if deck_size == 80 else 2
        return copies * sum(self.card_value[c] for c in deck_faces(deck_size)) + (
            self.last_trick_bonus
        )
