package graph

import (
	"context"
	"voucherd/graph/model"
)

// RollbackReservation is the resolver for the rollbackReservation field.
func (r *mutationResolver) RollbackReservation(ctx context.Context, input model.RollbackInput) (*model.ReservationPayload, error) {
	return reservationPayload(r.Service.Rollback(ctx, input.Code, input.OrderID, input.Reason))
}
