"""Engine benchmark: run ``python -m bench.engine`` (or ``make bench``) from the repository root.

Everything runs in one thread of this one process, so each figure is what one core does. The
workloads are random legal games played with seeded random choices and seeded deals, so every
run times exactly the same calls; only the clock differs. Each figure is the best of three timed
repetitions after a warm-up pass, timed with ``time.perf_counter``. The figures:

1. ``play_apply``: card plays per second through ``apply``. Random partnership games are played
   first and every play-phase step is kept as ``(state, seat, Play)``; only the ``apply`` calls
   over those positions are timed.
2. ``game_apply.<variant>``: every action of random whole games per second, for each playable
   variant. The games are replayed hand by hand; ``start_hand`` (the deal) runs outside the
   clock and each hand's run of ``apply`` calls inside it.
3. ``best_meld.*`` and ``meld_total.*``: meld evaluations per second on random hands with a
   random trump: 12 cards of the 48-card deck with the partnership table, 20 cards of the
   80-card deck with the double-deck table. ``meld_total`` is given the hands' count vectors,
   which is how its callers hold them.
4. ``audit``: hands per second through ``audit_text`` over a few hundred random partnership
   games exported with ``Game.export()`` as JSON text (parsing included).
5. ``state_bytes.*``: the memory a game state holds, see :func:`state_bytes`.
6. ``legal_actions``: ``legal_actions`` calls per second over the play positions of figure 1.

The table goes to the console and the figures, with the date, Python, platform and core count,
to ``bench/results.json`` so that runs can be compared between commits (see bench/README.md).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import platform
import pstats
import random
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Final, Protocol

from rich.console import Console
from rich.table import Table

from referee.audit import audit_text
from referee.engine.actions import (
    Action,
    Bid,
    BidOrRedeal,
    Concede,
    DeclareTrump,
    Discard,
    Draw,
    ExchangeDix,
    Meld,
    Pass,
    PassCards,
    Play,
)
from referee.engine.engine import apply, legal_actions, new_game, start_hand
from referee.engine.game import Game, SeededDeals
from referee.engine.state import GameState
from referee.rules.cards import Card, canonical_deck, counts_of, parse_card, parse_suit
from referee.rules.dealing import Deal
from referee.rules.melds import MeldTable, best_meld, build_meld_table, meld_total
from referee.rules.options import RuleSet, resolve_options

RESULTS_FORMAT: Final = "referee-bench/1"
RESULTS_PATH: Final = Path(__file__).with_name("results.json")
REPETITIONS: Final = 3
BUSY_SHARE: Final = 0.95  # below this CPU share a timed repetition is flagged as disturbed
SEED: Final = 20_240_601

# Variants that the engine plays.
PLAYABLE_VARIANTS: Final = (
    "partnership",
    "cutthroat",
    "double-deck",
    "partnership-no-bid",
    "two-handed",
)
# Issue 3: two-handed validated actions per second (meld legality included).
GAME_TARGETS: Final = {"two-handed": 30_000}

# A random game ends by itself (the declaring side is set or makes its bid, scores move towards
# the target); the cap only guards the benchmark against a game that never ends.
MAX_HANDS: Final = 200

Position = tuple[GameState, int, Action]
HandLog = tuple[Deal, tuple[tuple[int, Action], ...]]


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much work each figure does; ``--quick`` shrinks it for a smoke run."""

    play_positions: int = 200_000  # figures 1 and 6
    audit_games: int = 200  # figure 4, and the games figure 1 draws its positions from
    games_per_variant: int = 40  # figure 2
    meld_hands: int = 100_000  # figure 3, per deck


QUICK: Final = Sizes(play_positions=20_000, audit_games=20, games_per_variant=5, meld_hands=10_000)


# --------------------------------------------------------------------------------------------
# Random legal games


def _int(entry: Mapping[str, object], key: str) -> int:
    value = entry[key]
    assert isinstance(value, int)
    return value


def _list(entry: Mapping[str, object], key: str) -> list[object]:
    value = entry[key]
    assert isinstance(value, list)
    return value


def _cards(entry: Mapping[str, object]) -> list[str]:
    value = entry["from"]
    assert isinstance(value, list)
    return [str(c) for c in value]


def choose_action(rng: random.Random, entries: Sequence[Mapping[str, object]]) -> Action:
    """A random legal action from ``legal_actions`` entries.

    Uniform among the cards, suits and card sets offered; in the auction it bids (the lowest
    legal bid or one or two steps more) three times in ten when it may pass, passes otherwise
    (a tenth of those with help where the game allows it); it calls bid-or-redeal one time in
    twenty, takes a no-bid dix exchange one time in two, concedes one time in fifty when it may,
    and always melds its whole hand.
    """
    by_type: dict[str, list[Mapping[str, object]]] = {}
    for entry in entries:
        by_type.setdefault(str(entry["type"]), []).append(entry)
    if "concede" in by_type and (len(by_type) == 1 or rng.random() < 0.02):
        return Concede()
    # Two-handed window: one-set melds (concrete entries), the dix exchange, the last draw.
    named = [e for e in by_type.get("meld", []) if "name" in e]
    if named and rng.random() < 0.7:
        entry = rng.choice(named)
        return Meld(
            tuple(parse_card(str(c)) for c in _list(entry, "cards")), name=str(entry["name"])
        )
    if "exchange_dix" in by_type and rng.random() < 0.5:
        return ExchangeDix()
    if "draw" in by_type and rng.random() < 0.5:
        return Draw(bool(rng.choice(by_type["draw"])["turn_up"]))
    cards = [e for e in by_type.get("play", []) if "card" in e]
    if cards:
        return Play(parse_card(str(rng.choice(cards)["card"])))
    if "bid_or_redeal" in by_type and rng.random() < 0.05:
        return BidOrRedeal()
    passes = by_type.get("pass", [])
    if "bid" in by_type and (not passes or rng.random() < 0.3):
        entry = by_type["bid"][0]
        amount = _int(entry, "min") + _int(entry, "step") * rng.randrange(3)
        highest = entry["max"]
        if isinstance(highest, int):
            amount = min(amount, highest)
        return Bid(amount)
    if passes:
        return Pass(help=any(e.get("help") for e in passes) and rng.random() < 0.1)
    if "declare_trump" in by_type:
        return DeclareTrump(parse_suit(rng.choice(by_type["declare_trump"])["suit"]))
    if "pass_cards" in by_type:
        entry = by_type["pass_cards"][0]
        picked = rng.sample(_cards(entry), _int(entry, "count"))
        return PassCards(tuple(parse_card(c) for c in picked))
    if "discard" in by_type:
        entry = by_type["discard"][0]
        picked = rng.sample(_cards(entry), _int(entry, "count"))
        return Discard(tuple(parse_card(c) for c in picked))
    if "exchange_dix" in by_type and rng.random() < 0.5:
        return ExchangeDix()
    if "meld" in by_type:
        return Meld(tuple(parse_card(c) for c in _cards(by_type["meld"][0])))
    raise AssertionError(f"no action chosen from {entries!r}")


def play_random_game(
    variant: str, number: int, positions: list[Position] | None = None, limit: int = 0
) -> Game:
    """Play game ``number`` of ``variant`` to its end with seeded deals and seeded choices.

    When ``positions`` is given, every play-phase step is appended to it as (state, seat, Play)
    until it holds ``limit`` entries.
    """
    rules = resolve_options(variant)
    rng = random.Random(f"{SEED}:{variant}:{number}")
    game = Game(rules, number % rules.players, SeededDeals(f"bench-{SEED}-{variant}-{number}"))
    while not game.state.over and game.state.hands_completed < MAX_HANDS:
        state = game.state
        hand = state.hand
        assert hand is not None
        seat = hand.turn
        action = choose_action(rng, legal_actions(state, seat))
        if positions is not None and isinstance(action, Play) and len(positions) < limit:
            positions.append((state, seat, action))
        game.act(seat, action)
    return game


def hands_of(game: Game) -> tuple[HandLog, ...]:
    """The game's log split into hands: each deal with the (seat, action) pairs that follow it."""
    hands: list[tuple[Deal, list[tuple[int, Action]]]] = []
    for entry in game.log:
        if entry.deal is not None:
            hands.append((entry.deal, []))
        else:
            assert entry.seat is not None and entry.action is not None
            hands[-1][1].append((entry.seat, entry.action))
    return tuple((deal, tuple(actions)) for deal, actions in hands)


@dataclass(slots=True)
class Workloads:
    positions: list[Position] = field(default_factory=list)
    partnership_games: list[Game] = field(default_factory=list)
    games: dict[str, list[Game]] = field(default_factory=dict)


def build_workloads(sizes: Sizes) -> Workloads:
    work = Workloads()
    number = 0
    # Partnership games until there are enough for the audit and enough play positions.
    while len(work.partnership_games) < sizes.audit_games or (
        len(work.positions) < sizes.play_positions
    ):
        game = play_random_game("partnership", number, work.positions, sizes.play_positions)
        work.partnership_games.append(game)
        number += 1
    for variant in PLAYABLE_VARIANTS:
        if variant == "partnership":
            work.games[variant] = work.partnership_games[: sizes.games_per_variant]
        else:
            work.games[variant] = [
                play_random_game(variant, n) for n in range(sizes.games_per_variant)
            ]
    return work


# --------------------------------------------------------------------------------------------
# Timing


@dataclass(frozen=True, slots=True)
class Timing:
    """The seconds each repetition measured, and the share of each repetition's wall time that
    this process was on a CPU (``process_time`` / ``perf_counter`` around the repetition): well
    below 1 means other processes took the core and the figure is pessimistic."""

    runs: list[float]
    cpu_shares: list[float]

    @property
    def best(self) -> float:
        return min(self.runs)

    @property
    def best_share(self) -> float:
        return self.cpu_shares[self.runs.index(self.best)]


def best_of(run: Callable[[], float], warm_up: Callable[[], object]) -> Timing:
    """Warm up, then ``REPETITIONS`` timed runs; ``run`` returns the seconds it measured."""
    warm_up()
    runs = []
    shares = []
    for _ in range(REPETITIONS):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        runs.append(run())
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        shares.append(min(1.0, cpu / wall) if wall > 0 else 1.0)
    return Timing(runs, shares)


def time_apply(positions: Sequence[Position]) -> float:
    start = time.perf_counter()
    for state, seat, action in positions:
        apply(state, seat, action)
    return time.perf_counter() - start


def time_legal_actions(positions: Sequence[Position]) -> float:
    start = time.perf_counter()
    for state, seat, _ in positions:
        legal_actions(state, seat)
    return time.perf_counter() - start


@dataclass(frozen=True, slots=True)
class ReplayGame:
    rules: RuleSet
    dealer: int
    hands: tuple[HandLog, ...]

    @property
    def actions(self) -> int:
        return sum(len(actions) for _, actions in self.hands)


def time_games(games: Sequence[ReplayGame]) -> float:
    """Replay whole games; only each hand's run of ``apply`` calls is on the clock."""
    clock = time.perf_counter
    total = 0.0
    for game in games:
        state = new_game(game.rules, game.dealer)
        for deal, actions in game.hands:
            state, _ = start_hand(state, deal)
            start = clock()
            for seat, action in actions:
                state, _ = apply(state, seat, action)
            total += clock() - start
    return total


def time_best_meld(hands: Sequence[tuple[tuple[Card, ...], int]], table: MeldTable) -> float:
    start = time.perf_counter()
    for cards, trump in hands:
        best_meld(cards, trump, table)
    return time.perf_counter() - start


def time_meld_total(counts: Sequence[tuple[list[int], int]], table: MeldTable) -> float:
    start = time.perf_counter()
    for vector, trump in counts:
        meld_total(vector, trump, table)
    return time.perf_counter() - start


def time_audit(texts: Sequence[str]) -> float:
    start = time.perf_counter()
    for text in texts:
        audit_text(text)
    return time.perf_counter() - start


# --------------------------------------------------------------------------------------------
# State size


def _copy_deal(deal: Deal) -> Deal:
    """An equal deal built from fresh tuples (``tuple(t)`` of a tuple would return ``t``)."""
    return Deal(
        hands=tuple(tuple(list(hand)) for hand in deal.hands),
        widow=tuple(list(deal.widow)),
        stock=tuple(list(deal.stock)),
        turn_up=deal.turn_up,
    )


def _rebuild(initial: GameState, hands: Sequence[HandLog]) -> GameState:
    state = initial
    for deal, actions in hands:
        state, _ = start_hand(state, _copy_deal(deal))
        for seat, action in actions:
            state, _ = apply(state, seat, action)
    return state


def state_bytes(rules: RuleSet, dealer: int, hands: Sequence[HandLog]) -> int:
    """Bytes held by the state that ``hands`` (a game's log up to some point) leads to.

    Method: ``new_game`` is called *before* tracing, so the per-game ``Setup`` (the RuleSet, the
    meld table, the play and counting rules, shared by every state of the game) is not counted.
    Then, under ``tracemalloc``, the game is replayed from that initial state through
    ``start_hand`` (with fresh copies of the deals, which the state holds) and ``apply``, keeping
    only the final state: every intermediate state and event is freed as the replay goes. The
    figure is the traced memory with the final state alive minus the traced memory once it is
    dropped, each read after a full ``gc.collect()`` (which also empties CPython's free lists,
    so freed tuples and dicts are given back and not counted). What remains is exactly the memory
    that only this state holds: its state objects, tuples, deal and meld records, and any
    int above the small-int cache. Objects shared with the rest of the process (small ints,
    interned strings such as the phase names, module-level meld card tuples) cost the state
    nothing and are not counted. A warm-up replay runs first so lazily filled caches are not
    mistaken for state.
    """
    initial = new_game(rules, dealer)
    _rebuild(initial, hands)  # warm-up
    gc.collect()
    tracemalloc.start()
    try:
        state: GameState | None = _rebuild(initial, hands)
        gc.collect()
        alive = tracemalloc.get_traced_memory()[0]
        assert state is not None and state.hand is not None
        state = None
        gc.collect()
        dropped = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return alive - dropped


def reachable_bytes(state: GameState) -> int:
    """Cross-check for :func:`state_bytes`: ``sys.getsizeof`` summed over the objects reachable
    from ``state``, each once, not entering the per-game ``Setup`` and skipping the objects every
    state shares (None, booleans, small ints, strings, classes)."""
    seen: set[int] = {id(state.setup)}
    stack: list[object] = [state]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if obj is None or isinstance(obj, bool | str | type):
            continue
        if isinstance(obj, int) and -5 <= obj <= 256:
            continue
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


@dataclass(frozen=True, slots=True)
class SizeSample:
    traced: int
    reachable: int
    last_card_traced: int  # the largest state of the same hand: just before its last card


def measure_state(game: Game, hand_index: int) -> SizeSample:
    """State sizes in hand ``hand_index`` of ``game``: mid-way through the play, and at its end."""
    hands = hands_of(game)
    deal, actions = hands[hand_index]
    plays = [i for i, (_, action) in enumerate(actions) if isinstance(action, Play)]
    assert plays, "the chosen hand must be played out"
    middle = plays[len(plays) // 2]  # half the cards played: half the tricks taken
    last = plays[-1]
    rules = game.state.rules
    dealer = game.state.first_dealer
    before = hands[:hand_index]
    mid_log = (*before, (deal, actions[:middle]))
    end_log = (*before, (deal, actions[:last]))
    return SizeSample(
        traced=state_bytes(rules, dealer, mid_log),
        reachable=reachable_bytes(_rebuild(new_game(rules, dealer), mid_log)),
        last_card_traced=state_bytes(rules, dealer, end_log),
    )


def played_hand(game: Game, start: int) -> int:
    """The first hand from ``start`` on that was played to its last trick (not redealt or
    conceded), so that a mid-hand state exists."""
    for index, (_, actions) in enumerate(hands_of(game)):
        kinds = [type(action) for _, action in actions]
        if index >= start and Play in kinds and Concede not in kinds:
            return index
    raise AssertionError("no hand was played out")


# --------------------------------------------------------------------------------------------
# Figures


@dataclass(slots=True)
class Figure:
    key: str
    label: str
    value: float
    unit: str
    target: float | None = None
    lower_is_better: bool = False
    note: str = ""
    detail: dict[str, object] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.target is None:
            return "info"
        met = self.value <= self.target if self.lower_is_better else self.value >= self.target
        return "PASS" if met else "MISS"

    @property
    def target_text(self) -> str:
        if self.target is None:
            return "—"
        sign = "<=" if self.lower_is_better else ">="
        return f"{sign} {self.target:,.0f}"

    def to_json(self) -> dict[str, object]:
        return {
            "label": self.label,
            "value": round(self.value, 1),
            "unit": self.unit,
            "target": self.target,
            "comparison": None if self.target is None else ("<=" if self.lower_is_better else ">="),
            "status": self.status,
            "note": self.note,
            **self.detail,
        }


def rate(
    key: str,
    label: str,
    unit: str,
    count: int,
    timing: Timing,
    target: float | None,
    note: str,
) -> Figure:
    return Figure(
        key,
        label,
        count / timing.best,
        unit,
        target,
        note=note,
        detail={
            "count": count,
            "best_seconds": round(timing.best, 6),
            "runs_seconds": [round(t, 6) for t in timing.runs],
            "cpu_share": round(timing.best_share, 3),
        },
    )


def bench_play(work: Workloads) -> list[Figure]:
    positions = work.positions
    warm = positions[: min(len(positions), 20_000)]
    apply_timing = best_of(partial(time_apply, positions), partial(time_apply, warm))
    legal_timing = best_of(
        partial(time_legal_actions, positions), partial(time_legal_actions, warm)
    )
    games = len(work.partnership_games)
    source = f"{len(positions):,} play positions from random partnership games"
    return [
        rate(
            "play_apply",
            "apply: card plays",
            "plays/s",
            len(positions),
            apply_timing,
            50_000,
            source,
        ),
        rate(
            "legal_actions",
            "legal_actions: play phase",
            "calls/s",
            len(positions),
            legal_timing,
            None,
            f"same positions ({games} games)",
        ),
    ]


def bench_games(work: Workloads) -> list[Figure]:
    figures = []
    for variant in PLAYABLE_VARIANTS:
        games = [
            ReplayGame(g.state.rules, g.state.first_dealer, hands_of(g))
            for g in work.games[variant]
        ]
        count = sum(g.actions for g in games)
        hands = sum(len(g.hands) for g in games)
        unfinished = sum(not g.state.over for g in work.games[variant])
        timing = best_of(partial(time_games, games), partial(time_games, games[:2]))
        figures.append(
            rate(
                f"game_apply.{variant}",
                f"apply: whole games, {variant}",
                "actions/s",
                count,
                timing,
                GAME_TARGETS.get(variant),
                f"{len(games)} whole games, {hands:,} hands, {count:,} actions"
                + (f" ({unfinished} stopped at {MAX_HANDS} hands)" if unfinished else ""),
            )
        )
    return figures


def _random_hands(
    rng: random.Random, deck_size: int, size: int, count: int
) -> list[tuple[tuple[Card, ...], int]]:
    deck = canonical_deck(deck_size)
    return [(tuple(sorted(rng.sample(deck, size))), rng.randrange(4)) for _ in range(count)]


def _table(rules: RuleSet) -> MeldTable:
    return build_meld_table(
        rules.meld_values,
        per_set=False,
        run_counts_its_royal_marriage=rules.run_counts_its_royal_marriage,
        run_shares_marriage_cards=rules.run_shares_marriage_cards,
    )


def bench_melds(sizes: Sizes) -> list[Figure]:
    rng = random.Random(f"{SEED}:melds")
    figures = []
    cases = (
        ("partnership", "48", 48, 12, 100_000),
        ("double-deck", "80", 80, 20, 20_000),
    )
    for variant, name, deck, size, target in cases:
        table = _table(resolve_options(variant))
        hands = _random_hands(rng, deck, size, sizes.meld_hands)
        counts = [(counts_of(cards), trump) for cards, trump in hands]
        warm = hands[:5_000]
        warm_counts = counts[:5_000]
        timing = best_of(
            partial(time_best_meld, hands, table), partial(time_best_meld, warm, table)
        )
        figures.append(
            rate(
                f"best_meld.{name}",
                f"best_meld: {size} of {deck} cards",
                "hands/s",
                len(hands),
                timing,
                target,
                f"{len(hands):,} random hands, random trump, {variant} table",
            )
        )
        timing = best_of(
            partial(time_meld_total, counts, table), partial(time_meld_total, warm_counts, table)
        )
        figures.append(
            rate(
                f"meld_total.{name}",
                f"meld_total: {size} of {deck} cards",
                "hands/s",
                len(counts),
                timing,
                None,
                "same hands, as count vectors",
            )
        )
    return figures


def bench_audit(work: Workloads, sizes: Sizes) -> list[Figure]:
    games = work.partnership_games[: sizes.audit_games]
    texts = [json.dumps(g.export()) for g in games]
    hands = 0
    for game, text in zip(games, texts, strict=True):
        verdict = audit_text(text)
        assert verdict.get("legal") is True, f"a random game failed its audit: {verdict}"
        audited = verdict["hands"]
        assert isinstance(audited, list) and len(audited) == game.state.hands_completed
        hands += len(audited)
    timing = best_of(partial(time_audit, texts), partial(time_audit, texts[:10]))
    size = sum(len(t) for t in texts)
    return [
        rate(
            "audit",
            "audit_text: partnership hands",
            "hands/s",
            hands,
            timing,
            1_000,
            f"{len(texts)} games, {hands:,} hands, {size / 1e6:.1f} MB of JSON",
        )
    ]


def bench_state_size(work: Workloads) -> list[Figure]:
    figures = []
    cases = (
        ("partnership", "48", work.games["partnership"][0]),
        ("double-deck", "80", work.games["double-deck"][0]),
    )
    for variant, name, game in cases:
        index = played_hand(game, 2)  # a few hands in, so the scores are not the initial ones
        sample = measure_state(game, index)
        figures.append(
            Figure(
                f"state_bytes.{name}",
                f"state size mid-hand: {variant}",
                sample.traced,
                "bytes",
                10_240,
                lower_is_better=True,
                note=(
                    f"tracemalloc; getsizeof walk {sample.reachable:,}; "
                    f"before last card {sample.last_card_traced:,}"
                ),
                detail={
                    "method": "tracemalloc replay, Setup excluded (see state_bytes docstring)",
                    "hand_index": index,
                    "reachable_getsizeof": sample.reachable,
                    "before_last_card": sample.last_card_traced,
                },
            )
        )
    return figures


# --------------------------------------------------------------------------------------------
# Output


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def add_run_arguments(parser: argparse.ArgumentParser, quick_help: str, *, merges: bool) -> None:
    """``--quick`` and ``--output``, the same for every benchmark (``merges``: the benchmark
    merges its key into the results file rather than writing the file afresh)."""
    parser.add_argument("--quick", action="store_true", help=quick_help)
    action = "the JSON results to merge into" if merges else "where to write the JSON results"
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"{action} (default {RESULTS_PATH}; a --quick run writes nothing unless given)",
    )


def output_path(args: argparse.Namespace) -> Path | None:
    """Where a run writes its results: ``--output``, else bench/results.json unless ``--quick``."""
    output: Path | None = args.output
    return output if output is not None or args.quick else RESULTS_PATH


class _Judged(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def status(self) -> str: ...


def exit_status(console: Console, figures: Sequence[_Judged], check: bool) -> int:
    """Name the figures that missed their targets; 1 when ``check`` (``--check``) and any did.
    Every benchmark ends with it."""
    missed = [f.key for f in figures if f.status == "MISS"]
    if missed:
        console.print(f"[bold red]missed: {', '.join(missed)}[/]")
    return 1 if check and missed else 0


# Results of benchmarks that `make bench` does not run, kept when this one rewrites the file
# (the others, run after it, merge theirs in anew).
KEPT_RESULTS: Final = ("soak",)


def _with_others(path: Path, results: dict[str, object]) -> dict[str, object]:
    """``results`` and the entries of ``KEPT_RESULTS`` that ``path`` already holds."""
    if path.exists():
        earlier = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(earlier, dict):
            results = {**results, **{k: earlier[k] for k in KEPT_RESULTS if k in earlier}}
    return results


def environment() -> dict[str, object]:
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cores": os.cpu_count(),
        "load_average": None if load is None else [round(x, 2) for x in load],
        "commit": commit,
        "dirty": None if commit is None or status is None else bool(status),
    }


def _share(figure: Figure) -> float:
    share = figure.detail.get("cpu_share", 1.0)
    return share if isinstance(share, float) else 1.0


def show(console: Console, figures: Sequence[Figure], env: Mapping[str, object]) -> None:
    table = Table(
        title="Pinochle referee engine benchmark",
        caption=(
            f"best of {REPETITIONS} after a warm-up, one thread; Python {env['python']} on "
            f"{env['machine']} ({env['cores']} cores); state size: memory freed when the state "
            "is dropped, per-game Setup excluded; cpu: share of the best run's wall time this "
            "process was on a CPU"
        ),
    )
    table.add_column("figure")
    table.add_column("measured", justify="right")
    table.add_column("unit")
    table.add_column("target", justify="right")
    table.add_column("result")
    table.add_column("cpu", justify="right")
    table.add_column("workload", overflow="fold")
    styles = {"PASS": "green", "MISS": "bold red", "info": "dim"}
    for figure in figures:
        table.add_row(
            figure.label,
            f"{figure.value:,.0f}",
            figure.unit,
            figure.target_text,
            f"[{styles[figure.status]}]{figure.status}[/]",
            f"{_share(figure):.0%}" if "cpu_share" in figure.detail else "",
            figure.note,
        )
    console.print(table)


def profile_play(work: Workloads, console: Console) -> None:
    """cProfile over the play positions (``--profile``): where the time of ``apply`` goes."""
    profiler = cProfile.Profile()
    profiler.enable()
    time_apply(work.positions)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(20)
    console.print("[dim]profile above: apply over the play positions, sorted by own time[/]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine", description=__doc__)
    add_run_arguments(parser, "small workloads (a smoke run)", merges=False)
    parser.add_argument("--check", action="store_true", help="exit 1 if any figure misses")
    parser.add_argument("--profile", action="store_true", help="also profile apply on plays")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else Sizes()
    output = output_path(args)

    console = Console()
    if not console.is_terminal:  # a pipe or a file: wide enough for the table on one line a row
        console = Console(width=150)
    log = Console(stderr=True)
    started = time.perf_counter()
    env = environment()

    log.print("[dim]playing random games for the workloads ...[/]")
    work = build_workloads(sizes)
    gc.collect()
    gc.freeze()  # the workloads are long-lived: keep the collector from rescanning them
    built = time.perf_counter() - started

    figures: list[Figure] = []
    log.print("[dim]timing apply and legal_actions on card plays ...[/]")
    figures += bench_play(work)
    log.print("[dim]timing whole games per variant ...[/]")
    figures += bench_games(work)
    log.print("[dim]timing meld evaluation ...[/]")
    figures += bench_melds(sizes)
    log.print("[dim]timing the audit of recorded games ...[/]")
    figures += bench_audit(work, sizes)
    log.print("[dim]measuring state sizes ...[/]")
    figures += bench_state_size(work)
    order = [
        "play_apply",
        *(f"game_apply.{v}" for v in PLAYABLE_VARIANTS),
        "best_meld.48",
        "best_meld.80",
        "meld_total.48",
        "meld_total.80",
        "audit",
        "state_bytes.48",
        "state_bytes.80",
        "legal_actions",
    ]
    figures.sort(key=lambda f: order.index(f.key))
    if args.profile:
        profile_play(work, console)
    elapsed = time.perf_counter() - started

    show(console, figures, env)
    results = {
        "format": RESULTS_FORMAT,
        **env,
        "quick": args.quick,
        "repetitions": REPETITIONS,
        "seed": SEED,
        "workload_seconds": round(built, 2),
        "total_seconds": round(elapsed, 2),
        "figures": {f.key: f.to_json() for f in figures},
    }
    if output is not None:
        output.write_text(json.dumps(_with_others(output, results), indent=2) + "\n", "utf-8")
        console.print(f"wrote {output} ({elapsed:.0f} s in all)")
    busy = [f.key for f in figures if _share(f) < BUSY_SHARE]
    if busy:
        console.print(
            f"[yellow]the machine was busy: this process had its core less than "
            f"{BUSY_SHARE:.0%} of the time for {', '.join(busy)}; those rates are pessimistic[/]"
        )
    return exit_status(console, figures, args.check)


if __name__ == "__main__":
    raise SystemExit(main())
