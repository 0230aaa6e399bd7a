package server

// Benchmarks of the REST reserve handler's own JSON work: reading the body
// into a ReserveRequest (reserveRequest, on the body as limitBody leaves it),
// and writing the two answers a flash sale is made of (201 with the
// reservation, 409 OUT_OF_STOCK).
//
//	go test -run '^$' -bench 'ReserveBody|ReserveAnswer' -benchmem ./server/

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

func BenchmarkReserveBody(b *testing.B) {
	body := []byte(`{"customerId":1000000042,"orderId":"fb-rest-1a2b3c-123456","orderAmount":25000}`)
	r := httptest.NewRequest(http.MethodPost, "/vouchers/flash-1/reservations", nil)
	r.SetPathValue("code", "flash-1")
	b.ReportAllocs()
	for b.Loop() {
		r.Body = newReadBody(body) // as limitBody leaves it
		if _, err := reserveRequest(r); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDiscardWriter is a ResponseWriter that keeps nothing, so only the
// encoding is measured.
type benchDiscardWriter struct{ h http.Header }

func (d *benchDiscardWriter) Header() http.Header         { return d.h }
func (d *benchDiscardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *benchDiscardWriter) WriteHeader(int)             {}

func BenchmarkReserveAnswer(b *testing.B) {
	now := time.Now()
	res := voucher.Reservation{
		OrderID: "fb-rest-1a2b3c-123456", VoucherCode: "flash-1", CustomerID: 1000000042, OrderAmount: 25000,
		DiscountAmount: 1000, Status: voucher.StatusReserved, CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute),
	}
	r := httptest.NewRequest(http.MethodPost, "/vouchers/flash-1/reservations", nil)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.Run("201 reservation", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(&benchDiscardWriter{h: http.Header{}}, http.StatusCreated, toReservationJSON(res))
		}
	})
	b.Run("409 OUT_OF_STOCK", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			err := voucher.Errorf(voucher.OutOfStock, "voucher %s is sold out", "flash-1")
			writeError(&benchDiscardWriter{h: http.Header{}}, r, logger, err)
		}
	})
}
