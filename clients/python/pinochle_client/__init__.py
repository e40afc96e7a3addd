"""A typed asyncio client for the Pinochle referee (gRPC).

    async with RefereeClient("127.0.0.1:50051") as client:
        game = await client.create_game("partnership", seed="demo")
        seat = client.seat(game.game_id, game.seat_tokens[1])
        print(await seat.legal_actions())
        await seat.submit({"type": "bid", "amount": 250})

Rules queries need no game: ``await client.score_meld("partnership", ["AH", "10H"], "H")``,
``legal_plays``, ``trick_winner``, ``trick_points`` and ``score_hand`` return typed answers.

Refusals raise ``RefereeError`` with the gRPC code, the A.5 violation code (``reason``), the
game's current version and the offending fields, read from the rich error details.
"""

from pinochle_client.client import (
    AuditCheck,
    CreatedGame,
    GamesPage,
    HandScore,
    MeldResult,
    MeldScore,
    RefereeClient,
    RefereeError,
    SeatSession,
    Session,
    verify_audit_chain,
)

__all__ = [
    "AuditCheck",
    "CreatedGame",
    "GamesPage",
    "HandScore",
    "MeldResult",
    "MeldScore",
    "RefereeClient",
    "RefereeError",
    "SeatSession",
    "Session",
    "verify_audit_chain",
]
