package web

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// listQuery reads the list's filter from the URL.
func listQuery(r *http.Request) components.ListQuery {
	q := r.URL.Query()
	lq := components.ListQuery{
		Search: strings.TrimSpace(q.Get("q")),
		State:  q.Get("state"),
		Flash:  q.Get("flash") == "1",
		Desc:   q.Get("desc") == "1",
	}
	switch sort := q.Get("sort"); sort {
	case "start", "state", "usage":
		lq.Sort = sort
	}
	if n := pageParam(q, 1_000_000); n > 1 {
		lq.Page = n
	}
	return lq
}

// pageParam is the page a list's URL asks for (?page=), from 1. A page that
// is not a whole number from 1 to last is the first: a URL typed by hand
// never errors, and the offset stays far from overflowing.
func pageParam(q url.Values, last int) int {
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 1 && n <= last {
		return n
	}
	return 1
}

func filterOf(q components.ListQuery) voucher.VoucherFilter {
	sort := voucher.VoucherSort(q.Sort)
	if sort == voucher.SortNewest {
		sort = voucher.SortLive // the list's default: a sale running is never buried
	}
	return voucher.VoucherFilter{
		Search: q.Search, State: voucher.VoucherState(q.State), FlashOnly: q.Flash,
		Sort: sort, Descending: q.Desc, Limit: components.PageSize, Offset: q.Offset(),
	}
}

func (d *dashboard) voucherList(w http.ResponseWriter, r *http.Request) {
	q := listQuery(r)
	page, err := d.deps.Vouchers.PageVouchers(r.Context(), filterOf(q))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, components.VoucherList(d.page(r, "Vouchers", "vouchers"), q, page, d.cfg.Now()))
}

// voucherRows is the fragment the list polls: the figures of the page's
// rows, each swapped out of band into its cell, or, when other rows match
// than those the page shows (a voucher created since it loaded, one that
// moved in the order), the rows themselves with the total.
func (d *dashboard) voucherRows(w http.ResponseWriter, r *http.Request) {
	q := listQuery(r)
	rows, err := d.deps.Vouchers.ListVouchers(r.Context(), filterOf(q))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if components.RowsKey(rows) == r.URL.Query().Get("shown") {
		d.render(w, r, http.StatusOK, components.VoucherFigures(q, rows))
		return
	}
	page, err := d.deps.Vouchers.PageVouchers(r.Context(), filterOf(q))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, components.VoucherRowsRefresh(q, page, zoneOf(r), d.cfg.Now()))
}

func (d *dashboard) voucherPage(w http.ResponseWriter, r *http.Request) {
	a, err := d.deps.Vouchers.Activity(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	var sale *components.SaleChart
	if d.deps.Sales != nil {
		rep, err := d.deps.Sales.Sale(r.Context(), a.Code)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		c := components.SaleChartOf(rep, zoneOf(r))
		sale = &c
	}
	d.render(w, r, http.StatusOK, components.VoucherPage(d.page(r, a.Code, "vouchers"), a, d.cfg.Now(), sale))
}

// saleCSV is a voucher's sale series as a file: a header row, then a row
// per second (or minute) with the admitted, the refused and a column per
// refusal code.
func (d *dashboard) saleCSV(w http.ResponseWriter, r *http.Request) {
	if d.deps.Sales == nil {
		http.NotFound(w, r)
		return
	}
	rep, err := d.deps.Sales.Sale(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="sale-`+rep.Code+`.csv"`)
	out := csv.NewWriter(w)
	_ = out.WriteAll(components.SaleCSV(rep)) // a write error is the client gone
}

// voucherFigures is the fragment the voucher page polls.
func (d *dashboard) voucherFigures(w http.ResponseWriter, r *http.Request) {
	o, err := d.deps.Vouchers.Voucher(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, components.Figures(o, zoneOf(r), sessionFrom(r.Context()).user.Caller().Can(voucher.OpOperate)))
}

func (d *dashboard) newVoucher(w http.ResponseWriter, r *http.Request) {
	zone := zoneOf(r)
	f := components.VoucherForm{PerUserLimit: "1", MinOrderAmount: "0", DefaultCurrency: d.cfg.DefaultCurrency}
	if zone != time.UTC {
		f.Zone = zone.String()
	}
	d.renderForm(w, r, http.StatusOK, f)
}

func (d *dashboard) renderForm(w http.ResponseWriter, r *http.Request, status int, f components.VoucherForm) {
	title, active := "New voucher", "new"
	switch {
	case f.Editing != "":
		title, active = "Change "+f.Editing, "vouchers"
	case f.DuplicateOf != "":
		title, active = "Duplicate "+f.DuplicateOf, "vouchers"
	}
	d.render(w, r, status, components.VoucherFormPage(d.page(r, title, active), f, d.preview(f.StartsAt, f.EndsAt, f.Zone)))
}

// windowPreview is the fragment that shows the window being typed in the
// chosen zone and in UTC.
func (d *dashboard) windowPreview(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d.render(w, r, http.StatusOK, components.Preview(d.preview(q.Get("startsAt"), q.Get("endsAt"), q.Get("tz"))))
}

func (d *dashboard) preview(startsAt, endsAt, zoneName string) components.WindowPreview {
	zone, ok := loadZone(zoneName)
	if !ok {
		zone = time.UTC
	}
	start, _ := time.ParseInLocation(components.DateTimeLocal, startsAt, zone)
	end, _ := time.ParseInLocation(components.DateTimeLocal, endsAt, zone)
	return components.PreviewOf(start, end, zone, d.cfg.Now())
}

// voucherForm reads the form as typed; parse errors become field messages
// in the contract's words, and the domain's rules add theirs. Amounts are
// typed in the currency's units, the currency being the form's, else
// defaultCurrency (the one the voucher gets without one).
func voucherForm(r *http.Request, defaultCurrency string) (components.VoucherForm, voucher.NewVoucher) {
	f := components.VoucherForm{
		Code:              strings.TrimSpace(r.PostFormValue("code")),
		DiscountType:      strings.TrimSpace(r.PostFormValue("discountType")),
		DiscountAmount:    strings.TrimSpace(r.PostFormValue("discountAmount")),
		DiscountPercent:   strings.TrimSpace(r.PostFormValue("discountPercent")),
		MaxDiscountAmount: strings.TrimSpace(r.PostFormValue("maxDiscountAmount")),
		Currency:          strings.TrimSpace(r.PostFormValue("currency")),
		DefaultCurrency:   defaultCurrency,
		BudgetAmount:      strings.TrimSpace(r.PostFormValue("budgetAmount")),
		MinOrderAmount:    strings.TrimSpace(r.PostFormValue("minOrderAmount")),
		TotalLimit:        strings.TrimSpace(r.PostFormValue("totalLimit")),
		PerUserLimit:      strings.TrimSpace(r.PostFormValue("perUserLimit")),
		StartsAt:          r.PostFormValue("startsAt"),
		EndsAt:            r.PostFormValue("endsAt"),
		Zone:              r.PostFormValue("tz"),
		Flash:             r.PostFormValue("flash") == "1",
		TimeZone:          strings.TrimSpace(r.PostFormValue("timeZone")),
		Segments:          strings.TrimSpace(r.PostFormValue("eligibleSegments")),
		SKUs:              strings.TrimSpace(r.PostFormValue("appliesToSkus")),
		Categories:        strings.TrimSpace(r.PostFormValue("appliesToCategories")),
		Errors:            map[string]string{},
	}
	n := voucher.NewVoucher{Code: f.Code, Flash: f.Flash, DiscountType: voucher.DiscountType(f.DiscountType), Currency: f.Currency}
	parseErrs := map[string]string{}
	// integer parses a field of the given bits: a number that does not fit
	// is a parse error, never wrapped (limits are 32-bit, amounts 64-bit).
	integer := func(field, raw, def string, bits int, message string) int64 {
		if raw == "" {
			raw = def
		}
		v, err := strconv.ParseInt(strings.ReplaceAll(raw, "_", ""), 10, bits)
		if err != nil {
			parseErrs[field] = message
		}
		return v
	}
	// amount parses an amount in the currency's units into minor units
	// (components.ParseAmount): its refusal says the rule, unless the field
	// should not be there at all (instead).
	currency := f.AmountCurrency()
	amount := func(field, raw, def, instead string) int64 {
		if raw == "" {
			raw = def
		}
		v, err := components.ParseAmount(raw, currency)
		switch {
		case err != nil && instead != "":
			parseErrs[field] = instead
		case err != nil:
			parseErrs[field] = field + " " + err.Error()
		}
		return v
	}
	percent := n.DiscountType == voucher.DiscountPercent
	if percent {
		n.DiscountAmount = amount("discountAmount", f.DiscountAmount, "0", "discountAmount must be empty for a percentage")
		n.DiscountPercent = int(integer("discountPercent", f.DiscountPercent, "", 32, "discountPercent must be a whole number from 1 to 100"))
		if f.MaxDiscountAmount != "" {
			limit := amount("maxDiscountAmount", f.MaxDiscountAmount, "", "")
			n.MaxDiscountAmount = &limit
		}
	} else {
		n.DiscountAmount = amount("discountAmount", f.DiscountAmount, "", "")
		n.DiscountPercent = int(integer("discountPercent", f.DiscountPercent, "0", 32, "discountPercent is for a percentage only"))
		if f.MaxDiscountAmount != "" {
			limit := amount("maxDiscountAmount", f.MaxDiscountAmount, "", "maxDiscountAmount is for a percentage only")
			n.MaxDiscountAmount = &limit
		}
	}
	if f.BudgetAmount != "" {
		budget := amount("budgetAmount", f.BudgetAmount, "", "")
		n.BudgetAmount = &budget
	}
	n.MinOrderAmount = amount("minOrderAmount", f.MinOrderAmount, "0", "")
	// int of a value parsed as 32 bits: it fits on every platform.
	n.TotalLimit = int(integer("totalLimit", f.TotalLimit, "", 32, "totalLimit must be a whole number, at least 1 and at most 2147483647"))
	n.PerUserLimit = int(integer("perUserLimit", f.PerUserLimit, "1", 32, "perUserLimit must be a whole number, at least 1 and at most 2147483647"))
	zone, ok := loadZone(f.Zone)
	if !ok {
		parseErrs["tz"] = "choose a time zone from the list"
		zone = time.UTC
	}
	when := func(field, raw string) time.Time {
		if raw == "" {
			return time.Time{}
		}
		t, err := time.ParseInLocation(components.DateTimeLocal, raw, zone)
		if err != nil {
			parseErrs[field] = field + " must be a date and time"
		}
		return t
	}
	n.StartsAt = when("startsAt", f.StartsAt)
	n.EndsAt = when("endsAt", f.EndsAt)
	n.Restrictions, f.Limits = restrictionsForm(r, f, parseErrs)
	for k, v := range n.FieldErrors() {
		f.Errors[k] = v
	}
	for k, v := range parseErrs { // a parse error says more than the rule it broke
		f.Errors[k] = v
	}
	for k, v := range f.Errors {
		f.Errors[k] = inLabels(v)
	}
	return f, n
}

// restrictionsForm reads the period limit rows (a row without a max is
// none), the limits' time zone and the comma-separated lists.
func restrictionsForm(r *http.Request, f components.VoucherForm, parseErrs map[string]string) (voucher.Restrictions, []components.LimitRow) {
	out := voucher.Restrictions{TimeZone: f.TimeZone}
	var rows []components.LimitRow
	scopes, periods, maxes := r.PostForm["limitScope"], r.PostForm["limitPeriod"], r.PostForm["limitMax"]
	for i, raw := range maxes {
		raw = strings.TrimSpace(raw)
		if raw == "" || i >= len(scopes) || i >= len(periods) {
			continue
		}
		rows = append(rows, components.LimitRow{Scope: scopes[i], Period: periods[i], Max: raw})
		n, err := strconv.ParseInt(raw, 10, 32)
		if err != nil {
			parseErrs["periodLimits"] = "a limit must be a whole number, at least 1 and at most 2147483647"
		}
		out.PeriodLimits = append(out.PeriodLimits, voucher.PeriodLimit{Scope: voucher.LimitScope(scopes[i]), Period: voucher.LimitPeriod(periods[i]), Max: int(n)})
	}
	out.EligibleSegments = commaList(f.Segments)
	if skus, cats := commaList(f.SKUs), commaList(f.Categories); skus != nil || cats != nil {
		out.AppliesTo = &voucher.AppliesTo{SKUs: skus, Categories: cats}
	}
	return out, rows
}

// commaList splits a comma-separated field into its trimmed, non-empty
// items; nil when there is none.
func commaList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// fieldLabels are the form's labels of the contract's field names.
var fieldLabels = strings.NewReplacer(
	"maxDiscountAmount", "at most",
	"discountAmount", "discount",
	"discountPercent", "percent",
	"discountType", "discount type",
	"budgetAmount", "budget",
	"minOrderAmount", "minimum order",
	"totalLimit", "total uses",
	"perUserLimit", "uses per customer",
	"startsAt", "start",
	"endsAt", "end",
	"periodLimits", "limits",
	"timeZone", "calendar time zone",
	"eligibleSegments", "segments",
	"appliesTo.skus", "each SKU", // before appliesTo: the longer name first
	"appliesTo.categories", "each category",
	"appliesTo", "applies to",
)

// inLabels says a rule's message in the form's words: "discountAmount must
// be greater than 0" becomes "Discount must be greater than 0".
func inLabels(message string) string {
	m := fieldLabels.Replace(message)
	if m == "" {
		return m
	}
	return strings.ToUpper(m[:1]) + m[1:]
}

func (d *dashboard) createVoucher(w http.ResponseWriter, r *http.Request) {
	f, n := voucherForm(r, d.cfg.DefaultCurrency)
	f.DuplicateOf = strings.TrimSpace(r.PostFormValue("duplicateOf"))
	if len(f.Errors) > 0 {
		d.renderForm(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	create, notice := d.deps.Vouchers.CreateVoucher, "created"
	if f.DuplicateOf != "" {
		create = func(ctx context.Context, n voucher.NewVoucher) (voucher.Voucher, error) {
			return d.deps.Vouchers.DuplicateVoucher(ctx, f.DuplicateOf, n)
		}
		notice = "duplicated"
	}
	v, err := create(r.Context(), n)
	if err != nil {
		d.formRefused(w, r, f, err)
		return
	}
	http.Redirect(w, r, "/admin/vouchers/"+url.PathEscape(v.Code)+"?notice="+notice, http.StatusSeeOther)
}

// formRefused shows the service's refusal next to its field, or above the
// form; faults go to the error page.
func (d *dashboard) formRefused(w http.ResponseWriter, r *http.Request, f components.VoucherForm, err error) {
	e := voucher.AsError(err)
	switch e.Code {
	case voucher.InvalidInput:
		f.Errors[e.Field] = inLabels(e.Message)
	case voucher.VoucherExists:
		f.Errors["code"] = "a voucher with this code exists; choose another code"
	case voucher.VoucherStarted:
		f.Form = "This voucher has started, so its terms can no longer change. It can only be ended."
	default:
		d.fail(w, r, err)
		return
	}
	d.renderForm(w, r, http.StatusUnprocessableEntity, f)
}

// editVoucher shows the form filled with the voucher's terms, in the
// reader's zone; a voucher that has started cannot be changed.
func (d *dashboard) editVoucher(w http.ResponseWriter, r *http.Request) {
	o, err := d.deps.Vouchers.Voucher(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if o.State != voucher.StateScheduled || o.UsedCount > 0 {
		d.problem(w, r, http.StatusConflict, "Too late to change", "Voucher "+o.Code+" has started, so its terms can no longer change. It can only be ended.")
		return
	}
	f := termsForm(o.Voucher, zoneOf(r))
	f.Editing = o.Code
	d.renderForm(w, r, http.StatusOK, f)
}

// termsForm is the form filled with a voucher's terms, its window in zone.
func termsForm(o voucher.Voucher, zone *time.Location) components.VoucherForm {
	discount := components.FormatAmount(o.DiscountAmount, o.Currency)
	if o.DiscountType == voucher.DiscountPercent {
		discount = "" // a percentage has no amount: the field's rule says empty
	}
	return components.VoucherForm{
		Code:              o.Code,
		DiscountType:      string(o.DiscountType),
		DiscountAmount:    discount,
		DiscountPercent:   optionalInt(int64(o.DiscountPercent)),
		MaxDiscountAmount: optionalAmount(o.MaxDiscountAmount, o.Currency),
		Currency:          o.Currency,
		DefaultCurrency:   o.Currency,
		BudgetAmount:      optionalAmount(o.BudgetAmount, o.Currency),
		MinOrderAmount:    components.FormatAmount(o.MinOrderAmount, o.Currency),
		TotalLimit:        strconv.Itoa(o.TotalLimit),
		PerUserLimit:      strconv.Itoa(o.PerUserLimit),
		StartsAt:          o.StartsAt.In(zone).Format(components.DateTimeLocal),
		EndsAt:            o.EndsAt.In(zone).Format(components.DateTimeLocal),
		Zone:              zone.String(),
		Flash:             o.Flash,
		Limits:            limitRows(o.PeriodLimits),
		TimeZone:          o.ZoneName(),
		Segments:          strings.Join(o.EligibleSegments, ", "),
		SKUs:              appliesList(o.AppliesTo, true),
		Categories:        appliesList(o.AppliesTo, false),
	}
}

func limitRows(limits []voucher.PeriodLimit) []components.LimitRow {
	rows := make([]components.LimitRow, len(limits))
	for i, l := range limits {
		rows[i] = components.LimitRow{Scope: string(l.Scope), Period: string(l.Period), Max: strconv.Itoa(l.Max)}
	}
	return rows
}

func appliesList(a *voucher.AppliesTo, skus bool) string {
	switch {
	case a == nil:
		return ""
	case skus:
		return strings.Join(a.SKUs, ", ")
	}
	return strings.Join(a.Categories, ", ")
}

// duplicateVoucher shows the new-voucher form filled with a voucher's terms
// (discount, currency, budget, minimum, limits, flash); the code and the
// window are the new voucher's own, left empty to fill in.
func (d *dashboard) duplicateVoucher(w http.ResponseWriter, r *http.Request) {
	o, err := d.deps.Vouchers.Voucher(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	f := termsForm(o.Voucher, zoneOf(r))
	f.DuplicateOf, f.Code, f.StartsAt, f.EndsAt = o.Code, "", "", ""
	d.renderForm(w, r, http.StatusOK, f)
}

// updateVoucher saves every field of the form as the voucher's new terms.
func (d *dashboard) updateVoucher(w http.ResponseWriter, r *http.Request) {
	code := r.PathValue("code")
	currency := strings.TrimSpace(r.PostFormValue("currency"))
	if currency == "" { // empty keeps the voucher's, so its amounts are in it
		o, err := d.deps.Vouchers.Voucher(r.Context(), code)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		currency = o.Currency
	}
	f, n := voucherForm(r, currency)
	f.Editing = code
	if len(f.Errors) > 0 {
		d.renderForm(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	change := voucher.VoucherChange{
		Code: &n.Code, DiscountAmount: &n.DiscountAmount, MinOrderAmount: &n.MinOrderAmount,
		TotalLimit: &n.TotalLimit, PerUserLimit: &n.PerUserLimit,
		StartsAt: &n.StartsAt, EndsAt: &n.EndsAt, Flash: &n.Flash,
		DiscountPercent: &n.DiscountPercent, MaxDiscountAmount: n.MaxDiscountAmount, BudgetAmount: n.BudgetAmount,
		// Every field of the form is the new terms: an emptied cap or
		// budget is none, not "unchanged".
		ClearMaxDiscountAmount: n.MaxDiscountAmount == nil,
		ClearBudgetAmount:      n.BudgetAmount == nil,
		Restrictions:           &n.Restrictions,
	}
	if n.DiscountType != "" {
		change.DiscountType = &n.DiscountType
	}
	if n.Currency != "" { // empty keeps the voucher's
		change.Currency = &n.Currency
	}
	v, err := d.deps.Vouchers.UpdateVoucher(r.Context(), code, change)
	if err != nil {
		d.formRefused(w, r, f, err)
		return
	}
	http.Redirect(w, r, "/admin/vouchers/"+url.PathEscape(v.Code)+"?notice=updated", http.StatusSeeOther)
}

func (d *dashboard) confirmEndVoucher(w http.ResponseWriter, r *http.Request) {
	o, err := d.deps.Vouchers.Voucher(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, components.Confirm(d.page(r, "End "+o.Code, "vouchers"), components.ConfirmAction{
		Title:    "End " + o.Code + " now?",
		Question: "The voucher's window closes now instead of at " + components.When(o.EndsAt, zoneOf(r)) + ".",
		Effects: []string{
			"No new reserve of " + o.Code + " is taken from now on.",
			"Reservations already held keep their rules: each may still be confirmed or released until it expires.",
			"The change is recorded in the audit log under your name. It cannot be undone.",
		},
		Action: "/admin/vouchers/" + url.PathEscape(o.Code) + "/end",
		Button: "End " + o.Code + " now",
		Cancel: "/admin/vouchers/" + url.PathEscape(o.Code),
		Danger: true,
	}))
}

func (d *dashboard) endVoucher(w http.ResponseWriter, r *http.Request) {
	v, err := d.deps.Vouchers.EndVoucher(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/vouchers/"+url.PathEscape(v.Code)+"?notice=ended", http.StatusSeeOther)
}

// reservationLookup finds one reservation by orderId.
func (d *dashboard) reservationLookup(w http.ResponseWriter, r *http.Request) {
	orderID := strings.TrimSpace(r.URL.Query().Get("orderId"))
	var found *voucher.Reservation
	of := 0 // the voucher's total limit, shown with the position
	if orderID != "" {
		res, err := d.deps.Reservations.Reservation(r.Context(), orderID)
		switch voucher.ErrorCodeOf(err) {
		case "":
			found = &res
		case voucher.NotFound, voucher.InvalidInput:
		default:
			d.fail(w, r, err)
			return
		}
	}
	if found != nil {
		// A campaign code is no voucher of its own (NOT_FOUND): its
		// position is shown without the total.
		if v, err := d.deps.Vouchers.Voucher(r.Context(), found.VoucherCode); err == nil {
			of = v.TotalLimit
		}
	}
	d.render(w, r, http.StatusOK, components.ReservationPage(d.page(r, "Reservation lookup", ""), orderID, found, of))
}

// optionalInt shows a figure for a form field; 0 (none) is empty.
func optionalInt(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// optionalAmount shows an optional amount for a form field in the
// currency's units; nil is empty.
func optionalAmount(n *int64, currency string) string {
	if n == nil {
		return ""
	}
	return components.FormatAmount(*n, currency)
}

// extendForm shows the form to move a live voucher's end later or change
// its total, filled with what it is now, in the reader's zone.
func (d *dashboard) extendForm(w http.ResponseWriter, r *http.Request) {
	o, err := d.deps.Vouchers.Voucher(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if o.State == voucher.StateEnded {
		d.problem(w, r, http.StatusConflict, "Too late to extend", "Voucher "+o.Code+" has ended; an ended voucher cannot be extended.")
		return
	}
	zone := zoneOf(r)
	d.renderExtend(w, r, http.StatusOK, components.ExtendForm{
		Voucher:    o.Voucher,
		EndsAt:     o.EndsAt.In(zone).Format(components.DateTimeLocal),
		TotalLimit: strconv.Itoa(o.TotalLimit),
		Zone:       zone.String(),
		Errors:     map[string]string{},
	})
}

func (d *dashboard) renderExtend(w http.ResponseWriter, r *http.Request, status int, f components.ExtendForm) {
	d.render(w, r, status, components.ExtendPage(d.page(r, "Extend "+f.Voucher.Code, "vouchers"), f))
}

// extendVoucher saves the extension: only the fields that differ from what
// the form showed are sent, so an end shown to the minute is not taken for
// one moved earlier.
func (d *dashboard) extendVoucher(w http.ResponseWriter, r *http.Request) {
	o, err := d.deps.Vouchers.Voucher(r.Context(), r.PathValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	f := components.ExtendForm{
		Voucher:    o.Voucher,
		EndsAt:     r.PostFormValue("endsAt"),
		TotalLimit: strings.TrimSpace(r.PostFormValue("totalLimit")),
		Zone:       r.PostFormValue("tz"),
		Errors:     map[string]string{},
	}
	zone, ok := loadZone(f.Zone)
	if !ok {
		f.Errors["tz"] = "Choose a time zone from the list"
		zone = time.UTC
	}
	var x voucher.VoucherExtension
	if f.EndsAt != o.EndsAt.In(zone).Format(components.DateTimeLocal) {
		end, err := time.ParseInLocation(components.DateTimeLocal, f.EndsAt, zone)
		if err != nil {
			f.Errors["endsAt"] = "End must be a date and time"
		}
		x.EndsAt = &end
	}
	if f.TotalLimit != strconv.Itoa(o.TotalLimit) {
		total, err := strconv.ParseInt(strings.ReplaceAll(f.TotalLimit, "_", ""), 10, 32)
		if err != nil {
			f.Errors["totalLimit"] = "Total uses must be a whole number, at least 1 and at most 2147483647"
		}
		n := int(total) // parsed as 32 bits: it fits
		x.TotalLimit = &n
	}
	if len(f.Errors) == 0 && x.EndsAt == nil && x.TotalLimit == nil {
		f.Errors["endsAt"] = "Move the end later or change the total: nothing was changed"
	}
	if len(f.Errors) > 0 {
		d.renderExtend(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	v, err := d.deps.Vouchers.ExtendVoucher(r.Context(), o.Code, x)
	switch e := voucher.AsError(err); {
	case err == nil:
		http.Redirect(w, r, "/admin/vouchers/"+url.PathEscape(v.Code)+"?notice=extended", http.StatusSeeOther)
	case e.Code == voucher.InvalidInput && (e.Field == "endsAt" || e.Field == "totalLimit"):
		f.Errors[e.Field] = inLabels(extendWords(e.Message))
		d.renderExtend(w, r, http.StatusUnprocessableEntity, f)
	case e.Code == voucher.VoucherNotLive:
		f.Form = "This voucher has ended, so it can no longer be extended."
		d.renderExtend(w, r, http.StatusUnprocessableEntity, f)
	default:
		d.fail(w, r, err)
	}
}

// extendWords says an extension's refusal for people: "use(s)" as uses.
func extendWords(message string) string {
	return strings.ReplaceAll(message, "use(s)", "uses")
}
