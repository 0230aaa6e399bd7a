package graph_test

// Benchmarks of what gqlgen does with the storefront's reserve mutation
// before any resolver runs: parsing and validating the document (once per
// distinct text, thanks to the handler's query cache), then, on every
// request, coercing the variables and computing the complexity limit.
//
//	go test -run '^$' -bench ReserveOperation -benchmem ./graph/

import (
	"context"
	"testing"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"voucherd/graph"
	"voucherd/graph/generated"
)

// benchReserveMutation is the operation cmd/flashbench sends.
const benchReserveMutation = `mutation Reserve($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { reservation { orderId status discountAmount expiresAt } error { code } } }`

func benchReserveVars() map[string]any {
	return map[string]any{"input": map[string]any{"code": "flash-1", "customerId": "42", "orderId": "o-1", "orderAmount": int64(25000)}}
}

func BenchmarkReserveOperation(b *testing.B) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &graph.Resolver{}})
	schema := es.Schema()
	doc, err := parser.ParseQuery(&ast.Source{Input: benchReserveMutation})
	if err != nil {
		b.Fatal(err)
	}
	if errs := validator.ValidateWithRules(schema, doc, nil); len(errs) > 0 {
		b.Fatal(errs)
	}
	op := doc.Operations.ForName("Reserve")

	b.Run("parse+validate (a query-cache miss)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := parser.ParseQuery(&ast.Source{Input: benchReserveMutation})
			if err != nil {
				b.Fatal(err)
			}
			if errs := validator.ValidateWithRules(schema, d, nil); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
	b.Run("query-cache hit", func(b *testing.B) {
		cache := lru.New[*ast.QueryDocument](1000)
		ctx := context.Background()
		cache.Add(ctx, benchReserveMutation, doc)
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := cache.Get(ctx, benchReserveMutation); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("variables (every request)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := validator.VariableValues(schema, op, benchReserveVars()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("complexity (every request)", func(b *testing.B) {
		vars, err := validator.VariableValues(schema, op, benchReserveVars())
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if n := complexity.Calculate(ctx, es, op, vars); n <= 0 {
				b.Fatal(n)
			}
		}
	})
}
