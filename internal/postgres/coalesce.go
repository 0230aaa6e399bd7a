package postgres

import (
	"slices"
	"sync"
)

// coalescer hands the calls queued while its workers are busy to the next
// free worker as one batch: at most workers batches run at once, each of up
// to maxBatch calls. Nothing waits to fill a batch (a lone call runs at
// once); under a stampede the batches grow by themselves. The flash winners'
// writes (batch.go) and the reads of reservations (lookup.go) go through one.
type coalescer[T any] struct {
	workers, maxBatch int
	// run answers every call of the batch before it returns, so a busy
	// worker lets the next batch gather.
	run func(batch []T)

	mu      sync.Mutex
	pending []T
	busy    int
}

func newCoalescer[T any](workers, maxBatch int, run func([]T)) *coalescer[T] {
	return &coalescer[T]{workers: workers, maxBatch: maxBatch, run: run}
}

// add queues a call, starting a worker if fewer than workers run.
func (c *coalescer[T]) add(call T) {
	c.mu.Lock()
	c.pending = append(c.pending, call)
	start := c.busy < c.workers
	if start {
		c.busy++
	}
	c.mu.Unlock()
	if start {
		go c.drain()
	}
}

// drain runs batches until nothing is queued.
func (c *coalescer[T]) drain() {
	for {
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.pending = nil
			c.busy--
			c.mu.Unlock()
			return
		}
		n := min(len(c.pending), c.maxBatch)
		batch := slices.Clone(c.pending[:n])
		c.pending = c.pending[n:]
		c.mu.Unlock()
		c.run(batch)
	}
}
