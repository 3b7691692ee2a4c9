"""What an outbound transport saw during one session or call: the counters and the
typed refusal its owner reads to turn a library exception into an `AdkError`."""

from __future__ import annotations

from dataclasses import dataclass, field

from providers.errors import AdkError


@dataclass
class Observed:
    """Redirects, lost sessions, bodies past the bound, the last refusal, recent statuses."""

    redirects: int = 0
    session_lost: int = 0
    too_large: int = 0
    refused: AdkError | None = None
    statuses: list[int] = field(default_factory=list)
