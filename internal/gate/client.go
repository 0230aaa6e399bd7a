package gate

import (
	"cmp"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The client's defaults, for a flash sale: a gate call is one sub-millisecond
// script, so a Redis that takes longer than this is failing, and the request
// must become UNAVAILABLE at once rather than hold a connection and a
// customer. Settings given in the URL's query win.
const (
	dialTimeout  = time.Second
	readTimeout  = 500 * time.Millisecond
	writeTimeout = 500 * time.Millisecond
	poolTimeout  = time.Second // waiting for a free connection is also failing
	// maxRetries is one retry, for a connection that died under us (a
	// restarted Redis). Retrying a script is safe: each is idempotent by
	// orderId, so a reserve whose answer was lost answers DUPLICATE.
	maxRetries = 1
)

// NewClient opens a client for REDIS_URL, one of:
//
//	redis://[user:password@]host:port[/db]          a single Redis
//	rediss://...                                     the same over TLS
//	redis+cluster://[user:password@]h1:p1,h2:p2,...  a Redis Cluster (seed nodes)
//	rediss+cluster://...                             the same over TLS
//	redis://h1:p1?addr=h2:p2&addr=h3:p3              a Redis Cluster, go-redis's form
//
// with go-redis's query options (read_timeout=1s, pool_size=200, ...).
func NewClient(redisURL string) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(redisURL, "://")
	if !ok {
		return nil, fmt.Errorf("gate: REDIS_URL %q: want redis://host:port/db or redis+cluster://host1:port1,host2:port2", redisURL)
	}
	if base, isCluster := strings.CutSuffix(scheme, "+cluster"); isCluster {
		clusterURL, err := goRedisClusterURL(base, rest)
		if err != nil {
			return nil, fmt.Errorf("gate: REDIS_URL: %w", err)
		}
		return newClusterClient(clusterURL)
	}
	if u, err := url.Parse(redisURL); err == nil && u.Query().Has("addr") {
		return newClusterClient(redisURL)
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, fmt.Errorf("gate: REDIS_URL: %w", err)
	}
	opt.DialTimeout = cmp.Or(opt.DialTimeout, dialTimeout)
	opt.ReadTimeout = cmp.Or(opt.ReadTimeout, readTimeout)
	opt.WriteTimeout = cmp.Or(opt.WriteTimeout, writeTimeout)
	opt.PoolTimeout = cmp.Or(opt.PoolTimeout, poolTimeout)
	opt.MaxRetries = cmp.Or(opt.MaxRetries, maxRetries)
	opt.PoolSize = cmp.Or(opt.PoolSize, 10*runtime.GOMAXPROCS(0))
	opt.ContextTimeoutEnabled = true
	// Pipelines, the gate's auto-pipelined scripts among them, share the
	// pool above instead of go-redis's dedicated pipeline pool: when Redis
	// stalls, a new connection of that pool times out in its handshake and
	// the pipeline then tries a connection of this pool too, doubling the
	// time before the request fails (and so becomes UNAVAILABLE).
	opt.PipelinePoolSize = cmp.Or(opt.PipelinePoolSize, -1)
	return redis.NewClient(opt), nil
}

func newClusterClient(clusterURL string) (redis.UniversalClient, error) {
	opt, err := redis.ParseClusterURL(clusterURL)
	if err != nil {
		return nil, fmt.Errorf("gate: REDIS_URL: %w", err)
	}
	opt.DialTimeout = cmp.Or(opt.DialTimeout, dialTimeout)
	opt.ReadTimeout = cmp.Or(opt.ReadTimeout, readTimeout)
	opt.WriteTimeout = cmp.Or(opt.WriteTimeout, writeTimeout)
	opt.PoolTimeout = cmp.Or(opt.PoolTimeout, poolTimeout)
	opt.MaxRetries = cmp.Or(opt.MaxRetries, maxRetries)
	// PoolSize is per node; a voucher's traffic lands on its slot's node.
	opt.PoolSize = cmp.Or(opt.PoolSize, 10*runtime.GOMAXPROCS(0))
	opt.ContextTimeoutEnabled = true
	return redis.NewClusterClient(opt), nil
}

// goRedisClusterURL rewrites "user:pw@h1:p1,h2:p2/0?q" (after "redis+cluster://")
// into go-redis's "redis://user:pw@h1:p1?q&addr=h2:p2".
func goRedisClusterURL(scheme, rest string) (string, error) {
	authority, tail, _ := strings.Cut(rest, "?")
	authority, db, _ := strings.Cut(authority, "/")
	if db != "" && db != "0" {
		return "", fmt.Errorf("a Redis Cluster has only db 0, not %q", db)
	}
	userinfo, hosts, hasUser := strings.Cut(authority, "@")
	if !hasUser {
		userinfo, hosts = "", authority
	}
	addrs := strings.Split(hosts, ",")
	q, err := url.ParseQuery(tail)
	if err != nil {
		return "", err
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	u := scheme + "://"
	if hasUser {
		u += userinfo + "@"
	}
	u += addrs[0]
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u, nil
}
