package app

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/clientaddr"
	"voucherd/internal/voucher"
)

// Development tokens, used outside production when none are set.
const (
	devStorefrontToken = "dev-storefront-token"
	devAdminToken      = "dev-admin-token"
)

// config is the service's settings, read from the environment (README lists
// every one).
type config struct {
	HTTPAddr          string
	DatabaseURL       string
	RedisURL          string
	RedisAutoPipeline bool // coalesce concurrent gate scripts into pipelines
	KafkaBrokers      []string
	KafkaInstance     string // KAFKA_INSTANCE_ID: the consumer's static group membership
	FlashWritePath    string
	StorefrontTokens  []string
	AdminTokens       []string
	// MetricsTokens may read GET /metrics, as may AdminTokens.
	MetricsTokens []string
	// MetricsNeedToken: /metrics lists voucher codes, so in production (or
	// once METRICS_TOKENS is set) it needs a bearer token.
	MetricsNeedToken  bool
	ReservationTTL    time.Duration
	ExpiryInterval    time.Duration
	ReconcileInterval time.Duration
	WarmUpInterval    time.Duration
	SaleFlushInterval time.Duration
	ShutdownTimeout   time.Duration
	AdmissionLease    time.Duration // kafka mode: how long an admission's owner has to settle it
	SoldOutTTL        time.Duration // how long a sold-out snapshot answers from memory
	ApiKeyTTL         time.Duration // how often the API keys are read again, should a change's message be lost
	DefaultCurrency   string        // a new voucher's currency when it names none
	FaultsID          string        // tests only: names hooks registered with RegisterFaults
	ClockOffset       time.Duration // tests only: shifts this instance's own clock (voucher.SetClockOffset)
	DebugAddr         string        // where net/http/pprof listens; empty: nowhere
	// Load shedding of the storefront routes (server/shed.go): at most
	// ShedMaxInFlight served at once (0: no shedding), the limit shrinking
	// while they take longer than ShedTargetLatency on average, the excess
	// waiting at most ShedMaxWait for a place before its 503.
	ShedMaxInFlight   int
	ShedTargetLatency time.Duration
	ShedMaxWait       time.Duration
	Production        bool
	LogFormat         string
	LogLevel          string
	DevTokens         bool // the token lists are the development defaults
	// TrustedProxies: the proxies whose X-Forwarded-For names the client
	// (TRUSTED_PROXIES).
	TrustedProxies clientaddr.Resolver
	// Webhooks (docs/webhooks.md): deliveries to internal addresses only
	// outside production or with WEBHOOK_ALLOW_PRIVATE; an attempt's
	// timeout; attempts at once per instance; the first retry's delay; how
	// long a delivery is retried (and an endpoint may fail before it is
	// disabled).
	WebhookAllowPrivate bool
	WebhookTimeout      time.Duration
	WebhookConcurrency  int
	WebhookFirstRetry   time.Duration
	WebhookRetryFor     time.Duration
}

// loadConfig reads and checks every setting; the error names each bad one.
func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		HTTPAddr:       getenv("HTTP_ADDR"),
		DatabaseURL:    or(getenv("DATABASE_URL"), "postgres://voucher@127.0.0.1:5432/voucher?sslmode=disable"),
		RedisURL:       or(getenv("REDIS_URL"), "redis://localhost:6379/0"),
		KafkaBrokers:   list(getenv("KAFKA_BROKERS")),
		KafkaInstance:  getenv("KAFKA_INSTANCE_ID"),
		FlashWritePath: or(getenv("FLASH_WRITE_PATH"), "sync"),
		LogLevel:       or(getenv("LOG_LEVEL"), "info"),
	}
	var errs []error
	// Exactly these: a misspelt production (Production, prod) must not
	// quietly run with the development defaults.
	switch env := getenv("APP_ENV"); env {
	case "", "development":
	case "production":
		c.Production = true
	default:
		errs = append(errs, fmt.Errorf("APP_ENV must be development (or empty) or production, not %q", env))
	}
	// Outside production the server accepts public development tokens and
	// has a development admin account: by default it listens on loopback
	// only. In production the default is every interface.
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:8080"
		if c.Production {
			c.HTTPAddr = ":8080"
		}
	}
	duration := func(name, def string) time.Duration {
		d, err := time.ParseDuration(or(getenv(name), def))
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as %s", name, def))
		}
		return d
	}
	nonNegative := func(name, def string) time.Duration {
		d, err := time.ParseDuration(or(getenv(name), def))
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s must be a duration of 0 or more such as %s", name, def))
		}
		return d
	}
	c.ReservationTTL = duration("RESERVATION_TTL", "15m")
	c.ExpiryInterval = duration("EXPIRY_INTERVAL", "1m")
	c.ReconcileInterval = duration("RECONCILE_INTERVAL", "1m")
	c.WarmUpInterval = duration("WARMUP_INTERVAL", "1m")
	c.SaleFlushInterval = duration("SALE_FLUSH_INTERVAL", "1s")
	c.ShutdownTimeout = duration("SHUTDOWN_TIMEOUT", "20s")
	c.AdmissionLease = duration("ADMISSION_LEASE", "11s")
	c.SoldOutTTL = duration("SOLD_OUT_TTL", "2s")
	c.ApiKeyTTL = duration("API_KEY_TTL", "5s")
	c.ShedTargetLatency = duration("SHED_TARGET_LATENCY", "100ms")
	c.ShedMaxWait = nonNegative("SHED_MAX_WAIT", "10ms")
	// Off by default: measured on the 2-core bench machine, the refusals
	// cost as much as the answers they replace, and with 10,000 clients
	// the admitted requests waited behind them (docs/benchmarks.md, "Open
	// loop"), so the shedding is a setting to turn on, not yet a default.
	switch n, err := strconv.Atoi(or(getenv("SHED_MAX_INFLIGHT"), "0")); {
	case err != nil || n < 0 || n > 1_000_000:
		errs = append(errs, errors.New("SHED_MAX_INFLIGHT must be a whole number from 0 (no shedding) to 1000000, such as 512"))
	default:
		c.ShedMaxInFlight = n
	}
	c.WebhookTimeout = duration("WEBHOOK_TIMEOUT", "10s")
	c.WebhookFirstRetry = duration("WEBHOOK_FIRST_RETRY", "30s")
	c.WebhookRetryFor = duration("WEBHOOK_RETRY_FOR", "24h")
	if c.WebhookTimeout > time.Minute {
		errs = append(errs, errors.New("WEBHOOK_TIMEOUT must be at most 1m"))
	}
	// The contract: the first retry within a minute, retries for at least
	// 24 hours. Shorter windows are for tests, outside production.
	if c.WebhookFirstRetry > time.Minute {
		errs = append(errs, errors.New("WEBHOOK_FIRST_RETRY must be at most 1m (the first retry comes within a minute)"))
	}
	if c.Production && c.WebhookRetryFor < 24*time.Hour {
		errs = append(errs, errors.New("WEBHOOK_RETRY_FOR must be at least 24h with APP_ENV=production"))
	}
	switch n, err := strconv.Atoi(or(getenv("WEBHOOK_CONCURRENCY"), "8")); {
	case err != nil || n < 1 || n > 256:
		errs = append(errs, errors.New("WEBHOOK_CONCURRENCY must be a whole number from 1 to 256, such as 8"))
	default:
		c.WebhookConcurrency = n
	}
	switch v := or(getenv("WEBHOOK_ALLOW_PRIVATE"), "false"); v {
	case "true", "1":
		c.WebhookAllowPrivate = true
	case "false", "0":
		// Outside production a developer's receiver is on this machine.
		c.WebhookAllowPrivate = !c.Production
	default:
		errs = append(errs, errors.New("WEBHOOK_ALLOW_PRIVATE must be true or false (1 or 0)"))
	}
	c.DefaultCurrency = or(getenv("DEFAULT_CURRENCY"), "USD")
	if voucher.ValidateCurrency(c.DefaultCurrency) != nil {
		errs = append(errs, errors.New("DEFAULT_CURRENCY must be an ISO 4217 code of three capital letters, such as USD"))
	}
	var err error
	if c.TrustedProxies, err = clientaddr.ParseTrusted(getenv("TRUSTED_PROXIES")); err != nil {
		errs = append(errs, fmt.Errorf("TRUSTED_PROXIES: %w", err))
	}
	c.FaultsID = getenv("TEST_FAULTS")
	if v := getenv("CLOCK_OFFSET"); strings.TrimSpace(v) != "" {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		switch {
		case err != nil:
			errs = append(errs, errors.New("CLOCK_OFFSET must be a duration such as 1.5s or -800ms"))
		case c.Production:
			errs = append(errs, errors.New("CLOCK_OFFSET is for tests of clock skew; APP_ENV=production refuses it"))
		default:
			c.ClockOffset = d
		}
	}
	c.DebugAddr = getenv("DEBUG_ADDR")
	if c.DebugAddr != "" {
		if host, _, err := net.SplitHostPort(c.DebugAddr); err != nil || !isLoopback(host) {
			errs = append(errs, errors.New("DEBUG_ADDR must be a loopback host:port such as 127.0.0.1:6060 (profiles are not for the network)"))
		}
	}

	switch v := or(getenv("REDIS_AUTOPIPELINE"), "true"); v {
	case "true", "1":
		c.RedisAutoPipeline = true
	case "false", "0":
	default:
		errs = append(errs, errors.New("REDIS_AUTOPIPELINE must be true or false (1 or 0)"))
	}

	c.LogFormat = getenv("LOG_FORMAT")
	if c.LogFormat == "" {
		c.LogFormat = "text"
		if c.Production {
			c.LogFormat = "json"
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, errors.New("LOG_FORMAT must be text or json"))
	}
	if c.FlashWritePath != "sync" && c.FlashWritePath != "kafka" {
		errs = append(errs, errors.New("FLASH_WRITE_PATH must be sync or kafka"))
	}
	if c.Production && c.FlashWritePath == "kafka" && len(c.KafkaBrokers) == 0 {
		// The in-process broker keeps events in memory: a restart would lose
		// the flash reservations whose events are not yet applied.
		errs = append(errs, errors.New("FLASH_WRITE_PATH=kafka needs KAFKA_BROKERS with APP_ENV=production (the in-process broker loses its events on a restart)"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, errors.New("LOG_LEVEL must be debug, info, warn or error"))
	}

	c.StorefrontTokens = list(getenv("STOREFRONT_TOKENS"))
	c.AdminTokens = list(getenv("ADMIN_TOKENS"))
	c.MetricsTokens = list(getenv("METRICS_TOKENS"))
	c.MetricsNeedToken = c.Production || len(c.MetricsTokens) > 0
	if c.Production {
		if len(c.StorefrontTokens) == 0 || len(c.AdminTokens) == 0 {
			errs = append(errs, errors.New("APP_ENV=production needs STOREFRONT_TOKENS and ADMIN_TOKENS"))
		}
		for _, t := range append(append(append([]string{}, c.StorefrontTokens...), c.AdminTokens...), c.MetricsTokens...) {
			if t == devStorefrontToken || t == devAdminToken {
				errs = append(errs, errors.New("APP_ENV=production refuses the development tokens"))
				break
			}
			if len(t) < 16 {
				errs = append(errs, errors.New("APP_ENV=production needs tokens of at least 16 characters"))
				break
			}
		}
	} else if len(c.StorefrontTokens) == 0 && len(c.AdminTokens) == 0 {
		// Both or neither: a server given its admin tokens must not also
		// take the public development storefront token (or the reverse).
		c.StorefrontTokens, c.AdminTokens, c.DevTokens = []string{devStorefrontToken}, []string{devAdminToken}, true
	}
	for _, s := range c.StorefrontTokens {
		for _, a := range c.AdminTokens {
			if s == a {
				errs = append(errs, errors.New("a token may not be both a storefront and an admin token"))
			}
		}
		for _, m := range c.MetricsTokens {
			if s == m {
				errs = append(errs, errors.New("a token may not be both a storefront and a metrics token"))
			}
		}
	}
	return c, errors.Join(errs...)
}

func or(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return strings.TrimSpace(v)
}

func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
