package components

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	"github.com/google/go-cmp/cmp"

	"voucherd/internal/voucher"
)

// render renders a component and parses it, for goquery on data-testid.
func render(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc
}

// renderRows renders a table-body fragment inside a table, where an HTML
// parser (like the browser's, via htmx) keeps it.
func renderRows(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	return render(t, templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		if _, err := io.WriteString(w, "<table>"); err != nil {
			return err
		}
		if err := c.Render(ctx, w); err != nil {
			return err
		}
		_, err := io.WriteString(w, "</table>")
		return err
	}))
}

func testid(id string) string { return `[data-testid="` + id + `"]` }

var (
	now   = time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	gate7 = 7
)

func overview(code string, state voucher.VoucherState, flash bool, gate *int) voucher.VoucherOverview {
	return voucher.VoucherOverview{
		Voucher: voucher.Voucher{
			Code: code, DiscountAmount: 1500, MinOrderAmount: 5000, TotalLimit: 20, PerUserLimit: 1,
			UsedCount: 10, ReservedCount: 4, ConfirmedCount: 6, Flash: flash,
			StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour),
		},
		State: state, Gate: gate,
	}
}

func TestVoucherRows_ShowStateFlashBadgeBarAndGate(t *testing.T) {
	t.Parallel()
	rows := []voucher.VoucherOverview{
		overview("FLASH-LIVE", voucher.StateLive, true, &gate7),
		overview("FLASH-COLD", voucher.StateScheduled, true, nil),
		overview("PLAIN-ENDED", voucher.StateEnded, false, nil),
	}
	doc := renderRows(t, VoucherRows(ListQuery{}, rows, time.UTC, now))

	type row struct{ Code, State, Flash, Confirmed, Reserved, Remaining, Gate, BarConfirmed, BarReserved string }
	var got []row
	doc.Find(testid("voucher-row")).Each(func(_ int, s *goquery.Selection) {
		code, _ := s.Attr("data-code")
		bc, _ := s.Find(testid("bar-confirmed")).Attr("width")
		br, _ := s.Find(testid("bar-reserved")).Attr("width")
		got = append(got, row{
			Code: code, State: s.Find(testid("state")).Text(), Flash: s.Find(testid("flash-badge")).Text(),
			Confirmed: s.Find(testid("confirmed")).Text(), Reserved: s.Find(testid("reserved")).Text(),
			Remaining: s.Find(testid("remaining")).Text(), Gate: s.Find(testid("gate")).Text(),
			BarConfirmed: bc, BarReserved: br,
		})
	})
	want := []row{
		{"FLASH-LIVE", "live", "flash", "6", "4", "10", "7", "30.0", "20.0"},
		{"FLASH-COLD", "scheduled", "flash", "6", "4", "10", "not loaded", "30.0", "20.0"},
		{"PLAIN-ENDED", "ended", "", "6", "4", "10", "", "30.0", "20.0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func TestVoucherList_PollsFiguresOnlyFasterWhileASaleRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		rows    []voucher.VoucherOverview
		q       ListQuery
		trigger string
		get     string
	}{
		{"a live voucher", []voucher.VoucherOverview{overview("A", voucher.StateLive, false, nil)}, ListQuery{}, "every 2s", "/admin/vouchers/rows?shown="},
		{"nothing live", []voucher.VoucherOverview{overview("A", voucher.StateEnded, false, nil)}, ListQuery{Search: "summer sale", State: "ended", Flash: true, Sort: "usage", Desc: true, Page: 2}, "every 15s", "/admin/vouchers/rows?q=summer+sale&state=ended&flash=1&sort=usage&desc=1&page=2&shown="},
	} {
		page := voucher.VoucherPage{Rows: tc.rows, Total: len(tc.rows)}
		poll := render(t, VoucherList(Page{}, tc.q, page, now)).Find(testid("list-poll"))
		if got, _ := poll.Attr("hx-trigger"); got != tc.trigger {
			t.Errorf("%s: hx-trigger = %q, want %q", tc.desc, got, tc.trigger)
		}
		if got, _ := poll.Attr("hx-get"); got != tc.get+RowsKey(tc.rows) {
			t.Errorf("%s: hx-get = %q, want %q", tc.desc, got, tc.get)
		}
		if got, _ := poll.Attr("hx-swap"); got != "none" {
			t.Errorf("%s: hx-swap = %q, want none (only the out-of-band figures are swapped)", tc.desc, got)
		}
	}
}

// The poll's answer replaces figures only: no row, no link (so the focus
// and the scroll stay), each figure with the id of the cell it replaces.
func TestVoucherFigures_SwapEachRowsFiguresOutOfBand(t *testing.T) {
	t.Parallel()
	rows := []voucher.VoucherOverview{overview("FLASH-LIVE", voucher.StateLive, true, &gate7), overview("OLD", voucher.StateEnded, false, nil)}
	list := render(t, VoucherList(Page{}, ListQuery{}, voucher.VoucherPage{Rows: rows, Total: 2}, now))
	frag := render(t, VoucherFigures(ListQuery{}, rows))
	if n := frag.Find("a, tr, tbody").Length(); n != 0 {
		t.Errorf("the polled fragment holds %d rows or links; want figures only", n)
	}
	var ids []string
	frag.Find("[hx-swap-oob]").Each(func(_ int, s *goquery.Selection) {
		id, _ := s.Attr("id")
		ids = append(ids, id)
		if list.Find("#"+id).Length() != 1 {
			t.Errorf("the fragment's %s has no element to replace in the list", id)
		}
	})
	want := []string{"state-FLASH-LIVE", "usage-FLASH-LIVE", "gate-FLASH-LIVE", "state-OLD", "usage-OLD", "gate-OLD", "list-poll", "list-status"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("out-of-band ids (-want +got):\n%s", diff)
	}
	if got := frag.Find("#gate-FLASH-LIVE").Text(); got != "7" {
		t.Errorf("gate figure = %q, want 7", got)
	}
	status := list.Find("#list-status")
	if got, _ := status.Attr("aria-live"); got != "polite" {
		t.Errorf("the list's status region aria-live = %q, want polite", got)
	}
	if got, _ := frag.Find("#list-status").Attr("hx-swap-oob"); got != "innerHTML" {
		t.Errorf("the status is swapped with %q, want innerHTML (the live region itself stays)", got)
	}
}

func TestVoucherRows_SayWhenNothingMatches(t *testing.T) {
	t.Parallel()
	doc := renderRows(t, VoucherRows(ListQuery{Search: "nope"}, nil, time.UTC, now))
	if doc.Find(testid("no-vouchers")).Length() != 1 {
		t.Error("no 'no voucher matches' row")
	}
}

func TestVoucherForm_ShowsEachFieldsMessageNextToIt(t *testing.T) {
	t.Parallel()
	f := VoucherForm{
		Code: "bad code!", TotalLimit: "0",
		Errors: map[string]string{
			"code":       "code must be 1-32 characters of A-Z, a-z, 0-9, _ and -",
			"totalLimit": "totalLimit must be at least 1",
		},
	}
	doc := render(t, VoucherFormBody(Page{CSRF: "tok-123"}, f, WindowPreview{Message: "Pick a start"}))
	for field, msg := range f.Errors {
		box := doc.Find(testid("field-" + field))
		if got := box.Find(testid("error-" + field)).Text(); got != msg {
			t.Errorf("message next to %s = %q, want %q", field, got, msg)
		}
		if !box.HasClass("invalid") {
			t.Errorf("field %s is not marked invalid", field)
		}
	}
	if n := doc.Find(".field.invalid").Length(); n != 2 {
		t.Errorf("%d fields marked invalid, want 2", n)
	}
	if got := doc.Find(testid("field-perUserLimit") + " .hint").Text(); got != "At least 1." {
		t.Errorf("a valid field shows %q, want its rule", got)
	}
	if got, _ := doc.Find(`input[name=csrf]`).Attr("value"); got != "tok-123" {
		t.Errorf("csrf field = %q, want the session's token", got)
	}
	if got, _ := doc.Find(`#code`).Attr("value"); got != "bad code!" {
		t.Errorf("the code as typed is lost: %q", got)
	}
	// Plain words for marketers; the technical ones only in the tooltip.
	flash := doc.Find(testid("flash-explained"))
	if text := flash.Text(); !strings.Contains(text, "fast counter") || strings.Contains(text, "Redis") || strings.Contains(text, "atomic") {
		t.Errorf("the flash checkbox's line = %q, want plain words (the technical ones in a tooltip)", text)
	}
	if title, _ := flash.Find("abbr").Attr("title"); !strings.Contains(title, "Redis") {
		t.Errorf("the flash line's tooltip = %q, want the technical words", title)
	}
	// Each field points at its message (or its rule), and says it is at fault.
	if got, _ := doc.Find(`#totalLimit`).Attr("aria-invalid"); got != "true" {
		t.Errorf("totalLimit aria-invalid = %q, want true", got)
	}
	if got, _ := doc.Find(`#totalLimit`).Attr("aria-describedby"); got != "totalLimit-error" || doc.Find("#"+got).Length() != 1 {
		t.Errorf("totalLimit aria-describedby = %q, want its message's id", got)
	}
	if got, ok := doc.Find(`#perUserLimit`).Attr("aria-invalid"); ok {
		t.Errorf("a valid field has aria-invalid=%q", got)
	}
	if got, _ := doc.Find(`#perUserLimit`).Attr("aria-describedby"); got != "perUserLimit-hint" || doc.Find("#"+got).Length() != 1 {
		t.Errorf("perUserLimit aria-describedby = %q, want its rule's id", got)
	}
	if got, _ := doc.Find(testid("voucher-form")).Attr("action"); got != "/admin/vouchers" {
		t.Errorf("create form posts to %q", got)
	}
	edit := render(t, VoucherFormBody(Page{}, VoucherForm{Editing: "SPRING"}, WindowPreview{}))
	if got, _ := edit.Find(testid("voucher-form")).Attr("action"); got != "/admin/vouchers/SPRING" {
		t.Errorf("edit form posts to %q", got)
	}
}

func TestPreviewOf_DescribesTheWindowInTheZoneAndUTC(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, berlin)
	for _, tc := range []struct {
		desc       string
		start, end time.Time
		zone       *time.Location
		want       WindowPreview
	}{
		{"a future window in Berlin", start, start.Add(2 * time.Hour), berlin, WindowPreview{
			Valid: true, Local: "Mon 7 Dec 2026 10:00–12:00 CET (Europe/Berlin)", UTC: "Mon 7 Dec 2026 09:00–11:00 UTC",
			Lasts: "2 hours", Starts: "starts in 5 days 22 hours",
		}},
		{"an open window in UTC", now.Add(-time.Hour), now.Add(90 * time.Minute), time.UTC, WindowPreview{
			Valid: true, Local: "Tue 1 Dec 2026 09:30–12:00 UTC", UTC: "in UTC",
			Lasts: "2 hours 30 minutes", Starts: "live as soon as it is saved (started 1 hour ago)",
		}},
		{"end before start", start, start.Add(-time.Minute), berlin, WindowPreview{Message: "The end must come after the start."}},
		{"no end", start, time.Time{}, berlin, WindowPreview{Message: "Pick a start and an end to see the window."}},
	} {
		if diff := cmp.Diff(tc.want, PreviewOf(tc.start, tc.end, tc.zone, now)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.desc, diff)
		}
	}
}

func TestLayout_NavigationFollowsTheRole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		role            voucher.Role
		newVoucher, dft bool
	}{
		{voucher.RoleMarketer, true, false},
		{voucher.RoleOperator, false, true},
		{voucher.RoleAdmin, true, true},
	} {
		p := Page{Title: "x", User: Viewer{Email: "a@example.com", Role: tc.role}, CSRF: "tok"}
		doc := render(t, Layout(p))
		if got := doc.Find(testid("nav-new")).Length() == 1; got != tc.newVoucher {
			t.Errorf("%s: New voucher link shown = %v, want %v", tc.role, got, tc.newVoucher)
		}
		if got := doc.Find(testid("nav-drift")).Length() == 1; got != tc.dft {
			t.Errorf("%s: Drift link shown = %v, want %v", tc.role, got, tc.dft)
		}
		if got, _ := doc.Find(`form[action="/admin/sign-out"] input[name=csrf]`).Attr("value"); got != "tok" {
			t.Errorf("%s: sign-out form carries csrf %q", tc.role, got)
		}
		if got, _ := doc.Find("body").Attr("hx-headers"); got != `{"X-CSRF-Token": "tok"}` {
			t.Errorf("%s: htmx requests carry %q", tc.role, got)
		}
		if doc.Find(`script[src^="http"], link[href^="http"]`).Length() != 0 {
			t.Errorf("%s: the page loads something from another origin", tc.role)
		}
	}
}

func TestDriftPage_ShowsReportsAlertsAndDeadLetters(t *testing.T) {
	t.Parallel()
	g := 32
	view := DriftView{
		Reports: []voucher.DriftReport{
			{VoucherCode: "HOT", DatabaseRemaining: 37, GateRemaining: &g, Drift: -5, Alert: true, CheckedAt: now},
			{VoucherCode: "CALM", DatabaseRemaining: 10, GateRemaining: nil, Drift: 0, CheckedAt: now},
		},
		Unreconciled: []string{"NEW"},
	}
	p := Page{User: Viewer{Role: voucher.RoleOperator}, CSRF: "tok"}
	doc := render(t, DriftPage(p, view))
	alerts := doc.Find(testid("alert"))
	if alerts.Length() != 1 || !strings.Contains(alerts.Text(), "HOT") || !strings.Contains(alerts.Text(), "-5") {
		t.Errorf("alerts = %q, want one for HOT with its drift", alerts.Text())
	}
	hot := doc.Find(testid("drift-row") + `[data-code=HOT]`)
	if got := [3]string{hot.Find(testid("db-remaining")).Text(), hot.Find(testid("gate-remaining")).Text(), hot.Find(testid("drift")).Text()}; got != [3]string{"37", "32", "-5"} {
		t.Errorf("HOT row = %v", got)
	}
	if hot.Find(testid("alert-badge")).Length() != 1 {
		t.Error("HOT has no alert badge")
	}
	if got := doc.Find(testid("drift-row") + `[data-code=CALM] ` + testid("gate-remaining")).Text(); got != "not loaded" {
		t.Errorf("a gate holding nothing shows %q", got)
	}
	if doc.Find(testid("drift-row-unreconciled")+`[data-code=NEW]`).Length() != 1 {
		t.Error("a flash voucher never reconciled is missing")
	}
	if href, _ := hot.Find(testid("rebuild-gate")).Attr("href"); href != "/admin/drift/HOT/rebuild" {
		t.Errorf("rebuild goes to %q, want the confirmation step", href)
	}
	if href, _ := doc.Find(testid("reconcile-now")).Attr("href"); href != "/admin/drift/reconcile" {
		t.Errorf("reconcile goes to %q, want the confirmation step", href)
	}
	if doc.Find(testid("dead-letters-untracked")).Length() != 1 {
		t.Error("without a dead-letter store the page must say they are not tracked")
	}

	n := 3
	view.DeadLetters = &n
	if got := render(t, DriftPage(p, view)).Find(testid("dead-letter-count")).Text(); !strings.Contains(got, "3") {
		t.Errorf("dead-letter count = %q, want 3", got)
	}
	quiet := render(t, DriftPage(p, DriftView{}))
	if quiet.Find(testid("no-alerts")).Length() != 1 || quiet.Find(testid("no-reports")).Length() != 1 {
		t.Error("an empty drift page does not say so")
	}
}

func TestConfirm_PostsWithTheCSRFTokenOrCancels(t *testing.T) {
	t.Parallel()
	doc := render(t, Confirm(Page{CSRF: "tok"}, ConfirmAction{
		Title: "Rebuild?", Question: "Sure?", Effects: RebuildEffects("HOT"),
		Action: "/admin/drift/HOT/rebuild", Button: "Rebuild gate", Cancel: "/admin/drift", Danger: true,
	}))
	form := doc.Find(testid("confirm") + " form")
	if m, _ := form.Attr("method"); m != "post" {
		t.Errorf("method %q", m)
	}
	if a, _ := form.Attr("action"); a != "/admin/drift/HOT/rebuild" {
		t.Errorf("action %q", a)
	}
	if v, _ := form.Find(`input[name=csrf]`).Attr("value"); v != "tok" {
		t.Errorf("csrf %q", v)
	}
	if href, _ := doc.Find(testid("confirm-cancel")).Attr("href"); href != "/admin/drift" {
		t.Errorf("cancel goes to %q", href)
	}
	if doc.Find("li").Length() != 3 {
		t.Error("the effects are not listed")
	}
}

func TestVoucherPage_FiguresChartReservationsEventsAndAudit(t *testing.T) {
	t.Parallel()
	o := overview("HOT", voucher.StateLive, true, &gate7)
	a := voucher.VoucherActivity{
		VoucherOverview: o,
		Samples: []voucher.RemainingSample{
			{At: now.Add(-50 * time.Minute), Remaining: 18}, {At: now.Add(-20 * time.Minute), Remaining: 12},
		},
		Reservations: []voucher.Reservation{{OrderID: "o-1", CustomerID: 9, Status: voucher.StatusConfirmed, CreatedAt: now}},
		Events:       []voucher.ReservationEvent{{OrderID: "o-1", Kind: "confirmed", Path: voucher.PathDatabase, At: now}},
		Audit:        []voucher.AuditEvent{{Actor: "mia@example.com", ActorRole: voucher.RoleMarketer, Action: "created", At: now}},
	}
	p := Page{User: Viewer{Role: voucher.RoleMarketer}, CSRF: "tok"}
	doc := render(t, VoucherPage(p, a, now, nil))
	if got := doc.Find(testid("fig-remaining")).Text(); got != "10" {
		t.Errorf("remaining = %q", got)
	}
	if got := doc.Find(testid("fig-gate")).Text(); got != "7" {
		t.Errorf("gate = %q", got)
	}
	pts, _ := doc.Find(testid("remaining-chart") + " polyline").Attr("points")
	if n := len(strings.Fields(pts)); n != 7 {
		t.Errorf("chart has %d points (%q), want a step line through start, 2 samples and now (7)", n, pts)
	}
	if doc.Find(testid("reservation")).Length() != 1 || doc.Find(testid("event")).Length() != 1 || doc.Find(testid("audit-event")).Length() != 1 {
		t.Error("reservations, events or audit events are missing")
	}
	if doc.Find(testid("end-voucher")).Length() != 1 || doc.Find(testid("edit-voucher")).Length() != 0 {
		t.Error("a live voucher offers 'end now', never 'change'")
	}
	op := render(t, VoucherPage(Page{User: Viewer{Role: voucher.RoleOperator}}, a, now, nil))
	if op.Find(testid("end-voucher")).Length() != 0 {
		t.Error("an operator is offered 'end now'")
	}
	before := a
	before.State, before.UsedCount, before.ReservedCount, before.ConfirmedCount = voucher.StateScheduled, 0, 0, 0
	before.StartsAt = now.Add(time.Hour)
	sched := render(t, VoucherPage(p, before, now, nil))
	if sched.Find(testid("edit-voucher")).Length() != 1 || sched.Find(testid("chart-empty")).Length() != 1 {
		t.Error("a scheduled voucher offers 'change' and an empty chart")
	}
}

func TestMoney(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0.00", 5: "0.05", 1500: "15.00", 123456789: "1,234,567.89", -250: "-2.50"} {
		if got := Money(in); got != want {
			t.Errorf("Money(%d) = %q, want %q", in, got, want)
		}
	}
}

// A sale late in a long window is zoomed to, the axis says dates, and a
// voucher created after its window opened starts at its creation.
func TestChartOf_ZoomsToTheSaleWithDatesFromCreationOrFirstSample(t *testing.T) {
	t.Parallel()
	o := overview("LONG", voucher.StateLive, true, nil)
	o.StartsAt = now.Add(-72 * time.Hour)
	a := voucher.VoucherActivity{VoucherOverview: o, Samples: []voucher.RemainingSample{
		{At: now.Add(-10 * time.Minute), Remaining: 15}, {At: now.Add(-5 * time.Minute), Remaining: 10},
	}}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	c := ChartOf(a, now, berlin)
	// now is 1 Dec 10:30 UTC = 11:30 in Berlin; the lead-in is a minute.
	var got []string
	for _, l := range c.XLabels {
		got = append(got, l.Text)
	}
	if diff := cmp.Diff([]string{"1 Dec 11:19", "1 Dec 11:24", "1 Dec 11:30"}, got); diff != "" {
		t.Errorf("axis labels (-want +got):\n%s", diff)
	}
	// Without samples: from the creation when it is after the window's start.
	o.CreatedAt = now.Add(-2 * time.Hour)
	c = ChartOf(voucher.VoucherActivity{VoucherOverview: o}, now, time.UTC)
	if c.XLabels[0].Text != "1 Dec 08:30" {
		t.Errorf("the chart without samples starts at %q, want the creation (1 Dec 08:30)", c.XLabels[0].Text)
	}
}

func TestWords_PlainForMarketersTechnicalForOperators(t *testing.T) {
	t.Parallel()
	gate := 15
	o := overview("GAP", voucher.StateLive, true, &gate)
	o.TotalLimit, o.UsedCount = 30, 10 // 20 remaining in the database, 15 at the gate
	marketer := render(t, Figures(o, time.UTC, false))
	if got := marketer.Find(testid("gate-gap")).Text(); !strings.Contains(got, "Operators are told") || strings.Contains(got, "gate") || strings.Contains(got, "Redis") {
		t.Errorf("the marketer's line on 20 vs 15 = %q, want plain words saying operators are told", got)
	}
	if got := marketer.Find("dt span").FilterFunction(func(_ int, s *goquery.Selection) bool { return s.Text() == "Fast counter" }).Length(); got != 1 {
		t.Error("the marketer's figures do not call the gate 'Fast counter'")
	}
	operator := render(t, Figures(o, time.UTC, true))
	if got := operator.Find(testid("gate-gap")).Text(); !strings.Contains(got, "gate") || !strings.Contains(got, "drift page") {
		t.Errorf("the operator's line = %q, want the gate's terms", got)
	}
	in := o
	g := 20
	in.Gate = &g
	if render(t, Figures(in, time.UTC, false)).Find(testid("gate-gap")).Length() != 0 {
		t.Error("a line about a difference where there is none")
	}
	if PathLabel(voucher.PathGateSync, false) == "gate-sync" || PathLabel(voucher.PathGateSync, true) != "gate-sync" {
		t.Error("the path gate-sync is not in plain words for a marketer and by its name for an operator")
	}
	if got := Echo("50", "USD"); got != "You typed 50 = 50.00 USD." {
		t.Errorf("Echo(50, USD) = %q", got)
	}
	if got := Echo(" 1_000.5 ", "USD"); got != "You typed 1_000.5 = 1,000.50 USD." {
		t.Errorf("Echo(1_000.5, USD) = %q", got)
	}
	if got := Echo("500", "JPY"); got != "You typed 500 = 500 JPY." {
		t.Errorf("Echo(500, JPY) = %q", got)
	}
	if Echo("500.5", "JPY") != "" {
		t.Error("an echo of a yen amount with decimals")
	}
	if Echo("fifty", "USD") != "" {
		t.Error("an echo of what is not a number")
	}
}

func TestLayout_SkipLinkAndCurrentPage(t *testing.T) {
	t.Parallel()
	doc := render(t, Problem(Page{Active: "vouchers", User: Viewer{Role: voucher.RoleAdmin}}, "h", "m"))
	if href, _ := doc.Find(testid("skip-link")).Attr("href"); href != "#main" || doc.Find("main#main").Length() != 1 {
		t.Errorf("skip link goes to %q, want #main (the main element)", href)
	}
	if got, _ := doc.Find(testid("nav-vouchers")).Attr("aria-current"); got != "page" {
		t.Errorf("the current page's entry has aria-current=%q, want page", got)
	}
	if got, _ := doc.Find(testid("nav-drift")).Attr("aria-current"); got == "page" {
		t.Error("another entry is marked current")
	}
}

func TestPosition_OfTheTotalWhenKnown(t *testing.T) {
	for _, tc := range []struct {
		position, of int
		want         string
	}{
		{317, 1000, "#317 of 1,000"},
		{1234, 0, "#1,234"}, // the total not known: a campaign code's
		{0, 1000, "—"},      // none kept
	} {
		if got := Position(tc.position, tc.of); got != tc.want {
			t.Errorf("Position(%d, %d) = %q, want %q", tc.position, tc.of, got, tc.want)
		}
	}
}
