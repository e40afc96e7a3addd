"""The rules core compiled by mypyc (``setup.py``) is what the tests run, and it behaves as the
pure Python does where the two could differ: copying and pickling frozen values, inputs of the
wrong type at the validating entry points, and memory (two bugs of mypyc 1.20 leaked at every
deal and every refusal; nothing the core makes may outlive its call). ``make test-pure`` runs
this file on the pure build too.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import importlib
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from referee.compiled import stale_build_problem, stale_compiled_modules
from referee.demo import bot_action
from referee.engine.actions import Action, decode_action
from referee.engine.engine import apply, legal_actions, new_game, start_hand
from referee.engine.errors import DealError, IllegalAction
from referee.engine.game import Game, SeededDeals
from referee.engine.state import GameState
from referee.engine.views import SPECTATOR, clear_memo, view
from referee.rules.cards import CardSyntaxError
from referee.rules.dealing import deal_commitment
from referee.rules.frozen import Frozen
from referee.rules.melds import MeldError, MeldTable
from referee.rules.options import VARIANT_IDS, resolve_options
from tests import native_trace

ROOT = Path(__file__).resolve().parent.parent
NATIVE_MODULES = [
    line.strip().strip('",').removesuffix(".py").replace("/", ".")
    for line in (ROOT / "setup.py").read_text("utf-8").splitlines()
    if line.strip().startswith('"referee/')
]
PURE = os.environ.get("PINOCHLE_REFEREE_PURE", "") == "1"


def test_setup_names_the_whole_core_but_options() -> None:
    """Every module of ``referee/rules`` and ``referee/engine`` is compiled but ``options.py``
    (which subclasses ``dict`` and ``list``, and runs once per game)."""
    core = sorted(
        f"referee.{path.parent.name}.{path.stem}"
        for folder in ("rules", "engine")
        for path in (ROOT / "referee" / folder).glob("*.py")
        if path.stem != "__init__"
    )
    assert sorted(NATIVE_MODULES) == [name for name in core if name != "referee.rules.options"]


@pytest.mark.parametrize("name", NATIVE_MODULES)
def test_the_tests_run_the_compiled_core(name: str) -> None:
    """``make install`` compiles the core, so ``make test`` tests the build that serves; with
    PINOCHLE_REFEREE_PURE=1 it is the pure Python."""
    origin = importlib.import_module(name).__file__ or ""
    assert origin.endswith(".py") if PURE else origin.endswith(".so"), origin


@pytest.mark.parametrize("name", NATIVE_MODULES)
def test_every_frozen_dataclass_of_the_core_is_a_frozen_value(name: str) -> None:
    """A compiled frozen dataclass cannot be copied or unpickled unless it rebuilds itself
    through ``__init__`` (``Frozen``): a new one that forgets the base fails here."""
    module = importlib.import_module(name)
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and value.__module__ == name
            and dataclasses.is_dataclass(value)
            and value.__dataclass_params__.frozen  # type: ignore[attr-defined]
        ):
            assert issubclass(value, Frozen), f"{name}.{value.__qualname__}"


def _bot_game(variant: str, actions: int, seed: str) -> list[tuple[GameState, int, Action]]:
    """The first ``actions`` steps of a seeded game of ``variant`` played by the demo's bots
    (every variant, two-handed's draws and melds included): (state before, seat, action)."""
    game = Game(resolve_options(variant, {}), dealer=0, deals=SeededDeals(seed))
    rng = random.Random(seed)
    steps: list[tuple[GameState, int, Action]] = []
    for _ in range(actions):
        state = game.state
        seat, entries = next(
            (seat, entries)
            for seat in range(state.setup.rules.players)
            if (entries := legal_actions(state, seat))
        )
        action = decode_action(bot_action(entries, rng))
        steps.append((state, seat, action))
        game.act(seat, action)
    return steps


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_game_states_copy_and_pickle_as_equal_values_that_play_on(variant: str) -> None:
    """Every state before one of a game's first 80 actions (auction, melds, draws, tricks, a
    finished hand) survives ``copy.copy``, ``copy.deepcopy`` and every pickle protocol as an
    equal value, and each copy takes the action to the same state as the original."""
    for before, seat, action in _bot_game(variant, 80, f"native-{variant}"):
        twins = [copy.copy(before), copy.deepcopy(before)] + [
            pickle.loads(pickle.dumps(before, protocol))
            for protocol in range(pickle.HIGHEST_PROTOCOL + 1)
        ]
        expected, events = apply(before, seat, action)
        for twin in twins:
            assert twin == before
            assert apply(twin, seat, action) == (expected, events)


def test_a_meld_table_keeps_its_own_copy_rule() -> None:
    """``MeldTable`` holds a read-only mapping, which pickles as a plain dict and back."""
    game = Game(resolve_options("partnership", {}), dealer=0, deals=SeededDeals("table"))
    table = game.state.setup.meld_table
    assert pickle.loads(pickle.dumps(table)) == table == copy.deepcopy(table)
    with pytest.raises(ValueError, match="expected 4 integers"):
        MeldTable({**dict(table.values), "dix": (10, 20)}, 0, False, False)  # type: ignore[dict-item]


@pytest.mark.parametrize("seat", [True, False, "0", 0.0, None, -1, 4, 2**70])
def test_apply_refuses_a_seat_of_the_wrong_type_as_malformed(seat: object) -> None:
    """Typed ``object`` at the entry point, so the compiled core neither raises ``TypeError``
    for a string nor reads ``True`` as seat 1."""
    game = Game(resolve_options("partnership", {}), dealer=0, deals=SeededDeals("seat-types"))
    with pytest.raises(IllegalAction) as caught:
        apply(game.state, seat, decode_action({"type": "pass"}))
    assert (caught.value.code, caught.value.field) == ("MALFORMED_ACTION", "seat")


def _bytes_kept_per_call(call: Callable[[], object], calls: int = 2_000) -> float:
    """What ``calls`` calls of ``call`` leave allocated, per call (tracemalloc, after a full
    collection; the views' shared memo emptied, as it is bounded for the process)."""
    call()
    tracemalloc.start()
    try:
        clear_memo()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(calls):
            call()
        clear_memo()
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / calls
    finally:
        tracemalloc.stop()


def test_dealing_keeps_nothing() -> None:
    """Was: compiled by mypyc 1.20, ``seed + k.to_bytes(8, "big")`` in the seeded shuffle and
    ``text.encode() + salt`` in the deal commitment kept their left operand alive (38 bytes a
    deal for a 5-byte seed, and a commitment's JSON at every hand a server deals). Dealing,
    committing and starting a hand now leave nothing behind."""
    rules = resolve_options("partnership", {})
    deal = SeededDeals("abc").next_deal(rules, 0, 3)
    fresh = new_game(rules, 0)
    calls: dict[str, Callable[[], object]] = {
        "seeded_deal": lambda: SeededDeals("abc").next_deal(rules, 0, 3),
        "deal_commitment": lambda: deal_commitment(deal, b"0123456789abcdef"),
        "start_hand": lambda: start_hand(fresh, deal),
    }
    kept = {name: _bytes_kept_per_call(call) for name, call in calls.items()}
    assert all(size < 4 for size in kept.values()), kept


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_a_hands_actions_and_refusals_keep_nothing(variant: str) -> None:
    """A game's first 70 actions through ``apply``, ``legal_actions`` and ``view`` (the seat's
    and the spectator's), and each of them sent by the next seat, which is refused (every
    refusal leaked 184 bytes compiled, see the exception test below), leave nothing behind."""
    steps = _bot_game(variant, 70, f"kept-{variant}")
    players = steps[0][0].setup.rules.players
    others = [(state, (seat + 1) % players, action) for state, seat, action in steps]
    codes = [_refused(*step) for step in others]
    assert codes.count("") < len(codes) / 2, codes  # mostly refused
    calls: dict[str, Callable[[], object]] = {
        "apply": lambda: [apply(*step) for step in steps],
        "legal_actions": lambda: [legal_actions(state, seat) for state, seat, _ in steps],
        "view": lambda: [(view(s, seat), view(s, SPECTATOR)) for s, seat, _ in steps],
        "refusals": lambda: [_refused(*step) for step in others],
    }
    kept = {name: _bytes_kept_per_call(call, 200) for name, call in calls.items()}
    assert all(size < 4 for size in kept.values()), kept


def _refused(state: GameState, seat: int, action: Action) -> str:
    """The code ``apply`` refuses ``action`` by ``seat`` with; "" if it is accepted."""
    try:
        apply(state, seat, action)
    except IllegalAction as refused:
        return refused.code
    return ""


EXCEPTIONS: dict[type[Exception], Callable[[], Exception]] = {
    IllegalAction: lambda: IllegalAction("NOT_YOUR_TURN", "seat 1 cannot bid now", "seat"),
    MeldError: lambda: MeldError("no such meld", "melds[0]"),
    CardSyntaxError: lambda: CardSyntaxError("not a card: 'ZZ'"),
    DealError: lambda: DealError("a card is missing"),
}


def test_every_exception_class_of_the_compiled_core_is_checked_below() -> None:
    defined = {
        value
        for name in NATIVE_MODULES
        for value in vars(importlib.import_module(name)).values()
        if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == name
    }
    assert defined == set(EXCEPTIONS)


@pytest.mark.parametrize("error", list(EXCEPTIONS), ids=lambda error: error.__name__)
def test_an_exception_of_the_core_keeps_nothing(error: type[Exception]) -> None:
    """Was: compiled, ``IllegalAction`` and ``MeldError`` (an ``__init__`` that sets
    attributes) kept every instance alive, 184 bytes a refusal; they are not native classes
    now. Raised and caught, each leaves nothing behind."""

    def raise_and_catch() -> None:
        try:
            raise EXCEPTIONS[error]()
        except error:
            pass

    assert _bytes_kept_per_call(raise_and_catch) < 4


def test_the_compiled_core_plays_the_games_the_pure_core_plays(tmp_path: Path) -> None:
    """A differential check: every answer of the core over 20 seeded games (each variant with
    its defaults and three drawn option sets, 250 actions each: legal actions, every role's
    view, events, a refusal per action, the export and its audit) digests the same in this
    process and in one that runs a copy of the tree without the compiled modules."""
    copy_root = tmp_path / "pure"
    shutil.copytree(
        ROOT / "referee",
        copy_root / "referee",
        ignore=shutil.ignore_patterns("*.so", "__pycache__"),
    )
    (copy_root / "tests").mkdir()
    for name in ("__init__.py", "native_trace.py"):
        shutil.copy(ROOT / "tests" / name, copy_root / "tests" / name)
    child = subprocess.run(
        [sys.executable, "-m", "tests.native_trace"],
        cwd=copy_root,
        env={**os.environ, "PINOCHLE_REFEREE_PURE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    pure = json.loads(child.stdout)
    assert pure["build"] == "pure"
    assert native_trace.build() == ("pure" if PURE else "compiled")
    here = native_trace.digests()
    assert len(here) >= len(VARIANT_IDS) * 2  # the defaults and at least one drawn set each
    assert here == pure["digests"]


def test_stale_compiled_modules_are_named(tmp_path: Path) -> None:
    """The guard of the tests and the commands: a compiled module's source edited after the
    last build (the newest ``.so``, the shared library every build writes) is named; one edited
    before it, or with no compiled module beside it, is not."""
    package = tmp_path / "referee"
    (package / "rules").mkdir(parents=True)
    now = time.time()
    for stem, edited_at in (("fresh", now - 20), ("edited", now + 20), ("plain", now + 20)):
        source = package / "rules" / f"{stem}.py"
        source.write_text("x = 1\n")
        os.utime(source, (edited_at, edited_at))
    for stem in ("fresh", "edited"):
        stub = package / "rules" / f"{stem}.cpython-311-x86_64-linux-gnu.so"
        stub.write_bytes(b"")
        os.utime(stub, (now - 30, now - 30))  # a build leaves the stubs as they were
    shared = package / "_native__mypyc.cpython-311-x86_64-linux-gnu.so"
    shared.write_bytes(b"")
    os.utime(shared, (now, now))
    assert stale_compiled_modules(package) == ["referee/rules/edited.py"]
    assert stale_build_problem(package) is None  # no setup.py beside it: an installed package
    (tmp_path / "setup.py").write_text("")
    assert (stale_build_problem(package) or "").startswith(
        "referee/rules/edited.py changed after it was compiled: run `make install`"
    )
    os.utime(shared, (now + 30, now + 30))
    assert stale_compiled_modules(package) == []
    assert stale_build_problem(package) is None
    assert stale_compiled_modules(ROOT / "referee") == []


def test_a_command_refuses_to_run_a_stale_build(tmp_path: Path) -> None:
    """Every command runs the rules core, so in a source checkout whose compiled core is older
    than its source each one refuses and says how to rebuild, rather than run the old rules
    (``.venv/bin/pinochle-referee serve`` straight after an edit, without ``make``). An
    installed package (no ``setup.py`` beside it) is not checked, nor is a pure build, whose
    edited source is what runs."""
    checkout = tmp_path / "checkout"
    shutil.copytree(
        ROOT / "referee", checkout / "referee", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "setup.py", checkout / "setup.py")
    record = ROOT / "examples" / "partnership-game.json"

    def audit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "referee.cli", "audit", str(record)],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert audit().returncode == 0
    edited = checkout / "referee" / "rules" / "melds.py"
    later = time.time() + 60
    os.utime(edited, (later, later))
    refused = audit()
    if PURE:
        assert refused.returncode == 0, refused.stderr
    else:
        assert refused.returncode == 2
        assert refused.stdout == ""
        assert refused.stderr.startswith(
            "pinochle-referee: referee/rules/melds.py changed after it was compiled: run "
            "`make install`"
        )
    (checkout / "setup.py").unlink()
    assert audit().returncode == 0
