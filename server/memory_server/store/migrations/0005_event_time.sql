-- Event time: when what a fact says happened, resolved from a relative expression in its text
-- ("yesterday", "last week", "in 2022") against the time it was said (the message's time, or
-- AddFact's valid time). NULL when the text names no time. `event_period` is the resolution's
-- grain: day, week, month or year ('' when event_at is NULL). A version's valid_from is the
-- time it was said; the event date is what a "when" question asks for.
ALTER TABLE fact_versions
    ADD COLUMN event_at timestamptz,
    ADD COLUMN event_period text NOT NULL DEFAULT ''
        CHECK (event_period IN ('', 'day', 'week', 'month', 'year'));
