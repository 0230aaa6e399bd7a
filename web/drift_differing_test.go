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

// TestDrift_TheCodesAndPeriodCountsThatDifferAreNamed: a campaign gate's
// report names the codes whose uses differ from the database's, a period
// limit's report the period counts that differ, each with what to do; a
// report without any shows no such line.
func TestDrift_TheCodesAndPeriodCountsThatDifferAreNamed(t *testing.T) {
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
	periods := []string{"CUSTOMER DAY 2026-12-06T00:00:00Z customer 7: gate 2, database 1", "VOUCHER DAY 2026-12-06T00:00:00Z customer 0: gate 4, database 3"}
	for code, differing := range map[string][]string{"DIFFERS": {"CODE-A", "CODE-B"}, "AGREES": nil} {
		report := voucher.DriftReport{VoucherCode: code, DatabaseRemaining: 10, GateRemaining: &gate, CodesDiffering: differing, Alert: differing != nil}
		if differing != nil {
			report.PeriodsDiffering = periods
		}
		if _, err := store.SaveDriftReport(context.Background(), report); err != nil {
			t.Fatal(err)
		}
	}
	op := f.signIn(t, voucher.RoleOperator)
	page := doc(t, f.do(t, http.MethodGet, "/admin/drift", &op, nil, nil))
	line := page.Find(`[data-testid=drift-row][data-code=DIFFERS] [data-testid=codes-differing]`).Text()
	if !strings.Contains(line, "CODE-A, CODE-B") || !strings.Contains(line, "Rebuild the gate") {
		t.Errorf("the report's line: %q, want CODE-A, CODE-B named with what to do", line)
	}
	line = page.Find(`[data-testid=drift-row][data-code=DIFFERS] [data-testid=periods-differing]`).Text()
	if !strings.Contains(line, strings.Join(periods, "; ")) || !strings.Contains(line, "Rebuild the gate") {
		t.Errorf("the report's period line: %q, want %q named with what to do", line, periods)
	}
	if n := page.Find(`[data-testid=drift-row][data-code=AGREES] [data-testid=codes-differing], [data-testid=drift-row][data-code=AGREES] [data-testid=periods-differing]`).Length(); n != 0 {
		t.Errorf("a report without codes or periods differing shows %d such lines", n)
	}
}
