package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// UsageError is a command line voucherd cannot run (an unknown command,
// flag or argument, a missing flag): its message ends with the command's
// usage. cmd/voucherd exits 2 on it (ExitCode).
type UsageError struct {
	reason, usage string
}

func (e *UsageError) Error() string { return e.reason + "\n" + strings.TrimRight(e.usage, "\n") }

// ExitCode is cmd/voucherd's exit status for Run's error: 0 for none, 2 for
// a UsageError, 1 for anything else.
func ExitCode(err error) int {
	var u *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// errHelp is a command's -h or --help: its usage is printed; Run returns
// nil having done nothing else.
var errHelp = errors.New("help printed")

// command is a voucherd subcommand's usage: how it is called, what it does,
// its flags and the settings (environment) it reads.
type command struct {
	name     string // "serve", "user add"
	args     string // what follows the name in the usage line
	about    string // what it does, a sentence or two
	settings []string
	// checkedToo: every setting of serve is checked at its start too (it
	// reads them all, through loadConfig).
	checkedToo bool
}

// parse reads args by the flags that define declares (nil: none) and
// returns the arguments after them, at most maxArgs. -h or --help prints the
// usage to stdout (errHelp); anything else wrong is a UsageError.
func (c command) parse(args []string, define func(fs *flag.FlagSet), maxArgs int, stdout io.Writer) ([]string, error) {
	fs := c.flagSet(define)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, c.usage(fs))
		return nil, errHelp
	}
	if err == nil && fs.NArg() > maxArgs {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(maxArgs))
	}
	if err != nil {
		return nil, c.refuse(fs, err.Error())
	}
	return fs.Args(), nil
}

// refuse is a UsageError of c for the reason given.
func (c command) refuse(fs *flag.FlagSet, reason string) error {
	if fs == nil {
		fs = c.flagSet(nil)
	}
	return &UsageError{reason: c.name + ": " + reason, usage: c.usage(fs)}
}

func (c command) flagSet(define func(fs *flag.FlagSet)) *flag.FlagSet {
	fs := flag.NewFlagSet("voucherd "+c.name, flag.ContinueOnError)
	// The flag package's own messages and usage are not printed: parse
	// prints the usage where it belongs (stdout for -h, the error else).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if define != nil {
		define(fs)
	}
	return fs
}

// usage is the command's usage text: the line, what it does, its flags and
// the settings it reads.
func (c command) usage(fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: voucherd %s", c.name)
	if c.args != "" {
		fmt.Fprintf(&b, " %s", c.args)
	}
	fmt.Fprintf(&b, "\n\n%s\n", c.about)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		b.WriteString("\nFlags:\n")
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	b.WriteString(settingsUsage(c.settings))
	if c.checkedToo {
		b.WriteString("Every setting of `voucherd serve` is checked at its start too (`voucherd serve -h`).\n")
	}
	return b.String()
}

// settingsUsage lists settings with what each means.
func settingsUsage(names []string) string {
	if len(names) == 0 {
		return "\nSettings: none.\n"
	}
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	var b strings.Builder
	b.WriteString("\nSettings (environment; README, \"Settings\"):\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, n, settingHelp[n])
	}
	return b.String()
}

// settingHelp is a line on each setting; the README's table says more.
var settingHelp = map[string]string{
	"HTTP_ADDR":             "listen address (default 127.0.0.1:8080; :8080 with APP_ENV=production)",
	"DATABASE_URL":          "PostgreSQL URL (default postgres://voucher@127.0.0.1:5432/voucher?sslmode=disable)",
	"REDIS_URL":             "Redis or Redis Cluster URL (default redis://localhost:6379/0)",
	"REDIS_AUTOPIPELINE":    "true or false: coalesce concurrent gate scripts into pipelines (default true)",
	"KAFKA_BROKERS":         "comma-separated Kafka brokers (default: an in-process broker, development only)",
	"KAFKA_INSTANCE_ID":     "kafka mode: this instance's stable name in the consumer group, unique per instance (e.g. the pod name of a StatefulSet; default none: a new member each start)",
	"FLASH_WRITE_PATH":      "sync or kafka: how a flash winner reaches Postgres (default sync)",
	"ADMISSION_LEASE":       "kafka mode: how long a request has to settle its admission (default 11s)",
	"STOREFRONT_TOKENS":     "comma-separated storefront bearer tokens (development tokens when neither list is set, outside production)",
	"ADMIN_TOKENS":          "comma-separated admin bearer tokens (likewise)",
	"METRICS_TOKENS":        "comma-separated bearer tokens that may read /metrics (default none)",
	"TRUSTED_PROXIES":       "comma-separated CIDRs of proxies whose X-Forwarded-For names the client (default none)",
	"RESERVATION_TTL":       "how long a reservation is held (default 15m)",
	"EXPIRY_INTERVAL":       "how often expired reservations are swept (default 1m)",
	"RECONCILE_INTERVAL":    "how often gate and database are compared (default 1m)",
	"WARMUP_INTERVAL":       "how often missing flash gates are loaded (default 1m)",
	"SALE_FLUSH_INTERVAL":   "how often the reserve answers counted for voucher.sale are added to the database, and at stop (default 1s)",
	"SOLD_OUT_TTL":          "how long a sold-out flash voucher is answered from memory (default 2s)",
	"API_KEY_TTL":           "how often each server reads the API keys again, should a change's message be lost (default 5s)",
	"SHED_MAX_INFLIGHT":     "load shedding: most storefront requests (REST sale routes, POST /graphql) served at once before the excess is answered 503, e.g. 512 (default 0: no shedding)",
	"SHED_TARGET_LATENCY":   "the shedding limit shrinks while served storefront requests take longer than this on average with the limit reached (default 100ms)",
	"SHED_MAX_WAIT":         "how long a request over the shedding limit waits for a place before its 503 (default 10ms; 0: none)",
	"DEFAULT_CURRENCY":      "ISO 4217 currency of a voucher created without one (default USD)",
	"WEBHOOK_ALLOW_PRIVATE": "true: webhook endpoints on loopback, private and link-local addresses in production too (default false)",
	"WEBHOOK_TIMEOUT":       "how long one webhook delivery attempt may take, at most 1m (default 10s)",
	"WEBHOOK_CONCURRENCY":   "webhook delivery attempts at once per instance, 1-256 (default 8)",
	"WEBHOOK_FIRST_RETRY":   "delay before a failed delivery's first retry, doubled up to 1h; at most 1m (default 30s)",
	"WEBHOOK_RETRY_FOR":     "how long a delivery is retried and an endpoint may fail before it is disabled; at least 24h in production (default 24h)",
	"SHUTDOWN_TIMEOUT":      "how long a SIGTERM waits for requests in flight (default 20s)",
	"DEBUG_ADDR":            "loopback host:port for net/http/pprof (default none)",
	"CLOCK_OFFSET":          "tests of clock skew only: shifts this instance's clock by a duration; refused in production (default none)",
	"APP_ENV":               "development (or empty) or production: production turns off every development default",
	"LOG_FORMAT":            "text or json (default text; json with APP_ENV=production)",
	"LOG_LEVEL":             "debug, info, warn or error (default info)",
	"GOGC":                  "Go's garbage collector target (default 400 for serve)",
	"GOMEMLIMIT":            "Go's soft memory limit (default none)",
	"BROKER_ADDR":           "host:port the broker listens on and advertises (default 127.0.0.1:9092)",
	"BROKER_DATA_DIR":       "directory the broker keeps its topics in (default: memory only)",
}

// The subcommands' usages. The user subcommands' are in dashboard.go.
var (
	serveCommand = command{
		name:  "serve",
		about: "Runs the voucher service: GraphQL, REST, the dashboard at /admin, /healthz, /readyz and /metrics on HTTP_ADDR,\nwith the expiry, reconciliation and warm-up jobs. It applies pending migrations first. The default command.",
		settings: []string{"HTTP_ADDR", "DATABASE_URL", "REDIS_URL", "REDIS_AUTOPIPELINE", "KAFKA_BROKERS", "KAFKA_INSTANCE_ID", "FLASH_WRITE_PATH", "ADMISSION_LEASE",
			"STOREFRONT_TOKENS", "ADMIN_TOKENS", "METRICS_TOKENS", "TRUSTED_PROXIES", "RESERVATION_TTL", "EXPIRY_INTERVAL", "RECONCILE_INTERVAL",
			"WARMUP_INTERVAL", "SALE_FLUSH_INTERVAL", "SOLD_OUT_TTL", "API_KEY_TTL",
			"SHED_MAX_INFLIGHT", "SHED_TARGET_LATENCY", "SHED_MAX_WAIT", "DEFAULT_CURRENCY",
			"WEBHOOK_ALLOW_PRIVATE", "WEBHOOK_TIMEOUT", "WEBHOOK_CONCURRENCY", "WEBHOOK_FIRST_RETRY", "WEBHOOK_RETRY_FOR", "SHUTDOWN_TIMEOUT", "DEBUG_ADDR", "CLOCK_OFFSET", "APP_ENV", "LOG_FORMAT", "LOG_LEVEL", "GOGC", "GOMEMLIMIT"},
	}
	migrateCommand = command{
		name:       "migrate",
		about:      "Applies the pending database migrations to DATABASE_URL and exits.",
		settings:   []string{"DATABASE_URL", "APP_ENV", "LOG_FORMAT", "LOG_LEVEL"},
		checkedToo: true,
	}
	brokerCommand = command{
		name: "broker",
		about: "Runs a development Kafka-protocol broker (kfake, one node) on BROKER_ADDR that outlives a crash of serve, until\n" +
			"interrupted: KAFKA_BROKERS=127.0.0.1:9092 FLASH_WRITE_PATH=kafka voucherd serve",
		settings:   []string{"BROKER_ADDR", "BROKER_DATA_DIR", "LOG_FORMAT", "LOG_LEVEL"},
		checkedToo: true,
	}
	helpCommand = command{
		name:  "help",
		args:  "[COMMAND]",
		about: "Prints voucherd's usage, or a command's (as COMMAND -h does).",
	}
)

// usage is voucherd's own usage: every command.
const usage = `usage: voucherd [COMMAND] [-h]

Commands (each answers -h and --help with its usage and the settings it reads):
  serve          run the service (the default)
  migrate        apply the database migrations to DATABASE_URL
  user add       create a dashboard user (the password from standard input)
  user list      list the dashboard users with their role and status
  user role      change a user's role
  user disable   disable a user: their sessions end, sign-in is refused
  user enable    enable a disabled user again
  user reset     print a one-time link to set a user's password
  user unlock    lift a sign-in lockout (of an email or an address)
  key create     create an API key (printed once) with a role, expiry and rate
  key list       list the API keys
  key revoke     revoke an API key: refused on every server within a second
  broker         a development Kafka-protocol broker (kfake) on BROKER_ADDR
                 (default 127.0.0.1:9092) that outlives a crash of serve:
                 KAFKA_BROKERS=127.0.0.1:9092 FLASH_WRITE_PATH=kafka voucherd serve
  help [COMMAND] this, or a command's usage
`

// isHelp reports whether arg asks for help as the flag package reads it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}
