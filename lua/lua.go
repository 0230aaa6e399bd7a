// Package lua holds the Redis scripts of the flash gate, one file each, so
// every script is reviewed and tested as Lua rather than hidden in Go strings.
// internal/gate runs them; the key layout is described in reserve.lua.
// Scripts that share helpers (run_id, stale, now_ms, fields, settled) are
// prelude.lua followed by their own file, joined here at embed time.
package lua

import _ "embed"

// prelude holds the small local functions the scripts share (run_id, stale,
// now_ms, fields, settled). Each script that uses them is prelude + its own
// file, so it still runs as one Redis script with its own KEYS and ARGV.
//
//go:embed prelude.lua
var prelude string

// Reserve decides one reserve on a voucher's gate: duplicate orderId,
// per-customer count, stock, then the writes.
var Reserve = prelude + reserve

// Release gives an order's use back once, only if the gate holds it live,
// marking it released or (mode forget) deleting it.
var Release = prelude + release

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
var Load = prelude + load

// Marker notes a rebuild's marker as pending, so that only the reload at
// the last pending one lifts the gate's pause.
var Marker = prelude + marker

// Lower takes uses off a voucher's counter, never below zero, so
// reconciliation can repair a gate that could admit too many.
//
//go:embed lower.lua
var Lower string

// Confirm decides a confirm at the gate in kafka mode, where the gate, not
// the database, is the decision point of a flash reservation.
var Confirm = prelude + confirm

// MarkReleased decides a release or an expiry at the gate in kafka mode,
// keeping the use until the database has released the row.
var MarkReleased = prelude + markReleased

// OrderClaim remembers which voucher an orderId was reserved on, so kafka
// mode answers ORDER_CONFLICT across vouchers before the database knows.
var OrderClaim = prelude + orderClaim

// Admit decides a reserve at the gate in kafka mode: the use is taken as a
// pending admission that only its owner settles or gives back.
var Admit = prelude + admit

// Admission settles a pending admission by compare-and-set on its token:
// finalize, forget, void (reconciliation) or lose (a dead letter).
var Admission = prelude + admission

// ApplyCheck tells the consumer which reserved events of a voucher stand at
// the gate before it writes them to the database.
var ApplyCheck = prelude + applyCheck

// End closes a flash voucher's window at the gate now (an operator's "end
// now" in kafka mode).
var End = prelude + endScript

// Healthy tells whether a voucher's gate is loaded on the Redis server now
// serving it and not marked as having lost data (kafka mode's recovery).
var Healthy = prelude + healthy

// Extend keeps a flash voucher's gate in step with a total raised or an end
// moved later in the database: the stock gets exactly the difference, the
// window and the keys' expiry move.
//
//go:embed extend.lua
var Extend string

// The scripts' own files, before the prelude is prepended.
var (
	//go:embed reserve.lua
	reserve string
	//go:embed release.lua
	release string
	//go:embed load.lua
	load string
	//go:embed marker.lua
	marker string
	//go:embed confirm.lua
	confirm string
	//go:embed mark_released.lua
	markReleased string
	//go:embed order_claim.lua
	orderClaim string
	//go:embed admit.lua
	admit string
	//go:embed admission.lua
	admission string
	//go:embed apply_check.lua
	applyCheck string
	//go:embed end.lua
	endScript string
	//go:embed healthy.lua
	healthy string
)
