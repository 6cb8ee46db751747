"""Generated stubs for graphrag.memory.v1 (scripts/gen_protos.py; do not edit)."""
