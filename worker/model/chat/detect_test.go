package chat

import (
	"errors"
	"strings"
	"testing"
)

// Template sources written for these tests in the style of the real ones:
// each carries the markers its family is recognised by.
const (
	srcLlama2 = `{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}` +
		`{% set rest = messages[1:] %}{% else %}{% set sys = false %}{% set rest = messages %}{% endif %}` +
		`{% for m in rest %}{% if loop.index0 == 0 and sys %}{% set c = '<<SYS>>\n' + sys + '\n<</SYS>>\n\n' + m['content'] %}` +
		`{% else %}{% set c = m['content'] %}{% endif %}{% if m['role'] == 'user' %}{{ bos_token + '[INST] ' + c.strip() + ' [/INST]' }}` +
		`{% else %}{{ ' ' + c.strip() + ' ' + eos_token }}{% endif %}{% endfor %}`
	srcLlama3 = `{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' ` +
		`+ m['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}` +
		`{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}`
	srcQwen = `{% for m in messages %}{% if loop.first and m['role'] != 'system' %}` +
		`{{ '<|im_start|>system\nBe helpful.<|im_end|>\n' }}{% endif %}` +
		`{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}` +
		`{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`
	srcSmolLM = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}" +
		"{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
	srcTinyLlama = "{% for m in messages %}\n{% if m['role'] == 'user' %}\n{{ '<|user|>\\n' + m['content'] + eos_token }}\n" +
		"{% elif m['role'] == 'system' %}\n{{ '<|system|>\\n' + m['content'] + eos_token }}\n" +
		"{% elif m['role'] == 'assistant' %}\n{{ '<|assistant|>\\n' + m['content'] + eos_token }}\n{% endif %}\n" +
		"{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
	srcZephyrLiteral = "{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + '</s>\\n' }}{% endfor %}" +
		"{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}{# <|user|> #}"
	srcPhi3 = "{% for m in messages %}{% if m['role'] == 'user' %}{{'<|user|>\\n' + m['content'] + '<|end|>\\n'}}" +
		"{% elif m['role'] == 'assistant' %}{{'<|assistant|>\\n' + m['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}{{ eos_token }}"
	srcMistral = "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}" +
		"{% else %}{{ m['content'] + eos_token }}{% endif %}{% endfor %}"
	srcGemma = "{{ bos_token }}{% for m in messages %}{{ '<start_of_turn>' + m['role'] + '\\n' + m['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
)

func TestDetect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tmpl    string
		want    string
		wantErr error
	}{
		{name: "empty", tmpl: "", want: "plain"},
		{name: "white space only", tmpl: " \n\t", want: "plain"},
		{name: "llama2", tmpl: srcLlama2, want: "llama2"},
		{name: "llama3", tmpl: srcLlama3, want: "llama3"},
		{name: "qwen chatml", tmpl: srcQwen, want: "chatml"},
		{name: "smollm chatml", tmpl: srcSmolLM, want: "chatml"},
		{name: "tinyllama zephyr", tmpl: srcTinyLlama, want: "zephyr"},
		{name: "zephyr with literal end marker", tmpl: srcZephyrLiteral, want: "zephyr"},
		{name: "phi3 is not zephyr", tmpl: srcPhi3, want: "phi3"},
		{name: "mistral is not llama2", tmpl: srcMistral, wantErr: ErrUnknownTemplate},
		{name: "gemma", tmpl: srcGemma, want: "gemma"},
		{name: "chatml with other reasoning rules", tmpl: "{{ '<|im_start|>' }}{{ '<think>\n' }}", wantErr: ErrUnknownTemplate},
		{name: "start header without eot", tmpl: "{{ '<|start_header_id|>' }}", wantErr: ErrUnknownTemplate},
		{name: "plain text", tmpl: "hello", wantErr: ErrUnknownTemplate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Detect(tt.tmpl)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Detect() error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && got.Name() != tt.want {
				t.Errorf("Detect() = %q, want %q", got.Name(), tt.want)
			}
		})
	}
}

func TestUnknownTemplateExcerpt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tmpl string
		want string
	}{
		{name: "short", tmpl: "  custom\n\tformat ", want: "custom format"},
		{name: "long is cut", tmpl: srcMistral, want: "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'us…"},
		{name: "cut counts runes", tmpl: strings.Repeat("é", 70), want: strings.Repeat("é", 60) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Detect(tt.tmpl)
			var ute *UnknownTemplateError
			if !errors.As(err, &ute) {
				t.Fatalf("Detect() error = %v, want *UnknownTemplateError", err)
			}
			if ute.Excerpt != tt.want {
				t.Errorf("Excerpt = %q, want %q", ute.Excerpt, tt.want)
			}
			if len(ute.Hash) != 16 {
				t.Errorf("Hash = %q, want 16 hex digits", ute.Hash)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "chatml") || !strings.Contains(err.Error(), ute.Hash) {
				t.Errorf("Error() = %q, want the excerpt and the template names", err.Error())
			}
		})
	}
}

func TestNamed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		want    string
		wantErr error
	}{
		{name: "llama2", want: "llama2"},
		{name: "llama3", want: "llama3"},
		{name: " ChatML ", want: "chatml"},
		{name: "zephyr", want: "zephyr"},
		{name: "plain", want: "plain"},
		{name: "vicuna", wantErr: ErrUnknownName},
		{name: "", wantErr: ErrUnknownName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Named(tt.name)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Named(%q) error = %v, want %v", tt.name, err, tt.wantErr)
			}
			if tt.wantErr == nil && got.Name() != tt.want {
				t.Errorf("Named(%q) = %q, want %q", tt.name, got.Name(), tt.want)
			}
		})
	}
	for _, n := range Names() {
		if _, err := Named(n); err != nil {
			t.Errorf("Named(%q) from Names() failed: %v", n, err)
		}
	}
}

func FuzzDetect(f *testing.F) {
	for _, s := range []string{"", srcLlama2, srcLlama3, srcQwen, srcTinyLlama, srcPhi3, srcGemma, "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		tp, err := Detect(tmpl)
		if err != nil {
			if !errors.Is(err, ErrUnknownTemplate) {
				t.Fatalf("Detect() error = %v, want ErrUnknownTemplate", err)
			}
			return
		}
		if _, err := Named(tp.Name()); err != nil {
			t.Fatalf("Detect() returned %q, which Named rejects: %v", tp.Name(), err)
		}
	})
}
