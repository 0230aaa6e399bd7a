package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"voucherd/internal/postgres"
	"voucherd/internal/voucher"
	"voucherd/web"
)

// TestDrift_TheCodesWhoseUsesDifferAreNamed: a campaign gate's report names
// the codes whose uses differ from the database's, with what to do; a
// report without any shows no such line.
func TestDrift_TheCodesWhoseUsesDifferAreNamed(t *testing.T) {
	t.Parallel()
	f, own := newOwnFixture(t, web.Config{})
	now := time.Now()
	for _, code := range []string{"DIFFERS", "AGREES"} {
		if _, err := f.svc.CreateVoucher(adminCtx, voucher.NewVoucher{Code: code, DiscountAmount: 100, TotalLimit: 10, PerUserLimit: 1,
			Flash: true, StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	store := postgres.New(own)
	gate := 10
	for code, differing := range map[string][]string{"DIFFERS": {"CODE-A", "CODE-B"}, "AGREES": nil} {
		if _, err := store.SaveDriftReport(context.Background(), voucher.DriftReport{VoucherCode: code, DatabaseRemaining: 10, GateRemaining: &gate, CodesDiffering: differing, Alert: differing != nil}); err != nil {
			t.Fatal(err)
		}
	}
	op := f.signIn(t, voucher.RoleOperator)
	page := doc(t, f.do(t, http.MethodGet, "/admin/drift", &op, nil, nil))
	line := page.Find(`[data-testid=drift-row][data-code=DIFFERS] [data-testid=codes-differing]`).Text()
	if !strings.Contains(line, "CODE-A, CODE-B") || !strings.Contains(line, "Rebuild the gate") {
		t.Errorf("the report's line: %q, want CODE-A, CODE-B named with what to do", line)
	}
	if n := page.Find(`[data-testid=drift-row][data-code=AGREES] [data-testid=codes-differing]`).Length(); n != 0 {
		t.Errorf("a report without codes differing shows %d such lines", n)
	}
}
