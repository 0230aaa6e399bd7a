package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"voucherd/internal/voucher"
)

// TestAppendErrorJSON_SameBytesAsEncodingJSON: the hand-written error body
// is exactly what writeJSON would write, and anything it cannot write so is
// left to writeJSON.
func TestAppendErrorJSON_SameBytesAsEncodingJSON(t *testing.T) {
	for _, e := range []*voucher.Error{
		voucher.Errorf(voucher.OutOfStock, "voucher %s is sold out", "flash-1"),
		voucher.Invalid("orderId", "orderId must be 1-64 characters"),
		voucher.Invalid("body", "the body must be a JSON object"),
		{Code: voucher.Internal, Message: "internal error"},
		{Code: voucher.NotFound, Message: ""},
		{Code: voucher.NotEligible, Message: "voucher x is not valid before 2026-01-01T00:00:00Z ~ {}[]|`'"},
		{Code: voucher.OrderConflict, Message: `order "a" was already used`},
		{Code: voucher.OrderConflict, Message: `order a\b`},
		{Code: voucher.OrderConflict, Message: "order <a> & b"},
		{Code: voucher.OrderConflict, Message: "order é"},
		{Code: voucher.OrderConflict, Message: "order \u2028"},
		{Code: voucher.OrderConflict, Message: "order \x7f \x01"},
		{Code: voucher.OrderConflict, Message: "order \xff"},
		{Code: voucher.InvalidInput, Message: "m", Field: `a"b`},
	} {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(errorJSON{Error: string(e.Code), Message: e.Message, Field: e.Field}); err != nil {
			t.Fatal(err)
		}
		got, ok := appendErrorJSON(nil, e)
		if ok && !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%+v: %q, encoding/json writes %q", e, got, want.Bytes())
		}
		if !ok && plainJSON(e.Message) && plainJSON(e.Field) {
			t.Errorf("%+v: refused a plain error", e)
		}
		if ok != bytes.Equal(want.Bytes(), append([]byte(nil), got...)) {
			t.Errorf("%+v: ok=%v", e, ok)
		}
	}
}
