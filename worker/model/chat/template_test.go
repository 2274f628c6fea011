package chat

import (
	"errors"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	t.Parallel()
	user := func(s string) Message { return Message{Role: RoleUser, Content: s} }
	asst := func(s string) Message { return Message{Role: RoleAssistant, Content: s} }
	multi := []Message{user("Hi!"), asst(" Hello. "), user("  Bye\n")}
	tests := []struct {
		tmpl   string
		name   string
		system string
		msgs   []Message
		gen    bool
		want   string
	}{
		{tmpl: "llama2", name: "system and user", system: "S", msgs: []Message{user("Hi!")}, gen: true,
			want: "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nHi! [/INST]"},
		{tmpl: "llama2", name: "user only", msgs: []Message{user(" Hi! ")}, gen: true,
			want: "<s>[INST] Hi! [/INST]"},
		{tmpl: "llama2", name: "multi-turn", system: "S", msgs: multi, gen: true,
			want: "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nHi! [/INST] Hello. </s><s>[INST] Bye [/INST]"},
		{tmpl: "llama2", name: "leading space kept after system block", system: "S", msgs: []Message{user("  Hi")},
			want: "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n  Hi [/INST]"},
		{tmpl: "llama2", name: "system as first message", msgs: []Message{{Role: RoleSystem, Content: "S"}, user("Hi")},
			want: "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST]"},
		{tmpl: "llama2", name: "ends with assistant", msgs: []Message{user("Hi"), asst("Yo")}, gen: false,
			want: "<s>[INST] Hi [/INST] Yo </s>"},

		{tmpl: "llama3", name: "system and user", system: "S", msgs: []Message{user("Hi!")}, gen: true,
			want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{tmpl: "llama3", name: "multi-turn trimmed, no generation prompt", msgs: multi,
			want: "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"},

		{tmpl: "chatml", name: "system and user", system: "S", msgs: []Message{user("Hi!")}, gen: true,
			want: "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"},
		{tmpl: "chatml", name: "multi-turn verbatim", msgs: multi,
			want: "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n Hello. <|im_end|>\n" +
				"<|im_start|>user\n  Bye\n<|im_end|>\n"},
		{tmpl: "chatml", name: "system only with generation prompt", system: "S", gen: true,
			want: "<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\n"},

		{tmpl: "zephyr", name: "system and user", system: "S", msgs: []Message{user("Hi!")}, gen: true,
			want: "<|system|>\nS</s>\n<|user|>\nHi!</s>\n<|assistant|>\n"},
		{tmpl: "zephyr", name: "multi-turn", msgs: multi,
			want: "<|user|>\nHi!</s>\n<|assistant|>\n Hello. </s>\n<|user|>\n  Bye\n</s>\n"},

		{tmpl: "plain", name: "system and user", system: "S", msgs: []Message{user("Hi!")}, gen: true,
			want: "System: S\nUser: Hi!\nAssistant:"},
		{tmpl: "plain", name: "multi-turn", msgs: []Message{user("Hi!"), asst("Hello."), user("Bye")}, gen: true,
			want: "User: Hi!\nAssistant: Hello.\nUser: Bye\nAssistant:"},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			tp, err := Named(tt.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tp.Render(tt.system, tt.msgs, tt.gen)
			if err != nil {
				t.Fatalf("Render() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("Render() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tmpl      string
		name      string
		system    string
		msgs      []Message
		wantErr   error
		wantIndex int
	}{
		{tmpl: "chatml", name: "nothing", wantErr: ErrNoMessages},
		{tmpl: "llama3", name: "unknown role", msgs: []Message{{Role: "user"}, {Role: "robot"}},
			wantErr: ErrInvalidRole, wantIndex: 1},
		{tmpl: "plain", name: "empty role", msgs: []Message{{Role: ""}}, wantErr: ErrInvalidRole},
		{tmpl: "llama2", name: "two users", msgs: []Message{{Role: "user"}, {Role: "user"}},
			wantErr: ErrRoleOrder, wantIndex: 1},
		{tmpl: "llama2", name: "starts with assistant", msgs: []Message{{Role: "assistant"}},
			wantErr: ErrRoleOrder},
		{tmpl: "llama2", name: "system argument and system message", system: "S",
			msgs: []Message{{Role: "system"}, {Role: "user"}}, wantErr: ErrRoleOrder},
		{tmpl: "llama2", name: "late system", msgs: []Message{{Role: "user"}, {Role: "system"}},
			wantErr: ErrRoleOrder, wantIndex: 1},
		{tmpl: "llama2", name: "system only", system: "S", wantErr: ErrRoleOrder, wantIndex: -1},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			tp, err := Named(tt.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tp.Render(tt.system, tt.msgs, true)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Render() error = %v, want %v", err, tt.wantErr)
			}
			var me *MessageError
			if errors.As(err, &me) && me.Index != tt.wantIndex {
				t.Errorf("MessageError.Index = %d, want %d (%v)", me.Index, tt.wantIndex, err)
			}
		})
	}
}

func TestMessageErrorText(t *testing.T) {
	t.Parallel()
	tp, _ := Named("llama2")
	_, err := tp.Render("", []Message{{Role: "user"}, {Role: "user"}}, true)
	want := `chat: invalid message order: llama2 template, message 1 (role "user"): roles must alternate user, assistant, user, …; want assistant`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestZeroTemplateIsPlain(t *testing.T) {
	t.Parallel()
	var tp Template
	if tp.Name() != "plain" {
		t.Errorf("zero Template name = %q, want plain", tp.Name())
	}
}

// TestMarkersConsistent checks AddsBOS and StopStrings against what each
// template renders: BOS text at the start exactly when AddsBOS says so, and
// the first stop string following an assistant turn.
func TestMarkersConsistent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tmpl    string
		bos     string
		addsBOS bool
	}{
		{tmpl: "llama2", bos: "<s>", addsBOS: true},
		{tmpl: "llama3", bos: "<|begin_of_text|>", addsBOS: true},
		{tmpl: "chatml", bos: "<s>", addsBOS: false},
		{tmpl: "zephyr", bos: "<s>", addsBOS: false},
		{tmpl: "plain", bos: "<s>", addsBOS: false},
		{tmpl: "llama3.1", bos: "<|begin_of_text|>", addsBOS: true},
		{tmpl: "qwen2.5", bos: "<s>", addsBOS: false},
		{tmpl: "qwen3", bos: "<s>", addsBOS: false},
		{tmpl: "gemma", bos: "<bos>", addsBOS: true},
		{tmpl: "mistral-nemo", bos: "<s>", addsBOS: true},
		{tmpl: "phi3", bos: "<s>", addsBOS: false},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			t.Parallel()
			tp, err := Named(tt.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if tp.AddsBOS() != tt.addsBOS {
				t.Errorf("AddsBOS() = %v, want %v", tp.AddsBOS(), tt.addsBOS)
			}
			out, err := tp.Render("", []Message{
				{Role: RoleUser, Content: "q"}, {Role: RoleAssistant, Content: "REPLY"}, {Role: RoleUser, Content: "q2"},
			}, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.HasPrefix(out, tt.bos); got != tt.addsBOS {
				t.Errorf("rendered %q starts with %q = %v, want %v", out, tt.bos, got, tt.addsBOS)
			}
			stops := tp.StopStrings()
			if len(stops) == 0 {
				t.Fatal("StopStrings() is empty")
			}
			after := strings.TrimPrefix(out[strings.Index(out, "REPLY")+len("REPLY"):], " ")
			if !strings.HasPrefix(after, stops[0]) {
				t.Errorf("assistant turn ends %q, want it to start with stop %q", after, stops[0])
			}
			stops[0] = "changed"
			if tp.StopStrings()[0] == "changed" {
				t.Error("StopStrings() shares its slice between calls")
			}
		})
	}
}
