package explore

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model is the contract's "Reserve, confirm, release" for one orderId,
// as a sequential specification that porcupine checks the history against
// (linearizability, one orderId at a time: the contract's rules for one
// order do not depend on any other's, and the voucher-wide limits are
// checked on the database's rows instead). Its state is what the order is
// (nothing, or RESERVED, CONFIRMED, RELEASED or ROLLED_BACK on one voucher
// with one customer and amount); every answer must be what the rules say from some
// state the earlier answers allow, and the database's row once the system
// is quiet must be a state the whole history allows. A call without an
// answer, UNAVAILABLE or an internal error may have taken effect or not.
//
// Expiry is the one change no call makes: a RESERVED order may become
// RELEASED at its expiresAt; a confirm sent after expiresAt must see it
// RELEASED (the contract), and so must the quiet database once the sweep has
// had its interval.

// Order states.
const (
	stNone int8 = iota
	stReserved
	stConfirmed
	stReleased
	stRolledBack
)

var stateNames = [...]string{"none", "RESERVED", "CONFIRMED", "RELEASED", "ROLLED_BACK"}

type orderState struct {
	St       int8
	Voucher  string
	Customer int64
	Amount   int64
	// ExpMin..ExpMax bound a RESERVED order's expiresAt (Unix ns): one
	// instant when its 201 said it, the window of an unanswered reserve.
	ExpMin, ExpMax int64
}

func (s orderState) String() string {
	if s.St == stNone {
		return "none"
	}
	out := fmt.Sprintf("%s on %s (customer %d, amount %d)", stateNames[s.St], s.Voucher, s.Customer, s.Amount)
	if s.St == stReserved {
		out += " expiring " + stamp(s.ExpMin)
		if s.ExpMax != s.ExpMin {
			out += ".." + stamp(s.ExpMax)
		}
	}
	return out
}

// Model is the sequential specification's bounds.
type Model struct {
	TTL time.Duration // RESERVATION_TTL
	// Slack absorbs the few milliseconds between the clocks of this
	// process, Redis and PostgreSQL around expiresAt.
	Slack time.Duration
	// Sweep is how long after expiresAt the quiet database may still show
	// an expired reservation RESERVED (the expiry interval and a margin).
	Sweep time.Duration
}

func (m Model) step(s orderState, c Call) []orderState {
	var out []orderState
	for _, s2 := range m.expiries(s, c) {
		out = append(out, m.apply(s2, c)...)
	}
	return out
}

// expiries are the states a call may find: s, or s expired, or both.
func (m Model) expiries(s orderState, c Call) []orderState {
	if s.St != stReserved {
		return []orderState{s}
	}
	expired := s
	expired.St, expired.ExpMin, expired.ExpMax = stReleased, 0, 0
	slack := int64(m.Slack)
	switch {
	case c.Answered < s.ExpMin-slack:
		return []orderState{s}
	case (c.Op == OpConfirm || c.Op == OpRollback) && c.Sent > s.ExpMax+slack:
		// "A confirm after expiresAt gets RESERVATION_RELEASED even if
		// the sweep has not run yet"; a rollback sees it released too.
		return []orderState{expired}
	case c.Op == OpRead && c.Sent > s.ExpMax+int64(m.Sweep):
		return []orderState{expired}
	}
	return []orderState{s, expired}
}

func (m Model) apply(s orderState, c Call) []orderState {
	if c.Op == OpRead {
		if c.State == "" {
			if s.St == stNone {
				return []orderState{s}
			}
			return nil
		}
		if s.St != stNone && stateNames[s.St] == c.State && s.Voucher == c.Voucher && s.Customer == c.Customer && s.Amount == c.Amount {
			// An answered expiresAt is the row's (to the millisecond).
			if s.St == stReserved && c.ExpiresAt != 0 && s.ExpMin == s.ExpMax && abs(c.ExpiresAt-s.ExpMin) > int64(time.Millisecond) {
				return nil
			}
			return []orderState{s}
		}
		return nil
	}
	mine := s.St != stNone && s.Voucher == c.Voucher
	if c.Unknown() {
		out := []orderState{s}
		switch {
		case c.Op == OpReserve && s.St == stNone:
			r := orderState{St: stReserved, Voucher: c.Voucher, Customer: c.Customer, Amount: c.Amount,
				ExpMin: c.Sent + int64(m.TTL), ExpMax: c.Answered + int64(m.TTL)}
			out = append(out, r)
		case c.Op == OpConfirm && mine && s.St == stReserved:
			out = append(out, with(s, stConfirmed))
		case c.Op == OpRelease && mine && s.St == stReserved:
			out = append(out, with(s, stReleased))
		case c.Op == OpRollback && mine && s.St == stConfirmed:
			out = append(out, with(s, stRolledBack))
		}
		return out
	}
	ok := func(ns orderState) []orderState { return []orderState{ns} }
	switch c.Op {
	case OpReserve:
		same := s.St != stNone && mine && s.Customer == c.Customer && s.Amount == c.Amount
		if c.Status == http.StatusCreated {
			switch {
			case s.St == stNone && c.State == "RESERVED":
				r := orderState{St: stReserved, Voucher: c.Voucher, Customer: c.Customer, Amount: c.Amount,
					ExpMin: c.Sent + int64(m.TTL), ExpMax: c.Answered + int64(m.TTL)}
				if c.ExpiresAt != 0 {
					r.ExpMin, r.ExpMax = c.ExpiresAt, c.ExpiresAt
				}
				return ok(r)
			case s.St == stNone && c.State == "CONFIRMED":
				// The reserve took the use and answered with the status
				// its reservation had by the time it answered: a confirm
				// that ran in between (CheckOrders checks that one was
				// sent) confirmed it. The model has no step for the two
				// together; it takes the reserve as reserving and
				// confirming.
				return ok(orderState{St: stConfirmed, Voucher: c.Voucher, Customer: c.Customer, Amount: c.Amount})
			case same && s.St == stReserved && c.State == "RESERVED":
				return ok(s)
			case same && s.St == stConfirmed && c.State == "CONFIRMED":
				return ok(s)
			}
			return nil
		}
		switch {
		case s.St == stNone:
			switch c.Code {
			case "OUT_OF_STOCK", "ALREADY_USED", "BUDGET_EXHAUSTED":
				return ok(s)
			}
		case !same && c.Code == "ORDER_CONFLICT":
			return ok(s)
		case same && (s.St == stReleased || s.St == stRolledBack) && c.Code == "RESERVATION_RELEASED":
			// "A reserve retried for a rolled-back order:
			// RESERVATION_RELEASED."
			return ok(s)
		}
		return nil
	case OpConfirm:
		if c.Status == http.StatusOK {
			if mine && (s.St == stReserved || s.St == stConfirmed) && c.State == "CONFIRMED" {
				return ok(with(s, stConfirmed))
			}
			return nil
		}
		switch {
		case !mine && c.Code == "NOT_FOUND":
			return ok(s)
		case mine && (s.St == stReleased || s.St == stRolledBack) && c.Code == "RESERVATION_RELEASED":
			return ok(s)
		}
		return nil
	case OpRelease:
		if c.Status == http.StatusOK {
			if mine && (s.St == stReserved || s.St == stReleased) && c.State == "RELEASED" {
				return ok(with(s, stReleased))
			}
			// A release of a rolled-back order answers it unchanged.
			if mine && s.St == stRolledBack && c.State == "ROLLED_BACK" {
				return ok(s)
			}
			return nil
		}
		switch {
		case !mine && c.Code == "NOT_FOUND":
			return ok(s)
		case mine && s.St == stConfirmed && c.Code == "ALREADY_CONFIRMED":
			return ok(s)
		}
		return nil
	case OpRollback:
		// The contract's "Rollback of a confirmed use": CONFIRMED ->
		// ROLLED_BACK, again unchanged; RESERVED is NOT_CONFIRMED,
		// RELEASED is RESERVATION_RELEASED, none on that code NOT_FOUND.
		if c.Status == http.StatusOK {
			if mine && (s.St == stConfirmed || s.St == stRolledBack) && c.State == "ROLLED_BACK" {
				return ok(with(s, stRolledBack))
			}
			return nil
		}
		switch {
		case !mine && c.Code == "NOT_FOUND":
			return ok(s)
		case mine && s.St == stReserved && c.Code == "NOT_CONFIRMED":
			return ok(s)
		case mine && s.St == stReleased && c.Code == "RESERVATION_RELEASED":
			return ok(s)
		}
		return nil
	}
	return nil
}

func with(s orderState, st int8) orderState {
	s.St = st
	if st != stReserved {
		s.ExpMin, s.ExpMax = 0, 0
	}
	return s
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// porcupineModel is the model for porcupine, one orderId per partition.
func (m Model) porcupineModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{orderState{}} },
		Step: func(state, input, output any) []any {
			var out []any
			for _, s := range m.step(state.(orderState), output.(Call)) {
				out = append(out, s)
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(orderState) == b.(orderState) },
		DescribeOperation: func(input, output any) string {
			return output.(Call).String()
		},
		DescribeState: func(state any) string { return state.(orderState).String() },
	}
	return nm.ToModel()
}

// OrderFailure is an orderId whose history no order of the contract's
// rules explains.
type OrderFailure struct {
	Order string
	Calls []Call // every call of the order, in the order they were sent
	Info  porcupine.LinearizationInfo
	// Timeout: porcupine gave up (the order's history is too large).
	Timeout bool
	// Unconfirmed: a reserve answered CONFIRMED, or the row is CONFIRMED,
	// and no confirm of the order was sent before.
	Unconfirmed bool
}

// confirmSentBefore reports whether each reserve answered 201 CONFIRMED,
// each rollback answered 200, and a CONFIRMED or ROLLED_BACK row, has a
// confirm of the order sent before it answered (before the read for the
// row).
func confirmSentBefore(cs []Call) bool {
	for _, c := range cs {
		if (c.Op == OpReserve && c.Success() && c.State == "CONFIRMED") || (c.Op == OpRollback && c.Success()) ||
			(c.Op == OpRead && (c.State == "CONFIRMED" || c.State == "ROLLED_BACK")) {
			found := false
			for _, d := range cs {
				if d.Op == OpConfirm && d.Voucher == c.Voucher && d.Sent <= c.Answered {
					found = true
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

func (f OrderFailure) String() string {
	var b strings.Builder
	why := "no order of these calls is what the contract allows"
	if f.Timeout {
		why = "the check timed out"
	}
	if f.Unconfirmed {
		why = "CONFIRMED with no confirm sent"
	}
	fmt.Fprintf(&b, "order %s [%s]: %s:\n", f.Order, f.Kind(), why)
	for _, c := range f.Calls {
		fmt.Fprintf(&b, "    %s\n", c)
	}
	return b.String()
}

// CheckOrders checks the calls (each with Answered set; an unanswered
// call's Answered is the moment the system became quiet) and the quiet
// database's reads against the model, one orderId at a time, and returns
// the orders that fail.
func (m Model) CheckOrders(calls []Call) []OrderFailure {
	byOrder := map[string][]Call{}
	for _, c := range calls {
		byOrder[c.Order] = append(byOrder[c.Order], c)
	}
	orders := make([]string, 0, len(byOrder))
	for o := range byOrder {
		orders = append(orders, o)
	}
	sort.Strings(orders)
	pm := m.porcupineModel()
	var out []OrderFailure
	for _, o := range orders {
		cs := byOrder[o]
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].Sent < cs[j].Sent })
		ops := make([]porcupine.Operation, len(cs))
		for i, c := range cs {
			ops[i] = porcupine.Operation{ClientId: c.Client, Input: c, Output: c, Call: c.Sent, Return: c.Answered}
		}
		res, info := porcupine.CheckOperationsVerbose(pm, ops, 10*time.Second)
		if res != porcupine.Ok {
			out = append(out, OrderFailure{Order: o, Calls: cs, Info: info, Timeout: res == porcupine.Unknown})
			continue
		}
		if !confirmSentBefore(cs) {
			out = append(out, OrderFailure{Order: o, Calls: cs, Info: info, Unconfirmed: true})
		}
	}
	return out
}

// Kind names what went wrong, for the summary; the calls are the evidence.
// It is a reading of the history, checked in this order.
func (f OrderFailure) Kind() string {
	if f.Unconfirmed {
		return "CONFIRMED with no confirm sent"
	}
	var read Call
	var ok201 []Call
	confirmed, released, rolledBack := false, false, false
	for _, c := range f.Calls {
		switch {
		case c.Op == OpRead:
			read = c
		case c.Op == OpReserve && c.Success():
			ok201 = append(ok201, c)
		case c.Op == OpConfirm && c.Success():
			confirmed = true
		case c.Op == OpRelease && c.Success() && c.State == "RELEASED":
			released = true
		case c.Op == OpRollback && c.Success():
			rolledBack = true
		}
	}
	for _, a := range ok201 {
		for _, b := range ok201 {
			if a.Voucher != b.Voucher || a.Amount != b.Amount || a.Customer != b.Customer {
				return "two different 201s for one orderId"
			}
		}
	}
	if confirmed && released {
		return "answered CONFIRMED and RELEASED"
	}
	for _, c := range f.Calls {
		if (c.Op == OpConfirm && c.Success() && c.State != "CONFIRMED") || (c.Op == OpRelease && c.Success() && c.State != "RELEASED" && c.State != "ROLLED_BACK") ||
			(c.Op == OpRollback && c.Success() && c.State != "ROLLED_BACK") {
			return c.Op + " answered 200 " + c.State
		}
	}
	switch {
	case len(ok201) > 0 && (read.State == "" || read.Voucher != ok201[0].Voucher):
		return "answered 201 lost: no row on its voucher"
	case rolledBack && read.State != "ROLLED_BACK":
		return "answered ROLLED_BACK, row " + or(read.State, "none")
	case confirmed && !rolledBack && read.State != "CONFIRMED" && read.State != "ROLLED_BACK":
		return "answered CONFIRMED, row " + or(read.State, "none")
	case released && read.State != "RELEASED":
		return "answered RELEASED, row " + or(read.State, "none")
	}
	for _, c := range f.Calls {
		if c.Op != OpReserve || c.Status != http.StatusConflict || c.Code == "ORDER_CONFLICT" || c.Code == "RESERVATION_RELEASED" {
			continue
		}
		for _, a := range ok201 {
			if a.Answered < c.Sent {
				if a.Voucher == c.Voucher && (a.Amount != c.Amount || a.Customer != c.Customer) {
					return "held order sent with other terms refused " + c.Code + ", not ORDER_CONFLICT"
				}
				if a.Voucher == c.Voucher {
					return "held order's identical retry refused " + c.Code
				}
				return "order held on another voucher refused " + c.Code + ", not ORDER_CONFLICT"
			}
		}
	}
	for _, c := range f.Calls {
		if c.Code == "ORDER_CONFLICT" && read.State == "" && len(ok201) == 0 {
			return "ORDER_CONFLICT for an orderId no voucher holds"
		}
		if c.Op == OpConfirm && c.Code == "RESERVATION_RELEASED" && !released && !rolledBack && read.State != "RELEASED" && read.State != "ROLLED_BACK" {
			return "confirm refused RESERVATION_RELEASED, never released"
		}
		if c.Op == OpConfirm && c.Code == "RESERVATION_RELEASED" {
			for _, d := range f.Calls {
				if d.Sent > c.Answered && d.Success() && (d.State == "RESERVED" || d.State == "CONFIRMED") {
					return "confirm refused RESERVATION_RELEASED, live after"
				}
			}
		}
	}
	if read.State == "RESERVED" && read.ExpiresAt != 0 && read.ExpiresAt < read.Sent-int64(5*time.Second) {
		return "expired reservation still RESERVED when quiet"
	}
	if read.State == "CONFIRMED" && !confirmed {
		return "row CONFIRMED, no confirm answered"
	}
	if read.State == "RELEASED" && !released {
		return "row RELEASED, no release answered"
	}
	if read.State == "ROLLED_BACK" && !rolledBack {
		return "row ROLLED_BACK, no rollback answered"
	}
	return "other"
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
