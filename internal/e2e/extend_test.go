package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// extendVoucher calls the admin mutation extendVoucher (graph/admin.graphqls).
func extendVoucher(t testing.TB, s *server, token string, in map[string]any) response {
	t.Helper()
	return gql(t, s, token, `mutation($in: ExtendVoucherInput!) { extendVoucher(input: $in) { `+voucherPayloadFields+` } }`, map[string]any{"in": in})
}

// auditDetails lists a voucher's audit rows of an action, oldest first, as
// "actor (role): detail".
func auditDetails(t testing.TB, s *server, code, action string) []string {
	t.Helper()
	rows, err := s.db.Query(context.Background(),
		`SELECT actor, actor_role, detail FROM voucher_audit WHERE voucher_code = $1 AND action = $2 ORDER BY id`, code, action)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var actor, role, detail string
		if err := rows.Scan(&actor, &role, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, actor+" ("+role+"): "+detail)
	}
	return out
}

// TestExtend_RaisedFlashTotalSellsExactlyTheDifference: a flash voucher sold
// out at 10 and raised to 15 sells exactly 5 more through the REST API under
// a stampede, in both write paths; the gate got exactly the difference, and
// the change is audited with who made it and the old and new totals.
func TestExtend_RaisedFlashTotalSellsExactlyTheDifference(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			s := sharedServer(t)
			if mode == "kafka" {
				s = kafkaServer(t, nil)
			}
			code := createVoucher(t, s, voucherSpec{TotalLimit: 10, Flash: true})
			counts := stampede(60, func(i int) string { return restAPI{s}.reserve(t, code, int64(20_000+i), uniqueOrder(), 100).Error })
			if counts[""] != 10 {
				t.Fatalf("the first sale: %v, want 10 successes", counts)
			}
			if r := (restAPI{s}).reserve(t, code, 29_999, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
				t.Fatalf("a reserve of the sold-out voucher: %+v, want OUT_OF_STOCK", r)
			}
			r := extendVoucher(t, s, adminToken, map[string]any{"code": code, "totalLimit": 15})
			if got := path(r.Body, "data", "extendVoucher"); path(got, "error") != nil || num(t, path(got, "voucher", "totalLimit")) != 15 {
				t.Fatalf("raising the total to 15: %s", r.Raw)
			}
			counts = stampede(200, func(i int) string { return restAPI{s}.reserve(t, code, int64(30_000+i), uniqueOrder(), 100).Error })
			if counts[""] != 5 || counts["OUT_OF_STOCK"] != 195 {
				t.Errorf("the sale after the raise: %v, want exactly 5 successes and 195 OUT_OF_STOCK", counts)
			}
			st := waitCounters(t, s, code, 15, 15, 0)
			if st.Remaining != 0 || st.GateRemaining == nil || *st.GateRemaining != 0 || liveRows(t, s.db, code) != 15 {
				t.Errorf("after the second sale: %+v gate %s; want 15 used, nothing remaining, the gate at 0", st, deref(st.GateRemaining))
			}
			if got := auditDetails(t, s, code, "extended"); len(got) != 1 || got[0] != "token (admin): totalLimit 10 → 15" {
				t.Errorf("the audit log: %q, want one row by the admin token with the totals", got)
			}
		})
	}
}

// TestExtend_TotalBelowWhatIsHeldIsRefusedAndChangesNothing: an ordinary
// voucher may be lowered to what is held, never below; a flash voucher's
// total only goes up; the end only moves later; an ended voucher is not
// extended; each refusal says why and writes nothing.
func TestExtend_TotalBelowWhatIsHeldIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 10})
	for i := range 4 {
		if r := (restAPI{s}).reserve(t, code, int64(40_000+i), uniqueOrder(), 100); r.Error != "" {
			t.Fatalf("reserve %d: %+v", i, r)
		}
	}
	refused := func(in map[string]any, wantCode, wantField, wantIn string) {
		t.Helper()
		r := extendVoucher(t, s, adminToken, in)
		e := path(r.Body, "data", "extendVoucher", "error")
		if str(path(e, "code")) != wantCode || str(path(e, "field")) != wantField || !strings.Contains(str(path(e, "message")), wantIn) {
			t.Errorf("extendVoucher(%v): %s, want %s on %q saying %q", in, r.Raw, wantCode, wantField, wantIn)
		}
		assertNothingLeaked(t, r.Raw)
	}
	refused(map[string]any{"code": code, "totalLimit": 3}, "INVALID_INPUT", "totalLimit", "below the 4 use(s) already held or sold")
	refused(map[string]any{"code": code, "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "INVALID_INPUT", "endsAt", "may only move later")
	refused(map[string]any{"code": code}, "INVALID_INPUT", "endsAt", "give a new endsAt")
	refused(map[string]any{"code": uniqueCode("none"), "totalLimit": 3}, "NOT_FOUND", "", "")
	if r := extendVoucher(t, s, storefrontToken, map[string]any{"code": code, "totalLimit": 20}); !strings.Contains(r.Raw, "FORBIDDEN") {
		t.Errorf("a storefront token extending: %s, want FORBIDDEN", r.Raw)
	}
	if st := readVoucher(t, s, code); st.Used != 4 || st.Remaining != 6 {
		t.Errorf("after the refusals: %+v, want the voucher unchanged (4 used, 6 remaining)", st)
	}
	if got := auditDetails(t, s, code, "extended"); len(got) != 0 {
		t.Errorf("refusals recorded: %q", got)
	}
	// Down to exactly what is held is allowed: it is sold out then.
	r := extendVoucher(t, s, adminToken, map[string]any{"code": code, "totalLimit": 4})
	if num(t, path(r.Body, "data", "extendVoucher", "voucher", "totalLimit")) != 4 {
		t.Fatalf("lowering to what is held: %s", r.Raw)
	}
	if r := (restAPI{s}).reserve(t, code, 49_999, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
		t.Errorf("a reserve after lowering to what is held: %+v, want OUT_OF_STOCK", r)
	}

	flashCode := createVoucher(t, s, voucherSpec{TotalLimit: 10, Flash: true})
	refused(map[string]any{"code": flashCode, "totalLimit": 9}, "INVALID_INPUT", "totalLimit", "may only go up")

	ended := createVoucher(t, s, voucherSpec{StartsAt: time.Now().Add(-2 * time.Hour), EndsAt: time.Now().Add(-time.Hour)})
	refused(map[string]any{"code": ended, "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "VOUCHER_NOT_LIVE", "", "has ended")
}

// TestExtend_LaterEndLetsAReserveSucceedAfterTheOldEnd, on an ordinary
// voucher and on flash vouchers of both write paths (kafka mode decides the
// window at the gate): a voucher whose end moved later takes a reserve past
// its old end, while one left alone refuses it.
func TestExtend_LaterEndLetsAReserveSucceedAfterTheOldEnd(t *testing.T) {
	t.Parallel()
	kafka := kafkaServer(t, nil)
	for _, c := range []struct {
		name  string
		s     *server
		flash bool
	}{{"ordinary", sharedServer(t), false}, {"flash-sync", sharedServer(t), true}, {"flash-kafka", kafka, true}} {
		t.Run(c.name, func(t *testing.T) {
			oldEnd := time.Now().Add(3 * time.Second)
			extended := createVoucher(t, c.s, voucherSpec{EndsAt: oldEnd, Flash: c.flash})
			left := createVoucher(t, c.s, voucherSpec{EndsAt: oldEnd, Flash: c.flash})
			newEnd := oldEnd.Add(time.Hour).UTC().Truncate(time.Second)
			r := extendVoucher(t, c.s, adminToken, map[string]any{"code": extended, "endsAt": newEnd.Format(time.RFC3339)})
			if got := str(path(r.Body, "data", "extendVoucher", "voucher", "endsAt")); got != newEnd.Format(time.RFC3339) {
				t.Fatalf("moving the end later: %s", r.Raw)
			}
			time.Sleep(time.Until(oldEnd) + 500*time.Millisecond)
			if r := (restAPI{c.s}).reserve(t, extended, 50_001, uniqueOrder(), 100); r.Error != "" {
				t.Errorf("a reserve after the old end of the extended voucher: %+v, want a success", r)
			}
			if r := (restAPI{c.s}).reserve(t, left, 50_002, uniqueOrder(), 100); r.Error != "NOT_ELIGIBLE" {
				t.Errorf("a reserve after the end of the voucher left alone: %+v, want NOT_ELIGIBLE", r)
			}
			got := auditDetails(t, c.s, extended, "extended")
			want := fmt.Sprintf("endsAt %s → %s", oldEnd.UTC().Format(time.RFC3339), newEnd.Format(time.RFC3339))
			if len(got) != 1 || !strings.HasSuffix(got[0], want) || !strings.HasPrefix(got[0], "token (admin)") {
				t.Errorf("the audit log: %q, want one row by the admin token ending %q", got, want)
			}
		})
	}
}
