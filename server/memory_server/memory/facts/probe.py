"""A linear probe on a learned fact's vector: small talk and vague statements ("Loves helping
others", "Is excited to explore the nature", "Loves the color and texture") against facts a
later question could use ("Is allergic to peanuts", "Prefers tables over charts").

Trained by `bench/fact_quality/probe.py` on the labelled LoCoMo dev facts (RULES.md, "The
probe"): logistic regression on the offline model's vectors, 384 weights and a bias in
`probe_minilm.json`. It holds only for the model it was trained on: with another embedding
model there is no probe (`for_model`). The reconciler asks it about the candidates a rule form
does not vouch for (`judges`): self statements, and the preferences and goals the forms read
from chit-chat ("Loves the dark sky and green scenery"); never an instruction to the assistant
or a retraction.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from memory_server.memory.facts.model import Candidate, FactKind

# The rule forms whose facts the probe judges, beside the self statements.
JUDGED_FORMS = frozenset({FactKind.PREFERENCE, FactKind.GOAL})


@dataclass(frozen=True, slots=True)
class FactProbe:
    model: str  # the embedding model whose vectors it reads
    weights: tuple[float, ...]
    bias: float
    keep_at: float  # the probability of a good fact below which a judged candidate is dropped

    @classmethod
    def for_model(cls, model: str) -> FactProbe | None:
        """The packaged probe when it was trained on `model`'s vectors, else None."""
        probe = cls.packaged()
        return probe if probe.model == model else None

    @classmethod
    def packaged(cls) -> FactProbe:
        raw = json.loads(
            resources.files(__package__).joinpath("probe_minilm.json").read_text("utf-8")
        )
        weights = tuple(float(w) for w in raw["weights"])
        if len(weights) != int(raw["dimension"]):
            raise ValueError("probe_minilm.json: weights and dimension disagree")
        return cls(str(raw["model"]), weights, float(raw["bias"]), float(raw["keep_at"]))

    def judges(self, candidate: Candidate) -> bool:
        """Whether the probe decides on this candidate (module doc)."""
        if candidate.standing or candidate.retraction:
            return False
        return candidate.self_statement or candidate.kind in JUDGED_FORMS

    def good(self, vector: Sequence[float]) -> float:
        """The probability that the fact with this vector is a good one."""
        if len(vector) != len(self.weights):
            raise ValueError(f"a {len(vector)}-dimension vector for a {self.model} probe")
        z = sum(map(operator.mul, self.weights, vector)) + self.bias
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)  # no overflow for a very negative z
        return e / (1.0 + e)

    def keeps(self, vector: Sequence[float]) -> bool:
        return self.good(vector) >= self.keep_at
