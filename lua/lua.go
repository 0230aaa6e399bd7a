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

// Availability reads a voucher's stock, one customer's uses and the budget
// left at one moment, for a check that holds nothing.
//
//go:embed availability.lua
var Availability string

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

// Confirm decides a confirm at the gate in kafka mode, where the gate, not
// the database, is the decision point of a flash reservation.
//
//go:embed confirm.lua
var Confirm string

// MarkReleased decides a release or an expiry at the gate in kafka mode,
// keeping the use until the database has released the row.
//
//go:embed mark_released.lua
var MarkReleased string

// OrderClaim remembers which voucher an orderId was reserved on, so kafka
// mode answers ORDER_CONFLICT across vouchers before the database knows.
//
//go:embed order_claim.lua
var OrderClaim string

// Admit decides a reserve at the gate in kafka mode: the use is taken as a
// pending admission that only its owner settles or gives back.
//
//go:embed admit.lua
var Admit string

// Admission settles a pending admission by compare-and-set on its token:
// finalize, forget, void (reconciliation) or lose (a dead letter).
//
//go:embed admission.lua
var Admission string

// ApplyCheck tells the consumer which reserved events of a voucher stand at
// the gate before it writes them to the database.
//
//go:embed apply_check.lua
var ApplyCheck string

// End closes a flash voucher's window at the gate now (an operator's "end
// now" in kafka mode).
//
//go:embed end.lua
var End string

// Healthy tells whether a voucher's gate is loaded on the Redis server now
// serving it and not marked as having lost data (kafka mode's recovery).
//
//go:embed healthy.lua
var Healthy string

// Extend keeps a flash voucher's gate in step with a total raised or an end
// moved later in the database: the stock gets exactly the difference, the
// window and the keys' expiry move.
//
//go:embed extend.lua
var Extend string
