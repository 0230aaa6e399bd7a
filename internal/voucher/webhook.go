package voucher

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Webhooks: admins register endpoints; every change of a voucher or a
// reservation is an event in an outbox written in the change's
// transaction (the database's triggers, migrations/00091_webhooks.sql),
// delivered signed by internal/webhook. docs/webhooks.md is the reference.

// WebhookEventTypes are the event types an endpoint may ask for ("*": all).
var WebhookEventTypes = []string{
	"reservation.reserved", "reservation.confirmed", "reservation.released", "reservation.rolled_back",
	"voucher.created", "voucher.updated", "voucher.ended", "voucher.sold_out",
	"campaign.ready", "drift.alert",
}

// WebhookSecretPrefix begins every signing secret.
const WebhookSecretPrefix = "whsec_"

// WebhookRotationOverlap is how long a rotated secret still signs.
const WebhookRotationOverlap = 24 * time.Hour

// WebhookDeliveryStatus is a delivery's state.
type WebhookDeliveryStatus string

// The delivery states.
const (
	WebhookPending   WebhookDeliveryStatus = "PENDING"
	WebhookDelivered WebhookDeliveryStatus = "DELIVERED"
	WebhookFailed    WebhookDeliveryStatus = "FAILED" // retries spent
)

// WebhookEndpoint is a receiver of events.
type WebhookEndpoint struct {
	ID             int64
	URL            string
	Events         []string
	Description    *string
	Enabled        bool
	DisabledReason *string // set when the server disabled it
	CreatedAt      time.Time
	// Secret and PreviousSecret sign deliveries (PreviousSecret until
	// PreviousUntil); never shown but in the answer of create and rotate.
	Secret         string
	PreviousSecret *string
	PreviousUntil  *time.Time
}

// NewWebhookEndpoint is createWebhookEndpoint's input.
type NewWebhookEndpoint struct {
	URL         string
	Events      []string
	Description *string
}

// WebhookChange is updateWebhookEndpoint's input: nil keeps a value.
type WebhookChange struct {
	URL         *string
	Events      []string // nil keeps them
	Enabled     *bool
	Description *string
}

// WebhookDelivery is one event's delivery to one endpoint.
type WebhookDelivery struct {
	ID             int64
	EndpointID     int64
	EventID        int64
	EventType      string
	Status         WebhookDeliveryStatus
	Attempts       int
	LastStatusCode *int
	LastError      *string
	LastAttemptAt  *time.Time
	NextAttemptAt  *time.Time // nil unless PENDING
}

// WebhookDeliveryPage is a page of deliveries, newest first.
type WebhookDeliveryPage struct {
	Deliveries []WebhookDelivery
	HasNext    bool
}

// WebhookAuditEvent is one admin's change of an endpoint, or the server's
// disabling of one.
type WebhookAuditEvent struct {
	EndpointID int64
	URL        string
	Actor      string
	ActorRole  string
	Action     string
	Detail     string
	OccurredAt time.Time
}

// The webhook audit actions.
const (
	AuditWebhookCreated          = "created"
	AuditWebhookUpdated          = "updated"
	AuditWebhookEnabled          = "enabled"
	AuditWebhookDisabled         = "disabled"
	AuditWebhookRotated          = "secret-rotated"
	AuditWebhookDeleted          = "deleted"
	AuditWebhookResent           = "resent"
	AuditWebhookTested           = "tested"
	AuditWebhookDisabledByServer = "disabled-by-server"
)

// WebhookEventID is an event's id as receivers see it.
func WebhookEventID(id int64) string { return "evt_" + strconv.FormatInt(id, 10) }

// ParseWebhookEventID reads an id WebhookEventID made (or its bare number).
func ParseWebhookEventID(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(s), "evt_"), 10, 64)
	return n, err == nil && n > 0
}

// WebhookStore keeps endpoints, deliveries and their audit; each change and
// its audit row in one transaction.
type WebhookStore interface {
	// CreateWebhookEndpoint stores e (its secret set).
	CreateWebhookEndpoint(ctx context.Context, e WebhookEndpoint, audit func(WebhookEndpoint) WebhookAuditEvent) (WebhookEndpoint, error)
	// WebhookEndpoint: NOT_FOUND.
	WebhookEndpoint(ctx context.Context, id int64) (WebhookEndpoint, error)
	WebhookEndpoints(ctx context.Context, limit int) ([]WebhookEndpoint, error)
	// UpdateWebhookEndpoint: NOT_FOUND.
	UpdateWebhookEndpoint(ctx context.Context, id int64, c WebhookChange, audit func(before, after WebhookEndpoint) WebhookAuditEvent) (WebhookEndpoint, error)
	// RotateWebhookSecret: NOT_FOUND.
	RotateWebhookSecret(ctx context.Context, id int64, secret string, previousUntil time.Time, audit func(WebhookEndpoint) WebhookAuditEvent) (WebhookEndpoint, error)
	// DeleteWebhookEndpoint drops it and its deliveries: NOT_FOUND.
	DeleteWebhookEndpoint(ctx context.Context, id int64, audit func(WebhookEndpoint) WebhookAuditEvent) (WebhookEndpoint, error)
	// ResendWebhookEvent makes the event's delivery to the endpoint due
	// now: NOT_FOUND (endpoint or event).
	ResendWebhookEvent(ctx context.Context, endpointID, eventID int64, audit WebhookAuditEvent) (WebhookDelivery, error)
	// SendWebhookTest records a test event for the endpoint and its
	// delivery: NOT_FOUND.
	SendWebhookTest(ctx context.Context, endpointID int64, audit WebhookAuditEvent) (WebhookDelivery, error)
	// WebhookDeliveries pages an endpoint's deliveries newest first, after
	// the delivery id after (0: the newest).
	WebhookDeliveries(ctx context.Context, endpointID int64, first int, after int64) (WebhookDeliveryPage, error)
	WebhookAudit(ctx context.Context, limit int) ([]WebhookAuditEvent, error)
}

// WebhookURLCheck refuses a URL that deliveries may not go to
// (INVALID_INPUT, field url); internal/webhook.Guard is the server's.
type WebhookURLCheck func(ctx context.Context, url string) error

// Webhooks is the admin side of webhooks (GraphQL and the dashboard).
type Webhooks struct {
	store    WebhookStore
	checkURL WebhookURLCheck
	now      func() time.Time
}

// NewWebhooks returns the webhook operations over store; checkURL judges
// every URL an admin gives.
func NewWebhooks(store WebhookStore, checkURL WebhookURLCheck) *Webhooks {
	return &Webhooks{store: store, checkURL: checkURL, now: time.Now}
}

// WebhookEndpointListLimit bounds the endpoints listed.
const WebhookEndpointListLimit = 200

// CreatedWebhookEndpoint is a new endpoint with its secret, shown once.
type CreatedWebhookEndpoint struct {
	Endpoint WebhookEndpoint
	Secret   string
}

// Create adds an endpoint with a new secret. Errors: FORBIDDEN,
// INVALID_INPUT (url, events, description).
func (w *Webhooks) Create(ctx context.Context, n NewWebhookEndpoint) (CreatedWebhookEndpoint, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return CreatedWebhookEndpoint{}, err
	}
	events, err := w.validate(ctx, n.URL, n.Events, n.Description, "input.")
	if err != nil {
		return CreatedWebhookEndpoint{}, err
	}
	secret := WebhookSecretPrefix + randomToken()
	e, err := w.store.CreateWebhookEndpoint(ctx, WebhookEndpoint{
		URL: strings.TrimSpace(n.URL), Events: events, Description: n.Description, Enabled: true, Secret: secret,
	}, func(e WebhookEndpoint) WebhookAuditEvent {
		return webhookAuditOf(ctx, e, AuditWebhookCreated, "events "+strings.Join(e.Events, ","))
	})
	if err != nil {
		return CreatedWebhookEndpoint{}, err
	}
	return CreatedWebhookEndpoint{Endpoint: e, Secret: secret}, nil
}

// Update changes what c gives. Errors: FORBIDDEN, NOT_FOUND, INVALID_INPUT.
func (w *Webhooks) Update(ctx context.Context, id string, c WebhookChange) (WebhookEndpoint, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return WebhookEndpoint{}, err
	}
	n, err := parseEndpointID("input.id", id)
	if err != nil {
		return WebhookEndpoint{}, err
	}
	if c.URL != nil {
		trimmed := strings.TrimSpace(*c.URL)
		if err := w.validateURL(ctx, trimmed, "input.url"); err != nil {
			return WebhookEndpoint{}, err
		}
		c.URL = &trimmed
	}
	if c.Events != nil {
		if c.Events, err = validateEvents(c.Events, "input.events"); err != nil {
			return WebhookEndpoint{}, err
		}
	}
	if err := validateDescription(c.Description, "input.description"); err != nil {
		return WebhookEndpoint{}, err
	}
	return w.store.UpdateWebhookEndpoint(ctx, n, c, func(before, after WebhookEndpoint) WebhookAuditEvent {
		action := AuditWebhookUpdated
		switch {
		case !before.Enabled && after.Enabled:
			action = AuditWebhookEnabled
		case before.Enabled && !after.Enabled:
			action = AuditWebhookDisabled
		}
		return webhookAuditOf(ctx, after, action, describeEndpoint(after))
	})
}

// Rotate gives the endpoint a new secret; the old one signs too for
// WebhookRotationOverlap. Errors: FORBIDDEN, NOT_FOUND, INVALID_INPUT (id).
func (w *Webhooks) Rotate(ctx context.Context, id string) (CreatedWebhookEndpoint, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return CreatedWebhookEndpoint{}, err
	}
	n, err := parseEndpointID("id", id)
	if err != nil {
		return CreatedWebhookEndpoint{}, err
	}
	secret := WebhookSecretPrefix + randomToken()
	e, err := w.store.RotateWebhookSecret(ctx, n, secret, w.now().Add(WebhookRotationOverlap), func(e WebhookEndpoint) WebhookAuditEvent {
		return webhookAuditOf(ctx, e, AuditWebhookRotated, "the old secret signs until "+stamp(w.now().Add(WebhookRotationOverlap)))
	})
	if err != nil {
		return CreatedWebhookEndpoint{}, err
	}
	return CreatedWebhookEndpoint{Endpoint: e, Secret: secret}, nil
}

// Delete removes the endpoint and its pending deliveries. Errors:
// FORBIDDEN, NOT_FOUND, INVALID_INPUT (id).
func (w *Webhooks) Delete(ctx context.Context, id string) (WebhookEndpoint, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return WebhookEndpoint{}, err
	}
	n, err := parseEndpointID("id", id)
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return w.store.DeleteWebhookEndpoint(ctx, n, func(e WebhookEndpoint) WebhookAuditEvent {
		return webhookAuditOf(ctx, e, AuditWebhookDeleted, "")
	})
}

// Resend delivers one event to one endpoint again, now. Errors: FORBIDDEN,
// NOT_FOUND, INVALID_INPUT (endpointId, eventId).
func (w *Webhooks) Resend(ctx context.Context, endpointID, eventID string) (WebhookDelivery, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return WebhookDelivery{}, err
	}
	n, err := parseEndpointID("endpointId", endpointID)
	if err != nil {
		return WebhookDelivery{}, err
	}
	ev, ok := ParseWebhookEventID(eventID)
	if !ok {
		return WebhookDelivery{}, Invalid("eventId", "eventId must be an event's id (evt_...)")
	}
	audit := webhookAuditOf(ctx, WebhookEndpoint{ID: n}, AuditWebhookResent, WebhookEventID(ev))
	return w.store.ResendWebhookEvent(ctx, n, ev, audit)
}

// SendTest sends a webhook.test event to the endpoint. Errors: FORBIDDEN,
// NOT_FOUND, INVALID_INPUT (id).
func (w *Webhooks) SendTest(ctx context.Context, id string) (WebhookDelivery, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return WebhookDelivery{}, err
	}
	n, err := parseEndpointID("id", id)
	if err != nil {
		return WebhookDelivery{}, err
	}
	return w.store.SendWebhookTest(ctx, n, webhookAuditOf(ctx, WebhookEndpoint{ID: n}, AuditWebhookTested, ""))
}

// Endpoints lists the endpoints, newest first. Errors: FORBIDDEN.
func (w *Webhooks) Endpoints(ctx context.Context) ([]WebhookEndpoint, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return nil, err
	}
	return w.store.WebhookEndpoints(ctx, WebhookEndpointListLimit)
}

// Endpoint reads one endpoint. Errors: FORBIDDEN, NOT_FOUND, INVALID_INPUT.
func (w *Webhooks) Endpoint(ctx context.Context, id string) (WebhookEndpoint, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return WebhookEndpoint{}, err
	}
	n, err := parseEndpointID("id", id)
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return w.store.WebhookEndpoint(ctx, n)
}

// Deliveries pages an endpoint's deliveries, newest first (first 1-100,
// after a delivery's cursor). Errors: FORBIDDEN, NOT_FOUND, INVALID_INPUT
// (endpointId, first, after).
func (w *Webhooks) Deliveries(ctx context.Context, endpointID string, first int, after string) (WebhookDeliveryPage, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return WebhookDeliveryPage{}, err
	}
	n, err := parseEndpointID("endpointId", endpointID)
	if err != nil {
		return WebhookDeliveryPage{}, err
	}
	if first < 1 || first > 100 {
		return WebhookDeliveryPage{}, Invalid("first", "first must be 1-100")
	}
	var cursor int64
	if after != "" {
		c, err := strconv.ParseInt(after, 10, 64)
		if err != nil || c <= 0 {
			return WebhookDeliveryPage{}, Invalid("after", "after is not a cursor this server gave")
		}
		cursor = c
	}
	if _, err := w.store.WebhookEndpoint(ctx, n); err != nil {
		return WebhookDeliveryPage{}, err
	}
	return w.store.WebhookDeliveries(ctx, n, first, cursor)
}

// Audit returns the latest changes of endpoints. Errors: FORBIDDEN.
func (w *Webhooks) Audit(ctx context.Context) ([]WebhookAuditEvent, error) {
	if err := authorize(ctx, OpManageWebhooks); err != nil {
		return nil, err
	}
	return w.store.WebhookAudit(ctx, 50)
}

func (w *Webhooks) validate(ctx context.Context, url string, events []string, description *string, prefix string) ([]string, error) {
	if err := w.validateURL(ctx, strings.TrimSpace(url), prefix+"url"); err != nil {
		return nil, err
	}
	events, err := validateEvents(events, prefix+"events")
	if err != nil {
		return nil, err
	}
	return events, validateDescription(description, prefix+"description")
}

func (w *Webhooks) validateURL(ctx context.Context, url, field string) error {
	if url == "" || len(url) > 2048 || !utf8.ValidString(url) {
		return Invalid(field, "url must be an http:// or https:// URL of at most 2048 characters")
	}
	if w.checkURL == nil {
		return nil
	}
	if err := w.checkURL(ctx, url); err != nil {
		if e, ok := err.(*Error); ok && e.Code == InvalidInput {
			e.Field = field
			return e
		}
		return err
	}
	return nil
}

// validateEvents keeps known types (or "*" alone), each once, in order.
func validateEvents(events []string, field string) ([]string, error) {
	if len(events) == 0 {
		return nil, Invalid(field, `events must name at least one event type, or ["*"] for all`)
	}
	var out []string
	for _, e := range events {
		e = strings.TrimSpace(e)
		if e != "*" && !slices.Contains(WebhookEventTypes, e) {
			return nil, Invalid(field, "events must be event types such as reservation.reserved, or \"*\"")
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if slices.Contains(out, "*") {
		return []string{"*"}, nil
	}
	return out, nil
}

func validateDescription(d *string, field string) error {
	if d != nil && (utf8.RuneCountInString(*d) > 500 || !utf8.ValidString(*d) || strings.ContainsRune(*d, 0)) {
		return Invalid(field, "description must be at most 500 characters of text")
	}
	return nil
}

func parseEndpointID(field, id string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
	if err != nil || n <= 0 {
		return 0, Invalid(field, field+" must be the id of a webhook endpoint")
	}
	return n, nil
}

func webhookAuditOf(ctx context.Context, e WebhookEndpoint, action, detail string) WebhookAuditEvent {
	a := auditOf(ctx, "", action, detail)
	return WebhookAuditEvent{EndpointID: e.ID, URL: e.URL, Actor: a.Actor, ActorRole: string(a.ActorRole), Action: action, Detail: detail}
}

func describeEndpoint(e WebhookEndpoint) string {
	return fmt.Sprintf("url %s, events %s, enabled %t", e.URL, strings.Join(e.Events, ","), e.Enabled)
}

// WebhookAttempt is a delivery a worker has taken (leased) to attempt now:
// the event, and the endpoint's URL and secrets.
type WebhookAttempt struct {
	DeliveryID     int64
	Attempts       int       // this one included
	DeliveryMade   time.Time // the start of its retry window
	FirstAttempt   time.Time // when it was first attempted (this one, the first time)
	ClaimedAt      time.Time // the database's clock
	EventID        int64
	VoucherCode    *string
	Sequence       int64
	Type           string
	Data           []byte // JSON
	EventCreatedAt time.Time
	EndpointID     int64
	URL            string
	Secret         string
	PreviousSecret *string
	PreviousUntil  *time.Time
}

// WebhookOutcome is the result of an attempt to record.
type WebhookOutcome struct {
	DeliveryID  int64
	EndpointID  int64
	Status      WebhookDeliveryStatus
	StatusCode  *int
	Error       *string
	AttemptedAt time.Time
	NextAt      time.Time // PENDING: the next attempt; else when it ended
	// ClaimedAt is the attempt's claim (WebhookAttempt.ClaimedAt, the
	// database's clock): a failing streak begins there, on the clock the
	// endpoint's window is measured with.
	ClaimedAt time.Time
	// SpentSince, on a FAILED outcome (the retry window spent), is the
	// delivery's first claim: the endpoint is disabled if it has failed
	// every attempt since then (no success in between).
	SpentSince *time.Time
}

// WebhookBacklog is what the metrics show of the deliveries.
type WebhookBacklog struct {
	Pending           int
	OldestPending     time.Duration
	DisabledEndpoints int
}

// WebhookDeliveryStore is what the delivery worker needs of the database.
type WebhookDeliveryStore interface {
	// DispatchWebhookEvents numbers up to max committed events and makes
	// their deliveries; it returns how many events it numbered.
	DispatchWebhookEvents(ctx context.Context, max int) (int, error)
	// ClaimWebhookDeliveries leases up to max due deliveries for lease.
	ClaimWebhookDeliveries(ctx context.Context, max int, lease time.Duration) ([]WebhookAttempt, error)
	// FinishWebhookDelivery records an attempt; a failure counts against
	// its endpoint, which is disabled (justDisabled) when it has failed
	// every attempt for failingFor.
	FinishWebhookDelivery(ctx context.Context, o WebhookOutcome, failingFor time.Duration) (justDisabled bool, err error)
	WebhookBacklog(ctx context.Context) (WebhookBacklog, error)
}
