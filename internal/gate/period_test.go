package gate_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// Period limits at the gate (prelude.lua's period_plan, period_take,
// period_give_back): a use counts in the period offered that holds its
// moment, is refused past the period's max, and goes back to the period it
// was taken in, whatever the period is now.

// dayOf is the CUSTOMER DAY limit (max 1) period holding at, in UTC.
func dayOf(at time.Time) voucher.GatePeriod {
	start, end := voucher.PeriodBounds(at, time.UTC, voucher.PeriodDay)
	return voucher.GatePeriod{Limit: 0, Scope: voucher.ScopeCustomer, Period: voucher.PeriodDay, Start: start, End: end, Max: 1}
}

// at is r counted at the moment at, in the day holding it.
func at(r voucher.ReserveRequest, when time.Time) voucher.ReserveRequest {
	r.PeriodAt, r.GatePeriods = when, []voucher.GatePeriod{dayOf(when)}
	return r
}

// periodUses reads a customer's uses in a day's hash.
func periodUses(t *testing.T, code string, p voucher.GatePeriod, customer int64) int {
	t.Helper()
	_, rdb := newGate(t)
	key := "voucher:{" + code + "}:period:" + string(p.Scope) + ":" + string(p.Period) + ":" + strconv.FormatInt(p.Start.UnixMilli(), 10)
	n, err := rdb.HGet(context.Background(), key, strconv.FormatInt(customer, 10)).Int()
	if err != nil {
		return 0
	}
	return n
}

func refusedUntil(end time.Time) voucher.GateVerdict {
	return voucher.GateVerdict("PERIOD_LIMIT_REACHED:0:" + strconv.FormatInt(end.UnixMilli(), 10))
}

func TestPeriods_RefusedPastTheMaxAndGivenBackToThePeriodTheUseWasTakenIn(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 10, 5))
	now := time.Now()
	yesterday, today := now.Add(-24*time.Hour), now

	reserve(t, g, 5, at(req(code, "old", 42, 100), yesterday), voucher.GateAdmitted)
	reserve(t, g, 5, at(req(code, "new", 42, 100), today), voucher.GateAdmitted)
	// ALREADY_USED comes before the period: a per-customer limit of 2 held.
	reserve(t, g, 2, at(req(code, "third", 42, 100), today), voucher.GateAlreadyUsed)
	reserve(t, g, 5, at(req(code, "third", 42, 100), today), refusedUntil(dayOf(today).End))
	if v, err := g.Reserve(context.Background(), code, 5, 0, at(req(code, "third", 42, 100), today)); err != nil {
		t.Fatal(err)
	} else if _, end, ok := v.PeriodRefusal(); !ok || !end.Equal(time.UnixMilli(dayOf(today).End.UnixMilli())) {
		t.Errorf("PeriodRefusal of %q = %v, %v; want the day's end %v", v, end, ok, dayOf(today).End)
	}
	// Another customer has a day of their own.
	reserve(t, g, 5, at(req(code, "other", 43, 100), today), voucher.GateAdmitted)

	// Yesterday's order given back goes to yesterday: today stays full.
	release(t, g, code, "old", true)
	if y, d := periodUses(t, code, dayOf(yesterday), 42), periodUses(t, code, dayOf(today), 42); y != 0 || d != 1 {
		t.Fatalf("after releasing yesterday's use: yesterday %d, today %d; want 0 and 1", y, d)
	}
	reserve(t, g, 5, at(req(code, "fourth", 42, 100), today), refusedUntil(dayOf(today).End))
	// Nothing is given back twice.
	release(t, g, code, "old", false)
	if d := periodUses(t, code, dayOf(today), 42); d != 1 {
		t.Fatalf("a second release of yesterday's order: today %d, want 1", d)
	}
	// Today's given back (forgotten, as a refused write is): room again.
	if ok, err := g.Forget(context.Background(), code, "new", 0); err != nil || !ok {
		t.Fatalf("Forget = %v, %v", ok, err)
	}
	reserve(t, g, 5, at(req(code, "fifth", 42, 100), today), voucher.GateAdmitted)
}

func TestPeriods_PeriodBeforeStock(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 1, 5))
	now := time.Now()
	reserve(t, g, 5, at(req(code, "a", 1, 100), now), voucher.GateAdmitted)
	// Sold out and past the customer's day: the day is the answer.
	reserve(t, g, 5, at(req(code, "b", 1, 100), now), refusedUntil(dayOf(now).End))
	reserve(t, g, 5, at(req(code, "c", 2, 100), now), voucher.GateOutOfStock)
}

func TestPeriods_LoadedCountsAndOrdersAreHeldAndGivenBack(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	now := time.Now()
	day := dayOf(now)
	snap := snapshot(code, 10, 5)
	snap.Customers[42] = 1
	snap.Orders = []voucher.GateOrder{{OrderID: "held", CustomerID: 42, OrderAmount: 100}}
	snap.Periods = []voucher.GatePeriodCount{{GatePeriod: day, Uses: map[int64]int{42: 1}}}
	snap.OrderPeriods = map[string][]int{"held": {0}}
	load(t, g, snap)
	reserve(t, g, 5, at(req(code, "b", 42, 100), now), refusedUntil(day.End))
	if a, _, err := g.Availability(context.Background(), code, "", 42, day); err != nil || len(a.PeriodUses) != 1 || a.PeriodUses[0] != 1 {
		t.Fatalf("Availability with the day = %+v, %v; want the day's 1 use", a, err)
	}
	release(t, g, code, "held", true)
	reserve(t, g, 5, at(req(code, "b", 42, 100), now), voucher.GateAdmitted)

	// A replace resets the day to the snapshot's counts.
	snap.Periods[0].Uses = map[int64]int{}
	snap.Orders, snap.OrderPeriods, snap.Customers = nil, nil, map[int64]int{}
	if err := g.Replace(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	if d := periodUses(t, code, day, 42); d != 0 {
		t.Fatalf("after a replace with no uses: the day holds %d", d)
	}
}

func TestPeriods_AMomentNoOfferedPeriodHoldsIsNotDecided(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 10, 5))
	r := req(code, "a", 1, 100)
	r.PeriodAt, r.GatePeriods = time.Now(), []voucher.GatePeriod{dayOf(time.Now().Add(-48 * time.Hour))}
	reserve(t, g, 5, r, voucher.GatePaused)
}

// TestPeriods_AReAdmissionCountsItsPeriodOrIsVoided: apply_check.lua
// re-admits a reserved event of an earlier epoch that the reloaded gate
// does not hold (kafka mode): its use counts in the period holding its
// createdAt, given back there on release; when that period is full it is
// voided, as when no use is left, so the gate never holds more uses in a
// period than the limit the database then refuses.
func TestPeriods_AReAdmissionCountsItsPeriodOrIsVoided(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	loadKafkaGate(t, g, snapshot(code, 10, 5), time.Minute)
	ctx := context.Background()
	now := ms(time.Now())
	day := dayOf(now)
	earlier := func(id string) voucher.Event {
		return voucher.Event{Kind: voucher.EventReserved, Code: code, OrderID: id, CustomerID: 42, OrderAmount: 100,
			CreatedAt: now, ExpiresAt: now.Add(time.Minute), Epoch: "an-earlier-load"}
	}
	check := func(id string, want voucher.ApplyVerdict) {
		t.Helper()
		got, err := g.ApplyCheck(ctx, code, []voucher.Event{earlier(id)}, [][]voucher.GatePeriod{{day}})
		if err != nil || len(got) != 1 || got[0] != want {
			t.Fatalf("ApplyCheck(%s) = %v, %v; want %s", id, got, err, want)
		}
	}
	check("first", voucher.ApplyStands)
	if n := periodUses(t, code, day, 42); n != 1 {
		t.Fatalf("the re-admitted use in its day: %d, want 1", n)
	}
	check("second", voucher.ApplySkip)
	if n, left := periodUses(t, code, day, 42), remaining(t, g, code); n != 1 || left != 9 {
		t.Fatalf("after a re-admission past the day's max: the day holds %d, %d uses left; want 1 and 9", n, left)
	}
	if o, ok, err := g.Order(ctx, code, "second"); err != nil || !ok || !o.Void {
		t.Fatalf("the refused re-admission's order = %+v, %v, %v; want it void", o, ok, err)
	}
	release(t, g, code, "first", true)
	if n := periodUses(t, code, day, 42); n != 0 {
		t.Fatalf("the re-admitted use released: its day holds %d, want 0", n)
	}
}
