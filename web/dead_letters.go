package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// DeadLetterDesk is what the dead letters page calls (voucher.Backoffice:
// its actions are audited).
type DeadLetterDesk interface {
	OpenDeadLetters(ctx context.Context) ([]voucher.DeadLetter, error)
	DeadLetter(ctx context.Context, id int64) (voucher.DeadLetter, error)
	ApplyDeadLetter(ctx context.Context, id int64) (voucher.DeadLetterOutcome, error)
	DiscardDeadLetter(ctx context.Context, id int64) (voucher.DeadLetter, error)
	AppliesEvents() bool
}

func (d *dashboard) deadLettersPage(w http.ResponseWriter, r *http.Request) {
	desk := d.deps.DeadLetterDesk
	if desk == nil {
		d.problem(w, r, http.StatusNotFound, "Not found", "This build keeps no dead letters.")
		return
	}
	open, err := desk.OpenDeadLetters(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	ops, err := d.deps.Drift.OperationAudit(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	actions := slices.DeleteFunc(ops, func(e voucher.AuditEvent) bool {
		switch e.Action {
		case voucher.AuditDeadLetterApplied, voucher.AuditDeadLetterRefused, voucher.AuditDeadLetterDiscarded:
			return false
		}
		return true
	})
	d.render(w, r, http.StatusOK, components.DeadLettersPage(d.page(r, "Dead letters", "dead-letters"),
		components.DeadLettersView{Open: open, Actions: actions, Applies: desk.AppliesEvents()}))
}

// deadLetterOf reads the dead letter of the path's id; on a failure it has
// answered.
func (d *dashboard) deadLetterOf(w http.ResponseWriter, r *http.Request) (voucher.DeadLetter, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 || d.deps.DeadLetterDesk == nil {
		d.problem(w, r, http.StatusNotFound, "Not found", "There is no such dead letter.")
		return voucher.DeadLetter{}, false
	}
	dl, err := d.deps.DeadLetterDesk.DeadLetter(r.Context(), id)
	if err != nil {
		d.fail(w, r, err)
		return voucher.DeadLetter{}, false
	}
	return dl, true
}

func (d *dashboard) confirmApplyDeadLetter(w http.ResponseWriter, r *http.Request) {
	dl, ok := d.deadLetterOf(w, r)
	if !ok {
		return
	}
	id := strconv.FormatInt(dl.ID, 10)
	d.render(w, r, http.StatusOK, components.Confirm(d.page(r, "Apply dead letter #"+id+" again", "dead-letters"), components.ConfirmAction{
		Title:    "Apply dead letter #" + id + " again?",
		Question: deadLetterQuestion(r, dl),
		Effects:  components.ApplyAgainEffects(dl),
		Action:   "/admin/dead-letters/" + id + "/apply",
		Button:   "Apply again",
		Cancel:   "/admin/dead-letters",
	}))
}

func (d *dashboard) applyDeadLetter(w http.ResponseWriter, r *http.Request) {
	dl, ok := d.deadLetterOf(w, r)
	if !ok {
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/admin/dead-letters/"+strconv.FormatInt(dl.ID, 10)+"/apply", http.StatusSeeOther)
		return
	}
	out, err := d.deps.DeadLetterDesk.ApplyDeadLetter(r.Context(), dl.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	notice := "dl-applied"
	if !out.Applied {
		notice = "dl-refused"
	}
	http.Redirect(w, r, "/admin/dead-letters?notice="+notice, http.StatusSeeOther)
}

func (d *dashboard) confirmDiscardDeadLetter(w http.ResponseWriter, r *http.Request) {
	dl, ok := d.deadLetterOf(w, r)
	if !ok {
		return
	}
	id := strconv.FormatInt(dl.ID, 10)
	d.render(w, r, http.StatusOK, components.Confirm(d.page(r, "Discard dead letter #"+id, "dead-letters"), components.ConfirmAction{
		Title:    "Discard dead letter #" + id + "?",
		Question: deadLetterQuestion(r, dl),
		Effects:  components.DiscardEffects(dl),
		Action:   "/admin/dead-letters/" + id + "/discard",
		Button:   "Discard",
		Cancel:   "/admin/dead-letters",
		Danger:   true,
	}))
}

func (d *dashboard) discardDeadLetter(w http.ResponseWriter, r *http.Request) {
	dl, ok := d.deadLetterOf(w, r)
	if !ok {
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/admin/dead-letters/"+strconv.FormatInt(dl.ID, 10)+"/discard", http.StatusSeeOther)
		return
	}
	if _, err := d.deps.DeadLetterDesk.DiscardDeadLetter(r.Context(), dl.ID); err != nil {
		d.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/dead-letters?notice=dl-discarded", http.StatusSeeOther)
}

// deadLetterQuestion names the event a confirmation is about.
func deadLetterQuestion(r *http.Request, dl voucher.DeadLetter) string {
	q := "A " + dl.Kind + " event"
	if dl.OrderID != "" {
		q += " of order " + dl.OrderID
	}
	if dl.VoucherCode != "" {
		q += " on voucher " + dl.VoucherCode
	}
	return q + ", dead-lettered " + components.When(dl.CreatedAt, zoneOf(r)) + "."
}
