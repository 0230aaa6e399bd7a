package voucher

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Store is PostgreSQL, the truth. Each method is one transaction and returns
// *Error refusals with the codes listed.
type Store interface {
	// CreateVoucher: VOUCHER_EXISTS.
	CreateVoucher(ctx context.Context, n NewVoucher) (Voucher, error)
	// Voucher: NOT_FOUND.
	Voucher(ctx context.Context, code string) (Voucher, error)
	// Availability reads a voucher, the database's clock and what a check
	// of the customer is decided on, in one snapshot: NOT_FOUND.
	Availability(ctx context.Context, code string, customerID int64) (Voucher, time.Time, Availability, error)
	// Vouchers lists newest first after an opaque cursor: INVALID_INPUT (after).
	Vouchers(ctx context.Context, first int, after string) (Page, error)
	// FlashVouchers lists every flash voucher, a flash campaign's voucher
	// row (~C<id>, its gate) among them.
	FlashVouchers(ctx context.Context) ([]Voucher, error)
	// Reserve applies the contract's reserve rules 1-6 on the database's clock:
	// NOT_FOUND, ORDER_CONFLICT, RESERVATION_RELEASED, NOT_ELIGIBLE,
	// ALREADY_USED, OUT_OF_STOCK. created is false for an identical retry.
	Reserve(ctx context.Context, r ReserveRequest, ttl time.Duration, path Path) (res Reservation, created bool, err error)
	// ReserveAdmitted is Reserve for a use the gate already took: the same
	// rules and answers, but the store may write it in one transaction with
	// the voucher's other admitted reserves of the moment. It answers only
	// after its write committed (or was refused).
	ReserveAdmitted(ctx context.Context, r ReserveRequest, ttl time.Duration, path Path) (res Reservation, created bool, err error)
	// Confirm: NOT_FOUND, RESERVATION_RELEASED (also once past expiresAt).
	Confirm(ctx context.Context, code, orderID string, path Path) (Reservation, error)
	// Release: NOT_FOUND, ALREADY_CONFIRMED. released is false when it was
	// released before (nothing is given back twice).
	Release(ctx context.Context, code, orderID string, path Path) (res Reservation, released bool, err error)
	// Rollback gives a confirmed use back (CONFIRMED -> ROLLED_BACK) and
	// records audit (its VoucherCode set to the row's voucher) with it:
	// NOT_FOUND, NOT_CONFIRMED, RESERVATION_RELEASED. rolledBack is false
	// when it was rolled back before (nothing is given back twice).
	Rollback(ctx context.Context, code, orderID, reason string, audit AuditEvent) (res Reservation, rolledBack bool, err error)
	// Reservation: NOT_FOUND.
	Reservation(ctx context.Context, orderID string) (Reservation, error)
	// ExpireDue releases up to limit reservations past their deadline, each
	// once however many instances sweep, and returns them.
	ExpireDue(ctx context.Context, limit int) ([]Reservation, error)
	// GateSnapshot reads, in one consistent snapshot, what the gate of a flash
	// voucher must hold: NOT_FOUND.
	GateSnapshot(ctx context.Context, code string) (GateSnapshot, error)
	// GateSnapshotAll is GateSnapshot with the released orders too, and the
	// database's clock: NOT_FOUND.
	GateSnapshotAll(ctx context.Context, code string) (GateSnapshot, error)
	DriftStore
	CampaignStore
	SaleStore
}

// Page is one page of vouchers, newest first.
type Page struct {
	Vouchers  []Voucher
	Cursors   []string // Cursors[i] is the cursor after Vouchers[i]
	HasNext   bool
	EndCursor string
}

// Deps are what the service runs on.
type Deps struct {
	Store Store
	// Gate is the Redis gate of flash vouchers; nil sends flash vouchers
	// down the database path too (and Kafka is not used).
	Gate Gate
	// Kafka sends flash winners to the database through Kafka
	// (FLASH_WRITE_PATH=kafka); nil in sync mode.
	Kafka *KafkaPath
	// Observer receives metrics; nil: none.
	Observer Observer
}

// Config tunes the service.
type Config struct {
	ReservationTTL time.Duration // how long a reservation is held; default 15m
	// MetadataTTL is how long a voucher's terms are cached in the process for
	// the flash path's eligibility check; default 2s.
	MetadataTTL time.Duration
	// SoldOutTTL is how long an instance answers a sold-out flash voucher from
	// memory without asking Redis; default 2s, negative turns it off.
	SoldOutTTL time.Duration
	// RebuildGrace is how long a sync-mode gate rebuild waits, paused, for
	// requests that passed the gate to finish their write; default 2s.
	RebuildGrace time.Duration
	// DefaultCurrency is the currency of a voucher created without one
	// (DEFAULT_CURRENCY); default USD.
	DefaultCurrency string
	// LeakAge is how long the gate must have held an order the database
	// lacks before reconciliation gives its use back: this instance's
	// passes have seen it so for at least this long (and the previous
	// report shows it too). It must exceed the longest write of a winner
	// (app.go: at least the store's write limit), or a slow write is taken
	// for a leak; 0: any two passes.
	LeakAge time.Duration
	Logger  *slog.Logger
}

// Service is the voucher service: every transport calls it.
type Service struct {
	// flashBase holds the store, the gate and the rest the service shares
	// with the flash write paths: syncFlash and kafkaFlash hold a pointer
	// to this one.
	flashBase
	drift DriftStore
	// currency is a new voucher's currency when it names none.
	currency string
	// flash is the write path of flash vouchers, chosen once: sync, kafka,
	// or the database alone without a gate.
	flash flashPath
	// campaigns decides the codes of flash campaigns at their campaign's
	// gate with the database write in the request, on either write path
	// (flash when it is the sync one); the database alone without a gate.
	campaigns flashPath
	// applier is the kafka path's consumer side; nil on the other paths.
	applier *EventApplier

	// gens are the campaign generators running in this process.
	gens *generators

	// sales counts the reserve answers of this process until FlushSale
	// adds them to the database (sale.go); saleFlush makes one flush at a
	// time, whose slice saleBuf the next one reuses.
	sales     *saleCounter
	saleFlush sync.Mutex
	saleBuf   []SaleCount
}

// NewService returns the service over its dependencies.
func NewService(deps Deps, cfg Config) *Service {
	if cfg.ReservationTTL <= 0 {
		cfg.ReservationTTL = 15 * time.Minute
	}
	if cfg.MetadataTTL <= 0 {
		cfg.MetadataTTL = 2 * time.Second
	}
	if cfg.SoldOutTTL == 0 {
		cfg.SoldOutTTL = 2 * time.Second
	}
	if cfg.RebuildGrace <= 0 {
		cfg.RebuildGrace = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if deps.Observer == nil {
		deps.Observer = nopObserver{}
	}
	if deps.Gate != nil {
		deps.Gate = observedGate{Gate: deps.Gate, obs: deps.Observer}
	}
	s := &Service{
		flashBase: flashBase{
			obs:        deps.Observer,
			store:      deps.Store,
			gate:       deps.Gate,
			ttl:        cfg.ReservationTTL,
			logger:     cfg.Logger,
			meta:       newMetadataCache(cfg.MetadataTTL),
			soldOut:    newSoldOutCache(cfg.SoldOutTTL),
			heldChecks: newPace(heldChecksPerSecond),
			flashCodes: newFlashCodes(),
			writing:    newWritesInFlight(),
		},
		drift:    deps.Store,
		currency: cmp.Or(cfg.DefaultCurrency, "USD"),
		gens:     newGenerators(),
		sales:    newSaleCounter(),
	}
	base := &s.flashBase
	var syncPath *syncFlash // serves the flash campaigns in kafka mode too
	switch {
	case deps.Gate == nil:
		s.campaigns = databaseOnly{s: s}
		s.flash = s.campaigns
	case deps.Kafka != nil:
		k := newKafkaFlash(base, deps.Kafka)
		s.flash, s.applier = k, newEventApplier(k)
		syncPath = newSyncFlash(base, cfg)
		s.campaigns = syncPath
	default:
		syncPath = newSyncFlash(base, cfg)
		s.campaigns = syncPath
		s.flash = s.campaigns
	}
	// What the paths ask of the write path chosen, known only now that the
	// paths (made with base) are: a refusal's question about an order on
	// its way elsewhere, and the sync path's claim of an orderId across
	// vouchers (the kafka path's when it serves the flash campaigns there).
	base.inFlight = s.flash
	if syncPath != nil {
		syncPath.claims = s.flash
	}
	return s
}

// ReservationTTL is how long a reservation is held before it expires.
func (s *Service) ReservationTTL() time.Duration { return s.ttl }

// CreateVoucher creates a voucher and, for a flash voucher, loads its gate.
// Errors: INVALID_INPUT, VOUCHER_EXISTS.
func (s *Service) CreateVoucher(ctx context.Context, n NewVoucher) (Voucher, error) {
	if err := authorize(ctx, OpManageVoucher); err != nil {
		return Voucher{}, err
	}
	if err := n.Validate(); err != nil {
		return Voucher{}, err
	}
	if err := s.checkTerms(n); err != nil {
		return Voucher{}, err
	}
	n.Code = upperCode(n.Code)
	n.DiscountType = cmp.Or(n.DiscountType, DiscountFixed)
	n.Currency = cmp.Or(n.Currency, s.currency)
	v, err := s.store.CreateVoucher(ctx, n)
	if err != nil {
		return Voucher{}, err
	}
	if v.Flash {
		// A failure here is not fatal: the first reserve warms the gate.
		// A new voucher has no admission in flight, so its gate loads at
		// once in either write path.
		if err := s.flash.load(ctx, v); err != nil {
			s.logger.WarnContext(ctx, "gate warm-up at creation failed", "code", v.Code, "err", err)
		}
	}
	return v, nil
}

// Voucher returns a voucher by code. Errors: INVALID_INPUT, NOT_FOUND.
func (s *Service) Voucher(ctx context.Context, code string) (Voucher, error) {
	if err := authorize(ctx, OpRead); err != nil {
		return Voucher{}, err
	}
	code, err := CanonicalCode(code)
	if err != nil {
		return Voucher{}, err
	}
	return s.store.Voucher(ctx, code)
}

// Vouchers lists vouchers newest first. Errors: INVALID_INPUT (first, after).
func (s *Service) Vouchers(ctx context.Context, first int, after string) (Page, error) {
	if err := authorize(ctx, OpRead); err != nil {
		return Page{}, err
	}
	if first < 0 || first > 200 {
		return Page{}, Invalid("first", "first must be between 0 and 200")
	}
	return s.store.Vouchers(ctx, first, after)
}

// Reservation returns a reservation by orderId. Errors: INVALID_INPUT, NOT_FOUND.
func (s *Service) Reservation(ctx context.Context, orderID string) (Reservation, error) {
	if err := authorize(ctx, OpRead); err != nil {
		return Reservation{}, err
	}
	if err := ValidateOrderID(orderID); err != nil {
		return Reservation{}, err
	}
	return s.store.Reservation(ctx, orderID)
}

// Reserve holds one use of a voucher for an order, idempotently by orderId.
// Errors: INVALID_INPUT, NOT_FOUND, ORDER_CONFLICT, RESERVATION_RELEASED,
// NOT_ELIGIBLE, ALREADY_USED, OUT_OF_STOCK, UNAVAILABLE.
func (s *Service) Reserve(ctx context.Context, r ReserveRequest) (Reservation, error) {
	if err := authorize(ctx, OpCheckout); err != nil {
		return Reservation{}, err
	}
	if err := r.Validate(); err != nil {
		return Reservation{}, err
	}
	r.Code = upperCode(r.Code)
	start := time.Now()
	path := PathDatabase
	res, err := func() (Reservation, error) {
		v, flash, err := s.flash.reserveTerms(ctx, r.Code)
		if err != nil {
			return Reservation{}, err
		}
		if flash {
			return s.flashFor(gateCode(v)).reserve(ctx, v, r, &path)
		}
		return s.reserveInDatabase(ctx, r)
	}()
	end, code := time.Now(), ErrorCodeOf(err)
	s.obs.ReserveDone(path, code, end.Sub(start))
	// Every reserve with a valid request is answered here, whatever the
	// path (the gate's and the sold-out memory's refusals included): the
	// one place the sale's answers are counted.
	s.sales.add(r.Code, end, code)
	return res, err
}

// reserveInDatabase reserves as for an ordinary voucher: the database's
// conditional update decides, under the write path's claim of the orderId
// across vouchers (none without a gate, or on the sync path).
func (s *Service) reserveInDatabase(ctx context.Context, r ReserveRequest) (Reservation, error) {
	if err := s.flash.claimOrder(ctx, r); err != nil {
		return Reservation{}, err
	}
	s.obs.DatabaseWrite("reserve")
	res, _, err := s.store.Reserve(ctx, r, s.ttl, PathDatabase)
	if err != nil {
		s.flash.unclaimOrder(ctx, r, err)
	}
	return res, err
}

// Confirm makes a held use final. Errors: INVALID_INPUT, NOT_FOUND,
// RESERVATION_RELEASED, UNAVAILABLE.
func (s *Service) Confirm(ctx context.Context, code, orderID string) (Reservation, error) {
	if err := authorize(ctx, OpCheckout); err != nil {
		return Reservation{}, err
	}
	code, err := CanonicalCode(code)
	if err != nil {
		return Reservation{}, err
	}
	if err := ValidateOrderID(orderID); err != nil {
		return Reservation{}, err
	}
	if res, decided, err := s.flash.confirm(ctx, code, orderID); decided {
		return res, err
	}
	s.obs.DatabaseWrite("confirm")
	return s.store.Confirm(ctx, code, orderID, PathDatabase)
}

// Release gives a held use back to the voucher and the customer, once.
// Errors: INVALID_INPUT, NOT_FOUND, ALREADY_CONFIRMED, UNAVAILABLE.
func (s *Service) Release(ctx context.Context, code, orderID string) (Reservation, error) {
	if err := authorize(ctx, OpCheckout); err != nil {
		return Reservation{}, err
	}
	code, err := CanonicalCode(code)
	if err != nil {
		return Reservation{}, err
	}
	if err := ValidateOrderID(orderID); err != nil {
		return Reservation{}, err
	}
	if res, decided, err := s.flash.release(ctx, code, orderID); decided {
		return res, err
	}
	s.obs.DatabaseWrite("release")
	res, released, err := s.store.Release(ctx, code, orderID, PathDatabase)
	if err != nil {
		return Reservation{}, err
	}
	if released {
		s.releaseGate(ctx, res)
	}
	return res, nil
}

// Rollback gives a confirmed use back (a payment refunded, an order
// cancelled after it was paid): to the voucher, the customer, the budget
// and, for a flash voucher, the gate; once, however many times or at once
// it is asked. reason (nil: none) goes to the audit log with the caller.
// Errors: INVALID_INPUT, NOT_FOUND, NOT_CONFIRMED, RESERVATION_RELEASED,
// UNAVAILABLE.
func (s *Service) Rollback(ctx context.Context, code, orderID string, reason *string) (Reservation, error) {
	if err := authorize(ctx, OpCheckout); err != nil {
		return Reservation{}, err
	}
	code, err := CanonicalCode(code)
	if err != nil {
		return Reservation{}, err
	}
	if err := ValidateOrderID(orderID); err != nil {
		return Reservation{}, err
	}
	if err := ValidateRollbackReason(reason); err != nil {
		return Reservation{}, err
	}
	why := "" // none given
	if reason != nil {
		why = *reason
	}
	res, rolledBack, err := s.rollback(ctx, code, orderID, why)
	switch {
	case err != nil:
		s.obs.RollbackDone(string(ErrorCodeOf(err)))
	case rolledBack:
		s.obs.RollbackDone(RollbackGivenBack)
	default:
		s.obs.RollbackDone(RollbackUnchanged)
	}
	return res, err
}

func (s *Service) rollback(ctx context.Context, code, orderID, reason string) (Reservation, bool, error) {
	// The database decides on every path: a rollback needs the order
	// confirmed there. In kafka mode the confirm answered before this call
	// may still be on its way to the database, so the path waits for it.
	if err := s.flash.beforeRollback(ctx, code); err != nil {
		return Reservation{}, false, err
	}
	s.obs.DatabaseWrite("rollback")
	detail := "order " + orderID + " rolled back"
	if reason != "" {
		detail += ": " + reason
	}
	res, rolledBack, err := s.store.Rollback(ctx, code, orderID, reason, auditOf(ctx, "", AuditRolledBack, detail))
	if err != nil {
		return Reservation{}, false, err
	}
	// The gate's give-back is idempotent (the order is marked released
	// there), so a retry of a rollback whose give-back failed gives it
	// now; until then the answer is UNAVAILABLE, lest a confirm or a
	// reserve retry decided at the gate answer the order as still held.
	if err := s.gateUseBack(ctx, res); err != nil {
		return Reservation{}, false, Errorf(Unavailable, "the order %s is rolled back; its use is not back at the gate yet, retry", orderID)
	}
	return res, rolledBack, nil
}

// ExpireDue releases up to limit reservations past their deadline and
// returns how many it released.
func (s *Service) ExpireDue(ctx context.Context, limit int) (int, error) {
	return s.flash.expireDue(ctx, limit)
}

// expireInDatabase is a step of the sweep where the database decides: a
// batch released there, then each released reservation handed to then
// (nil: nothing more to do).
func (b *flashBase) expireInDatabase(pass context.Context, limit int, then func(context.Context, Reservation)) (int, error) {
	ctx, cancel, err := sweepStep(pass)
	if err != nil {
		return 0, err
	}
	defer cancel()
	expired, err := b.store.ExpireDue(ctx, limit)
	if then != nil {
		for _, res := range expired {
			then(ctx, res)
		}
	}
	b.obs.ReservationsExpired(len(expired))
	return len(expired), err
}

// sweepStepTimeout bounds one step of the expiry sweep once begun: a batch
// released in the database with its give-backs to the gate, or, in kafka
// mode, one reservation.
const sweepStepTimeout = 30 * time.Second

// sweepStep starts a step of the expiry sweep unless the pass is over. The
// step runs to its end past the pass's deadline: a release that commits
// while its caller has stopped waiting for the answer leaves the sweep not
// knowing it released, and the use out of the gate until reconciliation.
func sweepStep(pass context.Context) (context.Context, context.CancelFunc, error) {
	if err := pass.Err(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(pass), sweepStepTimeout)
	return ctx, cancel, nil
}

// metadataCache keeps vouchers' terms for a short while so the flash path can
// decide eligibility without a database round trip per request.
type metadataCache struct {
	ttl    time.Duration
	mu     sync.Mutex
	m      map[string]cachedVoucher
	flight singleflight.Group // one database read per stale voucher, however many requests wait
}

type cachedVoucher struct {
	v       Voucher
	fetched time.Time
}

func newMetadataCache(ttl time.Duration) *metadataCache {
	return &metadataCache{ttl: ttl, m: make(map[string]cachedVoucher)}
}

func (c *metadataCache) get(ctx context.Context, code string, load func(context.Context, string) (Voucher, error)) (Voucher, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[code]
	c.mu.Unlock()
	if ok && now.Sub(e.fetched) < c.ttl {
		return e.v, nil
	}
	loaded, err, _ := c.flight.Do(code, func() (any, error) {
		// Not the first caller's cancellation: others wait on this read.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		v, err := load(ctx, code)
		if err != nil {
			// A started voucher's terms change only by an extension (a
			// later end, a larger total): while the database does not
			// answer, the last ones read still hold well enough, so the
			// flash path in kafka mode goes on without it.
			if ok && ErrorCodeOf(err) != NotFound {
				return e.v, nil
			}
			return Voucher{}, err
		}
		if v.CampaignID != 0 {
			// A campaign's codes are not kept: a million of them would
			// fill the map for good. Each is read from the database.
			return v, nil
		}
		c.mu.Lock()
		c.m[code] = cachedVoucher{v: v, fetched: time.Now()}
		c.mu.Unlock()
		return v, nil
	})
	return loaded.(Voucher), err
}
