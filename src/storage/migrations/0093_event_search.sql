-- The audit log (docs/audit-log.md) searches the events of one instance by global position, newest first
-- by default, narrowed by resource owner (always for an organization's owner), editor, aggregate or time.
-- Each index starts with the instance and ends with the order, so a page is read from the index in order
-- and stops after the page, however long the instance's history (no sort, no scan of other instances).
-- Filters by aggregate type use events_instance_type_idx, by event type events_event_type_idx (0001).
CREATE INDEX events_instance_position_idx ON events (instance_id, position);
CREATE INDEX events_instance_owner_idx ON events (instance_id, resource_owner, position);
CREATE INDEX events_instance_creator_idx ON events (instance_id, creator, position);
CREATE INDEX events_instance_aggregate_id_idx ON events (instance_id, aggregate_id, position);
-- Time ranges and the instance's audit-log retention.
CREATE INDEX events_instance_created_idx ON events (instance_id, created_at);
