package e2e

import (
	"strings"
	"testing"
	"time"
)

const voucherPayloadFields = `voucher { code totalLimit startsAt endsAt flash } error { code field message }`

// TestAdminMutations_ChangeBeforeStartEndWhileLive covers updateVoucher and
// endVoucher (graph/admin.graphqls): admin only, a change only before the
// window opens, an end only while it is open, and the contract's rules for
// the reservations of an ended voucher.
func TestAdminMutations_ChangeBeforeStartEndWhileLive(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	now := time.Now().UTC()
	create := func(code string, start, end time.Time) {
		t.Helper()
		r := gql(t, s, adminToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { `+voucherPayloadFields+` } }`,
			map[string]any{"in": map[string]any{"code": code, "discountAmount": 1000, "totalLimit": 10, "startsAt": start.Format(time.RFC3339), "endsAt": end.Format(time.RFC3339)}})
		if str(path(r.Body, "data", "createVoucher", "voucher", "code")) != code {
			t.Fatalf("creating %s: %s", code, r.Raw)
		}
	}
	update := func(token string, in map[string]any) response {
		t.Helper()
		return gql(t, s, token, `mutation($in: UpdateVoucherInput!) { updateVoucher(input: $in) { `+voucherPayloadFields+` } }`, map[string]any{"in": in})
	}
	end := func(token, code string) response {
		t.Helper()
		return gql(t, s, token, `mutation($c: String!) { endVoucher(code: $c) { `+voucherPayloadFields+` } }`, map[string]any{"c": code})
	}

	later := uniqueCode("upd")
	create(later, now.Add(24*time.Hour), now.Add(48*time.Hour))
	if r := update(storefrontToken, map[string]any{"code": later, "totalLimit": 99}); str(path(r.Body, "errors")) == "" ||
		str(path(r.Body["errors"].([]any)[0], "extensions", "code")) != "FORBIDDEN" {
		t.Errorf("a storefront token changing a voucher: %s, want FORBIDDEN", r.Raw)
	}
	renamed := uniqueCode("ren")
	r := update(adminToken, map[string]any{"code": later, "newCode": renamed, "totalLimit": 25, "flash": true})
	if got := path(r.Body, "data", "updateVoucher", "voucher"); str(path(got, "code")) != renamed || num(t, path(got, "totalLimit")) != 25 || path(got, "flash") != true {
		t.Fatalf("changing a scheduled voucher: %s", r.Raw)
	}
	if r := update(adminToken, map[string]any{"code": renamed, "endsAt": now.Add(time.Hour).Format(time.RFC3339)}); str(path(r.Body, "data", "updateVoucher", "error", "code")) != "INVALID_INPUT" {
		t.Errorf("an end before the start: %s, want INVALID_INPUT", r.Raw)
	}
	if r := update(adminToken, map[string]any{"code": uniqueCode("none"), "totalLimit": 3}); str(path(r.Body, "data", "updateVoucher", "error", "code")) != "NOT_FOUND" {
		t.Errorf("an unknown voucher: %s, want NOT_FOUND", r.Raw)
	}
	if r := end(adminToken, renamed); str(path(r.Body, "data", "endVoucher", "error", "code")) != "VOUCHER_NOT_LIVE" {
		t.Errorf("ending a voucher that has not started: %s, want VOUCHER_NOT_LIVE", r.Raw)
	}

	live := uniqueCode("live")
	create(live, now.Add(-time.Hour), now.Add(time.Hour))
	order := uniqueOrder()
	if rr := do(t, "POST", s.URL+"/vouchers/"+live+"/reservations", storefrontToken, map[string]any{"customerId": 7, "orderId": order, "orderAmount": 5000}); rr.Status != 201 {
		t.Fatalf("reserve: %d %s", rr.Status, rr.Raw)
	}
	if r := update(adminToken, map[string]any{"code": live, "totalLimit": 99}); str(path(r.Body, "data", "updateVoucher", "error", "code")) != "VOUCHER_STARTED" {
		t.Errorf("changing a live voucher: %s, want VOUCHER_STARTED", r.Raw)
	}
	if r := end(storefrontToken, live); str(path(r.Body["errors"].([]any)[0], "extensions", "code")) != "FORBIDDEN" {
		t.Errorf("a storefront token ending a voucher: %s, want FORBIDDEN", r.Raw)
	}
	r = end(adminToken, live)
	endsAt, err := time.Parse(time.RFC3339, str(path(r.Body, "data", "endVoucher", "voucher", "endsAt")))
	if err != nil || endsAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("ending a live voucher: %s", r.Raw)
	}
	if rr := do(t, "POST", s.URL+"/vouchers/"+live+"/reservations", storefrontToken, map[string]any{"customerId": 8, "orderId": uniqueOrder(), "orderAmount": 5000}); rr.Status != 422 {
		t.Errorf("reserving an ended voucher: %d %s, want 422 NOT_ELIGIBLE", rr.Status, rr.Raw)
	}
	if rr := do(t, "POST", s.URL+"/vouchers/"+live+"/reservations/"+order+"/confirm", storefrontToken, nil); rr.Status != 200 {
		t.Errorf("confirming a reservation held before the end: %d %s, want 200 (it keeps its rules)", rr.Status, rr.Raw)
	}
	if r := end(adminToken, live); str(path(r.Body, "data", "endVoucher", "error", "code")) != "VOUCHER_NOT_LIVE" {
		t.Errorf("ending twice: %s, want VOUCHER_NOT_LIVE", r.Raw)
	}
	var actions []string
	rows, err := s.db.Query(t.Context(), `SELECT action || ':' || actor FROM voucher_audit WHERE voucher_code = $1 ORDER BY id`, live)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		_ = rows.Scan(&a)
		actions = append(actions, a)
	}
	rows.Close()
	// createVoucher through the admin token is audited too (issue 15).
	if strings.Join(actions, " ") != "created:token ended:token" {
		t.Errorf("audit of %s = %v, want its creation and its end, each by the token", live, actions)
	}
}
