"""N-version test: the engine's auction, trump, exchange, kitty, bury and no-bid dix exchange
against the independent model in ``tests/oracle_auction.py``.

Seeded random games of ``cutthroat``, ``partnership``, ``double-deck`` and ``partnership-no-bid``
under randomly drawn option sets (every auction and exchange option, defaults and odd values
alike). At every position of the phases the model covers, for every seat:

* ``legal_actions`` equals the model's entries, and a ``bid`` entry's ``min``/``step``/``max``
  denotes exactly the amounts the model allows;
* the phase, the seat to act, the contract, trump and every seat's concealed cards agree;
* probes just inside and outside the legal set get from ``apply`` the acceptance or the A.5 code
  the model expects.

The hand's public events (contract, widow, redeal, no-marriage concession) are checked as well.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import apply, legal_actions
from referee.engine.errors import IllegalAction
from referee.engine.events import EVERYONE, Event
from referee.engine.game import Game, GivenDeals
from referee.engine.state import GameState
from referee.engine.views import ADJUDICATOR, SPECTATOR, view
from referee.rules.cards import canonical_deck, parse_card
from referee.rules.dealing import Deal
from referee.rules.options import OptionError, RuleSet, resolve_options
from tests.oracle_auction import (
    AUCTION,
    BURY,
    HAND_OVER,
    KITTY_DISCARD,
    MELD,
    PARTNER_PASS,
    PLAY,
    SUIT_ORDER,
    TRUMP,
    AuctionOracle,
    canonical,
    cards_of,
    entry_key,
    step_in_force,
)
from tests.strategies import all_legal, choose_action, make_game, pick, sample

VARIANTS = ("cutthroat", "partnership", "double-deck", "partnership-no-bid")
GAMES_PER_VARIANT = 60
HANDS_PER_GAME = 3
MAX_ACTIONS = 400
#: How often a hand past the modelled phases is conceded when it can be (play is another area).
FAST_CONCESSION = 0.8

JsonAction = dict[str, object]


# --------------------------------------------------------------------------------------------
# Option sets


def _schedule(rng: random.Random, min_bid: int, scale: int) -> list[list[int]]:
    """A bid_schedule whose first level is at most min_bid; sometimes a level falls between
    min_bid minus its step and min_bid, or the steps grow past a max_raise."""
    first = max(1, min_bid - pick(rng, [0, 0, 1, 2, 5, 10]) * scale)
    levels = [first]
    for _ in range(pick(rng, [0, 1, 1, 2])):
        levels.append(levels[-1] + pick(rng, [1, 2, 5, 10, 20]) * scale)
    return [[level, pick(rng, [1, 2, 3, 5, 10]) * scale] for level in levels]


def random_options(rng: random.Random, variant: str) -> dict[str, Any]:
    """A valid options object for ``variant`` over the options of the phases modelled."""
    while True:
        options = _draw_options(rng, variant)
        try:
            resolve_options(variant, options)
        except OptionError:
            continue  # e.g. a max_raise below the opening step (README ruling)
        return options


def _draw_options(rng: random.Random, variant: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if rng.random() < 0.25:
        options["meld_declaration"] = "auto"
    if variant == "partnership-no-bid":
        if rng.random() < 0.3:
            options["meld_values"] = {"dix": [pick(rng, [0, 5, 25])]}  # A.9 item 5
        return options
    scale = 1 if variant == "double-deck" else 10
    if variant == "double-deck" and rng.random() < 0.4:
        options["deck"] = 48
    roll = rng.random()
    if roll < 0.3:
        pass  # the variant's bidding defaults
    elif roll < 0.55:
        options["min_bid"] = pick(rng, [1, 7, 10, 25, 30]) * scale + pick(rng, [0, 0, 3])
        options["bid_step"] = pick(rng, [1, 2, 3, 5, 10, 25])
    else:
        min_bid = pick(rng, [20, 25, 30]) * scale
        options["min_bid"] = min_bid
        options["bid_schedule"] = _schedule(rng, min_bid, scale)
    if rng.random() < 0.6:
        options["max_raise"] = pick(rng, [None, 1, 2, 3, 5, 7, 10, 15, 20, 25, 40, 100])
    flags: dict[str, list[Any]] = {
        "allow_pass_with_help": [True, False],
        "allow_bid_or_redeal": [True, False],
        "all_pass": ["dealer_stuck", "redeal"],
        "trump_requires_marriage": [True, False],
    }
    for name, values in flags.items():
        if rng.random() < 0.6:
            options[name] = pick(rng, values)
    if variant != "cutthroat" and rng.random() < 0.7:
        mode = pick(rng, ["none", "partner", "partner", "kitty"])
        options["exchange_mode"] = mode
        if mode == "kitty":
            options["exchange_count"] = 4
        elif rng.random() < 0.6:
            options["exchange_count"] = pick(rng, [0, 1, 2, 3, 4, 5])
    if variant == "cutthroat":
        if rng.random() < 0.5:
            options["may_bury_melded_cards"] = pick(rng, [True, False])
        if rng.random() < 0.3:
            options["run_shares_marriage_cards"] = True
        if rng.random() < 0.3:
            options["run_counts_its_royal_marriage"] = True
    return options


# --------------------------------------------------------------------------------------------
# Comparing one position


@dataclass
class Tally:
    """What the comparisons went through, so that a lost case shows as a failure."""

    positions: int = 0
    probes: int = 0
    hands: int = 0
    seen: Counter[str] = field(default_factory=Counter)


def situations(oracle: AuctionOracle) -> list[str]:
    """The notable cases of a position, for the coverage check."""
    rules, seat, found = oracle.rules, oracle.turn, []
    if oracle.phase == AUCTION:
        if oracle.dealer_is_stuck(seat):
            found.append("stuck dealer")
        if not any(oracle.bid_allowed(seat, v) for v in bid_window(oracle)):
            found.append("no bid possible")
        opening = rules.min_bid - step_in_force(rules, rules.min_bid)
        if step_in_force(rules, opening) != step_in_force(rules, rules.min_bid):
            found.append("opening step differs below min_bid")
    elif oracle.phase == TRUMP:
        found.append(f"trump choices {min(len(oracle.trump_suits()), 1)}")
    elif oracle.phase == BURY:
        buryable = sum(oracle.buryable().values())
        found.append("bury restricted" if buryable < 18 else "bury free")
    elif oracle.phase == MELD and oracle.dix_exchange_allowed(seat):
        found.append("dix exchange offered")
    else:
        found.append(oracle.phase)
    return found


def bid_window(oracle: AuctionOracle) -> range:
    """Amounts around the standing bid wide enough to hold every allowed bid but the tail of
    an unbounded range (whose absence of a bound is compared separately)."""
    rules = oracle.rules
    steps = [rules.bid_step] if rules.bid_schedule is None else [s for _, s in rules.bid_schedule]
    reach = (rules.max_raise or 0) + 4 * max(steps)
    standing = oracle.standing_bid()
    return range(max(0, standing - 2 * max(steps)), standing + reach + 1)


def engine_bid_amounts(entry: dict[str, object], window: range) -> set[int]:
    """The amounts of the window a ``bid`` entry allows: min + k * step, at most max."""
    low, step, high = entry["min"], entry["step"], entry["max"]
    assert isinstance(low, int) and isinstance(step, int) and step > 0
    top = window.stop - 1 if high is None else min(window.stop - 1, int(str(high)))
    return set(range(low, top + 1, step))


def compare_position(state: GameState, oracle: AuctionOracle) -> None:
    """The engine's hand and every seat's legal actions against the model's."""
    rules = state.rules
    hand_view = view(state, ADJUDICATOR)["hand"]
    assert isinstance(hand_view, dict)
    where = f"hand {hand_view['number']} phase {oracle.phase}"
    assert hand_view["phase"] == oracle.phase, where
    assert hand_view["turn"] == oracle.turn, where
    assert hand_view["declarer"] == oracle.declarer, where
    assert hand_view["trump"] == oracle.trump, where
    if not rules.bidding:
        assert hand_view["turn_up"] == oracle.turn_up, where
    if oracle.phase != AUCTION:
        assert hand_view["bid"] == oracle.high_bid, where
    assert hand_view["hands"] == [cards_of(h) for h in oracle.hands], where
    assert hand_view["auction"] == oracle.calls, where
    if oracle.declarer is not None:
        check_widow_views(state, oracle)
    window = bid_window(oracle) if oracle.phase == AUCTION else range(0)
    # Only the seat to act can bid (bid_allowed is False for the others; no need to ask).
    turn_bids = {v for v in window if oracle.bid_allowed(oracle.turn, v)}
    for seat in range(rules.players):
        entries = legal_actions(state, seat)
        bids = [e for e in entries if e["type"] == "bid"]
        others = sorted(
            entry_key({"type": "meld"} if e["type"] == "meld" else e)
            for e in entries
            if e["type"] != "bid"
        )
        expected = sorted(entry_key(e) for e in oracle.legal(seat))
        assert others == expected, f"{where} seat {seat}"
        wanted = turn_bids if seat == oracle.turn else set()
        if not bids:
            assert not wanted, f"{where} seat {seat}: no bid entry, model allows {sorted(wanted)}"
            continue
        assert len(bids) == 1, f"{where} seat {seat}"
        assert engine_bid_amounts(bids[0], window) == wanted, f"{where} seat {seat}: {bids[0]}"
        assert (bids[0]["max"] is None) == oracle.bids_unbounded(), f"{where} seat {seat}"


def check_widow_views(state: GameState, oracle: AuctionOracle) -> None:
    """A.10 item 3: once it joins the declarer's hand the cutthroat widow is shown to all; a
    kitty only to the declarer."""
    spectator = view(state, SPECTATOR)["hand"]
    assert isinstance(spectator, dict)
    if state.rules.variant == "cutthroat":
        assert canonical(card_list(spectator["widow"])) == canonical(oracle.widow)
        return
    assert spectator["widow"] is None and "kitty" not in spectator
    for seat in range(state.rules.players):
        seat_view = view(state, seat)["hand"]
        assert isinstance(seat_view, dict)
        if seat == oracle.declarer and oracle.widow:
            assert canonical(card_list(seat_view["kitty"])) == canonical(oracle.widow)
        else:
            assert "kitty" not in seat_view


def probe(state: GameState, oracle: AuctionOracle, rng: random.Random) -> int:
    """Actions just inside and outside the legal set: ``apply`` accepts exactly those the model
    allows and refuses the others with the model's A.5 code. Returns the number of probes."""
    probes = probe_actions(state, oracle, rng)
    for seat, action in probes:
        try:
            apply(state, seat, decode_action(action))
            code = None
        except IllegalAction as refusal:
            code = refusal.code
        expected = oracle.refusal(seat, action)
        assert code == expected, f"{oracle.phase}: seat {seat} {action}: {code} != {expected}"
    return len(probes)


def probe_actions(
    state: GameState, oracle: AuctionOracle, rng: random.Random
) -> list[tuple[int, JsonAction]]:
    """Bids around the limits, calls, wrong types, other seats' actions, concessions."""
    rules = state.rules
    turn = oracle.turn
    other = (turn + 1 + int(rng.random() * (rules.players - 1))) % rules.players
    out: list[tuple[int, JsonAction]] = []
    if oracle.phase == AUCTION:
        standing, step = oracle.standing_bid(), oracle.raise_step()
        limit = rules.max_raise or 3 * step
        amounts = {
            0,
            rules.min_bid - 1,
            rules.min_bid,
            rules.min_bid + 1,
            standing,
            standing + 1,
            standing + step,
            standing + step - 1,
            standing + step + 1,
            standing + limit,
            standing + limit + 1,
            standing + limit + step,
        }
        out += [(turn, {"type": "bid", "amount": a}) for a in sorted(amounts)]
        out += [(turn, {"type": "pass", "help": flag}) for flag in (True, False)]
        out += [(turn, {"type": "pass"})]
        out += [(turn, {"type": "bid_or_redeal"}), (turn, {"type": "declare_trump", "suit": "S"})]
        out += [(other, {"type": "bid", "amount": standing + step}), (other, {"type": "pass"})]
        out += [(turn, {"type": "concede"}), (other, {"type": "concede"})]
    elif oracle.phase == TRUMP:
        out += [(turn, {"type": "declare_trump", "suit": s}) for s in SUIT_ORDER]
        out += [(other, {"type": "declare_trump", "suit": "H"}), (turn, {"type": "pass"})]
        out += [(turn, {"type": "concede"}), (other, {"type": "concede"})]
    elif oracle.phase == MELD:
        out += [(turn, {"type": "exchange_dix"}), (other, {"type": "exchange_dix"})]
        out += [(turn, {"type": "concede"}), (other, {"type": "bid", "amount": 1})]
    else:
        out += card_probes(oracle, turn, other, rng)
    return out


def card_probes(
    oracle: AuctionOracle, turn: int, other: int, rng: random.Random
) -> list[tuple[int, JsonAction]]:
    """Passes, discards and buries: random ones of the right count from the whole hand, one
    too few and too many, one naming a card not held, and one by another seat."""
    kind = "discard" if oracle.phase in (BURY, KITTY_DISCARD) else "pass_cards"
    held = cards_of(oracle.hands[turn])
    count = oracle.card_count()
    out: list[tuple[int, JsonAction]] = []
    for _ in range(3):
        out.append((turn, {"type": kind, "cards": sample(rng, held, count)}))
    if count > 0:
        out.append((turn, {"type": kind, "cards": sample(rng, held, count - 1)}))
    out.append((turn, {"type": kind, "cards": sample(rng, held, count + 1)}))
    missing = [c for c in all_faces(oracle) if oracle.hands[turn][c] == 0]
    if missing and count > 0:
        out.append((turn, {"type": kind, "cards": [*sample(rng, held, count - 1), missing[0]]}))
    out.append((other, {"type": kind, "cards": sample(rng, cards_of(oracle.hands[other]), count)}))
    out.append((turn, {"type": "bid", "amount": 1000}))
    out += [(turn, {"type": "concede"}), (other, {"type": "concede"})]
    return out


def all_faces(oracle: AuctionOracle) -> list[str]:
    ranks = (
        ("A", "10", "K", "Q", "J") if oracle.rules.deck == 80 else ("A", "10", "K", "Q", "J", "9")
    )
    return [r + s for s in SUIT_ORDER for r in ranks]


# --------------------------------------------------------------------------------------------
# Choosing actions from the model, checking events


def oracle_action(oracle: AuctionOracle, rng: random.Random, pass_rate: float) -> JsonAction:
    """A random action the model allows for the seat to act (a bid biased to the lowest, with
    the highest sometimes; passes at this game's rate)."""
    seat = oracle.turn
    if oracle.phase == AUCTION:
        allowed = [v for v in bid_window(oracle) if oracle.bid_allowed(seat, v)]
        calls = oracle.legal(seat)
        if allowed and (not calls or rng.random() > pass_rate):
            return {
                "type": "bid",
                "amount": pick(rng, [allowed[0], allowed[0], pick(rng, allowed), allowed[-1]]),
            }
        return dict(pick(rng, calls))
    entry = pick(rng, oracle.legal(seat))
    if "from" in entry:
        source, count = entry["from"], entry["count"]
        assert isinstance(source, list) and isinstance(count, int)
        return {"type": entry["type"], "cards": sample(rng, source, count)}
    return dict(entry)


def side_count(oracle: AuctionOracle) -> int:
    """The scoring sides: two teams (team = seat % 2, A.3), or one per seat."""
    return 2 if oracle.rules.partnerships else oracle.rules.players


def check_events(oracle: AuctionOracle, before_phase: str, events: list[Event]) -> None:
    """A.7 items 1, 2, 5, A.10 item 3: the public events of each call, the contract, the widow
    shown to all (cutthroat), trump, passes and discards (counts only), the redeal and the
    no-marriage concession's result."""
    kinds = {e.kind: e.data for e in events}
    if before_phase == AUCTION and oracle.phase != AUCTION:
        if oracle.phase == HAND_OVER:
            assert "redeal" in kinds and "contract" not in kinds
            result = kinds["hand_result"]
            assert result["declarer"] is None and result["bid"] is None
            assert result["trump"] is None
            assert result["delta"] == [0] * side_count(oracle)
        else:
            assert kinds["contract"]["declarer"] == oracle.declarer
            assert kinds["contract"]["bid"] == oracle.high_bid
            if oracle.rules.variant == "cutthroat":
                assert canonical(card_list(kinds["widow_taken"]["cards"])) == canonical(
                    oracle.widow
                )
            else:
                assert "widow_taken" not in kinds
                if oracle.rules.exchange_mode == "kitty":
                    assert kinds["kitty_taken"] == {"seat": oracle.declarer, "count": 4}
                    cards = card_list(kinds["kitty_cards"]["cards"])
                    assert canonical(cards) == canonical(oracle.widow)
    public = {e.kind: e.data for e in events if e.audience == EVERYONE}
    if before_phase == AUCTION:
        assert public["call"] == oracle.calls[-1]
    if before_phase == TRUMP and oracle.phase != HAND_OVER:
        assert public["trump_declared"] == {"seat": oracle.declarer, "suit": oracle.trump}
    if "cards_passed" in public:
        assert oracle.declarer is not None
        giver = oracle.partner() if before_phase == PARTNER_PASS else oracle.declarer
        count = oracle.rules.exchange_count
        assert public["cards_passed"] == {"from": giver, "to": (giver + 2) % 4, "count": count}
    if "cards_discarded" in public:
        count = 3 if before_phase == BURY else 4
        assert public["cards_discarded"] == {"seat": oracle.declarer, "count": count}
    for event in events:
        if event.kind == "kitty_cards":
            assert event.audience == oracle.declarer  # A.10 item 3: the declarer only
    if before_phase == TRUMP and oracle.phase == HAND_OVER:
        assert oracle.declarer is not None and oracle.high_bid is not None
        result = kinds["hand_result"]
        delta = [0] * side_count(oracle)
        delta[oracle.declarer % side_count(oracle)] = -oracle.high_bid
        assert result["delta"] == delta and result["conceded"] is True


def check_dix_exchange(
    rules: RuleSet, seat: int, took: str | None, oracle: AuctionOracle, events: list[Event]
) -> None:
    """A.7 item 7, A.9 item 5: the exchanger takes the turned card, gives the 9 of trumps and
    scores the table's dix value."""
    (event,) = [e for e in events if e.kind == "dix_exchanged"]
    assert event.data == {
        "seat": seat,
        "took": took,
        "gave": oracle.turn_up,
        "points": rules.meld_values["dix"][0],
    }


def check_play_reached(state: GameState, oracle: AuctionOracle) -> None:
    """Where the model stops: the engine is in the play phase (its concession window) with the
    hands the model expects, the declarer (no-bid: the dealer's left) to lead (§3.5, §4.6,
    §6.4)."""
    hand_view = view(state, ADJUDICATOR)["hand"]
    assert isinstance(hand_view, dict)
    assert hand_view["phase"] == PLAY
    assert hand_view["hands"] == [cards_of(h) for h in oracle.hands]
    first = oracle.declarer if oracle.declarer is not None else (oracle.dealer + 1) % 4
    assert hand_view["turn"] == first
    assert hand_view["trump"] == oracle.trump


def card_list(value: object) -> list[str]:
    """A JSON list of card strings."""
    assert isinstance(value, list)
    return [str(card) for card in value]


def new_oracle(state: GameState) -> AuctionOracle:
    """The model of the engine's current hand, from its deal (the record's ``deal`` object)."""
    hand = state.hand
    assert hand is not None
    deal = hand.deal.to_json()
    hands = deal["hands"]
    assert isinstance(hands, list)
    turn_up = deal["turn_up"]
    if not state.rules.bidding:  # §6.2: the dealer's last card is turned (and kept)
        assert turn_up in hands[hand.dealer]
    return AuctionOracle.from_deal(
        state.rules,
        hand.dealer,
        [card_list(cards) for cards in hands],
        card_list(deal["widow"]),
        None if turn_up is None else str(turn_up),
    )


def observe_meld(state: GameState, oracle: AuctionOracle) -> None:
    """The bury needs the declarer's scored combinations, taken from the view (meld is another
    area)."""
    hand_view = view(state, ADJUDICATOR)["hand"]
    assert isinstance(hand_view, dict) and oracle.declarer is not None
    record = hand_view["melds"][oracle.declarer]
    oracle.observe_declarer_meld(
        record["cards"], [(m["name"], m["cards"]) for m in record["melds"]]
    )


def concession_or_random(state: GameState, rng: random.Random) -> tuple[int, JsonAction]:
    """The declarer's concession when one is open (it ends the hand at once, so the next
    auction comes sooner), else a random action."""
    for seat, entry in all_legal(state):
        if entry["type"] == "concede":
            return seat, dict(entry)
    return choose_action(state, rng)


def play_and_compare(variant: str, options: dict[str, Any], seed: int, tally: Tally) -> None:
    """Up to HANDS_PER_GAME hands of one seeded game: the model's phases are compared and
    probed at every position and driven by the model's own choices; meld and play by the
    shared random policy."""
    game: Game = make_game(variant, options, f"oracle-auction:{seed}")
    rng = random.Random(seed)
    pass_rate = pick(rng, [0.2, 0.45, 0.7, 0.9])
    oracle = new_oracle(game.state)
    oracle_hand = 0
    for _ in range(MAX_ACTIONS):
        state = game.state
        if state.over or state.hands_completed >= HANDS_PER_GAME:
            return
        assert state.hand is not None
        if state.hand.number != oracle_hand:
            assert state.hand.dealer == (oracle.dealer + 1) % state.rules.players  # A.3
            oracle, oracle_hand = new_oracle(state), state.hand.number
            tally.hands += 1
            if oracle.phase == PLAY:
                check_play_reached(state, oracle)
        modelled = oracle.phase not in (PLAY, HAND_OVER)
        if modelled:
            if oracle.phase == BURY and oracle.declarer_scored_cards is None:
                observe_meld(state, oracle)
            compare_position(state, oracle)
            tally.positions += 1
            tally.probes += probe(state, oracle, rng)
            tally.seen.update(situations(oracle))
        if modelled and oracle.phase != MELD:
            seat, action = oracle.turn, oracle_action(oracle, rng, pass_rate)
        elif oracle.phase == PLAY and rng.random() < FAST_CONCESSION:
            seat, action = concession_or_random(state, rng)
        else:
            seat, action = choose_action(state, rng)
        before, turn_up_before = oracle.phase, oracle.turn_up
        events = game.act(seat, decode_action(action))
        if modelled:
            oracle.apply(seat, action)
            if action["type"] == "exchange_dix":
                check_dix_exchange(state.rules, seat, turn_up_before, oracle, events)
            hand_ended = any(event.kind == "hand_result" for event in events)
            assert hand_ended == (oracle.phase == HAND_OVER), f"{before}: {action}"
            check_events(oracle, before, events)
            if oracle.phase == PLAY:
                check_play_reached(game.state, oracle)
            tally.seen[str(action["type"]) + ("" if before != AUCTION else " in auction")] += 1
            if oracle.phase == HAND_OVER:
                tally.seen[f"hand over after {before}"] += 1


#: Cases each variant's random games must reach, or the test fails (coverage cannot silently
#: shrink when the option sets or the policy change).
MUST_SEE: dict[str, tuple[str, ...]] = {
    "cutthroat": (
        "stuck dealer",
        "bid_or_redeal in auction",
        "hand over after auction",
        "opening step differs below min_bid",
        "trump choices 0",
        "hand over after trump",
        "bury restricted",
        "bury free",
    ),
    "partnership": (
        "stuck dealer",
        "bid_or_redeal in auction",
        "hand over after auction",
        "no bid possible",
        "trump choices 0",
        "partner_pass",
        "declarer_pass",
        "kitty_discard",
    ),
    "double-deck": (
        "stuck dealer",
        "bid_or_redeal in auction",
        "hand over after auction",
        "opening step differs below min_bid",
        "trump choices 0",
        "partner_pass",
        "kitty_discard",
    ),
    "partnership-no-bid": ("dix exchange offered", "exchange_dix"),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_engine_agrees_with_the_independent_auction_model(variant: str) -> None:
    tally = Tally()
    for game_index in range(GAMES_PER_VARIANT):
        rng = random.Random(f"{variant}:{game_index}")
        options = random_options(rng, variant) if game_index else {}
        play_and_compare(variant, options, game_index, tally)
    missing = [case for case in MUST_SEE[variant] if not tally.seen[case]]
    assert not missing, f"{variant}: no position reached {missing}: {tally}"


# --------------------------------------------------------------------------------------------
# Dealt cases the random games rarely reach


def cutthroat_deal(declarer_hand: str, widow: str) -> Deal:
    """Seat 1 holds ``declarer_hand``, the widow is ``widow``; seats 0 and 2 share the rest."""
    held = [parse_card(c) for c in declarer_hand.split()]
    kitty = [parse_card(c) for c in widow.split()]
    rest = Counter(canonical_deck(48))
    rest.subtract(held + kitty)
    others = sorted(rest.elements())
    return Deal(
        hands=(tuple(others[:15]), tuple(sorted(held)), tuple(others[15:])), widow=tuple(kitty)
    )


def scripted_bury(options: dict[str, Any], deal: Deal, shown: str) -> AuctionOracle:
    """Seat 1 bids 300, the others pass, it names hearts and shows ``shown``, the others show
    nothing; every position is compared and probed, up to the bury, which is returned."""
    game = Game(resolve_options("cutthroat", options), dealer=0, deals=GivenDeals([deal]))
    oracle = new_oracle(game.state)
    rng = random.Random(0)
    script: list[tuple[int, JsonAction]] = [
        (1, {"type": "bid", "amount": 300}),
        (2, {"type": "pass"}),
        (0, {"type": "pass"}),
        (1, {"type": "declare_trump", "suit": "H"}),
        (1, {"type": "meld", "cards": shown.split()}),
        (2, {"type": "meld", "cards": []}),
        (0, {"type": "meld", "cards": []}),
    ]
    for seat, action in script:
        compare_position(game.state, oracle)
        probe(game.state, oracle, rng)
        before = oracle.phase
        events = game.act(seat, decode_action(action))
        oracle.apply(seat, action)
        check_events(oracle, before, events)
    observe_meld(game.state, oracle)
    compare_position(game.state, oracle)
    probe(game.state, oracle, rng)
    return oracle


def test_a_bury_with_fewer_than_three_free_cards_may_take_any_card() -> None:
    """README ruling: a double run, aces and kings around and a pinochle hold all 18 cards."""
    deal = cutthroat_deal("AH AH 10H 10H KH KH QH QH JH JH AS AD AC KS KD", "KC QS JD")
    oracle = scripted_bury({}, deal, "AH AH 10H 10H KH KH QH QH JH JH AS AD AC KS KD KC QS JD")
    assert oracle.buryable() == oracle.hands[1]


def test_a_royal_marriage_sharing_a_run_card_keeps_only_the_shown_copies() -> None:
    """A.9 item 1: run + an extra K shown with one Q: the royal marriage borrows the run's Q, so
    the Q held back stays free to bury."""
    deal = cutthroat_deal("AH 10H KH KH QH QH JH 9S 9S 9D 9D 9C 9C JS JC", "JD QD QC")
    oracle = scripted_bury({"run_shares_marriage_cards": True}, deal, "AH 10H KH KH QH JH")
    assert oracle.buryable()["QH"] == 1 and oracle.buryable()["KH"] == 0
