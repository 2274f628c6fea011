package finance

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
)

// htmlTestGroup is a group costing total, all of it output.
func htmlTestGroup(key, total string, jobs int64) Group {
	d := decimal.RequireFromString(total)
	return Group{Key: key, Jobs: jobs, Cost: price.Breakdown{Output: d, Total: d}}
}

// htmlTestReport is a report with known amounts: a total of 0.13 USD, by
// model 0.065, 0.059 and 0.006, by priority low 0.1, high 0.018 (18 % of
// low) and normal 0.012, a bucket of zero cost, overlapping tags, and
// three daily rollups.
func htmlTestReport() *Report {
	d := decimal.RequireFromString
	r := &Report{
		Tenant: "acme", Currency: "USD",
		From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Total: Group{Jobs: 60, InputTokens: 123456, OutputTokens: 65432, CachedInputTokens: 2345, Cost: price.Breakdown{
			Input: d("0.04"), CachedInput: d("0.01"), Output: d("0.07"), TTFT: d("0.006"), Tool: d("0.004"), Total: d("0.13")}},
		ByModel:    []Group{htmlTestGroup("acme/large", "0.065", 20), htmlTestGroup("acme/medium", "0.059", 25), htmlTestGroup("acme/tiny", "0.006", 15)},
		ByPriority: []Group{htmlTestGroup("low", "0.1", 40), htmlTestGroup("high", "0.018", 5), htmlTestGroup("normal", "0.012", 15)},
		ByBucket:   []Group{htmlTestGroup("interactive", "0.09", 30), htmlTestGroup("batch-nightly-with-a-very-long-bucket-name", "0.04", 20), htmlTestGroup("free", "0", 10)},
		ByTag:      []Group{htmlTestGroup("team-a", "0.08", 30), htmlTestGroup("team-b", "0.07", 25)},
		Untagged:   htmlTestGroup("", "0.02", 10),
		Unrated:    3,
	}
	r.InvoiceTotal = price.DisplayAmount(r.Total.Cost.Total, r.Currency)
	for i, total := range []string{"0.03", "0.06", "0.04"} {
		r.Daily = append(r.Daily, ledger.DailyTotal{Tenant: "acme", Day: fmt.Sprintf("2026-11-%02d", i+1), Currency: "USD", Jobs: 20,
			Cost: price.Breakdown{Output: d(total), Total: d(total)}})
	}
	return r
}

// wantBars is the report's horizontal bars from the top of the page, as
// amounts (zero ones draw no bar and are left out).
func wantBars(r *Report) []decimal.Decimal {
	c := r.Total.Cost
	out := []decimal.Decimal{c.Input, c.CachedInput, c.EmbeddingInput, c.Output, c.TTFT, c.Tool}
	for _, gs := range [][]Group{r.ByModel, r.ByKind, r.ByPriority, r.ByBucket, r.ByTag, {r.Untagged}} {
		for _, g := range gs {
			out = append(out, g.Cost.Total)
		}
	}
	var bars []decimal.Decimal
	for _, a := range out {
		if a.IsPositive() {
			bars = append(bars, a)
		}
	}
	return bars
}

func renderReportHTML(t *testing.T, r *Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := r.Write(&buf, FormatHTML); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestReportHTMLContent(t *testing.T) {
	r := htmlTestReport()
	page := renderReportHTML(t, r)
	for _, bad := range []string{"<script", "http://", "https://", "<link", "src="} {
		if strings.Contains(page, bad) {
			t.Errorf("report HTML is not self-contained: has %q", bad)
		}
	}
	for _, want := range []string{
		"<title>zerolayer billing report: acme</title>", "2026-11-01 00:00 to 2026-12-01 00:00", "0.13 USD",
		"not yet rated", ">acme/large<", ">team-a<", ">(untagged)<", "0.02 USD · 15.4 %",
		"Cost by dimension", "Cost by model", "Cost by priority", "Cost by bucket", "Cost by tag", "Daily trend",
		// DisplayAmounts: 0.065, 0.059, 0.006 print as 0.06, 0.06, 0.01 (adding up to 0.13).
		"0.06 USD · 50.0 % · 20 jobs", "0.06 USD · 45.4 % · 25 jobs", "0.01 USD · 4.6 % · 15 jobs",
		"0.10 USD · 76.9 %", "0.02 USD · 13.8 %", "0.01 USD · 9.2 %",
		">batch-nightly-with-a-very-lon…<",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// The bars' widths, from the markup: one scale, the total is htmlBarW.
	rects := regexp.MustCompile(`<rect class="bar" x="(\d+)" y="\d+" width="([\d.]+)"`).FindAllStringSubmatch(page, -1)
	want := wantBars(r)
	if len(rects) != len(want) {
		t.Fatalf("%d bars, want %d", len(rects), len(want))
	}
	for i, m := range rects {
		w, _ := strconv.ParseFloat(m[2], 64)
		exp, _ := want[i].Div(r.Total.Cost.Total).Mul(decimal.NewFromInt(htmlBarW)).Float64()
		if m[1] != strconv.Itoa(htmlLabelW) || math.Abs(w-exp) > 0.1 {
			t.Errorf("bar %d at x=%s width %s, want x=%d width %.1f", i, m[1], m[2], htmlLabelW, exp)
		}
	}
	if n := strings.Count(page, `<rect class="day"`); n != 3 {
		t.Errorf("%d daily bars, want 3", n)
	}

	r.Daily, r.Unrated = nil, 0
	page = renderReportHTML(t, r)
	if !strings.Contains(page, "no daily rollups yet") || strings.Contains(page, `class="day"`) {
		t.Errorf("a report without rollups should say no daily rollups yet")
	}
	if strings.Contains(page, "not yet rated") {
		t.Errorf("a fully rated report says not yet rated")
	}
}

func TestReportHTMLRoundedAmounts(t *testing.T) {
	for _, cur := range []string{"USD", "JPY", "KWD"} {
		r := htmlTestReport()
		r.Currency = cur
		for i := range r.Daily {
			r.Daily[i].Currency = cur
		}
		// Amounts with many decimals, scaled so that JPY has some yen.
		scale := decimal.RequireFromString("1234.56789012")
		groups := []*Group{&r.Total, &r.Untagged}
		for _, gs := range [][]Group{r.ByModel, r.ByPriority, r.ByBucket, r.ByTag} {
			for i := range gs {
				groups = append(groups, &gs[i])
			}
		}
		for _, g := range groups {
			c := &g.Cost
			c.Input, c.CachedInput, c.Output, c.TTFT, c.Tool, c.Total = c.Input.Mul(scale), c.CachedInput.Mul(scale),
				c.Output.Mul(scale), c.TTFT.Mul(scale), c.Tool.Mul(scale), c.Total.Mul(scale)
		}
		for i := range r.Daily {
			r.Daily[i].Cost.Total = r.Daily[i].Cost.Total.Mul(scale)
		}
		page := renderReportHTML(t, r)
		text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, " ")
		places := price.MinorUnits(cur)
		// Every amount printed: a number followed by the currency.
		amounts := regexp.MustCompile(`(-?\d+(?:\.(\d+))?) `+cur).FindAllStringSubmatch(text, -1)
		if len(amounts) < 20 {
			t.Fatalf("%s: only %d amounts printed:\n%s", cur, len(amounts), text)
		}
		for _, m := range amounts {
			if len(m[2]) != int(places) {
				t.Errorf("%s: amount %q not fixed to %d decimals", cur, m[1], places)
			}
		}
		// And no number anywhere with more decimals than the minor unit
		// (shares have one decimal, coordinates at most one).
		if bad := regexp.MustCompile(fmt.Sprintf(`\d\.\d{%d,}`, max(places, 1)+1)).FindString(page); bad != "" {
			t.Errorf("%s: HTML has an amount with more than %d decimals: %q", cur, places, bad)
		}
	}
}

// pixelRun is a bar found on a screenshot: its extent in pixels.
type pixelRun struct{ x0, x1, y0, y1 int }

// findBars finds the bars of colour col in img: the maximal groups of
// consecutive pixel rows (horizontal) or columns (vertical) holding that
// colour, each with its extent.
func findBars(img image.Image, col [3]uint8, vertical bool) []pixelRun {
	b := img.Bounds()
	match := func(x, y int) bool {
		r, g, bl, _ := img.At(x, y).RGBA()
		near := func(v uint32, w uint8) bool { return math.Abs(float64(v>>8)-float64(w)) <= 6 }
		return near(r, col[0]) && near(g, col[1]) && near(bl, col[2])
	}
	outer, inner := b.Max.Y, b.Max.X
	if vertical {
		outer, inner = inner, outer
	}
	var runs []pixelRun
	var cur *pixelRun
	for o := 0; o < outer; o++ {
		lo, hi := -1, -1
		for i := 0; i < inner; i++ {
			x, y := i, o
			if vertical {
				x, y = o, i
			}
			if match(x, y) {
				if lo < 0 {
					lo = i
				}
				hi = i
			}
		}
		switch {
		case lo < 0:
			cur = nil
		case cur == nil:
			runs = append(runs, pixelRun{lo, hi + 1, o, o + 1})
			cur = &runs[len(runs)-1]
		default:
			cur.x0, cur.x1, cur.y1 = min(cur.x0, lo), max(cur.x1, hi+1), o+1
		}
	}
	return runs
}

func TestReportHTMLBarsInBrowser(t *testing.T) {
	bin := chromium(t)
	r := htmlTestReport()
	dir := t.TempDir()
	page, shot := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.png")
	if err := os.WriteFile(page, []byte(renderReportHTML(t, r)), 0o644); err != nil {
		t.Fatal(err)
	}
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1200,2400", "--hide-scrollbars",
		"--force-device-scale-factor=1", "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode the screenshot: %v", err)
	}

	// The horizontal bars: one per positive amount, top to bottom, all
	// starting at the same x, each amount / total × htmlBarW long.
	bars := findBars(img, [3]uint8{0x3b, 0x7d, 0xd8}, false)
	want := wantBars(r)
	if len(bars) != len(want) {
		t.Fatalf("found %d bars of %s on the screenshot (%s), want %d: %v", len(bars), htmlBarColor, shot, len(want), bars)
	}
	for i, b := range bars {
		exp, _ := want[i].Div(r.Total.Cost.Total).Mul(decimal.NewFromInt(htmlBarW)).Float64()
		if got := float64(b.x1 - b.x0); math.Abs(got-exp) > 2 {
			t.Errorf("bar %d (amount %s) is %v px long, want %.1f ± 2", i, want[i], got, exp)
		}
		if d := b.x0 - bars[0].x0; d < -1 || d > 1 {
			t.Errorf("bar %d starts at x=%d, the first at x=%d: the label column is not fixed", i, b.x0, bars[0].x0)
		}
		if h := b.y1 - b.y0; h < htmlBarH-1 || h > htmlBarH+1 {
			t.Errorf("bar %d is %d px thick, want %d", i, h, htmlBarH)
		}
	}
	// The 0.065 bar is longer than the 0.059 one, and high priority is
	// 18 % of low.
	if model0, model1 := bars[5], bars[6]; model0.x1-model0.x0 <= model1.x1-model1.x0 {
		t.Errorf("0.065 bar (%d px) not longer than 0.059 bar (%d px)", model0.x1-model0.x0, model1.x1-model1.x0)
	}
	low, high := float64(bars[8].x1-bars[8].x0), float64(bars[9].x1-bars[9].x0)
	if math.Abs(high-0.18*low) > 2 {
		t.Errorf("high priority bar %v px, want 18 %% of low's %v px", high, low)
	}

	// The daily trend: one vertical bar per day, its height the day's
	// total over the largest day's × htmlDailyH, on one baseline.
	days := findBars(img, [3]uint8{0xe0, 0x8a, 0x3c}, true)
	if len(days) != len(r.Daily) {
		t.Fatalf("found %d daily bars, want %d: %v", len(days), len(r.Daily), days)
	}
	mx := decimal.Zero
	for _, d := range r.Daily {
		mx = decimal.Max(mx, d.Cost.Total)
	}
	for i, d := range days {
		// Vertical runs: x0..x1 is the bar's height, y0..y1 its columns.
		exp, _ := r.Daily[i].Cost.Total.Div(mx).Mul(decimal.NewFromInt(htmlDailyH)).Float64()
		if got := float64(d.x1 - d.x0); math.Abs(got-exp) > 2 {
			t.Errorf("day %s is %v px tall, want %.1f ± 2", r.Daily[i].Day, got, exp)
		}
		if d.x1 != days[0].x1 {
			t.Errorf("day %s ends at y=%d, the first at y=%d: not on one baseline", r.Daily[i].Day, d.x1, days[0].x1)
		}
	}
}
