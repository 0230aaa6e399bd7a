package voucher

import "context"

// databaseOnly is the flash write path of a server without a gate (no
// Redis): every voucher, flash or not, is decided by the database's
// conditional update, as an ordinary one is. It stands where the other
// paths would, so no caller asks whether there is a gate to decide a
// reserve, a confirm, a release or an expiry.
type databaseOnly struct {
	s *Service
}

var _ flashPath = databaseOnly{}

// reserveTerms routes nothing to a gate: the database reserves every code.
func (databaseOnly) reserveTerms(context.Context, string) (Voucher, bool, error) {
	return Voucher{}, false, nil
}

func (d databaseOnly) reserve(ctx context.Context, _ Voucher, r ReserveRequest, _ *Path) (Reservation, error) {
	return d.s.reserveInDatabase(ctx, r)
}

func (databaseOnly) confirm(context.Context, string, string) (Reservation, bool, error) {
	return Reservation{}, false, nil
}

func (databaseOnly) release(context.Context, string, string) (Reservation, bool, error) {
	return Reservation{}, false, nil
}

// beforeRollback has nothing to wait for: every confirm is the database's.
func (databaseOnly) beforeRollback(context.Context, string) error { return nil }

func (d databaseOnly) expireDue(ctx context.Context, limit int) (int, error) {
	return d.s.expireInDatabase(ctx, limit, nil)
}

func (databaseOnly) warm(context.Context, string) error       { return nil }
func (databaseOnly) load(context.Context, Voucher) error      { return nil }
func (databaseOnly) settle(context.Context) error             { return nil }
func (databaseOnly) accepts(NewVoucher) error                 { return nil }
func (databaseOnly) fillCampaignCodes(context.Context, int64) {}

func (databaseOnly) deadLetters(context.Context, int) ([]DeadLetter, error) { return nil, nil }

func (databaseOnly) rebuild(_ context.Context, code string) error {
	return Errorf(NotFound, "voucher %s has no gate", code)
}

func (databaseOnly) reconcileOrders(context.Context, GateSnapshot, *DriftReport, DriftReport, bool) []string {
	return nil
}

// claimOrder has nothing to claim: the database's unique orderId decides
// on its own when every write goes through it.
func (databaseOnly) claimOrder(context.Context, ReserveRequest) error    { return nil }
func (databaseOnly) unclaimOrder(context.Context, ReserveRequest, error) {}

func (databaseOnly) heldInFlight(context.Context, string, ReserveRequest, bool) (Reservation, error, bool) {
	return Reservation{}, nil, false
}
