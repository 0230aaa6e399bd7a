package components

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/voucher"
)

// CampaignForm is the new-campaign form as typed: the terms as the voucher
// form has them (its TotalLimit and PerUserLimit are the campaign's, across
// all its codes; its Errors hold every field's message), and the campaign's
// own fields.
type CampaignForm struct {
	VoucherForm
	Name        string
	CodeCount   string
	CodePrefix  string
	CodeLength  string
	UsesPerCode string
}

// CampaignFormFields are the fields the campaign form shows, by the
// contract's names: a refusal naming one is shown next to it.
var CampaignFormFields = map[string]bool{
	"name": true, "codeCount": true, "codePrefix": true, "codeLength": true, "usesPerCode": true,
	"totalLimit": true, "perUserLimit": true, "discountType": true, "discountAmount": true,
	"discountPercent": true, "maxDiscountAmount": true, "currency": true, "budgetAmount": true,
	"minOrderAmount": true, "startsAt": true, "endsAt": true, "tz": true, "flash": true,
	"periodLimits": true, "timeZone": true, "eligibleSegments": true, "appliesTo": true,
}

// CodeLookup is a code typed on a campaign's page and what was found.
type CodeLookup struct {
	Typed string // empty: nothing looked up
	voucher.CodeLookup
}

// CodeState says a code's state for people.
func CodeState(c voucher.CampaignCode) string {
	switch c.State() {
	case "UNUSED":
		return "unused"
	case "PARTLY_USED":
		return "partly used"
	}
	return "used"
}

// CampaignStatusLabel is a campaign's status for people.
func CampaignStatusLabel(s voucher.CampaignStatus) string {
	switch s {
	case voucher.CampaignGenerating:
		return "making codes"
	case voucher.CampaignReady:
		return "ready"
	case voucher.CampaignFailed:
		return "failed"
	}
	return strings.ToLower(string(s))
}

// CampaignURL is a campaign's page.
func CampaignURL(c voucher.Campaign) string {
	return "/admin/campaigns/" + strconv.FormatInt(c.ID, 10)
}

// CampaignExportURL is the export of a campaign's codes (served outside
// /admin, with the dashboard session).
func CampaignExportURL(c voucher.Campaign) string {
	return "/campaigns/" + strconv.FormatInt(c.ID, 10) + "/codes.csv"
}

// campaignLiveURL is what the page polls; shown is the status it shows.
func campaignLiveURL(c voucher.Campaign) string {
	return CampaignURL(c) + "/live?shown=" + url.QueryEscape(string(c.Status))
}

// campaignPollEvery is the pace of a campaign page's refresh: every second
// while its codes are made; once READY, the voucher page's pace for its
// figures (2 s while the window is open, 15 s otherwise); a FAILED
// campaign changes no more, so its page stops asking.
func campaignPollEvery(c voucher.Campaign, now time.Time) string {
	switch c.Status {
	case voucher.CampaignGenerating:
		return "every 1s"
	case voucher.CampaignReady:
		if c.Terms.State(now) == voucher.StateLive {
			return "every 2s"
		}
		return "every 15s"
	}
	return ""
}

// Progress says how far the making of the codes is: "1,200 of 2,000 codes
// made (60 %)".
func Progress(c voucher.Campaign) string {
	pct := 0
	if c.CodeCount > 0 {
		pct = int(int64(c.GeneratedCount) * 100 / int64(c.CodeCount))
	}
	return Count(c.GeneratedCount) + " of " + Count(c.CodeCount) + " codes made (" + strconv.Itoa(pct) + " %)"
}

// CampaignAnnouncement is the polite announcement of a campaign's status:
// it changes (and is read out) only when the status does.
func CampaignAnnouncement(c voucher.Campaign) string {
	switch c.Status {
	case voucher.CampaignGenerating:
		return "The codes are being made."
	case voucher.CampaignReady:
		return "All " + Count(c.CodeCount) + " codes are made: the campaign is ready."
	}
	return "Making the codes failed."
}

// CodeExample shows what a campaign's codes look like: "SPRING-" and X for
// each random character.
func CodeExample(c voucher.Campaign) string {
	p := c.CodePrefix
	if p != "" {
		p += "-"
	}
	return p + strings.Repeat("X", c.CodeLength)
}

// CampaignActivityAsVoucher is a campaign's history as the voucher chart
// reads it: the backing row's terms and counters with its samples.
func CampaignActivityAsVoucher(a voucher.CampaignActivity, now time.Time) voucher.VoucherActivity {
	return voucher.VoucherActivity{
		VoucherOverview: voucher.VoucherOverview{Voucher: a.Terms, State: a.Terms.State(now)},
		Samples:         a.Samples,
	}
}

// Created says when a campaign was created.
func Created(c voucher.Campaign, zone *time.Location) string { return When(c.CreatedAt, zone) }
