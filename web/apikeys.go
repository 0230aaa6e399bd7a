package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// ApiKeys is what the API keys page calls (voucher.ApiKeys).
type ApiKeys interface {
	Create(ctx context.Context, n voucher.NewApiKey) (voucher.CreatedApiKey, error)
	Revoke(ctx context.Context, id string) (voucher.ApiKey, error)
	List(ctx context.Context) ([]voucher.ApiKey, error)
	Audit(ctx context.Context) ([]voucher.ApiKeyAuditEvent, error)
}

// apiKeysPage is the admin's page of API keys.
func (d *dashboard) apiKeysPage(w http.ResponseWriter, r *http.Request) {
	d.renderApiKeys(w, r, http.StatusOK, components.ApiKeysView{Form: components.ApiKeyForm{Role: string(voucher.RoleStorefront)}})
}

func (d *dashboard) renderApiKeys(w http.ResponseWriter, r *http.Request, status int, v components.ApiKeysView) {
	var err error
	if v.Keys, err = d.deps.ApiKeys.List(r.Context()); err != nil {
		d.fail(w, r, err)
		return
	}
	if v.Audit, err = d.deps.ApiKeys.Audit(r.Context()); err != nil {
		d.fail(w, r, err)
		return
	}
	if v.Shown != nil {
		// The secret is in this answer only: no cache keeps it.
		w.Header().Set("Cache-Control", "no-store")
	}
	d.render(w, r, status, components.ApiKeysPage(d.page(r, "API keys", "api-keys"), v))
}

// createApiKey makes a key and shows its secret, this once.
func (d *dashboard) createApiKey(w http.ResponseWriter, r *http.Request) {
	f := components.ApiKeyForm{
		Name: r.PostFormValue("name"), Role: r.PostFormValue("role"), ExpiresAt: strings.TrimSpace(r.PostFormValue("expiresAt")),
		Rate: strings.TrimSpace(r.PostFormValue("ratePerSecond")), Burst: strings.TrimSpace(r.PostFormValue("burst")),
		Errors: map[string]string{},
	}
	n := voucher.NewApiKey{Name: f.Name, Role: voucher.Role(f.Role)}
	zone := zoneOf(r)
	if f.ExpiresAt != "" {
		t, err := time.ParseInLocation(components.DateTimeLocal, f.ExpiresAt, zone)
		if err != nil {
			f.Errors["key-expiresAt"] = "Pick a date and time, or leave it empty for a key that does not expire."
		}
		n.ExpiresAt = &t
	}
	for _, in := range []struct {
		field, raw string
		to         **int
	}{{"ratePerSecond", f.Rate, &n.RatePerSecond}, {"burst", f.Burst, &n.Burst}} {
		if in.raw == "" {
			continue
		}
		v, err := strconv.Atoi(in.raw)
		if err != nil {
			f.Errors["key-"+in.field] = apiKeyMessages[in.field]
			continue
		}
		*in.to = &v
	}
	if len(f.Errors) > 0 {
		d.renderApiKeys(w, r, http.StatusUnprocessableEntity, components.ApiKeysView{Form: f})
		return
	}
	created, err := d.deps.ApiKeys.Create(r.Context(), n)
	switch e := voucher.AsError(err); {
	case err == nil:
	case e.Code == voucher.InvalidInput:
		f.Errors["key-"+e.Field] = apiKeyMessages[e.Field]
		d.renderApiKeys(w, r, http.StatusUnprocessableEntity, components.ApiKeysView{Form: f})
		return
	default:
		d.fail(w, r, err)
		return
	}
	d.renderApiKeys(w, r, http.StatusCreated, components.ApiKeysView{
		Form:  components.ApiKeyForm{Role: string(voucher.RoleStorefront)},
		Shown: &created,
	})
}

// apiKeyMessages are the form's words for the fields the domain refuses.
var apiKeyMessages = map[string]string{
	"name":          "Name the key: 1 to 199 characters of text.",
	"role":          "Pick storefront or admin.",
	"expiresAt":     "The expiry must be in the future, or empty for a key that does not expire.",
	"ratePerSecond": "A whole number of requests a second, 1 or more; empty for no limit.",
	"burst":         "A whole number, 1 or more, and only with a rate; empty: the rate.",
}

// revokeApiKey revokes a key: every server refuses it within a second.
func (d *dashboard) revokeApiKey(w http.ResponseWriter, r *http.Request) {
	if _, err := d.deps.ApiKeys.Revoke(r.Context(), r.PathValue("id")); err != nil {
		d.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/api-keys?notice=key-revoked", http.StatusSeeOther)
}
