package coalesce

import (
	"sync"
	"testing"
	"time"
)

// Held counts the calls queued and those in a batch still running, and
// drops them when their batch returns; the calls queued while both workers
// were busy go out as one batch.
func TestCoalescer_HeldCountsCallsUntilTheirBatchReturns(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	var answered sync.WaitGroup
	c := New(2, 100, func(batch []int) {
		<-release
		mu.Lock()
		sizes = append(sizes, len(batch))
		mu.Unlock()
		for range batch {
			answered.Done()
		}
	})
	answered.Add(10)
	for i := range 10 {
		c.Add(i)
	}
	if got := c.Held(); got != 10 {
		t.Fatalf("10 calls added, the workers held: Held() = %d, want 10", got)
	}
	close(release)
	answered.Wait()
	for deadline := time.Now().Add(5 * time.Second); c.Held() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("every call answered, Held() = %d, want 0", c.Held())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total != 10 || len(sizes) > 3 {
		t.Fatalf("batches %v: want the 10 calls in at most 3 (each worker's first, then the rest)", sizes)
	}
}
