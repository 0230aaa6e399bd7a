// Package lua holds the Redis scripts of the flash gate, one file each, so
// every script is reviewed and tested as Lua rather than hidden in Go strings.
// internal/gate runs them; the key layout is described in reserve.lua.
package lua

import _ "embed"

// Reserve decides one reserve on a voucher's gate: duplicate orderId,
// per-customer count, stock, then the writes.
//
//go:embed reserve.lua
var Reserve string

// Release gives an order's use back once, only if the gate holds it live,
// marking it released or (mode forget) deleting it.
//
//go:embed release.lua
var Release string

// Stage writes one chunk of a large snapshot into keys private to one load,
// so a big load needs no single huge script call.
//
//go:embed stage.lua
var Stage string

// Load installs a snapshot (the last chunk inline, earlier ones staged)
// atomically: for a warm-up only if the gate holds nothing for the voucher,
// so it never raises a loaded gate; for a rebuild over it, lifting the pause.
//
//go:embed load.lua
var Load string

// Lower takes uses off a voucher's counter, never below zero, so
// reconciliation can repair a gate that could admit too many.
//
//go:embed lower.lua
var Lower string
