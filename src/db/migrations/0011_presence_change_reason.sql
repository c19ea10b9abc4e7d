-- Why the last claimed presence transition happened, as its digest says it (clock_in, operator,
-- shift_start, override_end), so every instance hosting a session sends the same reason.
-- presence_changed_by stays who made the change, within SPEC-0022's set: agent,
-- operator:<human_id> or shift (an override running out is the shift's, or the default's, doing).
ALTER TABLE endpoints ADD COLUMN presence_change_reason text;
