package graph

import (
	"context"
	"voucherd/graph/generated"
	"voucherd/graph/model"
	"voucherd/internal/voucher"
)

// ReserveVoucher is the resolver for the reserveVoucher field.
func (r *mutationResolver) ReserveVoucher(ctx context.Context, input model.ReserveVoucherInput) (*model.ReservationPayload, error) {
	customerID, err := voucher.ParseCustomerID(input.CustomerID)
	if err != nil {
		return reservationPayload(voucher.Reservation{}, err)
	}
	return reservationPayload(r.Service.Reserve(ctx, voucher.ReserveRequest{
		Code:        input.Code,
		CustomerID:  customerID,
		OrderID:     input.OrderID,
		OrderAmount: input.OrderAmount,
		Currency:    deref(input.Currency, ""),
		// Segments and items as given: nil when absent.
		CustomerSegments: input.CustomerSegments,
		Items:            lineItemsOf(input.Items),
	}))
}

// ConfirmReservation is the resolver for the confirmReservation field.
func (r *mutationResolver) ConfirmReservation(ctx context.Context, input model.ReservationInput) (*model.ReservationPayload, error) {
	return reservationPayload(r.Service.Confirm(ctx, input.Code, input.OrderID))
}

// ReleaseReservation is the resolver for the releaseReservation field.
func (r *mutationResolver) ReleaseReservation(ctx context.Context, input model.ReservationInput) (*model.ReservationPayload, error) {
	return reservationPayload(r.Service.Release(ctx, input.Code, input.OrderID))
}

// CreateVoucher is the resolver for the createVoucher field.
func (r *mutationResolver) CreateVoucher(ctx context.Context, input model.CreateVoucherInput) (*model.VoucherPayload, error) {
	create := r.Service.CreateVoucher
	if r.Backoffice != nil {
		create = r.Backoffice.CreateVoucher // the same, and audited with who did it
	}
	return voucherPayload(create(ctx, voucher.NewVoucher{
		Code:              input.Code,
		DiscountType:      voucher.DiscountType(deref(input.DiscountType, model.DiscountTypeFixed)),
		DiscountAmount:    input.DiscountAmount,
		DiscountPercent:   deref(input.DiscountPercent, 0),
		MaxDiscountAmount: input.MaxDiscountAmount,
		Currency:          deref(input.Currency, ""),
		BudgetAmount:      input.BudgetAmount,
		MinOrderAmount:    deref(input.MinOrderAmount, 0),
		TotalLimit:        input.TotalLimit,
		PerUserLimit:      deref(input.PerUserLimit, 1),
		StartsAt:          input.StartsAt,
		EndsAt:            input.EndsAt,
		Flash:             deref(input.Flash, false),
		Restrictions:      restrictionsOf(input.PeriodLimits, input.TimeZone, input.EligibleSegments, input.AppliesTo),
	}))
}

// Voucher is the resolver for the voucher field.
func (r *queryResolver) Voucher(ctx context.Context, code string) (*model.Voucher, error) {
	v, err := r.Service.Voucher(ctx, code)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return toVoucher(v), nil
}

// Vouchers is the resolver for the vouchers field.
func (r *queryResolver) Vouchers(ctx context.Context, first *int, after *string) (*model.VoucherConnection, error) {
	page, err := r.Service.Vouchers(ctx, deref(first, 50), deref(after, ""))
	if err != nil {
		return nil, err
	}
	conn := &model.VoucherConnection{Edges: []*model.VoucherEdge{}, PageInfo: &model.PageInfo{HasNextPage: page.HasNext}}
	for i, v := range page.Vouchers {
		conn.Edges = append(conn.Edges, &model.VoucherEdge{Cursor: page.Cursors[i], Node: toVoucher(v)})
	}
	if page.EndCursor != "" {
		conn.PageInfo.EndCursor = &page.EndCursor
	}
	return conn, nil
}

// Reservation is the resolver for the reservation field.
func (r *queryResolver) Reservation(ctx context.Context, orderID string) (*model.Reservation, error) {
	res, err := r.Service.Reservation(ctx, orderID)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return toReservation(res), nil
}

// DriftReports is the resolver for the driftReports field.
func (r *queryResolver) DriftReports(ctx context.Context) ([]*model.DriftReport, error) {
	reports, err := r.Service.DriftReports(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*model.DriftReport, 0, len(reports))
	for _, d := range reports {
		out = append(out, toDriftReport(d))
	}
	return out, nil
}

// GateRemaining is the resolver for the gateRemaining field.
func (r *voucherResolver) GateRemaining(ctx context.Context, obj *model.Voucher) (*int, error) {
	n, ok, err := r.Service.GateRemaining(ctx, voucher.Voucher{Code: obj.Code, Flash: obj.Flash})
	if err != nil || !ok {
		return nil, err
	}
	return &n, nil
}

// Message is the resolver for the message field.
func (r *voucherErrorResolver) Message(ctx context.Context, obj *model.VoucherError) (string, error) {
	return publicMessage(obj, r.Production), nil
}

// Mutation returns generated.MutationResolver implementation.
func (r *Resolver) Mutation() generated.MutationResolver { return &mutationResolver{r} }

// Query returns generated.QueryResolver implementation.
func (r *Resolver) Query() generated.QueryResolver { return &queryResolver{r} }

// Voucher returns generated.VoucherResolver implementation.
func (r *Resolver) Voucher() generated.VoucherResolver { return &voucherResolver{r} }

// VoucherError returns generated.VoucherErrorResolver implementation.
func (r *Resolver) VoucherError() generated.VoucherErrorResolver { return &voucherErrorResolver{r} }

type (
	mutationResolver     struct{ *Resolver }
	queryResolver        struct{ *Resolver }
	voucherResolver      struct{ *Resolver }
	voucherErrorResolver struct{ *Resolver }
)
