"""Time in what is said: when a fact's event happened (event_time) and whether a question asks
when something happened (intent)."""
