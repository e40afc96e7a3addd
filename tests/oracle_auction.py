"""An independent model of the phases before meld and play, written from RULES.md alone.

It covers the auction and everything that happens between the auction and the first lead that
is not meld itself, for ``cutthroat``, ``partnership``, ``double-deck`` and the start of
``partnership-no-bid``:

* the auction: who speaks, bid amounts, pass (with help), bid-or-redeal, the stuck dealer, the
  end of the auction and the redeal (§3.2, §4.2, §5.2, A.2, A.7 items 2, 3, 11);
* the contract: the widow or kitty joins the declarer's hand (A.7 item 1, §3.3, §5.3);
* naming trump, with ``trump_requires_marriage`` and the no-marriage concession (§5.3,
  A.7 item 5);
* the partner exchange and the kitty discard (§4.3, §5.3, A.7 item 1);
* the cutthroat bury (§3.3, A.7 item 1, README "A bury that cannot keep every scored card");
* ``partnership-no-bid``: the turned trump and the dix exchange (§6.2, A.7 item 7).

The model keeps its own copy of every seat's concealed cards and of the auction, updated from
the accepted actions alone; the only thing it takes from the engine is the declarer's scored
combinations (meld is another area), through ``observe_declarer_meld``.

Cards are canonical strings (``"10H"``), hands are ``Counter`` multisets. Legal actions are
given in the shape of A.10 item 2 so they can be compared with the engine's entries; a ``bid``
entry is described by ``bid_allowed`` (the exact set of amounts), not by an entry.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from referee.rules.options import RuleSet

SUIT_ORDER = "SHDC"
RANK_ORDER = ("A", "10", "K", "Q", "J", "9")

AUCTION = "auction"
TRUMP = "trump"
PARTNER_PASS = "partner_pass"
DECLARER_PASS = "declarer_pass"
KITTY_DISCARD = "kitty_discard"
MELD = "meld"
BURY = "bury"
PLAY = "play"  # the model stops here: concession window and trick play are other areas
HAND_OVER = "hand_over"  # a redeal, or the no-marriage concession (A.7 items 2, 5)

# Meld classes (§1.7): a card may serve in several classes but only once within one.
MELD_CLASS = {
    "run": "sequence",
    "royal_marriage": "sequence",
    "marriage": "sequence",
    "dix": "sequence",
    "aces_around": "around",
    "kings_around": "around",
    "queens_around": "around",
    "jacks_around": "around",
    "pinochle": "pinochle",
}


def suit_of(card: str) -> str:
    return card[-1]


def rank_of(card: str) -> str:
    return card[:-1]


def card_order(card: str) -> tuple[int, int]:
    """A.3: suits S H D C, then ranks A 10 K Q J 9."""
    return SUIT_ORDER.index(suit_of(card)), RANK_ORDER.index(rank_of(card))


def canonical(cards: Iterable[str]) -> list[str]:
    return sorted(cards, key=card_order)


def cards_of(multiset: Mapping[str, int]) -> list[str]:
    """The multiset as a canonical list, each copy listed."""
    return canonical(card for card, n in multiset.items() for _ in range(n))


def entry_key(entry: Mapping[str, object]) -> str:
    """One legal-action entry as a comparable string (a card list compared as a multiset)."""
    normal = dict(entry)
    source = normal.get("from")
    if isinstance(source, list):
        normal["from"] = canonical(str(c) for c in source)
    return json.dumps(normal, sort_keys=True)


def step_in_force(rules: RuleSet, level: int) -> int:
    """A.2 ``bid_schedule``: the step of the last pair whose level is at most ``level``; below
    the first level the first step; without a schedule, ``bid_step``."""
    if rules.bid_schedule is None:
        return rules.bid_step
    step = rules.bid_schedule[0][1]
    for pair_level, pair_step in rules.bid_schedule:
        if pair_level <= level:
            step = pair_step
    return step


@dataclass
class AuctionOracle:
    """One hand of a bidding variant (or the start of ``partnership-no-bid``) from its deal."""

    rules: RuleSet
    dealer: int
    hands: list[Counter[str]]
    widow: list[str]
    turn_up: str | None = None
    phase: str = AUCTION
    turn: int = 0
    out: list[bool] = field(default_factory=list)
    high_bid: int | None = None
    high_bidder: int | None = None
    bid_or_redeal_called: bool = False
    declarer: int | None = None
    trump: str | None = None
    melded: list[bool] = field(default_factory=list)
    dix_exchanged: bool = False
    declarer_scored_cards: Counter[str] | None = None
    calls: list[dict[str, object]] = field(default_factory=list)

    @classmethod
    def from_deal(
        cls,
        rules: RuleSet,
        dealer: int,
        hands: Sequence[Sequence[str]],
        widow: Sequence[str],
        turn_up: str | None,
    ) -> AuctionOracle:
        """A.7 item 1 / §6.2: a bidding hand opens with the auction, dealer's left first (§3.2,
        §4.2, §5.2); a no-bid hand opens with meld, dealer's left first, trump being the suit of
        the dealer's last card (§6.2)."""
        players = rules.players
        oracle = cls(
            rules=rules,
            dealer=dealer,
            hands=[Counter(hand) for hand in hands],
            widow=list(widow),
            turn_up=turn_up,
            turn=(dealer + 1) % players,
            out=[False] * players,
            melded=[False] * players,
        )
        if not rules.bidding:
            assert turn_up is not None
            oracle.trump = suit_of(turn_up)
            oracle._enter_meld(first=(dealer + 1) % players)
        return oracle

    # ----------------------------------------------------------------------------------------
    # Auction (§3.2, §4.2, §5.2, A.2, A.7 items 2, 3)

    def dealer_is_stuck(self, seat: int) -> bool:
        """A.7 item 2: under ``dealer_stuck``, with no numeric bid and no bid-or-redeal call, the
        dealer (who speaks last in the first round) may not pass."""
        return (
            self.rules.all_pass == "dealer_stuck"
            and self.high_bid is None
            and not self.bid_or_redeal_called
            and seat == self.dealer
        )

    def standing_bid(self) -> int:
        """The bid a new bid must raise: the high bid, or before any bid min_bid minus the step
        in force at min_bid (A.7 item 3)."""
        if self.high_bid is not None:
            return self.high_bid
        return self.rules.min_bid - step_in_force(self.rules, self.rules.min_bid)

    def raise_step(self) -> int:
        """The step in force for the next raise: at the standing bid's level (A.2), and for the
        opening bid the step in force at min_bid (A.7 item 3)."""
        if self.high_bid is None:
            return step_in_force(self.rules, self.rules.min_bid)
        return step_in_force(self.rules, self.high_bid)

    def bid_refusal(self, amount: int) -> str | None:
        """A.5 for a bid by the seat to act: BID_TOO_LOW (below min_bid or not above the
        standing bid), then BID_BAD_RAISE (raise not a positive multiple of the step in force,
        or above max_raise)."""
        if amount < self.rules.min_bid or (self.high_bid is not None and amount <= self.high_bid):
            return "BID_TOO_LOW"
        raised = amount - self.standing_bid()
        if raised <= 0 or raised % self.raise_step() != 0:
            return "BID_BAD_RAISE"
        if self.rules.max_raise is not None and raised > self.rules.max_raise:
            return "BID_BAD_RAISE"
        return None

    def bid_allowed(self, seat: int, amount: int) -> bool:
        return self.phase == AUCTION and seat == self.turn and self.bid_refusal(amount) is None

    def bids_unbounded(self) -> bool:
        return self.rules.max_raise is None

    def _call(self, seat: int, kind: str, amount: int | None = None, help_: bool = False) -> None:
        """One auction call; the calls are public with their help flags (A.10 item 3)."""
        self.calls.append(
            {"seat": seat, "type": kind}
            | ({"amount": amount} if amount is not None else {})
            | ({"help": True} if help_ else {})
        )
        if kind == "bid":
            assert amount is not None
            self.high_bid, self.high_bidder = amount, seat
        elif kind == "pass":
            self.out[seat] = True
        else:
            self.bid_or_redeal_called = True
        players = self.rules.players
        if self.high_bid is not None and sum(self.out) == players - 1:
            # §3.2 / §4.2: the auction ends when all but one have passed after a bid.
            assert self.high_bidder is not None and not self.out[self.high_bidder]
            self._contract(self.high_bidder)
            return
        if self.high_bid is None and seat == self.dealer:
            # The dealer ends the first round; with no bid it was a pass (allowed only under
            # redeal or after a bid-or-redeal call) or a bid-or-redeal: a redeal (A.7 item 2).
            self.phase = HAND_OVER
            return
        nxt = (seat + 1) % players
        while self.out[nxt]:
            nxt = (nxt + 1) % players
        self.turn = nxt

    def _contract(self, declarer: int) -> None:
        """A.7 item 1: the widow (cutthroat) or the kitty joins the declarer's hand at the
        contract; then the declarer names trump."""
        self.declarer = declarer
        self.hands[declarer].update(self.widow)
        self.phase = TRUMP
        self.turn = declarer

    # ----------------------------------------------------------------------------------------
    # Trump (§4.3, §5.3, A.7 item 5)

    def trump_suits(self) -> list[str]:
        """Suits the declarer may name: any, or with ``trump_requires_marriage`` those where it
        holds K and Q (its hand already holds the widow or kitty; the partner exchange comes
        later, §5.3)."""
        assert self.declarer is not None
        hand = self.hands[self.declarer]
        if not self.rules.trump_requires_marriage:
            return list(SUIT_ORDER)
        return [s for s in SUIT_ORDER if hand["K" + s] > 0 and hand["Q" + s] > 0]

    def _declare_trump(self, suit: str) -> None:
        """After trump (A.7 item 1): cutthroat melds (then buries); kitty: the declarer discards
        4; partner mode with a count: the partner passes, then the declarer; else meld."""
        assert self.declarer is not None
        self.trump = suit
        rules = self.rules
        if rules.variant == "cutthroat":
            self._enter_meld(first=self.declarer)
        elif rules.exchange_mode == "kitty":
            self.phase, self.turn = KITTY_DISCARD, self.declarer
        elif rules.exchange_mode == "partner" and rules.exchange_count > 0:
            self.phase, self.turn = PARTNER_PASS, self.partner()
        else:
            self._enter_meld(first=self.declarer)

    def partner(self) -> int:
        assert self.declarer is not None
        return (self.declarer + 2) % 4

    # ----------------------------------------------------------------------------------------
    # Meld turns (only who acts: the meld itself is another area), no-bid dix (A.7 item 7)

    def _enter_meld(self, first: int) -> None:
        """A.4: whole-hand meld, the declarer first (no-bid: dealer's left), then clockwise;
        under ``meld_declaration: auto`` no meld actions are taken."""
        if self.rules.meld_declaration == "auto":
            self.melded = [True] * self.rules.players
            self._after_meld()
        else:
            self.phase, self.turn = MELD, first

    def _after_meld(self) -> None:
        """A.7 item 1: cutthroat buries after meld; the others go to the concession window and
        play (where this model stops)."""
        if self.rules.variant == "cutthroat":
            assert self.declarer is not None
            self.phase, self.turn = BURY, self.declarer
        else:
            self.phase = PLAY

    def dix_exchange_allowed(self, seat: int) -> bool:
        """A.7 item 7: at its own meld turn, before its meld, a non-dealer holding the 9 of
        trumps, once per hand, not when the turned card is a 9, never under auto meld."""
        if self.rules.bidding or self.phase != MELD or seat != self.turn:
            return False
        assert self.turn_up is not None and self.trump is not None
        return (
            seat != self.dealer
            and not self.dix_exchanged
            and rank_of(self.turn_up) != "9"
            and self.hands[seat]["9" + self.trump] > 0
        )

    def _exchange_dix(self, seat: int) -> None:
        """§6.2: the exchanger takes the turned card, the dealer takes the 9."""
        assert self.turn_up is not None and self.trump is not None
        dix = "9" + self.trump
        self.hands[seat][dix] -= 1
        self.hands[seat][self.turn_up] += 1
        self.hands[self.dealer][self.turn_up] -= 1
        self.hands[self.dealer][dix] += 1
        self.turn_up = dix
        self.dix_exchanged = True

    # ----------------------------------------------------------------------------------------
    # Bury (§3.3, A.7 item 1)

    def observe_declarer_meld(
        self, shown: Sequence[str], combinations: Sequence[tuple[str, Sequence[str]]]
    ) -> None:
        """The declarer's shown cards and scored combinations (name, cards), from the meld
        area."""
        self.declarer_scored_cards = scored_cards(combinations, Counter(shown))

    def _declarer_hand(self) -> Counter[str]:
        assert self.declarer is not None
        return self.hands[self.declarer]

    def buryable(self) -> Counter[str]:
        """A.7 item 1: the 15 cards kept must hold every card of the scored combinations, unless
        ``may_bury_melded_cards``; README: when fewer than 3 cards are free, any card."""
        hand = self._declarer_hand()
        if self.rules.may_bury_melded_cards:
            return Counter(hand)
        assert self.declarer_scored_cards is not None
        free = hand - self.declarer_scored_cards
        return free if sum(free.values()) >= 3 else Counter(hand)

    # ----------------------------------------------------------------------------------------
    # Legal actions and their effects

    def legal(self, seat: int) -> list[dict[str, object]]:
        """Every entry the seat has in A.10 item 2's shape, except ``bid`` (see
        ``bid_allowed``); a meld entry is reduced to its type (meld is another area)."""
        if self.phase in (PLAY, HAND_OVER) or seat != self.turn:
            return []
        if self.phase == AUCTION:
            entries: list[dict[str, object]] = []
            if not self.dealer_is_stuck(seat):
                entries.append({"type": "pass"})
                if self.rules.allow_pass_with_help:
                    entries.append({"type": "pass", "help": True})
            if self.rules.allow_bid_or_redeal and self.high_bid is None:
                entries.append({"type": "bid_or_redeal"})
            return entries
        if self.phase == TRUMP:
            suits = self.trump_suits()
            if not suits:
                return [{"type": "concede"}]
            return [{"type": "declare_trump", "suit": s} for s in suits]
        if self.phase in (PARTNER_PASS, DECLARER_PASS):
            return [
                {
                    "type": "pass_cards",
                    "count": self.card_count(),
                    "from": cards_of(self.hands[seat]),
                }
            ]
        if self.phase == KITTY_DISCARD:
            return [
                {"type": "discard", "count": self.card_count(), "from": cards_of(self.hands[seat])}
            ]
        if self.phase == BURY:
            return [
                {"type": "discard", "count": self.card_count(), "from": cards_of(self.buryable())}
            ]
        assert self.phase == MELD
        entries = [{"type": "meld"}]
        if self.dix_exchange_allowed(seat):
            entries.append({"type": "exchange_dix"})
        return entries

    def apply(self, seat: int, action: Mapping[str, object]) -> None:
        """The effect of an action accepted in one of the modelled phases."""
        kind = action["type"]
        if kind == "bid":
            amount = action["amount"]
            assert isinstance(amount, int)
            self._call(seat, "bid", amount)
        elif kind in ("pass", "bid_or_redeal"):
            self._call(seat, str(kind), help_=action.get("help") is True)
        elif kind == "declare_trump":
            self._declare_trump(str(action["suit"]))
        elif kind == "concede":
            self.phase = HAND_OVER  # the no-marriage concession (A.7 item 5)
        elif kind == "pass_cards":
            self._pass_cards(seat, self._cards(action))
        elif kind == "discard":
            self._remove(seat, self._cards(action))
            if self.phase == BURY:
                self.phase = PLAY  # A.7 item 1: the bury is the last step before play
            else:
                assert self.declarer is not None  # the kitty discard comes before meld
                self._enter_meld(first=self.declarer)
        elif kind == "exchange_dix":
            self._exchange_dix(seat)
        elif kind == "meld":
            self.melded[seat] = True
            if all(self.melded):
                self._after_meld()
            else:
                self.turn = (seat + 1) % self.rules.players

    @staticmethod
    def _cards(action: Mapping[str, object]) -> list[str]:
        cards = action["cards"]
        assert isinstance(cards, list)
        return [str(c) for c in cards]

    def _remove(self, seat: int, cards: Sequence[str]) -> None:
        self.hands[seat] -= Counter(cards)

    def _pass_cards(self, seat: int, cards: Sequence[str]) -> None:
        """§4.3: the partner gives n cards to the declarer, who then returns n (possibly some
        just received)."""
        assert self.declarer is not None
        receiver = self.declarer if self.phase == PARTNER_PASS else self.partner()
        self._remove(seat, cards)
        self.hands[receiver].update(cards)
        if self.phase == PARTNER_PASS:
            self.phase, self.turn = DECLARER_PASS, self.declarer
        else:
            self._enter_meld(first=self.declarer)

    def card_count(self) -> int:
        """Cards a pass or discard moves: exchange_count (§4.3, §5.3), a kitty of 4 (A.2), a
        bury of 3 (§3.3)."""
        if self.phase in (PARTNER_PASS, DECLARER_PASS):
            return self.rules.exchange_count
        return 4 if self.phase == KITTY_DISCARD else 3

    def refusal(self, seat: int, action: Mapping[str, object]) -> str | None:
        """The A.5 code for an action of the types this model covers, or None when legal.
        (Only the codes these phases can produce; malformed JSON is not modelled.)"""
        kind = action["type"]
        if kind == "pass" and action.get("help") and not self.rules.allow_pass_with_help:
            return "MALFORMED_ACTION"  # A.7 item 11
        if kind == "concede":
            return self._concede_refusal(seat)
        if seat != self.turn or self.phase in (PLAY, HAND_OVER):
            return "NOT_YOUR_TURN"
        if kind in ("bid", "pass", "bid_or_redeal"):
            if self.phase != AUCTION:
                return "WRONG_PHASE"
            if kind == "bid":
                amount = action["amount"]
                assert isinstance(amount, int)
                return self.bid_refusal(amount)
            if kind == "pass":
                return "DEALER_MUST_BID" if self.dealer_is_stuck(seat) else None
            if not self.rules.allow_bid_or_redeal or self.high_bid is not None:
                return "BID_OR_REDEAL_NOT_ALLOWED"
            return None
        if kind == "declare_trump":
            if self.phase != TRUMP:
                return "WRONG_PHASE"
            if str(action["suit"]) not in self.trump_suits():
                return "TRUMP_NEEDS_MARRIAGE"
            return None
        if kind in ("pass_cards", "discard"):
            wanted_phases = (
                (PARTNER_PASS, DECLARER_PASS) if kind == "pass_cards" else (KITTY_DISCARD, BURY)
            )
            if self.phase not in wanted_phases:
                return "WRONG_PHASE"
            cards = Counter(self._cards(action))
            if cards - self.hands[seat]:
                return "CARD_NOT_IN_HAND"
            if sum(cards.values()) != self.card_count():
                return "WRONG_CARD_COUNT"
            if self.phase == BURY and cards - self.buryable():
                return "CANNOT_BURY_MELD"
            return None
        if kind == "exchange_dix":
            # A.7 item 7; A.7 item 12: a type the variant never uses is WRONG_PHASE.
            if self.rules.bidding:
                return "WRONG_PHASE"
            return None if self.dix_exchange_allowed(seat) else "DIX_EXCHANGE_NOT_ALLOWED"
        raise ValueError(f"the model does not cover {kind!r}")

    def _concede_refusal(self, seat: int) -> str | None:
        """A.7 items 4-5: before every seat has melded a concession is WRONG_PHASE, except the
        no-marriage declarer's in the trump phase; README "Bury and concession": in the bury,
        the declarer's is WRONG_PHASE and another seat's CONCEDE_NOT_ALLOWED."""
        if self.phase == TRUMP and seat == self.declarer and not self.trump_suits():
            return None
        if self.phase == BURY and seat != self.declarer:
            return "CONCEDE_NOT_ALLOWED"
        return "WRONG_PHASE"


def scored_cards(
    combinations: Sequence[tuple[str, Sequence[str]]], shown: Counter[str]
) -> Counter[str]:
    """The cards (with copies) that the scored combinations use (§1.7): a card serves once per
    class but may serve in several classes, so per card the most any one class needs. Under
    ``run_shares_marriage_cards`` a royal marriage may list a card of a run (A.9 item 1), so a
    class's count is capped by the copies shown (the combinations are made of shown cards)."""
    by_class: dict[str, Counter[str]] = {}
    for name, cards in combinations:
        by_class.setdefault(MELD_CLASS[name], Counter()).update(cards)
    needed: Counter[str] = Counter()
    for class_cards in by_class.values():
        for card, count in class_cards.items():
            needed[card] = max(needed[card], min(count, shown[card]))
    return needed
