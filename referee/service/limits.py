"""Rate limits that keep a caller without a seat from growing a game's audit log without bound.

Issue 4 puts every request, accepted or refused, in the game's audit log, so a refused
``SubmitAction`` costs a durable, hash-chained row. A seat that keeps sending illegal actions is
accountable (its rows name it), but a caller with no token, a wrong token or only the spectator
token is not, and anyone who learned a game id could otherwise append rows for ever. Such
refusals therefore draw from a token bucket kept per game (``RefusalBudgets``): while it has
tokens, a refusal is audited as usual; when it is empty, the request is refused with
``RESOURCE_EXHAUSTED`` (reason ``TOO_MANY_REFUSALS``, metadata ``refused`` naming the refusal it
stands for, a ``google.rpc.RetryInfo`` saying when a token will be back) and nothing is
written. Seats and the adjudicator are never throttled, so a flood cannot keep a player from
playing.

The buckets are kept by game id, apart from the game objects, so that a game dropped from
memory and rebuilt from the store (a finished game leaving the cache) does not come back with a
full budget; a bucket is forgotten only once it has refilled, when it equals a new one.
"""

from __future__ import annotations

from dataclasses import dataclass

# The slowest refill accepted: a token every 1,000 s. Much slower and the retry delay a client is
# told would overflow google.rpc.RetryInfo's Duration.
MIN_RATE = 0.001


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
        if not MIN_RATE <= rate < float("inf") or not burst >= 1:
            raise ValueError(
                f"a token bucket needs {MIN_RATE} <= rate < inf and burst >= 1, not {rate}, {burst}"
            )
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

    def refilled(self, now: float) -> bool:
        """Whether the bucket is full again at ``now`` (it then equals a new bucket)."""
        return self.tokens + (now - self.updated) * self.rate >= self.burst


class RefusalBudgets:
    """One ``TokenBucket`` per key (a game id), made full on first use.

    Buckets that have refilled are dropped now and then (when the map has doubled since the last
    sweep), so the map holds only keys refused in the last ``burst / rate`` seconds, give or take
    a factor of two: its size is bounded by the refusals' rate, not by the number of games.
    """

    SWEEP_FLOOR = 64

    def __init__(self, rate: float, burst: int) -> None:
        TokenBucket.full(rate, burst, 0.0)  # refuses a budget that could never give a token
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, TokenBucket] = {}
        self._sweep_at = self.SWEEP_FLOOR

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str, now: float) -> float:
        """``TokenBucket.take`` on ``key``'s bucket: 0.0 when a token was taken, else the wait."""
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._sweep_at:
                self._sweep(now)
            bucket = self._buckets[key] = TokenBucket.full(self.rate, self.burst, now)
        return bucket.take(now)

    def _sweep(self, now: float) -> None:
        self._buckets = {k: b for k, b in self._buckets.items() if not b.refilled(now)}
        self._sweep_at = max(self.SWEEP_FLOOR, 2 * len(self._buckets))
