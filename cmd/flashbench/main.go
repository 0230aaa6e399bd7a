// Command flashbench is the flash-sale benchmark behind `make bench`: it
// builds voucherd and runs `voucherd serve` as its own process (or targets
// one given by -url), floods a fresh 1,000-use flash voucher with reserves
// from a separate load process (`flashbench load`, many keep-alive
// connections) over REST and over GraphQL, measures the machine's baselines
// in the same run (an HTTP+JSON ceiling process, `flashbench ceiling`; raw
// EVALSHA of lua/reserve.lua; the database path; a sold-out voucher), checks
// after every sale that nothing was oversold, and writes a markdown table
// (stdout), JSON and an SVG latency histogram (bench/results/) and the table
// of docs/benchmarks.md.
//
// Everything runs on loopback, and the load process shares the machine's
// cores with the server: results are meant to be read as ratios to the
// ceiling measured in the same run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch sub := append(os.Args[1:], "")[0]; sub {
	case "load": // the load process, started by the orchestrator
		err = loadMain(ctx, os.Stdin, os.Stdout, os.Stderr)
	case "ceiling": // the ceiling server process
		err = ceilingMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "broker": // the kafka-mode server's broker process
		err = brokerMain(ctx, os.Stdout)
	default:
		err = run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flashbench:", err)
		os.Exit(1)
	}
}

// options are the command line's settings.
type options struct {
	URL             string        // a running voucherd; empty: start voucherd processes
	KafkaURL        string        // a running voucherd with FLASH_WRITE_PATH=kafka (with -url)
	StorefrontToken string        // with -url
	AdminToken      string        // with -url
	Client          string        // raw or nethttp
	Concurrency     int           // concurrent clients
	Requests        int64         // requests per scenario
	DBRequests      int64         // requests of the database-path scenario
	MaxTime         time.Duration // per scenario, whichever comes first
	MaxTimeSlow     time.Duration // the same for the database-bound scenarios
	RetryShare      float64       // share of requests that repeat an earlier orderId
	Quota           int           // uses of the sale's voucher
	Only            string        // comma-separated scenario names; empty: all
	Out             string        // results directory
	Doc             string        // markdown file whose generated section is replaced
	CPUProfile      string        // comma-separated scenario names whose load process is profiled
	LittleTolerance float64       // how far mean latency may be from C / throughput
	Quick           bool          // a smoke test's sizes
	Broker          string        // process or inprocess: where the kafka-mode server's broker runs
	StatsSettle     time.Duration // wait for PostgreSQL's statistics to be flushed
	CeilingProbe    int64         // requests of the ceiling measured before each scenario
	Attempts        int           // measurements of a disturbed row
	MaxOther        float64       // cores other processes may use before a row counts as disturbed
	OpenTime        time.Duration // the open-loop rows: each row's load phase
	OpenConns       int           // and their second connection count (besides -c)
	OpenRecovery    time.Duration // the 1.5 x rows' recovery phase at 0.5 x
	OpenCapacityN   int64         // requests of each open-loop scenario's capacity measurement
	OpenScenarios   string        // comma-separated scenario names of the open-loop rows
	DatabaseURL     string
	RedisURL        string
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("flashbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.URL, "url", "", "benchmark a running voucherd at this loopback URL instead of starting one")
	fs.StringVar(&o.KafkaURL, "kafka-url", "", "with -url: a running voucherd with FLASH_WRITE_PATH=kafka, for the winners scenario")
	fs.StringVar(&o.StorefrontToken, "storefront-token", or(getenv("FLASHBENCH_STOREFRONT_TOKEN"), "dev-storefront-token"), "with -url: a storefront bearer token")
	fs.StringVar(&o.AdminToken, "admin-token", or(getenv("FLASHBENCH_ADMIN_TOKEN"), "dev-admin-token"), "with -url: an admin bearer token")
	fs.IntVar(&o.Concurrency, "c", 256, "concurrent clients (connections)")
	fs.StringVar(&o.Client, "client", "raw", "load client: raw (a minimal keep-alive HTTP/1.1 client, one connection per worker) or nethttp (net/http's Transport)")
	fs.Int64Var(&o.Requests, "n", 100000, "requests per scenario")
	fs.Int64Var(&o.DBRequests, "n-db", 20000, "requests of the database-path scenario (it is the slow one)")
	fs.DurationVar(&o.MaxTime, "max-time", 30*time.Second, "longest load phase of one scenario; it stops early")
	fs.DurationVar(&o.MaxTimeSlow, "max-time-slow", 15*time.Second, "longest load phase of the database-bound scenarios (db, winners-sync)")
	fs.Float64Var(&o.RetryShare, "retries", 0.05, "share of requests that retry an earlier orderId (same customer and amount)")
	fs.IntVar(&o.Quota, "quota", 1000, "uses of the sale's flash voucher")
	fs.StringVar(&o.Only, "only", "", "run only these scenarios (comma-separated; see -list)")
	list := fs.Bool("list", false, "list the scenarios and exit")
	fs.StringVar(&o.Out, "out", "bench/results", "directory for the JSON, the SVG, CPU profiles and the server log")
	fs.StringVar(&o.Doc, "doc", "docs/benchmarks.md", "markdown file whose generated section gets the table of this run (empty: none)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of these scenarios' load process to -out (comma-separated, e.g. rest,graphql)")
	fs.Float64Var(&o.LittleTolerance, "little-tolerance", 0.2, "flag a row whose mean latency differs from clients / throughput (Little's law) by more than this share")
	fs.StringVar(&o.Broker, "broker", "process", "the kafka-mode server's broker without KAFKA_BROKERS: process (kfake in a flashbench broker process, given as KAFKA_BROKERS) or inprocess (voucherd's own in-process broker)")
	fs.BoolVar(&o.Quick, "quick", false, "a smoke test: "+quickSummary+" (flags given explicitly win)")
	fs.DurationVar(&o.StatsSettle, "stats-settle", 11*time.Second, "wait after a sale before reading PostgreSQL's statistics (an idle backend reports within 10s); 0 skips the database counters")
	fs.Int64Var(&o.CeilingProbe, "ceiling-probe", 100000, "measure the ceiling (a) again with this many requests just before each scenario and divide by it (0: divide by row (a) only)")
	fs.IntVar(&o.Attempts, "attempts", 3, "measure a row again, up to this many times, when other processes disturbed it")
	fs.Float64Var(&o.MaxOther, "max-other", 0.15, "CPU cores other processes may use during a row before it counts as disturbed")
	fs.DurationVar(&o.OpenTime, "open-time", 5*time.Second, "openloop: how long each open-loop row offers its rate")
	fs.DurationVar(&o.OpenRecovery, "open-recovery", 4*time.Second, "openloop: after each 1.5 x row's load, how long it offers 0.5 x (the recovery: when its p99 is under 100 ms again); 0: none")
	fs.IntVar(&o.OpenConns, "open-conns", 10000, "openloop: the rows' second connection count, besides -c (0: -c only); the load process raises its open-file limit")
	fs.StringVar(&o.OpenScenarios, "open-scenarios", strings.Join(openScenarios, ","), "openloop: the scenarios of the open-loop rows (comma-separated sales of REST or GraphQL, e.g. rest-kafka)")
	fs.Int64Var(&o.OpenCapacityN, "open-capacity-n", 60000, "openloop: requests of the closed-loop measurement of each open-loop scenario's capacity")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (subcommands: load, ceiling; flags: -h)", fs.Arg(0))
	}
	if o.Quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickFlags {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return o, err
				}
			}
		}
	}
	if *list {
		for _, s := range scenarioCatalog {
			fmt.Fprintf(stderr, "%-12s %s\n", s.name, s.title)
		}
		return o, flag.ErrHelp
	}
	o.DatabaseURL = or(getenv("DATABASE_URL"), "postgres://voucher@127.0.0.1:5432/voucher?sslmode=disable")
	o.RedisURL = or(getenv("REDIS_URL"), "redis://127.0.0.1:6379/0")
	var errs []error
	if o.Concurrency < 1 || o.Requests < 1 || o.DBRequests < 1 || o.Quota < 1 || o.Attempts < 1 {
		errs = append(errs, errors.New("-c, -n, -n-db, -quota and -attempts must be positive"))
	}
	if o.OpenTime <= 0 || o.OpenConns < 0 || o.OpenCapacityN < 1 || o.OpenRecovery < 0 {
		errs = append(errs, errors.New("-open-time and -open-capacity-n must be positive, -open-conns 0 or more"))
	}
	for _, name := range splitList(o.OpenScenarios) {
		if s := findScenario(name); s == nil || (s.kind != kindREST && s.kind != kindGraphQL) || s.big || s.campaign {
			errs = append(errs, fmt.Errorf("-open-scenarios: %q is not a sale of one voucher over REST or GraphQL", name))
		}
	}
	if o.Client != "raw" && o.Client != "nethttp" {
		errs = append(errs, errors.New("-client must be raw or nethttp"))
	}
	if o.RetryShare < 0 || o.RetryShare >= 1 {
		errs = append(errs, errors.New("-retries must be in [0, 1)"))
	}
	for _, u := range []string{o.URL, o.KafkaURL} {
		if u != "" {
			if err := requireLoopbackURL(u); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if o.Broker != "process" && o.Broker != "inprocess" {
		errs = append(errs, errors.New("-broker must be process or inprocess"))
	}
	if o.LittleTolerance <= 0 {
		errs = append(errs, errors.New("-little-tolerance must be positive"))
	}
	for _, name := range splitList(o.Only + "," + o.CPUProfile) {
		if findScenario(name) == nil {
			errs = append(errs, fmt.Errorf("unknown scenario %q (see -list)", name))
		}
	}
	return o, errors.Join(errs...)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := stderr.(*os.File); !ok {
		// The child processes' stderr (progress bars, logs) is copied into
		// a writer that is not a file by a goroutine per child.
		stderr = &lockedWriter{w: stderr}
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return err
	}
	b, err := newBench(ctx, opts, getenv, os.Environ(), stderr)
	if err != nil {
		return err
	}
	defer b.close()
	report, err := b.run(ctx)
	if err != nil {
		return err
	}
	report.Command = commandLine(args)
	fmt.Fprint(stdout, report.markdown())
	return report.write(opts.Out, opts.Doc, stderr)
}

// quickFlags are -quick's sizes: every scenario end to end in about half a
// minute, with exact counts still checked (the database counters, which
// need an 11 s settle per sale, are skipped). A smoke test's numbers are not
// results: they go to a temporary directory and the doc is left alone.
var quickFlags = map[string]string{
	"open-time": "1s", "open-conns": "64", "open-capacity-n": "2000",
	"c": "32", "n": "2000", "n-db": "400", "quota": "100", "ceiling-probe": "1000",
	"attempts": "1", "stats-settle": "0", "max-time": "20s", "max-time-slow": "20s",
	"out": filepath.Join(os.TempDir(), "flashbench-quick"), "doc": "",
}

const quickSummary = "32 clients, 2,000 requests (database path 400), quota 100, 1,000-request ceiling probes, one attempt, no database counters, results in a temporary directory and not in the doc"

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func or(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return strings.TrimSpace(v)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// commandLine is how to run this again: `make bench` when no flags were given.
func commandLine(args []string) string {
	if len(args) == 0 {
		return "make bench   # = go run ./cmd/flashbench"
	}
	return "go run ./cmd/flashbench " + strings.Join(args, " ")
}
