"""What the domain reports for monitoring."""

from __future__ import annotations

from typing import Protocol


class Telemetry(Protocol):
    """What the domain reports for monitoring (counted by the metrics adapter)."""

    def fact_decision(self, decision: str) -> None:
        """One applied reconciliation decision: ADD, UPDATE, DELETE or NONE."""
        ...

    def secrets_dropped(self, sentences: int) -> None:
        """Sentences the secret filter removed before extraction."""
        ...

    def learned(self, seconds: float) -> None:
        """One turn's background learning finished (facts applied, or nothing to learn)."""
        ...

    def live_vectors_missing(self, facts: int) -> None:
        """Live facts whose vector the index did not return, so they were embedded again."""
        ...


class NoTelemetry:
    """The default when nothing is monitored."""

    def fact_decision(self, decision: str) -> None:
        pass

    def secrets_dropped(self, sentences: int) -> None:
        pass

    def learned(self, seconds: float) -> None:
        pass

    def live_vectors_missing(self, facts: int) -> None:
        pass
