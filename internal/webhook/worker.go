package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"voucherd/internal/voucher"
)

// Observer is told of each attempt and of the backlog (internal/metrics).
type Observer interface {
	WebhookAttempted(outcome string)
	WebhookEndpointDisabled()
	WebhookBacklog(voucher.WebhookBacklog)
}

// Config is a Worker's settings; zero values take the defaults.
type Config struct {
	Store voucher.WebhookDeliveryStore
	Guard Guard
	// Timeout bounds one attempt (connect to last byte); default 10 s.
	Timeout time.Duration
	// Concurrency is how many attempts run at once in this instance;
	// default 8. The attempts hold no database connection: the worker's
	// statements take one connection at a time, between attempts.
	Concurrency int
	// FirstRetry is the delay before the first retry, doubled each time
	// up to MaxBackoff; default 30 s.
	FirstRetry time.Duration
	// MaxBackoff caps the delay between attempts; default 1 h.
	MaxBackoff time.Duration
	// RetryFor is how long a delivery is retried, and how long an
	// endpoint may fail every attempt before it is disabled; default 24 h.
	RetryFor time.Duration
	// Poll is how soon the worker looks again for events and due
	// deliveries after a look that found some; default 250 ms. Each look
	// that finds none doubles the wait, up to IdlePoll.
	Poll time.Duration
	// IdlePoll is the longest wait between two looks; default 1 s. An
	// idle instance looks about twice a second instead of eight times
	// (each look a statement), and an event committed after a quiet spell
	// is delivered within about a second.
	IdlePoll time.Duration
	Observer Observer
	Logger   *slog.Logger
}

// Worker numbers committed events, makes their deliveries and attempts the
// due ones. Every instance runs one; they share the work through the
// database (SKIP LOCKED), and a delivery taken by an instance that dies is
// due again when its lease (Timeout plus a margin) ends.
type Worker struct {
	cfg    Config
	client *http.Client
	lease  time.Duration
	dbSlot chan struct{} // one database statement of the worker at a time
	slots  chan struct{} // attempts in flight
	wake   chan struct{}
	stop   context.CancelFunc
	done   sync.WaitGroup
}

// NewWorker returns a worker over cfg; Start runs it.
func NewWorker(cfg Config) *Worker {
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 8)
	cfg.FirstRetry = cmp.Or(cfg.FirstRetry, 30*time.Second)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, time.Hour)
	cfg.RetryFor = cmp.Or(cfg.RetryFor, 24*time.Hour)
	cfg.Poll = cmp.Or(cfg.Poll, 250*time.Millisecond)
	cfg.IdlePoll = max(cmp.Or(cfg.IdlePoll, time.Second), cfg.Poll)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{
		cfg:    cfg,
		client: NewClient(cfg.Guard, cfg.Timeout),
		lease:  cfg.Timeout + 5*time.Second,
		dbSlot: make(chan struct{}, 1),
		slots:  make(chan struct{}, cfg.Concurrency),
		wake:   make(chan struct{}, 1),
	}
}

// NewClient is the HTTP client of deliveries: the guard's dialer (only
// checked addresses), no proxy, no redirect followed (a 3xx is a failed
// attempt), timeout per attempt.
func NewClient(g Guard, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           g.dialContext(timeout),
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConns:          64,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Start runs the worker until Stop.
func (w *Worker) Start(ctx context.Context) {
	ctx, w.stop = context.WithCancel(context.WithoutCancel(ctx))
	w.done.Add(2)
	go func() { defer w.done.Done(); w.dispatchLoop(ctx) }()
	go func() { defer w.done.Done(); w.deliverLoop(ctx) }()
}

// Stop ends the loops and waits for the attempts in flight (each bounded
// by Timeout).
func (w *Worker) Stop() {
	if w.stop == nil {
		return
	}
	w.stop()
	w.done.Wait()
}

// withDB runs fn holding the worker's one database slot.
func (w *Worker) withDB(ctx context.Context, fn func(context.Context) error) error {
	select {
	case w.dbSlot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-w.dbSlot }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return fn(ctx)
}

const dispatchBatch = 1000

// nextWait is the wait before the next look: Poll after a look that
// found work, else twice the last wait, at most IdlePoll.
func (w *Worker) nextWait(last time.Duration, found bool) time.Duration {
	if found {
		return w.cfg.Poll
	}
	return min(2*last, w.cfg.IdlePoll)
}

func (w *Worker) dispatchLoop(ctx context.Context) {
	t := time.NewTimer(w.cfg.Poll)
	defer t.Stop()
	wait := w.cfg.Poll
	lastBacklog := time.Time{}
	for {
		var n int
		err := w.withDB(ctx, func(ctx context.Context) (err error) {
			n, err = w.cfg.Store.DispatchWebhookEvents(ctx, dispatchBatch)
			return err
		})
		if err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("webhook events not dispatched", "err", err)
		}
		if n > 0 {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
		if w.cfg.Observer != nil && time.Since(lastBacklog) > 5*time.Second {
			lastBacklog = time.Now()
			_ = w.withDB(ctx, func(ctx context.Context) error {
				b, err := w.cfg.Store.WebhookBacklog(ctx)
				if err == nil {
					w.cfg.Observer.WebhookBacklog(b)
				}
				return err
			})
		}
		if n == dispatchBatch {
			continue // more are waiting
		}
		wait = w.nextWait(wait, n > 0)
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *Worker) deliverLoop(ctx context.Context) {
	t := time.NewTimer(w.cfg.Poll)
	defer t.Stop()
	wait := w.cfg.Poll
	var attempts sync.WaitGroup
	defer attempts.Wait()
	for {
		free := w.cfg.Concurrency - len(w.slots)
		var claimed []voucher.WebhookAttempt
		if free > 0 {
			err := w.withDB(ctx, func(ctx context.Context) (err error) {
				claimed, err = w.cfg.Store.ClaimWebhookDeliveries(ctx, free, w.lease)
				return err
			})
			if err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("webhook deliveries not claimed", "err", err)
			}
		}
		for _, a := range claimed {
			w.slots <- struct{}{}
			attempts.Add(1)
			go func() {
				defer attempts.Done()
				defer func() { <-w.slots }()
				w.attempt(ctx, a)
			}()
		}
		if len(claimed) > 0 && len(claimed) == free {
			// Perhaps more are due: once a slot is free.
			select {
			case w.slots <- struct{}{}:
				<-w.slots
			case <-ctx.Done():
				return
			}
			continue
		}
		wait = w.nextWait(wait, len(claimed) > 0)
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			wait = w.cfg.Poll // events were dispatched: deliveries follow
		case <-t.C:
		}
	}
}

// Body is the JSON body of a delivery (docs/webhooks.md).
type Body struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	CreatedAt   string          `json:"createdAt"`
	VoucherCode *string         `json:"voucherCode"`
	Sequence    int64           `json:"sequence"`
	Data        json.RawMessage `json:"data"`
}

// BodyOf is the body of an attempt's event.
func BodyOf(a voucher.WebhookAttempt) ([]byte, error) {
	data := json.RawMessage(a.Data)
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return json.Marshal(Body{
		ID: voucher.WebhookEventID(a.EventID), Type: a.Type, CreatedAt: a.EventCreatedAt.UTC().Format(time.RFC3339Nano),
		VoucherCode: a.VoucherCode, Sequence: a.Sequence, Data: data,
	})
}

// attempt sends one delivery and records its outcome. The outcome is
// recorded even when the worker is stopping (a context of its own): an
// attempt that got a 2xx is not sent again needlessly.
func (w *Worker) attempt(ctx context.Context, a voucher.WebhookAttempt) {
	started := time.Now()
	code, sendErr := w.send(ctx, a)
	o := voucher.WebhookOutcome{DeliveryID: a.DeliveryID, EndpointID: a.EndpointID, AttemptedAt: started, ClaimedAt: a.ClaimedAt, NextAt: time.Now()}
	if code != 0 {
		o.StatusCode = &code
	}
	outcome := "delivered"
	switch {
	case sendErr == nil && code >= 200 && code < 300:
		o.Status = voucher.WebhookDelivered
	case started.Sub(a.DeliveryMade) >= w.cfg.RetryFor:
		o.Status, outcome = voucher.WebhookFailed, "failed"
		// Failed every attempt since its first: the endpoint's streak
		// began then at the latest unless it succeeded meanwhile.
		o.SpentSince = &a.FirstAttempt
	default:
		o.Status, outcome = voucher.WebhookPending, "retry"
		o.NextAt = started.Add(w.Backoff(a.Attempts))
	}
	if o.Status != voucher.WebhookDelivered {
		msg := "HTTP " + strconv.Itoa(code)
		if sendErr != nil {
			msg = describe(sendErr)
		}
		o.Error = &msg
	}
	var disabled bool
	err := w.withDB(context.WithoutCancel(ctx), func(ctx context.Context) (err error) {
		disabled, err = w.cfg.Store.FinishWebhookDelivery(ctx, o, w.cfg.RetryFor)
		return err
	})
	if err != nil {
		// Its lease ends and it is attempted again: at least once.
		w.cfg.Logger.Warn("webhook delivery outcome not recorded", "delivery", a.DeliveryID, "err", err)
	}
	if w.cfg.Observer != nil {
		w.cfg.Observer.WebhookAttempted(outcome)
		if disabled {
			w.cfg.Observer.WebhookEndpointDisabled()
		}
	}
	if disabled {
		w.cfg.Logger.Error("webhook endpoint disabled: every delivery failed for the retry window", "endpoint", a.EndpointID, "retry_for", w.cfg.RetryFor)
	}
}

// Backoff is the delay after the nth failed attempt: FirstRetry doubled
// per attempt up to MaxBackoff, less up to a tenth at random (instances
// retrying a receiver that is back do not all come at once).
func (w *Worker) Backoff(n int) time.Duration {
	d := w.cfg.FirstRetry
	for i := 1; i < n && d < w.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.cfg.MaxBackoff)
	return d - time.Duration(rand.Int64N(int64(d/10)+1)) // #nosec G404 -- jitter, not a secret
}

func (w *Worker) send(ctx context.Context, a voucher.WebhookAttempt) (int, error) {
	body, err := BodyOf(a)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	now := time.Now()
	secrets := []string{a.Secret}
	if a.PreviousSecret != nil && a.PreviousUntil != nil && now.Before(*a.PreviousUntil) {
		secrets = append(secrets, *a.PreviousSecret)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "voucherd-webhooks/1")
	req.Header.Set(EventIDHeader, voucher.WebhookEventID(a.EventID))
	req.Header.Set(SignatureHeader, Sign(now, body, secrets...))
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// describe says why an attempt failed without the receiver's internals.
func describe(err error) string {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300]
	}
	return fmt.Sprintf("no answer: %s", s)
}
