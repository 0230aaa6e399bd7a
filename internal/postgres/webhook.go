package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// The webhooks' endpoints and deliveries. Events themselves are written by
// the database's triggers in the transaction of each change
// (migrations/00091_webhooks.sql); this file numbers, leases and records
// their deliveries.

var (
	_ voucher.WebhookStore         = (*Store)(nil)
	_ voucher.WebhookDeliveryStore = (*Store)(nil)
)

func webhookEndpointNotFound(id int64) error {
	return voucher.Errorf(voucher.NotFound, "no webhook endpoint with id %d", id)
}

// CreateWebhookEndpoint stores an endpoint and its audit row in one
// transaction.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e voucher.WebhookEndpoint, audit func(voucher.WebhookEndpoint) voucher.WebhookAuditEvent) (voucher.WebhookEndpoint, error) {
	var out voucher.WebhookEndpoint
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.WebhookEndpointInsert(ctx, db.WebhookEndpointInsertParams{Url: e.URL, Events: e.Events, Description: e.Description, Secret: e.Secret})
		if err != nil {
			return err
		}
		out = toWebhookEndpoint(row)
		return q.WebhookAuditInsert(ctx, webhookAuditParams(audit(out)))
	})
	if err != nil {
		return voucher.WebhookEndpoint{}, mapError(err)
	}
	return out, nil
}

// WebhookEndpoint reads one endpoint. Errors: NOT_FOUND.
func (s *Store) WebhookEndpoint(ctx context.Context, id int64) (voucher.WebhookEndpoint, error) {
	row, err := s.q.WebhookEndpointGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.WebhookEndpoint{}, webhookEndpointNotFound(id)
	}
	if err != nil {
		return voucher.WebhookEndpoint{}, mapError(err)
	}
	return toWebhookEndpoint(row), nil
}

// WebhookEndpoints lists endpoints newest first.
func (s *Store) WebhookEndpoints(ctx context.Context, limit int) ([]voucher.WebhookEndpoint, error) {
	rows, err := s.q.WebhookEndpointList(ctx, limit32(limit))
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.WebhookEndpoint, len(rows))
	for i, r := range rows {
		out[i] = toWebhookEndpoint(r)
	}
	return out, nil
}

// UpdateWebhookEndpoint changes what c gives, with its audit row. Errors:
// NOT_FOUND.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, id int64, c voucher.WebhookChange, audit func(before, after voucher.WebhookEndpoint) voucher.WebhookAuditEvent) (voucher.WebhookEndpoint, error) {
	var out voucher.WebhookEndpoint
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		before, err := q.WebhookEndpointGet(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return webhookEndpointNotFound(id)
		}
		if err != nil {
			return err
		}
		row, err := q.WebhookEndpointUpdate(ctx, db.WebhookEndpointUpdateParams{ID: id, Url: c.URL, Events: c.Events, Description: c.Description, Enabled: c.Enabled})
		if errors.Is(err, pgx.ErrNoRows) {
			return webhookEndpointNotFound(id) // deleted meanwhile
		}
		if err != nil {
			return err
		}
		out = toWebhookEndpoint(row)
		return q.WebhookAuditInsert(ctx, webhookAuditParams(audit(toWebhookEndpoint(before), out)))
	})
	if err != nil {
		return voucher.WebhookEndpoint{}, mapError(err)
	}
	return out, nil
}

// RotateWebhookSecret sets a new secret; the old one signs until
// previousUntil. Errors: NOT_FOUND.
func (s *Store) RotateWebhookSecret(ctx context.Context, id int64, secret string, previousUntil time.Time, audit func(voucher.WebhookEndpoint) voucher.WebhookAuditEvent) (voucher.WebhookEndpoint, error) {
	var out voucher.WebhookEndpoint
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.WebhookEndpointRotate(ctx, db.WebhookEndpointRotateParams{ID: id, Secret: secret, Until: &previousUntil})
		if errors.Is(err, pgx.ErrNoRows) {
			return webhookEndpointNotFound(id)
		}
		if err != nil {
			return err
		}
		out = toWebhookEndpoint(row)
		return q.WebhookAuditInsert(ctx, webhookAuditParams(audit(out)))
	})
	if err != nil {
		return voucher.WebhookEndpoint{}, mapError(err)
	}
	return out, nil
}

// DeleteWebhookEndpoint removes an endpoint and its deliveries. Errors:
// NOT_FOUND.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id int64, audit func(voucher.WebhookEndpoint) voucher.WebhookAuditEvent) (voucher.WebhookEndpoint, error) {
	var out voucher.WebhookEndpoint
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.WebhookEndpointDelete(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return webhookEndpointNotFound(id)
		}
		if err != nil {
			return err
		}
		out = toWebhookEndpoint(row)
		return q.WebhookAuditInsert(ctx, webhookAuditParams(audit(out)))
	})
	if err != nil {
		return voucher.WebhookEndpoint{}, mapError(err)
	}
	return out, nil
}

// ResendWebhookEvent makes an event's delivery to an endpoint due now.
// Errors: NOT_FOUND.
func (s *Store) ResendWebhookEvent(ctx context.Context, endpointID, eventID int64, audit voucher.WebhookAuditEvent) (voucher.WebhookDelivery, error) {
	var out voucher.WebhookDelivery
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		e, err := q.WebhookEndpointGet(ctx, endpointID)
		if errors.Is(err, pgx.ErrNoRows) {
			return webhookEndpointNotFound(endpointID)
		}
		if err != nil {
			return err
		}
		ev, err := q.WebhookEventGet(ctx, eventID)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && ev.Sequence == nil) {
			// Not committed, or not numbered yet: not an event to send.
			return voucher.Errorf(voucher.NotFound, "no event %s", voucher.WebhookEventID(eventID))
		}
		if err != nil {
			return err
		}
		row, err := q.WebhookDeliveryResend(ctx, db.WebhookDeliveryResendParams{EndpointID: endpointID, EventID: eventID})
		if err != nil {
			return err
		}
		out = toWebhookDelivery(row, ev.Type)
		audit.URL = e.Url
		return q.WebhookAuditInsert(ctx, webhookAuditParams(audit))
	})
	if err != nil {
		return voucher.WebhookDelivery{}, mapError(err)
	}
	return out, nil
}

// SendWebhookTest records a test event and its delivery to the endpoint.
// Errors: NOT_FOUND.
func (s *Store) SendWebhookTest(ctx context.Context, endpointID int64, audit voucher.WebhookAuditEvent) (voucher.WebhookDelivery, error) {
	var out voucher.WebhookDelivery
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		e, err := q.WebhookEndpointGet(ctx, endpointID)
		if errors.Is(err, pgx.ErrNoRows) {
			return webhookEndpointNotFound(endpointID)
		}
		if err != nil {
			return err
		}
		row, err := q.WebhookEventInsertTest(ctx, endpointID)
		if err != nil {
			return err
		}
		out = toWebhookDelivery(row, "webhook.test")
		audit.URL = e.Url
		return q.WebhookAuditInsert(ctx, webhookAuditParams(audit))
	})
	if err != nil {
		return voucher.WebhookDelivery{}, mapError(err)
	}
	return out, nil
}

// WebhookDeliveries pages an endpoint's deliveries newest first.
func (s *Store) WebhookDeliveries(ctx context.Context, endpointID int64, first int, after int64) (voucher.WebhookDeliveryPage, error) {
	rows, err := s.q.WebhookDeliveryPage(ctx, db.WebhookDeliveryPageParams{EndpointID: endpointID, After: after, MaxRows: limit32(first + 1)})
	if err != nil {
		return voucher.WebhookDeliveryPage{}, mapError(err)
	}
	page := voucher.WebhookDeliveryPage{HasNext: len(rows) > first}
	if page.HasNext {
		rows = rows[:first]
	}
	for _, r := range rows {
		page.Deliveries = append(page.Deliveries, toWebhookDelivery(db.WebhookDelivery{
			ID: r.ID, EndpointID: r.EndpointID, EventID: r.EventID, Status: r.Status, Attempts: r.Attempts,
			LastStatusCode: r.LastStatusCode, LastError: r.LastError, LastAttemptAt: r.LastAttemptAt,
			NextAttemptAt: r.NextAttemptAt, CreatedAt: r.CreatedAt,
		}, r.EventType))
	}
	return page, nil
}

// WebhookAudit lists the latest changes of endpoints.
func (s *Store) WebhookAudit(ctx context.Context, limit int) ([]voucher.WebhookAuditEvent, error) {
	rows, err := s.q.WebhookAuditList(ctx, limit32(limit))
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.WebhookAuditEvent, len(rows))
	for i, r := range rows {
		out[i] = voucher.WebhookAuditEvent{EndpointID: r.EndpointID, URL: r.Url, Actor: r.Actor, ActorRole: r.ActorRole, Action: r.Action, Detail: r.Detail, OccurredAt: r.OccurredAt}
	}
	return out, nil
}

// DispatchWebhookEvents numbers up to max committed events and makes their
// deliveries (WebhookEventDispatch), in one statement.
func (s *Store) DispatchWebhookEvents(ctx context.Context, max int) (int, error) {
	row, err := s.q.WebhookEventDispatch(ctx, limit32(max))
	if err != nil {
		return 0, mapError(err)
	}
	return int(row.Events), nil
}

// ClaimWebhookDeliveries leases up to max due deliveries.
func (s *Store) ClaimWebhookDeliveries(ctx context.Context, max int, lease time.Duration) ([]voucher.WebhookAttempt, error) {
	rows, err := s.q.WebhookDeliveryClaim(ctx, db.WebhookDeliveryClaimParams{MaxDeliveries: limit32(max), LeaseSeconds: lease.Seconds()})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.WebhookAttempt, len(rows))
	for i, r := range rows {
		var seq int64
		if r.Sequence != nil {
			seq = *r.Sequence
		}
		out[i] = voucher.WebhookAttempt{
			DeliveryID: r.ID, Attempts: int(r.Attempts), DeliveryMade: r.CreatedAt, FirstAttempt: r.FirstAttemptAt, ClaimedAt: r.ClaimedAt,
			EventID: r.EventID, VoucherCode: r.VoucherCode, Sequence: seq, Type: r.Type, Data: r.Data, EventCreatedAt: r.EventCreatedAt,
			EndpointID: r.EndpointID, URL: r.Url, Secret: r.Secret, PreviousSecret: r.PreviousSecret, PreviousUntil: r.PreviousSecretUntil,
		}
	}
	return out, nil
}

// FinishWebhookDelivery records an attempt and its endpoint's streak in
// one transaction (the endpoint's row after the delivery's, as every
// writer of both).
func (s *Store) FinishWebhookDelivery(ctx context.Context, o voucher.WebhookOutcome, failingFor time.Duration) (bool, error) {
	var code *int32
	if o.StatusCode != nil {
		c := limit32(*o.StatusCode)
		code = &c
	}
	var disabled bool
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		attempted := o.AttemptedAt
		if err := q.WebhookDeliveryFinish(ctx, db.WebhookDeliveryFinishParams{
			ID: o.DeliveryID, Status: string(o.Status), LastStatusCode: code, LastError: o.Error,
			AttemptedAt: &attempted, NextAttemptAt: o.NextAt,
		}); err != nil {
			return err
		}
		if o.Status == voucher.WebhookDelivered {
			return q.WebhookEndpointSucceeded(ctx, o.EndpointID)
		}
		reason := fmt.Sprintf("every delivery failed for %s", failingFor)
		// The streak is measured on the database's clock, as the window
		// is (now() in the query): from the attempt's claim; an outcome
		// without one (a caller outside the worker), from its start.
		streak := o.ClaimedAt
		if streak.IsZero() {
			streak = attempted
		}
		row, err := q.WebhookEndpointFailed(ctx, db.WebhookEndpointFailedParams{
			EndpointID: o.EndpointID, ClaimedAt: streak, WindowSeconds: failingFor.Seconds(), SpentSince: o.SpentSince, Reason: reason,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		if disabled = row.JustDisabled; disabled {
			return q.WebhookAuditInsert(ctx, db.WebhookAuditInsertParams{
				EndpointID: row.ID, Url: row.Url, Actor: "server", ActorRole: "server", Action: voucher.AuditWebhookDisabledByServer, Detail: reason,
			})
		}
		return nil
	})
	if err != nil {
		return false, mapError(err)
	}
	return disabled, nil
}

// WebhookBacklog reads the deliveries' backlog for the metrics.
func (s *Store) WebhookBacklog(ctx context.Context) (voucher.WebhookBacklog, error) {
	row, err := s.q.WebhookDeliveryBacklog(ctx)
	if err != nil {
		return voucher.WebhookBacklog{}, mapError(err)
	}
	return voucher.WebhookBacklog{
		Pending:           int(row.Pending),
		OldestPending:     time.Duration(row.OldestSeconds * float64(time.Second)),
		DisabledEndpoints: int(row.Disabled),
	}, nil
}

// WebhookEvents lists a voucher code's events in id order, for tests and
// operators.
func (s *Store) WebhookEvents(ctx context.Context, code string) ([]db.WebhookEvent, error) {
	rows, err := s.q.WebhookEventListByVoucher(ctx, &code)
	return rows, mapError(err)
}

func toWebhookEndpoint(r db.WebhookEndpoint) voucher.WebhookEndpoint {
	return voucher.WebhookEndpoint{
		ID: r.ID, URL: r.Url, Events: r.Events, Description: r.Description, Enabled: r.Enabled,
		DisabledReason: r.DisabledReason, CreatedAt: r.CreatedAt, Secret: r.Secret,
		PreviousSecret: r.PreviousSecret, PreviousUntil: r.PreviousSecretUntil,
	}
}

func toWebhookDelivery(r db.WebhookDelivery, eventType string) voucher.WebhookDelivery {
	d := voucher.WebhookDelivery{
		ID: r.ID, EndpointID: r.EndpointID, EventID: r.EventID, EventType: eventType,
		Status: voucher.WebhookDeliveryStatus(r.Status), Attempts: int(r.Attempts),
		LastError: r.LastError, LastAttemptAt: r.LastAttemptAt,
	}
	if r.LastStatusCode != nil {
		c := int(*r.LastStatusCode)
		d.LastStatusCode = &c
	}
	if d.Status == voucher.WebhookPending {
		next := r.NextAttemptAt
		d.NextAttemptAt = &next
	}
	return d
}

func webhookAuditParams(e voucher.WebhookAuditEvent) db.WebhookAuditInsertParams {
	return db.WebhookAuditInsertParams{EndpointID: e.EndpointID, Url: e.URL, Actor: e.Actor, ActorRole: e.ActorRole, Action: e.Action, Detail: e.Detail}
}
