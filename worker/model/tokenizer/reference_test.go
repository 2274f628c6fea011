package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// storiesReference is the part of stories260K/reference.json these tests
// read (see that folder's README.md).
type storiesReference struct {
	Cases []struct {
		Name            string   `json:"name"`
		Prompt          string   `json:"prompt"`
		PromptIDs       []int32  `json:"prompt_ids"`
		GeneratedIDs    []int32  `json:"generated_ids"`
		GeneratedPieces []string `json:"generated_pieces"`
		GeneratedText   string   `json:"generated_text"`
		FullText        string   `json:"full_text"`
		LlamaCpp        struct {
			PromptIDs []int32 `json:"prompt_ids"`
		} `json:"llama_cpp"`
	} `json:"cases"`
	LongCases []struct {
		Name          string  `json:"name"`
		GeneratedIDs  []int32 `json:"generated_ids"`
		GeneratedText string  `json:"generated_text"`
		FirstBOSIndex int     `json:"first_bos_index"`
	} `json:"long_cases"`
	TokenizerCases []tokenizerCase `json:"tokenizer_cases"`
}

// tokenizerCase is a text and its ids under run.c encode(text, bos=1, eos=0),
// which equal llama.cpp's with add_special.
type tokenizerCase struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

func readJSON(t *testing.T, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(sharedPath(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// checkTokenizerCases encodes every case with AddSpecial and compares, and
// checks that decoding gives the text back.
func checkTokenizerCases(t *testing.T, tok *Tokenizer, cases []tokenizerCase) {
	t.Helper()
	for _, c := range cases {
		got := tok.Encode(c.Text, EncodeOptions{AddSpecial: true})
		if !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q):\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if back := tok.Decode(c.IDs); back != c.Text {
			t.Errorf("Decode(%v) = %q, want %q", c.IDs, back, c.Text)
		}
	}
}

func TestStories260KReference(t *testing.T) {
	t.Parallel()
	tok := loadShared(t, stories)
	var ref storiesReference
	readJSON(t, storiesRef, &ref)
	if len(ref.Cases) != 6 || len(ref.TokenizerCases) != 9 || len(ref.LongCases) != 1 {
		t.Fatalf("reference.json has %d cases, %d tokenizer cases, %d long cases; want 6, 9, 1",
			len(ref.Cases), len(ref.TokenizerCases), len(ref.LongCases))
	}

	t.Run("prompts", func(t *testing.T) {
		for _, c := range ref.Cases {
			got := tok.Encode(c.Prompt, EncodeOptions{AddSpecial: true})
			if !slices.Equal(got, c.PromptIDs) {
				t.Errorf("%s: Encode(%q):\n got %v\nwant %v", c.Name, c.Prompt, got, c.PromptIDs)
			}
			if !slices.Equal(c.LlamaCpp.PromptIDs, c.PromptIDs) {
				t.Errorf("%s: reference llama.cpp ids %v differ from run.c's", c.Name, c.LlamaCpp.PromptIDs)
			}
		}
	})

	t.Run("tokenizer_cases", func(t *testing.T) {
		checkTokenizerCases(t, tok, ref.TokenizerCases)
	})

	// generated_text is run.c's decoding of the generated ids after the
	// prompt; full_text that of the prompt (after BOS) and the generated ids.
	t.Run("generated_text", func(t *testing.T) {
		for _, c := range ref.Cases {
			all := slices.Concat(c.PromptIDs, c.GeneratedIDs)
			if got := tok.Decode(all); got != c.FullText {
				t.Errorf("%s: Decode(prompt+generated) = %q\nwant %q", c.Name, got, c.FullText)
			}
			d := tok.NewDecoder()
			var prompt strings.Builder
			for _, id := range c.PromptIDs {
				prompt.WriteString(d.Add(id))
			}
			var gen strings.Builder
			for _, id := range c.GeneratedIDs {
				gen.WriteString(d.Add(id))
			}
			gen.WriteString(d.Flush())
			if prompt.String() != c.Prompt {
				t.Errorf("%s: streamed prompt %q, want %q", c.Name, prompt.String(), c.Prompt)
			}
			if gen.String() != c.GeneratedText {
				t.Errorf("%s: streamed generation %q\nwant %q", c.Name, gen.String(), c.GeneratedText)
			}
			for k, id := range c.GeneratedIDs {
				if tok.TokenType(id) != TypeNormal {
					continue // tok512 spells byte tokens "<0xXX>"
				}
				if p := string(tok.Piece(id)); p != c.GeneratedPieces[k] {
					t.Errorf("%s: Piece(%d) = %q, want %q", c.Name, id, p, c.GeneratedPieces[k])
				}
			}
		}
	})

	// The long case generates BOS mid-way; run.c prints it as its tok512
	// piece "\n<s>\n", Decode as nothing (a control token). The token after
	// it loses its leading space in both.
	t.Run("long_case", func(t *testing.T) {
		lc := ref.LongCases[0]
		if lc.GeneratedIDs[lc.FirstBOSIndex] != tok.BOS() {
			t.Fatalf("generated_ids[%d] = %d, want BOS %d", lc.FirstBOSIndex, lc.GeneratedIDs[lc.FirstBOSIndex], tok.BOS())
		}
		want := strings.ReplaceAll(lc.GeneratedText, "\n<s>\n", "")
		if got := tok.Decode(slices.Concat([]int32{tok.BOS()}, lc.GeneratedIDs)); got != want {
			t.Errorf("Decode(BOS + generated) =\n%q\nwant\n%q", got, want)
		}
	})
}

func TestLlama2TinyRandomReference(t *testing.T) {
	t.Parallel()
	tok := loadShared(t, tinyLlama2)
	var ref struct {
		TokenizerCases []tokenizerCase `json:"tokenizer_cases"`
	}
	readJSON(t, tinyLlamaRef, &ref)
	if len(ref.TokenizerCases) != 15 {
		t.Fatalf("reference.json has %d tokenizer cases, want 15", len(ref.TokenizerCases))
	}
	checkTokenizerCases(t, tok, ref.TokenizerCases)
}
