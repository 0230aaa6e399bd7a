package graph

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"voucherd/graph/generated"
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

// everyVoucherField selects every field of a voucher but its campaign.
const everyVoucherField = `code discountType discountAmount discountPercent maxDiscountAmount currency budgetAmount budgetUsed minOrderAmount totalLimit perUserLimit usedCount reservedCount confirmedCount remaining gateRemaining startsAt endsAt flash`

// TestComplexity_CountsPagesAndWrites: a list field costs its page size
// times its selection, and every mutation a transaction's worth, so that the
// largest real queries pass and batches of writes or pages of per-node reads
// are refused before any work (the contract's "Requests that cannot get
// round a limit").
func TestComplexity_CountsPagesAndWrites(t *testing.T) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}, Complexity: complexityRoot()})
	limit := extension.FixedComplexityLimit(MaxComplexity)
	if err := limit.Validate(es); err != nil {
		t.Fatal(err)
	}
	aliased := func(n int, field string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, " a%d: %s", i, strings.ReplaceAll(field, "#", fmt.Sprint(i)))
		}
		return b.String()
	}
	reserveInput := `(input: {code: "c", customerId: "1", orderId: "o-#", orderAmount: 100}) { error { code } }`
	for _, c := range []struct {
		name, query string
		vars        map[string]any
		refused     bool
	}{
		{"the storefront's reserve", reserveMutation, map[string]any{"input": map[string]any{"code": "c", "customerId": "1", "orderId": "o", "orderAmount": int64(1)}}, false},
		{"a default page of vouchers with every field", `{ vouchers { edges { cursor node { ` + everyVoucherField + ` } } pageInfo { hasNextPage endCursor } } }`, nil, false},
		{"a page of 200 codes and their campaign", `{ vouchers(first: 200) { edges { node { code campaign { id } } } } }`, nil, false},
		{"a page of 200 vouchers with every field", `{ vouchers(first: 200) { edges { node { ` + everyVoucherField + ` } } } }`, nil, true},
		{"40 aliased pages of 200 codes and their campaign", `{` + aliased(40, `vouchers(first: 200) { edges { node { campaign { id } } } }`) + ` }`, nil, true},
		{"the page size in a variable", `query($n: Int) { vouchers(first: $n) { edges { node { code campaign { id } } } } }`, map[string]any{"n": int64(200)}, false},
		{"a page size past the service's in a variable", `query($n: Int) {` + aliased(3, `vouchers(first: $n) { edges { node { code campaign { id } } } }`) + ` }`, map[string]any{"n": int64(1 << 30)}, true},
		{"40 aliased reserves", `mutation {` + aliased(40, `reserveVoucher`+reserveInput) + ` }`, nil, true},
		{"500 aliased reserves", `mutation {` + aliased(500, `reserveVoucher`+reserveInput) + ` }`, nil, true},
		{"20 aliased campaign pages", `{` + aliased(20, `campaigns(first: 200) { edges { node { id name } } }`) + ` }`, nil, true},
	} {
		opCtx := operationContext(t, es, c.query, "", c.vars)
		err := limit.MutateOperationContext(context.Background(), opCtx)
		if refused := err != nil; refused != c.refused {
			t.Errorf("%s: refused %v (%v), want %v", c.name, refused, err, c.refused)
		}
		if err != nil && err.Extensions["code"] != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Errorf("%s: %v, want COMPLEXITY_LIMIT_EXCEEDED", c.name, err.Extensions)
		}
	}
}

// TestComplexity_PricesEveryMutation: a mutation added to the schema gets a
// write's cost, or this fails (it would cost one field and fit by the
// hundred in a request).
func TestComplexity_PricesEveryMutation(t *testing.T) {
	m := reflect.ValueOf(complexityRoot().Mutation)
	for i := range m.NumField() {
		if m.Field(i).IsNil() {
			t.Errorf("Mutation.%s has no complexity function: add it to complexityRoot", m.Type().Field(i).Name)
		}
	}
}
