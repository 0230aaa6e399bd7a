package testproc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/events"
	"voucherd/internal/testproc"
)

// TestBroker_AsAProcessCarriesEventsAndStopsOnSIGTERM: `voucherd broker` as
// an OS process serves the service's topic (created at its start) to a
// producer and a consumer, and exits cleanly on SIGTERM.
func TestBroker_AsAProcessCarriesEventsAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	b := testproc.Broker(t, nil)
	produce(t, b.Addr, 5)
	if got := consume(t, b.Addr); len(got) != 5 || got[0] != "v0" || got[4] != "v4" {
		t.Fatalf("consumed %v, want v0..v4", got)
	}
	b.Stop(t)
	if st := b.Exited(); st == nil || !st.Success() {
		t.Fatalf("broker after SIGTERM: %v, want exit status 0\n%s", st, b.Logs())
	}
}

// TestBroker_WithADataDirKeepsItsEventsAcrossItsOwnRestart: with
// BROKER_DATA_DIR the broker's events survive a stop and a start; without
// it, they are gone (in memory only).
func TestBroker_WithADataDirKeepsItsEventsAcrossItsOwnRestart(t *testing.T) {
	t.Parallel()
	for _, persistent := range []bool{true, false} {
		t.Run(fmt.Sprintf("persistent=%v", persistent), func(t *testing.T) {
			env := map[string]string{}
			if persistent {
				env["BROKER_DATA_DIR"] = t.TempDir()
			}
			b := testproc.Broker(t, env)
			produce(t, b.Addr, 3)
			b.Stop(t)
			b.Start(t)
			got := consume(t, b.Addr)
			if persistent && len(got) != 3 {
				t.Errorf("after a restart with a data dir: %v, want 3 events", got)
			}
			if !persistent && len(got) != 0 {
				t.Errorf("after a restart in memory: %v, want none", got)
			}
		})
	}
}

func produce(t *testing.T, addr string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(events.DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range n {
		// One key: one partition, so the order is kept.
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("V"), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce to voucherd broker: %v", err)
		}
	}
}

// consume writes an end mark and reads the topic from its start up to it:
// what was on the topic before.
func consume(t *testing.T, addr string) []string {
	t.Helper()
	const mark = "end-mark"
	pcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(events.DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pcl.ProduceSync(ctx, &kgo.Record{Key: []byte("V"), Value: []byte(mark)}).FirstErr(); err != nil {
		t.Fatalf("produce to voucherd broker: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(events.DefaultTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the end mark never came back; read %v", got)
		}
		for _, r := range f.Records() {
			if string(r.Value) == mark {
				return got
			}
			got = append(got, string(r.Value))
		}
	}
}
