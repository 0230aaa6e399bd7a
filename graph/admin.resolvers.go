package graph

import (
	"context"
	"voucherd/graph/model"
	"voucherd/internal/voucher"
)

// UpdateVoucher is the resolver for the updateVoucher field.
func (r *mutationResolver) UpdateVoucher(ctx context.Context, input model.UpdateVoucherInput) (*model.VoucherPayload, error) {
	if r.Backoffice == nil {
		return nil, errNoBackoffice
	}
	return voucherPayload(r.Backoffice.UpdateVoucher(ctx, input.Code, voucher.VoucherChange{
		Code:              input.NewCode,
		DiscountType:      (*voucher.DiscountType)(input.DiscountType),
		DiscountAmount:    input.DiscountAmount,
		DiscountPercent:   input.DiscountPercent,
		MaxDiscountAmount: input.MaxDiscountAmount,
		Currency:          input.Currency,
		BudgetAmount:      input.BudgetAmount,
		MinOrderAmount:    input.MinOrderAmount,
		TotalLimit:        input.TotalLimit,
		PerUserLimit:      input.PerUserLimit,
		StartsAt:          input.StartsAt,
		EndsAt:            input.EndsAt,
		Flash:             input.Flash,

		ClearMaxDiscountAmount: input.ClearMaxDiscountAmount != nil && *input.ClearMaxDiscountAmount,
		ClearBudgetAmount:      input.ClearBudgetAmount != nil && *input.ClearBudgetAmount,
	}))
}

// EndVoucher is the resolver for the endVoucher field.
func (r *mutationResolver) EndVoucher(ctx context.Context, code string) (*model.VoucherPayload, error) {
	if r.Backoffice == nil {
		return nil, errNoBackoffice
	}
	return voucherPayload(r.Backoffice.EndVoucher(ctx, code))
}

// ExtendVoucher is the resolver for the extendVoucher field.
func (r *mutationResolver) ExtendVoucher(ctx context.Context, input model.ExtendVoucherInput) (*model.VoucherPayload, error) {
	if r.Backoffice == nil {
		return nil, errNoBackoffice
	}
	return voucherPayload(r.Backoffice.ExtendVoucher(ctx, input.Code, voucher.VoucherExtension{
		EndsAt:     input.EndsAt,
		TotalLimit: input.TotalLimit,
	}))
}

// RebuildGate is the resolver for the rebuildGate field.
func (r *mutationResolver) RebuildGate(ctx context.Context, code string) (*model.DriftReportPayload, error) {
	if r.Backoffice == nil {
		return nil, errNoBackoffice
	}
	if err := r.Backoffice.RebuildGate(ctx, code); err != nil {
		return driftReportPayload(voucher.DriftReport{}, err)
	}
	// As the dashboard's Rebuild: a pass right after, whose report says
	// whether the gate now agrees; the rebuild stands if the pass fails.
	d, err := r.Backoffice.ReconcileVoucher(ctx, code)
	if err != nil {
		return &model.DriftReportPayload{}, nil
	}
	return driftReportPayload(d, nil)
}

// ReconcileVoucher is the resolver for the reconcileVoucher field.
func (r *mutationResolver) ReconcileVoucher(ctx context.Context, code string) (*model.DriftReportPayload, error) {
	if r.Backoffice == nil {
		return nil, errNoBackoffice
	}
	return driftReportPayload(r.Backoffice.ReconcileVoucher(ctx, code))
}

// WarmGates is the resolver for the warmGates field.
func (r *mutationResolver) WarmGates(ctx context.Context) (int, error) {
	if r.Backoffice == nil {
		return 0, errNoBackoffice
	}
	return r.Backoffice.WarmGates(ctx)
}
