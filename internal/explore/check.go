package explore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// checkDatabase checks what the quiet database holds on its own: each
// voucher's counters are its rows and within its limits, each customer's
// count is its rows and within perUserLimit, and no event of a success
// answered on its voucher went to the dead letters. Other dead letters are
// notes.
func (w *World) checkDatabase(calls []Call) (violations, notes []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fail := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }
	for i, code := range w.codes {
		var used, reserved, confirmed, rolledBack, total, perUser int
		if err := w.db.QueryRow(ctx, `SELECT used_count, reserved_count, confirmed_count, rolled_back_count, total_limit, per_user_limit FROM voucher WHERE code = $1`, code).
			Scan(&used, &reserved, &confirmed, &rolledBack, &total, &perUser); err != nil {
			fail("voucher %s: %v", code, err)
			continue
		}
		var live, rows, conf, back int
		if err := w.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status IN ('RESERVED', 'CONFIRMED')), count(*) FILTER (WHERE status = 'RESERVED'),
			count(*) FILTER (WHERE status = 'CONFIRMED'), count(*) FILTER (WHERE status = 'ROLLED_BACK')
			FROM voucher_redemption WHERE voucher_code = $1`, code).Scan(&live, &rows, &conf, &back); err != nil {
			fail("voucher %s: %v", code, err)
			continue
		}
		if used != live || reserved != rows || confirmed != conf || rolledBack != back {
			fail("voucher#%d %s: counters are not its rows: usedCount/reservedCount/confirmedCount/rolledBackCount %d/%d/%d/%d, rows live/RESERVED/CONFIRMED/ROLLED_BACK %d/%d/%d/%d",
				i, code, used, reserved, confirmed, rolledBack, live, rows, conf, back)
		}
		if used > total || live > total {
			fail("voucher#%d %s OVERSOLD: usedCount %d, live rows %d, totalLimit %d", i, code, used, live, total)
		}
		rs, err := w.db.Query(ctx, `SELECT customer_id, count(*) FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')
			GROUP BY customer_id HAVING count(*) > $2`, code, perUser)
		if err == nil {
			for rs.Next() {
				var c, n int64
				_ = rs.Scan(&c, &n)
				fail("voucher#%d %s: customer %d holds %d uses, perUserLimit %d", i, code, c, n, perUser)
			}
			rs.Close()
		}
		var bad int
		if err := w.db.QueryRow(ctx, `
			SELECT count(*) FROM (
			  SELECT customer_id FROM voucher_customer WHERE voucher_code = $1 AND used_count > 0
			  UNION
			  SELECT customer_id FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')) c
			 WHERE coalesce((SELECT used_count FROM voucher_customer vc WHERE vc.voucher_code = $1 AND vc.customer_id = c.customer_id), 0)
			    <> (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = $1 AND r.customer_id = c.customer_id AND r.status IN ('RESERVED', 'CONFIRMED'))`,
			code).Scan(&bad); err != nil {
			fail("voucher %s customers: %v", code, err)
		} else if bad > 0 {
			fail("voucher#%d %s: %d customers' counts are not their live rows", i, code, bad)
		}
	}

	// A dead letter is an event of one voucher's order: it breaks the
	// promise only if a success was answered for that order on that
	// voucher. An orderId reserved on an ordinary voucher while its
	// reserve on a flash voucher was answered UNAVAILABLE (publish outcome
	// unknown) has that flash event refused later, and rightly: the 201
	// stands, the flash reserve was never a success (explorer seed 47).
	type orderOn struct{ order, code string }
	succeeded := map[orderOn][]Call{}
	for _, c := range calls {
		if c.Success() {
			k := orderOn{c.Order, c.Voucher}
			succeeded[k] = append(succeeded[k], c)
		}
	}
	rs, err := w.db.Query(ctx, `SELECT id, kind, voucher_code, order_id, reason FROM dead_letter ORDER BY id`)
	if err != nil {
		fail("dead letters: %v", err)
		return violations, notes
	}
	defer rs.Close()
	for rs.Next() {
		var id int64
		var kind, code, order, reason string
		if err := rs.Scan(&id, &kind, &code, &order, &reason); err != nil {
			fail("dead letters: %v", err)
			break
		}
		if ok := succeeded[orderOn{order, code}]; len(ok) > 0 {
			var was []string
			for _, c := range ok {
				was = append(was, c.String())
			}
			fail("dead letter %d (%s of %s on %s: %s) of an answered success: %s", id, kind, order, code, reason, strings.Join(was, "; "))
		} else {
			notes = append(notes, fmt.Sprintf("dead letter %d (%s of %s on %s: %s), no success answered for it", id, kind, order, code, reason))
		}
	}
	return violations, notes
}

// checkGates checks each flash gate after the two passes: equal to the
// database, and (kafka mode) no order left pending or releasing.
func (w *World) checkGates() []string {
	var out []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opt, err := redis.ParseURL(w.proxy.URL)
	if err != nil {
		return []string{err.Error()}
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	for i, v := range w.plan.Vouchers {
		if !v.Flash {
			continue
		}
		code := w.codes[i]
		gate, remaining, loaded, err := w.gateAndDatabase(code)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("voucher#%d %s: reading gateRemaining: %v", i, code, err))
		case !loaded:
			out = append(out, fmt.Sprintf("voucher#%d %s: no gate after warmGates and two reconciliation passes (remaining %d)", i, code, remaining))
		case gate != remaining:
			out = append(out, fmt.Sprintf("voucher#%d %s: gate %d, database %d after two reconciliation passes (latest drift report: %s)", i, code, gate, remaining, w.latestDrift(code)))
		}
		if w.plan.Mode != "kafka" {
			continue
		}
		orders, err := rdb.HGetAll(ctx, "voucher:{"+code+"}:orders").Result()
		if err != nil {
			out = append(out, fmt.Sprintf("voucher#%d %s: reading the gate's orders: %v", i, code, err))
			continue
		}
		stuck := map[string][]string{}
		for id, val := range orders {
			f := strings.Split(val, ":")
			if len(f) >= 3 && (f[2] == "releasing" || f[2] == "pending") {
				status, expiresAt := w.rowState(ctx, id)
				if f[2] == "releasing" && status == "RESERVED" && time.Now().Before(expiresAt) {
					// A release decided at the gate whose event was never
					// written (its publish failed: answered UNAVAILABLE,
					// "decided but not yet recorded; retry"). Gate and
					// database both hold the use, as the unexpired row says:
					// a retry of the release records it, else the expiry
					// sweep releases the row at expiresAt. A release
					// answered 200 with the row still RESERVED is the
					// history's violation, not this one.
					continue
				}
				stuck[f[2]] = append(stuck[f[2]], id+" (database: "+status+")")
			}
		}
		for _, st := range []string{"pending", "releasing"} {
			if ids := stuck[st]; len(ids) > 0 {
				sort.Strings(ids)
				out = append(out, fmt.Sprintf("voucher#%d %s: %d use(s) stuck %q in the gate after two reconciliation passes: %s", i, code, len(ids), st, strings.Join(ids, ", ")))
			}
		}
	}
	return out
}

// rowState is the order's row's status ("no row" when there is none) and
// expiresAt.
func (w *World) rowState(ctx context.Context, order string) (string, time.Time) {
	var st string
	var expiresAt time.Time
	if err := w.db.QueryRow(ctx, `SELECT status, expires_at FROM voucher_redemption WHERE order_id = $1`, order).Scan(&st, &expiresAt); err != nil {
		return "no row", time.Time{}
	}
	return st, expiresAt
}

func (w *World) latestDrift(code string) string {
	var drift int
	var repaired string
	var alert bool
	var onlyGate, onlyDB []string
	err := w.db.QueryRow(context.Background(), `SELECT drift, repaired, alert, orders_only_in_gate, orders_only_in_db FROM drift_report WHERE voucher_code = $1 ORDER BY id DESC LIMIT 1`, code).
		Scan(&drift, &repaired, &alert, &onlyGate, &onlyDB)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("drift %d, repaired %q, alert %t, orders only in the gate %v, only in the database %v", drift, repaired, alert, onlyGate, onlyDB)
}
