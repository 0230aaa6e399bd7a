package graph

import (
	"context"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// fuzzCode is the voucher the fuzz target's seeds reserve, confirm and
// release: open until 2100, with uses for many runs.
const fuzzCode = "fuzz-fast"

// FuzzFastPathMatchesExecutor sends a request made of a query text, an
// operationName (left out when empty) and a variables JSON text to the
// handler with its fast path and to the general executor, and fails unless
// both answer with the same status and the same bytes (see differOn: the
// first request may change the state, the two compared see the same).
// `go test` replays the seeds in testdata/fuzz/FuzzFastPathMatchesExecutor;
// `make fuzz` explores from them.
func FuzzFastPathMatchesExecutor(f *testing.F) {
	f.Add(reserveDoc, "Reserve", []byte(`{"input":{"code":"fuzz-fast","customerId":"1","orderId":"fz-1","orderAmount":2000}}`))
	f.Add(confirmDoc, "", []byte(`{"input":{"code":"fuzz-fast","orderId":"fz-1"}}`))
	f.Add(releaseDoc, "", []byte(`{"in":{"code":"fuzz-fast","orderId":"fz-1"}}`))
	tw := testTwin(f)
	_, err := tw.svc.CreateVoucher(context.Background(), voucher.NewVoucher{
		Code: fuzzCode, DiscountAmount: 500, MinOrderAmount: 1000, TotalLimit: 1_000_000, PerUserLimit: 1_000_000,
		StartsAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), EndsAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil && voucher.ErrorCodeOf(err) != voucher.VoucherExists {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query, operationName string, variables []byte) {
		b := []byte(`{"query":` + jsonString(query))
		if operationName != "" {
			b = append(b, `,"operationName":`+jsonString(operationName)...)
		}
		b = append(append(append(b, `,"variables":`...), variables...), '}')
		tw.differ(t, voucher.RoleStorefront, b)
	})
}
