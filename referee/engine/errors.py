"""The one error type for refused actions, and the A.5 codes in their precedence order."""

from __future__ import annotations

from typing import Final

from mypy_extensions import mypyc_attr

# RULES.md A.5, in the order that decides which code wins when several apply.
VIOLATION_CODES: Final = (
    "MALFORMED_ACTION",
    "GAME_OVER",
    "NOT_YOUR_TURN",
    "WRONG_PHASE",
    "CARD_NOT_IN_HAND",
    "BID_TOO_LOW",
    "BID_BAD_RAISE",
    "DEALER_MUST_BID",
    "BID_OR_REDEAL_NOT_ALLOWED",
    "TRUMP_NEEDS_MARRIAGE",
    "WRONG_CARD_COUNT",
    "CANNOT_BURY_MELD",
    "MUST_FOLLOW_SUIT",
    "MUST_HEAD_TRICK",
    "MUST_TRUMP",
    "MUST_OVERTRUMP",
    "MELD_NOT_ALLOWED",
    "INVALID_MELD",
    "MELD_NEEDS_NEW_CARD",
    "MELD_CARD_REUSED",
    "MELD_MISCOUNT",
    "DIX_EXCHANGE_NOT_ALLOWED",
    "CONCEDE_NOT_ALLOWED",
)


# Not a native class: compiled by mypyc 1.20 (setup.py), an exception class whose __init__
# sets attributes kept every instance alive, so every refusal leaked (tests/test_native.py).
@mypyc_attr(native_class=False)
class IllegalAction(Exception):
    """An action the referee refuses. Nothing changes when it is raised.

    ``code`` is an A.5 violation code, ``field`` the path of the offending field in the action's
    JSON form (``""`` for the action as a whole), and ``message`` a sentence that names the seat,
    the action and the rule. Messages quote only cards the acting seat itself sent or public
    cards, so they are safe to show to any seat.
    """

    def __init__(self, code: str, message: str, field: str = "") -> None:
        assert code in VIOLATION_CODES, code
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "field": self.field, "message": self.message}


class DealError(ValueError):
    """A deal that is not a whole, correct deck for the variant.

    In a record this is a record error (exit 2), never a violation.
    """
