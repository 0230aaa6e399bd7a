package voucher

import (
	"sync"

	"golang.org/x/text/currency"
)

// ValidateCurrency checks an ISO 4217 code: three capital letters naming a
// currency the CLDR tables of golang.org/x/text know.
func ValidateCurrency(code string) error {
	ok := len(code) == 3
	for i := 0; ok && i < len(code); i++ {
		ok = code[i] >= 'A' && code[i] <= 'Z'
	}
	if ok {
		_, err := currency.ParseISO(code)
		ok = err == nil
	}
	if !ok {
		return Invalid("currency", "currency must be an ISO 4217 code of three capital letters, e.g. USD")
	}
	return nil
}

// CurrencyDigits is how many decimal places a currency's minor unit has
// (USD 2: 5000 is 50.00; JPY 0; BHD 3), from CLDR's table in
// golang.org/x/text rather than a hand list; 2 for a code it does not know.
func CurrencyDigits(code string) int {
	u, err := currency.ParseISO(code)
	if err != nil {
		return 2
	}
	scale, _ := currency.Standard.Rounding(u)
	return scale
}

// UncommonCurrencyDigits maps every currency golang.org/x/text knows
// (historical and non-tender ones too) whose minor unit is not 2 decimals to
// its CurrencyDigits (JPY 0, BHD 3): the dashboard's script reads amounts
// with it as the server does, whatever currency is typed.
var UncommonCurrencyDigits = sync.OnceValue(func() map[string]int {
	out := map[string]int{}
	for it := currency.Query(currency.Historical, currency.NonTender); it.Next(); {
		code := it.Unit().String()
		if d := CurrencyDigits(code); d != 2 {
			out[code] = d
		}
	}
	return out
})
