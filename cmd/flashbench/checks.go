package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// pg reads what the database holds after a sale and how much the sale cost
// it. PostgreSQL's cumulative statistics (pg_stat_database,
// pg_stat_user_tables) are reported by each backend at most once a second
// while busy and within 10 s once idle, so a delta is read stats-settle after
// the sale's last request. pg_stat_database is read from a connection to
// another database (postgres) where possible, so these reads are not counted
// in the voucher database's transactions; the harness's own statements in
// the voucher database are counted and subtracted.
type pg struct {
	conn      *pgx.Conn // the voucher database: checks and per-table counters
	stats     *pgx.Conn // where pg_stat_database is read; conn when no other database answered
	dbName    string
	own       int64 // statements this harness ran on conn (each is a transaction)
	statsOnDB bool  // stats == conn
	// statements is whether pg_stat_statements answers in the voucher database.
	statements bool
}

func openPG(ctx context.Context, databaseURL string) (*pg, error) {
	databaseURL = withoutPoolSettings(databaseURL)
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("postgres (for the checks): %w", err)
	}
	p := &pg{conn: conn, stats: conn, statsOnDB: true}
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&p.dbName); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	p.own++
	if u, err := url.Parse(databaseURL); err == nil && p.dbName != "postgres" {
		u.Path = "/postgres"
		if other, err := pgx.Connect(ctx, u.String()); err == nil {
			p.stats, p.statsOnDB = other, false
		}
	}
	var calls int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_statements`).Scan(&calls); err == nil {
		p.statements = true
	}
	p.own++
	return p, nil
}

// withoutPoolSettings drops pgxpool's settings (pool_max_conns, ...) from a
// DATABASE_URL, which a single connection would send to the server.
func withoutPoolSettings(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return databaseURL
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (p *pg) close(ctx context.Context) {
	if !p.statsOnDB {
		_ = p.stats.Close(ctx)
	}
	_ = p.conn.Close(ctx)
}

// pgCounters are cumulative counters of the voucher database.
type pgCounters struct {
	XactCommit, XactRollback int64
	// RedemptionInserts counts rows inserted into voucher_redemption, by
	// committed and rolled-back transactions alike: each reserve that got
	// as far as writing its reservation, the sale's reserve writes.
	RedemptionInserts int64
	// VoucherUpdates counts rows updated in voucher: the uses taken.
	VoucherUpdates int64
	// UseTakeCalls and UseTakeRows are pg_stat_statements' calls and rows of
	// the reserve UPDATE (VoucherUsesTake: a reserve or a batch of them;
	// a WITH statement since it numbers the rows too), when the extension
	// answers.
	UseTakeCalls, UseTakeRows int64
	own                       int64 // the harness's statements so far
}

func (p *pg) counters(ctx context.Context) (pgCounters, error) {
	// own is counted up to here: this read of pg_stat_database is the
	// window's edge, and everything the harness runs on conn after it is in
	// the next reading.
	c := pgCounters{own: p.own}
	if err := p.stats.QueryRow(ctx, `SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1`, p.dbName).
		Scan(&c.XactCommit, &c.XactRollback); err != nil {
		return c, fmt.Errorf("pg_stat_database: %w", err)
	}
	if p.statsOnDB {
		p.own++
	}
	err := p.conn.QueryRow(ctx, `SELECT
  coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'voucher_redemption'), 0),
  coalesce(sum(n_tup_upd) FILTER (WHERE relname = 'voucher'), 0)
FROM pg_stat_user_tables WHERE schemaname = current_schema()`).Scan(&c.RedemptionInserts, &c.VoucherUpdates)
	p.own++
	if err != nil {
		return c, fmt.Errorf("pg_stat_user_tables: %w", err)
	}
	if p.statements {
		err := p.conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(rows), 0)::bigint
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND (query ILIKE 'UPDATE voucher%' OR query ILIKE 'WITH taken AS%') AND query ILIKE '%used_count = used_count + $%' AND query ILIKE '%<= total_limit%'`).Scan(&c.UseTakeCalls, &c.UseTakeRows)
		p.own++
		if err != nil {
			return c, fmt.Errorf("pg_stat_statements: %w", err)
		}
	}
	return c, nil
}

// flushOwn asks this backend to report its statistics now rather than up to
// 10 s later (PostgreSQL 15+; ignored where missing).
func (p *pg) flushOwn(ctx context.Context) {
	_, _ = p.conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	p.own++
}

// dbWrites is what a sale cost the database.
type dbWrites struct {
	Transactions      int64 `json:"transactions"` // commits + rollbacks, the harness's own taken out
	Commits           int64 `json:"commits"`
	Rollbacks         int64 `json:"rollbacks"`
	RedemptionInserts int64 `json:"reserveWrites"`  // rows written into voucher_redemption (incl. rolled back)
	VoucherUpdates    int64 `json:"voucherUpdates"` // rows updated in voucher (uses taken)
	UseTakeCalls      int64 `json:"useTakeCalls,omitempty"`
	UseTakeRows       int64 `json:"useTakeRows,omitempty"`
	Statements        bool  `json:"pgStatStatements"`
}

func (p *pg) delta(before, after pgCounters, serverChecks int64) dbWrites {
	// The harness's own statements in the voucher database between the two
	// readings, plus the GraphQL voucher reads of the checks (one
	// transaction each in the server).
	own := after.own - before.own + serverChecks
	w := dbWrites{
		Commits:           after.XactCommit - before.XactCommit,
		Rollbacks:         after.XactRollback - before.XactRollback,
		RedemptionInserts: after.RedemptionInserts - before.RedemptionInserts,
		VoucherUpdates:    after.VoucherUpdates - before.VoucherUpdates,
		UseTakeCalls:      after.UseTakeCalls - before.UseTakeCalls,
		UseTakeRows:       after.UseTakeRows - before.UseTakeRows,
		Statements:        p.statements,
	}
	w.Commits = max(0, w.Commits-own)
	w.Transactions = w.Commits + w.Rollbacks
	return w
}

// saleState is what the database holds for one voucher.
type saleState struct {
	UsedCount     int            `json:"usedCount"`  // voucher.used_count
	TotalLimit    int            `json:"totalLimit"` // voucher.total_limit
	LiveRows      int            `json:"liveRows"`   // RESERVED + CONFIRMED reservations
	OverLimit     int            `json:"customersOverLimit"`
	MaxPerCust    int            `json:"maxPerCustomer"`
	PerUserLimit  int            `json:"perUserLimit"`
	Reserved      int            `json:"reservedEvents"` // reservation_event rows of kind reserved
	WriteByPath   map[string]int `json:"reserveWritesByPath"`
	BudgetUsed    int64          `json:"budgetUsed"`             // voucher.budget_used
	BudgetAmount  *int64         `json:"budgetAmount,omitempty"` // voucher.budget_amount (nil: no budget)
	LiveDiscounts int64          `json:"liveDiscounts"`          // the live rows' discounts, summed
	liveOrderJ    []int64        // the order numbers of the live rows (prefix stripped)
	foreignOrders int            // live rows whose orderId the harness did not make
}

func (p *pg) sale(ctx context.Context, code, orderPrefix string) (saleState, error) {
	var s saleState
	if err := p.conn.QueryRow(ctx, `SELECT used_count, total_limit, per_user_limit FROM voucher WHERE code = $1`, code).
		Scan(&s.UsedCount, &s.TotalLimit, &s.PerUserLimit); err != nil {
		return s, fmt.Errorf("voucher %s: %w", code, err)
	}
	p.own++
	if err := p.conn.QueryRow(ctx, `SELECT budget_used, budget_amount,
  (SELECT coalesce(sum(discount_amount), 0) FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED'))
FROM voucher WHERE code = $1`, code).Scan(&s.BudgetUsed, &s.BudgetAmount, &s.LiveDiscounts); err != nil {
		return s, fmt.Errorf("voucher %s budget: %w", code, err)
	}
	p.own++
	if err := p.conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE n > $2), coalesce(max(n), 0) FROM (
  SELECT customer_id, count(*) AS n FROM voucher_redemption
  WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED') GROUP BY customer_id) per_customer`, code, s.PerUserLimit).
		Scan(&s.OverLimit, &s.MaxPerCust); err != nil {
		return s, fmt.Errorf("per-customer count: %w", err)
	}
	p.own++
	rows, err := p.conn.Query(ctx, `SELECT order_id FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')`, code)
	if err != nil {
		return s, err
	}
	orders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	p.own++
	if err != nil {
		return s, err
	}
	s.LiveRows = len(orders)
	for _, o := range orders {
		j, err := strconv.ParseInt(strings.TrimPrefix(o, orderPrefix), 10, 64)
		if !strings.HasPrefix(o, orderPrefix) || err != nil {
			s.foreignOrders++
			continue
		}
		s.liveOrderJ = append(s.liveOrderJ, j)
	}
	rows, err = p.conn.Query(ctx, `SELECT path, count(*) FROM reservation_event WHERE voucher_code = $1 AND kind = 'reserved' GROUP BY path`, code)
	if err != nil {
		return s, err
	}
	s.WriteByPath = map[string]int{}
	for rows.Next() {
		var path string
		var n int
		if err := rows.Scan(&path, &n); err != nil {
			rows.Close()
			return s, err
		}
		s.WriteByPath[path] = n
		s.Reserved += n
	}
	rows.Close()
	p.own++
	return s, rows.Err()
}

// reservationPath is how the reserve of orderID reached the database; empty
// while it has not.
func (p *pg) reservationPath(ctx context.Context, orderID string) (string, error) {
	var path string
	err := p.conn.QueryRow(ctx, `SELECT path FROM reservation_event WHERE order_id = $1 AND kind = 'reserved' LIMIT 1`, orderID).Scan(&path)
	p.own++
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return path, err
}

// dueReservations counts live reservations past their deadline: the
// expiry job's backlog.
func (p *pg) dueReservations(ctx context.Context) (int, error) {
	var n int
	err := p.conn.QueryRow(ctx, `SELECT count(*) FROM voucher_redemption WHERE status = 'RESERVED' AND expires_at <= now()`).Scan(&n)
	p.own++
	return n, err
}

func (p *pg) liveRows(ctx context.Context, code string) (int, error) {
	var n int
	err := p.conn.QueryRow(ctx, `SELECT count(*) FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')`, code).Scan(&n)
	p.own++
	return n, err
}

func (p *pg) version(ctx context.Context) string {
	var v string
	_ = p.conn.QueryRow(ctx, `SHOW server_version`).Scan(&v)
	p.own++
	return v
}

// redisCalls are Redis's command counters (INFO commandstats): how many
// requests of a sale reached the gate, and how many sold-out snapshots
// (HGETALL) they took. Redis is shared, so others' commands may be in a
// delta too.
type redisCalls struct {
	Evalsha int64 `json:"evalsha"` // reserve.lua and the other scripts
	Hgetall int64 `json:"hgetall"` // 3 per gate snapshot
	Total   int64 `json:"total"`
	Usec    int64 `json:"usec"` // time Redis spent in commands
}

func readRedisCalls(ctx context.Context, rdb interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}) (redisCalls, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return redisCalls{}, err
	}
	var c redisCalls
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec int64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "evalsha", "eval":
			c.Evalsha += calls
		case "hgetall":
			c.Hgetall += calls
		}
		c.Total += calls
		c.Usec += usec
	}
	return c, nil
}

func (c redisCalls) minus(before redisCalls) redisCalls {
	return redisCalls{Evalsha: c.Evalsha - before.Evalsha, Hgetall: c.Hgetall - before.Hgetall, Total: c.Total - before.Total, Usec: c.Usec - before.Usec}
}

// kafkaDatabase creates, empty, the kafka-mode server's database beside
// DATABASE_URL's (its name with "_kafka"; one a run before left is dropped
// first) and returns its URL: the server migrates it at its start. A
// database is served on one write path (postgres.ClaimWritePath).
func (b *bench) kafkaDatabase(ctx context.Context) (string, error) {
	u, err := url.Parse(b.opts.DatabaseURL)
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL: %w", err)
	}
	b.kafkaDB = b.pg.dbName + "_kafka"
	name := pgx.Identifier{b.kafkaDB}.Sanitize()
	if _, err := b.pg.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("the kafka-mode server's database: %w", err)
	}
	if _, err := b.pg.conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("the kafka-mode server's database: %w", err)
	}
	b.pg.own += 2
	u.Path = "/" + b.kafkaDB
	return u.String(), nil
}

// dropKafkaDatabase drops what kafkaDatabase created (its server stopped).
func (b *bench) dropKafkaDatabase(ctx context.Context) {
	if b.kafkaDB == "" || b.pg == nil {
		return
	}
	if _, err := b.pg.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{b.kafkaDB}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(b.stderr, "the kafka-mode server's database %s not dropped: %v\n", b.kafkaDB, err)
	}
}
