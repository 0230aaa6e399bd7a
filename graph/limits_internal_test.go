package graph

import (
	"context"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// TestBoundedCache_KeepsNoLongTexts: the query and APQ caches hold 1000
// entries each; a text over maxCachedQueryBytes is not kept, so 1000
// distinct 1 MiB texts cannot pin 2 GiB.
func TestBoundedCache_KeepsNoLongTexts(t *testing.T) {
	ctx := context.Background()
	c := boundedCache[string]{Cache: lru.New[string](10), size: func(_, v string) int { return len(v) }}
	short, long := strings.Repeat("a", maxCachedQueryBytes), strings.Repeat("a", maxCachedQueryBytes+1)
	c.Add(ctx, "short", short)
	c.Add(ctx, "long", long)
	if _, ok := c.Get(ctx, "short"); !ok {
		t.Error("a text of maxCachedQueryBytes is not cached")
	}
	if _, ok := c.Get(ctx, "long"); ok {
		t.Error("a text over maxCachedQueryBytes is cached")
	}
}

// TestDocumentLimit_CountsFragmentSpreadsAsTheirFields: a spread counts as
// the fields it brings, each fragment counted once however often spread.
func TestDocumentLimit_CountsFragmentSpreadsAsTheirFields(t *testing.T) {
	spread := func(n int) string {
		return "{ " + strings.Repeat("...F ", n) + "} fragment F on Query { a b c d }"
	}
	for _, tc := range []struct {
		desc    string
		query   string
		refused bool
	}{
		{"124 spreads of 4 fields, 4 more for the fragment alone", spread(124), false},
		{"125 spreads of 4 fields, 4 more for the fragment alone", spread(125), true},
		{"a cycle counts nothing twice", "{ ...A } fragment A on Query { a ...B } fragment B on Query { b ...A }", false},
		{"an unknown fragment counts nothing", "{ ...Nope }", false},
	} {
		err := checkDocument(tc.query, false)
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v, refused want %v", tc.desc, err, tc.refused)
		}
	}
}

// BenchmarkDocumentLimit: what the limit adds to the storefront's reserve,
// whose text is in the query cache after its first request (one cache
// look-up), and to a cache miss (a lexing pass, a parse and a count).
func BenchmarkDocumentLimit(b *testing.B) {
	ctx := context.Background()
	cache := lru.New[*ast.QueryDocument](1000)
	doc, err := parser.ParseQuery(&ast.Source{Input: reserveMutation})
	if err != nil {
		b.Fatal(err)
	}
	cache.Add(ctx, reserveMutation, doc)
	d := documentLimit{cache: cache, production: true}
	b.Run("reserve, a query-cache hit (every request)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := d.MutateOperationParameters(ctx, &graphql.RawParams{Query: reserveMutation}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reserve, a query-cache miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := checkDocument(reserveMutation, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDocumentLimit_RefusesIntegerLiteralsBeyond64BitsOnTheirField: such a
// literal anywhere in a document (an argument, an input object's field, a
// list, a directive, a variable's default) is INVALID_INPUT naming where it
// is; the widest integers the API takes pass.
func TestDocumentLimit_RefusesIntegerLiteralsBeyond64BitsOnTheirField(t *testing.T) {
	for _, tc := range []struct {
		query, field string
	}{
		{`mutation { reserveVoucher(input: {code: "A", orderAmount: 9223372036854775808}) { reservation { orderId } } }`, "input.orderAmount"},
		{`mutation { reserveVoucher(input: {code: "A", orderAmount: -9223372036854775809}) { reservation { orderId } } }`, "input.orderAmount"},
		{`{ vouchers(first: 99999999999999999999) { edges { cursor } } }`, "first"},
		{`{ a(in: {list: [1, {n: 18446744073709551616}]}) }`, "in.list[1].n"},
		{`{ a @skip(n: 99999999999999999999) { b } }`, "n"},
		{`query($n: Int = 99999999999999999999) { a(n: $n) }`, "n"},
		{`{ ...F } fragment F on Query { a(n: 99999999999999999999) }`, "n"},
		{`{ a(n: 9223372036854775807, m: -9223372036854775808) }`, ""},
	} {
		err := checkDocument(tc.query, false)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: refused (%v), want it let through", tc.query, err)
			}
			continue
		}
		if err == nil || err.Extensions["code"] != "INVALID_INPUT" || err.Extensions["field"] != tc.field {
			t.Errorf("%s: %v, want INVALID_INPUT on %s", tc.query, err, tc.field)
		}
	}
}
