-- 004: the inventory's sync (booking/inventory.go, queue/inventory.go) reads
-- the holds an event confirmed in the last half minute, every two seconds:
-- those an older snapshot may not show as sold yet.
CREATE INDEX bookings_confirmed_recent ON bookings (event_id, updated_at) WHERE status = 'CONFIRMED';
