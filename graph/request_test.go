package graph_test

// Tests of the GraphQL request path through the whole HTTP surface
// (server.NewServer: auth, the 1 MiB body limit, POST /graphql) over the
// real schema and a service on the test database (TEST_DATABASE_URL).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/internal/postgres"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/migrations"
	"voucherd/server"
)

const (
	testStorefront = "graph-test-storefront-0123456789"
	testAdmin      = "graph-test-admin-0123456789abcdef"
)

// logRecorder keeps what the handlers log at ERROR, to show that a refusal
// is not mistaken for a fault of the server.
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// take returns what was logged since the last call.
func (l *logRecorder) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	l.buf.Reset()
	return s
}

// surface is the HTTP surface twice over one service: as in development and
// as with APP_ENV=production.
type surface struct {
	dev, prod http.Handler
	logs      *logRecorder
}

var (
	surfaceOnce sync.Once
	surfaceVal  *surface
	surfaceErr  error
)

func testSurface(t testing.TB) *surface {
	t.Helper()
	surfaceOnce.Do(func() { surfaceVal, surfaceErr = newSurface(context.Background()) })
	if surfaceErr != nil {
		t.Fatalf("needs PostgreSQL at TEST_DATABASE_URL: %v", surfaceErr)
	}
	return surfaceVal
}

func newSurface(ctx context.Context) (*surface, error) {
	url := testenv.DatabaseURL()
	if !strings.Contains(url, "pool_max_conns") {
		url += "&pool_max_conns=4"
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	_, err = migrations.Up(ctx, db)
	_ = db.Close()
	if err != nil {
		return nil, err
	}
	logs := &logRecorder{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	svc := voucher.NewService(voucher.Deps{Store: postgres.New(pool)}, voucher.Config{Logger: logger})
	back := voucher.NewBackoffice(svc, postgres.New(pool))
	cfg := server.Config{StorefrontTokens: []string{testStorefront}, AdminTokens: []string{testAdmin}, Logger: logger, Backoffice: back}
	dev := server.NewServer(svc, cfg)
	cfg.Production = true
	return &surface{dev: dev, prod: server.NewServer(svc, cfg), logs: logs}, nil
}

type env struct {
	name    string
	handler http.Handler
}

func (s *surface) envs() []env {
	return []env{{"production", s.prod}, {"development", s.dev}}
}

// answer is one HTTP answer of POST /graphql and what the request cost.
type answer struct {
	Status int
	Raw    []byte
	Body   struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	// Allocated is the bytes the process allocated while serving it.
	Allocated uint64
}

func (a *answer) code() string {
	if len(a.Body.Errors) == 0 {
		return ""
	}
	c, _ := a.Body.Errors[0].Extensions["code"].(string)
	return c
}

func (a *answer) String() string {
	return fmt.Sprintf("HTTP %d, %d bytes, %d errors, %d bytes allocated: %.300s", a.Status, len(a.Raw), len(a.Body.Errors), a.Allocated, a.Raw)
}

// post sends body to POST /graphql with the storefront's token.
func post(t testing.TB, h http.Handler, body []byte) *answer {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+testStorefront)
	w := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.ServeHTTP(w, r)
	runtime.ReadMemStats(&after)
	a := &answer{Status: w.Code, Raw: w.Body.Bytes(), Allocated: after.TotalAlloc - before.TotalAlloc}
	if w.Code != http.StatusRequestEntityTooLarge && w.Code != http.StatusUnauthorized {
		if err := json.Unmarshal(a.Raw, &a.Body); err != nil {
			t.Fatalf("not a GraphQL response: %v: %.300s", err, a.Raw)
		}
	}
	return a
}

// query is the request body of one GraphQL query text.
func query(q string, vars map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	if err != nil {
		panic(err)
	}
	return b
}

// internalDetail names what an answer must never carry: SQL, a stack
// trace, a file of the server, a Go type, an internal address.
var internalDetail = []string{
	"SELECT ", "INSERT ", "UPDATE ", "pq:", "SQLSTATE", "pgx", "postgres",
	"runtime.", "goroutine ", ".go:", "panic",
	"graphql.RawParams", "Go value", "Go struct", "json: cannot", "map[string]interface", "[]interface",
	"127.0.0.1:", "localhost:",
}

// internalPort is an address with Redis's or PostgreSQL's port: a host's
// last character, then the port (not a JSON key's closing quote, as in a
// parse error's "column":6379).
var internalPort = regexp.MustCompile(`[0-9A-Za-z.\]]:(6379|5432)\b`)

// leaks returns the first internal detail in raw that the request did not
// itself contain (an error may quote the request).
func leaks(raw, request []byte) string {
	for _, s := range internalDetail {
		if bytes.Contains(raw, []byte(s)) && !bytes.Contains(request, []byte(s)) {
			return s
		}
	}
	if m := internalPort.Find(raw); m != nil && !bytes.Contains(request, m) {
		return string(m)
	}
	return ""
}
