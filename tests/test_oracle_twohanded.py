"""N-version test: the two-handed turn machine against an independent model.

The model is ``tests/oracle_twohanded.py``, written from RULES.md alone.

Random legal two-handed games under random option sets are driven through the engine; at every
position both seats' ``legal_actions`` are compared with the model's (the kinds of action, the
cards that may be played, each meld entry with its cards and points, the dix exchange, the draw
choice), actions just outside the listed ones are sent to ``apply`` and their A.5 codes compared,
the public view (meld points, table cards, stock size, window) and each seat's concealed cards are
compared, and after every accepted action the events of the model's area (draws, the turned
card, melds, dixes, trick winners) are compared with the model's prediction.

Which card the play-off ladder allows and how trick points count are another test's business:
here a play-off play entry is only checked to be a card of the seat's hand.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from referee.engine.actions import Action, Draw, ExchangeDix, Meld, Play, decode_action
from referee.engine.engine import apply, legal_actions
from referee.engine.errors import IllegalAction
from referee.engine.events import Event
from referee.engine.game import Game, GivenDeals, SeededDeals
from referee.engine.state import GameState
from referee.engine.views import SPECTATOR, view
from referee.rules.cards import (
    ACE,
    CARD_COUNT,
    DIAMONDS,
    JACK,
    KING,
    NINE,
    QUEEN,
    SUITS,
    TEN,
    Card,
    canonical_deck,
    format_card,
    make_card,
    parse_card,
    parse_cards,
    rank_of,
    suit_of,
)
from referee.rules.dealing import Deal
from referee.rules.options import resolve_options
from tests.oracle_twohanded import (
    MELD_CLASS,
    PREDICTED_KINDS,
    Observed,
    OracleHand,
    TwoHandedDeal,
    TwoHandedOptions,
    deal_from_seed,
    meld_face_sets,
)

Fields = tuple[tuple[str, object], ...]

MELD_RANKS = (ACE, KING, QUEEN, JACK)

# --------------------------------------------------------------------------------------------
# Option sets: every two-handed option of OPTIONS.md, defaults and non-defaults, and the
# Hoyle/Bicycle profile of the README.

HOYLE_PROFILE: dict[str, object] = {
    "new_card_required": True,
    "deferred_meld_scoring": False,
    "head_rule": "trump_lead_only",
    "dix_scores_when_played": False,
}

_CHOICES: dict[str, Sequence[object]] = {
    "new_card_required": (True, False),
    "deferred_meld_scoring": (True, False),
    "dix_scores_when_played": (True, False),
    "last_draw": ("winner_facedown", "winner_chooses"),
    "head_rule": ("always", "trump_lead_only", "never"),
    "must_trump_when_void": (True, False),
    "count_scheme": ("simple_10_5", "classic_11", "modern10"),
    "meld_values": (
        {"pinochle": [50]},
        {"dix": [20], "run": [200, 400]},
        {"queens_around": [70], "marriage": [25]},
        {"dix": [0]},
    ),
}


def random_options(rng: random.Random) -> dict[str, object]:
    """A valid two-handed options object: each option left out or set at random, sometimes the
    Hoyle/Bicycle profile; a target high enough for a game of two or three hands."""
    options: dict[str, object] = {"target": rng.choice([600, 900, 1200])}
    for name, values in _CHOICES.items():
        if rng.random() < 0.5:
            options[name] = rng.choice(values)
    if rng.random() < 0.2:
        options |= HOYLE_PROFILE
    resolve_options("two-handed", options)  # a refusal here is a bug in this strategy
    return options


# --------------------------------------------------------------------------------------------
# Normalising the engine's answers


def _fields(kind: str, event: Event) -> Fields:
    data = event.data
    if kind == "card_drawn":
        return (("seat", event.audience), ("card", parse_card(data["card"])))
    if kind == "cards_drawn":
        return (("first", data["first"]), ("stock", data["stock"]))
    if kind == "turn_up_taken":
        return (("seat", data["seat"]), ("card", parse_card(data["card"])))
    if kind == "stock_exhausted":
        sizes = data["hand_sizes"]
        assert isinstance(sizes, list)
        return (("hand_sizes", tuple(sizes)),)
    if kind == "dix_played":
        return (("seat", data["seat"]), ("points", data["points"]))
    if kind == "dix_exchanged":
        return (
            ("seat", data["seat"]),
            ("took", parse_card(data["took"])),
            ("gave", parse_card(data["gave"])),
            ("points", data["points"]),
        )
    if kind == "meld_scored":
        return (
            ("seat", data["seat"]),
            ("name", data["name"]),
            ("cards", tuple(sorted(parse_cards(data["cards"])))),
            ("from_table", tuple(sorted(parse_cards(data["from_table"])))),
            ("points", data["points"]),
            ("claimed_pending", data["claimed_pending"]),
        )
    if kind == "trick_taken":
        return (("seat", data["seat"]), ("cards", tuple(parse_cards(data["cards"]))))
    assert kind == "draw_chosen"
    return (("seat", data["seat"]), ("turn_up", data["turn_up"]))


def engine_observed(events: Sequence[Event]) -> list[tuple[str, Fields]]:
    """The events of the model's area, up to the end of the hand, in order."""
    out = []
    for event in events:
        if event.kind == "hand_result":
            break
        if event.kind in PREDICTED_KINDS:
            out.append((event.kind, _fields(event.kind, event)))
    return _without_empty_dix(out)


def _without_empty_dix(items: Sequence[tuple[str, Fields]]) -> list[tuple[str, Fields]]:
    """A played dix worth 0 (``meld_values: {"dix": [0]}``) changes no score; the engine does
    not report it, and whether it should is not written down."""
    return [(kind, f) for kind, f in items if not (kind == "dix_played" and ("points", 0) in f)]


@dataclass(frozen=True, slots=True)
class Listed:
    """One seat's legal actions, normalised: action kinds, playable faces, the drawn-card play,
    melds as (name, sorted faces, points), and the draw choices offered."""

    kinds: frozenset[str]
    plays: frozenset[Card]
    drawn_card: bool
    melds: frozenset[tuple[str, tuple[Card, ...], int]]
    draws: frozenset[bool]


def engine_listed(state: GameState, seat: int) -> Listed:
    entries = legal_actions(state, seat)
    assert len({json.dumps(e, sort_keys=True) for e in entries}) == len(entries), entries
    plays = set()
    drawn = False
    melds = set()
    draws = set()
    for entry in entries:
        if entry["type"] == "play":
            if entry.get("drawn_card"):
                drawn = True
            else:
                plays.add(parse_card(entry["card"]))
        elif entry["type"] == "meld":
            points = entry["points"]
            assert isinstance(points, int)
            cards = tuple(sorted(parse_cards(entry["cards"])))
            melds.add((str(entry["name"]), cards, points))
        elif entry["type"] == "draw":
            draws.add(bool(entry["turn_up"]))
    kinds = frozenset(str(e["type"]) for e in entries)
    return Listed(kinds, frozenset(plays), drawn, frozenset(melds), frozenset(draws))


def oracle_listed(oracle: OracleHand, seat: int) -> Listed:
    plays = oracle.playable_faces(seat)
    drawn = bool(plays) and oracle.window_seat == seat
    melds = oracle.legal_melds(seat)
    draws = frozenset({True, False}) if oracle.can_choose_draw(seat) else frozenset()
    kinds = set()
    if plays:
        kinds.add("play")
    if melds:
        kinds.add("meld")
    if oracle.can_exchange(seat):
        kinds.add("exchange_dix")
    if draws:
        kinds.add("draw")
    return Listed(frozenset(kinds), frozenset(plays), drawn, frozenset(melds), draws)


def refusal(state: GameState, seat: int, action: Action) -> str | None:
    try:
        apply(state, seat, action)
    except IllegalAction as refused:
        return refused.code
    return None


# --------------------------------------------------------------------------------------------
# One game, compared step by step


@dataclass
class Tally:
    """What a run compared (reported when the test fails, and asserted to be non-trivial)."""

    games: int = 0
    hands: int = 0
    positions: int = 0
    probes: int = 0
    melds: int = 0
    claims: int = 0
    exchanges: int = 0
    table_plays: int = 0
    chosen_draws: int = 0
    seen_options: set[str] = field(default_factory=set)


class ComparedGame:
    """A ``Game`` and the model side by side."""

    def __init__(
        self,
        options: dict[str, object],
        seed: str,
        dealer: int,
        tally: Tally,
        given: Sequence[TwoHandedDeal] = (),
        favoured: int | None = None,
    ) -> None:
        """``given``: the first hands' deals (the rest from the seed), else seeded deals;
        ``favoured``: a seat the policy lets win phase-1 tricks."""
        self.favoured = favoured
        self.options = options
        self.model_options = TwoHandedOptions.from_options(options)
        self.seed = seed
        self.tally = tally
        self.given = list(given)
        engine_deals = [Deal((d.hands[0], d.hands[1]), (), d.stock, d.turn_up) for d in given]
        deals = GivenDeals(engine_deals, then=SeededDeals(seed))
        self.game = Game(resolve_options("two-handed", options), dealer, deals)
        self.oracle = self._new_hand(self.game.events)

    def _new_hand(self, events: Sequence[Event]) -> OracleHand:
        """Check the deal events of a new hand against the model's deal; the model's hand."""
        state = self.game.state
        hand = state.hand
        assert hand is not None
        number = state.hands_completed
        dealer = hand.dealer
        assert dealer == (self.game.state.first_dealer + number) % 2  # §2.1: the deal alternates
        if number < len(self.given):
            deal = self.given[number]
        else:
            deal = deal_from_seed(f"{self.seed}:{number}", dealer)
        dealt = {
            e.audience: parse_cards(e.data["cards"]) for e in events if e.kind == "cards_dealt"
        }
        assert dealt == {0: deal.hands[0], 1: deal.hands[1]}
        [sealed] = [e.data["deal"] for e in events if e.kind == "deal"]
        assert isinstance(sealed, Mapping)
        assert parse_card(sealed["turn_up"]) == deal.turn_up
        assert parse_cards(sealed["stock"]) == deal.stock
        [turned] = [e.data for e in events if e.kind == "trump_turned"]
        assert parse_card(turned["card"]) == deal.turn_up
        oracle = OracleHand(self.model_options, dealer, deal)
        dix = [(e.data["seat"], e.data["points"]) for e in events if e.kind == "dix_turned"]
        expected: list[tuple[object, object]] = []
        if oracle.turned_dix_seat is not None:  # §2.1: the dealer scores a turned 9 at once
            expected.append((dealer, oracle.meld_points[dealer]))
        assert dix == expected
        self.tally.hands += 1
        return oracle

    # ----------------------------------------------------------------------------------------

    def compare_position(self) -> None:
        state = self.game.state
        hand = state.hand
        assert hand is not None
        oracle = self.oracle
        self.tally.positions += 1
        for seat in (0, 1):
            got, want = engine_listed(state, seat), oracle_listed(oracle, seat)
            if oracle.playoff and oracle.to_act() == seat:
                # The play-off ladder is not modelled: a play entry is some card of the hand.
                assert got.plays and got.plays <= want.plays, (seat, got, want)
                want = Listed(want.kinds, got.plays, want.drawn_card, want.melds, want.draws)
            assert got == want, self.where(seat, got, want)
        # Views: meld points, table, stock, window, own cards.
        public = view(state, SPECTATOR)["hand"]
        assert isinstance(public, dict)
        assert public["meld_points"] == oracle.meld_points
        assert [sorted(parse_cards(t)) for t in public["table"]] == [
            sorted(c.face for c in oracle.tables[s]) for s in (0, 1)
        ]
        assert public["stock_size"] == len(oracle.stock)  # face-down cards (§2.1)
        expected_phase = "play" if oracle.playoff else "stock_play"
        assert public["phase"] == expected_phase
        assert public["window_seat"] == oracle.window_seat
        pending = public["pending"]
        assert isinstance(pending, list)
        assert [
            sorted((p["name"], tuple(sorted(parse_cards(p["cards"])))) for p in side)
            for side in pending
        ] == [sorted(oracle.pending_faces(s)) for s in (0, 1)], self.where(
            -1, pending, oracle.pending
        )
        assert public["turn"] == oracle.to_act()
        turned = None if oracle.turned is None else format_card(oracle.turned.face)
        assert public["turn_up"] == turned
        assert public["trump"] == "SHDC"[oracle.trump]
        for seat in (0, 1):
            assert sorted(hand.hands[seat]) == sorted(c.face for c in oracle.hands[seat])

    def where(self, seat: int, got: object, want: object) -> str:
        oracle = self.oracle
        return (
            f"options={self.options} seed={self.seed} trick={oracle.tricks_done} seat={seat}"
            f"\nengine={got}\noracle={want}"
        )

    def probe(self) -> None:
        """Actions just outside the listed ones get the model's A.5 code."""
        state = self.game.state
        oracle = self.oracle
        for seat in (0, 1):
            for name in MELD_CLASS:
                candidates = list(meld_face_sets(name, oracle.trump))
                if name == "marriage":  # A.7 item 6: the trump K-Q is not a `marriage`
                    candidates.append(
                        (make_card(oracle.trump, KING), make_card(oracle.trump, QUEEN))
                    )
                if name == "run":  # wrong cards: the royal marriage's
                    candidates.append(
                        (make_card(oracle.trump, KING), make_card(oracle.trump, QUEEN))
                    )
                for faces in candidates:
                    action = Meld(cards=tuple(faces), name=name)
                    want = oracle.meld_code(seat, name, faces)
                    got = refusal(state, seat, action)
                    assert got == want, self.where(seat, (name, faces, got), want)
                    if want is None:
                        wrong = oracle.options.values[name] + 5
                        got = refusal(
                            state, seat, Meld(cards=tuple(faces), name=name, points=wrong)
                        )
                        assert got == "MELD_MISCOUNT", self.where(seat, (name, faces, got), wrong)
                    self.tally.probes += 1
            want_exchange = None if oracle.can_exchange(seat) else "DIX_EXCHANGE_NOT_ALLOWED"
            assert refusal(state, seat, ExchangeDix()) == want_exchange, self.where(
                seat, "exchange_dix", want_exchange
            )
            for turn_up in (True, False):
                want_draw = self.draw_code(seat)
                got_draw = refusal(state, seat, Draw(turn_up))
                assert got_draw == want_draw, self.where(seat, ("draw", got_draw), want_draw)
            self.probe_plays(state, seat)

    def draw_code(self, seat: int) -> str | None:
        oracle = self.oracle
        if oracle.can_choose_draw(seat):
            return None
        if oracle.to_act() != seat:
            return "NOT_YOUR_TURN"
        return "WRONG_PHASE"

    def probe_plays(self, state: GameState, seat: int) -> None:
        """A card neither in the hand nor on the seat's own table (an opponent's table card
        included) is CARD_NOT_IN_HAND (A.8 item 4); any play out of turn is NOT_YOUR_TURN.
        The card about to be drawn is never sent (the known probe of the stock's top card)."""
        oracle = self.oracle
        held = oracle.playable_faces(seat) if oracle.to_act() == seat else set()
        if oracle.to_act() != seat:
            face = (oracle.hands[seat] or oracle.tables[seat] or oracle.hands[1 - seat])[0].face
            assert refusal(state, seat, Play(face)) == "NOT_YOUR_TURN"
            return
        about_to_be_drawn = oracle.card_to_be_drawn() if oracle.window_seat == seat else None
        opponents = [c.face for c in oracle.tables[1 - seat]]
        outside = [f for f in range(CARD_COUNT) if f not in held and f != about_to_be_drawn]
        for face in [*opponents[:2], *outside[:2]]:
            if face in held or face == about_to_be_drawn:
                continue
            got = refusal(state, seat, Play(face))
            assert got == "CARD_NOT_IN_HAND", self.where(seat, ("play", format_card(face), got), "")

    # ----------------------------------------------------------------------------------------

    def choose(self, rng: random.Random) -> tuple[int, dict[str, object]]:
        """A legal action of either seat, chosen to build meld-rich positions: a listed meld
        (first one made of table cards alone, then an around), dix exchange or draw most of
        the time; plays mostly from the concealed hand, so that melded cards stay on the table
        to meld again; leads mostly of tens and nines; the follower mostly losing the trick
        (or, in a lopsided game, letting seat 0 win); the drawn-card entry led as the card the
        model says will be drawn."""
        state = self.game.state
        oracle = self.oracle
        entries = [(seat, e) for seat in (0, 1) for e in legal_actions(state, seat)]
        assert entries, "nobody can act"
        melds = [(s, e) for s, e in entries if e["type"] == "meld"]
        held = [{c.face for c in oracle.hands[seat]} for seat in (0, 1)]
        from_table = [(s, e) for s, e in melds if not set(parse_cards(e["cards"])) & held[s]]
        arounds = [(s, e) for s, e in melds if str(e["name"]).endswith("_around")]
        others = [(s, e) for s, e in entries if e["type"] not in ("play", "meld")]
        plays = [(s, e) for s, e in entries if e["type"] == "play"]
        concealed = [
            (s, e)
            for s, e in plays
            if e.get("drawn_card") or parse_card(e["card"]) in {c.face for c in oracle.hands[s]}
        ]
        roll = rng.random()
        if melds and roll < (0.97 if self.favoured is not None else 0.85):
            if from_table and rng.random() < 0.7:
                entries = from_table
            elif arounds and rng.random() < 0.6:
                entries = arounds
            else:
                entries = melds
        elif others and roll < 0.9:
            entries = others
        elif concealed and rng.random() < (0.9 if self.favoured is not None else 0.85):
            entries = concealed
        else:
            on_table = [(s, e) for s, e in plays if (s, e) not in concealed]
            entries = on_table or plays or entries
        if not oracle.trick and not oracle.playoff and rng.random() < 0.8:
            # Mostly lead tens and nines, which meld in nothing but a dix.
            spare = [
                (s, e)
                for s, e in entries
                if "card" in e and rank_of(parse_card(e["card"])) in (TEN, NINE)
            ]
            entries = spare or entries
        if oracle.trick and not oracle.playoff and rng.random() < 0.8:
            # Mostly let the leader win (or the favoured seat), so that one seat melds trick
            # after trick.
            follower = oracle.to_act()
            leader_wins = self.favoured is None or follower != self.favoured
            wanted = [
                (s, e)
                for s, e in entries
                if "card" in e and oracle.loses_to_lead(parse_card(e["card"])) == leader_wins
            ]
            entries = wanted or entries
        seat, entry = rng.choice(entries)
        action = dict(entry)
        if action.pop("drawn_card", None):
            action["card"] = format_card(oracle.card_to_be_drawn())
        if action["type"] == "meld" and rng.random() < 0.5:
            action.pop("points", None)
        return seat, action

    def step(self, rng: random.Random) -> None:
        seat, data = self.choose(rng)
        oracle = self.oracle
        action = decode_action(data)
        events = self.game.act(seat, action)
        predicted = self.predict(seat, action)
        got = engine_observed(events)
        want = _without_empty_dix(predicted.items)
        assert got == want, self.where(seat, got, want) + f"\naction={data}"
        ended = next((e for e in events if e.kind == "hand_result"), None)
        if ended is not None:
            assert oracle.over
            assert ended.data["meld"] == oracle.meld_points  # A.8 item 9
            if not self.game.state.over:
                start = next(i for i, e in enumerate(events) if e.kind == "hand_started")
                self.oracle = self._new_hand(events[start:])
        else:
            assert not oracle.over

    def predict(self, seat: int, action: Action) -> Observed:
        oracle = self.oracle
        tally = self.tally
        if isinstance(action, Meld):
            assert action.name is not None
            observed = oracle.meld(seat, action.name, action.cards)
            tally.melds += 1
            tally.claims += any(
                dict(fields).get("claimed_pending") is True for _, fields in observed.items
            )
            return observed
        if isinstance(action, ExchangeDix):
            tally.exchanges += 1
            return oracle.exchange(seat)
        if isinstance(action, Draw):
            tally.chosen_draws += 1
            return oracle.choose_draw(seat, action.turn_up)
        assert isinstance(action, Play)
        drawn = oracle.window_seat == seat and action.card == oracle.card_to_be_drawn()
        held = {c.face for c in oracle.hands[seat]}
        if not oracle.playoff and not drawn and action.card not in held:
            tally.table_plays += 1
        return oracle.play(seat, action.card)


def meld_rich_deal(rng: random.Random) -> TwoHandedDeal:
    """A deal with the aces, kings, queens and jacks mostly in the hands and near the top of
    the stock (each card's place drawn at random, those ranks pulled forward), so that seats
    hold several melds at once and lay down cards that meld again."""
    deck = list(canonical_deck(48))
    keys = {
        i: rng.random() - (0.45 if rank_of(card) in MELD_RANKS else 0.0)
        for i, card in enumerate(deck)
    }
    order = [deck[i] for i in sorted(keys, key=keys.__getitem__)]
    hands = (tuple(sorted(order[:12])), tuple(sorted(order[12:24])))
    return TwoHandedDeal(hands, order[24], tuple(order[25:]))


def lopsided_deal(rng: random.Random) -> TwoHandedDeal:
    """A deal giving seat 0 a king and a queen of every suit, the ace, ten and jack of
    diamonds and the other king of diamonds, with a diamond turned for trump: the run, the
    marriages, two arounds and the pinochle overlap there. With seat 0 favoured by the policy
    it melds progressively, trick after trick, and leaves deferred melds behind."""
    deck = list(canonical_deck(48))
    rng.shuffle(deck)
    favoured = [make_card(suit, rank) for suit in SUITS for rank in (KING, QUEEN)]
    favoured += [make_card(DIAMONDS, rank) for rank in (ACE, TEN, JACK)]
    favoured += [make_card(DIAMONDS, KING)]  # the other trump king: a royal marriage beside a run
    for card in favoured:
        deck.remove(card)
    turned = next(c for c in deck if suit_of(c) == DIAMONDS and rank_of(c) != NINE)
    deck.remove(turned)
    hands = (tuple(sorted(favoured)), tuple(sorted(deck[:12])))
    return TwoHandedDeal(hands, turned, tuple(deck[12:]))


def play_compared_game(
    options: dict[str, object],
    seed: str,
    rng_seed: int,
    tally: Tally,
    given: Sequence[TwoHandedDeal] = (),
    favoured: int | None = None,
) -> None:
    rng = random.Random(rng_seed)
    compared = ComparedGame(options, seed, rng_seed % 2, tally, given, favoured)
    tally.games += 1
    tally.seen_options |= {f"{k}={v}" for k, v in options.items() if k != "target"}
    for index in range(3000):
        if compared.game.state.over:
            return
        compared.compare_position()
        if index % PROBE_EVERY == 0:
            compared.probe()
        compared.step(rng)
    raise AssertionError("the game did not end within 3000 actions")


# --------------------------------------------------------------------------------------------


GAMES = 40
PROBE_EVERY = 3  # positions: refusals are probed at every third one (the time budget)


def test_seeded_deal_matches_a_known_deal() -> None:
    """The model's portable shuffle (A.10 item 4) gives the engine's deal of a seeded game."""
    game = Game(resolve_options("two-handed", {}), 0, SeededDeals("oracle"))
    hand = game.state.hand
    assert hand is not None and hand.deal.turn_up is not None
    engine_deal = TwoHandedDeal((hand.hands[0], hand.hands[1]), hand.deal.turn_up, hand.deal.stock)
    assert deal_from_seed("oracle:0", 0) == engine_deal


def compare_games(indices: range) -> Tally:
    """Game ``index``: option set, deals and policy all drawn from ``index``; a third of the
    games have seeded deals, a third meld-rich deals, a third lopsided ones."""
    tally = Tally()
    for index in indices:
        rng = random.Random(index)
        options = random_options(rng)
        kind = index % 3
        given = [[], [meld_rich_deal(rng) for _ in range(3)], [lopsided_deal(rng)]][kind]
        favoured = 0 if kind == 2 else None
        play_compared_game(options, f"oracle-{index}", index, tally, given, favoured)
    return tally


@pytest.mark.parametrize("block", range(4))
def test_engine_matches_the_model(block: int) -> None:
    """Random games under random option sets: legal actions, refusals, views and events."""
    tally = compare_games(range(block * GAMES // 4, (block + 1) * GAMES // 4))
    assert tally.melds > 0 and tally.positions > 0, tally
