package voucher_test

import (
	"strings"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// TestNewApiKey_ValidateNamesTheFieldOfEachBrokenRule: the name is 1-199
// characters after trimming, the role storefront or admin, the expiry in
// the future, the rate and burst 1 or more and the burst only with a rate.
func TestNewApiKey_ValidateNamesTheFieldOfEachBrokenRule(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	n := func(v int) *int { return &v }
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	for _, tc := range []struct {
		key   voucher.NewApiKey
		field string // "" valid
	}{
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleAdmin}, ""},
		{voucher.NewApiKey{Name: strings.Repeat("é", 199), Role: voucher.RoleStorefront, ExpiresAt: at(time.Second), RatePerSecond: n(1), Burst: n(1)}, ""},
		{voucher.NewApiKey{Name: "", Role: voucher.RoleAdmin}, "name"},
		{voucher.NewApiKey{Name: " \t ", Role: voucher.RoleAdmin}, "name"},
		{voucher.NewApiKey{Name: strings.Repeat("é", 200), Role: voucher.RoleAdmin}, "name"},
		{voucher.NewApiKey{Name: "a\x00b", Role: voucher.RoleAdmin}, "name"},
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleMarketer}, "role"},
		{voucher.NewApiKey{Name: "ci", Role: ""}, "role"},
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleAdmin, ExpiresAt: at(0)}, "expiresAt"},
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleAdmin, ExpiresAt: at(-time.Hour)}, "expiresAt"},
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleAdmin, RatePerSecond: n(0)}, "ratePerSecond"},
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleAdmin, RatePerSecond: n(-1)}, "ratePerSecond"},
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleAdmin, RatePerSecond: n(1 << 40)}, "ratePerSecond"},
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleAdmin, RatePerSecond: n(5), Burst: n(0)}, "burst"},
		{voucher.NewApiKey{Name: "ci", Role: voucher.RoleAdmin, Burst: n(5)}, "burst"},
	} {
		err := tc.key.Validate(now)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v, want valid", tc.key, err)
			}
			continue
		}
		if e := voucher.AsError(err); err == nil || e.Code != voucher.InvalidInput || e.Field != tc.field {
			t.Errorf("%.60v: %v, want INVALID_INPUT on %s", tc.key, err, tc.field)
		}
	}
}
