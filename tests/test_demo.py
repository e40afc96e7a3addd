"""``pinochle-referee demo``: bots play a whole game of every variant through the real API.

Issue 4 review: the two-handed demo crashed (``KeyError: 'card'``) when its bot picked the
``{"type": "play", "drawn_card": true}`` entry, the lead of the card about to be drawn, which
names no card. These tests run the demo end to end through ``referee.cli.main``.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
import trustme

import referee.demo
from referee.cli import main
from referee.demo import bot_action, choose, playable, run_demo
from referee.rules.options import VARIANT_IDS
from referee.service.convert import action_from_json
from tests.service_helpers import SHORT_GAME, serving, write_pems

GAME_OVER = re.compile(r"^game over: winner \d+, scores \[[-\d, ]+\]$", re.MULTILINE)


# The demo quiets structlog for the whole process: each test puts the configuration back.
pytestmark = pytest.mark.usefixtures("restored_logging")


@pytest.fixture
def offered(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every legal-action entry the demo's bots were offered."""
    seen: list[dict[str, Any]] = []

    def recording(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        seen.extend(dict(e) for e in entries)
        return playable(entries)

    monkeypatch.setattr(referee.demo, "playable", recording)
    return seen


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_the_demo_plays_every_variant_to_the_end(
    variant: str, capsys: pytest.CaptureFixture[str], offered: list[dict[str, Any]]
) -> None:
    options = json.dumps(SHORT_GAME[variant])
    status = main(["demo", "--variant", variant, "--options", options, "--seed", "test-demo"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f": {variant}, " in out.splitlines()[0]
    # Every hand has its header, the first (dealt by CreateGame) included, in order.
    headers = [int(m) for m in re.findall(r"^hand (\d+), dealer \d+$", out, re.MULTILINE)]
    assert headers == list(range(len(headers))) and headers, out[:2000]
    assert out.splitlines()[1].startswith("hand 0, dealer ")
    assert len(GAME_OVER.findall(out)) == 1, out[-2000:]
    assert offered


def test_the_two_handed_demo_survives_the_drawn_card_lead(
    capsys: pytest.CaptureFixture[str], offered: list[dict[str, Any]]
) -> None:
    """A full-length two-handed game (the crash needed only one drawn-card entry picked)."""
    assert main(["demo", "--variant", "two-handed", "--seed", "drawn-card"]) == 0
    assert GAME_OVER.search(capsys.readouterr().out)
    drawn = [e for e in offered if e.get("drawn_card")]
    assert len(drawn) > 20, "the game never offered the drawn-card lead"


_CONTRACT = re.compile(r"^  contract: seat (\d+) at (\d+)$")
_RESULT = re.compile(r"^  hand result delta \[([-\d, ]+)\]")


@pytest.mark.parametrize("variant", ["partnership", "cutthroat"])
def test_the_demo_bots_make_their_contracts_and_the_game_ends(
    variant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the API, with the default options: the bots bid what their cards are worth (from
    their seats' views), so most contracts printed are made and a game ends with a winner in a
    few dozen hands; bidding the minimum whatever they held, they had most contracts set
    (tests/test_demo_options.py compares the two on the engine, double-deck too, whose blind
    bots made more than half of theirs)."""
    assert main(["demo", "--variant", variant, "--seed", "worth"]) == 0
    out = capsys.readouterr().out
    assert GAME_OVER.search(out)
    made = contracts = 0
    declarer: int | None = None
    for line in out.splitlines():
        if match := _CONTRACT.match(line):
            declarer = int(match.group(1))
        elif (match := _RESULT.match(line)) and declarer is not None:
            delta = [int(x) for x in match.group(1).split(",")]
            contracts += 1
            made += delta[declarer % 2 if variant != "cutthroat" else declarer] >= 0
            declarer = None
    hands = len(re.findall(r"^hand \d+, dealer \d+$", out, re.MULTILINE))
    assert contracts and made >= 0.7 * contracts and hands <= 30, (made, contracts, hands)


def test_the_same_seed_plays_the_same_game(capsys: pytest.CaptureFixture[str]) -> None:
    """The bots' choices follow from --seed alone (their valuation of a hand is deterministic):
    two demos with one seed print the same log but for the game id."""
    logs = []
    for _ in range(2):
        assert main(["demo", "--variant", "partnership", "--seed", "again"]) == 0
        logs.append(capsys.readouterr().out.splitlines()[1:])
    assert logs[0] == logs[1] and len(logs[0]) > 50


# A partnership hand with a run in hearts, aces around and a pinochle (worth far above 250),
# and one with a dix for all its meld (worth less than 250 in any suit).
_STRONG = ["AH", "10H", "KH", "QH", "JH", "AS", "AD", "AC", "QS", "JD", "9C", "9D"]
_WEAK = ["9S", "JS", "9H", "JH", "9D", "JD", "QD", "9C", "AC", "QC", "10S", "10D"]


def _seat_view(
    cards: list[str], options: Mapping[str, object] | None = None, **hand: object
) -> dict[str, Any]:
    """The parts of a partnership seat's view (GetGame) the bot reads."""
    return {
        "variant": "partnership",
        "options": dict(options or {}),
        "role": 0,
        "hand": {"cards": cards, "trump": None, "declarer": None, **hand},
    }


def test_the_bot_bids_what_its_hand_is_worth() -> None:
    """The bots bid the minimum whatever they held; now a call follows the hand's worth and
    every bidding option that reaches the bot through its legal actions."""
    rng = random.Random(0)
    opening = {"type": "bid", "min": 250, "step": 10, "max": 270}
    plain, helping = {"type": "pass"}, {"type": "pass", "help": True}
    strong, weak = _seat_view(_STRONG), _seat_view(_WEAK)
    assert bot_action([opening, plain, helping], rng, strong) == {"type": "bid", "amount": 250}
    # Raised while the hand is worth it, by the least allowed, past the standing bid.
    raise_ = {"type": "bid", "min": 420, "step": 20, "max": 440}
    assert bot_action([raise_, plain], rng, strong) == {"type": "bid", "amount": 420}
    assert bot_action([{**raise_, "min": 900}, plain], rng, strong) == plain
    # Too weak: a pass, with help only when its meld is above what a partner counts on.
    assert bot_action([opening, plain, helping], rng, weak) == plain
    assert bot_action([{**opening, "min": 900}, plain, helping], rng, strong) == helping
    # A stuck dealer (no pass offered): bid-or-redeal where allowed, else the minimum.
    assert bot_action([opening, {"type": "bid_or_redeal"}], rng, weak) == {"type": "bid_or_redeal"}
    assert bot_action([opening], rng, weak) == {"type": "bid", "amount": 250}
    # trump_requires_marriage: a hand with no king-queen pair can name no trump, worth nothing.
    no_marriage = ["AH", "10H", "KH", "JH", "AS", "AD", "AC", "KS", "JD", "9C", "9D", "10D"]
    bare = _seat_view(no_marriage)
    assert bot_action([opening, plain], rng, bare)["type"] == "bid"  # worth about 250
    required = _seat_view(no_marriage, {"trump_requires_marriage": True})
    assert bot_action([opening, plain], rng, required) == plain


def test_the_bot_names_its_best_trump_and_keeps_its_meld() -> None:
    rng = random.Random(0)
    trumps = [{"type": "declare_trump", "suit": suit} for suit in "SHDC"]
    assert bot_action(trumps, rng, _seat_view(_STRONG)) == {"type": "declare_trump", "suit": "H"}
    # Returning four of sixteen cards, the declarer keeps its meld, then its trumps and
    # counters: its lowest cards outside them go back.
    held = [*_STRONG, "9S", "JS", "KD", "QC"]
    entry = {"type": "pass_cards", "count": 4, "from": held}
    declarer = _seat_view(held, trump="H", declarer=0)
    returned = bot_action([entry], rng, declarer)
    assert returned["type"] == "pass_cards"
    assert sorted(returned["cards"]) == sorted(["9S", "9D", "9C", "JS"])
    # Its partner gives its trumps, highest first, then its aces, but keeps its meld (the dix).
    partner = _seat_view(_WEAK, trump="S", declarer=2)
    passed = bot_action([{**entry, "from": _WEAK}], rng, partner)
    assert sorted(passed["cards"]) == sorted(["10S", "JS", "AC", "JH"])


def _play_view(
    seat: int,
    cards: list[str],
    trick: list[str],
    *,
    leader: int = 0,
    variant: str = "partnership",
    options: Mapping[str, object] | None = None,
    tricks: Sequence[Mapping[str, object]] = (),
    **hand: object,
) -> dict[str, Any]:
    """The parts of a seat's view (GetGame) during the play that the bot reads; spades trump."""
    return {
        "variant": variant,
        "options": dict(options or {}),
        "role": seat,
        "hand": {
            "cards": cards,
            "trump": "S",
            "phase": "play",
            "trick": {"leader": leader, "cards": trick},
            "tricks": list(tricks),
            **hand,
        },
    }


def _played(view: Mapping[str, Any], legal: list[str]) -> str:
    """The card the bot plays among ``legal`` (as ListLegalActions lists them) in ``view``."""
    entries = [{"type": "play", "card": card} for card in legal]
    action = bot_action(entries, random.Random(0), view)
    assert action["type"] == "play" and action["card"] in legal
    return str(action["card"])


def test_the_bot_gives_points_to_its_partner_and_wins_cheaply() -> None:
    """The bots played a random legal card; now a follower throws a counter on its partner's
    sure trick, takes a trick with its cheapest winning card, and else throws its cheapest."""
    # Seat 3 plays last; its partner, seat 1, wins with the AH: the 10H (10 points) goes on it.
    hearts = ["10H", "QH", "JH", "9C", "QC"]
    assert _played(_play_view(3, hearts, ["JH", "AH", "9H"]), ["10H", "QH", "JH"]) == "10H"
    # Seat 2, an opponent, wins with the AH: no counter to give away, the JH (no points).
    assert _played(_play_view(3, hearts, ["JH", "9H", "AH"]), ["10H", "QH", "JH"]) == "JH"
    # The KH wins: the 10H takes it (the AH would too, a higher card for the same points).
    winning = ["AH", "10H", "JH", "9C"]
    assert _played(_play_view(3, winning, ["KH", "9H", "QH"]), ["AH", "10H"]) == "10H"
    # Second to play, the 10H could fall to the other AH, still out: the AH, which no card beats.
    assert _played(_play_view(1, winning, ["KH"]), ["AH", "10H"]) == "AH"
    # The count scheme is the game's: under classic_11 the QH is worth 3 points, the JH 2.
    scheme = {"count_scheme": "classic_11"}
    lows = ["QH", "JH", "9H", "9C"]
    view = _play_view(3, lows, ["JH", "AH", "9H"], options=scheme)
    assert _played(view, ["QH", "JH", "9H"]) == "QH"
    assert _played(_play_view(3, lows, ["JH", "AH", "9H"]), ["QH", "JH", "9H"]) == "9H"


def test_the_bot_gives_no_points_on_a_trick_its_partner_may_lose() -> None:
    """Third to play, its partner's KH may fall to the AH or 10H of the opponent still to play:
    no counter goes on it; on the partner's AH, which nothing beats, the KD does."""
    void = ["AC", "9C", "KD"]  # no hearts and no trumps: any card
    assert _played(_play_view(2, void, ["KH", "9H"]), void) == "9C"
    assert _played(_play_view(2, void, ["AH", "9H"]), void) == "KD"
    # The opponent to play has shown it has no hearts (it trumped them): it may trump the AH.
    trumped = [{"leader": 1, "cards": ["QH", "KH", "9S", "JH"], "winner": 3, "points": 10}]
    assert _played(_play_view(2, void, ["AH", "9H"], tricks=trumped), void) == "9C"


def test_the_cutthroat_bot_has_no_partner() -> None:
    """Three-handed, every other seat is an opponent: seat 0 (across the table in a
    partnership) winning with the AH gets no counter, as seat 1 does not."""
    cards = ["10H", "JH", "9C"]
    assert _played(_play_view(2, cards, ["AH", "9H"], variant="cutthroat"), cards[:2]) == "JH"
    assert _played(_play_view(2, cards, ["9H", "AH"], variant="cutthroat"), cards[:2]) == "JH"


def test_the_bot_leads_an_off_suit_ace_and_keeps_its_trumps() -> None:
    leader = ["AS", "10S", "AH", "9H", "KD", "QC"]
    assert _played(_play_view(0, leader, []), leader) == "AH"
    # No side ace and no card the highest left in its suit: the cheapest side-suit card.
    low = ["AS", "10S", "KD", "JH", "9C"]
    assert _played(_play_view(0, low, []), low) == "9C"
    # Both aces of hearts gone (played in an earlier trick): the 10H is the highest left.
    gone = [{"leader": 0, "cards": ["AH", "9H", "AH", "JH"], "winner": 0, "points": 20}]
    tens = ["AS", "10H", "KD", "9C"]
    assert _played(_play_view(0, tens, [], tricks=gone), tens) == "10H"
    # Trumps only: the highest when nothing is out above it, else the lowest.
    assert _played(_play_view(0, ["AS", "9S"], []), ["AS", "9S"]) == "AS"
    assert _played(_play_view(0, ["10S", "9S"], []), ["10S", "9S"]) == "9S"


def test_the_two_handed_bot_trumps_only_a_trick_worth_it_before_the_stock_runs_out() -> None:
    """Two-handed stock play has no obligation: a trump goes only on a lead that counts, and
    at the last draw the bot takes the turned-up trump."""
    cards = ["JS", "9C", "QH"]
    stock: dict[str, Any] = {"variant": "two-handed", "table": [[], []], "phase": "stock_play"}
    lead_9d = _play_view(1, cards, ["9D"], **stock)
    assert _played(lead_9d, cards) == "9C"
    lead_ad = _play_view(1, cards, ["AD"], **stock)
    assert _played(lead_ad, cards) == "JS"
    draws: list[dict[str, Any]] = [
        {"type": "draw", "turn_up": True},
        {"type": "draw", "turn_up": False},
        {"type": "play", "card": "9C"},
    ]
    rng = random.Random(0)
    assert bot_action(draws, rng, lead_9d) == {"type": "draw", "turn_up": True}


def test_the_bot_never_sends_the_drawn_card_descriptor() -> None:
    entries: list[dict[str, Any]] = [
        {"type": "meld", "name": "dix", "cards": ["9S"], "points": 10},
        {"type": "play", "card": "AS"},
        {"type": "play", "card": "10H"},
        {"type": "play", "drawn_card": True},
    ]
    sent = {json.dumps(bot_action(entries, random.Random(i)), sort_keys=True) for i in range(300)}
    assert sent == {json.dumps(e, sort_keys=True) for e in entries[:3]}
    for text in sent:
        action_from_json(json.loads(text))  # every one is a well-formed API action
    with pytest.raises(ValueError, match="drawn-card"):
        choose(entries[3], random.Random(0))
    with pytest.raises(ValueError, match="no legal action"):
        bot_action(entries[3:], random.Random(0))


def test_the_bot_never_bids_beyond_what_a_request_carries() -> None:
    """After a bid of 2**31 - 1 the next raise is allowed by the rules but no int32 holds it."""
    entries: list[dict[str, Any]] = [
        {"type": "bid", "min": 2**31 - 1 + 10, "step": 10, "max": None},
        {"type": "pass"},
    ]
    assert playable(entries) == [{"type": "pass"}]
    sent = {json.dumps(bot_action(entries, random.Random(i))) for i in range(50)}
    assert sent == {'{"type": "pass"}'}
    top = {"type": "bid", "min": 2**31 - 1, "step": 10, "max": None}
    assert playable([top]) == [top]


def test_a_demo_with_min_bid_at_the_int32_limit_ends_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Was: a blind bot raised a bid of 2**31 - 1 (cutthroat, seed 4, second hand), the client
    refused the amount with a ValueError and the demo ended in a traceback. The demo's bots now
    bid only what their hands are worth, far below the limit, so they pass there (``playable``
    still drops the unsendable raise for the blind bots, test above); a contract at the limit
    is still played through: partnership's stuck dealer takes 2**31 - 1 and is set."""
    options = json.dumps({"min_bid": 2**31 - 1, "target": 1})
    flags = ["--variant", "partnership", "--options", options, "--seed", "4"]
    assert main(["demo", *flags]) == 0
    out = capsys.readouterr().out
    assert len(GAME_OVER.findall(out)) == 1 and "at 2147483647" in out, out[-2000:]
    assert "-2147483647" in out, out[-2000:]


def test_choose_makes_descriptor_entries_concrete() -> None:
    rng = random.Random(7)
    hand = ["AS", "10S", "KS", "QS", "JS", "9S"]
    assert choose({"type": "bid", "min": 260, "step": 10, "max": None}, rng) == {
        "type": "bid",
        "amount": 260,
    }
    passed = choose({"type": "pass_cards", "count": 4, "from": hand}, rng)
    assert passed["type"] == "pass_cards" and len(passed["cards"]) == 4
    assert set(passed["cards"]) <= set(hand)
    assert choose({"type": "meld", "from": hand}, rng) == {"type": "meld", "cards": hand}
    assert choose({"type": "pass", "help": True}, rng) == {"type": "pass", "help": True}


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--variant", "no-such-variant"], "demo: INVALID_ARGUMENT: unknown variant"),
        (["--variant", "partnership", "--options", '{"target": -5}'], "target"),
        (["--address", "127.0.0.1:1"], "demo: UNAVAILABLE: "),
    ],
)
def test_a_refused_demo_game_is_one_line_not_a_traceback(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pinochle-referee: demo: ") and says in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------------------------
# --address with TLS and mutual TLS


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mutual-tls"])
async def test_the_demo_plays_against_a_tls_server(
    mutual: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``demo --address`` had no TLS flags, so it could not reach a server started with
    --tls-cert (or --tls-client-ca): --tls-ca trusts the server's CA, --tls-cert and --tls-key
    present a client certificate. Without them, the refusal is one line."""
    pems = write_pems(trustme.CA(), tmp_path / "pki")
    served: dict[str, Any] = {"tls_cert": str(pems["cert"]), "tls_key": str(pems["key"])}
    client: list[str] = []
    if mutual:
        served["tls_client_ca"] = str(pems["ca"])
        client = ["--tls-cert", str(pems["client_cert"]), "--tls-key", str(pems["client_key"])]
    options = json.dumps(SHORT_GAME["partnership"])
    async with serving(tmp_path, **served) as server:
        flags = ["demo", "--options", options, "--address", f"localhost:{server.running.port}"]
        trusted = [*flags, "--tls-ca", str(pems["ca"])]
        assert await asyncio.to_thread(main, [*trusted, *client]) == 0
        out = capsys.readouterr().out
        assert out.startswith("game ") and len(GAME_OVER.findall(out)) == 1, out[-2000:]
        refused = [flags, trusted] if mutual else [flags]
        for attempt in refused:
            assert await asyncio.to_thread(main, attempt) == 1
            err = capsys.readouterr().err
            assert err.startswith("pinochle-referee: demo: UNAVAILABLE: "), err
            assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--tls-ca", "{ca}"], "--tls-ca, --tls-cert and --tls-key need --address"),
        (["--tls-cert", "{ca}", "--tls-key", "{ca}"], "need --address"),
        (["--address", "localhost:1", "--tls-cert", "{ca}"], "--tls-cert and --tls-key go"),
        (["--address", "localhost:1", "--tls-key", "{ca}"], "give both or neither"),
        (["--address", "localhost:1", "--tls-ca", "{missing}"], "cannot read {missing}: No such"),
        (["--address", "localhost:1", "--tls-key", "{folder}"], "cannot read {folder}: Is a dir"),
    ],
)
def test_demo_tls_flags_that_cannot_work_are_refused_before_the_game(
    flags: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = {"ca": tmp_path / "ca.pem", "missing": tmp_path / "no.pem", "folder": tmp_path}
    paths["ca"].write_text("not used")
    with pytest.raises(SystemExit) as exited:
        main(["demo", *(flag.format(**paths) for flag in flags)])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert says.format(**paths) in captured.err and not captured.out
    assert "Traceback" not in captured.err


async def test_run_demo_refuses_credentials_without_an_address() -> None:
    credentials = grpc.ssl_channel_credentials()
    with pytest.raises(ValueError, match="TLS credentials need an address"):
        await run_demo("partnership", None, "s", None, credentials=credentials)


@pytest.mark.parametrize("options", ["{", '{"target": 1' + "0" * 5000 + "}", "[" * 100_000])
def test_demo_options_that_are_not_json_are_one_line_not_a_traceback(
    options: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--variant", "partnership", "--options", options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinochle-referee: --options is not JSON: ")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("options", ["[]", "5", '"x"', "true"])
def test_demo_options_that_are_not_an_object_are_one_line_not_a_traceback(
    options: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON that is not an object reached the client's Struct as a list or a number and ended
    in ``AttributeError: 'list' object has no attribute 'items'``; ``null`` keeps meaning the
    variant's defaults."""
    assert main(["demo", "--variant", "partnership", "--options", options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinochle-referee: --options must be a JSON object")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("options", ['{"target": 1, "target": 2}', '{"a": {"b": 1, "b": 1}}'])
def test_demo_options_naming_a_key_twice_are_refused(
    options: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review of 12-03: the demo took the last of a repeated key, where records and rules
    queries refuse the text (``referee.jsonread``): JSON readers differ on which one counts."""
    assert main(["demo", "--variant", "partnership", "--options", options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinochle-referee: --options: the key ") and "appears twice" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--creator-token", "caf\u00e9"], "creator_token: a token is printable ASCII"),
        (["--seed", "\udcff"], "seed holds a lone surrogate"),
        (["--variant", "\udcff"], "variant holds a lone surrogate"),
        (["--options", '{"target": "\\ud800"}'], "options.target holds a lone surrogate"),
        (["--options", '{"target": 1' + "0" * 30 + "}"], "options.target is 100000000000"),
    ],
)
def test_demo_values_the_client_cannot_send_are_one_line_not_a_traceback(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The client refuses, naming the field, a value no request can carry (a token that is not
    printable ASCII, text that is not Unicode, as a non-UTF-8 argument gives, an integer a
    Struct cannot hold): a ValueError, which ended the demo in a traceback. The demo's seed
    also seeded the bots' random choices before the game was created, and random refused the
    text first, naming nothing."""
    assert main(["demo", "--address", "127.0.0.1:1", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinochle-referee: demo: ") and says in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
