package app

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestBroker_SettingsDefaultAndRefuseABadAddress(t *testing.T) {
	t.Parallel()
	s, err := loadBrokerSettings(env(nil))
	if err != nil || s.Addr != "127.0.0.1:9092" || s.DataDir != "" {
		t.Errorf("defaults = %+v, %v; want 127.0.0.1:9092 in memory", s, err)
	}
	for _, bad := range []string{"9092", "localhost", ":9092", "127.0.0.1:port", "127.0.0.1:70000"} {
		err := Run(context.Background(), []string{"broker"}, env(map[string]string{"BROKER_ADDR": bad}), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "BROKER_ADDR") {
			t.Errorf("BROKER_ADDR=%s: Run = %v, want an error naming BROKER_ADDR", bad, err)
		}
	}
}

func TestRun_HelpListsTheBroker(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := Run(context.Background(), []string{"help"}, env(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "broker") || !strings.Contains(out.String(), "KAFKA_BROKERS=127.0.0.1:9092") {
		t.Errorf("help = %q, want the broker command and how to use it", out.String())
	}
}
