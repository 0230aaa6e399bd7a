package voucher

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// CampaignStatus is where a campaign's generation is: GENERATING, then
// READY (every code made), or FAILED. Only a READY campaign's codes are
// reservable.
type CampaignStatus string

// The campaign states.
const (
	CampaignGenerating CampaignStatus = "GENERATING"
	CampaignReady      CampaignStatus = "READY"
	CampaignFailed     CampaignStatus = "FAILED"
)

// CodeAlphabet is what the random part of a campaign code is made of: no 0,
// O, 1, I or L, which people misread.
const CodeAlphabet = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"

// MaxCampaignCodes is the most codes one campaign has.
const MaxCampaignCodes = 1_000_000

// Campaign is a batch of unique codes that share one set of terms and
// limits: each code at most UsesPerCode uses, all codes together at most
// Terms.TotalLimit, a customer at most Terms.PerUserLimit across all codes,
// the budget across all codes.
type Campaign struct {
	ID             int64
	Name           string
	Status         CampaignStatus
	CodeCount      int
	GeneratedCount int // codes made so far: progress while GENERATING
	CodePrefix     string
	CodeLength     int
	UsesPerCode    int
	// Failure says why a FAILED campaign failed.
	Failure   string
	CreatedAt time.Time
	// Terms are the campaign's terms and its counters across all its codes
	// (UsedCount, BudgetUsed, ...), as a voucher's; Terms.Code is internal
	// and never shown.
	Terms Voucher
}

// Remaining is how many uses of the campaign are neither held nor sold.
func (c Campaign) Remaining() int { return c.Terms.Remaining() }

// CampaignPage is one page of campaigns, newest first.
type CampaignPage struct {
	Campaigns []Campaign
	Cursors   []string // Cursors[i] is the cursor after Campaigns[i]
	HasNext   bool
	EndCursor string
}

// CampaignCode is one code of a campaign with its uses (held or
// confirmed), for the export.
type CampaignCode struct {
	Code     string
	Uses     int
	UseLimit int
}

// State is how a code stands, for people: UNUSED, PARTLY_USED (some of its
// uses held or confirmed) or USED (all of them).
func (c CampaignCode) State() string {
	switch {
	case c.Uses <= 0:
		return "UNUSED"
	case c.Uses < c.UseLimit:
		return "PARTLY_USED"
	}
	return "USED"
}

// NewCampaign is what a marketer gives to create a campaign. Terms holds the
// discount, currency, budget, minimum, window and flash as for a voucher
// (its Code, TotalLimit and PerUserLimit are ignored).
type NewCampaign struct {
	Name        string
	CodeCount   int
	CodePrefix  string
	CodeLength  int
	UsesPerCode int
	// TotalLimit bounds the uses across all codes; nil: CodeCount * UsesPerCode.
	TotalLimit   *int
	PerUserLimit int
	Terms        NewVoucher
}

// newCampaignFields is the order in which Validate reports fields at fault.
var newCampaignFields = []string{"name", "codeCount", "codePrefix", "codeLength", "usesPerCode", "totalLimit", "perUserLimit",
	"discountType", "discountAmount", "discountPercent", "maxDiscountAmount", "minOrderAmount", "currency", "budgetAmount", "startsAt", "endsAt", "flash",
	"periodLimits", "timeZone", "eligibleSegments", "appliesTo"}

// FieldErrors checks every field of a new campaign and returns a message per
// field at fault, keyed as the schema spells it.
func (n NewCampaign) FieldErrors() map[string]string {
	terms := n.Terms
	terms.Code = "CAMPAIGN"
	terms.TotalLimit, terms.PerUserLimit = 1, 1 // checked below, with the campaign's words
	out := terms.FieldErrors()
	delete(out, "code")
	if err := ValidateText("name", n.Name); err != nil {
		out["name"] = AsError(err).Message
	} else if c := utf8.RuneCountInString(n.Name); c < 1 || c > 100 {
		out["name"] = "name must be 1-100 characters"
	}
	if n.CodeCount < 1 || n.CodeCount > MaxCampaignCodes {
		out["codeCount"] = "codeCount must be 1-1000000"
	}
	if !validPrefix(n.CodePrefix) {
		out["codePrefix"] = "codePrefix must be 0-8 characters of A-Z and 0-9"
	}
	if n.CodeLength < 6 || n.CodeLength > 16 {
		out["codeLength"] = "codeLength must be 6-16"
	}
	if n.UsesPerCode < 1 || n.UsesPerCode > MaxLimit {
		out["usesPerCode"] = "usesPerCode must be at least 1 and at most 2147483647"
	}
	if n.TotalLimit != nil {
		if *n.TotalLimit < 1 || *n.TotalLimit > MaxLimit {
			out["totalLimit"] = "totalLimit must be at least 1 and at most 2147483647"
		}
	} else if _, ok := out["codeCount"]; !ok {
		if _, ok := out["usesPerCode"]; !ok && int64(n.CodeCount)*int64(n.UsesPerCode) > MaxLimit {
			out["totalLimit"] = "codeCount * usesPerCode is more than 2147483647: give totalLimit"
		}
	}
	if n.PerUserLimit < 1 || n.PerUserLimit > MaxLimit {
		out["perUserLimit"] = "perUserLimit must be at least 1 and at most 2147483647"
	}
	return out
}

// Validate returns INVALID_INPUT naming the first field at fault.
func (n NewCampaign) Validate() error {
	errs := n.FieldErrors()
	for _, field := range newCampaignFields {
		if msg, ok := errs[field]; ok {
			return Invalid(field, msg)
		}
	}
	return nil
}

// validPrefix: 0-8 characters of A-Z a-z 0-9 (lower case is stored in
// capitals, as every code).
func validPrefix(p string) bool {
	if len(p) > 8 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// RandomCodes makes n codes PREFIX-RANDOM (RANDOM without a dash when there
// is no prefix) of length characters of CodeAlphabet from crypto/rand.
// Each character is one random byte below 248 (8 x 31) taken modulo 31, the
// others are drawn again, so every character is equally likely.
func RandomCodes(prefix string, length, n int) ([]string, error) {
	if prefix != "" {
		prefix += "-"
	}
	codes := make([]string, 0, n)
	buf := make([]byte, len(prefix)+length)
	copy(buf, prefix)
	random := make([]byte, 4096)
	pos := len(random)
	for len(codes) < n {
		for i := len(prefix); i < len(buf); {
			if pos == len(random) {
				if _, err := rand.Read(random); err != nil {
					return nil, fmt.Errorf("random codes: %w", err)
				}
				pos = 0
			}
			b := random[pos]
			pos++
			if b < 248 {
				buf[i] = CodeAlphabet[b%31]
				i++
			}
		}
		codes = append(codes, string(buf))
	}
	return codes, nil
}

// CampaignStore keeps campaigns and their codes (in the database with the
// vouchers: a campaign's counters are a voucher row's).
type CampaignStore interface {
	// CreateCampaign stores a campaign, GENERATING, with no code yet.
	CreateCampaign(ctx context.Context, n NewCampaign) (Campaign, error)
	// Campaign: NOT_FOUND.
	Campaign(ctx context.Context, id int64) (Campaign, error)
	// Campaigns lists newest first after an opaque cursor: INVALID_INPUT (after).
	Campaigns(ctx context.Context, first int, after string) (CampaignPage, error)
	// GeneratingCampaigns lists the ids of the campaigns still GENERATING.
	GeneratingCampaigns(ctx context.Context) ([]int64, error)
	// AddCampaignCodes is one batch of a campaign's generation, in one
	// transaction: it takes (or renews) the lease, locks the campaign, asks
	// codes for up to batch of the codes still missing and stores those not
	// taken by any voucher or campaign; the campaign becomes READY with its
	// last code. ErrLeaseHeld when another holder generates it.
	AddCampaignCodes(ctx context.Context, id int64, lease Lease, batch int, codes func(prefix string, length, n int) ([]string, error)) (GenerationStep, error)
	// FailCampaign marks a GENERATING campaign FAILED.
	FailCampaign(ctx context.Context, id int64, reason string) error
	// ReleaseLease ends a lease its holder took.
	ReleaseLease(ctx context.Context, name, holder string) error
	// CampaignCodes hands each code of a campaign to each in creation
	// order, streamed (never all of them in memory).
	CampaignCodes(ctx context.Context, id int64, each func(CampaignCode) error) error
	// CampaignOfCode says which campaign a code is of: NOT_FOUND (none).
	CampaignOfCode(ctx context.Context, code string) (CodeCampaign, error)
	// ReserveAdmittedCode is ReserveAdmitted for a code of a campaign whose
	// gate (campaignGate, CampaignGateCode) admitted it: written in one
	// transaction with the campaign's other admitted reserves of the
	// moment, whatever their codes, each code's use counted too.
	ReserveAdmittedCode(ctx context.Context, campaignGate string, r ReserveRequest, ttl time.Duration, path Path) (res Reservation, created bool, err error)
}

// CodeCampaign is the campaign a code is of.
type CodeCampaign struct {
	ID     int64
	Status CampaignStatus
	Flash  bool
}

// Lease names a job one holder runs at a time, for TTL unless renewed.
type Lease struct {
	Name   string
	Holder string
	TTL    time.Duration
}

// GenerationStep is what a batch of a generation did.
type GenerationStep struct {
	Status         CampaignStatus
	CodeCount      int
	GeneratedCount int
	Asked          int // codes made for the batch
	Added          int // of them, stored (the others were taken already)
}

// ErrLeaseHeld says another holder has the lease.
var ErrLeaseHeld = errors.New("the lease is held by another holder")

// Generation tuning.
const (
	// generationBatch is how many codes a batch writes (one COPY and one
	// insert, in one transaction).
	generationBatch = 20_000
	// generationLease is how long a generator holds a campaign without
	// renewing it (every batch does): a generator that died is replaced by
	// another instance's (or its restart's) within it.
	generationLease = 15 * time.Second
	// generationScan is how often an instance looks for campaigns still
	// GENERATING that no one generates (a restart resumes them).
	generationScan = 5 * time.Second
	// fruitlessBatches in a row that store no code fail the campaign: the
	// codes of its prefix and length are (nearly) all taken.
	fruitlessBatches = 20
)

// generators runs the generation of campaigns in this process.
type generators struct {
	mu      sync.Mutex
	running map[int64]bool
	kick    chan struct{}
}

func newGenerators() *generators {
	return &generators{running: map[int64]bool{}, kick: make(chan struct{}, 1)}
}

// wake asks the generation loop to look for campaigns now (one was created).
func (g *generators) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// CreateCampaign stores a campaign and returns it at once, GENERATING; its
// codes are made in the background (RunCampaignGeneration). Errors:
// FORBIDDEN, INVALID_INPUT.
func (s *Service) CreateCampaign(ctx context.Context, n NewCampaign) (Campaign, error) {
	if err := authorize(ctx, OpManageVoucher); err != nil {
		return Campaign{}, err
	}
	if err := n.Validate(); err != nil {
		return Campaign{}, err
	}
	n.CodePrefix = upperCode(n.CodePrefix)
	n.Terms.DiscountType = orDefault(n.Terms.DiscountType, DiscountFixed)
	if n.Terms.Currency == "" {
		n.Terms.Currency = s.currency
	}
	if n.TotalLimit == nil {
		total := n.CodeCount * n.UsesPerCode // at most MaxLimit: Validate
		n.TotalLimit = &total
	}
	c, err := s.store.CreateCampaign(ctx, n)
	if err != nil {
		return Campaign{}, err
	}
	if c.Terms.Flash {
		// Its gate at once, as a flash voucher's (nothing of it can be in
		// flight); a failure leaves it to the first reserve or warm-up.
		if err := s.campaigns.load(ctx, c.Terms); err != nil {
			s.logger.WarnContext(ctx, "campaign gate warm-up at creation failed", "campaign", c.ID, "err", err)
		}
	}
	s.gens.wake()
	return c, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Campaign returns a campaign by id. Errors: FORBIDDEN, NOT_FOUND.
func (s *Service) Campaign(ctx context.Context, id int64) (Campaign, error) {
	if err := authorize(ctx, OpReadCampaigns); err != nil {
		return Campaign{}, err
	}
	return s.store.Campaign(ctx, id)
}

// ParseCampaignID reads a campaign id given as decimal digits; an id that
// cannot be one is NOT_FOUND (there is no such campaign).
func ParseCampaignID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, Errorf(NotFound, "no campaign with id %q", s)
	}
	return id, nil
}

// Campaigns lists campaigns newest first. Errors: FORBIDDEN, INVALID_INPUT.
func (s *Service) Campaigns(ctx context.Context, first int, after string) (CampaignPage, error) {
	if err := authorize(ctx, OpReadCampaigns); err != nil {
		return CampaignPage{}, err
	}
	if first < 0 || first > 200 {
		return CampaignPage{}, Invalid("first", "first must be between 0 and 200")
	}
	return s.store.Campaigns(ctx, first, after)
}

// CampaignCodes hands each code of a campaign to each, in creation order,
// streamed from the database (the export). The campaign is looked up first,
// so an unknown one is NOT_FOUND before each is called. Errors: FORBIDDEN,
// NOT_FOUND.
func (s *Service) CampaignCodes(ctx context.Context, id int64, each func(CampaignCode) error) error {
	if err := authorize(ctx, OpManageVoucher); err != nil {
		return err
	}
	if _, err := s.store.Campaign(ctx, id); err != nil {
		return err
	}
	return s.store.CampaignCodes(ctx, id, each)
}

// RunCampaignGeneration generates the codes of every GENERATING campaign
// that no other instance generates, until ctx ends: at once when one is
// created here, and every few seconds for those a stopped instance left
// (a restart resumes them: every batch is one transaction, so what was
// stored stays, and the campaign stays unreservable until its last batch).
// holder names this instance in the leases.
func (s *Service) RunCampaignGeneration(ctx context.Context, holder string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	ticker := time.NewTicker(generationScan)
	defer ticker.Stop()
	for {
		ids, err := s.store.GeneratingCampaigns(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "listing the campaigns to generate failed", "err", err)
		}
		for _, id := range ids {
			s.gens.mu.Lock()
			busy := s.gens.running[id]
			s.gens.running[id] = true
			s.gens.mu.Unlock()
			if busy {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					s.gens.mu.Lock()
					delete(s.gens.running, id)
					s.gens.mu.Unlock()
				}()
				if err := s.GenerateCampaign(ctx, id, holder); err != nil && ctx.Err() == nil {
					s.logger.ErrorContext(ctx, "generating a campaign's codes stopped; it resumes later", "campaign", id, "err", err)
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-s.gens.kick:
		}
	}
}

// CampaignGenerationLease names the lease a campaign's generator holds: one
// name per campaign, so generators on every instance exclude each other.
func CampaignGenerationLease(id int64) string {
	return "campaign-generation:" + strconv.FormatInt(id, 10)
}

// GenerateCampaign makes the codes a GENERATING campaign still lacks, batch
// by batch, under the campaign's lease; it returns nil when the campaign is
// not GENERATING (any more) or another holder generates it. A code already
// taken by a voucher or another campaign is left out of its batch and made
// again in the next.
func (s *Service) GenerateCampaign(ctx context.Context, id int64, holder string) error {
	lease := Lease{Name: CampaignGenerationLease(id), Holder: holder, TTL: generationLease}
	defer func() {
		// Let another holder take over at once rather than after the lease.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.store.ReleaseLease(rctx, lease.Name, lease.Holder); err != nil {
			s.logger.WarnContext(rctx, "releasing a generation lease failed", "campaign", id, "err", err)
		}
	}()
	fruitless := 0
	start := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		step, err := s.store.AddCampaignCodes(ctx, id, lease, generationBatch, RandomCodes)
		if errors.Is(err, ErrLeaseHeld) {
			return nil
		}
		if err != nil {
			return err
		}
		switch step.Status {
		case CampaignReady:
			s.logger.InfoContext(ctx, "campaign generated", "campaign", id, "codes", step.CodeCount, "took", time.Since(start).String())
			s.flash.fillCampaignCodes(ctx, id) // only a flash campaign's
			return nil
		case CampaignFailed:
			return nil
		}
		if step.Asked == 0 {
			return nil // not GENERATING any more
		}
		if step.Added == 0 {
			fruitless++
		} else {
			fruitless = 0
		}
		if fruitless >= fruitlessBatches {
			reason := fmt.Sprintf("no unused code left to make: %d batches in a row found every code taken (a longer codeLength or another codePrefix leaves more)", fruitless)
			s.logger.ErrorContext(ctx, "campaign failed", "campaign", id, "reason", reason)
			return s.store.FailCampaign(ctx, id, reason)
		}
	}
}
