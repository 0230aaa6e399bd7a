package graph

import (
	"errors"
	"strconv"
	"strings"

	"voucherd/graph/model"
	"voucherd/internal/voucher"
)

// errNoApiKeys answers the API key operations of a handler built without
// them (shown as an internal error, logged).
var errNoApiKeys = errors.New("graph: the API key operations need Options.ApiKeys")

func newApiKey(in model.CreateAPIKeyInput) voucher.NewApiKey {
	return voucher.NewApiKey{
		Name:          in.Name,
		Role:          voucher.Role(strings.ToLower(string(in.Role))),
		ExpiresAt:     in.ExpiresAt,
		RatePerSecond: in.RatePerSecond,
		Burst:         in.Burst,
	}
}

func toApiKey(k voucher.ApiKey) *model.APIKey {
	return &model.APIKey{
		ID:            strconv.FormatInt(k.ID, 10),
		Name:          k.Name,
		Role:          model.APIKeyRole(strings.ToUpper(string(k.Role))),
		Prefix:        k.Prefix,
		CreatedAt:     k.CreatedAt,
		ExpiresAt:     k.ExpiresAt,
		RevokedAt:     k.RevokedAt,
		LastUsedAt:    k.LastUsedAt,
		RatePerSecond: k.RatePerSecond,
		Burst:         k.Burst,
	}
}

// apiKeyPayloadError is a refusal as the payload's error; FORBIDDEN and
// faults are GraphQL errors.
func apiKeyPayloadError(err error) (*model.APIKeyPayload, error) {
	verr, err := payloadError(err)
	if err != nil {
		return nil, err
	}
	return &model.APIKeyPayload{Error: verr}, nil
}
