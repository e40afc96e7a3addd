"""Rate limits that keep a caller without a seat from growing a game's audit log without bound.

Issue 4 puts every request, accepted or refused, in the game's audit log, so a refused
``SubmitAction`` costs a durable, hash-chained row. A seat that keeps sending illegal actions is
accountable (its rows name it), but a caller with no token, a wrong token or only the spectator
token is not, and anyone who learned a game id could otherwise append rows for ever. Such
refusals therefore draw from a token bucket kept per game: while it has tokens, a refusal is
audited as usual; when it is empty, the request is refused with ``RESOURCE_EXHAUSTED`` (reason
``TOO_MANY_REFUSALS``, a ``google.rpc.RetryInfo`` saying when a token will be back) and nothing
is written. Seats and the adjudicator are never throttled, so a flood cannot keep a player
from playing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TokenBucket:
    """``burst`` tokens at most, refilled continuously at ``rate`` per second.

    Times are in seconds of a monotonic clock that the caller passes in (no clock is read here,
    so tests choose the time). A new bucket is full.
    """

    rate: float
    burst: float
    tokens: float
    updated: float

    @classmethod
    def full(cls, rate: float, burst: float, now: float) -> TokenBucket:
        if not rate > 0 or not burst >= 1:
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, not {rate}, {burst}")
        return cls(rate, burst, burst, now)

    def take(self, now: float) -> float:
        """Take one token and answer 0.0, or, when none is left, take nothing and answer how
        many seconds until one will be there."""
        if now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate
