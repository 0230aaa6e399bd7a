// Package webhook delivers the outbox's events (webhook_event, written in
// the transaction of each change) to the endpoints admins registered:
// numbered and fanned out after their commit, leased to one worker at a
// time across instances, signed, sent with a timeout, retried with backoff
// and, for an endpoint that fails for the whole retry window, disabled.
// docs/webhooks.md is the reference.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>" with a
// v1 per secret that signs (two for a day after a rotation).
const SignatureHeader = "Voucherd-Signature"

// EventIDHeader carries the event's id (evt_...), as the body does.
const EventIDHeader = "Voucherd-Event-Id"

// Sign returns the signature header's value for body sent at t: the HMAC-
// SHA256 of "<t>.<body>" under each secret (the secret string's bytes, its
// whsec_ prefix included), in the order given.
func Sign(t time.Time, body []byte, secrets ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(ts)
	for _, s := range secrets {
		mac := hmac.New(sha256.New, []byte(s))
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac.Sum(nil)))
	}
	return b.String()
}
