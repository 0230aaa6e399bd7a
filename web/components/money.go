package components

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"voucherd/internal/voucher"
)

// The voucher form takes amounts in the voucher's currency's own units, as
// people think of them ("50.00" USD, "500" JPY), and the service stores
// minor units (5000, 500): ParseAmount is the one place that turns one into
// the other, FormatAmount the way back for an edit form, and dashboard.js
// reads them by the same rules to echo them as typed.

// ParseAmount reads an amount typed in a currency's units into its minor
// units: for USD "50", "50.00" and "5_000" are 5000 and 500000 minor
// units, "50.5" is 5050; for JPY "500" is 500. A space or "_" may group
// digits, "." is the decimal point, with at most voucher.CurrencyDigits
// decimals; a sign, an exponent, a comma or an amount of more than
// voucher.MaxMoney minor units is refused, never rounded or wrapped. The error says the
// rule in words that follow the field's name ("must be an amount in USD
// with at most 2 decimals, e.g. 50.00").
func ParseAmount(raw, currency string) (int64, error) {
	digits := voucher.CurrencyDigits(currency)
	s := strings.TrimSpace(raw)
	rule := errors.New(amountRule(currency, digits))
	if strings.Contains(s, ",") {
		if digits == 0 {
			return 0, fmt.Errorf("must have no comma: %s has no decimals; group digits with a space or _, e.g. 1 000", currency)
		}
		return 0, fmt.Errorf("must use a point for decimals, not a comma, e.g. %s; group digits with a space or _, e.g. 1 000%s", example(digits), example(digits)[2:])
	}
	var whole, frac []byte
	point := false
	digit := func(i int) bool { return i >= 0 && i < len(s) && s[i] >= '0' && s[i] <= '9' }
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case digit(i) && point:
			frac = append(frac, c)
		case digit(i):
			whole = append(whole, c)
		case (c == ' ' || c == '_') && digit(i-1) && digit(i+1):
			// a group separator, between two digits only
		case c == '.' && !point && digit(i-1) && digit(i+1):
			point = true
		default:
			return 0, rule
		}
	}
	if len(whole) == 0 || len(frac) > digits {
		return 0, rule
	}
	for len(frac) < digits {
		frac = append(frac, '0')
	}
	minor, err := strconv.ParseInt(string(whole)+string(frac), 10, 64)
	if err != nil || minor > voucher.MaxMoney { // only digits: the number is too large
		return 0, fmt.Errorf("is too large: at most %s", MoneyIn(voucher.MaxMoney, currency))
	}
	return minor, nil
}

// amountRule is what an amount field takes, after the field's name.
func amountRule(currency string, digits int) string {
	if digits == 0 {
		return fmt.Sprintf("must be a whole amount in %s (%s has no decimals), e.g. %s", currency, currency, example(0))
	}
	return fmt.Sprintf("must be an amount in %s with at most %d decimals, e.g. %s", currency, digits, example(digits))
}

// example is an amount as the form takes it: 500 with no decimals, else
// 50.00, 50.000.
func example(digits int) string {
	if digits == 0 {
		return "500"
	}
	return "50." + strings.Repeat("0", digits)
}

// FormatAmount shows minor units in the currency's units the way
// ParseAmount reads them back, for a form field: 5000 USD is "50.00", 500
// JPY "500" (no thousands separator: a comma would be refused).
func FormatAmount(minor int64, currency string) string {
	return units(minor, voucher.CurrencyDigits(currency), false)
}

// units writes minor units with digits decimals, grouping thousands with
// commas when asked (for reading, not for a form).
func units(minor int64, digits int, grouped bool) string {
	sign := ""
	s := strconv.FormatInt(minor, 10)
	if minor < 0 { // the digits as written: math.MinInt64 has no positive
		sign, s = "-", s[1:]
	}
	if len(s) <= digits {
		s = strings.Repeat("0", digits-len(s)+1) + s
	}
	whole, frac := s[:len(s)-digits], s[len(s)-digits:]
	if grouped {
		whole = group(whole)
	}
	if digits == 0 {
		return sign + whole
	}
	return sign + whole + "." + frac
}

func group(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Echo says what an amount typed in a currency's units was understood as:
// "You typed 50 = 50.00 USD." Nothing for what ParseAmount refuses (its
// field says why on submit).
func Echo(raw, currency string) string {
	n, err := ParseAmount(raw, currency)
	if err != nil {
		return ""
	}
	return "You typed " + strings.TrimSpace(raw) + " = " + MoneyIn(n, currency) + "."
}

// AmountCurrency is the currency the form's amounts are read in: the one
// typed, else the one used when none is (the service's default on create,
// the voucher's own on edit).
func (f VoucherForm) AmountCurrency() string {
	if f.Currency != "" {
		return f.Currency
	}
	return f.DefaultCurrency
}

// currencyDigitsJSON is the table dashboard.js reads a typed currency's
// decimals from, the server's own (every currency not listed has 2).
func currencyDigitsJSON() string {
	b, err := json.Marshal(voucher.UncommonCurrencyDigits())
	if err != nil { // a map of strings to ints always marshals
		return "{}"
	}
	return string(b)
}
