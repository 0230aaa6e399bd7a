// Package components holds the dashboard's templ components and the small
// view types they render. Components get domain values (never database rows)
// and format them for people; they do no I/O.
package components

import (
	"fmt"
	"hash/fnv"

	"github.com/a-h/templ"
	"net/url"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/voucher"
)

// Page is what every page's layout needs.
type Page struct {
	Title  string
	User   Viewer
	CSRF   string // the session's CSRF token, for forms and htmx requests
	Active string // the navigation entry to highlight: vouchers, new, drift
	Notice string // a sentence shown once after an action
	Zone   *time.Location
	// Campaigns shows the campaigns in the navigation.
	Campaigns bool
	// ApiKeys shows the API keys in the navigation (to admins).
	ApiKeys bool
	// Webhooks shows the webhook endpoints in the navigation (to admins).
	Webhooks bool
}

// Viewer is the signed-in user as the pages need them.
type Viewer struct {
	Email string
	Name  string
	Role  voucher.Role
}

// CanManage reports whether the viewer may create and change vouchers.
func (v Viewer) CanManage() bool {
	return voucher.Caller{Role: v.Role}.Can(voucher.OpManageVoucher)
}

// CanReadCampaigns reports whether the viewer may see campaigns.
func (v Viewer) CanReadCampaigns() bool {
	return voucher.Caller{Role: v.Role}.Can(voucher.OpReadCampaigns)
}

// CanOperate reports whether the viewer may see drift and run repairs.
func (v Viewer) CanOperate() bool {
	return voucher.Caller{Role: v.Role}.Can(voucher.OpOperate)
}

// CanManageKeys reports whether the viewer may manage API keys.
func (v Viewer) CanManageKeys() bool {
	return voucher.Caller{Role: v.Role}.Can(voucher.OpManageKeys)
}

// CanManageWebhooks reports whether the viewer may manage webhooks.
func (v Viewer) CanManageWebhooks() bool {
	return voucher.Caller{Role: v.Role}.Can(voucher.OpManageWebhooks)
}

// CanManageUsers reports whether the viewer may lift sign-in locks.
func (v Viewer) CanManageUsers() bool {
	return voucher.Caller{Role: v.Role}.Can(voucher.OpManageUsers)
}

func (p Page) zone() *time.Location {
	if p.Zone == nil {
		return time.UTC
	}
	return p.Zone
}

// csrfHeaders is the hx-headers value that sends the CSRF token with every
// htmx request of a page.
func csrfHeaders(token string) string {
	return fmt.Sprintf(`{"X-CSRF-Token": %q}`, token)
}

// Money formats minor units (cents) as a decimal amount with two places.
func Money(minor int64) string {
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	return fmt.Sprintf("%s%s.%02d", sign, thousands(minor/100), minor%100)
}

// MoneyIn shows an amount of minor units in its currency's own units, with
// as many decimals as the currency has (voucher.CurrencyDigits: 5000 USD is
// "50.00 USD", 500 JPY "500 JPY", 5000 BHD "5.000 BHD").
func MoneyIn(minor int64, currency string) string {
	return units(minor, voucher.CurrencyDigits(currency), true) + " " + currency
}

// DiscountOf says a voucher's discount for people: "10.00 USD off" or
// "15 % off, at most 7.00 EUR".
func DiscountOf(v voucher.Voucher) string {
	if v.DiscountType != voucher.DiscountPercent {
		return MoneyIn(v.DiscountAmount, v.Currency) + " off"
	}
	s := strconv.Itoa(v.DiscountPercent) + " % off"
	if v.MaxDiscountAmount != nil {
		s += ", at most " + MoneyIn(*v.MaxDiscountAmount, v.Currency)
	}
	return s
}

// BudgetOf says how much of a voucher's budget its held and confirmed
// discounts spend: "1,200.00 of 5,000.00 EUR" or "no budget".
func BudgetOf(v voucher.Voucher) string {
	if v.BudgetAmount == nil {
		return "no budget (" + MoneyIn(v.BudgetUsed, v.Currency) + " held)"
	}
	return MoneyIn(v.BudgetUsed, v.Currency) + " of " + MoneyIn(*v.BudgetAmount, v.Currency)
}

func thousands(n int64) string { return group(strconv.FormatInt(n, 10)) }

// Count formats a number of uses with thousands separators.
func Count(n int) string { return thousands(int64(n)) }

// Position shows a reservation's place among its voucher's admitted
// reserves: "#317 of 1,000" of the voucher's total limit, "#317" when the
// total is not known (0: a campaign code's, read from its campaign), "—"
// for a reservation without one (answered from a gate that kept none).
func Position(position, of int) string {
	switch {
	case position <= 0:
		return "—"
	case of <= 0:
		return "#" + Count(position)
	}
	return "#" + Count(position) + " of " + Count(of)
}

// When formats a moment in the zone, with the zone's abbreviation.
func When(t time.Time, zone *time.Location) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(zone).Format("Mon 2 Jan 2006 15:04 MST")
}

// Clock formats a moment as a time of day with seconds, for recent events.
func Clock(t time.Time, zone *time.Location) string {
	return t.In(zone).Format("2 Jan 15:04:05")
}

// Window formats a voucher's window in the zone.
func Window(start, end time.Time, zone *time.Location) string {
	s, e := start.In(zone), end.In(zone)
	if s.Year() == e.Year() && s.YearDay() == e.YearDay() {
		return s.Format("Mon 2 Jan 2006 15:04") + "–" + e.Format("15:04 MST")
	}
	return s.Format("2 Jan 2006 15:04") + " – " + e.Format("2 Jan 2006 15:04 MST")
}

// Duration says how long a window lasts, for people.
func Duration(d time.Duration) string {
	if d <= 0 {
		return "no time"
	}
	days := int(d / (24 * time.Hour))
	d -= time.Duration(days) * 24 * time.Hour
	hours := int(d / time.Hour)
	d -= time.Duration(hours) * time.Hour
	mins := int(d / time.Minute)
	var parts []string
	if days > 0 {
		parts = append(parts, plural(days, "day"))
	}
	if hours > 0 {
		parts = append(parts, plural(hours, "hour"))
	}
	if mins > 0 && days == 0 {
		parts = append(parts, plural(mins, "minute"))
	}
	if len(parts) == 0 {
		return "under a minute"
	}
	return strings.Join(parts, " ")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// StateLabel is a state's name for people.
func StateLabel(s voucher.VoucherState) string {
	switch s {
	case voucher.StateScheduled:
		return "scheduled"
	case voucher.StateLive:
		return "live"
	case voucher.StateSoldOut:
		return "sold out"
	case voucher.StateEnded:
		return "ended"
	}
	return string(s)
}

// Bar is the widths, in percent of the total, of a voucher's confirmed,
// reserved and remaining uses.
type Bar struct {
	Confirmed, Reserved, Remaining float64
}

// BarOf splits a voucher's total into confirmed, reserved and remaining.
func BarOf(v voucher.Voucher) Bar {
	if v.TotalLimit <= 0 {
		return Bar{}
	}
	t := float64(v.TotalLimit)
	b := Bar{Confirmed: 100 * float64(v.ConfirmedCount) / t, Reserved: 100 * float64(v.ReservedCount) / t}
	b.Remaining = max(0, 100-b.Confirmed-b.Reserved)
	return b
}

func pct(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) + "%" }

// GateLabel says what the gate's counter is for a listed voucher.
func GateLabel(o voucher.VoucherOverview) string {
	switch {
	case !o.Flash:
		return ""
	case o.GateUnavailable:
		return "gate unavailable"
	case o.Gate == nil:
		return "not loaded"
	}
	return Count(*o.Gate)
}

// Chart is the geometry of the remaining-uses chart, in SVG user units.
type Chart struct {
	Width, Height float64
	Points        string // the polyline's points
	Area          string // the polygon under it
	YLabels       []ChartLabel
	XLabels       []ChartLabel
	Empty         bool
	Last          int // the latest remaining count
}

// ChartLabel is a label on an axis.
type ChartLabel struct {
	X, Y float64
	Text string
}

// The chart's size and margins.
const (
	chartWidth  = 640.0
	chartHeight = 200.0
	chartLeft   = 56.0
	chartRight  = 12.0
	chartTop    = 12.0
	chartBottom = 28.0
)

// ChartOf lays out remaining uses over time. It starts where there is
// something to see: a little before the first sample when there are samples
// (samples are taken only when the counters change, so the first is the
// sale's start: a sale late in a long window is zoomed to, not squeezed into
// the right edge), else at the window's start or the voucher's creation,
// whichever is later; it ends now (or at the window's end). The axis is
// labelled with dates and times in the reader's zone.
func ChartOf(a voucher.VoucherActivity, now time.Time, zone *time.Location) Chart {
	c := Chart{Width: chartWidth, Height: chartHeight, Last: a.Remaining()}
	total := a.TotalLimit
	if now.Before(a.StartsAt) || total <= 0 {
		c.Empty = true
		return c
	}
	type point struct {
		t time.Time
		n int
	}
	end := now
	if end.After(a.EndsAt) {
		end = a.EndsAt
	}
	from := a.StartsAt
	if a.CreatedAt.After(from) {
		from = a.CreatedAt
	}
	var pts []point
	switch {
	case len(a.Samples) == 0:
		pts = []point{{from, total}}
	case len(a.Samples) == voucher.ActivitySamples:
		// The oldest samples were cut off: start at the oldest one kept.
	default:
		// A lead-in at the total before the first change, a tenth of the
		// sale's length long, never before the voucher could be used.
		first := a.Samples[0].At
		lead := max(end.Sub(first)/10, time.Minute)
		start := first.Add(-lead)
		if start.Before(from) {
			start = from
		}
		if start.Before(first) {
			pts = []point{{start, total}}
		}
	}
	for _, s := range a.Samples {
		pts = append(pts, point{s.At, s.Remaining})
	}
	if end.After(pts[len(pts)-1].t) {
		pts = append(pts, point{end, a.Remaining()})
	}
	t0, t1 := pts[0].t, pts[len(pts)-1].t
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
	}
	w := chartWidth - chartLeft - chartRight
	h := chartHeight - chartTop - chartBottom
	x := func(t time.Time) float64 { return chartLeft + w*t.Sub(t0).Seconds()/span }
	y := func(n int) float64 { return chartTop + h*(1-float64(n)/float64(total)) }
	var line []string
	prev := -1
	for i, p := range pts {
		// Steps, not slopes: the count holds until the next sample.
		if i > 0 && prev >= 0 {
			line = append(line, xy(x(p.t), y(prev)))
		}
		line = append(line, xy(x(p.t), y(p.n)))
		prev = p.n
	}
	c.Points = strings.Join(line, " ")
	c.Area = c.Points + " " + xy(x(t1), y(0)) + " " + xy(x(t0), y(0))
	for _, frac := range []float64{0, 0.5, 1} {
		n := int(float64(total) * frac)
		c.YLabels = append(c.YLabels, ChartLabel{X: chartLeft - 6, Y: y(n) + 4, Text: Count(n)})
	}
	// Dates on every label: a chart read the next day still says when.
	layout := "2 Jan 15:04"
	if span < 10*60 {
		layout = "2 Jan 15:04:05"
	}
	mid := t0.Add(time.Duration(span/2) * time.Second)
	c.XLabels = []ChartLabel{
		{X: chartLeft, Y: chartHeight - 8, Text: t0.In(zone).Format(layout)},
		{X: chartLeft + w/2, Y: chartHeight - 8, Text: mid.In(zone).Format(layout)},
		{X: chartWidth - chartRight, Y: chartHeight - 8, Text: t1.In(zone).Format(layout)},
	}
	return c
}

func xy(x, y float64) string {
	return strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// VoucherForm is the create and edit form's values as typed, with a message
// per field at fault.
type VoucherForm struct {
	// Editing is the code of the voucher being changed; empty on create.
	Editing string
	// DuplicateOf is the code of the voucher whose terms a new one copies;
	// empty otherwise.
	DuplicateOf       string
	Code              string
	DiscountType      string // FIXED (also empty) or PERCENT
	DiscountAmount    string
	DiscountPercent   string
	MaxDiscountAmount string
	Currency          string
	// DefaultCurrency is the amounts' currency when Currency is empty: the
	// service's default on create, the voucher's own on edit.
	DefaultCurrency string
	BudgetAmount    string
	MinOrderAmount  string
	TotalLimit      string
	PerUserLimit    string
	StartsAt        string // datetime-local, in Zone
	EndsAt          string
	Zone            string // an IANA zone name
	Flash           bool
	// Limits are the period limits' rows (LimitRows pads them to the most
	// a voucher has); a row without a max is none.
	Limits []LimitRow
	// TimeZone is the period limits' calendar (the voucher's timeZone).
	TimeZone string
	// Segments, SKUs and Categories are comma-separated lists; SKUs and
	// Categories both empty: the discount applies to the whole order.
	Segments, SKUs, Categories string
	Errors                     map[string]string
	// Form is a message about the whole form (e.g. an unexpected failure).
	Form string
}

// DateTimeLocal is the value format of an <input type="datetime-local">.
const DateTimeLocal = "2006-01-02T15:04"

// WindowPreview is the window of a voucher being typed, in the marketer's
// zone and in UTC.
type WindowPreview struct {
	Valid   bool
	Message string // why there is no preview
	Local   string
	UTC     string
	Lasts   string
	Starts  string // "starts in 3 days", "started 2 hours ago"
}

// PreviewOf describes a window for the form.
func PreviewOf(start, end time.Time, zone *time.Location, now time.Time) WindowPreview {
	switch {
	case start.IsZero() || end.IsZero():
		return WindowPreview{Message: "Pick a start and an end to see the window."}
	case !start.Before(end):
		return WindowPreview{Message: "The end must come after the start."}
	}
	p := WindowPreview{
		Valid: true,
		Local: Window(start, end, zone) + " (" + zone.String() + ")",
		UTC:   Window(start, end, time.UTC),
		Lasts: Duration(end.Sub(start)),
	}
	if zone.String() == "UTC" {
		p.Local, p.UTC = Window(start, end, zone), "in UTC"
	}
	switch {
	case start.After(now):
		p.Starts = "starts in " + Duration(start.Sub(now))
	case end.After(now):
		p.Starts = "live as soon as it is saved (started " + Duration(now.Sub(start)) + " ago)"
	default:
		p.Starts = "already over: no reserve will be eligible"
	}
	return p
}

// Zones is the time-zone select's list; the browser's own zone is added
// (and chosen) by dashboard.js when it is not among them.
var Zones = []string{
	"UTC",
	"Europe/London", "Europe/Berlin", "Europe/Paris", "Europe/Madrid", "Europe/Warsaw", "Europe/Istanbul",
	"America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles", "America/Sao_Paulo",
	"Asia/Dubai", "Asia/Kolkata", "Asia/Singapore", "Asia/Jakarta", "Asia/Ho_Chi_Minh", "Asia/Shanghai", "Asia/Tokyo", "Asia/Seoul",
	"Australia/Sydney", "Pacific/Auckland",
}

// ConfirmAction is a confirmation step before an action with consequences.
type ConfirmAction struct {
	Title    string
	Question string
	Effects  []string // what will happen, one sentence each
	Action   string   // the form's POST target
	Button   string
	Cancel   string // where "cancel" goes
	Danger   bool
}

// DriftView is the drift page's data.
type DriftView struct {
	Reports []voucher.DriftReport
	// Flash lists the flash vouchers never reconciled yet.
	Unreconciled []string
	// DeadLetters is the count of dead-lettered events; nil when this build
	// has no store of them.
	DeadLetters *int
	// DeadLettersError is set when the count could not be read.
	DeadLettersError bool
	// Operations are the latest repairs run by hand, newest first.
	Operations []voucher.AuditEvent
	// At is when the page was read.
	At time.Time
}

// Alerts returns the reports whose drift persisted past one interval.
func (d DriftView) Alerts() []voucher.DriftReport {
	var out []voucher.DriftReport
	for _, r := range d.Reports {
		if r.Alert {
			out = append(out, r)
		}
	}
	return out
}

func gateText(g *int) string {
	if g == nil {
		return "not loaded"
	}
	return Count(*g)
}

func signed(n int) string {
	if n > 0 {
		return "+" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// ListQuery is the list's filter, order and page as given in the URL.
type ListQuery struct {
	Search string
	State  string
	Flash  bool
	// Sort is start, state or usage; empty is live first (the default).
	Sort string
	Desc bool
	// Page counts from 1; 0 is the first.
	Page int
}

// PageSize is how many vouchers a page of the list shows.
const PageSize = 100

// Pages is how many pages total matches take (at least one).
func Pages(total int) int { return max(1, (total+PageSize-1)/PageSize) }

func (q ListQuery) pageNumber() int { return max(1, q.Page) }

// Offset is the first match of the query's page.
func (q ListQuery) Offset() int { return (q.pageNumber() - 1) * PageSize }

// Filtered reports whether the query narrows or reorders the list.
func (q ListQuery) Filtered() bool { return q != (ListQuery{}) }

// SortedBy is the query ordered by a column, from its first page: the same
// column again reverses the order.
func (q ListQuery) SortedBy(sort string) ListQuery {
	q.Desc = q.Sort == sort && !q.Desc
	q.Sort, q.Page = sort, 0
	return q
}

// AtPage is the query at another page.
func (q ListQuery) AtPage(n int) ListQuery {
	q.Page = n
	return q
}

// Encode returns the query as a query string, for links and the poll.
func (q ListQuery) Encode() string {
	v := []string{}
	if q.Search != "" {
		v = append(v, "q="+url.QueryEscape(q.Search))
	}
	if q.State != "" {
		v = append(v, "state="+url.QueryEscape(q.State))
	}
	if q.Flash {
		v = append(v, "flash=1")
	}
	if q.Sort != "" {
		v = append(v, "sort="+url.QueryEscape(q.Sort))
	}
	if q.Desc {
		v = append(v, "desc=1")
	}
	if q.Page > 1 {
		v = append(v, "page="+strconv.Itoa(q.Page))
	}
	return strings.Join(v, "&")
}

// PageSummary says which matches the page shows: "1–100 of 204 vouchers".
func PageSummary(q ListQuery, p voucher.VoucherPage) string {
	switch {
	case p.Total == 0:
		return "No voucher matches."
	case len(p.Rows) == 0:
		return "This page is past the last of " + Count(p.Total) + " vouchers."
	case p.Total == 1:
		return "1 voucher."
	}
	first := q.Offset() + 1
	return Count(first) + "–" + Count(first+len(p.Rows)-1) + " of " + Count(p.Total) + " vouchers, " + SortLabel(q) + "."
}

// SortLabel says the list's order in words.
func SortLabel(q ListQuery) string {
	switch q.Sort {
	case "start":
		if q.Desc {
			return "latest start first"
		}
		return "earliest start first"
	case "state":
		if q.Desc {
			return "ended first"
		}
		return "scheduled first"
	case "usage":
		if q.Desc {
			return "most used first"
		}
		return "least used first"
	}
	return "live first"
}

// ListStatus is the polite announcement of the figures: it changes (and is
// read out) only when a voucher shown goes live, sells out or ends.
func ListStatus(rows []voucher.VoucherOverview) string {
	n := map[voucher.VoucherState]int{}
	for _, r := range rows {
		n[r.State]++
	}
	return fmt.Sprintf("Shown: %d live, %d sold out, %d scheduled, %d ended.",
		n[voucher.StateLive], n[voucher.StateSoldOut], n[voucher.StateScheduled], n[voucher.StateEnded])
}

// current is aria-current for a navigation entry: "page" for the page shown.
func current(on bool) string {
	if on {
		return "page"
	}
	return "false"
}

// fieldAttrs ties an input to its message: aria-invalid and the message's
// id after a refused submit, the rule's id otherwise.
func fieldAttrs(name string, errs map[string]string) templ.Attributes {
	if errs[name] != "" {
		return templ.Attributes{"aria-invalid": "true", "aria-describedby": name + "-error"}
	}
	return templ.Attributes{"aria-describedby": name + "-hint"}
}

func gateName(technical bool) string {
	if technical {
		return "Gate"
	}
	return "Fast counter"
}

// GateGap explains a flash voucher whose gate and database disagree: to a
// marketer in plain words, to an operator in the gate's terms.
func GateGap(o voucher.VoucherOverview, technical bool) string {
	if !o.Flash || o.Gate == nil || *o.Gate == o.Remaining() {
		return ""
	}
	gate, db := Count(*o.Gate), Count(o.Remaining())
	if technical {
		return "The gate's counter (" + gate + ") differs from the database's remaining (" + db + "): orders in flight, or drift; the drift page shows which, and alerts when it persists."
	}
	if *o.Gate < o.Remaining() {
		return "The fast counter lets " + gate + " more buyers through while the database has " + db + " uses left: some are on their way to the database, or the counter fell behind. Operators are told if it stays that way, and they can put it right; nothing is oversold."
	}
	return "The fast counter shows " + gate + " while the database has " + db + " uses left: the counter is corrected within a minute. Operators are told if it stays that way; the database never sells more than the total."
}

// PathLabel says how a reservation event was written: to an operator by the
// path's name, to a marketer in words.
func PathLabel(p voucher.Path, technical bool) string {
	if technical {
		return string(p)
	}
	switch p {
	case voucher.PathDatabase:
		return "directly"
	case voucher.PathGateSync:
		return "flash sale, at once"
	case voucher.PathKafka:
		return "flash sale, queued"
	case voucher.PathExpiry:
		return "expired"
	}
	return string(p)
}

// Wait says a sign-in lock's wait for people, rounded up to the minute
// ("1 minute", "12 minutes"), in seconds under a minute.
func Wait(d time.Duration) string {
	if d < time.Minute {
		return plural(max(1, int((d+time.Second-1)/time.Second)), "second")
	}
	return plural(int((d+time.Minute-1)/time.Minute), "minute")
}

// ReservationQuery is the reservations list's filter as typed.
type ReservationQuery struct {
	Code          string
	Status        string // RESERVED, CONFIRMED, RELEASED, ROLLED_BACK or empty
	Customer      string
	CustomerError string
	Paged         bool // past the first page
}

// Values is the filter as URL values, for the next page and the export.
func (q ReservationQuery) Values() url.Values {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.Customer != "" {
		v.Set("customer", q.Customer)
	}
	return v
}

// CSVURL is the export of what the filter keeps.
func (q ReservationQuery) CSVURL() string {
	u := "/admin/vouchers/" + url.PathEscape(q.Code) + "/reservations.csv"
	if e := q.Values().Encode(); e != "" {
		u += "?" + e
	}
	return u
}

// RowsKey names the rows a page of the list shows, in order: the poll
// sends it back, so the server can tell when other rows match now.
func RowsKey(rows []voucher.VoucherOverview) string {
	h := fnv.New64a()
	for _, r := range rows {
		_, _ = h.Write([]byte(r.Code))
		_, _ = h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// pollURL is where the list's poll asks for the figures of the rows shown.
func pollURL(q ListQuery, rows []voucher.VoucherOverview) string {
	v := q.Encode()
	if v != "" {
		v += "&"
	}
	return "/admin/vouchers/rows?" + v + "shown=" + RowsKey(rows)
}

// whenOrNever is an optional time for people: none is the word given.
func whenOrNever(t *time.Time, p Page, none string) string {
	if t == nil {
		return none
	}
	return When(*t, p.zone())
}

// keyRate is a key's rate for people.
func keyRate(k voucher.ApiKey) string {
	if k.RatePerSecond == nil {
		return "no limit"
	}
	s := strconv.Itoa(*k.RatePerSecond) + "/s"
	if k.Burst != nil {
		s += ", burst " + strconv.Itoa(*k.Burst)
	}
	return s
}

// now is the time a page is drawn at, for what has expired.
func (p Page) now() time.Time { return time.Now() }

// LimitRow is one period limit as the form holds it.
type LimitRow struct{ Scope, Period, Max string }

// LimitRows are the form's period limit rows: the ones given, then empty
// ones up to voucher.MaxPeriodLimits.
func (f VoucherForm) LimitRows() []LimitRow {
	rows := append([]LimitRow{}, f.Limits...)
	for len(rows) < voucher.MaxPeriodLimits {
		rows = append(rows, LimitRow{Scope: "CUSTOMER", Period: "DAY"})
	}
	return rows
}

// PeriodLimitsOf says a voucher's period limits in words: "3 per day per
// customer, 100 per month for everyone (Europe/Berlin)"; "none".
func PeriodLimitsOf(r voucher.Restrictions) string {
	if len(r.PeriodLimits) == 0 {
		return "none"
	}
	var parts []string
	for _, l := range r.PeriodLimits {
		who := "for everyone"
		if l.Scope == voucher.ScopeCustomer {
			who = "per customer"
		}
		parts = append(parts, fmt.Sprintf("%s per %s %s", Count(l.Max), strings.ToLower(string(l.Period)), who))
	}
	return strings.Join(parts, ", ") + " (" + r.ZoneName() + ")"
}

// ListOr is a list joined by commas, or none when empty.
func ListOr(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, ", ")
}

// AppliesToOf says which items a voucher's discount is taken on.
func AppliesToOf(r voucher.Restrictions) string {
	a := r.AppliesTo
	if a == nil {
		return "the whole order"
	}
	var parts []string
	if len(a.SKUs) > 0 {
		parts = append(parts, "SKUs "+strings.Join(a.SKUs, ", "))
	}
	if len(a.Categories) > 0 {
		parts = append(parts, "categories "+strings.Join(a.Categories, ", "))
	}
	return strings.Join(parts, "; ")
}

// PeriodOf is a period count's period in the voucher's zone, e.g.
// "2026-12-06" for a day, "week of 2026-11-30", "2026-12" for a month.
func PeriodOf(c voucher.PeriodCount, zone *time.Location) string {
	start := c.Start.In(zone)
	switch c.Period {
	case voucher.PeriodWeek:
		return "week of " + start.Format("2006-01-02")
	case voucher.PeriodMonth:
		return start.Format("2006-01")
	}
	return start.Format("2006-01-02")
}

// WhoOf is a period count's customer, or "everyone" for a VOUCHER limit.
func WhoOf(c voucher.PeriodCount) string {
	if c.Scope == voucher.ScopeVoucher {
		return "everyone"
	}
	return "customer " + strconv.FormatInt(c.CustomerID, 10)
}

func hasEvent(events []string, t string) bool {
	for _, e := range events {
		if e == t {
			return true
		}
	}
	return false
}
