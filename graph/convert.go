package graph

import (
	"errors"
	"strconv"

	"voucherd/graph/model"
	"voucherd/internal/voucher"
)

func toVoucher(v voucher.Voucher) *model.Voucher {
	var percent *int
	if v.DiscountType == voucher.DiscountPercent {
		percent = &v.DiscountPercent
	}
	out := &model.Voucher{
		Code:              v.Code,
		DiscountType:      model.DiscountType(v.DiscountType),
		DiscountAmount:    v.DiscountAmount,
		DiscountPercent:   percent,
		MaxDiscountAmount: v.MaxDiscountAmount,
		Currency:          v.Currency,
		BudgetAmount:      v.BudgetAmount,
		BudgetUsed:        v.BudgetUsed,
		MinOrderAmount:    v.MinOrderAmount,
		TotalLimit:        v.TotalLimit,
		PerUserLimit:      v.PerUserLimit,
		UsedCount:         v.UsedCount,
		ReservedCount:     v.ReservedCount,
		ConfirmedCount:    v.ConfirmedCount,
		RolledBackCount:   v.RolledBackCount,
		Remaining:         v.Remaining(),
		StartsAt:          v.StartsAt,
		EndsAt:            v.EndsAt,
		Flash:             v.Flash,
		CampaignID:        v.CampaignID,
	}
	restrictionFields(out, v.Restrictions)
	return out
}

func toReservation(r voucher.Reservation) *model.Reservation {
	var reason *string
	if r.RollbackReason != "" {
		reason = &r.RollbackReason
	}
	return &model.Reservation{
		OrderID:        r.OrderID,
		VoucherCode:    r.VoucherCode,
		CustomerID:     strconv.FormatInt(r.CustomerID, 10),
		OrderAmount:    r.OrderAmount,
		DiscountAmount: r.DiscountAmount,
		Status:         model.ReservationStatus(r.Status),
		CreatedAt:      r.CreatedAt,
		ExpiresAt:      r.ExpiresAt,
		RolledBackAt:   r.RolledBackAt,
		RollbackReason: reason,
		Position:       r.Position,
	}
}

// publicMessage is a payload error's message as the answer carries it: in
// production without any value of the request (voucher.Error.PublicMessage).
func publicMessage(e *model.VoucherError, production bool) string {
	return (&voucher.Error{Code: voucher.ErrorCode(e.Code), Message: e.Message}).PublicMessage(production)
}

// payloadError turns a refusal into the payload's error; anything else (a
// fault, FORBIDDEN) is returned as a GraphQL error for the presenter.
func payloadError(err error) (*model.VoucherError, error) {
	if !voucher.IsRefusal(err) {
		return nil, err
	}
	e := voucher.AsError(err)
	out := &model.VoucherError{Code: model.VoucherErrorCode(e.Code), Message: e.Message}
	if e.Field != "" {
		out.Field = &e.Field
	}
	if !e.AvailableAt.IsZero() {
		at := e.AvailableAt.UTC()
		out.AvailableAt = &at
	}
	return out, nil
}

func reservationPayload(res voucher.Reservation, err error) (*model.ReservationPayload, error) {
	if err != nil {
		verr, err := payloadError(err)
		if err != nil {
			return nil, err
		}
		return &model.ReservationPayload{Error: verr}, nil
	}
	return &model.ReservationPayload{Reservation: toReservation(res)}, nil
}

func driftReportPayload(d voucher.DriftReport, err error) (*model.DriftReportPayload, error) {
	if err != nil {
		verr, err := payloadError(err)
		if err != nil {
			return nil, err
		}
		return &model.DriftReportPayload{Error: verr}, nil
	}
	return &model.DriftReportPayload{Report: toDriftReport(d)}, nil
}

func voucherPayload(v voucher.Voucher, err error) (*model.VoucherPayload, error) {
	if err != nil {
		verr, err := payloadError(err)
		if err != nil {
			return nil, err
		}
		return &model.VoucherPayload{Error: verr}, nil
	}
	return &model.VoucherPayload{Voucher: toVoucher(v)}, nil
}

func isNotFound(err error) bool {
	var e *voucher.Error
	return errors.As(err, &e) && e.Code == voucher.NotFound
}

func toDriftReport(d voucher.DriftReport) *model.DriftReport {
	return &model.DriftReport{
		VoucherCode:       d.VoucherCode,
		DatabaseRemaining: d.DatabaseRemaining,
		GateRemaining:     d.GateRemaining,
		Drift:             d.Drift,
		CheckedAt:         d.CheckedAt,
		CodesDiffering:    d.CodesDiffering, // nil marshals as [] (gqlgen)
		PeriodsDiffering:  d.PeriodsDiffering,
	}
}

// deref returns *p, or def when p is nil (an omitted optional argument).
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func toCampaign(c voucher.Campaign) *model.Campaign {
	t := c.Terms
	out := &model.Campaign{
		ID:                strconv.FormatInt(c.ID, 10),
		Name:              c.Name,
		Status:            model.CampaignStatus(c.Status),
		CodeCount:         c.CodeCount,
		GeneratedCount:    c.GeneratedCount,
		CodePrefix:        c.CodePrefix,
		CodeLength:        c.CodeLength,
		UsesPerCode:       c.UsesPerCode,
		TotalLimit:        t.TotalLimit,
		PerUserLimit:      t.PerUserLimit,
		UsedCount:         t.UsedCount,
		ReservedCount:     t.ReservedCount,
		ConfirmedCount:    t.ConfirmedCount,
		Remaining:         c.Remaining(),
		DiscountType:      model.DiscountType(t.DiscountType),
		MaxDiscountAmount: t.MaxDiscountAmount,
		MinOrderAmount:    t.MinOrderAmount,
		Currency:          t.Currency,
		BudgetAmount:      t.BudgetAmount,
		BudgetUsed:        t.BudgetUsed,
		StartsAt:          t.StartsAt,
		EndsAt:            t.EndsAt,
		Flash:             t.Flash,
		CreatedAt:         c.CreatedAt,
	}
	if t.DiscountType == voucher.DiscountPercent {
		out.DiscountPercent = &t.DiscountPercent
	} else {
		out.DiscountAmount = &t.DiscountAmount
	}
	if c.Failure != "" {
		out.Failure = &c.Failure
	}
	return out
}

func toSaleReport(s voucher.SaleReport) *model.SaleReport {
	out := &model.SaleReport{
		FirstUseAt: s.FirstUseAt,
		SoldOutAt:  s.SoldOutAt,
		Requests:   int(s.Requests),
		Admitted:   int(s.Admitted),
		Refusals:   make([]*model.RefusalCount, len(s.Refusals)),
		Series:     make([]*model.SaleSecond, len(s.Series)),
	}
	for i, c := range s.Refusals {
		out.Refusals[i] = &model.RefusalCount{Code: model.VoucherErrorCode(c.Code), Count: int(c.Count)}
	}
	for i, e := range s.Series {
		out.Series[i] = &model.SaleSecond{At: e.At, Admitted: int(e.Admitted), Refused: int(e.Refused)}
	}
	return out
}

// restrictionsOf reads the period limits, time zone, segments and appliesTo
// of a voucher's or campaign's input.
func restrictionsOf(limits []*model.PeriodLimitInput, timeZone *string, segments []string, appliesTo *model.AppliesToInput) voucher.Restrictions {
	r := voucher.Restrictions{TimeZone: deref(timeZone, ""), EligibleSegments: segments}
	for _, l := range limits {
		r.PeriodLimits = append(r.PeriodLimits, voucher.PeriodLimit{Scope: voucher.LimitScope(l.Scope), Period: voucher.LimitPeriod(l.Period), Max: l.Max})
	}
	if appliesTo != nil {
		r.AppliesTo = &voucher.AppliesTo{SKUs: appliesTo.Skus, Categories: appliesTo.Categories}
	}
	return r
}

// lineItemsOf reads an order's items; nil when none were given.
func lineItemsOf(items []*model.LineItemInput) []voucher.LineItem {
	if items == nil {
		return nil
	}
	out := make([]voucher.LineItem, len(items))
	for i, it := range items {
		out[i] = voucher.LineItem{SKU: it.Sku, Category: deref(it.Category, ""), Quantity: it.Quantity, UnitAmount: it.UnitAmount}
	}
	return out
}

// restrictionFields fills a voucher's answer with its restrictions.
func restrictionFields(out *model.Voucher, r voucher.Restrictions) {
	out.PeriodLimits = make([]*model.PeriodLimit, len(r.PeriodLimits))
	for i, l := range r.PeriodLimits {
		out.PeriodLimits[i] = &model.PeriodLimit{Scope: model.LimitScope(l.Scope), Period: model.LimitPeriod(l.Period), Max: l.Max}
	}
	out.TimeZone = r.ZoneName()
	out.EligibleSegments = append([]string{}, r.EligibleSegments...)
	if a := r.AppliesTo; a != nil {
		out.AppliesTo = &model.AppliesTo{Skus: append([]string{}, a.SKUs...), Categories: append([]string{}, a.Categories...)}
	}
}
