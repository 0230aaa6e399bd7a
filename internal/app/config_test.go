package app

import (
	"context"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfig_ProductionRefusesToStartWithoutRealTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		env  map[string]string
		want string
	}{
		{"no tokens", map[string]string{"APP_ENV": "production"}, "needs STOREFRONT_TOKENS and ADMIN_TOKENS"},
		{"only storefront tokens", map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": "a-long-storefront-token"}, "needs STOREFRONT_TOKENS and ADMIN_TOKENS"},
		{"development tokens", map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": devStorefrontToken, "ADMIN_TOKENS": devAdminToken}, "refuses the development tokens"},
		{"short tokens", map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": "short", "ADMIN_TOKENS": "tiny"}, "at least 16 characters"},
		{"short metrics token", map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": "a-long-storefront-token", "ADMIN_TOKENS": "a-long-admin-token-01", "METRICS_TOKENS": "short"}, "at least 16 characters"},
		{"kafka without brokers", map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": "a-long-storefront-token", "ADMIN_TOKENS": "a-long-admin-token-01", "FLASH_WRITE_PATH": "kafka"},
			"FLASH_WRITE_PATH=kafka needs KAFKA_BROKERS"},
		{"clock offset", map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": "a-long-storefront-token", "ADMIN_TOKENS": "a-long-admin-token-01", "CLOCK_OFFSET": "1s"},
			"APP_ENV=production refuses it"},
	} {
		// Run refuses before it touches any dependency.
		err := Run(context.Background(), []string{"serve"}, env(tc.env), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run = %v, want an error saying %q", tc.desc, err, tc.want)
		}
	}
}

func TestConfig_DevelopmentDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.DevTokens || c.StorefrontTokens[0] != devStorefrontToken || c.AdminTokens[0] != devAdminToken {
		t.Errorf("development tokens = %v %v", c.StorefrontTokens, c.AdminTokens)
	}
	if c.HTTPAddr != "127.0.0.1:8080" || c.FlashWritePath != "sync" || c.ReservationTTL.String() != "15m0s" || c.LogFormat != "text" {
		t.Errorf("defaults = %+v", c)
	}
	if c.DefaultCurrency != "USD" {
		t.Errorf("DEFAULT_CURRENCY default = %q, want USD", c.DefaultCurrency)
	}
	if c, err := loadConfig(env(map[string]string{"DEFAULT_CURRENCY": "JPY"})); err != nil || c.DefaultCurrency != "JPY" {
		t.Errorf("DEFAULT_CURRENCY=JPY: %q, %v", c.DefaultCurrency, err)
	}
	if !c.RedisAutoPipeline {
		t.Error("REDIS_AUTOPIPELINE is off by default; want on")
	}
	for value, want := range map[string]bool{"false": false, "0": false, "true": true, "1": true} {
		if c, err := loadConfig(env(map[string]string{"REDIS_AUTOPIPELINE": value})); err != nil || c.RedisAutoPipeline != want {
			t.Errorf("REDIS_AUTOPIPELINE=%s: %v, %v; want %v", value, c.RedisAutoPipeline, err, want)
		}
	}
	for _, tc := range []struct{ name, value, want string }{
		{"RESERVATION_TTL", "soon", "RESERVATION_TTL"},
		{"EXPIRY_INTERVAL", "-1s", "EXPIRY_INTERVAL"},
		{"FLASH_WRITE_PATH", "carrier-pigeon", "FLASH_WRITE_PATH"},
		{"LOG_FORMAT", "xml", "LOG_FORMAT"},
		{"REDIS_AUTOPIPELINE", "maybe", "REDIS_AUTOPIPELINE"},
		{"DEFAULT_CURRENCY", "usd", "DEFAULT_CURRENCY"},
		{"DEFAULT_CURRENCY", "XYZ", "DEFAULT_CURRENCY"},
	} {
		if _, err := loadConfig(env(map[string]string{tc.name: tc.value})); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v", tc.name, tc.value, err)
		}
	}
	if _, err := loadConfig(env(map[string]string{"STOREFRONT_TOKENS": "same-token", "ADMIN_TOKENS": "same-token"})); err == nil {
		t.Error("a token both storefront and admin was accepted")
	}
	c, _ = loadConfig(env(map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": "storefront-token-0001", "ADMIN_TOKENS": "admin-token-00000001"}))
	if c.LogFormat != "json" {
		t.Errorf("production log format = %s, want json", c.LogFormat)
	}
	if c.HTTPAddr != ":8080" {
		t.Errorf("production HTTP_ADDR default = %q, want :8080 (every interface)", c.HTTPAddr)
	}
	if c, _ := loadConfig(env(map[string]string{"HTTP_ADDR": ":9090"})); c.HTTPAddr != ":9090" {
		t.Errorf("HTTP_ADDR=:9090 gave %q", c.HTTPAddr)
	}
}

func TestConfig_MetricsTokensAndKafkaBrokers(t *testing.T) {
	t.Parallel()
	prod := map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": "a-long-storefront-token", "ADMIN_TOKENS": "a-long-admin-token-01"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range prod {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	c, err := loadConfig(env(with(map[string]string{"METRICS_TOKENS": "a-long-metrics-token, another-metrics-token"})))
	if err != nil || len(c.MetricsTokens) != 2 || !c.MetricsNeedToken {
		t.Errorf("production with METRICS_TOKENS: %v %+v; want two tokens, /metrics behind them", err, c.MetricsTokens)
	}
	if c, err := loadConfig(env(prod)); err != nil || !c.MetricsNeedToken {
		t.Errorf("production without METRICS_TOKENS: %v; want /metrics behind the admin tokens", err)
	}
	if c, err := loadConfig(env(nil)); err != nil || c.MetricsNeedToken {
		t.Errorf("development: %v, need a token %v; want /metrics open", err, c.MetricsNeedToken)
	}
	if c, err := loadConfig(env(map[string]string{"METRICS_TOKENS": "m"})); err != nil || !c.MetricsNeedToken {
		t.Errorf("development with METRICS_TOKENS: %v, need a token %v; want /metrics behind them", err, c.MetricsNeedToken)
	}
	if _, err := loadConfig(env(map[string]string{"METRICS_TOKENS": "same-token", "STOREFRONT_TOKENS": "same-token"})); err == nil {
		t.Error("a metrics token that is also a storefront token was accepted")
	}
	if _, err := loadConfig(env(with(map[string]string{"FLASH_WRITE_PATH": "kafka", "KAFKA_BROKERS": "kafka-1:9092"}))); err != nil {
		t.Errorf("production kafka with brokers: %v", err)
	}
	if _, err := loadConfig(env(map[string]string{"FLASH_WRITE_PATH": "kafka"})); err != nil {
		t.Errorf("development kafka without brokers (the in-process broker): %v", err)
	}
}

// TestConfig_TrustedProxiesAreCIDRsOrTheStartStops: TRUSTED_PROXIES takes
// comma-separated CIDRs; anything else stops the start with a message
// naming the setting and the bad entry.
func TestConfig_TrustedProxiesAreCIDRsOrTheStartStops(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env(map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::/32"}))
	if err != nil || !c.TrustedProxies.Trusts(netip.MustParseAddr("10.1.2.3")) || c.TrustedProxies.Trusts(netip.MustParseAddr("192.0.2.1")) {
		t.Errorf("TRUSTED_PROXIES=10.0.0.0/8,2001:db8::/32: %v", err)
	}
	if c, err := loadConfig(env(nil)); err != nil || c.TrustedProxies.Trusts(netip.MustParseAddr("10.1.2.3")) {
		t.Errorf("no TRUSTED_PROXIES: %v, want no proxy trusted", err)
	}
	for _, bad := range []string{"10.0.0.1", "10.0.0.0/8,lb.internal", "10.0.0.0/40"} {
		err := Run(context.Background(), []string{"serve"}, env(map[string]string{"TRUSTED_PROXIES": bad, "DATABASE_URL": "postgres://voucher@127.0.0.1:1/none?connect_timeout=1"}), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "TRUSTED_PROXIES") || !strings.Contains(err.Error(), "not a CIDR") {
			t.Errorf("TRUSTED_PROXIES=%s: Run = %v, want an error naming TRUSTED_PROXIES", bad, err)
		}
	}
}

func TestConfig_ClockOffsetOutsideProduction(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env(map[string]string{"CLOCK_OFFSET": "-1500ms"}))
	if err != nil || c.ClockOffset != -1500*time.Millisecond {
		t.Fatalf("CLOCK_OFFSET=-1500ms: %v, %v; want -1.5s", c.ClockOffset, err)
	}
	if _, err := loadConfig(env(map[string]string{"CLOCK_OFFSET": "soon"})); err == nil || !strings.Contains(err.Error(), "CLOCK_OFFSET must be a duration") {
		t.Fatalf("CLOCK_OFFSET=soon: %v, want a refusal", err)
	}
}

func TestConfig_SheddingSettings(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.ShedMaxInFlight != 0 || c.ShedTargetLatency != 100*time.Millisecond || c.ShedMaxWait != 10*time.Millisecond {
		t.Errorf("shedding defaults = %d, %v, %v; want 0 (off), 100ms, 10ms", c.ShedMaxInFlight, c.ShedTargetLatency, c.ShedMaxWait)
	}
	c, err = loadConfig(env(map[string]string{"SHED_MAX_INFLIGHT": "512", "SHED_MAX_WAIT": "0"}))
	if err != nil || c.ShedMaxInFlight != 512 || c.ShedMaxWait != 0 {
		t.Errorf("SHED_MAX_INFLIGHT=512 SHED_MAX_WAIT=0 (shedding on, no wait): %d, %v, %v", c.ShedMaxInFlight, c.ShedMaxWait, err)
	}
	for name, values := range map[string][]string{
		"SHED_MAX_INFLIGHT":   {"-1", "many", "1.5", "2000000"},
		"SHED_TARGET_LATENCY": {"0", "-5ms", "fast"},
		"SHED_MAX_WAIT":       {"-1ms", "soon"},
	} {
		for _, v := range values {
			_, err := loadConfig(env(map[string]string{name: v}))
			if err == nil || !strings.Contains(err.Error(), name+" must be") {
				t.Errorf("%s=%s: %v, want an error naming the setting", name, v, err)
			}
		}
	}
}

func TestConfig_WebhookSettingsHaveSafeProductionDefaults(t *testing.T) {
	t.Parallel()
	prod := map[string]string{"APP_ENV": "production", "STOREFRONT_TOKENS": "a-long-storefront-token", "ADMIN_TOKENS": "a-long-admin-token-01"}
	c, err := loadConfig(env(prod))
	if err != nil {
		t.Fatal(err)
	}
	if c.WebhookAllowPrivate || c.WebhookTimeout != 10*time.Second || c.WebhookConcurrency != 8 || c.WebhookFirstRetry != 30*time.Second || c.WebhookRetryFor != 24*time.Hour {
		t.Errorf("production defaults: private %t, timeout %s, concurrency %d, first retry %s, retry for %s",
			c.WebhookAllowPrivate, c.WebhookTimeout, c.WebhookConcurrency, c.WebhookFirstRetry, c.WebhookRetryFor)
	}
	if c, _ := loadConfig(env(nil)); !c.WebhookAllowPrivate {
		t.Error("outside production internal addresses are refused; want allowed (a developer's receiver)")
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for pk, pv := range prod {
			m[pk] = pv
		}
		return m
	}
	if c, err := loadConfig(env(with("WEBHOOK_ALLOW_PRIVATE", "true"))); err != nil || !c.WebhookAllowPrivate {
		t.Errorf("WEBHOOK_ALLOW_PRIVATE=true in production: %t %v", c.WebhookAllowPrivate, err)
	}
	for _, tc := range []struct{ name, value, want string }{
		{"WEBHOOK_ALLOW_PRIVATE", "yes", "WEBHOOK_ALLOW_PRIVATE must be true or false"},
		{"WEBHOOK_TIMEOUT", "2m", "WEBHOOK_TIMEOUT must be at most 1m"},
		{"WEBHOOK_TIMEOUT", "0s", "WEBHOOK_TIMEOUT must be a positive duration"},
		{"WEBHOOK_FIRST_RETRY", "5m", "within a minute"},
		{"WEBHOOK_RETRY_FOR", "1h", "at least 24h with APP_ENV=production"},
		{"WEBHOOK_CONCURRENCY", "0", "WEBHOOK_CONCURRENCY must be a whole number from 1 to 256"},
	} {
		if _, err := loadConfig(env(with(tc.name, tc.value))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want %q", tc.name, tc.value, err, tc.want)
		}
	}
	if c, err := loadConfig(env(map[string]string{"WEBHOOK_RETRY_FOR": "2s"})); err != nil || c.WebhookRetryFor != 2*time.Second {
		t.Errorf("a short retry window outside production (tests): %s %v", c.WebhookRetryFor, err)
	}
}
