package prompt_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/model/chat"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// stories opens the stories260K model's prompter, skipping when ../shared
// is absent.
func stories(t *testing.T) (*prompt.Prompter, string) {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "..", "shared", "models", "stories260K")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared model not present: %v", err)
	}
	p, err := prompt.Open(filepath.Join(dir, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, dir
}

// TestPromptReference: raw prompts tokenize to llama2.c's prompt ids,
// without the weights being loaded.
func TestPromptReference(t *testing.T) {
	t.Parallel()
	p, dir := stories(t)
	raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Name      string  `json:"name"`
			Prompt    string  `json:"prompt"`
			PromptIDs []int32 `json:"prompt_ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) == 0 {
		t.Fatal("no reference cases")
	}
	for _, c := range ref.Cases {
		ids, err := p.Prompt(c.Prompt, prompt.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !slices.Equal(ids, c.PromptIDs) {
			t.Errorf("%s: ids %v, want %v", c.Name, ids, c.PromptIDs)
		}
	}
}

func TestConversation(t *testing.T) {
	t.Parallel()
	p, _ := stories(t)
	if p.HasTemplate() {
		t.Fatal("stories260K has no chat template")
	}
	// A completion model continues the joined text.
	msgs := prompt.Messages([]contracts.Message{{Role: contracts.RoleUser, Content: "Once upon a time"}, {Role: contracts.RoleAssistant, Content: "there was"}})
	if msgs[1].Role != "assistant" || msgs[1].Content != "there was" {
		t.Fatalf("Messages: %+v", msgs)
	}
	got, err := p.Conversation("A story.", msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := p.Tokenizer.Encode("A story.\n\nOnce upon a time\n\nthere was", tokenizer.EncodeOptions{AddSpecial: true})
	if !slices.Equal(got, want) {
		t.Errorf("completion conversation %v, want %v", got, want)
	}
	// A named template renders the turns, with the generation prompt.
	tmpl, err := chat.Named("chatml")
	if err != nil {
		t.Fatal(err)
	}
	got, err = p.Prompt("hi", prompt.Options{Chat: true, System: "be brief", Template: &tmpl})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tmpl.Render("be brief", []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := p.Tokenizer.Encode(s, tokenizer.EncodeOptions{AddSpecial: !tmpl.AddsBOS(), ParseSpecial: true}); !slices.Equal(got, want) {
		t.Errorf("chatml prompt %v, want %v", got, want)
	}
	if _, err := p.Prompt("hi", prompt.Options{System: "x"}); !errors.Is(err, prompt.ErrSystemWithoutChat) {
		t.Errorf("system without chat: %v", err)
	}
}

// TestTooLong: a prompt is refused by its length alone only when it really
// cannot fit (its tokens would fill the context), and a megabyte of text
// is refused without being tokenized.
func TestTooLong(t *testing.T) {
	t.Parallel()
	p, _ := stories(t)
	if p.Context <= 0 {
		t.Fatalf("context %d: not read from the metadata", p.Context)
	}
	piece := p.Tokenizer.MaxPieceBytes()
	if piece < 2 || piece > 64 {
		t.Fatalf("longest piece %d bytes", piece)
	}
	words := []string{"the ", "dog ", "Once upon a time ", "x", "\n", "ünïcödé ", "a"}
	for n := (p.Context - 8) * piece; n <= (p.Context+8)*piece; n += piece / 2 {
		for _, w := range words {
			text := strings.Repeat(w, n/len(w)+1)[:n]
			ids, err := p.Prompt(text, prompt.Options{})
			if errors.Is(err, prompt.ErrTooLong) {
				// Refused: it would really not have fit.
				if all := p.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: true}); len(all) < p.Context {
					t.Fatalf("%d bytes of %q refused, but they are %d tokens of a %d context", n, w, len(all), p.Context)
				}
				continue
			}
			if err != nil || len(ids) == 0 {
				t.Fatalf("%d bytes of %q: %v", n, w, err)
			}
		}
	}
	_, err := p.Conversation("", prompt.Messages([]contracts.Message{{Role: contracts.RoleUser, Content: strings.Repeat("dog ", 1<<18)}}), nil)
	if !errors.Is(err, prompt.ErrTooLong) {
		t.Fatalf("a megabyte prompt: %v", err)
	}
	if ce := prompt.ContractError(err); ce.Code != contracts.CodePromptTooLong {
		t.Errorf("wire form %+v", ce)
	}
}
