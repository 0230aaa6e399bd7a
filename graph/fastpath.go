package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"voucherd/graph/generated"
	"voucherd/graph/model"
	"voucherd/internal/voucher"
)

// fastPath answers the storefront's three mutations (reserveVoucher,
// confirmReservation, releaseReservation) without gqlgen's executor: under
// a flash sale's load the executor, its variable coercion and the
// request's generic JSON decoding cost several times what the service
// call does (the profile of issue 12). It serves only requests it fully
// recognises, and answers them with the bytes the executor would write:
//
//   - the body is one JSON object with "query", "variables" and at most
//     "operationName", each once, in plain JSON that needs no guessing;
//   - the query text has a plan: the general path made it when it ran the
//     text's operation, after every limit (complexity, depth) and validation
//     had passed it (planner, below), so a text refused once is refused
//     every time; it is one mutation of one of the three fields, whose input
//     is one variable, with no fragments, directives or repeated response
//     names;
//   - the variable is an object holding exactly the input's fields, each a
//     JSON string (orderAmount a JSON integer within Money's range).
//
// Anything else, including every request that would be refused before the
// resolver, goes to the general executor unchanged. The resolver, the
// service, the error presenter and the recover function are the general
// path's own; the leaves are written by the same marshalers.
type fastPath struct {
	mutation generated.MutationResolver
	// plans maps a query text to its plan; texts the fast path does not
	// serve are not in it.
	plans   graphql.Cache[*plan]
	present graphql.ErrorPresenterFunc
	recover graphql.RecoverFunc
	// production: error messages quote no value of the request.
	production bool
	// served counts the requests answered here (the tests read it).
	served atomic.Int64
}

func newFastPath(mutation generated.MutationResolver, present graphql.ErrorPresenterFunc, recoverFn graphql.RecoverFunc, production bool) *fastPath {
	return &fastPath{
		mutation: mutation,
		plans: boundedCache[*plan]{
			Cache: lru.New[*plan](1000),
			size:  func(query string, _ *plan) int { return len(query) },
		},
		present:    present,
		recover:    recoverFn,
		production: production,
	}
}

// fastOperation is the mutation field a plan runs.
type fastOperation int

const (
	fastReserve fastOperation = iota
	fastConfirm
	fastRelease
)

// fastKind is what a selected field writes.
type fastKind int

const (
	kindTypename fastKind = iota
	kindReservation
	kindError
	kindOrderID
	kindVoucherCode
	kindCustomerID
	kindOrderAmount
	kindDiscountAmount
	kindStatus
	kindCreatedAt
	kindExpiresAt
	kindPosition
	kindCode
	kindMessage
	kindField
)

// fastField is one selected field: key is its response name, quoted as the
// executor quotes it, with the colon.
type fastField struct {
	key      string
	kind     fastKind
	typename string // for kindTypename: the quoted type name
	sub      []fastField
}

// plan is a recognised operation, compiled once per query text.
type plan struct {
	op      fastOperation
	opName  string
	varName string
	field   *ast.Field // the mutation field (its alias and position)
	prefix  string     // `{"alias":`
	fields  []fastField
}

var payloadFields = map[string]fastKind{"__typename": kindTypename, "reservation": kindReservation, "error": kindError}

var reservationFields = map[string]fastKind{
	"__typename": kindTypename, "orderId": kindOrderID, "voucherCode": kindVoucherCode, "customerId": kindCustomerID,
	"orderAmount": kindOrderAmount, "discountAmount": kindDiscountAmount, "status": kindStatus,
	"createdAt": kindCreatedAt, "expiresAt": kindExpiresAt, "position": kindPosition,
}

var errorFields = map[string]fastKind{"__typename": kindTypename, "code": kindCode, "message": kindMessage, "field": kindField}

// compilePlan returns the plan of a validated document, or nil when the
// fast path does not serve it.
func compilePlan(doc *ast.QueryDocument) *plan {
	if len(doc.Operations) != 1 || len(doc.Fragments) != 0 {
		return nil
	}
	op := doc.Operations[0]
	if op.Operation != ast.Mutation || len(op.Directives) != 0 || len(op.VariableDefinitions) != 1 || len(op.SelectionSet) != 1 {
		return nil
	}
	field, ok := op.SelectionSet[0].(*ast.Field)
	if !ok || len(field.Directives) != 0 || len(field.Arguments) != 1 {
		return nil
	}
	p := &plan{opName: op.Name, field: field}
	var inputType string
	switch field.Name {
	case "reserveVoucher":
		p.op, inputType = fastReserve, "ReserveVoucherInput"
	case "confirmReservation":
		p.op, inputType = fastConfirm, "ReservationInput"
	case "releaseReservation":
		p.op, inputType = fastRelease, "ReservationInput"
	default:
		return nil
	}
	v := op.VariableDefinitions[0]
	if v.DefaultValue != nil || len(v.Directives) != 0 || v.Type == nil || !v.Type.NonNull || v.Type.Elem != nil || v.Type.NamedType != inputType {
		return nil
	}
	arg := field.Arguments[0]
	if arg.Name != "input" || arg.Value == nil || arg.Value.Kind != ast.Variable || arg.Value.Raw != v.Variable {
		return nil
	}
	p.varName = v.Variable
	fields, ok := compileFields(field.SelectionSet, "ReservationPayload", payloadFields)
	if !ok {
		return nil
	}
	p.fields = fields
	p.prefix = `{` + quoted(responseName(field)) + `:`
	return p
}

func compileFields(set ast.SelectionSet, typename string, known map[string]fastKind) ([]fastField, bool) {
	if len(set) == 0 {
		return nil, false
	}
	out := make([]fastField, 0, len(set))
	names := make(map[string]bool, len(set))
	for _, sel := range set {
		f, ok := sel.(*ast.Field)
		if !ok || len(f.Directives) != 0 || len(f.Arguments) != 0 {
			return nil, false
		}
		kind, ok := known[f.Name]
		name := responseName(f)
		if !ok || names[name] {
			return nil, false
		}
		names[name] = true
		ff := fastField{key: quoted(name) + ":", kind: kind}
		switch kind {
		case kindTypename:
			ff.typename = quoted(typename)
		case kindReservation:
			if ff.sub, ok = compileFields(f.SelectionSet, "Reservation", reservationFields); !ok {
				return nil, false
			}
		case kindError:
			if ff.sub, ok = compileFields(f.SelectionSet, "VoucherError", errorFields); !ok {
				return nil, false
			}
		default:
			if len(f.SelectionSet) != 0 {
				return nil, false
			}
		}
		out = append(out, ff)
	}
	return out, true
}

func responseName(f *ast.Field) string {
	if f.Alias != "" {
		return f.Alias
	}
	return f.Name
}

// quoted is s as the executor writes a string.
func quoted(s string) string {
	var b bytes.Buffer
	graphql.MarshalString(s).MarshalGQL(&b)
	return b.String()
}

// plan returns the plan for a query text; ok is false when there is none
// (yet: a text that the general path has not run goes the general way,
// which makes its plan once every limit has passed it).
func (fp *fastPath) plan(ctx context.Context, query string) (*plan, bool) {
	p, ok := fp.plans.Get(ctx, query)
	return p, ok
}

// planner is the handler extension that makes the fast path's plans. It
// runs after every other operation extension (the complexity and depth
// limits), which gqlgen stops at the first refusal: only an operation that
// passed them all, with its variables, gets a plan. The query cache alone
// would not do: gqlgen fills it once a text is parsed and validated, before
// the limits run.
type planner struct{ fp *fastPath }

var _ interface {
	graphql.OperationContextMutator
	graphql.HandlerExtension
} = planner{}

func (planner) ExtensionName() string                   { return "FastPathPlanner" }
func (planner) Validate(graphql.ExecutableSchema) error { return nil }

func (pl planner) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if _, ok := pl.fp.plans.Get(ctx, opCtx.RawQuery); ok {
		return nil
	}
	if p := compilePlan(opCtx.Doc); p != nil {
		pl.fp.plans.Add(ctx, opCtx.RawQuery, p)
	}
	return nil
}

// fastRequest is what the fast path reads of a body.
type fastRequest struct {
	query     string
	opName    string
	hasOpName bool
	varName   string
	inputs    [4]fastValue
	n         int
}

// fastValue is one field of the input variable: a string, or an integer.
type fastValue struct {
	key   string
	str   string
	num   int64
	isNum bool
}

var fastRequestPool = sync.Pool{New: func() any { return new(fastRequest) }}

var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// serve answers the request when it is one the fast path serves, and
// reports whether it did; when it did not, it has written nothing.
func (fp *fastPath) serve(ctx context.Context, w http.ResponseWriter, body []byte) bool {
	req := fastRequestPool.Get().(*fastRequest)
	defer func() {
		*req = fastRequest{}
		fastRequestPool.Put(req)
	}()
	if !readFastRequest(body, req) {
		return false
	}
	p, ok := fp.plan(ctx, req.query)
	if !ok || (req.hasOpName && req.opName != "" && req.opName != p.opName) || req.varName != p.varName {
		return false
	}
	var (
		reserve model.ReserveVoucherInput
		input   model.ReservationInput
	)
	switch p.op {
	case fastReserve:
		if !req.fill(map4{"code": &reserve.Code, "customerId": &reserve.CustomerID, "orderId": &reserve.OrderID}, &reserve.OrderAmount) {
			return false
		}
	default:
		if !req.fill(map4{"code": &input.Code, "orderId": &input.OrderID}, nil) {
			return false
		}
	}
	if ctx.Err() != nil {
		// The client is gone: as the executor, which then runs nothing and
		// writes null, no reserve is taken for an answer nobody reads.
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("null"))
		return true
	}
	fp.served.Add(1)

	fctx := graphql.WithFieldContext(ctx, &graphql.FieldContext{
		Object: "Mutation", Field: graphql.CollectedField{Field: p.field}, IsMethod: true, IsResolver: true,
	})
	payload, gerr := fp.resolve(fctx, p, reserve, input)
	if gerr != nil {
		// As the executor: a field error on the non-null root field makes
		// data null.
		writeResponse(w, http.StatusOK, &graphql.Response{Errors: gqlerror.List{gerr}, Data: json.RawMessage("null")})
		return true
	}
	data := bufferPool.Get().(*bytes.Buffer)
	out := bufferPool.Get().(*bytes.Buffer)
	defer func() {
		data.Reset()
		out.Reset()
		bufferPool.Put(data)
		bufferPool.Put(out)
	}()
	p.render(fctx, data, payload, fp.production)
	// What json.Marshal makes of graphql.Response{Data: data}: the data,
	// compact already, with HTML's characters escaped.
	out.WriteString(`{"data":`)
	json.HTMLEscape(out, data.Bytes())
	out.WriteByte('}')
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes())
	return true
}

// map4 names where each string field of the input goes.
type map4 map[string]*string

// fill puts the input's fields in place: exactly the fields of strs, as
// strings, and amount (when not nil) as orderAmount, an integer.
func (r *fastRequest) fill(strs map4, amount *int64) bool {
	want := len(strs)
	if amount != nil {
		want++
	}
	if r.n != want {
		return false
	}
	for i := range r.n {
		v := &r.inputs[i]
		if v.key == "orderAmount" && amount != nil {
			// Outside Money's range the scalar refuses it (a GraphQL
			// error): the general path answers that.
			if !v.isNum || v.num > voucher.MaxMoney || v.num < -voucher.MaxMoney {
				return false
			}
			*amount = v.num
			amount = nil // a second orderAmount is refused below
			continue
		}
		dst, ok := strs[v.key]
		if !ok || v.isNum {
			return false
		}
		*dst = v.str
		delete(strs, v.key) // a field given twice is refused
	}
	return len(strs) == 0 && amount == nil
}

// resolve calls the resolver as the executor does, and presents its error
// (or panic) as the executor would.
func (fp *fastPath) resolve(ctx context.Context, p *plan, reserve model.ReserveVoucherInput, input model.ReservationInput) (payload *model.ReservationPayload, gerr *gqlerror.Error) {
	defer func() {
		if r := recover(); r != nil {
			payload, gerr = nil, fp.present(ctx, graphql.ErrorOnPath(ctx, fp.recover(ctx, r)))
		}
	}()
	var err error
	switch p.op {
	case fastReserve:
		payload, err = fp.mutation.ReserveVoucher(ctx, reserve)
	case fastConfirm:
		payload, err = fp.mutation.ConfirmReservation(ctx, input)
	case fastRelease:
		payload, err = fp.mutation.ReleaseReservation(ctx, input)
	}
	if err != nil {
		return nil, fp.present(ctx, graphql.ErrorOnPath(ctx, graphql.AddFieldLocationToError(ctx, err)))
	}
	if payload == nil {
		// The resolvers never return a nil payload without an error; the
		// executor's answer to one is not worth copying.
		panic("graph: a nil ReservationPayload")
	}
	return payload, nil
}

// render writes the data object, as the executor's field sets do.
func (p *plan) render(ctx context.Context, b *bytes.Buffer, payload *model.ReservationPayload, production bool) {
	b.WriteString(p.prefix)
	b.WriteByte('{')
	for i, f := range p.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.key)
		switch f.kind {
		case kindTypename:
			b.WriteString(f.typename)
		case kindReservation:
			if payload.Reservation == nil {
				b.WriteString("null")
			} else {
				renderReservation(ctx, b, f.sub, payload.Reservation)
			}
		case kindError:
			if payload.Error == nil {
				b.WriteString("null")
			} else {
				renderError(b, f.sub, payload.Error, production)
			}
		}
	}
	b.WriteString("}}")
}

func renderReservation(ctx context.Context, b *bytes.Buffer, fields []fastField, r *model.Reservation) {
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.key)
		switch f.kind {
		case kindTypename:
			b.WriteString(f.typename)
		case kindOrderID:
			graphql.MarshalString(r.OrderID).MarshalGQL(b)
		case kindVoucherCode:
			graphql.MarshalString(r.VoucherCode).MarshalGQL(b)
		case kindCustomerID:
			graphql.MarshalID(r.CustomerID).MarshalGQL(b)
		case kindOrderAmount:
			b.WriteString(strconv.FormatInt(r.OrderAmount, 10)) // model.MarshalMoney
		case kindDiscountAmount:
			b.WriteString(strconv.FormatInt(r.DiscountAmount, 10))
		case kindStatus:
			r.Status.MarshalGQL(b)
		case kindCreatedAt:
			_ = model.MarshalTime(r.CreatedAt).MarshalGQLContext(ctx, b)
		case kindExpiresAt:
			_ = model.MarshalTime(r.ExpiresAt).MarshalGQLContext(ctx, b)
		case kindPosition:
			b.WriteString(strconv.Itoa(r.Position))
		}
	}
	b.WriteByte('}')
}

func renderError(b *bytes.Buffer, fields []fastField, e *model.VoucherError, production bool) {
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.key)
		switch f.kind {
		case kindTypename:
			b.WriteString(f.typename)
		case kindCode:
			e.Code.MarshalGQL(b)
		case kindMessage:
			graphql.MarshalString(publicMessage(e, production)).MarshalGQL(b)
		case kindField:
			if e.Field == nil {
				b.WriteString("null")
			} else {
				graphql.MarshalString(*e.Field).MarshalGQL(b)
			}
		}
	}
	b.WriteByte('}')
}
