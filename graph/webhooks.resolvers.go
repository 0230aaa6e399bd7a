package graph

import (
	"context"
	"voucherd/graph/model"
)

// CreateWebhookEndpoint is the resolver for the createWebhookEndpoint field.
func (r *mutationResolver) CreateWebhookEndpoint(ctx context.Context, input model.CreateWebhookEndpointInput) (*model.WebhookEndpointPayload, error) {
	if r.Webhooks == nil {
		return nil, errNoWebhooks
	}
	created, err := r.Webhooks.Create(ctx, newWebhookEndpoint(input))
	if err != nil {
		return webhookEndpointPayloadError(err)
	}
	return &model.WebhookEndpointPayload{Endpoint: toWebhookEndpoint(created.Endpoint), Secret: &created.Secret}, nil
}

// UpdateWebhookEndpoint is the resolver for the updateWebhookEndpoint field.
func (r *mutationResolver) UpdateWebhookEndpoint(ctx context.Context, input model.UpdateWebhookEndpointInput) (*model.WebhookEndpointPayload, error) {
	if r.Webhooks == nil {
		return nil, errNoWebhooks
	}
	e, err := r.Webhooks.Update(ctx, input.ID, webhookChange(input))
	if err != nil {
		return webhookEndpointPayloadError(err)
	}
	return &model.WebhookEndpointPayload{Endpoint: toWebhookEndpoint(e)}, nil
}

// RotateWebhookSecret is the resolver for the rotateWebhookSecret field.
func (r *mutationResolver) RotateWebhookSecret(ctx context.Context, id string) (*model.WebhookEndpointPayload, error) {
	if r.Webhooks == nil {
		return nil, errNoWebhooks
	}
	rotated, err := r.Webhooks.Rotate(ctx, id)
	if err != nil {
		return webhookEndpointPayloadError(err)
	}
	return &model.WebhookEndpointPayload{Endpoint: toWebhookEndpoint(rotated.Endpoint), Secret: &rotated.Secret}, nil
}

// DeleteWebhookEndpoint is the resolver for the deleteWebhookEndpoint field.
func (r *mutationResolver) DeleteWebhookEndpoint(ctx context.Context, id string) (*model.WebhookEndpointPayload, error) {
	if r.Webhooks == nil {
		return nil, errNoWebhooks
	}
	e, err := r.Webhooks.Delete(ctx, id)
	if err != nil {
		return webhookEndpointPayloadError(err)
	}
	return &model.WebhookEndpointPayload{Endpoint: toWebhookEndpoint(e)}, nil
}

// ResendWebhookEvent is the resolver for the resendWebhookEvent field.
func (r *mutationResolver) ResendWebhookEvent(ctx context.Context, endpointID string, eventID string) (*model.WebhookDeliveryPayload, error) {
	if r.Webhooks == nil {
		return nil, errNoWebhooks
	}
	d, err := r.Webhooks.Resend(ctx, endpointID, eventID)
	if err != nil {
		verr, err := payloadError(err)
		if err != nil {
			return nil, err
		}
		return &model.WebhookDeliveryPayload{Error: verr}, nil
	}
	return &model.WebhookDeliveryPayload{Delivery: toWebhookDelivery(d)}, nil
}

// WebhookEndpoints is the resolver for the webhookEndpoints field.
func (r *queryResolver) WebhookEndpoints(ctx context.Context) ([]*model.WebhookEndpoint, error) {
	if r.Webhooks == nil {
		return nil, errNoWebhooks
	}
	es, err := r.Webhooks.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*model.WebhookEndpoint, len(es))
	for i, e := range es {
		out[i] = toWebhookEndpoint(e)
	}
	return out, nil
}

// WebhookDeliveries is the resolver for the webhookDeliveries field.
func (r *queryResolver) WebhookDeliveries(ctx context.Context, endpointID string, first *int, after *string) (*model.WebhookDeliveryConnection, error) {
	if r.Webhooks == nil {
		return nil, errNoWebhooks
	}
	n := 50
	if first != nil {
		n = *first
	}
	var cursor string
	if after != nil {
		cursor = *after
	}
	page, err := r.Webhooks.Deliveries(ctx, endpointID, n, cursor)
	if err != nil {
		return nil, err
	}
	return toWebhookDeliveryConnection(page), nil
}
