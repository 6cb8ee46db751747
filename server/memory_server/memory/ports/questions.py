"""Recall's port for splitting a question into the questions it is made of (an LLM's work)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class QuestionSplitter(Protocol):
    """Splits a question that needs two or more facts into self-contained questions, each
    answerable from one ("Where does my manager want to travel?" → "Who is my manager?",
    "Where does Priya want to travel?"). A question that needs one fact, or a failure, gives
    an empty list: recall then searches the question alone. Never raises."""

    async def split(self, question: str, known: Sequence[str] = ()) -> list[str]: ...
