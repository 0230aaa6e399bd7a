-- +goose Up
-- When a delivery was first attempted. A delivery that failed every
-- attempt for its retry window disables its endpoint when the endpoint has
-- not succeeded since that first attempt (its failing streak began then or
-- before): the streak alone, begun at the first failed attempt, came a
-- little after the delivery was made, so the delivery's last attempt could
-- find the streak just short of the window and leave the endpoint enabled.
ALTER TABLE webhook_delivery ADD COLUMN first_attempt_at timestamptz;

-- +goose Down
ALTER TABLE webhook_delivery DROP COLUMN first_attempt_at;
