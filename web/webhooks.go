package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// Webhooks is what the webhooks pages call (voucher.Webhooks).
type Webhooks interface {
	Create(ctx context.Context, n voucher.NewWebhookEndpoint) (voucher.CreatedWebhookEndpoint, error)
	Update(ctx context.Context, id string, c voucher.WebhookChange) (voucher.WebhookEndpoint, error)
	Rotate(ctx context.Context, id string) (voucher.CreatedWebhookEndpoint, error)
	Delete(ctx context.Context, id string) (voucher.WebhookEndpoint, error)
	Resend(ctx context.Context, endpointID, eventID string) (voucher.WebhookDelivery, error)
	SendTest(ctx context.Context, id string) (voucher.WebhookDelivery, error)
	Endpoints(ctx context.Context) ([]voucher.WebhookEndpoint, error)
	Endpoint(ctx context.Context, id string) (voucher.WebhookEndpoint, error)
	Deliveries(ctx context.Context, endpointID string, first int, after string) (voucher.WebhookDeliveryPage, error)
	Audit(ctx context.Context) ([]voucher.WebhookAuditEvent, error)
}

// webhooksPage is the admin's page of webhook endpoints.
func (d *dashboard) webhooksPage(w http.ResponseWriter, r *http.Request) {
	d.renderWebhooks(w, r, http.StatusOK, components.WebhooksView{Form: components.WebhookForm{Events: []string{"*"}}})
}

func (d *dashboard) renderWebhooks(w http.ResponseWriter, r *http.Request, status int, v components.WebhooksView) {
	var err error
	if v.Endpoints, err = d.deps.Webhooks.Endpoints(r.Context()); err != nil {
		d.fail(w, r, err)
		return
	}
	if v.Audit, err = d.deps.Webhooks.Audit(r.Context()); err != nil {
		d.fail(w, r, err)
		return
	}
	if v.Shown != nil {
		// The secret is in this answer only: no cache keeps it.
		w.Header().Set("Cache-Control", "no-store")
	}
	d.render(w, r, status, components.WebhooksPage(d.page(r, "Webhooks", "webhooks"), v))
}

// webhookMessages are the form's words for the fields the domain refuses.
var webhookMessages = map[string]string{
	"url":         "An http:// or https:// URL the server may reach (in production not a loopback, private or link-local address).",
	"events":      "Pick at least one event, or all events.",
	"description": "At most 500 characters of text.",
}

// createWebhook adds an endpoint and shows its secret, this once.
func (d *dashboard) createWebhook(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		d.problem(w, r, http.StatusBadRequest, "Not accepted", "The form could not be read.")
		return
	}
	f := components.WebhookForm{URL: strings.TrimSpace(r.PostFormValue("url")), Description: r.PostFormValue("description"), Events: r.PostForm["events"], Errors: map[string]string{}}
	n := voucher.NewWebhookEndpoint{URL: f.URL, Events: f.Events}
	if strings.TrimSpace(f.Description) != "" {
		n.Description = &f.Description
	}
	created, err := d.deps.Webhooks.Create(r.Context(), n)
	switch e := voucher.AsError(err); {
	case err == nil:
	case e.Code == voucher.InvalidInput:
		field := strings.TrimPrefix(e.Field, "input.")
		f.Errors["hook-"+field] = webhookMessages[field]
		d.renderWebhooks(w, r, http.StatusUnprocessableEntity, components.WebhooksView{Form: f})
		return
	default:
		d.fail(w, r, err)
		return
	}
	d.renderWebhooks(w, r, http.StatusCreated, components.WebhooksView{Form: components.WebhookForm{Events: []string{"*"}}, Shown: &created})
}

// rotateWebhook gives an endpoint a new secret and shows it, this once.
func (d *dashboard) rotateWebhook(w http.ResponseWriter, r *http.Request) {
	rotated, err := d.deps.Webhooks.Rotate(r.Context(), r.PathValue("id"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.renderWebhooks(w, r, http.StatusOK, components.WebhooksView{Form: components.WebhookForm{Events: []string{"*"}}, Shown: &rotated})
}

// testWebhook sends a webhook.test event to an endpoint.
func (d *dashboard) testWebhook(w http.ResponseWriter, r *http.Request) {
	sent, err := d.deps.Webhooks.SendTest(r.Context(), r.PathValue("id"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/webhooks/"+strconv.FormatInt(sent.EndpointID, 10)+"?notice=hook-tested", http.StatusSeeOther)
}

// enableWebhook enables or disables an endpoint.
func (d *dashboard) enableWebhook(w http.ResponseWriter, r *http.Request) {
	enabled := r.PostFormValue("enabled") == "true"
	if _, err := d.deps.Webhooks.Update(r.Context(), r.PathValue("id"), voucher.WebhookChange{Enabled: &enabled}); err != nil {
		d.fail(w, r, err)
		return
	}
	notice := "hook-disabled"
	if enabled {
		notice = "hook-enabled"
	}
	http.Redirect(w, r, "/admin/webhooks?notice="+notice, http.StatusSeeOther)
}

// deleteWebhook removes an endpoint and its pending deliveries.
func (d *dashboard) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if _, err := d.deps.Webhooks.Delete(r.Context(), r.PathValue("id")); err != nil {
		d.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/webhooks?notice=hook-deleted", http.StatusSeeOther)
}

// resendWebhook delivers one event to the endpoint again, now.
func (d *dashboard) resendWebhook(w http.ResponseWriter, r *http.Request) {
	e, err := d.deps.Webhooks.Endpoint(r.Context(), r.PathValue("id"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if _, err := d.deps.Webhooks.Resend(r.Context(), strconv.FormatInt(e.ID, 10), r.PostFormValue("eventId")); err != nil {
		d.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/webhooks/"+strconv.FormatInt(e.ID, 10)+"?notice=hook-resent", http.StatusSeeOther)
}

// webhookPage lists an endpoint's deliveries, newest first.
func (d *dashboard) webhookPage(w http.ResponseWriter, r *http.Request) {
	e, err := d.deps.Webhooks.Endpoint(r.Context(), r.PathValue("id"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	id := strconv.FormatInt(e.ID, 10)
	page, err := d.deps.Webhooks.Deliveries(r.Context(), id, 50, r.URL.Query().Get("after"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v := components.WebhookView{Endpoint: e, Deliveries: page}
	if page.HasNext && len(page.Deliveries) > 0 {
		v.Next = strconv.FormatInt(page.Deliveries[len(page.Deliveries)-1].ID, 10)
	}
	d.render(w, r, http.StatusOK, components.WebhookPage(d.page(r, "Webhook deliveries", "webhooks"), v))
}
