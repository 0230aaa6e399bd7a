package graph

import (
	"context"
	"voucherd/graph/model"
)

// Sale is the resolver for the sale field.
func (r *voucherResolver) Sale(ctx context.Context, obj *model.Voucher) (*model.SaleReport, error) {
	s, err := r.Service.Sale(ctx, obj.Code)
	if err != nil {
		return nil, err
	}
	return toSaleReport(s), nil
}
