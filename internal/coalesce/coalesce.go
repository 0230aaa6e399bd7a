// Package coalesce turns concurrent calls into batches without waiting to
// fill them.
package coalesce

import (
	"slices"
	"sync"
)

// Coalescer hands the calls queued while its workers are busy to the next
// free worker as one batch: at most workers batches run at once, each of up
// to maxBatch calls. Nothing waits to fill a batch (a lone call runs at
// once); under a stampede the batches grow by themselves. The flash winners'
// writes and the reads of reservations (internal/postgres) and the kafka
// path's finalizing of admissions (internal/gate) go through one.
type Coalescer[T any] struct {
	workers, maxBatch int
	// run answers every call of the batch before it returns, so a busy
	// worker lets the next batch gather.
	run func(batch []T)

	mu      sync.Mutex
	pending []T
	busy    int
	held    int // calls queued or in a running batch
}

// New makes a Coalescer whose batches run runs; run must answer every call
// of its batch before it returns.
func New[T any](workers, maxBatch int, run func([]T)) *Coalescer[T] {
	return &Coalescer[T]{workers: workers, maxBatch: maxBatch, run: run}
}

// Add queues a call, starting a worker if fewer than workers run.
func (c *Coalescer[T]) Add(call T) {
	c.mu.Lock()
	c.pending = append(c.pending, call)
	c.held++
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
func (c *Coalescer[T]) drain() {
	ran := 0
	for {
		c.mu.Lock()
		c.held -= ran
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
		ran = n
	}
}

// Held is how many calls the Coalescer holds: queued, or in a batch that
// has not returned yet. A test waits on it to know that its calls are in.
func (c *Coalescer[T]) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// PerKey is one Coalescer per key (a voucher's code, so that a batch is
// always of one voucher), each made on its key's first call.
type PerKey[T any] struct {
	workers, maxBatch int
	run               func(key string, batch []T)
	queues            sync.Map // key -> *Coalescer[T]
}

// NewPerKey makes a PerKey whose batches of key run run(key, batch); run
// must answer every call of its batch before it returns.
func NewPerKey[T any](workers, maxBatch int, run func(key string, batch []T)) *PerKey[T] {
	return &PerKey[T]{workers: workers, maxBatch: maxBatch, run: run}
}

// Add queues a call in key's Coalescer.
func (p *PerKey[T]) Add(key string, call T) {
	q, ok := p.queues.Load(key)
	if !ok {
		q, _ = p.queues.LoadOrStore(key, New(p.workers, p.maxBatch, func(batch []T) { p.run(key, batch) }))
	}
	q.(*Coalescer[T]).Add(call)
}
