"""Recall with a question split into the questions it is made of (setting
`ltm_split_questions`, an LLM's work: memory.ports.QuestionSplitter).

After the first ranking, the splitter sees the question and the texts of its `CONTEXT` best
hits and may write follow-up questions that find what they do not ("Where does my manager want
to travel?" with "Manager is Priya Raman" found: "Where does Priya Raman want to travel?").
Each follow-up is searched like the question (both signals, the first question's subjects and
time intent) and a fact it finds keeps the better of its two scores: a follow-up is a question
of its own, so its hits rank with the first question's, not below them.

Not measured on LoCoMo here (no model endpoint on the machines this was built on); tested on the
loopback stand-in of an OpenAI-compatible endpoint (tests/test_split_questions.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_server.memory.recall.rank import ScoredFact, best_first

CONTEXT = 5  # first-hop hits shown to the splitter


def merge_parts(
    ranked: Sequence[ScoredFact], parts: Sequence[Sequence[ScoredFact]], *, threshold: float
) -> list[ScoredFact]:
    """`ranked` with each follow-up's ranking merged in: a fact keeps its best score, at least
    `threshold`; best first."""
    best: dict[str, ScoredFact] = {s.version.version_id: s for s in ranked}
    for found in parts:
        for hit in found:
            vid = hit.version.version_id
            known = best.get(vid)
            if hit.score >= threshold and (known is None or known.score < hit.score):
                best[vid] = hit
    return best_first(best.values())
