package graph

import (
	"context"
	"voucherd/graph/model"
	"voucherd/internal/voucher"
)

// CreateCampaign is the resolver for the createCampaign field.
func (r *mutationResolver) CreateCampaign(ctx context.Context, input model.CreateCampaignInput) (*model.CampaignPayload, error) {
	create := r.Service.CreateCampaign
	if r.Backoffice != nil {
		create = r.Backoffice.CreateCampaign // the same, and audited with who did it
	}
	c, err := create(ctx, voucher.NewCampaign{
		Name:         input.Name,
		CodeCount:    input.CodeCount,
		CodePrefix:   deref(input.CodePrefix, ""),
		CodeLength:   deref(input.CodeLength, 10),
		UsesPerCode:  deref(input.UsesPerCode, 1),
		TotalLimit:   input.TotalLimit,
		PerUserLimit: deref(input.PerUserLimit, 1),
		Terms: voucher.NewVoucher{
			DiscountType:      voucher.DiscountType(deref(input.DiscountType, model.DiscountTypeFixed)),
			DiscountAmount:    deref(input.DiscountAmount, 0),
			DiscountPercent:   deref(input.DiscountPercent, 0),
			MaxDiscountAmount: input.MaxDiscountAmount,
			Currency:          deref(input.Currency, ""),
			BudgetAmount:      input.BudgetAmount,
			MinOrderAmount:    deref(input.MinOrderAmount, 0),
			StartsAt:          input.StartsAt,
			EndsAt:            input.EndsAt,
			Flash:             deref(input.Flash, false),
			Restrictions:      restrictionsOf(input.PeriodLimits, input.TimeZone, input.EligibleSegments, input.AppliesTo),
		},
	})
	if err != nil {
		verr, err := payloadError(err)
		if err != nil {
			return nil, err
		}
		return &model.CampaignPayload{Error: verr}, nil
	}
	return &model.CampaignPayload{Campaign: toCampaign(c)}, nil
}

// Campaign is the resolver for the campaign field.
func (r *queryResolver) Campaign(ctx context.Context, id string) (*model.Campaign, error) {
	cid, err := voucher.ParseCampaignID(id)
	if err == nil {
		var c voucher.Campaign
		if c, err = r.Service.Campaign(ctx, cid); err == nil {
			return toCampaign(c), nil
		}
	}
	if isNotFound(err) {
		return nil, nil
	}
	return nil, err
}

// Campaigns is the resolver for the campaigns field.
func (r *queryResolver) Campaigns(ctx context.Context, first *int, after *string) (*model.CampaignConnection, error) {
	page, err := r.Service.Campaigns(ctx, deref(first, 50), deref(after, ""))
	if err != nil {
		return nil, err
	}
	conn := &model.CampaignConnection{Edges: []*model.CampaignEdge{}, PageInfo: &model.PageInfo{HasNextPage: page.HasNext}}
	for i, c := range page.Campaigns {
		conn.Edges = append(conn.Edges, &model.CampaignEdge{Cursor: page.Cursors[i], Node: toCampaign(c)})
	}
	if page.EndCursor != "" {
		conn.PageInfo.EndCursor = &page.EndCursor
	}
	return conn, nil
}

// Campaign is the resolver for the campaign field.
func (r *voucherResolver) Campaign(ctx context.Context, obj *model.Voucher) (*model.Campaign, error) {
	if obj.CampaignID == 0 {
		return nil, nil
	}
	return loadCampaign(ctx, obj.CampaignID, func() (*model.Campaign, error) {
		c, err := r.Service.Campaign(ctx, obj.CampaignID)
		if err != nil {
			return nil, err
		}
		return toCampaign(c), nil
	})
}
