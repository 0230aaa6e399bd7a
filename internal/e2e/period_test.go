package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

// Period limits, customer segments and line items (README "Period limits,
// segments and line items"), over both transports, on the database path
// and in campaigns; segments on both flash write paths. Period limits on
// flash vouchers and campaigns are in flash_period_test.go, appliesTo on
// them in flash_applies_test.go.

// createRestricted creates an ordinary voucher (1000 off, 1000 uses, 100 per
// customer, live) with the extra CreateVoucherInput fields, and returns its
// code.
func createRestricted(t testing.TB, s *server, extra map[string]any) string {
	t.Helper()
	in := restrictedInput(extra)
	r := gql(t, s, adminToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message field } } }`, map[string]any{"in": in})
	code := str(path(r.Body, "data", "createVoucher", "voucher", "code"))
	if code == "" {
		t.Fatalf("createVoucher: %s", r.Raw)
	}
	return code
}

func restrictedInput(extra map[string]any) map[string]any {
	in := map[string]any{
		"code": uniqueCode("p"), "discountAmount": 1000, "totalLimit": 1000, "perUserLimit": 100,
		"startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(48 * time.Hour).Format(time.RFC3339),
	}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

// orderAnswer is a reserve's or a check's answer with the fields these
// tests read.
type orderAnswer struct {
	Error, Field string
	AvailableAt  string
	Discount     int64
}

// reserveOrder reserves with the extra input fields (customerSegments,
// items) over GraphQL or REST.
func reserveOrder(t testing.TB, s *server, transport, code string, customer int64, amount int64, extra map[string]any) orderAnswer {
	t.Helper()
	order := uniqueOrder()
	if transport == "rest" {
		body := map[string]any{"customerId": customer, "orderId": order, "orderAmount": amount}
		for k, v := range extra {
			body[k] = v
		}
		r := do(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations", storefrontToken, body)
		return restAnswer(t, r, http.StatusCreated)
	}
	in := map[string]any{"code": code, "customerId": fmt.Sprint(customer), "orderId": order, "orderAmount": amount}
	for k, v := range extra {
		in[k] = v
	}
	r := gql(t, s, storefrontToken, `mutation($in: ReserveVoucherInput!) { reserveVoucher(input: $in) { reservation { discountAmount } error { code message field availableAt } } }`, map[string]any{"in": in})
	return graphqlAnswer(t, r, "reserveVoucher", "reservation")
}

// checkOrder is checkVoucher with the extra input fields.
func checkOrder(t testing.TB, s *server, transport, code string, customer int64, amount int64, extra map[string]any) orderAnswer {
	t.Helper()
	if transport == "rest" {
		body := map[string]any{"customerId": customer, "orderAmount": amount}
		for k, v := range extra {
			body[k] = v
		}
		r := do(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(code)+"/checks", storefrontToken, body)
		return restAnswer(t, r, http.StatusOK)
	}
	in := map[string]any{"code": code, "customerId": fmt.Sprint(customer), "orderAmount": amount}
	for k, v := range extra {
		in[k] = v
	}
	r := gql(t, s, storefrontToken, `query($in: CheckVoucherInput!) { checkVoucher(input: $in) { discountAmount error { code message field availableAt } } }`, map[string]any{"in": in})
	return graphqlAnswer(t, r, "checkVoucher", "")
}

func restAnswer(t testing.TB, r response, success int) orderAnswer {
	t.Helper()
	if code := str(r.Body["error"]); code != "" {
		if want := restStatus[code]; r.Status != want {
			t.Errorf("REST %s answered HTTP %d, want %d: %s", code, r.Status, want, r.Raw)
		}
		return orderAnswer{Error: code, Field: str(r.Body["field"]), AvailableAt: str(r.Body["availableAt"])}
	}
	if r.Status != success {
		t.Fatalf("REST success answered HTTP %d: %s", r.Status, r.Raw)
	}
	return orderAnswer{Discount: num(t, r.Body["discountAmount"])}
}

func graphqlAnswer(t testing.TB, r response, op, node string) orderAnswer {
	t.Helper()
	if r.Status != http.StatusOK || path(r.Body, "errors") != nil {
		t.Fatalf("%s: HTTP %d: %s", op, r.Status, r.Raw)
	}
	p := path(r.Body, "data", op)
	if e, ok := path(p, "error").(map[string]any); ok {
		return orderAnswer{Error: str(e["code"]), Field: str(e["field"]), AvailableAt: str(e["availableAt"])}
	}
	if node != "" {
		p = path(p, node)
	}
	return orderAnswer{Discount: num(t, path(p, "discountAmount"))}
}

var transportNames = []string{"graphql", "rest"}

func TestPeriodLimits_DatabasePath_HeldUnderConcurrentReserves(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, transport := range transportNames {
		t.Run(transport+"/10 customers x 6 orders, CUSTOMER DAY 3", func(t *testing.T) {
			code := createRestricted(t, s, map[string]any{"timeZone": "Europe/Berlin",
				"periodLimits": []any{map[string]any{"scope": "CUSTOMER", "period": "DAY", "max": 3}}})
			var mu sync.Mutex
			perCustomer := map[int64]int{}
			outcomes := stampede(60, func(i int) string {
				customer := int64(500 + i%10)
				a := reserveOrder(t, s, transport, code, customer, 5000, nil)
				if a.Error == "" {
					mu.Lock()
					perCustomer[customer]++
					mu.Unlock()
				}
				return a.Error
			})
			if outcomes[""] != 30 || outcomes["PERIOD_LIMIT_REACHED"] != 30 {
				t.Fatalf("60 reserves: %v, want 30 successes and 30 PERIOD_LIMIT_REACHED", outcomes)
			}
			for c, n := range perCustomer {
				if n != 3 {
					t.Errorf("customer %d: %d uses, want 3", c, n)
				}
			}
			if v := readVoucher(t, s, code); v.Used != 30 {
				t.Errorf("usedCount %d, want 30", v.Used)
			}
		})
		t.Run(transport+"/40 reserves, VOUCHER DAY 5", func(t *testing.T) {
			code := createRestricted(t, s, map[string]any{
				"periodLimits": []any{map[string]any{"scope": "VOUCHER", "period": "DAY", "max": 5}}})
			outcomes := stampede(40, func(i int) string {
				return reserveOrder(t, s, transport, code, int64(700+i), 5000, nil).Error
			})
			if outcomes[""] != 5 || outcomes["PERIOD_LIMIT_REACHED"] != 35 {
				t.Fatalf("40 reserves: %v, want 5 successes and 35 PERIOD_LIMIT_REACHED", outcomes)
			}
		})
	}
}

func TestPeriodLimits_RefusalSaysTheNextMidnightInTheZoneAndCheckAgrees(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	zone := "America/Los_Angeles"
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range transportNames {
		t.Run(transport, func(t *testing.T) {
			code := createRestricted(t, s, map[string]any{"timeZone": zone,
				"periodLimits": []any{map[string]any{"scope": "CUSTOMER", "period": "DAY", "max": 1}}})
			before := time.Now()
			if a := checkOrder(t, s, transport, code, 42, 5000, nil); a.Error != "" || a.Discount != 1000 {
				t.Fatalf("check before any use: %+v", a)
			}
			if a := reserveOrder(t, s, transport, code, 42, 5000, nil); a.Error != "" {
				t.Fatalf("first reserve: %+v", a)
			}
			after := time.Now()
			for what, a := range map[string]orderAnswer{
				"reserve": reserveOrder(t, s, transport, code, 42, 5000, nil),
				"check":   checkOrder(t, s, transport, code, 42, 5000, nil),
			} {
				if a.Error != "PERIOD_LIMIT_REACHED" {
					t.Fatalf("%s past the limit: %+v, want PERIOD_LIMIT_REACHED", what, a)
				}
				at, err := time.Parse(time.RFC3339, a.AvailableAt)
				if err != nil {
					t.Fatalf("%s: availableAt %q: %v", what, a.AvailableAt, err)
				}
				// The next midnight in the zone (of the moment the use was
				// taken: the test does not span a midnight there unless it
				// ran across one, which either bound then allows).
				y, m, d := before.In(loc).Date()
				y2, m2, d2 := after.In(loc).Date()
				lo, hi := time.Date(y, m, d+1, 0, 0, 0, 0, loc), time.Date(y2, m2, d2+1, 0, 0, 0, 0, loc)
				if at.Before(lo) || at.After(hi) {
					t.Errorf("%s: availableAt %s, want the next midnight in %s (%s)", what, at, zone, lo)
				}
			}
			// Another customer is not limited by this one's day.
			if a := reserveOrder(t, s, transport, code, 43, 5000, nil); a.Error != "" {
				t.Fatalf("another customer: %+v", a)
			}
		})
	}
}

func TestSegmentsAndItems_DecideEligibilityAndTheDiscount(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	items := []any{
		map[string]any{"sku": "shoe-1", "category": "shoes", "quantity": 2, "unitAmount": 3000},
		map[string]any{"sku": "sock-1", "category": "socks", "quantity": 1, "unitAmount": 4000},
	}
	for _, transport := range transportNames {
		t.Run(transport, func(t *testing.T) {
			fixed := createRestricted(t, s, map[string]any{"discountAmount": 10000, "minOrderAmount": 9000,
				"eligibleSegments": []any{"vip", "tier:gold"}, "appliesTo": map[string]any{"categories": []any{"shoes"}}})
			percent := createRestricted(t, s, map[string]any{"discountType": "PERCENT", "discountAmount": 0, "discountPercent": 10,
				"appliesTo": map[string]any{"skus": []any{"sock-1"}}})
			vip := []any{"new", "vip"}
			for _, tc := range []struct {
				desc   string
				code   string
				amount int64
				extra  map[string]any
				want   orderAnswer
			}{
				{"FIXED: at most the eligible subtotal", fixed, 10000, map[string]any{"items": items, "customerSegments": vip}, orderAnswer{Discount: 6000}},
				{"PERCENT: of the eligible subtotal", percent, 10000, map[string]any{"items": items}, orderAnswer{Discount: 400}},
				{"no segment of the voucher's", fixed, 10000, map[string]any{"items": items, "customerSegments": []any{"new"}}, orderAnswer{Error: "NOT_ELIGIBLE"}},
				{"no items with appliesTo", fixed, 10000, map[string]any{"customerSegments": vip}, orderAnswer{Error: "NOT_ELIGIBLE"}},
				{"no eligible item", percent, 6000, map[string]any{"items": items[:1]}, orderAnswer{Error: "NOT_ELIGIBLE"}},
				{"minOrderAmount on orderAmount", fixed, 6000, map[string]any{"items": items[:1], "customerSegments": vip}, orderAnswer{Error: "NOT_ELIGIBLE"}},
				{"items that do not add up", fixed, 9999, map[string]any{"items": items, "customerSegments": vip}, orderAnswer{Error: "INVALID_INPUT", Field: "items"}},
				{"a segment out of the alphabet", fixed, 10000, map[string]any{"items": items, "customerSegments": []any{"VIP"}}, orderAnswer{Error: "INVALID_INPUT", Field: "customerSegments"}},
			} {
				for what, a := range map[string]orderAnswer{
					"check":   checkOrder(t, s, transport, tc.code, 9, tc.amount, tc.extra),
					"reserve": reserveOrder(t, s, transport, tc.code, 9, tc.amount, tc.extra),
				} {
					if a.Error != tc.want.Error || a.Field != tc.want.Field || a.Discount != tc.want.Discount {
						t.Errorf("%s: %s answered %+v, want %+v", tc.desc, what, a, tc.want)
					}
				}
			}
		})
	}
}

func TestPeriodLimits_BadInputIsRefusedWithItsFieldAndNothingIsMade(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	limit := func(max int) map[string]any { return map[string]any{"scope": "VOUCHER", "period": "WEEK", "max": max} }
	many := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"scope": "CUSTOMER", "period": []string{"DAY", "WEEK", "MONTH"}[i%3], "max": 1}
		}
		return out
	}
	for _, tc := range []struct {
		desc  string
		extra map[string]any
		field string
	}{
		{"max under 1", map[string]any{"periodLimits": []any{limit(0)}}, "periodLimits"},
		{"more than 5 limits", map[string]any{"periodLimits": many(6)}, "periodLimits"},
		{"an unknown time zone", map[string]any{"timeZone": "Europe/Atlantis"}, "timeZone"},
		{"a segment out of the alphabet", map[string]any{"eligibleSegments": []any{"Gold Members"}}, "eligibleSegments"},
		{"appliesTo naming nothing", map[string]any{"flash": true, "appliesTo": map[string]any{"skus": []any{}}}, "appliesTo"},
	} {
		in := restrictedInput(tc.extra)
		r := gql(t, s, adminToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message field } } }`, map[string]any{"in": in})
		e := path(r.Body, "data", "createVoucher", "error")
		if str(path(e, "code")) != "INVALID_INPUT" || str(path(e, "field")) != tc.field {
			t.Errorf("%s: %s, want INVALID_INPUT on %s", tc.desc, r.Raw, tc.field)
			continue
		}
		if v := gql(t, s, adminToken, `query($c: String!) { voucher(code: $c) { code } }`, map[string]any{"c": in["code"]}); path(v.Body, "data", "voucher") != nil {
			t.Errorf("%s: the voucher was made: %s", tc.desc, v.Raw)
		}
	}
	// A flash voucher and a flash campaign hold appliesTo at the gate
	// (flash_applies_test.go): both are made.
	if code := createRestricted(t, s, map[string]any{"flash": true, "appliesTo": map[string]any{"skus": []any{"a"}}}); code == "" {
		t.Error("a flash voucher with appliesTo was not made")
	}
	r := gql(t, s, adminToken, `mutation($in: CreateCampaignInput!) { createCampaign(input: $in) { campaign { id } error { code message field } } }`,
		map[string]any{"in": map[string]any{"name": "weekly", "codeCount": 3, "discountAmount": 100, "flash": true,
			"startsAt": time.Now().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).Format(time.RFC3339),
			"appliesTo": map[string]any{"skus": []any{"a"}}}})
	if e := path(r.Body, "data", "createCampaign", "error"); e != nil || str(path(r.Body, "data", "createCampaign", "campaign", "id")) == "" {
		t.Errorf("a flash campaign with appliesTo: %s, want it made", r.Raw)
	}
	// What the voucher shows of its settings.
	code := createRestricted(t, s, map[string]any{"timeZone": "Asia/Tokyo", "periodLimits": []any{limit(4)},
		"eligibleSegments": []any{"vip"}, "appliesTo": map[string]any{"categories": []any{"shoes"}}})
	v := gql(t, s, adminToken, `query($c: String!) { voucher(code: $c) { timeZone periodLimits { scope period max } eligibleSegments appliesTo { skus categories } } }`, map[string]any{"c": code})
	want := `{"data":{"voucher":{"timeZone":"Asia/Tokyo","periodLimits":[{"scope":"VOUCHER","period":"WEEK","max":4}],"eligibleSegments":["vip"],"appliesTo":{"skus":[],"categories":["shoes"]}}}}`
	if string(v.Raw) != want {
		t.Errorf("voucher: %s\nwant %s", v.Raw, want)
	}
}

// A campaign's period limit spans all its codes: a customer's uses of any
// code count in the customer's day of the campaign.
func TestPeriodLimits_Campaign_HeldAcrossItsCodesUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	r := gql(t, s, adminToken, `mutation($in: CreateCampaignInput!) { createCampaign(input: $in) { campaign { id } error { code message field } } }`,
		map[string]any{"in": map[string]any{"name": "daily " + uniqueCode("c"), "codeCount": 60, "usesPerCode": 10, "discountAmount": 100, "perUserLimit": 100,
			"startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).Format(time.RFC3339),
			"timeZone": "Europe/Berlin", "eligibleSegments": []any{"vip"},
			"periodLimits": []any{map[string]any{"scope": "CUSTOMER", "period": "DAY", "max": 3}}}})
	id := str(path(r.Body, "data", "createCampaign", "campaign", "id"))
	if id == "" {
		t.Fatalf("createCampaign: %s", r.Raw)
	}
	waitCampaignReady(t, s, id, time.Minute)
	codes := exportCodes(t, s, id)
	vip := map[string]any{"customerSegments": []any{"vip"}}
	for _, transport := range transportNames {
		t.Run(transport, func(t *testing.T) {
			base := int64(800)
			if transport == "rest" {
				base = 900
			}
			if a := reserveOrder(t, s, transport, strings.Split(codes[0], ",")[0], base+50, 5000, nil); a.Error != "NOT_ELIGIBLE" {
				t.Fatalf("a customer in no segment of the campaign's: %+v, want NOT_ELIGIBLE", a)
			}
			outcomes := stampede(60, func(i int) string {
				code := strings.Split(codes[i], ",")[0]
				return reserveOrder(t, s, transport, code, base+int64(i%10), 5000, vip).Error
			})
			if outcomes[""] != 30 || outcomes["PERIOD_LIMIT_REACHED"] != 30 {
				t.Fatalf("60 reserves on 60 codes by 10 customers: %v, want 30 successes and 30 PERIOD_LIMIT_REACHED", outcomes)
			}
		})
	}
}

// Segments are the request's: a flash voucher decides them before its gate,
// on either write path; the gate's stock holds.
func TestSegments_FlashVoucher_DecidedBeforeTheGateOnBothWritePaths(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			s := sharedServer(t)
			if mode == "kafka" {
				s = kafkaServer(t, nil)
			}
			code := createRestricted(t, s, map[string]any{"flash": true, "totalLimit": 5, "perUserLimit": 1, "eligibleSegments": []any{"vip"}})
			for _, transport := range transportNames {
				if a := reserveOrder(t, s, transport, code, 1, 5000, map[string]any{"customerSegments": []any{"new"}}); a.Error != "NOT_ELIGIBLE" {
					t.Errorf("%s: a customer in no segment of the voucher's: %+v, want NOT_ELIGIBLE", transport, a)
				}
				if a := checkOrder(t, s, transport, code, 1, 5000, nil); a.Error != "NOT_ELIGIBLE" {
					t.Errorf("%s: a check without segments: %+v, want NOT_ELIGIBLE", transport, a)
				}
			}
			vip := map[string]any{"customerSegments": []any{"vip"}}
			outcomes := stampede(20, func(i int) string {
				var a orderAnswer
				testenvEventuallyAnswer(t, func() bool {
					a = reserveOrder(t, s, transportNames[i%2], code, int64(100+i), 5000, vip)
					return a.Error != "UNAVAILABLE"
				})
				return a.Error
			})
			if outcomes[""] != 5 || outcomes["OUT_OF_STOCK"] != 15 {
				t.Fatalf("20 vip reserves on 5 uses: %v, want 5 successes and 15 OUT_OF_STOCK", outcomes)
			}
			// An identical retry (its segments with it) passes the check and
			// gets its reservation from the gate.
			order := uniqueOrder()
			code2 := createRestricted(t, s, map[string]any{"flash": true, "totalLimit": 5, "perUserLimit": 1, "eligibleSegments": []any{"vip"}})
			in := map[string]any{"code": code2, "customerId": "77", "orderId": order, "orderAmount": 5000, "customerSegments": []any{"vip"}}
			for try := range 2 {
				var r response
				testenvEventuallyAnswer(t, func() bool {
					r = gql(t, s, storefrontToken, `mutation($in: ReserveVoucherInput!) { reserveVoucher(input: $in) { reservation { status } error { code } } }`, map[string]any{"in": in})
					return str(path(r.Body, "data", "reserveVoucher", "error", "code")) != "UNAVAILABLE"
				})
				if got := str(path(r.Body, "data", "reserveVoucher", "reservation", "status")); got != "RESERVED" {
					t.Errorf("reserve %d of one order: %s, want the reservation", try+1, r.Raw)
				}
			}
		})
	}
}

// testenvEventuallyAnswer retries a reserve while the gate is being loaded
// (UNAVAILABLE), with a deadline.
func testenvEventuallyAnswer(t testing.TB, try func() bool) {
	t.Helper()
	testenv.Eventually(t, "a reserve answered past the gate's load", func() (bool, string) { return try(), "UNAVAILABLE" })
}

// A voucher with appliesTo may become a flash voucher by a change: the
// gate holds it.
func TestAppliesTo_UpdateVoucherToFlashIsAccepted(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	code := createRestricted(t, s, map[string]any{
		"startsAt":  time.Now().Add(24 * time.Hour).Format(time.RFC3339),
		"endsAt":    time.Now().Add(48 * time.Hour).Format(time.RFC3339),
		"appliesTo": map[string]any{"skus": []any{"a"}}})
	r := gql(t, s, adminToken, `mutation($in: UpdateVoucherInput!) { updateVoucher(input: $in) { voucher { flash } error { code field } } }`,
		map[string]any{"in": map[string]any{"code": code, "flash": true}})
	if e := path(r.Body, "data", "updateVoucher", "error"); e != nil {
		t.Fatalf("updateVoucher to flash: %s, want it accepted", r.Raw)
	}
	v := gql(t, s, adminToken, `query($c: String!) { voucher(code: $c) { flash appliesTo { skus } } }`, map[string]any{"c": code})
	if want := `{"data":{"voucher":{"flash":true,"appliesTo":{"skus":["a"]}}}}`; string(v.Raw) != want {
		t.Errorf("after the change: %s, want %s", v.Raw, want)
	}
}
