package graph

import (
	"errors"
	"strconv"

	"voucherd/graph/model"
	"voucherd/internal/voucher"
)

// errNoWebhooks answers the webhook operations of a handler built without
// them (shown as an internal error, logged).
var errNoWebhooks = errors.New("graph: the webhook operations need Options.Webhooks")

func newWebhookEndpoint(in model.CreateWebhookEndpointInput) voucher.NewWebhookEndpoint {
	return voucher.NewWebhookEndpoint{URL: in.URL, Events: in.Events, Description: in.Description}
}

func webhookChange(in model.UpdateWebhookEndpointInput) voucher.WebhookChange {
	return voucher.WebhookChange{URL: in.URL, Events: in.Events, Enabled: in.Enabled, Description: in.Description}
}

func toWebhookEndpoint(e voucher.WebhookEndpoint) *model.WebhookEndpoint {
	return &model.WebhookEndpoint{
		ID: strconv.FormatInt(e.ID, 10), URL: e.URL, Events: e.Events, Description: e.Description,
		Enabled: e.Enabled, DisabledReason: e.DisabledReason, CreatedAt: e.CreatedAt,
	}
}

func toWebhookDelivery(d voucher.WebhookDelivery) *model.WebhookDelivery {
	return &model.WebhookDelivery{
		ID: strconv.FormatInt(d.ID, 10), EventID: voucher.WebhookEventID(d.EventID), EventType: d.EventType,
		Status: string(d.Status), Attempts: d.Attempts, LastStatusCode: d.LastStatusCode,
		LastAttemptAt: d.LastAttemptAt, NextAttemptAt: d.NextAttemptAt,
	}
}

func toWebhookDeliveryConnection(p voucher.WebhookDeliveryPage) *model.WebhookDeliveryConnection {
	c := &model.WebhookDeliveryConnection{Edges: []*model.WebhookDeliveryEdge{}, PageInfo: &model.PageInfo{HasNextPage: p.HasNext}}
	for _, d := range p.Deliveries {
		cursor := strconv.FormatInt(d.ID, 10)
		c.Edges = append(c.Edges, &model.WebhookDeliveryEdge{Node: toWebhookDelivery(d), Cursor: cursor})
		c.PageInfo.EndCursor = &cursor
	}
	return c
}

// webhookEndpointPayloadError is a refusal as the payload's error; FORBIDDEN
// and faults are GraphQL errors.
func webhookEndpointPayloadError(err error) (*model.WebhookEndpointPayload, error) {
	verr, err := payloadError(err)
	if err != nil {
		return nil, err
	}
	return &model.WebhookEndpointPayload{Error: verr}, nil
}
