// Package app wires the voucher service together from its settings: the
// stores, the gate, the jobs and the HTTP server. cmd/voucherd calls Run.
package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"voucherd/internal/clientaddr"
	"voucherd/internal/gate"
	"voucherd/internal/job"
	"voucherd/internal/metrics"
	"voucherd/internal/postgres"
	"voucherd/internal/rediskeys"
	"voucherd/internal/shed"
	"voucherd/internal/voucher"
	"voucherd/internal/webhook"
	"voucherd/migrations"
	"voucherd/server"
)

// Run runs the voucherd command: `serve` (the default), `migrate`, `user
// ...`, `broker` (a development Kafka-protocol broker) or `help` (usage in
// cli.go). Every command answers -h and --help with its usage on stdout and
// returns nil having done nothing else; a command line it cannot run is a
// *UsageError (ExitCode 2) before anything is read or started.
// It returns when ctx is cancelled (after a graceful shutdown) or on error.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	name := "serve"
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	err := run(ctx, name, args, getenv, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

func run(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// The settings are read once the command line is known to be good.
	setUp := func() (config, *slog.Logger, error) {
		cfg, err := loadConfig(getenv)
		if err != nil {
			return config{}, nil, fmt.Errorf("settings: %w", err)
		}
		return cfg, newLogger(cfg, stderr), nil
	}
	switch name {
	case "serve":
		if _, err := serveCommand.parse(args, nil, 0, stdout); err != nil {
			return err
		}
		cfg, logger, err := setUp()
		if err != nil {
			return err
		}
		tuneGC(getenv)
		return serve(ctx, cfg, logger, stdout)
	case "migrate":
		if _, err := migrateCommand.parse(args, nil, 0, stdout); err != nil {
			return err
		}
		cfg, logger, err := setUp()
		if err != nil {
			return err
		}
		return migrate(ctx, cfg, logger)
	case "user":
		return userCommand(ctx, getenv, args, stdout, stderr)
	case "key":
		return keyCommand(ctx, getenv, args, stdout, stderr)
	case "broker":
		if _, err := brokerCommand.parse(args, nil, 0, stdout); err != nil {
			return err
		}
		_, logger, err := setUp()
		if err != nil {
			return err
		}
		return runBroker(ctx, getenv, logger, stdout)
	case "help":
		// `voucherd help user add` is `voucherd user add -h`.
		topic, err := helpCommand.parse(args, nil, 2, stdout)
		if err != nil {
			return err
		}
		if len(topic) == 0 {
			fmt.Fprint(stdout, usage)
			return nil
		}
		return run(ctx, topic[0], append(topic[1:], "-h"), getenv, stdout, stderr)
	}
	if isHelp(name) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if strings.HasPrefix(name, "-") {
		return &UsageError{reason: fmt.Sprintf("unknown flag %q (flags follow the command: voucherd COMMAND -h)", name), usage: usage}
	}
	return &UsageError{reason: fmt.Sprintf("unknown command %q", name), usage: usage}
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	// Every record logged with a request's context names its client.
	if cfg.LogFormat == "json" {
		return slog.New(clientaddr.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(clientaddr.LogHandler(slog.NewTextHandler(w, opts)))
}

func migrate(ctx context.Context, cfg config, logger *slog.Logger) error {
	pool, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	pool.Close()
	return nil
}

// openMigrated opens the pool and applies pending migrations: what every
// subcommand that touches the database does first.
func openMigrated(ctx context.Context, cfg config, logger *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := migrateUp(ctx, pool, logger); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

func migrateUp(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	db := stdlib.OpenDBFromPool(pool)
	defer func(db *sql.DB) { _ = db.Close() }(db)
	results, err := migrations.Up(ctx, db)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		logger.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path)
	}
	return nil
}

func openPool(ctx context.Context, cfg config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, errors.New("DATABASE_URL is not a PostgreSQL URL")
	}
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		// pgx's default (the number of CPUs) queues a sale's winners behind
		// a handful of connections; more than this only adds lock waiters on
		// a hot voucher row.
		pc.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres does not answer: %w", err)
	}
	return pool, nil
}

func serve(ctx context.Context, cfg config, logger *slog.Logger, stdout io.Writer) error {
	pool, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	// One database, one write path, one broker (postgres.ClaimWritePath).
	others := slices.DeleteFunc([]string{"sync", "kafka"}, func(p string) bool { return p == cfg.FlashWritePath })
	writePath, err := postgres.ClaimWritePath(ctx, pool, cfg.FlashWritePath, others, cfg.FlashWritePath == "kafka" && len(cfg.KafkaBrokers) == 0)
	if err != nil {
		return fmt.Errorf("FLASH_WRITE_PATH: %w", err)
	}
	defer writePath.Release()
	// The lock is lost with its connection (a restart of PostgreSQL), and
	// taken again; when an instance that may not serve beside this one took
	// it meanwhile, this one stops, as it would have refused to start.
	holdCtx, stopHolding := context.WithCancel(ctx)
	lost := make(chan error, 1)
	holding := make(chan struct{})
	go func() {
		defer close(holding)
		if err := writePath.Hold(holdCtx, writePathCheck); err != nil {
			lost <- err
		}
	}()
	defer func() { stopHolding(); <-holding }()
	store := postgres.New(pool)

	rdb, err := gate.NewClient(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	defer func(rdb redis.UniversalClient) { _ = rdb.Close() }(rdb)

	if cfg.DebugAddr != "" {
		stop := serveDebug(cfg.DebugAddr, logger)
		defer stop()
	}
	if cfg.ClockOffset != 0 {
		voucher.SetClockOffset(cfg.ClockOffset)
		logger.Warn("this instance's clock is offset for a test of clock skew", "offset", cfg.ClockOffset)
	}
	m := metrics.New()
	g := gate.New(rdb, gate.WithAutoPipeline(cfg.RedisAutoPipeline))
	deps := voucher.Deps{Store: store, Gate: g, Observer: m}
	var kafka *kafkaWritePath
	if cfg.FlashWritePath == "kafka" {
		if kafka, err = openKafka(ctx, cfg, logger, m); err != nil {
			return err
		}
		defer kafka.close()
		deps.Kafka = kafka.deps(store, cfg)
	}
	svc := voucher.NewService(deps, voucher.Config{
		ReservationTTL:  cfg.ReservationTTL,
		SoldOutTTL:      cfg.SoldOutTTL,
		DefaultCurrency: cfg.DefaultCurrency,
		// Half an interval: the job's passes, an interval apart give or take
		// a timer's jitter, still return a leak within two intervals, and an
		// operator's pass a moment after the job's does not. Never less than
		// a winner's write may take: with a short interval a slow write's
		// order was taken for a leak and forgotten (a use missing from the
		// gate for good).
		LeakAge: max(cfg.ReconcileInterval/2, postgres.WinnerWriteLimit+2*time.Second),
		Logger:  logger,
	})
	// Another instance's release makes a sold-out voucher sellable here too.
	listenCtx, stopListening := context.WithCancel(context.WithoutCancel(ctx))
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		g.ListenReleased(listenCtx, svc.SoldOutLapsed, svc.AllSoldOutLapsed)
	}()
	defer func() { stopListening(); <-listening }()
	if kafka != nil {
		if err := kafka.startConsumer(ctx, svc); err != nil {
			return err
		}
	}

	// API keys: every instance holds the usable ones (a KeyRing), reads
	// them again when any instance creates or revokes one (Redis pub/sub)
	// and every API_KEY_TTL; rates are shared in Redis.
	keyChanges := rediskeys.NewChanges(rdb)
	apiKeys := voucher.NewApiKeys(store, keyChanges)
	ring := voucher.NewKeyRing(store, rediskeys.NewLimiter(rdb), voucher.KeyRingConfig{TTL: cfg.ApiKeyTTL, Logger: logger})
	ringCtx, stopRing := context.WithCancel(context.WithoutCancel(ctx))
	ringStopped := ring.Start(ringCtx)
	keysListening := make(chan struct{})
	go func() {
		defer close(keysListening)
		keyChanges.Listen(ringCtx, ring.Changed)
	}()
	defer func() { stopRing(); ringStopped(); <-keysListening }()

	// Webhook endpoints (GraphQL, the dashboard); the URL guard judges
	// every URL given and every address a delivery dials.
	guard := webhook.Guard{AllowPrivate: cfg.WebhookAllowPrivate}
	webhooks := voucher.NewWebhooks(store, guard.CheckURL)

	dash, err := newDashboard(ctx, cfg, store, svc, apiKeys, webhooks, logger, stdout)
	if err != nil {
		return err
	}

	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano())
	jobs := []*job.Periodic{
		job.Expiry(svc, cfg.ExpiryInterval, logger),
		job.Reconcile(svc, store, holder, cfg.ReconcileInterval, logger),
		job.WarmUp(svc, cfg.WarmUpInterval, logger),
		job.SampleCounters(dash.backoffice.SampleOpenVouchers, store, holder, sampleInterval, logger),
		job.SaleFlush(svc, cfg.SaleFlushInterval, logger),
	}
	for _, j := range jobs {
		j.Start(ctx)
	}
	defer func() {
		for _, j := range jobs {
			j.Stop()
		}
	}()
	// Webhooks: every instance numbers committed events and delivers them,
	// sharing the work through the database, off the request path.
	deliveries := webhook.NewWorker(webhook.Config{
		Store: store, Guard: guard, Timeout: cfg.WebhookTimeout, Concurrency: cfg.WebhookConcurrency,
		FirstRetry: cfg.WebhookFirstRetry, RetryFor: cfg.WebhookRetryFor, Observer: m, Logger: logger,
	})
	deliveries.Start(ctx)
	defer deliveries.Stop()
	// Campaigns' codes are generated in the background, here and in any
	// other instance, each campaign by one of them at a time (a lease).
	genCtx, stopGenerating := context.WithCancel(context.WithoutCancel(ctx))
	generating := make(chan struct{})
	go func() {
		defer close(generating)
		svc.RunCampaignGeneration(genCtx, holder)
	}()
	defer func() { stopGenerating(); <-generating }()

	var shedding *server.Shedding
	if cfg.ShedMaxInFlight > 0 {
		limiter := shed.New(shed.Config{Max: cfg.ShedMaxInFlight, Target: cfg.ShedTargetLatency, MaxWait: cfg.ShedMaxWait})
		shedding = &server.Shedding{Limiter: limiter, Shed: m.Shed}
		m.WatchShedding(limiter.Limit, limiter.InFlight)
	}

	graphiqlHeaders := ""
	if cfg.DevTokens {
		graphiqlHeaders = fmt.Sprintf("{\n  \"Authorization\": \"Bearer %s\"\n}", devAdminToken)
	}
	handler := server.NewServer(svc, server.Config{
		GraphiQLHeaders:  graphiqlHeaders,
		StorefrontTokens: cfg.StorefrontTokens,
		AdminTokens:      cfg.AdminTokens,
		Keys:             ring,
		ApiKeys:          apiKeys,
		Webhooks:         webhooks,
		Production:       cfg.Production,
		Logger:           logger,
		Metrics:          m.Handler(),
		MetricsNeedToken: cfg.MetricsNeedToken,
		MetricsTokens:    cfg.MetricsTokens,
		Observe:          m.ObserveHTTP,
		ClientAddresses:  cfg.TrustedProxies,
		Shedding:         shedding,
		Dashboard:        dash.handler,
		Session:          dash.session,
		Backoffice:       dash.backoffice,
		Ready: func(ctx context.Context) error {
			if err := pool.Ping(ctx); err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
			return rdb.Ping(ctx).Err()
		},
	})

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ConnContext:       cfg.TrustedProxies.ConnContext,
	}
	fmt.Fprintf(stdout, "voucherd listening on http://%s\n", ln.Addr())
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsLoopback() && !cfg.Production {
		fmt.Fprintln(stdout, "on loopback only, as outside production by default (HTTP_ADDR=:8080 listens on every interface)")
	}
	if cfg.DevTokens {
		fmt.Fprintf(stdout, "development tokens: storefront %q, admin %q (set STOREFRONT_TOKENS and ADMIN_TOKENS to replace them)\n", devStorefrontToken, devAdminToken)
	}
	logger.Info("serving", "addr", ln.Addr().String(), "flash_write_path", cfg.FlashWritePath, "production", cfg.Production)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var stopped error
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case err := <-lost:
		stopped = fmt.Errorf("FLASH_WRITE_PATH: %w", err)
		logger.Error("stopping: another instance serves this database on a write path this one may not serve beside", "err", err)
	case <-ctx.Done():
	}
	// Stop accepting, let requests in flight finish, then stop the jobs
	// (deferred above) and close the pools.
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return errors.Join(stopped, fmt.Errorf("shutdown: %w", err))
	}
	return stopped
}

// writePathCheck is how often serve checks its write path's lock
// (postgres.WritePath.Hold): once PostgreSQL answers again after a restart,
// the lock is free for at most about this long before it is taken again.
const writePathCheck = 5 * time.Second

// serveDebug serves net/http/pprof on a loopback address (DEBUG_ADDR), so a
// profile of the server under load from outside can be taken; the stop
// function closes it.
func serveDebug(addr string, logger *slog.Logger) func() {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("debug listener stopped", "addr", addr, "err", err)
		}
	}()
	logger.Info("profiles on the debug listener", "addr", "http://"+addr+"/debug/pprof/")
	return func() { _ = srv.Close() }
}
