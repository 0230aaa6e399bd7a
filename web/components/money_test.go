package components

import (
	"math"
	"strings"
	"testing"

	"voucherd/internal/voucher"
)

func TestParseAmount_ReadsTheCurrencysOwnUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw, currency string
		want          int64
		refused       string // part of the refusal; empty: accepted
	}{
		{"50", "USD", 5000, ""},
		{"50.00", "USD", 5000, ""},
		{"50.5", "USD", 5050, ""},
		{"0.05", "USD", 5, ""},
		{"0", "USD", 0, ""},
		{" 7 ", "USD", 700, ""},
		{"1_000", "USD", 100000, ""},
		{"1 000.50", "USD", 100050, ""},
		{"1 000 000", "USD", 100000000, ""},
		{"007.10", "USD", 710, ""},
		{"500", "JPY", 500, ""},
		{"10_000", "JPY", 10000, ""},
		{"5", "BHD", 5000, ""},
		{"5.125", "BHD", 5125, ""},
		{"5.1", "BHD", 5100, ""},
		{"90071992547409.91", "USD", voucher.MaxMoney, ""},
		{"9007199254740991", "JPY", voucher.MaxMoney, ""},

		{"", "USD", 0, "an amount in USD with at most 2 decimals, e.g. 50.00"},
		{"   ", "USD", 0, "an amount in USD"},
		{"50.505", "USD", 0, "at most 2 decimals"},
		{"500.5", "JPY", 0, "a whole amount in JPY (JPY has no decimals), e.g. 500"},
		{"500.0", "JPY", 0, "no decimals"},
		{"5.1255", "BHD", 0, "an amount in BHD with at most 3 decimals, e.g. 50.000"},
		{"50,00", "USD", 0, "use a point for decimals, not a comma"},
		{"1,000.00", "USD", 0, "not a comma"},
		{"1,000", "JPY", 0, "no comma"},
		{"-5", "USD", 0, "an amount in USD"},
		{"+5", "USD", 0, "an amount in USD"},
		{"5e3", "USD", 0, "an amount in USD"},
		{"5E3", "USD", 0, "an amount in USD"},
		{"0x10", "USD", 0, "an amount in USD"},
		{"fifty", "USD", 0, "an amount in USD"},
		{".5", "USD", 0, "an amount in USD"},
		{"5.", "USD", 0, "an amount in USD"},
		{"5..0", "USD", 0, "an amount in USD"},
		{"5.0.0", "USD", 0, "an amount in USD"},
		{"_5", "USD", 0, "an amount in USD"},
		{"5__0", "USD", 0, "an amount in USD"},
		{"5 .0", "USD", 0, "an amount in USD"},
		{"5\t0", "USD", 0, "an amount in USD"},
		{"５", "USD", 0, "an amount in USD"},                                             // a fullwidth digit
		{"90071992547409.92", "USD", 0, "too large: at most 90,071,992,547,409.91 USD"}, // 2^53 minor units
		{"92233720368547758.07", "USD", 0, "too large"},                                 // fits int64, not voucher.MaxMoney
		{"9223372036854775808", "USD", 0, "too large"},                                  // fits int64 as a number, not in cents
		{"9007199254740992", "JPY", 0, "too large: at most 9,007,199,254,740,991 JPY"},
		{"99999999999999999999999999", "BHD", 0, "too large"},
	} {
		got, err := ParseAmount(tc.raw, tc.currency)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("ParseAmount(%q, %s): refused (%v), want %d", tc.raw, tc.currency, err, tc.want)
		case tc.refused == "" && got != tc.want:
			t.Errorf("ParseAmount(%q, %s) = %d, want %d", tc.raw, tc.currency, got, tc.want)
		case tc.refused != "" && err == nil:
			t.Errorf("ParseAmount(%q, %s) = %d, want it refused", tc.raw, tc.currency, got)
		case tc.refused != "" && !strings.Contains(err.Error(), tc.refused):
			t.Errorf("ParseAmount(%q, %s) refused with %q, want it to say %q", tc.raw, tc.currency, err, tc.refused)
		}
	}
}

// What the edit form shows is read back to the same minor units.
func TestFormatAmount_IsReadBackByParseAmount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{5000, "USD", "50.00"}, {5, "USD", "0.05"}, {0, "USD", "0.00"}, {123456789, "USD", "1234567.89"},
		{500, "JPY", "500"}, {0, "JPY", "0"}, {5125, "BHD", "5.125"}, {5, "BHD", "0.005"},
		{voucher.MaxMoney, "USD", "90071992547409.91"}, {voucher.MaxMoney, "JPY", "9007199254740991"},
	} {
		got := FormatAmount(tc.minor, tc.currency)
		if got != tc.want {
			t.Errorf("FormatAmount(%d, %s) = %q, want %q", tc.minor, tc.currency, got, tc.want)
		}
		if back, err := ParseAmount(got, tc.currency); err != nil || back != tc.minor {
			t.Errorf("ParseAmount(FormatAmount(%d, %s)) = %d, %v", tc.minor, tc.currency, back, err)
		}
	}
	for in, want := range map[int64]string{5000: "50.00 USD", math.MinInt64: "-92,233,720,368,547,758.08 USD", -250: "-2.50 USD"} {
		if got := MoneyIn(in, "USD"); got != want {
			t.Errorf("MoneyIn(%d, USD) = %q, want %q", in, got, want)
		}
	}
	if got := MoneyIn(5000, "BHD"); got != "5.000 BHD" {
		t.Errorf("MoneyIn(5000, BHD) = %q", got)
	}
}
