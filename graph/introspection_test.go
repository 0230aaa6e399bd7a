package graph_test

import (
	"net/http"
	"strings"
	"testing"
)

// standardIntrospection is graphql-js's getIntrospectionQuery(), which
// GraphiQL sends to load the schema: its TypeRef fragment nests 13 levels.
const standardIntrospection = `
query IntrospectionQuery {
  __schema {
    queryType { name }
    mutationType { name }
    subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } }
}`

// TestIntrospection_TheStandardQueryPassesTheDepthLimitOutsideProduction:
// GraphiQL can load the schema in development; production still refuses
// introspection, and the depth limit still holds for any operation that
// selects more than introspection.
func TestIntrospection_TheStandardQueryPassesTheDepthLimitOutsideProduction(t *testing.T) {
	s := testSurface(t)
	a := post(t, s.dev, query(standardIntrospection, nil))
	if a.Status != http.StatusOK || len(a.Body.Errors) != 0 || !strings.Contains(string(a.Body.Data), `"name":"reserveVoucher"`) {
		t.Errorf("development, the standard introspection query: %v; want the schema with reserveVoucher", a)
	}
	if a := post(t, s.prod, query(standardIntrospection, nil)); a.code() != "INTROSPECTION_DISABLED" {
		t.Errorf("production, the standard introspection query: %v; want INTROSPECTION_DISABLED", a)
	}
	deep := `__schema { types { fields { type { ofType { ofType { ofType { ofType { ofType { ofType { name } } } } } } } } } }`
	for _, q := range []string{
		`{ voucher(code: "X") { code } ` + deep + ` }`,
		`{ ...F } fragment F on Query { __typename voucher(code: "X") { code } ` + deep + ` }`,
	} {
		if a := post(t, s.dev, query(q, nil)); a.code() != "DEPTH_LIMIT_EXCEEDED" {
			t.Errorf("development %s: %v; want DEPTH_LIMIT_EXCEEDED (not only introspection)", q, a)
		}
	}
	if a := post(t, s.dev, query(`{ `+deep+` }`, nil)); len(a.Body.Errors) != 0 {
		t.Errorf("development, deep introspection alone: %v; want an answer", a)
	}
}
