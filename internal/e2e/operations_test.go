package e2e

import (
	"context"
	"testing"
	"time"
)

// TestOperationsForScripts covers rebuildGate, reconcileVoucher and
// warmGates (contract, "Next"): admin only (a storefront token is
// FORBIDDEN and changes nothing), a report of the voucher's gate against
// its database, NOT_FOUND for a voucher without a gate, and each one
// audited with who ran it, as the dashboard's buttons are.
func TestOperationsForScripts(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	now := time.Now().UTC()
	create := func(code string, flash bool) {
		t.Helper()
		r := gql(t, s, adminToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message } } }`,
			map[string]any{"in": map[string]any{"code": code, "discountAmount": 500, "totalLimit": 7, "flash": flash,
				"startsAt": now.Add(-time.Hour).Format(time.RFC3339), "endsAt": now.Add(time.Hour).Format(time.RFC3339)}})
		if str(path(r.Body, "data", "createVoucher", "voucher", "code")) != code {
			t.Fatalf("creating %s: %s", code, r.Raw)
		}
	}
	flash, plain := uniqueCode("ops"), uniqueCode("opn")
	create(flash, true)
	create(plain, false)
	if rr := do(t, "POST", s.URL+"/vouchers/"+flash+"/reservations", storefrontToken, map[string]any{"customerId": 7, "orderId": uniqueOrder(), "orderAmount": 5000}); rr.Status != 201 {
		t.Fatalf("reserve: %d %s", rr.Status, rr.Raw)
	}
	const report = `report { voucherCode databaseRemaining gateRemaining drift } error { code message }`
	rebuild := `mutation($c: String!) { rebuildGate(code: $c) { ` + report + ` } }`
	reconcile := `mutation($c: String!) { reconcileVoucher(code: $c) { ` + report + ` } }`
	warm := `mutation { warmGates }`

	for name, q := range map[string]string{"rebuildGate": rebuild, "reconcileVoucher": reconcile, "warmGates": warm} {
		r := gql(t, s, storefrontToken, q, map[string]any{"c": flash})
		if errs, _ := path(r.Body, "errors").([]any); len(errs) == 0 || str(path(errs[0], "extensions", "code")) != "FORBIDDEN" {
			t.Errorf("%s with a storefront token: %s, want FORBIDDEN", name, r.Raw)
		}
	}
	for name, q := range map[string]string{"rebuildGate": rebuild, "reconcileVoucher": reconcile} {
		r := gql(t, s, adminToken, q, map[string]any{"c": flash})
		got := path(r.Body, "data", name, "report")
		if str(path(got, "voucherCode")) != flash || num(t, path(got, "databaseRemaining")) != 6 || num(t, path(got, "gateRemaining")) != 6 || num(t, path(got, "drift")) != 0 {
			t.Errorf("%s of a flash voucher with one use taken of 7: %s, want remaining 6 at both, drift 0", name, r.Raw)
		}
		for _, c := range []string{plain, uniqueCode("none")} {
			if r := gql(t, s, adminToken, q, map[string]any{"c": c}); str(path(r.Body, "data", name, "error", "code")) != "NOT_FOUND" {
				t.Errorf("%s of %s (no gate): %s, want NOT_FOUND", name, c, r.Raw)
			}
		}
	}
	r := gql(t, s, adminToken, warm, nil)
	if n := num(t, path(r.Body, "data", "warmGates")); n < 1 {
		t.Errorf("warmGates with a live flash voucher: %s, want at least 1", r.Raw)
	}

	ctx := context.Background()
	for _, action := range []string{"gate-rebuilt", "reconciled"} {
		var role string
		if err := s.db.QueryRow(ctx, `SELECT actor_role FROM voucher_audit WHERE voucher_code = $1 AND action = $2 ORDER BY id DESC LIMIT 1`, flash, action).Scan(&role); err != nil {
			t.Errorf("no %s audit of %s: %v", action, flash, err)
		} else if role != "admin" {
			t.Errorf("%s audited as %q, want admin", action, role)
		}
	}
	var warmed int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM voucher_audit WHERE action = 'gates-warmed' AND occurred_at > $1`, now.Add(-time.Minute)).Scan(&warmed); err != nil || warmed == 0 {
		t.Errorf("warmGates not audited: %d, %v", warmed, err)
	}
}
