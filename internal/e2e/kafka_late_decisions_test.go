package e2e

// A confirm or release decided on a gate that is lost before its event is
// written: the event lands behind the recovery marker, so the gate reloaded
// at the marker holds the order live (explorer seed 148).

import (
	"context"
	"errors"
	"testing"

	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
)

// loseGateAndRecover deletes a voucher's gate keys (Redis lost its data),
// has a reserve ask for the recovery marker, and waits until the consumer
// reloaded the gate from the database at it.
func loseGateAndRecover(t *testing.T, api restAPI, code string) {
	t.Helper()
	forgetGates(t, code)
	if r := api.reserve(t, code, 99, uniqueOrder(), 100); r.Error != "UNAVAILABLE" {
		t.Fatalf("a reserve on the lost gate: %q, want UNAVAILABLE", r.Error)
	}
	g := testGate(t)
	testenv.Eventually(t, "the gate of "+code+" reloaded", func() (bool, string) {
		ok, _, err := g.Healthy(context.Background(), code)
		return ok && err == nil, "not healthy"
	})
}

// reservedUnderFaults starts a kafka server with the fault points, creates a
// flash voucher of total uses and reserves order on it (as customer 7),
// waiting for its row; the points made later() are armed after it.
func reservedUnderFaults(t *testing.T, order string, total int, points faultPoints) (restAPI, string) {
	t.Helper()
	api := restAPI{faultServer(t, points, nil)}
	code := createVoucher(t, api.s, flash(voucherSpec{TotalLimit: total}))
	if r := api.reserve(t, code, 7, order, 100); r.Error != "" {
		t.Fatalf("reserve: %s", r.Error)
	}
	waitStatus(t, api.s, order, "RESERVED")
	for _, p := range points {
		p.arm()
	}
	return api, code
}

// TestKafka_ALateConfirmIsTakenByTheReloadedGate: a confirm decided on the
// lost gate, answered UNAVAILABLE (its publish outcome unknown) and written
// behind the marker, is confirmed in the database; the reloaded gate must
// hold it confirmed too. Before, it stayed live there: a release was
// answered 200 and dead-lettered, and the use it gave back sold one order
// past the stock, whose 201 the database refused.
func TestKafka_ALateConfirmIsTakenByTheReloadedGate(t *testing.T) {
	t.Parallel()
	order := uniqueOrder()
	decided := newFaultPoint(voucher.StepDecided, order)
	published := newFaultPoint(voucher.StepPublished, order).later()
	published.resume <- errors.New("the broker's answer was lost")
	api, code := reservedUnderFaults(t, order, 1, faultPoints{decided, published})
	s := api.s

	confirmed := make(chan result, 1)
	go func() { confirmed <- api.confirm(t, code, order) }()
	decided.wait(t)
	loseGateAndRecover(t, api, code)
	decided.resume <- nil // the event is written behind the marker
	if r := <-confirmed; r.Error != "UNAVAILABLE" {
		t.Fatalf("the confirm whose answer was lost: %q, want UNAVAILABLE", r.Error)
	}
	waitStatus(t, s, order, "CONFIRMED")

	if r := api.release(t, code, order); r.Error != "ALREADY_CONFIRMED" {
		t.Errorf("release of the order confirmed in the database: %q, want ALREADY_CONFIRMED", r.Error)
	}
	other := uniqueOrder()
	if r := api.reserve(t, code, 8, other, 100); r.Error != "OUT_OF_STOCK" {
		t.Errorf("reserve past the single use: %q, want OUT_OF_STOCK", r.Error)
		if r.Error == "" {
			testenv.Eventually(t, "the consumer to write or refuse "+other, func() (bool, string) {
				return dbStatus(t, s, other) != "" || deadLetters(t, s.db, code) > 0, "neither"
			})
			if got := dbStatus(t, s, other); got != "RESERVED" {
				t.Errorf("the 201 of %s is %q in the database: a success lost", other, got)
			}
		}
	}
	if r := api.confirm(t, code, order); r.Error != "" {
		t.Errorf("a retried confirm: %q, want 200", r.Error)
	}
	waitCounters(t, s, code, 1, 0, 1)
	waitGate(t, s, code, 0)
	assertNoDeadLetters(t, s.db, code)
}

// TestKafka_ADecisionIsAnsweredOnlyIfTheGateStillHoldsIt: a confirm
// decided on the lost gate, its event acknowledged behind the marker, while
// the reloaded gate released the order (answered 200). The confirm must not
// be answered 200 as well: both cannot hold. Before, it was, and the
// database kept only one of them.
func TestKafka_ADecisionIsAnsweredOnlyIfTheGateStillHoldsIt(t *testing.T) {
	t.Parallel()
	order := uniqueOrder()
	decided := newFaultPoint(voucher.StepDecided, order)
	published := newFaultPoint(voucher.StepPublished, order).later()
	received := newFaultPoint(voucher.StepReceived, order)
	api, code := reservedUnderFaults(t, order, 1, faultPoints{decided, published, received})
	s := api.s

	confirmed := make(chan result, 1)
	go func() { confirmed <- api.confirm(t, code, order) }()
	decided.wait(t)
	loseGateAndRecover(t, api, code)
	decided.resume <- nil
	published.wait(t) // acknowledged, behind the marker
	received.wait(t)  // the consumer holds it, so the reloaded gate still says live
	release := api.release(t, code, order)
	published.resume <- nil
	confirm := <-confirmed
	received.resume <- nil

	if release.Error == "" && confirm.Error == "" {
		t.Fatalf("both the release and the confirm of %s were answered 200", order)
	}
	if release.Error != "" || confirm.Error != "RESERVATION_RELEASED" {
		t.Errorf("release %q, confirm %q; want 200 and RESERVATION_RELEASED", release.Error, confirm.Error)
	}
	waitStatus(t, s, order, "RELEASED")
	waitCounters(t, s, code, 0, 0, 0)
	waitGate(t, s, code, 1)
	assertNoDeadLetters(t, s.db, code)
}

// TestKafka_ARefusalStandsAfterTheGateIsLost: a release (or confirm)
// decided at the gate whose event surely failed to publish answered
// UNAVAILABLE; the gate still holds its decision, so a confirm (or release)
// of the order is refused by it. That refusal must stand once Redis loses
// its data and the gate is reloaded from the database. Before, it was
// answered at once from the gate alone: the reload held the order live and
// the next confirm (or release) succeeded, against the refusal answered
// (explorer seed 47). A reserve's retry answered from the gate's decision
// stands the same way (explorer seed 9).
func TestKafka_ARefusalStandsAfterTheGateIsLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		first          func(api restAPI, code, order string) result
		second         func(api restAPI, code, order string) result
		refusal, state string
		answered       string // the second's reservation status, when it succeeds
	}{
		{"a confirm refused by an unrecorded release",
			func(api restAPI, code, order string) result { return api.release(t, code, order) },
			func(api restAPI, code, order string) result { return api.confirm(t, code, order) },
			"RESERVATION_RELEASED", "RELEASED", ""},
		{"a release refused by an unrecorded confirm",
			func(api restAPI, code, order string) result { return api.confirm(t, code, order) },
			func(api restAPI, code, order string) result { return api.release(t, code, order) },
			"ALREADY_CONFIRMED", "CONFIRMED", ""},
		// Explorer seed 9: the retry was answered 201 CONFIRMED from the
		// gate alone, and the database kept the row RESERVED.
		{"a reserve retry answered from an unrecorded confirm",
			func(api restAPI, code, order string) result { return api.confirm(t, code, order) },
			func(api restAPI, code, order string) result { return api.reserve(t, code, 7, order, 100) },
			"", "CONFIRMED", "CONFIRMED"},
		{"a reserve retry refused by an unrecorded release",
			func(api restAPI, code, order string) result { return api.release(t, code, order) },
			func(api restAPI, code, order string) result { return api.reserve(t, code, 7, order, 100) },
			"RESERVATION_RELEASED", "RELEASED", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			order := uniqueOrder()
			decided := newFaultPoint(voucher.StepDecided, order)
			decided.resume <- errors.New("the broker refused the event")
			api, code := reservedUnderFaults(t, order, 2, faultPoints{decided})
			if r := c.first(api, code, order); r.Error != "UNAVAILABLE" {
				t.Fatalf("the decision whose event was not published: %q, want UNAVAILABLE", r.Error)
			}
			if r := c.second(api, code, order); r.Error != c.refusal || r.Error == "" && r.status() != c.answered {
				t.Fatalf("the other request: %q %s, want %q %s", r.Error, r.status(), c.refusal, c.answered)
			}
			loseGateAndRecover(t, api, code)
			if r := c.second(api, code, order); r.Error != c.refusal || r.Error == "" && r.status() != c.answered {
				t.Errorf("the other request once the gate was reloaded: %q %s, want %q %s as answered before", r.Error, r.status(), c.refusal, c.answered)
			}
			waitStatus(t, api.s, order, c.state)
			assertNoDeadLetters(t, api.s.db, code)
		})
	}
}
