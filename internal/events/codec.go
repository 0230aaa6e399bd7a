package events

import (
	"encoding/json"
	"fmt"
	"time"

	"voucherd/internal/voucher"
)

// wireEvent is an event's JSON value on the topic: every field the consumer
// needs, times in Unix milliseconds.
type wireEvent struct {
	EventID        string `json:"eventId"`
	Kind           string `json:"kind"`
	OrderID        string `json:"orderId"`
	Code           string `json:"code"`
	CustomerID     int64  `json:"customerId"`
	OrderAmount    int64  `json:"orderAmount"`
	DiscountAmount int64  `json:"discountAmount"`
	CreatedAt      int64  `json:"createdAt"`
	ExpiresAt      int64  `json:"expiresAt"`
	DecidedAt      int64  `json:"decidedAt"`
	// Position is the reservation's place among its voucher's admitted
	// reserves, given by the gate; absent in events published before.
	Position int `json:"position,omitempty"`
	// Epoch is the gate load a reserved event's admission was made in; for
	// a recovery marker, the epoch a rebuild installs.
	Epoch   string `json:"epoch,omitempty"`
	Rebuild bool   `json:"rebuild,omitempty"`
	// Incident is a recovery marker's: the Redis server it was asked for.
	Incident string `json:"incident,omitempty"`
}

// Encode writes an event as the topic carries it.
func Encode(ev voucher.Event) ([]byte, error) {
	return json.Marshal(wireEvent{
		EventID: ev.ID, Kind: string(ev.Kind), OrderID: ev.OrderID, Code: ev.Code,
		CustomerID: ev.CustomerID, OrderAmount: ev.OrderAmount, DiscountAmount: ev.DiscountAmount,
		CreatedAt: ev.CreatedAt.UnixMilli(), ExpiresAt: ev.ExpiresAt.UnixMilli(), DecidedAt: ev.DecidedAt.UnixMilli(),
		Position: ev.Position, Epoch: ev.Epoch, Rebuild: ev.Rebuild, Incident: ev.Incident,
	})
}

// Decode reads an event and checks it is one the service could have sent;
// anything else goes to the dead letters.
func Decode(b []byte) (voucher.Event, error) {
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		return voucher.Event{}, fmt.Errorf("not an event: %w", err)
	}
	ev := voucher.Event{
		ID: w.EventID, Kind: voucher.EventKind(w.Kind), OrderID: w.OrderID, Code: w.Code,
		CustomerID: w.CustomerID, OrderAmount: w.OrderAmount, DiscountAmount: w.DiscountAmount,
		CreatedAt: time.UnixMilli(w.CreatedAt), ExpiresAt: time.UnixMilli(w.ExpiresAt), DecidedAt: time.UnixMilli(w.DecidedAt),
		Position: w.Position, Epoch: w.Epoch, Rebuild: w.Rebuild, Incident: w.Incident,
	}
	switch ev.Kind {
	case voucher.EventRecover:
		// A marker: the consumer rebuilds the voucher's gate when it reaches
		// it, after every event before it in the partition.
		if err := voucher.ValidateCode(ev.Code); err != nil {
			return ev, err
		}
		if ev.ID == "" {
			return ev, fmt.Errorf("no eventId")
		}
		return ev, nil
	case voucher.EventReserved, voucher.EventConfirmed, voucher.EventReleased:
	default:
		return ev, fmt.Errorf("unknown kind %q", w.Kind)
	}
	if err := voucher.ValidateCode(ev.Code); err != nil {
		return ev, err
	}
	if err := voucher.ValidateOrderID(ev.OrderID); err != nil {
		return ev, err
	}
	switch {
	case ev.ID == "":
		return ev, fmt.Errorf("no eventId")
	case ev.CustomerID <= 0, ev.OrderAmount < 0, ev.DiscountAmount < 0:
		return ev, fmt.Errorf("customerId, orderAmount or discountAmount out of range")
	case ev.Position < 0 || ev.Position > voucher.MaxLimit:
		return ev, fmt.Errorf("position out of range")
	case w.CreatedAt <= 0 || w.ExpiresAt <= w.CreatedAt:
		return ev, fmt.Errorf("createdAt and expiresAt out of order")
	}
	return ev, nil
}
