-- Campaigns of unique codes (migration 00060). A campaign's terms and
-- counters are its voucher row's (code '~C<id>'); its codes are rows of
-- voucher_code with their own use counts.

-- name: CampaignNextID :one
SELECT nextval(pg_get_serial_sequence('campaign', 'id'))::bigint AS id;

-- name: CampaignInsert :one
INSERT INTO campaign (id, voucher_code, name, code_count, code_prefix, code_length, uses_per_code)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING *;

-- name: CampaignGet :one
SELECT sqlc.embed(campaign), sqlc.embed(voucher)
FROM campaign JOIN voucher ON voucher.code = campaign.voucher_code
WHERE campaign.id = $1;

-- name: CampaignListFirst :many
SELECT sqlc.embed(campaign), sqlc.embed(voucher)
FROM campaign JOIN voucher ON voucher.code = campaign.voucher_code
ORDER BY campaign.created_at DESC, campaign.id DESC
LIMIT $1;

-- name: CampaignListAfter :many
SELECT sqlc.embed(campaign), sqlc.embed(voucher)
FROM campaign JOIN voucher ON voucher.code = campaign.voucher_code
WHERE (campaign.created_at, campaign.id) < (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::bigint)
ORDER BY campaign.created_at DESC, campaign.id DESC
LIMIT $1;

-- name: CampaignListGenerating :many
SELECT id FROM campaign WHERE status = 'GENERATING' ORDER BY id;

-- CampaignLockForGeneration locks a campaign's row for one batch of its
-- generation: batches of any generator take turns, so the count they
-- compute from it is exact.
-- name: CampaignLockForGeneration :one
SELECT * FROM campaign WHERE id = $1 FOR UPDATE;

-- CampaignProgress counts a batch's codes and makes the campaign READY with
-- its last one, in the batch's transaction.
-- name: CampaignProgress :one
UPDATE campaign
SET generated_count = generated_count + sqlc.arg(n)::integer,
    status = CASE WHEN generated_count + sqlc.arg(n)::integer = code_count THEN 'READY' ELSE status END
WHERE id = $1 AND status = 'GENERATING'
RETURNING *;

-- name: CampaignFail :exec
UPDATE campaign SET status = 'FAILED', failure = sqlc.arg(failure)
WHERE id = $1 AND status = 'GENERATING';

-- CampaignCodeGet reads a campaign code with its campaign and the
-- campaign's voucher row, and the database's clock.
-- name: CampaignCodeGet :one
SELECT sqlc.embed(voucher), now()::timestamptz AS db_now,
       vc.code AS campaign_code, vc.use_limit, vc.used_count AS code_used, vc.confirmed_count AS code_confirmed,
       c.id AS campaign_id, c.status AS campaign_status
FROM voucher_code vc
JOIN campaign c ON c.id = vc.campaign_id
JOIN voucher ON voucher.code = c.voucher_code
WHERE vc.code = $1;

-- CampaignCodeOwner is the voucher row whose counters a code moves: its
-- own for a standalone voucher, its campaign's for a campaign code.
-- name: CampaignCodeOwner :one
SELECT coalesce(c.voucher_code, vc.code)::text AS voucher_code
FROM voucher_code vc LEFT JOIN campaign c ON c.id = vc.campaign_id
WHERE vc.code = $1;

-- CampaignCodeUseTake holds one use of a code if it has one left; no row
-- back means the code is used up.
-- name: CampaignCodeUseTake :one
UPDATE voucher_code SET used_count = used_count + 1
WHERE code = $1 AND used_count < use_limit
RETURNING used_count;

-- name: CampaignCodeUseConfirm :exec
UPDATE voucher_code SET confirmed_count = confirmed_count + 1 WHERE code = $1;

-- name: CampaignCodeUseGiveBack :exec
UPDATE voucher_code SET used_count = used_count - 1 WHERE code = $1;

-- CampaignCodeLockMany locks codes in code order (the fixed order of the
-- expiry sweep's batch) before CampaignCodeUsesGiveBack changes them.
-- name: CampaignCodeLockMany :exec
SELECT 1 FROM voucher_code
WHERE code = ANY(sqlc.arg(codes)::text[])
ORDER BY code
FOR NO KEY UPDATE;

-- name: CampaignCodeUsesGiveBack :exec
UPDATE voucher_code vc
SET used_count = vc.used_count - g.uses
FROM (SELECT unnest(sqlc.arg(codes)::text[]) AS code,
             unnest(sqlc.arg(uses)::integer[]) AS uses) AS g
WHERE vc.code = g.code;
