"""Two-handed Pinochle with a stock (RULES.md §2, A.8): the phase handlers ``apply`` calls.

Phase 1 (``STOCK_PLAY``, tricks 1-12) is free play from the hand or the seat's own melded cards;
after each trick the winner's window opens: exchange and show dixes, then at most one meld, and
the draws happen when the winner leads again. Phase 2 (``PLAY``, tricks 13-24) follows the ladder.

Progressive meld needs *physical* card identity, because a card may score again only in another
class or a strictly higher meld of its class, and never twice in one meld type (R4/R5, A.8 item 7).
Cards in a concealed hand have never scored, so they stay plain faces; a card laid on the table
gets a physical id ``pid = face * 2 + copy`` and a bit mask of the meld types it has scored in.
Cards only leave the table by being played (gone) or at the end of phase 1 (no melding after),
so history never has to follow a card back into a hand. The only scored cards that do reach a
hand are 9s of trump (a shown dix, the dealer's turned-up 9, an exchanged 9), counted per seat in
``scored_nines`` for ``dix_scores_when_played``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Final, TypeVar

from referee.engine.actions import Action, Draw, ExchangeDix, Meld, Play, action_type
from referee.engine.errors import IllegalAction
from referee.engine.events import EVERYONE, Event, trick_events
from referee.engine.state import PLAY, HandState, Setup, Trick, add_at, evolve_hand
from referee.rules.cards import NINE, SUIT_NAMES, Card, Suit, format_card, format_cards, make_card
from referee.rules.melds import CLASS_OF, MELD_NAMES, MeldError, one_set, single_sets
from referee.rules.tricks import play_violation, trick_winner

STOCK_PLAY: Final = "stock_play"
T = TypeVar("T")

TYPE_BIT: Final = {name: 1 << index for index, name in enumerate(MELD_NAMES)}
# Rank within a class: a card may score again in its class only in a strictly higher meld.
_RANK: Final = {"marriage": 1, "royal_marriage": 2, "run": 3, "dix": 1}
_SAME_CLASS_AT_OR_ABOVE: Final = {
    name: sum(
        TYPE_BIT[other]
        for other in MELD_NAMES
        if CLASS_OF[other] == CLASS_OF[name] and _RANK.get(other, 1) >= _RANK.get(name, 1)
    )
    for name in MELD_NAMES
}

TableCard = tuple[int, int]  # (pid, mask of meld types it has scored in)
Pending = tuple[str, tuple[int, ...]]  # (meld name, pids)

Events = list[Event]


def may_score_again(mask: int, name: str) -> bool:
    """R4/R5: never twice in one type; in its own class only in a strictly higher meld."""
    return not mask & _SAME_CLASS_AT_OR_ABOVE[name]


def start(setup: Setup, hand: HandState) -> tuple[HandState, Events]:
    """Lay out the stock and the turned card; the dealer scores a turned-up 9 at once."""
    deal = hand.deal
    assert deal.turn_up is not None
    trump = deal.turn_up // 6
    dealer = hand.dealer
    meld_points = [0, 0]
    events: Events = [
        Event(
            "trump_turned",
            EVERYONE,
            {"card": format_card(deal.turn_up), "suit": format_card(deal.turn_up)[-1]},
        )
    ]
    if deal.turn_up % 6 == NINE:
        points = setup.meld_table.value("dix", 1)
        meld_points[dealer] += points
        events.append(
            Event(
                "dix_turned",
                EVERYONE,
                {"seat": dealer, "card": format_card(deal.turn_up), "points": points},
            )
        )
    leader = 1 - dealer
    return (
        evolve_hand(
            hand,
            phase=STOCK_PLAY,
            turn=leader,
            trick_leader=leader,
            trump=trump,
            turn_up=deal.turn_up,
            stock=deal.stock,
            table=((), ()),
            pending=((), ()),
            meld_points=tuple(meld_points),
            scored_nines=(0, 0),
        ),
        events,
    )


def act(setup: Setup, hand: HandState, seat: int, action: Action) -> tuple[HandState, Events]:
    """Dispatch a two-handed action. Meld and dix actions never get NOT_YOUR_TURN (A.8 item 3)."""
    if isinstance(action, Meld):
        return _meld(setup, hand, seat, action)
    if isinstance(action, ExchangeDix):
        return _exchange_dix(setup, hand, seat)
    # Before any WRONG_PHASE, a draw's included: A.5 answers with the first code that applies,
    # so A.9 item 7's WRONG_PHASE is what the seat to act gets (a README ruling).
    if seat != hand.turn:
        raise IllegalAction(
            "NOT_YOUR_TURN",
            f"seat {seat} cannot {action_type(action)} now: seat {hand.turn} is to act",
        )
    if isinstance(action, Play):
        return _play(setup, hand, seat, action)
    if isinstance(action, Draw):
        return _draw_choice(setup, hand, seat, action)
    raise IllegalAction(
        "WRONG_PHASE", f"seat {seat}: {action_type(action)} is not part of two-handed play"
    )


# --------------------------------------------------------------------------------------------
# The winner's window: dix exchange, dix shows, one meld; the draws


def _window_refusal(hand: HandState, seat: int) -> str | None:
    if hand.phase != STOCK_PLAY:
        return "the stock is exhausted" if hand.phase == PLAY else "not now"
    if hand.window_seat is None:
        return "only the winner of the last trick, before leading again, may meld"
    if hand.window_seat != seat:
        return f"seat {hand.window_seat} won the last trick"
    return None


def dix_exchange_refusal(hand: HandState, seat: int) -> str | None:
    """Why ``seat`` may not exchange the dix now (A.8 items 2, 8), or None."""
    why = _window_refusal(hand, seat)
    if why is not None:
        return why
    if hand.window_melded:
        return "the turn's meld has been made"
    if hand.dix_exchanged_by is not None:
        return "the dix has already been exchanged this hand"
    assert hand.trump is not None and hand.turn_up is not None
    nine = make_card(hand.trump, NINE)
    if hand.turn_up == nine:
        return "the turned card is a 9 of trumps"
    if nine not in hand.hands[seat]:
        return "no 9 of trumps in the concealed hand"
    return None


def _exchange_dix(setup: Setup, hand: HandState, seat: int) -> tuple[HandState, Events]:
    why = dix_exchange_refusal(hand, seat)
    if why is not None:
        raise IllegalAction(
            "DIX_EXCHANGE_NOT_ALLOWED", f"seat {seat} cannot exchange the dix: {why}"
        )
    assert hand.trump is not None and hand.turn_up is not None
    nine = make_card(hand.trump, NINE)
    held = list(hand.hands[seat])
    held.remove(nine)
    held.append(hand.turn_up)
    points = setup.meld_table.value("dix", 1)
    event = Event(
        "dix_exchanged",
        EVERYONE,
        {
            "seat": seat,
            "took": format_card(hand.turn_up),
            "gave": format_card(nine),
            "points": points,
        },
    )
    return (
        evolve_hand(
            hand,
            hands=_set(hand.hands, seat, tuple(sorted(held))),
            turn_up=nine,
            dix_exchanged_by=seat,
            meld_points=add_at(hand.meld_points, seat, points),
        ),
        [event],
    )


def _choices(
    held: Sequence[Card], table: Sequence[TableCard], faces: Sequence[Card]
) -> list[tuple[int, ...]]:
    """Every way to take the named faces, hand first: -1 is a card from the hand, else a pid.

    A.8 item 5: a meld takes each named card from the concealed hand first and is legal if some
    choice of copies makes it legal. The faces of one set are distinct, so each is taken once.
    """
    options: list[list[int]] = []
    for face in faces:
        here = [-1] if face in held else []
        here += [pid for pid, _ in table if pid >> 1 == face]
        options.append(here)
    return sorted(product(*options), key=lambda choice: sum(1 for c in choice if c >= 0))


def _check_meld(
    setup: Setup, hand: HandState, seat: int, action: Meld
) -> tuple[str, tuple[Card, ...], tuple[int, ...], bool]:
    """Validate a two-handed meld; return (name, faces, chosen copies, is_claim) or raise."""
    if action.melds is not None:
        raise IllegalAction(
            "MALFORMED_ACTION", "a two-handed meld names one combination: name and cards", "melds"
        )
    name = action.name
    if name is None:
        raise IllegalAction("MALFORMED_ACTION", "a two-handed meld needs a name", "name")
    # A.5: the first code that applies, in its order. CARD_NOT_IN_HAND comes before
    # MELD_NOT_ALLOWED there; A.8 item 3 only says a meld out of its window gets
    # MELD_NOT_ALLOWED instead of NOT_YOUR_TURN or WRONG_PHASE, not that it moves ahead.
    held = hand.hands[seat]
    table = hand.table[seat]
    faces = action.cards
    available = list(held) if name == "dix" else list(held) + [pid >> 1 for pid, _ in table]
    for face in faces:
        if face not in available:
            where = "in the concealed hand" if name == "dix" else "in hand or on the table"
            raise IllegalAction(
                "CARD_NOT_IN_HAND",
                f"seat {seat} cannot meld {format_card(face)}: not {where}",
                "cards",
            )
        available.remove(face)
    why = _window_refusal(hand, seat)
    if why is None and hand.window_melded:
        why = "one meld per trick won, and the turn's meld has been made"
    if why is not None:
        raise IllegalAction("MELD_NOT_ALLOWED", f"seat {seat} cannot meld: {why}")
    trump = hand.trump
    assert trump is not None
    try:
        ordered = one_set(name, faces, trump)
    except MeldError as error:
        raise IllegalAction("INVALID_MELD", f"seat {seat}: {error}", error.field) from None
    if name == "dix":
        chosen: tuple[int, ...] = (-1,)
        claim = False
    else:
        chosen, claim = _pick_copies(setup, hand, seat, name, ordered)
    value = setup.meld_table.value(name, 1)
    if action.points is not None and action.points != value:
        raise IllegalAction(
            "MELD_MISCOUNT",
            f"seat {seat} claimed {action.points} for a {name} worth {value}",
            "points",
        )
    return name, ordered, chosen, claim


def _pick_copies(
    setup: Setup, hand: HandState, seat: int, name: str, faces: tuple[Card, ...]
) -> tuple[tuple[int, ...], bool]:
    table = hand.table[seat]
    masks = dict(table)
    pending = hand.pending[seat]
    worst = "MELD_NEEDS_NEW_CARD"
    for choice in _choices(hand.hands[seat], table, faces):
        pids = tuple(sorted(c for c in choice if c >= 0))
        claim = len(pids) == len(choice) and (name, pids) in pending
        if len(pids) == len(choice) and not claim and setup.rules.new_card_required:
            continue
        if all(may_score_again(masks[pid], name) for pid in pids):
            return choice, claim
        worst = "MELD_CARD_REUSED"
    if worst == "MELD_NEEDS_NEW_CARD":
        message = f"seat {seat}: a {name} needs at least one card from the concealed hand"
    else:
        message = f"seat {seat}: a card of this {name} has already scored in that class or type"
    raise IllegalAction(worst, message, "cards")


def _free_pid(used: set[int], face: Card) -> int:
    """A physical id for a card laid on the table: the copy of ``face`` not already there."""
    return face * 2 if face * 2 not in used else face * 2 + 1


def _meld(setup: Setup, hand: HandState, seat: int, action: Meld) -> tuple[HandState, Events]:
    name, faces, chosen, claim = _check_meld(setup, hand, seat, action)
    bit = TYPE_BIT[name]
    held = list(hand.hands[seat])
    table = list(hand.table[seat])
    laid: list[int] = []
    used_pids: list[int] = []
    on_tables = {pid for side in hand.table for pid, _ in side}
    for face, pick in zip(faces, chosen, strict=True):
        if pick < 0:
            held.remove(face)
            pid = _free_pid(on_tables, face)
            on_tables.add(pid)
            table.append((pid, bit))
            laid.append(pid)
            used_pids.append(pid)
        else:
            table = [(p, m | bit) if p == pick else (p, m) for p, m in table]
            used_pids.append(pick)
    value = setup.meld_table.value(name, 1)
    pending = list(hand.pending[seat])
    if claim:
        pending.remove((name, tuple(sorted(used_pids))))
    elif name != "dix" and setup.rules.deferred_meld_scoring:
        pending += _new_pending(hand.trump, table, laid, (name, tuple(sorted(used_pids))), pending)
    event = Event(
        "meld_scored",
        EVERYONE,
        {
            "seat": seat,
            "name": name,
            "cards": format_cards(faces),
            "from_table": format_cards(sorted(pid >> 1 for pid in used_pids if pid not in laid)),
            "points": value,
            "claimed_pending": claim,
        },
    )
    return (
        evolve_hand(
            hand,
            hands=_set(hand.hands, seat, tuple(held)),
            table=_set(hand.table, seat, tuple(table)),
            pending=_set(hand.pending, seat, tuple(pending)),
            meld_points=add_at(hand.meld_points, seat, value),
            window_melded=hand.window_melded or name != "dix",
            scored_melds=(*hand.scored_melds, (seat, name, faces, value)),
        ),
        [event],
    )


def _new_pending(
    trump: Suit | None,
    table: Sequence[TableCard],
    laid: Sequence[int],
    scored: Pending,
    known: Sequence[Pending],
) -> list[Pending]:
    """A.8 item 6: other combinations the laid-down cards form with the table that could score."""
    assert trump is not None
    masks = dict(table)
    found: list[Pending] = []
    for name, faces in single_sets(trump):
        if name == "dix":
            continue
        options = [[pid for pid, _ in table if pid >> 1 == face] for face in faces]
        for pids in product(*options):
            key = (name, tuple(sorted(pids)))
            if (
                key != scored
                and key not in known
                and key not in found
                and any(pid in laid for pid in pids)
                and all(may_score_again(masks[pid], name) for pid in pids)
            ):
                found.append(key)
    return found


def _draw_choice(
    setup: Setup, hand: HandState, seat: int, action: Draw
) -> tuple[HandState, Events]:
    if setup.rules.last_draw != "winner_chooses":
        raise IllegalAction(
            "WRONG_PHASE", f"seat {seat}: draw is only for last_draw winner_chooses"
        )
    if hand.phase != STOCK_PLAY or hand.window_seat != seat or len(hand.stock) != 1:
        raise IllegalAction(
            "WRONG_PHASE", f"seat {seat}: draw comes only after winning trick 12, before leading"
        )
    if hand.draw_choice is not None:
        raise IllegalAction("WRONG_PHASE", f"seat {seat} has already chosen the last draw")
    event = Event("draw_chosen", EVERYONE, {"seat": seat, "turn_up": action.turn_up})
    return evolve_hand(hand, draw_choice=action.turn_up), [event]


def _draw(setup: Setup, hand: HandState) -> tuple[HandState, Events]:
    """The draws at the winner's next lead: winner first; after trick 12 the last two cards."""
    winner = hand.window_seat
    assert winner is not None and hand.trump is not None
    loser = 1 - winner
    hands = list(hand.hands)
    events: Events = []
    stock = hand.stock
    scored_nines = list(hand.scored_nines)
    if len(stock) >= 2:
        hands[winner] = tuple(sorted((*hands[winner], stock[0])))
        hands[loser] = tuple(sorted((*hands[loser], stock[1])))
        events += [
            Event("card_drawn", winner, {"card": format_card(stock[0])}),
            Event("card_drawn", loser, {"card": format_card(stock[1])}),
            Event("cards_drawn", EVERYONE, {"first": winner, "stock": len(stock) - 2}),
        ]
        return (
            evolve_hand(
                hand, hands=tuple(hands), stock=stock[2:], window_seat=None, window_melded=False
            ),
            events,
        )
    assert hand.turn_up is not None
    face_down = stock[0]
    turn_up = hand.turn_up
    takes_turn_up = hand.draw_choice is True
    gets_turn_up = winner if takes_turn_up else loser
    gets_face_down = loser if takes_turn_up else winner
    hands[gets_turn_up] = (*hands[gets_turn_up], turn_up)
    hands[gets_face_down] = (*hands[gets_face_down], face_down)
    nine = make_card(hand.trump, NINE)
    if turn_up == nine:  # the dealer's turned-up 9 or an exchanged 9: it has scored
        scored_nines[gets_turn_up] += 1
    events += [
        Event("card_drawn", gets_face_down, {"card": format_card(face_down)}),
        Event("turn_up_taken", EVERYONE, {"seat": gets_turn_up, "card": format_card(turn_up)}),
    ]
    # End of phase 1: melded cards go back into the hands; pending melds lapse.
    for side in (0, 1):
        back = [pid >> 1 for pid, _ in hand.table[side]]
        scored_nines[side] += back.count(nine)  # shown dixes have scored
        hands[side] = tuple(sorted((*hands[side], *back)))
    events.append(Event("stock_exhausted", EVERYONE, {"hand_sizes": [len(h) for h in hands]}))
    return (
        evolve_hand(
            hand,
            phase=PLAY,
            hands=tuple(hands),
            stock=(),
            turn_up=None,
            table=((), ()),
            pending=((), ()),
            scored_nines=tuple(scored_nines),
            window_seat=None,
            window_melded=False,
            draw_choice=None,
        ),
        events,
    )


# --------------------------------------------------------------------------------------------
# Play


def _take_from_table(hand: HandState, seat: int, face: Card) -> int | None:
    """The pid of an own melded copy of ``face``, preferring one no pending meld needs."""
    pids = [pid for pid, _ in hand.table[seat] if pid >> 1 == face]
    if not pids:
        return None
    needed = {pid for _, group in hand.pending[seat] for pid in group}
    free = [pid for pid in pids if pid not in needed]
    return (free or pids)[0]


def _play(setup: Setup, hand: HandState, seat: int, action: Play) -> tuple[HandState, Events]:
    events: Events = []
    if hand.window_seat is not None:
        hand, events = _draw(setup, hand)
    card = action.card
    held = hand.hands[seat]
    trump = hand.trump
    assert trump is not None
    nine = make_card(trump, NINE)
    table = hand.table[seat] if hand.table else ()
    pending = hand.pending[seat] if hand.pending else ()
    scored_nines = hand.scored_nines
    dix_points = 0
    if card in held:
        if hand.phase == PLAY and hand.trick:
            code = play_violation(card, held, hand.trick, trump, setup.play_rules)
            if code is not None:
                led = SUIT_NAMES[hand.trick[0] // 6]
                raise IllegalAction(
                    code,
                    f"seat {seat} played {format_card(card)} on a {led} lead: {code.lower()}",
                    "card",
                )
        index = held.index(card)
        held = held[:index] + held[index + 1 :]
        if card == nine:
            fresh = held.count(nine) + 1 - scored_nines[seat]
            if fresh > 0:
                if setup.rules.dix_scores_when_played:
                    dix_points = setup.meld_table.value("dix", 1)
            else:
                scored_nines = add_at(scored_nines, seat, -1)
    else:
        pid = _take_from_table(hand, seat, card) if hand.phase == STOCK_PLAY else None
        if pid is None:
            raise IllegalAction(
                "CARD_NOT_IN_HAND",
                f"seat {seat} cannot play {format_card(card)}: not in hand or on its table",
                "card",
            )
        table = tuple(entry for entry in table if entry[0] != pid)
        pending = tuple(p for p in pending if pid not in p[1])
    events.append(Event("card_played", EVERYONE, {"seat": seat, "card": format_card(card)}))
    meld_points = hand.meld_points
    if dix_points:
        meld_points = add_at(meld_points, seat, dix_points)
        events.append(Event("dix_played", EVERYONE, {"seat": seat, "points": dix_points}))
    hand = evolve_hand(
        hand,
        hands=_set(hand.hands, seat, held),
        table=_set(hand.table, seat, table) if hand.table else hand.table,
        pending=_set(hand.pending, seat, pending) if hand.pending else hand.pending,
        scored_nines=scored_nines,
        meld_points=meld_points,
    )
    trick = (*hand.trick, card)
    if len(trick) < 2:
        return evolve_hand(hand, trick=trick, turn=1 - seat), events
    winner = (hand.trick_leader + trick_winner(trick, trump)) % 2
    last = not hand.hands[0] and not hand.hands[1] and hand.phase == PLAY
    points, closing = trick_events(setup.counting, trick, winner, last)
    events += closing
    done = Trick(hand.trick_leader, trick, winner, points)
    return (
        evolve_hand(
            hand,
            phase="done" if last else hand.phase,
            trick=(),
            tricks=(*hand.tricks, done),
            trick_leader=winner,
            turn=winner,
            side_points=add_at(hand.side_points, winner, points),
            side_tricks=add_at(hand.side_tricks, winner, 1),
            window_seat=winner if hand.phase == STOCK_PLAY else None,
            window_melded=False,
        ),
        events,
    )


# --------------------------------------------------------------------------------------------
# Legal actions (the checks above, read as an enumeration)


def legal_actions(setup: Setup, hand: HandState, seat: int) -> list[dict[str, object]]:
    result: list[dict[str, object]] = []
    if hand.window_seat == seat and hand.phase == STOCK_PLAY:
        if dix_exchange_refusal(hand, seat) is None:
            result.append({"type": "exchange_dix"})
        assert hand.trump is not None
        for name, faces in single_sets(hand.trump):
            try:
                _check_meld(setup, hand, seat, Meld(cards=faces, name=name))
            except IllegalAction:
                continue
            # A.10 item 2: a concrete action; ``points`` is the value a claim must state (A.8 1).
            value = setup.meld_table.value(name, 1)
            entry = {"type": "meld", "name": name, "cards": format_cards(faces), "points": value}
            result.append(entry)
        if (
            setup.rules.last_draw == "winner_chooses"
            and len(hand.stock) == 1
            and hand.draw_choice is None
        ):
            result += [{"type": "draw", "turn_up": True}, {"type": "draw", "turn_up": False}]
    if seat != hand.turn:
        return result
    if hand.window_seat is not None:
        # The lead comes after the draws (A.8 item 2), so the card about to be drawn may be led
        # too; which card that is must stay hidden until the draw, so it is one descriptor
        # entry instead of a concrete card (listing it would show the stock's top card).
        return [
            *result,
            *_play_entries(setup, hand, seat),
            {"type": "play", "drawn_card": True},
        ]
    return result + _play_entries(setup, hand, seat)


def _play_entries(setup: Setup, hand: HandState, seat: int) -> list[dict[str, object]]:
    held = hand.hands[seat]
    trump = hand.trump
    assert trump is not None
    if hand.phase == STOCK_PLAY:
        cards = set(held) | {pid >> 1 for pid, _ in hand.table[seat]}
    elif hand.trick:
        cards = {
            c
            for c in set(held)
            if play_violation(c, held, hand.trick, trump, setup.play_rules) is None
        }
    else:
        cards = set(held)
    return [{"type": "play", "card": format_card(c)} for c in sorted(cards)]


def _set(values: tuple[T, ...], index: int, value: T) -> tuple[T, ...]:
    return (*values[:index], value, *values[index + 1 :])
