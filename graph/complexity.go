package graph

import (
	"voucherd/graph/generated"
	"voucherd/graph/model"
)

// The complexity of an operation is what gqlgen's complexity limit adds up:
// one for each field, plus these costs, so that what a query reads of the
// database grows at most in proportion to its complexity.
const (
	// defaultPage is the first of vouchers and campaigns when none is given
	// (the schema's default).
	defaultPage = 50
	// maxPage is the largest page the service serves; a larger first is
	// refused by it, and counted as one more here so that the sum of many
	// aliases cannot overflow.
	maxPage = 200
	// readCost is the cost of a root field that reads the database, and
	// gateCost that of a voucher's gateRemaining (a read of Redis per node).
	// A page's campaigns are read once each per operation (loader.go).
	readCost = 10
	gateCost = 2
	// mutationCost is the cost of every mutation on top of its fields: each
	// one is a transaction, priced as a page of reads, so one request holds
	// a few dozen writes at most (500 aliased reserves cost over 25,000).
	mutationCost = 50
)

// complexityRoot gives list fields the cost of their page: the selection
// of one node, repeated for each node the page may hold. Every node can read
// the database (its campaign) or Redis (its gate) once at most.
func complexityRoot() generated.ComplexityRoot {
	var c generated.ComplexityRoot
	page := func(child int, first *int, _ *string) int {
		n := defaultPage
		if first != nil {
			n = min(max(*first, 1), maxPage+1)
		}
		return 1 + n*child
	}
	c.Query.Vouchers = page
	c.Query.Campaigns = page
	c.Query.Voucher = func(child int, _ string) int { return 1 + readCost + child }
	c.Query.Reservation = func(child int, _ string) int { return 1 + readCost + child }
	c.Query.Campaign = func(child int, _ string) int { return 1 + readCost + child }
	c.Query.CheckVoucher = func(child int, _ model.CheckVoucherInput) int { return 1 + readCost + child }
	c.Query.DriftReports = func(child int) int { return 1 + readCost + child }
	// One read of a bounded list (voucher.ApiKeyListLimit) whose nodes read
	// nothing more, as driftReports.
	c.Query.APIKeys = func(child int) int { return 1 + readCost + child }
	// Webhook endpoints: a bounded list (voucher.WebhookEndpointListLimit);
	// an endpoint's deliveries: a page (1-100) read once.
	c.Query.WebhookEndpoints = func(child int) int { return 1 + readCost + child }
	c.Query.WebhookDeliveries = func(child int, _ string, first *int, after *string) int { return readCost + page(child, first, after) }
	c.Voucher.GateRemaining = func(child int) int { return 1 + gateCost + child }
	// A voucher's sale is a read of the database per node; its series and
	// refusals are bounded lists (MaxSaleSeries, the refusal codes).
	c.Voucher.Sale = func(child int) int { return 1 + readCost + child }

	write := func(child int) int { return 1 + mutationCost + child }
	c.Mutation.ReserveVoucher = func(child int, _ model.ReserveVoucherInput) int { return write(child) }
	c.Mutation.ConfirmReservation = func(child int, _ model.ReservationInput) int { return write(child) }
	c.Mutation.ReleaseReservation = func(child int, _ model.ReservationInput) int { return write(child) }
	c.Mutation.RollbackReservation = func(child int, _ model.RollbackInput) int { return write(child) }
	c.Mutation.CreateVoucher = func(child int, _ model.CreateVoucherInput) int { return write(child) }
	c.Mutation.UpdateVoucher = func(child int, _ model.UpdateVoucherInput) int { return write(child) }
	c.Mutation.ExtendVoucher = func(child int, _ model.ExtendVoucherInput) int { return write(child) }
	c.Mutation.EndVoucher = func(child int, _ string) int { return write(child) }
	c.Mutation.CreateCampaign = func(child int, _ model.CreateCampaignInput) int { return write(child) }
	c.Mutation.RebuildGate = func(child int, _ string) int { return write(child) }
	c.Mutation.ReconcileVoucher = func(child int, _ string) int { return write(child) }
	c.Mutation.WarmGates = write
	c.Mutation.CreateAPIKey = func(child int, _ model.CreateAPIKeyInput) int { return write(child) }
	c.Mutation.RevokeAPIKey = func(child int, _ string) int { return write(child) }
	c.Mutation.CreateWebhookEndpoint = func(child int, _ model.CreateWebhookEndpointInput) int { return write(child) }
	c.Mutation.UpdateWebhookEndpoint = func(child int, _ model.UpdateWebhookEndpointInput) int { return write(child) }
	c.Mutation.RotateWebhookSecret = func(child int, _ string) int { return write(child) }
	c.Mutation.DeleteWebhookEndpoint = func(child int, _ string) int { return write(child) }
	c.Mutation.ResendWebhookEvent = func(child int, _, _ string) int { return write(child) }
	return c
}
