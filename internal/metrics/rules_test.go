package metrics_test

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"voucherd/internal/metrics"
	"voucherd/internal/voucher"
)

// TestAlertRules_NameOnlyMetricsTheServiceExposes keeps
// deploy/prometheus/voucher-alerts.yml in step with /metrics: a renamed
// metric would leave an alert that never fires.
func TestAlertRules_NameOnlyMetricsTheServiceExposes(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/prometheus/voucher-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert  string            `yaml:"alert"`
				Expr   string            `yaml:"expr"`
				Labels map[string]string `yaml:"labels"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}

	m := metrics.New()
	// One of each so every labelled family shows on the registry.
	m.ReserveDone(voucher.PathKafka, "", time.Millisecond)
	m.GateCall("reserve", errors.New("down"), time.Millisecond)
	m.DriftChecked(voucher.DriftReport{VoucherCode: "V"})
	m.EventProduced("reserved", nil, time.Millisecond)
	m.EventConsumed("reserved", "applied")
	m.DeadLettered("reserved")
	m.ConsumerLag(0)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]bool{}
	for _, f := range families {
		exposed[f.GetName()] = true
	}
	// HTTP metrics appear once a route is served; they are declared in New.
	exposed["voucher_http_request_duration_seconds"] = true

	names := regexp.MustCompile(`\bvoucher_[a-z_]+`)
	alerts := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v: want alert, expr and a severity", r)
			}
			alerts[r.Alert] = true
			for _, name := range names.FindAllString(r.Expr, -1) {
				base := strings.TrimSuffix(name, "_bucket")
				if !exposed[base] {
					t.Errorf("alert %s names %s, which /metrics does not expose", r.Alert, name)
				}
			}
		}
	}
	for _, want := range []string{"VoucherGateDriftPersists", "VoucherDeadLetters", "VoucherConsumerStuck",
		"VoucherConsumerLagHigh", "VoucherGateErrors", "VoucherReserveLatencyP99High", "VoucherWebhookEndpointDisabled"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}
