// Package voucher is the domain of the voucher service: vouchers,
// reservations, their rules and error codes. It imports no driver; stores
// and the gate plug in through the interfaces in service.go. The design is
// in docs/ (architecture.md, flash-gate.md, write-paths.md).
//
// Glossary:
//
//   - gate: a flash voucher's uses, customers, orders and budget in Redis, decided by one Lua script a call.
//   - winner: a reserve the gate admitted; only winners reach PostgreSQL.
//   - admission: a kafka-mode winner, pending until settled; only its owner (by its token) gives its use back.
//   - settle: an admission finalized as live once the broker acked its event, or forgotten, voided, lost, revived.
//   - lease: how long an owner has to settle (ADMISSION_LEASE); then a retry adopts it or reconciliation voids it.
//   - claim: kafka mode's mark of an orderId across vouchers (order:{ID}, 24 h): one voucher per orderId.
//   - epoch: the id of a gate's load, carried by each admission; a gate that lost data answers STALE.
//   - tombstone: a voided order kept at the gate: its late event is skipped; one missing in its epoch is lost data.
//   - marker: a recovery event in a voucher's partition; the consumer reloads the gate there.
//   - recovery: the reload at a marker, from a database snapshot holding every event before it.
//   - rebuild: an operator's reload of a paused gate from the database (a marker in kafka mode).
//   - reconciliation: the periodic comparison of gate and database; it only ever lowers a gate.
//   - drift: gateRemaining - (databaseRemaining - inFlight); one that persists past an interval alerts.
//   - leak: a use the gate holds for an order the database lacks; reconciliation returns or voids it.
//   - sold-out memory: an instance's snapshot of a sold-out gate, answering the late crowd without Redis.
//   - dead letter: an event the database refused; its admission is lost (the use kept) until an operator acts.
//   - rollback: a confirmed use given back (ROLLED_BACK: a refund), decided in the database on every path; the gate gets the use back as for a release.
//   - period limit: at most max uses held in a calendar day, week or month of the voucher's time zone, by all customers (VOUCHER) or each (CUSTOMER); a use counts in the period of its createdAt (docs/period-limits.md).
//   - segment: a group the storefront says the customer is in; a voucher with eligibleSegments takes only reserves naming one.
//   - appliesTo: the SKUs and categories whose items' subtotal a voucher's discount is taken on.
package voucher
