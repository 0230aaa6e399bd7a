package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// campaignVoucherCode is the code of a campaign's voucher row: '~C<id>',
// which no caller can type (voucher.ValidateCode refuses '~').
func campaignVoucherCode(id int64) string { return "~C" + strconv.FormatInt(id, 10) }

// CreateCampaign stores a campaign and its voucher row (its terms and
// counters) in one transaction, GENERATING, with no code yet.
func (s *Store) CreateCampaign(ctx context.Context, n voucher.NewCampaign) (voucher.Campaign, error) {
	t := n.Terms
	t.TotalLimit, t.PerUserLimit = *n.TotalLimit, n.PerUserLimit
	total, perUser, err := limits32(t)
	if err != nil {
		return voucher.Campaign{}, err
	}
	var out voucher.Campaign
	err = s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		id, err := q.CampaignNextID(ctx)
		if err != nil {
			return err
		}
		rc := columnsOf(t.Restrictions)
		v, err := q.VoucherInsert(ctx, db.VoucherInsertParams{
			Code:                campaignVoucherCode(id),
			DiscountType:        string(t.DiscountType),
			DiscountAmount:      t.DiscountAmount,
			DiscountPercent:     percent32(t.DiscountPercent),
			MaxDiscountAmount:   t.MaxDiscountAmount,
			Currency:            t.Currency,
			BudgetAmount:        t.BudgetAmount,
			MinOrderAmount:      t.MinOrderAmount,
			TotalLimit:          total,
			PerUserLimit:        perUser,
			StartsAt:            t.StartsAt,
			EndsAt:              t.EndsAt,
			Flash:               t.Flash,
			TimeZone:            rc.timeZone,
			PeriodLimits:        rc.limits,
			EligibleSegments:    rc.segments,
			AppliesToSkus:       rc.skus,
			AppliesToCategories: rc.cats,
		})
		if err != nil {
			return err
		}
		// Validate bounded these: 1-1,000,000, 6-16, 1-MaxInt32.
		c, err := q.CampaignInsert(ctx, db.CampaignInsertParams{
			ID:          id,
			VoucherCode: v.Code,
			Name:        n.Name,
			CodeCount:   limit32(n.CodeCount),
			CodePrefix:  n.CodePrefix,
			CodeLength:  limit32(n.CodeLength),
			UsesPerCode: limit32(n.UsesPerCode),
		})
		if err != nil {
			return err
		}
		out = toCampaign(c, v)
		return nil
	})
	if err != nil {
		return voucher.Campaign{}, mapError(err)
	}
	return out, nil
}

// Campaign reads a campaign with its counters. Errors: NOT_FOUND.
func (s *Store) Campaign(ctx context.Context, id int64) (voucher.Campaign, error) {
	row, err := s.q.CampaignGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.Campaign{}, voucher.Errorf(voucher.NotFound, "no campaign with id %d", id)
	}
	if err != nil {
		return voucher.Campaign{}, mapError(err)
	}
	return toCampaign(row.Campaign, row.Voucher), nil
}

// Campaigns lists campaigns newest first. Errors: INVALID_INPUT (after).
func (s *Store) Campaigns(ctx context.Context, first int, after string) (voucher.CampaignPage, error) {
	type pair struct {
		c db.Campaign
		v db.Voucher
	}
	var rows []pair
	limit := limit32(first + 1) // one more tells whether there is a next page
	if after == "" {
		got, err := s.q.CampaignListFirst(ctx, limit)
		if err != nil {
			return voucher.CampaignPage{}, mapError(err)
		}
		for _, r := range got {
			rows = append(rows, pair{r.Campaign, r.Voucher})
		}
	} else {
		createdAt, idText, cerr := decodeCursor(after)
		id, perr := strconv.ParseInt(idText, 10, 64)
		if cerr != nil || perr != nil {
			return voucher.CampaignPage{}, voucher.Invalid("after", "after is not a cursor this server gave")
		}
		got, err := s.q.CampaignListAfter(ctx, db.CampaignListAfterParams{Limit: limit, AfterCreatedAt: createdAt, AfterID: id})
		if err != nil {
			return voucher.CampaignPage{}, mapError(err)
		}
		for _, r := range got {
			rows = append(rows, pair{r.Campaign, r.Voucher})
		}
	}
	page := voucher.CampaignPage{HasNext: len(rows) > first}
	if page.HasNext {
		rows = rows[:first]
	}
	for _, r := range rows {
		page.Campaigns = append(page.Campaigns, toCampaign(r.c, r.v))
		page.Cursors = append(page.Cursors, encodeCursor(r.c.CreatedAt, strconv.FormatInt(r.c.ID, 10)))
	}
	if n := len(page.Cursors); n > 0 {
		page.EndCursor = page.Cursors[n-1]
	}
	return page, nil
}

// GeneratingCampaigns lists the campaigns still GENERATING.
func (s *Store) GeneratingCampaigns(ctx context.Context) ([]int64, error) {
	ids, err := s.q.CampaignListGenerating(ctx)
	if err != nil {
		return nil, mapError(err)
	}
	return ids, nil
}

// AddCampaignCodes is one batch of a generation in one transaction: the
// lease (taken or renewed; held until the commit, so no other holder's
// batch runs meanwhile), the campaign's row locked, the batch's codes
// copied (COPY) into a temporary table and inserted from it into the
// registry of codes, where a code any voucher or campaign has already is
// skipped (ON CONFLICT DO NOTHING on its primary key), and the count of
// those stored added to generated_count, READY with the last.
func (s *Store) AddCampaignCodes(ctx context.Context, id int64, lease voucher.Lease, batch int, codes func(prefix string, length, n int) ([]string, error)) (voucher.GenerationStep, error) {
	var step voucher.GenerationStep
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.JobLeaseTake(ctx, db.JobLeaseTakeParams{Name: lease.Name, Holder: lease.Holder, TtlSeconds: lease.TTL.Seconds()}); errors.Is(err, pgx.ErrNoRows) {
			return voucher.ErrLeaseHeld
		} else if err != nil {
			return err
		}
		c, err := q.CampaignLockForGeneration(ctx, id)
		if err != nil {
			return err
		}
		step = voucher.GenerationStep{Status: voucher.CampaignStatus(c.Status), CodeCount: int(c.CodeCount), GeneratedCount: int(c.GeneratedCount)}
		if step.Status != voucher.CampaignGenerating {
			return nil
		}
		made, err := codes(c.CodePrefix, int(c.CodeLength), min(batch, step.CodeCount-step.GeneratedCount))
		if err != nil {
			return err
		}
		step.Asked = len(made)
		if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE campaign_code_batch (code text NOT NULL, n integer NOT NULL) ON COMMIT DROP`); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"campaign_code_batch"}, []string{"code", "n"},
			pgx.CopyFromSlice(len(made), func(i int) ([]any, error) { return []any{made[i], int32(i)}, nil })); err != nil { // #nosec G115 -- i < batch
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO voucher_code (code, campaign_id, use_limit)
			SELECT code, $1, $2 FROM campaign_code_batch ORDER BY n
			ON CONFLICT (code) DO NOTHING`, id, c.UsesPerCode)
		if err != nil {
			return err
		}
		step.Added = int(tag.RowsAffected())
		after, err := q.CampaignProgress(ctx, db.CampaignProgressParams{ID: id, N: limit32(step.Added)})
		if err != nil {
			return err
		}
		step.Status, step.GeneratedCount = voucher.CampaignStatus(after.Status), int(after.GeneratedCount)
		return nil
	})
	if errors.Is(err, voucher.ErrLeaseHeld) {
		return voucher.GenerationStep{}, err
	}
	if err != nil {
		return voucher.GenerationStep{}, mapError(err)
	}
	return step, nil
}

// FailCampaign marks a GENERATING campaign FAILED.
func (s *Store) FailCampaign(ctx context.Context, id int64, reason string) error {
	return mapError(s.q.CampaignFail(ctx, db.CampaignFailParams{ID: id, Failure: &reason}))
}

// ReleaseLease ends a lease its holder took.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	return mapError(s.q.JobLeaseRelease(ctx, db.JobLeaseReleaseParams{Name: name, Holder: holder}))
}

// CampaignCodes streams a campaign's codes in creation order: the rows are
// read from the connection one at a time as each is handed on, so memory
// stays flat whatever the count.
func (s *Store) CampaignCodes(ctx context.Context, id int64, each func(voucher.CampaignCode) error) error {
	rows, err := s.pool.Query(ctx, `SELECT code, used_count, use_limit FROM voucher_code WHERE campaign_id = $1 ORDER BY seq`, id)
	if err != nil {
		return mapError(err)
	}
	defer rows.Close()
	var code string
	var used, limit int32
	for rows.Next() {
		if err := rows.Scan(&code, &used, &limit); err != nil {
			return mapError(err)
		}
		if err := each(voucher.CampaignCode{Code: code, Uses: int(used), UseLimit: int(limit)}); err != nil {
			return err
		}
	}
	return mapError(rows.Err())
}

// campaignCode is a campaign code as a reserve, confirm or release sees it.
type campaignCode struct {
	code       string
	campaignID int64
	status     voucher.CampaignStatus
	useLimit   int
	used       int
	confirmed  int
	rolledBack int
}

// codeVoucher reads the voucher a code moves and the database's clock: a
// standalone voucher's row, or for a campaign code its campaign's row with
// the code (nil for a standalone voucher). v.Code is then the campaign's
// row's code, for the queries. Errors: NOT_FOUND.
func codeVoucher(ctx context.Context, q *db.Queries, code string) (voucher.Voucher, time.Time, *campaignCode, error) {
	vr, err := q.VoucherGetForReserve(ctx, code)
	if err == nil {
		return toVoucher(vr.Voucher), vr.DbNow, nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return voucher.Voucher{}, time.Time{}, nil, err
	}
	cr, err := q.CampaignCodeGet(ctx, code)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.Voucher{}, time.Time{}, nil, voucherNotFound(code)
	}
	if err != nil {
		return voucher.Voucher{}, time.Time{}, nil, err
	}
	cc := &campaignCode{
		code: cr.CampaignCode, campaignID: cr.CampaignID, status: voucher.CampaignStatus(cr.CampaignStatus),
		used: int(cr.CodeUsed), confirmed: int(cr.CodeConfirmed), rolledBack: int(cr.CodeRolledBack),
	}
	if cr.UseLimit != nil {
		cc.useLimit = int(*cr.UseLimit)
	}
	return toVoucher(cr.Voucher), cr.DbNow, cc, nil
}

// reservable is NOT_FOUND for a code of a campaign that is not READY: no
// code of a campaign still generating (or failed) is reservable.
func (cc *campaignCode) reservable() error {
	if cc != nil && cc.status != voucher.CampaignReady {
		return voucherNotFound(cc.code)
	}
	return nil
}

// asCode is the campaign's terms as the code shows them: the code, its own
// limit and counts, the campaign's terms (the budget is the campaign's).
func (cc *campaignCode) asCode(v voucher.Voucher) voucher.Voucher {
	v.Code = cc.code
	v.CampaignID = cc.campaignID
	v.TotalLimit = cc.useLimit
	v.UsedCount = cc.used
	v.ConfirmedCount = cc.confirmed
	v.RolledBackCount = cc.rolledBack
	v.ReservedCount = cc.used - cc.confirmed
	return v
}

// campaignGateSnapshot adds to a campaign's gate snapshot what its gate
// holds besides a voucher's, in the snapshot's transaction: the uses per
// code, the codes with uses held or confirmed, and each live order's code.
func campaignGateSnapshot(ctx context.Context, q *db.Queries, snap *voucher.GateSnapshot) error {
	terms, err := q.CampaignGateTerms(ctx, snap.Code)
	if err != nil {
		return err
	}
	snap.UsesPerCode = int(terms.UsesPerCode)
	uses, err := q.CampaignGateCodeUses(ctx, &terms.ID)
	if err != nil {
		return err
	}
	snap.Codes = make(map[string]int, len(uses))
	for _, u := range uses {
		snap.Codes[u.Code] = int(u.UsedCount)
	}
	orders, err := q.CampaignGateOrderCodes(ctx, snap.Code)
	if err != nil {
		return err
	}
	snap.OrderCodes = make(map[string]string, len(orders))
	for _, o := range orders {
		snap.OrderCodes[o.OrderID] = o.CampaignCode
	}
	return nil
}

// CampaignOfCode says which campaign a code is of. Errors: NOT_FOUND (no
// campaign's code).
func (s *Store) CampaignOfCode(ctx context.Context, code string) (voucher.CodeCampaign, error) {
	row, err := s.q.CampaignOfCode(ctx, code)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.CodeCampaign{}, voucherNotFound(code)
	}
	if err != nil {
		return voucher.CodeCampaign{}, mapError(err)
	}
	return voucher.CodeCampaign{ID: row.ID, Status: voucher.CampaignStatus(row.Status), Flash: row.Flash}, nil
}

// slotKey is the voucher row whose reserve slots a code's reserve takes: the
// code's own, or its campaign's for a campaign code (all codes of a campaign
// end on its one row). An unknown code keeps its own (it is refused).
func (s *Store) slotKey(ctx context.Context, code string) string {
	owner, err := s.q.CampaignCodeOwner(ctx, code)
	if err != nil {
		return code
	}
	return owner
}

func toCampaign(c db.Campaign, v db.Voucher) voucher.Campaign {
	out := voucher.Campaign{
		ID:             c.ID,
		Name:           c.Name,
		Status:         voucher.CampaignStatus(c.Status),
		CodeCount:      int(c.CodeCount),
		GeneratedCount: int(c.GeneratedCount),
		CodePrefix:     c.CodePrefix,
		CodeLength:     int(c.CodeLength),
		UsesPerCode:    int(c.UsesPerCode),
		CreatedAt:      c.CreatedAt,
		Terms:          toVoucher(v),
	}
	if c.Failure != nil {
		out.Failure = *c.Failure
	}
	out.Terms.CampaignID = c.ID
	return out
}
