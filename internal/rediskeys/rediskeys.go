// Package rediskeys is the Redis side of API keys: the message that tells
// every server a key was created or revoked, and the rates that keys share
// over every server.
package rediskeys

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"voucherd/internal/voucher"
)

// channel carries no payload of use: a message only says "read the keys
// again", so a message from a server over another database sharing the
// Redis costs a read, never a wrong answer.
const channel = "voucherd:api-keys:changed"

// Changes publishes and listens for key changes.
type Changes struct {
	rdb redis.UniversalClient
}

var _ voucher.KeyChanges = Changes{}

// NewChanges returns key changes over a Redis client.
func NewChanges(rdb redis.UniversalClient) Changes { return Changes{rdb: rdb} }

// Publish tells every server, this one included, that the keys changed.
func (c Changes) Publish(ctx context.Context) error {
	if err := c.rdb.Publish(ctx, channel, "changed").Err(); err != nil {
		return fmt.Errorf("api keys: publish a change: %w", err)
	}
	return nil
}

// Listen calls changed for every change published and whenever the
// subscription (re)starts, when messages may have been missed, until ctx
// ends.
func (c Changes) Listen(ctx context.Context, changed func()) {
	sub := c.rdb.Subscribe(ctx, channel)
	defer func() { _ = sub.Close() }()
	ch := sub.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m.(type) {
			case *redis.Subscription, *redis.Message:
				changed()
			}
		}
	}
}

// Limiter is GCRA in Redis (go-redis/redis_rate): one budget per key over
// every server.
type Limiter struct {
	l *redis_rate.Limiter
}

var _ voucher.RateLimiter = Limiter{}

// NewLimiter returns a limiter over a Redis client.
func NewLimiter(rdb redis.UniversalClient) Limiter {
	return Limiter{l: redis_rate.NewLimiter(rdb)}
}

// Allow counts one request under key: over ratePerSecond plus burst, it
// says how long until the next is allowed.
func (l Limiter) Allow(ctx context.Context, key string, ratePerSecond, burst int) (time.Duration, error) {
	res, err := l.l.Allow(ctx, "voucherd:"+key, redis_rate.Limit{Rate: ratePerSecond, Burst: burst, Period: time.Second})
	if err != nil {
		return 0, fmt.Errorf("api keys: rate: %w", err)
	}
	if res.Allowed > 0 {
		return 0, nil
	}
	if res.RetryAfter <= 0 {
		return time.Millisecond, nil
	}
	return res.RetryAfter, nil
}
