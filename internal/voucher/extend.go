package voucher

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// AuditExtended is the audit action of a total raised or an end moved later.
const AuditExtended = "extended"

// VoucherExtension is a change of a voucher whose window has not closed,
// the only change a voucher takes once it has started: nil fields keep
// their value.
//
// The rules (CheckExtension): EndsAt may only move later. TotalLimit may go
// up, and for an ordinary voucher down too, but never below what is held
// (usedCount: RESERVED + CONFIRMED). A flash voucher's total only goes up:
// in kafka mode its gate answers reserves before the database has written
// them, so the database's count of what is held may be behind what was
// already promised, and a lower total could refuse uses answered as sold.
type VoucherExtension struct {
	EndsAt     *time.Time
	TotalLimit *int
}

// CheckExtension says why a voucher as it is at now cannot take a total and
// an end; nil when it can. The store's conditional update decides the same
// rules; this names the one broken.
func CheckExtension(v Voucher, totalLimit int, endsAt, now time.Time) error {
	switch {
	case !now.Before(v.EndsAt):
		return Errorf(VoucherNotLive, "voucher %s has ended; an ended voucher cannot be extended", v.Code)
	case totalLimit < 1 || totalLimit > MaxLimit:
		return Invalid("totalLimit", "totalLimit must be at least 1 and at most 2147483647")
	case endsAt.Before(v.EndsAt):
		return Invalid("endsAt", fmt.Sprintf("endsAt may only move later than the current end, %s", stamp(v.EndsAt)))
	case totalLimit < v.UsedCount:
		return Invalid("totalLimit", fmt.Sprintf("totalLimit is below the %d use(s) already held or sold; it must be at least %d", v.UsedCount, v.UsedCount))
	case v.Flash && totalLimit < v.TotalLimit:
		return Invalid("totalLimit", fmt.Sprintf("totalLimit of a flash voucher may only go up, from %d", v.TotalLimit))
	}
	return nil
}

// ExtendVoucher raises a voucher's total, or lowers it to no less than what
// is held (not for a flash voucher), or moves its end later, while its window
// has not closed; recorded in the audit log with who did it and the old and
// new values, in the transaction of the change. A flash voucher's gate
// follows: its stock gets exactly the difference (atomically), its window
// and expiry move. Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND,
// VOUCHER_NOT_LIVE.
func (b *Backoffice) ExtendVoucher(ctx context.Context, code string, x VoucherExtension) (Voucher, error) {
	if err := authorize(ctx, OpManageVoucher); err != nil {
		return Voucher{}, err
	}
	if x.EndsAt == nil && x.TotalLimit == nil {
		return Voucher{}, Invalid("endsAt", "give a new endsAt, a new totalLimit or both")
	}
	before, err := b.svc.Voucher(ctx, code)
	if err != nil {
		return Voucher{}, err
	}
	code = before.Code // the stored form
	total, ends := before.TotalLimit, before.EndsAt
	set(&total, x.TotalLimit)
	set(&ends, x.EndsAt)
	// A first answer from what was read; the database decides again.
	if err := CheckExtension(before, total, ends, b.now()); err != nil {
		return Voucher{}, err
	}
	if total == before.TotalLimit && ends.Equal(before.EndsAt) {
		return before, nil // nothing changed: nothing to record
	}
	old, after, err := b.store.ExtendVoucher(ctx, code, total, ends, func(old, after Voucher) AuditEvent {
		return auditOf(ctx, code, AuditExtended, describeExtension(old, after))
	})
	if err != nil {
		return Voucher{}, err
	}
	b.svc.extended(ctx, old, after)
	return after, nil
}

// extended makes the service follow a voucher just extended in the
// database: this instance's cached terms go (the flash path checks the window
// on them; other instances' lapse within MetadataTTL), and a flash voucher's
// gate moves. A gate that fails to follow is logged: it undersells (the
// stock too low, or the window closing at the old end in kafka mode) until
// reconciliation rebuilds it (a drift below the database for two passes, or
// terms that differ); it never oversells.
func (s *Service) extended(ctx context.Context, old, after Voucher) {
	s.meta.forget(after.Code)
	if !after.Flash || s.gate == nil {
		return
	}
	ctx = context.WithoutCancel(ctx) // the database has committed: the gate is owed the change
	_, err := s.gate.Extend(ctx, GateExtension{
		Code: after.Code, OldTotal: old.TotalLimit, NewTotal: after.TotalLimit,
		OldEndsAt: old.EndsAt, NewEndsAt: after.EndsAt, ExpireAt: GateExpireAt(after.EndsAt),
	})
	if err != nil {
		s.logger.ErrorContext(ctx, "the gate did not follow an extended voucher; rebuild it", "code", after.Code, "err", err)
		return
	}
	if after.TotalLimit > old.TotalLimit {
		// New uses to sell: every instance drops its sold-out snapshot.
		s.soldOut.forget(after.Code)
		if err := s.gate.AnnounceReleased(ctx, after.Code); err != nil {
			s.logger.WarnContext(ctx, "extension not announced to the other instances", "code", after.Code, "err", err)
		}
	}
}

// describeExtension says what an extension changed, old → new.
func describeExtension(old, after Voucher) string {
	var parts []string
	if old.TotalLimit != after.TotalLimit {
		parts = append(parts, fmt.Sprintf("totalLimit %d → %d", old.TotalLimit, after.TotalLimit))
	}
	if !old.EndsAt.Equal(after.EndsAt) {
		parts = append(parts, fmt.Sprintf("endsAt %s → %s", stamp(old.EndsAt), stamp(after.EndsAt)))
	}
	return strings.Join(parts, "; ")
}

// forget drops a voucher's cached terms, so the next read is the database's.
func (c *metadataCache) forget(code string) {
	c.mu.Lock()
	delete(c.m, code)
	c.mu.Unlock()
}

// AuditDuplicated is the audit action of a voucher created as a copy of
// another's terms.
const AuditDuplicated = "duplicated"

// DuplicateVoucher creates a voucher from the terms given (the dashboard
// fills them from the voucher from, and the marketer gives the new code and
// window), as CreateVoucher does, and records who did it and that it was
// duplicated from that voucher. Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND
// (from), VOUCHER_EXISTS.
func (b *Backoffice) DuplicateVoucher(ctx context.Context, from string, n NewVoucher) (Voucher, error) {
	if err := authorize(ctx, OpManageVoucher); err != nil {
		return Voucher{}, err
	}
	source, err := b.svc.Voucher(ctx, from)
	if err != nil {
		return Voucher{}, err
	}
	v, err := b.svc.CreateVoucher(ctx, n)
	if err != nil {
		return Voucher{}, err
	}
	// As CreateVoucher's: the audit row follows in its own transaction.
	detail := "duplicated from " + source.Code + "; " + describeTerms(v)
	if err := b.store.AddAuditEvent(ctx, auditOf(ctx, v.Code, AuditDuplicated, detail)); err != nil {
		b.svc.logger.ErrorContext(ctx, "could not record a voucher's duplication", "code", v.Code, "from", source.Code, "err", err)
	}
	return v, nil
}
