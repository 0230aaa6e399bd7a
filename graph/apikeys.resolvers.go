package graph

import (
	"context"
	"voucherd/graph/model"
)

// CreateAPIKey is the resolver for the createApiKey field.
func (r *mutationResolver) CreateAPIKey(ctx context.Context, input model.CreateAPIKeyInput) (*model.APIKeyPayload, error) {
	if r.ApiKeys == nil {
		return nil, errNoApiKeys
	}
	created, err := r.ApiKeys.Create(ctx, newApiKey(input))
	if err != nil {
		return apiKeyPayloadError(err)
	}
	return &model.APIKeyPayload{APIKey: toApiKey(created.Key), Secret: &created.Secret}, nil
}

// RevokeAPIKey is the resolver for the revokeApiKey field.
func (r *mutationResolver) RevokeAPIKey(ctx context.Context, id string) (*model.APIKeyPayload, error) {
	if r.ApiKeys == nil {
		return nil, errNoApiKeys
	}
	k, err := r.ApiKeys.Revoke(ctx, id)
	if err != nil {
		return apiKeyPayloadError(err)
	}
	return &model.APIKeyPayload{APIKey: toApiKey(k)}, nil
}

// APIKeys is the resolver for the apiKeys field.
func (r *queryResolver) APIKeys(ctx context.Context) ([]*model.APIKey, error) {
	if r.ApiKeys == nil {
		return nil, errNoApiKeys
	}
	keys, err := r.ApiKeys.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*model.APIKey, len(keys))
	for i, k := range keys {
		out[i] = toApiKey(k)
	}
	return out, nil
}
