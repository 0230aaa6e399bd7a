package voucher

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The validators of what a caller names: whatever they accept is exactly
// the documented set, and survives a JSON round trip byte for byte, so no
// transport's decoder could have changed it.

func FuzzValidateCode(f *testing.F) {
	for _, s := range []string{"WINTER25", "a", "a-b_c", strings.Repeat("x", 32), strings.Repeat("x", 33), "", "has space", "é", "\xff", "a\x00", "ＡＢＣ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		if ValidateCode(code) != nil {
			return
		}
		if len(code) < 1 || len(code) > 32 || strings.TrimLeft(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			t.Fatalf("ValidateCode accepted %q", code)
		}
		roundTrip(t, code)
	})
}

func FuzzValidateOrderID(f *testing.F) {
	for _, s := range []string{"o-1", "ü-€-😀", strings.Repeat("o", 64), strings.Repeat("é", 64), strings.Repeat("o", 65), "", "u8-\xff", "u8-\xfe", "u8-\xed\xa0\x80", "o\x00x", "o\tx", "\u2028", "\uFFFD"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, orderID string) {
		if ValidateOrderID(orderID) != nil {
			return
		}
		if n := utf8.RuneCountInString(orderID); !utf8.ValidString(orderID) || n < 1 || n > 64 || strings.ContainsFunc(orderID, unicode.IsControl) {
			t.Fatalf("ValidateOrderID accepted %q", orderID)
		}
		roundTrip(t, orderID)
	})
}

// roundTrip fails unless s encodes to JSON and decodes to the same bytes.
func roundTrip(t *testing.T, s string) {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back string
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Fatalf("%q came back from JSON as %q (%v)", s, back, err)
	}
}
