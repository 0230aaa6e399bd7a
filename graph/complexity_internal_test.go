package graph

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"voucherd/graph/generated"
	"voucherd/graph/model"
)

const reserveMutation = `mutation Reserve($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { reservation { orderId status discountAmount expiresAt } error { code } } }`

func operationContext(t testing.TB, es graphql.ExecutableSchema, query, name string, vars map[string]any) *graphql.OperationContext {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		t.Fatal(err)
	}
	if errs := validator.ValidateWithRules(es.Schema(), doc, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	op := doc.Operations.ForName(name)
	coerced, gerr := validator.VariableValues(es.Schema(), op, vars)
	if gerr != nil {
		t.Fatal(gerr)
	}
	return &graphql.OperationContext{RawQuery: query, OperationName: name, Doc: doc, Operation: op, Variables: coerced}
}

// TestComplexityLimit_AnswersAsGqlgens: the same refusals, message and code as
// extension.FixedComplexityLimit, on the first request of an operation and
// on the cached ones after.
func TestComplexityLimit_AnswersAsGqlgens(t *testing.T) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}})
	var batch strings.Builder
	batch.WriteString("mutation {")
	for i := range 500 {
		fmt.Fprintf(&batch, ` m%d: reserveVoucher(input: {code: "c", customerId: "1", orderId: "o-%d", orderAmount: 100}) { error { code } }`, i, i)
	}
	batch.WriteString("}")
	vars := map[string]any{"input": map[string]any{"code": "flash-1", "customerId": "42", "orderId": "o-1", "orderAmount": int64(25000)}}
	ops := []*graphql.OperationContext{
		operationContext(t, es, reserveMutation, "Reserve", vars),
		operationContext(t, es, batch.String(), "", nil),
		operationContext(t, es, `{ vouchers(first: 200) { edges { cursor node { code discountAmount minOrderAmount totalLimit perUserLimit usedCount reservedCount confirmedCount remaining startsAt endsAt flash } } pageInfo { hasNextPage endCursor } } }`, "", nil),
	}
	for _, limit := range []int{MaxComplexity, 5} {
		gqlgens := extension.FixedComplexityLimit(limit)
		if err := gqlgens.Validate(es); err != nil {
			t.Fatal(err)
		}
		ours := newComplexityLimit(limit, generated.ComplexityRoot{})
		if !ours.perOperation {
			t.Fatal("no complexity function is set, yet the limit is not kept per operation")
		}
		if err := ours.Validate(es); err != nil {
			t.Fatal(err)
		}
		for i, opCtx := range ops {
			want := gqlgens.MutateOperationContext(context.Background(), opCtx)
			for range 2 {
				got := ours.MutateOperationContext(context.Background(), opCtx)
				if (got == nil) != (want == nil) || got != nil && (got.Message != want.Message || fmt.Sprint(got.Extensions) != fmt.Sprint(want.Extensions)) {
					t.Errorf("limit %d, operation %d: %v %v, gqlgen's: %v %v", limit, i, got, extensions(got), want, extensions(want))
				}
			}
		}
		if limit == MaxComplexity && (ours.MutateOperationContext(context.Background(), ops[0]) != nil || ours.MutateOperationContext(context.Background(), ops[1]) == nil) {
			t.Error("the reserve mutation must pass and the batch be refused")
		}
	}
}

func extensions(err *gqlerror.Error) map[string]any {
	if err == nil {
		return nil
	}
	return err.Extensions
}

func TestComplexityLimit_PerRequestWithAComplexityFunction(t *testing.T) {
	var cfg generated.Config
	cfg.Complexity.Mutation.ReserveVoucher = func(child int, _ model.ReserveVoucherInput) int { return child }
	if newComplexityLimit(MaxComplexity, cfg.Complexity).perOperation {
		t.Error("a complexity function may read variables: the complexity must be computed per request")
	}
}

// BenchmarkComplexityLimit: gqlgen's extension against this one, for the
// storefront's reserve mutation (every request of a GraphQL flash sale).
func BenchmarkComplexityLimit(b *testing.B) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}})
	opCtx := operationContext(b, es, reserveMutation, "Reserve", map[string]any{"input": map[string]any{"code": "flash-1", "customerId": "42", "orderId": "o-1", "orderAmount": int64(25000)}})
	for name, ext := range map[string]graphql.OperationContextMutator{
		"gqlgen": extension.FixedComplexityLimit(MaxComplexity),
		"cached": newComplexityLimit(MaxComplexity, generated.ComplexityRoot{}),
	} {
		if err := ext.(graphql.HandlerExtension).Validate(es); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				opCtx.Stats = graphql.Stats{}
				if err := ext.MutateOperationContext(context.Background(), opCtx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
