package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"voucherd/internal/voucher"
)

// statusOf is the one table from the service's error codes to HTTP statuses.
var statusOf = map[voucher.ErrorCode]int{
	voucher.OutOfStock:          http.StatusConflict,
	voucher.BudgetExhausted:     http.StatusConflict,
	voucher.AlreadyUsed:         http.StatusConflict,
	voucher.OrderConflict:       http.StatusConflict,
	voucher.ReservationReleased: http.StatusConflict,
	voucher.AlreadyConfirmed:    http.StatusConflict,
	voucher.NotConfirmed:        http.StatusConflict,
	voucher.PeriodLimitReached:  http.StatusConflict,
	voucher.VoucherExists:       http.StatusConflict,
	voucher.NotEligible:         http.StatusUnprocessableEntity,
	voucher.NotFound:            http.StatusNotFound,
	voucher.InvalidInput:        http.StatusBadRequest,
	voucher.Unavailable:         http.StatusServiceUnavailable,
	voucher.Forbidden:           http.StatusForbidden,
	voucher.Internal:            http.StatusInternalServerError,
}

// reservationJSON is a reservation in REST answers.
type reservationJSON struct {
	OrderID        string    `json:"orderId"`
	VoucherCode    string    `json:"voucherCode"`
	CustomerID     int64     `json:"customerId"`
	OrderAmount    int64     `json:"orderAmount"`
	DiscountAmount int64     `json:"discountAmount"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"createdAt"`
	ExpiresAt      time.Time `json:"expiresAt"`
	Position       int       `json:"position"`
	// Set once rolled back (the reason only when one was given).
	RolledBackAt   *time.Time `json:"rolledBackAt,omitempty"`
	RollbackReason string     `json:"rollbackReason,omitempty"`
}

func toReservationJSON(r voucher.Reservation) reservationJSON {
	return reservationJSON{
		OrderID:        r.OrderID,
		VoucherCode:    r.VoucherCode,
		CustomerID:     r.CustomerID,
		OrderAmount:    r.OrderAmount,
		DiscountAmount: r.DiscountAmount,
		Status:         string(r.Status),
		CreatedAt:      r.CreatedAt.UTC(),
		ExpiresAt:      r.ExpiresAt.UTC(),
		Position:       r.Position,
		RolledBackAt:   utc(r.RolledBackAt),
		RollbackReason: r.RollbackReason,
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// reserveBody is POST /vouchers/{code}/reservations. Raw fields tell a
// missing field from a zero one and accept customerId as a number or digits.
type reserveBody struct {
	CustomerID  json.RawMessage `json:"customerId"`
	OrderID     json.RawMessage `json:"orderId"`
	OrderAmount json.RawMessage `json:"orderAmount"`
	Currency    json.RawMessage `json:"currency"` // optional
	// Optional: the customer's segments and the order's items.
	CustomerSegments json.RawMessage `json:"customerSegments"`
	Items            json.RawMessage `json:"items"`
}

func (b reserveBody) request(code string) (voucher.ReserveRequest, error) {
	r := voucher.ReserveRequest{Code: code}
	var err error
	if r.CustomerID, err = parseCustomerID(b.CustomerID); err != nil {
		return r, err
	}
	if len(b.OrderID) == 0 || json.Unmarshal(b.OrderID, &r.OrderID) != nil {
		return r, voucher.Invalid("orderId", "orderId must be a string of 1-64 characters")
	}
	if r.OrderAmount, err = parseMoney("orderAmount", b.OrderAmount); err != nil {
		return r, err
	}
	if len(b.Currency) > 0 && json.Unmarshal(b.Currency, &r.Currency) != nil {
		return r, voucher.Invalid("currency", "currency must be an ISO 4217 code of three capital letters, e.g. USD")
	}
	if len(b.CustomerSegments) > 0 && string(b.CustomerSegments) != "null" {
		if json.Unmarshal(b.CustomerSegments, &r.CustomerSegments) != nil || r.CustomerSegments == nil {
			return r, voucher.Invalid("customerSegments", "customerSegments must be an array of strings")
		}
	}
	if r.Items, err = parseItems(b.Items); err != nil {
		return r, err
	}
	return r, nil
}

// parseItems reads the optional items: an array of objects with exactly the
// keys sku, category (optional), quantity and unitAmount. nil when absent.
func parseItems(raw json.RawMessage) ([]voucher.LineItem, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	bad := voucher.Invalid("items", "items must be an array of {sku, category, quantity, unitAmount}")
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil || list == nil {
		return nil, bad
	}
	if len(list) > voucher.MaxItems {
		return nil, voucher.Invalid("items", "at most 100 items")
	}
	items := make([]voucher.LineItem, len(list))
	for i, one := range list {
		var sku, category, quantity, unit json.RawMessage
		if err := decodeObject(one, member{"sku", &sku}, member{"category", &category}, member{"quantity", &quantity}, member{"unitAmount", &unit}); err != nil {
			return nil, bad
		}
		it := &items[i]
		if len(sku) == 0 || json.Unmarshal(sku, &it.SKU) != nil {
			return nil, bad
		}
		if len(category) > 0 && string(category) != "null" && json.Unmarshal(category, &it.Category) != nil {
			return nil, bad
		}
		q, err := strconv.ParseInt(string(quantity), 10, 64)
		if err != nil || q < 1 || q > voucher.MaxLimit {
			return nil, voucher.Invalid("items", "an item's quantity must be an integer, at least 1 and at most 2147483647")
		}
		it.Quantity = int(q)
		if it.UnitAmount, err = parseMoney("items", unit); err != nil {
			return nil, err
		}
	}
	return items, nil
}

func parseCustomerID(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, voucher.Invalid("customerId", "customerId is required")
	}
	digits := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &digits); err != nil {
			return 0, voucher.Invalid("customerId", "customerId must be a positive 64-bit integer")
		}
	}
	return voucher.ParseCustomerID(digits)
}

// parseMoney accepts a JSON integer of at most voucher.MaxMoney only: never
// a float, an exponent, -0 or a string. (The sign is the domain's to judge,
// with the field's own rule.)
func parseMoney(field string, raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, voucher.Invalid(field, field+" is required")
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n == 0 && raw[0] == '-' || n > voucher.MaxMoney { // -0 is no amount a client means
		return 0, voucher.Invalid(field, field+" must be an integer amount in minor units, at most "+strconv.FormatInt(voucher.MaxMoney, 10)+" (2^53 - 1)")
	}
	return n, nil
}

func handleReserve(svc *voucher.Service, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isJSON(r.Header.Get("Content-Type")) {
			unsupportedMediaType(w)
			return
		}
		req, err := reserveRequest(r)
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		res, err := svc.Reserve(r.Context(), req)
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		writeJSON(w, http.StatusCreated, toReservationJSON(res))
	})
}

// reserveRequest reads the reserve body: in one pass when it has the usual
// shape (parseReserveBody), else through readReserveBody, which words every
// refusal.
func reserveRequest(r *http.Request) (voucher.ReserveRequest, error) {
	data, ok := unread(r)
	if !ok {
		var err error
		if data, err = io.ReadAll(r.Body); err != nil {
			return voucher.ReserveRequest{}, voucher.Invalid("body", "the request body could not be read")
		}
	}
	if req, ok := parseReserveBody(data, r.PathValue("code")); ok {
		return req, nil
	}
	return readReserveBody(data, r.PathValue("code"))
}

// readReserveBody is the general path: decodeObject, then each field's parser.
func readReserveBody(data []byte, code string) (voucher.ReserveRequest, error) {
	var b reserveBody
	if err := decodeObject(data, member{"customerId", &b.CustomerID}, member{"orderId", &b.OrderID}, member{"orderAmount", &b.OrderAmount}, member{"currency", &b.Currency},
		member{"customerSegments", &b.CustomerSegments}, member{"items", &b.Items}); err != nil {
		return voucher.ReserveRequest{}, err
	}
	return b.request(code)
}

func handleConfirm(svc *voucher.Service, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := svc.Confirm(r.Context(), r.PathValue("code"), r.PathValue("orderId"))
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		writeJSON(w, http.StatusOK, toReservationJSON(res))
	})
}

func handleRelease(svc *voucher.Service, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := svc.Release(r.Context(), r.PathValue("code"), r.PathValue("orderId"))
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		writeJSON(w, http.StatusOK, toReservationJSON(res))
	})
}

// handleRollback is POST /vouchers/{code}/reservations/{orderId}/rollback,
// with the body {"reason": "..."} or none.
func handleRollback(svc *voucher.Service, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reason, err := rollbackReason(r)
		if err != nil {
			if errors.Is(err, errNotJSON) {
				unsupportedMediaType(w)
				return
			}
			writeError(w, r, logger, err)
			return
		}
		res, err := svc.Rollback(r.Context(), r.PathValue("code"), r.PathValue("orderId"), reason)
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		writeJSON(w, http.StatusOK, toReservationJSON(res))
	})
}

// errNotJSON is a body sent as something other than JSON.
var errNotJSON = errors.New("the body is not JSON")

// rollbackReason reads the optional body of a rollback: none (or an empty
// one) is no reason, as is {} or {"reason": null}; a body present must be
// JSON, as every REST body.
func rollbackReason(r *http.Request) (*string, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, voucher.Invalid("body", "the request body could not be read")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		return nil, errNotJSON
	}
	var raw json.RawMessage
	if err := decodeObject(data, member{"reason", &raw}); err != nil {
		return nil, err
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var reason string
	if err := json.Unmarshal(raw, &reason); err != nil {
		return nil, voucher.Invalid("reason", "reason must be a string of 1-200 characters")
	}
	return &reason, nil
}

// errorJSON is a refused REST call.
type errorJSON struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// AvailableAt: PERIOD_LIMIT_REACHED's end of the period.
	AvailableAt *time.Time `json:"availableAt,omitempty"`
}

// writeError answers with the code's status; a fault is logged with its
// cause and shown as a generic internal error.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	e := voucher.AsError(err)
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status >= 500 {
		logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
	}
	if production(r.Context()) {
		e = &voucher.Error{Code: e.Code, Message: e.PublicMessage(true), Field: e.Field, AvailableAt: e.AvailableAt}
	}
	// Most refusals (the late crowd's OUT_OF_STOCK above all) are plain
	// ASCII: written by hand they cost one allocation instead of
	// encoding/json's reflection, with the same bytes.
	if body, ok := appendErrorJSON(make([]byte, 0, 40+len(e.Code)+len(e.Message)+len(e.Field)), e); ok {
		writeBody(w, status, body)
		return
	}
	out := errorJSON{Error: string(e.Code), Message: e.Message, Field: e.Field}
	if !e.AvailableAt.IsZero() {
		at := e.AvailableAt.UTC()
		out.AvailableAt = &at
	}
	writeJSON(w, status, out)
}

type productionKey struct{}

// withProduction marks every request of a production server: its refusals
// quote no value of the request (voucher.Error.PublicMessage).
func withProduction(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), productionKey{}, true)))
	})
}

func production(ctx context.Context) bool {
	p, _ := ctx.Value(productionKey{}).(bool)
	return p
}

// appendErrorJSON appends what json.NewEncoder(w).Encode(errorJSON{...})
// writes, byte for byte, when every string is printable ASCII that
// encoding/json writes as it is (no quote, backslash or its HTML escapes
// <, > and &); ok is false otherwise.
func appendErrorJSON(b []byte, e *voucher.Error) ([]byte, bool) {
	if !e.AvailableAt.IsZero() || !plainJSON(string(e.Code)) || !plainJSON(e.Message) || !plainJSON(e.Field) {
		return nil, false
	}
	b = append(b, `{"error":"`...)
	b = append(b, e.Code...)
	b = append(b, `","message":"`...)
	b = append(b, e.Message...)
	if e.Field != "" {
		b = append(b, `","field":"`...)
		b = append(b, e.Field...)
	}
	b = append(b, "\"}\n"...)
	return b, true
}

func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"INTERNAL","message":"internal error"}` + "\n")
	}
	writeBody(w, status, buf.Bytes())
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) //nolint:gosec // G705: a JSON body sent as application/json, never HTML
}

// checkJSON is a check's answer: the discount a reserve now would hold.
type checkJSON struct {
	DiscountAmount int64 `json:"discountAmount"`
}

// handleCheck is POST /vouchers/{code}/checks: what a reserve now would
// answer (200 with the discount, or the reserve's refusal and status),
// holding nothing.
func handleCheck(svc *voucher.Service, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isJSON(r.Header.Get("Content-Type")) {
			unsupportedMediaType(w)
			return
		}
		req, err := checkRequest(r)
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		discount, err := svc.CheckVoucher(r.Context(), req)
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		writeJSON(w, http.StatusOK, checkJSON{DiscountAmount: discount})
	})
}

// checkRequest reads the check body: the reserve's fields without orderId.
func checkRequest(r *http.Request) (voucher.CheckRequest, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return voucher.CheckRequest{}, voucher.Invalid("body", "the request body could not be read")
	}
	var b reserveBody
	if err := decodeObject(data, member{"customerId", &b.CustomerID}, member{"orderAmount", &b.OrderAmount}, member{"currency", &b.Currency},
		member{"customerSegments", &b.CustomerSegments}, member{"items", &b.Items}); err != nil {
		return voucher.CheckRequest{}, err
	}
	b.OrderID = json.RawMessage(`"check"`) // a check has none; request wants one
	req, err := b.request(r.PathValue("code"))
	if err != nil {
		return voucher.CheckRequest{}, err
	}
	return voucher.CheckRequest{Code: req.Code, CustomerID: req.CustomerID, OrderAmount: req.OrderAmount, Currency: req.Currency,
		CustomerSegments: req.CustomerSegments, Items: req.Items}, nil
}
