package explore

import (
	"net/http"
	"testing"
	"time"
)

// The model against small hand-made histories of one order: each loss of
// an answered success, or answer the rules forbid, fails; what the rules
// allow (an unknown outcome either way, expiry after the TTL) passes.
func TestModel_HandMadeHistories(t *testing.T) {
	t.Parallel()
	const s = int64(time.Second)
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	at := func(from, to int64) (int64, int64) { return base + from*s/10, base + to*s/10 }
	reserve := func(from, to int64, v string, status int, code, state string) Call {
		c := Call{Op: OpReserve, Order: "o", Voucher: v, Customer: 7, Amount: 5000, Status: status, Code: code, State: state}
		c.Sent, c.Answered = at(from, to)
		if status == http.StatusCreated && state == "RESERVED" {
			c.ExpiresAt = c.Sent + int64(10*time.Second)
		}
		return c
	}
	decide := func(op string, from, to int64, v string, status int, code, state string) Call {
		c := Call{Op: op, Order: "o", Voucher: v, Status: status, Code: code, State: state}
		c.Sent, c.Answered = at(from, to)
		return c
	}
	read := func(t int64, v, state string) Call {
		c := Call{Op: OpRead, Order: "o", Voucher: v, State: state}
		if state != "" {
			c.Customer, c.Amount = 7, 5000
		}
		c.Sent, c.Answered = at(t, t)
		return c
	}
	m := Model{TTL: 10 * time.Second, Slack: 300 * time.Millisecond, Sweep: 3 * time.Second}
	for _, tc := range []struct {
		name  string
		calls []Call
		ok    bool
	}{
		{"answered reserve, row there", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), read(20, "A", "RESERVED")}, true},
		{"answered reserve lost", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), read(20, "", "")}, false},
		{"unanswered reserve, row there", []Call{reserve(0, 50, "A", 0, "", ""), read(60, "A", "RESERVED")}, true},
		{"unanswered reserve, no row", []Call{reserve(0, 50, "A", 0, "", ""), read(60, "", "")}, true},
		{"UNAVAILABLE reserve, row there", []Call{reserve(0, 1, "A", 503, "UNAVAILABLE", ""), read(20, "A", "RESERVED")}, true},
		{"answered confirm and release", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 3, "A", 200, "", "CONFIRMED"),
			decide(OpRelease, 4, 5, "A", 200, "", "RELEASED"), read(20, "A", "RELEASED")}, false},
		{"concurrent confirm and release, one refused", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 5, "A", 200, "", "CONFIRMED"),
			decide(OpRelease, 2, 5, "A", 409, "ALREADY_CONFIRMED", ""), read(20, "A", "CONFIRMED")}, true},
		{"answered confirm, row RESERVED", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 3, "A", 200, "", "CONFIRMED"), read(20, "A", "RESERVED")}, false},
		{"same orderId on another voucher, 201", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), reserve(2, 3, "B", 201, "", "RESERVED"), read(20, "A", "RESERVED")}, false},
		{"same orderId on another voucher, conflict", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), reserve(2, 3, "B", 409, "ORDER_CONFLICT", ""), read(20, "A", "RESERVED")}, true},
		{"retry of a held order out of stock", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), reserve(2, 3, "A", 409, "OUT_OF_STOCK", ""), read(20, "A", "RESERVED")}, false},
		{"confirm after expiresAt succeeds", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 105, 106, "A", 200, "", "CONFIRMED"), read(200, "A", "CONFIRMED")}, false},
		{"confirm after expiresAt refused", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 105, 106, "A", 409, "RESERVATION_RELEASED", ""), read(200, "A", "RELEASED")}, true},
		{"expired, never swept", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), read(200, "A", "RESERVED")}, false},
		{"released before its TTL without a release", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), read(50, "A", "RELEASED")}, false},
		{"refused reserve stored", []Call{reserve(0, 1, "A", 409, "OUT_OF_STOCK", ""), read(20, "A", "RESERVED")}, false},
		{"reserve answered CONFIRMED after a concurrent confirm", []Call{reserve(0, 5, "A", 201, "", "CONFIRMED"), decide(OpConfirm, 2, 6, "A", 200, "", "CONFIRMED"), read(20, "A", "CONFIRMED")}, true},
		{"reserve answered CONFIRMED, no confirm", []Call{reserve(0, 5, "A", 201, "", "CONFIRMED"), read(20, "A", "CONFIRMED")}, false},
		{"release answered 200 RESERVED", []Call{reserve(0, 5, "A", 201, "", "RESERVED"), decide(OpRelease, 2, 6, "A", 200, "", "RESERVED"), read(20, "A", "RESERVED")}, false},
		{"confirmed, rolled back, rolled back again", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 3, "A", 200, "", "CONFIRMED"),
			decide(OpRollback, 4, 5, "A", 200, "", "ROLLED_BACK"), decide(OpRollback, 6, 7, "A", 200, "", "ROLLED_BACK"), read(20, "A", "ROLLED_BACK")}, true},
		{"answered rollback, row CONFIRMED", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 3, "A", 200, "", "CONFIRMED"),
			decide(OpRollback, 4, 5, "A", 200, "", "ROLLED_BACK"), read(20, "A", "CONFIRMED")}, false},
		{"rollback of a reserved order", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpRollback, 2, 3, "A", 409, "NOT_CONFIRMED", ""), read(20, "A", "RESERVED")}, true},
		{"rollback of a reserved order answered 200", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpRollback, 2, 3, "A", 200, "", "ROLLED_BACK"), read(20, "A", "ROLLED_BACK")}, false},
		{"rollback of a released order", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpRelease, 2, 3, "A", 200, "", "RELEASED"),
			decide(OpRollback, 4, 5, "A", 409, "RESERVATION_RELEASED", ""), read(20, "A", "RELEASED")}, true},
		{"rollback on another voucher", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 3, "A", 200, "", "CONFIRMED"),
			decide(OpRollback, 4, 5, "B", 404, "NOT_FOUND", ""), read(20, "A", "CONFIRMED")}, true},
		{"after a rollback: retry, confirm and release", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 3, "A", 200, "", "CONFIRMED"),
			decide(OpRollback, 4, 5, "A", 200, "", "ROLLED_BACK"), reserve(6, 7, "A", 409, "RESERVATION_RELEASED", ""),
			decide(OpConfirm, 8, 9, "A", 409, "RESERVATION_RELEASED", ""), decide(OpRelease, 10, 11, "A", 200, "", "ROLLED_BACK"),
			reserve(12, 13, "B", 409, "ORDER_CONFLICT", ""), read(20, "A", "ROLLED_BACK")}, true},
		{"a rolled-back order reserved again", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 3, "A", 200, "", "CONFIRMED"),
			decide(OpRollback, 4, 5, "A", 200, "", "ROLLED_BACK"), reserve(6, 7, "A", 201, "", "RESERVED"), read(20, "A", "RESERVED")}, false},
		{"unanswered rollback, either row", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 3, "A", 200, "", "CONFIRMED"),
			decide(OpRollback, 4, 50, "A", 503, "UNAVAILABLE", ""), read(60, "A", "ROLLED_BACK")}, true},
		{"rollback after expiresAt says NOT_CONFIRMED", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpConfirm, 105, 106, "A", 409, "RESERVATION_RELEASED", ""),
			decide(OpRollback, 107, 108, "A", 409, "NOT_CONFIRMED", ""), read(200, "A", "RELEASED")}, false},
		{"rollback after expiresAt refused", []Call{reserve(0, 1, "A", 201, "", "RESERVED"), decide(OpRollback, 107, 108, "A", 409, "RESERVATION_RELEASED", ""), read(200, "A", "RELEASED")}, true},
		{"rollback without a confirm", []Call{reserve(0, 5, "A", 201, "", "CONFIRMED"), decide(OpRollback, 6, 7, "A", 200, "", "ROLLED_BACK"), read(20, "A", "ROLLED_BACK")}, false},
		{"confirm racing the reserve refused RESERVATION_RELEASED", []Call{reserve(0, 5, "A", 201, "", "RESERVED"), decide(OpConfirm, 2, 5, "A", 409, "RESERVATION_RELEASED", ""), read(20, "A", "RESERVED")}, false},
	} {
		failures := m.CheckOrders(tc.calls)
		if got := len(failures) == 0; got != tc.ok {
			t.Errorf("%s: passed %t, want %t\n%v", tc.name, got, tc.ok, failures)
		}
	}
}

// A plan is the seed's alone.
func TestPlan_IsTheSeeds(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed < 50; seed++ {
		a, b := NewPlan(seed, false), NewPlan(seed, false)
		if a.String() != b.String() {
			t.Fatalf("seed %d gave two plans:\n%s\n%s", seed, a, b)
		}
		if len(a.Faults) == 0 {
			t.Errorf("seed %d: no fault:\n%s", seed, a)
		}
		for i, f := range a.Faults {
			if f.At+f.Length >= a.Duration {
				t.Errorf("seed %d: fault %d heals after the clients stop: %s", seed, i, f)
			}
		}
	}
}
