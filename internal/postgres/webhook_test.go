package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// eventTypes lists a code's outbox rows' types in id order.
func eventTypes(t *testing.T, s *Store, code string) []string {
	t.Helper()
	rows, err := s.WebhookEvents(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Type
	}
	return out
}

// An event is written in the transaction of its change: a change that
// committed has one, a refusal (rolled back, or never written) none.
func TestWebhookEvents_AnEventExistsExactlyWhenItsChangeCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(testPool)
	svc := voucher.NewService(voucher.Deps{Store: s}, voucher.Config{})
	code := strings.ToUpper(unique("WH"))
	if _, err := s.CreateVoucher(ctx, voucher.NewVoucher{
		Code: code, DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD",
		TotalLimit: 1, PerUserLimit: 1, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	first := voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: unique("o"), OrderAmount: 500}
	if _, err := svc.Reserve(ctx, first); err != nil {
		t.Fatal(err)
	}
	for _, refused := range []struct {
		r    voucher.ReserveRequest
		want voucher.ErrorCode
	}{
		{voucher.ReserveRequest{Code: code, CustomerID: 2, OrderID: unique("o"), OrderAmount: 500}, voucher.OutOfStock},
		{voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: unique("o"), OrderAmount: 500}, voucher.AlreadyUsed},
		{voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: first.OrderID, OrderAmount: 501}, voucher.OrderConflict},
	} {
		if _, err := svc.Reserve(ctx, refused.r); voucher.ErrorCodeOf(err) != refused.want {
			t.Fatalf("reserve: %v, want %s", err, refused.want)
		}
	}
	if _, err := svc.Reserve(ctx, first); err != nil { // a retry: no second use, no event
		t.Fatal(err)
	}
	if _, err := svc.Confirm(ctx, code, first.OrderID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Confirm(ctx, code, first.OrderID); err != nil { // unchanged: no event
		t.Fatal(err)
	}
	if _, err := svc.Release(ctx, code, first.OrderID); voucher.ErrorCodeOf(err) != voucher.AlreadyConfirmed {
		t.Fatalf("release of a confirmed order: %v", err)
	}
	got := strings.Join(eventTypes(t, s, code), " ")
	want := "voucher.created reservation.reserved voucher.sold_out reservation.confirmed"
	if got != want {
		t.Errorf("events: %s\nwant:   %s", got, want)
	}
}

// Dispatchers running at once (every instance runs one) number each
// code's committed events 1..n, no gap and no repeat, while reserves go on.
func TestWebhookDispatch_ConcurrentDispatchersNumberEachCodesEventsWithoutAGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(ownDatabase(t))
	svc := voucher.NewService(voucher.Deps{Store: s}, voucher.Config{})
	codes := []string{strings.ToUpper(unique("WA")), strings.ToUpper(unique("WB"))}
	for _, code := range codes {
		if _, err := s.CreateVoucher(ctx, voucher.NewVoucher{
			Code: code, DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD",
			TotalLimit: 1000, PerUserLimit: 1, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var dispatchers sync.WaitGroup
	for range 3 {
		dispatchers.Add(1)
		go func() {
			defer dispatchers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.DispatchWebhookEvents(ctx, 7); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var reserves sync.WaitGroup
	for w := range 4 {
		reserves.Add(1)
		go func() {
			defer reserves.Done()
			for i := range 50 {
				code := codes[(w+i)%2]
				if _, err := svc.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: int64(w*1000 + i + 1), OrderID: unique("o"), OrderAmount: 500}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	reserves.Wait()
	close(stop)
	dispatchers.Wait()
	for {
		n, err := s.DispatchWebhookEvents(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	for _, code := range codes {
		rows, err := s.WebhookEvents(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 101 { // created, 100 reserved
			t.Fatalf("%s: %d events, want 101", code, len(rows))
		}
		seen := make(map[int64]bool, len(rows))
		for _, r := range rows {
			if r.Sequence == nil || *r.Sequence < 1 || *r.Sequence > 101 || seen[*r.Sequence] {
				t.Fatalf("%s: event %d has sequence %v (a gap or a repeat)", code, r.ID, r.Sequence)
			}
			seen[*r.Sequence] = true
		}
	}
}

// A campaign code's reservation is reported under the code used (the
// campaign's row is where its use counts); the campaign's readiness under
// its row's name.
func TestWebhookEvents_ACampaignCodesReservationIsReportedUnderTheCodeUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(ownDatabase(t))
	c := newCampaign(t, s, 3)
	svc := voucher.NewService(voucher.Deps{Store: s}, voucher.Config{})
	generateCodes(t, s, c.ID)
	var codes []string
	if err := s.CampaignCodes(ctx, c.ID, func(cc voucher.CampaignCode) error { codes = append(codes, cc.Code); return nil }); err != nil {
		t.Fatal(err)
	}
	order := unique("o")
	if _, err := svc.Reserve(ctx, voucher.ReserveRequest{Code: codes[1], CustomerID: 7, OrderID: order, OrderAmount: 500}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Release(ctx, codes[1], order); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(eventTypes(t, s, codes[1]), " "); got != "reservation.reserved reservation.released" {
		t.Errorf("the code's events: %s", got)
	}
	if got := strings.Join(eventTypes(t, s, fmt.Sprintf("~C%d", c.ID)), " "); got != "campaign.ready" {
		t.Errorf("the campaign's events: %s", got)
	}
}

// An endpoint whose delivery failed every attempt for the whole retry
// window is disabled by that delivery's last attempt, even when its failing
// streak (begun at the delivery's first claim, a moment after the delivery
// was made) is a little shorter than the window; an endpoint that
// succeeded since that first claim is not.
func TestWebhookEndpoint_ADeliveryFailedForItsWholeWindowDisablesItsEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(testPool)
	window := 2 * time.Second
	endpoint := func() int64 {
		t.Helper()
		e, err := s.CreateWebhookEndpoint(ctx, voucher.WebhookEndpoint{URL: "https://example.com/" + unique("hook"), Events: []string{"voucher.created"}, Enabled: true, Secret: "whsec_test"},
			func(e voucher.WebhookEndpoint) voucher.WebhookAuditEvent {
				return voucher.WebhookAuditEvent{EndpointID: e.ID, URL: e.URL, Actor: "test", ActorRole: "ADMIN", Action: "created"}
			})
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	finish := func(id int64, status voucher.WebhookDeliveryStatus, claimed time.Time, spent *time.Time) bool {
		t.Helper()
		disabled, err := s.FinishWebhookDelivery(ctx, voucher.WebhookOutcome{DeliveryID: -1, EndpointID: id, Status: status,
			AttemptedAt: claimed, ClaimedAt: claimed, NextAt: claimed, SpentSince: spent}, window)
		if err != nil {
			t.Fatal(err)
		}
		return disabled
	}
	now := time.Now()
	first := now.Add(-1500 * time.Millisecond) // the delivery's first claim, 0.5 s after it was made

	failing := endpoint()
	if finish(failing, voucher.WebhookPending, first, nil) {
		t.Fatal("disabled by its first failed attempt")
	}
	if !finish(failing, voucher.WebhookFailed, now, &first) {
		t.Error("the delivery failed every attempt for its window: its last attempt did not disable the endpoint (its streak, 1.5 s, is under the 2 s window)")
	}

	recovered := endpoint()
	finish(recovered, voucher.WebhookPending, first, nil)
	finish(recovered, voucher.WebhookDelivered, now.Add(-time.Second), nil) // another delivery got through
	finish(recovered, voucher.WebhookPending, now.Add(-500*time.Millisecond), nil)
	if finish(recovered, voucher.WebhookFailed, now, &first) {
		t.Error("an endpoint that succeeded since the delivery's first attempt was disabled")
	}
}
