package server

import (
	"encoding/csv"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"voucherd/internal/voucher"
)

// exportWriteWindow is how long an export has to write its next rows: the
// server's WriteTimeout bounds a whole answer, and a million codes may take
// longer, so each flush moves the deadline on.
const exportWriteWindow = 30 * time.Second

// handleCampaignCodes streams a campaign's codes as CSV (code,uses,status),
// one line a code in creation order, from the database as it reads them:
// flushed every 1,000 lines, never all in memory. A refusal before the
// first line is the usual JSON error; a failure after it ends the file
// short (the log says why).
func handleCampaignCodes(svc *voucher.Service, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := voucher.ParseCampaignID(r.PathValue("id"))
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		rc := http.NewResponseController(w)
		out := csv.NewWriter(w)
		started := false
		start := func() {
			if started {
				return
			}
			started = true
			w.Header().Set("Content-Type", "text/csv; charset=utf-8")
			w.Header().Set("Content-Disposition", `attachment; filename="campaign-`+strconv.FormatInt(id, 10)+`-codes.csv"`)
			w.WriteHeader(http.StatusOK)
			_ = out.Write([]string{"code", "uses", "status"})
		}
		n := 0
		line := make([]string, 3)
		err = svc.CampaignCodes(r.Context(), id, func(c voucher.CampaignCode) error {
			start()
			line[0], line[1], line[2] = c.Code, strconv.Itoa(c.Uses), c.State()
			if err := out.Write(line); err != nil {
				return err
			}
			if n++; n%1000 == 0 {
				out.Flush()
				_ = rc.SetWriteDeadline(time.Now().Add(exportWriteWindow))
				if err := rc.Flush(); err != nil {
					return err
				}
			}
			return out.Error()
		})
		if err != nil && !started {
			writeError(w, r, logger, err)
			return
		}
		start()
		out.Flush()
		if err != nil {
			logger.ErrorContext(r.Context(), "a campaign codes export stopped", "campaign", id, "rows", n, "err", err)
		}
	})
}

// requireTokenOrSession lets a request through with a bearer token (as
// require does) or, without an Authorization header, with a signed-in
// dashboard user's session; else 401.
func (a *tokenAuth) requireTokenOrSession(session SessionCaller, logger *slog.Logger, next http.Handler) http.Handler {
	withToken := a.require(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if session == nil || r.Header.Get("Authorization") != "" {
			withToken.ServeHTTP(w, r)
			return
		}
		caller, ok, err := session(r)
		if err != nil {
			writeError(w, r, logger, err)
			return
		}
		if !ok {
			unauthorized(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(voucher.WithCaller(r.Context(), caller)))
	})
}

// SessionCaller reads a request's dashboard session: the signed-in user as
// a caller, ok false without a live session.
type SessionCaller func(r *http.Request) (caller voucher.Caller, ok bool, err error)
