package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	voucherdserver "voucherd/server"
)

// Every answer that httpClient receives from a REST route is validated
// against server/openapi.yaml (kin-openapi's openapi3filter): its status must
// be one the file lists for the operation, its body must match that
// response's schema. A mismatch fails the request at its call site (Do
// returns an error) and, in case a test tolerates errors, the whole package
// in TestMain.

var openAPI = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(voucherdserver.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("server/openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("server/openapi.yaml is not valid OpenAPI: %w", err)
	}
	return legacy.NewRouter(doc)
})

var (
	openAPIChecked    atomic.Int64 // REST answers validated
	openAPIMu         sync.Mutex
	openAPIViolations []string
)

// notREST are the routes that openapi.yaml does not describe: GraphQL (its
// schema is graph/*.graphqls), GraphiQL's files and the HTML dashboard.
func notREST(path string) bool {
	return path == "/graphql" || strings.HasPrefix(path, "/graphiql/") || path == "/admin" || strings.HasPrefix(path, "/admin/")
}

// validatingTransport is httpClient's transport.
type validatingTransport struct{ next http.RoundTripper }

// CloseIdleConnections forwards to the transport, so httpClient's does.
func (v validatingTransport) CloseIdleConnections() {
	if c, ok := v.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (v validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.next.RoundTrip(req)
	if err != nil || notREST(req.URL.Path) {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if problem := checkOpenAPI(req, resp.StatusCode, resp.Header, body); problem != "" {
		msg := fmt.Sprintf("%s %s answered %d, which server/openapi.yaml does not allow: %s\n  body: %.300s", req.Method, req.URL.Path, resp.StatusCode, problem, body)
		openAPIMu.Lock()
		openAPIViolations = append(openAPIViolations, msg)
		openAPIMu.Unlock()
		return nil, errors.New(msg)
	}
	return resp, nil
}

// checkOpenAPI returns what is wrong with an answer to req, or "".
func checkOpenAPI(req *http.Request, status int, header http.Header, body []byte) string {
	router, err := openAPI()
	if err != nil {
		return err.Error()
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		// The mux's own answers to a path or method that no route has
		// (RouteError has no Is method: its reasons are compared).
		if (err.Error() == routers.ErrPathNotFound.Error() && status == http.StatusNotFound) ||
			(err.Error() == routers.ErrMethodNotAllowed.Error() && status == http.StatusMethodNotAllowed) {
			return ""
		}
		return "no such operation in the file: " + err.Error()
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), input); err != nil {
		return err.Error()
	}
	openAPIChecked.Add(1)
	return ""
}

// reportOpenAPI is called by TestMain: any violation fails the package.
func reportOpenAPI(code int) int {
	openAPIMu.Lock()
	defer openAPIMu.Unlock()
	for _, v := range openAPIViolations {
		fmt.Fprintln(os.Stderr, "openapi:", v)
	}
	if len(openAPIViolations) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d REST answers do not match server/openapi.yaml (%d matched)\n", len(openAPIViolations), openAPIChecked.Load())
		return 1
	}
	fmt.Fprintf(os.Stderr, "openapi: %d REST answers matched server/openapi.yaml\n", openAPIChecked.Load())
	return code
}

func TestOpenAPI_TheFileIsServedAndIsValidOpenAPI31CoveringEveryRESTRoute(t *testing.T) {
	s := sharedServer(t)
	resp, err := httpClient.Get(s.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/yaml" || !bytes.Equal(body, voucherdserver.OpenAPI()) {
		t.Fatalf("GET /openapi.yaml: HTTP %d %s, %d bytes; want 200 application/yaml with server/openapi.yaml", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	doc, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("not valid OpenAPI: %v", err)
	}
	if doc.OpenAPIMajorMinor() != "3.1" {
		t.Errorf("openapi: %s, want 3.1", doc.OpenAPI)
	}
	// The REST routes of server/routes.go, each with its method.
	want := []string{
		"DELETE /vouchers/{code}/reservations/{orderId}",
		"GET /campaigns/{id}/codes.csv",
		"GET /healthz",
		"GET /metrics",
		"GET /openapi.yaml",
		"GET /readyz",
		"POST /vouchers/{code}/checks",
		"POST /vouchers/{code}/reservations",
		"POST /vouchers/{code}/reservations/{orderId}/confirm",
		"POST /vouchers/{code}/reservations/{orderId}/rollback",
	}
	var got []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			got = append(got, method+" "+path)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("operations in openapi.yaml:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// The validator must refuse what the file does not allow, or the suite's
// passing says nothing.
func TestOpenAPI_AnAnswerTheFileDoesNotAllowIsCaught(t *testing.T) {
	t.Parallel()
	reserve := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:1/vouchers/SPRING10/reservations", nil)
	confirm := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:1/vouchers/SPRING10/reservations/o-1/confirm", nil)
	unknown := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/vouchers", nil)
	json := http.Header{"Content-Type": {"application/json"}}
	good := `{"orderId":"o-1","voucherCode":"SPRING10","customerId":42,"orderAmount":25000,"discountAmount":10000,"status":"RESERVED","createdAt":"2026-01-01T00:00:00Z","expiresAt":"2026-01-01T00:15:00Z","position":1}`
	for _, tc := range []struct {
		desc   string
		req    *http.Request
		status int
		body   string
		ok     bool
	}{
		{"a reservation as documented", reserve, 201, good, true},
		{"an unknown status", reserve, 201, strings.Replace(good, "RESERVED", "PENDING", 1), false},
		{"a negative position", reserve, 201, strings.Replace(good, `"position":1`, `"position":-1`, 1), false},
		{"a missing field", reserve, 201, strings.Replace(good, `"voucherCode":"SPRING10",`, "", 1), false},
		{"an extra field", reserve, 201, strings.Replace(good, `{`, `{"sql":"select 1",`, 1), false},
		{"a status the operation does not list", confirm, 418, `{"error":"INTERNAL","message":"x"}`, false},
		{"an undocumented error code", reserve, 409, `{"error":"SOLD_OUT","message":"x"}`, false},
		{"a documented refusal", reserve, 409, `{"error":"OUT_OF_STOCK","message":"sold out"}`, true},
		{"the mux's 404 for an unknown path", unknown, 404, "404 page not found\n", true},
		{"an answer on an unknown path", unknown, 200, `{}`, false},
	} {
		got := checkOpenAPI(tc.req, tc.status, json, []byte(tc.body))
		if (got == "") != tc.ok {
			t.Errorf("%s: check = %q, want ok=%v", tc.desc, got, tc.ok)
		}
	}
}
