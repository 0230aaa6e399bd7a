package faults

import (
	"context"
	"net/http"
	"testing"

	"voucherd/internal/testproc"
	"voucherd/internal/testredis"
)

// TestKafkaClock_AConfirmIsDecidedOnTheGatesClockWhateverTheInstances: the
// gate decides whether a reservation is still in time on its own clock, the
// one its expiresAt was set on, so instances whose clocks differ answer a
// confirm alike. An instance an hour ahead (CLOCK_OFFSET, which shifts its
// whole process: so in a process of its own) confirms a reservation taken
// on another a moment ago; before, it judged it by its own clock and
// refused RESERVATION_RELEASED (issue 30, item 7).
func TestKafkaClock_AConfirmIsDecidedOnTheGatesClockWhateverTheInstances(t *testing.T) {
	t.Parallel()
	db := ownDatabase(t)
	rds := testredis.Start(t)
	broker := testproc.Broker(t, nil)
	kafka := map[string]string{"FLASH_WRITE_PATH": "kafka", "KAFKA_BROKERS": broker.Addr}
	onTime := testproc.Serve(t, serveEnv(db, rds.URL, kafka))
	aheadEnv := serveEnv(db, rds.URL, kafka)
	aheadEnv["CLOCK_OFFSET"] = "1h"
	ahead := testproc.Serve(t, aheadEnv)

	code := createFlashVoucher(t, onTime.URL, 5, 1)
	order := "o-clock-" + randomHex(6)
	ctx := context.Background()
	if a := call(ctx, http.MethodPost, onTime.URL+"/vouchers/"+code+"/reservations", storefrontToken, map[string]any{"customerId": 1, "orderId": order, "orderAmount": 1000}); a.Status != http.StatusCreated {
		t.Fatalf("reserve: %d %s %v", a.Status, a.Raw, a.Err)
	}
	if a := call(ctx, http.MethodPost, ahead.URL+"/vouchers/"+code+"/reservations/"+order+"/confirm", storefrontToken, nil); a.Status != http.StatusOK || a.State != "CONFIRMED" {
		t.Errorf("confirm on the instance an hour ahead: %d %s %v, want 200 CONFIRMED", a.Status, a.Raw, a.Err)
	}
}
