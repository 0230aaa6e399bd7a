package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The campaign rows (issue 14): a campaign of unique codes generated in the
// background, its codes exported as CSV, and a flash campaign's sale where
// every request names a random code of it. They use only the public API
// (createCampaign, campaign(id), GET /campaigns/{id}/codes.csv and the
// reserve route), so they measure what a user of the server sees.

// campaignFigures are a campaign row's own figures (the sale row has the
// sale's too).
type campaignFigures struct {
	ID        string  `json:"id"`
	Codes     int     `json:"codes"`
	ReadySec  float64 `json:"readySec,omitempty"`  // createCampaign's answer to READY
	ExportSec float64 `json:"exportSec,omitempty"` // the CSV's first byte asked to its last byte read
	// Progress is generatedCount as polled while GENERATING: [seconds, count].
	Progress [][2]float64 `json:"progress,omitempty"`
	// The server process's resident memory (VmRSS, MiB) before the export
	// and the most seen while it streamed (sampled every 20 ms).
	RSSBeforeMiB float64 `json:"rssBeforeMiB,omitempty"`
	RSSPeakMiB   float64 `json:"rssPeakMiB,omitempty"`
	Lines        int     `json:"lines,omitempty"`
}

// campaignCodes is how many codes the generation and export rows make
// (the 1,000,000; -quick 10,000), and saleCodes the flash sale's.
func (b *bench) campaignCodes() int {
	if b.opts.Quick {
		return 10_000
	}
	return 1_000_000
}

func (b *bench) saleCodes() int { return 10 * b.opts.Quota }

type campaignView struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	CodeCount      int    `json:"codeCount"`
	GeneratedCount int    `json:"generatedCount"`
	UsedCount      int    `json:"usedCount"`
	TotalLimit     int    `json:"totalLimit"`
}

// createCampaign makes a campaign open from a minute ago for half an hour.
func (a *api) createCampaign(ctx context.Context, name string, codes, totalLimit int, flash bool) (campaignView, error) {
	now := time.Now().UTC()
	input := map[string]any{
		"name": name, "codeCount": codes, "codePrefix": "FB", "codeLength": 10, "usesPerCode": 1, "perUserLimit": 1,
		"discountAmount": 1000, "minOrderAmount": 0, "flash": flash,
		"startsAt": now.Add(-time.Minute).Format(time.RFC3339), "endsAt": now.Add(30 * time.Minute).Format(time.RFC3339),
	}
	if totalLimit > 0 {
		input["totalLimit"] = totalLimit
	}
	var out struct {
		CreateCampaign struct {
			Campaign *campaignView
			Error    *struct{ Code, Message string }
		}
	}
	err := a.graphql(ctx, a.admin, `mutation C($input: CreateCampaignInput!) {
  createCampaign(input: $input) { campaign { id status codeCount generatedCount usedCount totalLimit } error { code message } } }`,
		map[string]any{"input": input}, &out)
	if err != nil {
		return campaignView{}, fmt.Errorf("create campaign %s: %w", name, err)
	}
	if e := out.CreateCampaign.Error; e != nil {
		return campaignView{}, fmt.Errorf("create campaign %s: %s: %s", name, e.Code, e.Message)
	}
	if out.CreateCampaign.Campaign == nil {
		return campaignView{}, fmt.Errorf("create campaign %s: no campaign in the answer", name)
	}
	return *out.CreateCampaign.Campaign, nil
}

func (a *api) campaign(ctx context.Context, id string) (campaignView, error) {
	var out struct{ Campaign *campaignView }
	err := a.graphql(ctx, a.admin, `query C($id: ID!) { campaign(id: $id) { id status codeCount generatedCount usedCount totalLimit } }`,
		map[string]any{"id": id}, &out)
	if err != nil {
		return campaignView{}, err
	}
	if out.Campaign == nil {
		return campaignView{}, fmt.Errorf("campaign %s not found", id)
	}
	return *out.Campaign, nil
}

// awaitReady polls the campaign until it leaves GENERATING, recording its
// progress.
func (a *api) awaitReady(ctx context.Context, c campaignView, limit time.Duration, f *campaignFigures) (campaignView, error) {
	start := time.Now()
	for {
		cur, err := a.campaign(ctx, c.ID)
		if err != nil {
			return cur, err
		}
		f.Progress = append(f.Progress, [2]float64{time.Since(start).Seconds(), float64(cur.GeneratedCount)})
		if cur.Status != "GENERATING" {
			return cur, nil
		}
		if time.Since(start) > limit {
			return cur, fmt.Errorf("campaign %s still GENERATING after %s (%d of %d codes)", c.ID, limit, cur.GeneratedCount, cur.CodeCount)
		}
		select {
		case <-ctx.Done():
			return cur, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exportedCode is one line of the codes export.
type exportedCode struct {
	code   string
	uses   int
	status string
}

// exportCodes streams the campaign's CSV, calling each for every line after
// the header; it returns the header.
func (a *api) exportCodes(ctx context.Context, id string, each func(exportedCode) error) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/campaigns/"+id+"/codes.csv", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+a.admin)
	client := &http.Client{} // no overall timeout: a million lines
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("codes export: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	header := ""
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if header == "" {
			header = line
			continue
		}
		parts := strings.Split(line, ",")
		if len(parts) != 3 {
			return header, fmt.Errorf("codes export: line %q is not code,uses,status", line)
		}
		uses, err := strconv.Atoi(parts[1])
		if err != nil {
			return header, fmt.Errorf("codes export: line %q: %w", line, err)
		}
		if err := each(exportedCode{parts[0], uses, parts[2]}); err != nil {
			return header, err
		}
	}
	return header, sc.Err()
}

// rssMiB is a process's resident memory, from /proc (0 when unknown).
func rssMiB(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func serverPID(s *server) int {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// runCampaignGenerate creates a campaign of campaignCodes codes and times it
// to READY. The export row reuses it.
func (b *bench) runCampaignGenerate(ctx context.Context, s scenario) (*scenarioResult, *campaignFigures, error) {
	res := &scenarioResult{Name: s.name, Title: s.title}
	n := b.campaignCodes()
	f := &campaignFigures{Codes: n}
	start := time.Now()
	c, err := b.api.createCampaign(ctx, "flashbench "+s.name+" "+b.runID, n, 0, false)
	if err != nil {
		res.Skipped = "campaigns not available: " + err.Error()
		return res, nil, nil
	}
	f.ID = c.ID
	res.check("createCampaign answers GENERATING at once", c.Status == "GENERATING" || c.Status == "READY", "status "+c.Status)
	c, err = b.api.awaitReady(ctx, c, 5*time.Minute, f)
	f.ReadySec = time.Since(start).Seconds()
	if err != nil {
		return nil, nil, err
	}
	res.Seconds, res.Throughput = f.ReadySec, float64(n)/f.ReadySec // codes a second
	res.check("READY with every code", c.Status == "READY" && c.GeneratedCount == n, fmt.Sprintf("%s, %d of %d", c.Status, c.GeneratedCount, n))
	// Progress shows when a poll caught it part-way; a generation over
	// within a second or two may be over before the second poll.
	partWay := slices.ContainsFunc(f.Progress, func(p [2]float64) bool { return p[1] > 0 && p[1] < float64(n) })
	res.check("progress visible while it ran", partWay || f.ReadySec < 2,
		fmt.Sprintf("%d polls in %.1f s, part-way: %v", len(f.Progress), f.ReadySec, partWay))
	res.Campaign = f
	return res, f, nil
}

// runCampaignExport streams the codes of gen (or of a campaign of its own)
// and watches the server's memory while it does.
func (b *bench) runCampaignExport(ctx context.Context, s scenario, gen *campaignFigures) (*scenarioResult, error) {
	res := &scenarioResult{Name: s.name, Title: s.title}
	if gen == nil {
		r, f, err := b.runCampaignGenerate(ctx, scenario{name: s.name, title: s.title})
		if err != nil {
			return nil, err
		}
		if r.Skipped != "" {
			return r, nil
		}
		gen = f
	}
	f := &campaignFigures{ID: gen.ID, Codes: gen.Codes}
	pid := serverPID(b.sync)
	f.RSSBeforeMiB = rssMiB(pid)
	var peak atomic.Uint64 // KiB
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if kb := uint64(rssMiB(pid) * 1024); kb > peak.Load() {
				peak.Store(kb)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	seen := make(map[string]struct{}, gen.Codes)
	var dup, bad int
	start := time.Now()
	header, err := b.api.exportCodes(ctx, gen.ID, func(c exportedCode) error {
		if _, ok := seen[c.code]; ok {
			dup++
		}
		seen[c.code] = struct{}{}
		if !strings.HasPrefix(c.code, "FB-") || len(c.code) != len("FB-")+10 {
			bad++
		}
		return nil
	})
	f.ExportSec = time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	f.RSSPeakMiB = float64(peak.Load()) / 1024
	f.Lines = len(seen) + dup
	res.Seconds, res.Throughput = f.ExportSec, float64(f.Lines)/f.ExportSec // lines a second
	res.check("header code,uses,status", header == "code,uses,status", header)
	res.check("each code once", f.Lines == gen.Codes && dup == 0, fmt.Sprintf("%d lines, %d distinct, %d repeated", f.Lines, len(seen), dup))
	res.check("codes PREFIX-RANDOM", bad == 0, fmt.Sprintf("%d malformed", bad))
	if pid != 0 {
		// Flat: the server holds no list of the codes (a million codes as Go
		// strings would be well over 50 MiB).
		grew := f.RSSPeakMiB - f.RSSBeforeMiB
		res.check("server memory flat while streaming", grew < 50, fmt.Sprintf("VmRSS %.0f -> at most %.0f MiB", f.RSSBeforeMiB, f.RSSPeakMiB))
	}
	res.Campaign = f
	return res, nil
}

// prepareCampaign makes the flash campaign of the sale: saleCodes
// single-use codes, quota uses in all, one per customer; it returns its
// codes (from the export) for the load.
func (b *bench) prepareCampaign(ctx context.Context, s scenario, p *prepared) error {
	f := &campaignFigures{Codes: b.saleCodes()}
	c, err := p.api.createCampaign(ctx, "flashbench "+p.code, f.Codes, p.quota, true)
	if err != nil {
		p.skip = "campaigns not available: " + err.Error()
		return nil
	}
	if c, err = p.api.awaitReady(ctx, c, 2*time.Minute, f); err != nil {
		return err
	}
	if c.Status != "READY" {
		return fmt.Errorf("campaign %s: %s", c.ID, c.Status)
	}
	f.ID = c.ID
	p.campaign = f
	_, err = p.api.exportCodes(ctx, c.ID, func(e exportedCode) error {
		p.codes = append(p.codes, e.code)
		return nil
	})
	return err
}

// checkCampaignSale checks the sale against the campaign's own counts and
// its export: exactly the quota sold, no code used twice; a load of checks
// held nothing and each answered a discount.
func (b *bench) checkCampaignSale(ctx context.Context, s scenario, p *prepared, res *scenarioResult, lr *loadResult, sold int64) error {
	c, err := p.api.campaign(ctx, p.campaign.ID)
	if err != nil {
		return err
	}
	var uses, twice int
	if _, err := p.api.exportCodes(ctx, p.campaign.ID, func(e exportedCode) error {
		uses += e.uses
		if e.uses > 1 {
			twice++
		}
		return nil
	}); err != nil {
		return err
	}
	if s.kind == kindCheck {
		answers := lr.Outcomes["DISCOUNT"] + lr.Outcomes["retry DISCOUNT"]
		res.check("checks held nothing and each answered DISCOUNT", sold == 0 && c.UsedCount == 0 && uses == 0 && answers == lr.Requests,
			fmt.Sprintf("%d of %d answered DISCOUNT; usedCount %d, uses in the export %d", answers, lr.Requests, c.UsedCount, uses))
		res.Campaign = p.campaign
		return nil
	}
	res.check("sold exactly the campaign's totalLimit", sold == int64(p.quota) && c.UsedCount == p.quota,
		fmt.Sprintf("successes %d, usedCount %d, totalLimit %d", sold, c.UsedCount, p.quota))
	res.check("uses in the export == usedCount", uses == c.UsedCount, fmt.Sprintf("%d vs %d", uses, c.UsedCount))
	res.check("no code used twice", twice == 0, fmt.Sprintf("%d codes over 1 use", twice))
	res.Campaign = p.campaign
	return nil
}

// isCampaignRow: a row of campaign figures, not of a load phase.
func isCampaignRow(s *scenarioResult) bool {
	return s.Name == "campaign-generate" || s.Name == "campaign-export"
}

// campaignTargets are issue 14's.
func (r *report) campaignTargets() {
	met := func(ok bool) *bool { return &ok }
	if s := r.find("campaign-generate"); s != nil && s.Skipped == "" && s.Campaign != nil {
		t := target{Scenario: fmt.Sprintf("%s codes generated, progress visible", group(int64(s.Campaign.Codes))), Want: "<= 30 s (1,000,000 codes)"}
		t.Measured = fmt.Sprintf("%.1f s (%s codes/s, %d progress polls)", s.Campaign.ReadySec, group(int64(s.Throughput)), len(s.Campaign.Progress))
		if s.Campaign.Codes == 1_000_000 {
			t.Met = met(s.Campaign.ReadySec <= 30 && s.OK)
		}
		r.Targets = append(r.Targets, t)
	}
	if s := r.find("campaign-export"); s != nil && s.Skipped == "" && s.Campaign != nil {
		t := target{Scenario: fmt.Sprintf("export of %s codes, memory flat", group(int64(s.Campaign.Codes))), Want: "<= 10 s (1,000,000 codes)"}
		t.Measured = fmt.Sprintf("%.1f s; server VmRSS %.0f -> at most %.0f MiB", s.Campaign.ExportSec, s.Campaign.RSSBeforeMiB, s.Campaign.RSSPeakMiB)
		if s.Campaign.Codes == 1_000_000 {
			t.Met = met(s.Campaign.ExportSec <= 10 && s.OK)
		}
		r.Targets = append(r.Targets, t)
	}
}

// campaignMarkdown is the campaign rows' table.
func (r *report) campaignMarkdown(b *strings.Builder) {
	var rows []*scenarioResult
	for _, s := range r.Scenarios {
		if isCampaignRow(s) {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nCampaigns of unique codes (the server's own process; the figures are the API's, from outside):\n\n| row | codes | seconds | per second | server VmRSS MiB (before -> peak) | check |\n| --- | ---: | ---: | ---: | ---: | --- |\n")
	for _, s := range rows {
		if s.Skipped != "" || s.Campaign == nil {
			fmt.Fprintf(b, "| %s | | %s | | | |\n", s.Title, s.Skipped)
			continue
		}
		rss := ""
		if s.Campaign.RSSPeakMiB > 0 {
			rss = fmt.Sprintf("%.0f -> %.0f", s.Campaign.RSSBeforeMiB, s.Campaign.RSSPeakMiB)
		}
		fmt.Fprintf(b, "| %s | %s | %.2f | %s | %s | %s |\n", s.Title, group(int64(s.Campaign.Codes)), s.Seconds, group(int64(s.Throughput)), rss, checkSummary(s))
	}
}
