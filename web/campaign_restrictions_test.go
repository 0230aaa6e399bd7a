package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/go-cmp/cmp"

	"voucherd/internal/voucher"
	"voucherd/web"
)

// campaignWithLimits is a valid new-campaign form named name with the
// period limit rows given as scope, period, max triples and fields set.
func campaignWithLimits(csrf, name string, rows [][3]string, set map[string]string) url.Values {
	form := campaignForm(csrf, name, set)
	for _, r := range rows {
		form.Add("limitScope", r[0])
		form.Add("limitPeriod", r[1])
		form.Add("limitMax", r[2])
	}
	return form
}

// The new-campaign form offers the voucher form's period limits, their
// calendar, segments and items; what it sets is stored on the campaign and
// its page shows it, also in the figures its poll swaps in.
func TestCampaignForm_SetsPeriodLimitsZoneAndSegmentsAndThePageShowsThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)

	form := doc(t, f.do(t, http.MethodGet, "/admin/campaigns/new", &m, nil, nil)).Find(`[data-testid=campaign-form]`)
	if n := form.Find(`input[name=limitMax]`).Length(); n != voucher.MaxPeriodLimits {
		t.Errorf("%d period limit rows, want %d", n, voucher.MaxPeriodLimits)
	}
	if n := form.Find(`select[name=timeZone] option`).Length(); n < 10 {
		t.Errorf("the limits' time zone offers %d zones, want a list", n)
	}
	for _, name := range []string{"limitScope", "limitPeriod", "eligibleSegments", "appliesToSkus", "appliesToCategories"} {
		if form.Find(`[name=`+name+`]`).Length() == 0 {
			t.Errorf("the form has no %s field", name)
		}
	}
	for _, hint := range []string{"periodLimits", "timeZone", "eligibleSegments", "appliesTo"} {
		if form.Find(`[data-testid=hint-`+hint+`]`).Length() != 1 {
			t.Errorf("no hint for %s", hint)
		}
	}

	name := "Limited " + unique()
	rec := f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignWithLimits(m.csrf, name,
		[][3]string{{"CUSTOMER", "DAY", "2"}, {"VOUCHER", "WEEK", ""}}, // an empty row is no limit
		map[string]string{"timeZone": "Europe/Berlin", "eligibleSegments": "vip, tier:gold"}), nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("create: %d: %.500s", rec.Code, rec.Body)
	}
	c, ok := campaignNamed(t, f, name)
	if !ok {
		t.Fatalf("campaign %q not stored", name)
	}
	want := voucher.Restrictions{
		PeriodLimits: []voucher.PeriodLimit{{Scope: voucher.ScopeCustomer, Period: voucher.PeriodDay, Max: 2}},
		TimeZone:     "Europe/Berlin", EligibleSegments: []string{"vip", "tier:gold"},
	}
	if diff := cmp.Diff(want, c.Terms.Restrictions); diff != "" {
		t.Fatalf("stored restrictions (-want +got):\n%s", diff)
	}

	page := "/admin/campaigns/" + strconv.FormatInt(c.ID, 10)
	for _, target := range []string{page, page + "/live?shown=GENERATING"} {
		d := doc(t, f.do(t, http.MethodGet, target, &m, nil, map[string]string{"HX-Request": strconv.FormatBool(strings.Contains(target, "/live"))}))
		for sel, want := range map[string]string{
			`[data-testid=fig-period-limits]`: "2 per day per customer (Europe/Berlin)",
			`[data-testid=fig-segments]`:      "vip, tier:gold",
			`[data-testid=fig-applies-to]`:    "the whole order",
		} {
			if got := d.Find(`#campaign-figures ` + sel).Text(); got != want {
				t.Errorf("%s: %s says %q, want %q", target, sel, got, want)
			}
		}
	}
}

// Period limits and their calendar refused are shown next to their field
// with what was typed, and nothing is created; a flash campaign takes
// appliesTo and period limits (its gate holds them).
func TestCampaignForm_RefusedRestrictionsAreShownNextToTheirFieldsAndCreateNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)

	name := "Bad limits " + unique()
	rec := f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignWithLimits(m.csrf, name,
		[][3]string{{"VOUCHER", "MONTH", "0"}}, map[string]string{"timeZone": "Mars/Base", "eligibleSegments": "vip"}), nil)
	if rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("bad limits: %d, want 422", rec.Code)
	}
	d := doc(t, rec)
	for field, want := range map[string]string{
		"periodLimits": "A period limit's max must be at least 1",
		"timeZone":     "Calendar time zone",
	} {
		got := d.Find(`[data-testid=campaign-form] [data-testid=error-` + field + `]`).Text()
		if !strings.HasPrefix(got, want) {
			t.Errorf("message next to %s = %q, want it to start with %q", field, got, want)
		}
	}
	if in := d.Find(`#timeZone`); in.AttrOr("aria-invalid", "") != "true" || in.AttrOr("aria-describedby", "") != "timeZone-error" {
		t.Errorf("the zone: aria-invalid %q, aria-describedby %q", in.AttrOr("aria-invalid", ""), in.AttrOr("aria-describedby", ""))
	}
	if in := d.Find(`[data-testid=limitMax-0]`); in.AttrOr("aria-invalid", "") != "true" || in.AttrOr("aria-describedby", "") != "periodLimits-error" {
		t.Errorf("the limit: aria-invalid %q, aria-describedby %q", in.AttrOr("aria-invalid", ""), in.AttrOr("aria-describedby", ""))
	}
	for sel, want := range map[string]string{
		`[data-testid=limitMax-0]`:               "0",
		`#eligibleSegments`:                      "vip",
		`#codePrefix`:                            "spr",
		`[data-testid=limitScope-0] [selected]`:  "VOUCHER",
		`[data-testid=limitPeriod-0] [selected]`: "MONTH",
		`#timeZone [selected]`:                   "Mars/Base",
	} {
		if got := d.Find(sel).AttrOr("value", ""); got != want {
			t.Errorf("the refused form lost what was typed: %s = %q, want %q", sel, got, want)
		}
	}
	if _, ok := campaignNamed(t, f, name); ok {
		t.Error("a campaign with refused limits was created")
	}

	// appliesTo on a flash campaign: its gate holds it (the discount each
	// order takes is kept with it), so the campaign is made.
	name = "Flash items " + unique()
	rec = f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignWithLimits(m.csrf, name, nil,
		map[string]string{"flash": "1", "appliesToSkus": "sku-1"}), nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("a flash campaign with appliesTo: %d: %.500s", rec.Code, rec.Body)
	}
	if _, ok := campaignNamed(t, f, name); !ok {
		t.Error("a flash campaign with appliesTo was not created")
	}

	name = "Flash limits " + unique()
	rec = f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignWithLimits(m.csrf, name,
		[][3]string{{"CUSTOMER", "DAY", "1"}}, map[string]string{"flash": "1"}), nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("a flash campaign with a period limit: %d: %.500s", rec.Code, rec.Body)
	}
	if c, ok := campaignNamed(t, f, name); !ok || !c.Terms.Flash || len(c.Terms.PeriodLimits) != 1 || c.Terms.PeriodLimits[0].Max != 1 {
		t.Errorf("the flash campaign %q: found %v, terms %+v", name, ok, c.Terms)
	}
}

// A campaign's page shows the counts of its period limits, all its codes
// together, as a voucher's page does; so does its poll.
func TestCampaignPage_ShowsThePeriodCountsOfAllItsCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	c := createCampaign(t, f, m, nil) // one without limits shows no counts
	if d := doc(t, f.do(t, http.MethodGet, "/admin/campaigns/"+strconv.FormatInt(c.ID, 10), &m, nil, nil)); d.Find(`[data-testid=period-counts]`).Length() != 0 {
		t.Error("a campaign without period limits shows period counts")
	}

	name := "Counted " + unique()
	rec := f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignWithLimits(m.csrf, name,
		[][3]string{{"CUSTOMER", "DAY", "2"}}, map[string]string{"perUserLimit": "5", "timeZone": "Europe/Berlin"}), nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("create: %d: %.500s", rec.Code, rec.Body)
	}
	c, _ = campaignNamed(t, f, name)
	generateCodes(t, f, c.ID)
	var codes []string
	if err := f.svc.CampaignCodes(asAdmin, c.ID, func(cc voucher.CampaignCode) error { codes = append(codes, cc.Code); return nil }); err != nil {
		t.Fatal(err)
	}
	checkout := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleStorefront, Name: "test"})
	for _, code := range codes[:2] { // two codes, one customer: one count
		if _, err := f.svc.Reserve(checkout, voucher.ReserveRequest{Code: code, CustomerID: 42, OrderID: "cpc-" + unique(), OrderAmount: 5000}); err != nil {
			t.Fatalf("reserving %s: %v", code, err)
		}
	}
	page := "/admin/campaigns/" + strconv.FormatInt(c.ID, 10)
	for _, target := range []string{page, page + "/live?shown=READY"} {
		d := doc(t, f.do(t, http.MethodGet, target, &m, nil, map[string]string{"HX-Request": strconv.FormatBool(strings.Contains(target, "/live"))}))
		rows := d.Find(`#campaign-figures [data-testid=period-count]`)
		cells := rows.Find("td").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
		if got := strings.Join(cells, "|"); rows.Length() != 1 || !strings.HasSuffix(got, "|customer 42|2|2") {
			t.Errorf("%s: period counts shown: %d rows, %q", target, rows.Length(), got)
		}
		if got := d.Find(`#campaign-figures [data-testid=period-counts] caption`).Text(); !strings.Contains(got, "Europe/Berlin") {
			t.Errorf("%s: the counts' caption %q does not name the limits' zone", target, got)
		}
	}
}
