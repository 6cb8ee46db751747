"""A Reconciler that asks an OpenAI-compatible chat model for ADD / UPDATE / DELETE / NONE.

One chat-completions call per `reconcile` (none when there is nothing to decide), through the
shared client (memory_server.openai_http: one budget of `timeout_s`, retries of what is
transient). The prompt shows the scope's live facts under small integer ids (1, 2, ...), never
our fact ids: a model copies short integers reliably and cannot invent a plausible uuid. At
most `max_live` live facts are shown (those sharing most content words with the candidates, in
the caller's order) and every text is clipped to `max_text_chars`. The model answers

    {"decisions": [{"index": 0, "event": "UPDATE", "target": 3}, ...]}

and the reply is validated as a whole: exactly one decision per candidate, a known event, a
shown id for every UPDATE and DELETE (and for a NONE that names one), DELETE only for a
retraction and ADD/UPDATE never for one, no fact updated or deleted twice. Anything else (an
unreachable endpoint, a timeout, an error status left after the retries, unparseable JSON, an
invalid decision) sends the whole batch to `fallback.reconcile(...)` with a warning that holds
no user text.

A NONE whose target names other values than the candidate (memory.facts.values: "Will use Postgres
14 for the pilot" for "... Postgres 16 ...") is not "already known", whatever the model says:
it becomes an UPDATE of that fact when the candidate is it with a changed figure (the offline
reconciler's rule) and the model changes that fact nowhere else, else an ADD.

With no live facts there is nothing a model could add to the fallback's decision (all it could
say is ADD, or NONE for a retraction), so the fallback decides without a call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from memory_server.extraction.prompt_facts import clip, most_related
from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import MemoryServiceError
from memory_server.memory.facts.model import Candidate, Decision, LiveFact, ReconciledCandidate
from memory_server.memory.facts.values import changed, differ, values_of
from memory_server.memory.ports import Reconciler
from memory_server.openai_http import ChatClient

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = """\
You maintain the long-term memory of an assistant about one user. You get EXISTING facts \
(each with an integer "id") and CANDIDATE facts found in the user's latest message (each with \
an "index"). Decide exactly one event for every candidate:
- ADD: new information that no existing fact covers.
- UPDATE: the candidate replaces an existing fact about the same thing whose value changed \
("Prefers tea" replaces "Prefers coffee"; "Timezone is PST" replaces "Timezone is CET"). \
"target" is that fact's id.
- DELETE: only for a candidate with "retraction": true, when an existing fact says what the \
user withdrew. "target" is that fact's id.
- NONE: the candidate is already known ("target" is the id of the fact that says the same), or \
it is a retraction that matches no existing fact ("target": null).
Rules: a retraction is DELETE or NONE, never ADD or UPDATE. "change": true means the user said \
something changed: prefer UPDATE of the existing fact on the same topic over ADD. Never UPDATE \
a fact about a different topic; two preferences that can both hold are two facts (ADD). Use \
only ids from EXISTING, and target each existing fact at most once.
Answer with JSON only, one entry per candidate, in candidate order:
{"decisions": [{"index": 0, "event": "ADD", "target": null}]}"""


class _Invalid(Exception):
    """The reply cannot be used. The message is ours and holds no user text."""


class LLMReconciler(Lifecycle):
    """Reconciles with `POST {base_url}/chat/completions`; falls back on any failure."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout_s: float,
        fallback: Reconciler,
        *,
        max_live: int = 50,
        max_text_chars: int = 300,
        json_mode: bool = True,
    ) -> None:
        if max_live < 1 or max_text_chars < 16:
            raise ValueError("need max_live >= 1 and max_text_chars >= 16")
        self._chat = ChatClient(base_url, api_key, timeout_s)
        self._model = model
        self._fallback = fallback
        self._max_live = max_live
        self._max_text_chars = max_text_chars
        self._json_mode = json_mode

    @property
    def name(self) -> str:
        return f"llm:{self._model}"

    async def close(self) -> None:
        """Close the HTTP client (idempotent); the first call opened it."""
        await self._chat.close()

    async def reconcile(
        self,
        candidates: Sequence[Candidate],
        live: Sequence[LiveFact],
        *,
        live_vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> list[ReconciledCandidate]:
        """Decide each candidate; `live_vectors` only matters to the fallback."""
        if not candidates:
            return []
        if not live:
            return await self._fallback.reconcile(candidates, live, live_vectors=live_vectors)
        shown = self.shown_facts(candidates, live)
        try:
            reply = await self._chat.complete(
                self._model,
                self.messages(candidates, shown),
                json_mode=self._json_mode,
                max_tokens=min(4096, 64 + 48 * len(candidates)),
            )
            return _value_guard(_decisions(reply, candidates, shown), shown)
        except (MemoryServiceError, _Invalid) as exc:
            reason = str(exc)
        except Exception as exc:  # never let a model's reply break learning
            reason = type(exc).__name__
        logger.warning(
            "reconciler %s failed (%s); the fallback decides %d candidate(s)",
            self.name,
            reason,
            len(candidates),
        )
        return await self._fallback.reconcile(candidates, live, live_vectors=live_vectors)

    def shown_facts(
        self, candidates: Sequence[Candidate], live: Sequence[LiveFact]
    ) -> dict[int, LiveFact]:
        """The live facts the prompt shows, by the small id it shows them under (from 1)."""
        picked = sorted(
            most_related([f.text for f in live], [c.text for c in candidates], self._max_live)
        )
        return {n: live[i] for n, i in enumerate(picked, start=1)}

    def messages(
        self, candidates: Sequence[Candidate], shown: Mapping[int, LiveFact]
    ) -> list[dict[str, str]]:
        """The chat messages of one call."""
        existing = [
            {"id": n, "text": clip(f.text, self._max_text_chars), "kind": f.kind.value}
            for n, f in shown.items()
        ]
        new = [
            {
                "index": i,
                "text": clip(c.text, self._max_text_chars),
                "kind": c.kind.value,
                "retraction": c.retraction,
                "change": c.change,
            }
            for i, c in enumerate(candidates)
        ]
        user = (
            f"EXISTING:\n{json.dumps(existing, ensure_ascii=False)}\n\n"
            f"CANDIDATES:\n{json.dumps(new, ensure_ascii=False)}"
        )
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]


def _parse(reply: str) -> Any:
    text = reply.strip()
    if text.startswith("```"):  # a fenced block despite json mode
        text = text.strip("`").removeprefix("json").strip()
    try:
        return json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(text[start : end + 1])
            except ValueError:
                pass
    raise _Invalid("reply is not JSON")


def _small_id(value: Any) -> int | None:
    """An id as the model may write it: 3 or "3" (null/absent: None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _Invalid("a target is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise _Invalid("a target is not an integer")


def _decisions(
    reply: str, candidates: Sequence[Candidate], shown: Mapping[int, LiveFact]
) -> list[ReconciledCandidate]:
    payload = _parse(reply)
    items = payload.get("decisions") if isinstance(payload, dict) else payload
    if not isinstance(items, list) or not all(isinstance(d, dict) for d in items):
        raise _Invalid("no decisions list")
    if len(items) != len(candidates):
        raise _Invalid(f"{len(items)} decisions for {len(candidates)} candidates")
    if all("index" in d for d in items):
        indexes = [_small_id(d["index"]) for d in items]
        if sorted(i for i in indexes if i is not None) != list(range(len(candidates))):
            raise _Invalid("decision indexes do not match the candidates")
        items = [d for _, d in sorted(zip(indexes, items, strict=True), key=lambda p: p[0] or 0)]
    elif any("index" in d for d in items):
        raise _Invalid("decision indexes do not match the candidates")
    out: list[ReconciledCandidate] = []
    targeted: set[int] = set()
    for i, (item, candidate) in enumerate(zip(items, candidates, strict=True)):
        event = item.get("event", item.get("decision"))
        try:
            decision = Decision(str(event).strip().upper())
        except ValueError:
            raise _Invalid(f"candidate {i}: unknown event") from None
        target = _small_id(item.get("target"))
        if target is not None and target not in shown and decision is not Decision.ADD:
            raise _Invalid(f"candidate {i}: {decision.value} names an unknown id")
        if candidate.retraction and decision in (Decision.ADD, Decision.UPDATE):
            raise _Invalid(f"candidate {i}: {decision.value} for a retraction")
        if decision is Decision.DELETE and not candidate.retraction:
            raise _Invalid(f"candidate {i}: DELETE for a statement")
        if decision in (Decision.UPDATE, Decision.DELETE):
            if target is None:
                raise _Invalid(f"candidate {i}: {decision.value} without a target")
            if target in targeted:
                raise _Invalid(f"candidate {i}: id {target} changed twice")
            targeted.add(target)
        if decision is Decision.ADD or target is None:
            out.append(ReconciledCandidate(decision, candidate))
        else:
            out.append(ReconciledCandidate(decision, candidate, shown[target].fact_id))
    return out


def _value_guard(
    decisions: list[ReconciledCandidate], shown: Mapping[int, LiveFact]
) -> list[ReconciledCandidate]:
    """The model's NONEs between texts whose values differ, turned into UPDATE or ADD (see the
    module doc)."""
    text_of = {f.fact_id: f.text for f in shown.values()}
    changing = {d.target_fact_id for d in decisions if d.decision is not Decision.NONE}
    out: list[ReconciledCandidate] = []
    for d in decisions:
        old = text_of.get(d.target_fact_id)
        if d.decision is not Decision.NONE or d.candidate.retraction or old is None:
            out.append(d)
            continue
        new_values, old_values = values_of(d.candidate.text), values_of(old)
        if not differ(new_values, old_values):
            out.append(d)
        elif changed(new_values, old_values) and d.target_fact_id not in changing:
            changing.add(d.target_fact_id)
            out.append(ReconciledCandidate(Decision.UPDATE, d.candidate, d.target_fact_id))
        else:
            out.append(ReconciledCandidate(Decision.ADD, d.candidate))
    return out
