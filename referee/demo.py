"""``pinochle-referee demo``: one whole game played by simple legal bots through the real API.

It starts a server on a free port with a throw-away database (or connects to ``--address``),
creates a game, and lets each seat's bot ask ``ListLegalActions`` and submit one of them with
``SubmitAction`` until the game ends, printing a readable hand-by-hand log.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import structlog
from pinochle_client import RefereeClient, RefereeError, SeatSession
from rich.console import Console

from referee.engine.engine import make_setup
from referee.engine.state import Setup
from referee.rules.cards import (
    ACE,
    KING,
    QUEEN,
    SUITS,
    Card,
    Suit,
    canonical_deck,
    counts_of,
    format_card,
    format_cards,
    format_suit,
    make_card,
    parse_card,
    parse_cards,
    parse_suit,
    rank_of,
    suit_of,
)
from referee.rules.melds import meld_total
from referee.rules.options import resolve_options
from referee.rules.tricks import trick_winner

#: The demo stops after this many hands without a winner. The bots bid what their cards are
#: worth (``hand_value``), but some option sets leave hardly a contract worth making: with
#: count_scheme points1 a partnership's or cutthroat's x10 meld table keeps a minimum bid of 250
#: or 300 against 25 card points, so a hand is seldom worth a bid; a partnership's stuck dealer
#: has its contract set hand after hand and every score can fall for ever (a cutthroat hand is
#: redealt instead, and its games end, slowly).
MAX_HANDS = 500

#: The deals sampled (with a fixed seed) for the meld a hand can count on beyond its own
#: (``_help_meld``).
_SAMPLE_HANDS = 400

#: The legal actions the bot chooses among by the value of its cards (``bot_action``).
_VALUED = frozenset({"bid", "bid_or_redeal", "declare_trump", "pass_cards", "discard", "play"})

#: The highest bid a request can carry: ``Bid.amount`` is an int32 (referee.proto).
BID_MAX = 2**31 - 1


def playable(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The legal-action entries a bot can turn into a concrete action.

    A two-handed lead may also be the card about to be drawn: that entry is the descriptor
    ``{"type": "play", "drawn_card": true}`` (RULES.md A.8 item 2), not a card, because which
    card it is stays hidden until the draw. A bot cannot name it, so it leads a card it holds.

    A bid entry whose lowest bid is beyond ``BID_MAX`` is dropped too: after a bid near the
    int32 limit (a ``min_bid`` of 2**31 - 1 is allowed) the rules still allow a raise, but the
    wire's ``amount`` cannot carry it, and the client refused the bot's bid with a ValueError
    that ended ``pinochle-referee demo`` in a traceback.
    """
    return [
        entry
        for entry in entries
        if not entry.get("drawn_card") and not (entry["type"] == "bid" and entry["min"] > BID_MAX)
    ]


def choose(entry: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A concrete action for a legal-action entry (A.10 item 2), chosen blindly: a bid entry
    becomes its minimum bid, cards to pass or discard are drawn at random.

    Descriptor entries (a bid range, cards to pass, discard or meld from) become one action they
    allow; concrete entries are sent as they are. The ``drawn_card`` entry names no card: drop
    it with ``playable`` first.
    """
    kind = entry["type"]
    if kind == "play" and entry.get("drawn_card"):
        raise ValueError("the drawn-card lead names no card: filter entries with playable()")
    if kind == "bid":
        return {"type": "bid", "amount": entry["min"]}
    if kind in ("pass_cards", "discard"):
        return {"type": kind, "cards": rng.sample(list(entry["from"]), int(entry["count"]))}
    if kind == "meld" and "from" in entry:
        return {"type": "meld", "cards": list(entry["from"])}
    return dict(entry)


def values_cards(entries: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the bot chooses among these legal actions by the value of its cards (to bid,
    name trump, pass, discard or play a card): then ``bot_action`` needs the seat's view; to
    meld alone, it does not, and the demo spares the call."""
    return any(entry["type"] in _VALUED for entry in entries)


def bot_action(
    entries: Sequence[Mapping[str, Any]],
    rng: random.Random,
    view: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The demo bot's concrete action from a seat's legal actions (as ``ListLegalActions``
    returns them): it melds often and concedes never (unless that is all it may do).

    With ``view``, the seat's own view of the game (``GetGame``), it plays its cards like a
    simple player: it bids up to what its hand is worth and passes below that
    (``auction_call``), names the trump its hand is worth most in, keeps its meld and trumps
    when it passes or discards cards (``cards_to_give``), plays a card like a beginner
    (``card_to_play``) and, two-handed, takes the turned-up trump at the last draw. Without one
    it has no cards to value (the benchmarks drive it from legal actions alone): it passes
    three times in four and otherwise picks at random, bidding the minimum and playing any
    legal card.
    """
    usable = playable(entries)
    if not usable:
        raise ValueError(f"no legal action the bot can name among {list(entries)}")
    kinds = {e["type"] for e in usable}
    if view is not None:
        if kinds & {"bid", "bid_or_redeal"}:
            return auction_call(usable, view)
        if "declare_trump" in kinds:
            return _declare_trump(usable, view)
        if kinds & {"pass_cards", "discard"}:
            entry = next(e for e in usable if e["type"] in ("pass_cards", "discard"))
            cards = cards_to_give(entry, view)
            return {"type": entry["type"], "cards": format_cards(cards)}
    elif "bid" in kinds and "pass" in kinds and rng.random() < 0.75:
        return choose(next(e for e in usable if e["type"] == "pass"), rng)
    if len(usable) > 1:
        usable = [e for e in usable if e["type"] != "concede"] or usable
    melds = [e for e in usable if e["type"] in ("meld", "exchange_dix")]
    if melds and rng.random() < 0.8:
        return choose(rng.choice(melds), rng)
    if view is not None and "play" in kinds:
        if {"type": "draw", "turn_up": True} in usable:  # a known trump, not an unknown card
            return {"type": "draw", "turn_up": True}
        cards = [parse_card(e["card"]) for e in usable if e["type"] == "play"]
        return {"type": "play", "card": format_card(card_to_play(cards, view))}
    return choose(rng.choice(usable), rng)


# --------------------------------------------------------------------------------------------
# What a hand is worth: the bots' bidding


@functools.lru_cache(maxsize=32)
def _setup(variant: str, options: str) -> Setup:
    """The game's rule objects as the engine derives them (``make_setup``), so the bots count
    meld and card points exactly as the game scores them; cached, as every bid reads them."""
    return make_setup(resolve_options(variant, json.loads(options)))


def game_setup(view: Mapping[str, Any]) -> Setup:
    """The rule objects of the game a view shows (its ``variant`` and ``options``)."""
    return _setup(view["variant"], json.dumps(view["options"], sort_keys=True))


@functools.lru_cache(maxsize=32)
def _help_meld(setup: Setup) -> int:
    """The meld a hand can count on beyond its own, on average: what the widow or kitty adds to
    it (cutthroat, ``exchange_mode: kitty``) and, in a partnership, the partner's meld, which
    counts for the side. The mean over ``_SAMPLE_HANDS`` deals from a fixed shuffle, each in
    every suit, counted by the game's own table."""
    rules = setup.rules
    deck = list(canonical_deck(rules.deck))
    size, widow = rules.hand_size, rules.widow_size
    shuffler = random.Random("demo-help-meld")
    total = 0
    for _ in range(_SAMPLE_HANDS):
        shuffler.shuffle(deck)
        own = counts_of(deck[:size])
        taken = counts_of(deck[: size + widow])
        partner = counts_of(deck[size + widow : 2 * size + widow])
        for suit in SUITS:
            total += meld_total(taken, suit, setup.meld_table)
            total -= meld_total(own, suit, setup.meld_table)
            if rules.partnerships:
                total += meld_total(partner, suit, setup.meld_table)
    return total // (_SAMPLE_HANDS * len(SUITS))


def trick_points(cards: Sequence[Card], trump: Suit, setup: Setup) -> int:
    """The card points (last-trick bonus included) the declaring side can expect to take.

    The side's fair share of the deck's points (its seats' cards, and the widow a cutthroat
    declarer takes), moved by the hand's trump length: each trump above a quarter of the hand
    adds a share of one card of the side's. Measured when the bots played a random legal
    card: a partnership side with 3, 6 and 8 trumps took about 49%, 64% and 75% of the points,
    a cutthroat declarer with 4, 6 and 8 of 18 cards 35%, 47% and 58%. Their beginner's play
    since (``card_to_play``, on both sides) leaves the declaring side about as much on average
    (README's figures of 2026-12-03).
    """
    rules = setup.rules
    seats = 2 if rules.partnerships else 1
    held = len(cards)
    trumps = sum(1 for card in cards if suit_of(card) == trump)
    share = (rules.hand_size * seats + rules.widow_size) / rules.deck
    share += (trumps - held / 4) / (held * seats)
    return round(setup.total_in_play * min(1.0, max(0.0, share)))


def hand_value(cards: Sequence[Card], trump: Suit, setup: Setup) -> int:
    """What a contract with ``trump`` is worth to the hand's side as the auction sees it: the
    hand's meld, counted by the rules core (``meld_total``, the game's table), the meld its
    partner and the widow or kitty add on average (``_help_meld``), and the trick points it can
    expect. (At the trump, the widow in hand, that allowance is the same for every suit.)"""
    meld = meld_total(counts_of(cards), trump, setup.meld_table) + _help_meld(setup)
    return meld + trick_points(cards, trump, setup)


def best_trump(cards: Sequence[Card], suits: Sequence[Suit], setup: Setup) -> tuple[int, Suit]:
    """The hand's value in its best suit among ``suits`` (not empty), and that suit (of equal
    values, the first in S H D C order)."""
    worth, suit = max((hand_value(cards, suit, setup), -suit) for suit in suits)
    return worth, -suit


def _trump_choices(cards: Sequence[Card], setup: Setup) -> tuple[Suit, ...]:
    """The suits the hand could name as trump: all, or under ``trump_requires_marriage`` those
    it holds the king and queen of (A.7 item 5)."""
    if not setup.rules.trump_requires_marriage:
        return SUITS
    held = set(cards)
    return tuple(s for s in SUITS if {make_card(s, KING), make_card(s, QUEEN)} <= held)


def auction_call(entries: Sequence[Mapping[str, Any]], view: Mapping[str, Any]) -> dict[str, Any]:
    """A bid while the hand is worth it, else a pass.

    The bot raises by the least the bid entry allows (``min``: the opening bid, the next step
    under ``bid_step`` or ``bid_schedule``) while that is at most the hand's value in its best
    trump (only the suits it holds a marriage in under ``trump_requires_marriage``). Below it,
    it passes: "with help" where allowed when its meld in some suit is more than a partner is
    counted on for (``_help_meld``), telling its partner to count on more. A dealer who may not
    pass calls bid-or-redeal when allowed, else takes the minimum it must.
    """
    setup = game_setup(view)
    cards = parse_cards(view["hand"]["cards"])
    suits = _trump_choices(cards, setup)
    worth = best_trump(cards, suits, setup)[0] if suits else 0
    bid = next((e for e in entries if e["type"] == "bid"), None)
    if bid is not None and bid["min"] <= worth:
        return {"type": "bid", "amount": bid["min"]}
    passes = [e for e in entries if e["type"] == "pass"]
    if passes:
        counts = counts_of(cards)
        meld = max(meld_total(counts, suit, setup.meld_table) for suit in SUITS)
        help_ = meld > _help_meld(setup)
        chosen = next((e for e in passes if bool(e.get("help")) == help_), passes[0])
        return dict(chosen)
    if any(e["type"] == "bid_or_redeal" for e in entries):
        return {"type": "bid_or_redeal"}
    if bid is None:
        raise ValueError(f"no call the bot can make among {list(entries)}")
    return {"type": "bid", "amount": bid["min"]}


def _declare_trump(entries: Sequence[Mapping[str, Any]], view: Mapping[str, Any]) -> dict[str, Any]:
    """The offered trump the declarer's hand (the widow or kitty in it) is worth most in."""
    setup = game_setup(view)
    cards = parse_cards(view["hand"]["cards"])
    suits = [parse_suit(e["suit"]) for e in entries if e["type"] == "declare_trump"]
    return {"type": "declare_trump", "suit": format_suit(best_trump(cards, suits, setup)[1])}


def cards_to_give(entry: Mapping[str, Any], view: Mapping[str, Any]) -> list[Card]:
    """The cards to pass or discard for a ``pass_cards`` or ``discard`` entry: one at a time, the
    card of ``from`` whose loss lowers the meld of the cards kept the least (counted in trump by
    the rules core). Of equal losses, the declarer's partner gives its highest trumps, then its
    aces, as help; the declarer, returning cards, a kitty or a bury, gives non-trumps first,
    lowest first, and keeps its trumps and counters for the play."""
    setup = game_setup(view)
    hand = view["hand"]
    trump = parse_suit(hand["trump"])
    kept = list(parse_cards(hand["cards"]))
    offered = list(parse_cards(entry["from"]))
    helping = entry["type"] == "pass_cards" and view["role"] != hand["declarer"]

    def order(card: Card) -> tuple[bool, int, Card]:
        trumped = suit_of(card) == trump
        if helping:  # trumps first, then aces, higher first
            return (not trumped, rank_of(card) if trumped or rank_of(card) == ACE else 9, card)
        return (trumped, -rank_of(card), card)

    given: list[Card] = []
    for _ in range(int(entry["count"])):
        card = max(
            sorted(set(offered), key=order), key=lambda c: meld_without(kept, c, trump, setup)
        )
        kept.remove(card)
        offered.remove(card)
        given.append(card)
    return given


def meld_without(cards: Sequence[Card], card: Card, trump: Suit, setup: Setup) -> int:
    """The meld of ``cards`` less one copy of ``card`` (held), by the game's own table: what
    the hand keeps if it gives or plays that card."""
    rest = list(cards)
    rest.remove(card)
    return meld_total(counts_of(rest), trump, setup.meld_table)


# --------------------------------------------------------------------------------------------
# The play of the tricks


@dataclass(frozen=True, slots=True)
class Sight:
    """What a seat may see of the play, read from its own view (``seat_sight``): its cards,
    the trick so far, the trump, and what the completed tricks tell (the cards gone, the suits a
    seat has shown it lacks). Nothing here comes from another seat's concealed cards."""

    setup: Setup
    seat: int
    partner: int | None  # partnership variants: the seat across; otherwise none
    trump: Suit
    held: tuple[Card, ...]  # the seat's own cards, its two-handed melds on the table included
    trick: tuple[Card, ...]
    leader: int
    unseen: tuple[int, ...]  # copies of each face not in the seat's sight (``counts_of``)
    voids: tuple[frozenset[Suit], ...]  # per seat: suits it failed to follow
    stock: bool  # two-handed before the stock runs out: no obligation to follow

    def seat_at(self, position: int) -> int:
        """The seat that plays the trick's card at ``position`` (0: the leader)."""
        return (self.leader + position) % self.setup.rules.players

    def later_opponents(self) -> list[int]:
        """The seats still to play to the trick after this one, but for its partner."""
        players = self.setup.rules.players
        later = (self.seat_at(p) for p in range(len(self.trick) + 1, players))
        return [s for s in later if s != self.partner]


def seat_sight(view: Mapping[str, Any]) -> Sight:
    """The seat's ``Sight`` from its view (``GetGame``) during the play."""
    setup = game_setup(view)
    rules = setup.rules
    hand = view["hand"]
    seat = int(view["role"])
    held = parse_cards(hand["cards"])
    if "table" in hand:  # two-handed: melded cards stay the seat's to play
        held += parse_cards(hand["table"][seat])
    trick = hand["trick"]
    current = parse_cards(trick["cards"])
    gone = [*held, *current, *parse_cards(hand.get("discards") or [])]
    # Who failed to follow shows a void, but not in two-handed's stock play (its first tricks,
    # one per pair of cards in the stock), where any card may be played.
    free = (rules.deck - rules.players * rules.hand_size) // 2 if setup.two_handed else 0
    voids: list[set[Suit]] = [set() for _ in range(rules.players)]
    played = [(parse_cards(t["cards"]), int(t["leader"])) for t in hand["tricks"]]
    for number, (cards, leader) in enumerate([*played, (current, int(trick["leader"]))]):
        if number != len(played):
            gone += cards
        for position, card in enumerate(cards):
            if number >= free and suit_of(card) != suit_of(cards[0]):
                voids[(leader + position) % rules.players].add(suit_of(cards[0]))
    counts = counts_of(canonical_deck(rules.deck))
    for card in gone:
        counts[card] = max(0, counts[card] - 1)
    return Sight(
        setup=setup,
        seat=seat,
        partner=(seat + 2) % 4 if rules.partnerships else None,
        trump=parse_suit(hand["trump"]),
        held=held,
        trick=current,
        leader=int(trick["leader"]),
        unseen=tuple(counts),
        voids=tuple(frozenset(v) for v in voids),
        stock=hand["phase"] == "stock_play",
    )


def card_to_play(cards: Sequence[Card], view: Mapping[str, Any]) -> Card:
    """The card a beginner plays among ``cards``, the legal ones the server listed, from the
    seat's own view: ``lead`` or ``follow``. Deterministic: the same view and cards give the
    same card, so a demo's game still follows from its seed."""
    if not cards:
        raise ValueError("no legal card to play")
    sight = seat_sight(view)
    legal = sorted(set(cards))
    return follow(legal, sight) if sight.trick else lead(legal, sight)


def _value(card: Card, sight: Sight) -> int:
    """The card's points under the game's own counting scheme."""
    return sight.setup.counting.card_value[card]


def _cheap(card: Card, sight: Sight) -> tuple[int, bool, int]:
    """Sort key, cheapest first: fewest points, a side suit before trump, the lowest rank."""
    return (_value(card, sight), suit_of(card) == sight.trump, -rank_of(card))


def _meld_lost(card: Card, sight: Sight) -> int:
    """Sort key for two-handed's stock play, where melds still score: the meld lost by playing
    the card (none in the other phases and variants, whose meld is counted before the play)."""
    if not sight.stock:
        return 0
    whole = meld_total(counts_of(sight.held), sight.trump, sight.setup.meld_table)
    return whole - meld_without(sight.held, card, sight.trump, sight.setup)


def _threatened(best: Card, sight: Sight, opponents: Sequence[int]) -> bool:
    """Whether one of ``opponents``, still to play, may beat ``best``, the card now winning the
    trick: an unseen higher card of its suit, or an unseen trump when one of them has shown it
    lacks the suit led (the opponents' cards stay unknown: only their voids are public)."""
    if not opponents:
        return False
    led = suit_of(sight.trick[0]) if sight.trick else suit_of(best)
    trump_void = suit_of(best) != sight.trump and any(led in sight.voids[s] for s in opponents)
    return any(
        copies
        and trick_winner((best, face), sight.trump) == 1
        and (suit_of(face) == suit_of(best) or trump_void)
        for face, copies in enumerate(sight.unseen)
    )


def follow(cards: Sequence[Card], sight: Sight) -> Card:
    """The card to play to a trick already led.

    With the partner winning the trick and no later opponent likely to beat it, the most
    points the seat may give, from a side suit where it can (trumps are kept), the lower card
    of equal points. Otherwise it takes the trick if it can, with its cheapest winning card,
    one no later opponent is seen to beat first, and over its partner only with such a card.
    Else it throws its cheapest card, the fewest points. In two-handed's stock play, free of
    any obligation, it wins only with a side-suit card or, for a trick that holds points, a
    trump, and keeps the cards its meld needs where another card will do.
    """
    trick = sight.trick
    position = trick_winner(trick, sight.trump)
    best = trick[position]
    opponents = sight.later_opponents()
    partner_wins = sight.seat_at(position) == sight.partner
    if partner_wins and not _threatened(best, sight, opponents):
        return max(cards, key=lambda c: (suit_of(c) != sight.trump, _value(c, sight), rank_of(c)))
    winners = [c for c in cards if trick_winner((*trick, c), sight.trump) == len(trick)]
    if sight.stock:
        counted = any(_value(c, sight) for c in trick)
        winners = [c for c in winners if suit_of(c) != sight.trump or counted]
    sure = [c for c in winners if not _threatened(c, sight, opponents)]
    if sure or (winners and not partner_wins):
        return min(sure or winners, key=lambda c: (_meld_lost(c, sight), *_win_cost(c, sight)))
    return min(cards, key=lambda c: (_meld_lost(c, sight), *_cheap(c, sight)))


def _win_cost(card: Card, sight: Sight) -> tuple[bool, int]:
    """Sort key among winning cards, cheapest first: a side-suit card before a trump, then the
    lowest rank (whose points, if any, the seat takes with the trick)."""
    return (suit_of(card) == sight.trump, -rank_of(card))


def lead(cards: Sequence[Card], sight: Sight) -> Card:
    """The card to lead: a side-suit card likely to win (an ace, or the highest card of its
    suit still out) in a suit no opponent has shown it lacks, highest first; else its
    cheapest side-suit card; with trumps only, its highest trump if none is out above it, else
    its lowest. Trumps are kept for later. In two-handed's stock play a card its meld needs is
    never led as a likely winner, and otherwise only when every card is needed."""
    opponents = [
        s for s in range(sight.setup.rules.players) if s not in (sight.seat, sight.partner)
    ]
    side = [c for c in cards if suit_of(c) != sight.trump]
    likely = [
        c
        for c in side
        if not any(suit_of(c) in sight.voids[s] for s in opponents)
        and not _outranked(c, sight)
        and not _meld_lost(c, sight)
    ]
    if likely:
        return min(likely, key=lambda c: (rank_of(c), c))
    if side:
        return min(side, key=lambda c: (_meld_lost(c, sight), *_cheap(c, sight)))
    top = min(cards)  # trumps only: the highest first
    if not _outranked(top, sight):
        return top
    return min(cards, key=lambda c: (_meld_lost(c, sight), *_cheap(c, sight)))


def _outranked(card: Card, sight: Sight) -> bool:
    """Whether an unseen card of the same suit ranks above ``card``."""
    return any(sight.unseen[make_card(suit_of(card), rank)] for rank in range(rank_of(card)))


async def play_game(
    client: RefereeClient,
    variant: str,
    options: Mapping[str, object] | None,
    seed: str,
    console: Console,
    creator_token: str | None = None,
) -> dict[str, Any]:
    """Play one game; stop after ``MAX_HANDS`` hands when nobody has won by then. Returns the
    last view."""
    game = await client.create_game(variant, options, seed=seed, creator_token=creator_token)
    # After the game is created: the client refuses a seed that is not Unicode text naming it,
    # where random's refusal named nothing.
    rng = random.Random(seed)
    seats: list[SeatSession] = [client.seat(game.game_id, t) for t in game.seat_tokens]
    console.print(f"[bold]game {game.game_id}[/bold]: {variant}, {len(seats)} seats")
    # The first hand was dealt by CreateGame, whose events the loop below never sees: its
    # opening comes from the view (later hands' come with the action that ended the last one).
    first = await seats[0].view()
    two_handed = first["variant"] == "two-handed"
    _print_opening(console, first["hand"], len(seats))
    while True:
        view = await seats[0].view()
        if view["over"]:
            break
        if view["hands_completed"] >= MAX_HANDS:
            console.print(
                f"[bold]stopped[/bold] after {view['hands_completed']} hands with no winner,"
                f" scores {view['scores']}"
            )
            return dict(view)
        acted = False
        for seat_number, seat in enumerate(seats):
            entries = playable(await seat.legal_actions())
            if not entries:
                continue
            seen = await seat.view() if values_cards(entries) else None
            action = bot_action(entries, rng, seen)
            try:
                result = await seat.submit(action)
            except RefereeError as error:  # another seat acted first: try again
                console.print(f"  refused {error.reason}: {error.message}")
                continue
            acted = True
            for event in result["events"]:
                _print_event(console, seat_number, event, two_handed=two_handed)
            break
        if not acted:
            raise RuntimeError("no seat could act")
    final: dict[str, Any] = await seats[0].view()
    console.print(f"[bold]game over[/bold]: winner {final['winner']}, scores {final['scores']}")
    return final


def _print_opening(console: Console, hand: Mapping[str, Any], players: int) -> None:
    """The first hand's opening, from the view: CreateGame dealt it, and the events it made
    (the header, a turned-up trump, the dealer's 10 for a turned-up 9 in two-handed, automatic
    melds) come back with no action the loop sees."""
    _print_event(
        console, 0, {"kind": "hand_started", "hand": hand["number"], "dealer": hand["dealer"]}
    )
    if hand["trump"] is not None:  # turned up at the deal (two-handed, no-bid)
        _print_event(console, 0, {"kind": "trump_turned", "suit": hand["trump"]})
    turned = hand["turn_up"]
    if "meld_points" in hand and turned is not None and turned.startswith("9"):
        # Two-handed (A.8): the dealer scored the dix turned up, all its meld points so far.
        dealer = hand["dealer"]
        dix = {"seat": dealer, "card": turned, "points": hand["meld_points"][dealer]}
        _print_event(console, dealer, {"kind": "dix_turned", **dix})
    melds = hand["melds"]
    first = (hand["dealer"] + 1) % players  # automatic melds at the deal: no-bid only
    for seat in (*range(first, players), *range(first)):
        if melds[seat] is not None:
            _print_event(
                console,
                seat,
                {"kind": "meld_scored", "seat": seat, "points": melds[seat]["points"]},
            )


def _print_event(
    console: Console, seat: int, event: Mapping[str, Any], *, two_handed: bool = False
) -> None:
    """One line for an event the log shows. Two-handed dix points that come from no meld (a
    turned-up 9 of trump, a dix exchange, a 9 of trump played where ``dix_scores_when_played``)
    are printed where they score, as the hand result counts them; a no-bid exchange's 10 is in
    the exchanger's meld line (A.7 item 7), which says so."""
    kind = event["kind"]
    if kind == "hand_started":
        console.print(f"[bold cyan]hand {event['hand']}[/bold cyan], dealer {event['dealer']}")
    elif kind == "contract":
        console.print(f"  contract: seat {event['declarer']} at {event['bid']}")
    elif kind in {"trump_declared", "trump_turned"}:
        console.print(f"  trump {event['suit']}")
    elif kind == "meld_scored":
        console.print(f"  seat {event['seat']} melds {event['points']}")
    elif kind == "dix_turned":
        console.print(
            f"  seat {event['seat']} scores {event['points']} for the dix turned up"
            f" ({event['card']})",
            highlight=False,
        )
    elif kind == "dix_exchanged":
        scored = "scores" if two_handed else "to count in its meld:"
        console.print(
            f"  seat {event['seat']} exchanges the dix ({event['gave']} for {event['took']}),"
            f" {scored} {event['points']}",
            highlight=False,
        )
    elif kind == "dix_played":
        console.print(
            f"  seat {event['seat']} scores {event['points']} for the dix played",
            highlight=False,
        )
    elif kind == "trick_taken":
        console.print(
            f"  trick {' '.join(event['cards'])} -> seat {event['seat']} ({event['points']})",
            highlight=False,
        )
    elif kind == "hand_result":
        console.print(
            f"  [green]hand result[/green] delta {event['delta']}, scores {event['scores']}"
        )
    elif kind == "conceded":
        why = " (no marriage to name trump)" if event["no_trump"] else ""
        console.print(f"  seat {event['seat']} concedes{why}")
    elif kind == "redeal":
        # A round of passes, or of passes and bid_or_redeal calls (A.7 item 2): no bid either way.
        console.print("  no bid: redeal")
    del seat


def channel_credentials(ca: str, cert: str, key: str) -> grpc.ChannelCredentials | None:
    """TLS credentials from the demo's PEM files ("" for none): None (plain text) when none is
    given; the server's CA (or, without one, the system's trusted roots) and, for mutual TLS,
    the client's certificate chain and key, as ``RefereeClient`` takes them. Raises OSError
    for a file it cannot read."""
    if not (ca or cert or key):
        return None

    def read(path: str) -> bytes | None:
        return Path(path).read_bytes() if path else None

    return grpc.ssl_channel_credentials(
        root_certificates=read(ca), private_key=read(key), certificate_chain=read(cert)
    )


async def run_demo(
    variant: str,
    options: Mapping[str, object] | None,
    seed: str,
    address: str | None,
    creator_token: str | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> int:
    """Play one game against ``address`` (with ``credentials``, a TLS server) or, with none, a
    server started for it on a throw-away database."""
    if credentials is not None and address is None:
        raise ValueError("TLS credentials need an address: the demo's own server is plain text")
    console = Console()
    # The server's per-RPC log lines would drown the game log: show warnings only.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if address is not None:
        async with RefereeClient(address, credentials=credentials) as client:
            await play_game(client, variant, options, seed, console, creator_token)
        return 0
    from referee.service.server import start_server  # noqa: PLC0415
    from referee.service.settings import Settings  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(port=0, db=str(Path(folder) / "demo.db"), metrics_port=0)
        running = await start_server(settings)
        try:
            async with RefereeClient(f"127.0.0.1:{running.port}") as client:
                await play_game(client, variant, options, seed, console)
        finally:
            await running.stop(1.0)
    return 0
