package graph_test

// What the hostile shapes cost through the whole HTTP surface, each request
// a query-cache miss as an attacker's would be (a refused document is never
// cached, a text over 8 KiB neither):
//
//	go test -run '^$' -bench HostileRequests -benchmem ./graph/
//
// answer-B is the size of the answer. The contract's bound is 1 s of a core
// and 64 MiB for any request up to the 1 MiB body limit.

import (
	"testing"
)

func BenchmarkHostileRequests(b *testing.B) {
	s := testSurface(b)
	for _, h := range hostileRequests(fullBody) {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(h.body)))
			var answer int
			for b.Loop() {
				a := post(b, s.prod, h.body)
				if a.code() != h.code {
					b.Fatalf("code %q, want %q: %v", a.code(), h.code, a)
				}
				answer = len(a.Raw)
			}
			b.ReportMetric(float64(answer), "answer-B")
		})
	}
}
