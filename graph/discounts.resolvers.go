package graph

import (
	"context"
	"voucherd/graph/model"
	"voucherd/internal/voucher"
)

// CheckVoucher is the resolver for the checkVoucher field.
func (r *queryResolver) CheckVoucher(ctx context.Context, input model.CheckVoucherInput) (*model.CheckVoucherPayload, error) {
	customerID, err := voucher.ParseCustomerID(input.CustomerID)
	if err == nil {
		var discount int64
		discount, err = r.Service.CheckVoucher(ctx, voucher.CheckRequest{
			Code:        input.Code,
			CustomerID:  customerID,
			OrderAmount: input.OrderAmount,
			Currency:    deref(input.Currency, ""),
			// Segments and items as given: nil when absent.
			CustomerSegments: input.CustomerSegments,
			Items:            lineItemsOf(input.Items),
		})
		if err == nil {
			return &model.CheckVoucherPayload{DiscountAmount: &discount}, nil
		}
	}
	verr, err := payloadError(err)
	if err != nil {
		return nil, err
	}
	return &model.CheckVoucherPayload{Error: verr}, nil
}
