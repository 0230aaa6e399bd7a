package graph_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"voucherd/server"
)

// FuzzGraphQLRequest sends any body up to the 1 MiB limit to POST /graphql
// (production and development) with a storefront token: no panic, no 5xx,
// less than 64 MiB allocated, an answer of at most 1 MiB, and nothing
// internal in it that the body did not itself contain. `go test` runs the
// seeds in testdata/fuzz/FuzzGraphQLRequest (the hostile shapes, written
// by TestFuzzCorpus_HoldsTheHostileShapes -update-corpus); `make fuzz`
// explores from them.
func FuzzGraphQLRequest(f *testing.F) {
	for _, seed := range []string{
		string(query(`mutation Reserve($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { reservation { orderId status discountAmount expiresAt } error { code } } }`,
			map[string]any{"input": map[string]any{"code": "fuzz-1", "customerId": "42", "orderId": "o-1", "orderAmount": 25000}})),
		string(query(`{ vouchers(first: 2) { edges { cursor node { code remaining } } pageInfo { hasNextPage endCursor } } }`, nil)),
		string(query(`{ __schema { queryType { name } } }`, nil)),
		`{"query": "{ voucher(code: \"x\") { code } }", "extensions": {"persistedQuery": {"version": 1, "sha256Hash": "x"}}}`,
		`[{"query": "{ __typename }"}]`,
	} {
		f.Add([]byte(seed))
	}
	s := testSurface(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > server.MaxBodyBytes {
			return
		}
		s.logs.take()
		for _, env := range s.envs() {
			a := post(t, env.handler, body)
			if a.Status >= 500 {
				t.Fatalf("%s: %v", env.name, a)
			}
			if a.Allocated > maxAllocated {
				t.Fatalf("%s: %d MiB allocated, want less than %d", env.name, a.Allocated>>20, maxAllocated>>20)
			}
			if len(a.Raw) > server.MaxBodyBytes {
				t.Fatalf("%s: a %d-byte answer", env.name, len(a.Raw))
			}
			if l := leaks(a.Raw, body); l != "" {
				t.Fatalf("%s: the answer carries %q: %.500s", env.name, l, a.Raw)
			}
		}
		if logged := s.logs.take(); strings.Contains(logged, "panic") {
			t.Fatalf("logged a panic: %.500s", logged)
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzGraphQLRequest from hostileRequests")

// corpusBudget keeps the committed seeds small: the fuzzer grows them, and
// TestHostileRequests sends every shape at the full 1 MiB.
const corpusBudget = 16 << 10

// TestFuzzCorpus_HoldsTheHostileShapes: every hostile shape is a seed of
// FuzzGraphQLRequest, in the `go test fuzz v1` format, so that `go test`
// sends them through the fuzz target's checks and `make fuzz` starts from
// them. -update-corpus writes the files.
func TestFuzzCorpus_HoldsTheHostileShapes(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzGraphQLRequest")
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range hostileRequests(corpusBudget) {
		want := []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(h.body)) + ")\n")
		file := filepath.Join(dir, h.name)
		if *updateCorpus {
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(file)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is missing or stale (err %v): go test ./graph/ -run TestFuzzCorpus -update-corpus", file, err)
		}
	}
}
