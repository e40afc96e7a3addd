"""The one validating entry point: ``apply(state, seat, action) -> (state, events)``.

Every phase handler is written as *checks, then effects*. The checks are small predicates that
``legal_actions`` reads too (the bid window, the trump suits, the play ladder, the meld turn), so
the enumeration of legal actions is the validator read another way, never a second copy of the
rules. A refused action raises ``IllegalAction`` with the first A.5 code that applies and leaves
the old state untouched (states are immutable).

Deals are chance events: ``start_hand(state, deal)`` begins each hand with a deal handed in by the
caller (explicit, seeded or secure), so the engine itself holds no randomness and no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from referee.engine import two_handed
from referee.engine.actions import (
    Action,
    Bid,
    BidOrRedeal,
    Concede,
    DeclareTrump,
    Discard,
    ExchangeDix,
    Meld,
    Pass,
    PassCards,
    Play,
    action_type,
    decode_action,
    encode_action,
)
from referee.engine.errors import DealError, IllegalAction
from referee.engine.events import EVERYONE, SEALED, Event, trick_events
from referee.engine.state import (
    AUCTION,
    BURY,
    DECLARER_PASS,
    KITTY_DISCARD,
    MELD,
    PARTNER_PASS,
    PLAY,
    TRUMP,
    Call,
    GameState,
    HandState,
    MeldRecord,
    Setup,
    Trick,
    add_at,
    evolve_game,
    evolve_hand,
)
from referee.rules.cards import (
    KING,
    NINE,
    QUEEN,
    SUIT_NAMES,
    SUITS,
    Card,
    Suit,
    canonical_deck,
    counts_of,
    format_card,
    format_cards,
    format_suit,
    make_card,
    remove_cards,
)
from referee.rules.dealing import Deal
from referee.rules.melds import (
    CLASS_OF,
    MeldError,
    MeldResult,
    best_meld,
    build_meld_table,
    score_declared,
)
from referee.rules.options import RuleSet
from referee.rules.scoring import (
    GameEndRule,
    HandScore,
    SaveRule,
    game_winner,
    hopeless_contract,
    no_contract,
    score_hand,
)
from referee.rules.tricks import Counting, PlayRules, legal_plays, play_violation, trick_winner

Events = list[Event]


# --------------------------------------------------------------------------------------------
# Creating a game and starting hands


def make_setup(rules: RuleSet) -> Setup:
    """Derive the per-game rule objects once; every later call reads them as plain fields."""
    counting = Counting.of(rules.count_scheme, rules.last_trick_bonus)
    return Setup(
        rules=rules,
        sides=2 if rules.partnerships else rules.players,
        play_rules=PlayRules(
            head_rule=rules.head_rule,
            head_when_trumped=rules.head_when_trumped,
            head_over_partner=rules.head_over_partner,
            must_trump_when_void=rules.must_trump_when_void,
            must_overtrump=rules.must_overtrump,
            must_trump_even_if_cannot_overtrump=rules.must_trump_even_if_cannot_overtrump,
        ),
        counting=counting,
        total_in_play=counting.total_in_play(rules.deck),
        save_rule=SaveRule(
            save_meld=rules.save_meld,
            applies_to=rules.save_applies_to,
            dix_exempt=rules.dix_exempt_from_save,
            min_meld_to_record=rules.min_meld_to_record,
        ),
        end_rule=GameEndRule(
            target=rules.target, both_reach=rules.both_reach, margin_win=rules.margin_win
        ),
        meld_table=build_meld_table(
            rules.meld_values,
            per_set=rules.variant == "two-handed",
            run_counts_its_royal_marriage=rules.run_counts_its_royal_marriage,
            run_shares_marriage_cards=rules.run_shares_marriage_cards,
        ),
        two_handed=rules.variant == "two-handed",
    )


def new_game(rules: RuleSet, dealer: int = 0) -> GameState:
    """A game waiting for its first deal. ``dealer`` is the first hand's dealer (A.3)."""
    setup = make_setup(rules)
    if not 0 <= dealer < rules.players:
        raise ValueError(f"dealer must be a seat from 0 to {rules.players - 1}, got {dealer}")
    return GameState(
        setup=setup,
        version=0,
        first_dealer=dealer,
        scores=(0,) * setup.sides,
        target=rules.target,
        hands_completed=0,
        next_dealer=dealer,
        hand=None,
    )


def check_deal(setup: Setup, deal: Deal, dealer: int) -> None:
    """Raise ``DealError`` unless ``deal`` is a whole, correct deck dealt as the variant deals."""
    rules = setup.rules
    if len(deal.hands) != rules.players:
        raise DealError(f"deal.hands must have {rules.players} hands, got {len(deal.hands)}")
    for seat, hand in enumerate(deal.hands):
        if len(hand) != rules.hand_size:
            raise DealError(
                f"deal.hands[{seat}] must have {rules.hand_size} cards, got {len(hand)}"
            )
    if len(deal.widow) != rules.widow_size:
        raise DealError(f"deal.widow must have {rules.widow_size} cards, got {len(deal.widow)}")
    stock_size = rules.deck - rules.players * rules.hand_size - 1 if setup.two_handed else 0
    if len(deal.stock) != stock_size:
        raise DealError(f"deal.stock must have {stock_size} cards, got {len(deal.stock)}")
    if setup.two_handed:
        if deal.turn_up is None:
            raise DealError("deal.turn_up must be the card turned for trump")
    elif rules.variant == "partnership-no-bid":
        if deal.turn_up is None or deal.turn_up not in deal.hands[dealer]:
            raise DealError("deal.turn_up must be one of the dealer's cards (the last one dealt)")
    elif deal.turn_up is not None:
        raise DealError(f"deal.turn_up must be null in {rules.variant}")
    dealt = [c for hand in deal.hands for c in hand] + list(deal.widow) + list(deal.stock)
    if setup.two_handed and deal.turn_up is not None:
        dealt.append(deal.turn_up)
    dealt.sort()
    if tuple(dealt) != canonical_deck(rules.deck):
        raise DealError(f"the deal is not a whole {rules.deck}-card deck")


def start_hand(state: GameState, deal: Deal) -> tuple[GameState, Events]:
    """Begin the next hand with ``deal`` (a chance event, recorded beside the actions)."""
    if state.over:
        raise DealError("the game is over")
    if state.hand is not None:
        raise DealError("the current hand is not finished")
    setup = state.setup
    rules = setup.rules
    dealer = state.next_dealer
    check_deal(setup, deal, dealer)
    players = rules.players
    number = state.hands_completed
    hand = HandState(
        number=number,
        dealer=dealer,
        deal=deal,
        phase=AUCTION,
        turn=(dealer + 1) % players,
        hands=tuple(tuple(sorted(h)) for h in deal.hands),
        out=(False,) * players,
        received=((),) * players,
        melds=(None,) * players,
        side_points=(0,) * setup.sides,
        side_tricks=(0,) * setup.sides,
    )
    events: Events = [Event("hand_started", EVERYONE, {"hand": number, "dealer": dealer})]
    for seat in range(players):
        events.append(
            Event("cards_dealt", seat, {"hand": number, "cards": format_cards(hand.hands[seat])})
        )
    events.append(Event("deal", SEALED, {"hand": number, "deal": deal.to_json()}))
    if setup.two_handed:
        hand, more = two_handed.start(setup, hand)
        events += more
    elif not rules.bidding:
        assert deal.turn_up is not None
        hand = evolve_hand(hand, trump=deal.turn_up // 6, turn_up=deal.turn_up)
        events.append(
            Event(
                "trump_turned",
                EVERYONE,
                {"card": format_card(deal.turn_up), "suit": format_suit(deal.turn_up // 6)},
            )
        )
        hand, more = _enter_meld(setup, hand)
        events += more
    return evolve_game(state, hand=hand), events


# --------------------------------------------------------------------------------------------
# The entry point


def check_seat(rules: RuleSet, seat: object) -> int:
    """``seat`` when it is one of the table's seats; anything else is a malformed action,
    before every other code (A.5)."""
    # ``type(...) is int`` first: the usual case without two isinstance calls (bool, a
    # subclass of int, is not a seat).
    if type(seat) is int and 0 <= seat < rules.players:
        return seat
    if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < rules.players:
        raise IllegalAction(
            "MALFORMED_ACTION", f"seat must be a number from 0 to {rules.players - 1}", "seat"
        )
    return int(seat)  # another subclass of int


def check_optional_fields(setup: Setup, seat: int, action: Action) -> None:
    """The MALFORMED_ACTION checks that depend on the variant's options (A.4, A.8 item 1).

    ``apply`` makes them before every other check but the seat's; a caller that refuses an
    action before ``apply`` (the audit, for an action after its hand's end) makes them first."""
    if isinstance(action, Pass) and action.help and not setup.rules.allow_pass_with_help:
        raise IllegalAction(
            "MALFORMED_ACTION",
            f"seat {seat}: pass with help is not allowed in this game (allow_pass_with_help)",
            "help",
        )
    if isinstance(action, Meld):
        if setup.two_handed and (action.name is None or action.melds is not None):
            # A.8 item 1: a two-handed meld is {name, cards, points?}.
            raise IllegalAction(
                "MALFORMED_ACTION",
                "a two-handed meld names one combination: name and cards",
                "name",
            )
        if action.name is not None and not setup.two_handed:
            # A.4: `name` is a two-handed meld field; elsewhere it is an extra field, and
            # MALFORMED_ACTION comes before every other code (A.5), turn and phase included.
            raise IllegalAction(
                "MALFORMED_ACTION",
                "a whole-hand meld takes cards (and melds, points), not name",
                "name",
            )


def apply(state: GameState, seat: object, action: Action) -> tuple[GameState, Events]:
    """Validate ``action`` by ``seat`` and return the new state and its events.

    Raises ``IllegalAction`` (the first A.5 code that applies) and changes nothing otherwise.
    The action classes are final, so the checks below compare ``type(action)`` (one lookup)
    instead of calling ``isinstance`` for each class: this runs once per action of every
    game and every audited record.

    ``seat`` is an ``object``: this is where a seat from outside (a record, a caller) is
    checked, and anything but one of the table's seat numbers is MALFORMED_ACTION (A.5). Typed
    ``int``, the compiled core (``setup.py``) would refuse a string with ``TypeError`` before
    that check, and take ``True`` for seat 1.
    """
    setup = state.setup
    rules = setup.rules
    player = check_seat(rules, seat)
    action_class = type(action)
    if action_class is Pass or action_class is Meld:
        check_optional_fields(setup, player, action)
    if state.over:
        raise IllegalAction("GAME_OVER", f"seat {player}: the game is over")
    hand = state.hand
    if hand is None:
        raise IllegalAction("WRONG_PHASE", f"seat {player}: the next hand has not been dealt")
    if setup.two_handed:
        new_hand, events = two_handed.act(setup, hand, player, action)
    elif action_class is Concede:
        new_hand, events = _concede(setup, hand, player)
    else:
        if player != hand.turn:
            raise IllegalAction(
                "NOT_YOUR_TURN",
                f"seat {player} cannot {action_type(action)} now: seat {hand.turn} is to act",
            )
        handler = _HANDLERS.get((hand.phase, action_class))
        if handler is None or (action_class is ExchangeDix and rules.bidding):
            raise IllegalAction(
                "WRONG_PHASE",
                f"seat {player}: {action_type(action)} is not allowed in the {hand.phase} phase",
            )
        new_hand, events = handler(setup, hand, player, action)
    return _after_action(state, new_hand, events)


def _after_action(state: GameState, hand: HandState, events: Events) -> tuple[GameState, Events]:
    """Close the hand when the action finished it; otherwise just store the new hand."""
    version = state.version + 1
    if hand.phase != "done":
        return evolve_game(state, version=version, hand=hand), events
    setup = state.setup
    summary, score = _hand_summary(setup, hand)
    scores = tuple(a + b for a, b in zip(state.scores, score.delta, strict=True))
    declaring_side = None if hand.declarer is None else setup.side_of(hand.declarer)
    winner, target = game_winner(setup.end_rule, scores, declaring_side, state.target)
    summary["scores"] = list(scores)
    events.append(Event("hand_result", EVERYONE, summary))
    events.append(
        Event("deal_revealed", EVERYONE, {"hand": hand.number, "deal": hand.deal.to_json()})
    )
    if winner is not None:
        events.append(Event("game_over", EVERYONE, {"winner": winner, "scores": list(scores)}))
    return (
        evolve_game(
            state,
            version=version,
            scores=scores,
            target=target,
            hands_completed=state.hands_completed + 1,
            next_dealer=(hand.dealer + 1) % setup.rules.players,
            hand=None,
            winner=winner,
            over=winner is not None,
        ),
        events,
    )


# --------------------------------------------------------------------------------------------
# Auction


def bid_window(setup: Setup, hand: HandState) -> tuple[int, int, int | None]:
    """(lowest legal bid, step, highest legal bid or None) for the next bid (A.2, A.7 item 3).

    The highest is itself a legal bid, as A.10 item 2's ``max`` reads: with a ``max_raise``
    that is not a multiple of the step (15 by 10s), the largest raise is the last whole step
    (10), not the bound (a bid entry saying 265 when 260 is the highest bid would mislead a
    client; the set of bids it denotes is the same). Below ``lowest`` no bid is legal."""
    rules = setup.rules
    if hand.high_bid is None:
        step = rules.step_at(rules.min_bid)
        base = rules.min_bid - step
    else:
        step = rules.step_at(hand.high_bid)
        base = hand.high_bid
    highest = None if rules.max_raise is None else base + rules.max_raise // step * step
    return base + step, step, highest


def dealer_must_bid(setup: Setup, hand: HandState, seat: int) -> bool:
    """A stuck dealer: nobody has bid or called bid-or-redeal and everyone else has passed."""
    return (
        setup.rules.all_pass == "dealer_stuck"
        and seat == hand.dealer
        and hand.high_bid is None
        and not any(call.kind == "bid_or_redeal" for call in hand.calls)
    )


def bid_or_redeal_allowed(setup: Setup, hand: HandState) -> bool:
    return setup.rules.allow_bid_or_redeal and hand.high_bid is None


def _bid(setup: Setup, hand: HandState, seat: int, action: Action) -> tuple[HandState, Events]:
    assert isinstance(action, Bid)
    lowest, step, highest = bid_window(setup, hand)
    amount = action.amount
    rules = setup.rules
    if amount < rules.min_bid or (hand.high_bid is not None and amount <= hand.high_bid):
        standing = "" if hand.high_bid is None else f" and above the standing bid {hand.high_bid}"
        raise IllegalAction(
            "BID_TOO_LOW",
            f"seat {seat} bid {amount}: a bid must be at least {rules.min_bid}{standing}",
            "amount",
        )
    if (amount - lowest) % step or (highest is not None and amount > highest):
        limit = "" if highest is None else f", at most {highest}"
        raise IllegalAction(
            "BID_BAD_RAISE",
            f"seat {seat} bid {amount}: bids go up in steps of {step} from {lowest}{limit}",
            "amount",
        )
    call = Call(seat, "bid", amount)
    hand = evolve_hand(hand, calls=(*hand.calls, call), high_bid=amount, high_bidder=seat)
    return _next_in_auction(setup, hand, [_call_event(call)])


def _pass(setup: Setup, hand: HandState, seat: int, action: Action) -> tuple[HandState, Events]:
    assert isinstance(action, Pass)
    if dealer_must_bid(setup, hand, seat):
        raise IllegalAction(
            "DEALER_MUST_BID", f"seat {seat}: everyone else passed, so the dealer must bid"
        )
    call = Call(seat, "pass", help=action.help)
    out = tuple(True if s == seat else o for s, o in enumerate(hand.out))
    hand = evolve_hand(hand, calls=(*hand.calls, call), out=out)
    return _next_in_auction(setup, hand, [_call_event(call)])


def _bid_or_redeal(
    setup: Setup, hand: HandState, seat: int, action: Action
) -> tuple[HandState, Events]:
    if not bid_or_redeal_allowed(setup, hand):
        why = (
            "a numeric bid has been made"
            if setup.rules.allow_bid_or_redeal
            else "this game does not allow it (allow_bid_or_redeal)"
        )
        raise IllegalAction(
            "BID_OR_REDEAL_NOT_ALLOWED", f"seat {seat}: bid-or-redeal refused: {why}"
        )
    call = Call(seat, "bid_or_redeal")
    hand = evolve_hand(hand, calls=(*hand.calls, call))
    return _next_in_auction(setup, hand, [_call_event(call)])


def _call_event(call: Call) -> Event:
    data: dict[str, object] = {"seat": call.seat, "type": call.kind}
    if call.amount is not None:
        data["amount"] = call.amount
    if call.help:
        data["help"] = True
    return Event("call", EVERYONE, data)


def _next_in_auction(setup: Setup, hand: HandState, events: Events) -> tuple[HandState, Events]:
    players = setup.rules.players
    if hand.high_bid is None:
        if len(hand.calls) == players:  # a whole round of pass / bid-or-redeal calls: redeal
            events.append(Event("redeal", EVERYONE, {"hand": hand.number}))
            return evolve_hand(hand, phase="done"), events
    elif hand.out.count(False) == 1:
        declarer = hand.out.index(False)
        return _contract(setup, hand, declarer, events)
    turn = (hand.turn + 1) % players
    while hand.out[turn]:
        turn = (turn + 1) % players
    return evolve_hand(hand, turn=turn), events


def _contract(
    setup: Setup, hand: HandState, declarer: int, events: Events
) -> tuple[HandState, Events]:
    assert hand.high_bid is not None
    events.append(Event("contract", EVERYONE, {"declarer": declarer, "bid": hand.high_bid}))
    hand = evolve_hand(hand, phase=TRUMP, turn=declarer, declarer=declarer, bid=hand.high_bid)
    widow = hand.deal.widow
    if widow:
        hands = list(hand.hands)
        hands[declarer] = tuple(sorted(hands[declarer] + widow))
        hand = evolve_hand(hand, hands=tuple(hands), widow_taken=True)
        if setup.rules.variant == "cutthroat":  # the widow is shown to all (A.10 item 3)
            events.append(
                Event("widow_taken", EVERYONE, {"seat": declarer, "cards": format_cards(widow)})
            )
        else:  # a kitty is seen by the declarer only
            events.append(Event("kitty_taken", EVERYONE, {"seat": declarer, "count": len(widow)}))
            events.append(Event("kitty_cards", declarer, {"cards": format_cards(widow)}))
    return hand, events


# --------------------------------------------------------------------------------------------
# Trump, exchange, discard


def has_marriage(hand_cards: Sequence[Card], suit: Suit) -> bool:
    return make_card(suit, KING) in hand_cards and make_card(suit, QUEEN) in hand_cards


def trump_suits(setup: Setup, hand: HandState) -> tuple[Suit, ...]:
    """The suits the declarer may name (all, or those with a marriage, A.7 item 5)."""
    if not setup.rules.trump_requires_marriage:
        return SUITS
    assert hand.declarer is not None
    held = hand.hands[hand.declarer]
    return tuple(s for s in SUITS if has_marriage(held, s))


def _declare_trump(
    setup: Setup, hand: HandState, seat: int, action: Action
) -> tuple[HandState, Events]:
    assert isinstance(action, DeclareTrump)
    if action.suit not in trump_suits(setup, hand):
        raise IllegalAction(
            "TRUMP_NEEDS_MARRIAGE",
            f"seat {seat} cannot name {format_suit(action.suit)} trump without its king and queen",
            "suit",
        )
    events: Events = [
        Event("trump_declared", EVERYONE, {"seat": seat, "suit": format_suit(action.suit)})
    ]
    hand = evolve_hand(hand, trump=action.suit)
    rules = setup.rules
    if rules.exchange_mode == "partner" and rules.exchange_count > 0:
        return evolve_hand(hand, phase=PARTNER_PASS, turn=(seat + 2) % 4), events
    if rules.exchange_mode == "kitty":
        return evolve_hand(hand, phase=KITTY_DISCARD), events
    hand, more = _enter_meld(setup, hand)
    return hand, events + more


def _take_cards(
    seat: int, held: tuple[Card, ...], cards: Sequence[Card], what: str
) -> tuple[Card, ...]:
    remaining = remove_cards(held, cards)
    if remaining is None:
        raise IllegalAction(
            "CARD_NOT_IN_HAND",
            f"seat {seat} cannot {what} {' '.join(format_cards(cards))}: not all of them are held",
            "cards",
        )
    return remaining


def _check_count(seat: int, cards: Sequence[Card], count: int, what: str) -> None:
    if len(cards) != count:
        raise IllegalAction(
            "WRONG_CARD_COUNT",
            f"seat {seat} must {what} exactly {count} cards, not {len(cards)}",
            "cards",
        )


def _pass_cards(
    setup: Setup, hand: HandState, seat: int, action: Action
) -> tuple[HandState, Events]:
    assert isinstance(action, PassCards)
    count = setup.rules.exchange_count
    remaining = _take_cards(seat, hand.hands[seat], action.cards, "pass")
    _check_count(seat, action.cards, count, "pass")
    to = (seat + 2) % 4
    hands = list(hand.hands)
    hands[seat] = remaining
    hands[to] = tuple(sorted(hands[to] + action.cards))
    received = list(hand.received)
    received[to] = tuple(sorted(action.cards))
    events: Events = [
        Event("cards_passed", EVERYONE, {"from": seat, "to": to, "count": count}),
        Event("cards_received", to, {"from": seat, "cards": format_cards(sorted(action.cards))}),
    ]
    hand = evolve_hand(
        hand,
        hands=tuple(hands),
        received=tuple(received),
        passed_counts=(*hand.passed_counts, (seat, count)),
    )
    if hand.phase == PARTNER_PASS:
        return evolve_hand(hand, phase=DECLARER_PASS, turn=to), events
    hand, more = _enter_meld(setup, hand)
    return hand, events + more


def _discard(setup: Setup, hand: HandState, seat: int, action: Action) -> tuple[HandState, Events]:
    """Kitty discard after trump, or the cutthroat bury after meld (A.7 item 1)."""
    assert isinstance(action, Discard)
    remaining = _take_cards(seat, hand.hands[seat], action.cards, "discard")
    count = len(hand.deal.widow)
    _check_count(seat, action.cards, count, "discard")
    if remove_cards(discardable_cards(setup, hand, seat), action.cards) is None:
        raise IllegalAction(
            "CANNOT_BURY_MELD",
            f"seat {seat} cannot bury a card of its scored meld",
            "cards",
        )
    hands = list(hand.hands)
    hands[seat] = remaining
    events: Events = [
        Event("cards_discarded", EVERYONE, {"seat": seat, "count": count}),
        Event("discarded_cards", seat, {"cards": format_cards(sorted(action.cards))}),
    ]
    hand = evolve_hand(
        hand,
        hands=tuple(hands),
        discards=tuple(sorted(action.cards)),
        passed_counts=(*hand.passed_counts, (seat, count)),
    )
    if hand.phase == KITTY_DISCARD:
        hand, more = _enter_meld(setup, hand)
        return hand, events + more
    return _enter_play(setup, hand), events


def discardable_cards(setup: Setup, hand: HandState, seat: int) -> tuple[Card, ...]:
    """The cards ``seat`` may discard now: the whole hand, except in the cutthroat bury, where
    the 15 kept must hold every card of the declarer's scored combinations (A.7 item 1).

    Ruling (RULES.md and the seeds are silent): when the scored combinations hold more cards
    than can be kept, so that fewer cards than the bury needs are free, any card may be buried.
    Otherwise a declarer who melded that much would have no legal action at all.
    """
    held = hand.hands[seat]
    record = hand.melds[seat]
    if hand.phase != BURY or setup.rules.may_bury_melded_cards or record is None:
        return held
    free = remove_cards(held, _scored_cards(record))
    assert free is not None  # the scored cards were shown from this hand
    return free if len(free) >= len(hand.deal.widow) else held


def _scored_cards(record: MeldRecord) -> list[Card]:
    """The fewest cards that hold every scored combination of ``record``."""
    return _cards_scoring(record.result, record.shown)


def _cards_scoring(result: MeldResult, held: Sequence[Card]) -> list[Card]:
    """The fewest of ``held`` that hold every combination of ``result``: per face, the most any
    class uses.

    Capped by ``held``: under ``run_shares_marriage_cards`` a royal marriage may borrow a card
    of the run, so one class may list a physical card twice.
    """
    need: dict[str, list[int]] = {}
    for meld in result.melds:
        counts = need.setdefault(CLASS_OF.get(meld.name, meld.name), [0] * 24)
        for c in meld.cards:
            counts[c] += 1
    shown = counts_of(held)
    most = [
        min(shown[c], max((counts[c] for counts in need.values()), default=0)) for c in range(24)
    ]
    return [c for c in range(24) for _ in range(most[c])]


# --------------------------------------------------------------------------------------------
# Meld


def meld_order_start(setup: Setup, hand: HandState) -> int:
    """The declarer melds first; with no bidding, the dealer's left (A.4)."""
    if hand.declarer is not None:
        return hand.declarer
    return (hand.dealer + 1) % setup.rules.players


def _enter_meld(setup: Setup, hand: HandState) -> tuple[HandState, Events]:
    first = meld_order_start(setup, hand)
    hand = evolve_hand(hand, phase=MELD, turn=first)
    if setup.rules.meld_declaration != "auto":
        return hand, []
    events: Events = []
    for step in range(setup.rules.players):
        seat = (first + step) % setup.rules.players
        held = hand.hands[seat]
        result = best_meld(held, _trump(hand), setup.meld_table)
        # A.10 item 3: a meld is shown, the rest of the hand stays concealed. An automatic meld
        # shows just the cards of what it scored (nothing when it scored nothing).
        shown = tuple(_cards_scoring(result, held))
        hand, event = _record_meld(setup, hand, seat, shown, result)
        events.append(event)
    return _after_meld(setup, hand), events


def _trump(hand: HandState) -> Suit:
    assert hand.trump is not None
    return hand.trump


def _record_meld(
    setup: Setup, hand: HandState, seat: int, shown: tuple[Card, ...], result: MeldResult
) -> tuple[HandState, Event]:
    bonus = setup.meld_table.value("dix", 1) if hand.dix_exchanged_by == seat else 0
    record = MeldRecord(seat, shown, result, result.total + bonus, result.dix_points() + bonus)
    melds = tuple(record if s == seat else m for s, m in enumerate(hand.melds))
    event = Event(
        "meld_scored",
        EVERYONE,
        {
            "seat": seat,
            "cards": format_cards(shown),
            "melds": [
                {
                    "name": m.name,
                    "level": m.level,
                    "points": m.points,
                    "cards": format_cards(m.cards),
                }
                for m in result.melds
            ],
            "points": record.points,
        },
    )
    return evolve_hand(hand, melds=melds), event


def _dead_dix(hand: HandState, seat: int, shown: tuple[Card, ...]) -> tuple[Card, ...]:
    """No-bid: the 9 the dealer took in a dix exchange cannot score again (A.7 item 7)."""
    if hand.dix_exchanged_by is None or seat != hand.dealer:
        return shown
    nine = make_card(_trump(hand), NINE)
    if nine not in shown:
        return shown
    remaining = remove_cards(shown, (nine,))
    assert remaining is not None
    return remaining


def _meld(setup: Setup, hand: HandState, seat: int, action: Action) -> tuple[HandState, Events]:
    assert isinstance(action, Meld)
    if remove_cards(hand.hands[seat], action.cards) is None:
        raise IllegalAction(
            "CARD_NOT_IN_HAND", f"seat {seat} cannot show cards it does not hold", "cards"
        )
    shown = tuple(sorted(action.cards))
    scored_from = _dead_dix(hand, seat, shown)
    trump = _trump(hand)
    if action.melds is not None:
        try:
            result = score_declared(
                scored_from, [(m.name, m.cards) for m in action.melds], trump, setup.meld_table
            )
        except MeldError as error:
            raise IllegalAction("INVALID_MELD", f"seat {seat}: {error}", error.field) from None
    else:
        result = best_meld(scored_from, trump, setup.meld_table)
    if action.points is not None and action.points != result.total:
        raise IllegalAction(
            "MELD_MISCOUNT",
            f"seat {seat} claimed {action.points} meld points; the combinations are worth "
            f"{result.total}",
            "points",
        )
    hand, event = _record_meld(setup, hand, seat, shown, result)
    events: Events = [event]
    players = setup.rules.players
    next_seat = (seat + 1) % players
    if next_seat != meld_order_start(setup, hand):
        return evolve_hand(hand, turn=next_seat), events
    return _after_meld(setup, hand), events


def _after_meld(setup: Setup, hand: HandState) -> HandState:
    if setup.rules.variant == "cutthroat":
        assert hand.declarer is not None
        return evolve_hand(hand, phase=BURY, turn=hand.declarer)
    return _enter_play(setup, hand)


def dix_exchange_refusal(setup: Setup, hand: HandState, seat: int) -> str | None:
    """Why ``seat`` may not exchange the dix now (no-bid, A.7 item 7), or None."""
    if hand.turn_up is None or hand.phase != MELD or seat != hand.turn:
        return "it is not that seat's meld turn"
    if seat == hand.dealer:
        return "the dealer cannot exchange"
    if hand.dix_exchanged_by is not None:
        return "the dix has already been exchanged this hand"
    if hand.turn_up % 6 == NINE:
        return "the turned card is itself a 9"
    if make_card(hand.turn_up // 6, NINE) not in hand.hands[seat]:
        return "no 9 of trumps in hand"
    return None


def _exchange_dix(
    setup: Setup, hand: HandState, seat: int, action: Action
) -> tuple[HandState, Events]:
    why = dix_exchange_refusal(setup, hand, seat)
    if why is not None:
        raise IllegalAction(
            "DIX_EXCHANGE_NOT_ALLOWED", f"seat {seat} cannot exchange the dix: {why}"
        )
    assert hand.turn_up is not None
    nine = make_card(hand.turn_up // 6, NINE)
    hands = list(hand.hands)
    taken = remove_cards(hands[seat], (nine,))
    given = remove_cards(hands[hand.dealer], (hand.turn_up,))
    assert taken is not None and given is not None
    hands[seat] = tuple(sorted((*taken, hand.turn_up)))
    hands[hand.dealer] = tuple(sorted((*given, nine)))
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
    return evolve_hand(hand, hands=tuple(hands), turn_up=nine, dix_exchanged_by=seat), [event]


# --------------------------------------------------------------------------------------------
# Concession and play


def concede_refusal(setup: Setup, hand: HandState, seat: int) -> tuple[str, str] | None:
    """(code, reason) when ``seat`` may not concede now, or None (A.7 items 4-5)."""
    if not setup.rules.bidding:
        return "WRONG_PHASE", "there is no contract to concede"
    if hand.phase == TRUMP and seat == hand.declarer and not trump_suits(setup, hand):
        return None
    if hand.phase in (AUCTION, TRUMP, PARTNER_PASS, DECLARER_PASS, KITTY_DISCARD, MELD):
        # One reason for every seat, whatever the declarer holds: telling another seat that
        # "the declarer cannot name trump" would reveal that its hand has no marriage (A.5).
        return "WRONG_PHASE", (
            "a concession comes after every seat has melded (before that, only a declarer"
            " who cannot name trump may concede)"
        )
    if seat != hand.declarer:
        return "CONCEDE_NOT_ALLOWED", "only the declarer may concede"
    if hand.phase == BURY:
        return "WRONG_PHASE", "the declarer buries before conceding"
    if hand.trick or hand.tricks:
        return "CONCEDE_NOT_ALLOWED", "play has begun"
    return None


def _concede(setup: Setup, hand: HandState, seat: int) -> tuple[HandState, Events]:
    refusal = concede_refusal(setup, hand, seat)
    if refusal is not None:
        code, why = refusal
        raise IllegalAction(code, f"seat {seat} cannot concede: {why}")
    no_trump = hand.phase == TRUMP
    event = Event("conceded", EVERYONE, {"seat": seat, "no_trump": no_trump})
    return evolve_hand(hand, phase="done", conceded=True), [event]


def _enter_play(setup: Setup, hand: HandState) -> HandState:
    leader = meld_order_start(setup, hand)
    return evolve_hand(hand, phase=PLAY, turn=leader, trick_leader=leader)


def partner_winning(setup: Setup, hand: HandState, seat: int) -> bool:
    """Whether the card now winning the trick is the partner's (A.9 item 10)."""
    if not hand.trick or setup.play_rules.head_over_partner:
        return False
    players = setup.rules.players
    winner = (hand.trick_leader + trick_winner(hand.trick, _trump(hand))) % players
    if setup.rules.partnerships:
        return winner == (seat + 2) % 4
    declarer = hand.declarer
    return declarer not in (seat, winner) and winner != seat


def _play(setup: Setup, hand: HandState, seat: int, action: Action) -> tuple[HandState, Events]:
    assert isinstance(action, Play)
    card = action.card
    held = hand.hands[seat]
    if card not in held:
        raise IllegalAction(
            "CARD_NOT_IN_HAND", f"seat {seat} cannot play {format_card(card)}: not in hand", "card"
        )
    trump = hand.trump
    assert trump is not None
    trick = hand.trick
    if trick:
        code = play_violation(
            card, held, trick, trump, setup.play_rules, partner_winning(setup, hand, seat)
        )
        if code is not None:
            raise IllegalAction(code, _play_message(code, seat, card, trick, trump), "card")
    index = held.index(card)
    new_held = held[:index] + held[index + 1 :]
    hands = (*hand.hands[:seat], new_held, *hand.hands[seat + 1 :])
    trick = (*trick, card)
    events: Events = [Event("card_played", EVERYONE, {"seat": seat, "card": format_card(card)})]
    players = setup.rules.players
    if len(trick) < players:
        return evolve_hand(hand, hands=hands, trick=trick, turn=(seat + 1) % players), events
    winner = (hand.trick_leader + trick_winner(trick, trump)) % players
    last = not new_held
    points, closing = trick_events(setup.counting, trick, winner, last)
    events += closing
    side = setup.side_of(winner)
    done = Trick(hand.trick_leader, trick, winner, points)
    return (
        evolve_hand(
            hand,
            phase="done" if last else PLAY,
            hands=hands,
            trick=(),
            tricks=(*hand.tricks, done),
            trick_leader=winner,
            turn=winner,
            side_points=add_at(hand.side_points, side, points),
            side_tricks=add_at(hand.side_tricks, side, 1),
        ),
        events,
    )


def _play_message(code: str, seat: int, card: Card, trick: Sequence[Card], trump: Suit) -> str:
    led = SUIT_NAMES[trick[0] // 6]
    played = format_card(card)
    trumps = SUIT_NAMES[trump]
    return {
        "MUST_FOLLOW_SUIT": f"seat {seat} played {played} on a {led} lead while holding {led}",
        "MUST_HEAD_TRICK": (
            f"seat {seat} played {played} but holds {led} that beat the card winning the trick"
        ),
        "MUST_TRUMP": (
            f"seat {seat} played {played} on a {led} lead while void in {led} and holding "
            f"trump ({trumps})"
        ),
        "MUST_OVERTRUMP": (
            f"seat {seat} played {played} but holds a trump ({trumps}) that beats the highest "
            "trump in the trick"
        ),
    }[code]


# --------------------------------------------------------------------------------------------
# Hand results


def _hand_summary(setup: Setup, hand: HandState) -> tuple[dict[str, object], HandScore]:
    """The verdict's per-hand object and the score (A.7 items 8-10, GAME_RECORD.md §2)."""
    sides = setup.sides
    players = setup.rules.players
    if setup.two_handed:  # melds scored as they were declared (A.8 item 9)
        meld_by_seat = list(hand.meld_points)
        dix_by_seat = [0] * players
    else:
        meld_by_seat = [0 if m is None else m.points for m in hand.melds]
        dix_by_seat = [0 if m is None else m.dix_points for m in hand.melds]
    points = list(hand.side_points)
    declaring_side = None if hand.declarer is None else setup.side_of(hand.declarer)
    if declaring_side is not None and hand.discards and not hand.conceded:
        points[declaring_side] += sum(setup.counting.card_value[c] for c in hand.discards)
    meld_side = [0] * sides
    dix_side = [0] * sides
    for seat in range(players):
        meld_side[setup.side_of(seat)] += meld_by_seat[seat]
        dix_side[setup.side_of(seat)] += dix_by_seat[seat]
    if hand.bid is None:  # a redeal, or no bidding
        if setup.rules.bidding:
            score = no_contract(sides)
        else:
            score = score_hand(
                setup.save_rule,
                bid=None,
                declaring_side=None,
                meld=meld_side,
                dix=dix_side,
                points=points,
                tricks=list(hand.side_tricks),
                conceded=False,
                total_in_play=setup.total_in_play,
            )
    elif hand.conceded and hand.trump is None:
        # No trump could be named (A.7 item 5): declaring side -bid, everyone else 0, no meld.
        assert declaring_side is not None
        delta = tuple(-hand.bid if s == declaring_side else 0 for s in range(sides))
        # A.7 item 8: hopeless is reported for every hand with a contract; no meld here.
        hopeless = hopeless_contract(hand.bid, 0, setup.total_in_play)
        score = HandScore(delta, tuple(s != declaring_side for s in range(sides)), hopeless)
        points = [0] * sides
    else:
        if hand.conceded:
            points = [0] * sides
        score = score_hand(
            setup.save_rule,
            bid=hand.bid,
            declaring_side=declaring_side,
            meld=meld_side,
            dix=dix_side,
            points=points,
            tricks=list(hand.side_tricks),
            conceded=hand.conceded,
            total_in_play=setup.total_in_play,
        )
    summary: dict[str, object] = {
        "hand": hand.number,
        "dealer": hand.dealer,
        "declarer": hand.declarer,
        "bid": hand.bid,
        "trump": None if hand.trump is None else format_suit(hand.trump),
        "conceded": hand.conceded,
        "hopeless": score.hopeless,
        "meld": meld_by_seat,
        "points": points,
        "delta": list(score.delta),
        "saved": list(score.saved),
    }
    return summary, score


def hand_progress(setup: Setup, hand: HandState) -> dict[str, object]:
    """The verdict's object for a hand still in progress (A.7 item 10, A.8 item 9).

    Bidding variants: the meld so far, the points taken so far, delta 0. Two-handed: melds have
    scored as declared, so delta is the meld so far.
    """
    if setup.two_handed:
        meld = list(hand.meld_points)
        return {
            "hand": hand.number,
            "dealer": hand.dealer,
            "declarer": None,
            "bid": None,
            "trump": None if hand.trump is None else format_suit(hand.trump),
            "conceded": False,
            "hopeless": False,
            "meld": meld,
            "points": list(hand.side_points),
            "delta": meld,
        }
    meld = [0 if m is None else m.points for m in hand.melds]
    exchanger = hand.dix_exchanged_by
    if exchanger is not None and hand.melds[exchanger] is None:
        # A.7 item 7: a no-bid dix exchange scores at once, before the exchanger's own meld.
        meld[exchanger] = setup.meld_table.value("dix", 1)
    return {
        "hand": hand.number,
        "dealer": hand.dealer,
        "declarer": hand.declarer,
        "bid": hand.bid,
        "trump": None if hand.trump is None else format_suit(hand.trump),
        "conceded": False,
        "hopeless": (
            hand.bid is not None
            and hand.declarer is not None
            and all(m is not None for m in hand.melds)
            and hand.bid
            - sum(
                m.points
                for m in hand.melds
                if m is not None and setup.side_of(m.seat) == setup.side_of(hand.declarer)
            )
            > setup.total_in_play
        ),
        "meld": meld,
        "points": list(hand.side_points),
        "delta": [0] * setup.sides,
    }


_HANDLERS = {
    (AUCTION, Bid): _bid,
    (AUCTION, Pass): _pass,
    (AUCTION, BidOrRedeal): _bid_or_redeal,
    (TRUMP, DeclareTrump): _declare_trump,
    (PARTNER_PASS, PassCards): _pass_cards,
    (DECLARER_PASS, PassCards): _pass_cards,
    (KITTY_DISCARD, Discard): _discard,
    (BURY, Discard): _discard,
    (MELD, Meld): _meld,
    (MELD, ExchangeDix): _exchange_dix,
    (PLAY, Play): _play,
}

__all__ = [
    "apply",
    "bid_window",
    "check_deal",
    "check_optional_fields",
    "check_seat",
    "hand_progress",
    "legal_actions",
    "make_setup",
    "matches",
    "new_game",
    "start_hand",
]


# --------------------------------------------------------------------------------------------
# Legal actions: the checks above, read as an enumeration (A.10 item 2)


def legal_actions(state: GameState, seat: int) -> list[dict[str, object]]:
    """What ``seat`` may do now: concrete actions, or descriptors where the choice is large.

    An action is accepted by ``apply`` exactly when it matches an entry (``matches``).
    """
    hand = state.hand
    if state.over or hand is None:
        return []
    setup = state.setup
    if setup.two_handed:
        return two_handed.legal_actions(setup, hand, seat)
    rules = setup.rules
    result: list[dict[str, object]] = []
    if seat == hand.turn:
        phase = hand.phase
        if phase == AUCTION:
            lowest, step, highest = bid_window(setup, hand)
            if highest is None or highest >= lowest:
                result.append({"type": "bid", "min": lowest, "step": step, "max": highest})
            if not dealer_must_bid(setup, hand, seat):
                result.append({"type": "pass"})
                if rules.allow_pass_with_help:
                    result.append({"type": "pass", "help": True})
            if bid_or_redeal_allowed(setup, hand):
                result.append({"type": "bid_or_redeal"})
        elif phase == TRUMP:
            for suit in trump_suits(setup, hand):
                result.append({"type": "declare_trump", "suit": format_suit(suit)})
        elif phase in (PARTNER_PASS, DECLARER_PASS):
            result.append(
                {
                    "type": "pass_cards",
                    "count": rules.exchange_count,
                    "from": format_cards(hand.hands[seat]),
                }
            )
        elif phase in (KITTY_DISCARD, BURY):
            available = discardable_cards(setup, hand, seat)
            result.append(
                {"type": "discard", "count": len(hand.deal.widow), "from": format_cards(available)}
            )
        elif phase == MELD:
            if dix_exchange_refusal(setup, hand, seat) is None and not rules.bidding:
                result.append({"type": "exchange_dix"})
            result.append({"type": "meld", "from": format_cards(hand.hands[seat])})
        elif phase == PLAY:
            held = hand.hands[seat]
            allowed = legal_plays(
                held, hand.trick, _trump(hand), setup.play_rules, partner_winning(setup, hand, seat)
            )
            result.extend({"type": "play", "card": format_card(c)} for c in allowed)
    if rules.bidding and concede_refusal(setup, hand, seat) is None:
        result.append({"type": "concede"})
    return result


def matches(entry: dict[str, object], action: dict[str, object]) -> bool:
    """Whether the JSON ``action`` is one that the legal-action ``entry`` allows.

    The action is read by the engine's one decoder first, as ``apply`` reads it, so any notation
    it accepts (``TS`` or ``10s`` for ``10S``, a suit in lower case: A.3) matches, and what it
    refuses as malformed matches nothing.
    """
    kind = entry["type"]
    if action.get("type") != kind:
        return False
    try:
        action = encode_action(decode_action(action))
    except IllegalAction:
        return False
    if kind == "play" and entry.get("drawn_card"):
        # Two-handed window: the card the winner is about to draw; any card may turn out to be
        # it, so only apply (which draws first) can tell.
        return isinstance(action.get("card"), str)
    if kind == "bid":
        amount = action.get("amount")
        low, step, high = entry["min"], entry["step"], entry["max"]
        assert isinstance(low, int) and isinstance(step, int)
        return (
            isinstance(amount, int)
            and amount >= low
            and (amount - low) % step == 0
            and (high is None or (isinstance(high, int) and amount <= high))
        )
    if kind == "meld" and "from" not in entry:
        # A two-handed meld entry is one concrete combination (A.8 item 1, A.10 item 2): the
        # same name and cards (in any order), and a points claim, if any, equal to its value.
        cards = action.get("cards")
        listed = entry["cards"]
        assert isinstance(listed, list)
        return (
            set(action) <= {"type", "name", "cards", "points"}
            and action.get("name") == entry["name"]
            and isinstance(cards, list)
            and sorted(str(c) for c in cards) == sorted(str(c) for c in listed)
            and not isinstance(action.get("points"), bool)
            and action.get("points", entry["points"]) == entry["points"]
        )
    if kind in ("pass_cards", "discard", "meld"):
        cards = action.get("cards")
        source = entry["from"]
        assert isinstance(source, list)
        if not isinstance(cards, list):
            return False
        if "count" in entry and len(cards) != entry["count"]:
            return False
        pool = [str(c) for c in source]
        for card in cards:
            if card not in pool:
                return False
            pool.remove(card)
        return True
    if kind == "pass":
        return bool(action.get("help", False)) == bool(entry.get("help", False))
    return all(action.get(key) == value for key, value in entry.items())
