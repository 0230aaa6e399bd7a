package web

import (
	"encoding/base64"
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// reservationQuery reads the reservations list's filter from the URL; a
// cursor that does not decode starts from the first page.
func reservationQuery(r *http.Request) (components.ReservationQuery, voucher.ReservationFilter) {
	q := r.URL.Query()
	rq := components.ReservationQuery{
		Code:     r.PathValue("code"),
		Status:   strings.ToUpper(strings.TrimSpace(q.Get("status"))),
		Customer: strings.TrimSpace(q.Get("customer")),
	}
	f := voucher.ReservationFilter{Status: voucher.Status(rq.Status)}
	if rq.Customer != "" {
		n, err := strconv.ParseInt(rq.Customer, 10, 64)
		if err != nil || n <= 0 {
			rq.CustomerError = "A customer is a whole number greater than 0."
			f.CustomerID = -1 // matches no one: a typo shows nothing rather than everything
		} else {
			f.CustomerID = n
		}
	}
	if c, ok := decodeCursor(q.Get("after")); ok {
		f.After = &c
		rq.Paged = true
	}
	return rq, f
}

func encodeCursor(c voucher.ReservationCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.OrderID))
}

func decodeCursor(s string) (voucher.ReservationCursor, bool) {
	if s == "" || len(s) > 200 {
		return voucher.ReservationCursor{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return voucher.ReservationCursor{}, false
	}
	at, id, ok := strings.Cut(string(b), "|")
	t, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil || voucher.ValidateOrderID(id) != nil {
		return voucher.ReservationCursor{}, false
	}
	return voucher.ReservationCursor{CreatedAt: t, OrderID: id}, true
}

// reservationList is a voucher's reservations, paged and filtered.
func (d *dashboard) reservationList(w http.ResponseWriter, r *http.Request) {
	rq, f := reservationQuery(r)
	if f.CustomerID < 0 {
		f.CustomerID = 0
		rows := []voucher.Reservation(nil)
		d.render(w, r, http.StatusUnprocessableEntity, components.ReservationList(d.page(r, "Reservations of "+rq.Code, "vouchers"), rq, rows, ""))
		return
	}
	rows, next, err := d.deps.Vouchers.Reservations(r.Context(), rq.Code, f)
	if err != nil {
		if e := voucher.AsError(err); e.Code == voucher.InvalidInput && e.Field == "status" {
			d.problem(w, r, http.StatusUnprocessableEntity, "No such status", "Choose RESERVED, CONFIRMED, RELEASED or ROLLED_BACK, or any status.")
			return
		}
		d.fail(w, r, err)
		return
	}
	nextURL := ""
	if next != nil {
		v := rq.Values()
		v.Set("after", encodeCursor(*next))
		nextURL = "/admin/vouchers/" + url.PathEscape(rq.Code) + "/reservations?" + v.Encode()
	}
	d.render(w, r, http.StatusOK, components.ReservationList(d.page(r, "Reservations of "+rq.Code, "vouchers"), rq, rows, nextURL))
}

// reservationsCSV streams every reservation the filter keeps as CSV, read
// from the database a batch at a time and flushed as it goes.
func (d *dashboard) reservationsCSV(w http.ResponseWriter, r *http.Request) {
	rq, f := reservationQuery(r)
	f.After = nil
	if f.CustomerID < 0 {
		d.problem(w, r, http.StatusUnprocessableEntity, "Not a customer", rq.CustomerError)
		return
	}
	// The voucher is checked before the first byte: a refusal is a page.
	if _, _, err := d.deps.Vouchers.Reservations(r.Context(), rq.Code, voucher.ReservationFilter{Status: f.Status, Limit: 1}); err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="reservations-`+rq.Code+`.csv"`)
	out := csv.NewWriter(w)
	flusher, _ := w.(http.Flusher)
	_ = out.Write([]string{"orderId", "customerId", "status", "orderAmount", "discountAmount", "createdAt", "expiresAt", "confirmedAt", "releasedAt", "position", "rolledBackAt", "rollbackReason"})
	n := 0
	err := d.deps.Vouchers.ExportReservations(r.Context(), rq.Code, f, func(res voucher.Reservation) error {
		if err := out.Write([]string{
			csvCell(res.OrderID), strconv.FormatInt(res.CustomerID, 10), string(res.Status),
			strconv.FormatInt(res.OrderAmount, 10), strconv.FormatInt(res.DiscountAmount, 10),
			stampOf(&res.CreatedAt), stampOf(&res.ExpiresAt), stampOf(res.ConfirmedAt), stampOf(res.ReleasedAt),
			strconv.Itoa(res.Position), stampOf(res.RolledBackAt), csvCell(res.RollbackReason),
		}); err != nil {
			return err
		}
		if n++; n%1000 == 0 {
			out.Flush()
			if flusher != nil {
				flusher.Flush()
			}
		}
		return out.Error()
	})
	out.Flush()
	if err != nil {
		// The header is gone: the file ends short; the log says why.
		d.logger.ErrorContext(r.Context(), "a reservations export stopped", "code", rq.Code, "rows", n, "err", err)
	}
}

func stampOf(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// csvCell keeps a spreadsheet from reading an orderId (any text a
// storefront sent) as a formula.
func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
