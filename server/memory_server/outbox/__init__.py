"""The outbox actor: moves committed fact changes into the vector index."""
