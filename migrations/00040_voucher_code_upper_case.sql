-- +goose Up

-- Voucher codes are case-insensitive: each is stored in capital letters and
-- every operation finds it in any case. Existing codes move to capitals,
-- with every table that names them; two codes that differ only in case
-- cannot both move, so the migration refuses (and the server does not
-- start) until an operator renames one of them.

-- +goose StatementBegin
DO $$
DECLARE
    clashes text;
BEGIN
    SELECT string_agg(codes, '; ') INTO clashes
    FROM (SELECT string_agg(code, ', ' ORDER BY code) AS codes
          FROM voucher GROUP BY upper(code) HAVING count(*) > 1) AS c;
    IF clashes IS NOT NULL THEN
        RAISE EXCEPTION 'voucher codes are now case-insensitive, and these codes differ only in case: %. Rename all but one of each group (UPDATE voucher SET code = ''NEW-CODE'' WHERE code = ''old-code''), then start again', clashes;
    END IF;
END
$$;
-- +goose StatementEnd

ALTER TABLE voucher DROP CONSTRAINT voucher_code_check;

-- voucher_customer, voucher_redemption, drift_report, voucher_audit and
-- voucher_sample follow through their ON UPDATE CASCADE foreign keys; the
-- append-only event log and the dead letters name codes without one.
UPDATE voucher SET code = upper(code) WHERE code <> upper(code);

ALTER TABLE reservation_event DISABLE TRIGGER reservation_event_no_change;
UPDATE reservation_event SET voucher_code = upper(voucher_code) WHERE voucher_code <> upper(voucher_code);
ALTER TABLE reservation_event ENABLE TRIGGER reservation_event_no_change;
UPDATE dead_letter SET voucher_code = upper(voucher_code) WHERE voucher_code <> upper(voucher_code);

ALTER TABLE voucher ADD CONSTRAINT voucher_code_check CHECK (code ~ '^[A-Z0-9_-]{1,32}$');

-- +goose Down
ALTER TABLE voucher DROP CONSTRAINT voucher_code_check;
ALTER TABLE voucher ADD CONSTRAINT voucher_code_check CHECK (code ~ '^[A-Za-z0-9_-]{1,32}$');
