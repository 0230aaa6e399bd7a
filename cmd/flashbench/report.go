package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// checkResult is one verified property of a scenario.
type checkResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// scenarioResult is one row of the table and its details.
type scenarioResult struct {
	Name       string   `json:"name"`
	Title      string   `json:"title"`
	Skipped    string   `json:"skipped,omitempty"`
	Requests   int64    `json:"requests"`
	Seconds    float64  `json:"seconds"`
	Throughput float64  `json:"throughputPerSec"`
	Ratio      *float64 `json:"ratioToCeiling,omitempty"`
	// Ceiling is the HTTP+JSON ceiling measured just before this scenario
	// (the ratio's denominator), so a machine whose other load drifts during
	// the run skews the ratios less.
	Ceiling float64 `json:"ceilingNextToItPerSec,omitempty"`
	CPU     cpuUse  `json:"cpuCores"`
	P50     float64 `json:"p50Ms"`
	P90     float64 `json:"p90Ms"`
	P99     float64 `json:"p99Ms"`
	P999    float64 `json:"p999Ms"`
	Max     float64 `json:"maxMs"`
	Mean    float64 `json:"meanMs"`
	// Little's law for a closed loop of C connections: C / throughput is the
	// mean time a request spends in the loop, which the measured mean
	// latency should match; a measurement that misses part of a request's
	// time (a client that queues before it times, a stalled worker) shows
	// as a disagreement.
	Connections int              `json:"connections"`
	LittleMs    float64          `json:"littleMs"`       // C / throughput
	LittleOff   float64          `json:"littleOffShare"` // |mean - C/throughput| / (C/throughput)
	LittleOK    bool             `json:"littleOK"`
	Outcomes    map[string]int64 `json:"outcomes"`
	Successes   int64            `json:"successAnswers"`
	Sold        *int64           `json:"sold,omitempty"`           // distinct orders answered with success
	SoldOutMs   *float64         `json:"soldOutAfterMs,omitempty"` // when the quota-th success answer arrived
	// AfterSoldOut is the throughput from the sell-out on: the late crowd of
	// the same run, without the selling phase's database writes.
	AfterSoldOut  float64       `json:"throughputAfterSoldOutPerSec,omitempty"`
	StoppedEarly  bool          `json:"stoppedByMaxTime,omitempty"`
	FirstError    string        `json:"firstError,omitempty"`
	GraphQLUsed   *int          `json:"usedCountGraphQL,omitempty"`
	GateRemaining *int          `json:"gateRemaining,omitempty"`
	State         *saleState    `json:"database,omitempty"`
	DB            *dbWrites     `json:"databaseWrites,omitempty"`
	Redis         *redisCalls   `json:"redisCalls,omitempty"`
	CatchUp       time.Duration `json:"-"`
	CatchUpSec    float64       `json:"consumerCatchUpSec,omitempty"`
	Checks        []checkResult `json:"checks"`
	// Campaign is a campaign row's own figures (campaign.go).
	Campaign *campaignFigures `json:"campaign,omitempty"`
	// PerWinner is the machine's CPU per winner of a winners row (cpu.go).
	PerWinner *winnerCPU `json:"cpuPerWinner,omitempty"`
	// Attempt is which measurement of the row this is; Disturbance the
	// cores other processes used during it or its ceiling probe.
	Attempt     int     `json:"attempt"`
	Disturbance float64 `json:"otherProcessesCores"`
	probeCPU    cpuUse
	OK          bool    `json:"ok"`
	Histogram   []int64 `json:"histogram"` // counts per bucket of histogramEdges
	Timeline    []int64 `json:"completionsPer100ms"`
}

func newResult(s scenario, lr *loadResult) *scenarioResult {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r := &scenarioResult{
		Name: s.name, Title: s.title, Requests: lr.Requests, Seconds: lr.Elapsed.Seconds(),
		Throughput: float64(lr.Requests) / lr.Elapsed.Seconds(),
		P50:        ms(percentile(lr.Latencies, 0.50)), P90: ms(percentile(lr.Latencies, 0.90)),
		P99: ms(percentile(lr.Latencies, 0.99)), P999: ms(percentile(lr.Latencies, 0.999)),
		Outcomes: lr.Outcomes, Successes: lr.Successes, StoppedEarly: lr.Stopped, FirstError: lr.FirstError,
		Histogram: histogram(lr.Latencies), Timeline: lr.Timeline, CPU: lr.CPU,
	}
	if n := len(lr.Latencies); n > 0 {
		r.Max = ms(time.Duration(lr.Latencies[n-1]))
		var sum float64
		for _, v := range lr.Latencies {
			sum += float64(v)
		}
		r.Mean = sum / float64(n) / 1e6
	}
	return r
}

// little compares the mean latency with connections / throughput.
func (r *scenarioResult) little(connections int, tolerance float64) {
	if r.Skipped != "" || r.Throughput <= 0 {
		return
	}
	r.Connections = connections
	r.LittleMs = float64(connections) / r.Throughput * 1000
	r.LittleOff = math.Abs(r.Mean-r.LittleMs) / r.LittleMs
	r.LittleOK = r.LittleOff <= tolerance
}

func (r *scenarioResult) check(name string, ok bool, detail string) {
	r.Checks = append(r.Checks, checkResult{Name: name, OK: ok, Detail: detail})
}

// histogramEdges are the latency buckets: 20 a decade from 10 µs to 10 s.
var histogramEdges = func() []float64 {
	var e []float64
	for i := 0; i <= 6*20; i++ {
		e = append(e, 1e4*math.Pow(10, float64(i)/20)) // nanoseconds
	}
	return e
}()

func histogram(sorted []int64) []int64 {
	h := make([]int64, len(histogramEdges)+1)
	b := 0
	for _, v := range sorted {
		for b < len(histogramEdges) && float64(v) >= histogramEdges[b] {
			b++
		}
		h[b]++
	}
	return h
}

// machine describes where the run ran.
type machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	MemoryGiB  int    `json:"memoryGiB"`
	Kernel     string `json:"kernel"`
	Go         string `json:"go"`
	PostgreSQL string `json:"postgresql"`
	Redis      string `json:"redis"`
	// GOGC is the environment's; empty means voucherd's serve set 400.
	GOGC string `json:"gogc,omitempty"`
}

func describeMachine(pgVer, redisVer string) machine {
	m := machine{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), PostgreSQL: pgVer, Redis: redisVer, GOGC: os.Getenv("GOGC")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryGiB = int(math.Round(float64(kb) / (1 << 20)))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return m
}

// target is one of issue 6's targets, as measured in this run.
type target struct {
	Scenario string `json:"scenario"`
	Want     string `json:"target"`
	Measured string `json:"measured"`
	Met      *bool  `json:"met,omitempty"` // nil: not measured in this run
}

// report is the whole run.
type report struct {
	Started   time.Time         `json:"started"`
	Command   string            `json:"command"`
	Machine   machine           `json:"machine"`
	Settings  map[string]string `json:"settings"`
	Scenarios []*scenarioResult `json:"scenarios"`
	Targets   []target          `json:"targets"`
	EdgesNs   []float64         `json:"histogramEdgesNs"`
	Tree      string            `json:"tree"` // git commit of the tree measured, "+dirty" with local changes
	// Processes says how the run was laid out: the server, the load and the
	// ceiling as separate OS processes.
	Processes   string `json:"processes"`
	StatsSource string `json:"statsSource"`
	// OpenLoop is the open-loop rows (openloop.go), when run.
	OpenLoop *openLoopReport `json:"openLoop,omitempty"`
	b        *bench
}

func newReport(b *bench) *report {
	o := b.opts
	r := &report{
		Started: time.Now().UTC(), EdgesNs: histogramEdges, b: b,
		Processes: processes(o, b.getenv("KAFKA_BROKERS")),
		// The tree as the run starts (go run has just built it); a commit
		// made during the run is not what was measured.
		Tree: gitTree(),
		Settings: map[string]string{
			"concurrency":      strconv.Itoa(o.Concurrency),
			"client":           o.Client,
			"requests":         strconv.FormatInt(o.Requests, 10),
			"requests db":      strconv.FormatInt(o.DBRequests, 10),
			"max time":         o.MaxTime.String(),
			"max time slow":    o.MaxTimeSlow.String(),
			"retry share":      strconv.FormatFloat(o.RetryShare, 'f', -1, 64),
			"quota":            strconv.Itoa(o.Quota),
			"stats settle":     o.StatsSettle.String(),
			"attempts":         strconv.Itoa(o.Attempts),
			"max other":        strconv.FormatFloat(o.MaxOther, 'f', -1, 64),
			"server":           cmp.Or(o.URL, "voucherd serve, its own process"),
			"little tolerance": strconv.FormatFloat(o.LittleTolerance, 'f', -1, 64),
		},
		StatsSource: "pg_stat_database (read from the postgres database), pg_stat_user_tables",
	}
	if b.pg.statsOnDB {
		r.StatsSource = "pg_stat_database (read from the voucher database, own reads subtracted), pg_stat_user_tables"
	}
	if b.pg.statements {
		r.StatsSource += ", pg_stat_statements"
	} else {
		r.StatsSource += "; pg_stat_statements not available"
	}
	return r
}

// processes says which OS processes the run was made of.
func processes(o options, kafkaBrokers string) string {
	broker := "the kafka-mode server's broker in its own OS process (flashbench broker: kfake, given as KAFKA_BROKERS)"
	switch {
	case kafkaBrokers != "":
		broker = "the kafka-mode server's broker at KAFKA_BROKERS"
	case o.Broker == "inprocess":
		broker = "the kafka-mode server's broker inside it (voucherd's in-process kfake)"
	}
	server := "voucherd serve (built with go build into a temp dir; a second one with FLASH_WRITE_PATH=kafka)"
	if o.URL != "" {
		server, broker = "the voucherd at "+o.URL, "the kafka-mode server at "+cmp.Or(o.KafkaURL, "(none)")
	}
	return server + ", the ceiling (flashbench ceiling) and the load (flashbench load, one process per load phase) each in its own OS process; " + broker
}

func (r *report) add(s *scenarioResult) {
	s.Title = strings.Replace(s.Title, "1,000-use", group(int64(r.b.opts.Quota))+"-use", 1)
	s.Title = strings.Replace(s.Title, "10,000 single-use codes, totalLimit 1,000", group(int64(r.b.saleCodes()))+" single-use codes, totalLimit "+group(int64(r.b.opts.Quota)), 1)
	if s.Campaign != nil && isCampaignRow(s) {
		s.Title = strings.Replace(s.Title, "1,000,000", group(int64(s.Campaign.Codes)), 1)
	}
	s.OK = s.Skipped == "" && !slices.ContainsFunc(s.Checks, func(c checkResult) bool { return !c.OK })
	s.CatchUpSec = s.CatchUp.Seconds()
	r.Scenarios = append(r.Scenarios, s)
}

func (r *report) find(name string) *scenarioResult {
	for _, s := range r.Scenarios {
		if s.Name == name && s.Skipped == "" {
			return s
		}
	}
	return nil
}

// finish computes ratios and the targets.
func (r *report) finish() {
	r.Machine = describeMachine(r.b.pgVer, r.b.redisVer)
	ceiling := r.find("ceiling")
	for _, s := range r.Scenarios {
		if s.Skipped != "" || isCampaignRow(s) { // codes a second: no ratio
			continue
		}
		if s.Ceiling == 0 && ceiling != nil {
			s.Ceiling = ceiling.Throughput
		}
		if s.Ceiling > 0 {
			ratio := s.Throughput / s.Ceiling
			s.Ratio = &ratio
		}
	}
	met := func(ok bool) *bool { return &ok }
	ratioTarget := func(name, label string, want float64, extra func(*scenarioResult) (string, bool)) {
		t := target{Scenario: label, Want: fmt.Sprintf(">= %.2g x the ceiling", want)}
		s := r.find(name)
		switch {
		case s == nil:
			t.Measured = "not run"
			if sk := r.skipped(name); sk != "" {
				t.Measured = sk
			}
		case s.Ratio == nil:
			t.Measured = fmt.Sprintf("%.0f/s (no ceiling in this run)", s.Throughput)
		default:
			t.Measured = fmt.Sprintf("%.2f x (%.0f/s)", *s.Ratio, s.Throughput)
			ok := *s.Ratio >= want
			if extra != nil {
				more, ok2 := extra(s)
				t.Measured += "; " + more
				ok = ok && ok2
			}
			t.Met = met(ok)
		}
		r.Targets = append(r.Targets, t)
	}
	soldExactly := func(s *scenarioResult) (string, bool) {
		if s.Sold == nil {
			return "sold ?", false
		}
		return fmt.Sprintf("sold %d", *s.Sold), *s.Sold == int64(r.b.opts.Quota)
	}
	// The targets of issues 10 and 12, measured from outside.
	ratioTarget("rest", fmt.Sprintf("the sale: %s-use flash voucher over REST", group(int64(r.b.opts.Quota))), 0.9, soldExactly)
	ratioTarget("graphql", "the same over GraphQL", 0.7, soldExactly)
	ratioTarget("soldout", "a sold-out flash voucher (the late crowd), REST", 0.9, nil)
	ratioTarget("soldout-graphql", "a sold-out flash voucher (the late crowd), GraphQL", 0.7, nil)
	ratioTarget("winners-sync", "winners: too big to sell out, FLASH_WRITE_PATH=sync", 0.3, nil)
	ratioTarget("winners-kafka", "winners: too big to sell out, FLASH_WRITE_PATH=kafka", 0.4, func(s *scenarioResult) (string, bool) {
		return fmt.Sprintf("consumer caught up in %.1fs", s.CatchUpSec), s.CatchUpSec < 5
	})
	ratioTarget("rest-kafka", "the sale over REST, FLASH_WRITE_PATH=kafka", 0.7, soldExactly)
	// Issue 13's.
	ratioTarget("check-soldout", "checkVoucher on a sold-out flash voucher, REST", 0.9, nil)
	ratioTarget("check-live", "checkVoucher on a live flash voucher, REST", 0.9, nil)
	ratioTarget("rest-percent", "the sale on a PERCENT voucher with a budget, REST", 0.9, soldExactly)
	// Issue 14's.
	ratioTarget("campaign-sale", fmt.Sprintf("a flash campaign's sale, a random code of %s a request, REST", group(int64(r.b.saleCodes()))), 0.7, soldExactly)
	ratioTarget("campaign-sale-kafka", "the same with FLASH_WRITE_PATH=kafka", 0.7, soldExactly)
	r.campaignTargets()

	// p99 in every scenario of the targets above (the database path (c) is
	// there to compare with, not to meet it).
	t := target{Scenario: "p99 in every scenario above", Want: "< 100 ms"}
	var p99s []string
	allMet := true
	for _, name := range []string{"rest", "graphql", "soldout", "soldout-graphql", "winners-sync", "winners-kafka", "rest-kafka", "check-soldout", "check-live", "rest-percent", "campaign-sale", "campaign-sale-kafka", "campaign-check"} {
		if s := r.find(name); s != nil {
			p99s = append(p99s, fmt.Sprintf("%s %.1f ms", name, s.P99))
			allMet = allMet && s.P99 < 100
		}
	}
	if len(p99s) > 0 {
		t.Measured = strings.Join(p99s, ", ")
		t.Met = met(allMet)
	} else {
		t.Measured = "not run"
	}
	r.Targets = append(r.Targets, t)

	t = target{Scenario: "the sale with a webhook endpoint of every event vs without (issue 25)", Want: ">= 0.95 x the throughput"}
	if rest, hook := r.find("rest"), r.find("rest-webhook"); rest != nil && hook != nil && rest.Throughput > 0 && hook.Skipped == "" {
		x := hook.Throughput / rest.Throughput
		t.Measured = fmt.Sprintf("%.2f x (%.0f/s vs %.0f/s; p99 %.1f vs %.1f ms)", x, hook.Throughput, rest.Throughput, hook.P99, rest.P99)
		t.Met = met(x >= 0.95)
	} else {
		t.Measured = "not run"
	}
	r.Targets = append(r.Targets, t)

	t = target{Scenario: "the sale on a flash voucher with a CUSTOMER DAY limit vs without (issue 26)", Want: ">= 0.90 x the throughput"}
	if rest, period := r.find("rest"), r.find("rest-period"); rest != nil && period != nil && rest.Throughput > 0 && period.Skipped == "" {
		x := period.Throughput / rest.Throughput
		t.Measured = fmt.Sprintf("%.2f x (%.0f/s vs %.0f/s; p99 %.1f vs %.1f ms)", x, period.Throughput, rest.Throughput, period.P99, rest.P99)
		t.Met = met(x >= 0.90)
	} else {
		t.Measured = "not run"
	}
	r.Targets = append(r.Targets, t)

	t = target{Scenario: "the sale vs the same sale on a non-flash voucher", Want: ">= 10 x"}
	if rest, db := r.find("rest"), r.find("db"); rest != nil && db != nil && db.Throughput > 0 {
		x := rest.Throughput / db.Throughput
		t.Measured = fmt.Sprintf("%.1f x (%.0f/s vs %.0f/s)", x, rest.Throughput, db.Throughput)
		t.Met = met(x >= 10)
	} else {
		t.Measured = "not run"
	}
	r.Targets = append(r.Targets, t)

	t = target{Scenario: fmt.Sprintf("database reserve writes for a %s-use sale", group(int64(r.b.opts.Quota))), Want: fmt.Sprintf("<= %d", r.b.opts.Quota+10)}
	var parts []string
	ok := true
	for _, name := range []string{"rest", "graphql"} {
		if s := r.find(name); s != nil && s.DB != nil {
			parts = append(parts, fmt.Sprintf("%s %d", name, s.DB.RedemptionInserts))
			ok = ok && s.DB.RedemptionInserts <= int64(r.b.opts.Quota+10)
		}
	}
	if len(parts) > 0 {
		t.Measured = strings.Join(parts, ", ")
		t.Met = met(ok)
	} else {
		t.Measured = "not measured"
	}
	r.Targets = append(r.Targets, t)

	t = target{Scenario: "oversold uses", Want: "0, always"}
	var over int64
	var any bool
	for _, s := range r.Scenarios {
		if s.State != nil {
			any = true
			over += max(0, int64(s.State.LiveRows-s.State.TotalLimit), int64(s.State.UsedCount-s.State.TotalLimit))
		}
	}
	if any {
		t.Measured = strconv.FormatInt(over, 10)
		t.Met = met(over == 0)
	} else {
		t.Measured = "not run"
	}
	r.Targets = append(r.Targets, t)
}

func (r *report) skipped(name string) string {
	for _, s := range r.Scenarios {
		if s.Name == name {
			return s.Skipped
		}
	}
	return ""
}

// markdown is the table of the run, the targets and the details.
func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### flashbench run of %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "`%s` — %d clients (%s client), %s requests a scenario (database path %s), %s retries with an earlier orderId, quota %d.\n\n",
		r.Command, r.b.opts.Concurrency, r.b.opts.Client, group(r.b.opts.Requests), group(r.b.opts.DBRequests), percent(r.b.opts.RetryShare), r.b.opts.Quota)
	if len(r.Scenarios) == 0 && r.OpenLoop != nil {
		// The open-loop rows alone (-only openloop): no closed-loop table.
		b.WriteString(r.OpenLoop.markdown(r.Command))
		m := r.Machine
		fmt.Fprintf(&b, "\nTree: %s. Machine: %s, %d cores (GOMAXPROCS %d), %s; %s; PostgreSQL %s; Redis %s. Processes: %s.\n",
			r.Tree, cmp.Or(m.CPU, "unknown CPU"), m.Cores, m.GOMAXPROCS, m.Kernel, m.Go, m.PostgreSQL, cmp.Or(m.Redis, "?"), r.Processes)
		return b.String()
	}
	b.WriteString("| scenario | requests | throughput/s | ceiling/s | x ceiling | p50 ms | p90 ms | p99 ms | p99.9 ms | mean ms | Little: C/X ms | outcomes | sold | DB reserve writes / transactions | CPU cores: server / load / pg+redis / other | check |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |\n")
	for _, s := range r.Scenarios {
		if isCampaignRow(s) {
			continue // their own table, below
		}
		if s.Skipped != "" {
			fmt.Fprintf(&b, "| %s | | %s | | | | | | | | | | | | | |\n", s.Title, s.Skipped)
			continue
		}
		little := fmt.Sprintf("%.2f", s.LittleMs)
		if !s.LittleOK {
			little = fmt.Sprintf("%.2f **(off by %.0f%%)**", s.LittleMs, s.LittleOff*100)
		}
		ratio := ""
		if s.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *s.Ratio)
		}
		sold := ""
		if s.Sold != nil {
			sold = group(*s.Sold)
			if s.SoldOutMs != nil {
				sold += fmt.Sprintf(" (sold out at %.2f s", *s.SoldOutMs/1000)
				if s.AfterSoldOut > 0 {
					sold += fmt.Sprintf("; then %s/s", group(int64(math.Round(s.AfterSoldOut))))
				}
				sold += ")"
			}
		}
		writes := ""
		if s.DB != nil {
			writes = fmt.Sprintf("%s / %s", group(s.DB.RedemptionInserts), group(s.DB.Transactions))
		}
		ceilingCell := ""
		if s.Ceiling > 0 {
			ceilingCell = group(int64(math.Round(s.Ceiling)))
		}
		requests := group(s.Requests)
		if s.StoppedEarly {
			requests += " (time cap)"
		}
		cpu := fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", s.CPU.Server, s.CPU.Load, s.CPU.Deps, s.CPU.Other)
		if s.Attempt > 1 {
			cpu += fmt.Sprintf(" (attempt %d)", s.Attempt)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %s |\n",
			s.Title, requests, group(int64(math.Round(s.Throughput))), ceilingCell, ratio, s.P50, s.P90, s.P99, s.P999, s.Mean, little,
			outcomes(s.Outcomes), sold, writes, cpu, checkSummary(s))
	}
	r.campaignMarkdown(&b)
	r.perWinnerMarkdown(&b)
	if r.OpenLoop != nil {
		b.WriteString(r.OpenLoop.markdown(r.Command))
	}
	b.WriteString("\nTargets of issue 6, as ratios measured in this run:\n\n| scenario | target | measured | met |\n| --- | --- | --- | --- |\n")
	for _, t := range r.Targets {
		met := "—"
		if t.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*t.Met]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Scenario, t.Want, t.Measured, met)
	}
	m := r.Machine
	if r.Tree != "" {
		fmt.Fprintf(&b, "\nTree: %s.", r.Tree)
	}
	fmt.Fprintf(&b, "\nMachine: %s, %d cores (GOMAXPROCS %d), %d GiB, %s; %s; PostgreSQL %s; Redis %s. ",
		cmp.Or(m.CPU, "unknown CPU"), m.Cores, m.GOMAXPROCS, m.MemoryGiB, m.Kernel, m.Go, m.PostgreSQL, cmp.Or(m.Redis, "?"))
	if r.b.opts.URL == "" {
		fmt.Fprintf(&b, "GOGC %s. ", cmp.Or(m.GOGC, "400 (unset: voucherd's default)"))
		b.WriteString("Processes: " + r.Processes + "; the load process holds " + group(int64(r.b.opts.Concurrency)) + " keep-alive connections. They share these cores with PostgreSQL and Redis.\n")
	} else {
		b.WriteString("The load process (`flashbench load`) shares the machine with the server at " + r.b.opts.URL + ".\n")
	}
	fmt.Fprintf(&b, "\"Little: C/X\" is connections / throughput, the mean time a request spends in the closed loop; it should match the measured mean latency, and is flagged when they differ by more than %.0f%% (a measurement that misses part of a request's time).\n", r.b.opts.LittleTolerance*100)
	if r.b.opts.CeilingProbe > 0 {
		fmt.Fprintf(&b, "\"ceiling/s\" is the HTTP+JSON ceiling (a) measured again with %s requests just before each scenario; \"x ceiling\" divides by it. ", group(r.b.opts.CeilingProbe))
	}
	fmt.Fprintf(&b, "\"CPU cores\" is the CPU used during the load by the server process under load (none for EVALSHA), by the load process, by PostgreSQL and Redis, and by every process on the machine outside the run (others' work: a disturbance; the idle servers and flashbench itself are in the JSON as harness); a row during which (or during whose ceiling probe) other processes used more than %.2f cores was measured again, up to %d attempts, and the least disturbed attempt is shown.\n", r.b.opts.MaxOther, r.b.opts.Attempts)
	fmt.Fprintf(&b, "Database counters: %s. \"DB reserve writes\" is rows written to voucher_redemption (committed or rolled back); \"transactions\" is commits + rollbacks of the voucher database during the sale.\n", r.StatsSource)
	b.WriteString("\nPer sale: what reached PostgreSQL and Redis during the load (Redis is shared with anything else running).\n\n| scenario | DB transactions (commits + rollbacks) | reservation rows written | voucher row updates | Redis commands | of them EVALSHA | HGETALL (3 per sold-out snapshot) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Scenarios {
		if s.DB == nil && s.Redis == nil {
			continue
		}
		var db [3]string
		if s.DB != nil {
			db = [3]string{fmt.Sprintf("%s (%s + %s)", group(s.DB.Transactions), group(s.DB.Commits), group(s.DB.Rollbacks)), group(s.DB.RedemptionInserts), group(s.DB.VoucherUpdates)}
		}
		var rd [3]string
		if s.Redis != nil {
			rd = [3]string{group(s.Redis.Total), group(s.Redis.Evalsha), group(s.Redis.Hgetall)}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", s.Name, db[0], db[1], db[2], rd[0], rd[1], rd[2])
	}
	var failed []string
	for _, s := range r.Scenarios {
		for _, c := range s.Checks {
			if !c.OK {
				failed = append(failed, fmt.Sprintf("- %s: %s — %s", s.Name, c.Name, c.Detail))
			}
		}
	}
	if len(failed) > 0 {
		b.WriteString("\nFailed checks:\n\n" + strings.Join(failed, "\n") + "\n")
	}
	return b.String()
}

func checkSummary(s *scenarioResult) string {
	var bad []string
	for _, c := range s.Checks {
		if !c.OK {
			bad = append(bad, c.Name)
		}
	}
	if len(bad) == 0 {
		return fmt.Sprintf("ok (%d checks)", len(s.Checks))
	}
	return "**FAIL**: " + strings.Join(bad, "; ")
}

func outcomes(m map[string]int64) string {
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(a, b kv) int {
		ra, rb := strings.HasPrefix(a.k, "retry "), strings.HasPrefix(b.k, "retry ")
		if ra != rb {
			if ra {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(b.v, a.v), strings.Compare(a.k, b.k))
	})
	parts := make([]string, len(all))
	for i, e := range all {
		parts[i] = e.k + " " + group(e.v)
	}
	return strings.Join(parts, ", ")
}

func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" }

// write stores the JSON, the SVG and the doc's generated section.
func (r *report) write(dir, doc string, log io.Writer) error {
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "flashbench.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "latency.svg"), r.svg(), 0o644); err != nil {
		return err
	}
	if r.OpenLoop != nil {
		if err := r.OpenLoop.write(dir); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "flashbench: wrote %s and %s\n", filepath.Join(dir, "flashbench.json"), filepath.Join(dir, "latency.svg"))
	if doc == "" {
		return nil
	}
	return replaceGenerated(doc, r.markdown(), log)
}

// The generated part of the doc lies between these markers.
const (
	docBegin = "<!-- flashbench:begin (generated by go run ./cmd/flashbench; do not edit) -->"
	docEnd   = "<!-- flashbench:end -->"
)

func replaceGenerated(path, section string, log io.Writer) error {
	old, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		fmt.Fprintf(log, "flashbench: %s does not exist; not written\n", path)
		return nil
	}
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(docBegin)), bytes.Index(old, []byte(docEnd))
	if i < 0 || j < i {
		fmt.Fprintf(log, "flashbench: %s has no generated section (%s ... %s); not written\n", path, docBegin, docEnd)
		return nil
	}
	var out bytes.Buffer
	out.Write(old[:i+len(docBegin)])
	out.WriteString("\n" + section + "\n")
	out.Write(old[j:])
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(log, "flashbench: updated the table in %s\n", path)
	return nil
}

// svg draws each scenario's latency distribution (share of requests per
// bucket, log-scale time axis) with its p99 in the legend.
func (r *report) svg() []byte {
	const (
		w, h                          = 980, 520
		left, right, top, bot         = 70, 330, 40, 60
		plotW, plotH                  = w - left - right, h - top - bot
		minExp, maxExp        float64 = 4, 10 // 10 µs .. 10 s in ns
	)
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	x := func(ns float64) float64 {
		e := math.Log10(max(ns, 1))
		return left + (min(max(e, minExp), maxExp)-minExp)/(maxExp-minExp)*plotW
	}
	var ymax float64
	for _, s := range r.Scenarios {
		if s.Requests == 0 {
			continue
		}
		for _, c := range s.Histogram {
			ymax = max(ymax, float64(c)/float64(s.Requests))
		}
	}
	step := 0.05
	if ymax > 0.25 {
		step = 0.1
	}
	ymax = math.Ceil(max(ymax, 0.01)/step) * step
	ticks := int(math.Round(ymax / step))
	y := func(share float64) float64 { return top + plotH - share/ymax*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15">flashbench latency: share of requests per bucket (20 a decade), %s</text>`+"\n", left, r.Started.Format("2006-01-02 15:04 MST"))
	labels := []string{"10µs", "100µs", "1ms", "10ms", "100ms", "1s", "10s"}
	for i, l := range labels {
		px := x(math.Pow(10, minExp+float64(i)))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, top, px, top+plotH, px, top+plotH+18, l)
	}
	for i := 0; i <= ticks; i++ {
		share := step * float64(i)
		py := y(share)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n", left, py, left+plotW, py, left-6, py+4, share*100)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">latency (log scale)</text>`+"\n", left+plotW/2, h-18)
	n := 0
	for _, s := range r.Scenarios {
		if s.Requests == 0 {
			continue
		}
		color := colors[n%len(colors)]
		var pts []string
		for i, c := range s.Histogram {
			lo := 1e3
			if i > 0 {
				lo = histogramEdges[i-1]
			}
			hi := 1e11
			if i < len(histogramEdges) {
				hi = histogramEdges[i]
			}
			share := float64(c) / float64(s.Requests)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(lo), y(share), x(hi), y(share)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		p99 := x(s.P99 * 1e6)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="3,3"/>`+"\n", p99, top, p99, top+plotH, color)
		ly := top + 10 + n*36
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`, w-right+15, ly, w-right+35, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text><text x="%d" y="%d" fill="#555">%s/s, p50 %.2f ms, p99 %.2f ms (dashed)</text>`+"\n",
			w-right+40, ly+4, xmlEscape(s.Name), w-right+40, ly+18, group(int64(s.Throughput)), s.P50, s.P99)
		n++
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xmlEscapeTo(&b, s)
	return b.String()
}

func xmlEscapeTo(w io.Writer, s string) error {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	_, err := r.WriteString(w, s)
	return err
}

// gitTree names the commit measured, marked "+dirty" when the working tree
// differs from it (others' uncommitted work is then part of the measurement).
func gitTree() string {
	if t := os.Getenv("FLASHBENCH_TREE"); t != "" {
		return t
	}
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	tree := strings.TrimSpace(string(out))
	// This run's own outputs do not make the tree dirty.
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/benchmarks.md", ":!bench/results").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		tree += "+dirty"
	}
	return tree
}

// perWinnerMarkdown is issue 28's "what a winner costs": the machine's CPU
// per winner on each write path, from the winners rows (cpu.go, winnerCPU).
func (r *report) perWinnerMarkdown(b *strings.Builder) {
	var rows []*scenarioResult
	for _, s := range r.Scenarios {
		if s.PerWinner != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nMachine CPU per winner (voucherd under load, PostgreSQL, Redis and the broker process, from the load's start until its winners are written, over the winners; issue 28's target: at most 160 µs on the sync path):\n\n")
	b.WriteString("| scenario | winners | µs per winner | of it voucherd | of it PostgreSQL, Redis, broker | over | other processes (cores) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range rows {
		w := s.PerWinner
		fmt.Fprintf(b, "| %s | %s | %.0f | %.0f | %.0f | %.1f s | %.2f |\n", s.Name, group(w.WinnersCount), w.Micros, w.ServerMicros, w.DepsMicros, w.Seconds, w.OtherCores)
	}
}
