-- Campaign ids name the gates of flash campaigns in Redis (~C<id>): each
-- database's ids start at a random point, so two databases sharing one
-- Redis (the tests' many databases, a staging copy of production) never
-- name the same gate. Ids stay below 2^53 (exact in JavaScript clients).

-- +goose Up
SELECT setval(pg_get_serial_sequence('campaign', 'id'),
    GREATEST((SELECT coalesce(max(id), 0) FROM campaign), floor(random() * 1e12)::bigint) + 1, false);

-- +goose Down
SELECT 1;
