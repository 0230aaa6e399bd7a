package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load is a closed loop: C workers, each sending its next request as soon
// as the previous answer is read (wrk's model), until N requests were sent or
// the scenario's time is up. Request i stands for order j: j == i for a fresh
// request, j < i for a retry (a uniformly chosen earlier fresh request, maybe
// still in flight), which repeats order j's customer, orderId and amount.

// attempt sends the request of order j and classifies the answer; outcome is
// an interned string (no allocation per request), ok means "the order holds
// a reservation".
type attempt func(j int64) (outcome string, ok bool, err error)

// load is one load phase.
type load struct {
	name        string
	requests    int64
	concurrency int
	maxTime     time.Duration
	retryShare  float64
	// newAttempt makes one worker's attempt, so each reuses its own buffers
	// and connection, and the function that frees them; it is called for
	// every worker before the clock starts (dials are not measured).
	newAttempt func() (attempt, func())
}

// loadResult is what a load phase measured; the load process writes it as
// JSON on its stdout.
type loadResult struct {
	Requests  int64         `json:"requests"`
	Elapsed   time.Duration `json:"elapsedNs"`
	Latencies []int64       `json:"latenciesNs"` // sorted
	// Outcomes counts answers by outcome; a retry's are prefixed "retry ".
	Outcomes map[string]int64 `json:"outcomes"`
	// SuccessOrders marks every order j answered with success at least
	// once; on the wire it is Won, the list of those j.
	SuccessOrders []bool  `json:"-"`
	Won           []int64 `json:"won"`
	// Successes counts success answers (retries of a winner included).
	Successes int64 `json:"successes"`
	// SuccessTimes are when the success answers of fresh requests arrived,
	// since the start, sorted.
	SuccessTimes []time.Duration `json:"successTimesNs"`
	// Timeline is the completions in each timelineStep since the start.
	Timeline   []int64 `json:"timeline"`
	FirstError string  `json:"firstError,omitempty"`
	Stopped    bool    `json:"stopped"` // stopped by max-time before all requests were sent
	CPU        cpuUse  `json:"cpu"`
}

// UniqueSuccesses is the number of distinct orders answered with success.
func (r *loadResult) UniqueSuccesses() int64 {
	var n int64
	for _, ok := range r.SuccessOrders {
		if ok {
			n++
		}
	}
	return n
}

type workerResult struct {
	latencies []int64
	outcomes  map[string]int64
	successes []int64
	successAt []time.Duration
	timeline  []int64 // completions per timelineStep since the start
	firstErr  error
}

// timelineStep is the resolution of the throughput timeline.
const timelineStep = 100 * time.Millisecond

// run drives the load, shows a progress bar on progress and measures the
// CPU of the processes in groups.
func (l load) run(ctx context.Context, progress io.Writer, groups cpuGroups) *loadResult {
	var next, done atomic.Int64
	var stop atomic.Bool
	results := make([]workerResult, l.concurrency)
	attempts := make([]attempt, l.concurrency)
	for w := range attempts {
		var release func()
		attempts[w], release = l.newAttempt()
		defer release()
	}
	cpuBefore := sampleCPU(groups)
	bar := startProgress(progress, l.name, l.requests, &done)
	timer := time.AfterFunc(l.maxTime, func() { stop.Store(true) })
	ctxDone := context.AfterFunc(ctx, func() { stop.Store(true) })
	start := time.Now()
	var wg sync.WaitGroup
	for w := range l.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[w] = l.work(attempts[w], start, &next, &done, &stop, uint64(w))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := sampleCPU(groups).since(cpuBefore)
	timer.Stop()
	ctxDone()
	bar.finish()

	res := &loadResult{Elapsed: elapsed, Outcomes: map[string]int64{}, SuccessOrders: make([]bool, l.requests), Stopped: stop.Load() && next.Load() < l.requests, CPU: cpu}
	var n int
	for _, w := range results {
		n += len(w.latencies)
	}
	res.Latencies = make([]int64, 0, n)
	for _, w := range results {
		res.Latencies = append(res.Latencies, w.latencies...)
		for k, v := range w.outcomes {
			res.Outcomes[k] += v
		}
		for _, j := range w.successes {
			if !res.SuccessOrders[j] {
				res.Won = append(res.Won, j)
			}
			res.SuccessOrders[j] = true
		}
		res.Successes += int64(len(w.successes))
		res.SuccessTimes = append(res.SuccessTimes, w.successAt...)
		for i, n := range w.timeline {
			for len(res.Timeline) <= i {
				res.Timeline = append(res.Timeline, 0)
			}
			res.Timeline[i] += n
		}
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
	}
	res.Requests = int64(len(res.Latencies))
	slices.Sort(res.Latencies)
	slices.Sort(res.SuccessTimes)
	slices.Sort(res.Won)
	return res
}

func (l load) work(do attempt, start time.Time, next, done *atomic.Int64, stop *atomic.Bool, seed uint64) workerResult {
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	r := workerResult{
		latencies: make([]int64, 0, l.requests/int64(l.concurrency)+16),
		outcomes:  map[string]int64{},
	}
	for !stop.Load() {
		i := next.Add(1) - 1
		if i >= l.requests {
			break
		}
		j, retry := i, false
		if l.isRetry(i) {
			j, retry = l.freshBefore(rng.Int64N(i)), true
		}
		t0 := time.Now()
		outcome, ok, err := do(j)
		t1 := time.Now()
		r.latencies = append(r.latencies, int64(t1.Sub(t0)))
		step := int(t1.Sub(start) / timelineStep)
		for len(r.timeline) <= step {
			r.timeline = append(r.timeline, 0)
		}
		r.timeline[step]++
		done.Add(1)
		if err != nil && r.firstErr == nil {
			r.firstErr = err
		}
		if retry {
			outcome = retryOutcome(outcome)
		}
		r.outcomes[outcome]++
		if ok {
			r.successes = append(r.successes, j)
			if !retry {
				r.successAt = append(r.successAt, t1.Sub(start))
			}
		}
	}
	return r
}

// isRetry decides, the same way every time, whether request i repeats an
// earlier order (request 0 never does).
func (l load) isRetry(i int64) bool {
	if i == 0 || l.retryShare <= 0 {
		return false
	}
	return float64(splitmix64(uint64(i))>>11)/(1<<53) < l.retryShare
}

// freshBefore is the nearest request at or before j that sent its own
// order, so a retry always repeats an order that was sent before it.
func (l load) freshBefore(j int64) int64 {
	for l.isRetry(j) {
		j--
	}
	return j
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// percentile reads the q-quantile (0..1) of sorted nanoseconds, nearest rank.
func percentile(sorted []int64, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return time.Duration(sorted[max(0, min(i, len(sorted)-1))])
}

// newLoadClient is the one HTTP client of every scenario: keep-alive
// connections for all C workers, no compression, no client timeout timer
// (ResponseHeaderTimeout bounds a stuck server instead).
func newLoadClient(concurrency int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          4 * concurrency,
		MaxIdleConnsPerHost:   2 * concurrency,
		IdleConnTimeout:       2 * time.Minute,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}}
}

// reusedBody is a request body the worker refills for every request.
type reusedBody struct{ bytes.Reader }

func (*reusedBody) Close() error { return nil }

// httpAttempt returns an attempt that POSTs build(j) to url and classifies
// the answer; the request, its body and the response buffer are reused.
func httpAttempt(client *http.Client, url, token string, build func(dst []byte, j int64) []byte, classify func(status int, body []byte) (string, bool)) func() (attempt, func()) {
	return func() (attempt, func()) {
		req, err := http.NewRequest(http.MethodPost, url, nil)
		if err != nil {
			panic(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		body := &reusedBody{}
		var payload, answer []byte
		return func(j int64) (string, bool, error) {
			payload = build(payload[:0], j)
			body.Reset(payload)
			req.Body = body
			req.ContentLength = int64(len(payload))
			resp, err := client.Do(req)
			if err != nil {
				return "TRANSPORT_ERROR", false, err
			}
			answer, err = readAll(answer[:0], resp.Body)
			resp.Body.Close()
			if err != nil {
				return "TRANSPORT_ERROR", false, err
			}
			outcome, ok := classify(resp.StatusCode, answer)
			return outcome, ok, nil
		}, func() {}
	}
}

func readAll(dst []byte, r io.Reader) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// The request bodies: order j is customer customerBase+j+1 with orderId
// prefix+j and an amount over any minimum.
const (
	customerBase = 1_000_000_000
	orderAmount  = 25000
)

func restBody(orderPrefix string) func([]byte, int64) []byte {
	return func(dst []byte, j int64) []byte {
		dst = append(dst, `{"customerId":`...)
		dst = strconv.AppendInt(dst, customerBase+j+1, 10)
		dst = append(dst, `,"orderId":"`...)
		dst = append(dst, orderPrefix...)
		dst = strconv.AppendInt(dst, j, 10)
		dst = append(dst, `","orderAmount":`...)
		dst = strconv.AppendInt(dst, orderAmount, 10)
		return append(dst, '}')
	}
}

// checkBody is a checkVoucher's REST body: the reserve's without orderId.
func checkBody(dst []byte, j int64) []byte {
	dst = append(dst, `{"customerId":`...)
	dst = strconv.AppendInt(dst, customerBase+j+1, 10)
	dst = append(dst, `,"orderAmount":`...)
	dst = strconv.AppendInt(dst, orderAmount, 10)
	return append(dst, '}')
}

// reserveMutation is the storefront's reserve over GraphQL: one operation
// text, so the server's parsed-query cache always hits.
const reserveMutation = `mutation Reserve($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { reservation { orderId status discountAmount expiresAt } error { code } } }`

func graphqlBody(code, orderPrefix string) func([]byte, int64) []byte {
	head := []byte(`{"operationName":"Reserve","query":` + strconv.Quote(reserveMutation) + `,"variables":{"input":{"code":"` + code + `","customerId":"`)
	return func(dst []byte, j int64) []byte {
		dst = append(dst, head...)
		dst = strconv.AppendInt(dst, customerBase+j+1, 10)
		dst = append(dst, `","orderId":"`...)
		dst = append(dst, orderPrefix...)
		dst = strconv.AppendInt(dst, j, 10)
		dst = append(dst, `","orderAmount":`...)
		dst = strconv.AppendInt(dst, orderAmount, 10)
		return append(dst, `}}}`...)
	}
}

// classifyREST: 201 is a reservation; a refusal names its code.
func classifyREST(status int, body []byte) (string, bool) {
	if status == http.StatusCreated {
		return "RESERVED", true
	}
	if code := jsonString(body, `"error":"`); code != nil {
		return intern(code), false
	}
	return intern([]byte("HTTP_" + strconv.Itoa(status))), false
}

// classifyGraphQL: a payload with a reservation, or its error code.
func classifyGraphQL(status int, body []byte) (string, bool) {
	if status == http.StatusOK && bytes.Contains(body, []byte(`"reservation":{`)) {
		return "RESERVED", true
	}
	if code := jsonString(body, `"code":"`); code != nil {
		return intern(code), false
	}
	if bytes.Contains(body, []byte(`"errors"`)) {
		return "GRAPHQL_ERROR", false
	}
	return intern([]byte("HTTP_" + strconv.Itoa(status))), false
}

// classifyCheck: 200 is the discount a reserve would get (nothing held, so
// never a success to count as sold); a refusal names its code.
func classifyCheck(status int, body []byte) (string, bool) {
	if status == http.StatusOK && bytes.Contains(body, []byte(`"discountAmount":`)) {
		return "DISCOUNT", false
	}
	return classifyREST(status, body)
}

// classifyCeiling: the trivial handler answers 201.
func classifyCeiling(status int, _ []byte) (string, bool) {
	if status == http.StatusCreated {
		return "OK", false
	}
	return intern([]byte("HTTP_" + strconv.Itoa(status))), false
}

// jsonString returns the string value after key, e.g. `"error":"`.
func jsonString(body []byte, key string) []byte {
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return nil
	}
	rest := body[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil
	}
	return rest[:end]
}

var (
	internMu sync.RWMutex
	interned = map[string]string{}
	retryMu  sync.RWMutex
	retried  = map[string]string{}
)

// intern returns one string per distinct outcome, so counting does not
// allocate.
func intern(b []byte) string {
	internMu.RLock()
	s, ok := interned[string(b)]
	internMu.RUnlock()
	if ok {
		return s
	}
	internMu.Lock()
	defer internMu.Unlock()
	if s, ok := interned[string(b)]; ok {
		return s
	}
	s = string(b)
	interned[s] = s
	return s
}

func retryOutcome(outcome string) string {
	retryMu.RLock()
	s, ok := retried[outcome]
	retryMu.RUnlock()
	if ok {
		return s
	}
	retryMu.Lock()
	defer retryMu.Unlock()
	s = "retry " + outcome
	retried[outcome] = s
	return s
}
