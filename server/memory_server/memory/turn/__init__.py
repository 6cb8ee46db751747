"""The turn: the use cases a request drives, start and complete a turn, a context, an import and
the conversation history, orchestrating short-term memory, recall and learning."""
