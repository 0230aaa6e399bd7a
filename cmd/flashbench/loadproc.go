package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
	"voucherd/lua"
)

// `flashbench load` is the load generator: its own OS process, so it shares
// no Go scheduler (and no garbage collector) with the server it measures. It
// reads a loadSpec as JSON on stdin, dials its connections, drives one
// bounded load (requests and time), draws the progress bar on stderr and
// writes the loadResult as JSON on stdout.

// loadSpec is one load phase, as the orchestrator asks for it.
type loadSpec struct {
	Name        string        `json:"name"`
	Kind        string        `json:"kind"`   // "http" or "evalsha"
	Client      string        `json:"client"` // raw or nethttp (http)
	Base        string        `json:"base"`   // loopback URL of the server (http)
	Path        string        `json:"path"`
	Token       string        `json:"token,omitempty"`
	Body        string        `json:"body"`               // rest, graphql, check or campaign (http)
	Codes       []string      `json:"codes,omitempty"`    // campaign: the codes, one picked per order
	Code        string        `json:"code,omitempty"`     // the voucher, in a GraphQL body
	Classify    string        `json:"classify,omitempty"` // rest, graphql or ceiling (http)
	OrderPrefix string        `json:"orderPrefix"`
	Requests    int64         `json:"requests"`
	Concurrency int           `json:"concurrency"`
	MaxTime     time.Duration `json:"maxTimeNs"`
	RetryShare  float64       `json:"retryShare"`
	RedisURL    string        `json:"redisURL,omitempty"` // evalsha
	Keys        []string      `json:"keys,omitempty"`     // evalsha: the throwaway gate's keys
	CPU         cpuGroups     `json:"cpu"`
	CPUProfile  string        `json:"cpuProfile,omitempty"` // write this process's CPU profile here
	// Rate, Duration and Drain make it an open-loop load (openloop.go):
	// Rate requests a second for Duration, the late ones awaited for at
	// most Drain more.
	Rate     float64       `json:"rate,omitempty"`
	Duration time.Duration `json:"durationNs,omitempty"`
	Drain    time.Duration `json:"drainNs,omitempty"`
	// ThenRate for ThenDuration follow the Duration (a recovery phase: the
	// load falls), its latencies also kept per RecoveryWindow.
	ThenRate     float64       `json:"thenRate,omitempty"`
	ThenDuration time.Duration `json:"thenDurationNs,omitempty"`
}

func (s loadSpec) validate() error {
	var errs []error
	if s.Requests < 1 || s.Concurrency < 1 || s.MaxTime <= 0 {
		errs = append(errs, errors.New("requests, concurrency and maxTime must be positive"))
	}
	if s.RetryShare < 0 || s.RetryShare >= 1 {
		errs = append(errs, errors.New("retryShare must be in [0, 1)"))
	}
	if s.Rate < 0 || s.Rate > 0 && (s.Duration <= 0 || s.Drain <= 0 || s.Kind != "http") {
		errs = append(errs, errors.New("an open-loop load needs a positive rate, duration and drain, over http"))
	}
	if s.ThenRate < 0 || (s.ThenRate > 0) != (s.ThenDuration > 0) || s.ThenRate > 0 && s.Rate <= 0 {
		errs = append(errs, errors.New("a recovery phase needs a rate and a duration, after an open-loop phase"))
	}
	switch s.Kind {
	case "http":
		if err := requireLoopbackURL(s.Base); err != nil {
			errs = append(errs, err)
		}
		if s.Client != "raw" && s.Client != "nethttp" {
			errs = append(errs, errors.New("client must be raw or nethttp"))
		}
		if s.Body != "rest" && s.Body != "graphql" && s.Body != "check" && s.Body != "campaign" && s.Body != "campaign-check" {
			errs = append(errs, errors.New("body must be rest, graphql, check, campaign or campaign-check"))
		}
		if s.campaignLoad() && (len(s.Codes) == 0 || s.Client != "raw") {
			errs = append(errs, errors.New("a campaign load needs its codes and the raw client"))
		}
		if classifier(s.Classify) == nil {
			errs = append(errs, errors.New("classify must be rest, graphql, check or ceiling"))
		}
	case "evalsha":
		if len(s.Keys) != 5 || s.RedisURL == "" {
			errs = append(errs, errors.New("evalsha needs redisURL and the gate's 5 keys"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown kind %q", s.Kind))
	}
	return errors.Join(errs...)
}

func classifier(name string) func(int, []byte) (string, bool) {
	switch name {
	case "rest":
		return classifyREST
	case "graphql":
		return classifyGraphQL
	case "check":
		return classifyCheck
	case "ceiling":
		return classifyCeiling
	}
	return nil
}

// loadMain is `flashbench load`.
func loadMain(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	var spec loadSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		return fmt.Errorf("load: the spec on stdin: %w", err)
	}
	if err := spec.validate(); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if spec.Rate > 0 {
		return openLoadMain(ctx, spec, stdout, stderr)
	}
	newAttempt, closeAll, err := spec.attempts(ctx)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer closeAll()
	l := load{name: spec.Name, requests: spec.Requests, concurrency: spec.Concurrency, maxTime: spec.MaxTime, retryShare: spec.RetryShare, newAttempt: newAttempt}
	var lr *loadResult
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		lr = l.run(ctx, stderr, spec.CPU)
		pprof.StopCPUProfile()
	} else {
		lr = l.run(ctx, stderr, spec.CPU)
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	if err := json.NewEncoder(w).Encode(lr); err != nil {
		return err
	}
	return w.Flush()
}

// campaignLoad: the requests name a random code of a campaign each.
func (s loadSpec) campaignLoad() bool { return s.Body == "campaign" || s.Body == "campaign-check" }

// attempts makes the workers' attempt factory for the spec.
func (s loadSpec) attempts(ctx context.Context) (func() (attempt, func()), func(), error) {
	if s.Kind == "evalsha" {
		return s.evalshaAttempts(ctx)
	}
	build := restBody(s.OrderPrefix)
	switch s.Body {
	case "graphql":
		build = graphqlBody(s.Code, s.OrderPrefix)
	case "check":
		build = checkBody
	}
	classify := classifier(s.Classify)
	if s.Rate > 0 {
		// The open-loop rows count every HTTP 503 (a refusal for load, or
		// a dependency that did not answer) apart from the answers.
		inner := classify
		classify = func(status int, body []byte) (string, bool) {
			if status == http.StatusServiceUnavailable {
				return "HTTP_503", false
			}
			return inner(status, body)
		}
	}
	if s.campaignLoad() {
		// Each order j names one code of the campaign, the same one for
		// its retries: REST's code is in the path.
		codes, n := s.Codes, int64(len(s.Codes))
		suffix, body := "/reservations", restBody(s.OrderPrefix)
		if s.Body == "campaign-check" {
			suffix, body = "/checks", checkBody
		}
		pathOf := func(j int64) string {
			// A multiplicative hash spreads consecutive orders over the
			// codes; j < 2^31 (the requests), so the product fits.
			return s.Path + codes[(j%(1<<31))*2654435761%n] + suffix
		}
		return rawAttemptPaths(s.Base, s.Path, pathOf, s.Token, body, classify), func() {}, nil
	}
	if s.Client == "nethttp" {
		client := newLoadClient(s.Concurrency)
		// Open the C connections before the clock starts, as the raw
		// client does when it dials.
		warmConnections(ctx, client, s.Base, s.Concurrency)
		return httpAttempt(client, s.Base+s.Path, s.Token, build, classify), client.CloseIdleConnections, nil
	}
	return rawAttempt(s.Base, s.Path, s.Token, build, classify), func() {}, nil
}

// evalshaAttempts runs lua/reserve.lua on the throwaway gate's keys through
// the server's go-redis client settings (gate.NewClient): Redis's ceiling
// for the gate, without HTTP.
func (s loadSpec) evalshaAttempts(ctx context.Context) (func() (attempt, func()), func(), error) {
	rdb, err := gate.NewClient(s.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	script := redis.NewScript(lua.Reserve)
	if err := script.Load(ctx, rdb).Err(); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis: %w", err)
	}
	keys := s.Keys
	newAttempt := func() (attempt, func()) {
		var order []byte
		return func(j int64) (string, bool, error) {
			order = strconv.AppendInt(append(order[:0], s.OrderPrefix...), j, 10)
			// reserve.lua's ARGV: one reserve, no kafka-mode times, a
			// discount of 1000 (a throwaway gate without a budget), no
			// campaign code, no period limits, no discount kept (no
			// appliesTo). (The server batches a voucher's reserves of
			// the moment into one call; this row is a call a reserve.)
			v, err := script.Run(ctx, rdb, keys, 1, string(order), customerBase+j+1, orderAmount, 1, "", "", 1000, "", "", "").StringSlice()
			if err == nil && len(v) != 1 {
				err = fmt.Errorf("reserve.lua answered %q", v)
			}
			if err != nil {
				return "REDIS_ERROR", false, err
			}
			out := intern([]byte(v[0]))
			return out, out == "ADMITTED" || out == "DUPLICATE", nil
		}, func() {}
	}
	return newAttempt, func() { _ = rdb.Close() }, nil
}

// warmConnections opens the client's C connections before a measurement, so
// no scenario pays for the dials.
func warmConnections(ctx context.Context, client *http.Client, base string, c int) {
	done := make(chan struct{}, c) // a dial that failed only costs its share of the warm-up
	for range c {
		go func() {
			for range 4 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
				resp, err := client.Do(req)
				if err != nil {
					done <- struct{}{}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- struct{}{}
		}()
	}
	for range c {
		<-done
	}
}
