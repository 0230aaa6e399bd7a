// Package apiclient is the one client of voucherd's HTTP API that the
// end-to-end tests (internal/e2e), the fault tests (internal/faults), the
// fault explorer (internal/explore) and the benchmark's set-up
// (cmd/flashbench) share: REST's reserve, confirm and release, GraphQL, and
// any other route, answering what came back without judging it. Tests judge
// the answers; the benchmark's load uses its own cheaper client.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client sends requests to one voucherd with one bearer token.
type Client struct {
	// Base is the server's URL ("http://127.0.0.1:8080"); a path given to
	// Do is appended to it. Empty: Do takes whole URLs.
	Base string
	// Token is sent as "Authorization: Bearer <Token>"; empty sends none.
	Token string
	// HTTP sends the requests; nil is a client with a 30 s timeout.
	HTTP *http.Client
}

// New is a client of base with token, sending through hc (nil: a client
// with a 30 s timeout).
func New(base, token string, hc *http.Client) *Client {
	return &Client{Base: base, Token: token, HTTP: hc}
}

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

// WithToken is the same client with another bearer token.
func (c *Client) WithToken(token string) *Client {
	d := *c
	d.Token = token
	return &d
}

// Answer is what one request got back. Err is set when there was no answer
// (the request may or may not have taken effect); otherwise Status, Header
// and Raw hold it, and Code and State are read from a JSON body's "error"
// and "status" fields (a refusal's code, a reservation's state).
type Answer struct {
	Status int
	Header http.Header
	Raw    string
	Code   string
	State  string
	Err    error
}

// JSON decodes the body into a generic value with numbers as json.Number,
// so that amounts past 2^53 are not rounded; nil when it is not JSON.
func (a Answer) JSON() map[string]any {
	var out map[string]any
	dec := json.NewDecoder(strings.NewReader(a.Raw))
	dec.UseNumber()
	if dec.Decode(&out) != nil {
		return nil
	}
	return out
}

// Decode decodes the body into v.
func (a Answer) Decode(v any) error {
	if a.Err != nil {
		return a.Err
	}
	return json.Unmarshal([]byte(a.Raw), v)
}

// String is a one-line account of the answer for failure messages.
func (a Answer) String() string {
	if a.Err != nil {
		return "no answer: " + a.Err.Error()
	}
	return fmt.Sprintf("HTTP %d %.300s", a.Status, a.Raw)
}

// Do sends method to path (or a whole URL when Base is empty) with body:
// nil sends none, a string or []byte is sent as it is (hostile bodies), and
// anything else as its JSON.
func (c *Client) Do(ctx context.Context, method, path string, body any) Answer {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return Answer{Err: err}
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return Answer{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Answer{Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{Status: resp.StatusCode, Header: resp.Header, Err: err}
	}
	a := Answer{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	var fields struct {
		Error  any `json:"error"`
		Status any `json:"status"`
	}
	if json.Unmarshal(raw, &fields) == nil {
		// GraphQL's answers have no such fields; a REST answer's are strings.
		a.Code, _ = fields.Error.(string)
		a.State, _ = fields.Status.(string)
	}
	return a
}

// ReservationsPath is the REST path of a voucher's reservations.
func ReservationsPath(code string) string {
	return "/vouchers/" + url.PathEscape(code) + "/reservations"
}

// Reserve is POST /vouchers/{code}/reservations with body (a map, a struct
// or a raw string).
func (c *Client) Reserve(ctx context.Context, code string, body any) Answer {
	return c.Do(ctx, http.MethodPost, ReservationsPath(code), body)
}

// Confirm is POST /vouchers/{code}/reservations/{orderId}/confirm.
func (c *Client) Confirm(ctx context.Context, code, orderID string) Answer {
	return c.Do(ctx, http.MethodPost, ReservationsPath(code)+"/"+url.PathEscape(orderID)+"/confirm", nil)
}

// Release is DELETE /vouchers/{code}/reservations/{orderId}.
func (c *Client) Release(ctx context.Context, code, orderID string) Answer {
	return c.Do(ctx, http.MethodDelete, ReservationsPath(code)+"/"+url.PathEscape(orderID), nil)
}

// Rollback is POST /vouchers/{code}/reservations/{orderId}/rollback, with
// {"reason": reason} as its body, or none when reason is empty.
func (c *Client) Rollback(ctx context.Context, code, orderID, reason string) Answer {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	return c.Do(ctx, http.MethodPost, ReservationsPath(code)+"/"+url.PathEscape(orderID)+"/rollback", body)
}

// GraphQL posts one operation to /graphql.
func (c *Client) GraphQL(ctx context.Context, query string, vars map[string]any) Answer {
	return c.Do(ctx, http.MethodPost, "/graphql", map[string]any{"query": query, "variables": vars})
}

// GraphQLData posts one operation and decodes its data into out; no answer,
// an HTTP status other than 200, or any GraphQL error is an error.
func (c *Client) GraphQLData(ctx context.Context, query string, vars map[string]any, out any) error {
	a := c.GraphQL(ctx, query, vars)
	if a.Err != nil {
		return fmt.Errorf("graphql: %w", a.Err)
	}
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(a.Raw), &env); err != nil || a.Status != http.StatusOK {
		return fmt.Errorf("graphql: %s", a)
	}
	if len(env.Errors) > 0 {
		return errors.New("graphql: " + env.Errors[0].Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Data, out)
}
