// Package explore is the seeded fault explorer (`make explore`): from a seed
// it derives a world of real processes (two or three `voucherd serve`, a
// `voucherd broker`, a Redis primary with a replica behind a proxy, a
// database of its own), a schedule of clients and a schedule of faults; it
// runs them, records every request, lets the system become quiet and checks
// the history against the contract (check.go). Everything random comes from
// the seed; only the interleavings the machine makes do not, so a failing
// seed usually fails again, and its logs are kept either way.
package explore

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// FaultKind is one kind of fault the explorer injects.
type FaultKind string

// The faults. Each has a start ("break") and, for those that last, an end
// ("heal") Length later.
const (
	// FaultKill: SIGKILL of one serve instance, restarted at the heal.
	FaultKill FaultKind = "kill-instance"
	// FaultFreeze: SIGSTOP of one serve instance (its consumer is held
	// back; the group hands its partitions to another instance, which
	// redelivers what was not committed), SIGCONT at the heal.
	FaultFreeze FaultKind = "freeze-instance"
	// FaultRedisEmpty: the Redis primary restarted with no data (its
	// replica resyncs from it and is empty too).
	FaultRedisEmpty FaultKind = "redis-restart-empty"
	// FaultFailover: the replica is cut off (it lags from now on); at the
	// heal it is promoted and the services' Redis address moves to it.
	FaultFailover FaultKind = "failover-lagging-replica"
	// FaultRebuild: an operator's rebuildGate(code) over GraphQL.
	FaultRebuild FaultKind = "rebuild-gate"
	// FaultReconcile: an operator's reconcileVoucher(code) over GraphQL.
	FaultReconcile FaultKind = "reconcile-voucher"
	// FaultBroker: `voucherd broker` stopped, started at the heal (its
	// data directory keeps its events).
	FaultBroker FaultKind = "broker-restart"
	// FaultPostgres: the world's own PostgreSQL cluster stopped, started
	// at the heal.
	FaultPostgres FaultKind = "postgres-stop"
)

// Fault is one fault of the schedule.
type Fault struct {
	At       time.Duration // after the clients start
	Kind     FaultKind
	Instance int           // FaultKill, FaultFreeze: which serve; FaultRebuild, FaultReconcile: which serve is asked
	Voucher  int           // FaultRebuild, FaultReconcile: which voucher
	Length   time.Duration // until the heal; 0 for the instant ones
}

func (f Fault) String() string {
	s := fmt.Sprintf("%6s %s", f.At.Round(10*time.Millisecond), f.Kind)
	switch f.Kind {
	case FaultKill, FaultFreeze:
		s += fmt.Sprintf(" serve#%d", f.Instance)
	case FaultRebuild, FaultReconcile:
		s += fmt.Sprintf(" voucher#%d via serve#%d", f.Voucher, f.Instance)
	}
	if f.Length > 0 {
		s += fmt.Sprintf(" for %s", f.Length.Round(10*time.Millisecond))
	}
	return s
}

// VoucherPlan is one voucher of the world.
type VoucherPlan struct {
	Flash   bool
	Total   int
	PerUser int
}

// Plan is everything the seed decides.
type Plan struct {
	Seed        uint64
	Mode        string // FLASH_WRITE_PATH: kafka or sync
	Instances   int
	OwnPostgres bool            // a cluster of its own (the seed stops PostgreSQL)
	TTL         time.Duration   // RESERVATION_TTL
	Offsets     []time.Duration // CLOCK_OFFSET of each instance
	Vouchers    []VoucherPlan   // the first is flash; an ordinary one may follow
	Customers   int64           // customer ids 1..Customers
	Workers     int
	Duration    time.Duration // how long the clients run
	Faults      []Fault       // in order of At
	// Mix: the clients' choices, cumulative weights of new reserve,
	// identical retry on another instance, confirm, release, rollback, the
	// orderId sent to another voucher, the orderId with another amount.
	Mix [7]float64
}

// NewPlan derives a plan from the seed alone. short makes it smaller (the
// seeds of `make test`).
func NewPlan(seed uint64, short bool) Plan {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := Plan{Seed: seed, Mode: "kafka", Instances: 2 + r.IntN(2)}
	// One seed family in sync mode.
	if r.IntN(5) == 0 {
		p.Mode = "sync"
	}
	p.TTL = 10 * time.Minute
	// A family with reservations that expire within the run.
	if r.IntN(4) == 0 {
		p.TTL = time.Duration(3+r.IntN(4)) * time.Second
	}
	p.Offsets = make([]time.Duration, p.Instances)
	if r.IntN(3) == 0 { // clock skew: up to 2 s either way, the first instance on time
		for i := 1; i < p.Instances; i++ {
			p.Offsets[i] = time.Duration(r.Int64N(int64(4*time.Second))) - 2*time.Second
		}
	}
	// Small stock sells out at once (retries and releases meet a sold-out
	// gate); larger stock keeps admitting while the faults strike.
	p.Vouchers = []VoucherPlan{{Flash: true, Total: 10 + r.IntN(140), PerUser: 1 + r.IntN(2)}}
	if r.IntN(2) == 0 {
		p.Vouchers = append(p.Vouchers, VoucherPlan{Flash: true, Total: 5 + r.IntN(15), PerUser: 1})
	}
	// An ordinary voucher, for orderIds sent to a flash and an ordinary one.
	p.Vouchers = append(p.Vouchers, VoucherPlan{Flash: false, Total: 1000, PerUser: 3})
	p.Customers = int64(20 + r.IntN(300))
	p.Workers = 6 + r.IntN(6)
	p.Duration = time.Duration(10+r.IntN(8)) * time.Second
	if short {
		p.Workers, p.Duration = 5, 8*time.Second
	}
	w := [7]float64{0.40, 0.14, 0.16, 0.11, 0.06, 0.08, 0.06}
	sum := 0.0
	for i, x := range w {
		sum += x * (0.5 + r.Float64())
		p.Mix[i] = sum
	}
	for i := range p.Mix {
		p.Mix[i] /= sum
	}

	// The operator's calls are instant and cheap: twice as likely.
	kinds := []FaultKind{FaultKill, FaultFreeze, FaultRedisEmpty, FaultFailover, FaultRebuild, FaultReconcile, FaultRebuild, FaultReconcile, FaultBroker, FaultPostgres}
	if p.Mode == "sync" {
		kinds = []FaultKind{FaultKill, FaultFreeze, FaultRedisEmpty, FaultFailover, FaultRebuild, FaultReconcile, FaultRebuild, FaultReconcile, FaultPostgres}
	}
	// busy holds the windows of the lasting faults per resource; PostgreSQL
	// and the broker are "all": nothing else overlaps them (a serve does not
	// start without them).
	type window struct{ from, to time.Duration }
	busy := map[string][]window{}
	free := func(res string, w window) bool {
		for _, k := range []string{res, "all"} {
			for _, b := range busy[k] {
				if w.from < b.to+time.Second && b.from < w.to+time.Second {
					return false
				}
			}
		}
		if res == "all" {
			for _, ws := range busy {
				for _, b := range ws {
					if w.from < b.to+time.Second && b.from < w.to+time.Second {
						return false
					}
				}
			}
		}
		return true
	}
	failedOver := time.Duration(-1)
	n := 3 + r.IntN(6)
	if short {
		n = 2
	}
	for range n * 3 { // tries; some land on a busy resource
		if len(p.Faults) == n {
			break
		}
		f := Fault{Kind: kinds[r.IntN(len(kinds))], Instance: r.IntN(p.Instances), Voucher: r.IntN(len(p.Vouchers))}
		span := p.Duration - 2*time.Second
		f.At = time.Second + time.Duration(r.Int64N(int64(span-time.Second)))
		res := ""
		switch f.Kind {
		case FaultKill, FaultFreeze:
			f.Length = time.Duration(500+r.IntN(3000)) * time.Millisecond
			if f.Kind == FaultFreeze && r.IntN(2) == 0 {
				// Long enough for the consumer group to hand the frozen
				// instance's partitions to another one.
				f.Length = time.Duration(6000+r.IntN(3000)) * time.Millisecond
			}
			res = fmt.Sprintf("serve#%d", f.Instance)
		case FaultRedisEmpty:
			res = "redis"
			if failedOver >= 0 { // the primary restarts before any failover
				continue
			}
		case FaultFailover:
			if failedOver >= 0 {
				continue
			}
			f.Length = time.Duration(500+r.IntN(2500)) * time.Millisecond
			res = "redis"
		case FaultRebuild, FaultReconcile:
			for !p.Vouchers[f.Voucher].Flash {
				f.Voucher = r.IntN(len(p.Vouchers))
			}
		case FaultBroker, FaultPostgres:
			f.Length = time.Duration(1000+r.IntN(3000)) * time.Millisecond
			res = "all"
		}
		if f.At+f.Length > p.Duration-time.Second {
			f.Length = p.Duration - time.Second - f.At
			if f.Length <= 0 && res != "" && f.Kind != FaultRedisEmpty {
				continue
			}
		}
		w := window{f.At, f.At + f.Length}
		if res != "" && !free(res, w) {
			continue
		}
		if res != "" {
			busy[res] = append(busy[res], w)
		}
		if f.Kind == FaultFailover {
			failedOver = f.At
		}
		if f.Kind == FaultPostgres {
			p.OwnPostgres = true
		}
		p.Faults = append(p.Faults, f)
	}
	// A Redis restart after the failover would restart the promoted
	// replica as a replica again: drop it.
	if failedOver >= 0 {
		kept := p.Faults[:0]
		for _, f := range p.Faults {
			if f.Kind == FaultRedisEmpty && f.At >= failedOver {
				continue
			}
			kept = append(kept, f)
		}
		p.Faults = kept
	}
	sortFaults(p.Faults)
	return p
}

func sortFaults(fs []Fault) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].At < fs[j-1].At; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: FLASH_WRITE_PATH=%s, %d serve instances (CLOCK_OFFSET %v), RESERVATION_TTL %s, own PostgreSQL cluster %t\n",
		p.Seed, p.Mode, p.Instances, p.Offsets, p.TTL, p.OwnPostgres)
	for i, v := range p.Vouchers {
		fmt.Fprintf(&b, "  voucher#%d flash %t totalLimit %d perUserLimit %d\n", i, v.Flash, v.Total, v.PerUser)
	}
	fmt.Fprintf(&b, "  %d clients for %s, customers 1..%d, mix %.2f\n", p.Workers, p.Duration, p.Customers, p.Mix)
	for _, f := range p.Faults {
		fmt.Fprintf(&b, "  fault %s\n", f)
	}
	return b.String()
}
