"""An independent model of two-handed Pinochle's turn machine, written from the specification alone.

It covers RULES.md §2.1-§2.5, §10.2 and A.8 apart from which card a seat must play in the
play-off (the trick-play ladder) and how trick points are counted:

* the deal from a seed and the turned trump card (A.10 item 4, §2.1), the dealer's turned dix;
* whose turn it is: the non-dealer leads trick 1, the winner of each trick leads the next (§2.2);
* the winner's window after a phase-1 trick (A.8 items 2, 3, 8): the dix exchange and dix shows
  first, then at most one other meld; the window closes at the winner's lead;
* progressive melding (§2.3 R1-R6, A.8 items 1, 5, 6, 7): which cards may form a meld, the new
  card rule, re-use of a card per class and per meld type, deferred (pending) melds;
* melded cards staying on the table and playable from there in phase 1 (A.8 item 4);
* the draws at the winner's lead, winner first; the last draw of trick 12 with ``last_draw``
  ``winner_facedown`` or ``winner_chooses`` (A.8 item 2, §2.2 items 5 and 7);
* the switch to the play-off: melded cards back in the hands, 12 each (§2.2 item 8);
* the meld points of each seat, dixes included (A.8 items 8 and 9, ``dix_scores_when_played``).

The model keeps physical cards (a face and an id) so that R4/R5 can be checked per card. It
reads options from the options object as given, with the defaults of OPTIONS.md, not from the
engine's resolved rule set. Cards are the ints of ``referee.rules.cards`` (suit * 6 + rank).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from referee.rules.cards import (
    ACE,
    DIAMONDS,
    JACK,
    KING,
    NINE,
    QUEEN,
    SPADES,
    SUITS,
    TEN,
    Card,
    Suit,
    canonical_deck,
    make_card,
    rank_of,
    suit_of,
)

# --------------------------------------------------------------------------------------------
# Meld table and classes (§1.7, §1.8, §2.3; OPTIONS.md "Meld table": two-handed uses only the
# first value of each list, A.9 item 3)

DEFAULT_VALUES: Final[dict[str, int]] = {
    "run": 150,
    "royal_marriage": 40,
    "marriage": 20,
    "dix": 10,
    "aces_around": 100,
    "kings_around": 80,
    "queens_around": 60,
    "jacks_around": 40,
    "pinochle": 40,
}

#: §1.7: class A (sequence/marriage), B (arounds), C (pinochle).
MELD_CLASS: Final[dict[str, str]] = {
    "run": "A",
    "royal_marriage": "A",
    "marriage": "A",
    "dix": "A",
    "aces_around": "B",
    "kings_around": "B",
    "queens_around": "B",
    "jacks_around": "B",
    "pinochle": "C",
}

_AROUND_RANK: Final[dict[str, int]] = {
    "aces_around": ACE,
    "kings_around": KING,
    "queens_around": QUEEN,
    "jacks_around": JACK,
}

#: A.5's order of the codes a meld can get (the first that applies wins).
MELD_CODE_ORDER: Final[tuple[str, ...]] = (
    "CARD_NOT_IN_HAND",
    "MELD_NOT_ALLOWED",
    "INVALID_MELD",
    "MELD_NEEDS_NEW_CARD",
    "MELD_CARD_REUSED",
    "MELD_MISCOUNT",
)


def meld_face_sets(name: str, trump: Suit) -> list[tuple[Card, ...]]:
    """Every face set that is exactly one set of the combination ``name`` (§1.8; A.7 item 6:
    a ``marriage`` is K-Q of one non-trump suit; a ``dix`` is one 9 of trumps)."""
    if name == "run":
        return [tuple(make_card(trump, r) for r in (ACE, TEN, KING, QUEEN, JACK))]
    if name == "royal_marriage":
        return [(make_card(trump, KING), make_card(trump, QUEEN))]
    if name == "marriage":
        return [(make_card(s, KING), make_card(s, QUEEN)) for s in SUITS if s != trump]
    if name == "dix":
        return [(make_card(trump, NINE),)]
    if name == "pinochle":
        return [(make_card(SPADES, QUEEN), make_card(DIAMONDS, JACK))]
    rank = _AROUND_RANK[name]
    return [tuple(make_card(s, rank) for s in SUITS)]


def reuse_allowed(previous: str, new: str) -> bool:
    """R4/R5 and A.8 item 7 for one card that already scored in ``previous``: it may score again
    in another class, or in a strictly higher meld of its own class (royal marriage -> run),
    never twice in one meld type."""
    if previous == new:
        return False
    if MELD_CLASS[previous] != MELD_CLASS[new]:
        return True
    return previous == "royal_marriage" and new == "run"


# --------------------------------------------------------------------------------------------
# Options (OPTIONS.md "Two-handed" and "Meld table", defaults for `two-handed`)


@dataclass(frozen=True, slots=True)
class TwoHandedOptions:
    """The options this model reads, with the two-handed defaults of OPTIONS.md."""

    new_card_required: bool = True
    deferred_meld_scoring: bool = True
    dix_scores_when_played: bool = True
    last_draw: str = "winner_facedown"
    values: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_VALUES))

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> TwoHandedOptions:
        values = dict(DEFAULT_VALUES)
        overrides = options.get("meld_values", {})
        assert isinstance(overrides, Mapping)
        for name, levels in overrides.items():
            assert isinstance(levels, list) and levels
            values[str(name)] = int(levels[0])  # A.9 item 3: one set, the first value
        last_draw = options.get("last_draw", "winner_facedown")
        assert isinstance(last_draw, str)
        return cls(
            new_card_required=bool(options.get("new_card_required", True)),
            deferred_meld_scoring=bool(options.get("deferred_meld_scoring", True)),
            dix_scores_when_played=bool(options.get("dix_scores_when_played", True)),
            last_draw=last_draw,
            values=values,
        )


# --------------------------------------------------------------------------------------------
# The deal (A.10 item 4, §2.1)


def _shuffle_words(seed: str) -> Iterable[int]:
    """The k-th 64-bit word: the first 8 bytes, big-endian, of SHA-256(seed + k as 8 bytes)."""
    for k in itertools.count():
        digest = hashlib.sha256(seed.encode() + k.to_bytes(8, "big")).digest()
        yield int.from_bytes(digest[:8], "big")


def seeded_order(seed: str) -> list[Card]:
    """The 48-card canonical deck shuffled by A.10 item 4: Fisher-Yates from the last index down
    to 1, j uniform in [0, i] by rejection sampling on 64-bit words."""
    deck = list(canonical_deck(48))
    words = iter(_shuffle_words(seed))
    for i in range(len(deck) - 1, 0, -1):
        bound = i + 1
        limit = (2**64 // bound) * bound
        word = next(words)
        while word >= limit:
            word = next(words)
        j = word % bound
        deck[i], deck[j] = deck[j], deck[i]
    return deck


@dataclass(frozen=True, slots=True)
class TwoHandedDeal:
    """Both hands (sorted), the turned card and the face-down stock, top first."""

    hands: tuple[tuple[Card, ...], tuple[Card, ...]]
    turn_up: Card
    stock: tuple[Card, ...]


def deal_from_seed(seed: str, dealer: int) -> TwoHandedDeal:
    """A.10 item 4: seat (dealer + 1 + m) mod 2 gets cards [12m, 12m + 12); then the turned card
    (the 25th, §2.1) and the 23 cards of the stock, top first."""
    order = seeded_order(seed)
    hands: list[tuple[Card, ...]] = [(), ()]
    for m in range(2):
        hands[(dealer + 1 + m) % 2] = tuple(sorted(order[12 * m : 12 * m + 12]))
    return TwoHandedDeal((hands[0], hands[1]), order[24], tuple(order[25:]))


# --------------------------------------------------------------------------------------------
# The hand


@dataclass(slots=True)
class PhysicalCard:
    """One card of the deck. ``scored_in`` are the meld types it has scored in (R4/R5, A.8
    item 7); a 9 of trumps that scored as a dix (turned, exchanged, shown or played) has
    ``"dix"`` there."""

    face: Card
    uid: int
    scored_in: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Pending:
    """A deferred meld (A.8 item 6): a combination of table cards that may be claimed later."""

    name: str
    uids: frozenset[int]


#: One predicted event: its kind and its fields, as (name, value) pairs.
ObservedEvent = tuple[str, tuple[tuple[str, object], ...]]


@dataclass(frozen=True, slots=True)
class Observed:
    """What one accepted action made public (or told the drawer), in the engine's event terms:
    ``(kind, fields)`` pairs, compared with the engine's events of the same kinds."""

    items: tuple[ObservedEvent, ...]


#: The event kinds the model predicts.
PREDICTED_KINDS: Final = frozenset(
    {
        "card_drawn",
        "cards_drawn",
        "turn_up_taken",
        "stock_exhausted",
        "dix_played",
        "dix_exchanged",
        "meld_scored",
        "trick_taken",
        "draw_chosen",
    }
)


class OracleHand:
    """One two-handed hand, driven by the same accepted actions as the engine."""

    def __init__(self, options: TwoHandedOptions, dealer: int, deal: TwoHandedDeal) -> None:
        self.options = options
        self.dealer = dealer
        self.trump: Suit = suit_of(deal.turn_up)
        uids = itertools.count()
        self.hands: list[list[PhysicalCard]] = [
            [PhysicalCard(face, next(uids)) for face in deal.hands[seat]] for seat in (0, 1)
        ]
        self.tables: list[list[PhysicalCard]] = [[], []]
        self.stock: list[PhysicalCard] = [PhysicalCard(face, next(uids)) for face in deal.stock]
        self.turned: PhysicalCard | None = PhysicalCard(deal.turn_up, next(uids))
        self.meld_points = [0, 0]
        # §2.1: the dealer scores a turned 9 at once; it counts as scored (A.8 item 8).
        self.turned_dix_seat: int | None = None
        if rank_of(deal.turn_up) == NINE:
            self.turned.scored_in.add("dix")
            self.meld_points[dealer] += options.values["dix"]
            self.turned_dix_seat = dealer
        self.playoff = False
        self.leader = 1 - dealer  # §2.2 item 1: the non-dealer leads trick 1
        self.trick: list[tuple[int, PhysicalCard]] = []
        self.tricks_done = 0
        self.window_seat: int | None = None
        self.window_melded = False
        # last_draw winner_chooses: True when the winner of trick 12 takes the turned card.
        self.draw_choice: bool | None = None
        self.pending: list[list[Pending]] = [[], []]
        self.over = False

    # ---------------------------------------------------------------------------------------
    # Whose turn

    @property
    def nine_of_trumps(self) -> Card:
        return make_card(self.trump, NINE)

    def to_act(self) -> int:
        """The seat that must play next (the window seat while a window is open)."""
        if self.trick:
            return 1 - self.trick[0][0]
        return self.leader

    # ---------------------------------------------------------------------------------------
    # Melds (§2.3, A.8 items 1, 5, 6, 7, 8)

    def _copy_choices(
        self, seat: int, faces: Sequence[Card], dix: bool = False
    ) -> list[list[tuple[PhysicalCard, bool]]] | None:
        """Every choice of physical cards for ``faces``: a face held in the concealed hand is
        taken from there (A.8 item 5), else any copy on the seat's own table. Each chosen card
        comes with whether it is from the hand. None when a face is not available (R2)."""
        options: list[list[tuple[PhysicalCard, bool]]] = []
        for face in faces:
            in_hand = [c for c in self.hands[seat] if c.face == face]
            if in_hand:
                options.append([(in_hand[0], True)])
                continue
            # A.8 item 8: a dix show takes its 9 from the hand. Which code a 9 that is only on
            # the table gets is not written down; like the engine, this model treats it as not
            # held (CARD_NOT_IN_HAND), A.5's "not available on the table".
            on_table = [c for c in self.tables[seat] if c.face == face and not dix]
            if not on_table:
                return None
            options.append([(c, False) for c in on_table])
        return [list(choice) for choice in itertools.product(*options)]

    def _choice_code(
        self, seat: int, name: str, choice: list[tuple[PhysicalCard, bool]]
    ) -> str | None:
        """The first A.5 code that applies to one choice of copies (R3, R4/R5), or None."""
        from_hand = any(is_hand for _, is_hand in choice)
        if self.options.new_card_required and not from_hand:
            uids = frozenset(c.uid for c, _ in choice)
            claim = self.options.deferred_meld_scoring and Pending(name, uids) in self.pending[seat]
            if not claim:
                return "MELD_NEEDS_NEW_CARD"
        for card, _ in choice:
            if any(not reuse_allowed(previous, name) for previous in card.scored_in):
                return "MELD_CARD_REUSED"
        return None

    def window_allows_meld(self, seat: int) -> bool:
        """R1 and A.8 items 2, 3, 8: the winner's open window in phase 1, before the turn's
        meld (dix shows come before it, and there is at most one other meld)."""
        if self.playoff or self.window_seat != seat:
            return False
        return not self.window_melded

    def meld_code(
        self, seat: int, name: str, faces: Sequence[Card], points: int | None = None
    ) -> str | None:
        """The A.5 code a meld action gets, or None when it is accepted (A.8 items 1, 3, 5)."""
        choices = self._copy_choices(seat, faces, name == "dix")
        if choices is None:
            return "CARD_NOT_IN_HAND"
        if not self.window_allows_meld(seat):
            return "MELD_NOT_ALLOWED"
        if name not in MELD_CLASS or sorted(faces) not in [
            sorted(s) for s in meld_face_sets(name, self.trump)
        ]:
            return "INVALID_MELD"
        codes = [self._choice_code(seat, name, choice) for choice in choices]
        if None in codes:
            if points is not None and points != self.options.values[name]:
                return "MELD_MISCOUNT"
            return None
        # A.8 item 5: the code of the choice that fails latest in the A.5 order.
        return max((c for c in codes if c is not None), key=MELD_CODE_ORDER.index)

    def legal_melds(self, seat: int) -> set[tuple[str, tuple[Card, ...], int]]:
        """Every meld the seat may make now, as (name, sorted faces, points)."""
        legal = set()
        for name in MELD_CLASS:
            for faces in meld_face_sets(name, self.trump):
                if self.meld_code(seat, name, faces) is None:
                    legal.add((name, tuple(sorted(faces)), self.options.values[name]))
        return legal

    def _combinations_on_table(self, seat: int) -> Iterable[tuple[str, frozenset[int]]]:
        """Every one-set combination the seat's table cards form (each choice of copies)."""
        for name in MELD_CLASS:
            if name == "dix":
                continue
            for faces in meld_face_sets(name, self.trump):
                copies = [[c for c in self.tables[seat] if c.face == face] for face in faces]
                for choice in itertools.product(*copies):
                    yield name, frozenset(c.uid for c in choice)

    def pending_faces(self, seat: int) -> list[tuple[str, tuple[Card, ...]]]:
        """The seat's pending melds as (name, sorted faces)."""
        faces = {c.uid: c.face for c in self.tables[seat]}
        return [(p.name, tuple(sorted(faces[uid] for uid in p.uids))) for p in self.pending[seat]]

    def meld(self, seat: int, name: str, faces: Sequence[Card]) -> Observed:
        """Apply an accepted meld: the chosen copies move to the table and score (A.8 item 1);
        the cards laid down leave pending melds behind (A.8 item 6)."""
        choices = self._copy_choices(seat, faces, name == "dix")
        assert choices is not None
        # A.8 item 5 makes the meld legal if some choice is; this model takes the first legal
        # choice in table order (the earlier-laid copy first).
        choice = next(c for c in choices if self._choice_code(seat, name, c) is None)
        uids = frozenset(c.uid for c, _ in choice)
        claimed = Pending(name, uids) in self.pending[seat]
        from_hand = [c for c, is_hand in choice if is_hand]
        claimed_pending = claimed and not from_hand
        if claimed_pending:
            self.pending[seat].remove(Pending(name, uids))
        for card in from_hand:
            self.hands[seat].remove(card)
            self.tables[seat].append(card)
        for card, _ in choice:
            card.scored_in.add(name)
        points = self.options.values[name]
        self.meld_points[seat] += points
        if name != "dix":
            self.window_melded = True
        laid = {c.uid for c in from_hand}
        if self.options.deferred_meld_scoring and name != "dix" and not claimed_pending and laid:
            known = set(self.pending[seat])
            by_uid = {c.uid: c for c in self.tables[seat]}
            for other, group in self._combinations_on_table(seat):
                pending = Pending(other, group)
                if (other, group) == (name, uids) or not group & laid or pending in known:
                    continue
                if all(
                    reuse_allowed(previous, other)
                    for uid in group
                    for previous in by_uid[uid].scored_in
                ):
                    self.pending[seat].append(pending)
                    known.add(pending)
        from_table = sorted(c.face for c, is_hand in choice if not is_hand)
        return Observed(
            (
                (
                    "meld_scored",
                    (
                        ("seat", seat),
                        ("name", name),
                        ("cards", tuple(sorted(faces))),
                        ("from_table", tuple(from_table)),
                        ("points", points),
                        ("claimed_pending", claimed_pending),
                    ),
                ),
            )
        )

    # ---------------------------------------------------------------------------------------
    # The dix exchange (§2.2 item 6, A.8 item 8)

    def can_exchange(self, seat: int) -> bool:
        """The winner's window, before the turn's meld; a 9 of trumps in the concealed hand;
        the turned card still there and not itself a 9 (A.8 items 3, 8)."""
        if self.playoff or self.window_seat != seat or self.window_melded:
            return False
        # Once exchanged, the turned card is a 9: that makes the exchange once a hand.
        if self.turned is None or rank_of(self.turned.face) == NINE:
            return False
        return any(c.face == self.nine_of_trumps for c in self.hands[seat])

    def exchange(self, seat: int) -> Observed:
        nine = next(c for c in self.hands[seat] if c.face == self.nine_of_trumps)
        turned = self.turned
        assert turned is not None
        self.hands[seat].remove(nine)
        self.hands[seat].append(turned)
        nine.scored_in.add("dix")
        self.turned = nine
        points = self.options.values["dix"]
        self.meld_points[seat] += points
        return Observed(
            (
                (
                    "dix_exchanged",
                    (
                        ("seat", seat),
                        ("took", turned.face),
                        ("gave", nine.face),
                        ("points", points),
                    ),
                ),
            )
        )

    # ---------------------------------------------------------------------------------------
    # Draws (§2.2 items 5 and 7, A.8 item 2)

    def can_choose_draw(self, seat: int) -> bool:
        """``last_draw: winner_chooses``: the winner of trick 12, in its window, once."""
        return (
            self.options.last_draw == "winner_chooses"
            and not self.playoff
            and self.tricks_done == 12
            and self.window_seat == seat
            and self.draw_choice is None
        )

    def choose_draw(self, seat: int, turn_up: bool) -> Observed:
        self.draw_choice = turn_up
        return Observed((("draw_chosen", (("seat", seat), ("turn_up", turn_up))),))

    def card_to_be_drawn(self) -> Card:
        """The card the window seat draws at its lead (the ``drawn_card`` play entry)."""
        assert self.window_seat is not None
        if self.tricks_done == 12 and self.draw_choice:
            assert self.turned is not None
            return self.turned.face
        return self.stock[0].face

    def _draw(self) -> list[ObservedEvent]:
        winner = self.window_seat
        assert winner is not None
        loser = 1 - winner
        out: list[ObservedEvent] = []
        if self.tricks_done < 12:
            for seat in (winner, loser):
                card = self.stock.pop(0)
                self.hands[seat].append(card)
                out.append(("card_drawn", (("seat", seat), ("card", card.face))))
            out.append(("cards_drawn", (("first", winner), ("stock", len(self.stock)))))
            return out
        # Trick 12: the winner takes the face-down card, the loser the turned card, unless the
        # winner chose the turned card (winner_chooses).
        face_down = self.stock.pop(0)
        turned = self.turned
        assert turned is not None and not self.stock
        self.turned = None
        takes_turned = winner if self.draw_choice else loser
        self.hands[1 - takes_turned].append(face_down)
        self.hands[takes_turned].append(turned)
        out.append(("card_drawn", (("seat", 1 - takes_turned), ("card", face_down.face))))
        out.append(("turn_up_taken", (("seat", takes_turned), ("card", turned.face))))
        # §2.2 item 8: the melded cards go back to the hands; pending melds lapse (A.8 item 6).
        for seat in (0, 1):
            self.hands[seat].extend(self.tables[seat])
            self.tables[seat] = []
            self.pending[seat] = []
        self.playoff = True
        out.append(("stock_exhausted", (("hand_sizes", (12, 12)),)))
        return out

    # ---------------------------------------------------------------------------------------
    # Playing cards (§2.2 items 2-4, §2.4, A.8 items 2, 4, 8)

    def playable_faces(self, seat: int) -> set[Card]:
        """Phase 1: any card of the concealed hand or of the seat's own table (A.8 item 4).
        Phase 2: the concealed hand (which of them the ladder allows is not modelled)."""
        if self.over or self.to_act() != seat:
            return set()
        faces = {c.face for c in self.hands[seat]}
        if not self.playoff:
            faces |= {c.face for c in self.tables[seat]}
        return faces

    def _take_played(self, seat: int, face: Card) -> PhysicalCard:
        """A card held in both places is played from the hand (A.8 item 4); of two hand copies
        of a 9 of trumps the unscored one; of two table copies the one no pending meld needs
        (README rulings, "Two-handed copies")."""
        in_hand = [c for c in self.hands[seat] if c.face == face]
        if in_hand:
            in_hand.sort(key=lambda c: "dix" in c.scored_in)
            card = in_hand[0]
            self.hands[seat].remove(card)
            return card
        on_table = [c for c in self.tables[seat] if c.face == face]
        needed = {uid for p in self.pending[seat] for uid in p.uids}
        on_table.sort(key=lambda c: c.uid in needed)
        card = on_table[0]
        self.tables[seat].remove(card)
        self.pending[seat] = [p for p in self.pending[seat] if card.uid not in p.uids]
        return card

    def play(self, seat: int, face: Card) -> Observed:
        out: list[ObservedEvent] = []
        if self.window_seat is not None:
            # A.8 item 2: the draws happen at the winner's lead, before the play.
            out.extend(self._draw())
            self.window_seat = None
            self.window_melded = False
        card = self._take_played(seat, face)
        if (
            self.options.dix_scores_when_played
            and face == self.nine_of_trumps
            and "dix" not in card.scored_in
        ):
            card.scored_in.add("dix")
            points = self.options.values["dix"]
            self.meld_points[seat] += points
            out.append(("dix_played", (("seat", seat), ("points", points))))
        self.trick.append((seat, card))
        if len(self.trick) == 2:
            out.append(self._finish_trick())
        return Observed(tuple(out))

    def loses_to_lead(self, face: Card) -> bool:
        """Whether answering the card led with ``face`` leaves the trick to the leader."""
        ((_, led),) = self.trick
        return not self._answer_wins(led.face, face)

    def _answer_wins(self, led: Card, answer: Card) -> bool:
        """§1.3 / §2.2 item 3: a trump beats a plain card; otherwise only a higher card of the
        suit led wins; identical cards and other suits leave the trick to the leader."""
        if suit_of(answer) == suit_of(led):
            return rank_of(answer) < rank_of(led)
        return suit_of(answer) == self.trump

    def _trick_winner(self) -> int:
        (leader, led), (follower, answer) = self.trick
        return follower if self._answer_wins(led.face, answer.face) else leader

    def _finish_trick(self) -> ObservedEvent:
        winner = self._trick_winner()
        cards = tuple(c.face for _, c in self.trick)
        self.trick = []
        self.tricks_done += 1
        self.leader = winner
        if not self.playoff:
            self.window_seat = winner  # A.8 item 2: the winner's window after a phase-1 trick
            self.window_melded = False
        if self.tricks_done == 24:
            self.over = True
        return ("trick_taken", (("seat", winner), ("cards", cards)))
