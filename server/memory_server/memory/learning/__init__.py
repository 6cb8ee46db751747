"""The offline rule extractor: what it reads from a turn (extract), its clause forms for
preferences, retractions and the user's world (extract_rules, world_rules), plain statements
about the user's own life (self_statements), and the word helpers they share (words)."""
