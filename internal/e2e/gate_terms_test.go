package e2e

import (
	"context"
	"strings"
	"testing"

	"voucherd/internal/testenv"
)

// TestReconcile_AGateWhoseTermsLagTheVoucherIsRebuilt: a change of a
// scheduled voucher's terms reaches the gate after the database's commit
// (updateVoucher unloads the gate); when that step fails, the gate goes on
// deciding on the old window, minimum and per-customer limit. Here the
// database's row is changed under a loaded gate, as such a failed update
// leaves it. The next reconciliation pass sees the terms differ, rebuilds
// the gate and reports an alert; reserves are then decided on the
// voucher's terms. Before, reconciliation compared counts only: the gate
// kept refusing a customer's use the voucher allows (ALREADY_USED, the old
// limit) for ever, and in kafka mode admitted orders the voucher's minimum
// refuses, which the consumer then wrote (issue 30, item 4).
func TestReconcile_AGateWhoseTermsLagTheVoucherIsRebuilt(t *testing.T) {
	t.Parallel()
	// kafka mode only: there the gate decides on the terms it holds; the
	// sync path's gate is given the voucher's limit with every reserve, and
	// the database decides the rest.
	for _, mode := range []string{"kafka"} {
		t.Run(mode, func(t *testing.T) {
			dbURL, db := ownDatabase(t)
			s := startServer(t, map[string]string{"FLASH_WRITE_PATH": mode, "DATABASE_URL": dbURL})
			api := restAPI{s}
			code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 10, PerUserLimit: 1}))
			// The customer's one use loads the gate with the terms of now.
			if r := api.reserve(t, code, 1, uniqueOrder(), 6000); r.Error != "" {
				t.Fatalf("the first reserve: %s", r.Error)
			}

			// The terms change in the database only: the minimum rises, a
			// customer may take two uses, the window ends later.
			if _, err := db.Exec(context.Background(), `UPDATE voucher SET min_order_amount = 5000, per_user_limit = 2, ends_at = ends_at + interval '1 hour' WHERE code = $1`, code); err != nil {
				t.Fatal(err)
			}
			if r := gql(t, s, adminToken, `mutation($c: String!) { reconcileVoucher(code: $c) { report { drift } error { code message } } }`, map[string]any{"c": code}); path(r.Body, "data", "reconcileVoucher", "report") == nil {
				t.Fatalf("reconcileVoucher: %s", r.Raw)
			}
			// The pass that found the terms differ: this one, or the job's
			// first pass when a loaded machine started it late.
			var alert bool
			var repaired string
			if err := db.QueryRow(context.Background(), `SELECT alert, repaired FROM drift_report WHERE voucher_code = $1 AND repaired <> '' ORDER BY id DESC LIMIT 1`, code).Scan(&alert, &repaired); err != nil {
				t.Fatalf("no pass repaired the gate: %v", err)
			}
			if !alert || !strings.Contains(repaired, "rebuilt") {
				t.Errorf("the pass's report: alert %v, repaired %q; want an alert and the gate rebuilt (its terms differed)", alert, repaired)
			}

			var got result
			testenv.Eventually(t, "the customer's second use decided on the voucher's terms", func() (bool, string) {
				got = api.reserve(t, code, 1, uniqueOrder(), 6000)
				return got.Error != "UNAVAILABLE", got.Error
			})
			if got.Error != "" {
				t.Fatalf("the customer's second use (perUserLimit 2 now): %q, want a success", got.Error)
			}
			if r := api.reserve(t, code, 2, uniqueOrder(), 100); r.Error != "NOT_ELIGIBLE" {
				t.Errorf("an order of 100 under the new minimum 5000: %q, want NOT_ELIGIBLE", r.Error)
			}
		})
	}
}
