-- Coalesced push deliveries: range_end is the last event seq of the range a queue head
-- is sent with (consecutive artifact-update events of one artifact in one POST), fixed
-- before its first attempt so that every retry, restart and instance sends exactly that
-- range under the same webhook-id. NULL: the head alone (not yet attempted, or sent
-- alone).
ALTER TABLE a2a_push_outbox ADD COLUMN range_end BIGINT;
