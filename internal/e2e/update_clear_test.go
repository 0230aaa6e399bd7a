package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestUpdateVoucher_ClearsTheCapAndTheBudgetOnlyWhenAsked: updateVoucher's
// null keeps an amount (the contract's "omitted keeps its value");
// clearMaxDiscountAmount and clearBudgetAmount remove the cap and the
// budget, audited; asking to set and clear one at once is INVALID_INPUT
// and changes nothing.
func TestUpdateVoucher_ClearsTheCapAndTheBudgetOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	code := uniqueCode("clr")
	now := time.Now().UTC()
	const fields = `voucher { code maxDiscountAmount budgetAmount } error { code field message }`
	r := gql(t, s, adminToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { `+fields+` } }`, map[string]any{"in": map[string]any{
		"code": code, "discountType": "PERCENT", "discountPercent": 10, "maxDiscountAmount": 1500, "budgetAmount": 90000,
		"totalLimit": 10, "startsAt": now.Add(24 * time.Hour).Format(time.RFC3339), "endsAt": now.Add(48 * time.Hour).Format(time.RFC3339),
	}})
	if str(path(r.Body, "data", "createVoucher", "voucher", "code")) != code {
		t.Fatalf("creating: %s", r.Raw)
	}
	update := func(in map[string]any) (map[string]any, response) {
		t.Helper()
		in["code"] = code
		r := gql(t, s, adminToken, `mutation($in: UpdateVoucherInput!) { updateVoucher(input: $in) { `+fields+` } }`, map[string]any{"in": in})
		p, _ := path(r.Body, "data", "updateVoucher").(map[string]any)
		return p, r
	}
	if p, r := update(map[string]any{"maxDiscountAmount": nil, "budgetAmount": nil, "totalLimit": 12}); path(p, "voucher", "maxDiscountAmount") == nil || path(p, "voucher", "budgetAmount") == nil {
		t.Errorf("null amounts removed them: %s, want them kept", r.Raw)
	}
	if p, r := update(map[string]any{"clearMaxDiscountAmount": true, "maxDiscountAmount": 100}); str(path(p, "error", "code")) != "INVALID_INPUT" || str(path(p, "error", "field")) != "maxDiscountAmount" {
		t.Errorf("setting and clearing the cap at once: %s, want INVALID_INPUT on maxDiscountAmount", r.Raw)
	}
	if p, r := update(map[string]any{"clearBudgetAmount": true, "budgetAmount": 100}); str(path(p, "error", "code")) != "INVALID_INPUT" || str(path(p, "error", "field")) != "budgetAmount" {
		t.Errorf("setting and clearing the budget at once: %s, want INVALID_INPUT on budgetAmount", r.Raw)
	}
	p, r := update(map[string]any{"clearMaxDiscountAmount": true})
	if path(p, "voucher", "maxDiscountAmount") != nil || num(t, path(p, "voucher", "budgetAmount")) != 90000 {
		t.Errorf("clearing the cap: %s, want no cap and the budget kept", r.Raw)
	}
	p, r = update(map[string]any{"clearBudgetAmount": true, "clearMaxDiscountAmount": false})
	if path(p, "voucher", "budgetAmount") != nil || path(p, "voucher", "maxDiscountAmount") != nil {
		t.Errorf("clearing the budget: %s, want neither", r.Raw)
	}
	got := strings.Join(auditDetails(t, s, code, "updated"), " | ")
	for _, want := range []string{"maxDiscountAmount 1500 → none", "budgetAmount 90000 → none"} {
		if !strings.Contains(got, want) {
			t.Errorf("the audit log %q lacks %q", got, want)
		}
	}
}
