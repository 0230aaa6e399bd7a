package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// codeBadRequest is the extensions.code of a body that is not one GraphQL
// request: not JSON, not an object, a batch (a JSON array of requests), a
// field of the wrong type.
const codeBadRequest = "BAD_REQUEST"

// postTransport is gqlgen's transport.POST (GraphQL over HTTP, a JSON body)
// with its own answers to a body it cannot decode: gqlgen's echo the whole
// body and name Go types ("json: cannot unmarshal array into Go value of
// type graphql.RawParams body:[...]"). A batch is refused, not run: one
// request is one operation, so a body costs one operation's work. Answers
// are always application/json. The storefront's reserve, confirm and
// release, when recognised, are answered by fast (fastpath.go) instead of
// the executor.
type postTransport struct {
	fast   *fastPath
	schema *ast.Schema
}

var _ graphql.Transport = postTransport{}

func (postTransport) Supports(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Upgrade") != "" {
		return false
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mediaType == "application/json"
}

var rawParamsPool = sync.Pool{New: func() any { return new(graphql.RawParams) }}

func (t postTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	w.Header().Set("Content-Type", "application/json")
	start := graphql.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// The server's body limit (HTTP 413) answers first when that is why.
		writeResponse(w, http.StatusBadRequest, exec.DispatchError(ctx, gqlerror.List{badRequest("the request body could not be read")}))
		return
	}
	if t.fast != nil && t.fast.serve(ctx, w, body) {
		return
	}
	params := rawParamsPool.Get().(*graphql.RawParams)
	defer func() {
		*params = graphql.RawParams{}
		rawParamsPool.Put(params)
	}()
	if gerr := decodeParams(body, params); gerr != nil {
		writeResponse(w, http.StatusBadRequest, exec.DispatchError(ctx, gqlerror.List{gerr}))
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}

	opCtx, errs := exec.CreateOperationContext(ctx, params)
	if errs != nil {
		errs = inputErrors(t.schema, params.Query, opCtx.Operation, errs)
		status := http.StatusOK
		if errcode.GetErrorKind(errs) == errcode.KindProtocol {
			status = http.StatusUnprocessableEntity
		}
		writeResponse(w, status, exec.DispatchError(graphql.WithOperationContext(ctx, opCtx), errs))
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, opCtx)
	writeResponse(w, http.StatusOK, responses(ctx))
}

// MaxJSONValues bounds the values (numbers, strings, lists, objects...) of a
// request body outside its strings: decoded into Go values, each costs about
// 100 bytes (a 1 MiB list of numbers allocated 62 MB), and a real request
// holds a few dozen. Bodies of at most smallBody are not counted: they cannot
// hold enough to matter, and the storefront's reserve is one of them.
const (
	MaxJSONValues = 10_000
	smallBody     = 64 << 10
)

// jsonValues is an upper bound of the values in body, a JSON text: one per
// '[', '{', ',' and ':' outside strings, plus one.
func jsonValues(body []byte) int {
	n := 1
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{' || c == ',' || c == ':':
			n++
		}
	}
	return n
}

// requestShape names the fields of a GraphQL request body for the errors.
const requestShape = `{"query": string, "operationName": string, "variables": object, "extensions": object}`

// decodeParams decodes one request object, with numbers kept as written
// (json.Number) as gqlgen's transport does. Its errors say what is wrong
// with the body without quoting it.
func decodeParams(body []byte, params *graphql.RawParams) *gqlerror.Error {
	switch first := firstByte(body); first {
	case 0:
		return badRequest("the request body is empty; send " + requestShape)
	case '[':
		return badRequest("batched requests (a JSON array) are not supported; send one request object per HTTP request: " + requestShape)
	case '{':
	default:
		return badRequest("the request body is not a JSON object; send " + requestShape)
	}
	if len(body) > smallBody && jsonValues(body) > MaxJSONValues {
		return badRequest(fmt.Sprintf("the request body holds more than %d JSON values, the limit", MaxJSONValues))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(params); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return badRequest("the request body's field " + quoteField(typeErr.Field) + " has the wrong type; send " + requestShape)
		}
		return badRequest("the request body is not valid JSON; send " + requestShape)
	}
	if firstByte(body[dec.InputOffset():]) != 0 {
		return badRequest("the request body holds more than one JSON value; send one request object per HTTP request")
	}
	return nil
}

// quoteField names a field of the request body only when it is one of the
// four a request has: any other path would repeat the caller's input.
func quoteField(path string) string {
	switch path {
	case "query", "operationName", "variables", "extensions":
		return `"` + path + `"`
	}
	return "(an inner field)"
}

// firstByte is the first byte of b that is not JSON white space; 0 if none.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

func badRequest(msg string) *gqlerror.Error {
	err := &gqlerror.Error{Message: msg}
	errcode.Set(err, codeBadRequest)
	return err
}

func writeResponse(w http.ResponseWriter, status int, resp *graphql.Response) {
	b, err := json.Marshal(resp)
	if err != nil {
		// Every value in a response came from a resolver's model or an
		// error message: a failure to marshal is a bug, answered as one.
		status = http.StatusInternalServerError
		b = []byte(`{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}],"data":null}`)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
