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
       vc.code AS campaign_code, vc.use_limit, vc.used_count AS code_used, vc.confirmed_count AS code_confirmed, vc.rolled_back_count AS code_rolled_back,
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

-- name: CampaignCodeUseConfirm :exec
UPDATE voucher_code SET confirmed_count = confirmed_count + 1 WHERE code = $1;

-- CampaignCodeLockMany locks codes in code order (the fixed order of every
-- writer of several codes: the expiry sweep's batch before
-- CampaignCodeUsesGiveBack, a batch of winners before CampaignCodeUsesTake)
-- and returns how many uses each has left: a batch of a campaign's winners
-- that names a code more times than that sets aside only the ones past it.
-- name: CampaignCodeLockMany :many
SELECT code, use_limit - used_count AS uses_left FROM voucher_code
WHERE code = ANY(sqlc.arg(codes)::text[])
ORDER BY code
FOR NO KEY UPDATE;

-- CampaignCodeUsesGiveBack gives codes' uses back: uses of them in all,
-- rolled_back of which were confirmed uses rolled back.
-- name: CampaignCodeUsesGiveBack :exec
UPDATE voucher_code vc
SET used_count = vc.used_count - g.uses,
    confirmed_count = vc.confirmed_count - g.rolled_back,
    rolled_back_count = vc.rolled_back_count + g.rolled_back
FROM (SELECT unnest(sqlc.arg(codes)::text[]) AS code,
             unnest(sqlc.arg(uses)::integer[]) AS uses,
             unnest(sqlc.arg(rolled_back)::integer[]) AS rolled_back) AS g
WHERE vc.code = g.code;

-- CampaignOfCode reads which campaign a code is of, its status and whether
-- it is flash (the flash path's lookup of a code it has not seen).
-- name: CampaignOfCode :one
SELECT c.id, c.status, v.flash
FROM voucher_code vc
JOIN campaign c ON c.id = vc.campaign_id
JOIN voucher v ON v.code = c.voucher_code
WHERE vc.code = $1;

-- CampaignGateTerms reads what a campaign's gate holds besides a voucher's:
-- its uses per code (no row: the voucher row is no campaign's).
-- name: CampaignGateTerms :one
SELECT id, uses_per_code FROM campaign WHERE voucher_code = $1;

-- CampaignGateCodeUses lists the codes of a campaign that have uses held or
-- confirmed, for its gate (the others need no field there).
-- name: CampaignGateCodeUses :many
SELECT code, used_count FROM voucher_code
WHERE campaign_id = $1 AND used_count > 0;

-- CampaignGateOrderCodes lists the code each live order of a campaign
-- holds a use of, for its gate.
-- name: CampaignGateOrderCodes :many
SELECT order_id, campaign_code::text AS campaign_code FROM voucher_redemption
WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED') AND campaign_code IS NOT NULL;

-- CampaignRedemptionClaimEligible is VoucherRedemptionClaimEligible for a
-- batch of reserves of a campaign's codes (campaign_codes[i] for
-- order_ids[i]): a row names the campaign's voucher row and the code; an
-- order whose code is not of this READY campaign gets no row back either;
-- created_ms as there.
-- name: CampaignRedemptionClaimEligible :many
INSERT INTO voucher_redemption (order_id, voucher_code, campaign_code, customer_id, order_amount, discount_amount, status, created_at, expires_at, position)
SELECT o.order_id, v.code, vc.code, o.customer_id, o.order_amount, o.discount_amount, 'RESERVED', o.created_at,
       o.created_at + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond', 0
FROM (SELECT x.*, CASE WHEN x.created_ms > 0 THEN to_timestamp(x.created_ms::double precision / 1000) ELSE now() END AS created_at
      FROM (SELECT unnest(sqlc.arg(order_ids)::text[]) AS order_id,
                   unnest(sqlc.arg(campaign_codes)::text[]) AS campaign_code,
                   unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
                   unnest(sqlc.arg(order_amounts)::bigint[]) AS order_amount,
                   unnest(sqlc.arg(discount_amounts)::bigint[]) AS discount_amount,
                   unnest(sqlc.arg(created_ms)::bigint[]) AS created_ms) AS x) AS o
JOIN voucher v ON v.code = sqlc.arg(code)
JOIN campaign c ON c.voucher_code = v.code AND c.status = 'READY'
JOIN voucher_code vc ON vc.code = o.campaign_code AND vc.campaign_id = c.id
WHERE now() BETWEEN v.starts_at AND v.ends_at
  AND o.order_amount >= v.min_order_amount
ORDER BY o.order_id
ON CONFLICT (order_id) DO NOTHING
RETURNING *;

-- CampaignCodeUsesTake holds uses[i] more of codes[i] (each code once,
-- locked before by CampaignCodeLockMany) where that many are left; a code
-- without them gets no row back.
-- name: CampaignCodeUsesTake :many
UPDATE voucher_code vc
SET used_count = vc.used_count + g.uses
FROM (SELECT unnest(sqlc.arg(codes)::text[]) AS code,
             unnest(sqlc.arg(uses)::integer[]) AS uses) AS g
WHERE vc.code = g.code AND vc.used_count + g.uses <= vc.use_limit
RETURNING vc.code;
