package voucher

// Flash campaigns on the sync write path: a campaign with flash set has one
// gate, its voucher row's (CampaignGateCode: keys voucher:{~C<id>}:...),
// for all its codes. reserve.lua decides each code's uses there with the
// campaign's stock, the customer's count across its codes, the budget and
// the orderId, atomically; the database write after it counts the code
// too (its CHECK the last line of defence).
//
// Which campaign a code is of is answered on the hot path from memory: an
// in-process map code -> campaign of the READY flash campaigns' codes,
// filled by streaming a campaign's codes when its gate is warmed (or its
// generation ends here), and on a miss by one lookup per code however many
// requests ask at once.

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"
)

// flashCodes maps the codes of READY flash campaigns to their campaign. A
// READY campaign stays READY and a code never changes campaign, so an entry
// never goes stale; codes of campaigns not READY are never in it.
type flashCodes struct {
	mu     sync.RWMutex
	codes  map[string]int64
	filled map[int64]bool // campaigns whose every code is in codes
	flight singleflight.Group
}

func newFlashCodes() *flashCodes {
	return &flashCodes{codes: map[string]int64{}, filled: map[int64]bool{}}
}

func (f *flashCodes) get(code string) (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	id, ok := f.codes[code]
	return id, ok
}

func (f *flashCodes) isFilled(id int64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.filled[id]
}

func (f *flashCodes) add(id int64, codes ...string) {
	f.mu.Lock()
	for _, c := range codes {
		f.codes[c] = id
	}
	f.mu.Unlock()
}

// fillBatch is how many codes a fill adds under one lock.
const fillBatch = 1024

// flashFor is the path that runs the gate named gate: a campaign's
// (~C<id>) is always the sync one, a flash voucher's the write path chosen.
// In kafka mode a flash campaign's winners are therefore written in the
// request: admit.lua, the kafka path's script, keeps no per-code uses. The
// orderId's claim across vouchers is taken by each winner before its write
// and given back if the write is refused (flashPath.claimOrder), as for an
// ordinary voucher there, so a flash voucher's gate refuses an orderId a
// campaign code holds and the campaign refuses one a flash voucher holds.
func (s *Service) flashFor(gate string) flashPath {
	if IsCampaignGate(gate) {
		return s.campaigns
	}
	return s.flash
}

// CampaignOfGate is the campaign id of a campaign's gate code (~C<id>,
// as drift reports name it); ok is false for a voucher's code.
func CampaignOfGate(code string) (int64, bool) {
	if !IsCampaignGate(code) {
		return 0, false
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(code, campaignGatePrefix), 10, 64)
	return id, err == nil
}

// gateCode names the gate that decides v's reserves: a campaign code's
// campaign's, else the voucher's own.
func gateCode(v Voucher) string {
	if v.CampaignID != 0 {
		return CampaignGateCode(v.CampaignID)
	}
	return v.Code
}

// reserveTerms is what the flash path reserves code with: a flash voucher's
// terms, or for a code of a READY flash campaign its campaign's terms (the
// campaign's limits and counters) named by the code, CampaignID set; ok is
// false when code takes the database path. A code of a flash campaign that
// is not READY is NOT_FOUND, as on the database path.
func (b *flashBase) reserveTerms(ctx context.Context, code string) (Voucher, bool, error) {
	if id, ok := b.flashCodes.get(code); ok {
		v, err := b.campaignTerms(ctx, id, code)
		return v, err == nil, err
	}
	v, err := b.meta.get(ctx, code, b.store.Voucher)
	if err != nil {
		return Voucher{}, false, err
	}
	if !v.Flash {
		return v, false, nil
	}
	if v.CampaignID == 0 {
		return v, true, nil
	}
	// A code of a flash campaign this instance has not seen (its codes not
	// streamed here yet): one lookup however many requests ask for it.
	id, err, _ := b.flashCodes.flight.Do(code, func() (any, error) {
		c, err := b.store.CampaignOfCode(context.WithoutCancel(ctx), code)
		if err != nil {
			return int64(0), err
		}
		if c.Status != CampaignReady || !c.Flash {
			return int64(0), nil
		}
		b.flashCodes.add(c.ID, code)
		if !b.flashCodes.isFilled(c.ID) {
			// The others of its codes are likely asked for next.
			go b.fillCampaignCodes(context.WithoutCancel(ctx), c.ID)
		}
		return c.ID, nil
	})
	if err != nil {
		return Voucher{}, false, err
	}
	if id.(int64) == 0 {
		return Voucher{}, false, voucherNotFound(code)
	}
	v, err = b.campaignTerms(ctx, id.(int64), code)
	return v, err == nil, err
}

// campaignTerms is the campaign's terms (its voucher row, cached as a
// voucher's) as code reserves them.
func (b *flashBase) campaignTerms(ctx context.Context, id int64, code string) (Voucher, error) {
	v, err := b.meta.get(ctx, CampaignGateCode(id), b.store.Voucher)
	if err != nil {
		return Voucher{}, err
	}
	v.Code, v.CampaignID = code, id
	return v, nil
}

// voucherNotFound is the database path's NOT_FOUND for a code.
func voucherNotFound(code string) error {
	return Errorf(NotFound, "no voucher with code %s", code)
}

// fillCampaignCodes streams a READY flash campaign's codes into the map,
// once per campaign however many callers ask.
func (b *flashBase) fillCampaignCodes(ctx context.Context, id int64) {
	if b.flashCodes.isFilled(id) {
		return
	}
	_, _, _ = b.flashCodes.flight.Do("campaign:"+strconv.FormatInt(id, 10), func() (any, error) {
		if b.flashCodes.isFilled(id) {
			return nil, nil
		}
		c, err := b.store.Campaign(ctx, id)
		if err != nil || c.Status != CampaignReady || !c.Terms.Flash {
			return nil, err
		}
		batch := make([]string, 0, fillBatch)
		err = b.store.CampaignCodes(ctx, id, func(cc CampaignCode) error {
			batch = append(batch, cc.Code)
			if len(batch) == fillBatch {
				b.flashCodes.add(id, batch...)
				batch = batch[:0]
			}
			return nil
		})
		if err != nil {
			b.logger.WarnContext(ctx, "a flash campaign's codes were not all read; each missing one is looked up", "campaign", id, "err", err)
			return nil, err
		}
		b.flashCodes.add(id, batch...)
		b.flashCodes.mu.Lock()
		b.flashCodes.filled[id] = true
		b.flashCodes.mu.Unlock()
		b.logger.InfoContext(ctx, "flash campaign codes ready in memory", "campaign", id, "codes", c.CodeCount)
		return nil, nil
	})
}
