package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// Campaigns is what the campaign pages call (voucher.Backoffice: a
// creation is audited).
type Campaigns interface {
	Campaigns(ctx context.Context, first int, after string) (voucher.CampaignPage, error)
	CampaignActivity(ctx context.Context, id int64) (voucher.CampaignActivity, error)
	CampaignFigures(ctx context.Context, id int64) (voucher.CampaignFigures, error)
	CreateCampaign(ctx context.Context, n voucher.NewCampaign) (voucher.Campaign, error)
	LookUpCampaignCode(ctx context.Context, id int64, code string) (voucher.CodeLookup, error)
}

// campaignRoutes adds the campaign pages when the dashboard has campaigns.
func (d *dashboard) campaignRoutes(signedIn func(pattern string, op voucher.Operation, h http.HandlerFunc)) {
	if d.deps.Campaigns == nil {
		return
	}
	signedIn("GET /admin/campaigns", voucher.OpReadCampaigns, d.campaignList)
	signedIn("GET /admin/campaigns/new", voucher.OpManageVoucher, d.newCampaign)
	signedIn("POST /admin/campaigns", voucher.OpManageVoucher, d.createCampaign)
	signedIn("GET /admin/campaigns/{id}", voucher.OpReadCampaigns, d.campaignPage)
	signedIn("GET /admin/campaigns/{id}/live", voucher.OpReadCampaigns, d.campaignLive)
	signedIn("GET /admin/campaigns/{id}/code", voucher.OpReadCampaigns, d.campaignCode)
}

// campaignListSize is how many campaigns a page of the list shows.
const campaignListSize = 50

func (d *dashboard) campaignList(w http.ResponseWriter, r *http.Request) {
	after := r.URL.Query().Get("after")
	page, err := d.deps.Campaigns.Campaigns(r.Context(), campaignListSize, after)
	if voucher.ErrorCodeOf(err) == voucher.InvalidInput {
		d.problem(w, r, http.StatusBadRequest, "No such page", "That page of campaigns is not one the dashboard links to. Start from the first page.")
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, components.CampaignList(d.page(r, "Campaigns", "campaigns"), page, after != ""))
}

// campaignID reads the {id} of a campaign route; an id that cannot be one
// is a campaign that does not exist.
func (d *dashboard) campaignID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := voucher.ParseCampaignID(r.PathValue("id"))
	if err != nil {
		d.fail(w, r, err)
		return 0, false
	}
	return id, true
}

// campaignPage is a campaign's page; ?code= shows a code looked up (the
// lookup without script).
func (d *dashboard) campaignPage(w http.ResponseWriter, r *http.Request) {
	id, ok := d.campaignID(w, r)
	if !ok {
		return
	}
	a, err := d.deps.Campaigns.CampaignActivity(r.Context(), id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	lookup, ok := d.lookUp(w, r, id)
	if !ok {
		return
	}
	d.render(w, r, http.StatusOK, components.CampaignPage(d.page(r, a.Name, "campaigns"), a, lookup, d.cfg.Now()))
}

// campaignLive is the fragment the campaign page polls: its status, progress
// and figures, swapped in place; shown is the status the page shows, so the
// parts that change with it (the export) are sent only when it changed.
func (d *dashboard) campaignLive(w http.ResponseWriter, r *http.Request) {
	id, ok := d.campaignID(w, r)
	if !ok {
		return
	}
	f, err := d.deps.Campaigns.CampaignFigures(r.Context(), id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := d.page(r, f.Name, "campaigns")
	shown := voucher.CampaignStatus(r.URL.Query().Get("shown"))
	d.render(w, r, http.StatusOK, components.CampaignLive(p, f, shown != f.Status, d.cfg.Now()))
}

// campaignCode is the fragment of the code lookup.
func (d *dashboard) campaignCode(w http.ResponseWriter, r *http.Request) {
	id, ok := d.campaignID(w, r)
	if !ok {
		return
	}
	lookup, ok := d.lookUp(w, r, id)
	if !ok {
		return
	}
	d.render(w, r, http.StatusOK, components.CodeResult(lookup))
}

// lookUp looks up the ?code= of a request on campaign id; no code is no
// lookup.
func (d *dashboard) lookUp(w http.ResponseWriter, r *http.Request, id int64) (components.CodeLookup, bool) {
	typed := strings.TrimSpace(r.URL.Query().Get("code"))
	if typed == "" {
		return components.CodeLookup{}, true
	}
	if r := []rune(typed); len(r) > 64 { // no code is that long; the page repeats what was typed
		typed = string(r[:64])
	}
	found, err := d.deps.Campaigns.LookUpCampaignCode(r.Context(), id, typed)
	if err != nil {
		d.fail(w, r, err)
		return components.CodeLookup{}, false
	}
	return components.CodeLookup{Typed: typed, CodeLookup: found}, true
}

func (d *dashboard) newCampaign(w http.ResponseWriter, r *http.Request) {
	f := components.CampaignForm{
		VoucherForm: components.VoucherForm{PerUserLimit: "1", MinOrderAmount: "0", DefaultCurrency: d.cfg.DefaultCurrency},
		CodeLength:  "10", UsesPerCode: "1",
	}
	if zone := zoneOf(r); zone != time.UTC {
		f.Zone = zone.String()
	}
	d.renderCampaignForm(w, r, http.StatusOK, f)
}

func (d *dashboard) renderCampaignForm(w http.ResponseWriter, r *http.Request, status int, f components.CampaignForm) {
	d.render(w, r, status, components.CampaignFormPage(d.page(r, "New campaign", "campaigns"), f, d.preview(f.StartsAt, f.EndsAt, f.Zone)))
}

// campaignForm reads the new-campaign form: the terms as the voucher form
// reads them (amounts in the currency's units), and the campaign's own
// fields; every message in the form's words.
func campaignForm(r *http.Request, defaultCurrency string) (components.CampaignForm, voucher.NewCampaign) {
	terms, nv := voucherForm(r, defaultCurrency)
	// A campaign has no code of its own, and its limits are read below.
	for _, k := range []string{"code", "totalLimit", "perUserLimit"} {
		delete(terms.Errors, k)
	}
	f := components.CampaignForm{
		VoucherForm: terms,
		Name:        strings.TrimSpace(r.PostFormValue("name")),
		CodeCount:   strings.TrimSpace(r.PostFormValue("codeCount")),
		CodePrefix:  strings.TrimSpace(r.PostFormValue("codePrefix")),
		CodeLength:  strings.TrimSpace(r.PostFormValue("codeLength")),
		UsesPerCode: strings.TrimSpace(r.PostFormValue("usesPerCode")),
	}
	n := voucher.NewCampaign{Name: f.Name, CodePrefix: f.CodePrefix, Terms: nv}
	parseErrs := map[string]string{}
	whole := func(field, raw, message string) int {
		v, err := strconv.ParseInt(strings.ReplaceAll(raw, "_", ""), 10, 32)
		if err != nil {
			parseErrs[field] = message
		}
		return int(v) // parsed as 32 bits: it fits
	}
	n.CodeCount = whole("codeCount", strings.ReplaceAll(f.CodeCount, " ", ""), "codeCount must be a whole number from 1 to 1000000")
	n.CodeLength = whole("codeLength", f.CodeLength, "codeLength must be a whole number from 6 to 16")
	n.UsesPerCode = whole("usesPerCode", f.UsesPerCode, "usesPerCode must be a whole number, at least 1 and at most 2147483647")
	n.PerUserLimit = whole("perUserLimit", f.PerUserLimit, "perUserLimit must be a whole number, at least 1 and at most 2147483647")
	if f.TotalLimit != "" { // empty: every use of every code
		total := whole("totalLimit", f.TotalLimit, "totalLimit must be empty or a whole number, at least 1 and at most 2147483647")
		n.TotalLimit = &total
	}
	for k, v := range n.FieldErrors() {
		if campaignField[k] {
			f.Errors[k] = campaignWords(k, v)
		}
	}
	for k, v := range parseErrs {
		f.Errors[k] = campaignWords(k, v)
	}
	return f, n
}

// campaignField names the fields of a campaign that are not a voucher's
// terms: the terms' messages come from the voucher form.
var campaignField = map[string]bool{
	"name": true, "codeCount": true, "codePrefix": true, "codeLength": true,
	"usesPerCode": true, "totalLimit": true, "perUserLimit": true,
}

// campaignLabels are the campaign form's labels of the contract's names.
var campaignLabels = strings.NewReplacer(
	"codeCount", "number of codes",
	"codePrefix", "prefix",
	"codeLength", "code length",
	"usesPerCode", "uses per code",
	"totalLimit", "total uses",
	"perUserLimit", "uses per customer",
)

// campaignWords says a message about field in the form's words: "codeCount
// must be 1-1000000" becomes "Number of codes must be 1-1000000".
func campaignWords(field, message string) string {
	if field == "name" && strings.HasPrefix(message, "name ") {
		message = "Name " + strings.TrimPrefix(message, "name ")
	}
	return inLabels(campaignLabels.Replace(message))
}

func (d *dashboard) createCampaign(w http.ResponseWriter, r *http.Request) {
	f, n := campaignForm(r, d.cfg.DefaultCurrency)
	if len(f.Errors) > 0 {
		d.renderCampaignForm(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	c, err := d.deps.Campaigns.CreateCampaign(r.Context(), n)
	if err != nil {
		e := voucher.AsError(err)
		if e.Code != voucher.InvalidInput {
			d.fail(w, r, err)
			return
		}
		if components.CampaignFormFields[e.Field] {
			f.Errors[e.Field] = campaignWords(e.Field, e.Message)
		} else {
			f.Form = campaignWords(e.Field, e.Message)
		}
		d.renderCampaignForm(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	http.Redirect(w, r, "/admin/campaigns/"+strconv.FormatInt(c.ID, 10)+"?notice=campaign-created", http.StatusSeeOther)
}
