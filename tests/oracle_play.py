"""An independent oracle for trick play, written from RULES.md, OPTIONS.md and the README rulings
alone (never from ``referee/rules`` or ``referee/engine``), for the differential test in
``tests/test_oracle_play.py``.

It covers:

* which cards a seat may play: the strict ladder of RULES.md §1.5 with every play option of
  OPTIONS.md ("Play obligations"), A.9 item 10 (``head_over_partner``), the variants' play
  sections (§3.5, §4.6, §5.5, §6.4) and two-handed's free play while the stock lasts and strict
  play-off (§2.2 items 2 and 4, §2.4, A.8 item 4), with the A.5 code that refuses each other card;
* who leads and who plays next (§1.4; first leads: §2.2 item 1, §3.5, §4.6, §5.5, §6.4);
* who wins a trick (§1.3: identical cards, the first played wins);
* the card points each side takes (§1.6 schemes, ``count_scheme`` and ``last_trick_bonus`` with
  A.2's rule that the bonus follows an overridden scheme; buried and kitty-discarded counters for
  the declaring side, A.7 item 1; a conceded hand counts 0, A.7 item 4).

Cards are A.3 strings (``"10H"``, ``"QS"``); copies of a card are the same string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

# A.3: ranks from high to low, suits in canonical order.
RANKS: Final = ("A", "10", "K", "Q", "J", "9")
SUITS: Final = ("S", "H", "D", "C")

# Variants (A.1) and their seat counts.
TWO_HANDED: Final = "two-handed"
CUTTHROAT: Final = "cutthroat"
PARTNERSHIP: Final = "partnership"
DOUBLE_DECK: Final = "double-deck"
NO_BID: Final = "partnership-no-bid"
PLAYERS: Final = {TWO_HANDED: 2, CUTTHROAT: 3, PARTNERSHIP: 4, DOUBLE_DECK: 4, NO_BID: 4}

# §1.6 card values by rank (A 10 K Q J 9), per scheme id (A.2, OPTIONS.md count_scheme).
SCHEME_VALUES: Final[Mapping[str, tuple[int, ...]]] = {
    "modern10": (10, 10, 10, 0, 0, 0),
    "simple_10_5": (10, 10, 5, 5, 0, 0),
    "classic_11": (11, 10, 4, 3, 2, 0),
    "points1": (1, 1, 1, 0, 0, 0),
    "points1_single": (1, 1, 1, 0, 0, 0),
    "points1_double": (1, 1, 1, 0, 0, 0),
}

# A.5 codes for a refused play, in their precedence order.
MUST_FOLLOW_SUIT: Final = "MUST_FOLLOW_SUIT"
MUST_HEAD_TRICK: Final = "MUST_HEAD_TRICK"
MUST_TRUMP: Final = "MUST_TRUMP"
MUST_OVERTRUMP: Final = "MUST_OVERTRUMP"

# The two-handed play-off starts after the 12 tricks played while the stock lasts (§2.2, §2.4).
TWO_HANDED_STOCK_TRICKS: Final = 12


def suit_of(card: str) -> str:
    return card[-1]


def rank_of(card: str) -> str:
    return card[:-1]


def strength(card: str) -> int:
    """§1.2: A > 10 > K > Q > J > 9, as a number that grows with the card's rank."""
    return len(RANKS) - RANKS.index(rank_of(card))


def canonical_order(cards: Iterable[str]) -> list[str]:
    """A.3: each distinct card once, suits S H D C, then ranks A 10 K Q J 9."""
    return sorted(set(cards), key=lambda c: (SUITS.index(suit_of(c)), RANKS.index(rank_of(c))))


def beats(card: str, other: str) -> bool:
    """§1.3's consequence: "beat" means the same suit and a strictly higher rank (an identical
    card never beats the one already down)."""
    return suit_of(card) == suit_of(other) and strength(card) > strength(other)


# --------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True, slots=True)
class PlayOptions:
    """The options that bear on trick play and card points, resolved for one game by
    ``resolve_play_options``."""

    variant: str
    deck: int
    tricks_per_hand: int
    head_rule: str
    head_when_trumped: str
    head_over_partner: bool
    must_trump_when_void: bool
    must_overtrump: bool
    must_trump_even_if_cannot_overtrump: bool
    count_scheme: str
    last_trick_bonus: int

    @property
    def players(self) -> int:
        return PLAYERS[self.variant]

    @property
    def partnerships(self) -> bool:
        """A.3: the four-handed variants play in teams (seats 0 and 2, seats 1 and 3)."""
        return self.players == 4


def default_count_scheme(variant: str) -> str:
    """OPTIONS.md count_scheme: 2H simple_10_5; CT, P, NB modern10; DD points1."""
    return {TWO_HANDED: "simple_10_5", DOUBLE_DECK: "points1"}.get(variant, "modern10")


def scheme_last_trick_bonus(scheme: str, deck: int) -> int:
    """A.2 / OPTIONS.md last_trick_bonus: the bonus an overridden scheme brings with it: 10 for
    modern10, simple_10_5 and classic_11; points1 1 with 48 cards and 2 with 80; points1_single
    1; points1_double 2."""
    if scheme == "points1":
        return 2 if deck == 80 else 1
    return {"points1_single": 1, "points1_double": 2}.get(scheme, 10)


def tricks_per_hand(variant: str, deck: int, exchange_mode: str) -> int:
    """How many tricks a played-out hand has (§1.6: the last-trick bonus goes to the last one).

    Two-handed: 12 while the stock lasts and 12 in the play-off (§2.2, §2.4). Cutthroat: 15 each,
    the widow of 3 aside (§3.1). Four seats: the deck shared out, less a kitty of 4 under
    ``exchange_mode: kitty`` (OPTIONS.md deck, exchange_mode).
    """
    if variant == TWO_HANDED:
        return 2 * TWO_HANDED_STOCK_TRICKS
    if variant == CUTTHROAT:
        return 15
    kitty = 4 if exchange_mode == "kitty" else 0
    return (deck - kitty) // 4


def resolve_play_options(variant: str, options: Mapping[str, object]) -> PlayOptions:
    """The play and counting options of a game of ``variant`` created with ``options``.

    Defaults are OPTIONS.md's: the play obligations default the same in every variant ("Play
    obligations"); ``count_scheme`` and ``last_trick_bonus`` per variant ("Counting").
    """

    def given(name: str, default: object) -> object:
        return options.get(name, default)

    deck = int(str(given("deck", 80 if variant == DOUBLE_DECK else 48)))
    scheme = str(given("count_scheme", default_count_scheme(variant)))
    if "last_trick_bonus" in options:
        bonus = int(str(options["last_trick_bonus"]))
    else:
        # Left out, it follows the scheme (set or default): the variants' defaults (10; DD 2,
        # 48 cards 1) are exactly what their default schemes bring.
        bonus = scheme_last_trick_bonus(scheme, deck)
    default_mode = "partner" if variant in (PARTNERSHIP, DOUBLE_DECK) else "none"
    return PlayOptions(
        variant=variant,
        deck=deck,
        tricks_per_hand=tricks_per_hand(variant, deck, str(given("exchange_mode", default_mode))),
        head_rule=str(given("head_rule", "always")),
        head_when_trumped=str(given("head_when_trumped", "not_required")),
        head_over_partner=bool(given("head_over_partner", True)),
        must_trump_when_void=bool(given("must_trump_when_void", True)),
        must_overtrump=bool(given("must_overtrump", True)),
        must_trump_even_if_cannot_overtrump=bool(
            given("must_trump_even_if_cannot_overtrump", True)
        ),
        count_scheme=scheme,
        last_trick_bonus=bonus,
    )


# --------------------------------------------------------------------------------------------
# Tricks


def trick_winner(cards: Sequence[str], trump: str) -> int:
    """§1.3: the index of the winning card. A trump beats any other suit, a higher card of the
    winning card's suit beats it, and anything else (another plain suit, an identical card)
    leaves the first-played winner in place."""
    best = 0
    for index in range(1, len(cards)):
        card, winning = cards[index], cards[best]
        if beats(card, winning) or (suit_of(card) == trump and suit_of(winning) != trump):
            best = index
    return best


def card_points(cards: Iterable[str], scheme: str) -> int:
    """§1.6: the sum of the cards' values under ``scheme``."""
    values = SCHEME_VALUES[scheme]
    return sum(values[RANKS.index(rank_of(c))] for c in cards)


def refusal(
    hand: Sequence[str],
    trick: Sequence[str],
    trump: str,
    rules: PlayOptions,
    card: str,
    partner_index: int | None = None,
) -> str | None:
    """The A.5 code that refuses ``card`` (held in ``hand``) played to ``trick``, or None.

    §1.5's strict ladder, with the options of OPTIONS.md's "Play obligations":

    * leading: any card;
    * holding the suit led: follow suit (MUST_FOLLOW_SUIT); then head the trick where
      ``head_rule`` asks for it (``always``, or ``trump_lead_only`` on a trump lead): beat the
      current winner while it is still of the suit led; once a plain lead is trumped, nothing
      (``not_required``) or the highest card of the suit led (``beat_highest_led_card``)
      (MUST_HEAD_TRICK); with ``head_over_partner: false`` no duty to head while the partner's
      card (``partner_index`` in the trick) is winning (A.9 item 10);
    * void in the suit led and holding trump, with ``must_trump_when_void``: a trump when no trump
      is in the trick yet (MUST_TRUMP); with a trump in it, one that beats the highest trump when
      able and ``must_overtrump`` (MUST_OVERTRUMP); unable to beat it, still a trump when
      ``must_trump_even_if_cannot_overtrump``, else any card;
    * void in the suit led and in trump, or ``must_trump_when_void: false``: any card.
    """
    if not trick:
        return None
    led = suit_of(trick[0])
    follow = [c for c in hand if suit_of(c) == led]
    if follow:
        if suit_of(card) != led:
            return MUST_FOLLOW_SUIT
        must_beat = _card_to_head(trick, trump, rules, partner_index)
        if (
            must_beat is not None
            and any(beats(c, must_beat) for c in follow)
            and not beats(card, must_beat)
        ):
            return MUST_HEAD_TRICK
        return None
    trumps = [c for c in hand if suit_of(c) == trump]
    # With must_trump_when_void off, any card, even a trump lower than one in the trick (§1.5's
    # ladder). OPTIONS.md's must_overtrump ("trumping a trick that already holds a trump: must
    # beat the highest trump when able") could be read to bind a player who chooses to trump;
    # Part A is silent, the engine follows the ladder, and so does this oracle.
    if not trumps or not rules.must_trump_when_void:
        return None
    trick_trumps = [c for c in trick if suit_of(c) == trump]
    if not trick_trumps:
        return None if suit_of(card) == trump else MUST_TRUMP
    top_trump = max(trick_trumps, key=strength)
    can_overtrump = any(beats(c, top_trump) for c in trumps)
    must_trump = can_overtrump or rules.must_trump_even_if_cannot_overtrump
    if must_trump and suit_of(card) != trump:
        return MUST_TRUMP
    if can_overtrump and rules.must_overtrump and not beats(card, top_trump):
        return MUST_OVERTRUMP
    return None


def _card_to_head(
    trick: Sequence[str], trump: str, rules: PlayOptions, partner_index: int | None
) -> str | None:
    """The card a player following suit must beat when able (§1.5 heading rung), or None."""
    led = suit_of(trick[0])
    if rules.head_rule == "never" or (rules.head_rule == "trump_lead_only" and led != trump):
        return None
    winner = trick_winner(trick, trump)
    if not rules.head_over_partner and winner == partner_index:
        return None
    trumped = led != trump and any(suit_of(c) == trump for c in trick)
    if not trumped:
        return trick[winner]
    if rules.head_when_trumped == "beat_highest_led_card":
        return max((c for c in trick if suit_of(c) == led), key=strength)
    return None


def legal_cards(
    hand: Sequence[str],
    trick: Sequence[str],
    trump: str,
    rules: PlayOptions,
    partner_index: int | None = None,
) -> list[str]:
    """§1.5: the distinct cards of ``hand`` that may be played to ``trick``, in A.3 order."""
    return canonical_order(
        c for c in hand if refusal(hand, trick, trump, rules, c, partner_index) is None
    )


def two_handed_legal_cards(
    hand: Sequence[str],
    table: Sequence[str],
    trick: Sequence[str],
    trump: str,
    rules: PlayOptions,
    stock_play: bool,
) -> list[str]:
    """Two-handed: while the stock lasts any card of the concealed hand or of the seat's own
    melded cards on the table (§2.2 items 2 and 4, A.8 item 4); in the play-off (the table is
    back in the hand, §2.2 item 8) the strict ladder of §2.4 (follow suit, win if able under
    ``head_rule``, trump when void under ``must_trump_when_void``)."""
    if stock_play:
        return canonical_order([*hand, *table])
    return legal_cards([*hand, *table], trick, trump, rules)


# --------------------------------------------------------------------------------------------
# A hand's play


@dataclass(frozen=True, slots=True)
class TrickResult:
    """A completed trick: its cards in play order, the seat that won it and the points it is
    worth. The spec does not say whether a last trick's reported points hold the bonus; the
    engine's trick_taken event and views include it (and report it again in last_trick_bonus),
    and so does this."""

    cards: tuple[str, ...]
    winner: int
    points: int
    last: bool


@dataclass(slots=True)
class HandPlay:
    """The play of one hand: whose turn it is, the trick on the table, the tricks' winners and
    each side's card points.

    Fed with the hand's facts (the dealer, the contract, trump, discards, a concession) and the
    cards as they are played.
    """

    rules: PlayOptions
    dealer: int
    declarer: int | None = None
    trump: str | None = None
    discards: list[str] = field(default_factory=list)
    conceded: bool = False
    leader: int | None = None
    trick: list[tuple[int, str]] = field(default_factory=list)
    tricks: list[TrickResult] = field(default_factory=list)

    def side_of(self, seat: int) -> int:
        """A.3: teams in the four-handed variants, else each seat for itself."""
        return seat % 2 if self.rules.partnerships else seat

    @property
    def sides(self) -> int:
        return 2 if self.rules.partnerships else self.rules.players

    def first_leader(self) -> int:
        """Who leads the first trick: two-handed the non-dealer (§2.2 item 1), no-bid the dealer's
        left (§6.4), the bidding variants the declarer (§3.5, §4.6, §5.5)."""
        if self.rules.variant in (TWO_HANDED, NO_BID):
            return (self.dealer + 1) % self.rules.players
        if self.declarer is None:
            raise ValueError("a card is played before there is a declarer")
        return self.declarer

    def to_play(self) -> int:
        """The seat to play now: the trick's leader (the first leader, then the last trick's
        winner, §2.2 item 1), then clockwise (§1.4)."""
        if self.trick:
            return (self.trick[-1][0] + 1) % self.rules.players
        if self.tricks:
            return self.last_winner()
        return self.first_leader()

    def last_winner(self) -> int:
        return self.tricks[-1].winner

    def lead_may_be_drawn_card(self, seat: int) -> bool:
        """Two-handed: after each trick played while the stock lasts, the draws happen when the
        winner leads, so the lead may be the card about to be drawn (A.8 item 2)."""
        return (
            self.rules.variant == TWO_HANDED
            and not self.trick
            and 1 <= len(self.tricks) <= TWO_HANDED_STOCK_TRICKS
            and seat == self.to_play()
        )

    @property
    def stock_play(self) -> bool:
        """Two-handed: the stock lasts for the first 12 tricks (§2.2)."""
        return self.rules.variant == TWO_HANDED and len(self.tricks) < TWO_HANDED_STOCK_TRICKS

    def partner_index(self, seat: int) -> int | None:
        """Where in the current trick ``seat``'s partner played (A.9 item 10): the seat opposite
        in the four-handed variants, the other defender in cutthroat (OPTIONS.md
        head_over_partner), nobody in two-handed and for the cutthroat declarer."""
        partner: int | None = None
        if self.rules.partnerships:
            partner = (seat + 2) % 4
        elif self.rules.variant == CUTTHROAT and self.declarer is not None:
            partner = None if seat == self.declarer else 3 - seat - self.declarer
        seats = [s for s, _ in self.trick]
        return seats.index(partner) if partner in seats else None

    def legal_cards(self, seat: int, hand: Sequence[str], table: Sequence[str] = ()) -> list[str]:
        """The cards ``seat`` may play now from ``hand`` (and, two-handed, its ``table``)."""
        if seat != self.to_play():
            return []
        trick = [c for _, c in self.trick]
        trump = self.trump_suit()
        if self.rules.variant == TWO_HANDED:
            return two_handed_legal_cards(hand, table, trick, trump, self.rules, self.stock_play)
        return legal_cards(hand, trick, trump, self.rules, self.partner_index(seat))

    def refusal(self, seat: int, hand: Sequence[str], card: str) -> str | None:
        """The A.5 code refusing ``seat``'s play of ``card`` from ``hand`` now, or None.
        Another seat's turn: NOT_YOUR_TURN (A.5). Two-handed stock play is free (§2.2 item 2)."""
        if seat != self.to_play():
            return "NOT_YOUR_TURN"
        if self.stock_play:
            return None
        trick = [c for _, c in self.trick]
        return refusal(hand, trick, self.trump_suit(), self.rules, card, self.partner_index(seat))

    def trump_suit(self) -> str:
        if self.trump is None:
            raise ValueError("a card is played before trump is known")
        return self.trump

    def play(self, seat: int, card: str) -> TrickResult | None:
        """Record ``seat`` playing ``card``; the completed trick's result once every seat played.

        §1.3 decides the winner; §1.6 the points, with the last-trick bonus on the hand's last
        trick.
        """
        self.trick.append((seat, card))
        if len(self.trick) < self.rules.players:
            return None
        cards = tuple(c for _, c in self.trick)
        winner = self.trick[trick_winner(cards, self.trump_suit())][0]
        last = len(self.tricks) + 1 == self.rules.tricks_per_hand
        points = card_points(cards, self.rules.count_scheme)
        if last:
            points += self.rules.last_trick_bonus
        result = TrickResult(cards, winner, points, last)
        self.tricks.append(result)
        self.trick = []
        return result

    def card_points(self) -> list[int]:
        """Each side's card points for the hand: its tricks' points, the last-trick bonus
        included (§1.6), plus the declaring side's buried or kitty-discarded counters (A.7 item
        1). A conceded hand counts 0 for everyone (A.7 items 4 and 5), as does a redeal, where no
        card is played (A.7 item 2)."""
        points = [0] * self.sides
        if self.conceded:
            return points
        for trick in self.tricks:
            points[self.side_of(trick.winner)] += trick.points
        # "Counters" here are the cards the scheme values (a classic_11 Q or J too), not only the
        # glossary's A, 10 and K: §1.6 and §10.3 need the sides' points to add up to the
        # scheme's total.
        if self.discards and self.declarer is not None:
            points[self.side_of(self.declarer)] += card_points(
                self.discards, self.rules.count_scheme
            )
        return points
