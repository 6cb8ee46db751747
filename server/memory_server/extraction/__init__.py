"""Adapters that prepare conversation turns for long-term memory extraction."""
