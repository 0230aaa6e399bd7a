package accounts

import (
	"testing"

	"golang.org/x/crypto/bcrypt"

	"voucherd/internal/voucher"
)

func TestNewUser_Validate(t *testing.T) {
	t.Parallel()
	good := NewUser{Email: " Mia@Example.com ", Role: voucher.RoleMarketer, Password: "long enough!"}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good user: %v", err)
	}
	for _, tc := range []struct {
		desc   string
		change func(*NewUser)
		field  string
	}{
		{"no email", func(u *NewUser) { u.Email = "" }, "email"},
		{"not an address", func(u *NewUser) { u.Email = "Mia <mia@example.com>" }, "email"},
		{"storefront is no dashboard role", func(u *NewUser) { u.Role = voucher.RoleStorefront }, "role"},
		{"short password", func(u *NewUser) { u.Password = "short" }, "password"},
		{"password past bcrypt's 72 bytes", func(u *NewUser) { u.Password = string(make([]byte, 73)) }, "password"},
	} {
		u := good
		tc.change(&u)
		if err := u.Validate(); voucher.AsError(err).Field != tc.field {
			t.Errorf("%s: %v, want INVALID_INPUT on %s", tc.desc, err, tc.field)
		}
	}
}

// TestHashCost_IsBcryptsDefaultInTheProduct: only a test suite lowers the
// cost of the hashes (internal/e2e's TestMain); the product hashes every
// password at bcrypt's default.
func TestHashCost_IsBcryptsDefaultInTheProduct(t *testing.T) {
	if HashCost != bcrypt.DefaultCost {
		t.Fatalf("HashCost %d, want bcrypt's default %d", HashCost, bcrypt.DefaultCost)
	}
}
