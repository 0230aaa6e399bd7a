package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testenv"
)

// appliesTo on flash vouchers and flash campaigns (README "Period limits,
// segments and line items"; docs/period-limits.md "The flash gate"): the
// discount is taken on the eligible items' subtotal on both write paths,
// the gate takes exactly that discount from the budget, keeps it with the
// order (voucher:{CODE}:orderdiscounts) and gives exactly it back.

// The order lines of these tests: 5000 in all, 3000 of shoes, 2000 of socks.
var appliesItems = []any{
	map[string]any{"sku": "shoe-1", "category": "shoes", "quantity": 2, "unitAmount": 1500},
	map[string]any{"sku": "sock-1", "category": "socks", "quantity": 1, "unitAmount": 2000},
}

// budgetItems: 5000 in all, of which 300 of shoes.
var budgetItems = []any{
	map[string]any{"sku": "shoe-2", "category": "shoes", "quantity": 1, "unitAmount": 300},
	map[string]any{"sku": "sock-2", "category": "socks", "quantity": 1, "unitAmount": 4700},
}

// warmWithItems is warmGate for a voucher with appliesTo: its check needs
// eligible items, else NOT_ELIGIBLE answers before the gate is asked.
func warmWithItems(t testing.TB, s *server, code string, items []any) {
	t.Helper()
	testenv.Eventually(t, "the gate of "+code+" loaded", func() (bool, string) {
		a := checkOrder(t, s, "rest", code, 1, 5000, map[string]any{"items": items})
		return a.Error != "UNAVAILABLE", a.Error
	})
}

// reserveItems reserves order over REST with items, retrying while the
// gate is being prepared (UNAVAILABLE); it returns the answer and the
// refusal's message.
func reserveItems(t testing.TB, s *server, code, order string, customer int64, items []any) (orderAnswer, string) {
	t.Helper()
	body := map[string]any{"customerId": customer, "orderId": order, "orderAmount": 5000}
	if items != nil {
		body["items"] = items
	}
	var a orderAnswer
	var message string
	testenvEventuallyAnswer(t, func() bool {
		r := do(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations", storefrontToken, body)
		a, message = restAnswer(t, r, http.StatusCreated), str(r.Body["message"])
		return a.Error != "UNAVAILABLE"
	})
	return a, message
}

// gateBudget reads the budget left the gate of code holds (its meta hash).
func gateBudget(t testing.TB, rdb *redis.Client, gateCode string) string {
	t.Helper()
	v, err := rdb.HGet(context.Background(), "voucher:{"+gateCode+"}:meta", "budget").Result()
	if err != nil {
		t.Fatalf("the gate's budget of %s: %v", gateCode, err)
	}
	return v
}

func TestAppliesTo_Flash_DiscountOnTheEligibleItemsOnBothWritePaths(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			s := flashPeriodServer(t, mode)
			fixed := createRestricted(t, s, map[string]any{"flash": true, "discountAmount": 4000,
				"appliesTo": map[string]any{"categories": []any{"shoes"}}})
			percent := createRestricted(t, s, map[string]any{"flash": true, "discountType": "PERCENT", "discountAmount": 0, "discountPercent": 10,
				"appliesTo": map[string]any{"categories": []any{"socks"}}})
			warmWithItems(t, s, fixed, appliesItems)
			warmWithItems(t, s, percent, appliesItems)
			for _, tc := range []struct {
				desc  string
				code  string
				items []any
				want  orderAnswer
			}{
				{"FIXED: at most the eligible subtotal", fixed, appliesItems, orderAnswer{Discount: 3000}},
				{"PERCENT: of the eligible subtotal", percent, appliesItems, orderAnswer{Discount: 200}},
				{"FIXED without items", fixed, nil, orderAnswer{Error: "NOT_ELIGIBLE"}},
				{"PERCENT without items", percent, nil, orderAnswer{Error: "NOT_ELIGIBLE"}},
				{"FIXED with no eligible item", fixed, []any{map[string]any{"sku": "sock-9", "category": "socks", "quantity": 1, "unitAmount": 5000}}, orderAnswer{Error: "NOT_ELIGIBLE"}},
				{"PERCENT with no eligible item", percent, []any{map[string]any{"sku": "shoe-9", "category": "shoes", "quantity": 1, "unitAmount": 5000}}, orderAnswer{Error: "NOT_ELIGIBLE"}},
			} {
				order := uniqueOrder()
				a, _ := reserveItems(t, s, tc.code, order, 9, tc.items)
				if a.Error != tc.want.Error || a.Discount != tc.want.Discount {
					t.Errorf("%s: reserve answered %+v, want %+v", tc.desc, a, tc.want)
					continue
				}
				if a.Error != "" {
					continue
				}
				// A retry of the order is answered from the gate's record
				// (kafka) or the database's row (sync): the same discount.
				if again, _ := reserveItems(t, s, tc.code, order, 9, tc.items); again != a {
					t.Errorf("%s: a retry answered %+v, want %+v", tc.desc, again, a)
				}
				// And the reservation the database ends with holds it.
				testenv.Eventually(t, "the reservation of "+order+" written", func() (bool, string) {
					r := gql(t, s, storefrontToken, `query($o: String!) { reservation(orderId: $o) { discountAmount } }`, map[string]any{"o": order})
					d := path(r.Body, "data", "reservation", "discountAmount")
					return d != nil && num(t, d) == tc.want.Discount, string(r.Raw)
				})
				// A confirm answers it too (kafka: decided at the gate).
				r := do(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(tc.code)+"/reservations/"+url.PathEscape(order)+"/confirm", storefrontToken, nil)
				if r.Status != http.StatusOK || num(t, r.Body["discountAmount"]) != tc.want.Discount {
					t.Errorf("%s: confirm: HTTP %d %s, want discountAmount %d", tc.desc, r.Status, r.Raw, tc.want.Discount)
				}
			}
		})
	}
}

// A flash voucher with a budget and appliesTo: the gate takes each order's
// item-based discount from the budget (300 of an order of 5000 whose
// amount would give 1000), a release gives exactly it back, and a crowd
// takes exactly what the budget covers.
func TestAppliesTo_Flash_TheBudgetTakesAndGetsBackTheItemBasedDiscount(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			s := flashPeriodServer(t, mode)
			code := createRestricted(t, s, map[string]any{"flash": true, "discountAmount": 1000, "budgetAmount": 900,
				"appliesTo": map[string]any{"categories": []any{"shoes"}}})
			budgetTest(t, s, code, code, func(int) string { return code }, func() int64 { return budgetUsed(t, s, code) })
		})
	}
}

// budgetTest runs the budget's test on a flash voucher or campaign whose
// gate is gateCode, reserving code(i) for the ith reserve; its budget is
// 900 and an order of budgetItems' discount 300.
func budgetTest(t *testing.T, s *server, gateCode string, warm string, code func(i int) string, used func() int64) {
	t.Helper()
	rdb := redis.NewClient(mustRedisOptions(t))
	t.Cleanup(func() { _ = rdb.Close() })
	warmWithItems(t, s, warm, budgetItems)

	// 12 customers at once on a budget of 900: exactly 3 orders of 300.
	orders := make([]string, 12)
	for i := range orders {
		orders[i] = uniqueOrder()
	}
	var mu sync.Mutex
	won := map[string]string{} // order -> the code it was reserved with
	outcomes := stampede(len(orders), func(i int) string {
		a, _ := reserveItems(t, s, code(i), orders[i], int64(300+i), budgetItems)
		if a.Error == "" {
			if a.Discount != 300 {
				t.Errorf("reserve %d: discount %d, want 300", i, a.Discount)
			}
			mu.Lock()
			won[orders[i]] = code(i)
			mu.Unlock()
		}
		return a.Error
	})
	if outcomes[""] != 3 || outcomes["BUDGET_EXHAUSTED"] != 9 {
		t.Fatalf("12 reserves on a budget of 900 at 300 each: %v, want 3 successes and 9 BUDGET_EXHAUSTED", outcomes)
	}
	if got := gateBudget(t, rdb, gateCode); got != "0" {
		t.Fatalf("the gate's budget left after 3 orders: %s, want 0", got)
	}
	testenv.Eventually(t, "the database's budgetUsed is 900", func() (bool, string) {
		used := used()
		return used == 900, fmt.Sprint(used)
	})
	// The refusal names the item-based discount.
	if a, msg := reserveItems(t, s, code(0), uniqueOrder(), 399, budgetItems); a.Error != "BUDGET_EXHAUSTED" || !strings.Contains(msg, "discount of 300") {
		t.Errorf("a reserve past the budget: %+v %q, want BUDGET_EXHAUSTED naming a discount of 300", a, msg)
	}

	// A rebuild from the database keeps the orders' discounts (the rows'
	// discount_amount), so the release below still gives back 300.
	testenv.Eventually(t, "a rebuild of the gate of "+gateCode, func() (bool, string) {
		r := gql(t, s, adminToken, `mutation($c: String!) { rebuildGate(code: $c) { report { drift } error { code message } } }`, map[string]any{"c": code(0)})
		return path(r.Body, "data", "rebuildGate", "report") != nil, string(r.Raw)
	})
	kept, err := rdb.HGetAll(context.Background(), "voucher:{"+gateCode+"}:orderdiscounts").Result()
	if err != nil {
		t.Fatal(err)
	}
	for o := range won {
		if kept[o] != "300" {
			t.Errorf("after the rebuild the gate keeps %q for %s, want 300 (all: %v)", kept[o], o, kept)
		}
	}
	if got := gateBudget(t, rdb, gateCode); got != "0" {
		t.Fatalf("the gate's budget left after the rebuild: %s, want 0", got)
	}

	// Release one of the three: exactly 300 goes back to the gate's budget
	// (not the 1000 the order's amount would give) and to the database's.
	for o, c := range won {
		r := do(t, http.MethodDelete, s.URL+"/vouchers/"+url.PathEscape(c)+"/reservations/"+url.PathEscape(o), storefrontToken, nil)
		if r.Status != http.StatusOK || num(t, r.Body["discountAmount"]) != 300 {
			t.Fatalf("release: HTTP %d: %s", r.Status, r.Raw)
		}
		break
	}
	testenv.Eventually(t, "300 given back to the gate's budget", func() (bool, string) {
		got := gateBudget(t, rdb, gateCode)
		return got == "300", got
	})
	testenv.Eventually(t, "the database's budgetUsed is 600", func() (bool, string) {
		used := used()
		return used == 600, fmt.Sprint(used)
	})
	// So exactly one more order of 300 passes among a crowd.
	more := stampede(6, func(i int) string {
		a, _ := reserveItems(t, s, code(i), uniqueOrder(), int64(400+i), budgetItems)
		return a.Error
	})
	if more[""] != 1 || more["BUDGET_EXHAUSTED"] != 5 {
		t.Fatalf("6 reserves after a release of 300: %v, want 1 success and 5 BUDGET_EXHAUSTED", more)
	}
	if got := gateBudget(t, rdb, gateCode); got != "0" {
		t.Fatalf("the gate's budget left: %s, want 0", got)
	}
}

func TestAppliesTo_FlashCampaign_DiscountAndBudgetOnTheEligibleItems(t *testing.T) {
	t.Parallel()
	s := flashPeriodServer(t, "sync")
	create := func(extra map[string]any) (string, []string) {
		in := map[string]any{"name": "flash items " + uniqueCode("c"), "codeCount": 20, "usesPerCode": 5, "perUserLimit": 5,
			"flash": true, "startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).Format(time.RFC3339)}
		for k, v := range extra {
			in[k] = v
		}
		r := gql(t, s, adminToken, `mutation($in: CreateCampaignInput!) { createCampaign(input: $in) { campaign { id } error { code message field } } }`, map[string]any{"in": in})
		id := str(path(r.Body, "data", "createCampaign", "campaign", "id"))
		if id == "" {
			t.Fatalf("createCampaign: %s", r.Raw)
		}
		waitCampaignReady(t, s, id, time.Minute)
		codes := exportCodes(t, s, id)
		for i := range codes {
			codes[i] = strings.Split(codes[i], ",")[0]
		}
		return id, codes
	}
	_, fixed := create(map[string]any{"discountAmount": 4000, "appliesTo": map[string]any{"categories": []any{"shoes"}}})
	_, percent := create(map[string]any{"discountType": "PERCENT", "discountPercent": 10, "appliesTo": map[string]any{"categories": []any{"socks"}}})
	warmWithItems(t, s, fixed[0], appliesItems)
	warmWithItems(t, s, percent[0], appliesItems)
	for _, tc := range []struct {
		desc  string
		code  string
		items []any
		want  orderAnswer
	}{
		{"FIXED: at most the eligible subtotal", fixed[1], appliesItems, orderAnswer{Discount: 3000}},
		{"PERCENT: of the eligible subtotal", percent[1], appliesItems, orderAnswer{Discount: 200}},
		{"FIXED without items", fixed[2], nil, orderAnswer{Error: "NOT_ELIGIBLE"}},
		{"PERCENT with no eligible item", percent[2], []any{map[string]any{"sku": "shoe-9", "category": "shoes", "quantity": 1, "unitAmount": 5000}}, orderAnswer{Error: "NOT_ELIGIBLE"}},
	} {
		if a, _ := reserveItems(t, s, tc.code, uniqueOrder(), 9, tc.items); a != tc.want {
			t.Errorf("%s: reserve answered %+v, want %+v", tc.desc, a, tc.want)
		}
	}

	id, codes := create(map[string]any{"discountAmount": 1000, "budgetAmount": 900, "appliesTo": map[string]any{"categories": []any{"shoes"}}})
	budgetTest(t, s, "~C"+id, codes[0], func(i int) string { return codes[i%len(codes)] }, func() int64 {
		r := gql(t, s, adminToken, `query($id: ID!) { campaign(id: $id) { budgetUsed } }`, map[string]any{"id": id})
		return num(t, path(r.Body, "data", "campaign", "budgetUsed"))
	})
}
