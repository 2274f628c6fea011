package tools

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// TestTrigger: with response_format.trigger the output is free text that
// does not start with the trigger, or the trigger and a valid document;
// tokens that would run past the trigger are masked, and Finish validates
// only a triggered document.
func TestTrigger(t *testing.T) {
	t.Parallel()
	rf := &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Trigger: "<b>",
		Schema: []byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":4}},"required":["name"],"additionalProperties":false}`)}
	set, err := Compile(nil, rf, fake, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		want bool
	}{
		{"", true},
		{"hello world", true},
		{"<", true}, // text that is a prefix of the trigger
		{"x<b>oops", true},
		{"<i>", true},
		{`<b>{"name":"ab"}`, true},
		{`<b> {"name":"ab"}`, true},
		{`<b>{"name":"abcde"}`, false},
		{`<b>{"name":"ab"`, false},
		{`<b>hello`, false},
		{`<b>{"name":"ab"} `, false},
	} {
		ok, err := feed(set.NewRun(), set.vi, encodeGreedy(fake, c.in), true)
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.want {
			t.Errorf("%q: got %v, want %v", c.in, ok, c.want)
		}
	}

	// A token running past the trigger's end is masked; spelled on a token
	// boundary the call goes on.
	long, err := Compile(nil, &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Trigger: "<", Schema: rf.Schema}, fake, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	r := long.NewRun()
	mask := make([]uint64, long.vi.Words)
	if _, err := r.Mask(mask); err != nil {
		t.Fatal(err)
	}
	if vocab.MaskHas(mask, fake.id("<b>")) || !vocab.MaskHas(mask, fake.id("<")) || !vocab.MaskHas(mask, fake.id("hello")) || !vocab.MaskHas(mask, 0) {
		t.Fatal("undecided mask: want <b> masked, < hello and EOG allowed")
	}
	if err := r.Accept(fake.id("<")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Mask(mask); err != nil {
		t.Fatal(err)
	}
	if vocab.MaskHas(mask, fake.id("hello")) || !vocab.MaskHas(mask, fake.id("{\"")) || vocab.MaskHas(mask, 0) {
		t.Fatal("after the trigger: want the grammar's mask")
	}

	// Sampled outputs that take the trigger end valid, or stay free text.
	rng := rand.New(rand.NewSource(3))
	calls := 0
	for i := 0; i < 200; i++ {
		r := set.NewRun()
		prefix := ""
		if i%2 == 0 {
			prefix = "<b>"
			for _, id := range encodeGreedy(fake, prefix) {
				if err := r.Accept(id); err != nil {
					t.Fatal(err)
				}
			}
		}
		out, r := generateFrom(t, set, r, rng, 60, `"}`)
		if !r.CanEnd() {
			continue
		}
		if _, err := r.Finish(); err != nil {
			t.Errorf("%q: %v", prefix+out, err)
		}
		if strings.HasPrefix(prefix+out, "<b>") {
			calls++
		}
	}
	if calls == 0 {
		t.Error("no sampled call finished")
	}
}
