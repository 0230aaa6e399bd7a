package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
)

// scenario is one row of the table.
type scenario struct {
	name  string
	title string
	kind  scenarioKind
	// flash: the voucher passes the Redis gate (else the database path).
	flash bool
	// big: the voucher has more uses than the requests, so every fresh
	// request wins (else it has -quota uses).
	big bool
	// kafka: served by a second voucherd process with FLASH_WRITE_PATH=kafka.
	kafka bool
	// presold: the voucher is sold out before the measured load starts.
	presold bool
	// terms replace the voucher's default terms for a voucher of quota uses
	// (a nil value drops one).
	terms func(quota int) map[string]any
	// campaign: the sale is on a flash campaign of unique single-use codes
	// (quota uses in all), each request naming a random code of it.
	campaign bool
	// webhook: a webhook endpoint of every event is registered for the
	// row (webhook.go).
	webhook bool
}

type scenarioKind int

const (
	kindCeiling scenarioKind = iota
	kindCeilingPlain
	kindEvalsha
	kindREST
	kindGraphQL
	kindCheck // checkVoucher over REST: nothing is held
	// A campaign's generation, then its codes' export (campaign.go): no load
	// phase, their own figures.
	kindCampaignGenerate
	kindCampaignExport
	// The open-loop rows (openloop.go): their own vouchers and table.
	kindOpenLoop
)

// scenarioCatalog is every scenario, in the order they run: the baselines
// that need no database first (while the statistics of the set-up settle).
var scenarioCatalog = []scenario{
	{name: "ceiling", title: "(a) HTTP+JSON ceiling: trivial handler, same body", kind: kindCeiling},
	{name: "ceiling-raw", title: "(a') HTTP ceiling without encoding/json", kind: kindCeilingPlain},
	{name: "evalsha", title: "(b) raw EVALSHA of lua/reserve.lua (go-redis, the server's pool)", kind: kindEvalsha},
	{name: "rest", title: "the sale: 1,000-use flash voucher over REST", kind: kindREST, flash: true},
	{name: "graphql", title: "the sale over GraphQL", kind: kindGraphQL, flash: true},
	{name: "rest-webhook", title: "the sale over REST with a webhook endpoint of every event (a receiver on loopback)", kind: kindREST, flash: true, webhook: true},
	{name: "db", title: "(c) the sale on a non-flash voucher (database path), REST", kind: kindREST},
	{name: "soldout", title: "(d) sold-out flash voucher (the late crowd), REST", kind: kindREST, flash: true, presold: true},
	{name: "soldout-graphql", title: "(d') sold-out flash voucher (the late crowd), GraphQL", kind: kindGraphQL, flash: true, presold: true},
	{name: "winners-sync", title: "winners: flash voucher too big to sell out, FLASH_WRITE_PATH=sync", kind: kindREST, flash: true, big: true},
	{name: "winners-kafka", title: "winners: flash voucher too big to sell out, FLASH_WRITE_PATH=kafka", kind: kindREST, flash: true, big: true, kafka: true},
	{name: "rest-kafka", title: "the sale over REST, FLASH_WRITE_PATH=kafka", kind: kindREST, flash: true, kafka: true},
	{name: "check-soldout", title: "(e) checkVoucher on a sold-out flash voucher, REST", kind: kindCheck, flash: true, presold: true},
	{name: "check-live", title: "(e') checkVoucher on a live flash voucher, REST", kind: kindCheck, flash: true},
	{name: "rest-percent", title: "the sale on a PERCENT voucher with a budget, REST", kind: kindREST, flash: true, terms: percentTerms},
	{name: "rest-period", title: "the sale on a flash voucher with a CUSTOMER DAY limit of 1 (counted at the gate per period), REST", kind: kindREST, flash: true, terms: periodTerms},
	{name: "campaign-sale", title: "flash campaign of 10,000 single-use codes, totalLimit 1,000, a random code a request, REST", kind: kindREST, flash: true, campaign: true},
	{name: "campaign-sale-kafka", title: "the same flash campaign's sale, FLASH_WRITE_PATH=kafka (a campaign's winners are written in the request there)", kind: kindREST, flash: true, campaign: true, kafka: true},
	{name: "campaign-check", title: "checkVoucher on a random code of a live flash campaign (10,000 codes), REST", kind: kindCheck, flash: true, campaign: true},
	{name: "campaign-generate", title: "campaign: 1,000,000 unique codes generated in the background (createCampaign to READY)", kind: kindCampaignGenerate},
	{name: "campaign-export", title: "campaign: its codes exported (GET /campaigns/{id}/codes.csv)", kind: kindCampaignExport},
	{name: "openloop", title: "open loop: the sale over REST and GraphQL and the sold-out crowd at 0.5, 0.8, 1.0 and 1.5 x their capacity, constant arrival rate (openloop.go)", kind: kindOpenLoop},
}

func findScenario(name string) *scenario {
	for i := range scenarioCatalog {
		if scenarioCatalog[i].name == name {
			return &scenarioCatalog[i]
		}
	}
	return nil
}

func (s scenario) sale() bool {
	return s.kind == kindREST || s.kind == kindGraphQL || s.kind == kindCheck
}

// needsServer: every row but the baselines talks to voucherd.
func (s scenario) needsServer() bool {
	return s.sale() || s.kind == kindCampaignGenerate || s.kind == kindCampaignExport || s.kind == kindOpenLoop
}

// percentTerms: 10 % off, at most 20.00, and a budget of exactly the quota's
// discounts (each order of the load is 250.00, so 25.00 capped at 20.00):
// the budget and the stock run out together.
func percentTerms(quota int) map[string]any {
	return map[string]any{
		"discountAmount": nil, "discountType": "PERCENT", "discountPercent": 10, "maxDiscountAmount": 2000,
		"budgetAmount": 2000 * quota,
	}
}

// periodTerms: a CUSTOMER DAY limit (issue 26: the sale rows on such a
// voucher within 10 % of the same sale without one). Its max is the
// perUserLimit, so the same requests win: what differs is the gate's work
// (the period's hash read and written, the order's periods kept).
func periodTerms(int) map[string]any {
	return map[string]any{
		"periodLimits": []map[string]any{{"scope": "CUSTOMER", "period": "DAY", "max": 1}},
		"timeZone":     "Europe/Berlin",
	}
}

// bench is one run.
type bench struct {
	opts    options
	getenv  func(string) string
	environ []string // the environment the servers start with (plus serverEnv)
	stderr  io.Writer
	runID   string
	bin     *binaries
	pg      *pg
	// pgKafka is the kafka-mode server's database: a database is served on
	// one write path (postgres.ClaimWritePath), so it is not the sync one's.
	pgKafka  *pg
	kafkaDB  string // pgKafka's database, made by the run
	api      *api   // the sync server
	kafkaAPI *api   // nil: no kafka-mode server
	noKafka  string
	sync     *server // the voucherd processes (nil with -url)
	kafka    *server
	ceiling  *server   // the ceiling process of the probes, started once
	broker   *server   // the kafka-mode server's broker process (-broker process)
	lastDB   time.Time // the last database work of a server, for the statistics' settle
	serverLg *os.File
	rdb      redis.UniversalClient // for INFO commandstats
	redisVer string
	pgVer    string
	// depPIDs are the run's PostgreSQL postmaster (its backends are its
	// children) and Redis server, when they are on this machine and could
	// be found: then no other postgres or redis-server counts as theirs.
	depPIDs   []int
	serverBin string // how the servers were run, for the report
}

func newBench(ctx context.Context, o options, getenv func(string) string, environ []string, stderr io.Writer) (*bench, error) {
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	b := &bench{opts: o, getenv: getenv, environ: environ, stderr: stderr, runID: hex.EncodeToString(id)}
	var err error
	if b.pg, err = openPG(ctx, o.DatabaseURL); err != nil {
		return nil, err
	}
	b.pgVer = b.pg.version(ctx)
	if b.rdb, err = gate.NewClient(o.RedisURL); err != nil {
		b.close()
		return nil, err
	}
	if b.bin, err = buildBinaries(ctx, stderr); err != nil {
		b.close()
		return nil, err
	}
	b.depPIDs = b.dependencyPIDs(ctx)
	return b, nil
}

// dependencyPIDs finds the PostgreSQL postmaster (the parent of this
// harness's own backend) and the Redis server of the run: other clusters and
// servers on the machine (another test's) are then not counted as the
// run's dependencies. Nothing found (a remote server): every postgres and
// redis-server process counts.
func (b *bench) dependencyPIDs(ctx context.Context) []int {
	var out []int
	var backend int
	if err := b.pg.conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err == nil {
		if ppid := parentPID(backend); ppid > 1 {
			out = append(out, ppid)
		}
	}
	if info, err := b.rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
				if pid, err := strconv.Atoi(v); err == nil && pid > 0 {
					out = append(out, pid)
				}
			}
		}
	}
	if len(out) < 2 {
		return nil // only part found: keep the old rule for all
	}
	return out
}

// servers are the running server processes.
func (b *bench) servers() []*server {
	var out []*server
	for _, s := range []*server{b.sync, b.kafka, b.ceiling, b.broker} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

func (b *bench) stopServers() {
	for _, s := range b.servers() {
		if err := s.stop(); err != nil {
			fmt.Fprintf(b.stderr, "flashbench: %s: %v\n", s.name, err)
		}
	}
	b.sync, b.kafka, b.ceiling, b.broker = nil, nil, nil, nil
}

// cpuGroups names the processes of a load on target (nil: no server).
func (b *bench) cpuGroups(target *server) cpuGroups {
	g := cpuGroups{Harness: []int{os.Getpid()}, DepParents: b.depPIDs}
	for _, s := range b.servers() {
		switch s {
		case target:
			g.Server = s.pid()
		case b.broker:
			g.Deps = append(g.Deps, s.pid())
		default:
			g.Harness = append(g.Harness, s.pid())
		}
	}
	if target != nil && g.Server == 0 {
		g.Server = target.pid()
	}
	return g
}

// load runs one load phase in a load process.
func (b *bench) load(ctx context.Context, s scenario, spec loadSpec, target *server) (*loadResult, error) {
	spec.Concurrency, spec.RetryShare, spec.Client = b.opts.Concurrency, b.opts.RetryShare, b.opts.Client
	if spec.MaxTime == 0 {
		spec.MaxTime = b.opts.MaxTime
	}
	spec.CPU = b.cpuGroups(target)
	if s.name == spec.Name && slices.Contains(splitList(b.opts.CPUProfile), s.name) {
		spec.CPUProfile, _ = filepath.Abs(filepath.Join(b.opts.Out, "cpu-"+s.name+"-load.pprof"))
		defer fmt.Fprintf(b.stderr, "%s: CPU profile of the load process in %s\n", s.name, spec.CPUProfile)
	}
	return runLoad(ctx, b.bin.flashbench, spec, b.stderr)
}

func (b *bench) close() {
	b.stopServers()
	if b.bin != nil {
		b.bin.remove()
	}
	if b.pgKafka != nil {
		b.pgKafka.close(context.Background())
		b.dropKafkaDatabase(context.Background())
	}
	if b.pg != nil {
		b.pg.close(context.Background())
	}
	if b.rdb != nil {
		_ = b.rdb.Close()
	}
	if b.serverLg != nil {
		b.serverLg.Close()
	}
}

func (b *bench) selected() []scenario {
	only := splitList(b.opts.Only)
	var out []scenario
	for _, s := range scenarioCatalog {
		if len(only) == 0 || slices.Contains(only, s.name) {
			out = append(out, s)
		}
	}
	return out
}

// serverEnv is what the voucherd processes run with besides the
// environment: loopback, the bench's tokens, and jobs that do not run during
// the measurements (they run once at start).
func (b *bench) serverEnv(writePath string) map[string]string {
	return map[string]string{
		"HTTP_ADDR":          "127.0.0.1:0",
		"DATABASE_URL":       b.opts.DatabaseURL,
		"REDIS_URL":          b.opts.RedisURL,
		"STOREFRONT_TOKENS":  benchStorefrontToken,
		"ADMIN_TOKENS":       benchAdminToken,
		"FLASH_WRITE_PATH":   writePath,
		"EXPIRY_INTERVAL":    "1h",
		"RECONCILE_INTERVAL": "1h",
		"WARMUP_INTERVAL":    "1h",
		"LOG_LEVEL":          or(b.getenv("LOG_LEVEL"), "warn"),
		"APP_ENV":            "",
	}
}

func (b *bench) startServers(ctx context.Context, wantKafka bool) error {
	if b.opts.URL != "" {
		b.api = newAPI(b.opts.URL, b.opts.StorefrontToken, b.opts.AdminToken)
		if wantKafka {
			if b.opts.KafkaURL == "" {
				b.noKafka = "kafka path not available (with -url, give -kafka-url)"
			} else {
				b.kafkaAPI = newAPI(b.opts.KafkaURL, b.opts.StorefrontToken, b.opts.AdminToken)
			}
		}
		return nil
	}
	lg, err := os.Create(filepath.Join(b.opts.Out, "server.log"))
	if err != nil {
		return err
	}
	b.serverLg = lg
	start := func(name, writePath string) (*server, error) {
		return startServer(ctx, name, b.bin.voucherd, []string{"serve"}, withEnv(b.environ, b.serverEnv(writePath)), voucherdBanner, "/readyz", lg)
	}
	s, err := start("voucherd (sync)", "sync")
	if err != nil {
		return err
	}
	b.sync = s
	b.api = newAPI(s.URL, benchStorefrontToken, benchAdminToken)
	if wantKafka {
		// KAFKA_BROKERS from the environment is kept. Without it the broker
		// is kfake in a process of its own (-broker process), or voucherd's
		// in-process one (-broker inprocess), whose CPU is then the server's.
		extra := map[string]string{}
		if b.getenv("KAFKA_BROKERS") == "" && b.opts.Broker == "process" {
			br, err := startServer(ctx, "broker", b.bin.flashbench, []string{"broker"}, b.environ, brokerBanner, "", lg)
			if err != nil {
				return err
			}
			b.broker = br
			extra["KAFKA_BROKERS"] = br.URL
		}
		// The kafka-mode server's pprof is KAFKA_DEBUG_ADDR; DEBUG_ADDR is
		// the sync one's (two servers cannot listen on one address).
		extra["DEBUG_ADDR"] = b.getenv("KAFKA_DEBUG_ADDR")
		url, err := b.kafkaDatabase(ctx)
		if err != nil {
			return err
		}
		extra["DATABASE_URL"] = url
		k, err := startServer(ctx, "voucherd (kafka)", b.bin.voucherd, []string{"serve"}, withEnv(b.environ, merge(b.serverEnv("kafka"), extra)), voucherdBanner, "/readyz", lg)
		if err != nil {
			b.noKafka = "kafka path not available: " + err.Error()
		} else if b.pgKafka, err = openPG(ctx, url); err != nil {
			return err
		} else {
			b.kafka = k
			b.kafkaAPI = newAPI(k.URL, benchStorefrontToken, benchAdminToken)
		}
	}
	return nil
}

func merge(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// prepared is a scenario's voucher, made before any measurement.
type prepared struct {
	code, orderPrefix string
	quota             int
	api               *api
	server            *server // the process behind api (nil with -url)
	pg                *pg     // the database behind server
	presold           int
	probes            int              // orders reserved by the kafka probe
	skip              string           // why the row has no number
	campaign          *campaignFigures // a campaign sale's campaign
	codes             []string         // and its codes
}

// code is a scenario's voucher code, in capitals: the form voucherd stores and
// answers (codes are case-insensitive), which the report reads back.
func (b *bench) code(s scenario) string { return strings.ToUpper("fb-" + s.name + "-" + b.runID) }

// prepare makes the voucher of a sale scenario's attempt.
func (b *bench) prepare(ctx context.Context, s scenario, attempt int) (*prepared, error) {
	p := &prepared{code: b.code(s), quota: b.opts.Quota, api: b.api, server: b.sync, pg: b.pg}
	if attempt > 1 {
		p.code += "-" + strconv.Itoa(attempt)
	}
	p.orderPrefix = p.code + "-"
	requests := b.opts.Requests
	if s.name == "db" {
		requests = b.opts.DBRequests
	}
	if s.big {
		p.quota = int(requests) + b.opts.Quota
	}
	if s.kafka && !s.big && !s.campaign {
		// The kafka probe below takes one use: the sale still sells the
		// quota to the load.
		p.quota++
	}
	if s.kafka {
		if b.kafkaAPI == nil {
			p.skip = b.noKafka
			return p, nil
		}
		// With -url, -kafka-url's database is DATABASE_URL's.
		p.api, p.server, p.pg = b.kafkaAPI, b.kafka, cmp.Or(b.pgKafka, b.pg)
	}
	if s.campaign {
		return p, b.prepareCampaign(ctx, s, p)
	}
	var terms map[string]any
	if s.terms != nil {
		terms = s.terms(p.quota)
	}
	if err := p.api.createVoucher(ctx, p.code, p.quota, s.flash, terms); err != nil {
		return nil, err
	}
	if s.presold {
		if err := b.presell(ctx, p); err != nil {
			return nil, err
		}
	}
	if s.kafka {
		if why, err := b.probeKafka(ctx, p); err != nil {
			return nil, err
		} else if why != "" {
			p.skip = why
		}
	}
	return p, nil
}

// presell sells the whole quota to other customers before the late crowd.
func (b *bench) presell(ctx context.Context, p *prepared) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(p.quota) {
					return
				}
				status, body, err := p.api.reserve(ctx, p.code, p.orderPrefix+"pre-"+strconv.FormatInt(i, 10), 2*customerBase+i)
				// A server still shedding the excess of an open-loop row
				// refused it and did nothing: sent again, as a storefront
				// would after Retry-After.
				for try := 0; err == nil && status == http.StatusServiceUnavailable && try < 50; try++ {
					time.Sleep(100 * time.Millisecond)
					status, body, err = p.api.reserve(ctx, p.code, p.orderPrefix+"pre-"+strconv.FormatInt(i, 10), 2*customerBase+i)
				}
				if err == nil && status != http.StatusCreated {
					err = fmt.Errorf("presell: HTTP %d %s", status, body)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	p.presold = p.quota
	return nil
}

// probeKafka reserves one order on the kafka-mode server and looks at how
// its write reached the database: only path "kafka" means the server does
// what FLASH_WRITE_PATH=kafka says.
func (b *bench) probeKafka(ctx context.Context, p *prepared) (string, error) {
	order := p.orderPrefix + "probe"
	status, body, err := p.api.reserve(ctx, p.code, order, 3*customerBase)
	if err != nil {
		return "", err
	}
	if status != http.StatusCreated {
		return fmt.Sprintf("kafka path not available (probe reserve: HTTP %d %.80s)", status, body), nil
	}
	p.probes = 1
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		path, err := p.pg.reservationPath(ctx, order)
		if err != nil {
			return "", err
		}
		switch path {
		case "":
		case "kafka":
			return "", nil
		default:
			return fmt.Sprintf("kafka path not available (the server accepts FLASH_WRITE_PATH=kafka but wrote the winner in the request: path %s)", path), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "kafka path not available (the probe's write did not reach the database within 15s)", nil
}

// run plays every selected scenario.
func (b *bench) run(ctx context.Context) (*report, error) {
	scenarios := b.selected()
	wantKafka := slices.ContainsFunc(scenarios, func(s scenario) bool {
		return s.kafka || (s.kind == kindOpenLoop && slices.ContainsFunc(splitList(b.opts.OpenScenarios), func(name string) bool { return findScenario(name).kafka }))
	})
	needServer := slices.ContainsFunc(scenarios, func(s scenario) bool { return s.needsServer() })
	rep := newReport(b)
	if needServer {
		fmt.Fprintln(b.stderr, "flashbench: starting voucherd serve in its own process")
		if err := b.startServers(ctx, wantKafka); err != nil {
			return nil, err
		}
	}
	if needServer && b.opts.URL == "" {
		if err := b.waitForExpiry(ctx); err != nil {
			return nil, err
		}
	}
	preps := map[string]*prepared{}
	var generated *campaignFigures // the generation row's campaign, exported by the export row
	var made []*prepared           // every voucher of the run, for the clean-up
	for _, s := range scenarios {
		if !s.sale() {
			continue
		}
		p, err := b.prepare(ctx, s, 1)
		if err != nil {
			return nil, fmt.Errorf("%s: set-up: %w", s.name, err)
		}
		preps[s.name] = p
		made = append(made, p)
	}
	b.lastDB = time.Now()
	b.redisVer = redisVersion(ctx, b.opts.RedisURL)

	for _, s := range scenarios {
		if s.kind == kindOpenLoop {
			ol, err := b.runOpenLoop(ctx)
			if err != nil {
				return nil, err
			}
			rep.OpenLoop = ol
			continue
		}
		// A measurement during which other processes took a share of the
		// cores is made again (on a fresh voucher), and the least disturbed
		// attempt is kept.
		var best *scenarioResult
		for attempt := 1; ; attempt++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if attempt > 1 && s.sale() {
				p, err := b.prepare(ctx, s, attempt)
				if err != nil {
					return nil, fmt.Errorf("%s: set-up: %w", s.name, err)
				}
				preps[s.name] = p
				made = append(made, p)
				b.lastDB = time.Now()
			}
			var res *scenarioResult
			var err error
			switch s.kind {
			case kindCeiling, kindCeilingPlain:
				res, err = b.runCeiling(ctx, s)
			case kindEvalsha:
				res, err = b.runEvalsha(ctx, s)
			case kindCampaignGenerate:
				res, generated, err = b.runCampaignGenerate(ctx, s)
			case kindCampaignExport:
				res, err = b.runCampaignExport(ctx, s, generated)
			default:
				res, err = b.runSale(ctx, s, preps[s.name])
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			res.Attempt, res.Disturbance = attempt, max(res.CPU.Other, res.probeCPU.Other)
			res.little(b.opts.Concurrency, b.opts.LittleTolerance)
			if best == nil || res.Disturbance < best.Disturbance {
				best = res
			}
			if res.Skipped != "" || res.Disturbance <= b.opts.MaxOther || attempt >= b.opts.Attempts {
				break
			}
			fmt.Fprintf(b.stderr, "%s: other processes used %.2f cores during the measurement; measuring it again\n", s.name, res.Disturbance)
		}
		rep.add(best)
	}
	rep.finish()
	b.cleanUp(context.WithoutCancel(ctx), made)
	return rep, nil
}

// startCeiling starts `flashbench ceiling` (the trivial handler in its own
// process).
func (b *bench) startCeiling(ctx context.Context, plain bool) (*server, error) {
	args, name := []string{"ceiling"}, "ceiling"
	if plain {
		args, name = append(args, "-plain"), "ceiling (plain)"
	}
	// The ceiling collects garbage as voucherd does: voucherd sets GOGC 400
	// for itself unless the environment sets GOGC.
	env := b.environ
	if b.getenv("GOGC") == "" {
		env = withEnv(env, map[string]string{"GOGC": "400"})
	}
	return startServer(ctx, name, b.bin.flashbench, args, env, ceilingBanner, "", b.stderr)
}

// ceilingSpec is a load of the ceiling server at base.
func (b *bench) ceilingSpec(name, base string, requests int64) loadSpec {
	return loadSpec{
		Name: name, Kind: "http", Base: base, Path: "/vouchers/fb-ceiling-" + b.runID + "/reservations", Token: benchStorefrontToken,
		Body: "rest", Classify: "ceiling", OrderPrefix: "fb-ceiling-" + b.runID + "-", Requests: requests,
	}
}

// probeCeiling measures the HTTP+JSON ceiling again, just before scenario s.
func (b *bench) probeCeiling(ctx context.Context, s scenario) (float64, cpuUse, error) {
	if b.opts.CeilingProbe <= 0 {
		return 0, cpuUse{}, nil
	}
	if b.ceiling == nil {
		c, err := b.startCeiling(ctx, false)
		if err != nil {
			return 0, cpuUse{}, err
		}
		b.ceiling = c
	}
	lr, err := b.load(ctx, s, b.ceilingSpec("ceiling>"+s.name, b.ceiling.URL, b.opts.CeilingProbe), b.ceiling)
	if err != nil {
		return 0, cpuUse{}, fmt.Errorf("ceiling probe: %w", err)
	}
	return float64(lr.Requests) / lr.Elapsed.Seconds(), lr.CPU, nil
}

func (b *bench) runCeiling(ctx context.Context, s scenario) (*scenarioResult, error) {
	c, err := b.startCeiling(ctx, s.kind == kindCeilingPlain)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	lr, err := b.load(ctx, s, b.ceilingSpec(s.name, c.URL, b.opts.Requests), c)
	if err != nil {
		return nil, err
	}
	res := newResult(s, lr)
	res.check("all answered 201", lr.Outcomes["OK"]+lr.Outcomes["retry OK"] == lr.Requests, fmt.Sprintf("%d of %d", lr.Outcomes["OK"]+lr.Outcomes["retry OK"], lr.Requests))
	return res, nil
}

// runEvalsha floods a throwaway gate (keys of a unique code, never a real
// voucher's) with reserve.lua from the load process, through the same
// go-redis client settings as the server, then deletes its keys.
func (b *bench) runEvalsha(ctx context.Context, s scenario) (*scenarioResult, error) {
	rdb, err := gate.NewClient(b.opts.RedisURL)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	code := b.code(s)
	p := "voucher:{" + code + "}:"
	keys := []string{p + "stock", p + "customers", p + "orders", p + "paused", p + "meta"} // reserve.lua's KEYS
	defer func() { _ = rdb.Del(context.WithoutCancel(ctx), keys...).Err() }()
	if err := rdb.Set(ctx, keys[0], b.opts.Quota, 10*time.Minute).Err(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	spec := loadSpec{Name: s.name, Kind: "evalsha", RedisURL: b.opts.RedisURL, Keys: keys, OrderPrefix: code + "-", Requests: b.opts.Requests}
	ceiling, probeCPU, err := b.probeCeiling(ctx, s)
	if err != nil {
		return nil, err
	}
	lr, err := b.load(ctx, s, spec, nil)
	if err != nil {
		return nil, err
	}
	res := newResult(s, lr)
	res.Ceiling, res.probeCPU = ceiling, probeCPU
	sold := lr.UniqueSuccesses()
	res.Sold = &sold
	stock, err := rdb.Get(ctx, keys[0]).Int64()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	admitted := lr.Outcomes["ADMITTED"] + lr.Outcomes["retry ADMITTED"]
	res.check("admitted == quota", admitted == int64(b.opts.Quota), fmt.Sprintf("%d admitted of %d", admitted, b.opts.Quota))
	res.check("stock left == quota - admitted", stock == int64(b.opts.Quota)-admitted, fmt.Sprintf("stock %d", stock))
	res.check("no Redis errors", lr.Outcomes["REDIS_ERROR"]+lr.Outcomes["retry REDIS_ERROR"] == 0, lr.FirstError)
	return res, nil
}

// settle waits until every backend has reported the statistics of the
// server's last database work.
func (b *bench) settle(ctx context.Context) {
	if b.opts.StatsSettle <= 0 {
		return
	}
	wait := time.Until(b.lastDB.Add(b.opts.StatsSettle))
	if wait <= 0 {
		return
	}
	fmt.Fprintf(b.stderr, "waiting %.1fs for PostgreSQL's statistics to settle\n", wait.Seconds())
	select {
	case <-ctx.Done():
	case <-time.After(wait):
	}
}

func (b *bench) runSale(ctx context.Context, s scenario, p *prepared) (*scenarioResult, error) {
	if p.skip != "" {
		res := &scenarioResult{Name: s.name, Title: s.title, Skipped: p.skip}
		return res, nil
	}
	requests, maxTime := b.opts.Requests, b.opts.MaxTime
	if s.name == "db" {
		requests = b.opts.DBRequests
	}
	if s.name == "db" || s.name == "winners-sync" {
		maxTime = min(maxTime, b.opts.MaxTimeSlow)
	}
	spec := loadSpec{
		Name: s.name, Kind: "http", Base: p.api.base, Path: "/vouchers/" + p.code + "/reservations", Token: p.api.storefront,
		Body: "rest", Classify: "rest", Code: p.code, OrderPrefix: p.orderPrefix, Requests: requests, MaxTime: maxTime,
	}
	switch {
	case s.campaign && s.kind == kindCheck:
		spec.Path, spec.Body, spec.Classify, spec.Codes = "/vouchers/", "campaign-check", "check", p.codes
	case s.campaign:
		spec.Path, spec.Body, spec.Codes = "/vouchers/", "campaign", p.codes
	case s.kind == kindGraphQL:
		spec.Path, spec.Body, spec.Classify = "/graphql", "graphql", "graphql"
	case s.kind == kindCheck:
		spec.Path, spec.Body, spec.Classify = "/vouchers/"+p.code+"/checks", "check", "check"
	}

	b.settle(ctx)
	ceiling, probeCPU, err := b.probeCeiling(ctx, s)
	if err != nil {
		return nil, err
	}
	var before pgCounters
	if b.opts.StatsSettle > 0 {
		if before, err = p.pg.counters(ctx); err != nil {
			return nil, err
		}
	}
	var webhookAfter func(*scenarioResult, int64)
	if s.webhook {
		if webhookAfter, err = b.withWebhook(ctx, p); err != nil {
			return nil, err
		}
	}
	redisBefore, redisErr := readRedisCalls(ctx, b.rdb)
	cpuBefore := sampleCPU(b.cpuGroups(p.server))
	lr, err := b.load(ctx, s, spec, p.server)
	if err != nil {
		return nil, err
	}
	res := newResult(s, lr)
	res.Ceiling, res.probeCPU = ceiling, probeCPU
	if redisAfter, err := readRedisCalls(ctx, b.rdb); err == nil && redisErr == nil {
		d := redisAfter.minus(redisBefore)
		res.Redis = &d
	}
	sold := lr.UniqueSuccesses()
	res.Sold = &sold
	if q := p.quota - p.presold - p.probes; !s.big && q > 0 && len(lr.SuccessTimes) >= q {
		ms := float64(lr.SuccessTimes[q-1].Microseconds()) / 1000
		res.SoldOutMs = &ms
		res.AfterSoldOut = rateAfter(lr, lr.SuccessTimes[q-1])
	}

	// The kafka path answers before the write: wait for the consumer (a
	// flash campaign's winners are written in the request on either path).
	if s.kafka && !s.campaign {
		start := time.Now()
		want := int(sold) + p.probes
		var live int
		for time.Since(start) < 2*time.Minute {
			if live, err = p.pg.liveRows(ctx, p.code); err != nil {
				return nil, err
			}
			if live >= want {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		res.CatchUp = time.Since(start)
		res.check("consumer caught up", live >= want, fmt.Sprintf("%d of %d rows after %s", live, want, res.CatchUp.Round(time.Millisecond)))
	}
	if s.big && sold > 0 {
		res.PerWinner = perWinner(cpuBefore, sampleCPU(b.cpuGroups(p.server)), sold)
	}
	if webhookAfter != nil {
		webhookAfter(res, sold)
	}

	if s.campaign {
		// A campaign's counts are its own (campaign(id), the export), not a
		// voucher row's.
		if err := b.checkCampaignSale(ctx, s, p, res, lr, sold); err != nil {
			return nil, err
		}
		res.check("no failed requests (UNAVAILABLE, INTERNAL, transport, GraphQL errors)", failedAnswers(lr) == 0,
			fmt.Sprintf("%d failed; first transport error: %s", failedAnswers(lr), lr.FirstError))
		b.lastDB = time.Now()
		return res, nil
	}
	counts, gqlErr := p.api.voucher(ctx, p.code)
	b.lastDB = time.Now()
	state, err := p.pg.sale(ctx, p.code, p.orderPrefix)
	if err != nil {
		return nil, err
	}
	res.State = &state
	if gqlErr == nil {
		res.GraphQLUsed = &counts.UsedCount
		res.GateRemaining = counts.GateRemaining
	}
	p.pg.flushOwn(ctx)
	if b.opts.StatsSettle > 0 {
		b.settle(ctx)
		after, err := p.pg.counters(ctx)
		if err != nil {
			return nil, err
		}
		w := p.pg.delta(before, after, 1)
		res.DB = &w
	}
	b.checkSale(res, s, p, lr, state, counts, gqlErr)
	return res, nil
}

func (b *bench) checkSale(res *scenarioResult, s scenario, p *prepared, lr *loadResult, st saleState, counts voucherCounts, gqlErr error) {
	sold := lr.UniqueSuccesses()
	extra := int64(p.presold + p.probes) // live rows the load did not make
	quota := int64(p.quota)

	res.check("never more than the quota", int64(st.LiveRows) <= quota && int64(st.UsedCount) <= quota && sold+extra <= quota,
		fmt.Sprintf("live rows %d, used_count %d, successes %d+%d, quota %d", st.LiveRows, st.UsedCount, sold, extra, quota))
	if gqlErr != nil {
		res.check("usedCount (GraphQL) == successes", false, gqlErr.Error())
	} else {
		res.check("successes == usedCount (GraphQL) == used_count == live rows (SQL)",
			sold+extra == int64(counts.UsedCount) && counts.UsedCount == st.UsedCount && st.UsedCount == st.LiveRows,
			fmt.Sprintf("successes %d+%d, usedCount %d, used_count %d, live rows %d", sold, extra, counts.UsedCount, st.UsedCount, st.LiveRows))
	}
	// Every success is in the database and every live row was a success.
	inDB := make(map[int64]bool, len(st.liveOrderJ))
	var notAnswered int
	for _, j := range st.liveOrderJ {
		inDB[j] = true
		if j < 0 || j >= int64(len(lr.SuccessOrders)) || !lr.SuccessOrders[j] {
			notAnswered++
		}
	}
	var lost int
	for j, ok := range lr.SuccessOrders {
		if ok && !inDB[int64(j)] {
			lost++
		}
	}
	res.check("each success is a live row and each live row a success", lost == 0 && notAnswered == 0 && st.foreignOrders == int(extra),
		fmt.Sprintf("%d successes not in the database, %d rows never answered success, %d other rows (want %d)", lost, notAnswered, st.foreignOrders, extra))
	if st.BudgetAmount != nil {
		res.check("budget held: the live discounts are budget_used, within budgetAmount", st.BudgetUsed == st.LiveDiscounts && st.BudgetUsed <= *st.BudgetAmount,
			fmt.Sprintf("budget_used %d, live discounts %d, budget %d", st.BudgetUsed, st.LiveDiscounts, *st.BudgetAmount))
	}
	res.check("per-customer bound held", st.OverLimit == 0, fmt.Sprintf("%d customers over %d (max %d)", st.OverLimit, st.PerUserLimit, st.MaxPerCust))

	fresh := lr.Requests - retries(lr)
	switch {
	case s.kind == kindCheck:
		want, answers := "DISCOUNT", lr.Outcomes["DISCOUNT"]+lr.Outcomes["retry DISCOUNT"]
		if s.presold {
			want, answers = "OUT_OF_STOCK", lr.Outcomes["OUT_OF_STOCK"]+lr.Outcomes["retry OUT_OF_STOCK"]
		}
		res.check("checks held nothing and each answered "+want, sold == 0 && int64(st.UsedCount) == extra && int64(st.LiveRows) == extra && answers == lr.Requests,
			fmt.Sprintf("%d of %d answered %s; used_count %d, live rows %d, want %d", answers, lr.Requests, want, st.UsedCount, st.LiveRows, extra))
	case s.presold:
		res.check("late crowd gets nothing", sold == 0, fmt.Sprintf("%d successes", sold))
	case s.big:
		res.check("every fresh request won", sold == fresh, fmt.Sprintf("%d of %d", sold, fresh))
	case fresh >= quota:
		// The probe's use (kafka) is not the load's to sell.
		res.check("sold out: exactly the quota", sold == quota-int64(p.probes), fmt.Sprintf("%d of %d", sold, quota-int64(p.probes)))
	}
	failures := failedAnswers(lr)
	res.check("no failed requests (UNAVAILABLE, INTERNAL, transport, GraphQL errors)", failures == 0, fmt.Sprintf("%d failed; first transport error: %s", failures, lr.FirstError))
	if res.DB != nil && s.flash {
		limit, what := int64(st.Reserved)+10, "reserve writes <= winners + 10"
		if !s.big && !s.presold {
			limit, what = quota+10, "reserve writes <= quota + 10"
		}
		if s.presold {
			limit, what = 10, "reserve writes <= 10"
		}
		res.check(what, res.DB.RedemptionInserts <= limit, fmt.Sprintf("%d reserve writes, %d transactions", res.DB.RedemptionInserts, res.DB.Transactions))
	}
}

// rateAfter is the throughput from the first whole timeline step after t to
// the end of the load (0 when less than a second is left).
func rateAfter(lr *loadResult, t time.Duration) float64 {
	first := int(t/timelineStep) + 1
	span := lr.Elapsed - time.Duration(first)*timelineStep
	if first >= len(lr.Timeline) || span < time.Second {
		return 0
	}
	var n int64
	for _, c := range lr.Timeline[first:] {
		n += c
	}
	return float64(n) / span.Seconds()
}

func retries(lr *loadResult) int64 {
	var n int64
	for k, v := range lr.Outcomes {
		if len(k) > 6 && k[:6] == "retry " {
			n += v
		}
	}
	return n
}

func redisVersion(ctx context.Context, redisURL string) string {
	rdb, err := gate.NewClient(redisURL)
	if err != nil {
		return ""
	}
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

// cleanUp ends the run's vouchers (the database keeps them and their
// reservations, which expire as any others), stops the servers and deletes
// the vouchers' gate keys, which no warm-up loads again once they ended.
func (b *bench) cleanUp(ctx context.Context, preps []*prepared) {
	for _, p := range preps {
		if p.skip != "" && p.probes == 0 {
			continue
		}
		if err := p.api.endVoucher(ctx, p.code); err != nil {
			fmt.Fprintf(b.stderr, "flashbench: could not end voucher %s: %v\n", p.code, err)
		}
	}
	if b.opts.URL != "" {
		return // the gate belongs to that server
	}
	b.stopServers()
	for _, p := range preps {
		k := "voucher:{" + p.code + "}:"
		_ = b.rdb.Unlink(ctx, k+"stock", k+"customers", k+"orders", k+"meta", k+"paused").Err()
	}
}

// waitForExpiry waits until the server's first expiry pass (it
// runs at start; the next one an hour later) has released the reservations
// that came due since the last server ran (earlier runs leave thousands), so
// that work does not run during a measurement: until none is due, or the
// backlog has stopped shrinking for a few seconds (the pass is over; what
// comes due later waits for a pass after the run).
func (b *bench) waitForExpiry(ctx context.Context) error {
	const poll, still = time.Second, 4
	last, unchanged := -1, 0
	for {
		n, err := b.pg.dueReservations(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if last >= 0 && n >= last {
			unchanged++
		} else {
			unchanged = 0
		}
		if unchanged >= still {
			return nil
		}
		if last != n {
			fmt.Fprintf(b.stderr, "waiting for the expiry job's first pass: %d reservations past their deadline\n", n)
		}
		last = n
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// failedAnswers counts the answers that are failures whatever the sale:
// UNAVAILABLE, INTERNAL, transport and GraphQL errors, retries included.
func failedAnswers(lr *loadResult) int64 {
	return lr.Outcomes["UNAVAILABLE"] + lr.Outcomes["retry UNAVAILABLE"] + lr.Outcomes["INTERNAL"] + lr.Outcomes["retry INTERNAL"] +
		lr.Outcomes["TRANSPORT_ERROR"] + lr.Outcomes["retry TRANSPORT_ERROR"] + lr.Outcomes["GRAPHQL_ERROR"] + lr.Outcomes["retry GRAPHQL_ERROR"]
}
