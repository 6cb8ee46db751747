"""LoCoMo loading for the recall benchmark: turns, normalised evidence, questions.

The data is read in place (CC BY-NC 4.0, never copied into the project); see
../shared/data/README.md for the schema and its quirks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DEFAULT_DATA = (
    Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
)
# Categories by the data and the official evaluation code; 5 (adversarial) is not retrieval.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_EVIDENCE_ID = re.compile(r"D:?(\d+):0*(\d+)")


# "1:56 pm on 8 May, 2023": the session's date time, read as UTC (the data names no zone).
_SESSION_TIME = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str  # canonical "D<session>:<turn>"
    speaker: str
    text: str
    blip_caption: str  # the shared image's caption; "" for a turn without an image
    said_at: datetime  # the session's date time

    @property
    def memory_text(self) -> str:
        """What is stored, as in the reference setup (LoCoMo's RAG evaluation): the speaker
        prefix matters for retrieval, and an image turn's content is in its caption
        ("Caroline: take a look at this [shares a photo of a painted sunrise]")."""
        if self.blip_caption:
            return f"{self.speaker}: {self.text} [shares {self.blip_caption}]"
        return f"{self.speaker}: {self.text}"

    @property
    def session(self) -> int:
        """The session's number ("D3:5" is turn 5 of session 3)."""
        return int(self.dia_id[1:].split(":")[0])

    @property
    def spoken_at(self) -> datetime:
        """When the turn was said: the data has only the session's date time, so turn n of a
        session is n seconds after it (the turns keep their order, as in a real chat)."""
        return self.said_at + timedelta(seconds=int(self.dia_id.split(":")[1]))

    @property
    def plain_text(self) -> str:
        """The text the benchmark stored before (no caption): "Speaker: text"."""
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True, slots=True)
class Question:
    index: int  # position in the sample's qa list
    text: str
    category: int
    evidence: frozenset[str]  # canonical dia_ids of existing turns, never empty


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped_no_evidence: int  # category 1-4 questions without (valid) evidence
    dropped_evidence_ids: list[str]  # evidence ids that point at no turn


def canonical(dia_id: str) -> str | None:
    match = _EVIDENCE_ID.fullmatch(dia_id.strip())
    return f"D{int(match[1])}:{int(match[2])}" if match else None


def parse_evidence(raw: list[Any]) -> list[str]:
    """Evidence strings normalised: "D8:6; D9:17", "D9:1 D4:4", "D:11:26", "D30:05"."""
    found: list[str] = []
    for item in raw:
        for part in _EVIDENCE_SPLIT.split(str(item)):
            if not part:
                continue
            match = _EVIDENCE_ID.fullmatch(part)
            if match:
                found.append(f"D{int(match[1])}:{int(match[2])}")
    return found


def _turns(conversation: dict[str, Any]) -> list[Turn]:
    sessions = sorted(
        (int(m[1]), key)
        for key in conversation
        if (m := _SESSION.fullmatch(key)) and isinstance(conversation[key], list)
    )
    turns: list[Turn] = []
    for _, key in sessions:
        said_at = datetime.strptime(conversation[f"{key}_date_time"], _SESSION_TIME)
        for turn in conversation[key]:
            dia_id = canonical(turn["dia_id"])
            if dia_id is None:
                raise ValueError(f"unexpected dia_id {turn['dia_id']!r}")
            caption = str(turn.get("blip_caption") or "").strip()
            turns.append(
                Turn(dia_id, turn["speaker"], turn["text"], caption, said_at.replace(tzinfo=UTC))
            )
    return turns


def load(path: Path, limit_conversations: int | None = None) -> list[Conversation]:
    samples = json.loads(path.read_text(encoding="utf-8"))
    if limit_conversations is not None:
        samples = samples[:limit_conversations]
    out: list[Conversation] = []
    for sample in samples:
        turns = _turns(sample["conversation"])
        known = {t.dia_id for t in turns}
        if len(known) != len(turns):
            raise ValueError(f"{sample['sample_id']}: duplicate dia_ids")
        questions: list[Question] = []
        skipped = 0
        dropped: list[str] = []
        for i, qa in enumerate(sample["qa"]):
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = parse_evidence(qa.get("evidence") or [])
            dropped += [e for e in evidence if e not in known]
            kept = frozenset(e for e in evidence if e in known)
            if not kept:
                skipped += 1
                continue
            questions.append(Question(i, qa["question"], int(qa["category"]), kept))
        out.append(Conversation(sample["sample_id"], turns, questions, skipped, dropped))
    return out


def retention_covering(conversations: Sequence[Conversation], margin_days: int = 30) -> int:
    """`ltm_retention_days` that keeps every turn of `conversations` an episode for the run and
    `margin_days` more: LoCoMo's sessions are dated 2022–2023, and the server stops recalling
    messages said longer ago than its retention (365 days by default) at its first retention
    pass, which may run while the turns are fed."""
    oldest = min((t.said_at for c in conversations for t in c.turns), default=datetime.now(UTC))
    return max(1, (datetime.now(UTC) - oldest).days + margin_days)
