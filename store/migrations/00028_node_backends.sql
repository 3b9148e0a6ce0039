-- +goose Up

-- The server process of each node's heartbeat connection, so that a node
-- restarted in place can tell that its predecessor under the same name is
-- gone for good (its connection closed when the process died) and take its
-- place at once, rather than wait out its lease (store.SucceedDeadNamesakes).
-- NULL when the heartbeat goes through a transaction pooler, whose server
-- processes belong to no one client: such a node is never taken over early.
ALTER TABLE nodes ADD COLUMN backend_pid integer;

-- +goose Down
ALTER TABLE nodes DROP COLUMN backend_pid;
