package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"voucherd/internal/accounts"
	"voucherd/internal/postgres"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/web"
)

var asAdmin = voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})

// campaignForm is a valid new-campaign form; set changes fields.
func campaignForm(csrf, name string, set map[string]string) url.Values {
	now := time.Now().UTC()
	v := url.Values{
		"csrf": {csrf}, "name": {name}, "codeCount": {"30"}, "codePrefix": {"spr"}, "codeLength": {"8"},
		"usesPerCode": {"1"}, "totalLimit": {"20"}, "perUserLimit": {"1"},
		"discountType": {"FIXED"}, "currency": {"EUR"}, "discountAmount": {"5.50"}, "minOrderAmount": {"20"},
		"budgetAmount": {"100"}, "tz": {"UTC"},
		"startsAt": {now.Add(-time.Hour).Format("2006-01-02T15:04")}, "endsAt": {now.Add(24 * time.Hour).Format("2006-01-02T15:04")},
	}
	for k, x := range set {
		v.Set(k, x)
	}
	return v
}

// campaignNamed finds a campaign by name among the newest 200.
func campaignNamed(t *testing.T, f fixture, name string) (voucher.Campaign, bool) {
	t.Helper()
	page, err := f.svc.Campaigns(asAdmin, 200, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range page.Campaigns {
		if c.Name == name {
			return c, true
		}
	}
	return voucher.Campaign{}, false
}

// generateCodes makes campaign id's codes, or waits for whoever makes them
// (testenv.Generated).
func generateCodes(t *testing.T, f fixture, id int64) {
	t.Helper()
	holder := "test-" + unique()
	testenv.Generated(t, func() error { return f.svc.GenerateCampaign(context.Background(), id, holder) }, func() (bool, error) {
		c, err := f.svc.Campaign(asAdmin, id)
		return c.Status == voucher.CampaignReady, err
	})
}

// createCampaign creates a campaign through the form as s and returns it.
func createCampaign(t *testing.T, f fixture, s session, set map[string]string) voucher.Campaign {
	t.Helper()
	name := "Campaign " + unique()
	rec := f.do(t, http.MethodPost, "/admin/campaigns", &s, campaignForm(s.csrf, name, set), nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("creating a campaign: %d %s", rec.Code, rec.Body)
	}
	c, ok := campaignNamed(t, f, name)
	if !ok {
		t.Fatalf("campaign %q not stored", name)
	}
	if want := "/admin/campaigns/" + strconv.FormatInt(c.ID, 10) + "?notice=campaign-created"; rec.Header().Get("Location") != want {
		t.Errorf("after creating it goes to %q, want %q", rec.Header().Get("Location"), want)
	}
	return c
}

func TestCampaigns_AMarketerCreatesOneAuditedAndItsPageFollowsTheGeneration(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	form := f.do(t, http.MethodGet, "/admin/campaigns/new", &m, nil, nil)
	if form.Code != http.StatusOK {
		t.Fatalf("the new-campaign form: %d", form.Code)
	}
	fd := doc(t, form)
	for _, name := range []string{"name", "codeCount", "codePrefix", "codeLength", "usesPerCode", "totalLimit", "perUserLimit", "discountAmount", "currency", "budgetAmount", "flash"} {
		if fd.Find(`[data-testid=campaign-form] [name=`+name+`]`).Length() != 1 {
			t.Errorf("the form has no %s field", name)
		}
	}
	if got, _ := fd.Find(`#codeLength`).Attr("value"); got != "10" {
		t.Errorf("the code length's default = %q, want 10", got)
	}

	c := createCampaign(t, f, m, nil)
	if c.Status != voucher.CampaignGenerating || c.CodeCount != 30 || c.CodePrefix != "SPR" || c.CodeLength != 8 || c.UsesPerCode != 1 {
		t.Errorf("stored campaign %+v", c)
	}
	if c.Terms.DiscountAmount != 550 || c.Terms.Currency != "EUR" || c.Terms.MinOrderAmount != 2000 || c.Terms.BudgetAmount == nil || *c.Terms.BudgetAmount != 10000 || c.Terms.TotalLimit != 20 || c.Terms.PerUserLimit != 1 {
		t.Errorf("stored terms (amounts typed in euros) %+v", c.Terms)
	}
	page := "/admin/campaigns/" + strconv.FormatInt(c.ID, 10)
	rec := f.do(t, http.MethodGet, page+"?notice=campaign-created", &m, nil, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("the campaign's page: %d", rec.Code)
	}
	d := doc(t, rec)
	checks := map[string]string{
		`[data-testid=notice]`:            "Campaign created",
		`#campaign-status`:                "making codes",
		`[data-testid=progress-text]`:     "0 of 30 codes made (0 %)",
		`[data-testid=export-later]`:      "once every code is made",
		`[data-testid=fig-discount]`:      "5.50 EUR off",
		`[data-testid=fig-budget]`:        "0.00 EUR of 100.00 EUR",
		`[data-testid=fig-used]`:          "0 of 20",
		`[data-testid=audit-event]`:       f.users[voucher.RoleMarketer],
		`[data-testid=campaign-announce]`: "being made",
	}
	for sel, want := range checks {
		if got := d.Find(sel).Text(); !strings.Contains(got, want) {
			t.Errorf("%s says %q, want %q", sel, got, want)
		}
	}
	if audit := d.Find(`[data-testid=audit-event]`).Text(); !strings.Contains(audit, "created") || !strings.Contains(audit, "codeCount 30") || !strings.Contains(audit, "discountAmount 550") {
		t.Errorf("the audit log: %q", audit)
	}
	bar := d.Find(`progress#progress-bar`)
	if mx, _ := bar.Attr("max"); mx != "30" {
		t.Errorf("the progress bar's max = %q", mx)
	}
	if v, _ := bar.Attr("value"); v != "0" {
		t.Errorf("the progress bar's value = %q", v)
	}
	poll := d.Find(`#campaign-poll`)
	if trig, _ := poll.Attr("hx-trigger"); trig != "every 1s" {
		t.Errorf("while generating the page polls %q, want every 1s", trig)
	}
	if d.Find(`[data-testid=export-codes]`).Length() != 0 {
		t.Error("the export link is shown before the codes are made")
	}
	if nav := d.Find(`[data-testid=nav-campaigns]`); nav.AttrOr("aria-current", "") != "page" {
		t.Errorf("the navigation's Campaigns entry is not the current page: %q", nav.AttrOr("aria-current", "(none)"))
	}

	// The poll while it is still generating: figures in place, nothing of
	// what changes with the status.
	live := f.do(t, http.MethodGet, page+"/live?shown=GENERATING", &m, nil, map[string]string{"HX-Request": "true"})
	ld := doc(t, live)
	if live.Code != http.StatusOK || ld.Find(`#campaign-progress[hx-swap-oob]`).Length() != 1 || ld.Find(`#campaign-figures[hx-swap-oob]`).Length() != 1 {
		t.Fatalf("the poll: %d %s", live.Code, live.Body)
	}
	if ld.Find(`#campaign-export`).Length() != 0 {
		t.Error("the poll sends the export while the status has not changed")
	}

	generateCodes(t, f, c.ID)
	live = f.do(t, http.MethodGet, page+"/live?shown=GENERATING", &m, nil, map[string]string{"HX-Request": "true"})
	ld = doc(t, live)
	for sel, want := range map[string]string{
		`#campaign-status`:            "ready",
		`[data-testid=progress-text]`: "30 of 30 codes made (100 %)",
		`#campaign-announce`:          "All 30 codes are made",
		`[data-testid=export-codes]`:  "Export the codes",
	} {
		if got := ld.Find(sel).Text(); !strings.Contains(got, want) {
			t.Errorf("the poll after the generation: %s says %q, want %q", sel, got, want)
		}
	}
	if href, _ := ld.Find(`[data-testid=export-codes]`).Attr("href"); href != "/campaigns/"+strconv.FormatInt(c.ID, 10)+"/codes.csv" {
		t.Errorf("the export link goes to %q", href)
	}
	if trig, _ := ld.Find(`#campaign-poll`).Attr("hx-trigger"); trig == "every 1s" || trig == "" {
		t.Errorf("once READY and live the page polls %q, want the figures' slower pace", trig)
	}
	if v, _ := ld.Find(`progress#progress-bar`).Attr("value"); v != "30" {
		t.Errorf("the progress bar's value when ready = %q", v)
	}
}

func TestCampaigns_TheCodeLookupFindsOnlyThisCampaignsCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	c := createCampaign(t, f, m, map[string]string{"codeCount": "5", "usesPerCode": "2", "totalLimit": ""})
	other := createCampaign(t, f, m, map[string]string{"codeCount": "3"})
	for _, id := range []int64{c.ID, other.ID} {
		generateCodes(t, f, id)
	}
	codes := func(id int64) []string {
		var out []string
		if err := f.svc.CampaignCodes(asAdmin, id, func(cc voucher.CampaignCode) error { out = append(out, cc.Code); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	mine, theirs := codes(c.ID), codes(other.ID)
	checkout := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleStorefront, Name: "test"})
	if _, err := f.svc.Reserve(checkout, voucher.ReserveRequest{Code: mine[1], CustomerID: 4242, OrderID: "camp-" + unique(), OrderAmount: 5000}); err != nil {
		t.Fatalf("reserving %s: %v", mine[1], err)
	}
	// The chart is the backing row's samples, taken as any voucher's.
	if _, err := postgres.New(pool).SampleOpenVouchers(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	chart := doc(t, f.do(t, http.MethodGet, "/admin/campaigns/"+strconv.FormatInt(c.ID, 10), &m, nil, nil))
	if got := chart.Find(`[data-testid=remaining-chart]`).Parent().Text(); !strings.Contains(got, "Now: 9 remaining") {
		t.Errorf("the chart after one use of 10: %q", got)
	}
	// The last sample is the one taken after the use. (The servers of other
	// packages' tests sample every open voucher of this shared database
	// too, so an earlier one, of 10 remaining, may be there.)
	a, err := voucher.NewBackoffice(f.svc, postgres.New(pool)).CampaignActivity(asAdmin, c.ID)
	if err != nil || len(a.Samples) == 0 || a.Samples[len(a.Samples)-1].Remaining != 9 || a.Samples[len(a.Samples)-1].Reserved != 1 {
		t.Errorf("the campaign's samples: %+v (%v), want the last one of its use", a.Samples, err)
	}
	standalone := "SOLO-" + unique()
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(standalone, m.csrf, time.Hour), nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("creating %s: %d", standalone, rec.Code)
	}
	base := "/admin/campaigns/" + strconv.FormatInt(c.ID, 10)
	look := func(path, code string) (string, string) {
		rec := f.do(t, http.MethodGet, base+path+"?code="+url.QueryEscape(code), &m, nil, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("looking up %q: %d", code, rec.Code)
		}
		d := doc(t, rec)
		return strings.Join(strings.Fields(d.Find(`[data-testid=code-found]`).Text()), " "), d.Find(`[data-testid=code-not-found]`).Text()
	}
	if found, _ := look("/code", mine[0]); !strings.Contains(found, mine[0]) || !strings.Contains(found, "unused") || !strings.Contains(found, "0 of 2") {
		t.Errorf("an unused code of the campaign: %q", found)
	}
	if found, _ := look("/code", strings.ToLower(mine[1])); !strings.Contains(found, "partly used") || !strings.Contains(found, "1 of 2 held or confirmed (0 confirmed)") {
		t.Errorf("a code with one use held, typed in lower case: %q", found)
	}
	if found, _ := look("", mine[1]); !strings.Contains(found, "partly used") {
		t.Errorf("the lookup without script (the page with ?code=): %q", found)
	}
	for _, typed := range []string{theirs[0], standalone, "NO-SUCH-" + unique(), "not a code!", "~C" + strconv.FormatInt(c.ID, 10)} {
		found, missing := look("/code", typed)
		if found != "" || !strings.Contains(missing, "is not a code of this campaign") {
			t.Errorf("looking up %q: found %q, not-found %q; want not a code of this campaign", typed, found, missing)
		}
	}
}

func TestCampaigns_AnOperatorReadsButCannotCreateOrExport(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	op := f.signIn(t, voucher.RoleOperator)
	c := createCampaign(t, f, m, nil)
	if rec := f.do(t, http.MethodGet, "/admin/campaigns/new", &op, nil, nil); rec.Code != http.StatusForbidden {
		t.Errorf("an operator opening the form: %d, want 403", rec.Code)
	}
	name := "Operator's " + unique()
	if rec := f.do(t, http.MethodPost, "/admin/campaigns", &op, campaignForm(op.csrf, name, nil), nil); rec.Code != http.StatusForbidden {
		t.Errorf("an operator posting the form: %d, want 403", rec.Code)
	}
	if _, ok := campaignNamed(t, f, name); ok {
		t.Error("the operator's campaign was created")
	}
	list := f.do(t, http.MethodGet, "/admin/campaigns", &op, nil, nil)
	if list.Code != http.StatusOK || doc(t, list).Find(`[data-testid=new-campaign]`).Length() != 0 {
		t.Errorf("an operator's list: %d, want 200 without the New campaign button", list.Code)
	}
	page := f.do(t, http.MethodGet, "/admin/campaigns/"+strconv.FormatInt(c.ID, 10), &op, nil, nil)
	pd := doc(t, page)
	if page.Code != http.StatusOK || pd.Find(`[data-testid=export-codes], [data-testid=export-later]`).Length() != 0 || !strings.Contains(pd.Find(`#campaign-export`).Text(), "for marketers and admins") {
		t.Errorf("an operator's campaign page: %d, export %q", page.Code, pd.Find(`#campaign-export`).Text())
	}
	// Without the CSRF token a marketer's post is refused, and creates nothing.
	name = "No token " + unique()
	if rec := f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignForm("", name, nil), nil); rec.Code != http.StatusForbidden {
		t.Errorf("a post without its token: %d, want 403", rec.Code)
	}
	if _, ok := campaignNamed(t, f, name); ok {
		t.Error("the campaign posted without a token was created")
	}
	for _, target := range []string{"/admin/campaigns/abc", "/admin/campaigns/0", "/admin/campaigns/9000000000000000000"} {
		if rec := f.do(t, http.MethodGet, target, &m, nil, nil); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", target, rec.Code)
		}
	}
}

func TestCampaigns_BadInputIsRefusedNextToEachFieldInTheLabelsWords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	name := "Bad " + unique()
	rec := f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignForm(m.csrf, name, map[string]string{
		"codeCount": "0", "codePrefix": "a-b", "codeLength": "3", "usesPerCode": "x", "totalLimit": "-1",
		"perUserLimit": "0", "discountAmount": "5,50",
	}), nil)
	if rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("a bad form: %d, want 422", rec.Code)
	}
	d := doc(t, rec)
	for field, want := range map[string]string{
		"codeCount":      "Number of codes must be 1-1000000",
		"codePrefix":     "Prefix must be 0-8 characters",
		"codeLength":     "Code length must be 6-16",
		"usesPerCode":    "Uses per code must be a whole number",
		"totalLimit":     "Total uses must be at least 1",
		"perUserLimit":   "Uses per customer must be at least 1",
		"discountAmount": "Discount must use a point for decimals",
	} {
		if got := d.Find(`[data-testid=error-` + field + `]`).Text(); !strings.Contains(got, want) {
			t.Errorf("message next to %s = %q, want %q", field, got, want)
		}
		in := d.Find(`#` + field)
		if in.AttrOr("aria-invalid", "") != "true" || in.AttrOr("aria-describedby", "") != field+"-error" {
			t.Errorf("%s: aria-invalid %q, aria-describedby %q", field, in.AttrOr("aria-invalid", ""), in.AttrOr("aria-describedby", ""))
		}
	}
	errs := d.Find(`[data-testid=campaign-form] .error`).Text()
	for _, apiName := range []string{"codeCount", "codePrefix", "codeLength", "usesPerCode", "totalLimit", "perUserLimit", "discountAmount"} {
		if strings.Contains(errs, apiName) {
			t.Errorf("a message names the API field %s: %q", apiName, errs)
		}
	}
	if got := d.Find(`#codePrefix`).AttrOr("value", ""); got != "a-b" {
		t.Errorf("the refused form lost what was typed: prefix %q", got)
	}
	if _, ok := campaignNamed(t, f, name); ok {
		t.Error("a refused campaign was created")
	}

	// The service's own refusals land on their field too.
	for _, tc := range []struct {
		set   map[string]string
		field string
		want  string
	}{
		{map[string]string{"name": ""}, "name", "Name must be 1-100 characters"},
		{map[string]string{"totalLimit": "", "codeCount": "1000000", "usesPerCode": "3000"}, "totalLimit", "Number of codes * uses per code is more than 2147483647: give total uses"},
	} {
		name := "Refused " + unique()
		if _, ok := tc.set["name"]; ok {
			name = ""
		}
		rec := f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignForm(m.csrf, name, tc.set), nil)
		d := doc(t, rec)
		if got := d.Find(`[data-testid=error-` + tc.field + `]`).Text(); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(got, tc.want) {
			t.Errorf("%v: %d, message %q, want 422 with %q", tc.set, rec.Code, got, tc.want)
		}
		if d.Find(`#`+tc.field).AttrOr("aria-invalid", "") != "true" {
			t.Errorf("%v: %s is not marked invalid", tc.set, tc.field)
		}
		if name != "" {
			if _, ok := campaignNamed(t, f, name); ok {
				t.Errorf("%v: the refused campaign was created", tc.set)
			}
		}
	}
}

// The form's flash box makes a flash campaign.
func TestCampaigns_TheFlashBoxMakesAFlashCampaign(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	name := "Flash " + unique()
	rec := f.do(t, http.MethodPost, "/admin/campaigns", &m, campaignForm(m.csrf, name, map[string]string{"flash": "1"}), nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("create a flash campaign: HTTP %d: %.300s", rec.Code, rec.Body.String())
	}
	if c, ok := campaignNamed(t, f, name); !ok || !c.Terms.Flash {
		t.Errorf("the campaign %q: found %v, flash %v", name, ok, c.Terms.Flash)
	}
}

// Not parallel: the list is of every campaign, and this test needs its own
// to be the newest while it reads it.
func TestCampaigns_TheListIsNewestFirstPagedWithTheCursor(t *testing.T) {
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	start := time.Now().UTC()
	var ids []int64
	for i := range 52 {
		c, err := f.svc.CreateCampaign(voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleMarketer, Name: "test"}), voucher.NewCampaign{
			Name: fmt.Sprintf("List %02d %s", i, unique()), CodeCount: 4, CodeLength: 8, UsesPerCode: 1, PerUserLimit: 1,
			Terms: voucher.NewVoucher{DiscountAmount: 100, StartsAt: start, EndsAt: start.Add(time.Hour)},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	generateCodes(t, f, ids[51])
	rec := f.do(t, http.MethodGet, "/admin/campaigns", &m, nil, nil)
	d := doc(t, rec)
	rows := d.Find(`[data-testid=campaign-row]`)
	if rec.Code != http.StatusOK || rows.Length() != 50 {
		t.Fatalf("the first page: %d with %d rows, want 50", rec.Code, rows.Length())
	}
	first := rows.First()
	if first.AttrOr("data-id", "") != strconv.FormatInt(ids[51], 10) {
		t.Errorf("the newest row is campaign %s, want %d", first.AttrOr("data-id", ""), ids[51])
	}
	if got := first.Find(`[data-testid=campaign-status]`).Text(); got != "ready" {
		t.Errorf("the newest campaign's badge = %q, want ready", got)
	}
	if got := strings.Join(strings.Fields(first.Find(`[data-testid=campaign-generated]`).Text()), " "); got != "4 / 4" {
		t.Errorf("its codes made = %q", got)
	}
	if got := strings.Join(strings.Fields(first.Find(`[data-testid=campaign-used]`).Text()), " "); got != "0 / 4" {
		t.Errorf("its used / total = %q", got)
	}
	if got := rows.Eq(1).Find(`[data-testid=campaign-status]`).Text(); got != "making codes" {
		t.Errorf("the second newest's badge = %q, want making codes", got)
	}
	if href := first.Find(`[data-testid=campaign-link]`).AttrOr("href", ""); href != "/admin/campaigns/"+strconv.FormatInt(ids[51], 10) {
		t.Errorf("the row links to %q", href)
	}
	next, ok := d.Find(`[data-testid=campaigns-next]`).Attr("href")
	if !ok {
		t.Fatal("no link to the older campaigns")
	}
	rec = f.do(t, http.MethodGet, next, &m, nil, nil)
	d = doc(t, rec)
	if got := d.Find(`[data-testid=campaign-row]`).First().AttrOr("data-id", ""); rec.Code != http.StatusOK || got != strconv.FormatInt(ids[1], 10) {
		t.Errorf("the second page starts with campaign %s (%d), want %d", got, rec.Code, ids[1])
	}
	if d.Find(`[data-testid=campaigns-first]`).Length() != 1 {
		t.Error("the second page has no link back to the newest")
	}
	if rec := f.do(t, http.MethodGet, "/admin/campaigns?after=not-a-cursor", &m, nil, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("a cursor the dashboard never gave: %d, want 400", rec.Code)
	}
	for _, role := range accounts.DashboardRoles {
		s := f.signIn(t, role)
		if got := doc(t, f.do(t, http.MethodGet, "/admin/vouchers", &s, nil, nil)).Find(`[data-testid=nav-campaigns]`).AttrOr("href", ""); got != "/admin/campaigns" {
			t.Errorf("a %s's navigation has no Campaigns entry (%q)", role, got)
		}
	}
}

func TestCampaigns_AFailedCampaignsPageSaysWhyAndStopsAsking(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	c := createCampaign(t, f, m, nil)
	if err := postgres.New(pool).FailCampaign(context.Background(), c.ID, "no unused code left to make"); err != nil {
		t.Fatal(err)
	}
	page := "/admin/campaigns/" + strconv.FormatInt(c.ID, 10)
	for _, target := range []string{page, page + "/live?shown=GENERATING"} {
		rec := f.do(t, http.MethodGet, target, &m, nil, map[string]string{"HX-Request": strconv.FormatBool(strings.Contains(target, "/live"))})
		d := doc(t, rec)
		if got := d.Find(`#campaign-status`).Text(); rec.Code != http.StatusOK || got != "failed" {
			t.Errorf("%s: %d, status %q, want failed", target, rec.Code, got)
		}
		if got := d.Find(`[data-testid=campaign-failure]`).Text(); !strings.Contains(got, "no unused code left to make") {
			t.Errorf("%s: the failure says %q", target, got)
		}
		if poll := d.Find(`#campaign-poll`); poll.Length() != 1 || poll.AttrOr("hx-trigger", "") != "" || poll.AttrOr("hx-get", "") != "" {
			t.Errorf("%s: a FAILED campaign's page still polls (%q)", target, poll.AttrOr("hx-trigger", ""))
		}
		if d.Find(`[data-testid=export-codes]`).Length() != 0 {
			t.Errorf("%s: a FAILED campaign offers the export", target)
		}
	}
}
