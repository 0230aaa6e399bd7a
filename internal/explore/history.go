package explore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"voucherd/internal/apiclient"
)

// The request kinds of the history.
const (
	OpReserve = "reserve"
	OpConfirm = "confirm"
	OpRelease = "release"
	// OpRollback is the rollback of a confirmed use (a paid order refunded).
	OpRollback = "rollback"
	// OpRead is the database's row of an order once the system is quiet,
	// added to the history by the checker.
	OpRead = "read"
)

// Call is one request and what came back, as the history keeps it. Times
// are Unix nanoseconds of the explorer's clock.
type Call struct {
	ID       int    `json:"id"`
	Client   int    `json:"client"`
	Op       string `json:"op"`
	Instance int    `json:"instance"`
	Voucher  string `json:"voucher"`
	Order    string `json:"order"`
	Customer int64  `json:"customer,omitempty"`
	Amount   int64  `json:"amount,omitempty"`
	Sent     int64  `json:"sent"`
	Answered int64  `json:"answered"`
	// Status is the HTTP status, 0 when there was no answer (Err).
	Status    int    `json:"status"`
	Code      string `json:"code,omitempty"`      // a refusal's error code
	State     string `json:"state,omitempty"`     // a success's reservation status
	ExpiresAt int64  `json:"expiresAt,omitempty"` // a reserve's 201: expiresAt, Unix ns
	Err       string `json:"err,omitempty"`
	Raw       string `json:"raw,omitempty"` // the body of an answer the checker does not expect
}

// Unknown reports whether the call's outcome is unknown to its client: no
// answer, UNAVAILABLE, or an internal error. Either it took effect or not.
func (c Call) Unknown() bool {
	return c.Status == 0 || c.Status == http.StatusServiceUnavailable || c.Status >= 500
}

// Success reports a 201 reserve or a 200 confirm, release or rollback.
func (c Call) Success() bool {
	return (c.Op == OpReserve && c.Status == http.StatusCreated) || (c.Op != OpReserve && c.Op != OpRead && c.Status == http.StatusOK)
}

func (c Call) String() string {
	out := fmt.Sprintf("#%d %s %s on %s", c.ID, c.Op, c.Order, c.Voucher)
	if c.Op == OpReserve || c.Op == OpRead {
		out += fmt.Sprintf(" (customer %d, amount %d)", c.Customer, c.Amount)
	}
	if c.Op != OpRead {
		out += fmt.Sprintf(" via serve#%d", c.Instance)
	}
	out += fmt.Sprintf(" sent %s answered %s: ", stamp(c.Sent), stamp(c.Answered))
	switch {
	case c.Op == OpRead && c.State == "":
		out += "no row"
	case c.Op == OpRead:
		out += "row " + c.State
	case c.Err != "":
		out += "no answer (" + c.Err + ")"
	case c.Code != "":
		out += fmt.Sprintf("%d %s", c.Status, c.Code)
	default:
		out += fmt.Sprintf("%d %s", c.Status, c.State)
	}
	if c.ExpiresAt != 0 {
		out += " expiresAt " + stamp(c.ExpiresAt)
	}
	return out
}

func stamp(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000")
}

// History records every call, also to a JSON-lines file as it goes (so a
// run that dies keeps what it sent).
type History struct {
	mu    sync.Mutex
	calls []Call
	file  *os.File
	enc   *json.Encoder
}

// NewHistory records into path (created).
func NewHistory(path string) (*History, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &History{file: f, enc: json.NewEncoder(f)}, nil
}

// Add records a finished call and returns it with its id.
func (h *History) Add(c Call) Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.ID = len(h.calls)
	h.calls = append(h.calls, c)
	if h.enc != nil {
		_ = h.enc.Encode(c)
	}
	return c
}

// Calls is a copy of every call so far.
func (h *History) Calls() []Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Call(nil), h.calls...)
}

// Close closes the file.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.file == nil {
		return nil
	}
	err := h.file.Close()
	h.file, h.enc = nil, nil
	return err
}

// ReadHistory reads a history file back (for a look at a failed run).
func ReadHistory(path string) ([]Call, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Call
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var c Call
		if err := dec.Decode(&c); err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// client sends the storefront's requests over REST.
type client struct{ api *apiclient.Client }

func newClient(token string) *client {
	return &client{api: apiclient.New("", token, &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32, MaxConnsPerHost: 32},
	})}
}

// do sends one request and fills c's answer fields.
func (cl *client) do(ctx context.Context, base string, c *Call) {
	api := *cl.api
	api.Base = base
	c.Sent = time.Now().UnixNano()
	var a apiclient.Answer
	switch c.Op {
	case OpReserve:
		a = api.Reserve(ctx, c.Voucher, map[string]any{"customerId": c.Customer, "orderId": c.Order, "orderAmount": c.Amount})
	case OpConfirm:
		a = api.Confirm(ctx, c.Voucher, c.Order)
	case OpRelease:
		a = api.Release(ctx, c.Voucher, c.Order)
	case OpRollback:
		a = api.Rollback(ctx, c.Voucher, c.Order, "refunded")
	}
	c.Answered = time.Now().UnixNano()
	if a.Err != nil {
		c.Err = a.Err.Error()
		return
	}
	c.Status, c.Code, c.State = a.Status, a.Code, a.State
	var b struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if json.Unmarshal([]byte(a.Raw), &b) != nil || (a.Code == "" && a.State == "") || c.Unknown() {
		c.Raw = a.Raw
	}
	if !b.ExpiresAt.IsZero() {
		c.ExpiresAt = b.ExpiresAt.UnixNano()
	}
}
