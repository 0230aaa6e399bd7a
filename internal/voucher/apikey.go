package voucher

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// RateLimited is a request over its API key's rate: REST 429 with
// Retry-After, GraphQL an error with this code. It is never payload data.
const RateLimited ErrorCode = "RATE_LIMITED"

// ApiKeyPrefix starts every API key; what follows is 43 characters of 32
// random bytes (crypto/rand, URL-safe base64).
const ApiKeyPrefix = "vk_live_"

// apiKeyShownChars is how many random characters of a key its prefix keeps
// for people to recognise it: 36 bits, too few to guess the rest by.
const apiKeyShownChars = 6

// MaxApiKeyName bounds a key's name: it is refused at this length or more.
const MaxApiKeyName = 200

// maxApiKeyRate bounds ratePerSecond and burst: far above any real caller,
// far below anything that overflows.
const maxApiKeyRate = 1_000_000

// ApiKeyRoles are the roles a key may have: the bearer tokens' roles.
var ApiKeyRoles = []Role{RoleStorefront, RoleAdmin}

// ApiKey is a bearer credential an admin made. Only the SHA-256 of the
// secret is kept; the secret itself is shown once, when it is made.
type ApiKey struct {
	ID     int64
	Name   string
	Role   Role
	Prefix string
	// Hash is the SHA-256 of the whole key.
	Hash       []byte
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
	// RatePerSecond is the key's requests a second over all servers; nil:
	// no limit. Burst is how many above it may come at once.
	RatePerSecond *int
	Burst         *int
	CreatedBy     string
}

// Revoked reports whether an admin revoked the key.
func (k ApiKey) Revoked() bool { return k.RevokedAt != nil }

// ExpiredAt reports whether the key has expired at t.
func (k ApiKey) ExpiredAt(t time.Time) bool { return k.ExpiresAt != nil && !t.Before(*k.ExpiresAt) }

// NewApiKey is what an admin gives to make a key.
type NewApiKey struct {
	Name          string
	Role          Role
	ExpiresAt     *time.Time
	RatePerSecond *int
	Burst         *int
}

// Validate returns INVALID_INPUT naming the first field at fault; now is
// the clock an expiry must be after.
func (n NewApiKey) Validate(now time.Time) error {
	name := strings.TrimSpace(n.Name)
	if err := ValidateText("name", name); err != nil {
		return err
	}
	if name == "" {
		return Invalid("name", "name must not be empty")
	}
	if utf8.RuneCountInString(name) >= MaxApiKeyName {
		return Invalid("name", fmt.Sprintf("name must be under %d characters", MaxApiKeyName))
	}
	if n.Role != RoleStorefront && n.Role != RoleAdmin {
		return Invalid("role", "role must be STOREFRONT or ADMIN")
	}
	if n.ExpiresAt != nil && !n.ExpiresAt.After(now) {
		return Invalid("expiresAt", "expiresAt must be in the future")
	}
	if n.RatePerSecond != nil && (*n.RatePerSecond < 1 || *n.RatePerSecond > maxApiKeyRate) {
		return Invalid("ratePerSecond", fmt.Sprintf("ratePerSecond must be 1-%d", maxApiKeyRate))
	}
	if n.Burst != nil {
		if n.RatePerSecond == nil {
			return Invalid("burst", "burst needs a ratePerSecond")
		}
		if *n.Burst < 1 || *n.Burst > maxApiKeyRate {
			return Invalid("burst", fmt.Sprintf("burst must be 1-%d", maxApiKeyRate))
		}
	}
	return nil
}

// ApiKeyAuditEvent is one creation or revocation of a key, with who did it.
type ApiKeyAuditEvent struct {
	KeyID     int64
	KeyName   string
	Actor     string
	ActorRole Role
	Action    string
	Detail    string
	At        time.Time
}

// The actions of the API key audit log.
const (
	AuditKeyCreated = "created"
	AuditKeyRevoked = "revoked"
)

// How many keys and audit lines the list and the page show.
const (
	ApiKeyListLimit  = 1000
	ApiKeyAuditLimit = 50
)

// ApiKeyStore keeps API keys. Each change is one transaction with its
// audit event.
type ApiKeyStore interface {
	// CreateApiKey stores a key and records the audit event made by audit
	// from the stored key.
	CreateApiKey(ctx context.Context, k ApiKey, audit func(ApiKey) ApiKeyAuditEvent) (ApiKey, error)
	// RevokeApiKey revokes a key and records it; a key revoked already is
	// returned unchanged, recorded once: NOT_FOUND.
	RevokeApiKey(ctx context.Context, id int64, audit func(ApiKey) ApiKeyAuditEvent) (ApiKey, error)
	// ApiKeys lists up to limit keys, newest first, revoked ones included.
	ApiKeys(ctx context.Context, limit int) ([]ApiKey, error)
	// UsableApiKeys lists every key neither revoked nor expired.
	UsableApiKeys(ctx context.Context) ([]ApiKey, error)
	// TouchApiKey sets a key's lastUsedAt to now unless it was set within
	// the last minute.
	TouchApiKey(ctx context.Context, id int64) error
	// ApiKeyAudit returns the latest creations and revocations, newest first.
	ApiKeyAudit(ctx context.Context, limit int) ([]ApiKeyAuditEvent, error)
}

// KeyChanges tells every server that the keys changed (created or
// revoked), so each reloads the ones it accepts.
type KeyChanges interface {
	Publish(ctx context.Context) error
}

// ApiKeys is admins managing API keys.
type ApiKeys struct {
	store   ApiKeyStore
	changes KeyChanges
	now     func() time.Time
}

// NewApiKeys returns key management over a store; changes may be nil (no
// other server to tell, as in the CLI with one database and no Redis).
func NewApiKeys(store ApiKeyStore, changes KeyChanges) *ApiKeys {
	return &ApiKeys{store: store, changes: changes, now: clockNow}
}

// CreatedApiKey is a new key and its secret, which is never shown again.
type CreatedApiKey struct {
	Key    ApiKey
	Secret string
}

// Create makes a key. Errors: FORBIDDEN (a caller other than an admin),
// INVALID_INPUT.
func (a *ApiKeys) Create(ctx context.Context, n NewApiKey) (CreatedApiKey, error) {
	if err := authorize(ctx, OpManageKeys); err != nil {
		return CreatedApiKey{}, err
	}
	if err := n.Validate(a.now()); err != nil {
		return CreatedApiKey{}, err
	}
	secret := ApiKeyPrefix + randomToken()
	hash := sha256.Sum256([]byte(secret))
	k := ApiKey{
		Name:          strings.TrimSpace(n.Name),
		Role:          n.Role,
		Prefix:        secret[:len(ApiKeyPrefix)+apiKeyShownChars],
		Hash:          hash[:],
		ExpiresAt:     n.ExpiresAt,
		RatePerSecond: n.RatePerSecond,
		Burst:         n.Burst,
		CreatedBy:     auditOf(ctx, "", "", "").Actor,
	}
	k, err := a.store.CreateApiKey(ctx, k, func(k ApiKey) ApiKeyAuditEvent {
		return keyAuditOf(ctx, k, AuditKeyCreated, describeKey(k))
	})
	if err != nil {
		return CreatedApiKey{}, err
	}
	a.publish(ctx)
	return CreatedApiKey{Key: k, Secret: secret}, nil
}

// Revoke revokes a key by its id: every server refuses it within a second.
// A key revoked already is returned unchanged. Errors: FORBIDDEN,
// INVALID_INPUT (id), NOT_FOUND.
func (a *ApiKeys) Revoke(ctx context.Context, id string) (ApiKey, error) {
	if err := authorize(ctx, OpManageKeys); err != nil {
		return ApiKey{}, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
	if err != nil || n <= 0 {
		return ApiKey{}, Invalid("id", "id must be the id of an API key")
	}
	k, err := a.store.RevokeApiKey(ctx, n, func(k ApiKey) ApiKeyAuditEvent {
		return keyAuditOf(ctx, k, AuditKeyRevoked, "revoked "+k.Prefix)
	})
	if err != nil {
		return ApiKey{}, err
	}
	a.publish(ctx)
	return k, nil
}

// publish tells the other servers; when it cannot, they still drop a
// revoked key at their next reload (KeyRing's TTL).
func (a *ApiKeys) publish(ctx context.Context) {
	if a.changes == nil {
		return
	}
	_ = a.changes.Publish(context.WithoutCancel(ctx))
}

// List returns the keys, newest first, revoked ones included. Errors:
// FORBIDDEN.
func (a *ApiKeys) List(ctx context.Context) ([]ApiKey, error) {
	if err := authorize(ctx, OpManageKeys); err != nil {
		return nil, err
	}
	return a.store.ApiKeys(ctx, ApiKeyListLimit)
}

// Audit returns the latest creations and revocations. Errors: FORBIDDEN.
func (a *ApiKeys) Audit(ctx context.Context) ([]ApiKeyAuditEvent, error) {
	if err := authorize(ctx, OpManageKeys); err != nil {
		return nil, err
	}
	return a.store.ApiKeyAudit(ctx, ApiKeyAuditLimit)
}

func keyAuditOf(ctx context.Context, k ApiKey, action, detail string) ApiKeyAuditEvent {
	e := auditOf(ctx, "", action, detail)
	return ApiKeyAuditEvent{KeyID: k.ID, KeyName: k.Name, Actor: e.Actor, ActorRole: e.ActorRole, Action: action, Detail: detail}
}

func describeKey(k ApiKey) string {
	s := fmt.Sprintf("%s, role %s", k.Prefix, k.Role)
	if k.ExpiresAt != nil {
		s += ", expires " + stamp(*k.ExpiresAt)
	}
	if k.RatePerSecond != nil {
		s += fmt.Sprintf(", %d/s", *k.RatePerSecond)
		if k.Burst != nil {
			s += fmt.Sprintf(" burst %d", *k.Burst)
		}
	}
	return s
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(errors.New("crypto/rand failed: " + err.Error()))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// RandomToken returns 32 random bytes, URL-safe: for the dashboard's
// session and password-link tokens (package accounts) and CSRF tokens of
// pages shown before a session exists.
func RandomToken() string { return randomToken() }
