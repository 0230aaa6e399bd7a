package voucher

import (
	"context"
	"fmt"
	"slices"
)

// The dashboard's campaign pages: the campaigns themselves are the
// service's (campaign.go); the back office adds who created one (the audit
// log, on the campaign's backing voucher row), its page's history and the
// lookup of one of its codes.

// CampaignFigures is a campaign with the counts of its period limits that
// hold uses (all its codes together, latest first): what its page's
// figures show, and refresh.
type CampaignFigures struct {
	Campaign
	PeriodCounts []PeriodCount
}

// CampaignActivity is what the dashboard's campaign page shows: the
// campaign's figures with samples of its remaining uses (across all its
// codes, oldest first) and its audit log (newest first).
type CampaignActivity struct {
	CampaignFigures
	Samples []RemainingSample
	Audit   []AuditEvent
}

// CodeLookup is one code as a campaign's page finds it: Found says it is a
// code of that campaign; Code then has its own uses (its TotalLimit is its
// usesPerCode).
type CodeLookup struct {
	Found bool
	Code  CampaignCode
	// Confirmed is how many of the code's uses are confirmed (the others
	// of Code.Uses are held).
	Confirmed int
}

// CreateCampaign creates a campaign as the service does and records who
// did, as CreateVoucher does for a voucher. Errors: FORBIDDEN,
// INVALID_INPUT.
func (b *Backoffice) CreateCampaign(ctx context.Context, n NewCampaign) (Campaign, error) {
	c, err := b.svc.CreateCampaign(ctx, n)
	if err != nil {
		return Campaign{}, err
	}
	// In its own transaction, after the campaign, as a voucher's: a failure
	// is logged and the campaign stands.
	if err := b.store.AddAuditEvent(ctx, auditOf(ctx, c.Terms.Code, AuditCreated, describeCampaign(c))); err != nil {
		b.svc.logger.ErrorContext(ctx, "could not record a campaign's creation", "campaign", c.ID, "err", err)
	}
	return c, nil
}

// Campaigns lists campaigns newest first (Service.Campaigns). Errors:
// FORBIDDEN, INVALID_INPUT.
func (b *Backoffice) Campaigns(ctx context.Context, first int, after string) (CampaignPage, error) {
	return b.svc.Campaigns(ctx, first, after)
}

// Campaign returns a campaign (Service.Campaign). Errors: FORBIDDEN,
// NOT_FOUND.
func (b *Backoffice) Campaign(ctx context.Context, id int64) (Campaign, error) {
	return b.svc.Campaign(ctx, id)
}

// CampaignFigures returns a campaign with its period counts, as Voucher
// does a voucher's (the counts are its backing row's). Errors: FORBIDDEN,
// NOT_FOUND.
func (b *Backoffice) CampaignFigures(ctx context.Context, id int64) (CampaignFigures, error) {
	c, err := b.svc.Campaign(ctx, id)
	if err != nil {
		return CampaignFigures{}, err
	}
	f := CampaignFigures{Campaign: c}
	if len(c.Terms.PeriodLimits) > 0 {
		if f.PeriodCounts, err = b.store.PeriodCounts(ctx, c.Terms.Code, 20); err != nil {
			return CampaignFigures{}, err
		}
	}
	return f, nil
}

// CampaignActivity returns a campaign's page. Errors: FORBIDDEN, NOT_FOUND.
func (b *Backoffice) CampaignActivity(ctx context.Context, id int64) (CampaignActivity, error) {
	f, err := b.CampaignFigures(ctx, id)
	if err != nil {
		return CampaignActivity{}, err
	}
	c := f.Campaign
	a := CampaignActivity{CampaignFigures: f}
	// The counters of every code are the backing row's: sampled and audited
	// under its code as a voucher's are.
	if a.Samples, err = b.store.RemainingSamples(ctx, c.Terms.Code, ActivitySamples); err != nil {
		return CampaignActivity{}, err
	}
	slices.Reverse(a.Samples)
	if a.Audit, err = b.store.AuditEvents(ctx, c.Terms.Code, ActivityAudit); err != nil {
		return CampaignActivity{}, err
	}
	return a, nil
}

// LookUpCampaignCode finds a code typed on a campaign's page: Found only
// when it is a code of that campaign (not a standalone voucher's, nor
// another campaign's, nor a code that is none). Errors: FORBIDDEN,
// NOT_FOUND (the campaign).
func (b *Backoffice) LookUpCampaignCode(ctx context.Context, id int64, code string) (CodeLookup, error) {
	if _, err := b.svc.Campaign(ctx, id); err != nil {
		return CodeLookup{}, err
	}
	v, err := b.svc.Voucher(ctx, code)
	switch ErrorCodeOf(err) {
	case "":
	case NotFound, InvalidInput: // no such code, or one that cannot be
		return CodeLookup{}, nil
	default:
		return CodeLookup{}, err
	}
	if v.CampaignID != id {
		return CodeLookup{}, nil
	}
	return CodeLookup{Found: true, Code: CampaignCode{Code: v.Code, Uses: v.UsedCount, UseLimit: v.TotalLimit}, Confirmed: v.ConfirmedCount}, nil
}

// describeCampaign is a campaign's creation in the audit log: its own
// fields, then its terms as a voucher's.
func describeCampaign(c Campaign) string {
	return fmt.Sprintf("campaign %q: codeCount %d, codePrefix %q, codeLength %d, usesPerCode %d; %s",
		c.Name, c.CodeCount, c.CodePrefix, c.CodeLength, c.UsesPerCode, describeTerms(c.Terms))
}
