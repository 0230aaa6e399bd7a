-- +goose Up
-- Signed webhooks from an outbox (docs/webhooks.md).
--
-- webhook_event is the outbox: a row is written by a trigger in the
-- transaction of the change it reports (below), so an event exists exactly
-- when its change committed. sequence is NULL until the dispatcher numbers
-- it after the commit (internal/webhook): numbering in the change's
-- transaction would put a second hot row per voucher on the sale's path,
-- locked before the voucher's row (the event comes before the use in the
-- lock order of every writer) and after it by an admin's change, a
-- deadlock. Only committed rows get a number, each voucher's from 1 in
-- id order, so a voucher's sequence has no gap.
CREATE TABLE webhook_event (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The code the change is about: a campaign code's reservation names the
    -- code used, a campaign its row ~C<id>; NULL for a test event.
    voucher_code text,
    sequence     bigint      CHECK (sequence >= 0),
    type         text        NOT NULL,
    data         jsonb       NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT webhook_event_sequence_unique UNIQUE (voucher_code, sequence)
);

-- The dispatcher's queue: committed events not numbered yet.
CREATE INDEX webhook_event_unsequenced_idx ON webhook_event (id) WHERE sequence IS NULL;

-- Each voucher code's last sequence number given.
CREATE TABLE webhook_sequence (
    voucher_code  text   PRIMARY KEY,
    last_sequence bigint NOT NULL CHECK (last_sequence >= 1)
);

-- An endpoint's secret is kept as it is (not hashed): the server signs with
-- it. previous_secret signs too until previous_secret_until (a rotation).
-- failing_since: the first failed attempt since the last success; past the
-- retry window the endpoint is disabled with disabled_reason.
CREATE TABLE webhook_endpoint (
    id                    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url                   text        NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    events                text[]      NOT NULL CHECK (cardinality(events) >= 1),
    description           text        CHECK (length(description) <= 500),
    enabled               boolean     NOT NULL DEFAULT true,
    disabled_reason       text,
    secret                text        NOT NULL,
    previous_secret       text,
    previous_secret_until timestamptz,
    failing_since         timestamptz,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One event to one endpoint. next_attempt_at is also the lease: a worker
-- that takes a delivery moves it past its attempt's timeout, so a delivery
-- whose worker died is due again then (at least once).
CREATE TABLE webhook_delivery (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id      bigint      NOT NULL REFERENCES webhook_endpoint (id) ON DELETE CASCADE,
    event_id         bigint      NOT NULL REFERENCES webhook_event (id) ON DELETE CASCADE,
    status           text        NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_status_code integer,
    last_error       text,
    last_attempt_at  timestamptz,
    next_attempt_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT webhook_delivery_once UNIQUE (endpoint_id, event_id)
);

CREATE INDEX webhook_delivery_due_idx ON webhook_delivery (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX webhook_delivery_endpoint_idx ON webhook_delivery (endpoint_id, id DESC);

-- Who changed an endpoint, when; the URL is copied so a line reads the same
-- after a delete.
CREATE TABLE webhook_audit (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id bigint      NOT NULL,
    url         text        NOT NULL,
    actor       text        NOT NULL,
    actor_role  text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('created', 'updated', 'enabled', 'disabled', 'secret-rotated',
                                                       'deleted', 'resent', 'tested', 'disabled-by-server')),
    detail      text        NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX webhook_audit_latest_idx ON webhook_audit (id DESC);

-- The writers of the outbox: one trigger per rule, whichever path (request,
-- batch, Kafka consumer, sweep, dashboard, API) made the change.

-- Reservations: every change of a reservation already appends to
-- reservation_event in its transaction (ReservationEventInsertMany, the
-- one writer); one statement's rows become one INSERT here.
-- +goose StatementBegin
CREATE FUNCTION webhook_reservation_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_event (voucher_code, type, data, created_at)
    SELECT coalesce(r.campaign_code, e.voucher_code),
           CASE e.kind WHEN 'reserved' THEN 'reservation.reserved'
                       WHEN 'confirmed' THEN 'reservation.confirmed'
                       WHEN 'rolled_back' THEN 'reservation.rolled_back'
                       ELSE 'reservation.released' END,
           jsonb_strip_nulls(jsonb_build_object(
               'orderId', e.order_id,
               'customerId', e.customer_id::text,
               'status', CASE e.kind WHEN 'reserved' THEN 'RESERVED' WHEN 'confirmed' THEN 'CONFIRMED'
                                     WHEN 'rolled_back' THEN 'ROLLED_BACK' ELSE 'RELEASED' END,
               'orderAmount', r.order_amount,
               'discountAmount', r.discount_amount,
               'expiresAt', r.expires_at,
               'reason', CASE e.kind WHEN 'released' THEN 'released' WHEN 'expired' THEN 'expired'
                                     WHEN 'rolled_back' THEN r.rollback_reason END)),
           e.occurred_at
    FROM reservation_event_added e
    LEFT JOIN voucher_redemption r ON r.order_id = e.order_id
    ORDER BY e.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER webhook_reservation_events
    AFTER INSERT ON reservation_event
    REFERENCING NEW TABLE AS reservation_event_added
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_reservation_events();

-- Vouchers: created (a campaign's row ~C<id> is announced by
-- campaign.ready instead); updated when its terms change; ended when its
-- window is closed now (endVoucher, the dashboard's End); sold out when a
-- take makes used_count reach total_limit. The WHEN clauses are evaluated
-- without calling the function, so the sale's updates of the counts cost
-- a comparison.
-- +goose StatementBegin
CREATE FUNCTION webhook_voucher_terms(v voucher) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'discountType', v.discount_type, 'discountAmount', v.discount_amount,
        'discountPercent', v.discount_percent, 'maxDiscountAmount', v.max_discount_amount,
        'currency', v.currency, 'budgetAmount', v.budget_amount, 'minOrderAmount', v.min_order_amount,
        'totalLimit', v.total_limit, 'perUserLimit', v.per_user_limit,
        'startsAt', v.starts_at, 'endsAt', v.ends_at, 'flash', v.flash));
$$;

CREATE FUNCTION webhook_voucher_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO webhook_event (voucher_code, type, data) VALUES (NEW.code, 'voucher.created', webhook_voucher_terms(NEW));
    ELSIF TG_ARGV[0] = 'sold_out' THEN
        INSERT INTO webhook_event (voucher_code, type, data)
        VALUES (NEW.code, 'voucher.sold_out', jsonb_build_object('totalLimit', NEW.total_limit, 'usedCount', NEW.used_count));
    ELSIF NEW.ends_at <> OLD.ends_at AND NEW.ends_at <= now() AND OLD.ends_at > now() THEN
        INSERT INTO webhook_event (voucher_code, type, data) VALUES (NEW.code, 'voucher.ended', webhook_voucher_terms(NEW));
    ELSE
        INSERT INTO webhook_event (voucher_code, type, data)
        VALUES (NEW.code, 'voucher.updated', webhook_voucher_terms(NEW) ||
                CASE WHEN NEW.code <> OLD.code THEN jsonb_build_object('previousCode', OLD.code) ELSE '{}' END);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER webhook_voucher_created
    AFTER INSERT ON voucher
    FOR EACH ROW WHEN (NEW.code NOT LIKE '~%')
    EXECUTE FUNCTION webhook_voucher_events();

CREATE TRIGGER webhook_voucher_changed
    AFTER UPDATE ON voucher
    FOR EACH ROW WHEN (NEW.code NOT LIKE '~%' AND
        (OLD.code, OLD.discount_type, OLD.discount_amount, OLD.discount_percent, OLD.max_discount_amount,
         OLD.currency, OLD.budget_amount, OLD.min_order_amount, OLD.total_limit, OLD.per_user_limit,
         OLD.starts_at, OLD.ends_at, OLD.flash)
        IS DISTINCT FROM
        (NEW.code, NEW.discount_type, NEW.discount_amount, NEW.discount_percent, NEW.max_discount_amount,
         NEW.currency, NEW.budget_amount, NEW.min_order_amount, NEW.total_limit, NEW.per_user_limit,
         NEW.starts_at, NEW.ends_at, NEW.flash))
    EXECUTE FUNCTION webhook_voucher_events();

CREATE TRIGGER webhook_voucher_sold_out
    AFTER UPDATE OF used_count ON voucher
    FOR EACH ROW WHEN (NEW.used_count >= NEW.total_limit AND OLD.used_count < NEW.used_count)
    EXECUTE FUNCTION webhook_voucher_events('sold_out');

-- Campaigns: READY once every code is generated.
-- +goose StatementBegin
CREATE FUNCTION webhook_campaign_ready() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_event (voucher_code, type, data)
    VALUES (NEW.voucher_code, 'campaign.ready',
            jsonb_build_object('campaignId', NEW.id::text, 'name', NEW.name, 'codeCount', NEW.code_count));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER webhook_campaign_ready
    AFTER UPDATE OF status ON campaign
    FOR EACH ROW WHEN (NEW.status = 'READY' AND OLD.status <> 'READY')
    EXECUTE FUNCTION webhook_campaign_ready();

-- Drift: every reconciliation report that raises the alert.
-- +goose StatementBegin
CREATE FUNCTION webhook_drift_alert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_event (voucher_code, type, data)
    VALUES (NEW.voucher_code, 'drift.alert', jsonb_build_object(
        'drift', NEW.drift, 'databaseRemaining', NEW.database_remaining, 'gateRemaining', NEW.gate_remaining,
        'inFlight', NEW.in_flight, 'repaired', NEW.repaired, 'checkedAt', NEW.checked_at));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER webhook_drift_alert
    AFTER INSERT ON drift_report
    FOR EACH ROW WHEN (NEW.alert)
    EXECUTE FUNCTION webhook_drift_alert();

-- +goose Down
DROP TRIGGER webhook_drift_alert ON drift_report;
DROP FUNCTION webhook_drift_alert();
DROP TRIGGER webhook_campaign_ready ON campaign;
DROP FUNCTION webhook_campaign_ready();
DROP TRIGGER webhook_voucher_sold_out ON voucher;
DROP TRIGGER webhook_voucher_changed ON voucher;
DROP TRIGGER webhook_voucher_created ON voucher;
DROP FUNCTION webhook_voucher_events();
DROP FUNCTION webhook_voucher_terms(voucher);
DROP TRIGGER webhook_reservation_events ON reservation_event;
DROP FUNCTION webhook_reservation_events();
DROP TABLE webhook_audit;
DROP TABLE webhook_delivery;
DROP TABLE webhook_endpoint;
DROP TABLE webhook_sequence;
DROP TABLE webhook_event;
