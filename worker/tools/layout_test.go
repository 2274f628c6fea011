package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// byteID is the fake vocabulary's single-byte token for b.
func byteID(b byte) int32 { return int32(b) + 1 }

// maskAfter feeds text to a fresh run of set one byte token at a time,
// each checked against the mask, and returns the mask after it.
func maskAfter(t *testing.T, set *Set, text string) []uint64 {
	t.Helper()
	r := set.NewRun()
	mask := make([]uint64, set.vi.Words)
	for i := 0; i < len(text); i++ {
		if _, err := r.Mask(mask); err != nil {
			t.Fatal(err)
		}
		if !vocab.MaskHas(mask, byteID(text[i])) {
			t.Fatalf("%q: byte %q refused after %q", text, text[i], text[:i])
		}
		if err := r.Accept(byteID(text[i])); err != nil {
			t.Fatalf("%q: accept %q: %v", text, text[i], err)
		}
	}
	if _, err := r.Mask(mask); err != nil {
		t.Fatal(err)
	}
	return mask
}

// accepts reports whether text, fed byte by byte with every byte checked
// against the mask, is a whole document the set accepts.
func accepts(t *testing.T, set *Set, text string) bool {
	t.Helper()
	r := set.NewRun()
	mask := make([]uint64, set.vi.Words)
	for i := 0; i < len(text); i++ {
		if _, err := r.Mask(mask); err != nil {
			t.Fatal(err)
		}
		if !vocab.MaskHas(mask, byteID(text[i])) {
			return false
		}
		if r.Accept(byteID(text[i])) != nil {
			return false
		}
	}
	if _, err := r.Mask(mask); err != nil {
		t.Fatal(err)
	}
	return vocab.MaskHas(mask, set.vi.EOG[0]) && r.CanEnd()
}

func jsonSpec(schema string, params map[string]any) contracts.Tool {
	p := map[string]any{"schema": json.RawMessage(schema)}
	for k, v := range params {
		p[k] = v
	}
	return tool(contracts.ToolJSONValidator, p)
}

// TestCompactByDefault: no whitespace token after '{', ',', ':' or '['
// by default (nor after a value); whitespace=pretty allows it, bounded.
func TestCompactByDefault(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"string"}}}}`
	compact := mustCompile(t, fake, Budget{}, jsonSpec(schema, nil))
	explicit := mustCompile(t, fake, Budget{}, jsonSpec(schema, map[string]any{"whitespace": "compact"}))
	pretty := mustCompile(t, fake, Budget{}, jsonSpec(schema, map[string]any{"whitespace": "pretty"}))
	spaces := []int32{byteID(' '), byteID('\n'), byteID('\t'), byteID('\r'), fake.id(" world"), fake.id(" 11")}
	for _, prefix := range []string{`{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `{"a":1,"b":`, `{"a":1,"b":[`, `{"a":1,"b":["x"`, `{"a":1,"b":["x",`, `{"a":1,"b":["x"]`} {
		for _, set := range []*Set{compact, explicit} {
			mask := maskAfter(t, set, prefix)
			for _, id := range spaces {
				if vocab.MaskHas(mask, id) {
					t.Errorf("compact: %q allowed after %q", fake.pieces[id], prefix)
				}
			}
		}
		mask := maskAfter(t, pretty, prefix)
		if !vocab.MaskHas(mask, byteID(' ')) || !vocab.MaskHas(mask, byteID('\n')) {
			t.Errorf("pretty: whitespace refused after %q", prefix)
		}
	}
	doc := "{\n  \"a\": 1,\n  \"b\": [\n    \"x\"\n  ]\n}"
	if accepts(t, compact, doc) {
		t.Errorf("compact accepts a pretty-printed document")
	}
	if !accepts(t, pretty, doc) {
		t.Errorf("pretty refuses a pretty-printed document")
	}
	if !accepts(t, compact, `{"a":1,"b":["x"]}`) || !accepts(t, pretty, `{"a":1,"b":["x"]}`) {
		t.Errorf("a compact document is refused")
	}
	// Whitespace runs stay bounded under pretty.
	if accepts(t, pretty, "{"+string(make([]byte, 0))+fmt.Sprintf("%65s", "")+"}") {
		t.Errorf("pretty accepts a run of 65 spaces")
	}
	// A space may lead the document (SentencePiece's "▁{"), not trail it.
	if !accepts(t, compact, ` {"a":1}`) || accepts(t, compact, `{"a":1} `) {
		t.Errorf("leading or trailing whitespace handled wrongly")
	}
	// One space, no more and no newline: a small model otherwise spends
	// tokens on "  \n " before the document.
	for _, lead := range []string{"  ", "\n", " \n", "\t"} {
		if accepts(t, compact, lead+`{"a":1}`) {
			t.Errorf("compact accepts %q before the document", lead)
		}
	}
}

// TestWhitespaceParamErrors: an unknown whitespace or a bad cap is a
// request error naming the param.
func TestWhitespaceParamErrors(t *testing.T) {
	t.Parallel()
	for _, params := range []map[string]any{{"whitespace": "loose"}, {"whitespace": 3}, {"max_string_length": -1}, {"max_string_length": "ten"}} {
		_, err := Compile([]contracts.Tool{jsonSpec(`{"type":"string"}`, params)}, nil, fake, Budget{})
		var ce *contracts.Error
		if !errors.As(err, &ce) || ce.Code != contracts.CodeInvalidRequest {
			t.Errorf("%v: got %v, want invalid_request", params, err)
		}
	}
	// response_format carries the same options.
	rf := &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(`{"type":"object"}`),
		Whitespace: contracts.WhitespacePretty, MaxStringLength: 3}
	set, err := Compile(nil, rf, fake, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if !vocab.MaskHas(maskAfter(t, set, `{`), byteID(' ')) {
		t.Errorf("response_format whitespace pretty not applied")
	}
	if vocab.MaskHas(maskAfter(t, set, `{"abc`), byteID('d')) {
		t.Errorf("response_format max_string_length not applied to keys")
	}
}

// TestIntegerForm: an integer takes no fraction and no exponent, bounded
// or not; a number still does.
func TestIntegerForm(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{
		`{"type":"integer"}`,
		`{"type":"integer","minimum":0,"maximum":100}`,
		`{"type":"integer","exclusiveMinimum":-5,"multipleOf":3}`,
		`{"type":"number","multipleOf":2}`,
	} {
		set := mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"object","properties":{"n":`+schema+`}}`, nil))
		mask := maskAfter(t, set, `{"n":6`)
		for _, c := range []byte(".eE") {
			if vocab.MaskHas(mask, byteID(c)) {
				t.Errorf("%s: %q allowed after an integer's digits", schema, c)
			}
		}
		if !vocab.MaskHas(mask, byteID('}')) {
			t.Errorf("%s: the integer cannot end", schema)
		}
		// Sampled outputs decode into an int.
		rng := rand.New(rand.NewSource(3))
		for i := 0; i < 20; i++ {
			out, r := generate(t, set, rng, 40, "}")
			if !r.CanEnd() {
				continue
			}
			var v struct{ N *int }
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Errorf("%s: %q does not decode into an int: %v", schema, out, err)
			}
		}
	}
	num := mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"number","minimum":0}`, nil))
	mask := maskAfter(t, num, `6`)
	if !vocab.MaskHas(mask, byteID('.')) {
		t.Errorf("number: '.' refused after 6")
	}
}

// TestNumberDigits: under the masks, a number takes no more digits than
// int64 and float64 hold (an integer is an int64, another number has at
// most 17 digits), and a number equal to an excluded bound never takes the
// zero that would leave it no way to end. The schema is the OCR layout of
// the incident (pages, regions, lines, words, bbox numbers with
// exclusiveMinimum 0), where a sampled model wrote "w":0. and 38 zeros and
// then nothing could follow.
func TestNumberDigits(t *testing.T) {
	t.Parallel()
	layout := `{"type":"object","required":["pages"],"properties":{"pages":{"type":"array","items":{"type":"object","properties":{` +
		`"regions":{"type":"array","items":{"type":"object","properties":{"lines":{"type":"array","items":{"type":"object","properties":{` +
		`"words":{"type":"array","items":{"type":"object","required":["text","bbox"],"properties":{"text":{"type":"string"},` +
		`"bbox":{"type":"object","required":["x","y","w","h"],"properties":{"x":{"type":"number","minimum":0},"y":{"type":"number","minimum":0},` +
		`"w":{"type":"number","exclusiveMinimum":0},"h":{"type":"number","exclusiveMinimum":0}}}}}}}}}}}}}}}}}`
	set := mustCompile(t, fake, Budget{}, jsonSpec(layout, nil))
	r := set.NewRun()
	mask := make([]uint64, set.vi.Words)
	out := `{"pages":[{"regions":[{"lines":[{"words":[{"text":"a","bbox":{"x":0,"y":0,"w":0.`
	for i := 0; ; i++ {
		if _, err := r.Mask(mask); err != nil {
			t.Fatal(err)
		}
		c := byte('0')
		if i < len(out) {
			c = out[i]
		}
		if !vocab.MaskHas(mask, byteID(c)) {
			if i < len(out) {
				t.Fatalf("%q refused after %q", c, out[:i])
			}
			break
		}
		if err := r.Accept(byteID(c)); err != nil {
			t.Fatal(err)
		}
		if i >= len(out) {
			out += "0"
		}
		if len(out) > 200 {
			t.Fatalf("zeros without end: %q", out)
		}
	}
	if !vocab.MaskHas(mask, byteID('1')) {
		t.Fatalf("after %q: no zero and no other digit may follow (a dead end)", out)
	}
	if zeros := len(out) - strings.LastIndex(out, ".") - 1; zeros != 16 {
		t.Errorf("%d zeros taken, want 16 (17 digits, the last not a zero)", zeros)
	}

	digitsAfter := func(set *Set, prefix string) string {
		m := maskAfter(t, set, prefix)
		var d []byte
		for c := byte('0'); c <= '9'; c++ {
			if vocab.MaskHas(m, byteID(c)) {
				d = append(d, c)
			}
		}
		return string(d)
	}
	integer := mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"object","properties":{"quantity":{"type":"integer"}}}`, nil))
	number := mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"object","properties":{"n":{"type":"number"}}}`, nil))
	bounded := mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"object","properties":{"n":{"type":"number","minimum":-1}}}`, nil))
	for _, c := range []struct {
		set          *Set
		prefix, want string
	}{
		{integer, `{"quantity":922337203685477580`, "01234567"},
		{integer, `{"quantity":-922337203685477580`, "012345678"},
		{integer, `{"quantity":9223372036854775807`, ""},
		{integer, `{"quantity":9100000000000000000`, ""},
		{integer, `{"quantity":1000000000000000000`, ""},
		{number, `{"n":0.1234567890123456`, "0123456789"},
		{number, `{"n":0.12345678901234567`, ""},
		{number, `{"n":12345678901234567`, ""},
		{number, `{"n":1.5e12`, ""},
		{bounded, `{"n":0.00000000000000000`, ""},
		{bounded, `{"n":1234567890123456`, "0123456789"},
		{bounded, `{"n":12345678901234567`, ""},
	} {
		if got := digitsAfter(c.set, c.prefix); got != c.want {
			t.Errorf("after %s: digits %q allowed, want %q", c.prefix, got, c.want)
		}
		if !vocab.MaskHas(maskAfter(t, c.set, c.prefix), byteID('}')) {
			t.Errorf("after %s: the number cannot end", c.prefix)
		}
	}
}

// TestStringCap: max_string_length caps strings and property names the
// schema leaves unbounded; a schema's own maxLength holds with or
// without it, and a minLength above the cap wins.
func TestStringCap(t *testing.T) {
	t.Parallel()
	capped := func(schema string, n int) *Set {
		return mustCompile(t, fake, Budget{}, jsonSpec(schema, map[string]any{"max_string_length": n}))
	}
	cases := []struct {
		name   string
		set    *Set
		prefix string // at the length limit
	}{
		{"cap on a free string", capped(`{"type":"string"}`, 5), `"abcde`},
		{"schema maxLength", mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"string","maxLength":3}`, nil)), `"abc`},
		{"schema maxLength wins over a cap", capped(`{"type":"string","maxLength":8}`, 5), `"abcdefgh`},
		{"minLength above the cap", capped(`{"type":"string","minLength":7}`, 5), `"abcdefg`},
		{"cap on a free key", capped(`{"type":"object"}`, 3), `{"abc`},
		{"cap on array items", capped(`{"type":"array","items":{"type":"string"}}`, 2), `["ab`},
		{"multi-byte characters count once", capped(`{"type":"string"}`, 2), `"éé`},
	}
	for _, c := range cases {
		mask := maskAfter(t, c.set, c.prefix)
		for _, id := range []int32{byteID('x'), fake.id("ab"), fake.id("hello"), fake.id("é"), byteID(0xc3)} {
			if vocab.MaskHas(mask, id) {
				t.Errorf("%s: %q allowed after %q", c.name, fake.pieces[id], c.prefix)
			}
		}
		if !vocab.MaskHas(mask, byteID('"')) {
			t.Errorf("%s: the string cannot end after %q", c.name, c.prefix)
		}
	}
	// One character below the cap, a one-character token fits and a
	// two-character one does not.
	mask := maskAfter(t, capped(`{"type":"string"}`, 5), `"abcd`)
	if !vocab.MaskHas(mask, byteID('x')) || vocab.MaskHas(mask, fake.id("ab")) {
		t.Errorf("cap: wrong tokens one character below it")
	}
	// Known property names are not capped.
	set := capped(`{"type":"object","properties":{"example":{"type":"string"}},"additionalProperties":false}`, 2)
	if !accepts(t, set, `{"example":"ab"}`) {
		t.Errorf("cap: a known property name longer than the cap is refused")
	}
	// ... nor when its name comes as one token.
	set = capped(`{"type":"object","properties":{"name":{"type":"string"}}}`, 2)
	if ok, err := feed(set.NewRun(), set.vi, encodeGreedy(fake, `{"name":"ab"}`), true); err != nil || !ok {
		t.Errorf("cap: a known property name longer than the cap is refused as a token (%v)", err)
	}
}

// TestBoundedIntegerExact: with minimum/maximum (exclusive or not) and
// multipleOf, every value in range is reachable byte by byte under the
// masks, and no value out of range is.
func TestBoundedIntegerExact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		schema string
		ok     func(v int64) bool
		lo, hi int64 // the values tried
	}{
		{`{"type":"integer","minimum":0,"maximum":100}`, func(v int64) bool { return v >= 0 && v <= 100 }, -150, 1200},
		{`{"type":"integer","minimum":-120,"maximum":-7}`, func(v int64) bool { return v >= -120 && v <= -7 }, -1300, 100},
		{`{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":250}`, func(v int64) bool { return v > -3 && v < 250 }, -400, 2600},
		{`{"type":"integer","minimum":15,"maximum":2015,"multipleOf":5}`, func(v int64) bool { return v >= 15 && v <= 2015 && v%5 == 0 }, -30, 2100},
		{`{"type":"integer","minimum":37}`, func(v int64) bool { return v >= 37 }, -50, 500},
		{`{"type":"integer","maximum":-2}`, func(v int64) bool { return v <= -2 }, -500, 50},
		{`{"type":"integer","minimum":2.5,"maximum":7.5}`, func(v int64) bool { return v >= 3 && v <= 7 }, -20, 100},
		{`{"type":"integer","minimum":1000000000000000,"maximum":1000000000000040}`,
			func(v int64) bool { return v >= 1e15 && v <= 1e15+40 }, 1e15 - 60, 1e15 + 60},
	}
	for _, c := range cases {
		set := mustCompile(t, fake, Budget{}, jsonSpec(c.schema, nil))
		for v := c.lo; v <= c.hi; v++ {
			text := strconv.FormatInt(v, 10)
			if got := accepts(t, set, text); got != c.ok(v) {
				t.Errorf("%s: %s accepted %v, want %v", c.schema, text, got, c.ok(v))
			}
		}
		// Forms no integer takes.
		for _, text := range []string{"-0", "05", "7.0", "1e1", "-"} {
			v, err := strconv.ParseInt(text, 10, 64)
			want := err == nil && text != "05" && c.ok(v)
			if got := accepts(t, set, text); got != want {
				t.Errorf("%s: %q accepted %v, want %v", c.schema, text, got, want)
			}
		}
	}
}

// TestPatternFitsMaxLength: a pattern whose end needs characters the
// maxLength would not leave refuses, in the mask, the character that
// would use them up: "[a-z]+\.[a-z]+" under maxLength 6 takes at most
// four letters before its dot (the dot and a letter still fit), and the
// string always ends. Without it "aaaaaa" was a dead end; so was a
// backslash whose every escape used them up.
func TestPatternFitsMaxLength(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"string","pattern":"^[a-z]+\\.[a-z]+$","maxLength":6}`, nil))
	if !accepts(t, set, `"aaaa.b"`) || !accepts(t, set, `"a.bcde"`) {
		t.Fatal("a string that fits is refused")
	}
	if m := maskAfter(t, set, `"aaaa`); vocab.MaskHas(m, byteID('a')) || !vocab.MaskHas(m, byteID('.')) {
		t.Errorf("after four letters: a fifth letter allowed %v (it leaves no room for the dot and a letter), the dot allowed %v",
			vocab.MaskHas(m, byteID('a')), vocab.MaskHas(m, byteID('.')))
	}
	// Multi-byte characters count once: "é" is not in the pattern, but a
	// pattern that takes it needs one character for it, not two.
	set = mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"string","pattern":"^é+x$","maxLength":3}`, nil))
	if !accepts(t, set, `"ééx"`) || accepts(t, set, `"éééx"`) {
		t.Error("a two-byte character counted wrongly")
	}
	if m := maskAfter(t, set, `"éé`); vocab.MaskHas(m, byteID(0xC3)) {
		t.Error("a third é allowed: it leaves no room for the x")
	}
	// An escape is a character too: after two letters, "\/" would leave
	// no room for the dot and a letter, so the backslash is refused.
	set = mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"string","pattern":"^[a-z/]+\\.[a-z]+$","maxLength":4}`, nil))
	if !accepts(t, set, `"a\/.b"`) {
		t.Error("an escape that fits is refused")
	}
	if m := maskAfter(t, set, `"aa`); vocab.MaskHas(m, byteID('\\')) {
		t.Error("a backslash allowed after two letters: no escape leaves room for the dot and a letter")
	}
}

// TestRecheckRetries: a document that passes the mask but fails the final
// validation of a keyword the mask leaves to it (uniqueItems of objects)
// is generated again, MaxRechecks times, before Finish fails the job; a
// document that validates is not.
func TestRecheckRetries(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, jsonSpec(`{"type":"array","items":{"type":"object"},"uniqueItems":true}`, nil))
	feed := func(r *Run, doc string) {
		t.Helper()
		for i := 0; i < len(doc); i++ {
			if err := r.Accept(byteID(doc[i])); err != nil {
				t.Fatalf("%q: %v", doc, err)
			}
		}
	}
	r := set.NewRun()
	for i := range MaxRechecks {
		feed(r, `[{},{}]`)
		if !r.Retry(`[{},{}]`) {
			t.Fatalf("attempt %d: a document failing uniqueItems is not retried", i+1)
		}
		r.Reset()
	}
	feed(r, `[{},{}]`)
	if r.Retry(`[{},{}]`) {
		t.Fatalf("retried past MaxRechecks")
	}
	if _, err := r.Finish(); err == nil {
		t.Fatal("the last attempt fails uniqueItems, and Finish lets it through")
	}
	r = set.NewRun()
	feed(r, `[{},{"a":1}]`)
	if r.Retry(`[{},{"a":1}]`) {
		t.Fatal("a valid document is retried")
	}
	if _, err := r.Finish(); err != nil {
		t.Fatal(err)
	}
}
