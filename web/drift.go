package web

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"voucherd/internal/voucher"
	"voucherd/web/components"
)

func (d *dashboard) driftPage(w http.ResponseWriter, r *http.Request) {
	view, ok := d.driftView(w, r)
	if !ok {
		return
	}
	d.render(w, r, http.StatusOK, components.DriftPage(d.page(r, "Drift", "drift"), view))
}

// driftLive is the fragment the drift page polls.
func (d *dashboard) driftLive(w http.ResponseWriter, r *http.Request) {
	view, ok := d.driftView(w, r)
	if !ok {
		return
	}
	d.render(w, r, http.StatusOK, components.DriftLive(zoneOf(r), view))
}

// driftView reads the drift page's data; on a failure it has answered.
func (d *dashboard) driftView(w http.ResponseWriter, r *http.Request) (components.DriftView, bool) {
	reports, err := d.deps.Drift.DriftReports(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return components.DriftView{}, false
	}
	view := components.DriftView{Reports: reports, At: d.cfg.Now()}
	if view.Operations, err = d.deps.Drift.OperationAudit(r.Context()); err != nil {
		d.fail(w, r, err)
		return components.DriftView{}, false
	}
	// Flash vouchers never reconciled yet still get a row (and a rebuild).
	flash, err := d.deps.Vouchers.ListVouchers(r.Context(), voucher.VoucherFilter{FlashOnly: true, Limit: 500})
	if err != nil {
		d.fail(w, r, err)
		return components.DriftView{}, false
	}
	for _, v := range flash {
		if !slices.ContainsFunc(reports, func(rep voucher.DriftReport) bool { return rep.VoucherCode == v.Code }) {
			view.Unreconciled = append(view.Unreconciled, v.Code)
		}
	}
	if d.deps.DeadLetters != nil {
		n, err := d.deps.DeadLetters.DeadLetterCount(r.Context())
		if err != nil {
			d.logger.ErrorContext(r.Context(), "counting dead-lettered events failed", "err", err)
			view.DeadLettersError = true
		} else {
			view.DeadLetters = &n
		}
	}
	return view, true
}

func (d *dashboard) confirmReconcile(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, http.StatusOK, components.Confirm(d.page(r, "Reconcile now", "drift"), components.ConfirmAction{
		Title:    "Reconcile every flash voucher now?",
		Question: "This runs the reconciliation pass that otherwise runs every interval.",
		Effects:  components.ReconcileEffects,
		Action:   "/admin/drift/reconcile",
		Button:   "Reconcile now",
		Cancel:   "/admin/drift",
	}))
}

func (d *dashboard) reconcile(w http.ResponseWriter, r *http.Request) {
	if _, err := d.deps.Drift.Reconcile(r.Context()); err != nil {
		d.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/drift?notice=reconciled", http.StatusSeeOther)
}

func (d *dashboard) confirmRebuild(w http.ResponseWriter, r *http.Request) {
	code, title := r.PathValue("code"), ""
	if id, ok := voucher.CampaignOfGate(code); ok {
		// A flash campaign's gate is named after its campaign (~C<id>), a
		// name no one can type as a code.
		title = "Rebuild the gate of campaign " + strconv.FormatInt(id, 10) + " from the database?"
	} else {
		c, err := voucher.CanonicalCode(code)
		if err != nil {
			d.problem(w, r, http.StatusNotFound, "Not found", "There is no voucher with that code.")
			return
		}
		code, title = c, "Rebuild the gate of "+c+" from the database?"
	}
	d.render(w, r, http.StatusOK, components.Confirm(d.page(r, "Rebuild gate", "drift"), components.ConfirmAction{
		Title:    title,
		Question: "The database is the truth; the gate is made to agree with it.",
		Effects:  components.RebuildEffects(code),
		Action:   "/admin/drift/" + url.PathEscape(code) + "/rebuild",
		Button:   "Rebuild gate",
		Cancel:   "/admin/drift",
		Danger:   true,
	}))
}

func (d *dashboard) rebuild(w http.ResponseWriter, r *http.Request) {
	if err := d.deps.Drift.RebuildGate(r.Context(), r.PathValue("code")); err != nil {
		d.fail(w, r, err)
		return
	}
	// A pass right after, so the page shows whether the gate now agrees (an
	// alert clears when a pass agrees) instead of the report from before.
	if _, err := d.deps.Drift.Reconcile(r.Context()); err != nil {
		d.logger.WarnContext(r.Context(), "the reconciliation pass after a rebuild failed", "err", err)
	}
	http.Redirect(w, r, "/admin/drift?notice=rebuilt", http.StatusSeeOther)
}
