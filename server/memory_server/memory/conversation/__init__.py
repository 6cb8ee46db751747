"""Short-term memory: one conversation's messages, what of them fits the planner's token budget
(stm), the rolling summary that older turns fold into (summary) and when they fold
(compaction), and the value types of conversations and turns (model)."""
