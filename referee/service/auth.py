"""Seat, spectator and adjudicator credentials.

Tokens are 256-bit random values shown once at creation and stored only as SHA-256 hashes, so a
copy of the database does not let anyone act for a seat. Callers send them as
``authorization: Bearer <token>`` metadata.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

SEAT: Final = "seat"
SPECTATOR: Final = "spectator"
ADJUDICATOR: Final = "adjudicator"
CREATOR: Final = "creator"  # the server's creator credential (--creator-token): no game's role


@dataclass(frozen=True, slots=True)
class Caller:
    role: str  # SEAT | SPECTATOR | ADJUDICATOR
    seat: int | None = None

    @property
    def view_role(self) -> int | str:
        """The role as ``referee.engine.views.view`` takes it."""
        return self.seat if self.role == SEAT and self.seat is not None else self.role


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of an ``authorization: Bearer`` header, or None."""
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            scheme, _, token = text.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def callers_by_hash(
    seat_hashes: Sequence[str],
    spectator_hash: str,
    adjudicator_hashes: Sequence[str],
) -> dict[str, Caller]:
    """Who each token hash of a game belongs to, for one dict lookup per request.

    A lookup by hash needs no constant-time comparison: the hash is SHA-256 of a 256-bit
    random token, so the time a lookup takes tells a guesser nothing about any token. Should
    two roles share a hash, the spectator wins over the adjudicator, who wins over a seat
    (the least powerful role).
    """
    found: dict[str, Caller] = {}
    for seat, stored in enumerate(seat_hashes):
        found[stored] = Caller(SEAT, seat)
    for stored in adjudicator_hashes:
        if stored:
            found[stored] = Caller(ADJUDICATOR)
    found[spectator_hash] = Caller(SPECTATOR)
    found.pop("", None)
    return found
