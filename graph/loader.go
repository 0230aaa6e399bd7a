package graph

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"

	"voucherd/graph/model"
)

// campaignLoader reads each campaign once per operation, however many of
// its codes a page of vouchers holds: a page of 200 codes of one campaign
// is one read, not 200. gqlgen resolves the nodes' fields concurrently, so
// the first reader of a campaign reads it and the others wait for it.
type campaignLoader struct {
	mu    sync.Mutex
	calls map[int64]*campaignCall
}

type campaignCall struct {
	done     chan struct{}
	campaign *model.Campaign
	err      error
}

type campaignLoaderKey struct{}

// load returns the campaign id, reading it with read at most once.
func (l *campaignLoader) load(id int64, read func() (*model.Campaign, error)) (*model.Campaign, error) {
	l.mu.Lock()
	call, ok := l.calls[id]
	if !ok {
		call = &campaignCall{done: make(chan struct{})}
		l.calls[id] = call
	}
	l.mu.Unlock()
	if ok {
		<-call.done
		return call.campaign, call.err
	}
	defer close(call.done)
	call.campaign, call.err = read()
	return call.campaign, call.err
}

// loadCampaign reads a campaign through the operation's loader, or directly
// outside an operation.
func loadCampaign(ctx context.Context, id int64, read func() (*model.Campaign, error)) (*model.Campaign, error) {
	if l, ok := ctx.Value(campaignLoaderKey{}).(*campaignLoader); ok {
		return l.load(id, read)
	}
	return read()
}

// loaders is the handler extension that gives each operation its loaders.
type loaders struct{}

var _ interface {
	graphql.OperationInterceptor
	graphql.HandlerExtension
} = loaders{}

func (loaders) ExtensionName() string                   { return "Loaders" }
func (loaders) Validate(graphql.ExecutableSchema) error { return nil }

func (loaders) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	return next(context.WithValue(ctx, campaignLoaderKey{}, &campaignLoader{calls: map[int64]*campaignCall{}}))
}
