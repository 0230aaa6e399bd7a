package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"voucherd/internal/testenv"
)

// TestDeadLetters_OperatorAppliesAgainOrDiscards walks the dead letters page
// in Chromium as an operator, on a kafka-mode server with a database of its
// own. A gate made too high admits two orders for one use: the database
// refuses the second (a dead letter). Applying it again while the voucher is
// full is refused again: it stays, with the reason and the count of
// refusals. Once the first order is released, applying it again writes it
// through the consumer's applier, and the dead letter closes; the same
// event dead-lettered twice, applied again, takes no second use. An event
// that cannot be read is refused, then discarded. Each action has a
// confirmation step and is in the audit log with the operator's name; the
// page has no serious axe-core violation and fits 390 px.
func TestDeadLetters_OperatorAppliesAgainOrDiscards(t *testing.T) {
	dbURL, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h"})
	const password = "otto's long password"
	addUser(t, map[string]string{"DATABASE_URL": dbURL}, "otto@example.com", "Otto Operator", "operator", password)
	ctx := context.Background()
	counts := func(code string) string {
		t.Helper()
		var used int
		var rows int
		if err := db.QueryRow(ctx, `SELECT used_count, (SELECT count(*) FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')) FROM voucher WHERE code = $1`, code).Scan(&used, &rows); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("used %d, held %d", used, rows)
	}
	status := func(order string) string {
		t.Helper()
		var st string
		if err := db.QueryRow(ctx, `SELECT coalesce((SELECT status FROM voucher_redemption WHERE order_id = $1), '')`, order).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitFor := func(order, want string) {
		t.Helper()
		testenv.Eventually(t, "order "+order+" "+want+" in the database", func() (bool, string) {
			got := status(order)
			return got == want, fmt.Sprintf("%q", got)
		})
	}

	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 1}))
	rdb := redis.NewClient(redisOptions(t))
	defer rdb.Close()
	raise := func() {
		t.Helper()
		if err := rdb.Incr(ctx, "voucher:{"+code+"}:stock").Err(); err != nil {
			t.Fatalf("raising the gate: %v", err)
		}
	}
	reserve := func(customer int, order string) response {
		return do(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations", storefrontToken,
			map[string]any{"customerId": customer, "orderId": order, "orderAmount": 5000})
	}
	raise()
	first, second := uniqueOrder(), uniqueOrder()
	if r := reserve(10, first); r.Status != http.StatusCreated {
		t.Fatalf("reserve %s: %d %s", first, r.Status, r.Raw)
	}
	// The server's start-up reconciliation (one pass when it starts,
	// whatever its interval) may come late on a loaded machine, see the
	// raised gate as drift and lower it (a fresh-machine rehearsal saw
	// it): the gate is raised again, once, for another second order.
	for try := 1; ; try++ {
		r := reserve(11, second)
		if r.Status == http.StatusCreated {
			break
		}
		if try == 2 || !strings.Contains(r.Raw, "OUT_OF_STOCK") || !gateLowered(t, db, code) {
			t.Fatalf("reserve %s (try %d): %d %s", second, try, r.Status, r.Raw)
		}
		t.Logf("the start-up reconciliation lowered the raised gate; raised again")
		raise()
		second = uniqueOrder()
	}
	var dlID int64
	testenv.Eventually(t, "the second order dead-lettered", func() (bool, string) {
		err := db.QueryRow(ctx, `SELECT id FROM dead_letter WHERE order_id = $1`, second).Scan(&dlID)
		return err == nil, fmt.Sprint(err)
	})
	if got := counts(code); got != "used 1, held 1" {
		t.Fatalf("before anything: %s", got)
	}

	b := newTab(t, s, "dead-letters")
	b.signIn("otto@example.com", password)
	b.step("open the dead letters from the drift page",
		chromedp.Navigate(s.URL+"/admin/drift"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=to-dead-letters]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=to-dead-letters]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=dead-letter-table]`)),
	)
	row := fmt.Sprintf(`[data-testid=dead-letter][data-id="%d"]`, dlID)
	if got := b.text(row + ` [data-testid=dead-letter-reason]`); !strings.Contains(got, "voucher_used_within_limit") {
		t.Errorf("the dead letter's reason = %q", got)
	}
	b.axe("the dead letters page")
	b.shots.take(b.ctx, "dead-letters")
	b.phone("dead-letters-390", row+` [data-testid=apply-again]`, row+` [data-testid=discard]`)

	// Apply again while the voucher is full: refused, kept, counted.
	b.step("ask to apply it again", chromedp.Click(chromedp.CSS(row+` [data-testid=apply-again]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)))
	b.axe("the apply-again confirmation")
	b.shots.take(b.ctx, "dead-letters-confirm-apply")
	var retries int
	if err := db.QueryRow(ctx, `SELECT retries FROM dead_letter WHERE id = $1`, dlID).Scan(&retries); err != nil || retries != 0 {
		t.Fatalf("the confirmation step alone applied it: retries %d, %v", retries, err)
	}
	b.step("cancel", chromedp.Click(chromedp.CSS(`[data-testid=confirm-cancel]`)), chromedp.WaitVisible(chromedp.CSS(row)))
	b.step("apply it again, confirmed",
		chromedp.Click(chromedp.CSS(row+` [data-testid=apply-again]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)),
	)
	if got := b.text(`[data-testid=notice]`); !strings.Contains(got, "refused") {
		t.Errorf("after a refused apply the notice says %q", got)
	}
	if got := b.text(row + ` [data-testid=dead-letter-reason]`); !strings.Contains(got, "voucher_used_within_limit") || !strings.Contains(got, "refused again 1×") {
		t.Errorf("a dead letter refused again shows %q, want its new reason and one refusal", got)
	}
	if got := counts(code); got != "used 1, held 1" {
		t.Errorf("after a refused apply: %s", got)
	}

	// The first order released: now the database takes it.
	if r := do(t, http.MethodDelete, s.URL+"/vouchers/"+code+"/reservations/"+first, storefrontToken, nil); r.Status != http.StatusOK {
		t.Fatalf("release: %d %s", r.Status, r.Raw)
	}
	waitFor(first, "RELEASED")
	b.step("apply it again once more",
		chromedp.Navigate(s.URL+"/admin/dead-letters"),
		chromedp.WaitVisible(chromedp.CSS(row+` [data-testid=apply-again]`)),
		chromedp.Click(chromedp.CSS(row+` [data-testid=apply-again]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)),
	)
	if got := b.text(`[data-testid=notice]`); !strings.Contains(got, "in the database now") {
		t.Errorf("after applying again the notice says %q", got)
	}
	if n := b.eval(fmt.Sprintf(`String(document.querySelectorAll('%s').length)`, row)); n != "0" {
		t.Error("an applied dead letter is still listed")
	}
	if got := status(second); got != "RESERVED" {
		t.Errorf("the order applied again is %q in the database, want RESERVED", got)
	}
	if got := counts(code); got != "used 1, held 1" {
		t.Errorf("after applying again: %s", got)
	}
	// The gate agrees: the order is live there (a confirm is decided by it).
	if r := do(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations/"+second+"/confirm", storefrontToken, nil); r.Status != http.StatusOK {
		t.Errorf("confirming the order applied again: %d %s", r.Status, r.Raw)
	}
	waitFor(second, "CONFIRMED")
	// The closed dead letter cannot be applied twice.
	if st := httpPostStatus(t, b, fmt.Sprintf("/admin/dead-letters/%d/apply", dlID)); st != http.StatusConflict {
		t.Errorf("applying a closed dead letter again answered %d, want 409", st)
	}

	// The same event dead-lettered twice (a replayed topic): applying the
	// copy again takes no second use.
	var copyID int64
	if err := db.QueryRow(ctx, `INSERT INTO dead_letter (event_id, topic, "partition", "offset", voucher_code, order_id, kind, reason, payload)
		SELECT event_id, topic, "partition", "offset" + 1000, voucher_code, order_id, kind, reason, payload FROM dead_letter WHERE id = $1 RETURNING id`, dlID).Scan(&copyID); err != nil {
		t.Fatal(err)
	}
	copyRow := fmt.Sprintf(`[data-testid=dead-letter][data-id="%d"]`, copyID)
	b.step("apply the copy again",
		chromedp.Navigate(s.URL+"/admin/dead-letters"),
		chromedp.WaitVisible(chromedp.CSS(copyRow+` [data-testid=apply-again]`)),
		chromedp.Click(chromedp.CSS(copyRow+` [data-testid=apply-again]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)),
	)
	if got := counts(code); got != "used 1, held 1" {
		t.Errorf("after applying the same event twice: %s, want still one use", got)
	}
	if got := status(second); got != "CONFIRMED" {
		t.Errorf("applying a reserved event again changed a confirmed order to %q", got)
	}

	// An event that cannot be read: refused, then discarded.
	var badID int64
	if err := db.QueryRow(ctx, `INSERT INTO dead_letter (event_id, topic, "partition", "offset", kind, reason, payload)
		VALUES ('voucher-reservations/0/999', 'voucher-reservations', 0, 999, 'unknown', 'malformed event: not an event', 'not an event') RETURNING id`).Scan(&badID); err != nil {
		t.Fatal(err)
	}
	bad := fmt.Sprintf(`[data-testid=dead-letter][data-id="%d"]`, badID)
	b.step("apply the unreadable one again",
		chromedp.Navigate(s.URL+"/admin/dead-letters"),
		chromedp.WaitVisible(chromedp.CSS(bad+` [data-testid=apply-again]`)),
		chromedp.Click(chromedp.CSS(bad+` [data-testid=apply-again]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)),
	)
	if got := b.text(bad + ` [data-testid=dead-letter-reason]`); !strings.Contains(got, "cannot be read") {
		t.Errorf("an unreadable event applied again shows %q", got)
	}
	b.step("discard it",
		chromedp.Click(chromedp.CSS(bad+` [data-testid=discard]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)),
	)
	b.axe("the discard confirmation")
	b.step("confirm the discard", chromedp.Click(chromedp.CSS(`[data-testid=confirm-submit]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)))
	if n := b.eval(fmt.Sprintf(`String(document.querySelectorAll('%s').length)`, bad)); n != "0" {
		t.Error("a discarded dead letter is still listed")
	}
	var resolution, by string
	if err := db.QueryRow(ctx, `SELECT resolution, resolved_by FROM dead_letter WHERE id = $1`, badID).Scan(&resolution, &by); err != nil || resolution != "discarded" || by != "otto@example.com" {
		t.Errorf("the discarded dead letter: %q by %q (%v)", resolution, by, err)
	}
	if got := b.text(`[data-testid=no-dead-letters]`); got != "No dead letter is waiting." {
		t.Errorf("the list after all: %q", got)
	}
	b.axe("the dead letters page after the actions")
	b.shots.take(b.ctx, "dead-letters-after")

	// The audit log, in order, with who did it.
	rows, err := db.Query(ctx, `SELECT action, actor, actor_role, coalesce(voucher_code, '') FROM voucher_audit WHERE action LIKE 'dead-letter-%' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var action, actor, role, c string
		if err := rows.Scan(&action, &actor, &role, &c); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s by %s (%s) on %q", action, actor, role, c))
	}
	want := []string{
		fmt.Sprintf("dead-letter-refused by otto@example.com (operator) on %q", code),
		fmt.Sprintf("dead-letter-applied by otto@example.com (operator) on %q", code),
		fmt.Sprintf("dead-letter-applied by otto@example.com (operator) on %q", code),
		`dead-letter-refused by otto@example.com (operator) on ""`,
		`dead-letter-discarded by otto@example.com (operator) on ""`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the audit of dead letters:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := b.eval(`String(document.querySelectorAll("[data-testid=dead-letter-action]").length)`); n != "5" {
		t.Errorf("the page lists %s actions on dead letters, want 5", n)
	}
	b.open("/admin/drift", `[data-testid=operations]`)
	if got := b.text(`[data-testid=operations]`); !strings.Contains(got, "discarded a dead letter") || !strings.Contains(got, "otto@example.com") {
		t.Errorf("the drift page's repairs = %q", got)
	}
}

// httpPostStatus posts a confirmed form with the page's CSRF token from
// the browser and returns the status.
func httpPostStatus(t *testing.T, b *tab, target string) int {
	t.Helper()
	c, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	status, err := chromedp.Run(c, chromedp.Evaluate[int](fmt.Sprintf(`(async () => {
		const csrf = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"];
		const r = await fetch(%q, {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "confirm=yes&csrf=" + encodeURIComponent(csrf), redirect: "manual"});
		return r.type === "opaqueredirect" ? 303 : r.status;
	})()`, target), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	return status
}

// gateLowered: a reconciliation pass found the voucher's gate above the
// database and lowered it.
func gateLowered(t *testing.T, db *pgxpool.Pool, code string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM drift_report WHERE voucher_code = $1 AND drift > 0 AND repaired LIKE 'lowered%'`, code).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
